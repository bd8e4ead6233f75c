//! Issue 38: everything that leaves the broker passes one gate — records, reports, views of
//! the undo store, MCP results — and MCP's budget bounds the whole result. Inputs are
//! recorded redacted past the scan: a secret flag's or assignment's whole value, and stdin.

use crate::corpus;
use crate::util::*;

/// Every byte the state directory holds (log, artifacts, journal, snapshots), as text.
fn state_text(env: &Env) -> String {
    let mut files = Vec::new();
    walk(&env.state, &mut files);
    let mut all = Vec::new();
    for f in files {
        all.extend(std::fs::read(f).unwrap_or_default());
    }
    String::from_utf8_lossy(&all).into_owned()
}

/// Every byte of the audit log and its artifacts, as text.
fn audit_text(env: &Env) -> String {
    let mut files = Vec::new();
    walk(&env.state.join("audit"), &mut files);
    let mut all = Vec::new();
    for f in files {
        all.extend(std::fs::read(f).unwrap_or_default());
    }
    String::from_utf8_lossy(&all).into_owned()
}

/// The seq of the newest record.
fn last_seq(env: &Env) -> u64 {
    log_records(env)
        .iter()
        .filter_map(|r| r["seq"].as_u64())
        .max()
        .expect("a record")
}

/// The JSON-RPC output of `gateway mcp` for one `tools/call` of `name` with `arguments`.
fn mcp_call(env: &Env, policy: &str, name: &str, arguments: serde_json::Value) -> String {
    let mut child = env
        .cmd()
        .args(["--policy", policy, "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("gateway mcp");
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}});
    let mut input = child.stdin.take().expect("stdin");
    for m in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        call.to_string(),
    ] {
        writeln!(input, "{m}").expect("write");
    }
    // The answer to the call (read line by line on a thread of its own, so that a server
    // that never answers fails the test instead of hanging it), then its stdin closed.
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(out)) {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut answer = String::new();
    while let Ok(line) =
        rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        if line.contains("\"id\":2") {
            answer = line;
            break;
        }
    }
    drop(input);
    let _ = child.kill();
    let _ = child.wait();
    answer
}

sandbox_test! {
    fn a_long_session_token_of_a_refused_env_is_recorded_redacted_whole() {
        // A refused `env AWS_SESSION_TOKEN=<900 bytes>` kept the tail past byte 200 in the
        // record (`log show`, `log query`).
        let env = Env::new("gate-long-token");
        let value = corpus::expand("{a:900}", 3801);
        let tail = &value[value.len() - 60..];
        let o = env.exec("standard", &["env", &format!("AWS_SESSION_TOKEN={value}"), "true"]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(!text(&o).contains(tail), "{}", text(&o));
        let seq = last_seq(&env).to_string();
        let shown = env.gw(&["log", "show", "--json", &seq]);
        assert!(shown.status.success(), "{}", text(&shown));
        assert!(!stdout(&shown).contains(tail), "{}", stdout(&shown));
        assert!(stdout(&shown).contains("AWS_SESSION_TOKEN=[REDACTED:"), "{}", stdout(&shown));
        assert!(!audit_text(&env).contains(tail), "the log keeps the value's tail");
    }
}

sandbox_test! {
    fn a_secret_flags_value_is_recorded_redacted_whatever_its_shape() {
        // `mysql --password=a;b` kept `;b`: a secret flag's value is the whole argv word.
        // (A program that prints nothing: what output redaction makes of it is not this.)
        let env = Env::new("gate-flag-value");
        let pw = corpus::expand("{a:14}", 3802);
        let rest = corpus::expand("{a:12}", 3803);
        for args in [
            vec!["true".to_string(), format!("--password={pw};{rest}")],
            vec!["true".to_string(), "--password".into(), format!("{pw};{rest}")],
            vec!["env".to_string(), format!("DB_PASSWORD={pw};{rest}"), "true".into()],
        ] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            // Under `deny` it is refused; under `warn` it runs: either way the record keeps
            // neither part.
            for policy in ["standard", "permissive"] {
                let o = env.exec(policy, &args);
                assert!(o.status.code().is_some(), "{}", text(&o));
                let seq = last_seq(&env).to_string();
                let shown = stdout(&env.gw(&["log", "show", "--json", &seq]));
                assert!(!shown.contains(&rest), "{args:?} under {policy}: {shown}");
                assert!(!shown.contains(&pw), "{args:?} under {policy}: {shown}");
            }
        }
        let log = audit_text(&env);
        assert!(!log.contains(&rest) && !log.contains(&pw), "the log keeps the value");
    }
}

