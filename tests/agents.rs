//! Real agents (Claude Code, Codex, Gemini CLI, from npm) driven headless against a scripted model server
//! on loopback: the server answers each model request with the next tool call of a script,
//! then a final answer, and keeps every request, so a test sees exactly what the agent sent
//! back (the tool results). The agents run with gateway as their MCP server and, for Claude
//! Code, as their shell (`CLAUDE_CODE_SHELL` = a `gateway-bash` link), as README says.
//!
//! The CLIs come from `$GATEWAY_TEST_TOOLS` (default `target/tools`), where the test command's
//! bootstrap installs them. Missing, the tests fail; `GATEWAY_TEST_NO_AGENTS=1` skips them
//! explicitly (CI does not set it).

use crate::util::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// The versions these tests were written against (README says the same).
const INSTALL: &str = "scripts/test --bootstrap-only tools (npm install --prefix target/tools @anthropic-ai/claude-code@2.1.197 @openai/codex@0.169.0 @google/gemini-cli@0.61.0)";

/// The agent CLI `name` (`claude`, `codex`, `gemini`), or `None` when GATEWAY_TEST_NO_AGENTS is set.
fn agent(name: &str) -> Option<PathBuf> {
    if std::env::var_os("GATEWAY_TEST_NO_AGENTS").is_some() {
        eprintln!("skipped: GATEWAY_TEST_NO_AGENTS is set");
        return None;
    }
    let tools = std::env::var_os("GATEWAY_TEST_TOOLS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/tools"),
        PathBuf::from,
    );
    let bin = tools.join("node_modules/.bin").join(name);
    assert!(
        bin.exists(),
        "{} is missing: the real-agent tests need the agent CLIs; run the test command's bootstrap, which installs them, or `{INSTALL}` (GATEWAY_TEST_TOOLS names another directory; GATEWAY_TEST_NO_AGENTS=1 skips these tests)",
        bin.display()
    );
    Some(bin)
}

/// An agent CLI with this test's environment, killed after two minutes (a scripted run takes
/// seconds; a hang fails the test instead of holding the suite).
fn agent_cmd(env: &Env, bin: &Path) -> Command {
    let mut c = env.raw("timeout");
    c.args(["-k", "5", "120"]).arg(bin);
    c
}

#[derive(Clone, Copy, PartialEq)]
enum Api {
    /// Anthropic Messages (Claude Code), streamed as SSE.
    Anthropic,
    /// OpenAI Responses (Codex), streamed as SSE; tools of MCP server `gateway`.
    Responses,
    /// Gemini generateContent (Gemini CLI), streamed as SSE; tools `mcp_gateway_NAME`.
    Gemini,
}

/// The scripted model server: one thread per connection, one request per connection.
struct Model {
    url: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Model {
    fn start(api: Api, calls: Vec<(&str, Value)>) -> Model {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", l.local_addr().expect("addr"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let calls: Arc<Vec<(String, Value)>> =
            Arc::new(calls.into_iter().map(|(n, v)| (n.to_string(), v)).collect());
        let reqs = requests.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let (reqs, calls) = (reqs.clone(), calls.clone());
                std::thread::spawn(move || serve(s, api, &calls, &reqs));
            }
        });
        Model { url, requests }
    }

    /// The tool results the agent sent back, in order: (text, is_error). Taken from the
    /// request that carries the most of them (each request carries the whole conversation).
    fn tool_results(&self) -> Vec<(String, bool)> {
        let reqs = self.requests.lock().expect("lock");
        reqs.iter()
            .map(results_of)
            .max_by_key(Vec::len)
            .unwrap_or_default()
    }

    fn dump(&self) -> String {
        let reqs = self.requests.lock().expect("lock");
        let s = serde_json::to_string(&*reqs).expect("json");
        s.chars().take(4000).collect()
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn results_of(req: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for m in req["messages"].as_array().into_iter().flatten() {
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                out.push((text_of(&b["content"]), b["is_error"] == true));
            }
        }
    }
    for c in req["contents"].as_array().into_iter().flatten() {
        for p in c["parts"].as_array().into_iter().flatten() {
            let r = &p["functionResponse"]["response"];
            if !r.is_null() {
                let t = r["output"]
                    .as_str()
                    .map_or_else(|| r.to_string(), str::to_string);
                let err = !r["error"].is_null() || effect_of(&t) == "deny";
                out.push((t, err));
            }
        }
    }
    for i in req["input"].as_array().into_iter().flatten() {
        if i["type"] == "function_call_output" {
            let t = text_of(&i["output"]);
            let err = t.contains("\"isError\":true") || effect_of(&t) == "deny";
            out.push((t, err));
        }
    }
    out
}

