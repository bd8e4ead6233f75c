//! `gateway mcp`'s calls as objects (issue 35): the 2026-07-28 revision beside 2025-11-25,
//! cancellation, a client that goes away, overlapping and concurrent calls, roots that change
//! while they are listed. Plain JSON-RPC over stdio where the SDK would hide the wire, the
//! Python MCP SDK where a real client's behaviour is the point.

use crate::util::*;

/// A `gateway mcp` driven by plain JSON-RPC over its stdio (no SDK): lines in, and each line
/// it prints collected by a thread.
struct McpStdio {
    child: std::process::Child,
    input: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
    seen: Vec<serde_json::Value>,
}

/// `_meta` of a 2026-07-28 request: the protocol version and the client's capabilities.
const MODERN_META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"}}"#;

impl McpStdio {
    /// `gateway --policy POLICY mcp` in the test's workspace; with `initialize` (a
    /// 2025-11-25 session) when `legacy`.
    fn start(env: &Env, policy: &str, legacy: bool) -> McpStdio {
        McpStdio::start_from(env.cmd(), policy, legacy)
    }

    /// `gateway mcp` started from `cmd` (a daemon's client: `Daemon::cmd`).
    fn start_from(mut cmd: Command, policy: &str, legacy: bool) -> McpStdio {
        use std::io::BufRead;
        let mut child = cmd
            .args(["--policy", policy, "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("gateway mcp");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                let v = serde_json::from_str(&l).unwrap_or(serde_json::Value::String(l));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut m = McpStdio {
            input: child.stdin.take(),
            child,
            lines,
            seen: vec![],
        };
        if legacy {
            m.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#);
            m.answer(0);
            m.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        }
        m
    }

    fn send(&mut self, line: &str) {
        let i = self.input.as_mut().expect("stdin open");
        writeln!(i, "{line}").expect("write to gateway mcp");
    }

    /// A `tools/call` of `name` with `args` (JSON), as request `id`; `_meta` as given.
    fn call(&mut self, id: u64, name: &str, args: &str, meta: &str) {
        let sep = if meta.is_empty() { "" } else { "," };
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args}{sep}{meta}}}}}"#
        ));
    }

    /// The answer to request `id` (within 60 s).
    fn answer(&mut self, id: u64) -> serde_json::Value {
        let t = std::time::Instant::now();
        loop {
            if let Some(i) = self.seen.iter().position(|v| v["id"] == id) {
                return self.seen.remove(i);
            }
            let left = std::time::Duration::from_secs(60).saturating_sub(t.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(e) => panic!("no answer to request {id} ({e}); seen {:?}", self.seen),
            }
        }
    }

    /// A tool result's structured content; asserts it is not an error.
    fn ok(&mut self, id: u64) -> serde_json::Value {
        let a = self.answer(id);
        assert_eq!(a["result"]["isError"], false, "{a}");
        a["result"]["structuredContent"].clone()
    }
}

