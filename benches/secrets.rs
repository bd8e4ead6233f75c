//! Secrets benchmarks, side by side in one process:
//!   1. `gateway scan` on a corpus of real source code (default: the crates in
//!      ~/.cargo/registry/src; GATEWAY_BENCH_CORPUS overrides), wall-clock MB/s;
//!      and `gitleaks dir` (Debian's 8.26.0, as .ci/run installs it) on the same corpus;
//!   2. `detect-secrets scan --all-files` (pip install detect-secrets==1.5.0) and
//!      `gateway scan` on the same slice of that corpus (the first ~2 MB of files in path
//!      order), and the ratio of gateway's full-corpus throughput to detect-secrets';
//!   3. a command writing 1 GiB of text to stdout, unconfined and through
//!      `gateway exec` with output redaction, both read from a pipe by this harness.
//!
//!   4. the same through one extra `| cat`, and adversarial streams (base64 of zeros, one
//!      line of them, a run of `A`) against random base64 of the same size (issue 16);
//!   5. coloured text (a structured log's SGR colours, `git diff --color` lines) and UTF-16
//!      text, through exec against `| cat`, and coloured and UTF-16 random base64 and
//!      escape-dense streams against random base64 (issue 38: normalised before matching),
//!      with each stream's producer alone through `| cat` (the floor: no stream goes through
//!      exec faster than it is made, and sed colouring every character is slow).
//!
//! Run: `cargo bench --bench secrets` (SCAN_RUNS, default 3, 0 skips parts 1 and 2; EXEC_MIB, default 1024;
//! EXEC_RUNS, default 5, interleaved; ADV_MIB, default 16; GATEWAY_BENCH_BEFORE, another gateway
//! binary measured in the same runs, side by side). REDACT_FILES=<file>[:<file>...]: instead,
//! each file through the streaming redactor alone, in this process (256 KiB chunks, as exec
//! reads them), CPU-bound: where exec's time goes without the pipes and the sandbox.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::too_many_lines,
    reason = "a benchmark: a program of its own that reads its settings and prints its figures"
)]

#[path = "support/gitleaks.rs"]
mod support_gitleaks;
use support_gitleaks::gitleaks_bin;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `gateway scan --format json DIR`; returns (seconds, bytes scanned, findings).
fn gateway_scan(gateway: &str, dir: &Path, state: &Path) -> (f64, u64, usize) {
    let t = Instant::now();
    let out = Command::new(gateway)
        .args(["scan", "--format", "json"])
        .arg(dir)
        .env("GATEWAY_STATE_DIR", state)
        .stderr(Stdio::null())
        .output()
        .expect("gateway scan");
    let secs = t.elapsed().as_secs_f64();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "gateway scan failed"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("scan json");
    (
        secs,
        v["bytes_scanned"].as_u64().unwrap_or(0),
        v["findings"].as_array().map_or(0, Vec::len),
    )
}

fn files_sorted(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            files_sorted(&e.path(), out);
        } else if ft.is_file() {
            out.push(e.path());
        }
    }
}

/// Each file through the streaming redactor alone: the best of 5 runs.
fn redact_files(files: &str) {
    for f in files.split(':') {
        let data = std::fs::read(f).expect("read");
        for batch in [1 << 20, 4 << 20] {
            redact_file(f, &data, batch);
        }
    }
}

/// `data` through the streaming redactor alone, scanning every `batch` bytes.
fn redact_file(f: &str, data: &[u8], batch: usize) {
    let mut best = f64::MAX;
    let mut len = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let mut r =
            gateway::secrets::Redactor::new(gateway::secrets::TextKind::Stream).with_batch(batch);
        let mut out = Vec::new();
        len = 0;
        for c in data.chunks(256 * 1024) {
            r.feed(c, &mut out);
            len += out.len();
            out.clear();
        }
        r.finish(&mut out);
        len += out.len();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "redactor alone, batch {} MiB, {f}: {:.1} MB in {best:.3} s ({:.0} MB/s), {len} bytes out",
        batch >> 20,
        data.len() as f64 / 1e6,
        data.len() as f64 / best / 1e6
    );
}