fn read_request(s: &mut BufReader<TcpStream>) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    s.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let (mut len, mut chunked) = (0usize, false);
    loop {
        let mut h = String::new();
        s.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => len = v.trim().parse().ok()?,
            "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut sz = String::new();
            s.read_line(&mut sz).ok()?;
            let n = usize::from_str_radix(sz.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0u8; n + 2];
            s.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(len, 0);
        s.read_exact(&mut body).ok()?;
    }
    Some((method, path, body))
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

fn serve(s: TcpStream, api: Api, calls: &[(String, Value)], reqs: &Mutex<Vec<Value>>) {
    let mut w = s.try_clone().expect("clone");
    let mut r = BufReader::new(s);
    let Some((method, path, body)) = read_request(&mut r) else {
        return;
    };
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (ctype, out) = if method != "POST" {
        ("application/json", r#"{"models":[],"data":[]}"#.to_string())
    } else if path.contains("count_tokens") {
        ("application/json", r#"{"input_tokens":1}"#.to_string())
    } else if path.contains(":countTokens") {
        ("application/json", r#"{"totalTokens":1}"#.to_string())
    } else {
        reqs.lock().expect("lock").push(req.clone());
        let done = results_of(&req).len();
        let tools: Vec<String> = req["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| {
                // Gemini lists its functions inside each tool.
                let inner = t["functionDeclarations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                std::iter::once(t.clone()).chain(inner)
            })
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        let next = calls.get(done);
        match api {
            Api::Anthropic => anthropic(&req, next.filter(|(n, _)| tools.contains(n))),
            Api::Responses => responses(next.filter(|_| tools.iter().any(|t| t == "mcp__gateway"))),
            Api::Gemini => gemini(
                next.filter(|(n, _)| tools.contains(&format!("mcp_gateway_{n}"))),
                path.contains("streamGenerateContent"),
            ),
        }
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        out.len()
    );
    let _ = w.write_all(head.as_bytes());
    let _ = w.write_all(out.as_bytes());
}

fn anthropic(req: &Value, call: Option<&(String, Value)>) -> (&'static str, String) {
    let start = json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "model": req["model"], "content": [], "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}});
    let (block, delta, stop) = match call {
        Some((name, input)) => (
            json!({"type": "tool_use", "id": format!("toolu_{}", results_of(req).len()), "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
        None => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": "final answer"}),
            "end_turn",
        ),
    };
    if req["stream"] != true {
        let msg = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": req["model"],
            "content": [{"type": "text", "text": "final answer"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1}});
        return ("application/json", msg.to_string());
    }
    let events = [
        start,
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 1}}),
        json!({"type": "message_stop"}),
    ];
    ("text/event-stream", sse(&events))
}

fn responses(call: Option<&(String, Value)>) -> (&'static str, String) {
    let item = match call {
        Some((name, args)) => json!({"type": "function_call", "namespace": "mcp__gateway",
            "name": name, "arguments": args.to_string(), "call_id": format!("call_{name}")}),
        None => json!({"type": "message", "role": "assistant", "id": "msg_1",
            "content": [{"type": "output_text", "text": "final answer"}]}),
    };
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_1"}}),
        json!({"type": "response.output_item.done", "item": item}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "usage": {
            "input_tokens": 1, "input_tokens_details": null, "output_tokens": 1,
            "output_tokens_details": null, "total_tokens": 2}}}),
    ];
    ("text/event-stream", sse(&events))
}

