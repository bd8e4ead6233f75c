//! Audit log benchmarks:
//!   1. appends per second with signing: the daemon's writer (records synced and a checkpoint
//!      signed every 1,000 records or second) and one-shot appends (open, lock, append,
//!      fsync, sign a checkpoint, fsync, as each `gateway exec` does);
//!   2. a log of 1,000,000 exec-sized records: `gateway log verify` (the binary) in
//!      records/s, and filtered `gateway log query` latencies (the binary, wall clock).
//!
//! Run: `cargo bench --bench audit` (AUDIT_RECORDS, default 1000000; ONESHOT, default 500;
//! AUDIT_RUNS, default 3).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::too_many_lines,
    reason = "a benchmark: a program of its own that reads its settings and prints its figures"
)]

use gateway::audit::{self, Caller, Checkpoints, Record, RecordDecision, StreamDigest};
use std::process::Command;
use std::time::{Duration, Instant};

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

/// A record shaped like an exec's: argv, decision, enforcement, two stream digests.
fn record(i: u64) -> Record {
    let digest = |n: u64| StreamDigest {
        bytes: n,
        sha256: None,
        blake3: Some(format!("{:064x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15))),
        artifact: Some(format!("{:064x}", n.wrapping_mul(0xc2b2_ae3d_27d4_eb4f))),
        artifact_truncated: false,
    };
    Record {
        session: format!("cli-{:012x}", i / 50),
        caller: Caller {
            uid: 1000,
            pid: 4000 + (i % 30000) as u32,
            client: "cli".into(),
        },
        tool: if i.is_multiple_of(10) { "scan" } else { "exec" }.into(),
        args: vec![
            "cargo".into(),
            "test".into(),
            format!("--package=crate{}", i % 97),
        ],
        cwd: format!("/home/dev/project{}", i % 7),
        policy: "standard".into(),
        decision: RecordDecision {
            effect: if i.is_multiple_of(13) { "deny" } else { "allow" }.into(),
            rules: vec!["allow-build-tools".into()],
            reasons: vec!["build and test tools run confined to the workspace".into()],
        },
        enforcement: Some(
            "landlock abi 7 (fs true, net true, scoped true); seccomp true; caps dropped true; namespaces pid true mnt true ipc true net true".into(),
        ),
        exit_code: Some(i.is_multiple_of(3) as i32),
        duration_ms: Some(1234.5),
        stdout: Some(digest(i * 31)),
        stderr: Some(digest(i * 7)),
        ..Record::default()
    }
}

fn main() {
    let gateway = env!("CARGO_BIN_EXE_gateway");
    let n = env_usize("AUDIT_RECORDS", 1_000_000) as u64;
    let oneshot = env_usize("ONESHOT", 500) as u64;
    let runs = env_usize("AUDIT_RUNS", 3);
    let base = std::env::temp_dir().join(format!("gateway-bench-audit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);

    // 1a. One-shot appends.
    let one = base.join("oneshot");
    std::fs::create_dir_all(&one).expect("dir");
    audit::append_one(&one, &mut record(0)).expect("first");
    let t = Instant::now();
    for i in 1..=oneshot {
        audit::append_one(&one, &mut record(i)).expect("append");
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "one-shot appends (open, lock, append, fsync, sign, fsync): {:.0}/s ({:.3} ms each, {oneshot} appends)",
        oneshot as f64 / dt,
        dt * 1e3 / oneshot as f64
    );

    // 1b. The daemon's writer, building the big log.
    let big = base.join("big");
    std::fs::create_dir_all(&big).expect("dir");
    let t = Instant::now();
    {
        let mut log = audit::AuditLog::open(
            &big,
            Checkpoints::Batch {
                records: 1000,
                interval: Duration::from_secs(1),
            },
        )
        .expect("open");
        let mut r = record(0);
        for i in 1..=n {
            // Fields that vary per call; the rest as the daemon would fill them.
            r.args[2] = format!("--package=crate{}", i % 97);
            r.exit_code = Some((i % 3 == 0) as i32);
            r.tool = if i % 10 == 0 { "scan" } else { "exec" }.into();
            r.decision.effect = if i % 13 == 0 { "deny" } else { "allow" }.into();
            r.session = format!("cli-{:012x}", i / 50);
            if i == n / 2 {
                r.args.push("needle-in-the-middle".into());
            }
            if i == n / 2 + 1 {
                r.args.pop();
            }
            log.append(&mut r).expect("append");
        }
    }
    let dt = t.elapsed().as_secs_f64();
    let size = std::fs::metadata(big.join("audit/log.jsonl"))
        .expect("log")
        .len();
    println!(
        "daemon appends (checkpoint signed and synced every 1,000 records): {:.0}/s over {n} records ({:.0} MB, {:.0} bytes/record) (goal >= 50,000/s): {}",
        n as f64 / dt,
        size as f64 / 1e6,
        size as f64 / n as f64,
        if n as f64 / dt >= 50_000.0 {
            "met"
        } else {
            "NOT met"
        }
    );

    // 2a. Verify through the binary.
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let o = Command::new(gateway)
            .args(["log", "verify", "--state-dir"])
            .arg(&big)
            .output()
            .expect("verify");
        times.push(t.elapsed().as_secs_f64());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let v = median(times);
    println!(
        "gateway log verify: {n} records in {v:.2} s = {:.0} records/s, {:.0} MB/s (median of {runs}) (goal >= 500,000 records/s): {}",
        n as f64 / v,
        size as f64 / v / 1e6,
        if n as f64 / v >= 500_000.0 {
            "met"
        } else {
            "NOT met"
        }
    );

    // 2b. Queries through the binary.
    let queries: &[(&str, &[&str])] = &[
        (
            "newest 50 denied exec calls",
            &["--tool", "exec", "--decision", "deny"],
        ),
        (
            "one record in the middle (--contains, full scan to it)",
            &["--contains", "needle-in-the-middle", "--limit", "1"],
        ),
        (
            "no match (--contains, full scan)",
            &["--contains", "matches-nothing", "--limit", "0"],
        ),
        (
            "exit code 1 in one session of 50 calls, all (full scan)",
            &[
                "--exit-code",
                "1",
                "--session",
                "cli-000000000007",
                "--limit",
                "0",
            ],
        ),
        ("last hour, newest 50", &["--since", "1h"]),
    ];
    for (what, args) in queries {
        let mut times = Vec::new();
        let mut count = 0;
        for _ in 0..runs {
            let t = Instant::now();
            let o = Command::new(gateway)
                .args(["log", "query", "--json", "--state-dir"])
                .arg(&big)
                .args(*args)
                .output()
                .expect("query");
            times.push(t.elapsed().as_secs_f64());
            assert!(o.status.success());
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
            count = v["records"].as_array().map_or(0, Vec::len);
        }
        let q = median(times);
        println!(
            "gateway log query, {what}: {:.0} ms, {count} record(s) (goal < 1 s): {}",
            q * 1e3,
            if q < 1.0 { "met" } else { "NOT met" }
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}
