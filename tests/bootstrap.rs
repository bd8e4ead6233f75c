//! The test command (`scripts/test`, README "Tests") on a fresh machine: it bootstraps what the
//! tests need, and CI runs exactly the README's command.

use crate::util::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn test_command_bootstraps_the_mcp_sdk_into_an_empty_prefix() {
    // A fresh machine: an empty prefix, no virtualenv. The bootstrap must make one whose python
    // imports the MCP SDK from that virtualenv (not from a system-wide install), and that
    // python must drive the real MCP client fixture against `gateway mcp`.
    let env = Env::new("bootstrap");
    let prefix = env.root.join("prefix");
    let run = || {
        Command::new(format!("{ROOT}/scripts/test"))
            .args(["--bootstrap-only", "venv"])
            .env("GATEWAY_TEST_PREFIX", &prefix)
            .env_remove("PYTHONPATH")
            .env_remove("PYTHONHOME")
            .env("PYTHONNOUSERSITE", "1")
            .stdin(Stdio::null())
            .output()
            .expect("scripts/test")
    };
    let o = run();
    assert!(o.status.success(), "bootstrap failed: {}", text(&o));
    let python = prefix.join("venv/bin/python3");
    let o = Command::new(&python)
        .args([
            "-c",
            "import mcp, sys; print(mcp.__file__); print(sys.prefix)",
        ])
        .env_remove("PYTHONPATH")
        .env("PYTHONNOUSERSITE", "1")
        .output()
        .expect("venv python");
    assert!(
        o.status.success(),
        "the venv cannot import mcp: {}",
        text(&o)
    );
    let out = stdout(&o);
    assert!(
        out.lines()
            .next()
            .is_some_and(|l| l.starts_with(&prefix.join("venv").display().to_string())),
        "mcp not imported from the bootstrapped venv: {out}"
    );

    // The bootstrapped python runs the MCP client fixture, as the MCP tests will.
    let o = env
        .raw(&python)
        .arg(format!("{ROOT}/tests/fixtures/mcp_client.py"))
        .arg(BIN)
        .arg(&env.ws)
        .env("GATEWAY_SOCKET", "")
        .env_remove("GATEWAY_SESSION")
        .output()
        .expect("mcp client");
    assert!(o.status.success(), "MCP client: {}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("client output");
    check_mcp_client_run(&env, &v, &|args| env.gw(args), "mcp");

    // Idempotent and fast: a second run installs nothing.
    let t = std::time::Instant::now();
    let o = run();
    assert!(o.status.success(), "second bootstrap failed: {}", text(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("installing"),
        "the second run installed again: {}",
        text(&o)
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn ci_runs_the_readme_test_command_verbatim() {
    // README's "Tests" section names one command; .ci/run runs exactly that line.
    let readme = std::fs::read_to_string(format!("{ROOT}/README.md")).expect("README");
    let section = readme
        .split("\n## Tests\n")
        .nth(1)
        .expect("README has a Tests section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block in Tests");
    let commands: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(commands.len(), 1, "one test command: {commands:?}");
    let command = commands[0].trim();
    assert!(command.starts_with("scripts/test"), "{command}");
    let ci = std::fs::read_to_string(format!("{ROOT}/.ci/run")).expect(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == command),
        ".ci/run does not run `{command}` verbatim"
    );
    assert!(
        !ci.lines()
            .any(|l| l.trim_start().starts_with("cargo nextest run")),
        ".ci/run runs nextest itself instead of the test command"
    );
}

/// Issue 16: `GATEWAY_NO_VECTORSCAN=1` builds without Vectorscan everywhere in CI, not only in
/// the test command: every cargo command of .ci/run that compiles the crate (clippy, the
/// benchmarks) passes the features the variable chose, so that on a machine without
/// libvectorscan-dev .ci/run does not stop in hyperscan-sys's build script after
/// `scripts/test --bootstrap-only vectorscan` let it through.
#[test]
fn ci_builds_without_vectorscan_when_told() {
    let ci = std::fs::read_to_string(format!("{ROOT}/.ci/run")).expect(".ci/run");
    assert!(
        ci.contains("[ \"${GATEWAY_NO_VECTORSCAN:-}\" = 1 ] && features=--no-default-features"),
        ".ci/run does not read GATEWAY_NO_VECTORSCAN"
    );
    let builds: Vec<&str> = ci
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            !l.starts_with('#')
                && ["clippy", "bench", "build", "test", "check", "run"]
                    .iter()
                    .any(|c| l.contains(&format!("cargo {c} ")))
        })
        .collect();
    assert!(builds.len() >= 6, "{builds:?}");
    let blind: Vec<&&str> = builds.iter().filter(|l| !l.contains("$features")).collect();
    assert!(
        blind.is_empty(),
        "these builds ignore GATEWAY_NO_VECTORSCAN: {blind:?}"
    );
}