sandbox_test! {
    fn stdin_is_stored_redacted_whatever_the_command_is_given() {
        // A piped docker config was stored raw in the stdin artifact (`secrets.input =
        // "warn"` gives the command its input unchanged; the record never keeps it).
        let env = Env::new("gate-stdin");
        let tok = gh_token(3804);
        let config = format!("{{\"auths\":{{\"registry\":{{\"auth\":\"{tok}\"}}}}}}\n");
        let mut child = env
            .cmd()
            .args(["exec", "--policy", "permissive", "--", "wc", "-c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(config.as_bytes())
            .expect("write");
        let o = child.wait_with_output().expect("wait");
        assert!(o.status.success(), "{}", text(&o));
        // The command got its input whole ...
        assert_eq!(stdout(&o).trim(), config.len().to_string());
        // ... and the record has an artifact of it, without the token.
        let recs = log_records(&env);
        let rec = recs.last().expect("record");
        assert!(rec["stdin"]["artifact"].is_string(), "{rec}");
        assert!(rec["secrets"].to_string().contains("stdin:github-pat"), "{rec}");
        assert!(!state_text(&env).contains(&tok), "the state directory keeps the token");
        let shown = env.gw(&["log", "show", "--json", &rec["seq"].to_string()]);
        assert!(!stdout(&shown).contains(&tok), "{}", stdout(&shown));
    }
}

#[test]
fn config_show_says_why_a_policy_does_not_load_without_its_secrets() {
    // `config show` prints outside a report: a policy's load error quotes the policy's text,
    // a token in a value or in a field's name with it.
    let env = Env::new("gate-config-show");
    let tok = gh_token(3808);
    for (i, body) in [
        format!("name = \"bad\"\nunanalysable = \"{tok}\"\n"),
        format!("name = \"bad\"\n{tok} = 1\n"),
    ]
    .iter()
    .enumerate()
    {
        let p = env.root.join(format!("p{i}.toml"));
        std::fs::write(&p, body).expect("policy");
        let p = p.to_str().expect("utf-8");
        for json in [false, true] {
            let mut args = vec!["--policy", p, "config", "show"];
            if json {
                args.push("--json");
            }
            let o = env.gw(&args);
            assert!(!o.status.success(), "{}", text(&o));
            assert!(!text(&o).contains(&tok), "{args:?}: {}", text(&o));
            assert!(
                text(&o).contains("does not load") || text(&o).contains("policy_error"),
                "{}",
                text(&o)
            );
            assert!(
                text(&o).contains("REDACTED:github-pat"),
                "{args:?}: {}",
                text(&o)
            );
        }
    }
}

#[test]
fn an_argument_with_an_escape_inside_a_token_is_recorded_redacted() {
    // `echo "x<half>ESC[0m<half>"`: a terminal shows the token whole; the record kept it.
    let env = Env::new("gate-argv-escape");
    let tok = gh_token(3809);
    let arg = format!("x{}\x1b[0m{}", &tok[..12], &tok[12..]);
    let _ = env.gw(&["exec", "--policy", "permissive", "--", "echo", &arg]);
    let rec = log_records(&env).last().cloned().expect("record");
    let args = rec["args"].to_string();
    let shown = args.replace("\\u001b[0m", "");
    assert!(!shown.contains(&tok), "{args}");
    assert!(!shown.contains(&tok[12..]), "{args}");
    assert!(args.contains("REDACTED"), "{args}");
}

#[test]
fn log_tail_follow_shows_a_raw_record_redacted() {
    // `log tail -f` prints records outside a report: a record that holds a token (written by
    // a build before the gate, or by hand) is shown redacted like `log show` shows it.
    let env = Env::new("gate-tail-follow");
    let o = env.gw(&["exec", "--policy", "permissive", "--", "true"]);
    assert!(o.status.success(), "{}", text(&o));
    let log = env.state.join("audit").join("log.jsonl");
    let lines = std::fs::read_to_string(&log).expect("log");
    let last = lines.lines().last().expect("a record");
    let mut rec: serde_json::Value = serde_json::from_str(last).expect("json");
    let tok = gh_token(3807);
    rec["seq"] = serde_json::json!(rec["seq"].as_u64().expect("seq") + 1);
    rec["args"] = serde_json::json!(["echo", tok]);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .expect("open");
    writeln!(f, "{rec}").expect("append");
    for json in [false, true] {
        let mut args = vec!["log", "tail", "-f", "-n", "5"];
        if json {
            args.push("--json");
        }
        let mut child = env
            .cmd()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tail -f");
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let _ = child.kill();
        let o = child.wait_with_output().expect("wait");
        let out = stdout(&o);
        assert!(!out.contains(&tok), "json {json}: {out}");
        assert!(out.contains("REDACTED:github-pat"), "json {json}: {out}");
    }
}

sandbox_test! {
    fn output_passed_through_under_warn_is_stored_redacted() {
        // `secrets.output = "warn"` gives the caller the output unchanged; the record (the
        // stored stdout and stderr, the inline output) kept it raw too.
        let env = Env::new("gate-warn-output");
        let tok = gh_token(3806);
        env.write("t", &tok);
        let warn = env.root.join("warn.toml");
        std::fs::write(&warn, "extends = \"standard\"\n[secrets]\noutput = \"warn\"\n")
            .expect("policy");
        let script = "cat t; echo; cat t >&2; echo >&2";
        let o = env.sh(warn.to_str().expect("utf-8"), script);
        assert!(o.status.success(), "{}", text(&o));
        // The caller got it whole, on both streams ...
        assert_eq!(stdout(&o), format!("{tok}\n"));
        assert!(stderr(&o).contains(&tok), "{}", stderr(&o));
        // ... and nothing stored or shown from the record keeps it.
        let rec = log_records(&env).last().cloned().expect("record");
        assert!(rec["stdout"]["artifact"].is_string(), "{rec}");
        assert!(!state_text(&env).contains(&tok), "the state directory keeps the token");
        let seq = rec["seq"].to_string();
        for args in [vec!["log", "show", &seq], vec!["log", "show", "--json", &seq]] {
            let shown = env.gw(&args);
            assert!(shown.status.success(), "{}", text(&shown));
            assert!(!text(&shown).contains(&tok), "{args:?}: {}", text(&shown));
            assert!(text(&shown).contains("[REDACTED:github-pat]"), "{}", text(&shown));
        }
    }
}

sandbox_test! {
    fn a_file_named_with_a_token_is_shown_redacted_by_every_view() {
        // The undo store keeps real names (undo restores them); every view of it passes the
        // gate: history, undo, `log show`, MCP.
        let env = Env::new("gate-file-name");
        let tok = gh_token(3805);
        // The name comes from a file, so that no command line holds the token.
        std::fs::write(env.root.join("name"), &tok).expect("write");
        let name = env.root.join("name").display().to_string();
        let o = env.sh("standard", &format!("echo hi > \"f-$(cat {name}).txt\""));
        assert!(o.status.success(), "{}", text(&o));
        assert!(env.ws.join(format!("f-{tok}.txt")).exists(), "not created");
        assert!(!text(&o).contains(&tok), "{}", text(&o));
        let seq = last_seq(&env).to_string();
        let views: Vec<(&str, Vec<&str>)> = vec![
            ("history", vec!["history"]),
            ("history --json", vec!["history", "--json"]),
            ("undo --dry-run", vec!["undo", "--dry-run"]),
            ("undo --dry-run --json", vec!["undo", "--dry-run", "--json"]),
            ("log show", vec!["log", "show", &seq]),
            ("log show --json", vec!["log", "show", "--json", &seq]),
            ("tool history", vec!["tool", "history", "{}"]),
            ("tool undo", vec!["tool", "undo", r#"{"dry_run": true}"#]),
        ];
        let mut shown_any = false;
        for (what, args) in views {
            let o = env.gw(&args);
            assert!(!text(&o).contains(&tok), "{what}: {}", text(&o));
            shown_any |= text(&o).contains("f-[REDACTED:github-pat].txt");
        }
        assert!(shown_any, "no view names the file");
        let mcp = mcp_call(&env, "standard", "history", serde_json::json!({}));
        assert!(mcp.contains("\"result\""), "{mcp}");
        assert!(!mcp.contains(&tok), "{mcp}");
        // Undone, it is restored under its real name (the store keeps it).
        let o = env.gw(&["undo"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(!text(&o).contains(&tok), "{}", text(&o));
        assert!(!env.ws.join(format!("f-{tok}.txt")).exists(), "not undone");
    }
}

/// A command of about 100 KB wrapped in `eval`s (the analyser unwraps each level: the
/// decision's commands and rule subjects hold it many times over).
fn eval_wrapped() -> String {
    let mut cmd = format!(
        "echo {}",
        (0..15_000)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    for _ in 0..4 {
        cmd = format!("eval '{}'", cmd.replace('\'', r"'\''"));
    }
    cmd
}

sandbox_test! {
    fn mcp_budget_bounds_the_whole_result_kept_fields_too() {
        // A 100 KB command wrapped in `eval`s came back as 3.4 M characters against
        // `max_output_chars` 4000: the decision's fields were never cut.
        let env = Env::new("gate-mcp-budget");
        let cmd = eval_wrapped();
        assert!(cmd.len() > 90_000, "{}", cmd.len());
        let args = serde_json::json!({"command": cmd, "max_output_chars": 4000});
        let line = mcp_call(&env, "standard", "exec", args.clone());
        assert!(line.contains("\"result\""), "{}", &line[..line.len().min(2000)]);
        // The text and the structured content, each within the budget, and the envelope.
        assert!(line.chars().count() < 3 * 4000, "{} characters", line.chars().count());
        let v: serde_json::Value = serde_json::from_str(&line).expect("json");
        let r = &v["result"];
        let t = r["content"][0]["text"].as_str().expect("text");
        assert!(t.chars().count() <= 4000, "{}", t.chars().count());
        let sc = &r["structuredContent"];
        assert!(sc.to_string().chars().count() <= 4000, "{}", sc.to_string().len());
        // Cut visibly, saying where the rest is.
        let seq = sc["audit"]["seq"].as_u64().expect("seq");
        assert!(sc["budget"]["cut_chars"].as_u64().is_some_and(|c| c > 100_000), "{sc}");
        assert!(t.contains(&format!("`gateway log show {seq}`")), "{t}");
        assert_eq!(sc["decision"]["effect"], "allow", "{sc}");
        // `gateway tool` (the same tool through the CLI) is bounded the same way.
        let o = env.gw(&["tool", "exec", &args.to_string()]);
        assert!(o.status.success(), "{}", &text(&o)[..text(&o).len().min(2000)]);
        assert!(stdout(&o).chars().count() < 3 * 4000, "{}", stdout(&o).len());
    }
}