impl Drop for McpStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The exec records of the test's log, when there are `n` (within 10 s).
fn exec_records(env: &Env, n: usize) -> Vec<serde_json::Value> {
    let t = std::time::Instant::now();
    loop {
        let r: Vec<_> = log_records(env)
            .into_iter()
            .filter(|x| x["tool"] == "exec")
            .collect();
        if r.len() >= n || t.elapsed() > std::time::Duration::from_secs(10) {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Waits (up to 20 s) for a file the command makes as it starts: in the workspace, or (the
/// run's writes land when it ends) in the run's capture layer.
fn wait_for_file(p: &Path) {
    let t = std::time::Instant::now();
    while !made_by_a_run(p) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "{} never appeared",
            p.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

sandbox_test!(
    fn mcp_server_answers_server_discover_and_serves_2026_07_28_requests_without_initialize() {
        // Issue 35: a 2026-07-28 client (Claude Code 2.1.332) probes `server/discover` first,
        // then sends self-contained requests (`_meta` on each, no `initialize`).
        let env = Env::new("mcp-discover");
        let mut m = McpStdio::start(&env, "standard", false);
        m.send(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{MODERN_META}}}}}"#
        ));
        let d = m.answer(1);
        let versions = d["result"]["supportedVersions"]
            .as_array()
            .unwrap_or_else(|| panic!("{d}"));
        for v in ["2026-07-28", "2025-11-25"] {
            assert!(versions.iter().any(|x| x == v), "{v}: {d}");
        }
        assert!(d["result"]["capabilities"]["tools"].is_object(), "{d}");
        assert_eq!(
            d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "gateway",
            "{d}"
        );
        m.send(&format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{{{MODERN_META}}}}}"#
        ));
        let l = m.answer(2);
        let tools = l["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{l}"));
        assert!(tools.iter().any(|t| t["name"] == "exec"), "{l}");
        m.call(3, "exec", r#"{"command":"echo stateless"}"#, MODERN_META);
        let r = m.ok(3);
        assert_eq!(r["exit_code"], 0, "{r}");
        assert_eq!(r["stdout"], "stateless\n", "{r}");
        // A request without the revision's `_meta` is refused, not guessed at.
        m.call(4, "exec", r#"{"command":"echo nometa"}"#, "");
        let e = m.answer(4);
        assert!(
            e["error"]["message"]
                .as_str()
                .is_some_and(|s| s.contains("_meta")),
            "{e}"
        );
        let r = exec_records(&env, 1);
        assert_eq!(r.len(), 1, "{r:?}");
    }
);

/// An `exec` of 30 s cancelled in flight through `m` (an MCP server of `env`): its command
/// is killed within a few seconds, recorded once as cancelled, and the server carries on.
/// Returns the record.
fn cancel_an_exec(env: &Env, m: &mut McpStdio, legacy: bool, marker: &str) -> serde_json::Value {
    let meta = if legacy { "" } else { MODERN_META };
    m.call(
        7,
        "exec",
        &format!(r#"{{"command":"touch started; sleep 30; : {marker}"}}"#),
        meta,
    );
    wait_for_file(&env.ws.join("started"));
    assert!(!processes_with(marker).is_empty(), "the command runs");
    let t = std::time::Instant::now();
    m.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"the user pressed Esc"}}"#);
    assert_no_survivors(marker, "cancelled exec");
    let r = exec_records(env, 1);
    assert_eq!(r.len(), 1, "legacy {legacy}: {r:?}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(3),
        "legacy {legacy}: ended after {:?}",
        t.elapsed()
    );
    assert_eq!(r[0]["cancelled"], true, "{}", r[0]);
    // The server carries on.
    m.call(8, "exec", r#"{"command":"echo after"}"#, meta);
    assert_eq!(m.ok(8)["stdout"], "after\n");
    r[0].clone()
}

sandbox_test!(
    fn mcp_cancelled_exec_is_killed_and_recorded_as_cancelled() {
        // Issue 35: `notifications/cancelled` for an exec in flight kills its command (within
        // a second or so, not the 30 s it asked for) and the record says `cancelled`. In both
        // revisions.
        for legacy in [true, false] {
            let env = Env::new("mcp-cancel");
            let marker = format!("mcp-cancel-{}-{legacy}", std::process::id());
            let mut m = McpStdio::start(&env, "standard", legacy);
            cancel_an_exec(&env, &mut m, legacy, &marker);
        }
    }
);

sandbox_test!(
    fn mcp_cancelled_exec_through_the_daemon_is_killed_and_recorded() {
        // Issue 35: an MCP server whose tools run in the daemon waited for the daemon's
        // answer whatever happened, so `notifications/cancelled` left the command running
        // for its whole 30 s. Now the call's connection is closed when it is cancelled: the
        // daemon kills the command and records it as cancelled, and the server carries on.
        for legacy in [true, false] {
            let env = Env::new("mcp-daemon-cancel");
            let d = Daemon::start(&env, "standard", &[]);
            let marker = format!("mcp-daemon-cancel-{}-{legacy}", std::process::id());
            let mut m = McpStdio::start_from(d.cmd(&env), "standard", legacy);
            let r = cancel_an_exec(&env, &mut m, legacy, &marker);
            assert_eq!(r["caller"]["client"], "daemon", "{r}");
        }
    }
);

