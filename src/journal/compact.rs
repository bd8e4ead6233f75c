//! Pruning the journal with the backup store, within its share of `[undo] max_state_bytes`.
//!
//! The journal used to grow forever: 100k created and deleted files left ~86 MB of lines
//! under a 4 MiB `max_state_bytes`. Now:
//! - **Tombstones.** A committed change whose content before is gone from the store (expired
//!   by the quota or the retention: undo cannot bring it back) is marked by an `expire` line
//!   when the backup retention runs (`prune_backups`: hourly, `gateway log gc`): history
//!   shows it as not undoable, with why; undo passes over it. (Meanwhile history and undo
//!   find its content missing themselves.)
//! - **Then they go.** A compaction removes the changes marked at an earlier one.
//! - **A bound.** The journal (its lines and index) counts in `max_state_bytes`: the quota
//!   counts its bytes as used ([`bytes`]), and when it grows past its share ([`cap`], a
//!   quarter of the bound) by half that share since the last compaction, the oldest groups
//!   go, whole, until it is within half its share.
//!
//! Never removed: a pending change (crash recovery needs it), the newest group of each
//! workspace (what its next `undo` takes, as the quota never expires its contents) — so the
//! journal may exceed its share by those groups —, a change whose trash item is still in the
//! trash (`gateway trash restore` finds the item's origin by it; the trash is bounded by
//! `trash empty`, not by `max_state_bytes`), and an undo while the change it reverted is
//! kept (that change would look not undone). Ids keep growing: a compacted journal starts
//! with a `base` line naming the last id given.
//!
//! A compaction holds the journal's lock and the index's, rewrites the journal (a
//! temporary file, synced, renamed over it, the directory synced) and its index: a crash
//! leaves the old journal or the new one, never a mix; a reader that had the old one open
//! reads it to the end. It runs when an append under the lock finds the journal over its
//! share (the bound is the last policy's, written by `quota::Budget::for_workspace` to
//! `<state>/journal/bound`), and with the backup retention ([`super::prune_backups`]).

use super::index::{self, Rec, View, kind};
use super::{Change, JournalError, Line, Lock, PathState, Phase, io};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

fn bound_path(state_dir: &Path) -> PathBuf {
    state_dir.join("journal").join("bound")
}

/// Notes `[undo] max_state_bytes` for the journal's compaction (the policy of the last call
/// that stored backups); written only when it changes.
pub fn set_bound(state_dir: &Path, total: u64) {
    if bound(state_dir) == Some(total) {
        return;
    }
    if super::private_dir(&state_dir.join("journal")).is_ok() {
        let _ = super::write_whole(
            &state_dir.join("journal"),
            "bound",
            format!("{total}\n").as_bytes(),
            false,
        );
    }
}

/// The bound noted by [`set_bound`].
pub fn bound(state_dir: &Path) -> Option<u64> {
    std::fs::read_to_string(bound_path(state_dir))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The journal's share of a `max_state_bytes` of `total`: a quarter, at least 64 KiB.
pub fn cap(total: u64) -> u64 {
    (total / 4).max(64 << 10)
}

/// The bytes the journal occupies (its lines and its index, allocated).
pub fn bytes(state_dir: &Path) -> u64 {
    [index::journal_path(state_dir), index::index_path(state_dir)]
        .iter()
        .filter_map(|p| std::fs::symlink_metadata(p).ok())
        .map(|m| m.blocks() * 512)
        .sum()
}

/// After an append under the lock: compacts when the journal is past its share by half of it
/// more than it was after the last compaction (what could not go then).
pub(crate) fn maybe(state_dir: &Path, lock: &Lock) {
    let Some(total) = bound(state_dir) else {
        return;
    };
    let cap = cap(total);
    let now = bytes(state_dir);
    if now <= cap || now <= index::floor(state_dir).saturating_add(cap / 2) {
        return;
    }
    let _ = compact(state_dir, lock, Some(cap / 2), false);
}

/// What a compaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Compacted {
    /// Changes removed.
    pub removed: usize,
    /// Changes newly marked as tombstones.
    pub expired: usize,
    /// The journal's bytes after.
    pub bytes: u64,
}

/// A change's group, for pruning: its group, or itself alone.
fn group_key(e: &index::Entry) -> (bool, u64) {
    if e.group != 0 {
        (true, e.group)
    } else {
        (false, e.id)
    }
}

/// What a kept line costs in the journal (the line, its phase line, their index records).
fn cost(e: &index::Entry) -> u64 {
    u64::from(e.len) + 32 + 2 * index::REC as u64
}

