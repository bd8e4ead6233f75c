//! `gateway http` and MCP `http_request` (issue 36) against servers the test starts on
//! loopback: a tiny HTTP/1.1 server in a thread (routes below), and `openssl s_server` with a
//! self-signed certificate for TLS. Test names map to 127.0.0.1 through
//! `GATEWAY_TEST_RESOLVE`, set on the gateway process only.

use crate::util::*;
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};

/// What the test server answers for a path (`port` is its own).
fn route(path: &str, port: u16) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let loc = |to: String| vec![("Location".to_string(), to)];
    match path {
        "/hello" => (200, vec![], b"hello world".to_vec()),
        "/to-hello" => (302, loc(format!("http://web.test:{port}/hello")), vec![]),
        "/to-evil" => (302, loc(format!("http://evil.test:{port}/hello")), vec![]),
        "/to-metadata" => (
            302,
            loc("http://169.254.169.254/latest/meta-data/".into()),
            vec![],
        ),
        "/big" => (200, vec![], vec![b'x'; 3 << 20]),
        "/slow" => {
            std::thread::sleep(std::time::Duration::from_secs(20));
            (200, vec![], b"late".to_vec())
        }
        "/binary" => (200, vec![], vec![0, 1, 2, 0xff, 0xfe, 0, 7]),
        "/leak" => (200, vec![], format!("token={}\n", gh_token(7)).into_bytes()),
        _ => (404, vec![], b"not found".to_vec()),
    }
}

/// Serves one connection: one request, one response, closed.
fn serve_one(mut s: TcpStream, port: u16) {
    let mut r = BufReader::new(s.try_clone().expect("clone"));
    let mut line = String::new();
    if r.read_line(&mut line).is_err() {
        return;
    }
    let target = line.split_whitespace().nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/").to_string();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    let _ = r.read_exact(&mut body);
    let (status, headers, content) = route(&path, port);
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        content.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&content);
}

/// Starts the test server on 127.0.0.1; its port.
fn server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || serve_one(s, port));
        }
    });
    port
}

/// A policy allowing the tool and, on `port`, `web.test` and the address it maps to.
fn policy(env: &Env, port: u16, extra_allow: &[&str], unknown: &str) -> String {
    let mut allow = vec![format!("web.test:{port}"), format!("127.0.0.1:{port}")];
    allow.extend(extra_allow.iter().map(|s| (*s).to_string()));
    let list: Vec<String> = allow.iter().map(|a| format!("{a:?}")).collect();
    env.policy_file(&format!(
        "name = \"web\"\n[sandbox]\nnetwork = {{ proxy = {{ allow = [{}], unknown = \"{unknown}\" }} }}\n\
         [[rule]]\nid = \"allow-http\"\neffect = \"allow\"\ntools = [\"http\"]\nreason = \"the test's requests\"\n",
        list.join(", ")
    ))
}

const RESOLVE: &str =
    "web.test=127.0.0.1,evil.test=127.0.0.1,loop.test=127.0.0.1,tls.test=127.0.0.1";

/// `gateway --policy P --json http ARGS` with the test names.
fn http(env: &Env, pf: &str, args: &[&str]) -> Output {
    env.cmd()
        .env("GATEWAY_TEST_RESOLVE", RESOLVE)
        .args(["--policy", pf, "--json", "http"])
        .args(args)
        .output()
        .expect("gateway http")
}

/// The records of tool `http`.
fn http_records(env: &Env) -> Vec<serde_json::Value> {
    let o = env.gw(&["log", "query", "--tool", "http", "--json", "--limit", "0"]);
    assert!(o.status.success(), "{}", text(&o));
    json_of(&o)["records"].as_array().expect("records").clone()
}

