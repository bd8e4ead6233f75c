//! Backups and the write-ahead change journal in the state directory.
//!
//! Layout: `<state>/backups/<sha256>` (contents before and after each change, 0600, written
//! once, deduplicated) and `<state>/journal/journal.jsonl`: for each change an `intent` line
//! (what, where, before and after), synced before the change is made, then a `commit` or an
//! `abort` line. After a crash, [`recover`] completes or rolls back what was pending.
//! Blobs are compressed ([`blob`]); the store is bounded ([`quota`]).
//!
//! Each change is journalled on its own line: one that cannot be undone (its content before
//! not in the store, or a line that could not be encoded) is recorded with `not_undoable`
//! and why, never dropped with its group. Paths are bytes ([`pathbytes`]). The journal is
//! indexed ([`index`]: `history` and `undo` parse only the lines they show) and pruned with
//! the backup store, within its share of `[undo] max_state_bytes` ([`compact`]).

pub mod blob;
mod capture;
pub mod compact;
pub mod index;
pub mod pathbytes;
pub mod quota;
mod trash;

pub use capture::{CaptureLock, capture_lock};
pub use index::{Entry, View};
pub use trash::{
    TrashItem, trash_dirs, trash_emptied, trash_forget, trash_list, trash_mark_emptied,
    trash_reserve,
};

use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Errors of the journal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// An I/O step failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// The step.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A content was not backed up (the store's quota, or the disk nearly full).
    #[error("{path}: not backed up: {reason}")]
    NotBackedUp {
        /// The backup store.
        path: PathBuf,
        /// Why, and what to do.
        reason: String,
    },
    /// The call was cancelled (its client went away) while it waited for a lock.
    #[error("cancelled while waiting for {path} (another call holds it)")]
    Cancelled {
        /// The lock.
        path: PathBuf,
    },
    /// The journal's index (`journal/journal.idx`) did not match the journal: it was removed,
    /// and is rebuilt from the journal at the next read.
    #[error(
        "the journal's index did not match the journal at change {id}; it is rebuilt from the journal: try again"
    )]
    Index {
        /// The change where it did not match.
        id: u64,
    },
    /// A backup could not be read back.
    #[error("reading backup {path}: {source}")]
    Blob {
        /// The blob.
        path: PathBuf,
        /// What is wrong with it.
        source: blob::BlobError,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> JournalError + 'a {
    move |source| JournalError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// SHA-256 of `data`, hex.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    crate::durable::hex(&Sha256::digest(data))
}

fn private_dir(p: &Path) -> Result<(), JournalError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(io("creating", p))
}

/// Stores `data` in the backup store (if not there yet) and returns its id (sha256 hex).
/// The blob is durable when this returns.
pub fn backup(state_dir: &Path, data: &[u8]) -> Result<String, JournalError> {
    store(state_dir, data, true)
}

/// Is a blob with this id (sha256 hex) in the backup store? False for anything that is not
/// an id. (Its content is checked against the id whenever it is read.)
pub fn has_backup(state_dir: &Path, id: &str) -> bool {
    id.len() == 64
        && id.bytes().all(|b| b.is_ascii_hexdigit())
        && state_dir.join("backups").join(id).is_file()
}

/// Like [`backup`] but not synced: for many blobs at once, followed by one [`sync_store`].
pub fn backup_deferred(state_dir: &Path, data: &[u8]) -> Result<String, JournalError> {
    store(state_dir, data, false)
}

/// Makes every blob written by [`backup_deferred`] durable: one `syncfs` of the backup
/// store's file system instead of two syncs per blob.
pub fn sync_store(state_dir: &Path) -> Result<(), JournalError> {
    let dir = state_dir.join("backups");
    let d = match std::fs::File::open(&dir) {
        Ok(d) => d,
        // No blob was ever stored: nothing to make durable.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("opening", &dir)(e)),
    };
    rustix::fs::syncfs(&d).map_err(|e| JournalError::Io {
        what: "syncing the file system of",
        path: dir,
        source: std::io::Error::from_raw_os_error(e.raw_os_error()),
    })
}

