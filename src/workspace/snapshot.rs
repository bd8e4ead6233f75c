//! Snapshots for shell commands: what a command changed in the workspace goes into the
//! journal, so `gateway undo` can revert it.
//!
//! Before the run, every file of the workspace that .gitignore does not exclude (hidden files
//! included, `.git` excluded, up to `undo.snapshot_max_file`) is in an index (size, mtime,
//! sha256) and its content in the backup store: files unchanged since the last run (same
//! size and mtime) cost a `stat`, others are hashed and backed up (content-addressed, so
//! each version once). Directories (with their modes) and symbolic links (with their
//! targets) are in the index too. After the run the tree is compared with the index; each
//! created, changed or deleted file, directory or link becomes a journal change, all in one
//! group (`broker::tools::fs::revert` reverts it in an order that works).

use super::wsfs;
use crate::broker::BrokerError;
use crate::journal::pathbytes::{self, BytesPath};
use crate::journal::{self, Change, PathState};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// One file in the index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    size: u64,
    mtime_ns: i128,
    /// Status change time and inode (older indexes have none: never reused by them alone).
    #[serde(default)]
    ctime_ns: i128,
    #[serde(default)]
    ino: u64,
    mode: u32,
    sha256: String,
    /// Its content is not in the backup store, and why (the store's quota, the disk nearly
    /// full). Tried again at the next snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unsaved: Option<String>,
}

/// The workspace's files before a run. Keyed by the raw path bytes (`OsString` hashes
/// bytes; `PathBuf` keys compare component by component, which dominated the profile).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(from = "SavedIndex", into = "SavedIndex")]
pub struct Index {
    files: HashMap<OsString, Entry>,
    /// Directories (the workspace itself excluded) and their permission bits.
    dirs: HashMap<OsString, u32>,
    /// Symbolic links and their targets.
    links: HashMap<OsString, String>,
    #[serde(skip)]
    skipped: Vec<PathBuf>,
    /// Directories that could not be opened (their contents unknown: neither kept nor deleted).
    #[serde(skip)]
    unread_dirs: Vec<PathBuf>,
    /// Backups expired while it was made.
    #[serde(skip)]
    expired: usize,
    /// Differs from the index saved on disk.
    #[serde(skip)]
    dirty: bool,
}

/// The index as saved: a list (JSON map keys must be strings), each path a string when it is
/// UTF-8 and its bytes otherwise (`journal::pathbytes`: a name need not be UTF-8).
#[derive(Serialize, Deserialize, Clone)]
struct SavedIndex {
    files: Vec<(BytesPath, Entry)>,
    #[serde(default)]
    dirs: Vec<(BytesPath, u32)>,
    #[serde(default)]
    links: Vec<(BytesPath, String)>,
}

impl From<SavedIndex> for Index {
    fn from(s: SavedIndex) -> Index {
        Index {
            files: s
                .files
                .into_iter()
                .map(|(p, e)| (p.0.into_os_string(), e))
                .collect(),
            dirs: s
                .dirs
                .into_iter()
                .map(|(p, m)| (p.0.into_os_string(), m))
                .collect(),
            links: s
                .links
                .into_iter()
                .map(|(p, t)| (p.0.into_os_string(), t))
                .collect(),
            ..Index::default()
        }
    }
}

impl From<Index> for SavedIndex {
    fn from(i: Index) -> SavedIndex {
        SavedIndex {
            files: i
                .files
                .into_iter()
                .map(|(p, e)| (BytesPath(PathBuf::from(p)), e))
                .collect(),
            dirs: i
                .dirs
                .into_iter()
                .map(|(p, m)| (BytesPath(PathBuf::from(p)), m))
                .collect(),
            links: i
                .links
                .into_iter()
                .map(|(p, t)| (BytesPath(PathBuf::from(p)), t))
                .collect(),
        }
    }
}

impl Clone for Index {
    fn clone(&self) -> Index {
        Index {
            files: self.files.clone(),
            dirs: self.dirs.clone(),
            links: self.links.clone(),
            skipped: self.skipped.clone(),
            unread_dirs: self.unread_dirs.clone(),
            expired: self.expired,
            dirty: self.dirty,
        }
    }
}

impl Index {
    /// The same entries (what the saved index would hold).
    fn same_entries(&self, other: &Index) -> bool {
        self.files == other.files && self.dirs == other.dirs && self.links == other.links
    }
}

