//! `gateway serve`: same results as the embedded broker, malformed clients, load, approvals, other users.
//!
//! Over 1,000 lines: each test starts its own daemon and clients (as other uids too) and is
//! self-contained; the seam is the daemon's identity and authorization tests (other users,
//! approvals) apart from its protocol and load tests.

use crate::util::*;

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
        let f = frame(
            br#"{"type":"request","version":7,"context":{"cwd":"/","env":[],"session":null,"stdio":"passed","prompts":false},"body":{"call":{"options":{"state_dir":null,"policy":null,"cwd":null,"json":false},"request":{"exec":{"argv":["true"],"timeout":null,"env":[],"snapshot":null,"stdin":null}}}}}"#,
        );
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
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
                let v = v["requests"].as_array().cloned().expect("requests");
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
        // An unknown tool is a usage error, said as JSON (as every `tool` result).
        let o = env.gw(&["tool", "frobnicate"]);
        assert_eq!(o.status.code(), Some(122));
        assert!(stdout(&o).contains("exec, read_file"), "{}", text(&o));
        let e: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("json");
        assert_eq!(e["error"]["code"], "usage", "{e}");
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

sandbox_test!(
    fn daemon_killed_mid_run_is_recorded_at_its_next_start() {
        // SIGKILL of the daemon while it runs a client's command: nothing it could do; the
        // run's intent is on disk, and the next daemon on that state directory records it
        // (broker died, exit unknown) with what it changed undoable.
        use std::io::BufRead;
        let env = Env::new("daemon-sigkill");
        env.write("important.txt", "original\n");
        let mut d = Daemon::start(&env, "standard", &[]);
        let mut ch = d
            .cmd(&env)
            .args([
                "exec",
                "--",
                "sh",
                "-c",
                "echo changed > important.txt; echo started; exec sleep 60.4343",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut line = String::new();
        std::io::BufReader::new(ch.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        assert_eq!(line, "started\n");
        d.child.kill().expect("SIGKILL the daemon");
        let _ = d.child.wait();
        let _ = ch.wait();
        assert_no_survivors("sleep 60.4343", "daemon SIGKILL");
        drop(d);
        let d = Daemon::start(&env, "standard", &[]);
        let o = d
            .cmd(&env)
            .args(["log", "query", "--json", "--tool", "exec"])
            .output()
            .expect("query");
        let recs = json_of(&o)["records"].as_array().expect("records").clone();
        assert_eq!(recs.len(), 1, "{recs:?}");
        assert_eq!(recs[0]["broker_died"], true, "{}", recs[0]);
        // What the run wrote is held whole for a person (nothing half-made lands by itself).
        assert!(
            recs[0]["error"]
                .as_str()
                .is_some_and(|e| e.contains("held as change set")),
            "{}",
            recs[0]
        );
        let o = d
            .cmd(&env)
            .args(["--json", "changes"])
            .output()
            .expect("changes");
        let id = json_of(&o)["sets"][0]["id"]
            .as_str()
            .expect("a held set")
            .to_string();
        let o = d.cmd(&env).args(["apply", &id]).output().expect("apply");
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("important.txt")).expect("r"),
            "changed\n"
        );
        let o = d.cmd(&env).args(["undo"]).output().expect("undo");
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("important.txt")).expect("r"),
            "original\n"
        );
    }
);

