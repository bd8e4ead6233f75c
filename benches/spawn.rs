//! Spawn benchmark: median wall time of
//!   - `true` run directly,
//!   - `gateway --version` (gateway starting and exiting, no sandbox),
//!   - a C wrapper that only forks, execs `true` and waits (benches/floor.c `wrapper`),
//!   - the C floor: the same confinement as gateway in a minimal static C program
//!     (benches/floor.c `confined`, with gateway's own seccomp program and landlock paths),
//!   - `gateway exec --policy strict -- true` (with and without the memory cgroup),
//!   - `bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true`,
//!   - the strict exec and bwrap again as uid 65534 (both through `setpriv`): every run gets
//!     the same namespaces whoever starts it (issue 34: no slower than bwrap for either user).
//!
//! All are measured side by side in one process, interleaved round-robin so that machine
//! noise hits them alike. Goals (issue 2): gateway ≤ 2.5× direct, and ≥ 3× faster than bwrap.
//! The C rows say what any wrapper, and what this confinement at all, costs on the machine.
//!
//! Run: `cargo bench --bench spawn` (ITERATIONS env var, default 400). The C rows need gcc
//! with static glibc (Debian: gcc, libc6-dev); bwrap needs bubblewrap.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::too_many_lines,
    reason = "a benchmark: a program of its own that reads its settings and prints its figures"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DAEMON_ROW: &str = "gateway exec -- true through `gateway serve` (strict)";
/// bwrap's arguments in both of its rows.
const BWRAP_ARGS: [&str; 9] = [
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-all",
    "true",
];
const NOBODY_ROW: &str = "gateway exec --policy strict -- true, as uid 65534 (setpriv)";
const BWRAP_NOBODY_ROW: &str = "bwrap ... --unshare-all true, as uid 65534 (setpriv)";
const CLIENT_ROW: &str = "the daemon call from a running client (MCP server, REPL)";

fn time(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let st = cmd.status().expect("spawn");
    let d = t.elapsed();
    assert!(st.success(), "{cmd:?} failed: {st}");
    d
}

fn median_p10_p90(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let q = |p: f64| ms(v[((v.len() - 1) as f64 * p).round() as usize]);
    (q(0.5), q(0.1), q(0.9))
}