/// Which changes are kept: not those marked as tombstones before, and when over `target`
/// bytes, not the oldest groups; but every pending change, the newest group of each
/// workspace, a change whose trash item is still in the trash (`trash restore` finds it by
/// its change), and an undo while the change it reverts is kept.
fn choose(entries: &[index::Entry], target: Option<u64>, in_trash: &HashSet<u64>) -> Vec<bool> {
    let mut newest: HashMap<u64, (bool, u64)> = HashMap::new();
    for e in entries {
        newest.insert(e.ws, group_key(e));
    }
    let protected = |e: &index::Entry| {
        e.phase == Phase::Pending
            || newest.get(&e.ws) == Some(&group_key(e))
            || in_trash.contains(&e.id)
    };
    let mut keep: Vec<bool> = entries
        .iter()
        .map(|e| e.expired.is_none() || protected(e))
        .collect();
    if let Some(t) = target {
        let mut total: u64 = entries
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(e, _)| cost(e))
            .sum();
        let mut dropped = HashSet::new();
        for (e, k) in entries.iter().zip(keep.iter_mut()) {
            if !*k || protected(e) {
                continue;
            }
            let g = group_key(e);
            if total > t || dropped.contains(&g) {
                *k = false;
                total = total.saturating_sub(cost(e));
                dropped.insert(g);
            }
        }
    }
    // Ids grow: what an undo reverts comes before it, and is settled first.
    let mut kept: HashSet<u64> = HashSet::new();
    for (e, k) in entries.iter().zip(keep.iter_mut()) {
        if !*k && e.undoes.is_some_and(|u| kept.contains(&u)) {
            *k = true;
        }
        if *k {
            kept.insert(e.id);
        }
    }
    keep
}

/// Why undo cannot revert `c` now, if its content before is gone from the store (and it
/// was not known as not undoable already).
fn expired(state_dir: &Path, c: &Change) -> Option<String> {
    if c.not_undoable.is_some() {
        return None;
    }
    match &c.before {
        PathState::File { sha256, .. } if !super::has_backup(state_dir, sha256) => Some(
            "its content before the change expired from the backup store (backup retention: [undo] keep_versions, backups_max_total, max_state_bytes)".into(),
        ),
        _ => None,
    }
}

/// The new journal being written, and its index records.
struct Out {
    data: Vec<u8>,
    recs: Vec<Rec>,
}

impl Out {
    fn push(&mut self, line: &[u8], rec: Rec) {
        let off = self.data.len() as u64;
        self.data.extend_from_slice(line);
        self.data.push(b'\n');
        self.recs.push(Rec {
            off,
            len: u32::try_from(line.len()).unwrap_or(u32::MAX),
            ..rec
        });
    }

    fn push_line(&mut self, line: &Line, k: u8, id: u64) -> Result<(), JournalError> {
        let b = serde_json::to_vec(line).map_err(|e| JournalError::Io {
            what: "encoding a compacted journal line for",
            path: PathBuf::from("journal.jsonl"),
            source: std::io::Error::other(e),
        })?;
        self.push(
            &b,
            Rec {
                kind: k,
                id,
                ..Rec::default()
            },
        );
        Ok(())
    }
}