sandbox_test!(
    fn daemon_snapshot_reads_the_workspace_with_the_clients_rights() {
        // A root daemon snapshots a client's workspace before and after each run. A file in
        // it that only root may read (the user's, or planted there by another root process)
        // must not be copied into the backup store for a client who could not read it.
        let env = Env::new("daemon-snap-rights");
        let d = Daemon::start(&env, "standard", &[]);
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
            .expect("chmod socket");
        std::os::unix::fs::chown(&env.ws, Some(65534), Some(65534)).expect("chown ws");
        let marker = "ROOTONLY-7f3a9c-CONTENT";
        let secret = env.write("rootonly.txt", &format!("{marker}\n"));
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        env.write("mine.txt", "ordinary content\n");
        std::os::unix::fs::chown(env.ws.join("mine.txt"), Some(65534), Some(65534)).expect("chown");
        let o = env
            .raw("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
            .args(["exec", "--", "sh", "-c", "echo more >> mine.txt"])
            .env("GATEWAY_SOCKET", &d.socket)
            .stdin(Stdio::null())
            .output()
            .expect("setpriv");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let mut files = Vec::new();
        walk(&env.state, &mut files);
        let mut saw_mine = false;
        for f in files {
            let data = std::fs::read(&f).unwrap_or_default();
            let s = String::from_utf8_lossy(&data);
            assert!(
                !s.contains(marker),
                "{} holds the root-only file",
                f.display()
            );
            saw_mine |= s.contains("ordinary content");
        }
        // The control: what the client may read is backed up (undo still works for it).
        assert!(saw_mine, "the client's own file was not backed up");
    }
);

/// A client of the daemon's wire protocol written apart from gateway's own (python): sends
/// argv[2] as the first frame (with its stdin, stdout and stderr when argv[3] is `fds`) and
/// prints each frame the daemon answers as a line of JSON, an output frame's bytes decoded
/// into `text`.
const WIRE_CLIENT: &str = r#"
import base64, json, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = sys.argv[2].encode()
frame = struct.pack(">I", len(body)) + body
if sys.argv[3] == "fds":
    socket.send_fds(s, [frame], [0, 1, 2])
else:
    s.sendall(frame)
buf = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    buf += d
while len(buf) >= 4:
    n = struct.unpack(">I", buf[:4])[0]
    m = json.loads(buf[4:4 + n])
    if m.get("type") == "output":
        m["text"] = base64.b64decode(m["data"]).decode("utf-8", "replace")
    print(json.dumps(m), flush=True)
    buf = buf[4 + n:]
"#;

/// The system's python (one uid 65534 may run: not a per-user install under /root).
const PYTHON: &str = "/usr/bin/python3";

/// Sends `msg` to the daemon at `socket` through [`WIRE_CLIENT`], as uid 65534 (no groups)
/// when `nobody`, else as root; the frames it answered.
fn wire(
    env: &Env,
    socket: &Path,
    nobody: bool,
    msg: &serde_json::Value,
    fds: bool,
) -> Vec<serde_json::Value> {
    let mut c = if nobody {
        let mut c = env.raw("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            PYTHON,
        ]);
        c
    } else {
        env.raw(PYTHON)
    };
    c.args(["-c", WIRE_CLIENT])
        .arg(socket)
        .arg(msg.to_string())
        .arg(if fds { "fds" } else { "frames" })
        .stdin(Stdio::null());
    let o = c.output().expect("python3");
    assert!(o.status.success(), "the wire client failed: {}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The text of the output frames of `stream` and the exit code of the done frame's report.
fn output_and_exit(frames: &[serde_json::Value], stream: &str) -> (String, Option<u64>) {
    let out = frames
        .iter()
        .filter(|f| f["type"] == "output" && f["stream"] == stream)
        .filter_map(|f| f["text"].as_str())
        .collect();
    let code = frames
        .iter()
        .find(|f| f["type"] == "done")
        .and_then(|f| f["report"]["exit"].as_u64());
    (out, code)
}

sandbox_test!(
    fn daemon_identity_is_the_peers_whatever_the_request_claims() {
        // The caller's identity is the socket's (SO_PEERCRED), never the request's: a request
        // that names a uid anywhere is refused whole, and one whose environment claims root
        // runs, and is recorded, as the uid that connected (65534).
        let env = Env::new("daemon-identity");
        let d = Daemon::start(&env, "standard", &[]);
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
            .expect("chmod socket");
        std::os::unix::fs::chown(&env.ws, Some(65534), Some(65534)).expect("chown ws");
        let claims = serde_json::json!([
            ["PATH", "/usr/bin:/bin"],
            ["USER", "root"],
            ["LOGNAME", "root"],
            ["SUDO_UID", "0"],
            ["GATEWAY_UID", "0"]
        ]);
        let request = |body: serde_json::Value| {
            call_message(&env.ws, claims.clone(), Some("id-test"), false, &body)
        };
        let exec = |argv: &[&str], stdin: Option<&str>| {
            serde_json::json!({"exec": {"argv": argv, "timeout": {"secs": 30, "nanos": 0},
                "snapshot": false, "env": [{"name": "SUDO_UID", "value": "0"}],
                "stdin": stdin}})
        };
        for (at, key) in [
            ("top", "uid"),
            ("context", "uid"),
            ("context", "caller"),
            ("context", "groups"),
            ("options", "uid"),
            ("exec", "uid"),
            ("env", "uid"),
        ] {
            let mut m = request(exec(&["touch", "claimed"], None));
            match at {
                "top" => m[key] = 0.into(),
                "context" => m["context"][key] = 0.into(),
                "options" => m["body"]["call"]["options"][key] = 0.into(),
                "env" => m["body"]["call"]["request"]["exec"]["env"][0][key] = 0.into(),
                _ => m["body"]["call"]["request"]["exec"][key] = 0.into(),
            }
            let f = wire(&env, &d.socket, true, &m, false);
            assert_eq!(f.len(), 1, "{at}.{key}: {f:?}");
            assert_eq!(f[0]["type"], "error", "{at}.{key}: {f:?}");
            let msg = f[0]["message"].as_str().unwrap_or_default();
            assert!(msg.contains(&format!("unknown field `{key}`")), "{msg}");
        }
        assert!(!env.ws.join("claimed").exists(), "a refused request ran");
        // The same request without the claim runs as the peer.
        let f = wire(
            &env,
            &d.socket,
            true,
            &request(exec(&["id", "-u"], None)),
            false,
        );
        assert_eq!(
            output_and_exit(&f, "stdout"),
            ("65534\n".into(), Some(0)),
            "{f:?}"
        );
        // A typed call's stdin text is the command's stdin.
        let f = wire(
            &env,
            &d.socket,
            true,
            &request(exec(&["cat"], Some("typed stdin\n"))),
            false,
        );
        assert_eq!(
            output_and_exit(&f, "stdout"),
            ("typed stdin\n".into(), Some(0)),
            "{f:?}"
        );
        // A typed policy reload of the session, as the peer.
        let f = wire(
            &env,
            &d.socket,
            true,
            &request(serde_json::json!({"policy": {"reload": {"name": null}}})),
            false,
        );
        let (_, code) = output_and_exit(&f, "stdout");
        assert_eq!(code, Some(0), "{f:?}");
        // The answer is typed: the report says which session's pin was reloaded.
        let report = f.iter().find(|f| f["type"] == "done").map(|f| &f["report"]);
        let reloaded = report.map(|r| &r["outcome"]["result"]["reloaded"]);
        assert_eq!(
            report.map(|r| &r["outcome"]["kind"]),
            Some(&serde_json::json!("policy")),
            "{f:?}"
        );
        assert_eq!(
            reloaded.map(|r| &r["session"]),
            Some(&serde_json::json!("id-test")),
            "{f:?}"
        );
        let recs = log_records(&env);
        let mine: Vec<&serde_json::Value> =
            recs.iter().filter(|r| r["session"] == "id-test").collect();
        assert!(
            mine.iter().filter(|r| r["tool"] == "exec").count() >= 2,
            "{mine:?}"
        );
        assert!(
            mine.iter().any(|r| r["tool"] == "policy.reload"),
            "{mine:?}"
        );
        for r in &mine {
            assert_eq!(r["caller"]["uid"], 65534, "{r}");
            assert_eq!(r["caller"]["client"], "daemon", "{r}");
        }
        assert!(
            !recs
                .iter()
                .any(|r| r["tool"] == "exec" && r["caller"]["uid"] == 0),
            "{recs:?}"
        );
    }
);

sandbox_test!(
    fn daemon_refuses_another_protocol_version_naming_both() {
        // A client of protocol version 1 (the CLI's argv, as gateway sent it before the typed
        // protocol), with its stdio: refused before anything runs, the message naming both
        // versions and what to do. A hello is answered with the daemon's versions.
        let env = Env::new("daemon-version");
        let d = Daemon::start(&env, "strict", &[]);
        let ws = env.ws.display().to_string();
        let v1 = serde_json::json!({"type": "call", "version": 1,
            "argv": ["exec", "--", "touch", "v1-ran"], "cwd": ws, "env": []});
        let f = wire(&env, &d.socket, false, &v1, true);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0]["type"], "error", "{f:?}");
        let msg = f[0]["message"].as_str().unwrap_or_default();
        for part in [
            "protocol version 1 is not spoken here",
            "this daemon speaks 7",
            "restart `gateway serve`",
        ] {
            assert!(msg.contains(part), "{part}: {msg}");
        }
        assert!(!env.ws.join("v1-ran").exists());
        let hello = serde_json::json!({"type": "request", "version": 7, "context": {
            "cwd": ws, "env": [], "session": null, "stdio": "frames", "prompts": false},
            "body": "hello"});
        let f = wire(&env, &d.socket, false, &hello, false);
        let version = stdout(&env.gw(&["--version"]));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0]["type"], "hello", "{f:?}");
        assert_eq!(f[0]["version"], 7, "{f:?}");
        let gw = f[0]["gateway"].as_str().unwrap_or_default();
        assert!(!gw.is_empty() && version.contains(gw), "{gw} vs {version}");
        // A request of a later version, in this version's shape, is refused the same way.
        let mut later = hello.clone();
        later["version"] = 8.into();
        let f = wire(&env, &d.socket, false, &later, false);
        let msg = f[0]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains("protocol version 8 is not spoken here (this daemon speaks 7)"),
            "{f:?}"
        );
        // Version 2's command line (`argv`, which the daemon parsed with clap): refused as
        // another version, and in this version's number too — no body is a command line.
        for version in [2, 3, 4, 5, 6, 7] {
            let argv = serde_json::json!({"type": "request", "version": version, "context": {
                "cwd": ws, "env": [], "session": null, "stdio": "frames", "prompts": false},
                "body": {"argv": ["exec", "--", "touch", "argv-ran"]}});
            let f = wire(&env, &d.socket, false, &argv, false);
            assert_eq!(f.len(), 1, "{f:?}");
            assert_eq!(f[0]["type"], "error", "{f:?}");
            let msg = f[0]["message"].as_str().unwrap_or_default();
            let why = if version < 7 {
                format!("protocol version {version} is not spoken here (this daemon speaks 7)")
            } else {
                "unknown variant `argv`".to_string()
            };
            assert!(msg.contains(&why), "{version}: {msg}");
        }
        assert!(!env.ws.join("argv-ran").exists());
        // The CLI speaks this version.
        let o = d
            .cmd(&env)
            .args(["exec", "--", "echo", "current"])
            .output()
            .expect("run");
        assert_eq!(stdout(&o), "current\n", "{}", text(&o));
    }
);