fn quiet(mut c: Command) -> Command {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

struct Row {
    label: String,
    /// One run, timed.
    run: Box<dyn FnMut() -> Duration>,
    times: Vec<Duration>,
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let n: usize = std::env::var("ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    let gateway = env!("CARGO_BIN_EXE_gateway");
    let ws = std::env::temp_dir().join(format!("gateway-bench-{}", std::process::id()));
    std::fs::create_dir_all(&ws).expect("workspace");
    let state = ws.with_extension("state");
    let true_path = which("true").expect("`true` on PATH");

    let mut rows: Vec<Row> = Vec::new();
    let mut add = |label: &str, make: Box<dyn Fn() -> Command>| {
        rows.push(Row {
            label: label.to_string(),
            run: Box::new(move || time(&mut make())),
            times: Vec::with_capacity(n),
        })
    };
    let tp = true_path.clone();
    add("true (direct)", Box::new(move || quiet(Command::new(&tp))));
    add(
        "gateway --version (start/exit only, no sandbox)",
        Box::new(move || {
            let mut c = Command::new(gateway);
            c.arg("--version");
            quiet(c)
        }),
    );

    // The C wrapper and floor.
    // The C rows are context, not the subject: if the floor cannot run here, say so and go on.
    let floor = build_floor().and_then(|bin| {
        let args = floor_args(gateway, &ws, &state, &true_path);
        let st = Command::new(&bin)
            .arg("confined")
            .args(&args)
            .current_dir(&ws)
            .status()
            .map_err(|e| format!("running {}: {e}", bin.display()))?;
        if st.success() {
            Ok(bin)
        } else {
            Err(format!(
                "{} confined failed on this machine: {st}",
                bin.display()
            ))
        }
    });
    match &floor {
        Ok(bin) => {
            let (bin1, tp) = (bin.clone(), true_path.clone());
            add(
                "C wrapper: fork + exec true + wait, no confinement",
                Box::new(move || {
                    let mut c = Command::new(&bin1);
                    c.arg("wrapper").arg(&tp);
                    quiet(c)
                }),
            );
            let args = floor_args(gateway, &ws, &state, &true_path);
            let bin2 = bin.clone();
            let ws2 = ws.clone();
            add(
                "C floor: gateway's confinement, minimal C (benches/floor.c)",
                Box::new(move || {
                    let mut c = Command::new(&bin2);
                    c.arg("confined").args(&args).current_dir(&ws2);
                    quiet(c)
                }),
            );
        }
        Err(e) => println!("C rows skipped: {e}"),
    }

    // strict without the memory cgroup: shows what the cgroup costs on this machine.
    let no_cg = ws.with_extension("nocgroup.toml");
    std::fs::write(&no_cg, "extends = \"strict\"\n[sandbox]\ncgroup = false\n").expect("policy");
    for (label, policy) in [
        ("gateway exec --policy strict -- true", "strict".to_string()),
        (
            "gateway exec --policy strict(cgroup = false) -- true",
            no_cg.display().to_string(),
        ),
    ] {
        let (ws, state) = (ws.clone(), state.clone());
        add(
            label,
            Box::new(move || {
                let mut c = Command::new(gateway);
                c.args(["exec", "--policy", &policy, "--", "true"])
                    .current_dir(&ws)
                    .env("GATEWAY_SOCKET", "")
                    .env("GATEWAY_STATE_DIR", &state);
                quiet(c)
            }),
        );
    }
    // The same call as a normal user (uid 65534, through setpriv), and bwrap the same way
    // below: issue 34's aim is gateway no slower than bwrap for either user.
    let setpriv = which("setpriv");
    let nobody_ws = ws.with_extension("nobody");
    let nobody_state = ws.with_extension("nobody-state");
    let nobody_home = ws.with_extension("nobody-home");
    if let Some(sp) = &setpriv {
        for d in [&nobody_ws, &nobody_state, &nobody_home] {
            std::fs::create_dir_all(d).expect("nobody's dirs");
            std::os::unix::fs::chown(d, Some(65534), Some(65534)).expect("chown");
        }
        let (sp, nws, nstate, nhome) = (
            sp.clone(),
            nobody_ws.clone(),
            nobody_state.clone(),
            nobody_home.clone(),
        );
        add(
            NOBODY_ROW,
            Box::new(move || {
                let mut c = Command::new(&sp);
                c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                    .arg(gateway)
                    .args(["exec", "--policy", "strict", "--", "true"])
                    .current_dir(&nws)
                    .env("GATEWAY_SOCKET", "")
                    .env("HOME", &nhome)
                    .env("GATEWAY_STATE_DIR", &nstate);
                quiet(c)
            }),
        );
    }
    // The same call through the daemon (issue 6: goal within 1.5x of a bare spawn).
    let dstate = ws.with_extension("daemon-state");
    let socket = ws.with_extension("sock");
    let mut daemon = Command::new(gateway)
        .args(["serve", "--policy", "strict", "--socket"])
        .arg(&socket)
        .env("GATEWAY_STATE_DIR", &dstate)
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
    {
        let (ws, dstate, socket) = (ws.clone(), dstate.clone(), socket.clone());
        add(
            DAEMON_ROW,
            Box::new(move || {
                let mut c = Command::new(gateway);
                c.args(["exec", "--", "true"])
                    .current_dir(&ws)
                    .env("GATEWAY_SOCKET", &socket)
                    .env("GATEWAY_STATE_DIR", &dstate);
                quiet(c)
            }),
        );
    }
    let bwrap = which("bwrap");
    match &bwrap {
        Some(b) => {
            let b = b.clone();
            add(
                "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true",
                Box::new(move || {
                    let mut c = Command::new(&b);
                    c.args(BWRAP_ARGS);
                    quiet(c)
                }),
            );
        }
        None => println!(
            "bwrap not found: install bubblewrap to compare (apt-get install -y bubblewrap)"
        ),
    }
    if let (Some(b), Some(sp)) = (&bwrap, &setpriv) {
        let (b, sp) = (b.clone(), sp.clone());
        add(
            BWRAP_NOBODY_ROW,
            Box::new(move || {
                let mut c = Command::new(&sp);
                c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                    .arg(&b)
                    .args(BWRAP_ARGS);
                quiet(c)
            }),
        );
    }

    {
        // A client that is already running (the MCP server, the REPL) pays no process start:
        // the call over the socket from this process, with /dev/null for its streams.
        let (ws, dstate, socket) = (ws.clone(), dstate.clone(), socket.clone());
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .expect("/dev/null");
        rows.push(Row {
            label: CLIENT_ROW.to_string(),
            run: Box::new(move || {
                use std::os::fd::AsFd;
                let env = vec![(
                    "GATEWAY_STATE_DIR".to_string(),
                    dstate.display().to_string(),
                )];
                let t = Instant::now();
                let code = gateway::serve::daemon::call_with(
                    &socket,
                    gateway::broker::request::Invocation {
                        options: gateway::broker::request::Options::default(),
                        request: gateway::broker::request::Request::Exec(
                            gateway::broker::request::Exec {
                                argv: vec!["true".into()],
                                ..Default::default()
                            },
                        ),
                    },
                    gateway::serve::daemon::CallIo {
                        cwd: ws.clone(),
                        env,
                        stdio: [null.as_fd(), null.as_fd(), null.as_fd()],
                        ask_here: false,
                        cancel: None,
                    },
                );
                let d = t.elapsed();
                assert_eq!(code.map(|r| r.exit), Ok(0), "the daemon call failed");
                d
            }),
            times: Vec::with_capacity(n),
        });
    }
    // Warm up page cache and binaries, then measure round-robin.
    for _ in 0..20 {
        for r in &mut rows {
            (r.run)();
        }
    }
    for _ in 0..n {
        for r in &mut rows {
            let d = (r.run)();
            r.times.push(d);
        }
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
    let _ = std::fs::remove_dir_all(&ws);
    let _ = std::fs::remove_dir_all(&state);
    let _ = std::fs::remove_dir_all(&dstate);
    let _ = std::fs::remove_dir_all(&nobody_ws);
    let _ = std::fs::remove_dir_all(&nobody_state);
    let _ = std::fs::remove_dir_all(&nobody_home);
    let _ = std::fs::remove_file(&no_cg);
    let _ = std::fs::remove_file(ws.with_extension("bpf"));

    println!("spawn benchmark, {n} interleaved runs each (wall time, ms)");
    println!(
        "{:<62} {:>8} {:>8} {:>8}",
        "command", "median", "p10", "p90"
    );
    let mut med = std::collections::HashMap::new();
    for r in rows {
        let (m, p10, p90) = median_p10_p90(r.times);
        println!("{:<62} {m:>8.3} {p10:>8.3} {p90:>8.3}", r.label);
        med.insert(r.label, m);
    }
    let get = |k: &str| med.get(k).copied();
    let direct = get("true (direct)").unwrap_or(f64::NAN);
    let gw = get("gateway exec --policy strict -- true").unwrap_or(f64::NAN);
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    println!(
        "gateway / direct: {:.2}x (goal <= 2.5x): {}",
        gw / direct,
        verdict(gw / direct <= 2.5)
    );
    if let Some(b) = get("bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true") {
        println!(
            "bwrap / gateway: {:.2}x (goal >= 3x): {}",
            b / gw,
            verdict(b / gw >= 3.0)
        );
    }
    if let Some(b) = get("bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true") {
        println!(
            "as root: bwrap / gateway: {:.2}x (issue 34's aim >= 1x): {}",
            b / gw,
            verdict(b / gw >= 1.0)
        );
    }
    if let (Some(g), Some(b)) = (get(NOBODY_ROW), get(BWRAP_NOBODY_ROW)) {
        println!(
            "as uid 65534: bwrap / gateway: {:.2}x (issue 34's aim >= 1x): {}",
            b / g,
            verdict(b / g >= 1.0)
        );
    }
    if let Some(f) = get("C floor: gateway's confinement, minimal C (benches/floor.c)") {
        println!(
            "C floor / direct: {:.2}x; gateway / C floor: {:.2}x",
            f / direct,
            gw / f
        );
        if let Some(b) = get("bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true") {
            println!("bwrap / C floor: {:.2}x", b / f);
        }
    }
    if let Some(dm) = get(DAEMON_ROW) {
        println!(
            "through the daemon / one-shot: {:.2}x; daemon / direct (bare spawn of true): {:.2}x (goal <= 1.5x): {}",
            dm / gw,
            dm / direct,
            verdict(dm / direct <= 1.5)
        );
    }
    if let Some(c) = get(CLIENT_ROW) {
        println!(
            "daemon from a running client / direct: {:.2}x (goal <= 1.5x): {}",
            c / direct,
            verdict(c / direct <= 1.5)
        );
    }
    if let Some(w) = get("C wrapper: fork + exec true + wait, no confinement") {
        println!("C wrapper / direct: {:.2}x", w / direct);
    }
}

/// Compiles benches/floor.c (static, -O2) into the benchmark's temporary directory.
fn build_floor() -> Result<PathBuf, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/floor.c");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("floor");
    let st = Command::new("gcc")
        .args(["-O2", "-static", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .map_err(|e| format!("gcc: {e}"))?;
    if !st.success() {
        return Err(format!("gcc failed on {}: {st}", src.display()));
    }
    Ok(out)
}

/// The floor's arguments for strict: gateway's seccomp program (written to a file), the
/// private TMPDIR mount point, and the landlock read/write/exec lists of
/// `gateway policy explain --policy strict --json`.
fn floor_args(gateway: &str, ws: &Path, state: &Path, true_path: &str) -> Vec<String> {
    let policy = gateway::policy::Policy::load("strict").expect("strict policy");
    let bpf = gateway::sandbox::seccomp_program(&policy.sandbox.network).expect("seccomp");
    let bpf_path = ws.with_extension("bpf");
    std::fs::write(&bpf_path, bpf).expect("write bpf");
    let out = Command::new(gateway)
        .args([
            "policy", "explain", "--policy", "strict", "--json", "--", "true",
        ])
        .current_dir(ws)
        .env("GATEWAY_STATE_DIR", state)
        .output()
        .expect("policy explain");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("explain json");
    let list = |k: &str| -> Vec<String> {
        v["sandbox"][k]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let write = list("write");
    let tmp = write
        .iter()
        .find(|p| p.ends_with(".gateway-private"))
        .cloned()
        .expect("strict has a private tmpfs TMPDIR");
    vec![
        true_path.to_string(),
        bpf_path.display().to_string(),
        tmp,
        list("read").join(":"),
        write.join(":"),
        list("exec").join(":"),
    ]
}

fn which(name: &str) -> Option<String> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .map(|d| format!("{d}/{name}"))
        .find(|p| Path::new(p).is_file())
}