/// Stores `data` without a quota, within the file system's free space (a tool call's
/// backup: refused with the reason when it does not fit).
fn store(state_dir: &Path, data: &[u8], sync: bool) -> Result<String, JournalError> {
    match quota::Budget::new(state_dir, None).store(data, sync)? {
        quota::Stored::Kept(id) => Ok(id),
        quota::Stored::NotBackedUp { reason, .. } => Err(JournalError::NotBackedUp {
            path: state_dir.join("backups"),
            reason,
        }),
    }
}

/// Writes `data` as `<dir>/<name>`, whole or not at all (`durable`): a temporary file (0600)
/// renamed into place, synced with its directory when `sync` (the backup store), not when the
/// file is a cache (the usage record).
pub(crate) fn write_whole(
    dir: &Path,
    name: &str,
    data: &[u8],
    sync: bool,
) -> Result<(), JournalError> {
    let path = dir.join(name);
    let written = if sync {
        crate::durable::write_atomic(&path, data)
    } else {
        crate::durable::write_atomic_unsynced(&path, data)
    };
    written.map_err(|e| JournalError::Io {
        what: e.what,
        path: e.path,
        source: e.source,
    })
}

/// The state of a path before or after a change.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PathState {
    /// Nothing there.
    #[default]
    Absent,
    /// A directory (removed ones go to the trash whole).
    Dir,
    /// A symbolic link.
    Link {
        /// Where it points.
        target: String,
    },
    /// A regular file: its content is in the backup store under `sha256`.
    File {
        /// Backup id (sha256 hex of the content).
        sha256: String,
        /// Permission bits.
        mode: u32,
        /// Size in bytes.
        size: u64,
    },
}

/// One change in the write-ahead journal.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Change {
    /// Sequence number (from 1).
    pub id: u64,
    /// Seconds since the Unix epoch.
    pub time: u64,
    /// The tool (`fs.write`, `fs.edit`, `undo`, `scan.redact`, ...).
    pub tool: String,
    /// The file (absolute). A name that is not UTF-8 is `{"bytes_b64": ...}` ([`pathbytes`]).
    #[serde(with = "pathbytes")]
    #[schemars(with = "pathbytes::PathBytes")]
    pub path: PathBuf,
    /// Before the change (its content backed up).
    pub before: PathState,
    /// After the change (its content backed up too, so that undo can show what changed
    /// since and an undo can be undone).
    pub after: PathState,
    /// The change this one reverts, for `undo`.
    pub undoes: Option<u64>,
    /// For a move: where `path` went.
    #[serde(default, with = "pathbytes::option")]
    #[schemars(with = "Option<pathbytes::PathBytes>")]
    pub dest: Option<PathBuf>,
    /// For a removal (or the restore that undoes one): the trash item's name.
    #[serde(default)]
    pub trash: Option<String>,
    /// Changes made together (one command's snapshot) share a group: undo reverts them all.
    #[serde(default)]
    pub group: Option<String>,
    /// The workspace of the call that made it (set by the broker). Journals written before
    /// it was recorded have none: see [`Change::in_workspace`].
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "pathbytes::option"
    )]
    #[schemars(with = "Option<pathbytes::PathBytes>")]
    pub workspace: Option<PathBuf>,
    /// When `before` is a directory: its permission bits, so that undo recreates it as it
    /// was (snapshots record them; `None` in older journals and for `fs` tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir_mode: Option<u32>,
    /// A content of this change that is not in the backup store, and why (the store's quota
    /// or the disk nearly full: `[undo] max_state_bytes`); `None` when both were stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_backed_up: Option<String>,
    /// Undo cannot revert this change, and why: its content before is not in the backup
    /// store (not stored: the quota, an I/O error; or expired since), or its entry could not
    /// be journalled whole. The rest of its group is still reverted; `None`: undoable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_undoable: Option<String>,
    /// The daemon client whose call made it, when that client is not the daemon's own user
    /// or root (`None`: the daemon's user, root, or a one-shot front end). A daemon client
    /// sees its own changes only (`broker::authz`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