/// Compacts the journal (see the module docs): tombstones from an earlier compaction go, the
/// oldest groups go while it is over `target` bytes, and, when `mark` (with the backup
/// retention: each change's line is read), changes whose content before expired become
/// tombstones. Call with the journal's lock held.
pub fn compact(
    state_dir: &Path,
    _lock: &Lock,
    target: Option<u64>,
    mark: bool,
) -> Result<Compacted, JournalError> {
    let Some(ilock) = index::lock_index(state_dir, true)? else {
        return Ok(Compacted::default());
    };
    let v = View::open(state_dir)?;
    let entries = v.entries();
    if entries.is_empty() && v.size == 0 {
        return Ok(Compacted::default());
    }
    // The changes that name a trash item still there (few: removals of directories).
    let (files, _) = super::trash_dirs(state_dir);
    let mut in_trash = HashSet::new();
    for e in entries.iter().filter(|e| e.trash) {
        if let Some(name) = v.load(e)?.trash
            && !name.contains('/')
            && std::fs::symlink_metadata(files.join(&name)).is_ok()
        {
            in_trash.insert(e.id);
        }
    }
    let keep = choose(entries, target, &in_trash);
    // Newly expired changes (when asked: each one's line is read).
    let mut marks: HashMap<u64, String> = HashMap::new();
    if mark {
        for (e, _) in entries.iter().zip(&keep).filter(|(_, k)| **k) {
            if e.expired.is_none()
                && e.phase == Phase::Committed
                && let Some(why) = expired(state_dir, &v.load(e)?)
            {
                marks.insert(e.id, why);
            }
        }
    }
    let mut done = Compacted {
        removed: keep.iter().filter(|k| !**k).count(),
        expired: marks.len(),
        bytes: 0,
    };
    if done.removed == 0 {
        // Nothing goes: the journal is not rewritten (the next compaction waits for it to
        // grow); new tombstones are appended.
        index::set_floor(state_dir, &ilock, bytes(state_dir));
        drop(ilock);
        let mut lines: Vec<(u64, String)> = marks.into_iter().collect();
        lines.sort();
        let lines: Vec<Line> = lines
            .into_iter()
            .map(|(id, why)| Line::Expire { id, why })
            .collect();
        super::append_lines(state_dir, &lines)?;
        done.bytes = bytes(state_dir);
        return Ok(done);
    }
    let mut out = Out {
        data: Vec::with_capacity(usize::try_from(v.size).unwrap_or(0)),
        recs: Vec::new(),
    };
    let last = v.last_id();
    out.push_line(&Line::Base { last }, kind::BASE, last)?;
    for (e, k) in entries.iter().zip(&keep) {
        if !*k {
            continue;
        }
        let line = v.line(e.off, e.len)?;
        out.push(
            &line,
            Rec {
                kind: kind::INTENT,
                id: e.id,
                time: e.time,
                uid: e.uid,
                ws: e.ws,
                group: e.group,
                undoes: e.undoes.unwrap_or(0),
                trash: e.trash,
                ..Rec::default()
            },
        );
        match e.phase {
            Phase::Committed => out.push_line(&Line::Commit { id: e.id }, kind::COMMIT, e.id)?,
            Phase::Aborted => out.push_line(&Line::Abort { id: e.id }, kind::ABORT, e.id)?,
            Phase::Pending => {}
        }
        if e.skipped {
            out.push_line(&Line::Skip { id: e.id }, kind::SKIP, e.id)?;
        }
        if let Some((off, len)) = e.expired {
            let l = v.line(off, len)?;
            out.push(
                &l,
                Rec {
                    kind: kind::EXPIRE,
                    id: e.id,
                    ..Rec::default()
                },
            );
        } else if let Some(why) = marks.remove(&e.id) {
            out.push_line(&Line::Expire { id: e.id, why }, kind::EXPIRE, e.id)?;
        }
    }
    done.bytes = replace(state_dir, &out)?;
    Ok(done)
}

/// Puts the new journal and its index in place of the old (see the module docs).
fn replace(state_dir: &Path, out: &Out) -> Result<u64, JournalError> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = state_dir.join("journal");
    let tmp = dir.join("journal.jsonl.compact");
    let jp = index::journal_path(state_dir);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io("creating", &tmp))?;
        f.write_all(&out.data).map_err(io("writing", &tmp))?;
        f.sync_all().map_err(io("syncing", &tmp))?;
        f.metadata().map_err(io("reading", &tmp))
    })();
    let m = match written {
        Ok(m) => m,
        Err(e) => {
            // The journal is as it was; the half-written copy goes (a full disk).
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let round = |n: u64| n.div_ceil(4096) * 4096;
    let floor = round(out.data.len() as u64) + round(((out.recs.len() + 1) * index::REC) as u64);
    std::fs::rename(&tmp, &jp).map_err(io("renaming over", &jp))?;
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io("syncing", &dir))?;
    // The index follows (a cache: a reader that finds the old one rebuilds it).
    let _ = index::rewrite(state_dir, &m, floor, &out.recs);
    Ok(floor)
}

#[cfg(test)]
mod tests {
    use super::super::{Change, PathState, begin_many, commit_many, lock, read, record_done};
    use super::*;

