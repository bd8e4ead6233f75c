//! Issue 38: a build log — cargo, npm, pip, pytest, go test and docker build output with their
//! commit hashes, digests, UUIDs and integrity strings (`benches/support/buildlog.rs`, seeded)
//! — passes the stream redactor (`TextKind::Stream`, what `exec` applies to a command's output)
//! with at least 99.9% of its lines unchanged.

use crate::buildlog_gen::build_log;
use gateway::secrets::{Redactor, TextKind};

/// The log through a stream redactor, fed in pipe-sized chunks with a pause after each (as
/// `exec` feeds a command's output).
fn redacted(log: &str) -> String {
    let mut r = Redactor::new(TextKind::Stream);
    let mut out = Vec::new();
    for chunk in log.as_bytes().chunks(64 << 10) {
        r.feed(chunk, &mut out);
        r.flush_lines(&mut out);
    }
    r.finish(&mut out);
    String::from_utf8(out).expect("utf-8 in, utf-8 out")
}

#[test]
fn build_log_lines_pass_the_redactor_unchanged() {
    let log = build_log(38, 20_000);
    let total = log.lines().count();
    assert!(total >= 20_000, "{total} lines");
    let out = redacted(&log);
    let diff = similar::TextDiff::from_lines(&log, &out);
    let mut changed = Vec::new();
    for op in diff.ops() {
        for c in diff.iter_changes(op) {
            if c.tag() == similar::ChangeTag::Delete {
                changed.push(c.value().trim_end().to_string());
            }
        }
    }
    let kept = total - changed.len();
    let share = kept as f64 / total as f64 * 100.0;
    let examples: Vec<String> = out
        .lines()
        .filter(|l| l.contains("[REDACTED"))
        .take(10)
        .map(str::to_string)
        .collect();
    eprintln!(
        "build log: {kept} of {total} lines unchanged ({share:.3}%); {} changed; first changed lines:\n{}\nas redacted:\n{}",
        changed.len(),
        changed
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n"),
        examples.join("\n")
    );
    assert!(
        kept * 1000 >= total * 999,
        "{kept} of {total} lines unchanged ({share:.3}%), want at least 99.9%; first changed:\n{}",
        changed
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The generator is seeded: the same seed, the same log; another seed, another log.
#[test]
fn build_log_is_seeded() {
    assert_eq!(build_log(7, 500), build_log(7, 500));
    assert_ne!(build_log(7, 500), build_log(8, 500));
}