sandbox_test!(
    fn mcp_client_that_closes_its_pipes_stops_its_commands_and_records_them() {
        // Issue 35: a client that goes away (closes the server's stdin) leaves no command
        // running: each in flight is killed and recorded as cancelled, and the
        // server ends.
        let env = Env::new("mcp-gone");
        let marker = format!("mcp-gone-{}", std::process::id());
        let mut m = McpStdio::start(&env, "standard", true);
        m.call(
            2,
            "exec",
            &format!(r#"{{"command":"touch one; sleep 30; : {marker}"}}"#),
            "",
        );
        wait_for_file(&env.ws.join("one"));
        // A change made while the exec runs (the exec's writes are in its own layer: the
        // change does not wait for it).
        m.call(3, "write_file", r#"{"path":"b.txt","content":"b\n"}"#, "");
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!processes_with(&marker).is_empty(), "the command runs");
        let t = std::time::Instant::now();
        // The client closes the server's stdin (as a client that exits does).
        drop(m.input.take());
        assert_no_survivors(&marker, "a gone client's exec");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(3),
            "killed after {:?}",
            t.elapsed()
        );
        let r = exec_records(&env, 1);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0]["cancelled"], true, "{}", r[0]);
        let t = std::time::Instant::now();
        while m.child.try_wait().expect("wait").is_none() {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(10),
                "the server outlived its client"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // The change was made at once, its own, and the cancelled exec's layer was applied
        // without claiming it.
        assert_eq!(
            std::fs::read_to_string(env.ws.join("b.txt")).expect("b"),
            "b\n"
        );
    }
);

