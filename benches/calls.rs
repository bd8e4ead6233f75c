//! Calls benchmark (issue 35: a call is an object): what the long-lived front ends cost per
//! call, side by side with a baseline binary in one run.
//!
//!   - daemon throughput: 8 clients at once, each a `gateway exec --policy strict -- true`
//!     process routed through `gateway serve`, calls per second over a burst;
//!   - MCP latency: one `gateway mcp` server (its own broker) answering `tools/call exec`
//!     of `true`, one call at a time, median and p90 per call.
//!
//! Each row runs for this build and, when `GATEWAY_BENCH_BEFORE` names another gateway
//! binary (e.g. one built from the commit before), for it too, interleaved burst by burst so
//! that machine noise hits both alike.
//!
//! Run: `cargo bench --bench calls` (CALL_ROUNDS, default 5 bursts; CALLS per client per
//! burst, default 25; MCP_CALLS per burst, default 40).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::too_many_lines,
    reason = "a benchmark: a program of its own that reads its settings and prints its figures"
)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One binary under test: its daemon, its MCP server, its figures.
struct Subject {
    label: String,
    bin: PathBuf,
    ws: PathBuf,
    state: PathBuf,
    socket: PathBuf,
    daemon: Child,
    mcp: Mcp,
    rates: Vec<f64>,
    latencies: Vec<Duration>,
}

struct Mcp {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Mcp {
    fn start(bin: &Path, ws: &Path, state: &Path) -> Mcp {
        let mut child = Command::new(bin)
            .args(["--policy", "strict", "mcp"])
            .current_dir(ws)
            .env("GATEWAY_STATE_DIR", state)
            .env("GATEWAY_SOCKET", "")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("gateway mcp");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut m = Mcp {
            child,
            out,
            next: 1,
        };
        m.request(
            "initialize",
            serde_json::json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"}
            }),
        );
        m.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    fn send(&mut self, v: &serde_json::Value) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends a request and reads until its response.
    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next;
        self.next += 1;
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        loop {
            let mut line = String::new();
            let n = self.out.read_line(&mut line).expect("read");
            assert!(n > 0, "the MCP server closed its output");
            let v: serde_json::Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                Err(_) => continue,
            };
            if v["id"] == id {
                return v;
            }
        }
    }
}

fn start(label: &str, bin: &Path, root: &Path) -> Subject {
    let ws = root.join(format!("{label}-ws"));
    let state = root.join(format!("{label}-state"));
    std::fs::create_dir_all(&ws).expect("ws");
    let socket = root.join(format!("{label}.sock"));
    let daemon = Command::new(bin)
        .args([
            "serve",
            "--policy",
            "strict",
            "--max-clients",
            "64",
            "--socket",
        ])
        .arg(&socket)
        .current_dir(&ws)
        .env("GATEWAY_STATE_DIR", &state)
        .env("GATEWAY_SOCKET", "")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("gateway serve");
    for _ in 0..500 {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mcp = Mcp::start(bin, &ws, &root.join(format!("{label}-mcp-state")));
    Subject {
        label: label.into(),
        bin: bin.to_path_buf(),
        ws,
        state,
        socket,
        daemon,
        mcp,
        rates: Vec::new(),
        latencies: Vec::new(),
    }
}

/// One burst of 8 clients × `calls` each through the daemon: calls per second.
fn daemon_burst(s: &Subject, calls: usize) -> f64 {
    let t = Instant::now();
    std::thread::scope(|sc| {
        for _ in 0..8 {
            sc.spawn(|| {
                for _ in 0..calls {
                    let st = Command::new(&s.bin)
                        .args(["exec", "--policy", "strict", "--", "true"])
                        .current_dir(&s.ws)
                        .env("GATEWAY_SOCKET", &s.socket)
                        .env("GATEWAY_STATE_DIR", &s.state)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .expect("client");
                    assert!(st.success(), "{}: a daemon call failed: {st}", s.label);
                }
            });
        }
    });
    (8 * calls) as f64 / t.elapsed().as_secs_f64()
}

/// `calls` MCP `exec` calls of `true`, one at a time: each one's latency.
fn mcp_burst(s: &mut Subject, calls: usize) {
    for _ in 0..calls {
        let t = Instant::now();
        let r = s.mcp.request(
            "tools/call",
            serde_json::json!({"name": "exec", "arguments": {"command": "true"}}),
        );
        s.latencies.push(t.elapsed());
        assert!(
            r["result"]["isError"] != true && r.get("error").is_none(),
            "{}: the MCP call failed: {r}",
            s.label
        );
    }
}

fn main() {
    let rounds = setting("CALL_ROUNDS", 5);
    let calls = setting("CALLS", 25);
    let mcp_calls = setting("MCP_CALLS", 40);
    let root = std::env::temp_dir().join(format!("gateway-bench-calls-{}", std::process::id()));
    std::fs::create_dir_all(&root).expect("root");
    let mut subjects = vec![start(
        "this build",
        Path::new(env!("CARGO_BIN_EXE_gateway")),
        &root,
    )];
    if let Some(b) = std::env::var_os("GATEWAY_BENCH_BEFORE").filter(|b| !b.is_empty()) {
        subjects.push(start("before", Path::new(&b), &root));
    }
    for _ in 0..rounds {
        for s in subjects.iter_mut() {
            let r = daemon_burst(s, calls);
            s.rates.push(r);
            mcp_burst(s, mcp_calls);
        }
    }
    println!(
        "calls benchmark: {rounds} bursts of 8 clients x {calls} daemon calls and {mcp_calls} MCP calls"
    );
    println!(
        "{:<12} {:>22} {:>22} {:>18}",
        "binary", "daemon calls/s (8 cl.)", "MCP exec median ms", "MCP exec p90 ms"
    );
    for s in &mut subjects {
        s.rates.sort_by(f64::total_cmp);
        s.latencies.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let q = |p: f64| ms(s.latencies[((s.latencies.len() - 1) as f64 * p).round() as usize]);
        println!(
            "{:<12} {:>22.1} {:>22.2} {:>18.2}",
            s.label,
            s.rates[s.rates.len() / 2],
            q(0.5),
            q(0.9)
        );
    }
    for s in &mut subjects {
        let _ = s.daemon.kill();
        let _ = s.daemon.wait();
        let _ = s.mcp.child.kill();
        let _ = s.mcp.child.wait();
    }
    let _ = std::fs::remove_dir_all(&root);
}
