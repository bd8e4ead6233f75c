//! Shared helpers: a fresh directory tree per test (`Env`), command builders for the real
//! binary, attack fixtures, and readers of records and output.
//!
//! Over 1,000 lines: every module's fixtures in one place (the `escape_test!` macro and its
//! uid 65534 mode, the daemon and MCP client drivers, the REPL's tmux driver); splitting it
//! into `util/` by fixture is the layout DESIGN.md names for a later pass.

pub(crate) use crate::corpus;
pub use std::io::Write;
pub use std::os::unix::fs::PermissionsExt;
pub use std::path::{Path, PathBuf};
pub use std::process::{Command, Output, Stdio};
pub use std::sync::OnceLock;
pub use std::sync::atomic::{AtomicUsize, Ordering};

/// A test that needs the sandbox: skipped only when GATEWAY_TEST_NO_SANDBOX is set.
macro_rules! sandbox_test {
    (fn $name:ident() $body:block) => {
        #[test]
        fn $name() {
            if $crate::util::skip() {
                return;
            }
            $body
        }
    };
}

/// A test of the escape suite, run twice with one body (issue 34: every attack held under both
/// users, with the same assertions): `NAME::root` as this test's user (root), and
/// `NAME::nobody`, where every `Env` made on the test's thread runs gateway as uid 65534
/// (`Env::cmd` chowns the test's tree to 65534 before each command and runs gateway through
/// `setpriv`). Skipped only when GATEWAY_TEST_NO_SANDBOX is set.
macro_rules! escape_test {
    ($(#[doc = $doc:expr])* $(#[ignore = $why:literal])? fn $name:ident() $body:block) => {
        escape_test!(@ [$(#[doc = $doc])*] [$(#[ignore = $why])?] $name $body);
    };
    (@ [$(#[$attr:meta])*] [$(#[$ignore:meta])?] $name:ident $body:block) => {
        $(#[$attr])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn body() $body

            #[test]
            $(#[$ignore])?
            fn root() {
                if $crate::util::skip() {
                    return;
                }
                body();
            }

            #[test]
            $(#[$ignore])?
            fn nobody() {
                if $crate::util::skip() {
                    return;
                }
                $crate::util::run_as_nobody();
                body();
            }
        }
    };
}

pub const BIN: &str = env!("CARGO_BIN_EXE_gateway");

thread_local! {
    /// Set by `escape_test!`'s `nobody` variant; read by `Env::new`. A thread-local, not a
    /// process-global: `cargo test` runs tests as threads of one process, nextest as processes.
    static AS_NOBODY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Every `Env` made on this thread from now on runs gateway as uid 65534.
pub fn run_as_nobody() {
    AS_NOBODY.with(|c| c.set(true));
}

pub fn skip() -> bool {
    if std::env::var_os("GATEWAY_TEST_NO_SANDBOX").is_some() {
        eprintln!("skipped: GATEWAY_TEST_NO_SANDBOX is set");
        return true;
    }
    false
}

/// Asserts that a run's stdout does not contain `needle` (a leaked secret, a success marker).
pub fn assert_stdout_lacks(o: &Output, needle: &str, what: &str) {
    assert!(!stdout(o).contains(needle), "{what}: {}", text(o));
}

/// A fresh directory tree per test: a workspace, a fake home, an outside dir, a state dir.
pub struct Env {
    pub root: PathBuf,
    pub ws: PathBuf,
    pub home: PathBuf,
    pub outside: PathBuf,
    pub state: PathBuf,
    /// `Env::cmd` runs gateway as uid 65534 (made in an `escape_test!`'s `nobody` variant).
    pub as_nobody: bool,
}

pub static COUNTER: AtomicUsize = AtomicUsize::new(0);

impl Env {
    pub fn new(name: &str) -> Env {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let root = PathBuf::from(format!("/tmp/gwt-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let ws = root.join("ws");
        let home = root.join("home");
        let outside = root.join("outside");
        let state = root.join("state");
        for d in [&ws, &home, &outside, &state] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        Env {
            root,
            ws,
            home,
            outside,
            state,
            as_nobody: AS_NOBODY.with(std::cell::Cell::get),
        }
    }

    /// `gateway` with this test's environment: as root, or, in an `escape_test!`'s `nobody`
    /// variant, as uid 65534 with the test's tree given to it first.
    pub fn cmd(&self) -> Command {
        if self.as_nobody {
            self.give_to_nobody();
            return self.nobody();
        }
        self.root_cmd()
    }

    /// `gateway` as this test's user (root), whatever the variant.
    pub fn root_cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.current_dir(&self.ws)
            .env("HOME", &self.home)
            .env("GATEWAY_STATE_DIR", &self.state)
            .env("GATEWAY_SOCKET", "")
            .env_remove("GATEWAY_POLICY")
            .env_remove("XDG_STATE_HOME")
            .stdin(Stdio::null());
        c
    }

    /// Another program (a wrapper, a pty driver) run with this test's environment.
    pub fn raw(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.current_dir(&self.ws)
            .env("HOME", &self.home)
            .env("GATEWAY_STATE_DIR", &self.state)
            .env("GATEWAY_SOCKET", "")
            .env_remove("GATEWAY_POLICY")
            .env_remove("XDG_STATE_HOME");
        c
    }

    pub fn exec(&self, policy: &str, args: &[&str]) -> Output {
        self.cmd()
            .args(["exec", "--policy", policy, "--"])
            .args(args)
            .output()
            .expect("run gateway")
    }

    pub fn sh(&self, policy: &str, script: &str) -> Output {
        self.exec(policy, &["sh", "-c", script])
    }

    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.ws.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(&p, content).expect("write");
        p
    }

    /// Copies the attack fixture into the workspace.
    pub fn attack(&self) -> String {
        let dst = self.ws.join("attack");
        std::fs::copy(attack_bin(), &dst).expect("copy attack");
        "./attack".into()
    }

    pub fn policy_file(&self, text: &str) -> String {
        let p = self.root.join("policy.toml");
        std::fs::write(&p, text).expect("write policy");
        p.display().to_string()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A daemon call as the wire carries it (`serve::proto`, this protocol version): `request`
/// typed, from `cwd` with `env` (`[[name, value], ...]`), in `session`, its output in frames.
pub fn call_message(
    cwd: &Path,
    env: serde_json::Value,
    session: Option<&str>,
    json: bool,
    request: &serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({"type": "request", "version": 7, "context": {
        "cwd": cwd.display().to_string(), "env": env, "session": session,
        "stdio": "frames", "prompts": false}, "body": {"call": {"options": {
        "state_dir": null, "policy": null, "cwd": null, "json": json},
        "request": request}}})
}

pub fn text(o: &Output) -> String {
    format!(
        "status={:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn gcc(src: &Path, out: &Path, extra: &[&str]) {
    let st = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(out)
        .arg(src)
        .args(extra)
        .status()
        .expect("gcc is required for the escape suite");
    assert!(st.success(), "gcc failed for {}", src.display());
}

/// Builds tests/fixtures/NAME.c into the target's temporary directory when it is missing or
/// older than its source.
pub fn fixture_bin(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.c"));
    let out = dir.join(name);
    let stale = match (std::fs::metadata(&out), std::fs::metadata(&src)) {
        (Ok(o), Ok(s)) => o.modified().ok() < s.modified().ok(),
        _ => true,
    };
    if stale {
        let tmp = dir.join(format!("{name}-{}", std::process::id()));
        gcc(&src, &tmp, &[]);
        std::fs::rename(&tmp, &out).unwrap_or_else(|e| panic!("rename {name}: {e}"));
    }
    out
}

/// Builds tests/fixtures/attack.c once per test binary version.
pub fn attack_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| fixture_bin("attack"))
}

/// Runs an attack mode under `policy` and asserts that it was blocked.
pub fn assert_attack_blocked(policy: &str, mode: &str, arg: Option<&str>) {
    let env = Env::new(&format!("atk-{mode}"));
    let a = env.attack();
    let mut args = vec![a.as_str(), mode];
    if let Some(x) = arg {
        args.push(x);
    }
    let o = env.exec(policy, &args);
    assert_eq!(o.status.code(), Some(0), "{policy} {mode}: {}", text(&o));
    assert!(
        stdout(&o).contains("BLOCKED"),
        "{policy} {mode}: {}",
        text(&o)
    );
}

/// A process outside the sandbox, killed on drop.
pub struct Outside(std::process::Child);

impl Outside {
    /// Any program, started now.
    pub fn spawn(mut c: Command) -> Outside {
        Outside(
            c.stdin(Stdio::null())
                .spawn()
                .expect("spawn an outside process"),
        )
    }
    pub fn sleep(marker_env: &str) -> Outside {
        Outside(
            Command::new("sleep")
                .arg("300")
                .env("GW_OUTSIDE_SECRET", marker_env)
                .spawn()
                .expect("spawn sleep"),
        )
    }
    pub fn pid(&self) -> String {
        self.0.id().to_string()
    }
    pub fn alive(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Asserts that no process whose command line contains `marker` is alive, allowing the kernel
/// a moment to finish killing a namespace.
pub fn assert_no_survivors(marker: &str, what: &str) {
    // Until two reads 50 ms apart find none (a process still being torn down can show in one
    // read and not the next), or 3 s; the assertion is on the last read.
    let t = std::time::Instant::now();
    let mut seen = processes_with(marker);
    while t.elapsed() < std::time::Duration::from_secs(3) {
        if seen.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(50));
            seen = processes_with(marker);
            if seen.is_empty() {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        seen = processes_with(marker);
    }
    assert!(seen.is_empty(), "{what} survivors: {seen:?}");
}

/// Processes whose command line contains `marker` (outside any pid namespace: the host view).
pub fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
                let c = String::from_utf8_lossy(&c).replace('\0', " ");
                if c.contains(marker) {
                    found.push(format!("{name}: {c}"));
                }
            }
        }
    }
    found
}

pub fn python(env: &Env, policy: &str, code: &str) -> Output {
    env.exec(policy, &["python3", "-c", code])
}

/// The `sleep MARKER` processes (not the gateway or shells whose argv mention the marker).
pub fn sleeps(marker: &str) -> Vec<String> {
    processes_with(marker)
        .into_iter()
        .filter(|p| {
            p.split_once(": ")
                .is_some_and(|(_, c)| c.starts_with(&format!("sleep {marker}")))
        })
        .collect()
}

/// Generated secrets for tests (no literal secrets in the repository).
/// A classic GitHub token whose CRC32 tail verifies (what GitHub issues: `high` confidence).
pub fn gh_token(seed: u64) -> String {
    corpus::checksummed("ghp_", &corpus::expand("{a:30}", seed))
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("json: {e}: {}", text(o)))
}

pub fn log_records(env: &Env) -> Vec<serde_json::Value> {
    let o = env
        .cmd()
        .args(["log", "query", "--json", "--limit", "0"])
        .output()
        .expect("query");
    assert!(o.status.success(), "{}", text(&o));
    json_of(&o)["records"].as_array().expect("records").clone()
}

/// `SHA-256(0x00 || line)` computed by `sha256sum` (no hashing crate in the tests).
pub fn sha256_leaf(line: &[u8]) -> Vec<u8> {
    let mut c = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    let mut i = c.stdin.take().expect("stdin");
    i.write_all(&[0]).expect("w");
    i.write_all(line).expect("w");
    drop(i);
    let o = c.wait_with_output().expect("wait");
    let hex = String::from_utf8_lossy(&o.stdout);
    (0..32)
        .map(|k| u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).expect("hex"))
        .collect()
}

pub fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

impl Env {
    pub fn gw(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run gateway")
    }

    /// Gives this test's whole tree to uid 65534 (for `nobody`): every entry not yet its, links
    /// themselves (never their targets). What is already its is left alone, so its times stay.
    pub fn give_to_nobody(&self) {
        fn give(p: &Path) {
            use std::os::unix::fs::MetadataExt;
            // An entry gone meanwhile (a run in progress) is skipped.
            let Ok(m) = std::fs::symlink_metadata(p) else {
                return;
            };
            if m.uid() != 65534 || m.gid() != 65534 {
                match std::os::unix::fs::lchown(p, Some(65534), Some(65534)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        panic!("chown {}: {e}", p.display())
                    }
                    _ => {}
                }
            }
            if m.is_dir() {
                for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
                    give(&e.path());
                }
            }
        }
        give(&self.root);
    }

    /// `gateway` run as uid 65534 (no capabilities, no namespaces) with this test's
    /// environment; add the arguments.
    pub fn nobody(&self) -> Command {
        let mut c = self.raw(NOBODY[0]);
        c.args(&NOBODY[1..]).args(["--", BIN]).stdin(Stdio::null());
        c
    }

    /// `gateway` as uid 65534 when `nobody`, else as this test's user (root).
    pub fn as_user(&self, nobody: bool) -> Command {
        if nobody {
            self.nobody()
        } else {
            self.root_cmd()
        }
    }

    /// The argv that starts gateway as `Env::cmd` would (`setpriv ... -- gateway` in a
    /// `nobody` variant, after giving it the tree), for tests that start it through another
    /// program (a shell, a pty driver, a wrapper).
    pub fn gateway_argv(&self) -> Vec<String> {
        if self.as_nobody {
            self.give_to_nobody();
            return [NOBODY.as_slice(), &["--", BIN]]
                .concat()
                .iter()
                .map(|s| (*s).to_string())
                .collect();
        }
        vec![BIN.to_string()]
    }
}

/// `setpriv` to uid 65534 (no capabilities, no supplementary groups); add `--` and a program.
pub const NOBODY: [&str; 4] = [
    "setpriv",
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
];

/// `gateway --json --policy P fs probe PATH`: (read, append) results and the worker's status.
pub fn probe(env: &Env, policy: &str, path: &Path) -> (String, String, String) {
    let o = env.gw(&[
        "--json",
        "--policy",
        policy,
        "fs",
        "probe",
        path.to_str().expect("utf-8"),
    ]);
    assert!(o.status.success(), "probe {}: {}", path.display(), text(&o));
    let v = json_of(&o);
    let out = &v["output"];
    (
        out["open"].as_str().expect("open").to_string(),
        out["write"].as_str().expect("write").to_string(),
        out["status"].to_string(),
    )
}

/// Runs gateway on a pseudo-terminal (python3's pty), answering `answer` to its `[y/N]`
/// prompt; returns (exit code, what the terminal showed).
pub fn gw_on_tty(env: &Env, args: &[&str], answer: &str) -> (i32, String) {
    const DRIVER: &str = r#"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
out, answered = b"", False
while True:
    try:
        d = os.read(fd, 4096)
    except OSError:
        break
    if not d:
        break
    out += d
    if not answered and b"[y/N]" in out:
        os.write(fd, os.environ["ANSWER"].encode() + b"\n")
        answered = True
_, st = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.exit(os.waitstatus_to_exitcode(st))
"#;
    let o = Command::new("python3")
        .args(["-c", DRIVER, BIN])
        .args(args)
        .current_dir(&env.ws)
        .env("HOME", &env.home)
        .env("GATEWAY_STATE_DIR", &env.state)
        .env("GATEWAY_SOCKET", "")
        .env("ANSWER", answer)
        .env_remove("GATEWAY_POLICY")
        .output()
        .expect("python3 pty driver");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// Runs a Python MCP SDK client fixture (PyPI `mcp`, bootstrapped by scripts/test) against
/// `gateway mcp` in `env`'s workspace, with `socket` as GATEWAY_SOCKET ("" = the embedded
/// broker); returns what it printed. GATEWAY_TEST_NO_MCP_CLIENT=1 skips the MCP tests
/// explicitly (CI never sets it): `None`. Without the SDK the test fails.
pub fn mcp_client(
    env: &Env,
    socket: &std::ffi::OsStr,
    fixture: &str,
    args: &[&str],
    policy: Option<&str>,
) -> Option<serde_json::Value> {
    mcp_client_of(env, Path::new(BIN), socket, fixture, args, policy)
}

/// A program that runs `gateway` as uid 65534 with its arguments (for clients that start the
/// server themselves, as the MCP SDK does).
pub fn nobody_wrapper(env: &Env) -> PathBuf {
    let w = env.root.join("gateway-as-nobody");
    std::fs::write(
        &w,
        format!(
            "#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups -- '{BIN}' \"$@\"\n"
        ),
    )
    .expect("wrapper");
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    w
}

/// The Python that has the MCP SDK: `GATEWAY_TEST_PYTHON` (scripts/test exports its
/// virtualenv's), else that virtualenv if a bootstrap made it, else `python3`.
pub fn mcp_python() -> PathBuf {
    if let Some(p) = std::env::var_os("GATEWAY_TEST_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/venv/bin/python3");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

/// [`mcp_client`] with the server started as `gateway` (the binary, or [`nobody_wrapper`]).
pub fn mcp_client_of(
    env: &Env,
    gateway: &Path,
    socket: &std::ffi::OsStr,
    fixture: &str,
    args: &[&str],
    policy: Option<&str>,
) -> Option<serde_json::Value> {
    if std::env::var_os("GATEWAY_TEST_NO_MCP_CLIENT").is_some() {
        eprintln!("skipped: GATEWAY_TEST_NO_MCP_CLIENT is set");
        return None;
    }
    let script = format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    let mut c = env.raw(mcp_python());
    c.arg(script.as_str())
        .arg(gateway)
        .arg(&env.ws)
        .args(args)
        .env("GATEWAY_SOCKET", socket)
        .env_remove("GATEWAY_SESSION");
    if let Some(p) = policy {
        c.env("GATEWAY_POLICY", p);
    }
    let o = c.output().expect("python3");
    assert!(
        o.status.success(),
        "the MCP client failed (is the Python `mcp` package installed? scripts/test bootstraps it into target/venv): {} {}",
        mcp_python().display(),
        text(&o)
    );
    Some(serde_json::from_slice(&o.stdout).expect("client output"))
}

/// What `tests/fixtures/mcp_client.py` saw, checked: the same whether the server is its own
/// broker or the daemon's front end. `audit` runs `gateway log ...` where the records are;
/// `client` is the caller the records name.
pub fn check_mcp_client_run(
    env: &Env,
    v: &serde_json::Value,
    audit: &dyn Fn(&[&str]) -> Output,
    client: &str,
) {
    assert_eq!(v["server"], "gateway");
    let tools = v["tools"].as_object().expect("tools");
    for name in [
        "exec",
        "read_file",
        "write_file",
        "edit_file",
        "glob",
        "grep",
        "list_directory",
        "move",
        "delete",
        "mkdir",
        "cd",
        "undo",
        "history",
        "http_request",
    ] {
        let t = &tools[name];
        assert_eq!(t["schema"]["type"], "object", "{name}: {t}");
    }
    assert_eq!(tools["read_file"]["read_only"], true);
    assert_eq!(tools["delete"]["destructive"], true);
    assert_eq!(tools["read_file"]["schema"]["required"][0], "path");
    let result = |k: &str| -> serde_json::Value {
        let r = &v[k];
        assert_eq!(r["is_error"], false, "{k}: {r}");
        serde_json::from_str(r["text"].as_str().expect("text")).expect("json result")
    };
    let failed = |k: &str| -> String {
        let r = &v[k];
        assert_eq!(r["is_error"], true, "{k} should be an error result: {r}");
        r["text"].as_str().expect("text").to_string()
    };
    let e = result("exec");
    assert_eq!(e["exit_code"], 3);
    assert_eq!(e["stdout"], "hello from mcp\n");
    assert_eq!(e["stderr"], "oops\n");
    assert!(result("read")["output"]["lines"][1][1] == "beta");
    assert!(
        result("dry")["output"]["diff"]
            .as_str()
            .expect("diff")
            .contains("+gamma")
    );
    assert_eq!(result("grep")["output"]["files"][0][0], "notes.txt");
    assert!(failed("ambiguous").contains("occurs"));
    assert_eq!(
        result("cd")["cwd"],
        env.ws.join("sub").display().to_string()
    );
    assert!(
        result("ls")["output"]["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .any(|e| e[0] == "notes.txt")
    );
    assert_eq!(result("delete")["output"]["undoable"], true);
    assert!(
        result("undo")["output"]["what"]
            .as_str()
            .expect("what")
            .contains("restored")
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("sub/notes.txt")).expect("restored"),
        "alpha\ngamma\n"
    );
    assert_eq!(
        result("history")["changes"].as_array().map(Vec::len),
        Some(3)
    );
    // Refusals are tool results with isError, naming the rule and its reason.
    let d: serde_json::Value = serde_json::from_str(&failed("denied")).expect("json");
    assert_eq!(d["decision"]["effect"], "deny");
    assert_eq!(d["refusal"]["kind"], "policy_denied");
    assert_eq!(d["refusal"]["rule"], "deny-rm-root-home");
    assert_eq!(d["refusal"]["rules"][0], "deny-rm-root-home");
    assert!(
        d["refusal"]["reasons"][0]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{d}"
    );
    // A denied path is decided before the worker runs (issue 14 item 5), by name.
    assert!(
        failed("escape").contains("denied-path"),
        "{}",
        failed("escape")
    );
    assert!(failed("missing_arg").contains("path"));
    // Every call is in the audit log, recorded as the MCP client's.
    let o = audit(&["log", "query", "--json", "--limit", "0"]);
    let recs: Vec<serde_json::Value> = json_of(&o)["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["session"].as_str().is_some_and(|s| s.starts_with("mcp-")))
        .cloned()
        .collect();
    // 15 calls reached the broker (history reads the journal; the malformed call never ran).
    assert_eq!(recs.len(), 15, "{}", recs.len());
    assert!(
        recs.iter().all(|r| r["caller"]["client"] == client),
        "{recs:?}"
    );
    let o = audit(&["log", "verify"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// What `tests/fixtures/mcp_roots.py roots` saw, checked.
pub fn check_mcp_roots_run(env: &Env, root: &Path, v: &serde_json::Value) {
    let field = |k: &str| -> (bool, serde_json::Value) {
        let r = &v[k];
        let t = r["text"].as_str().unwrap_or_else(|| panic!("{k}: {r}"));
        (
            r["is_error"] == true,
            serde_json::from_str(t).unwrap_or_else(|_| serde_json::Value::String(t.into())),
        )
    };
    let ok = |k: &str| {
        let (err, v) = field(k);
        assert!(!err, "{k} should succeed: {v}");
        v
    };
    let refused = |k: &str, needle: &str| {
        let (err, v) = field(k);
        assert!(err, "{k} should be refused: {v}");
        assert_eq!(v["refusal"]["rules"][0], "client-roots", "{k}: {v}");
        let reason = v["refusal"]["reasons"][0].as_str().expect("reason");
        assert!(reason.contains(needle), "{k}: {reason}");
    };
    let root_s = root.display().to_string();
    assert_eq!(ok("inside")["output"]["lines"][0][1], "in");
    refused("outside", &root_s);
    // The session starts in the first root when its directory lies outside them.
    assert_eq!(
        ok("relative")["output"]["path"],
        root.join("in.txt").display().to_string()
    );
    assert_eq!(ok("pwd")["stdout"], format!("{root_s}\n"));
    // A command writes inside the roots only (the read-only host, and landlock), and runs
    // only inside them.
    let e = ok("escape");
    let err = e["stderr"].as_str().expect("stderr");
    assert!(
        err.contains("Read-only file system") || err.contains("Permission denied"),
        "{e}"
    );
    assert!(!env.ws.join("escape.txt").exists());
    assert!(root.join("inside.txt").exists());
    refused("exec_outside", &root_s);
    // `cd` out of the roots is refused and the session stays where it was.
    let (err, v) = field("cd_outside");
    assert!(err, "cd outside the roots should be refused: {v}");
    assert_eq!(ok("pwd_after_cd")["stdout"], format!("{root_s}\n"));
    refused("write_outside", &root_s);
    assert!(!env.ws.join("new.txt").exists());
    // The client changed its roots: asked again; a non-local root narrows to nothing.
    assert_eq!(ok("widened_by_client")["output"]["lines"][0][1], "out");
    refused("no_local_root", "(none)");
}

/// Drives `gateway repl` on a real terminal with tmux (.ci/run installs it), as its own
/// broker (`socket` "") or as the daemon's front end; `audit` runs `gateway log ...` where
/// the records are. GATEWAY_TEST_NO_TMUX=1 skips the REPL tests explicitly (CI never sets
/// it): false.
pub fn repl_in_tmux(env: &Env, socket: &Path, audit: &dyn Fn(&[&str]) -> Output) -> bool {
    if std::env::var_os("GATEWAY_TEST_NO_TMUX").is_some() {
        eprintln!("skipped: GATEWAY_TEST_NO_TMUX is set");
        return false;
    }
    std::fs::write(env.ws.join("f.txt"), "orig\n").expect("w");
    std::fs::create_dir(env.ws.join("sub")).expect("sub");
    let policy = env.policy_file(
        "extends = \"standard\"\n\n[[rule]]\nid = \"ask-touch\"\neffect = \"ask\"\ntools = [\"exec\"]\ncommand = [\"touch\", \"asked*\"]\nreason = \"the test asks before this\"\n",
    );
    let name = format!(
        "gwt-repl-{}-{}",
        std::process::id(),
        env.root.file_name().expect("name").to_string_lossy()
    );
    let tmux = |args: &[&str]| -> Output {
        Command::new("tmux")
            .args(args)
            .output()
            .expect("tmux (apt-get install tmux)")
    };
    let script = format!(
        "cd '{}' && HOME='{}' GATEWAY_STATE_DIR='{}' GATEWAY_SOCKET='{}' GATEWAY_POLICY='{}' '{}' repl",
        env.ws.display(),
        env.home.display(),
        env.state.display(),
        socket.display(),
        policy,
        BIN
    );
    let o = tmux(&[
        "new-session",
        "-d",
        "-s",
        &name,
        "-x",
        "160",
        "-y",
        "50",
        &script,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let screen =
        || String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", &name]).stdout).into_owned();
    let wait_for = |want: &dyn Fn(&str) -> bool, what: &str| {
        for _ in 0..100 {
            if want(&screen()) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let s = screen();
        let _ = tmux(&["kill-session", "-t", &name]);
        panic!("{what} did not appear:\n{s}");
    };
    let send = |keys: &str| {
        assert!(
            tmux(&["send-keys", "-t", &name, "-l", keys])
                .status
                .success()
        );
        assert!(tmux(&["send-keys", "-t", &name, "Enter"]).status.success());
    };
    wait_for(&|s| s.contains("gateway:ws$"), "the prompt");
    if !socket.as_os_str().is_empty() {
        assert!(screen().contains("through the daemon at"), "{}", screen());
    }
    send("!echo hi from the repl");
    wait_for(
        &|s| s.lines().any(|l| l == "hi from the repl"),
        "the command's output",
    );
    send("echo changed > f.txt");
    wait_for(&|s| s.contains("changed 1 file(s)"), "the snapshot report");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("f.txt")).expect("r"),
        "changed\n"
    );
    send("/undo");
    wait_for(&|s| s.contains("reverted 1 file(s)"), "/undo");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("f.txt")).expect("r"),
        "orig\n"
    );
    send("/log --tool exec");
    wait_for(&|s| s.contains("sh -c 'echo changed > f.txt'"), "/log");
    // /cd moves the session: the next line runs there.
    send("/cd sub");
    wait_for(&|s| s.contains("gateway:sub$"), "the prompt in sub");
    send("pwd");
    let sub = env.ws.join("sub").display().to_string();
    wait_for(&|s| s.lines().any(|l| l == sub), "pwd in sub");
    // An `ask` rule: the question comes to this terminal, and `y` approves it.
    send("touch asked.txt");
    wait_for(
        &|s| s.contains("rule ask-touch") && s.contains("[y/N]"),
        "the approval question",
    );
    send("y");
    for _ in 0..100 {
        if env.ws.join("sub/asked.txt").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(env.ws.join("sub/asked.txt").exists(), "{}", screen());
    // A token on a command line: refused, and redacted in the history file.
    let token = format!("ghp_{}", "Zq8xK2mP4vR7".repeat(3));
    send(&format!("echo {token}"));
    wait_for(&|s| s.contains("contains a secret"), "the refusal");
    send("/exit");
    for _ in 0..50 {
        if !tmux(&["has-session", "-t", &name]).status.success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = tmux(&["kill-session", "-t", &name]);
    let history = std::fs::read_to_string(env.state.join("repl_history")).expect("history");
    assert!(history.contains("/undo"), "{history}");
    assert!(history.contains("REDACTED"), "{history}");
    assert!(
        !history.contains(&token),
        "a secret reached the history file"
    );
    // The REPL's calls share one session id.
    let o = audit(&["log", "query", "--json", "--limit", "0"]);
    let recs = json_of(&o)["records"].as_array().expect("records").clone();
    let sessions: std::collections::BTreeSet<String> = recs
        .iter()
        .map(|r| r["session"].as_str().expect("session").to_string())
        .filter(|s| s != "daemon")
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert!(
        sessions.iter().all(|s| s.starts_with("repl-")),
        "{sessions:?}"
    );
    let o = audit(&["log", "verify"]);
    assert!(o.status.success(), "{}", text(&o));
    true
}

/// A `gateway serve` for one test: its socket in the test's root, its state the test's.
pub struct Daemon {
    pub child: std::process::Child,
    pub socket: PathBuf,
}

impl Daemon {
    pub fn start(env: &Env, policy: &str, extra: &[&str]) -> Daemon {
        Daemon::start_from(env.cmd(), env, policy, extra)
    }

    /// A daemon reading `config` as its config file (`GATEWAY_CONFIG`).
    pub fn start_with_config(env: &Env, policy: &str, config: &str) -> Daemon {
        let p = env.root.join("daemon-config.toml");
        std::fs::write(&p, config).expect("write config");
        let mut c = env.cmd();
        c.env("GATEWAY_CONFIG", &p);
        Daemon::start_from(c, env, policy, &[])
    }

    /// A daemon started by `cmd` (`env.cmd()` with what a test adds: its environment).
    pub fn start_from(mut cmd: Command, env: &Env, policy: &str, extra: &[&str]) -> Daemon {
        let socket = env.root.join("gw.sock");
        let child = cmd
            .args(["serve", "--policy", policy, "--socket"])
            .arg(&socket)
            .args(extra)
            .env_remove("LANG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gateway serve");
        for _ in 0..500 {
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                return Daemon { child, socket };
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        panic!("the daemon did not start listening on {}", socket.display());
    }

    /// A CLI command of this test routed through the daemon.
    pub fn cmd(&self, env: &Env) -> Command {
        let mut c = env.cmd();
        c.env("GATEWAY_SOCKET", &self.socket);
        c
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then its exit status and stderr.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        let st = self.child.wait().expect("wait daemon");
        (st, err)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn rss_and_fds(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .expect("VmRSS");
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .count();
    (rss, fds)
}

/// The content hash a policy's chain should get (`Policy::sha256`, issue 25), computed here
/// from its documented encoding by `sha256sum`: a version tag, then each file's name and
/// bytes, each preceded by its length (8 bytes, big-endian), root of the `extends` chain first.
pub fn policy_sha256(chain: &[(&str, &[u8])]) -> String {
    let mut c = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    let mut i = c.stdin.take().expect("stdin");
    i.write_all(b"gateway-policy-sha256-v1\0").expect("w");
    for (name, text) in chain {
        for part in [name.as_bytes(), text] {
            i.write_all(&(part.len() as u64).to_be_bytes()).expect("w");
            i.write_all(part).expect("w");
        }
    }
    drop(i);
    let o = c.wait_with_output().expect("wait");
    String::from_utf8_lossy(&o.stdout)[..64].to_string()
}

/// A policy that refuses the probe `touch probe*` (issue 25's pinning tests), and the same
/// without the refusal.
pub const PROBE_DENIED: &str = "extends = \"standard\"\n\n[[rule]]\nid = \"deny-probe\"\neffect = \"deny\"\ntools = [\"exec\"]\ncommand = [\"touch\", \"probe*\"]\nreason = \"the pinning test's probe\"\n";
pub const PROBE_FREE: &str = "extends = \"standard\"\n";

/// The hash of a policy file `path` holding `text` that extends standard.
pub fn probe_policy_sha256(path: &Path, text: &str) -> String {
    let standard = std::fs::read(format!(
        "{}/policies/standard.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("standard.toml");
    let path = std::fs::canonicalize(path).expect("canonical");
    policy_sha256(&[
        ("builtin:standard", &standard),
        (&path.display().to_string(), text.as_bytes()),
    ])
}

/// The records of each session whose id starts with `prefix`, in log order, sessions in the
/// order they first appear.
pub fn sessions_of(records: &[serde_json::Value], prefix: &str) -> Vec<Vec<serde_json::Value>> {
    let mut out: Vec<(String, Vec<serde_json::Value>)> = Vec::new();
    let mut recs = records.to_vec();
    recs.sort_by_key(|r| r["seq"].as_u64());
    for r in recs {
        let s = r["session"].as_str().expect("session").to_string();
        if !s.starts_with(prefix) {
            continue;
        }
        match out.iter_mut().find(|(k, _)| *k == s) {
            Some((_, v)) => v.push(r),
            None => out.push((s, vec![r])),
        }
    }
    out.into_iter().map(|(_, v)| v).collect()
}

/// A blob of the backup store, decoded: `GWBLOBz1`, the length, a zstd frame (blobs of older
/// builds: the content as is).
pub fn read_blob(p: &Path) -> Vec<u8> {
    let d = std::fs::read(p).expect("read a backup");
    match d.strip_prefix(b"GWBLOBz1") {
        Some(rest) => zstd::decode_all(rest.get(8..).unwrap_or_default()).expect("a damaged blob"),
        None => d,
    }
}

/// The daemon's pending requests as `cmd` sees them (`--json pending`).
pub fn pending_seen(mut cmd: Command) -> Vec<serde_json::Value> {
    let o = cmd.args(["--json", "pending"]).output().expect("pending");
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("pending json");
    v["requests"].as_array().cloned().expect("requests")
}

/// Whether `p` (a path in an `Env`'s workspace) exists, or is in the capture layer of a run
/// in flight (a run's writes land in the workspace when it ends).
pub fn made_by_a_run(p: &Path) -> bool {
    if p.exists() {
        return true;
    }
    let Some(ws) = p.parent() else { return false };
    let Some(root) = ws.parent() else {
        return false;
    };
    let Ok(rel) = p.strip_prefix(ws) else {
        return false;
    };
    let Ok(layers) = std::fs::read_dir(root.join("state").join("capture")) else {
        return false;
    };
    layers
        .filter_map(Result::ok)
        .any(|l| l.path().join("upper").join(rel).exists())
}

/// Whether the capture layer of a run in flight holds `p` (a path in an `Env`'s workspace)
/// with this content.
pub fn layer_holds(p: &Path, content: &str) -> bool {
    let (Some(ws), Ok(rel)) = (p.parent(), p.strip_prefix(p.parent().unwrap_or(p))) else {
        return false;
    };
    let Some(root) = ws.parent() else {
        return false;
    };
    let Ok(layers) = std::fs::read_dir(root.join("state").join("capture")) else {
        return false;
    };
    layers.filter_map(Result::ok).any(|l| {
        std::fs::read_to_string(l.path().join("upper").join(rel)).is_ok_and(|c| c == content)
    })
}
