//! Issue 35: a call's authority comes from its request and its caller, never from the process
//! that serves it. Each test drives the real binary (the daemon, `gateway tool`, MCP) as
//! another uid or as an agent, and checks what the call could read, list, hash or change.
//!
//! Over 1,000 lines: each test sets up its own daemon and users and is self-contained; the
//! walk of every command as another uid alone is ~200 lines.

use crate::util::*;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

/// A root daemon whose socket every uid may reach (as a socket group gives its members).
fn open_daemon(env: &Env, policy: &str) -> Daemon {
    let d = Daemon::start(env, policy, &[]);
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
        .expect("chmod socket");
    d
}

/// `gateway` as uid 65534 (no groups) through daemon `d`, in `dir`.
fn nobody_via(d: &Daemon, dir: &std::path::Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
        BIN,
    ])
    .current_dir(dir)
    .env("GATEWAY_SOCKET", &d.socket)
    .env_remove("GATEWAY_STATE_DIR")
    .env_remove("GATEWAY_POLICY")
    .env("HOME", "/nonexistent")
    .stdin(Stdio::null());
    c
}

/// The JSON a `gateway tool` call printed, and the tool's own report (its first text
/// content, parsed).
fn tool_result(o: &std::process::Output) -> (serde_json::Value, serde_json::Value) {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("tool output is not JSON ({e}): {}", text(o)));
    let inner = v["content"][0]["text"]
        .as_str()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(serde_json::Value::Null);
    (v, inner)
}

