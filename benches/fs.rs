//! File tool benchmarks, through the `gateway` binary (process start, policy, resolution,
//! backups, journal, audit record included):
//!   1. `gateway fs edit` latency on a 1 KB and a 10 MB file (one unique replacement);
//!   2. `gateway fs grep` throughput against `rg` on the same tree (default: the crates in
//!      ~/.cargo/registry/src; GATEWAY_BENCH_CORPUS overrides), both counting matches, both
//!      honouring .gitignore and skipping hidden files.
//!
//! Run: `cargo bench --bench fs` (EDIT_RUNS, default 30; GREP_RUNS, default 5;
//! GATEWAY_BENCH_BIN=path measures another build the same way).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::too_many_lines,
    reason = "a benchmark: a program of its own that reads its settings and prints its figures"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn gateway(bin: &str, ws: &Path, state: &Path) -> Command {
    let mut c = Command::new(bin);
    c.current_dir(ws).env("GATEWAY_STATE_DIR", state);
    c
}

fn main() {
    // GATEWAY_BENCH_BIN: measure another build (e.g. an older commit's) the same way.
    let other = std::env::var("GATEWAY_BENCH_BIN").ok();
    let bin = other.as_deref().unwrap_or(env!("CARGO_BIN_EXE_gateway"));
    let tmp = std::env::temp_dir().join(format!("gateway-bench-fs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let ws = tmp.join("ws");
    let state = tmp.join("state");
    std::fs::create_dir_all(&ws).expect("ws");
    let runs = env_usize("EDIT_RUNS", 30);

    // 1. Edit latency.
    for (name, size) in [("1 KB", 1usize << 10), ("10 MB", 10 << 20)] {
        let line = "let value = compute(alpha, beta, gamma); // a line of code\n";
        let mut body = String::new();
        while body.len() + line.len() < size - 32 {
            body.push_str(line);
        }
        body.push_str("let marker = 0;\n");
        let f = ws.join(format!("f{size}.rs"));
        std::fs::write(&f, &body).expect("write");
        let mut times = Vec::new();
        for i in 0..runs {
            let (old, new) = if i % 2 == 0 {
                ("let marker = 0;", "let marker = 1;")
            } else {
                ("let marker = 1;", "let marker = 0;")
            };
            let t = Instant::now();
            let o = gateway(bin, &ws, &state)
                .args(["fs", "edit"])
                .arg(&f)
                .args(["--old", old, "--new", new])
                .output()
                .expect("edit");
            times.push(t.elapsed().as_secs_f64());
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        println!(
            "gateway fs edit, {name} file: median {:.2} ms over {runs} edits (backup before and after, journal intent + commit, atomic replace, audit record)",
            median(times) * 1e3
        );
    }

    // 2. Snapshot cost on a 10,000-file workspace: `gateway exec -- true` with and without
    // the snapshot, the first run (every file hashed and backed up) and later ones (a stat
    // per unchanged file), and a run that changes 100 files.
    let big = tmp.join("ws10k");
    for i in 0..10_000 {
        let d = big.join(format!("d{}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&d).expect("mkdir");
        }
        std::fs::write(
            d.join(format!("f{i}.rs")),
            format!("// file {i}\n{}", "x".repeat(1000)),
        )
        .expect("write");
    }
    let snap_state = tmp.join("snap-state");
    let run = |args: &[&str]| -> f64 {
        let t = Instant::now();
        let o = gateway(bin, &big, &snap_state)
            .args(["exec", "--policy", "standard"])
            .args(args)
            .output()
            .expect("exec");
        let dt = t.elapsed().as_secs_f64();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        dt
    };
    let first = run(&["--snapshot", "--", "true"]);
    let mut with = Vec::new();
    let mut without = Vec::new();
    let mut changing = Vec::new();
    for i in 0..runs.min(15) {
        with.push(run(&["--snapshot", "--", "true"]));
        without.push(run(&["--no-snapshot", "--", "true"]));
        let script = format!("for f in d{}/*.rs; do echo edit >> $f; done", i % 100);
        changing.push(run(&["--snapshot", "--", "sh", "-c", &script]));
    }
    let (w, wo, ch) = (median(with), median(without), median(changing));
    println!(
        "snapshot, 10,000 files (10 MB): first run {:.0} ms; later runs {:.1} ms vs {:.1} ms without (+{:.1} ms); a run changing 100 files {:.1} ms",
        first * 1e3,
        w * 1e3,
        wo * 1e3,
        (w - wo) * 1e3,
        ch * 1e3
    );

    // 3. grep against rg.
    let corpus = std::env::var_os("GATEWAY_BENCH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cargo/registry/src")
        });
    if !corpus.is_dir() {
        println!("no corpus at {}: grep comparison skipped", corpus.display());
        return;
    }
    let grep_runs = env_usize("GREP_RUNS", 5);
    let regex = r"fn\s+[a-z_]+_mut\(";
    let permissive = tmp.join("read-all.toml");
    std::fs::write(&permissive, "extends = \"standard\"\n").expect("policy");
    let mut g_times = Vec::new();
    let mut r_times = Vec::new();
    let (mut g_count, mut r_count) = (0u64, 0u64);
    for _ in 0..grep_runs {
        let t = Instant::now();
        let o = gateway(bin, &corpus, &state)
            .args(["fs", "grep", regex, "--mode", "count", "--max", "10000000"])
            .output()
            .expect("gateway grep");
        g_times.push(t.elapsed().as_secs_f64());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        g_count = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.rsplit(':').next()?.parse::<u64>().ok())
            .sum();
        let t = Instant::now();
        let o = Command::new("rg")
            .args(["--count", regex])
            .current_dir(&corpus)
            .output();
        let Ok(o) = o else {
            println!("rg not installed: grep comparison skipped (apt-get install ripgrep)");
            return;
        };
        r_times.push(t.elapsed().as_secs_f64());
        r_count = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.rsplit(':').next()?.parse::<u64>().ok())
            .sum();
    }
    let (g, r) = (median(g_times), median(r_times));
    println!(
        "grep {regex:?} over {}: gateway fs grep {:.0} ms ({g_count} matching lines), rg {:.0} ms ({r_count}); gateway / rg = {:.2}x (goal <= 1.5x): {}",
        corpus.display(),
        g * 1e3,
        r * 1e3,
        g / r,
        if g / r <= 1.5 { "met" } else { "NOT met" }
    );
    assert_eq!(g_count, r_count, "gateway and rg found different matches");
    let _ = std::fs::remove_dir_all(&tmp);
}
