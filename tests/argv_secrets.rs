//! Issue 16: secrets on command lines are found after the shell's quote removal and the
//! expansions the analyser resolves, as well as raw; the audit record's argv is redacted the
//! same way; a secrets refusal keeps its own wording.

use crate::util::*;
use std::io::Write;
use std::process::Stdio;

/// Every byte the audit log holds, as text.
fn audit_text(env: &Env) -> String {
    let mut log = Vec::new();
    let mut files = Vec::new();
    if !env.state.join("audit").is_dir() {
        return String::new();
    }
    walk(&env.state.join("audit"), &mut files);
    for f in files {
        log.extend(std::fs::read(f).expect("read"));
    }
    String::from_utf8_lossy(&log).into_owned()
}

/// The JSON-RPC result of MCP `exec` of `command` under `policy` (stdio, no daemon).
fn mcp_exec(env: &Env, policy: &str, command: &str) -> String {
    let mut child = env
        .cmd()
        .args(["--policy", policy, "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("gateway mcp");
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "exec", "arguments": {"command": command}}});
    {
        let mut input = child.stdin.take().expect("stdin");
        for m in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#.to_string(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
            call.to_string(),
        ] {
            writeln!(input, "{m}").expect("write");
        }
        // Give the server the time to answer before its stdin closes.
        let t = std::time::Instant::now();
        while !audit_text(env).contains("\"exec\"") {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(30),
                "no exec record"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    let o = child.wait_with_output().expect("wait");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

sandbox_test! {
    fn secrets_split_by_shell_quoting_are_found_in_argv_and_never_recorded() {
        let env = Env::new("argv-quoted");
        let tok = gh_token(1601);
        let rest = &tok["ghp_".len()..];
        // Refused under `deny` (standard), through exec and through `gateway sh`.
        let quoted = format!("echo gh''p_{rest}");
        for o in [
            env.exec("standard", &["sh", "-c", &quoted]),
            env.gw(&["--policy", "standard", "sh", "-c", &format!("echo \"gh\"p_{rest}")]),
            env.gw(&["--policy", "standard", "sh", "-c", &format!("echo gh\\p_{rest}")]),
        ] {
            assert_eq!(o.status.code(), Some(120), "{}", text(&o));
            assert!(stderr(&o).contains("github-pat"), "{}", text(&o));
        }
        // Under `redact` the command runs with the secret cut out, quoting intact.
        let p = env.policy_file("extends = \"standard\"\n[secrets]\ninput = \"redact\"\n");
        let o = env.exec(&p, &["sh", "-c", &format!("printf %s 'gh'p_{rest}' x' > out.txt")]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("out.txt")).expect("out"),
            "[REDACTED:github-pat] x"
        );
        // Under `warn` (permissive) it runs as written; the record keeps no secret, also
        // when only the analyser's brace expansion makes the token whole.
        let o = env.exec("permissive", &["sh", "-c", &quoted]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(stderr(&o).contains("github-pat"), "{}", text(&o));
        let o = env.exec("permissive", &["sh", "-c", &format!("true gh{{p_{rest},}}")]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(stderr(&o).contains("github-pat"), "{}", text(&o));
        let o = env.gw(&["--policy", "permissive", "sh", "-c", &quoted]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let log = audit_text(&env);
        assert!(log.contains("[REDACTED:github-pat]"), "{log}");
        assert!(!log.contains(rest), "a token split by quoting is in the audit log");
    }
}

sandbox_test! {
    fn mcp_exec_finds_secrets_split_by_shell_quoting() {
        let env = Env::new("argv-mcp");
        let tok = gh_token(1602);
        let rest = &tok["ghp_".len()..];
        let out = mcp_exec(&env, "standard", &format!("echo gh''p_{rest}"));
        assert!(out.contains("secrets.input"), "{out}");
        assert!(!out.contains(rest), "{out}");
        let log = audit_text(&env);
        assert!(log.contains("secret_in_input") || log.contains("secrets.input"), "{log}");
        assert!(!log.contains(rest), "a token split by quoting is in the audit log");
        let env = Env::new("argv-mcp-warn");
        let out = mcp_exec(&env, "permissive", &format!("echo \"gh\"p_{rest}"));
        assert!(!out.contains(rest), "{out}");
        let log = audit_text(&env);
        assert!(log.contains("[REDACTED:github-pat]"), "{log}");
        assert!(!log.contains(rest), "a token split by quoting is in the audit log");
    }
}

sandbox_test! {
    fn a_secrets_refusal_keeps_its_wording_and_redacts_the_value() {
        let env = Env::new("argv-wording");
        let tok = gh_token(1603);
        let o = env.gw(&["--json", "exec", "--policy", "standard", "--", "echo", &tok]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let v = json_of(&o);
        let msg = v["refusal"]["message"].as_str().expect("message");
        assert!(msg.contains("secrets.input = \"deny\""), "{msg}");
        assert!(!msg.contains("REDACTED"), "{msg}");
        let o = env.gw(&["--json", "exec", "--policy", "standard", "--", "echo", &format!("password={tok}")]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let r = log_records(&env);
        let last = r.last().expect("record").to_string();
        assert!(last.contains(r#"secrets.input = \"deny\""#), "{last}");
        assert!(!last.contains(&tok), "{last}");
    }
}

sandbox_test! {
    fn secrets_behind_command_line_flags_are_found_in_argv_and_never_recorded() {
        let env = Env::new("argv-flags");
        let pw = crate::corpus::expand("{a:20}", 1604);
        // Refused under `deny` (standard): as argv words, and inside a shell string.
        for argv in [
            vec!["mysql".to_string(), "-uroot".into(), format!("-p{pw}"), "shop".into()],
            vec!["true".to_string(), "--password".into(), pw.clone()],
            vec!["sshpass".to_string(), "-p".into(), pw.clone(), "true".into()],
            vec!["sh".to_string(), "-c".into(), format!("mysqldump -p{pw} shop > x.sql")],
        ] {
            let args: Vec<&str> = argv.iter().map(String::as_str).collect();
            let o = env.exec("standard", &args);
            assert_eq!(o.status.code(), Some(120), "{argv:?}: {}", text(&o));
            assert!(stderr(&o).contains("keyword-secret"), "{argv:?}: {}", text(&o));
        }
        // Under `redact` the value is cut out of the argument the command gets.
        let p = env.policy_file("extends = \"standard\"\n[secrets]\ninput = \"redact\"\n");
        let o = env.exec(&p, &["sh", "-c", "printf '%s\\n' \"$@\" > out.txt", "sh", "--password", &pw]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("out.txt")).expect("out"),
            "--password\n[REDACTED:keyword-secret]\n"
        );
        // Under `warn` (permissive) it runs; the record keeps no value.
        let o = env.exec("permissive", &["true", "--password", &pw]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let o = env.exec("permissive", &["sh", "-c", &format!("http -a admin:{pw} :9 2>/dev/null; mysql -p{pw} 2>/dev/null; true")]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let log = audit_text(&env);
        assert!(log.contains("[REDACTED:keyword-secret]"), "{log}");
        assert!(!log.contains(&pw), "a flag's secret value is in the audit log: {}", log.lines().filter(|l| l.contains(&pw)).map(|l| &l[..l.len().min(600)]).collect::<Vec<_>>().join("\n"));
    }
}