    fn state(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gateway-compact-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn change(ws: &str, group: &str, name: &str, before: PathState) -> Change {
        Change {
            tool: "exec".into(),
            path: PathBuf::from(ws).join(name),
            workspace: Some(PathBuf::from(ws)),
            group: Some(group.into()),
            before,
            after: PathState::Absent,
            ..Change::default()
        }
    }

    fn ids(d: &Path) -> Vec<u64> {
        read(d)
            .expect("read")
            .changes
            .iter()
            .map(|(c, _)| c.id)
            .collect()
    }

    #[test]
    fn tombstones_then_gone_oldest_groups_within_the_share_ids_keep_growing() {
        let d = state("prune");
        let l = lock(&d).expect("lock");
        let kept = super::super::backup(&d, b"kept").expect("backup");
        let file = |sha: &str| PathState::File {
            sha256: sha.into(),
            mode: 0o644,
            size: 4,
        };
        // Group a in /w: one change whose content before is in the store, one whose content
        // expired after it was journalled.
        let gone = super::super::backup(&d, b"gone").expect("backup");
        record_done(
            &d,
            &l,
            vec![
                change("/w", "a", "x", file(&kept)),
                change("/w", "a", "y", file(&gone)),
            ],
        )
        .expect("a");
        std::fs::remove_file(d.join("backups").join(&gone)).expect("expire");
        // Group b in /w (its newest), a pending change in /v.
        record_done(&d, &l, vec![change("/w", "b", "z", PathState::Absent)]).expect("b");
        let p = begin_many(&d, &l, vec![change("/v", "c", "p", PathState::Absent)]).expect("c");
        assert_eq!(p[0].id, 4);
        // First compaction: y becomes a tombstone (shown as not undoable), nothing goes.
        let c = compact(&d, &l, None, true).expect("compact");
        assert_eq!((c.removed, c.expired), (0, 1));
        let j = read(&d).expect("read");
        let y = &j.changes[1].0;
        assert!(
            y.not_undoable
                .as_deref()
                .is_some_and(|w| w.contains("expired"))
        );
        assert_eq!(j.changes[3].1, Phase::Pending, "still pending");
        // Second: the tombstone goes; the rest stays.
        let c = compact(&d, &l, None, true).expect("compact");
        assert_eq!((c.removed, c.expired), (1, 0));
        assert_eq!(ids(&d), vec![1, 3, 4]);
        // Over a tiny target: group a goes whole; b (newest of /w) and the pending one stay.
        let c = compact(&d, &l, Some(1), true).expect("compact");
        assert_eq!(c.removed, 1);
        assert_eq!(ids(&d), vec![3, 4]);
        // Ids go on from the last given, and a commit of the pending change still lands.
        commit_many(&d, &[4]).expect("commit");
        let n = record_done(&d, &l, vec![change("/w", "e", "q", PathState::Absent)]).expect("e");
        assert_eq!(n[0].id, 5);
        let c = compact(&d, &l, Some(1), true).expect("compact");
        assert_eq!(c.removed, 1, "b is not the newest of /w any more");
        assert_eq!(ids(&d), vec![4, 5]);
        let c = compact(&d, &l, Some(1), true).expect("compact");
        assert_eq!(c.removed, 0);
        let j = read(&d).expect("read");
        assert_eq!(j.changes[0].1, Phase::Committed);
        let n = record_done(&d, &l, vec![change("/w", "f", "r", PathState::Absent)]).expect("f");
        assert_eq!(n[0].id, 6);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_removal_whose_item_is_still_in_the_trash_stays() {
        let d = state("trash");
        let l = lock(&d).expect("lock");
        let (files, _) = super::super::trash_dirs(&d);
        std::fs::create_dir_all(files.join("kept")).expect("mkdir");
        let rm = |name: &str, item: &str| Change {
            trash: Some(item.into()),
            ..change("/w", name, &format!("rm-{name}"), PathState::Absent)
        };
        record_done(&d, &l, vec![rm("a", "kept")]).expect("a");
        record_done(&d, &l, vec![rm("b", "emptied")]).expect("b");
        record_done(&d, &l, vec![change("/w", "c", "x", PathState::Absent)]).expect("c");
        let c = compact(&d, &l, Some(1), true).expect("compact");
        assert_eq!(c.removed, 1);
        assert_eq!(ids(&d), vec![1, 3], "the removal whose item is there stays");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_undo_stays_while_what_it_reverted_does() {
        let d = state("undo");
        let l = lock(&d).expect("lock");
        record_done(&d, &l, vec![change("/w", "a", "x", PathState::Absent)]).expect("a");
        let mut u = change("/w", "u", "x", PathState::Absent);
        u.undoes = Some(1);
        record_done(&d, &l, vec![u]).expect("u");
        record_done(&d, &l, vec![change("/w", "b", "y", PathState::Absent)]).expect("b");
        // Mark the undo as a tombstone by hand: it would go, but change 1 stays (too young
        // for the size bound), so it stays too.
        super::super::append_lines(
            &d,
            &[Line::Expire {
                id: 2,
                why: "test".into(),
            }],
        )
        .expect("expire");
        compact(&d, &l, None, true).expect("compact");
        assert_eq!(ids(&d), vec![1, 2, 3]);
        let _ = std::fs::remove_dir_all(&d);
    }
}