fn gemini(call: Option<&(String, Value)>, stream: bool) -> (&'static str, String) {
    let part = match call {
        Some((name, args)) => {
            json!({"functionCall": {"name": format!("mcp_gateway_{name}"), "args": args}})
        }
        None => json!({"text": "final answer"}),
    };
    let resp = json!({"candidates": [{"content": {"role": "model", "parts": [part]},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}});
    if stream {
        ("text/event-stream", format!("data: {resp}\r\n\r\n"))
    } else {
        ("application/json", resp.to_string())
    }
}

/// Claude Code, headless, against `model`, with this test's HOME and state dir.
fn claude(env: &Env, bin: &Path, model: &Model, policy: Option<&str>, extra: &[&str]) -> Output {
    let mut c = agent_cmd(env, bin);
    if let Some(p) = policy {
        c.env("GATEWAY_POLICY", p);
    }
    c.env_remove("CLAUDE_CODE_SHELL")
        .env("ANTHROPIC_BASE_URL", &model.url)
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("TMPDIR")
        .args(["-p", "do the task", "--output-format", "json"])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run claude")
}

/// The fenced block after `<!-- agents:NAME -->` in README.md: the setup the tests use is the
/// setup README gives.
fn readme_block(name: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let marker = format!("<!-- agents:{name} -->");
    let at = readme
        .find(&marker)
        .unwrap_or_else(|| panic!("README.md has no `{marker}` block (each agent's setup)"));
    let rest = &readme[at + marker.len()..];
    let open = rest.find("```").expect("a fenced block");
    let body = &rest[open..];
    let body = &body[body.find('\n').expect("fence line") + 1..];
    body[..body.find("```").expect("closing fence")].to_string()
}

/// The records of this test's state dir, and `log verify` passing on them.
fn records_verified(env: &Env) -> Vec<Value> {
    let v = env.gw(&["log", "verify"]);
    assert!(v.status.success(), "log verify: {}", text(&v));
    log_records(env)
}

/// The records' args, for a failure's message.
fn shown(recs: &[Value]) -> String {
    recs.iter().map(|r| format!("\n  {}", args_of(r))).collect()
}

fn args_of(r: &Value) -> String {
    r["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

const SECRET: &str = "AGENT-TEST-PLANTED-KEY-7c1e";

sandbox_test!(
    fn claude_code_runs_its_shell_through_gateway_bash_under_standard_and_strict() {
        let Some(bin) = agent("claude") else { return };
        for policy in ["standard", "strict"] {
            let env = Env::new(&format!("claude-sh-{policy}"));
            // README's setup: a link named gateway-bash (Claude Code takes a shell only if
            // its path names bash or zsh) and Claude Code's settings naming it.
            let bin_dir = Path::new(BIN).parent().expect("dir");
            let path = format!(
                "{}:{}",
                bin_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            );
            let ln = env
                .raw("sh")
                .args(["-ec", &readme_block("claude-shell")])
                .env("PATH", path)
                .output()
                .expect("sh");
            assert!(ln.status.success(), "README's lines: {}", text(&ln));
            let link = env.home.join(".local/bin/gateway-bash");
            assert_eq!(
                std::fs::canonicalize(&link).ok(),
                std::fs::canonicalize(BIN).ok()
            );
            let home = env.home.display().to_string();
            let mut settings: Value =
                serde_json::from_str(&readme_block("claude-settings").replace("/home/you", &home))
                    .expect("README's settings.json");
            settings["env"]["GATEWAY_POLICY"] = json!(policy);
            std::fs::create_dir_all(env.home.join(".claude")).expect("mkdir");
            std::fs::write(env.home.join(".claude/settings.json"), settings.to_string())
                .expect("settings");
            std::fs::create_dir_all(env.home.join(".ssh")).expect("mkdir");
            std::fs::write(env.home.join(".ssh/id_rsa"), SECRET).expect("plant");
            let first = "mkdir -p sub && cd sub && echo made > f.txt && [ -d / ] && echo first-ran";
            let model = Model::start(
                Api::Anthropic,
                vec![
                    ("Bash", json!({"command": first})),
                    ("Bash", json!({"command": "pwd && cat f.txt"})),
                    (
                        "Bash",
                        json!({"command": "cat ~/.ssh/id_rsa; echo third-ran"}),
                    ),
                    (
                        "Bash",
                        json!({"command": format!("cd {} && pwd", env.outside.display())}),
                    ),
                    ("Bash", json!({"command": "echo x > planted; pwd"})),
                ],
            );
            // The shell and the policy come from README's settings.json only.
            let o = claude(&env, &bin, &model, None, &["--allowedTools", "Bash"]);
            assert!(o.status.success(), "{policy}: claude: {}", text(&o));
            let res = model.tool_results();
            assert_eq!(res.len(), 5, "{policy}: {res:?}\n{}", model.dump());
            // The command's output comes back without an error (no cwd-file failure).
            assert!(
                !res[0].1 && res[0].0.contains("first-ran") && !res[0].0.contains("denied"),
                "{policy}: {res:?}"
            );
            // cd persisted: the second command ran in sub and read the file.
            let sub = env.ws.join("sub").display().to_string();
            assert!(
                !res[1].1 && res[1].0.contains(&sub) && res[1].0.contains("made"),
                "{policy}: {res:?}"
            );
            // Confined: the planted key is not read (a fall-back to /bin/bash would read it).
            assert!(
                !res[2].0.contains(SECRET) && res[2].0.contains("third-ran"),
                "{policy}: {res:?}"
            );
            // A cd out of the project does not persist (Claude Code resets it to the project,
            // so the next gateway-bash does not start, nor take its workspace, outside).
            assert!(res[3].0.contains("reset"), "{policy}: {res:?}");
            assert!(!env.outside.join("planted").exists(), "{policy}: {res:?}");
            assert!(
                stdout(&o).contains("final answer"),
                "{policy}: {}",
                text(&o)
            );
            let recs = records_verified(&env);
            // The model's commands are in the log, run by bash, decided by this policy.
            for cmd in [
                first,
                "pwd && cat f.txt",
                "cat ~/.ssh/id_rsa; echo third-ran",
            ] {
                let r = recs
                    .iter()
                    .find(|r| args_of(r).contains(&format!("eval '{cmd}'")))
                    .unwrap_or_else(|| {
                        panic!("{policy}: `{cmd}` not in the log: {}", shown(&recs))
                    });
                assert_eq!(r["policy"], policy, "{r}");
                assert_eq!(r["decision"]["effect"], "allow", "{r}");
                assert!(args_of(r).starts_with("/bin/bash -c"), "{r}");
            }
            // Claude Code's snapshot ran confined and was recorded.
            assert!(
                recs.iter()
                    .any(|r| args_of(r).contains("SNAPSHOT_FILE=") && r["exit_code"] == 0),
                "{policy}: {}",
                shown(&recs)
            );
            assert_eq!(
                std::fs::read_to_string(env.ws.join("sub/f.txt")).expect("f.txt"),
                "made\n"
            );
            if policy == "standard" {
                // standard snapshots the workspace for commands: undo reverts the agent's
                // edits, newest first (the file planted after the reset, then f.txt).
                assert!(env.ws.join("planted").exists(), "{res:?}");
                for _ in 0..2 {
                    let u = env.gw(&["undo"]);
                    assert!(u.status.success(), "undo: {}", text(&u));
                }
                assert!(!env.ws.join("planted").exists(), "undo left planted");
                assert!(!env.ws.join("sub/f.txt").exists(), "undo left f.txt");
            }
        }
    }
);

/// The MCP script both agents run: write, edit, a refused read of /etc/shadow, then exec.
fn mcp_script() -> Vec<(&'static str, Value)> {
    vec![
        (
            "write_file",
            json!({"path": "notes.txt", "content": "one\n"}),
        ),
        (
            "edit_file",
            json!({"path": "notes.txt", "edits": [{"old": "one", "new": "two"}]}),
        ),
        ("read_file", json!({"path": "/etc/shadow"})),
        ("exec", json!({"command": "cat notes.txt && echo exec-ran"})),
    ]
}

/// The decision's effect in a tool result's text: gateway's JSON report, after whatever the
/// agent put around it (Codex: "Wall time: ...\nOutput:\n" in front).
fn effect_of(text: &str) -> String {
    let json = text.find('{').map_or("", |i| &text[i..]);
    // The first JSON value only: Gemini wraps it in <untrusted_context>...</untrusted_context>.
    let v = serde_json::Deserializer::from_str(json)
        .into_iter::<serde_json::Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or_default();
    v["decision"]["effect"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What both MCP scenarios must show: the refusal came back as an error and the agent
/// carried on; records verified, under `policy`, with the refusal as a deny; `gateway undo`
/// reverts the agent's edit.
fn assert_mcp_run(env: &Env, model: &Model, policy: &str) {
    let res = model.tool_results();
    assert_eq!(res.len(), 4, "{res:?}\n{}", model.dump());
    // Gateway's results, allowed (not the agent's own refusal to call the tool).
    for r in &res[..2] {
        assert!(!r.1 && effect_of(&r.0) == "allow", "{res:?}");
    }
    assert!(res[2].1, "/etc/shadow must come back as an error: {res:?}");
    assert!(res[2].0.contains("/etc/shadow"), "{res:?}");
    assert!(
        !res[3].1 && res[3].0.contains("two") && res[3].0.contains("exec-ran"),
        "the agent carried on after the refusal: {res:?}"
    );
    let recs = records_verified(env);
    for r in &recs {
        assert_eq!(r["policy"], policy, "{r}");
    }
    assert!(
        recs.iter().any(|r| r["tool"] == "fs.read"
            && args_of(r).contains("/etc/shadow")
            && r["decision"]["effect"] == "deny"),
        "{}",
        shown(&recs)
    );
    assert!(
        recs.iter()
            .any(|r| r["tool"] == "exec" && args_of(r).contains("cat notes.txt")),
        "{}",
        shown(&recs)
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("notes.txt")).expect("notes"),
        "two\n"
    );
    let u = env.gw(&["undo"]);
    assert!(u.status.success(), "undo: {}", text(&u));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("notes.txt")).expect("notes"),
        "one\n",
        "undo reverts the edit"
    );
}

sandbox_test!(
    fn claude_code_uses_gateway_mcp_and_carries_on_after_a_refusal() {
        let Some(bin) = agent("claude") else { return };
        let env = Env::new("claude-mcp");
        let model = Model::start(
            Api::Anthropic,
            mcp_script()
                .into_iter()
                .map(|(n, v)| {
                    let name: &'static str =
                        Box::leak(format!("mcp__gateway__{n}").into_boxed_str());
                    (name, v)
                })
                .collect(),
        );
        // README's `claude mcp add gateway -- gateway mcp ARGS`, as a config.
        let line = readme_block("claude-mcp");
        let (_, server) = line
            .trim()
            .split_once(" -- ")
            .expect("README: claude mcp add gateway -- gateway ...");
        let mut words = server.split_whitespace();
        assert_eq!(words.next(), Some("gateway"), "{line}");
        let args: Vec<&str> = words.collect();
        let config = json!({"mcpServers": {"gateway": {"command": BIN, "args": args}}});
        let tools = "mcp__gateway__write_file mcp__gateway__edit_file mcp__gateway__read_file mcp__gateway__exec";
        let o = claude(
            &env,
            &bin,
            &model,
            Some("standard"),
            &[
                "--strict-mcp-config",
                "--mcp-config",
                &config.to_string(),
                "--allowedTools",
                tools,
            ],
        );
        assert!(o.status.success(), "claude: {}", text(&o));
        assert!(stdout(&o).contains("final answer"), "{}", text(&o));
        assert_mcp_run(&env, &model, "strict");
    }
);

sandbox_test!(
    fn codex_uses_gateway_mcp_with_the_documented_config() {
        let Some(bin) = agent("codex") else { return };
        let env = Env::new("codex-mcp");
        let model = Model::start(Api::Responses, mcp_script());
        let codex_home = env.root.join("codex");
        std::fs::create_dir_all(&codex_home).expect("mkdir");
        // README's server entry, with the policy from GATEWAY_POLICY (Codex passes MCP servers
        // only an allow-list of variables: README's entry names gateway's in env_vars; the
        // records' policy and state dir show they arrived).
        let server = readme_block("codex-config")
            .replace("command = \"gateway\"", &format!("command = \"{BIN}\""));
        assert!(
            server.contains(BIN),
            "README's block names `command = \"gateway\"`"
        );
        let config = format!(
            r#"model = "gpt-test"
model_provider = "scripted"
approval_policy = "never"

[model_providers.scripted]
name = "scripted"
base_url = "{}/v1"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

{server}"#,
            model.url
        );
        std::fs::write(codex_home.join("config.toml"), config).expect("config");
        let o = agent_cmd(&env, &bin)
            .env("GATEWAY_POLICY", "strict")
            .env("CODEX_HOME", &codex_home)
            .env("OPENAI_API_KEY", "dummy")
            .args(["exec", "--skip-git-repo-check", "do the task"])
            .stdin(Stdio::null())
            .output()
            .expect("run codex");
        assert!(o.status.success(), "codex: {}", text(&o));
        assert!(stdout(&o).contains("final answer"), "{}", text(&o));
        assert_mcp_run(&env, &model, "strict");
    }
);

/// Claude Code's command wrapper, as it sends it, around `cmd`, writing `cwd_file`.
fn claude_wrapper(cmd: &str, cwd_file: &Path) -> String {
    format!(
        "shopt -u extglob 2>/dev/null || true && eval '{cmd}' < /dev/null && pwd -P >| {}",
        cwd_file.display()
    )
}

/// `gateway-bash -c -l SCRIPT` (a link named as README says), as root or as uid 65534,
/// under strict.
fn gateway_bash(env: &Env, script: &str, nobody: bool) -> Output {
    gateway_bash_under(env, script, nobody, "strict")
}

fn gateway_bash_under(env: &Env, script: &str, nobody: bool, policy: &str) -> Output {
    let link = env.root.join("bin/gateway-bash");
    if !link.exists() {
        std::fs::create_dir_all(link.parent().expect("dir")).expect("mkdir");
        std::os::unix::fs::symlink(BIN, &link).expect("link");
    }
    let mut c = if nobody {
        let mut c = env.raw("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&link);
        c
    } else {
        env.raw(&link)
    };
    c.args(["-c", "-l", script])
        .env("GATEWAY_POLICY", policy)
        .env_remove("TMPDIR")
        .stdin(Stdio::null())
        .output()
        .expect("run gateway-bash")
}

/// A fresh name of Claude Code's cwd file's shape in /tmp.
fn cwd_file_name() -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    PathBuf::from(format!("/tmp/claude-{:x}{n:x}-cwd", std::process::id()))
}

sandbox_test!(
    fn claude_wrapper_files_are_written_only_where_and_as_claude_code_names_them() {
        for nobody in [false, true] {
            let env = Env::new("claude-wrap");
            std::fs::create_dir_all(env.ws.join("sub")).expect("mkdir");
            if nobody {
                env.give_to_nobody();
            }
            let who = if nobody { "uid 65534" } else { "root" };
            // The wrapper works: the output is the command's alone, the cwd file says where
            // the command ended, the sandbox was not widened for it (strict).
            let f = cwd_file_name();
            let o = gateway_bash(&env, &claude_wrapper("cd sub && echo hi", &f), nobody);
            assert_eq!(o.status.code(), Some(0), "{who}: {}", text(&o));
            assert_eq!(
                stdout(&o),
                "hi\n",
                "{who}: the marker stays out of the output"
            );
            let sub = std::fs::canonicalize(env.ws.join("sub")).expect("sub");
            assert_eq!(
                std::fs::read_to_string(&f).expect("cwd file"),
                format!("{}\n", sub.display()),
                "{who}"
            );
            let _ = std::fs::remove_file(&f);
            // The command cannot write elsewhere in /tmp for all that.
            let o = gateway_bash(
                &env,
                &claude_wrapper("echo x > /tmp/claude-planted-by-cmd", &cwd_file_name()),
                nobody,
            );
            assert_ne!(o.status.code(), Some(0), "{who}: {}", text(&o));
            assert!(!Path::new("/tmp/claude-planted-by-cmd").exists(), "{who}");
            // A marker printed by the command itself (without the nonce) is plain output.
            let f = cwd_file_name();
            let fake = "printf \"\\n\\036gateway-cwd-00\\036/etc\\n\"";
            let o = gateway_bash(&env, &claude_wrapper(fake, &f), nobody);
            assert_eq!(o.status.code(), Some(0), "{who}: {}", text(&o));
            assert!(stdout(&o).contains("gateway-cwd-00"), "{who}: {}", text(&o));
            let ws = std::fs::canonicalize(&env.ws).expect("ws");
            assert_eq!(
                std::fs::read_to_string(&f).expect("cwd file"),
                format!("{}\n", ws.display())
            );
            let _ = std::fs::remove_file(&f);
            // A symlink or a FIFO planted at the cwd file's name: not followed, not opened
            // blocking; the run fails and says so.
            let victim = env.outside.join("victim");
            std::fs::write(&victim, "keep").expect("victim");
            let f = cwd_file_name();
            std::os::unix::fs::symlink(&victim, &f).expect("symlink");
            let o = gateway_bash(&env, &claude_wrapper("echo hi", &f), nobody);
            assert_ne!(o.status.code(), Some(0), "{who}: {}", text(&o));
            assert!(
                String::from_utf8_lossy(&o.stderr).contains(&f.display().to_string()),
                "{who}: {}",
                text(&o)
            );
            assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "keep");
            let _ = std::fs::remove_file(&f);
            // Another user's regular file there (as root: uid 65534's; as 65534: root's).
            let f = cwd_file_name();
            std::fs::write(&f, "theirs").expect("plant");
            let owner = if nobody { "0:0" } else { "65534:65534" };
            let st = Command::new("chown")
                .args([owner])
                .arg(&f)
                .status()
                .expect("chown");
            assert!(st.success());
            let o = gateway_bash(&env, &claude_wrapper("echo hi", &f), nobody);
            assert_ne!(o.status.code(), Some(0), "{who}: {}", text(&o));
            assert_eq!(
                std::fs::read_to_string(&f).expect("theirs"),
                "theirs",
                "{who}"
            );
            let _ = std::fs::remove_file(&f);
            // A hard link at the cwd file's name to this user's own file elsewhere: the write
            // would land in that file (its owner, not protected_hardlinks, decides who may
            // link it: here the agent's user itself, or root).
            let victim = env.outside.join("linked-victim");
            std::fs::write(&victim, "keep").expect("victim");
            if nobody {
                let st = Command::new("chown")
                    .args(["65534:65534"])
                    .arg(&victim)
                    .status()
                    .expect("chown");
                assert!(st.success());
            }
            let f = cwd_file_name();
            std::fs::hard_link(&victim, &f).expect("hard link");
            let o = gateway_bash(&env, &claude_wrapper("echo hi", &f), nobody);
            assert_ne!(o.status.code(), Some(0), "{who}: {}", text(&o));
            assert_eq!(
                std::fs::read_to_string(&victim).expect("victim"),
                "keep",
                "{who}: written through a hard link"
            );
            let _ = std::fs::remove_file(&f);
            let f = cwd_file_name();
            let st = Command::new("mkfifo").arg(&f).status().expect("mkfifo");
            assert!(st.success());
            let o = gateway_bash(&env, &claude_wrapper("echo hi", &f), nobody);
            assert_ne!(o.status.code(), Some(0), "{who}: {}", text(&o));
            let _ = std::fs::remove_file(&f);
            // A name of another shape is not Claude Code's: the script runs as it is, and the
            // sandbox refuses the write.
            let other = env.outside.join("claude-1-cwd");
            let o = gateway_bash(&env, &claude_wrapper("echo hi", &other), nobody);
            assert_ne!(o.status.code(), Some(0), "{who}: {}", text(&o));
            assert!(!other.exists(), "{who}");
            // The snapshot: written as a new file only (an existing one is never replaced).
            let snaps = env.home.join(".claude/shell-snapshots");
            std::fs::create_dir_all(&snaps).expect("mkdir");
            if nobody {
                env.give_to_nobody();
            }
            let snap = |name: &str| {
                format!(
                    "SNAPSHOT_FILE={}\necho '# Snapshot file' >| \"$SNAPSHOT_FILE\"\necho 'f() {{ :; }}' >> \"$SNAPSHOT_FILE\"\n",
                    snaps.join(name).display()
                )
            };
            let o = gateway_bash(&env, &snap("snapshot-bash-1-new.sh"), nobody);
            assert_eq!(o.status.code(), Some(0), "{who}: {}", text(&o));
            assert_eq!(stdout(&o), "", "{who}");
            assert_eq!(
                std::fs::read_to_string(snaps.join("snapshot-bash-1-new.sh")).expect("snapshot"),
                "# Snapshot file\nf() { :; }\n"
            );
            std::fs::write(snaps.join("snapshot-bash-2-old.sh"), "old").expect("old");
            let o = gateway_bash(&env, &snap("snapshot-bash-2-old.sh"), nobody);
            assert_ne!(o.status.code(), Some(0), "{who}: {}", text(&o));
            assert_eq!(
                std::fs::read_to_string(snaps.join("snapshot-bash-2-old.sh")).expect("old"),
                "old"
            );
            // Without a private TMPDIR (permissive), the snapshot runs as sent, writing the
            // agent's file where the policy lets it.
            let o =
                gateway_bash_under(&env, &snap("snapshot-bash-3-perm.sh"), nobody, "permissive");
            assert_eq!(o.status.code(), Some(0), "{who}: {}", text(&o));
            assert_eq!(
                std::fs::read_to_string(snaps.join("snapshot-bash-3-perm.sh")).expect("snapshot"),
                "# Snapshot file\nf() { :; }\n"
            );
            // Every run is in the log (the refused and failed ones included).
            let recs = records_verified(&env);
            assert!(recs.len() >= 8, "{who}: {}", shown(&recs));
        }
    }
);

sandbox_test!(
    fn claude_wrapper_holds_back_a_bounded_tail_whatever_the_command_prints() {
        // The confined command reads the nonce from its own script ($BASH_EXECUTION_STRING),
        // prints the marker and then far more than a snapshot: the front end (unconfined)
        // held all of it in memory and showed none of it. It now holds at most 8 MiB and
        // then passes everything on, writing no cwd file.
        for nobody in [false, true] {
            let env = Env::new("claude-wrap-flood");
            env.write(
                "flood.sh",
                "n=$(printf %s \"$BASH_EXECUTION_STRING\" | grep -o 'gateway-cwd-[0-9a-f]*' | head -1)\nprintf '\\n\\036%s\\036' \"$n\"\nhead -c 12000000 /dev/zero | tr '\\0' x\nexit 0\n",
            );
            if nobody {
                env.give_to_nobody();
            }
            let who = if nobody { "uid 65534" } else { "root" };
            let f = cwd_file_name();
            let o = gateway_bash(&env, &claude_wrapper("source flood.sh", &f), nobody);
            let xs = o.stdout.iter().filter(|&&b| b == b'x').count();
            assert_eq!(
                xs,
                12_000_000,
                "{who}: the output is shown, not held: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(!f.exists(), "{who}: no cwd file from a flooded tail");
        }
    }
);

sandbox_test!(
    fn claude_wrapper_works_through_the_daemon() {
        let env = Env::new("claude-wrap-daemon");
        std::fs::create_dir_all(env.ws.join("sub")).expect("mkdir");
        let d = Daemon::start(&env, "strict", &[]);
        let link = env.root.join("bin/gateway-bash");
        std::fs::create_dir_all(link.parent().expect("dir")).expect("mkdir");
        std::os::unix::fs::symlink(BIN, &link).expect("link");
        let f = cwd_file_name();
        let o = env
            .raw(&link)
            .args(["-c", "-l", &claude_wrapper("cd sub && echo hi", &f)])
            .env("GATEWAY_SOCKET", &d.socket)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(stdout(&o), "hi\n");
        let sub = std::fs::canonicalize(env.ws.join("sub")).expect("sub");
        assert_eq!(
            std::fs::read_to_string(&f).expect("cwd file"),
            format!("{}\n", sub.display())
        );
        let _ = std::fs::remove_file(&f);
        let recs = log_records(&env);
        assert!(
            recs.iter().any(|r| r["caller"]["client"] == "daemon"
                && args_of(r).contains("eval 'cd sub && echo hi'")),
            "{}",
            shown(&recs)
        );
        drop(d.stop());
    }
);

sandbox_test!(
    fn gemini_cli_uses_gateway_mcp_with_the_documented_config() {
        let Some(bin) = agent("gemini") else { return };
        let env = Env::new("gemini-mcp");
        let model = Model::start(Api::Gemini, mcp_script());
        // README's settings.json entry, plus what a headless test needs: the API key as the
        // auth method and no folder-trust prompt.
        let mut settings: Value =
            serde_json::from_str(&readme_block("gemini-settings")).expect("README's settings.json");
        settings["mcpServers"]["gateway"]["command"] = json!(BIN);
        settings["security"] = json!({"auth": {"selectedType": "gemini-api-key"},
            "folderTrust": {"enabled": false}});
        settings["privacy"] = json!({"usageStatisticsEnabled": false});
        std::fs::create_dir_all(env.home.join(".gemini")).expect("mkdir");
        std::fs::write(env.home.join(".gemini/settings.json"), settings.to_string())
            .expect("settings");
        let o = agent_cmd(&env, &bin)
            .env("GOOGLE_GEMINI_BASE_URL", &model.url)
            .env("GEMINI_API_KEY", "dummy")
            .args([
                "-p",
                "do the task",
                "-m",
                "gemini-2.5-pro",
                "--approval-mode",
                "yolo",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("run gemini");
        assert!(o.status.success(), "gemini: {}", text(&o));
        assert!(stdout(&o).contains("final answer"), "{}", text(&o));
        // README's tools.core: the model is offered gateway's tools and nothing unconfined.
        for req in model.requests.lock().expect("lock").iter() {
            let offered: Vec<&str> = req["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
                .filter_map(|f| f["name"].as_str())
                .collect();
            assert!(
                offered.iter().all(|n| n.starts_with("mcp_gateway_")),
                "Gemini offered its own tools: {offered:?}"
            );
        }
        assert_mcp_run(&env, &model, "strict");
    }
);

sandbox_test!(
    fn gateway_bash_through_the_daemon_runs_bash() {
        // Issue 35: the daemon parsed `gateway sh`'s command line itself and chose the shell
        // by its own process's name, so `gateway-bash` through a daemon ran /bin/sh. The
        // client now types the request, shell included.
        let env = Env::new("bash-daemon");
        let d = Daemon::start(&env, "strict", &[]);
        let link = env.root.join("bin/gateway-bash");
        std::fs::create_dir_all(link.parent().expect("dir")).expect("mkdir");
        std::os::unix::fs::symlink(BIN, &link).expect("link");
        let o = env
            .raw(&link)
            .args(["-c", "echo ${BASH_VERSION:+bash}"])
            .env("GATEWAY_POLICY", "strict")
            .env("GATEWAY_SOCKET", &d.socket)
            .stdin(Stdio::null())
            .output()
            .expect("run gateway-bash");
        assert_eq!(stdout(&o), "bash\n", "{}", text(&o));
        let rec = log_records(&env)
            .into_iter()
            .rfind(|r| r["tool"] == "exec")
            .expect("an exec record");
        assert_eq!(rec["caller"]["client"], "daemon", "{rec}");
        assert!(
            rec["args"][0].as_str().is_some_and(|a| a.ends_with("bash")),
            "{rec}"
        );
    }
);
