//! Spawn benchmark: median wall time of
//!   1. `true` run directly,
//!   2. `gateway exec --policy strict -- true`,
//!   3. `bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true`.
//!
//! They are measured side by side in one process, interleaved round-robin so that machine
//! noise hits all three alike. Goals (issue 2): gateway ≤ 2.5× direct, and ≥ 3× faster than bwrap.
//!
//! Run: `cargo bench --bench spawn` (ITERATIONS env var, default 400).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn time(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let st = cmd.status().expect("spawn");
    let d = t.elapsed();
    assert!(st.success(), "{cmd:?} failed: {st}");
    d
}

fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let q = |p: f64| ms(v[((v.len() - 1) as f64 * p).round() as usize]);
    (q(0.5), q(0.1), q(0.9))
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
    let bwrap = which("bwrap");

    let mut floor = Vec::with_capacity(n);
    let mut direct = Vec::with_capacity(n);
    let mut gw = Vec::with_capacity(n);
    let mut gw_nocg = Vec::with_capacity(n);
    let mut bw = Vec::with_capacity(n);
    let mk_direct = || {
        let mut c = Command::new("true");
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    // Context: the gateway binary starting and exiting, with no policy and no sandbox.
    let mk_floor = || {
        let mut c = Command::new(gateway);
        c.arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    // strict without the memory cgroup: shows what the cgroup costs on this machine.
    let no_cg = ws.with_extension("nocgroup.toml");
    std::fs::write(&no_cg, "extends = \"strict\"\n[sandbox]\ncgroup = false\n").expect("policy");
    let no_cg = no_cg.display().to_string();
    let mk_gw = |policy: &str| {
        let mut c = Command::new(gateway);
        c.args(["exec", "--policy", policy, "--", "true"])
            .current_dir(&ws)
            .env("GATEWAY_STATE_DIR", &state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    let mk_bw = |b: &str| {
        let mut c = Command::new(b);
        c.args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-all",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        c
    };
    // Warm up page cache and binaries.
    for _ in 0..20 {
        time(&mut mk_direct());
        time(&mut mk_gw("strict"));
        time(&mut mk_gw(&no_cg));
        if let Some(b) = &bwrap {
            time(&mut mk_bw(b));
        }
    }
    for _ in 0..n {
        floor.push(time(&mut mk_floor()));
        direct.push(time(&mut mk_direct()));
        gw.push(time(&mut mk_gw("strict")));
        gw_nocg.push(time(&mut mk_gw(&no_cg)));
        if let Some(b) = &bwrap {
            bw.push(time(&mut mk_bw(b)));
        }
    }
    let _ = std::fs::remove_dir_all(&ws);
    let _ = std::fs::remove_file(&no_cg);

    let (f50, f10, f90) = stats(floor);
    let (d50, d10, d90) = stats(direct);
    let (g50, g10, g90) = stats(gw);
    let (n50, n10, n90) = stats(gw_nocg);
    println!("spawn benchmark, {n} interleaved runs each (wall time, ms)");
    println!(
        "{:<58} {:>8} {:>8} {:>8}",
        "command", "median", "p10", "p90"
    );
    println!("{:<58} {d50:>8.3} {d10:>8.3} {d90:>8.3}", "true (direct)");
    println!(
        "{:<58} {f50:>8.3} {f10:>8.3} {f90:>8.3}",
        "gateway --version (start/exit only, no sandbox)"
    );
    println!(
        "{:<58} {g50:>8.3} {g10:>8.3} {g90:>8.3}",
        "gateway exec --policy strict -- true"
    );
    println!(
        "{:<58} {n50:>8.3} {n10:>8.3} {n90:>8.3}",
        "gateway exec --policy strict(cgroup = false) -- true"
    );
    let ratio_direct = g50 / d50;
    println!(
        "gateway / direct: {ratio_direct:.2}x (goal <= 2.5x): {}",
        if ratio_direct <= 2.5 {
            "met"
        } else {
            "NOT met"
        }
    );
    if bwrap.is_some() {
        let (b50, b10, b90) = stats(bw);
        println!(
            "{:<58} {b50:>8.3} {b10:>8.3} {b90:>8.3}",
            "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all true"
        );
        let speedup = b50 / g50;
        println!(
            "bwrap / gateway: {speedup:.2}x (goal >= 3x): {}",
            if speedup >= 3.0 { "met" } else { "NOT met" }
        );
    } else {
        println!("bwrap not found: install bubblewrap to compare (apt-get install -y bubblewrap)");
    }
}

fn which(name: &str) -> Option<String> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .map(|d| format!("{d}/{name}"))
        .find(|p| std::path::Path::new(p).is_file())
}