impl Change {
    /// Does this change belong to workspace `ws` (canonical)? Yes if it was made in `ws` or
    /// in a directory beneath it. A change from a journal that did not record workspaces
    /// belongs to the workspaces that hold its path (and, for a move, its destination).
    pub fn in_workspace(&self, ws: &Path) -> bool {
        match &self.workspace {
            Some(w) => w.starts_with(ws),
            None => {
                self.path.starts_with(ws) && self.dest.as_ref().is_none_or(|d| d.starts_with(ws))
            }
        }
    }
}

/// A journal line: an intent (before acting), then a commit or an abort.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub(crate) enum Line {
    Intent(Box<Change>),
    Commit {
        id: u64,
    },
    Abort {
        id: u64,
    },
    /// `gateway undo --skip`: plain `undo` passes over this change from now on.
    Skip {
        id: u64,
    },
    /// The first line of a compacted journal ([`compact`]): the last id given before, so that
    /// ids keep growing whatever was pruned. (Older builds skip it as a line they do not read.)
    Base {
        last: u64,
    },
    /// A tombstone: change `id`'s content before expired from the backup store; undo passes
    /// over it, and the next compaction removes it.
    Expire {
        id: u64,
        why: String,
    },
}

/// Parses a journal line. An intent's line (`{"phase":"intent",` then the change's fields, as
/// serde writes an internally tagged variant) is read as the change directly: the generic
/// path buffers the whole line first, which dominated reading a long journal.
pub(crate) fn parse_line(line: &[u8]) -> Result<Line, serde_json::Error> {
    if line.starts_with(br#"{"phase":"intent","#) {
        return serde_json::from_slice::<Change>(line).map(|c| Line::Intent(Box::new(c)));
    }
    serde_json::from_slice::<Line>(line)
}

/// Where a change stands.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Intent written; not (yet) known to be done.
    Pending,
    /// Done.
    Committed,
    /// Not done (rolled back or failed).
    Aborted,
}

fn journal_path(state_dir: &Path) -> PathBuf {
    index::journal_path(state_dir)
}

fn append_line(state_dir: &Path, line: &Line) -> Result<(), JournalError> {
    append_lines(state_dir, std::slice::from_ref(line))
}

/// Appends whole lines and syncs; then the index follows (a cache: the lines are durable
/// whether or not it does).
fn append_raw(
    state_dir: &Path,
    mut data: Vec<u8>,
    recs: &[index::Rec],
) -> Result<(), JournalError> {
    let path = journal_path(state_dir);
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&path)
        .map_err(io("opening", &path))?;
    // After a torn last line (a crash mid-append), start a new line: the torn one is
    // skipped by readers, this one must not be glued to it.
    let len = f.metadata().map_err(io("reading", &path))?.len();
    let mut base = len;
    if len > 0 {
        use std::os::unix::fs::FileExt;
        let mut last = [0u8];
        f.read_exact_at(&mut last, len - 1)
            .map_err(io("reading", &path))?;
        if last[0] != b'\n' {
            data.insert(0, b'\n');
            base += 1;
        }
    }
    f.write_all(&data).map_err(io("appending to", &path))?;
    f.sync_data().map_err(io("syncing", &path))?;
    let _ = index::append_known(state_dir, base, recs);
    Ok(())
}

/// Encodes `line` (with its newline) onto `data`, and its record, placed, onto `recs`.
fn encode_line(
    line: &Line,
    data: &mut Vec<u8>,
    recs: &mut Vec<index::Rec>,
) -> Result<(), serde_json::Error> {
    let off = data.len();
    serde_json::to_writer(&mut *data, line)?;
    recs.push(index::Rec {
        off: off as u64,
        len: u32::try_from(data.len() - off).unwrap_or(u32::MAX),
        ..index::rec_for(line)
    });
    data.push(b'\n');
    Ok(())
}

