//! One life per call (issue 35): a call ends when its command ends, its deadline passes, its
//! client goes away or its server stops — whichever comes first — and is then recorded once;
//! durations are bounded where they are parsed. Each test drives the real binary (the daemon,
//! its clients, the MCP server) and would hang, or find no record, on a daemon that let a
//! call outlive its caller.

use crate::util::*;
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// One frame of the daemon's protocol: a big-endian length, then the JSON.
fn frame(v: &serde_json::Value) -> Vec<u8> {
    let body = v.to_string().into_bytes();
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend(body);
    f
}

/// The frames in `buf`.
fn frames(mut buf: &[u8]) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let n = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if buf.len() < 4 + n {
            break;
        }
        out.push(serde_json::from_slice(&buf[4..4 + n]).expect("a frame"));
        buf = &buf[4 + n..];
    }
    out
}

/// A call of `body` to the daemon at `socket`, its output relayed as frames, from the
/// workspace of `env`.
fn frames_request(env: &Env, body: serde_json::Value) -> Vec<u8> {
    let path_home = serde_json::json!([
        ["PATH", "/usr/bin:/bin"],
        ["HOME", env.home.display().to_string()]
    ]);
    frame(&call_message(&env.ws, path_home, None, false, &body))
}

/// Waits up to `limit` for `child` to end; kills it (and fails) if it does not.
fn wait_or_kill(
    child: &mut std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The records of `tool`.
fn records_of(env: &Env, tool: &str) -> Vec<serde_json::Value> {
    log_records(env)
        .into_iter()
        .filter(|r| r["tool"] == tool)
        .collect()
}

/// Within `limit` of now, a call through the daemon `d` is served (not refused as busy):
/// how long it took until one was.
fn served_within(env: &Env, d: &Daemon, limit: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let asked = t.elapsed();
        let o = d
            .cmd(env)
            .args(["policy", "list"])
            .output()
            .expect("a new call");
        if o.status.success() {
            return asked;
        }
        assert!(
            stderr(&o).contains("busy"),
            "the new call failed otherwise: {}",
            text(&o)
        );
        assert!(
            t.elapsed() < limit,
            "the daemon still refuses new calls {:?} later: {}",
            t.elapsed(),
            text(&o)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A JSON-RPC session with `gateway mcp` (no daemon): the answers to `calls` (tools/call
/// params, ids 2, 3, …), in order of id.
fn mcp_calls(env: &Env, policy: &str, calls: &[serde_json::Value]) -> Vec<serde_json::Value> {
    let mut child = env
        .cmd()
        .args(["--policy", policy, "mcp"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gateway mcp");
    let mut input = child.stdin.take().expect("stdin");
    let mut msgs = vec![
        serde_json::json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
        serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    ];
    for (i, c) in calls.iter().enumerate() {
        msgs.push(
            serde_json::json!({"jsonrpc":"2.0","id": i + 2,"method":"tools/call","params": c}),
        );
    }
    for m in msgs {
        writeln!(input, "{m}").expect("write");
    }
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut answers: Vec<Option<serde_json::Value>> = vec![None; calls.len()];
    let t = Instant::now();
    while answers.iter().any(Option::is_none) {
        let left = Duration::from_secs(30).saturating_sub(t.elapsed());
        let Ok(line) = rx.recv_timeout(left) else {
            let _ = child.kill();
            let mut err = String::new();
            let _ = child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut err);
            panic!("the MCP server answered {answers:?} and then nothing (stderr: {err})");
        };
        let v: serde_json::Value = serde_json::from_str(&line).expect("json-rpc");
        if let Some(id) = v["id"].as_u64().filter(|&i| i >= 2) {
            answers[id as usize - 2] = Some(v);
        }
    }
    drop(input);
    let _ = child.kill();
    let _ = child.wait();
    answers.into_iter().flatten().collect()
}

sandbox_test! {
    fn an_oversized_timeout_is_refused_with_its_rule_and_recorded_in_every_front_end() {
        // A request may only narrow the policy's timeout (strict: 10m): a longer one — 11
        // minutes, or 1e19 seconds, which once overflowed the deadline after the command had
        // started — is refused before anything runs, recorded as a deny naming
        // `limits.timeout`: from the CLI, through the daemon (its command line and its typed
        // exec), and from the MCP server (whose 1e30 once panicked while parsing).
        let env = Env::new("life-timeout");
        let refused = |what: &str| {
            let recs = records_of(&env, "exec");
            let last = recs.last().unwrap_or_else(|| panic!("{what}: no exec record"));
            assert_eq!(last["decision"]["effect"], "deny", "{what}: {last}");
            assert_eq!(last["decision"]["rules"], serde_json::json!(["limits.timeout"]), "{what}: {last}");
            assert!(last["exit_code"].is_null() && last["enforcement"].is_null(), "{what}: ran: {last}");
            assert!(!env.ws.join("ran").exists(), "{what}: the command ran");
            last.clone()
        };
        for t in ["11m", "1e19"] {
            let o = env
                .cmd()
                .args(["exec", "--policy", "strict", "--timeout", t, "--", "touch", "ran"])
                .output()
                .expect("run");
            assert_eq!(o.status.code(), Some(120), "--timeout {t}: {}", text(&o));
            assert!(stderr(&o).contains("longer than 10m (the policy's [sandbox.limits] timeout)"), "{}", text(&o));
            refused(&format!("cli --timeout {t}"));
        }
        // What the policy allows still runs, and a shorter timeout still stops the command.
        let o = env.exec("strict", &["true"]);
        assert!(o.status.success(), "{}", text(&o));
        let d = Daemon::start(&env, "strict", &[]);
        let o = d
            .cmd(&env)
            .args(["exec", "--policy", "strict", "--timeout", "1e19", "--", "touch", "ran"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let r = refused("daemon, command line");
        assert_eq!(r["caller"]["client"], "daemon", "{r}");
        let mut s = UnixStream::connect(&d.socket).expect("connect");
        s.write_all(&frames_request(&env, serde_json::json!({"exec": {"argv": ["touch", "ran"],
            "timeout": {"secs": u64::MAX, "nanos": 999_999_999}, "snapshot": null, "env": [],
            "stdin": null}})))
            .expect("send");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).expect("read");
        let f = frames(&buf);
        // The daemon's answer is the call's typed report: the refusal with its rule.
        let report = f.last().map(|f| f["report"].clone()).unwrap_or_default();
        assert_eq!(report["exit"], 120, "{f:?}");
        assert_eq!(report["outcome"]["kind"], "error", "{f:?}");
        assert_eq!(report["outcome"]["result"]["error"]["code"], "denied", "{f:?}");
        assert_eq!(report["outcome"]["result"]["refusal"]["rule"], "limits.timeout", "{f:?}");
        refused("daemon, typed exec");
        drop(d);
        for t in [1e19, 1e30, 601.0] {
            let a = mcp_calls(&env, "strict", &[serde_json::json!({"name": "exec",
                "arguments": {"command": "touch ran", "timeout": t}})]);
            assert_eq!(a[0]["result"]["isError"], true, "timeout {t}: {}", a[0]);
            assert!(a[0].to_string().contains("limits.timeout"), "timeout {t}: {}", a[0]);
            refused(&format!("mcp timeout {t}"));
        }
        // A policy's own timeout is bounded where it is parsed (7 days at most).
        let p = env.policy_file("extends = \"strict\"\n[sandbox.limits]\ntimeout = \"30d\"\n");
        let o = env.cmd().args(["policy", "check", &p]).output().expect("run");
        assert_eq!(o.status.code(), Some(123), "{}", text(&o));
        assert!(stderr(&o).contains("longer than the longest a run may have (7days)"), "{}", text(&o));
    }
}

sandbox_test! {
    fn a_killed_clients_log_tail_follow_frees_its_slot_within_a_second_and_is_recorded() {
        // `log tail -f`s fill a daemon of two places (and the four it keeps for its admin:
        // these clients are root); their clients are killed; within a second a new call is
        // served, and each follower's end is recorded (the daemon records a call it ended
        // that recorded nothing itself).
        const FOLLOWERS: usize = 2 + 4;
        let env = Env::new("life-tail");
        let d = Daemon::start(&env, "standard", &["--max-clients", "2"]);
        served_within(&env, &d, Duration::from_secs(5));
        let mut tails: Vec<_> = (0..FOLLOWERS)
            .map(|_| {
                let c = d
                    .cmd(&env)
                    .args(["log", "tail", "-f"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .expect("log tail -f");
                std::thread::sleep(Duration::from_millis(300));
                c
            })
            .collect();
        for c in &mut tails {
            assert!(c.try_wait().expect("wait").is_none(), "a follower ended by itself");
        }
        // Both are served: the daemon is full.
        let t = Instant::now();
        loop {
            let o = d.cmd(&env).args(["policy", "list"]).output().expect("run");
            if stderr(&o).contains("busy") {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "the followers never filled the daemon: {}", text(&o));
            std::thread::sleep(Duration::from_millis(50));
        }
        let killed = Instant::now();
        for c in &mut tails {
            c.kill().expect("kill the client");
            c.wait().expect("wait");
        }
        let took = served_within(&env, &d, Duration::from_secs(1));
        assert!(took < Duration::from_secs(1), "{took:?}");
        // Both followers' ends are recorded within the second.
        let ended = loop {
            let recs = records_of(&env, "daemon.call");
            let ended: Vec<_> = recs
                .into_iter()
                .filter(|r| r["args"].as_array().is_some_and(|a| a.iter().any(|x| x == "tail")))
                .collect();
            if ended.len() == FOLLOWERS {
                break ended;
            }
            assert!(killed.elapsed() < Duration::from_secs(1), "{ended:?}");
            std::thread::sleep(Duration::from_millis(50));
        };
        for r in &ended {
            assert_eq!(r["cancelled"], true, "{r}");
            assert!(r["decision"]["reasons"][0].as_str().is_some_and(|s| s.contains("the client went away")), "{r}");
            assert_eq!(r["caller"]["client"], "daemon", "{r}");
        }
        let o = env.gw(&["log", "verify"]);
        assert!(o.status.success(), "{}", text(&o));
    }
}

sandbox_test! {
    fn a_fifo_nobody_writes_named_as_a_policy_is_refused_at_once() {
        // `policy check FIFO` (and a FIFO as `--policy`) once waited in open() for a writer
        // that never came, through the daemon holding a slot after its client was gone. Now
        // a policy file is opened without blocking and a FIFO is refused as not a regular
        // file at once; the daemon's slots stay free.
        let env = Env::new("life-fifo");
        let fifo = env.root.join("policy.fifo");
        let st = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(st.success());
        let fifo = fifo.display().to_string();
        let d = Daemon::start(&env, "standard", &["--max-clients", "2"]);
        for args in [
            vec!["policy", "check", fifo.as_str()],
            vec!["exec", "--policy", fifo.as_str(), "--", "true"],
        ] {
            let mut c = d
                .cmd(&env)
                .args(&args)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn");
            let st = wait_or_kill(&mut c, Duration::from_secs(5), "a call naming a FIFO");
            let mut err = String::new();
            c.stderr.take().expect("stderr").read_to_string(&mut err).expect("read");
            assert_eq!(st.code(), Some(123), "{err}");
            assert!(err.contains("not a regular file"), "{err}");
        }
        let took = served_within(&env, &d, Duration::from_secs(1));
        assert!(took < Duration::from_secs(1), "{took:?}");
        // And the embedded CLI alike.
        let mut c = env
            .cmd()
            .args(["policy", "check", &fifo])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let st = wait_or_kill(&mut c, Duration::from_secs(5), "policy check FIFO");
        assert_eq!(st.code(), Some(123));
    }
}

sandbox_test! {
    fn a_fifo_read_for_a_killed_client_ends_with_the_call_and_is_recorded() {
        // Content read from a FIFO the caller names (`fs write --content-file`, `fs edit
        // --edits`, `scan --baseline`, `log verify --anchor`) is waited for as `cat` would,
        // but the wait ends with the call: four such calls fill a daemon of four slots; their
        // clients
        // are killed; within a second a new call is served, and each call is recorded once
        // (scan records itself with the error; the others the daemon records, cancelled).
        let env = Env::new("life-fiforead");
        let fifo = env.root.join("in.fifo");
        let st = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(st.success());
        let fifo = fifo.display().to_string();
        let d = Daemon::start(&env, "standard", &["--max-clients", "4"]);
        served_within(&env, &d, Duration::from_secs(5));
        env.write("y.txt", "y\n");
        let mut calls: Vec<_> = [
            vec!["fs", "write", "x.txt", "--content-file", fifo.as_str()],
            vec!["fs", "edit", "y.txt", "--edits", fifo.as_str()],
            vec!["scan", "--baseline", fifo.as_str(), "."],
            vec!["log", "verify", "--anchor", fifo.as_str()],
        ]
        .into_iter()
        .map(|args| {
            let c = d
                .cmd(&env)
                .args(&args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("spawn");
            std::thread::sleep(Duration::from_millis(500));
            c
        })
        .collect();
        for c in &mut calls {
            assert!(c.try_wait().expect("wait").is_none(), "a reader of the FIFO ended by itself");
        }
        let killed = Instant::now();
        for c in &mut calls {
            c.kill().expect("kill the client");
            c.wait().expect("wait");
        }
        let took = served_within(&env, &d, Duration::from_secs(1));
        assert!(took < Duration::from_secs(1), "{took:?}");
        loop {
            let recs = log_records(&env);
            let ended: Vec<_> = recs
                .iter()
                .filter(|r| r["tool"] == "daemon.call" && r["cancelled"] == true)
                .map(|r| r["args"][0].clone())
                .collect();
            let scan = recs.iter().find(|r| r["tool"] == "scan");
            if ended.len() == 3 && scan.is_some() {
                let fs = ended.iter().filter(|a| **a == "fs").count();
                assert!(fs == 2 && ended.contains(&"log".into()), "{ended:?}");
                let err = scan.and_then(|r| r["error"].as_str()).unwrap_or_default();
                assert!(err.contains("the call ended"), "{err}");
                assert!(!recs.iter().any(|r| r["tool"] == "daemon.call" && r["args"][0] == "scan"), "scan recorded twice");
                break;
            }
            assert!(killed.elapsed() < Duration::from_secs(1), "{recs:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!env.ws.join("x.txt").exists());
    }
}

/// The record of the one exec in `env`'s log, waited for up to `limit`.
fn exec_record_within(env: &Env, limit: Duration) -> serde_json::Value {
    let t = Instant::now();
    loop {
        if let Some(r) = records_of(env, "exec").pop() {
            return r;
        }
        assert!(
            t.elapsed() < limit,
            "no exec record {:?} after the call started",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a run that timed out with nobody reading its stdout recorded: the deadline, the
/// output the client did not take, and all of it stored.
fn assert_timed_out_undelivered(r: &serde_json::Value) {
    assert_eq!(r["timed_out"], true, "{r}");
    let ms = r["duration_ms"].as_f64().expect("duration");
    assert!((1900.0..4000.0).contains(&ms), "the deadline was 2 s: {r}");
    let undelivered = r["output_undelivered"].as_u64().unwrap_or(0);
    let produced = r["stdout"]["bytes"].as_u64().expect("stdout bytes");
    assert!(undelivered > 0 && undelivered <= produced, "{r}");
    assert!(
        r["stdout"]["artifact"].is_string(),
        "the output is kept: {r}"
    );
}

sandbox_test! {
    fn an_unread_stdout_fifo_holds_neither_the_deadline_nor_the_record() {
        // A client whose stdout is a FIFO its reader never reads (passed to the daemon with
        // SCM_RIGHTS): `--timeout 2` ends the run at 2 s all the same, the record is written
        // then and says how much output the client did not take (kept in the artifacts).
        let env = Env::new("life-stuck");
        let fifo = env.root.join("out.fifo");
        let st = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(st.success());
        // The reader: open, never read.
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .expect("open the reader");
        let writer = std::fs::OpenOptions::new().write(true).open(&fifo).expect("open the writer");
        let d = Daemon::start(&env, "standard", &[]);
        let started = Instant::now();
        let mut c = d
            .cmd(&env)
            .args(["exec", "--timeout", "2", "--", "sh", "-c", "sleep 1; yes"])
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let st = wait_or_kill(&mut c, Duration::from_secs(15), "exec --timeout 2 with an unread stdout");
        let took = started.elapsed();
        let mut err = String::new();
        c.stderr.take().expect("stderr").read_to_string(&mut err).expect("read");
        assert_eq!(st.code(), Some(124), "{err}");
        assert!(took < Duration::from_secs(6), "{took:?}");
        assert_timed_out_undelivered(&exec_record_within(&env, Duration::from_secs(1)));
        drop(reader);
    }
}

sandbox_test! {
    fn unread_frames_hold_neither_the_deadline_nor_the_record() {
        // A client that asks for its output as frames and stops reading them: the run still
        // ends at its deadline and is recorded while the client has not read a byte; the
        // connection is then closed within seconds, not held.
        let env = Env::new("life-frames");
        let d = Daemon::start(&env, "standard", &["--max-clients", "1"]);
        // Sent until it is taken (not refused as busy while the start-up probe's connection
        // ends); the command is silent for its first second, so waiting 300 ms for a refusal
        // reads nothing of its output.
        let t = Instant::now();
        let (mut s, started) = loop {
            let mut s = UnixStream::connect(&d.socket).expect("connect");
            let started = Instant::now();
            let _ = s.write_all(&frames_request(&env, serde_json::json!({"exec": {
                "argv": ["sh", "-c", "sleep 1; yes"], "timeout": {"secs": 2, "nanos": 0},
                "snapshot": null, "env": [], "stdin": null}})));
            s.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
            let mut b = Vec::new();
            match s.read_to_end(&mut b) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && b.is_empty() => {
                    break (s, started);
                }
                _ => {
                    let f = frames(&b);
                    assert!(f.iter().any(|f| f["message"].as_str().is_some_and(|m| m.contains("busy"))), "{f:?}");
                }
            }
            assert!(t.elapsed() < Duration::from_secs(5), "the daemon stays busy");
            std::thread::sleep(Duration::from_millis(50));
        };
        // Not a byte read until the record is there.
        assert_timed_out_undelivered(&exec_record_within(&env, Duration::from_secs(8)));
        assert!(started.elapsed() < Duration::from_secs(8));
        // The call is over: its slot (the daemon's only one) is free within seconds, though
        // the client still reads nothing.
        let took = served_within(&env, &d, Duration::from_secs(6));
        assert!(took < Duration::from_secs(6), "{took:?}");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut sink = [0u8; 1 << 16];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    }
}

sandbox_test! {
    fn sigterm_ends_and_records_the_daemons_calls_in_flight() {
        // SIGTERM with a command running and a follower: each call is ended at once (the
        // command killed), recorded — the exec by its own record (cancelled), the follower
        // by the daemon's — and the daemon exits without waiting out its grace.
        let env = Env::new("life-sigterm");
        let d = Daemon::start(&env, "standard", &[]);
        let mut run = d
            .cmd(&env)
            .args(["exec", "--", "sh", "-c", "echo started > started.txt; sleep 60"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("exec");
        let mut tail = d
            .cmd(&env)
            .args(["log", "tail", "-f"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("log tail -f");
        let t = Instant::now();
        while !made_by_a_run(&env.ws.join("started.txt")) {
            assert!(t.elapsed() < Duration::from_secs(20), "the command never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        let stopped = Instant::now();
        let (st, err) = d.stop();
        let took = stopped.elapsed();
        assert!(st.success(), "{st:?}: {err}");
        assert!(took < Duration::from_secs(5), "the daemon took {took:?} to stop: {err}");
        wait_or_kill(&mut run, Duration::from_secs(5), "the exec client");
        wait_or_kill(&mut tail, Duration::from_secs(5), "the follower's client");
        let execs = records_of(&env, "exec");
        assert_eq!(execs.len(), 1, "{execs:?}");
        assert_eq!(execs[0]["cancelled"], true, "{}", execs[0]);
        assert_eq!(execs[0]["exit_code"], serde_json::Value::Null, "{}", execs[0]);
        let calls = records_of(&env, "daemon.call");
        assert_eq!(calls.len(), 1, "the exec is recorded once, by itself: {calls:?}");
        assert!(calls[0]["decision"]["reasons"][0].as_str().is_some_and(|s| s.contains("the daemon was stopped")), "{}", calls[0]);
        assert!(processes_with("started.txt; sleep 60").is_empty(), "the command survived");
        let stop = records_of(&env, "daemon.stop");
        assert!(stop[0]["decision"]["reasons"][0].as_str().is_some_and(|s| s.contains("2 call(s) in flight were ended")), "{}", stop[0]);
        let o = env.gw(&["log", "verify"]);
        assert!(o.status.success(), "{}", text(&o));
    }
}

sandbox_test!(
    fn a_question_waiting_for_a_person_ends_with_its_client() {
        // Issue 35 (attacker): a call waiting for approval waited out the whole `[approval]
        // timeout` after its client went away — holding a daemon place (a few such clients
        // locked everyone else out) and a pending entry that approvers still saw. Now it
        // ends with its client: the question leaves the queue within a second or so, the
        // command never runs, and the end is recorded.
        let env = Env::new("life-question");
        let pf = env.policy_file("extends = \"standard\"\n[approval]\ntimeout = \"300s\"\n");
        let d = Daemon::start(&env, &pf, &[]);
        std::fs::create_dir_all(env.ws.join("build")).expect("mkdir");
        let mut ch = d
            .cmd(&env)
            .args(["exec", "--", "rm", "-r", "build"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let pending = || pending_seen(d.cmd(&env));
        let t = Instant::now();
        while pending().is_empty() {
            assert!(t.elapsed() < Duration::from_secs(20), "never asked");
            std::thread::sleep(Duration::from_millis(50));
        }
        ch.kill().expect("kill the client");
        let _ = ch.wait();
        let t = Instant::now();
        while !pending().is_empty() {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "the question outlived its client: {:?}",
                pending()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(env.ws.join("build").exists(), "the command ran");
        let t = Instant::now();
        let ended = loop {
            let recs = log_records(&env);
            if let Some(r) = recs.iter().find(|r| r["tool"] == "approval").cloned() {
                break r;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "no approval record: {recs:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(ended["approved"], false, "{ended}");
        assert!(
            ended["decision"]["reasons"]
                .to_string()
                .contains("end of its call"),
            "{ended}"
        );
    }
);
