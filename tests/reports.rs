//! Typed reports (issue 23): every front end returns the same report for the same call.

use crate::util::*;

/// The fields whose values differ between two runs of the same call: how long it took,
/// where it was recorded, the snapshot's group id, and how many landlock rules the ruleset
/// got (one per tree walked around a denied path: it follows what exists there at the time,
/// and the state directory and /tmp change between two calls).
const VOLATILE: &[&str] = &[
    "duration_ms",
    "audit.seq",
    "audit_seq",
    "snapshot.group",
    "enforcement.landlock.rules",
];

/// `a` and `b` have the same fields at every depth and the same values, but for the
/// volatile ones (which must be present in both).
fn same_report(what: &str, a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let kx: Vec<&String> = x.keys().collect();
            let ky: Vec<&String> = y.keys().collect();
            assert_eq!(kx, ky, "{what}: the fields of {at:?} differ\n{a}\n{b}");
            for (k, v) in x {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                if VOLATILE.contains(&path.as_str()) {
                    assert_eq!(v.is_null(), y[k].is_null(), "{what}: {path}");
                    continue;
                }
                same_report(what, v, &y[k], &path);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{what}: {at} differs\n{a}\n{b}");
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                same_report(what, v, w, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(a, b, "{what}: {at} differs"),
    }
}

const RUN: &str = "printf 'out\\n'; printf 'err\\n' >&2; exit 3";
const DENIED: &str = "rm -rf /";

sandbox_test!(
    fn every_front_end_returns_the_same_report_for_the_same_call() {
        let env = Env::new("same-report");
        let file = env.ws.join("a.txt");
        std::fs::write(&file, "one\ntwo\n").expect("write");
        let file = file.to_str().expect("utf-8");
        let calls = serde_json::json!([
            ["exec", {"command": RUN}],
            ["exec", {"command": DENIED}],
            ["read_file", {"path": file}],
        ]);
        let Some(mcp) = mcp_client_of(
            &env,
            std::path::Path::new(BIN),
            "".as_ref(),
            "mcp_report.py",
            &[&calls.to_string()],
            Some("standard"),
        ) else {
            return;
        };
        let mcp = |i: usize| mcp[i]["structured"].clone();
        let cli = |c: &mut std::process::Command, args: &[&str]| {
            let o = c.args(args).output().expect("gateway");
            (o.status.code(), json_of(&o))
        };
        let exec = ["--json", "exec", "--policy", "standard", "--", "sh", "-c"];
        let read = ["--json", "fs", "read", "--policy", "standard", file];
        let one_shot = |a: &[&str]| cli(&mut env.cmd(), a);
        let d = Daemon::start(&env, "standard", &[]);
        let daemon = |a: &[&str]| cli(&mut d.cmd(&env), a);
        for (i, extra, code) in [(0, RUN, 3), (1, DENIED, 120)] {
            let args: Vec<&str> = exec.iter().copied().chain([extra]).collect();
            let (c1, a) = one_shot(&args);
            let (c2, b) = daemon(&args);
            assert_eq!((c1, c2), (Some(code), Some(code)), "{extra}");
            same_report("exec: cli and daemon", &a, &b, "");
            same_report("exec: cli and mcp", &a, &mcp(i), "");
        }
        let (c1, a) = one_shot(&read);
        let (c2, b) = daemon(&read);
        assert_eq!((c1, c2), (Some(0), Some(0)));
        same_report("fs read: cli and daemon", &a, &b, "");
        same_report("fs read: cli and mcp", &a, &mcp(2), "");
        // What they agree on is the call's real report.
        let (_, ran) = one_shot(&exec.iter().copied().chain([RUN]).collect::<Vec<_>>());
        assert_eq!(ran["exit_code"], 3);
        assert_eq!(ran["stdout"], "out\n");
        assert_eq!(ran["stderr"], "err\n");
        assert_eq!(ran["stdout_truncated"], false);
        assert!(ran["refusal"].is_null());
        assert!(ran["audit"]["seq"].as_u64().is_some());
        let denied = mcp(1);
        assert_eq!(denied["ran"], false);
        assert_eq!(denied["refusal"]["kind"], "policy_denied");
        assert!(
            denied["refusal"]["rule"]
                .as_str()
                .is_some_and(|r| r.starts_with("deny-")),
            "{denied}"
        );
        assert_eq!(a["output"]["lines"][1][1], "two");
    }
);

/// One refusal class (issue 23), through the CLI: its exit code, the `refusal` object of
/// `--json` (the report's, or the error object's), and the call's record in the audit log
/// — a `deny` naming the rule, found by `log query --decision deny`.
fn refused_as(env: &Env, args: &[&str], code: i32, kind: &str, rule: &str) -> serde_json::Value {
    let o = env
        .cmd()
        .arg("--json")
        .args(args)
        .output()
        .expect("gateway");
    assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
    let v = json_of(&o);
    assert_eq!(v["refusal"]["kind"], kind, "{args:?}: {v}");
    assert_eq!(v["refusal"]["rule"], rule, "{args:?}: {v}");
    assert!(
        v["refusal"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    let o = env
        .cmd()
        .args([
            "--json",
            "log",
            "query",
            "--decision",
            "deny",
            "--limit",
            "1",
        ])
        .output()
        .expect("gateway");
    let q = json_of(&o);
    let last = &q["records"][0];
    assert_eq!(last["decision"]["effect"], "deny", "{args:?}: {q}");
    assert!(
        last["decision"]["rules"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == rule)),
        "{args:?}: {q}"
    );
    last.clone()
}

sandbox_test!(
    fn each_refusal_class_has_its_exit_code_its_json_and_a_deny_record() {
        let env = Env::new("refusal-classes");
        // Denied by a rule: the report's refusal, exit 120.
        refused_as(
            &env,
            &["exec", "--policy", "standard", "--", "rm", "-rf", "/"],
            120,
            "policy_denied",
            "deny-rm-root-home",
        );
        // An `ask` nobody approved (no terminal here): exit 121, recorded as a deny naming
        // the rule that asked, with `approved: false`.
        let pf = env.policy_file(
            "extends = \"standard\"\n[[rule]]\nid = \"ask-touch\"\neffect = \"ask\"\ntools = [\"exec\"]\ncommand = [\"touch\", \"*\"]\nreason = \"the test asks\"\n",
        );
        let rec = refused_as(
            &env,
            &["exec", "--policy", &pf, "--", "touch", "x"],
            121,
            "not_approved",
            "ask-touch",
        );
        assert_eq!(rec["approved"], false, "{rec}");
        assert!(!env.ws.join("x").exists());
        // A secret on the command line: refused before the decision.
        let tok = gh_token(23);
        let rec = refused_as(
            &env,
            &["exec", "--policy", "standard", "--", "echo", &tok],
            120,
            "secret_in_input",
            "secrets.input",
        );
        assert!(!rec.to_string().contains(&tok), "{rec}");
        // A secret on stdin, found while the command runs: refused late, recorded as a deny
        // (it was an allow and an error before).
        let mut c = env.cmd();
        c.args(["--json", "exec", "--policy", "standard", "--", "cat"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().expect("gateway");
        {
            use std::io::Write;
            let mut i = child.stdin.take().expect("stdin");
            let _ = writeln!(i, "token {tok}");
        }
        let o = child.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["refusal"]["kind"], "secret_in_input", "{v}");
        assert_eq!(v["refusal"]["place"], "stdin", "{v}");
        let o = env.gw(&[
            "--json",
            "log",
            "query",
            "--decision",
            "deny",
            "--limit",
            "1",
        ]);
        let q = json_of(&o);
        assert_eq!(q["records"][0]["args"][0], "cat", "{q}");
        assert_eq!(
            q["records"][0]["decision"]["rules"][0], "secrets.input",
            "{q}"
        );
        // A variable that never reaches the sandbox, asked for by name: refused late (after
        // the decision, while the sandbox is planned), exit 120 (122 before).
        refused_as(
            &env,
            &[
                "exec",
                "--policy",
                "strict",
                "--env",
                "LD_PRELOAD=/x.so",
                "--",
                "true",
            ],
            120,
            "scrubbed_env",
            "env.scrubbed",
        );
        // A file tool's refusal on the path as resolved: exit 120, the error's refusal.
        let out = env.outside.join("made");
        refused_as(
            &env,
            &[
                "fs",
                "write",
                out.to_str().expect("utf-8"),
                "--content",
                "x",
            ],
            120,
            "outside_roots",
            "outside-roots",
        );
        assert!(!out.exists());
        // A denied path and a protected path, decided before the worker runs: the policy's
        // deny naming the rule.
        std::fs::create_dir_all(env.home.join(".ssh")).expect("mkdir");
        std::fs::write(env.home.join(".ssh/id_rsa"), "key\n").expect("write");
        let key = env.home.join(".ssh/id_rsa");
        refused_as(
            &env,
            &[
                "fs",
                "read",
                "--policy",
                "standard",
                key.to_str().expect("utf-8"),
            ],
            120,
            "policy_denied",
            "denied-path",
        );
        std::fs::create_dir_all(env.ws.join(".git")).expect("mkdir");
        refused_as(
            &env,
            &[
                "fs",
                "write",
                "--policy",
                "standard",
                ".git/config",
                "--content",
                "x",
            ],
            120,
            "policy_denied",
            "protected-path",
        );
        assert!(!env.ws.join(".git/config").exists());
    }
);

sandbox_test!(
    fn cd_outside_the_roots_is_a_recorded_deny_and_a_missing_directory_an_error() {
        // `fs cd` on the one skeleton: a directory the policy does not let tools read is its
        // refusal (deny, with the rule); one that does not exist is an error, recorded as an
        // allowed call that failed — not as a deny by a made-up rule ("builtin" before).
        let env = Env::new("cd-classes");
        let session = |c: &mut std::process::Command| {
            c.env("GATEWAY_SESSION", "cd-classes");
        };
        let mut c = env.cmd();
        session(&mut c);
        let o = c
            .args(["--json", "fs", "cd", "--policy", "strict", "/root"])
            .output()
            .expect("gateway");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["refusal"]["rule"], "outside-roots", "{v}");
        let mut c = env.cmd();
        session(&mut c);
        let o = c
            .args(["fs", "cd", "--policy", "strict", "no-such-dir"])
            .output()
            .expect("gateway");
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        let o = env.gw(&["--json", "log", "query", "--tool", "fs.cd", "--limit", "0"]);
        let q = json_of(&o);
        let recs = q["records"].as_array().expect("records");
        assert_eq!(recs.len(), 2, "{q}");
        assert_eq!(recs[0]["decision"]["effect"], "deny", "{q}");
        assert_eq!(recs[0]["decision"]["rules"][0], "outside-roots", "{q}");
        assert_eq!(recs[1]["decision"]["effect"], "allow", "{q}");
        assert!(
            recs[1]["error"]
                .as_str()
                .is_some_and(|e| e.contains("no such directory")),
            "{q}"
        );
    }
);

sandbox_test!(
    fn a_secret_in_any_field_of_a_refusal_is_redacted_in_every_front_end() {
        // Issue 23 attack: `refusal.shown()` redacted `path` and `inner` only; an `--env`
        // name with a token in it came back verbatim in `refusal.name` through the CLI's
        // --json, the daemon and MCP (the record and `error` were redacted).
        let env = Env::new("refusal-redacted");
        let tok = gh_token(23);
        let name = format!("GITHUB_TOKEN_{tok}");
        let kv = format!("{name}=1");
        let args = [
            "--json", "exec", "--policy", "strict", "--env", &kv, "--", "true",
        ];
        let check = |what: &str, o: &Output, code: i32| {
            assert_eq!(o.status.code(), Some(code), "{what}: {}", text(o));
            assert_stdout_lacks(o, &tok, what);
            let v = json_of(o);
            let v = v.get("structuredContent").unwrap_or(&v);
            assert_eq!(v["refusal"]["kind"], "scrubbed_env", "{what}: {v}");
            assert_eq!(v["refusal"]["rule"], "env.scrubbed", "{what}: {v}");
        };
        check(
            "cli --json",
            &env.cmd().args(args).output().expect("gateway"),
            120,
        );
        let call = serde_json::json!({"command": "true", "env": {&name: "1"}});
        let o = env
            .cmd()
            .args(["tool", "--policy", "strict", "exec", &call.to_string()])
            .output()
            .expect("gateway tool");
        check("mcp (gateway tool)", &o, 1);
        let d = Daemon::start(&env, "strict", &[]);
        check(
            "daemon --json",
            &d.cmd(&env).args(args).output().expect("gateway"),
            120,
        );
        // Human output says the same redacted message on stderr: an `--env` name, a file
        // name in a refusal and in a plain error.
        let outside = env.outside.join(&tok).display().to_string();
        let in_ws = format!("x{tok}");
        for (what, a) in [
            ("--env", &args[1..]),
            (
                "fs rm -r outside",
                &["fs", "rm", "-r", "--policy", "strict", &outside][..],
            ),
            (
                "fs rm missing",
                &["fs", "rm", "--policy", "strict", &in_ws][..],
            ),
        ] {
            for (front, o) in [
                ("one-shot", env.cmd().args(a).output().expect("gateway")),
                ("daemon", d.cmd(&env).args(a).output().expect("gateway")),
            ] {
                assert!(!o.status.success(), "{what} ({front}): {}", text(&o));
                assert!(
                    !stderr(&o).contains(&tok) && !stdout(&o).contains(&tok),
                    "{what} ({front}): {}",
                    text(&o)
                );
                assert!(
                    stderr(&o).contains("[REDACTED:"),
                    "{what} ({front}): {}",
                    text(&o)
                );
            }
        }
        drop(d);
    }
);

#[test]
fn a_call_that_fails_before_its_decision_is_recorded_once_and_not_as_a_deny() {
    // Issue 23 attack (refusals are denies, errors are not). The skeleton now records undo's
    // and trash restore's early errors (the old code recorded nothing), but as a `deny` by
    // `broker`, as exec's missing --cwd always was.
    let env = Env::new("undecided");
    let calls: [&[&str]; 3] = [
        &["undo"],
        &["trash", "restore", "nosuch"],
        &[
            "--cwd",
            "/nonexistent-dir",
            "exec",
            "--policy",
            "strict",
            "--",
            "true",
        ],
    ];
    for args in calls {
        let o = env.gw(args);
        assert_eq!(o.status.code(), Some(122), "{args:?}: {}", text(&o));
    }
    let all = json_of(&env.gw(&["--json", "log", "query", "--limit", "0"]));
    let n = all["records"].as_array().map_or(0, Vec::len);
    assert_eq!(n, calls.len(), "each call recorded once: {all}");
    let denies = json_of(&env.gw(&[
        "--json",
        "log",
        "query",
        "--decision",
        "deny",
        "--limit",
        "0",
    ]));
    let d = denies["records"].as_array().map_or(0, Vec::len);
    assert_eq!(d, 0, "plain errors found as denies: {denies}");
    // Each is recorded as what it is: undecided, with the error.
    let errors = json_of(&env.gw(&[
        "--json",
        "log",
        "query",
        "--decision",
        "error",
        "--limit",
        "0",
    ]));
    let recs = errors["records"].as_array().expect("records");
    assert_eq!(recs.len(), calls.len(), "{errors}");
    for r in recs {
        assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
        assert_eq!(r["decision"]["rules"], serde_json::json!([]), "{r}");
    }
}

#[test]
fn a_failed_command_under_json_prints_its_error_object() {
    // Every command's failure under `--json` is one JSON object on stdout (`error`, and
    // `refusal` for a refusal), as exec's and the file tools' always were — not text on
    // stderr only.
    let env = Env::new("json-errors");
    for args in [
        &["--json", "log", "verify", "--anchor", "/nonexistent-anchor"][..],
        &["--json", "trash", "restore", "nosuch"][..],
        &["--json", "undo"][..],
        &["--json", "scan", "/nonexistent-path-for-the-test"][..],
    ] {
        let o = env.gw(args);
        assert_ne!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: stdout is not one JSON object ({e}): {}",
                text(&o)
            )
        });
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|e| !e.is_empty()),
            "{args:?}: {v}"
        );
    }
}