/// The journal as read: every change with its phase, in order (old-format entries are
/// skipped), and the ids `undo --skip` passed over. A tombstone's change has its
/// `not_undoable` set (its backups expired).
#[derive(Debug, Default)]
pub struct Journal {
    /// Every change with its phase, oldest first.
    pub changes: Vec<(Change, Phase)>,
    /// Changes plain `undo` passes over.
    pub skipped: std::collections::HashSet<u64>,
}

/// Reads the whole journal (every line parsed: for what needs every change; `history` and
/// `undo` go through the index, [`View`]).
pub fn read(state_dir: &Path) -> Result<Journal, JournalError> {
    View::retrying(state_dir, |v| {
        Ok(Journal {
            changes: v.load_all(v.entries())?,
            skipped: v
                .entries()
                .iter()
                .filter(|e| e.skipped)
                .map(|e| e.id)
                .collect(),
        })
    })
}

/// Every change with its phase, in order (old-format entries are skipped).
pub fn changes(state_dir: &Path) -> Result<Vec<(Change, Phase)>, JournalError> {
    Ok(read(state_dir)?.changes)
}

/// The committed changes of group `group` that no committed undo reverted, oldest first
/// (what undo of the group reverts), read through the index.
pub fn group_members(state_dir: &Path, group: &str) -> Result<Vec<Change>, JournalError> {
    View::retrying(state_dir, |v| {
        let undone = v.undone();
        let mut out = Vec::new();
        for e in v.group(group) {
            if e.phase != Phase::Committed || undone.contains(&e.id) {
                continue;
            }
            let c = v.load(e)?;
            if c.group.as_deref() == Some(group) {
                out.push(c);
            }
        }
        Ok(out)
    })
}

/// A held journal lock (changes are serialised: intent, act, commit).
pub struct Lock {
    _file: std::fs::File,
}

/// Takes the journal's exclusive lock.
pub fn lock(state_dir: &Path) -> Result<Lock, JournalError> {
    lock_named(state_dir, "lock")
}

/// Takes the journal's lock if no other call holds it (this process's other calls included).
pub fn try_lock(state_dir: &Path) -> Result<Option<Lock>, JournalError> {
    let (f, p) = open_lock(state_dir, "lock")?;
    match f.try_lock() {
        Ok(()) => Ok(Some(Lock { _file: f })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(io("locking", &p)(e)),
    }
}

fn open_lock(state_dir: &Path, name: &str) -> Result<(std::fs::File, PathBuf), JournalError> {
    let dir = state_dir.join("journal");
    private_dir(&dir)?;
    let p = dir.join(name);
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&p)
        .map_err(io("opening", &p))?;
    Ok((f, p))
}

/// Takes the exclusive lock `<state>/journal/<name>` (created 0600 if missing).
pub(crate) fn lock_named(state_dir: &Path, name: &str) -> Result<Lock, JournalError> {
    let (f, p) = open_lock(state_dir, name)?;
    f.lock().map_err(io("locking", &p))?;
    Ok(Lock { _file: f })
}

/// Writes the intent of a change (durably) and returns its id. Call with the lock held; the
/// contents of `before` and `after` must already be in the backup store (one that is not
/// makes the change `not_undoable`).
pub fn begin(state_dir: &Path, lock: &Lock, change: Change) -> Result<Change, JournalError> {
    let mut v = append_many(state_dir, lock, vec![change], false)?;
    v.pop().ok_or_else(|| JournalError::Io {
        what: "journalling",
        path: journal_path(state_dir),
        source: std::io::Error::other("no entry"),
    })
}

/// Records changes that were already made (a command's, found by a snapshot): their
/// intent and commit lines in one append and one sync. Returns them with their ids.
pub fn record_done(
    state_dir: &Path,
    lock: &Lock,
    done: Vec<Change>,
) -> Result<Vec<Change>, JournalError> {
    append_many(state_dir, lock, done, true)
}

/// Writes the intents of many changes (one append, one sync) and returns them with their
/// ids; then act, and [`commit_many`]. Call with the lock held; their `before` and `after`
/// contents must already be in the backup store. Each change is journalled on its own: one
/// whose content before is not in the store, or whose line cannot be encoded, is journalled
/// as `not_undoable` with why, and the others as they are.
pub fn begin_many(
    state_dir: &Path,
    lock: &Lock,
    changes: Vec<Change>,
) -> Result<Vec<Change>, JournalError> {
    append_many(state_dir, lock, changes, false)
}