sandbox_test!(
    fn an_agents_scan_reads_nothing_the_policy_denies() {
        // Issue 35: the MCP `scan` tool was allowed by a built-in rule with no policy
        // decision and read, with the server's rights, the files the policy denies to every
        // tool (`~/.git-credentials`), returning a hash of each secret it found there.
        let env = Env::new("scan-denied");
        let secret = gh_token(35);
        let creds = env.home.join(".git-credentials");
        std::fs::write(&creds, format!("https://me:{secret}@github.com\n")).expect("creds");
        std::os::unix::fs::symlink(&creds, env.ws.join("creds-link")).expect("symlink");
        // A hard link to it in the workspace (the home and the workspace share a file system).
        std::fs::hard_link(&creds, env.ws.join("creds-hard")).expect("hard link");
        let mine = gh_token(36);
        env.write("config.env", &format!("GITHUB_TOKEN={mine}\n"));
        let tool = |args: &str| {
            env.cmd()
                .args(["--policy", "standard", "tool", "scan", args])
                .output()
                .expect("tool scan")
        };
        // Named directly, or through a link in the workspace: refused with the rule.
        for path in [creds.display().to_string(), "creds-link".into()] {
            let o = tool(&format!(r#"{{"path":"{path}"}}"#));
            let (v, inner) = tool_result(&o);
            assert_eq!(o.status.code(), Some(1), "{path}: {}", text(&o));
            assert_eq!(v["isError"], true, "{path}: {v}");
            assert!(inner.to_string().contains("denied-path"), "{path}: {inner}");
            assert!(
                !text(&o).contains(".git-credentials\",\"line"),
                "{}",
                text(&o)
            );
        }
        // A walk of the home and of the workspace finds nothing of the denied file, and the
        // workspace's own secret still.
        for (path, want) in [
            (env.home.display().to_string(), 0),
            (".".into(), 1),
            ("creds-hard".into(), 0),
        ] {
            let o = tool(&format!(r#"{{"path":"{path}"}}"#));
            let (v, inner) = tool_result(&o);
            assert_eq!(v["isError"], false, "{path}: {}", text(&o));
            let findings = inner["findings"].as_array().cloned().unwrap_or_default();
            assert!(
                findings
                    .iter()
                    .all(|f| !f["path"].as_str().unwrap_or("").contains("cred")),
                "{path}: a finding in the denied file: {findings:?}"
            );
            assert_eq!(findings.len(), want, "{path}: {findings:?}");
        }
        // Each refusal is recorded as a deny of `scan` naming the rule.
        let denies: Vec<_> = log_records(&env)
            .into_iter()
            .filter(|r| r["tool"] == "scan" && r["decision"]["effect"] == "deny")
            .collect();
        assert_eq!(denies.len(), 2, "{denies:?}");
        assert!(
            denies
                .iter()
                .all(|r| r["decision"]["rules"].to_string().contains("denied-path")),
            "{denies:?}"
        );
        // A person's own `gateway scan` reads what its caller can (it is not an agent's tool).
        let o = env
            .cmd()
            .args(["--json", "scan"])
            .arg(&creds)
            .output()
            .expect("scan");
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(stdout(&o).contains("github"), "{}", text(&o));
    }
);

sandbox_test!(
    fn another_uid_sees_none_of_roots_history_through_any_front_end() {
        // Issue 35: through the daemon, the MCP `history` tool with `all` listed another
        // user's changes (paths, times, content hashes): the uid filter lived in the CLI's
        // `history` alone.
        let env = Env::new("history-uid");
        let d = open_daemon(&env, "standard");
        env.write("root-secret-name.txt", "x\n");
        let o = d
            .cmd(&env)
            .args(["fs", "rm", "root-secret-name.txt"])
            .output()
            .expect("rm");
        assert!(o.status.success(), "{}", text(&o));
        let o = d
            .cmd(&env)
            .args(["tool", "history", r#"{"all":true}"#])
            .output()
            .expect("root's history");
        assert!(
            stdout(&o).contains("root-secret-name"),
            "root sees its own change: {}",
            text(&o)
        );
        std::fs::set_permissions(&env.outside, std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        for args in [
            &["tool", "history", r#"{"all":true}"#][..],
            &["tool", "history", "{}"][..],
            &["--json", "history", "--all"][..],
        ] {
            let o = nobody_via(&d, &env.outside)
                .args(args)
                .output()
                .expect("history as 65534");
            assert!(o.status.success(), "{args:?}: {}", text(&o));
            assert!(
                !stdout(&o).contains("root-secret-name"),
                "{args:?}: uid 65534 sees root's change: {}",
                text(&o)
            );
        }
    }
);

sandbox_test!(
    fn a_tool_root_is_resolved_with_the_clients_rights() {
        // Issue 35: `tool --root PATH` resolved PATH with the daemon's rights, so another
        // uid learnt what lies in a directory it cannot search (a root that exists there
        // answered differently from one that does not).
        let env = Env::new("tool-root");
        let d = open_daemon(&env, "standard");
        let private = env.root.join("private");
        std::fs::create_dir_all(private.join("exists")).expect("mkdir");
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::fs::set_permissions(&env.outside, std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let answer = |name: &str| {
            let o = nobody_via(&d, &env.outside)
                .args(["tool", "list_directory", "{}", "--root"])
                .arg(private.join(name))
                .output()
                .expect("tool as 65534");
            (o.status.code(), stderr(&o).replace(name, "NAME"))
        };
        let (a, b) = (answer("exists"), answer("nothere"));
        assert_eq!(a.0, Some(122), "{a:?}");
        assert!(a.1.contains("Permission denied"), "{a:?}");
        assert_eq!(
            a, b,
            "an existing root answers otherwise than a missing one"
        );
        // `tool cd` and `--cwd` likewise: a directory, a file, a link and nothing inside the
        // private directory all answer alike.
        std::fs::write(private.join("file"), "x").expect("file");
        std::os::unix::fs::symlink(private.join("exists"), private.join("link")).expect("link");
        let probe = |args: &[String]| {
            let o = nobody_via(&d, &env.outside)
                .args(args)
                .output()
                .expect("probe");
            let out = format!("{}{}", stdout(&o), stderr(&o));
            (
                o.status.code(),
                out.contains("exists"),
                out.contains("not a directory"),
            )
        };
        for name in ["exists", "file", "link", "nothere"] {
            let p = private.join(name).display().to_string();
            for args in [
                vec![
                    "tool".to_string(),
                    "cd".into(),
                    format!(r#"{{"path":"{p}"}}"#),
                ],
                vec![
                    "--cwd".to_string(),
                    p.clone(),
                    "--json".into(),
                    "history".into(),
                ],
            ] {
                let (code, named_target, not_dir) = probe(&args);
                assert_ne!(code, Some(0), "{args:?} succeeded");
                assert!(!not_dir, "{args:?} says what is there");
                assert!(
                    name == "exists" || !named_target,
                    "{args:?} shows where the link leads"
                );
            }
        }
    }
);

/// `n` bytes of text that does not compress (base64 of random bytes).
fn incompressible(n: usize) -> String {
    use std::io::Read;
    let mut raw = vec![0u8; n * 3 / 4 + 3];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .expect("urandom");
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s: String = raw.iter().map(|b| A[(*b & 63) as usize] as char).collect();
    s.truncate(n);
    s
}

sandbox_test!(
    fn a_clients_policy_cannot_expire_another_users_backups() {
        // Issue 35: the backup store is shared by every client of a daemon, and a client's
        // own 4-line policy set its quota: a tiny `max_state_bytes` expired root's backups.
        let env = Env::new("shared-quota");
        let d = open_daemon(&env, "standard");
        let v1 = incompressible(700_000);
        let f1 = env.root.join("v1.txt");
        std::fs::write(&f1, &v1).expect("v1");
        let write = |cmd: &mut Command, path: &str, content: &std::path::Path| {
            let o = cmd
                .args(["fs", "write", path, "--content-file"])
                .arg(content)
                .output()
                .expect("fs write");
            assert!(o.status.success(), "{path}: {}", text(&o));
        };
        // Root: a file, then its new content (v1 backed up), then a newer change elsewhere in
        // its workspace (so v1's backup is not its workspace's newest, which is never expired).
        write(&mut d.cmd(&env), "big.txt", &f1);
        let f2 = env.root.join("v2.txt");
        std::fs::write(&f2, "v2\n").expect("v2");
        write(&mut d.cmd(&env), "big.txt", &f2);
        write(&mut d.cmd(&env), "other.txt", &f2);
        let backups = || {
            let mut all = Vec::new();
            walk(&env.state.join("backups"), &mut all);
            all.len()
        };
        let before = backups();
        assert!(before >= 1, "root's v1 is backed up");
        // uid 65534, with a policy of its own whose store is 1 MiB, overwrites two large files
        // in its own workspace.
        for p in [&env.outside, &env.root] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        }
        let tiny = env.root.join("tiny.toml");
        std::fs::write(
            &tiny,
            "extends = \"standard\"\n[undo]\nmax_state_bytes = \"1MiB\"\nmax_workspace_bytes = \"1MiB\"\nkeep_versions = 1\n",
        )
        .expect("policy");
        std::fs::set_permissions(&tiny, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        for i in 0..2 {
            let name = format!("n{i}.txt");
            let n = env.outside.join(&name);
            std::fs::write(&n, incompressible(700_000)).expect("n");
            std::os::unix::fs::chown(&n, Some(65534), Some(65534)).expect("chown");
            // Its run changes the file: the snapshot backs up its content before.
            let o = nobody_via(&d, &env.outside)
                .arg("--policy")
                .arg(&tiny)
                .args(["exec", "--snapshot", "--", "sh", "-c"])
                .arg(format!("echo b > {name}"))
                .output()
                .expect("exec as 65534");
            assert!(o.status.success(), "{}", text(&o));
        }
        // Root's undo of big.txt still has v1 to bring back.
        let o = d
            .cmd(&env)
            .args(["--json", "history", "--all", "--limit", "0"])
            .output()
            .expect("history");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let missing: Vec<_> = v["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .filter(|c| c["change"]["uid"].is_null() && !c["backup_missing"].is_null())
            .collect();
        assert!(
            missing.is_empty(),
            "another client's policy expired root's backups: {missing:?}"
        );
        let o = d.cmd(&env).arg("undo").output().expect("undo other.txt");
        assert!(o.status.success(), "{}", text(&o));
        let o = d.cmd(&env).arg("undo").output().expect("undo big");
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("big.txt")).expect("big"),
            v1,
            "root's v1 came back"
        );
    }
);

sandbox_test!(
    fn claude_codes_files_are_written_by_the_client_as_itself() {
        // Issue 35: `gateway sh`'s Claude Code wrapper step ran in the daemon, with the
        // daemon's uid, $HOME and $TMPDIR: a normal user's client made a root daemon write a
        // root-owned file with content of the client's choosing, and the client's own
        // TMPDIR and home were not where the daemon looked.
        let env = Env::new("sh-client-side");
        let d = open_daemon(&env, "standard");
        std::fs::create_dir_all(env.outside.join("sub")).expect("mkdir");
        let tmp = env.root.join("tmp-of-65534");
        std::fs::create_dir_all(&tmp).expect("mkdir");
        for p in [&env.outside, &env.outside.join("sub"), &tmp] {
            std::os::unix::fs::chown(p, Some(65534), Some(65534)).expect("chown");
        }
        std::fs::set_permissions(&env.root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let link = env.root.join("bin/gateway-bash");
        std::fs::create_dir_all(link.parent().expect("dir")).expect("mkdir");
        std::os::unix::fs::symlink(BIN, &link).expect("link");
        let f = tmp.join("claude-35ab-cwd");
        let wrapper = format!(
            "shopt -u extglob 2>/dev/null || true && eval 'cd sub && echo hi' < /dev/null && pwd -P >| {}",
            f.display()
        );
        let o = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&link)
            .args(["-c", "-l", &wrapper])
            .current_dir(&env.outside)
            .env("GATEWAY_SOCKET", &d.socket)
            .env("TMPDIR", &tmp)
            .env("HOME", &tmp)
            .env_remove("GATEWAY_STATE_DIR")
            .stdin(Stdio::null())
            .output()
            .expect("gateway-bash as 65534");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(stdout(&o), "hi\n", "the marker stays out of the output");
        let meta = std::fs::symlink_metadata(&f).expect("the cwd file is written");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(meta.uid(), 65534, "written as the client, not the daemon");
        assert_eq!(
            std::fs::read_to_string(&f).expect("cwd file"),
            format!("{}\n", env.outside.join("sub").display())
        );
    }
);

sandbox_test!(
    fn a_run_through_the_daemon_cannot_rewrite_its_clients_config() {
        // Issue 35: the config kept out of a run's reach was the daemon's own; a client's
        // (its XDG_CONFIG_HOME or ~/.config/gateway) could be rewritten by its own confined
        // command, pointing its later calls at another socket, policy or state directory.
        let env = Env::new("client-config");
        let d = open_daemon(&env, "standard");
        std::fs::set_permissions(&env.root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::os::unix::fs::chown(&env.outside, Some(65534), Some(65534)).expect("chown");
        // The client's config named by its GATEWAY_CONFIG, in its workspace: the daemon's
        // own config lies elsewhere, and the client's was left writable.
        let cfg = env.outside.join("gw.toml");
        std::fs::write(&cfg, "policy = \"standard\"\n").expect("config");
        std::os::unix::fs::chown(&cfg, Some(65534), Some(65534)).expect("chown");
        let o = nobody_via(&d, &env.outside)
            .env("GATEWAY_CONFIG", &cfg)
            .args([
                "exec",
                "--",
                "sh",
                "-c",
                "echo 'policy = \"permissive\"' > gw.toml",
            ])
            .output()
            .expect("exec as 65534");
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(&cfg).expect("config"),
            "policy = \"standard\"\n",
            "the client's config was rewritten by its own run: {}",
            text(&o)
        );
        // Nor when its config's directory is a link into the workspace and the file is not
        // made yet (a dotfiles repository).
        std::fs::create_dir_all(env.outside.join("dots")).expect("mkdir");
        std::os::unix::fs::chown(env.outside.join("dots"), Some(65534), Some(65534))
            .expect("chown");
        let link = env.root.join("cfglink");
        std::os::unix::fs::symlink(env.outside.join("dots"), &link).expect("link");
        for (var, file, written) in [
            (
                "GATEWAY_CONFIG",
                link.join("config.toml"),
                "dots/config.toml",
            ),
            ("XDG_CONFIG_HOME", link.clone(), "dots/gateway/config.toml"),
        ] {
            let o = nobody_via(&d, &env.outside)
                .env(var, &file)
                .args(["exec", "--", "sh", "-c"])
                .arg(format!(
                    "mkdir -p $(dirname {written}) && echo 'policy = \"permissive\"' > {written}"
                ))
                .output()
                .expect("exec as 65534");
            assert_ne!(o.status.code(), Some(0), "{var}: {}", text(&o));
            assert!(
                !env.outside.join(written).exists(),
                "{var}: the client's config was made through a link: {}",
                text(&o)
            );
        }
        // Nor under its XDG_CONFIG_HOME.
        let o = nobody_via(&d, &env.outside)
            .env("XDG_CONFIG_HOME", env.outside.join("cfg"))
            .args(["exec", "--", "sh", "-c"])
            .arg("mkdir -p cfg/gateway && echo 'policy = \"permissive\"' > cfg/gateway/config.toml")
            .output()
            .expect("exec as 65534");
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!env.outside.join("cfg/gateway/config.toml").exists());
    }
);

sandbox_test!(
    fn a_daemon_clients_run_gets_no_more_than_the_clients_own_limits() {
        // Issue 35: a root daemon set a client's resource limits with its own powers: what the
        // policy left alone was the daemon's (higher) limits, and a client's policy could
        // raise its own above its hard limits.
        let env = Env::new("client-rlimits");
        let d = open_daemon(&env, "standard");
        std::fs::set_permissions(&env.root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::os::unix::fs::chown(&env.outside, Some(65534), Some(65534)).expect("chown");
        let raise = env.root.join("raise.toml");
        std::fs::write(
            &raise,
            "extends = \"standard\"\n[sandbox.limits]\nopen_files = 4096\nfile_size = \"1GiB\"\n",
        )
        .expect("policy");
        std::fs::set_permissions(&raise, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        for policy in [None, Some(&raise)] {
            let mut c = Command::new("prlimit");
            c.args([
                "--nofile=100:100",
                "--core=0:0",
                "--fsize=1000000:1000000",
                "--",
            ])
            .args([
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
            ])
            .arg(BIN)
            .current_dir(&env.outside)
            .env("GATEWAY_SOCKET", &d.socket)
            .env_remove("GATEWAY_STATE_DIR")
            .env("HOME", "/nonexistent")
            .stdin(Stdio::null());
            if let Some(p) = policy {
                c.arg("--policy").arg(p);
            }
            let o = c
                .args([
                    "exec",
                    "--",
                    "sh",
                    "-c",
                    "ulimit -Sn; ulimit -Hn; ulimit -Hc; ulimit -Hf",
                ])
                .output()
                .expect("exec as 65534 with low limits");
            assert!(o.status.success(), "{policy:?}: {}", text(&o));
            // (`ulimit -f` counts 512-byte blocks)
            assert_eq!(
                stdout(&o),
                "100\n100\n0\n1953\n",
                "{policy:?}: the run's limits are not the client's"
            );
        }
        // The file tools' worker too (a root client: other uids' file tools are refused by a
        // root daemon).
        let big = "a".repeat(50_000);
        let o = Command::new("prlimit")
            .args(["--fsize=10000:10000", "--"])
            .arg(BIN)
            .current_dir(&env.ws)
            .env("GATEWAY_SOCKET", &d.socket)
            .env("GATEWAY_STATE_DIR", &env.state)
            .env("HOME", &env.home)
            .stdin(Stdio::null())
            .args(["tool", "write_file"])
            .arg(format!(r#"{{"path":"big.txt","content":"{big}"}}"#))
            .output()
            .expect("tool write_file with a low file size limit");
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        let len = std::fs::metadata(env.ws.join("big.txt")).map_or(0, |m| m.len());
        assert!(
            len <= 10_000,
            "the worker wrote {len} bytes past the client's limit"
        );
    }
);

/// The daemon's pending requests as root sees them.
fn pending_now(d: &Daemon, env: &Env) -> Vec<serde_json::Value> {
    let o = d
        .cmd(env)
        .args(["--json", "pending"])
        .output()
        .expect("pending");
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    v["requests"].as_array().cloned().unwrap_or_default()
}

/// Waits for the one pending request of `child` (None: the child ended without one).
fn wait_pending(
    d: &Daemon,
    env: &Env,
    child: &mut std::process::Child,
) -> Option<serde_json::Value> {
    for _ in 0..500 {
        if let Some(p) = pending_now(d, env).into_iter().next() {
            return Some(p);
        }
        if child.try_wait().expect("try_wait").is_some() {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}

sandbox_test!(
    fn a_standing_approval_does_not_carry_to_another_directory() {
        // Issue 35: standing approvals were keyed by the argv string: `rm -r build`
        // approved once in one directory then ran without asking in another.
        let env = Env::new("standing-dir");
        let pf = env.policy_file("extends = \"standard\"\n[approval]\ntimeout = \"60s\"\n");
        let d = Daemon::start(&env, &pf, &[]);
        for dir in ["a/build/x", "b/build/x"] {
            std::fs::create_dir_all(env.ws.join(dir)).expect("mkdir");
        }
        let rm_in = |dir: &str| {
            d.cmd(&env)
                .current_dir(env.ws.join(dir))
                .env("GATEWAY_SESSION", "s35")
                .args(["--cwd", "."])
                .args(["exec", "--", "rm", "-r", "build"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        };
        let mut first = rm_in("a");
        let p = wait_pending(&d, &env, &mut first).expect("the first rm is asked");
        assert!(
            p["cwd"].as_str().unwrap_or("").ends_with("/a"),
            "pending names the directory: {p}"
        );
        let o = d
            .cmd(&env)
            .args(["approve", &p["id"].to_string(), "--always-for-session"])
            .output()
            .expect("approve");
        assert!(o.status.success(), "{}", text(&o));
        let o = first.wait_with_output().expect("wait");
        assert!(o.status.success(), "{}", text(&o));
        assert!(!env.ws.join("a/build").exists());
        // The same command in the same session, in another directory: asked again.
        let mut second = rm_in("b");
        let asked = wait_pending(&d, &env, &mut second);
        let Some(p) = asked else {
            let o = second.wait_with_output().expect("wait");
            panic!(
                "the standing approval of `rm -r build` in a/ ran it in b/ without asking: {}",
                text(&o)
            );
        };
        assert!(p["cwd"].as_str().unwrap_or("").ends_with("/b"), "{p}");
        let o = d
            .cmd(&env)
            .args(["deny", &p["id"].to_string()])
            .output()
            .expect("deny");
        assert!(o.status.success(), "{}", text(&o));
        let o = second.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert!(env.ws.join("b/build").exists());
    }
);

/// Sends one frames-mode request (`session`, a typed `request` with `--json`) to the daemon at
/// `socket` as this process, and returns the frames it answered (as JSON values).
fn raw_call(
    socket: &std::path::Path,
    cwd: &std::path::Path,
    session: &str,
    env: &[(String, String)],
    request: &serde_json::Value,
) -> Vec<serde_json::Value> {
    use std::io::{Read, Write};
    let msg = call_message(cwd, serde_json::json!(env), Some(session), true, request);
    let body = msg.to_string().into_bytes();
    let mut s = std::os::unix::net::UnixStream::connect(socket).expect("connect");
    s.write_all(&(body.len() as u32).to_be_bytes())
        .expect("len");
    s.write_all(&body).expect("body");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= buf.len() {
        let n = u32::from_be_bytes(buf[at..at + 4].try_into().expect("4")) as usize;
        let Some(frame) = buf.get(at + 4..at + 4 + n) else {
            break;
        };
        out.push(serde_json::from_slice(frame).expect("frame"));
        at += 4 + n;
    }
    out
}

sandbox_test!(
    fn the_daemons_memory_stays_bounded_whatever_its_clients_send() {
        // Issue 35: session names were kept unbounded (twelve calls with 4 MB names left the
        // daemon 110 MiB larger, unrecorded). Now a name over the bound is refused, and
        // 1,000 calls with the largest names and fields the daemon accepts leave it within a
        // stated bound (8 MiB over its size after a warm-up).
        let env = Env::new("daemon-memory");
        let d = Daemon::start(&env, "standard", &[]);
        let argv = serde_json::json!({"policy": {"explain": {"command": ["true"],
            "credentials": false}}});
        let big_env: Vec<(String, String)> = (0..16)
            .map(|i| (format!("V{i}"), "v".repeat(1024)))
            .collect();
        let call = |session: &str| raw_call(&d.socket, &env.ws, session, &big_env, &argv);
        for i in 0..50 {
            let f = call(&format!("warm-{i}"));
            assert!(
                f.iter()
                    .any(|f| f["type"] == "done" && f["report"]["exit"] == 0),
                "{f:?}"
            );
        }
        let (before, _) = rss_and_fds(d.pid());
        // Names of 4 MB: refused, naming the bound, and recorded.
        let huge = "s".repeat(4 << 20);
        for i in 0..12 {
            let f = call(&format!("{huge}{i}"));
            let err = f.iter().find(|f| f["type"] == "error").unwrap_or_else(|| {
                panic!("a 4 MB session name was served: {:?}", &f[..f.len().min(3)])
            });
            assert!(
                err["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("at most 128 bytes"),
                "{err}"
            );
        }
        let refused = log_records(&env)
            .into_iter()
            .filter(|r| r["tool"] == "daemon.request" && r["decision"]["effect"] == "deny")
            .count();
        assert_eq!(refused, 12, "each refusal is recorded");
        let (mid, _) = rss_and_fds(d.pid());
        // 1,000 calls, each its own session of the longest name accepted.
        for i in 0..1000 {
            let name = format!("{i:0>128}");
            let f = call(&name);
            assert!(
                f.iter()
                    .any(|f| f["type"] == "done" && f["report"]["exit"] == 0),
                "call {i}: {f:?}"
            );
        }
        let (after, _) = rss_and_fds(d.pid());
        eprintln!(
            "daemon RSS: {before} KiB after warm-up, {mid} KiB after 12 refused, {after} KiB after 1,000 calls more"
        );
        assert!(
            mid < before + 8 * 1024 && after < before + 8 * 1024,
            "the daemon grew from {before} KiB to {mid} KiB, then {after} KiB"
        );
    }
);

/// The subcommands of `gateway [SUB] --help` (its `Commands:` section), without `help`.
fn subcommands(sub: &[&str]) -> Vec<String> {
    let o = Command::new(BIN)
        .args(sub)
        .arg("--help")
        .output()
        .expect("help");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

sandbox_test!(
    fn another_uid_gets_nothing_of_roots_through_any_command_or_tool() {
        // Issue 35: every command and every MCP tool, through the daemon, as another uid:
        // nothing of root's can be read, listed, hashed, approved, undone, restored or
        // probed. The walk covers every subcommand `gateway --help` lists and every tool
        // `gateway tool` names (a new one fails this test until it is walked here).
        let env = Env::new("walk-uid");
        let d = open_daemon(&env, "standard");
        let ws = env.ws.display().to_string();
        // Root's things: a private file and a record of its content, a journalled change,
        // a trash item.
        let secret = env.write("secret-root.txt", "ROOTCONTENT-35\n");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let root = |args: &[&str]| {
            let o = d.cmd(&env).args(args).output().expect("root call");
            assert!(o.status.success(), "{args:?}: {}", text(&o));
            o
        };
        root(&["exec", "--", "cat", "secret-root.txt"]);
        root(&[
            "fs",
            "write",
            "rootfile-35.txt",
            "--content",
            "v1 ROOTCONTENT-35\n",
        ]);
        root(&["fs", "write", "rootfile-35.txt", "--content", "v2\n"]);
        env.write("rootgone-35.txt", "ROOTCONTENT-35\n");
        root(&["fs", "rm", "rootgone-35.txt"]);
        let seq = log_records(&env)
            .into_iter()
            .find(|r| r["tool"] == "exec")
            .and_then(|r| r["seq"].as_u64())
            .expect("root's exec record")
            .to_string();
        let history = |c: &mut Command| {
            let o = c
                .args(["--json", "history", "--all", "--limit", "0"])
                .output()
                .expect("history");
            serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("json")["changes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let roots_history = history(&mut d.cmd(&env));
        assert!(roots_history.len() >= 3, "{roots_history:?}");
        let change = roots_history[0]["change"]["id"].to_string();
        let trash_name = {
            let o = root(&["--json", "trash", "list"]);
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
            v["items"][0]["name"]
                .as_str()
                .expect("trash item")
                .to_string()
        };
        std::fs::set_permissions(&env.outside, std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let in_ws = |f: &str| format!("{ws}/{f}");
        let secret_p = in_ws("secret-root.txt");
        let tool_args = |json: String| json;
        // Every command, as uid 65534, aimed at root's things.
        let walk: Vec<(&str, Vec<String>)> = vec![
            (
                "exec",
                vec!["exec".into(), "--".into(), "cat".into(), secret_p.clone()],
            ),
            (
                "sh",
                vec!["sh".into(), "-c".into(), format!("cat {secret_p}")],
            ),
            ("pending", vec!["--json".into(), "pending".into()]),
            ("approve", vec!["approve".into(), "1".into()]),
            ("deny", vec!["deny".into(), "1".into()]),
            ("config show", vec!["config".into(), "show".into()]),
            ("scan", vec!["--json".into(), "scan".into(), ws.clone()]),
            (
                "policy check",
                vec!["policy".into(), "check".into(), secret_p.clone()],
            ),
            (
                "policy explain",
                vec![
                    "policy".into(),
                    "explain".into(),
                    "--".into(),
                    "cat".into(),
                    secret_p.clone(),
                ],
            ),
            ("policy list", vec!["policy".into(), "list".into()]),
            ("policy reload", vec!["policy".into(), "reload".into()]),
            ("log verify", vec!["log".into(), "verify".into()]),
            (
                "log query",
                vec![
                    "--json".into(),
                    "log".into(),
                    "query".into(),
                    "--limit".into(),
                    "0".into(),
                ],
            ),
            (
                "log tail",
                vec![
                    "--json".into(),
                    "log".into(),
                    "tail".into(),
                    "-n".into(),
                    "1000".into(),
                ],
            ),
            ("log show", vec!["log".into(), "show".into(), seq.clone()]),
            ("log checkpoint", vec!["log".into(), "checkpoint".into()]),
            ("log gc", vec!["log".into(), "gc".into()]),
            ("keys export", vec!["keys".into(), "export".into()]),
            ("keys rotate", vec!["keys".into(), "rotate".into()]),
            ("fs rm", vec!["fs".into(), "rm".into(), secret_p.clone()]),
            (
                "fs mkdir",
                vec!["fs".into(), "mkdir".into(), in_ws("made-by-65534")],
            ),
            (
                "fs mv",
                vec![
                    "fs".into(),
                    "mv".into(),
                    secret_p.clone(),
                    env.outside.join("moved").display().to_string(),
                ],
            ),
            ("fs cd", vec!["fs".into(), "cd".into(), ws.clone()]),
            (
                "fs ls",
                vec!["--json".into(), "fs".into(), "ls".into(), ws.clone()],
            ),
            (
                "fs glob",
                vec![
                    "--json".into(),
                    "fs".into(),
                    "glob".into(),
                    "**".into(),
                    "--path".into(),
                    ws.clone(),
                ],
            ),
            (
                "fs grep",
                vec![
                    "--json".into(),
                    "fs".into(),
                    "grep".into(),
                    "ROOT".into(),
                    ws.clone(),
                ],
            ),
            (
                "fs read",
                vec!["fs".into(), "read".into(), secret_p.clone()],
            ),
            (
                "fs write",
                vec![
                    "fs".into(),
                    "write".into(),
                    secret_p.clone(),
                    "--content".into(),
                    "x".into(),
                ],
            ),
            (
                "fs edit",
                vec![
                    "fs".into(),
                    "edit".into(),
                    secret_p.clone(),
                    "--old".into(),
                    "ROOT".into(),
                    "--new".into(),
                    "x".into(),
                ],
            ),
            (
                "history",
                vec![
                    "--json".into(),
                    "history".into(),
                    "--all".into(),
                    "--limit".into(),
                    "0".into(),
                ],
            ),
            (
                "trash list",
                vec!["--json".into(), "trash".into(), "list".into()],
            ),
            (
                "trash restore",
                vec!["trash".into(), "restore".into(), trash_name.clone()],
            ),
            (
                "trash empty",
                vec!["trash".into(), "empty".into(), "--yes".into()],
            ),
            ("changes", vec!["--json".into(), "changes".into()]),
            ("apply", vec!["apply".into(), "cap-000000000000".into()]),
            ("discard", vec!["discard".into(), "cap-000000000000".into()]),
            ("undo", vec!["undo".into(), "--all".into()]),
            ("undo", vec!["undo".into(), change.clone()]),
            ("undo", vec!["undo".into(), "--skip".into(), change.clone()]),
            ("completions", vec!["completions".into(), "bash".into()]),
            ("man", vec!["man".into()]),
            (
                "tool exec",
                vec![
                    "tool".into(),
                    "exec".into(),
                    tool_args(format!(r#"{{"command":"cat {secret_p}"}}"#)),
                ],
            ),
            (
                "tool read_file",
                vec![
                    "tool".into(),
                    "read_file".into(),
                    format!(r#"{{"path":"{secret_p}"}}"#),
                ],
            ),
            (
                "tool write_file",
                vec![
                    "tool".into(),
                    "write_file".into(),
                    format!(r#"{{"path":"{secret_p}","content":"x"}}"#),
                ],
            ),
            (
                "tool edit_file",
                vec![
                    "tool".into(),
                    "edit_file".into(),
                    format!(r#"{{"path":"{secret_p}","edits":[{{"old":"ROOT","new":"x"}}]}}"#),
                ],
            ),
            (
                "tool glob",
                vec![
                    "tool".into(),
                    "glob".into(),
                    format!(r#"{{"pattern":"**","path":"{ws}"}}"#),
                ],
            ),
            (
                "tool grep",
                vec![
                    "tool".into(),
                    "grep".into(),
                    format!(r#"{{"pattern":"ROOT","path":"{ws}"}}"#),
                ],
            ),
            (
                "tool list_directory",
                vec![
                    "tool".into(),
                    "list_directory".into(),
                    format!(r#"{{"path":"{ws}"}}"#),
                ],
            ),
            (
                "tool move",
                vec![
                    "tool".into(),
                    "move".into(),
                    format!(
                        r#"{{"src":"{secret_p}","dst":"{}"}}"#,
                        env.outside.join("m2").display()
                    ),
                ],
            ),
            (
                "tool delete",
                vec![
                    "tool".into(),
                    "delete".into(),
                    format!(r#"{{"path":"{secret_p}"}}"#),
                ],
            ),
            (
                "tool mkdir",
                vec![
                    "tool".into(),
                    "mkdir".into(),
                    format!(r#"{{"path":"{}"}}"#, in_ws("made-by-tool")),
                ],
            ),
            (
                "tool cd",
                vec!["tool".into(), "cd".into(), format!(r#"{{"path":"{ws}"}}"#)],
            ),
            (
                "tool undo",
                vec!["tool".into(), "undo".into(), r#"{"all":true}"#.into()],
            ),
            (
                "tool undo",
                vec![
                    "tool".into(),
                    "undo".into(),
                    format!(r#"{{"id":{change}}}"#),
                ],
            ),
            (
                "tool history",
                vec!["tool".into(), "history".into(), r#"{"all":true}"#.into()],
            ),
            (
                "tool scan",
                vec![
                    "tool".into(),
                    "scan".into(),
                    format!(r#"{{"path":"{ws}"}}"#),
                ],
            ),
            // The body is read with the caller's rights: root's file is not sent.
            (
                "http",
                vec![
                    "http".into(),
                    "POST".into(),
                    "http://127.0.0.1:9/".into(),
                    "--data-file".into(),
                    secret_p.clone(),
                ],
            ),
            (
                "tool http_request",
                vec![
                    "tool".into(),
                    "http_request".into(),
                    r#"{"method":"GET","url":"http://127.0.0.1:9/"}"#.into(),
                ],
            ),
        ];
        // Not walked, each with its reason: they run in the client, as the client, and
        // reach root's state only through the calls walked above.
        let not_walked = [
            (
                "repl",
                "an interactive front end: each of its lines is one of the calls above",
            ),
            (
                "mcp",
                "a front end: each of its tool calls is a `tool` call above",
            ),
            ("serve", "starts a daemon of the caller's own"),
        ];
        // Completeness: every subcommand and tool is walked or excused.
        let walked: std::collections::HashSet<&str> = walk.iter().map(|(n, _)| *n).collect();
        for c in subcommands(&[]) {
            let subs = subcommands(&[c.as_str()]);
            let names: Vec<String> = if subs.is_empty() {
                vec![c.clone()]
            } else {
                subs.iter().map(|s| format!("{c} {s}")).collect()
            };
            for n in names {
                assert!(
                    walked
                        .iter()
                        .any(|w| *w == n || w.starts_with(&format!("{n} ")))
                        || not_walked.iter().any(|(x, _)| *x == n),
                    "`{n}` is not walked as another uid"
                );
            }
        }
        let tools = Command::new(BIN)
            .args(["tool", "frobnicate"])
            .output()
            .expect("tool");
        let listed = stdout(&tools);
        let list = listed
            .split("the tools are ")
            .nth(1)
            .and_then(|t| t.split('"').next())
            .expect("the tools are listed");
        for t in list.split(", ") {
            let t = t.trim_end_matches('\\');
            assert!(
                walked.contains(format!("tool {t}").as_str()),
                "tool `{t}` is not walked"
            );
        }
        for (name, args) in &walk {
            let o = nobody_via(&d, &env.outside)
                .args(args)
                .output()
                .expect("as 65534");
            // What the caller named itself may be said back to it (`no trash item NAME`).
            let all = args
                .iter()
                .fold(text(&o), |t, a| t.replace(a.as_str(), "<ARG>"));
            // The listings are served (filtered to the caller's own), not refused: the walk
            // reaches the daemon.
            if [
                "pending",
                "history",
                "log query",
                "log tail",
                "trash list",
                "tool history",
                "changes",
            ]
            .contains(name)
            {
                assert!(o.status.success(), "`{name}` as 65534: {all}");
            }
            for marker in ["ROOTCONTENT-35", "rootfile-35", "rootgone-35"] {
                assert!(
                    !all.contains(marker),
                    "`{name}` ({args:?}) shows uid 65534 root's {marker}: {all}"
                );
            }
        }
        // Probes answer as for nothing at all: root's trash item as a name nobody removed,
        // and `undo` counts none of root's changes.
        let answer = |args: &[&str]| {
            let o = nobody_via(&d, &env.outside)
                .args(args)
                .output()
                .expect("probe");
            (o.status.code(), stderr(&o))
        };
        let (code, theirs) = answer(&["trash", "restore", &trash_name]);
        let (code2, none) = answer(&["trash", "restore", "no-such-item"]);
        assert_eq!(
            (code, theirs.replace(&trash_name, "NAME")),
            (code2, none.replace("no-such-item", "NAME")),
            "root's trash item answers otherwise than a missing one"
        );
        let (_, undo) = answer(&["undo"]);
        assert!(
            !undo.contains("change(s) of other workspaces"),
            "`undo` counts root's changes for uid 65534: {undo}"
        );
        // Root's things are as they were.
        assert_eq!(
            std::fs::read_to_string(&secret).expect("secret"),
            "ROOTCONTENT-35\n"
        );
        assert_eq!(
            std::fs::read_to_string(env.ws.join("rootfile-35.txt")).expect("rootfile"),
            "v2\n"
        );
        assert!(!env.ws.join("made-by-65534").exists() && !env.ws.join("made-by-tool").exists());
        let after = history(&mut d.cmd(&env));
        assert_eq!(
            after.len(),
            roots_history.len(),
            "root's journal changed: {after:?}"
        );
        let o = root(&["--json", "trash", "list"]);
        assert!(
            stdout(&o).contains(&trash_name),
            "root's trash item is gone"
        );
        let o = root(&["log", "verify"]);
        assert!(o.status.success(), "{}", text(&o));
    }
);

sandbox_test!(
    fn a_clients_policy_cannot_hold_a_request_longer_than_the_daemons() {
        // Issue 35 (attack review): a client's own policy set how long its request holds its
        // place in the daemon (`[approval] timeout = "100d"`): a few of them kept every other
        // user out. The daemon's own policy bounds it.
        let env = Env::new("approval-bound");
        let d = Daemon::start(&env, "standard", &[]);
        let long = env.policy_file("extends = \"standard\"\n[approval]\ntimeout = \"100d\"\n");
        std::fs::create_dir_all(env.ws.join("x/y")).expect("mkdir");
        let mut child = d
            .cmd(&env)
            .args(["--policy", &long, "exec", "--", "rm", "-r", "x"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let p = wait_pending(&d, &env, &mut child).expect("the rm is asked");
        let left = p["expires_in"].as_u64().expect("expires_in");
        assert!(left <= 300, "the request holds its place for {left} s: {p}");
        let o = d
            .cmd(&env)
            .args(["deny", &p["id"].to_string()])
            .output()
            .expect("deny");
        assert!(o.status.success(), "{}", text(&o));
        let o = child.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
    }
);

sandbox_test!(
    fn a_standing_approval_does_not_carry_to_other_input() {
        // Issue 35 (attack review): approved once with `--always-for-session`, `xargs rm -r`
        // then ran without asking on any other input piped to it.
        let env = Env::new("standing-stdin");
        let pf = env.policy_file("extends = \"standard\"\n[approval]\ntimeout = \"60s\"\n");
        let d = Daemon::start(&env, &pf, &[]);
        for dir in ["a/x", "keep/precious"] {
            std::fs::create_dir_all(env.ws.join(dir)).expect("mkdir");
        }
        let rm_of = |input: &str| {
            let mut c = d
                .cmd(&env)
                .env("GATEWAY_SESSION", "s35-stdin")
                .args(["exec", "--", "xargs", "rm", "-r"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn");
            use std::io::Write;
            let mut i = c.stdin.take().expect("stdin");
            i.write_all(input.as_bytes()).expect("write");
            drop(i);
            c
        };
        let mut first = rm_of("a\n");
        let p = wait_pending(&d, &env, &mut first).expect("the first rm is asked");
        let o = d
            .cmd(&env)
            .args(["approve", &p["id"].to_string(), "--always-for-session"])
            .output()
            .expect("approve");
        assert!(o.status.success(), "{}", text(&o));
        let o = first.wait_with_output().expect("wait");
        assert!(o.status.success(), "{}", text(&o));
        assert!(!env.ws.join("a").exists());
        let mut second = rm_of("keep\n");
        let Some(p) = wait_pending(&d, &env, &mut second) else {
            let o = second.wait_with_output().expect("wait");
            panic!(
                "the standing approval ran `xargs rm -r` on other input without asking: {}",
                text(&o)
            );
        };
        let o = d
            .cmd(&env)
            .args(["deny", &p["id"].to_string()])
            .output()
            .expect("deny");
        assert!(o.status.success(), "{}", text(&o));
        let o = second.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert!(env.ws.join("keep/precious").exists());
    }
);

sandbox_test!(
    fn one_user_cannot_take_every_place_in_the_daemon() {
        // Issue 35 (attack review): one uid held every `--max-clients` place (calls waiting
        // for approval, or any long call), and every other user — the admin too — got
        // "busy". A user may hold half of the places; the admin always has some.
        let env = Env::new("per-uid-places");
        let d = Daemon::start(&env, "standard", &["--max-clients", "4"]);
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
            .expect("chmod socket");
        std::fs::set_permissions(&env.outside, std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        let long = |n: usize| -> Vec<std::process::Child> {
            (0..n)
                .map(|_| {
                    nobody_via(&d, &env.outside)
                        .args(["exec", "--", "sleep", "4"])
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .expect("spawn as 65534")
                })
                .collect()
        };
        let mut held = long(2);
        std::thread::sleep(std::time::Duration::from_millis(800));
        let o = nobody_via(&d, &env.outside)
            .args(["exec", "--", "true"])
            .output()
            .expect("third call as 65534");
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(
            stderr(&o).contains("uid 65534 has 2 calls in progress"),
            "{}",
            text(&o)
        );
        // Other users, and the admin, are still served.
        let o = d
            .cmd(&env)
            .args(["--json", "pending"])
            .output()
            .expect("pending");
        assert!(o.status.success(), "root was refused: {}", text(&o));
        let o = d
            .cmd(&env)
            .args(["exec", "--", "true"])
            .output()
            .expect("root exec");
        assert!(o.status.success(), "root was refused: {}", text(&o));
        for c in held.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
);
