use super::verify::{Problem, VerifyOptions, verify};
use super::*;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "gateway-audit-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&d).expect("tmp");
    d
}

fn rec(i: u64) -> Record {
    Record {
        time: now_rfc3339(),
        session: "s1".into(),
        caller: Caller {
            uid: 0,
            pid: 1,
            client: "test".into(),
        },
        tool: if i.is_multiple_of(3) { "scan" } else { "exec" }.into(),
        args: vec!["echo".into(), format!("hello {i}")],
        cwd: "/work/ws".into(),
        policy: "strict".into(),
        decision: RecordDecision {
            effect: if i.is_multiple_of(5) { "deny" } else { "allow" }.into(),
            rules: vec!["r1".into()],
            reasons: vec!["because".into()],
        },
        exit_code: Some((i % 2) as i32),
        ..Record::default()
    }
}

/// A one-shot log of `n` records (a checkpoint after each).
fn log_of(name: &str, n: u64) -> PathBuf {
    let d = tmp(name);
    for i in 1..=n {
        append_one(&d, &mut rec(i)).expect("append");
    }
    d
}

fn problems(d: &Path) -> Vec<Problem> {
    verify(d, &VerifyOptions::default())
        .expect("verify")
        .problems
}

fn lines(d: &Path) -> Vec<String> {
    std::fs::read_to_string(Paths::new(d).log)
        .expect("log")
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(d: &Path, l: &[String]) {
    let mut s = l.join("\n");
    s.push('\n');
    std::fs::write(Paths::new(d).log, s).expect("write");
}

#[test]
fn appends_chain_and_verify() {
    let d = log_of("ok", 20);
    let r = verify(&d, &VerifyOptions::default()).expect("verify");
    assert!(r.ok(), "{:?}", r.problems);
    assert_eq!((r.records, r.checkpoints, r.epochs), (20, 20, 1));
    let l = lines(&d);
    assert!(l[0].starts_with("{\"seq\":1,\"prev\":\"0000"));
    let (s, prev) = line_prefix(l[5].as_bytes()).expect("prefix");
    assert_eq!(s, 6);
    assert_eq!(prev, merkle::leaf_hash(l[4].as_bytes()));
    // Modes: keys dir 0700, private key 0600, log 0600.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: PathBuf| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(d.join("keys")), 0o700);
    assert_eq!(mode(d.join("keys/epoch-0.key")), 0o600);
    assert_eq!(mode(Paths::new(&d).log), 0o600);
}

#[test]
fn edited_field_is_named() {
    let d = log_of("edit", 10);
    let mut l = lines(&d);
    l[3] = l[3].replace("hello 4", "hello X");
    write_lines(&d, &l);
    assert_eq!(problems(&d)[0], Problem::Edited { seq: 4 });
}

#[test]
fn edited_last_record_is_named_by_its_checkpoint() {
    let d = log_of("editlast", 10);
    let mut l = lines(&d);
    l[9] = l[9].replace("hello 10", "hello Y!");
    write_lines(&d, &l);
    let p = problems(&d);
    assert!(
        matches!(
            p[0],
            Problem::RootMismatch {
                size: 10,
                after: 9,
                ..
            }
        ),
        "{p:?}"
    );
    assert!(
        p[0].to_string().contains("record 10 was edited"),
        "{}",
        p[0]
    );
}

#[test]
fn deleted_middle_record_is_named() {
    let d = log_of("delete", 10);
    let mut l = lines(&d);
    l.remove(4);
    write_lines(&d, &l);
    assert_eq!(problems(&d)[0], Problem::Missing { from: 5, to: 5 });
}

#[test]
fn swapped_records_are_named() {
    let d = log_of("swap", 10);
    let mut l = lines(&d);
    l.swap(3, 4);
    write_lines(&d, &l);
    let p = problems(&d);
    assert!(
        matches!(
            p[0],
            Problem::Reordered {
                expected: 6,
                found: 4,
                ..
            }
        ),
        "{p:?}"
    );
}

#[test]
fn duplicated_record_is_named() {
    let d = log_of("dup", 10);
    let mut l = lines(&d);
    let x = l[6].clone();
    l.insert(7, x);
    write_lines(&d, &l);
    assert_eq!(problems(&d)[0], Problem::Duplicated { seq: 7 });
    // A copy appended at the end, too.
    let d = log_of("dup2", 10);
    let mut l = lines(&d);
    let x = l[2].clone();
    l.push(x);
    write_lines(&d, &l);
    assert_eq!(problems(&d)[0], Problem::Duplicated { seq: 3 });
}

#[test]
fn truncated_tail_is_named() {
    let d = log_of("trunc", 10);
    let mut l = lines(&d);
    l.truncate(7);
    write_lines(&d, &l);
    let p = problems(&d);
    assert!(
        matches!(
            p[0],
            Problem::Truncated {
                checkpoint: 8,
                size: 8,
                records: 7
            }
        ),
        "{p:?}"
    );
    // Cut in the middle of a line.
    let d = log_of("torn", 5);
    let data = std::fs::read(Paths::new(&d).log).expect("log");
    std::fs::write(Paths::new(&d).log, &data[..data.len() - 10]).expect("write");
    assert!(
        problems(&d)
            .iter()
            .any(|p| matches!(p, Problem::Torn { line: 5 }))
    );
}

#[test]
fn truncation_with_checkpoints_removed_needs_the_anchor() {
    let d = log_of("anchor", 10);
    let anchor = latest_checkpoint(&d).expect("cp").expect("some");
    // Remove the last 3 records and the checkpoints that cover them.
    let mut l = lines(&d);
    l.truncate(7);
    write_lines(&d, &l);
    let cps = std::fs::read_to_string(Paths::new(&d).checkpoints).expect("cps");
    let notes = note::parse_notes(&cps).expect("notes");
    assert_eq!(notes.len(), 10);
    let s: String = notes[..7].iter().map(|n| n.encode() + "\n").collect();
    std::fs::write(Paths::new(&d).checkpoints, s).expect("write");
    assert!(problems(&d).is_empty(), "undetectable without an anchor");
    let r = verify(
        &d,
        &VerifyOptions {
            anchor: Some(anchor),
            ..VerifyOptions::default()
        },
    )
    .expect("verify");
    assert!(
        matches!(
            r.problems[0],
            Problem::Truncated {
                checkpoint: 0,
                size: 10,
                records: 7
            }
        ),
        "{:?}",
        r.problems
    );
}

#[test]
fn rewritten_history_fails_the_anchor() {
    let d = log_of("rewrite", 6);
    let anchor = latest_checkpoint(&d).expect("cp").expect("some");
    // Someone with the key rewrites record 2 and re-signs everything after it: the local
    // log verifies, the anchor does not.
    let d2 = tmp("rewrite2");
    std::fs::create_dir_all(d2.join("audit")).expect("dir");
    copy_dir(&d.join("keys"), &d2.join("keys"));
    for i in 1..=6 {
        let mut r = rec(i);
        if i == 2 {
            r.args[1] = "nothing to see".into();
        }
        append_one(&d2, &mut r).expect("append");
    }
    assert!(problems(&d2).is_empty());
    let r = verify(
        &d2,
        &VerifyOptions {
            anchor: Some(anchor),
            ..VerifyOptions::default()
        },
    )
    .expect("verify");
    assert!(
        matches!(r.problems[0], Problem::RootMismatch { checkpoint: 0, .. }),
        "{:?}",
        r.problems
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir").flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

#[test]
fn corrupt_checkpoint_signature_is_named() {
    let d = log_of("sig", 5);
    let cps = std::fs::read_to_string(Paths::new(&d).checkpoints).expect("cps");
    // Change one character of the third signature (keeping valid base64).
    let idx = cps.match_indices('\u{2014}').nth(2).expect("third").0;
    let line_end = idx + cps[idx..].find('\n').expect("eol");
    let mut b = cps.into_bytes();
    let c = &mut b[line_end - 5];
    *c = if *c == b'A' { b'B' } else { b'A' };
    std::fs::write(Paths::new(&d).checkpoints, b).expect("write");
    let p = problems(&d);
    assert!(
        matches!(&p[0], Problem::BadSignature { what, .. } if what == "checkpoint 3"),
        "{p:?}"
    );
}

#[test]
fn replaced_key_is_detected() {
    let d = log_of("key", 5);
    let exported = keys::root_key(&d).expect("key").expect("some");
    // 1. Keys replaced, checkpoints left: signatures fail.
    std::fs::remove_dir_all(d.join("keys")).expect("rm");
    let origin = {
        let cps = std::fs::read_to_string(Paths::new(&d).checkpoints).expect("cps");
        cps.lines().next().expect("origin").to_string()
    };
    keys::private_dir(&d.join("keys")).expect("mkdir");
    std::fs::write(d.join("keys/origin"), format!("{origin}\n")).expect("origin");
    keys::generate(&d, &origin, 0).expect("gen");
    let p = problems(&d);
    assert!(
        matches!(&p[0], Problem::BadSignature { what, .. } if what == "checkpoint 1"),
        "{p:?}"
    );
    // 2. Everything re-signed with the new key: only the exported key tells.
    let signer = keys::current(&d, &origin, 0).expect("signer");
    let data = std::fs::read(Paths::new(&d).log).expect("log");
    let mut range = CompactRange::new();
    let mut cps = String::new();
    for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        range.push(merkle::leaf_hash(line));
        let cp = Checkpoint {
            origin: origin.clone(),
            size: range.size(),
            root: range.root(),
        };
        cps.push_str(&signer.sign(&cp.text()));
        cps.push('\n');
    }
    std::fs::write(Paths::new(&d).checkpoints, cps).expect("write");
    assert!(problems(&d).is_empty());
    let r = verify(
        &d,
        &VerifyOptions {
            key: Some(exported),
            ..VerifyOptions::default()
        },
    )
    .expect("verify");
    assert!(
        matches!(r.problems[0], Problem::KeyReplaced { .. }),
        "{:?}",
        r.problems
    );
}

#[test]
fn rotation_chains_keys_and_destroys_the_old_one() {
    let d = log_of("rotate", 4);
    let root = keys::root_key(&d).expect("k").expect("some");
    let vk = rotate(&d).expect("rotate");
    assert!(vk.name.ends_with("/e1"));
    assert!(!d.join("keys/epoch-0.key").exists());
    assert!(d.join("keys/epoch-1.key").exists());
    for i in 5..=8 {
        append_one(&d, &mut rec(i)).expect("append");
    }
    let r = verify(
        &d,
        &VerifyOptions {
            key: Some(root.clone()),
            require_covered: true,
            ..VerifyOptions::default()
        },
    )
    .expect("verify");
    assert!(r.ok(), "{:?}", r.problems);
    assert_eq!((r.records, r.epochs), (8, 2));
    // The epoch-1 key cannot re-sign epoch 0's history: a checkpoint of size 3 signed by it
    // is rejected.
    let signer = keys::current(&d, &keys::origin(&d).expect("o"), 1).expect("signer");
    let data = std::fs::read(Paths::new(&d).log).expect("log");
    let mut range = CompactRange::new();
    for line in data
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .take(3)
    {
        range.push(merkle::leaf_hash(line));
    }
    let forged = signer.sign(
        &Checkpoint {
            origin: keys::origin(&d).expect("o"),
            size: 3,
            root: range.root(),
        }
        .text(),
    );
    append_synced(&Paths::new(&d).checkpoints, &forged).expect("append");
    let p = problems(&d);
    assert!(
        matches!(&p[0], Problem::BadSignature { what, .. } if what == "checkpoint 9"),
        "{p:?}"
    );
}

#[test]
fn every_single_byte_corruption_is_detected() {
    // Checkpoints every 25 records (as the daemon writes them): each verification checks
    // 4 signatures, so 40,000 of them take seconds.
    let d = tmp("bytes");
    {
        let mut log = AuditLog::open(
            &d,
            Checkpoints::Batch {
                records: 25,
                interval: Duration::from_secs(3600),
            },
        )
        .expect("open");
        for i in 1..=100 {
            log.append(&mut rec(i)).expect("append");
        }
    }
    assert_eq!(
        verify(&d, &VerifyOptions::default())
            .expect("v")
            .checkpoints,
        4
    );
    let path = Paths::new(&d).log;
    let orig = std::fs::read(&path).expect("log");
    assert!(problems(&d).is_empty());
    for i in 0..orig.len() {
        let mut bad = orig.clone();
        // A different byte: flip the low bit (a newline becomes a vertical tab, a digit
        // another digit, ...).
        bad[i] ^= 1;
        std::fs::write(&path, &bad).expect("write");
        let p = problems(&d);
        assert!(
            !p.is_empty(),
            "byte {i} ({:?}) not detected",
            orig[i] as char
        );
    }
    std::fs::write(&path, &orig).expect("restore");
    // And the checkpoint file.
    let cpath = Paths::new(&d).checkpoints;
    let corig = std::fs::read(&cpath).expect("cps");
    for i in 0..corig.len() {
        let mut bad = corig.clone();
        bad[i] ^= 1;
        std::fs::write(&cpath, &bad).expect("write");
        assert!(!problems(&d).is_empty(), "checkpoint byte {i} not detected");
    }
}

#[test]
fn concurrent_writers_never_fork_the_chain() {
    let d = tmp("concurrent");
    append_one(&d, &mut rec(0)).expect("first");
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let d = d.clone();
            std::thread::spawn(move || {
                let mut log = AuditLog::open(
                    &d,
                    Checkpoints::Batch {
                        records: 7,
                        interval: Duration::from_secs(60),
                    },
                )
                .expect("open");
                for i in 0..50 {
                    if i % 10 == 0 {
                        append_one(&d, &mut rec(t * 100 + i)).expect("one-shot");
                    } else {
                        log.append(&mut rec(t * 100 + i)).expect("append");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("join");
    }
    let r = verify(
        &d,
        &VerifyOptions {
            require_covered: true,
            ..VerifyOptions::default()
        },
    )
    .expect("verify");
    assert!(r.ok(), "{:?}", r.problems);
    assert_eq!(r.records, 201);
}

#[test]
fn stale_head_cache_is_rebuilt() {
    let d = log_of("head", 3);
    std::fs::write(Paths::new(&d).head, b"{\"garbage\":1}").expect("write");
    append_one(&d, &mut rec(4)).expect("append");
    let good = std::fs::read(Paths::new(&d).head).expect("head");
    // A head that claims the wrong last hash.
    let mut h: serde_json::Value = serde_json::from_slice(&good).expect("json");
    h["last"] = serde_json::Value::String("00".repeat(32));
    std::fs::write(Paths::new(&d).head, h.to_string()).expect("write");
    append_one(&d, &mut rec(5)).expect("append");
    assert!(problems(&d).is_empty());
    assert_eq!(lines(&d).len(), 5);
}

#[test]
fn writer_refuses_a_broken_log() {
    let d = log_of("broken", 3);
    let mut l = lines(&d);
    l.remove(1);
    write_lines(&d, &l);
    let e = append_one(&d, &mut rec(9)).expect_err("must refuse");
    assert!(e.to_string().contains("does not continue the chain"), "{e}");
}

#[test]
fn query_filters_and_show() {
    let d = log_of("query", 30);
    let all = query::query(&d, &query::Filter::default()).expect("q");
    assert_eq!(all.records.len(), 30);
    assert_eq!(all.records[0].seq, 1);
    let f = query::Filter {
        tool: Some("exec".into()),
        decision: Some("deny".into()),
        ..Default::default()
    };
    let r = query::query(&d, &f).expect("q");
    let seqs: Vec<u64> = r.records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![5, 10, 20, 25]);
    let r = query::query(
        &d,
        &query::Filter {
            contains: Some("hello 17".into()),
            ..Default::default()
        },
    )
    .expect("q");
    assert_eq!(r.records.len(), 1);
    let r = query::query(
        &d,
        &query::Filter {
            exit_code: Some(1),
            limit: 3,
            ..Default::default()
        },
    )
    .expect("q");
    let seqs: Vec<u64> = r.records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![25, 27, 29]);
    let r = query::query(
        &d,
        &query::Filter {
            since: query::parse_time("2000-01-01T00:00:00Z"),
            until: query::parse_time("2000-01-02T00:00:00Z"),
            ..Default::default()
        },
    )
    .expect("q");
    assert!(r.records.is_empty());
    assert_eq!(r.scanned, 30);
    let r = query::query(
        &d,
        &query::Filter {
            since: query::parse_time("2100-01-01T00:00:00Z"),
            ..Default::default()
        },
    )
    .expect("q");
    assert!(r.records.is_empty());
    assert_eq!(
        r.scanned, 1,
        "since stops the scan at the first older record"
    );
    let hour = query::parse_time("1h").expect("relative");
    assert!(hour < now_rfc3339());
    let r = query::query(
        &d,
        &query::Filter {
            path: Some("/work".into()),
            session: Some("s1".into()),
            ..Default::default()
        },
    )
    .expect("q");
    assert_eq!(r.records.len(), 30);
    for s in [1, 2, 15, 29, 30] {
        assert_eq!(query::show(&d, s).expect("show").map(|r| r.seq), Some(s));
    }
    assert!(query::show(&d, 31).expect("show").is_none());
    assert!(query::show(&d, 0).expect("show").is_none());
}

#[test]
fn artifacts_store_and_cap() {
    let d = tmp("artifacts");
    let mut w = artifacts::ArtifactWriter::new(&d, 10);
    w.write(b"hello ");
    w.write(b"world, and more");
    let g = w.finish();
    assert_eq!(g.bytes, 21);
    assert!(g.artifact_truncated);
    assert!(g.artifact.is_some(), "stored");
    assert_eq!(artifacts::read(&d, &g).expect("read"), b"hello worl");
    let mut w = artifacts::ArtifactWriter::new(&d, 0);
    w.write(b"x");
    assert!(w.finish().artifact.is_none());
    assert_eq!(artifacts::prune(&d, None, Some(0)), (1, 10));
}

#[test]
fn checkpoints_are_compacted_to_milestones() {
    let d = tmp("milestones");
    let n = 2 * MILESTONE + 5;
    {
        let mut log = AuditLog::open(&d, Checkpoints::EveryRecord).expect("open");
        for i in 1..=n {
            log.append(&mut rec(i)).expect("append");
        }
    }
    let r = verify(&d, &VerifyOptions::default()).expect("verify");
    assert!(r.ok(), "{:?}", r.problems);
    // Milestones 1024 and 2048, then one per record since.
    assert_eq!(r.checkpoints, 2 + 5);
    // Deleting a milestone is noticed.
    let cps = std::fs::read_to_string(Paths::new(&d).checkpoints).expect("cps");
    let notes = note::parse_notes(&cps).expect("notes");
    let s: String = notes[1..].iter().map(|n| n.encode() + "\n").collect();
    std::fs::write(Paths::new(&d).checkpoints, s).expect("write");
    assert_eq!(
        problems(&d)[0],
        Problem::MissingCheckpoint { size: MILESTONE }
    );
}

#[test]
fn fuzz_verify_seeds() {
    verify::fuzz_verify(&[0]).expect("fuzz_verify");
    verify::fuzz_verify(b"\x00{\"seq\":1}\n").expect("fuzz_verify");
    verify::fuzz_verify(b"\x01\x00\x10X").expect("fuzz_verify");
    verify::fuzz_verify(b"\x02\x00\x00\n").expect("fuzz_verify");
    verify::fuzz_verify(b"\x01\x00\x00").expect("fuzz_verify");
}

#[test]
fn batch_writer_signs_when_the_interval_passes() {
    let d = tmp("tick");
    let mut log = AuditLog::open(
        &d,
        Checkpoints::Batch {
            records: 100,
            interval: Duration::from_millis(50),
        },
    )
    .expect("open");
    log.append(&mut rec(1)).expect("append");
    log.append(&mut rec(2)).expect("append");
    assert!(!log.checkpoint_if_due().expect("tick"), "too early");
    let uncovered = verify(
        &d,
        &VerifyOptions {
            require_covered: true,
            ..VerifyOptions::default()
        },
    )
    .expect("verify");
    assert_eq!(uncovered.problems, vec![Problem::Uncovered { records: 2 }]);
    std::thread::sleep(Duration::from_millis(60));
    assert!(log.checkpoint_if_due().expect("tick"));
    assert!(!log.checkpoint_if_due().expect("tick"), "nothing new");
    let r = verify(
        &d,
        &VerifyOptions {
            require_covered: true,
            ..VerifyOptions::default()
        },
    )
    .expect("verify");
    assert!(r.ok(), "{:?}", r.problems);
    assert_eq!(r.checkpoints, 1);
}

#[test]
fn a_crash_during_key_generation_leaves_a_usable_log() {
    // Killed between the private and the public key: the public key is derived again, and
    // the log goes on, verifiably.
    let d = log_of("keycrash", 3);
    let pub0 = d.join("keys/epoch-0.pub");
    let before = std::fs::read_to_string(&pub0).expect("pub");
    std::fs::remove_file(&pub0).expect("rm pub");
    append_one(&d, &mut rec(4)).expect("append after the crash");
    assert_eq!(std::fs::read_to_string(&pub0).expect("pub again"), before);
    assert!(problems(&d).is_empty(), "{:?}", problems(&d));
    // A public key without its private key is how a deleted key looks: still refused.
    std::fs::remove_file(d.join("keys/epoch-0.key")).expect("rm key");
    assert!(append_one(&d, &mut rec(5)).is_err());
}

#[test]
fn key_files_are_written_whole_or_not_at_all() {
    let d = tmp("writenew");
    let p = d.join("origin");
    keys::write_new(&p, b"first\n", 0o644).expect("write");
    assert!(
        keys::write_new(&p, b"second\n", 0o644).is_err(),
        "never replaces"
    );
    assert_eq!(std::fs::read(&p).expect("read"), b"first\n");
    let names: Vec<String> = std::fs::read_dir(&d)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["origin".to_string()], "no temporary left");
}

#[test]
fn covered_before_lets_only_records_after_it_go_unsigned() {
    // A daemon's batch: 10 records signed, 5 appended after the checkpoint.
    let d = tmp("covered-before");
    let mut log = AuditLog::open(
        &d,
        Checkpoints::Batch {
            records: 10,
            interval: Duration::from_secs(3600),
        },
    )
    .expect("open");
    for i in 1..=15 {
        log.append(&mut rec(i)).expect("append");
    }
    let opts = |covered_before| VerifyOptions {
        require_covered: true,
        covered_before,
        ..VerifyOptions::default()
    };
    // Without a bound: the unsigned tail fails, as for a one-shot log.
    let r = verify(&d, &opts(None)).expect("verify");
    assert_eq!(r.problems, vec![Problem::Uncovered { records: 5 }]);
    // The verify began at 10 records (all signed): the 5 after are newer, not a problem.
    let r = verify(&d, &opts(Some(10))).expect("verify");
    assert!(r.ok(), "{:?}", r.problems);
    assert_eq!((r.checkpointed, r.newer), (10, 5));
    // It began at 12: records 11 and 12 had to be signed and are not.
    let r = verify(&d, &opts(Some(12))).expect("verify");
    assert_eq!(r.problems, vec![Problem::Uncovered { records: 5 }]);
    // An edit among the newer records still breaks the chain it is part of.
    let mut l = lines(&d);
    l[11] = l[11].replacen("hello 12", "hello 99", 1);
    write_lines(&d, &l);
    let r = verify(&d, &opts(Some(10))).expect("verify");
    assert!(!r.ok(), "an edited record 12 verified");
}

/// Log text: lines that vary, long enough to be compressed.
fn log_text(n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n + 64);
    let mut i = 0u64;
    while v.len() < n {
        v.extend_from_slice(format!("step {i}: built target {}\n", i * 7919 % 1000).as_bytes());
        i += 1;
    }
    v.truncate(n);
    v
}

fn sha256_hex(data: &[u8]) -> String {
    DigestAlg::Sha256.hex(data)
}

#[test]
fn stream_digests_are_blake3_and_a_large_artifact_is_stored_compressed_and_read_whole() {
    let d = tmp("zstd");
    let data = log_text(1 << 20);
    let mut w = artifacts::ArtifactWriter::new(&d, 16 << 20);
    // Uneven chunks, across the compression threshold.
    for c in data.chunks(4093) {
        w.write(c);
    }
    let g = w.finish();
    let b3 = blake3::hash(&data).to_hex().to_string();
    assert_eq!(g.blake3.as_deref(), Some(b3.as_str()));
    assert_eq!(g.sha256, None);
    assert_eq!(
        g.artifact.as_deref(),
        Some(b3.as_str()),
        "the id: BLAKE3 too"
    );
    assert!(!g.artifact_truncated);
    let raw = std::fs::read(Paths::new(&d).artifacts.join(&b3)).expect("stored");
    assert_eq!(raw[..4], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    assert!(
        raw.len() < data.len() / 4,
        "compressed: {} bytes",
        raw.len()
    );
    assert!(
        artifacts::read(&d, &g).expect("read") == data,
        "read back whole"
    );
    // The record's JSON names the algorithm.
    let j = serde_json::to_string(&g).expect("json");
    assert!(
        j.contains(&format!("\"blake3\":\"{b3}\"")) && !j.contains("sha256"),
        "{j}"
    );

    // Small: stored as is.
    let mut w = artifacts::ArtifactWriter::new(&d, 16 << 20);
    w.write(&data[..1000]);
    let s = w.finish();
    let raw = std::fs::read(
        Paths::new(&d)
            .artifacts
            .join(s.artifact.as_ref().expect("id")),
    )
    .expect("stored");
    assert_eq!(raw, data[..1000]);
    assert_eq!(artifacts::read(&d, &s).expect("read"), data[..1000]);

    // Capped: the id hashes the stored part, the digest the whole stream.
    let mut w = artifacts::ArtifactWriter::new(&d, 300_000);
    for c in data.chunks(65_536) {
        w.write(c);
    }
    let t = w.finish();
    assert!(t.artifact_truncated);
    assert_eq!(t.blake3.as_deref(), Some(b3.as_str()));
    let head = blake3::hash(&data[..300_000]).to_hex().to_string();
    assert_eq!(t.artifact.as_deref(), Some(head.as_str()));
    assert!(artifacts::read(&d, &t).expect("read") == data[..300_000]);
}

#[test]
fn old_sha256_artifacts_still_read_and_altered_ones_of_both_kinds_are_caught() {
    let d = tmp("oldart");
    let dir = Paths::new(&d).artifacts;
    std::fs::create_dir_all(&dir).expect("dir");
    // An artifact as written before: plain, named by its SHA-256, in a sha256 record.
    let data = log_text(200_000);
    let id = sha256_hex(&data);
    std::fs::write(dir.join(&id), &data).expect("old");
    let mut old: StreamDigest = serde_json::from_str(&format!(
        r#"{{"bytes":{},"sha256":"{id}","artifact":"{id}","artifact_truncated":false}}"#,
        data.len()
    ))
    .expect("an old digest parses");
    assert_eq!(old.hash(), Some((DigestAlg::Sha256, id.as_str())));
    assert!(artifacts::read(&d, &old).expect("old read") == data);
    // Altered.
    let mut bad = data.clone();
    bad[100] ^= 1;
    std::fs::write(dir.join(&id), &bad).expect("alter");
    assert!(matches!(
        artifacts::read(&d, &old),
        Err(AuditError::Artifact { .. })
    ));
    // A BLAKE3 id with a SHA-256 record (or the other way round) does not pass either.
    let mut w = artifacts::ArtifactWriter::new(&d, 16 << 20);
    w.write(&data);
    let new = w.finish();
    old.artifact.clone_from(&new.artifact);
    assert!(matches!(
        artifacts::read(&d, &old),
        Err(AuditError::Artifact { .. })
    ));
    assert!(artifacts::read(&d, &new).expect("new read") == data);

    // A compressed one altered: another frame of other content, then garbage.
    let path = dir.join(new.artifact.as_ref().expect("id"));
    let other = zstd::encode_all(&bad[..], 1).expect("zstd");
    std::fs::write(&path, &other).expect("alter");
    assert!(matches!(
        artifacts::read(&d, &new),
        Err(AuditError::Artifact { .. })
    ));
    let mut raw = zstd::encode_all(&data[..], 1).expect("zstd");
    let n = raw.len();
    raw[n / 2] ^= 0xff;
    std::fs::write(&path, &raw).expect("alter");
    assert!(matches!(
        artifacts::read(&d, &new),
        Err(AuditError::Artifact { .. })
    ));
    // A frame that inflates past the recorded size is not read beyond it.
    let mut small = new.clone();
    small.bytes = 1000;
    std::fs::write(&path, zstd::encode_all(&data[..], 1).expect("zstd")).expect("restore");
    let e = artifacts::read(&d, &small).expect_err("bounded");
    assert!(e.to_string().contains("more than the 1000 bytes"), "{e}");
    assert!(artifacts::read(&d, &new).expect("restored") == data);
}

#[test]
fn records_with_sha256_and_blake3_stream_digests_verify_and_an_edited_digest_is_caught() {
    for alg in [DigestAlg::Sha256, DigestAlg::Blake3] {
        let d = tmp(alg.name());
        let body = log_text(100_000);
        let h = alg.hex(&body);
        let digest = StreamDigest {
            bytes: body.len() as u64,
            sha256: (alg == DigestAlg::Sha256).then(|| h.clone()),
            blake3: (alg == DigestAlg::Blake3).then(|| h.clone()),
            artifact: None,
            artifact_truncated: false,
        };
        {
            let mut log = AuditLog::open(&d, Checkpoints::EveryRecord).expect("open");
            for i in 1..=3 {
                let mut r = rec(i);
                r.stdout = Some(digest.clone());
                log.append(&mut r).expect("append");
            }
        }
        assert!(problems(&d).is_empty(), "{alg:?}: {:?}", problems(&d));
        let shown = query::show(&d, 2).expect("show").expect("record 2");
        assert_eq!(
            shown.stdout.as_ref().and_then(|s| s.hash()),
            Some((alg, h.as_str()))
        );
        let mut l = lines(&d);
        let field = format!("\"{}\":\"{h}\"", alg.name());
        assert!(l[1].contains(&field), "{alg:?}: {}", l[1]);
        let forged = alg.hex(b"something else");
        l[1] = l[1].replacen(&h, &forged, 1);
        write_lines(&d, &l);
        assert_eq!(problems(&d)[0], Problem::Edited { seq: 2 }, "{alg:?}");
    }
}
