//! `gateway mcp` driven by the Python MCP SDK: tools, client roots, through the daemon.

use crate::util::*;

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
        assert_eq!(p["command"], "sh -c 'touch asked.txt'");
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

sandbox_test!(
    fn mcp_cd_and_cwd_never_move_the_writable_area_and_tools_refuse_protected_paths() {
        // Issue 14 items 1, 2, 3, 5 and issue 22 items 3a, 4, through a real MCP client with
        // no roots: `cd` and `exec`'s `cwd` move where commands start, never what they may
        // write; `cd ~` does not brick the session; protected and denied paths are refused
        // by name; a command started in `.git` still cannot write its hooks.
        let env = Env::new("mcp-seams");
        std::fs::create_dir_all(env.home.join(".ssh")).expect("ssh");
        env.write(".git/HEAD", "ref: refs/heads/main\n");
        std::fs::create_dir_all(env.ws.join(".git/hooks")).expect("hooks");
        std::fs::create_dir_all(env.ws.join("sub")).expect("sub");
        let out = env.outside.to_str().expect("utf-8");
        let Some(v) = mcp_client(&env, "".as_ref(), "mcp_seams.py", &[out], Some("standard"))
        else {
            return;
        };
        let get = |k: &str| -> (bool, String) {
            let r = &v[k];
            (
                r["is_error"] == true,
                r["text"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{k}: {r}"))
                    .to_string(),
            )
        };
        assert!(!get("cd_outside").0, "{v}");
        assert!(get("write_relative").0, "write outside the workspace: {v}");
        assert!(!env.outside.join("bin/ls").exists(), "{v}");
        assert!(!env.outside.join("planted").exists(), "{v}");
        assert!(
            get("exec_here").1.contains(out),
            "the command starts in the cd: {v}"
        );
        assert!(
            !env.outside.join("planted2").exists(),
            "exec cwd argument: {v}"
        );
        let (err, t) = get("exec_after_home");
        assert!(!err && t.contains("alive"), "after cd ~: {v}");
        assert!(!get("cd_back_again").0, "{v}");
        assert!(!get("write_in_ws").0, "{v}");
        assert!(env.ws.join("kept.txt").exists());
        for (k, rule) in [
            ("write_mcp_json", "protected-path"),
            ("write_git_config_dotdot", "protected-path"),
            ("read_shadow", "denied-path"),
        ] {
            let (err, t) = get(k);
            assert!(err && t.contains(rule), "{k}: {t}");
        }
        assert!(!env.ws.join(".mcp.json").exists());
        assert!(!env.ws.join(".git/config").exists());
        assert!(
            !env.ws.join(".git/hooks/pre-commit").exists(),
            "exec with cwd .git: {v}"
        );
        let o = env.gw(&["log", "verify"]);
        assert!(o.status.success(), "{}", text(&o));
    }
);

sandbox_test! {
    fn sigterm_to_an_embedded_mcp_server_records_the_run_in_flight() {
        // `gateway mcp` without a daemon is its own broker: SIGTERM while its exec tool runs
        // kills the command, records the run (interrupted, its change undoable), then the
        // server dies of the signal. Plain JSON-RPC over stdio: no SDK needed.
        use std::os::unix::process::ExitStatusExt;
        let env = Env::new("mcp-sigterm");
        env.write("important.txt", "original\n");
        let mut child = env
            .cmd()
            .args(["--policy", "standard", "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("gateway mcp");
        let mut input = child.stdin.take().expect("stdin");
        for m in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"command":"echo changed > important.txt; sleep 30"}}}"#,
        ] {
            writeln!(input, "{m}").expect("write");
        }
        let t = std::time::Instant::now();
        // The run's writes are in its capture layer until it ends.
        while !made_by_a_run(&env.ws.join("important.txt"))
            || !layer_holds(&env.ws.join("important.txt"), "changed\n")
        {
            assert!(t.elapsed() < std::time::Duration::from_secs(20), "the exec never ran");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // The change is made; give the broker's relay a moment to be inside the run.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let st = Command::new("kill")
            .args(["-s", "TERM", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(st.success());
        let t = std::time::Instant::now();
        let st = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            assert!(t.elapsed() < std::time::Duration::from_secs(20), "mcp did not end");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        drop(input);
        assert_eq!(st.signal(), Some(15), "{st:?}");
        let r = log_records(&env);
        let exec: Vec<_> = r.iter().filter(|x| x["tool"] == "exec").collect();
        assert_eq!(exec.len(), 1, "{r:?}");
        assert_eq!(exec[0]["interrupted"], 15, "{}", exec[0]);
        assert_eq!(exec[0]["cancelled"], true, "{}", exec[0]);
        assert_eq!(exec[0]["files_changed"], 1, "{}", exec[0]);
        let o = env.gw(&["undo"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("important.txt")).expect("r"),
            "original\n"
        );
    }
}

/// Issue 25 through a real MCP client: the policy file is rewritten from outside between two
/// calls of one session; the server keeps the policy it loaded, says once that the file
/// changed, offers the agent no reload, and records the pinned hash on the session's first
/// record. A new server (a person's restart) follows the file as it is then.
fn check_mcp_pin(env: &Env, socket: &std::ffi::OsStr, audit: &dyn Fn(&[&str]) -> Output) {
    check_mcp_pin_as(env, Path::new(BIN), socket, audit)
}

/// The pin check with the server started as `gateway` (the binary or [`nobody_wrapper`]).
fn check_mcp_pin_as(
    env: &Env,
    gateway: &Path,
    socket: &std::ffi::OsStr,
    audit: &dyn Fn(&[&str]) -> Output,
) {
    let pf = env.policy_file(PROBE_DENIED);
    let free = env.root.join("free.toml");
    let denied = env.root.join("denied.toml");
    std::fs::write(&free, PROBE_FREE).expect("w");
    std::fs::write(&denied, PROBE_DENIED).expect("w");
    if gateway != Path::new(BIN) {
        // The server runs as uid 65534: the tree is its own (the policy is rewritten by
        // this test, as root, from outside).
        env.give_to_nobody();
    }
    let run = |new: &Path| {
        mcp_client_of(
            env,
            gateway,
            socket,
            "mcp_pin.py",
            &[&pf, new.to_str().expect("utf-8")],
            Some(&pf),
        )
    };
    let Some(v) = run(&free) else {
        return;
    };
    let t = |k: &str| {
        v[k]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{k}: {v}"))
            .to_string()
    };
    assert!(
        v["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .all(|n| !n.as_str().expect("name").contains("policy")),
        "the agent is offered no way to reload its policy: {v}"
    );
    assert_eq!(v["before"]["is_error"], true, "{v}");
    assert!(t("before").contains("deny-probe"), "{v}");
    // Rewritten to allow the probe: still refused by the pinned policy, and said once.
    assert_eq!(v["after"]["is_error"], true, "{v}");
    assert!(t("after").contains("deny-probe"), "{v}");
    assert!(
        t("after").contains("gateway_notice") && t("after").contains("not in force"),
        "{v}"
    );
    assert_eq!(v["again"]["is_error"], true, "{v}");
    assert!(t("again").contains("deny-probe"), "{v}");
    assert!(!t("again").contains("gateway_notice"), "said once: {v}");
    for p in ["probe-1", "probe-2", "probe-3"] {
        assert!(!env.ws.join(p).exists(), "{p}");
    }
    let first_hash = probe_policy_sha256(Path::new(&pf), PROBE_DENIED);
    // The server is restarted on the file as it is now (the probe allowed), and the file is
    // rewritten back to refuse it: this session follows what it loaded, both ways.
    let v = run(&denied).expect("client");
    assert_eq!(v["before"]["is_error"], false, "{v}");
    assert_eq!(v["after"]["is_error"], false, "{v}");
    assert!(
        v["after"]["text"]
            .as_str()
            .expect("text")
            .contains("gateway_notice"),
        "{v}"
    );
    for p in ["probe-1", "probe-2"] {
        assert!(env.ws.join(p).exists(), "{p}: {v}");
        if gateway != Path::new(BIN) {
            use std::os::unix::fs::MetadataExt;
            let uid = std::fs::metadata(env.ws.join(p)).expect("probe").uid();
            assert_eq!(uid, 65534, "{p} made by the server as uid 65534");
        }
    }
    let second_hash = probe_policy_sha256(Path::new(&pf), PROBE_FREE);
    assert_ne!(first_hash, second_hash);
    // Each session's first record, and only it, names the hash of the policy it pinned.
    let o = audit(&["log", "query", "--json", "--limit", "0"]);
    let sessions = sessions_of(json_of(&o)["records"].as_array().expect("records"), "mcp-");
    assert_eq!(sessions.len(), 2, "{}", text(&o));
    for (recs, want) in sessions.iter().zip([&first_hash, &second_hash]) {
        assert_eq!(recs.len(), 3, "{recs:?}");
        assert_eq!(recs[0]["policy_sha256"], want.as_str(), "{}", recs[0]);
        assert!(
            recs[1..].iter().all(|r| r.get("policy_sha256").is_none()),
            "{recs:?}"
        );
        // `log show` shows it.
        let seq = recs[0]["seq"].to_string();
        let o = audit(&["log", "show", &seq]);
        assert!(text(&o).contains(want.as_str()), "{}", text(&o));
    }
    let o = audit(&["log", "verify"]);
    assert!(o.status.success(), "{}", text(&o));
}

sandbox_test!(
    fn mcp_server_pins_the_policy_it_loaded() {
        let env = Env::new("mcp-pin");
        check_mcp_pin(&env, "".as_ref(), &|args| env.gw(args));
    }
);

sandbox_test!(
    fn mcp_server_as_nobody_pins_the_policy_it_loaded() {
        // The same as uid 65534 (no mount namespace): the server started through setpriv.
        let env = Env::new("mcp-pin-nobody");
        let gateway = nobody_wrapper(&env);
        check_mcp_pin_as(&env, &gateway, "".as_ref(), &|args| env.gw(args));
    }
);

sandbox_test!(
    fn mcp_server_through_the_daemon_pins_the_policy_it_loaded() {
        // The daemon reads `--policy` for each call: it holds the session's pin.
        let env = Env::new("mcp-pin-daemon");
        let d = Daemon::start(&env, "standard", &[]);
        let audit = |args: &[&str]| -> Output { d.cmd(&env).args(args).output().expect("gateway") };
        check_mcp_pin(&env, d.socket.as_os_str(), &audit);
    }
);

sandbox_test!(
    fn mcp_results_stay_within_the_output_budget_with_head_tail_and_the_artifact() {
        // Issue 15: `exec` of `seq 1 100000` returned 789 KB inline, `write_file` the whole
        // file as a diff. Each result's text (and structured content) is now at most the
        // budget — 30,000 characters by default, `[output] mcp_budget` in the policy,
        // `max_output_chars` per call within 4,000..=200,000 — keeping head and tail around a
        // marker that names the record and the artifact with the whole output. A refusal is
        // never cut.
        let env = Env::new("mcp-budget");
        let big: String = (1..=50_000).map(|i| format!("line {i}\n")).collect();
        let bigf = env.write("big.txt", &big);
        let bigs = bigf.to_str().expect("utf-8");
        let Some(v) = mcp_client(&env, "".as_ref(), "mcp_budget.py", &[bigs], None) else {
            return;
        };
        let within = |k: &str, budget: usize| -> serde_json::Value {
            let r = &v[k];
            let t = r["text"].as_str().expect("text");
            assert!(
                t.chars().count() <= budget,
                "{k}: {} chars",
                t.chars().count()
            );
            let sl = r["structured_len"].as_u64().expect("structured") as usize;
            assert!(sl <= budget, "{k}: structured content of {sl} chars");
            serde_json::from_str(t).expect("json")
        };
        let seq = within("seq", 30_000);
        assert_eq!(v["seq"]["is_error"], false);
        let out = seq["stdout"].as_str().expect("stdout");
        assert!(out.starts_with("1\n2\n3\n"), "{out}");
        assert!(out.ends_with("999999\n1000000\n"), "{out}");
        assert!(
            out.len() > 20_000,
            "the budget is used, not wasted: {}",
            out.len()
        );
        let rec = seq["audit"]["seq"].as_u64().expect("seq");
        let art = seq["audit"]["stdout"]["artifact"]
            .as_str()
            .expect("artifact");
        assert!(
            out.contains(&format!("`gateway log show {rec}` (artifact {art})")),
            "{out}"
        );
        assert_eq!(seq["stdout_truncated"], true);
        // The artifact named holds the whole output (stored compressed: read through
        // `log show`, which checks it against the id).
        assert!(
            std::fs::metadata(env.state.join("audit/artifacts").join(art)).is_ok(),
            "artifact {art}"
        );
        let o = env
            .cmd()
            .args([
                "log",
                "show",
                "--json",
                "--output-limit",
                "0",
                &rec.to_string(),
            ])
            .output()
            .expect("log show");
        let whole = json_of(&o);
        assert_eq!(
            whole["artifacts"][0]["content"].as_str().map(str::len),
            Some(6_888_896),
            "{}",
            text(&o)
        );
        // Per call, within the bounds.
        let small = within("seq_small", 5_000);
        assert!(
            small["stdout"]
                .as_str()
                .is_some_and(|s| s.ends_with("1000000\n") && s.contains("cut here")),
            "{small}"
        );
        within("seq_huge", 200_000);
        assert!(v["seq_huge"]["text"].as_str().expect("t").len() > 150_000);
        // The file tools: read_file's lines keep both ends and say what was cut.
        let read = within("read_big", 30_000);
        let lines = read["output"]["lines"].as_array().expect("lines");
        assert_eq!(lines[0][1], "line 1");
        assert_eq!(lines[lines.len() - 1][1], "line 50000");
        assert!(
            read["budget"]["whole"]
                .as_str()
                .is_some_and(|w| w.contains("offset")),
            "{read}"
        );
        let wrote = within("write_big", 30_000);
        assert_eq!(wrote["output"]["lines_added"], 50_000, "{wrote}");
        assert_eq!(wrote["output"]["diff_truncated"], true, "{wrote}");
        assert_eq!(
            std::fs::read_to_string(env.ws.join("copy.txt")).expect("r"),
            big
        );
        // A diff the broker kept whole, cut by a small budget: the file is where the rest is.
        let mid = within("write_mid", 4_000);
        assert_eq!(mid["output"]["diff_truncated"], false, "{mid}");
        assert_eq!(mid["output"]["lines_added"], 190, "{mid}");
        assert!(
            mid["budget"]["whole"]
                .as_str()
                .is_some_and(|w| w.contains("read_file")),
            "{mid}"
        );
        let d = mid["output"]["diff"].as_str().expect("diff");
        assert!(
            d.contains("+000 ") && d.contains("+189 ") && d.contains("cut here"),
            "{d}"
        );
        // A refusal under the smallest budget: whole, naming the rule.
        let t = v["shadow"]["text"].as_str().expect("text");
        assert_eq!(v["shadow"]["is_error"], true, "{t}");
        assert!(!t.contains("cut here") && t.contains("shadow"), "{t}");

        // The policy's budget.
        let pf = env.policy_file("extends = \"standard\"\n[output]\nmcp_budget = 8000\n");
        let v2 = mcp_client(
            &env,
            "".as_ref(),
            "mcp_budget.py",
            &[bigs, "seq-only"],
            Some(&pf),
        )
        .expect("client");
        let t = v2["seq"]["text"].as_str().expect("text");
        assert!(
            t.chars().count() <= 8_000 && t.contains("999999\\n1000000\\n"),
            "{t}"
        );
        // Out of bounds, or a key that does not exist: the policy is refused.
        for (bad, says) in [
            ("[output]\nmcp_budget = 10\n", "output.mcp_budget"),
            ("[output]\nbudget = 10000\n", "budget"),
        ] {
            let pf = env.policy_file(&format!("extends = \"standard\"\n{bad}"));
            let o = env.gw(&["policy", "check", &pf]);
            assert!(!o.status.success(), "{bad}: {}", text(&o));
            assert!(text(&o).contains(says), "{bad}: {}", text(&o));
        }
        let o = env.gw(&["log", "verify"]);
        assert!(o.status.success(), "{}", text(&o));
    }
);

sandbox_test!(
    fn tool_results_stay_within_the_budget_through_the_daemon_and_unprivileged() {
        // The budget is applied where the call runs: in the daemon for its clients (the MCP
        // server's calls are `gateway tool` calls to it), and in an unprivileged embedded
        // broker (uid 65534) alike.
        let env = Env::new("tool-budget");
        let d = Daemon::start(&env, "standard", &[]);
        let o = d
            .cmd(&env)
            .args(["tool", "exec", r#"{"command": "seq 1 300000"}"#])
            .output()
            .expect("gateway");
        assert!(o.status.success(), "{}", text(&o));
        let v = json_of(&o);
        let t = v["content"][0]["text"].as_str().expect("text");
        assert!(t.chars().count() <= 30_000, "{} chars", t.chars().count());
        let sc = &v["structuredContent"];
        assert!(sc.to_string().chars().count() <= 30_000);
        let out = sc["stdout"].as_str().expect("stdout");
        let seq = sc["audit"]["seq"].as_u64().expect("seq");
        assert!(
            out.starts_with("1\n2\n") && out.ends_with("299999\n300000\n"),
            "{out}"
        );
        assert!(out.contains(&format!("`gateway log show {seq}`")), "{out}");
        // The daemon's `log show` caps what it prints of that record too.
        let o = d
            .cmd(&env)
            .args(["log", "show", &seq.to_string(), "--output-limit", "2000"])
            .output()
            .expect("gateway");
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            stdout(&o).contains("cut here (--output-limit 2000)"),
            "{}",
            stdout(&o)
        );
        assert!(stdout(&o).len() < 8_000, "{}", stdout(&o).len());
        drop(d.stop());

        env.give_to_nobody();
        let o = env
            .nobody()
            .args([
                "tool",
                "exec",
                r#"{"command": "seq 1 300000", "max_output_chars": 6000}"#,
            ])
            .output()
            .expect("gateway");
        assert!(o.status.success(), "{}", text(&o));
        let v = json_of(&o);
        let t = v["content"][0]["text"].as_str().expect("text");
        assert!(t.chars().count() <= 6_000, "{} chars", t.chars().count());
        let out = v["structuredContent"]["stdout"].as_str().expect("stdout");
        assert!(out.starts_with("1\n") && out.ends_with("300000\n"), "{out}");
        assert!(out.contains("cut here"), "{out}");
    }
);

sandbox_test!(
    fn mcp_scan_tool_returns_what_scan_json_returns() {
        // Issue 16: `scan` as an MCP tool, driven by the Python SDK: each argument (path,
        // globs, format, min_confidence) gives what `gateway --json scan` gives, from the
        // server's own broker and through the daemon; through a root daemon, a uid-65534
        // client's scan reads with its own rights (a directory it cannot list yields nothing).
        let env = Env::new("mcp-scan");
        let aws = corpus::expand("AKIA{U:16}", 16);
        let pw = corpus::expand("{a:20}", 61);
        env.write(
            "app/c.env",
            &format!("AWS_KEY={aws}\npassword = \"{pw}\"\n"),
        );
        env.write("app/notes.txt", "nothing to see here\n");
        env.write("skip/k.env", &format!("AWS_KEY={aws}\n"));
        let ws = env.ws.display().to_string();
        let hidden = env.outside.join("hidden");
        std::fs::create_dir(&hidden).expect("mkdir");
        std::fs::write(hidden.join("config.env"), format!("AWS_KEY={aws}\n")).expect("write");
        std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let hidden_s = hidden.display().to_string();
        let calls = serde_json::json!([
            ["scan", {"path": ws}],
            ["scan", {"path": ws, "min_confidence": "high"}],
            ["scan", {"path": ws, "globs": ["skip/"]}],
            ["scan", {"path": ws, "format": "sarif"}],
            ["scan", {"path": hidden_s}],
        ]);
        // What the CLI prints for the same scans (sarif: `--format sarif` without --json).
        let cli = |extra: &[&str]| -> serde_json::Value {
            let o = env
                .cmd()
                .args(["--json", "scan", &ws])
                .args(extra)
                .output()
                .expect("scan");
            assert_eq!(o.status.code(), Some(1), "findings exit 1: {}", text(&o));
            json_of(&o)
        };
        let all = cli(&[]);
        let high = cli(&["--min-confidence", "high"]);
        let kept = cli(&["--exclude", "skip/"]);
        let o = env
            .cmd()
            .args(["scan", "--format", "sarif", &ws])
            .output()
            .expect("sarif");
        let sarif: serde_json::Value = serde_json::from_slice(&o.stdout).expect("sarif json");
        let n = |v: &serde_json::Value| v["findings"].as_array().map_or(0, Vec::len);
        assert_eq!(n(&all), 3, "{all}");
        assert_eq!(n(&high), 2, "{high}");
        assert_eq!(n(&kept), 2, "{kept}");
        // Findings, as the CLI and an MCP result show them (the durations differ).
        let findings = |v: &serde_json::Value| {
            (
                v["findings"].clone(),
                v["files_scanned"].clone(),
                v["bytes_scanned"].clone(),
            )
        };
        let check = |what: &str, mcp: &serde_json::Value| {
            for (i, want) in [&all, &high, &kept].into_iter().enumerate() {
                assert_eq!(mcp[i]["is_error"], false, "{what} {i}: {}", mcp[i]);
                assert_eq!(
                    findings(&mcp[i]["structured"]),
                    findings(want),
                    "{what}: call {i}: {}",
                    mcp[i]
                );
                // The text agents read is the same report.
                let t: serde_json::Value =
                    serde_json::from_str(mcp[i]["text"].as_str().expect("text")).expect("json");
                assert_eq!(findings(&t), findings(want), "{what}: text of call {i}");
            }
            let s = &mcp[3]["structured"];
            assert_eq!(s["version"], sarif["version"], "{what}: {s}");
            assert_eq!(
                s["runs"][0]["results"], sarif["runs"][0]["results"],
                "{what}: sarif results"
            );
            // Never the secret itself, in any result.
            for r in mcp.as_array().expect("calls") {
                assert!(!r.to_string().contains(&aws), "{what}: {r}");
                assert!(!r.to_string().contains(&pw), "{what}: {r}");
            }
        };
        let Some(own) = mcp_client(
            &env,
            "".as_ref(),
            "mcp_report.py",
            &[&calls.to_string()],
            None,
        ) else {
            return;
        };
        check("own broker", &own);
        // As root, the hidden directory is scanned.
        assert_eq!(n(&own[4]["structured"]), 1, "{}", own[4]);

        let d = Daemon::start(&env, "standard", &[]);
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
            .expect("chmod socket");
        let sock = d.socket.as_os_str();
        let Some(via) = mcp_client(&env, sock, "mcp_report.py", &[&calls.to_string()], None) else {
            return;
        };
        check("through the daemon", &via);
        assert_eq!(n(&via[4]["structured"]), 1, "{}", via[4]);
        // A uid-65534 MCP server in front of the root daemon: its own rights decide.
        env.give_to_nobody();
        std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::os::unix::fs::chown(&hidden, Some(0), Some(0)).expect("chown hidden");
        let gateway = nobody_wrapper(&env);
        let Some(nb) = mcp_client_of(
            &env,
            &gateway,
            sock,
            "mcp_report.py",
            &[&calls.to_string()],
            None,
        ) else {
            return;
        };
        check("as uid 65534 through the daemon", &nb);
        assert_eq!(nb[4]["is_error"], false, "{}", nb[4]);
        assert_eq!(n(&nb[4]["structured"]), 0, "{}", nb[4]);
    }
);