sandbox_test!(
    fn another_uid_cannot_pin_or_move_a_daemon_session_of_the_same_name() {
        // Issue 23 attack (the protocol: "a request cannot change session ownership"): a
        // session's places were a file keyed by its name only, so uid 65534, first to use a
        // name through a root daemon, pinned that session's workspace — the writable area of
        // root's later commands in it — to a directory of its choosing, and its `fs cd`
        // moved where they start.
        let env = Env::new("session-owner");
        let d = Daemon::start(&env, "standard", &[]);
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
            .expect("chmod socket");
        let session = "shared-name";
        let o = env
            .nobody()
            .current_dir(&env.outside)
            .env("GATEWAY_SOCKET", &d.socket)
            .env("GATEWAY_SESSION", session)
            .args(["fs", "cd", "."])
            .output()
            .expect("gateway as 65534");
        assert!(o.status.success(), "{}", text(&o));
        let o = d
            .cmd(&env)
            .env("GATEWAY_SESSION", session)
            .args(["exec", "--", "sh", "-c", "pwd; touch planted"])
            .output()
            .expect("gateway");
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            stdout(&o).trim(),
            env.ws.display().to_string(),
            "{}",
            text(&o)
        );
        assert!(
            !env.outside.join("planted").exists(),
            "root's command wrote where uid 65534 pinned root's session"
        );
        assert!(env.ws.join("planted").exists(), "{}", text(&o));
        // The other uid's session of that name is its own, and still where it put it.
        let o = env
            .nobody()
            .current_dir(&env.ws)
            .env("GATEWAY_SOCKET", &d.socket)
            .env("GATEWAY_SESSION", session)
            .args(["exec", "--", "pwd"])
            .output()
            .expect("gateway as 65534");
        assert_eq!(
            stdout(&o).trim(),
            env.outside.display().to_string(),
            "{}",
            text(&o)
        );
    }
);

/// Issue 24: a root daemon whose config names `users` (gid 100) as `role`s, its socket open
/// to every uid (as a socket group would make it for its members).
fn daemon_with_roles(env: &Env, policy: &str, config: &str) -> Daemon {
    let d = Daemon::start_with_config(env, policy, config);
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
        .expect("chmod socket");
    d
}

/// uid 65534 through daemon `d`; `in_users`: with the supplementary group `users` (gid 100).
fn other_uid(env: &Env, d: &Daemon, in_users: bool) -> Command {
    let mut c = env.raw("setpriv");
    c.args(["--reuid=65534", "--regid=65534"]);
    c.arg(if in_users {
        "--groups=100"
    } else {
        "--clear-groups"
    });
    c.args(["--", BIN])
        .current_dir(&env.outside)
        .env("GATEWAY_SOCKET", &d.socket)
        .stdin(Stdio::null());
    c
}

/// The `deny` records uid 65534's refused calls left, as (tool, rules).
fn denies_of_other_uid(env: &Env) -> Vec<(String, String)> {
    log_records(env)
        .into_iter()
        .filter(|r| r["caller"]["uid"] == 65534 && r["decision"]["effect"] == "deny")
        .map(|r| {
            (
                r["tool"].as_str().unwrap_or("").to_string(),
                r["decision"]["rules"].to_string(),
            )
        })
        .collect()
}