escape_test!(
    /// An allowed host works, pinned to the address its decision checked, and is recorded;
    /// a host no rule allows, an IP literal no rule names and the cloud metadata address are
    /// refused with their rules, before any connection.
    fn http_allowed_host_works_and_others_are_refused() {
        let env = Env::new("http-allow");
        let port = server();
        let pf = policy(&env, port, &[], "deny");
        let url = format!("http://web.test:{port}/hello");
        let o = http(&env, &pf, &["GET", &url]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["status"], 200, "{v}");
        assert_eq!(v["body"], "hello world", "{v}");
        assert_eq!(v["redirects"][0]["address"], "127.0.0.1", "{v}");
        assert_eq!(v["redirects"][0]["rule"], format!("web.test:{port}"), "{v}");
        // Human output: the body on stdout.
        let o = env
            .cmd()
            .env("GATEWAY_TEST_RESOLVE", RESOLVE)
            .args(["--policy", &pf, "http", "GET", &url])
            .output()
            .expect("gateway http");
        assert_eq!(stdout(&o), "hello world", "{}", text(&o));
        // Refused: names no rule allows (unknown = deny), an address literal, metadata.
        for (u, rule) in [
            (format!("http://evil.test:{port}/hello"), "network.unknown"),
            (format!("http://127.0.0.2:{port}/hello"), "network.address"),
            (
                "http://169.254.169.254/latest".to_string(),
                "network.address",
            ),
            (
                format!("http://[::ffff:127.0.0.1]:{port}/hello"),
                "web.test",
            ),
            (
                format!("http://web.test:{}/hello", port + 1),
                "network.unknown",
            ),
        ] {
            let o = http(&env, &pf, &["GET", &u]);
            if rule == "web.test" {
                // An IPv4-mapped literal of an allowed address is that address: allowed.
                assert_eq!(o.status.code(), Some(0), "{u}: {}", text(&o));
                continue;
            }
            assert_eq!(o.status.code(), Some(120), "{u}: {}", text(&o));
            let v = json_of(&o);
            assert_eq!(v["refusal"]["rule"], rule, "{u}: {v}");
            assert!(v["status"].is_null(), "{u}: {v}");
        }
        let recs = http_records(&env);
        assert_eq!(recs.len(), 7, "{recs:?}");
        let ok = &recs[0];
        assert_eq!(ok["tool"], "http");
        assert_eq!(ok["http"]["status"], 200, "{ok}");
        assert_eq!(ok["http"]["method"], "GET", "{ok}");
        assert_eq!(ok["http"]["bytes_received"], 11, "{ok}");
        assert_eq!(ok["stdout"]["bytes"], 11, "{ok}");
        let denied = &recs[2];
        assert_eq!(denied["decision"]["effect"], "deny", "{denied}");
        assert!(
            denied["decision"]["rules"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x == "network.unknown")),
            "{denied}"
        );
        let o = env.gw(&["log", "verify"]);
        assert!(o.status.success(), "{}", text(&o));
    }
);

escape_test!(
    /// A name that resolves to loopback is refused unless a rule names the address: a name
    /// rule alone never reaches a special address.
    fn http_a_name_resolving_to_loopback_is_refused() {
        let env = Env::new("http-loop");
        let port = server();
        let pf = env.policy_file(&format!(
            "[sandbox]\nnetwork = {{ proxy = {{ allow = [\"loop.test:{port}\"] }} }}\n\
             [[rule]]\nid = \"allow-http\"\neffect = \"allow\"\ntools = [\"http\"]\nreason = \"t\"\n"
        ));
        let o = http(
            &env,
            &pf,
            &["GET", &format!("http://loop.test:{port}/hello")],
        );
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["refusal"]["rule"], "network.address", "{v}");
        assert!(
            v["refusal"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("loopback")),
            "{v}"
        );
    }
);

sandbox_test!(
    fn http_each_redirect_is_decided_again() {
        let env = Env::new("http-redirect");
        let port = server();
        let pf = policy(&env, port, &[], "deny");
        // To an allowed host: followed, both hops recorded.
        let o = http(
            &env,
            &pf,
            &["GET", &format!("http://web.test:{port}/to-hello")],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["status"], 200, "{v}");
        assert_eq!(v["redirects"].as_array().map(Vec::len), Some(2), "{v}");
        assert_eq!(v["redirects"][0]["status"], 302, "{v}");
        // Not followed when asked not to.
        let o = http(
            &env,
            &pf,
            &[
                "GET",
                &format!("http://web.test:{port}/to-hello"),
                "--max-redirects",
                "0",
            ],
        );
        assert_eq!(json_of(&o)["status"], 302, "{}", text(&o));
        // To a host no rule allows: refused at that hop, naming its rule.
        for (path, rule) in [
            ("/to-evil", "network.unknown"),
            ("/to-metadata", "network.address"),
        ] {
            let o = http(
                &env,
                &pf,
                &["GET", &format!("http://web.test:{port}{path}")],
            );
            assert_eq!(o.status.code(), Some(120), "{path}: {}", text(&o));
            let v = json_of(&o);
            assert_eq!(v["refusal"]["rule"], rule, "{path}: {v}");
            let hops = v["redirects"].as_array().expect("hops");
            assert_eq!(hops.len(), 2, "{v}");
            assert_eq!(hops[0]["status"], 302, "{v}");
            assert!(hops[1]["status"].is_null(), "{v}");
            assert_eq!(hops[1]["rule"], rule, "{v}");
            assert!(v["body"].is_null(), "{v}");
        }
        let recs = http_records(&env);
        let last = recs.last().expect("a record");
        assert_eq!(last["decision"]["effect"], "deny", "{last}");
        assert_eq!(last["decision"]["rules"][0], "network.address", "{last}");
        assert_eq!(
            last["http"]["hops"].as_array().map(Vec::len),
            Some(2),
            "{last}"
        );
    }
);