fn main() {
    if let Ok(files) = std::env::var("REDACT_FILES") {
        redact_files(&files);
        return;
    }
    let gateway = env!("CARGO_BIN_EXE_gateway");
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let corpus = std::env::var_os("GATEWAY_BENCH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&home).join(".cargo/registry/src"));
    let tmp = std::env::temp_dir().join(format!("gateway-secrets-bench-{}", std::process::id()));
    let state = tmp.join("state");
    std::fs::create_dir_all(&state).expect("state dir");

    // 1. Full corpus (SCAN_RUNS=0: skip the scans, parts 1 and 2).
    let runs = env_usize("SCAN_RUNS", 3);
    if runs > 0 {
        scans(gateway, &corpus, &state, &tmp, runs);
    }
    exec_streams(gateway, &state, &tmp);
}

/// Parts 1 and 2: `gateway scan` of the corpus (and gitleaks on it), and detect-secrets on a
/// slice of it.
fn scans(gateway: &str, corpus: &Path, state: &Path, tmp: &Path, runs: usize) {
    let _ = gateway_scan(gateway, corpus, state); // warm the page cache
    let mut rates = Vec::new();
    let mut bytes = 0;
    let mut findings = 0;
    for _ in 0..runs {
        let (s, b, f) = gateway_scan(gateway, corpus, state);
        rates.push(b as f64 / s / 1e6);
        bytes = b;
        findings = f;
    }
    let full_rate = median(rates);
    println!(
        "gateway scan {}: {:.1} MB, {} findings, median {:.0} MB/s over {runs} runs (goal >= 300 MB/s): {}",
        corpus.display(),
        bytes as f64 / 1e6,
        findings,
        full_rate,
        if full_rate >= 300.0 { "met" } else { "NOT met" }
    );
    if bytes < 100_000_000 {
        println!("note: the corpus is under 100 MB; set GATEWAY_BENCH_CORPUS to a larger tree");
    }
    // 1b. gitleaks on the same full corpus, as `gitleaks dir` (its rate is over the bytes
    // gateway read: the text files; gitleaks skips binaries too).
    match gitleaks_bin() {
        Some(gl) => {
            let report = tmp.join("gitleaks.json");
            let mut secs = Vec::new();
            let mut found = 0;
            for _ in 0..runs {
                let t = Instant::now();
                let o = Command::new(&gl)
                    .args([
                        "dir",
                        "--no-banner",
                        "--report-format",
                        "json",
                        "--report-path",
                    ])
                    .arg(&report)
                    .arg(corpus)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                secs.push(t.elapsed().as_secs_f64());
                // 0: nothing found, 1: leaks found; anything else is a failure.
                if !matches!(o.map(|s| s.code()), Ok(Some(0 | 1))) {
                    println!("gitleaks failed on {}", corpus.display());
                    secs.clear();
                    break;
                }
                found = std::fs::read(&report)
                    .ok()
                    .and_then(|d| serde_json::from_slice::<serde_json::Value>(&d).ok())
                    .and_then(|v| v.as_array().map(Vec::len))
                    .unwrap_or(0);
            }
            if !secs.is_empty() {
                let s = median(secs);
                let rate = bytes as f64 / s / 1e6;
                println!(
                    "gitleaks dir (same corpus): median {s:.2} s ({rate:.0} MB/s), {found} findings; gateway / gitleaks: {:.1}x",
                    full_rate / rate
                );
            }
        }
        None => println!(
            "gitleaks not available: .ci/run installs Debian's gitleaks 8.26.0 into target/tools/gitleaks (or set GITLEAKS)"
        ),
    }

    // 2. detect-secrets on a slice.
    let slice = tmp.join("slice");
    let mut files = Vec::new();
    files_sorted(corpus, &mut files);
    let mut taken = 0u64;
    for (i, f) in files.iter().enumerate() {
        if taken >= 2_000_000 {
            break;
        }
        let Ok(data) = std::fs::read(f) else { continue };
        let rel = f.strip_prefix(corpus).unwrap_or(f);
        let dst = slice
            .join(format!("{i:05}"))
            .join(rel.file_name().unwrap_or_default());
        std::fs::create_dir_all(dst.parent().expect("parent")).expect("mkdir");
        std::fs::write(&dst, &data).expect("copy");
        taken += data.len() as u64;
    }
    let (gs, gb, gf) = gateway_scan(gateway, &slice, state);
    println!(
        "slice: {:.2} MB in {} files; gateway scan {:.3} s ({:.0} MB/s), {} findings",
        taken as f64 / 1e6,
        std::fs::read_dir(&slice).map_or(0, |r| r.count()),
        gs,
        gb as f64 / gs / 1e6,
        gf
    );
    let t = Instant::now();
    let ds = Command::new("detect-secrets")
        .args(["scan", "--all-files"])
        .arg(".")
        .current_dir(&slice)
        .stderr(Stdio::null())
        .output();
    match ds {
        Ok(o) if o.status.success() => {
            let secs = t.elapsed().as_secs_f64();
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
            let n: usize = v["results"].as_object().map_or(0, |m| {
                m.values().map(|a| a.as_array().map_or(0, Vec::len)).sum()
            });
            let ds_rate = taken as f64 / secs / 1e6;
            println!(
                "detect-secrets scan --all-files (same slice): {secs:.2} s ({ds_rate:.2} MB/s), {n} findings"
            );
            println!(
                "gateway (full corpus) / detect-secrets: {:.0}x (goal >= 500x): {}",
                full_rate / ds_rate,
                if full_rate / ds_rate >= 500.0 {
                    "met"
                } else {
                    "NOT met"
                }
            );
        }
        _ => println!("detect-secrets not available: pip install detect-secrets==1.5.0 to compare"),
    }
}

/// Parts 3 and 4: text through `gateway exec` against unconfined and `| cat`; adversarial
/// streams against random base64.
/// GATEWAY_BENCH_BEFORE names another gateway binary (an older build) measured in the same
/// runs, interleaved, for figures side by side.
fn exec_streams(gateway: &str, state: &Path, tmp: &Path) {
    // 3. 1 GiB of output, unconfined and through gateway exec (redaction on).
    let mib = env_usize("EXEC_MIB", 1024);
    let script = format!("yes 'build step 42 finished: all good, nothing to see' | head -c {mib}M");
    let policy = tmp.join("bench.toml");
    std::fs::write(
        &policy,
        "extends = \"strict\"\n[secrets]\noutput = \"redact\"\n[sandbox.limits]\noutput = \"64GiB\"\n",
    )
    .expect("policy");
    let ws = tmp.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let drain = |mut c: Command| -> (f64, u64) {
        let t = Instant::now();
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut out = child.stdout.take().expect("stdout");
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        loop {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => n += k as u64,
            }
        }
        let _ = child.wait();
        (t.elapsed().as_secs_f64(), n)
    };
    let mut plain = Vec::new();
    let mut piped = Vec::new();
    let mut confined = Vec::new();
    let before = std::env::var("GATEWAY_BENCH_BEFORE").ok();
    let mut confined_before = Vec::new();
    let exec_runs = env_usize("EXEC_RUNS", 5);
    for _ in 0..exec_runs {
        let mut c = Command::new("sh");
        c.args(["-c", &script]).current_dir(&ws);
        plain.push(drain(c));
        // The physical cost of one more pipe hop (issue 16's yardstick: <= 1.3x of it).
        let mut c = Command::new("sh");
        c.args(["-c", &format!("{script} | cat")]).current_dir(&ws);
        piped.push(drain(c));
        let mut c = Command::new(gateway);
        c.args(["exec", "--policy"])
            .arg(&policy)
            .args(["--", "sh", "-c", &script])
            .current_dir(&ws)
            .env("GATEWAY_STATE_DIR", state);
        confined.push(drain(c));
        if let Some(b) = &before {
            let mut c = Command::new(b);
            c.args(["exec", "--policy"])
                .arg(&policy)
                .args(["--", "sh", "-c", &script])
                .current_dir(&ws)
                .env("GATEWAY_STATE_DIR", state);
            confined_before.push(drain(c));
        }
    }
    let p = median(plain.iter().map(|x| x.0).collect());
    let g = median(confined.iter().map(|x| x.0).collect());
    let bytes = plain[0].1 as f64;
    assert_eq!(
        plain[0].1, confined[0].1,
        "gateway changed the output's length"
    );
    let q = median(piped.iter().map(|x| x.0).collect());
    println!(
        "{mib} MiB to stdout through `| cat`: {q:.2} s; gateway exec / `| cat` = {:.2}x (goal <= 1.3x): {}",
        g / q,
        if g / q <= 1.3 { "met" } else { "NOT met" }
    );
    if !confined_before.is_empty() {
        let b = median(confined_before.iter().map(|x| x.0).collect());
        println!(
            "{mib} MiB, same runs: unconfined {p:.2} s, `| cat` {q:.2} s, gateway exec {g:.2} s ({:.2}x `| cat`), before ({}) {b:.2} s ({:.2}x `| cat`)",
            g / q,
            before.as_deref().unwrap_or_default(),
            b / q
        );
    }
    // Coloured and UTF-16 text (issue 38), the same way: each against its own `| cat`.
    let coloured_log = "yes \"$(printf '\\033[2m2026-12-07T21:00:00Z\\033[0m \\033[32m INFO\\033[0m \\033[2mapp::build\\033[0m: step 42 finished \\033[3mstatus\\033[0m\\033[2m=\\033[0mok')\"";
    let diff = "yes \"$(printf '\\033[1mdiff --git a/x b/x\\033[m\\n\\033[36m@@ -1,2 +1,2 @@\\033[m\\n \\033[31m-old = 1\\033[m\\n\\033[32m+new = 2\\033[m')\"";
    let text_kinds = [
        (
            "coloured log text",
            format!("{coloured_log} | head -c {mib}M"),
        ),
        ("git diff --color text", format!("{diff} | head -c {mib}M")),
        (
            "UTF-16 text (iconv, with a BOM)",
            format!(
                "yes 'build step 42 finished: all good, nothing to see' | head -c {}M | iconv -f UTF-8 -t UTF-16",
                mib / 2
            ),
        ),
    ];
    for (name, script) in &text_kinds {
        let (mut p, mut q, mut g, mut b) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..exec_runs {
            let mut c = Command::new("sh");
            c.args(["-c", script]).current_dir(&ws);
            p.push(drain(c).0);
            let mut c = Command::new("sh");
            c.args(["-c", &format!("{script} | cat")]).current_dir(&ws);
            q.push(drain(c).0);
            let mut c = Command::new(gateway);
            c.args(["exec", "--policy"])
                .arg(&policy)
                .args(["--", "sh", "-c", script])
                .current_dir(&ws)
                .env("GATEWAY_STATE_DIR", state);
            g.push(drain(c).0);
            if let Some(bin) = &before {
                let mut c = Command::new(bin);
                c.args(["exec", "--policy"])
                    .arg(&policy)
                    .args(["--", "sh", "-c", script])
                    .current_dir(&ws)
                    .env("GATEWAY_STATE_DIR", state);
                b.push(drain(c).0);
            }
        }
        let (p, q, g) = (median(p), median(q), median(g));
        let then = if b.is_empty() {
            String::new()
        } else {
            let b = median(b);
            format!("; before {b:.2} s ({:.2}x `| cat`)", b / q)
        };
        println!(
            "{mib} MiB of {name}: unconfined {p:.2} s, `| cat` {q:.2} s, gateway exec {g:.2} s; gateway exec / `| cat` = {:.2}x (goal <= 1.3x): {}{then}",
            g / q,
            if g / q <= 1.3 { "met" } else { "NOT met" }
        );
    }
    // Adversarial streams (issue 16) against random text of the same size, through exec.
    let adv_mib = env_usize("ADV_MIB", 16);
    let once = |gateway: &str, cmd: &str| -> f64 {
        let mut c = Command::new(gateway);
        c.args(["exec", "--policy"])
            .arg(&policy)
            .args(["--", "sh", "-c", cmd])
            .current_dir(&ws)
            .env("GATEWAY_STATE_DIR", state);
        drain(c).0
    };
    let raw = adv_mib * 786_432;
    let mut binaries = vec![("gateway", gateway)];
    if let Some(b) = &before {
        binaries.push(("before", b.as_str()));
    }
    // Each stream through each binary in turn (interleaved: the machine's load drifts).
    let kinds = [
        (
            "random base64",
            format!("head -c {raw} /dev/urandom | base64"),
        ),
        (
            "base64 of zeros",
            format!("head -c {raw} /dev/zero | base64"),
        ),
        (
            "base64 of zeros, one line",
            format!("head -c {raw} /dev/zero | base64 -w0"),
        ),
        (
            "a run of A, one line",
            format!("head -c {raw} /dev/zero | tr '\\0' A"),
        ),
        // Issue 38: the same random text coloured line by line, as UTF-16, and streams of
        // escapes: a colour between every two characters, `ESC [` never finished, string
        // sequences (`ESC ]`) never ended.
        (
            "random base64, coloured lines",
            format!("head -c {raw} /dev/urandom | base64 | sed 's/^/\\x1b[32m/; s/$/\\x1b[0m/'"),
        ),
        (
            "random base64 as UTF-16",
            format!(
                "head -c {} /dev/urandom | base64 | iconv -f UTF-8 -t UTF-16",
                raw / 2
            ),
        ),
        (
            "a colour between every two characters",
            format!(
                "head -c {raw} /dev/urandom | base64 | head -c {} | sed 's/./\\x1b[1m&/g'",
                raw / 4
            ),
        ),
        (
            "ESC [ never finished, one line",
            format!(
                "yes \"$(printf '\\033[1;')\" | tr -d '\\n' | head -c {}",
                raw * 4 / 3
            ),
        ),
        (
            "ESC ] never ended in 4 KB, one line",
            format!(
                "yes \"$(printf '\\033]8;;')$(head -c 4000 /dev/zero | tr '\\0' x)\" | tr -d '\\n' | head -c {}",
                raw * 4 / 3
            ),
        ),
    ];
    // The last column: the stream's producer alone through `| cat` (the floor: a stream
    // that takes long to make, such as sed's colour between every two characters, cannot go
    // through exec faster than it is made).
    let times: Vec<Vec<f64>> = kinds
        .iter()
        .map(|(_, cmd)| {
            let mut per = vec![Vec::new(); binaries.len() + 1];
            for _ in 0..3 {
                for (bi, (_, bin)) in binaries.iter().enumerate() {
                    per[bi].push(once(bin, cmd));
                }
                let mut c = Command::new("sh");
                c.args(["-c", &format!("{cmd} | cat")]).current_dir(&ws);
                per[binaries.len()].push(drain(c).0);
            }
            per.into_iter().map(median).collect()
        })
        .collect();
    let cat = binaries.len();
    println!(
        "the streams' producers alone through `| cat`, {adv_mib} MiB: {}",
        kinds
            .iter()
            .zip(&times)
            .map(|((name, _), t)| format!("{name} {:.3} s", t[cat]))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (bi, (label, _)) in binaries.iter().enumerate() {
        let random = times[0][bi];
        println!("{label}: exec of {adv_mib} MiB of random base64: {random:.3} s");
        for (ki, (name, _)) in kinds.iter().enumerate().skip(1) {
            let t = times[ki][bi];
            println!(
                "{label}: exec of {adv_mib} MiB of {name}: {t:.3} s, {:.2}x random base64's {random:.3} s (goal <= 2x): {}",
                t / random,
                if t <= 2.0 * random { "met" } else { "NOT met" }
            );
        }
    }
    let cost = (1.0 - (bytes / g) / (bytes / p)) * 100.0;
    println!(
        "{mib} MiB to stdout: unconfined {p:.2} s ({:.0} MB/s); gateway exec, redaction on {g:.2} s ({:.0} MB/s); throughput cost {cost:.0}% (goal <= 20%): {}",
        bytes / p / 1e6,
        bytes / g / 1e6,
        if cost <= 20.0 { "met" } else { "NOT met" }
    );
}
