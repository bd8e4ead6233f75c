//! The undo journal after many changes, through the `gateway` binary: `gateway history` (the
//! newest 20 of this workspace's changes, with how many older ones there are), `history
//! --json --limit 1`, and `undo --dry-run` of the newest run, once the journal holds
//! JOURNAL_CYCLES files created and deleted (two changes each) by `gateway exec` runs of 2,000
//! files each, under the default `[undo]` bounds (nothing pruned: the index is what keeps it
//! fast) and under `max_state_bytes = "4MiB"` (pruned: the state directory's size is shown).
//!
//! Run: `cargo bench --bench journal` (JOURNAL_CYCLES, default 100000; HISTORY_RUNS, default
//! 15; GATEWAY_BENCH_BIN=path measures another build the same way, e.g. an older commit's).
//! Issue 37 measured 3.6 s for `history` after 100k cycles before the index; the aim is
//! under 100 ms.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::too_many_lines,
    reason = "a benchmark: a program of its own that reads its settings and prints its figures"
)]

use std::path::Path;
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

fn du(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(m) = e.metadata() else { continue };
            total += m.blocks() * 512;
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total
}

/// Fills a journal with `cycles` files created and deleted, then times the reads.
fn scenario(bin: &str, root: &Path, name: &str, policy: &str, cycles: usize, runs: usize) {
    let ws = root.join(format!("ws-{name}"));
    let state = root.join(format!("state-{name}"));
    std::fs::create_dir_all(ws.join("d")).expect("ws");
    let policy_file = root.join(format!("{name}.toml"));
    std::fs::write(&policy_file, policy).expect("policy");
    let gw = || {
        let mut c = Command::new(bin);
        c.current_dir(&ws)
            .env("GATEWAY_STATE_DIR", &state)
            .arg("--policy")
            .arg(&policy_file);
        c
    };
    let per_run = 2000;
    let batches = cycles.div_ceil(per_run);
    let t = Instant::now();
    for k in 0..=batches {
        let create = if k < batches {
            format!("i=0; while [ $i -lt {per_run} ]; do : > d/r{k}_$i; i=$((i+1)); done; ")
        } else {
            String::new()
        };
        let delete = if k > 0 {
            format!("rm -f d/r{}_*", k - 1)
        } else {
            "true".into()
        };
        let o = gw()
            .args(["exec", "--", "sh", "-c", &format!("{create}{delete}")])
            .output()
            .expect("exec");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let filled = t.elapsed().as_secs_f64();
    let time = |args: &[&str]| -> f64 {
        let mut v = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let o = gw().args(args).output().expect("run");
            v.push(t.elapsed().as_secs_f64());
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        median(v)
    };
    let history = time(&["history"]);
    let json = time(&["history", "--json", "--limit", "1"]);
    let dry = time(&["undo", "--dry-run"]);
    let o = gw()
        .args(["history", "--json", "--limit", "1"])
        .output()
        .expect("history");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let kept = v["omitted"].as_u64().unwrap_or(0) + 1;
    let journal = du(&state.join("journal"));
    println!(
        "{name}: {} changes journalled in {} runs ({filled:.1} s); {kept} kept; journal {:.1} MB, state directory {:.1} MB",
        2 * batches * per_run,
        batches + 1,
        journal as f64 / 1e6,
        du(&state) as f64 / 1e6,
    );
    println!(
        "{name}: history {:.1} ms, history --json --limit 1 {:.1} ms, undo --dry-run of the newest run {:.1} ms (medians of {runs})",
        history * 1e3,
        json * 1e3,
        dry * 1e3,
    );
}

fn main() {
    let other = std::env::var("GATEWAY_BENCH_BIN").ok();
    let bin = other.as_deref().unwrap_or(env!("CARGO_BIN_EXE_gateway"));
    let root = std::env::temp_dir().join(format!("gateway-bench-journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("tmp");
    let cycles = env_usize("JOURNAL_CYCLES", 100_000);
    let runs = env_usize("HISTORY_RUNS", 15);
    scenario(
        bin,
        &root,
        "default-bounds",
        "extends = \"permissive\"\n[undo]\nsnapshot = true\n",
        cycles,
        runs,
    );
    scenario(
        bin,
        &root,
        "max_state_bytes-4MiB",
        "extends = \"permissive\"\n[undo]\nsnapshot = true\nmax_state_bytes = \"4MiB\"\nmax_workspace_bytes = \"4MiB\"\n",
        cycles,
        runs,
    );
    let _ = std::fs::remove_dir_all(&root);
}
