//! The journal's crash and damage rules with its index and its pruning: whatever the index
//! holds (nothing, garbage, another journal's, a stale prefix), what is read is what the
//! journal says; a torn last line is skipped; pending intents survive compaction and are
//! recovered; names are bytes; the journal stays within its share.

use super::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

fn state(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gateway-jt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn change(ws: &str, name: &str, group: &str) -> Change {
    Change {
        tool: "exec".into(),
        path: PathBuf::from(ws).join(name),
        workspace: Some(PathBuf::from(ws)),
        group: Some(group.into()),
        after: PathState::Dir,
        ..Change::default()
    }
}

/// The journal's changes as its lines say, read without the index.
fn by_lines(d: &Path) -> Vec<(u64, Phase)> {
    let text = std::fs::read(d.join("journal/journal.jsonl")).unwrap_or_default();
    let mut out: Vec<(u64, Phase)> = Vec::new();
    for l in text.split(|b| *b == b'\n') {
        match parse_line(l) {
            Ok(Line::Intent(c)) => out.push((c.id, Phase::Pending)),
            Ok(Line::Commit { id }) => {
                if let Some(e) = out.iter_mut().find(|e| e.0 == id) {
                    e.1 = Phase::Committed;
                }
            }
            Ok(Line::Abort { id }) => {
                if let Some(e) = out.iter_mut().find(|e| e.0 == id) {
                    e.1 = Phase::Aborted;
                }
            }
            _ => {}
        }
    }
    out
}

fn by_index(d: &Path) -> Vec<(u64, Phase)> {
    read(d)
        .expect("read")
        .changes
        .iter()
        .map(|(c, p)| (c.id, *p))
        .collect()
}

#[test]
fn a_name_that_is_not_utf8_round_trips_through_the_journal_byte_exact() {
    let d = state("bytes");
    let l = lock(&d).expect("lock");
    let ws = PathBuf::from(OsStr::from_bytes(b"/w\xfe"));
    let mut c = change("/", "x", "g");
    c.path = ws.join(OsStr::from_bytes(b"a\xff\x01b"));
    c.dest = Some(ws.join(OsStr::from_bytes(b"\x80")));
    c.workspace = Some(ws.clone());
    let done = record_done(&d, &l, vec![c.clone(), change("/v", "ok", "g")]).expect("journal");
    assert_eq!(done.len(), 2, "the whole group is journalled");
    let j = read(&d).expect("read");
    assert_eq!(j.changes[0].0.path, c.path);
    assert_eq!(j.changes[0].0.dest, c.dest);
    assert_eq!(j.changes[0].0.workspace, c.workspace);
    let v = View::open(&d).expect("view");
    assert_eq!(
        v.workspaces().expect("workspaces").get(&v.entries()[0].ws),
        Some(&ws)
    );
    assert_eq!(group_members(&d, "g").expect("group").len(), 2);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn what_is_read_is_what_the_journal_says_whatever_its_index_holds() {
    let d = state("index");
    let l = lock(&d).expect("lock");
    record_done(
        &d,
        &l,
        vec![change("/w", "a", "g1"), change("/w", "b", "g1")],
    )
    .expect("g1");
    let p = begin_many(&d, &l, vec![change("/w", "c", "g2")]).expect("g2");
    assert_eq!(p[0].id, 3);
    assert!(d.join("journal/journal.idx").exists());
    // An older build appends without the index: read, and counted by the next id.
    let jp = d.join("journal/journal.jsonl");
    let mut old = std::fs::OpenOptions::new()
        .append(true)
        .open(&jp)
        .expect("open");
    let mut c = change("/w", "d", "g3");
    c.id = 4;
    writeln!(
        old,
        "{}",
        serde_json::to_string(&Line::Intent(Box::new(c))).expect("json")
    )
    .expect("append");
    writeln!(old, "{{\"phase\":\"commit\",\"id\":4}}").expect("append");
    // A torn last line (a crash mid-append) is skipped, and not glued to the next.
    write!(old, "{{\"phase\":\"intent\",\"id\":5,\"ti").expect("torn");
    drop(old);
    let want = vec![
        (1, Phase::Committed),
        (2, Phase::Committed),
        (3, Phase::Pending),
        (4, Phase::Committed),
    ];
    assert_eq!(by_index(&d), want);
    let n = record_done(&d, &l, vec![change("/w", "e", "g4")]).expect("g4");
    assert_eq!(n[0].id, 5, "the torn intent never acted: its id is free");
    commit(&d, 3).expect("commit");
    let want = by_lines(&d);
    assert_eq!(want.len(), 5);
    assert_eq!(by_index(&d), want);
    // Garbage, another journal's index, a partial record, none: the same.
    let ip = d.join("journal/journal.idx");
    let good = std::fs::read(&ip).expect("idx");
    let other = state("index-other");
    let ol = lock(&other).expect("lock");
    record_done(&other, &ol, vec![change("/x", "y", "g")]).expect("other");
    let mut partial = good.clone();
    partial.extend_from_slice(&[7u8; 20]);
    let mut shifted = good.clone();
    shifted[index::REC + 24] ^= 1;
    for (what, idx) in [
        ("garbage", vec![0x5au8; 4096]),
        (
            "another journal's",
            std::fs::read(other.join("journal/journal.idx")).expect("idx"),
        ),
        ("a partial record", partial),
        ("a record pointing mid-line", shifted),
        ("empty", Vec::new()),
    ] {
        let want = by_lines(&d);
        std::fs::write(&ip, &idx).expect("write idx");
        assert_eq!(by_index(&d), want, "{what}");
        // And an append through it finds the next id.
        std::fs::write(&ip, &idx).expect("write idx");
        let before = by_lines(&d).last().map_or(0, |e| e.0);
        let n = record_done(&d, &l, vec![change("/w", "f", "g5")]).expect(what);
        assert_eq!(n[0].id, before + 1, "{what}");
        assert_eq!(by_index(&d), by_lines(&d), "{what}");
    }
    std::fs::remove_file(&ip).expect("rm");
    assert_eq!(by_index(&d), by_lines(&d), "no index");
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn pending_intents_survive_compaction_and_are_recovered() {
    let d = state("recover");
    let l = lock(&d).expect("lock");
    record_done(&d, &l, vec![change("/w", "a", "old")]).expect("old");
    let p = begin_many(&d, &l, vec![change("/w", "p", "crashed")]).expect("pending");
    record_done(&d, &l, vec![change("/w", "b", "new")]).expect("new");
    let c = compact::compact(&d, &l, Some(1), true).expect("compact");
    assert_eq!(c.removed, 1, "the old group goes, the pending change stays");
    assert_eq!(
        by_index(&d),
        vec![(p[0].id, Phase::Pending), (3, Phase::Committed)]
    );
    assert_eq!(by_index(&d), by_lines(&d));
    // A crash mid-compaction leaves a temporary file and maybe a mismatched index: the
    // journal reads as it is.
    std::fs::write(
        d.join("journal/journal.jsonl.compact"),
        b"{\"phase\":\"base\"",
    )
    .expect("w");
    std::fs::write(d.join("journal/journal.idx"), [0u8; 256]).expect("w");
    assert_eq!(pending(&d).expect("pending").len(), 1);
    // The pending change's path is in its after state: recovery commits it.
    let left = recover(&d, &l, &|path: &Path| {
        (path == Path::new("/w/p")).then_some(PathState::Dir)
    })
    .expect("recover");
    assert!(left.is_empty());
    assert_eq!(
        by_index(&d),
        vec![(2, Phase::Committed), (3, Phase::Committed)]
    );
    let n = record_done(&d, &l, vec![change("/w", "c", "next")]).expect("next");
    assert_eq!(n[0].id, 4);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_change_whose_content_before_is_missing_is_journalled_as_not_undoable() {
    let d = state("missing");
    let l = lock(&d).expect("lock");
    let kept = backup(&d, b"kept").expect("backup");
    let file = |sha: &str| PathState::File {
        sha256: sha.into(),
        mode: 0o644,
        size: 4,
    };
    let mut gone = change("/w", "gone", "g");
    gone.before = file(&"0".repeat(64));
    gone.not_backed_up = Some("the content before the change was not backed up: quota".into());
    let mut here = change("/w", "here", "g");
    here.before = file(&kept);
    let done = begin_many(&d, &l, vec![gone, here, change("/w", "new", "g")]).expect("begin");
    assert_eq!(
        done[0].not_undoable.as_deref(),
        Some("the content before the change was not backed up: quota")
    );
    assert_eq!(done[1].not_undoable, None);
    assert_eq!(done[2].not_undoable, None);
    assert_eq!(read(&d).expect("read").changes.len(), 3, "none dropped");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_journal_stays_within_its_share_of_the_bound() {
    let d = state("bound");
    let l = lock(&d).expect("lock");
    compact::set_bound(&d, 1 << 20);
    let cap = compact::cap(1 << 20);
    let mut largest_group = 0;
    for g in 0..40 {
        let before = compact::bytes(&d);
        let group: Vec<Change> = (0..200)
            .map(|i| change("/w", &format!("dir{g}/f{i}"), &format!("g{g}")))
            .collect();
        record_done(&d, &l, group).expect("group");
        largest_group = largest_group.max(compact::bytes(&d).saturating_sub(before));
        let now = compact::bytes(&d);
        assert!(
            now <= cap + 2 * largest_group,
            "group {g}: {now} bytes (share {cap})"
        );
    }
    // Ids kept counting through the pruning; the newest group is whole.
    let v = View::open(&d).expect("view");
    assert_eq!(v.last_id(), 40 * 200);
    assert_eq!(v.group("g39").count(), 200);
    assert!(v.entries().len() < 40 * 200 / 2, "{}", v.entries().len());
    let _ = std::fs::remove_dir_all(&d);
}
