//! Capture benchmark (issue 37): what capturing a run's changes costs, and how it grows with
//! the workspace, side by side in one run.
//!
//!   - (a) `gateway exec --policy standard -- true`: nothing changes;
//!   - (b) `gateway exec --policy standard -- sh -c SCRIPT capture N`, SCRIPT being
//!     `for i in $(seq 100); do echo "$1 $i" > f$i; done`: the same 100 files at the
//!     workspace's top (`f1` .. `f100`) overwritten with new contents (`N` is a counter that
//!     differs for every run, so each run really changes all 100, whichever binary ran last);
//!
//! in a workspace that is a generated tree of `CAPTURE_SIZES` files (default
//! `0,10000,100000,1000000`): directories of 100 files each, nested two levels
//! (`dNNN/dNN/fNN.txt`), each file a distinct line of ~50 bytes, a `.gitignore` at the top
//! (it excludes nothing of the tree). A tree is generated once into `target/capture-trees/N`
//! and reused by later runs; the benchmark leaves it as it found it (it removes `f1`..`f100`
//! at the end).
//!
//! For three subjects: this build (`GATEWAY_BIN`, default the `gateway` this `cargo bench`
//! builds, target/<host>/release/gateway), the binary before (`GATEWAY_BENCH_BEFORE`, e.g.
//! today's main; skipped with a note when unset, measured once when it is the same file as
//! this build), and the same commands unconfined (`true` and `sh -c SCRIPT` with no gateway)
//! as the anchor. Each gateway binary has a state directory of its own for each size
//! (`--state-dir`, in a temp dir removed at the end), so the backup store of one tree never
//! evicts another's.
//!
//! Before the measured rounds, each (binary, size) runs (a) once: its first run in a new
//! state directory, which indexes the tree (and on main before issue 37 backs up every file),
//! reported as "first ms"; then (b) once, so that `f1`..`f100` exist and every measured (b)
//! overwrites them. Then `CAPTURE_ROUNDS` rounds (default 10); in each, every size, and in it
//! every subject, runs (a) then (b), so machine noise hits all alike. A run that does not
//! finish within `CAPTURE_TIMEOUT` seconds (default 300) is killed and its (binary, size)
//! measured no more (main before issue 37 does not finish its first run at 1M files: past the
//! 1 GiB `max_workspace_bytes`, each further file scans the whole store to make room).
//!
//! Reported per size and subject: median and p90 ms of (a) and (b), and the ratios the
//! issue's aims name: each size against the smallest (aim: 100k within 1.2x of 0), and (b)
//! against (b) unconfined at the same size (aim: within 2x). A machine-readable summary goes
//! to `target/capture.json`.
//!
//! Run: `cargo bench --bench capture` (needs the namespaces, as the others do), e.g.
//! `CAPTURE_SIZES=0,10000,100000 CAPTURE_ROUNDS=20 GATEWAY_BENCH_BEFORE=/path/to/main/gateway
//! cargo bench --bench capture`. Generating the trees (once): 100k files ~2 s, 1M ~22 s and
//! 3.9 GB of disk.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::too_many_lines,
    reason = "a benchmark: a program of its own that reads its settings and prints its figures"
)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// The 100-file change: `$1` is the run's counter, so every run writes new contents.
const SCRIPT: &str = r#"for i in $(seq 100); do echo "$1 $i" > f$i; done"#;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn sizes() -> Vec<usize> {
    let raw = std::env::var("CAPTURE_SIZES").unwrap_or_else(|_| "0,10000,100000,1000000".into());
    let mut v: Vec<usize> = raw
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim()
                .replace('_', "")
                .parse()
                .unwrap_or_else(|_| panic!("CAPTURE_SIZES: not a number: {s:?}"))
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    assert!(!v.is_empty(), "CAPTURE_SIZES names no size");
    v
}