/// What a snapshot found after a run. Paths that are not UTF-8 are shown as their bytes
/// (`{"bytes_b64": ...}`, `journal::pathbytes`).
#[derive(Debug, Default, Clone, Serialize, schemars::JsonSchema)]
pub struct SnapshotReport {
    /// The journal group (`gateway undo ID` with any of its changes reverts them all).
    pub group: String,
    /// (path, `created` | `changed` | `deleted`, journal id).
    #[serde(serialize_with = "changes_shown")]
    #[schemars(with = "Vec<(pathbytes::PathBytes, String, u64)>")]
    pub changes: Vec<(PathBuf, &'static str, u64)>,
    /// Files too large to snapshot, or unreadable.
    #[serde(serialize_with = "pathbytes::list::serialize")]
    #[schemars(with = "Vec<pathbytes::PathBytes>")]
    pub skipped: Vec<PathBuf>,
    /// Directories that could not be read after the run (made unreadable, swapped for a
    /// link): what changed inside them is not recorded, and `gateway undo` cannot revert it.
    #[serde(serialize_with = "pathbytes::list::serialize")]
    #[schemars(with = "Vec<pathbytes::PathBytes>")]
    pub unread_dirs: Vec<PathBuf>,
    /// Files in the workspace index.
    pub files: usize,
    /// Files whose content (now or before the run) is not in the backup store, and why:
    /// `gateway undo` cannot bring that content back (`[undo] max_state_bytes`, free space).
    /// A change whose content before is among them is journalled as not undoable; undo of
    /// the run reverts the rest.
    #[serde(serialize_with = "pathbytes::pairs::serialize")]
    #[schemars(with = "Vec<(pathbytes::PathBytes, String)>")]
    pub not_backed_up: Vec<(PathBuf, String)>,
    /// Old backups expired during this run to stay within `[undo] max_state_bytes` or to keep
    /// the state directory's file system from filling up.
    pub expired: usize,
    /// How the changes were captured: `overlay` (what the run wrote, applied after it) or
    /// `walk` (the workspace compared before and after).
    pub mechanism: String,
    /// Why the overlay did not capture this run (the walk did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The change set held instead of applied (`gateway apply ID`, `gateway discard ID`):
    /// the run was reviewed, or some of its changes could not be applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// What the held change set would change: (path, `created` | `changed` | `deleted`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<(PathBuf, &'static str)>,
    /// Paths the run changed that could not be applied (they stay in the held change set),
    /// and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_applied: Vec<(PathBuf, String)>,
    /// Paths another call changed while the run ran, which applying its changes overwrote:
    /// (path, that change's journal id).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overwrote: Vec<(PathBuf, u64)>,
}

/// [`SnapshotReport::changes`] with each path as `journal::pathbytes` writes it.
fn changes_shown<S: serde::Serializer>(
    v: &[(PathBuf, &'static str, u64)],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for (p, k, id) in v {
        seq.serialize_element(&(BytesPath(p.clone()), k, id))?;
    }
    seq.end()
}

fn index_path(state_dir: &Path, ws: &Path) -> PathBuf {
    // Named by the workspace's key: the usage record's attribution reads it back.
    state_dir
        .join("snapshots")
        .join(format!("{}.json", journal::quota::workspace_key(ws)))
}

fn j_err(e: journal::JournalError) -> BrokerError {
    BrokerError::Io {
        what: "snapshot".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Indexes the tree, reusing `old` entries whose size and mtime did not change (but trying
/// again to back up those whose content was not stored, when `retry`); with `known`, every
/// path of `old` that still exists is indexed even where an ignore rule now excludes it (after
/// a run: an ignore file the run wrote must not make a tracked file read as deleted, nor hide
/// its change); contents go to the
/// store through `budget`. Everything is read through [`wsfs`] (beneath the workspace's
/// descriptor, nothing followed, regular files only, bounded), with the caller's filesystem
/// identity when the broker serves another user (`who`).
fn index(
    budget: &mut journal::quota::Budget,
    ws: &Path,
    old: &Index,
    max: u64,
    (retry, known): (bool, bool),
    who: Option<&wsfs::Identity>,
) -> Result<Index, BrokerError> {
    let mut idx = Index::default();
    // Opened and walked with the caller's rights: a daemon never lists for a client what the
    // client could not.
    let opened = wsfs::as_identity(who, || {
        wsfs::Tree::open(ws).map(|t| {
            let w = t.walk_ignoring();
            (t, w)
        })
    })
    .and_then(|r| r);
    let (tree, walked) = opened.map_err(|e| BrokerError::Io {
        what: format!("opening the workspace {}", ws.display()),
        source: e,
    })?;
    idx.unread_dirs.clone_from(&walked.skipped);
    let mut entries = walked.entries;
    if known {
        let seen: std::collections::HashSet<OsString> = entries
            .iter()
            .map(|(r, _)| r.as_os_str().to_os_string())
            .collect();
        let unread = &walked.skipped;
        let mut more: Vec<(PathBuf, wsfs::Kind)> = old
            .files
            .keys()
            .chain(old.dirs.keys())
            .chain(old.links.keys())
            .filter(|k| !seen.contains(*k))
            .map(PathBuf::from)
            .filter(|r| !unread.iter().any(|u| r.starts_with(u)))
            .filter_map(|r| {
                let k = wsfs::as_identity(who, || tree.kind(&r)).ok()?.ok()??;
                Some((r, k))
            })
            .collect();
        more.sort_by(|a, b| a.0.cmp(&b.0));
        entries.extend(more);
    }
    idx.skipped.extend(walked.skipped);
    for (rel, kind) in entries {
        let key = rel.as_os_str().to_os_string();
        let (size, mtime_ns, mode, ctime_ns, ino) = match kind {
            wsfs::Kind::Dir { mode } => {
                idx.dirs.insert(key, mode);
                continue;
            }
            wsfs::Kind::Link(target) => {
                match target.into_os_string().into_string() {
                    Ok(t) => {
                        idx.links.insert(key, t);
                    }
                    // Not UTF-8: it could not be recreated exactly.
                    Err(_) => idx.skipped.push(rel),
                }
                continue;
            }
            wsfs::Kind::Special => continue,
            wsfs::Kind::File {
                size,
                mtime_ns,
                mode,
                ctime_ns,
                ino,
            } => (size, mtime_ns, mode, ctime_ns, ino),
        };
        // Reused only when nothing about the file could have changed: a run can put size and
        // mtime back, never the ctime, and a file replaced by a rename has another inode.
        if let Some(e) = old.files.get(&key)
            && (e.size, e.mtime_ns, e.ctime_ns, e.ino) == (size, mtime_ns, ctime_ns, ino)
            && !(retry && e.unsaved.is_some())
        {
            idx.files.insert(key, e.clone());
            continue;
        }
        if size > max {
            idx.skipped.push(rel);
            continue;
        }
        let Some(data) = tree.read_as(who, &rel, max) else {
            idx.skipped.push(rel);
            continue;
        };
        // A content that cannot be stored (the quota, an I/O error) is recorded as such:
        // the change it is part of is journalled as not undoable, never the whole run lost.
        let (sha256, unsaved) = match budget.store(&data, false) {
            Ok(journal::quota::Stored::Kept(id)) => (id, None),
            Ok(journal::quota::Stored::NotBackedUp { id, reason }) => (id, Some(reason)),
            Err(e) => (
                journal::sha256_hex(&data),
                Some(format!("storing it failed: {e}")),
            ),
        };
        idx.files.insert(
            key,
            Entry {
                size,
                mtime_ns,
                ctime_ns,
                ino,
                mode,
                sha256,
                unsaved,
            },
        );
    }
    Ok(idx)
}

/// Before a run: the index of the workspace (its files backed up, durably, within the
/// backup store's `quota`: `[undo] max_state_bytes` and `max_workspace_bytes`), read with
/// `who`'s rights.
pub fn before(
    state_dir: &Path,
    ws: &Path,
    max: u64,
    quota: journal::quota::Limits,
    who: Option<&wsfs::Identity>,
) -> Result<Index, BrokerError> {
    // not-ws: the snapshot index, in the broker's own state directory
    let old: Index = std::fs::read(index_path(state_dir, ws))
        .ok()
        .and_then(|d| serde_json::from_slice(&d).ok())
        .unwrap_or_default();
    let mut budget = journal::quota::Budget::for_workspace(state_dir, ws, quota);
    // What the saved index describes is what this run starts from where nothing changed
    // since: the contents its undo needs, not expired to make room now.
    budget.protect(old.files.values().map(|e| e.sha256.clone()));
    let mut idx = index(&mut budget, ws, &old, max, (true, false), who)?;
    idx.expired = budget.expired.len();
    drop(budget);
    if !idx.same_entries(&old) {
        journal::sync_store(state_dir).map_err(j_err)?;
        idx.dirty = true;
    }
    Ok(idx)
}

/// A group id: unique per process and call (a daemon runs many commands a second, and one
/// group must never take in another command's changes).
pub(crate) fn unique_id(salt: &str) -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!("{salt}\0{t}\0{}\0{n}", std::process::id());
    journal::sha256_hex(seed.as_bytes())[..12].to_string()
}

/// After a run: journals what changed (one group) and saves the new index.
pub fn after(
    state_dir: &Path,
    ws: &Path,
    pre: &Index,
    max: u64,
    quota: journal::quota::Limits,
    who: Option<&wsfs::Identity>,
) -> Result<SnapshotReport, BrokerError> {
    // The contents the run started from are what its undo needs: not expired now.
    let mut budget = journal::quota::Budget::for_workspace(state_dir, ws, quota);
    budget.protect(pre.files.values().map(|e| e.sha256.clone()));
    let post = index(&mut budget, ws, pre, max, (false, true), who)?;
    let group = format!("exec-{}", unique_id(&ws.display().to_string()));
    let diffs = diff(pre, &post);
    let mut not_backed_up: Vec<(PathBuf, String)> = Vec::new();
    for (idx, when) in [(pre, "before the run"), (&post, "after the run")] {
        for (k, e) in &idx.files {
            let p = ws.join(k);
            if let Some(why) = &e.unsaved
                && !not_backed_up.iter().any(|(q, _)| *q == p)
            {
                not_backed_up.push((p, format!("its content {when}: {why}")));
            }
        }
    }
    not_backed_up.sort();
    let mut report = SnapshotReport {
        group: group.clone(),
        skipped: post.skipped.clone(),
        unread_dirs: post.unread_dirs.clone(),
        files: post.files.len(),
        not_backed_up,
        expired: pre.expired + budget.expired.len(),
        mechanism: super::capture::WALK.into(),
        ..SnapshotReport::default()
    };
    if !diffs.is_empty() {
        journal::sync_store(state_dir).map_err(j_err)?;
        let lock = journal::lock(state_dir).map_err(j_err)?;
        let kinds: Vec<&'static str> = diffs.iter().map(|d| d.kind).collect();
        let missing: Vec<Option<String>> = diffs
            .iter()
            .map(|d| missing(state_dir, d, pre, &post))
            .collect();
        // A change whose content before is missing cannot be undone: journalled as such (the
        // rest of the group is reverted by undo), with why.
        let not_undoable = |why: &Option<String>| {
            why.as_deref()
                .filter(|w| w.contains("content before"))
                .map(str::to_string)
        };
        // The command already made the changes: recorded as done, in one append.
        let done = journal::record_done(
            state_dir,
            &lock,
            diffs
                .into_iter()
                .zip(missing)
                .map(|(d, not_backed_up)| Change {
                    tool: "exec".into(),
                    not_undoable: not_undoable(&not_backed_up),
                    not_backed_up,
                    path: ws.join(&d.rel),
                    before: d.before,
                    after: d.after,
                    dir_mode: d.dir_mode,
                    group: Some(group.clone()),
                    workspace: Some(ws.to_path_buf()),
                    uid: who.map(|w| w.uid),
                    ..Change::default()
                })
                .collect(),
        )
        .map_err(j_err)?;
        for (c, kind) in done.into_iter().zip(kinds) {
            report.changes.push((c.path, kind, c.id));
        }
    }
    if report.changes.is_empty() && post.same_entries(pre) && !pre.dirty {
        // Nothing moved since the index on disk: keep it.
        return Ok(report);
    }
    let p = index_path(state_dir, ws);
    if let Some(d) = p.parent() {
        // not-ws: the snapshot index, in the broker's own state directory
        std::fs::create_dir_all(d).map_err(|e| BrokerError::Io {
            what: format!("creating {}", d.display()),
            source: e,
        })?;
    }
    let data = serde_json::to_vec(&post).map_err(|e| BrokerError::Io {
        what: "encoding the snapshot index".into(),
        source: std::io::Error::other(e),
    })?;
    // not-ws: the snapshot index, in the broker's own state directory
    crate::durable::write_atomic(&p, &data).map_err(|e| BrokerError::Io {
        what: format!("saving {}", p.display()),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(report)
}

/// Keeps `idx` (the index `before` returned) at `to`, for the recovery of a run whose broker
/// dies: a hard link to the saved index when that is what `idx` holds (no copy), else the
/// index written there (durably).
pub(crate) fn keep_index(
    state_dir: &Path,
    ws: &Path,
    idx: &Index,
    to: &Path,
) -> Result<(), BrokerError> {
    let saved = index_path(state_dir, ws);
    // not-ws: the snapshot index, in the broker's own state directory
    let _ = std::fs::remove_file(to);
    // not-ws: the snapshot index, in the broker's own state directory
    if !idx.dirty && std::fs::hard_link(&saved, to).is_ok() {
        return Ok(());
    }
    let data = serde_json::to_vec(idx).map_err(|e| BrokerError::Io {
        what: "encoding the snapshot index".into(),
        source: std::io::Error::other(e),
    })?;
    // not-ws: the snapshot index, in the broker's own state directory
    crate::durable::write_atomic(to, &data).map_err(|e| BrokerError::Io {
        what: format!("saving {}", to.display()),
        source: std::io::Error::other(e.to_string()),
    })
}

/// An index kept by [`keep_index`].
pub(crate) fn load_index(p: &Path) -> Option<Index> {
    // not-ws: the snapshot index, in the broker's own state directory
    serde_json::from_slice(&std::fs::read(p).ok()?).ok()
}

/// Which content of a change the store lacks, and why (recorded in the journal: `history`
/// shows it; one before the change makes it not undoable).
fn missing(state_dir: &Path, d: &Diff, pre: &Index, post: &Index) -> Option<String> {
    let mut why = Vec::new();
    for (state, idx, which) in [(&d.before, pre, "before"), (&d.after, post, "after")] {
        let PathState::File { sha256, .. } = state else {
            continue;
        };
        if journal::has_backup(state_dir, sha256) {
            continue;
        }
        let reason = idx
            .files
            .get(d.rel.as_os_str())
            .and_then(|e| e.unsaved.clone())
            .unwrap_or_else(|| {
                "its backup expired (backup retention: [undo] keep_versions, backups_max_total, max_state_bytes)".into()
            });
        why.push(format!(
            "the content {which} the change was not backed up: {reason}"
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// One path that differs after a run.
struct Diff {
    rel: PathBuf,
    before: PathState,
    after: PathState,
    /// The mode of `before` when it is a directory.
    dir_mode: Option<u32>,
    kind: &'static str,
}

/// What differs between two indexes, sorted by path (parents before their contents).
fn diff(pre: &Index, post: &Index) -> Vec<Diff> {
    use std::collections::HashSet;
    // (state, the mode that matters for a directory, or a file's content and mode)
    let state = |i: &Index, k: &OsString| -> Option<(PathState, Option<u32>)> {
        if let Some(e) = i.files.get(k) {
            let s = PathState::File {
                sha256: e.sha256.clone(),
                mode: e.mode,
                size: e.size,
            };
            return Some((s, None));
        }
        if let Some(m) = i.dirs.get(k) {
            return Some((PathState::Dir, Some(*m)));
        }
        i.links
            .get(k)
            .map(|t| (PathState::Link { target: t.clone() }, None))
    };
    let keys: HashSet<&OsString> = [pre, post]
        .iter()
        .flat_map(|i| i.files.keys().chain(i.dirs.keys()).chain(i.links.keys()))
        .collect();
    let mut out = Vec::new();
    for k in keys {
        let rel = PathBuf::from(k);
        let (b, a) = (state(pre, k), state(post, k));
        let kind = match (&b, &a) {
            (None, None) => continue,
            (None, Some(_)) => "created",
            // Too large or unreadable now: not known to be deleted.
            (Some(_), None) if post.skipped.iter().any(|s| rel.starts_with(s)) => continue,
            (Some(_), None) => "deleted",
            (Some(x), Some(y)) if x == y => continue,
            (Some(_), Some(_)) => "changed",
        };
        let (before, dir_mode) = b.unwrap_or((PathState::Absent, None));
        let after = a.map_or(PathState::Absent, |(s, _)| s);
        out.push(Diff {
            rel,
            before,
            after,
            dir_mode,
            kind,
        });
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}