/// Why undo could not revert `c` now that it is journalled, if so: its content before is
/// not in the backup store.
fn missing_before(state_dir: &Path, c: &Change) -> Option<String> {
    let PathState::File { sha256, .. } = &c.before else {
        return None;
    };
    if has_backup(state_dir, sha256) {
        return None;
    }
    Some(
        c.not_backed_up
            .as_ref()
            .filter(|w| w.contains("content before"))
            .cloned()
            .unwrap_or_else(|| "its content before the change is not in the backup store".into()),
    )
}

/// One change's line; if it cannot be encoded, a line that says so (with its path, tool and
/// group: history shows it, undo passes over it).
fn encode_intent(c: &mut Change, out: &mut Vec<u8>, recs: &mut Vec<index::Rec>) {
    let at = out.len();
    if let Err(e) = encode_line(&Line::Intent(Box::new(c.clone())), out, recs) {
        out.truncate(at);
        *c = Change {
            id: c.id,
            time: c.time,
            tool: c.tool.clone(),
            path: std::mem::take(&mut c.path),
            group: c.group.take(),
            workspace: c.workspace.take(),
            uid: c.uid,
            not_undoable: Some(format!("its journal entry could not be encoded: {e}")),
            ..Change::default()
        };
        if encode_line(&Line::Intent(Box::new(c.clone())), out, recs).is_err() {
            out.truncate(at);
        }
    }
}

fn append_many(
    state_dir: &Path,
    lock: &Lock,
    changes: Vec<Change>,
    done: bool,
) -> Result<Vec<Change>, JournalError> {
    if changes.is_empty() {
        return Ok(changes);
    }
    let first = last_id(state_dir)? + 1;
    let mut data = Vec::with_capacity(changes.len() * 400);
    let mut recs = Vec::with_capacity(changes.len() * 2);
    let mut out = Vec::with_capacity(changes.len());
    let time = now();
    for (id, mut c) in (first..).zip(changes) {
        c.id = id;
        c.time = time;
        if c.not_undoable.is_none() {
            c.not_undoable = missing_before(state_dir, &c);
        }
        encode_intent(&mut c, &mut data, &mut recs);
        if done {
            // A commit line always encodes.
            let _ = encode_line(&Line::Commit { id }, &mut data, &mut recs);
        }
        out.push(c);
    }
    let dir = state_dir.join("journal");
    private_dir(&dir)?;
    append_raw(state_dir, data, &recs)?;
    compact::maybe(state_dir, lock);
    Ok(out)
}

/// The last id given: from the index's last intent (or the base line of a compacted
/// journal), checked against the journal; the whole journal is read only when they disagree.
fn last_id(state_dir: &Path) -> Result<u64, JournalError> {
    let _ = index::update(state_dir);
    match index::last_given(state_dir) {
        index::LastId::Given(id) => Ok(id),
        // Not written (a full disk): the journal's tail, parsed in memory.
        index::LastId::Stale => Ok(View::open(state_dir)?.last_id()),
        index::LastId::Mismatch => {
            // The index disagrees with the journal: rebuilt from it.
            let _ = std::fs::remove_file(index::index_path(state_dir));
            Ok(View::open(state_dir)?.last_id())
        }
    }
}