sandbox_test!(
    fn another_uid_cannot_list_answer_or_inherit_a_daemon_clients_approvals() {
        // Issue 24: `pending` listed every uid's requests, `approve ID` answered any of them
        // (another uid approved root's `rm -r`, which ran as root), and a standing approval
        // was keyed by the session's name alone, so another uid naming it inherited it.
        let env = Env::new("ident-approvals");
        let pf = env.policy_file("extends = \"standard\"\n[approval]\ntimeout = \"60s\"\n");
        let d = daemon_with_roles(&env, &pf, "approvers = [\"users\"]\n");
        std::fs::create_dir_all(env.ws.join("keep/sub")).expect("mkdir");
        let root_rm = d
            .cmd(&env)
            .env("GATEWAY_SESSION", "shared")
            .args(["exec", "--", "rm", "-r", "keep"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let id = (0..500)
            .find_map(|_| {
                let p = pending_seen(d.cmd(&env));
                if p.is_empty() {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                p.first().and_then(|p| p["id"].as_u64())
            })
            .expect("root's request is pending");
        // uid 65534 does not see it, and cannot approve or deny it.
        let seen = pending_seen(other_uid(&env, &d, false));
        assert!(
            seen.is_empty(),
            "another uid sees root's requests: {seen:?}"
        );
        for verb in ["approve", "deny"] {
            let o = other_uid(&env, &d, false)
                .args([verb, &id.to_string()])
                .output()
                .expect("answer as 65534");
            assert_eq!(o.status.code(), Some(120), "{verb}: {}", text(&o));
            assert!(
                stderr(&o).contains("belongs to another user"),
                "{}",
                text(&o)
            );
        }
        assert!(env.ws.join("keep").exists(), "root's rm ran");
        // A member of the approvers group sees it and approves it, for the session.
        let seen = pending_seen(other_uid(&env, &d, true));
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0]["id"].as_u64(), Some(id));
        let o = other_uid(&env, &d, true)
            .args(["approve", &id.to_string(), "--always-for-session"])
            .output()
            .expect("approve as approver");
        assert!(o.status.success(), "{}", text(&o));
        let o = root_rm.wait_with_output().expect("wait");
        assert!(o.status.success(), "{}", text(&o));
        assert!(!env.ws.join("keep").exists());
        // uid 65534 naming the same session and the same call does not inherit root's
        // standing approval: it is asked (and root, the admin, denies it).
        std::fs::set_permissions(&env.outside, std::fs::Permissions::from_mode(0o777))
            .expect("chmod");
        std::fs::create_dir_all(env.outside.join("keep/sub")).expect("mkdir");
        let mut theirs = other_uid(&env, &d, false)
            .env("GATEWAY_SESSION", "shared")
            .args(["exec", "--", "rm", "-r", "keep"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn as 65534");
        let mut asked = None;
        for _ in 0..500 {
            if let Some(p) = pending_seen(d.cmd(&env))
                .into_iter()
                .find(|p| p["uid"] == 65534)
            {
                asked = p["id"].as_u64();
                break;
            }
            if let Some(st) = theirs.try_wait().expect("try_wait") {
                panic!(
                    "uid 65534's call was not asked: it ended ({st}) on root's standing approval"
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let asked = asked.expect("uid 65534's call is pending");
        let o = d
            .cmd(&env)
            .args(["deny", &asked.to_string()])
            .output()
            .expect("deny as root");
        assert!(o.status.success(), "{}", text(&o));
        let o = theirs.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert!(env.outside.join("keep").exists());
        // Each refusal is a recorded deny naming the rule.
        let denies = denies_of_other_uid(&env);
        for verb in ["approve", "deny"] {
            assert!(
                denies
                    .iter()
                    .any(|(t, r)| t == verb && r.contains("daemon.owner")),
                "{denies:?}"
            );
        }
    }
);

sandbox_test!(
    fn another_uid_cannot_read_a_daemon_clients_records_history_or_trash_nor_run_maintenance() {
        // Issue 24: through the daemon, `log show N` gave another uid the stored output of a
        // root client's command, `log query`/`tail`/`history`/`trash list` showed every uid's,
        // and `trash empty`, `log gc`, `keys rotate` ran for any client.
        let env = Env::new("ident-records");
        let d = daemon_with_roles(&env, "standard", "auditors = [\"users\"]\n");
        env.write("private.txt", "root-only-content\n");
        std::fs::set_permissions(
            env.ws.join("private.txt"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        env.write("gone.txt", "g");
        let o = d
            .cmd(&env)
            .args(["exec", "--", "cat", "private.txt"])
            .output()
            .expect("cat");
        assert!(stdout(&o).contains("root-only-content"), "{}", text(&o));
        let o = d
            .cmd(&env)
            .args(["fs", "rm", "gone.txt"])
            .output()
            .expect("rm");
        assert!(o.status.success(), "{}", text(&o));
        let seq = log_records(&env)
            .into_iter()
            .find(|r| r["tool"] == "exec" && r["args"][0] == "cat")
            .and_then(|r| r["seq"].as_u64())
            .expect("root's record");
        let run = |in_users: bool, args: &[&str]| {
            other_uid(&env, &d, in_users)
                .args(args)
                .output()
                .expect("as 65534")
        };
        // Records: not listed, not shown.
        for args in [
            &["--json", "log", "query", "--limit", "0"][..],
            &["--json", "log", "tail", "-n", "1000"][..],
        ] {
            let o = run(false, args);
            assert!(o.status.success(), "{}", text(&o));
            let out = stdout(&o);
            assert!(
                !out.contains("\"uid\":0") && !out.contains("\"uid\": 0"),
                "{args:?} shows root's records: {out}"
            );
        }
        let o = run(false, &["log", "show", &seq.to_string()]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(!stdout(&o).contains("root-only-content"), "{}", text(&o));
        // History and trash: none of root's.
        let o = run(false, &["--json", "history", "--all"]);
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["changes"], serde_json::json!([]), "{v}");
        let o = run(false, &["--json", "trash", "list"]);
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["items"], serde_json::json!([]), "{v}");
        // Maintenance: refused, and root's trash is still there.
        for args in [
            &["trash", "empty"][..],
            &["log", "gc"][..],
            &["keys", "rotate"][..],
        ] {
            let o = run(false, args);
            assert_eq!(o.status.code(), Some(120), "{args:?}: {}", text(&o));
            assert!(stderr(&o).contains("admin"), "{}", text(&o));
        }
        let o = d
            .cmd(&env)
            .args(["--json", "trash", "list"])
            .output()
            .expect("list");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["items"].as_array().map(Vec::len), Some(1), "{v}");
        let denies = denies_of_other_uid(&env);
        for (tool, rule) in [
            ("log", "daemon.owner"),
            ("trash", "daemon.admin"),
            ("log", "daemon.admin"),
            ("keys", "daemon.admin"),
        ] {
            assert!(
                denies.iter().any(|(t, r)| t == tool && r.contains(rule)),
                "no deny of {tool} by {rule}: {denies:?}"
            );
        }
        // An auditor sees root's record and its output.
        let o = run(true, &["log", "show", &seq.to_string()]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("root-only-content"), "{}", text(&o));
    }
);

sandbox_test!(
    fn a_daemon_client_cannot_pick_a_policy_the_daemon_does_not_allow() {
        // Issue 24: a client chose `--policy permissive` (or GATEWAY_POLICY) and stepped
        // around the approval gate of the daemon's policy.
        let env = Env::new("ident-policy");
        let d = daemon_with_roles(
            &env,
            "standard",
            "allow_client_policy = [\"strict\", \"standard\"]\n",
        );
        let o = d
            .cmd(&env)
            .args(["--policy", "permissive", "exec", "--", "true"])
            .output()
            .expect("exec");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(stderr(&o).contains("allow_client_policy"), "{}", text(&o));
        let o = other_uid(&env, &d, false)
            .env("GATEWAY_POLICY", "permissive")
            .args(["exec", "--", "true"])
            .output()
            .expect("exec as 65534");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let o = d
            .cmd(&env)
            .args(["--policy", "strict", "exec", "--", "true"])
            .output()
            .expect("exec");
        assert!(o.status.success(), "{}", text(&o));
        let denies: Vec<_> = log_records(&env)
            .into_iter()
            .filter(|r| {
                r["decision"]["effect"] == "deny"
                    && r["decision"]["rules"][0] == "daemon.client_policy"
            })
            .collect();
        assert_eq!(denies.len(), 2, "{denies:?}");
    }
);

sandbox_test!(
    fn another_uid_cannot_undo_or_restore_what_a_daemon_client_changed() {
        // Issue 24: `undo ID` and `trash restore NAME` took any change of the journal, so a
        // client of a daemon running as its own user (uid 65534 here) reverted what the
        // daemon's user changed and brought back what it removed. Client: uid 65533.
        let env = Env::new("ident-undo");
        std::fs::write(env.ws.join("a.txt"), "one\n").expect("write");
        std::fs::write(env.ws.join("b.txt"), "bee\n").expect("write");
        env.give_to_nobody();
        std::fs::set_permissions(&env.ws, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let socket = env.root.join("gw.sock");
        let mut d = env
            .nobody()
            .args(["serve", "--policy", "standard", "--socket"])
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve");
        let up = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        });
        assert!(up, "the daemon did not listen");
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))
            .expect("chmod socket");
        let as_uid = |uid: u32, args: &[&str]| {
            let mut c = env.raw("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .args(["--clear-groups", "--", BIN])
                .env("GATEWAY_SOCKET", &socket)
                .stdin(Stdio::null())
                .args(args)
                .output()
                .expect("gateway")
        };
        // The daemon's user changes a.txt and removes b.txt to the trash.
        let o = as_uid(65534, &["fs", "write", "a.txt", "--content", "two\n"]);
        assert!(o.status.success(), "{}", text(&o));
        let o = as_uid(65534, &["fs", "rm", "b.txt"]);
        assert!(o.status.success(), "{}", text(&o));
        let o = as_uid(65534, &["--json", "history", "--all"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("history");
        let id = v["changes"][0]["change"]["id"].as_u64().expect("change id");
        let o = as_uid(65534, &["--json", "trash", "list"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("trash");
        let name = v["items"][0]["name"]
            .as_str()
            .expect("trash item")
            .to_string();
        // uid 65533 can neither undo the write nor restore the removal.
        let o = as_uid(65533, &["undo", &id.to_string()]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(
            stderr(&o).contains("belongs to another user"),
            "{}",
            text(&o)
        );
        // Another user's trash item is, for it, no item at all (issue 35: "belongs to another
        // user" told it the names of what root removed).
        let o = as_uid(65533, &["trash", "restore", &name]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("no trash item"), "{}", text(&o));
        // Its own change, then a newer one of the daemon's user in the same workspace: its
        // plain `undo` takes its own (passing over the other's, not refused by it), and it
        // cannot pass over the other's with `undo --skip`.
        let o = as_uid(65533, &["fs", "write", "c.txt", "--content", "mine\n"]);
        assert!(o.status.success(), "{}", text(&o));
        let o = as_uid(65534, &["fs", "write", "a.txt", "--content", "three\n"]);
        assert!(o.status.success(), "{}", text(&o));
        let o = as_uid(65534, &["--json", "history", "--all"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("history");
        let newest = v["changes"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(|c| c["change"]["id"].as_u64())
            .expect("newest change");
        let o = as_uid(65533, &["undo", "--skip", &newest.to_string()]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let o = as_uid(65533, &["undo"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            !env.ws.join("c.txt").exists(),
            "its own change was not undone"
        );
        let _ = d.kill();
        let _ = d.wait();
        assert_eq!(
            std::fs::read_to_string(env.ws.join("a.txt")).expect("a.txt"),
            "three\n"
        );
        assert!(!env.ws.join("b.txt").exists(), "uid 65533 restored b.txt");
        let denies: Vec<_> = log_records(&env)
            .into_iter()
            .filter(|r| r["caller"]["uid"] == 65533 && r["decision"]["rules"][0] == "daemon.owner")
            .collect();
        assert_eq!(denies.len(), 2, "{denies:?}");
    }
);

sandbox_test!(
    fn a_daemon_client_cannot_reload_its_session_to_a_policy_the_daemon_does_not_allow() {
        // Issue 24 attack: `gateway policy reload permissive` (with a GATEWAY_SESSION) was
        // not checked against the daemon's `allow_client_policy`: it said "policy permissive
        // in force for session ..." and recorded the reload as allowed.
        let env = Env::new("ident-reload");
        let d = daemon_with_roles(
            &env,
            "standard",
            "allow_client_policy = [\"strict\", \"standard\"]\n",
        );
        let o = other_uid(&env, &d, false)
            .env("GATEWAY_SESSION", "mine")
            .args(["policy", "reload", "permissive"])
            .output()
            .expect("reload as 65534");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(stderr(&o).contains("allow_client_policy"), "{}", text(&o));
        assert!(!stdout(&o).contains("in force"), "{}", text(&o));
        let denies = denies_of_other_uid(&env);
        assert!(
            denies
                .iter()
                .any(|(t, r)| t == "policy" && r.contains("daemon.client_policy")),
            "{denies:?}"
        );
        // A policy it may pick still reloads.
        let o = other_uid(&env, &d, false)
            .env("GATEWAY_SESSION", "mine")
            .args(["policy", "reload", "strict"])
            .output()
            .expect("reload as 65534");
        assert!(o.status.success(), "{}", text(&o));
    }
);

sandbox_test!(
    fn a_daemon_sessions_pinned_policy_is_its_owners_and_a_reload_is_in_force() {
        // Issue 24 attack: pinned policies were keyed by the session's name only, so uid
        // 65534 naming root's session reloaded root's pin from a file rewritten since (root's
        // next command obeyed what the other uid chose to load); and `policy reload NAME`
        // pinned NAME under its own name while the session's calls kept finding the old one
        // ("in force" for a policy never applied).
        let env = Env::new("pin-owner");
        let d = Daemon::start(&env, "standard", &[]);
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
            .expect("chmod socket");
        let pf = env.root.join("mine.toml");
        let deny_curl = "extends = \"standard\"\n[[rule]]\nid = \"deny-curl-here\"\neffect = \"deny\"\ntools = [\"exec\"]\ncommand = [\"curl\"]\nreason = \"this test denies curl\"\n";
        std::fs::write(&pf, deny_curl).expect("policy");
        std::fs::set_permissions(&pf, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let pf = pf.to_str().expect("utf-8").to_string();
        let root_call = |session: &str, args: &[&str]| {
            d.cmd(&env)
                .env("GATEWAY_SESSION", session)
                .args(args)
                .output()
                .expect("gateway")
        };
        let curl = ["exec", "--policy", pf.as_str(), "--", "curl", "--version"];
        let o = root_call("shared-pin", &curl);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        // The file now allows curl; uid 65534 reloads "the session" from it.
        std::fs::write(&pf, "extends = \"standard\"\n").expect("policy");
        let o = env
            .nobody()
            .current_dir(&env.outside)
            .env("GATEWAY_SOCKET", &d.socket)
            .env("GATEWAY_SESSION", "shared-pin")
            .args(["policy", "reload", "--policy", pf.as_str()])
            .output()
            .expect("gateway as 65534");
        assert!(o.status.success(), "{}", text(&o));
        // Root's session still obeys the copy it pinned.
        let o = root_call("shared-pin", &curl);
        assert_eq!(
            o.status.code(),
            Some(120),
            "root's pin was reloaded by another uid: {}",
            text(&o)
        );
        // `policy reload NAME` is in force for the session's later calls.
        let plain = ["exec", "--", "curl", "--version"];
        let o = root_call("renamed", &plain);
        assert_ne!(
            o.status.code(),
            Some(120),
            "standard allows curl: {}",
            text(&o)
        );
        let o = root_call("renamed", &["policy", "reload", "strict"]);
        assert!(o.status.success(), "{}", text(&o));
        let o = root_call("renamed", &plain);
        assert_eq!(
            o.status.code(),
            Some(120),
            "the reloaded strict is not in force: {}",
            text(&o)
        );
    }
);

sandbox_test!(
    fn pending_shows_destructive_commands_as_high_risk() {
        // `rm -rf`, `rm -r`, `git reset --hard` and `find -delete` cannot be taken back:
        // `pending` shows them "high" (they were "medium"); a bulk chmod stays "medium".
        let env = Env::new("daemon-risk");
        let pf = env.policy_file("extends = \"standard\"\n[approval]\ntimeout = \"60s\"\n");
        let d = Daemon::start(&env, &pf, &[]);
        std::fs::create_dir_all(env.ws.join("build")).expect("mkdir");
        env.write("build/keep.txt", "k");
        for (script, risk) in [
            ("rm -rf build", "high"),
            ("rm -r build", "high"),
            ("git reset --hard", "high"),
            ("find build -name '*.txt' -delete", "high"),
            ("chmod -R 777 .", "medium"),
        ] {
            let ch = d
                .cmd(&env)
                .args(["exec", "--", "sh", "-c", script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn");
            let mut p: Vec<serde_json::Value> = Vec::new();
            for _ in 0..500 {
                let o = d
                    .cmd(&env)
                    .args(["--json", "pending"])
                    .output()
                    .expect("pending");
                assert!(o.status.success(), "{}", text(&o));
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
                p = v["requests"].as_array().cloned().expect("requests");
                if !p.is_empty() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert_eq!(p.len(), 1, "{script}: {p:?}");
            assert_eq!(p[0]["risk"], risk, "{script}: {p:?}");
            let id = p[0]["id"].as_u64().expect("id").to_string();
            let o = d.cmd(&env).args(["deny", &id]).output().expect("deny");
            assert!(o.status.success(), "{}", text(&o));
            let o = ch.wait_with_output().expect("wait");
            assert_eq!(o.status.code(), Some(121), "{script}: {}", text(&o));
        }
        assert!(env.ws.join("build/keep.txt").exists());
        let (st, err) = d.stop();
        assert!(st.success(), "{st}: {err}");
    }
);

sandbox_test!(
    fn log_verify_passes_while_a_daemon_serves_a_burst() {
        // The daemon signs its records in batches (every 1,000 or every second). `log verify`
        // during and right after a burst of calls — through the daemon, and by a one-shot CLI
        // beside it (GATEWAY_SOCKET=) — must pass on the honest log, and still catch an edit.
        let env = Env::new("verify-burst");
        let d = Daemon::start(&env, "standard", &[]);
        let verify_daemon = || {
            d.cmd(&env)
                .args(["log", "verify"])
                .output()
                .expect("verify")
        };
        let verify_local = || env.cmd().args(["log", "verify"]).output().expect("verify");
        let burst = |clients: usize, calls: usize| {
            std::thread::scope(|s| {
                let workers: Vec<_> = (0..clients)
                    .map(|_| {
                        s.spawn(|| {
                            for _ in 0..calls {
                                let o = d
                                    .cmd(&env)
                                    .args(["exec", "--", "true"])
                                    .output()
                                    .expect("exec");
                                assert!(o.status.success(), "{}", text(&o));
                            }
                        })
                    })
                    .collect();
                // While it runs: verify again and again, both ways.
                let mut during = 0;
                while !workers.iter().all(|w| w.is_finished()) {
                    for o in [verify_daemon(), verify_local()] {
                        assert!(o.status.success(), "verify during the burst: {}", text(&o));
                    }
                    during += 1;
                }
                during
            })
        };
        let during = burst(4, 25);
        assert!(during > 0, "no verify ran during the burst");
        // Right after it: the newest records are in no checkpoint yet.
        let o = verify_local();
        assert!(
            o.status.success(),
            "verify right after the burst: {}",
            text(&o)
        );
        let out = stdout(&o);
        assert!(out.contains("the newest checkpoint covers"), "{out}");
        let o = verify_daemon();
        assert!(o.status.success(), "{}", text(&o));
        let records = log_records(&env);
        assert!(records.len() >= 100, "{} records", records.len());

        // An edited record is still caught, checkpointed or in the daemon's unsigned tail.
        let log = env.state.join("audit/log.jsonl");
        let put = |at: usize, b: &[u8]| {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&log)
                .expect("open log");
            std::os::unix::fs::FileExt::write_at(&f, b, at as u64).expect("edit");
        };
        // Sets the last byte of the first `true"` in record `line_no` (1-based) to `to`, in
        // place (the same length; the daemon appends at the end); returns where.
        let edit = |line_no: usize, to: &[u8]| {
            let bytes = std::fs::read(&log).expect("log");
            let start: usize = bytes
                .split_inclusive(|b| *b == b'\n')
                .take(line_no - 1)
                .map(<[u8]>::len)
                .sum();
            let at = start
                + bytes[start..]
                    .windows(5)
                    .position(|w| w == b"true\"")
                    .expect("a record naming true");
            put(at + 3, to);
            at + 3
        };
        // A record in the middle, long signed.
        let middle = records.len() / 2;
        let at = edit(middle, b"3");
        for o in [verify_local(), verify_daemon()] {
            assert_eq!(o.status.code(), Some(1), "edit not caught: {}", text(&o));
            assert!(stderr(&o).contains("FAILED"), "{}", text(&o));
        }
        put(at, b"e");
        let o = verify_local();
        assert!(o.status.success(), "the edit undone: {}", text(&o));
        // A record of the daemon's unsigned tail: the one-shot verify waits for the daemon's
        // checkpoint, which commits to the record as the daemon wrote it.
        burst(2, 3);
        let n = log_records(&env).len();
        edit(n, b"3");
        let o = verify_local();
        assert_eq!(
            o.status.code(),
            Some(1),
            "tail edit not caught: {}",
            text(&o)
        );
    }
);

sandbox_test!(
    fn daemon_sends_fs_results_typed_and_the_client_renders_them() {
        // Issue 35: a file tool's result crosses the daemon as the done frame's typed report
        // (`outcome.kind` "fs"), not as text on the call's stdout; the client renders it, the
        // same text as the embedded broker's.
        let env = Env::new("daemon-fs-typed");
        let d = Daemon::start(&env, "standard", &[]);
        let path_home = serde_json::json!([
            ["PATH", "/usr/bin:/bin"],
            ["HOME", env.home.display().to_string()]
        ]);
        let request =
            |body: serde_json::Value| call_message(&env.ws, path_home.clone(), None, false, &body);
        let f = wire(
            &env,
            &d.socket,
            false,
            &request(serde_json::json!({"fs": {"mkdir": {"path": "made", "parents": false}}})),
            false,
        );
        assert!(env.ws.join("made").is_dir(), "{f:?}");
        assert_eq!(
            output_and_exit(&f, "stdout"),
            (String::new(), Some(0)),
            "{f:?}"
        );
        let done = f
            .iter()
            .find(|f| f["type"] == "done")
            .expect("a done frame");
        let outcome = &done["report"]["outcome"];
        assert_eq!(outcome["kind"], "fs", "{done}");
        let tool = &outcome["result"]["tool"];
        assert_eq!(tool["output"]["kind"], "done", "{done}");
        // The output travels once: typed, beside the rest of the report.
        assert!(tool["report"].get("output").is_none(), "{done}");
        assert_eq!(tool["report"]["decision"]["effect"], "allow", "{done}");
        assert!(tool["report"]["audit_seq"].as_u64().is_some(), "{done}");
        // A second change, made through the daemon by the CLI.
        let o = d
            .cmd(&env)
            .args(["fs", "mkdir", "made2"])
            .output()
            .expect("mkdir");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).is_empty(), "{}", text(&o));
        assert!(stderr(&o).contains("(change 2;"), "{}", text(&o));
        // `history`: the changes, typed.
        let f = wire(
            &env,
            &d.socket,
            false,
            &request(serde_json::json!({"history": {"all": false, "limit": 0, "since": null}})),
            false,
        );
        assert_eq!(
            output_and_exit(&f, "stdout"),
            (String::new(), Some(0)),
            "{f:?}"
        );
        let done = f
            .iter()
            .find(|f| f["type"] == "done")
            .expect("a done frame");
        let outcome = &done["report"]["outcome"];
        assert_eq!(outcome["kind"], "fs", "{done}");
        let changes = outcome["result"]["history"]["changes"]
            .as_array()
            .expect("changes");
        assert_eq!(changes.len(), 2, "{done}");
        assert_eq!(changes[0]["change"]["tool"], "fs.mkdir", "{done}");
        // Rendered by the client: the same text, on the same streams, as without a daemon.
        let seq = regex::Regex::new(r#""audit_seq":\d+"#).expect("regex");
        for args in [
            &["history"][..],
            &["history", "--json"],
            &["history", "--limit", "1"],
            &["fs", "ls"],
            &["fs", "ls", "--json"],
            &["trash", "list"],
        ] {
            let a = env.cmd().args(args).output().expect("embedded");
            let b = d.cmd(&env).args(args).output().expect("through the daemon");
            assert_eq!(
                a.status.code(),
                b.status.code(),
                "{args:?}: {}\n---\n{}",
                text(&a),
                text(&b)
            );
            // Each call is recorded: the record's number differs, nothing else.
            assert_eq!(
                seq.replace_all(&stdout(&a), "N"),
                seq.replace_all(&stdout(&b), "N"),
                "{args:?}"
            );
            assert_eq!(stderr(&a), stderr(&b), "{args:?}");
            assert!(
                !stdout(&a).is_empty() || args[0] == "trash",
                "{args:?}: {}",
                text(&a)
            );
        }
    }
);

sandbox_test!(
    fn a_log_result_crosses_the_daemon_typed() {
        // Issue 35: `log query` and `log show` answer with a typed report (kind `log`, the
        // records as data) as the call's last message, nothing on the output streams; the
        // client renders it, as the same text and JSON as without a daemon.
        let env = Env::new("log-typed");
        let d = Daemon::start(&env, "standard", &[]);
        let o = d
            .cmd(&env)
            .args(["exec", "--", "echo", "typed-hello"])
            .output()
            .expect("echo");
        assert!(o.status.success(), "{}", text(&o));
        let seq = log_records(&env)
            .into_iter()
            .find(|r| r["tool"] == "exec" && r["args"][0] == "echo")
            .and_then(|r| r["seq"].as_u64())
            .expect("the echo's record");
        let request = |body: serde_json::Value| {
            let path = serde_json::json!([["PATH", "/usr/bin:/bin"]]);
            call_message(&env.ws, path, Some("log-typed"), false, &body)
        };
        let done = |frames: &[serde_json::Value]| {
            assert!(
                !frames.iter().any(|f| f["type"] == "output"),
                "a typed result streamed output: {frames:?}"
            );
            let done = frames
                .iter()
                .find(|f| f["type"] == "done")
                .unwrap_or_else(|| panic!("no done frame: {frames:?}"));
            assert_eq!(done["report"]["exit"], 0, "{done}");
            assert_eq!(done["report"]["outcome"]["kind"], "log", "{done}");
            done["report"]["outcome"]["result"].clone()
        };
        let query = request(
            serde_json::json!({"log": {"query": {"filter": {"tool": "exec"},
            "limit": 0}}}),
        );
        let r = done(&wire(&env, &d.socket, false, &query, false));
        assert_eq!(r["command"], "query", "{r}");
        let records = r["result"]["records"].as_array().expect("records");
        let echo = records
            .iter()
            .find(|x| x["seq"] == seq)
            .unwrap_or_else(|| panic!("record {seq} not in {r}"));
        assert_eq!(
            echo["args"],
            serde_json::json!(["echo", "typed-hello"]),
            "{r}"
        );
        assert_eq!(echo["decision"]["effect"], "allow", "{r}");
        let show = request(serde_json::json!({"log": {"show": {"seq": seq,
            "output_limit": 65536}}}));
        let r = done(&wire(&env, &d.socket, false, &show, false));
        assert_eq!(r["command"], "show", "{r}");
        assert_eq!(r["shown"]["record"]["seq"], seq, "{r}");
        assert_eq!(r["shown"]["artifacts"][0]["stream"], "stdout", "{r}");
        assert_eq!(
            r["shown"]["artifacts"][0]["content"], "typed-hello\n",
            "{r}"
        );
        // Rendered by the client: the same text and JSON as without a daemon.
        let seq = seq.to_string();
        for args in [
            &["log", "query", "--tool", "exec"][..],
            &["--json", "log", "query", "--tool", "exec"][..],
            &["log", "show", &seq][..],
            &["--json", "log", "show", &seq][..],
            &["log", "tail", "-n", "1"][..],
            &["keys", "export"][..],
            &["--json", "keys", "export"][..],
            &["log", "show", "999999"][..],
            &["--json", "log", "show", "999999"][..],
            &["policy", "explain", "--credentials"][..],
            &["--json", "policy", "explain", "--credentials"][..],
        ] {
            let through = d.cmd(&env).args(args).output().expect("through the daemon");
            let here = env.cmd().args(args).output().expect("without a daemon");
            assert_eq!(through.status.code(), here.status.code(), "{args:?}");
            assert_eq!(stdout(&through), stdout(&here), "{args:?}: stdout");
            assert_eq!(stderr(&through), stderr(&here), "{args:?}: stderr");
        }
        let o = d
            .cmd(&env)
            .args(["log", "show", &seq])
            .output()
            .expect("show");
        assert!(stdout(&o).contains("typed-hello"), "{}", text(&o));
    }
);

sandbox_test!(
    fn a_report_larger_than_a_frame_crosses_the_daemon_whole() {
        // Issue 35: a call's result is its typed report, sent as the call's last message. A
        // report larger than a frame (8 MiB: `fs read` of a 10 MB file, as text and as JSON)
        // goes in pieces and is rendered by the client as the embedded broker renders it.
        let env = Env::new("daemon-big-report");
        let mut text = String::new();
        for i in 0..150_000 {
            text.push_str(&format!("line {i} {}\n", "x".repeat(60)));
        }
        std::fs::write(env.ws.join("big.txt"), &text).expect("write");
        // A report of quotes: its JSON text doubles again when a piece of it is carried as a
        // JSON string (a piece of 4 MiB of `\"` once made a frame over the limit).
        std::fs::write(env.ws.join("quotes.txt"), "\"".repeat(5_000_000) + "\n").expect("write");
        let d = Daemon::start(&env, "standard", &[]);
        for (file, json) in [
            ("big.txt", false),
            ("big.txt", true),
            ("quotes.txt", false),
            ("quotes.txt", true),
        ] {
            let mut args = vec!["fs", "read", file];
            args.extend(json.then_some("--json"));
            let alone = &env.gw(&args);
            assert!(alone.status.success(), "{}", text_of(alone));
            if json {
                assert!(alone.stdout.len() > 8 << 20, "{}", alone.stdout.len());
            }
            let o = d.cmd(&env).args(&args).output().expect("run");
            assert!(
                o.status.success(),
                "--json {json}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            if json {
                // The record's seq differs (each call is recorded); the rest is the same.
                let mut a: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
                let mut b: serde_json::Value = serde_json::from_slice(&alone.stdout).expect("json");
                a["audit_seq"] = 0.into();
                b["audit_seq"] = 0.into();
                assert!(a == b, "the report through the daemon differs");
            } else {
                assert!(
                    o.stdout == alone.stdout,
                    "the text through the daemon differs"
                );
            }
        }
    }
);

fn text_of(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout[..o.stdout.len().min(2000)]),
        String::from_utf8_lossy(&o.stderr)
    )
}

sandbox_test!(
    fn every_request_answers_with_its_typed_report_through_the_daemon() {
        // Issue 35: beneath every front end a call returns a typed report; through the
        // daemon it is the call's last message, of the request's kind, and only exec's own
        // output (and `log tail -f`, which follows) streams. One request of every kind.
        let env = Env::new("daemon-every-report");
        std::fs::write(env.ws.join("x"), "a\n").expect("write");
        std::fs::write(env.ws.join("a"), "moved\n").expect("write");
        let d = Daemon::start(&env, "permissive", &[]);
        let path_home = serde_json::json!([
            ["PATH", "/usr/bin:/bin"],
            ["HOME", env.home.display().to_string()]
        ]);
        let request = |body: &serde_json::Value| {
            call_message(
                &env.ws,
                path_home.clone(),
                Some("every-report"),
                false,
                body,
            )
        };
        let j = |s: &str| -> serde_json::Value { serde_json::from_str(s).expect(s) };
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (j(r#""pending""#), "approval"),
            (
                j(r#"{"answer": {"id": 999999, "approve": true, "always_for_session": false}}"#),
                "error",
            ),
            (
                j(r#"{"history": {"all": false, "limit": 20, "since": null}}"#),
                "fs",
            ),
            (j(r#"{"trash": "list"}"#), "fs"),
            (
                j(r#"{"trash": {"restore": {"name": "nothing-here"}}}"#),
                "error",
            ),
            (
                j(
                    r#"{"undo": {"id": null, "all": false, "action": {"undo": {"dry_run": true, "force": false}}}}"#,
                ),
                "*",
            ),
            (
                j(r#"{"undo": {"id": null, "all": false, "action": "skip"}}"#),
                "*",
            ),
            (
                j(r#"{"log": {"show": {"seq": 1, "output_limit": 65536}}}"#),
                "log",
            ),
            (
                j(r#"{"log": {"query": {"filter": {}, "limit": 5}}}"#),
                "log",
            ),
            (
                j(r#"{"log": {"verify": {"anchor": null, "key": null}}}"#),
                "log",
            ),
            (
                j(r#"{"log": {"tail": {"lines": 3, "follow": false}}}"#),
                "log",
            ),
            (j(r#"{"log": {"checkpoint": {"export": false}}}"#), "log"),
            (j(r#"{"keys": "export"}"#), "log"),
            (
                j(
                    r#"{"fs": {"read": {"path": "x", "offset": null, "limit": null, "binary": false}}}"#,
                ),
                "fs",
            ),
            (j(r#"{"fs": {"ls": {"path": null}}}"#), "fs"),
            (
                j(r#"{"fs": {"glob": {"pattern": "*", "path": null}}}"#),
                "fs",
            ),
            (
                j(
                    r#"{"fs": {"grep": {"regex": "a", "path": null, "glob": null, "context": 0, "ignore_case": false, "mode": "content", "max": 500}}}"#,
                ),
                "fs",
            ),
            (j(r#"{"fs": {"probe": {"path": "x"}}}"#), "fs"),
            (
                j(r#"{"fs": {"mkdir": {"path": "d", "parents": false}}}"#),
                "fs",
            ),
            (
                j(r#"{"fs": {"write": {"path": "y", "content": {"text": "hi"}, "diff": false}}}"#),
                "fs",
            ),
            (
                j(
                    r#"{"fs": {"edit": {"path": "x", "edits": [{"replace": {"old": "a", "new": "b", "all": false}}], "edits_from": null, "dry_run": false, "diff": false}}}"#,
                ),
                "fs",
            ),
            (j(r#"{"fs": {"mv": {"src": "a", "dst": "b"}}}"#), "fs"),
            (
                j(r#"{"fs": {"rm": {"path": "b", "recursive": false, "permanent": false}}}"#),
                "fs",
            ),
            (j(r#"{"fs": {"cd": {"path": "d"}}}"#), "fs"),
            (
                j(
                    r#"{"scan": {"paths": ["."], "format": "text", "redact": false, "baseline": null, "exclude": [], "no_ignore": false, "min_confidence": "low"}}"#,
                ),
                "scan",
            ),
            (j(r#"{"policy": "list"}"#), "policy"),
            (
                j(r#"{"policy": {"check": {"file": "missing.toml"}}}"#),
                "error",
            ),
            (
                j(r#"{"policy": {"explain": {"command": ["true"], "credentials": false}}}"#),
                "policy",
            ),
            (
                j(r#"{"policy": {"explain": {"command": [], "credentials": true}}}"#),
                "credentials",
            ),
            (j(r#"{"policy": {"reload": {"name": null}}}"#), "policy"),
            (
                j(r#"{"tool": {"name": "read_file", "args": {"path": "x"}, "roots": "policy"}}"#),
                "tool",
            ),
            (
                j(
                    r#"{"exec": {"argv": ["echo", "ran"], "timeout": null, "env": [], "snapshot": null, "stdin": null}}"#,
                ),
                "exec",
            ),
            (
                j(r#"{"sh": {"argv": ["/bin/sh", "-c", "echo ran"]}}"#),
                "exec",
            ),
            (j(r#"{"keys": "rotate"}"#), "log"),
            (j(r#"{"log": "gc"}"#), "log"),
        ];
        for (body, kind) in &cases {
            let f = wire(&env, &d.socket, false, &request(body), false);
            let done = f
                .iter()
                .find(|f| f["type"] == "done")
                .unwrap_or_else(|| panic!("{body}: no done frame: {f:?}"));
            let got = done["report"]["outcome"]["kind"].as_str().unwrap_or("");
            assert!(
                got != "streamed" && (*kind == "*" || got == *kind),
                "{body}: a report of kind {got:?}, not {kind:?}: {done}"
            );
            let streamed: String = f
                .iter()
                .filter(|f| f["type"] == "output" && f["stream"] == "stdout")
                .filter_map(|f| f["text"].as_str())
                .collect();
            if *kind == "exec" {
                assert_eq!(streamed, "ran\n", "{body}: {f:?}");
            } else {
                assert_eq!(streamed, "", "{body}: its result streamed: {f:?}");
            }
        }
    }
);