sandbox_test!(
    fn overlapping_mcp_calls_get_their_own_capture_and_undo_groups() {
        // Issue 35: a long exec that writes a.txt late, and a write_file of b.txt sent while
        // it runs: each file is in its own group, and undoing the exec's group leaves b.txt.
        let env = Env::new("mcp-overlap");
        let mut m = McpStdio::start(&env, "standard", true);
        m.call(
            2,
            "exec",
            r#"{"command":"touch started; sleep 2; echo a > a.txt"}"#,
            "",
        );
        wait_for_file(&env.ws.join("started"));
        m.call(3, "write_file", r#"{"path":"b.txt","content":"b\n"}"#, "");
        let exec = m.ok(2);
        assert_eq!(exec["exit_code"], 0, "{exec}");
        m.ok(3);
        let o = env.gw(&["history", "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        let h = json_of(&o);
        let changes = h["changes"].as_array().expect("changes");
        let group_of = |f: &str| -> (String, u64) {
            let c = changes
                .iter()
                .find(|c| c["change"]["path"].as_str().is_some_and(|p| p.ends_with(f)))
                .unwrap_or_else(|| panic!("{f}: {h}"));
            (
                c["change"]["group"].as_str().unwrap_or("").to_string(),
                c["change"]["id"].as_u64().expect("id"),
            )
        };
        let (ga, ida) = group_of("/a.txt");
        let (gb, _) = group_of("/b.txt");
        assert!(!ga.is_empty(), "{h}");
        assert_ne!(ga, gb, "b.txt was claimed by the exec's group: {h}");
        let o = env.gw(&["undo", &ida.to_string()]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            !env.ws.join("a.txt").exists(),
            "the exec's change is undone"
        );
        assert_eq!(
            std::fs::read_to_string(env.ws.join("b.txt")).expect("b.txt survives"),
            "b\n"
        );
    }
);

sandbox_test!(
    fn eight_concurrent_mcp_calls_all_succeed() {
        // Issue 35: eight calls at once in one server (execs with their snapshots, file
        // writes): none fails for another's temporary file or lock.
        let env = Env::new("mcp-eight");
        let mut m = McpStdio::start(&env, "standard", true);
        for i in 0..8u64 {
            if i % 2 == 0 {
                m.call(
                    10 + i,
                    "exec",
                    &format!(r#"{{"command":"echo {i} > e{i}.txt"}}"#),
                    "",
                );
            } else {
                m.call(
                    10 + i,
                    "write_file",
                    &format!(r#"{{"path":"w{i}.txt","content":"{i}\n"}}"#),
                    "",
                );
            }
        }
        for i in 0..8u64 {
            let r = m.ok(10 + i);
            if i % 2 == 0 {
                assert_eq!(r["exit_code"], 0, "{r}");
                assert_eq!(
                    r["snapshot"]["changes"].as_array().map(Vec::len),
                    Some(1),
                    "{r}"
                );
            }
        }
        let o = env.gw(&["history", "--json"]);
        let h = json_of(&o);
        assert_eq!(h["changes"].as_array().map(Vec::len), Some(8), "{h}");
    }
);

sandbox_test!(
    fn a_2026_07_28_client_runs_the_tools_with_its_roots() {
        // Issue 35: the Python SDK's newest `Client` (mode `auto`: `server/discover`, then
        // self-contained requests) runs the tools; its roots, which the server may not ask
        // for with a request of its own in this revision, are asked with each call (an
        // input request, `roots/list`) and narrow it as in a 2025-11-25 session.
        let env = Env::new("mcp-modern");
        let root = env.ws.join("my root");
        std::fs::create_dir(&root).expect("root");
        env.write("out.txt", "out\n");
        let root_s = root.display().to_string();
        let Some(v) = mcp_client(&env, "".as_ref(), "mcp_modern.py", &[&root_s], None) else {
            return;
        };
        assert_eq!(v["protocol"], "2026-07-28", "{v}");
        assert_eq!(v["server"], "gateway", "{v}");
        let tools = v["tools"].as_array().expect("tools");
        assert_eq!(tools.len(), 15, "{v}");
        let result = |k: &str| -> (bool, serde_json::Value) {
            let r = &v[k];
            let t = r["text"].as_str().unwrap_or_else(|| panic!("{k}: {v}"));
            (
                r["is_error"] == true,
                serde_json::from_str(t).unwrap_or_else(|e| panic!("{k}: {e}: {t}")),
            )
        };
        let (err, exec) = result("exec");
        assert!(!err, "{exec}");
        assert_eq!(
            exec["stdout"],
            format!("hello modern\n{root_s}\n"),
            "{exec}"
        );
        let (err, w) = result("write");
        assert!(!err, "{w}");
        assert_eq!(
            std::fs::read_to_string(root.join("new.txt")).expect("new"),
            "n\n"
        );
        let (err, r) = result("read");
        assert!(!err, "{r}");
        let (err, o) = result("outside");
        assert!(err, "outside the client's roots: {o}");
        assert_eq!(o["refusal"]["rule"], "client-roots", "{o}");
        assert!(v["roots_asked"].as_u64().is_some_and(|n| n >= 4), "{v}");
        let recs = log_records(&env);
        assert!(recs.iter().any(|r| r["tool"] == "exec"), "{recs:?}");
    }
);

sandbox_test!(
    fn mcp_roots_changed_while_they_are_listed_are_not_lost() {
        // Issue 35: a `notifications/roots/list_changed` that arrives while the server is
        // listing the roots (before the now stale answer) makes it list them again: the call
        // runs within the new roots, not the old ones.
        let env = Env::new("mcp-roots-race");
        let (old, new) = (env.ws.join("old"), env.ws.join("new"));
        std::fs::create_dir(&old).expect("old");
        std::fs::create_dir(&new).expect("new");
        let (o, n) = (old.display().to_string(), new.display().to_string());
        let Some(v) = mcp_client(&env, "".as_ref(), "mcp_roots_race.py", &[&o, &n], None) else {
            return;
        };
        assert_eq!(v["new"]["is_error"], false, "{v}");
        assert!(new.join("x.txt").exists(), "{v}");
        assert_eq!(v["old"]["is_error"], true, "{v}");
        assert!(!old.join("y.txt").exists(), "{v}");
        assert_eq!(v["asked"], serde_json::json!([o, n]), "{v}");
    }
);

sandbox_test!(
    fn mcp_client_that_stops_reading_stops_its_commands_and_records_them() {
        // Issue 35: a client that closes its end of the server's stdout (its stdin still
        // open, nothing written meanwhile) is gone: its command is killed and recorded as
        // cancelled, and the server ends.
        use std::io::BufRead;
        let env = Env::new("mcp-noreader");
        let marker = format!("mcp-noreader-{}", std::process::id());
        let mut child = env
            .cmd()
            .args(["--policy", "standard", "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("gateway mcp");
        let mut input = child.stdin.take().expect("stdin");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        writeln!(input, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#).expect("write");
        let mut line = String::new();
        out.read_line(&mut line).expect("initialize answer");
        assert!(line.contains("\"id\":1"), "{line}");
        writeln!(
            input,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("write");
        writeln!(input, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"exec","arguments":{{"command":"touch started; sleep 30; : {marker}"}}}}}}"#).expect("write");
        wait_for_file(&env.ws.join("started"));
        assert!(!processes_with(&marker).is_empty(), "the command runs");
        let t = std::time::Instant::now();
        drop(out);
        assert_no_survivors(&marker, "an exec whose client stopped reading");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(3),
            "killed after {:?}",
            t.elapsed()
        );
        let r = exec_records(&env, 1);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0]["cancelled"], true, "{}", r[0]);
        let t = std::time::Instant::now();
        while child.try_wait().expect("wait").is_none() {
            if t.elapsed() > std::time::Duration::from_secs(10) {
                let _ = child.kill();
                panic!("the server outlived its client");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        drop(input);
    }
);

sandbox_test!(
    fn a_daemon_call_waiting_for_the_workspaces_capture_ends_with_its_client() {
        // A call that waits for another's capture of its workspace (the capture lock) is
        // still its client's: through the daemon, a client killed while its call waits ends
        // the wait, and the call never runs after its client left.
        // (Only the walk, the overlay's fallback, holds the capture lock.)
        let env = Env::new("capture-wait-daemon");
        let walk = env.policy_file("extends = \"standard\"\n\n[undo]\ncapture = \"walk\"\n");
        let d = Daemon::start(&env, &walk, &[]);
        let run = |script: &str| {
            d.cmd(&env)
                .args(["exec", "--", "sh", "-c", script])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("client")
        };
        let mut long = run("touch started; sleep 6");
        wait_for_file(&env.ws.join("started"));
        let mut waiting = run("echo b > b.txt");
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(
            !env.ws.join("b.txt").exists(),
            "the second call waits for the first"
        );
        let _ = waiting.kill();
        let _ = waiting.wait();
        // Its call ends now and is recorded, while the first still runs.
        let t = std::time::Instant::now();
        let ended = loop {
            let o = d
                .cmd(&env)
                .args(["log", "query", "--json", "--limit", "0"])
                .output()
                .expect("query");
            let recs = json_of(&o)["records"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if let Some(r) = recs.into_iter().find(|r| r["tool"] == "exec") {
                break r;
            }
            assert!(
                t.elapsed() < std::time::Duration::from_secs(3),
                "the waiting call did not end with its client"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert!(ended.to_string().contains("b.txt"), "{ended}");
        assert!(
            long.try_wait().expect("long").is_none(),
            "the first still runs"
        );
        assert!(long.wait().expect("long").success());
        std::thread::sleep(std::time::Duration::from_millis(1000));
        assert!(
            !env.ws.join("b.txt").exists(),
            "the call ran after its client had gone"
        );
        let o = d
            .cmd(&env)
            .args(["log", "verify"])
            .output()
            .expect("verify");
        assert!(o.status.success(), "{}", text(&o));
    }
);