/// Appends lines in one write and one sync.
fn append_lines(state_dir: &Path, lines: &[Line]) -> Result<(), JournalError> {
    if lines.is_empty() {
        return Ok(());
    }
    let dir = state_dir.join("journal");
    private_dir(&dir)?;
    let path = journal_path(state_dir);
    let mut data = Vec::new();
    let mut recs = Vec::with_capacity(lines.len());
    for line in lines {
        encode_line(line, &mut data, &mut recs).map_err(|e| JournalError::Io {
            what: "encoding an entry for",
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
    }
    append_raw(state_dir, data, &recs)
}

/// Marks many changes done (one append, one sync).
pub fn commit_many(state_dir: &Path, ids: &[u64]) -> Result<(), JournalError> {
    let lines: Vec<Line> = ids.iter().map(|&id| Line::Commit { id }).collect();
    append_lines(state_dir, &lines)
}

/// `undo --skip`: plain `undo` passes over these changes from now on (nothing is reverted;
/// `undo ID` still reverts them). Call with the lock held.
pub fn skip(state_dir: &Path, _lock: &Lock, ids: &[u64]) -> Result<(), JournalError> {
    let lines: Vec<Line> = ids.iter().map(|&id| Line::Skip { id }).collect();
    append_lines(state_dir, &lines)
}

/// Marks a change done.
pub fn commit(state_dir: &Path, id: u64) -> Result<(), JournalError> {
    append_line(state_dir, &Line::Commit { id })
}

/// Marks a change not done.
pub fn abort(state_dir: &Path, id: u64) -> Result<(), JournalError> {
    append_line(state_dir, &Line::Abort { id })
}

/// Recovery after a crash: each pending change is completed (the path is in its `after`
/// state: commit) or rolled back (in its `before` state: abort); `current` tells the state
/// of a path now. Returns the changes that are neither (changed by something else since),
/// left pending and reported. Only the pending changes' lines are read (the index says
/// which).
pub fn recover(
    state_dir: &Path,
    lock: &Lock,
    current: &dyn Fn(&Path) -> Option<PathState>,
) -> Result<Vec<Change>, JournalError> {
    recover_pending(state_dir, lock, pending(state_dir)?, current)
}

/// [`recover`] of the changes [`pending`] returned (read once by a caller that needs them
/// too).
pub fn recover_pending(
    state_dir: &Path,
    lock: &Lock,
    pending: Vec<Change>,
    current: &dyn Fn(&Path) -> Option<PathState>,
) -> Result<Vec<Change>, JournalError> {
    let _ = lock;
    let mut unresolved = Vec::new();
    for c in pending {
        let now = current(&c.path);
        let same = |s: &PathState| match (now.as_ref(), s) {
            (Some(PathState::Absent), PathState::Absent) => true,
            (Some(PathState::File { sha256: a, .. }), PathState::File { sha256: b, .. }) => a == b,
            (Some(PathState::Dir), PathState::Dir) => true,
            (Some(PathState::Link { target: a }), PathState::Link { target: b }) => a == b,
            _ => false,
        };
        if same(&c.after) {
            commit(state_dir, c.id)?;
        } else if same(&c.before) {
            abort(state_dir, c.id)?;
        } else {
            unresolved.push(c);
        }
    }
    Ok(unresolved)
}

/// The changes whose intent is written and that are neither committed nor aborted.
pub fn pending(state_dir: &Path) -> Result<Vec<Change>, JournalError> {
    View::retrying(state_dir, |v| {
        v.entries()
            .iter()
            .filter(|e| e.phase == Phase::Pending)
            .map(|e| v.load(e))
            .collect()
    })
}

/// Backup retention: keeps the contents of the last `keep_versions` changes of each path and
/// every blob in `pinned` (what snapshot indexes refer to); removes the rest, then, while the
/// store holds more than `max_total` bytes, the blobs of the oldest changes. Returns (blobs
/// removed, bytes freed). An undo of a change whose backup was removed says so.
pub fn prune_backups(
    state_dir: &Path,
    keep_versions: usize,
    max_total: Option<u64>,
    pinned: &std::collections::HashSet<String>,
) -> Result<(u64, u64), JournalError> {
    use std::collections::{HashMap, HashSet};
    let dir = state_dir.join("backups");
    let all = changes(state_dir)?;
    let blobs = |c: &Change| -> Vec<String> {
        [&c.before, &c.after]
            .into_iter()
            .filter_map(|s| match s {
                PathState::File { sha256, .. } => Some(sha256.clone()),
                _ => None,
            })
            .collect()
    };
    // Newest first, per path.
    let mut seen: HashMap<&Path, usize> = HashMap::new();
    let mut keep: HashSet<String> = pinned.clone();
    // The order in which blobs may go when over the size cap: oldest change first.
    let mut by_age: Vec<String> = Vec::new();
    for (c, _) in all.iter().rev() {
        let n = seen.entry(c.path.as_path()).or_insert(0);
        *n += 1;
        if *n <= keep_versions {
            keep.extend(blobs(c));
        }
    }
    for (c, _) in &all {
        by_age.extend(blobs(c));
    }
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(io("listing", &dir)(e)),
    };
    let mut sizes: HashMap<String, u64> = HashMap::new();
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.len() == 64
            && let Ok(m) = e.metadata()
        {
            sizes.insert(n, m.len());
        }
    }
    let (mut removed, mut freed) = (0u64, 0u64);
    let mut gone: Vec<String> = Vec::new();
    let mut remove = |id: &str, sizes: &mut HashMap<String, u64>| {
        if let Some(len) = sizes.remove(id)
            && std::fs::remove_file(dir.join(id)).is_ok()
        {
            removed += 1;
            freed += len;
            gone.push(id.to_string());
        }
    };
    let doomed: Vec<String> = sizes
        .keys()
        .filter(|k| !keep.contains(*k))
        .cloned()
        .collect();
    for id in doomed {
        remove(&id, &mut sizes);
    }
    if let Some(cap) = max_total {
        let mut total: u64 = sizes.values().sum();
        for id in by_age {
            if total <= cap {
                break;
            }
            if !pinned.contains(&id) {
                let len = sizes.get(&id).copied().unwrap_or(0);
                remove(&id, &mut sizes);
                if !sizes.contains_key(&id) {
                    total = total.saturating_sub(len);
                }
            }
        }
    }
    // The store's usage record (a cache) follows.
    quota::forget(state_dir, &gone);
    // So does the journal: what lost its content before becomes a tombstone, earlier
    // tombstones go, and it is brought within its share. Not while another call holds the
    // journal (it compacts when it appends past its share).
    if let Ok(Some(lock)) = try_lock(state_dir) {
        let target = compact::bound(state_dir)
            .map(compact::cap)
            .filter(|c| compact::bytes(state_dir) > *c)
            .map(|c| c / 2);
        let _ = compact::compact(state_dir, &lock, target, true);
    }
    Ok((removed, freed))
}