/// The tree of `n` files in `cache`, generated on first use: written under a temporary name
/// and renamed into place, so a tree that exists is whole.
fn tree(cache: &Path, n: usize) -> PathBuf {
    let dir = cache.join(n.to_string());
    if dir.is_dir() {
        return dir;
    }
    let tmp = cache.join(format!("{n}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("tree dir");
    let t = Instant::now();
    std::fs::write(tmp.join(".gitignore"), "/target/\nnode_modules/\n*.log\n").expect("ignore");
    let mut line = String::new();
    for i in 0..n {
        let d = tmp.join(format!("d{:03}/d{:02}", i / 10_000, (i / 100) % 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&d).expect("tree subdir");
        }
        line.clear();
        use std::fmt::Write as _;
        let _ = writeln!(
            line,
            "// generated file {i} of the capture benchmark's tree"
        );
        std::fs::write(d.join(format!("f{:02}.txt", i % 100)), &line).expect("tree file");
    }
    std::fs::rename(&tmp, &dir).expect("tree rename");
    println!(
        "generated the tree of {n} files in {:.1} s: {}",
        t.elapsed().as_secs_f64(),
        dir.display()
    );
    dir
}

/// What runs the commands: a gateway binary, or nothing (the anchor).
struct Subject {
    label: &'static str,
    key: &'static str,
    bin: Option<PathBuf>,
}

/// One subject's figures at one size.
#[derive(Default)]
struct Figures {
    /// Its first (a), in a new state directory (none for the anchor).
    first_ms: Option<f64>,
    a: Vec<f64>,
    b: Vec<f64>,
    /// Which run did not finish within `CAPTURE_TIMEOUT` (killed; the pair is measured no more).
    timed_out: Option<&'static str>,
}

struct Bench {
    root: PathBuf,
    counter: u64,
    timeout: Duration,
}

impl Bench {
    fn state(&self, s: &Subject, n: usize) -> PathBuf {
        self.root.join(format!("state-{}-{n}", s.key))
    }

    /// Runs (a) (`change` false) or (b) in `ws` under `s`: wall-clock ms, or None when it
    /// did not finish within the timeout (it is killed).
    fn run(&mut self, s: &Subject, ws: &Path, n: usize, change: bool) -> Option<f64> {
        self.counter += 1;
        let mut c = match &s.bin {
            Some(bin) => {
                let mut c = Command::new(bin);
                c.arg("--state-dir")
                    .arg(self.state(s, n))
                    .args(["exec", "--policy", "standard", "--"])
                    .env("GATEWAY_SOCKET", "");
                if change {
                    c.arg("sh");
                } else {
                    c.arg("true");
                }
                c
            }
            None if change => Command::new("sh"),
            None => Command::new("true"),
        };
        if change {
            c.args(["-c", SCRIPT, "capture"])
                .arg(self.counter.to_string());
        }
        c.current_dir(ws)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let t = Instant::now();
        let mut child = c.spawn().expect("spawn");
        let mut stderr = child.stderr.take().expect("stderr");
        // A watchdog kills the run at the timeout; the run's end is when its stderr closes
        // and it is reaped, as `output()` would wait.
        let child = Arc::new(Mutex::new(child));
        let (done, finished) = mpsc::channel::<()>();
        let dog = {
            let child = Arc::clone(&child);
            let limit = self.timeout;
            std::thread::spawn(move || {
                let late = finished.recv_timeout(limit) == Err(mpsc::RecvTimeoutError::Timeout);
                if late {
                    let _ = child.lock().expect("child").kill();
                }
                late
            })
        };
        let mut err = Vec::new();
        let _ = stderr.read_to_end(&mut err);
        let status = child.lock().expect("child").wait().expect("wait");
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let _ = done.send(());
        if dog.join().expect("watchdog") {
            return None;
        }
        assert!(
            status.success(),
            "{} at {n} files, {}: {status}\n{}",
            s.label,
            if change { "(b)" } else { "(a)" },
            String::from_utf8_lossy(&err)
        );
        Some(ms)
    }
}

fn quantile(v: &[f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    Some(v[((v.len() - 1) as f64 * p).round() as usize])
}

fn median(v: &[f64]) -> Option<f64> {
    quantile(v, 0.5)
}

fn ratio(x: Option<f64>, y: Option<f64>) -> Option<f64> {
    Some(x? / y?)
}

/// A figure for the table, `-` when there is none.
fn show(v: Option<f64>, prec: usize, suffix: &str) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.prec$}{suffix}"))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::read(a), std::fs::read(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn main() {
    let sizes = sizes();
    let rounds = setting("CAPTURE_ROUNDS", 10).max(1);
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cache = manifest.join("target/capture-trees");
    std::fs::create_dir_all(&cache).expect("cache");

    let new = std::env::var_os("GATEWAY_BIN")
        .filter(|b| !b.is_empty())
        .map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_gateway")),
            PathBuf::from,
        );
    let mut subjects = Vec::new();
    match std::env::var_os("GATEWAY_BENCH_BEFORE").filter(|b| !b.is_empty()) {
        None => {
            println!(
                "note: GATEWAY_BENCH_BEFORE is not set: no \"before\" binary (set it to e.g. main's build)"
            );
            subjects.push(Subject {
                label: "this build",
                key: "new",
                bin: Some(new.clone()),
            });
        }
        Some(b) if same_file(Path::new(&b), &new) => {
            println!(
                "note: GATEWAY_BENCH_BEFORE ({}) is the same binary as this build's ({}): measured once, as \"before\"",
                Path::new(&b).display(),
                new.display()
            );
            subjects.push(Subject {
                label: "before",
                key: "before",
                bin: Some(PathBuf::from(b)),
            });
        }
        Some(b) => {
            subjects.push(Subject {
                label: "this build",
                key: "new",
                bin: Some(new.clone()),
            });
            subjects.push(Subject {
                label: "before",
                key: "before",
                bin: Some(PathBuf::from(b)),
            });
        }
    }
    subjects.push(Subject {
        label: "unconfined",
        key: "unconfined",
        bin: None,
    });
    for s in &subjects {
        if let Some(b) = &s.bin {
            println!("{}: {}", s.label, b.display());
        }
    }

    let trees: Vec<PathBuf> = sizes.iter().map(|&n| tree(&cache, n)).collect();
    let root = std::env::temp_dir().join(format!("gateway-bench-capture-{}", std::process::id()));
    std::fs::create_dir_all(&root).expect("root");
    let timeout = Duration::from_secs(setting("CAPTURE_TIMEOUT", 300) as u64);
    let mut bench = Bench {
        root,
        counter: 0,
        timeout,
    };
    // figures[size][subject]
    let mut figures: Vec<Vec<Figures>> = sizes
        .iter()
        .map(|_| subjects.iter().map(|_| Figures::default()).collect())
        .collect();

    let t0 = Instant::now();
    for (z, &n) in sizes.iter().enumerate() {
        for (k, s) in subjects.iter().enumerate() {
            let t = Instant::now();
            let f = &mut figures[z][k];
            f.first_ms = bench.run(s, &trees[z], n, false);
            if f.first_ms.is_none() {
                f.timed_out = Some("its first (a)");
            } else if bench.run(s, &trees[z], n, true).is_none() {
                f.timed_out = Some("its first (b)");
            }
            if s.bin.is_some() {
                println!(
                    "warm-up {:<10} at {n:>8} files: first (a) {} ms, warm-up total {:.1} s{}",
                    s.label,
                    show(f.first_ms, 0, ""),
                    t.elapsed().as_secs_f64(),
                    if let Some(w) = f.timed_out {
                        format!(
                            ": {w} did not finish within {} s (CAPTURE_TIMEOUT; killed)",
                            timeout.as_secs()
                        )
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
    let warm = t0.elapsed();
    let t1 = Instant::now();
    for r in 0..rounds {
        for (z, &n) in sizes.iter().enumerate() {
            for (k, s) in subjects.iter().enumerate() {
                let f = &mut figures[z][k];
                if f.timed_out.is_some() {
                    continue;
                }
                match bench.run(s, &trees[z], n, false) {
                    Some(a) => f.a.push(a),
                    None => {
                        f.timed_out = Some("an (a)");
                        continue;
                    }
                }
                match bench.run(s, &trees[z], n, true) {
                    Some(b) => f.b.push(b),
                    None => f.timed_out = Some("a (b)"),
                }
            }
        }
        print!("\rround {}/{rounds}", r + 1);
        let _ = std::io::stdout().flush();
    }
    println!();
    let measured = t1.elapsed();

    println!(
        "capture benchmark: {rounds} rounds; (a) `exec --policy standard -- true`, (b) `exec --policy standard -- sh -c '{SCRIPT}' capture N` (overwrites f1..f100); warm-up {:.1} s, rounds {:.1} s",
        warm.as_secs_f64(),
        measured.as_secs_f64()
    );
    // Each size against the smallest (0 unless CAPTURE_SIZES leaves it out).
    let base = format!("/{}", sizes[0]);
    println!(
        "{:>8} {:<11} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8} {:>8} {:>10}",
        "files",
        "binary",
        "(a) med",
        "(a) p90",
        base,
        "(b) med",
        "(b) p90",
        base,
        "/unconf",
        "first ms"
    );
    let unconf = subjects.len() - 1;
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (z, &n) in sizes.iter().enumerate() {
        for (k, s) in subjects.iter().enumerate() {
            let f = &figures[z][k];
            let (am, ap, bm, bp) = (
                median(&f.a),
                quantile(&f.a, 0.9),
                median(&f.b),
                quantile(&f.b, 0.9),
            );
            let a0 = ratio(am, median(&figures[0][k].a));
            let b0 = ratio(bm, median(&figures[0][k].b));
            let bu = ratio(bm, median(&figures[z][unconf].b));
            println!(
                "{n:>8} {:<11} {:>9} {:>9} {:>8} {:>9} {:>9} {:>8} {:>8} {:>10}",
                s.label,
                show(am, 2, ""),
                show(ap, 2, ""),
                show(a0, 2, "x"),
                show(bm, 2, ""),
                show(bp, 2, ""),
                show(b0, 2, "x"),
                show(bu, 2, "x"),
                show(f.first_ms.filter(|_| s.bin.is_some()), 0, ""),
            );
            if let Some(w) = f.timed_out {
                notes.push(format!(
                    "{} at {n} files: {w} did not finish within {} s (killed); {} measured round(s)",
                    s.label,
                    timeout.as_secs(),
                    f.b.len()
                ));
            }
            rows.push(serde_json::json!({
                "files": n, "binary": s.key, "path": s.bin,
                "true_ms": {"median": am, "p90": ap, "runs": f.a},
                "change_100_ms": {"median": bm, "p90": bp, "runs": f.b},
                "true_ratio_to_smallest": a0,
                "change_100_ratio_to_smallest": b0,
                "change_100_ratio_to_unconfined": bu,
                "first_run_ms": f.first_ms.filter(|_| s.bin.is_some()),
                "timed_out": f.timed_out,
            }));
        }
    }
    for n in &notes {
        println!("note: {n}");
    }
    // The aims, for each gateway binary.
    let verdict = |ok: Option<bool>| match ok {
        Some(true) => "met",
        Some(false) => "missed",
        None => "not measured",
    };
    let at = |n: usize| sizes.iter().position(|&m| m == n);
    for (k, s) in subjects.iter().enumerate().filter(|(_, s)| s.bin.is_some()) {
        let mut parts = Vec::new();
        if let (Some(z0), Some(z)) = (at(0), at(100_000)) {
            let ra = ratio(median(&figures[z][k].a), median(&figures[z0][k].a));
            let rb = ratio(median(&figures[z][k].b), median(&figures[z0][k].b));
            parts.push(format!(
                "100k within 1.2x of 0: (a) {}, (b) {}: {}",
                show(ra, 2, "x"),
                show(rb, 2, "x"),
                verdict(ra.zip(rb).map(|(a, b)| a <= 1.2 && b <= 1.2))
            ));
        }
        // Over the sizes measured; the others named.
        let per_size: Vec<(usize, Option<f64>)> = sizes
            .iter()
            .enumerate()
            .map(|(z, &n)| {
                let r = ratio(median(&figures[z][k].b), median(&figures[z][unconf].b));
                (n, r)
            })
            .collect();
        let worst = per_size
            .iter()
            .filter_map(|(_, r)| *r)
            .fold(None, |w: Option<f64>, r| Some(w.map_or(r, |w| w.max(r))));
        let missing: Vec<String> = per_size
            .iter()
            .filter(|(_, r)| r.is_none())
            .map(|(n, _)| n.to_string())
            .collect();
        parts.push(format!(
            "(b) within 2x of unconfined at every size: worst {}: {}{}",
            show(worst, 2, "x"),
            verdict(worst.map(|w| w <= 2.0)),
            if missing.is_empty() {
                String::new()
            } else {
                format!(" (not measured at {} files)", missing.join(", "))
            }
        ));
        println!("aims, {}: {}", s.label, parts.join("; "));
    }

    let doc = serde_json::json!({
        "rounds": rounds, "sizes": sizes, "script": SCRIPT, "timeout_s": timeout.as_secs(),
        "rows": rows,
    });
    let out = manifest.join("target/capture.json");
    match std::fs::write(&out, serde_json::to_vec_pretty(&doc).expect("json")) {
        Ok(()) => println!("summary: {}", out.display()),
        Err(e) => println!("summary not written ({}): {e}", out.display()),
    }
    // Leave the cached trees as generated, and the temp dir gone.
    for t in &trees {
        for i in 1..=100 {
            let _ = std::fs::remove_file(t.join(format!("f{i}")));
        }
    }
    let _ = std::fs::remove_dir_all(&bench.root);
}
