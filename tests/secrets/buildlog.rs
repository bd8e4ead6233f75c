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

/// The log's line count, the lines the redactor changed (as they were), and the redacted
/// lines (as they came out).
fn measure(log: &str) -> (usize, Vec<String>, Vec<String>) {
    changed(log, &redacted(log))
}

/// The lines of `log` that `out` changed, and what it has in their place.
fn changed(log: &str, out: &str) -> (usize, Vec<String>, Vec<String>) {
    let diff = similar::TextDiff::from_lines(log, out);
    let mut before = Vec::new();
    let mut after = Vec::new();
    for op in diff.ops() {
        for c in diff.iter_changes(op) {
            let line = c.value().trim_end().to_string();
            match c.tag() {
                similar::ChangeTag::Delete => before.push(line),
                similar::ChangeTag::Insert => after.push(line),
                similar::ChangeTag::Equal => {}
            }
        }
    }
    (log.lines().count(), before, after)
}

#[test]
fn build_log_lines_pass_the_redactor_unchanged() {
    let log = build_log(38, 20_000);
    let (total, before, after) = measure(&log);
    assert!(total >= 20_000, "{total} lines");
    let kept = total - before.len();
    let share = kept as f64 / total as f64 * 100.0;
    let first = |v: &[String]| v.iter().take(10).cloned().collect::<Vec<_>>().join("\n");
    let figure = format!(
        "build log: {kept} of {total} lines unchanged ({share:.3}%); first changed lines:\n{}\nas redacted:\n{}",
        first(&before),
        first(&after)
    );
    eprintln!("{figure}");
    assert!(kept * 1000 >= total * 999, "want at least 99.9%; {figure}");
}

// The same log through the binary: `gateway exec -- cat` under standard and strict (the
// policy's own confidence floor and the broker's chunking), its stdout measured alike.
sandbox_test!(
    fn build_log_lines_pass_exec_unchanged() {
        let log = build_log(38, 20_000);
        let env = crate::util::Env::new("buildlog");
        env.write("ci.log", &log);
        for policy in ["standard", "strict"] {
            let o = env.exec(policy, &["cat", "ci.log"]);
            assert!(o.status.success(), "{}", crate::util::stderr(&o));
            let out = crate::util::stdout(&o);
            let (total, before, after) = changed(&log, &out);
            let kept = total - before.len();
            let first = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>().join("\n");
            let figure = format!(
                "build log through exec under {policy}: {kept} of {total} lines unchanged ({:.3}%); first changed:\n{}\nas shown:\n{}",
                kept as f64 / total as f64 * 100.0,
                first(&before),
                first(&after)
            );
            eprintln!("{figure}");
            assert!(kept * 1000 >= total * 999, "want at least 99.9%; {figure}");
        }
    }
);

/// The measure sees a redaction: the log with a GitHub token planted every 1,000 lines has
/// those lines changed, and no other.
#[test]
fn build_log_measure_counts_changed_lines() {
    let log = build_log(38, 5_000);
    let mut planted = String::new();
    let mut tokens = Vec::new();
    for (i, l) in log.lines().enumerate() {
        planted.push_str(l);
        planted.push('\n');
        if i % 1000 == 999 {
            let t = crate::util::gh_token(i as u64);
            planted.push_str(&format!("GITHUB_TOKEN={t}\n"));
            tokens.push(t);
        }
    }
    let (total, before, after) = measure(&planted);
    assert_eq!(total, log.lines().count() + tokens.len());
    assert_eq!(before.len(), tokens.len(), "{before:?}");
    assert!(
        tokens.iter().all(|t| before.iter().any(|l| l.contains(t))),
        "{before:?}"
    );
    assert!(after.iter().all(|l| l.contains("REDACTED")), "{after:?}");
}

/// The generator is seeded: the same seed, the same log; another seed, another log.
#[test]
fn build_log_is_seeded() {
    assert_eq!(build_log(7, 500), build_log(7, 500));
    assert_ne!(build_log(7, 500), build_log(8, 500));
}