/// Reads a backup by id.
pub fn read_backup(state_dir: &Path, id: &str) -> Result<Vec<u8>, JournalError> {
    let p = state_dir.join("backups").join(id);
    if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(JournalError::Io {
            what: "reading backup",
            path: p,
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        });
    }
    let raw = std::fs::read(&p).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            JournalError::Io {
                what: "the backup is gone (removed by the backup retention: [undo] keep_versions, backups_max_total, max_state_bytes)",
                path: p.clone(),
                source: e,
            }
        } else {
            io("reading backup", &p)(e)
        }
    })?;
    blob::decode(&raw, id).map_err(|source| JournalError::Blob { path: p, source })
}

/// Now, in seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod journal_tests;

#[cfg(test)]
mod wal_tests {
    use super::*;

    fn change(path: &str, before: PathState, after: PathState) -> Change {
        Change {
            id: 0,
            time: 0,
            tool: "fs.write".into(),
            path: PathBuf::from(path),
            before,
            after,
            undoes: None,
            dest: None,
            trash: None,
            group: None,
            workspace: None,
            dir_mode: None,
            not_backed_up: None,
            not_undoable: None,
            uid: None,
        }
    }

    fn file(sha: &str) -> PathState {
        PathState::File {
            sha256: sha.into(),
            mode: 0o644,
            size: 1,
        }
    }