sandbox_test!(
    fn http_a_request_carrying_a_token_is_refused_and_a_response_redacted() {
        let env = Env::new("http-secrets");
        let port = server();
        let pf = policy(&env, port, &[], "deny");
        let tok = gh_token(3);
        let url = format!("http://web.test:{port}/hello");
        for args in [
            vec!["-H".to_string(), format!("Authorization: Bearer {tok}")],
            vec!["--data".to_string(), format!("token={tok}")],
        ] {
            let mut a = vec!["POST".to_string(), url.clone()];
            a.extend(args);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            let o = http(&env, &pf, &a);
            assert_eq!(o.status.code(), Some(120), "{}", text(&o));
            assert!(!text(&o).contains(&tok), "{}", text(&o));
            assert!(stderr(&o).contains("secrets.input") || stdout(&o).contains("secrets.input"));
        }
        let o = http(&env, &pf, &["GET", &format!("{url}?t={tok}")]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        // The response's secret is redacted in the report and the stored body.
        let o = http(&env, &pf, &["GET", &format!("http://web.test:{port}/leak")]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let leaked = gh_token(7);
        assert!(!stdout(&o).contains(&leaked), "{}", text(&o));
        assert!(stdout(&o).contains("[REDACTED:"), "{}", text(&o));
        let mut files = Vec::new();
        walk(&env.state, &mut files);
        for f in files {
            let b = std::fs::read(&f).unwrap_or_default();
            let s = String::from_utf8_lossy(&b);
            assert!(!s.contains(&tok) && !s.contains(&leaked), "{}", f.display());
        }
    }
);

sandbox_test!(
    fn http_body_is_capped_and_a_binary_body_is_stored_not_inlined() {
        let env = Env::new("http-body");
        let port = server();
        let pf = policy(&env, port, &[], "deny");
        let o = http(
            &env,
            &pf,
            &[
                "GET",
                &format!("http://web.test:{port}/big"),
                "--max-body",
                "1000",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["body_bytes"], 1000, "{v}");
        assert_eq!(v["body_truncated"], true, "{v}");
        assert_eq!(v["body"].as_str().map(str::len), Some(1000));
        // Default cap: 1 MiB of the 3 MiB.
        let v = json_of(&http(
            &env,
            &pf,
            &["GET", &format!("http://web.test:{port}/big")],
        ));
        assert_eq!(v["body_bytes"], 1 << 20, "{}", v["body_bytes"]);
        let o = http(
            &env,
            &pf,
            &["GET", &format!("http://web.test:{port}/binary")],
        );
        let v = json_of(&o);
        assert_eq!(v["body_binary"], true, "{v}");
        assert!(v["body"].is_null(), "{v}");
        assert_eq!(v["body_bytes"], 7, "{v}");
        assert!(v["body_artifact"].is_string(), "{v}");
        // Beyond the limit: a usage error.
        let o = http(
            &env,
            &pf,
            &[
                "GET",
                &format!("http://web.test:{port}/big"),
                "--max-body",
                "999999999",
            ],
        );
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
    }
);

sandbox_test!(
    fn http_tls_is_verified_against_a_self_signed_server() {
        let env = Env::new("http-tls");
        let key = env.root.join("k.pem");
        let crt = env.root.join("c.pem");
        let o = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                "/CN=tls.test",
                "-addext",
                "subjectAltName=DNS:tls.test",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&crt)
            .output()
            .expect("openssl req");
        assert!(o.status.success(), "{}", text(&o));
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a port")
            .port();
        let mut tls = Command::new("openssl")
            .args(["s_server", "-www", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("-cert")
            .arg(&crt)
            .arg("-key")
            .arg(&key)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("openssl s_server");
        for _ in 0..200 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let pf = env.policy_file(&format!(
            "[sandbox]\nnetwork = {{ proxy = {{ allow = [\"tls.test:{port}\", \"127.0.0.1:{port}\"] }} }}\n\
             [[rule]]\nid = \"allow-http\"\neffect = \"allow\"\ntools = [\"http\"]\nreason = \"t\"\n"
        ));
        let o = http(&env, &pf, &["GET", &format!("https://tls.test:{port}/")]);
        let _ = tls.kill();
        let _ = tls.wait();
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let v = json_of(&o);
        let m = v["error"]["message"].as_str().unwrap_or_default();
        assert!(m.contains("certificate"), "{v}");
        assert_eq!(v["error"]["code"], "failed", "{v}");
        // Recorded: the call failed, its error said.
        let recs = http_records(&env);
        assert_eq!(recs.len(), 1, "{recs:?}");
        assert!(
            recs[0]["error"]
                .as_str()
                .is_some_and(|e| e.contains("certificate")),
            "{}",
            recs[0]
        );
    }
);

sandbox_test!(
    fn http_without_a_network_or_a_rule_is_refused() {
        let env = Env::new("http-nonet");
        let port = server();
        let url = format!("http://127.0.0.1:{port}/hello");
        // strict: no rule for the tool (default deny).
        let o = http(&env, "strict", &["GET", &url]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert_eq!(
            json_of(&o)["refusal"]["rule"],
            "default-deny",
            "{}",
            text(&o)
        );
        // A rule, but no network.
        let pf = env.policy_file(
            "[sandbox]\nnetwork = \"loopback\"\n[[rule]]\nid = \"h\"\neffect = \"allow\"\ntools = [\"http\"]\nreason = \"t\"\n",
        );
        let o = http(&env, &pf, &["GET", &url]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["refusal"]["rule"], "sandbox.network", "{v}");
        assert!(
            v["refusal"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("proxy")),
            "{v}"
        );
        // connect_tcp: names on its ports; special addresses still refused.
        let pf = env.policy_file(&format!(
            "[sandbox]\nnetwork = {{ connect_tcp = [{port}] }}\n[[rule]]\nid = \"h\"\neffect = \"allow\"\ntools = [\"http\"]\nreason = \"t\"\n"
        ));
        let o = http(
            &env,
            &pf,
            &["GET", &format!("http://web.test:{port}/hello")],
        );
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert_eq!(
            json_of(&o)["refusal"]["rule"],
            "network.address",
            "{}",
            text(&o)
        );
    }
);

/// Plain JSON-RPC to `gateway mcp`: initialize, then one `tools/call` per (id, args); the
/// results in order.
fn mcp_calls(mut cmd: Command, calls: &[serde_json::Value]) -> Vec<serde_json::Value> {
    let mut child = cmd
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("gateway mcp");
    let mut input = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut answer = |id: usize| -> serde_json::Value {
        loop {
            let l = lines.next().expect("an answer").expect("a line");
            let v: serde_json::Value = serde_json::from_str(&l).expect("json");
            if v["id"] == id {
                return v["result"].clone();
            }
        }
    };
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
    )
    .expect("write");
    answer(0);
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .expect("w");
    let mut out = Vec::new();
    for (i, args) in calls.iter().enumerate() {
        let m = serde_json::json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": "http_request", "arguments": args}});
        writeln!(input, "{m}").expect("write");
        out.push(answer(i + 1));
    }
    drop(input);
    let _ = child.wait();
    out
}

escape_test!(
    fn http_request_through_mcp() {
        let env = Env::new("http-mcp");
        let port = server();
        let pf = policy(&env, port, &[], "deny");
        let mut cmd = env.cmd();
        cmd.env("GATEWAY_TEST_RESOLVE", RESOLVE)
            .args(["--policy", &pf]);
        let r = mcp_calls(
            cmd,
            &[
                serde_json::json!({"method": "GET", "url": format!("http://web.test:{port}/hello"),
                    "params": {"q": "a b"}, "headers": {"Accept": "text/plain"}}),
                serde_json::json!({"method": "GET", "url": format!("http://web.test:{port}/to-evil")}),
                serde_json::json!({"method": "GET", "url": format!("http://web.test:{port}/to-hello"),
                    "follow_redirects": false}),
            ],
        );
        assert_eq!(r[0]["isError"], false, "{}", r[0]);
        let v = &r[0]["structuredContent"];
        assert_eq!(v["status"], 200, "{v}");
        assert_eq!(v["body"], "hello world", "{v}");
        assert!(
            v["redirects"][0]["url"]
                .as_str()
                .is_some_and(|u| u.ends_with("/hello?q=a+b")),
            "{v}"
        );
        assert_eq!(r[1]["isError"], true, "{}", r[1]);
        assert_eq!(
            r[1]["structuredContent"]["refusal"]["rule"], "network.unknown",
            "{}",
            r[1]
        );
        assert_eq!(r[2]["structuredContent"]["status"], 302, "{}", r[2]);
        let recs = http_records(&env);
        assert_eq!(recs.len(), 3, "{recs:?}");
        assert_eq!(recs[0]["caller"]["client"], "mcp", "{}", recs[0]);
    }
);

// Through the daemon: the same call, and `unknown = "ask"` answered by `gateway approve`.
sandbox_test!(
    fn http_through_the_daemon_and_an_unknown_host_approved() {
        let env = Env::new("http-daemon");
        let port = server();
        let pf = policy(&env, port, &[], "ask");
        let mut c = env.cmd();
        c.env("GATEWAY_TEST_RESOLVE", RESOLVE);
        let d = Daemon::start_from(c, &env, &pf, &[]);
        let o = d
            .cmd(&env)
            .args([
                "--json",
                "http",
                "GET",
                &format!("http://web.test:{port}/hello"),
            ])
            .output()
            .expect("http");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(json_of(&o)["body"], "hello world", "{}", text(&o));
        // evil.test:PORT is unknown: asked; approved, it is sent.
        let ch = d
            .cmd(&env)
            .args([
                "--json",
                "http",
                "GET",
                &format!("http://evil.test:{port}/hello"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut id = None;
        for _ in 0..500 {
            let o = d
                .cmd(&env)
                .args(["--json", "pending"])
                .output()
                .expect("pending");
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
            if let Some(p) = v["requests"].as_array().and_then(|r| r.first()) {
                assert_eq!(p["tool"], "http", "{p}");
                id = p["id"].as_u64();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let id = id.expect("a pending request");
        let o = d
            .cmd(&env)
            .args(["approve", &id.to_string()])
            .output()
            .expect("approve");
        assert!(o.status.success(), "{}", text(&o));
        let o = ch.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["approved"], true, "{v}");
        assert_eq!(v["redirects"][0]["rule"], "network.unknown", "{v}");
        assert_eq!(v["body"], "hello world", "{v}");
    }
);

escape_test!(
    /// A call cancelled by its MCP client ends at once, recorded as cancelled, though the
    /// server has not answered.
    fn http_request_cancelled_by_the_mcp_client_ends_and_is_recorded() {
        let env = Env::new("http-cancel");
        let port = server();
        let pf = policy(&env, port, &[], "deny");
        let mut child = env
            .cmd()
            .env("GATEWAY_TEST_RESOLVE", RESOLVE)
            .args(["--policy", &pf, "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("gateway mcp");
        let mut input = child.stdin.take().expect("stdin");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        writeln!(
            input,
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
        )
        .expect("write");
        let _ = lines.next();
        writeln!(
            input,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("w");
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "http_request", "arguments":
                {"method": "GET", "url": format!("http://web.test:{port}/slow")}}});
        writeln!(input, "{call}").expect("write");
        std::thread::sleep(std::time::Duration::from_millis(500));
        let start = std::time::Instant::now();
        writeln!(
            input,
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":1}}}}"#
        )
        .expect("write");
        let mut recs = Vec::new();
        while start.elapsed() < std::time::Duration::from_secs(10) {
            recs = http_records(&env);
            if !recs.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        drop(input);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(recs.len(), 1, "no record within 10 s of the cancellation");
        assert_eq!(recs[0]["cancelled"], true, "{}", recs[0]);
        assert!(
            recs[0]["error"]
                .as_str()
                .is_some_and(|e| e.contains("cancelled")),
            "{}",
            recs[0]
        );
    }
);