    #[test]
    fn intent_commit_abort_and_recovery() {
        let d = std::env::temp_dir().join(format!("gateway-wal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let lock = lock(&d).expect("lock");
        let a = begin(&d, &lock, change("/a", PathState::Absent, file("1"))).expect("a");
        commit(&d, a.id).expect("commit");
        let b = begin(&d, &lock, change("/b", file("2"), file("3"))).expect("b");
        abort(&d, b.id).expect("abort");
        // Three crashed changes: one done, one not started, one overtaken by something else.
        let c = begin(&d, &lock, change("/c", file("4"), file("5"))).expect("c");
        let e = begin(&d, &lock, change("/e", file("6"), PathState::Absent)).expect("e");
        let f = begin(&d, &lock, change("/f", file("7"), file("8"))).expect("f");
        assert_eq!((a.id, b.id, c.id, e.id, f.id), (1, 2, 3, 4, 5));
        let now = |p: &Path| -> Option<PathState> {
            match p.to_str() {
                Some("/c") => Some(file("5")),
                Some("/e") => Some(file("6")),
                Some("/f") => Some(file("9")),
                _ => None,
            }
        };
        let left = recover(&d, &lock, &now).expect("recover");
        assert_eq!(left.iter().map(|c| c.id).collect::<Vec<_>>(), vec![5]);
        let phases: Vec<(u64, Phase)> = changes(&d)
            .expect("changes")
            .iter()
            .map(|(c, p)| (c.id, *p))
            .collect();
        assert_eq!(
            phases,
            vec![
                (1, Phase::Committed),
                (2, Phase::Aborted),
                (3, Phase::Committed),
                (4, Phase::Aborted),
                (5, Phase::Pending)
            ]
        );
        // A torn last line is ignored.
        let p = d.join("journal/journal.jsonl");
        let mut t = std::fs::read(&p).expect("read");
        t.extend_from_slice(b"{\"phase\":\"intent\",\"id\":9,\"ti");
        std::fs::write(&p, t).expect("write");
        assert_eq!(changes(&d).expect("changes").len(), 5);
        commit(&d, 5).expect("commit after a torn line");
        assert_eq!(changes(&d).expect("changes")[4].1, Phase::Committed);
    }

    #[test]
    fn workspace_of_a_change_and_skips() {
        let mut c = change("/w/sub/a", PathState::Absent, file("1"));
        // Recorded: made in /w/sub, so it belongs to /w/sub and /w, not to /w/sub/x or /v.
        c.workspace = Some(PathBuf::from("/w/sub"));
        assert!(c.in_workspace(Path::new("/w")) && c.in_workspace(Path::new("/w/sub")));
        assert!(!c.in_workspace(Path::new("/w/sub/x")) && !c.in_workspace(Path::new("/v")));
        // Older journals: by the path (and a move's destination), component-wise.
        c.workspace = None;
        assert!(c.in_workspace(Path::new("/w/sub")) && !c.in_workspace(Path::new("/w/su")));
        c.dest = Some(PathBuf::from("/elsewhere/a"));
        assert!(!c.in_workspace(Path::new("/w")));
        // An old line without the new fields still reads.
        let old = r#"{"phase":"intent","id":1,"time":0,"tool":"fs.write","path":"/w/a","before":{"kind":"absent"},"after":{"kind":"dir"},"undoes":null}"#;
        let d = std::env::temp_dir().join(format!("gateway-wal-ws-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("journal")).expect("dir");
        std::fs::write(d.join("journal/journal.jsonl"), format!("{old}\n")).expect("w");
        let lock = lock(&d).expect("lock");
        let many = begin_many(
            &d,
            &lock,
            vec![change("/w/b", PathState::Absent, file("2")); 2],
        )
        .expect("begin_many");
        assert_eq!(many.iter().map(|c| c.id).collect::<Vec<_>>(), vec![2, 3]);
        commit_many(&d, &[1, 2, 3]).expect("commit_many");
        skip(&d, &lock, &[2]).expect("skip");
        let j = read(&d).expect("read");
        assert_eq!(j.changes.len(), 3);
        assert!(j.changes.iter().all(|(_, p)| *p == Phase::Committed));
        assert_eq!(j.skipped.iter().copied().collect::<Vec<_>>(), vec![2]);
        assert_eq!(j.changes[0].0.workspace, None);
        let _ = std::fs::remove_dir_all(&d);
    }
}
