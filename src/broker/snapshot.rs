//! Snapshots for shell commands: what a command changed in the workspace goes into the
//! journal, so `gateway undo` can revert it.
//!
//! Before the run, every file of the workspace that .gitignore does not exclude (hidden files
//! included, `.git` excluded, up to `undo.snapshot_max_file`) is in an index (size, mtime,
//! sha256) and its content in the backup store: files unchanged since the last run (same
//! size and mtime) cost a `stat`, others are hashed and backed up (content-addressed, so
//! each version once). After the run the tree is compared with the index; each created,
//! changed or deleted file becomes a journal change, all in one group.

use super::BrokerError;
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
    mode: u32,
    sha256: String,
}

/// The workspace's files before a run. Keyed by the raw path bytes (`OsString` hashes
/// bytes; `PathBuf` keys compare component by component, which dominated the profile).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(from = "SavedIndex", into = "SavedIndex")]
pub struct Index {
    files: HashMap<OsString, Entry>,
    #[serde(skip)]
    skipped: Vec<PathBuf>,
    /// Differs from the index saved on disk.
    #[serde(skip)]
    dirty: bool,
}

/// The index as saved: a list (JSON map keys must be strings; paths may not be UTF-8).
#[derive(Serialize, Deserialize, Clone)]
struct SavedIndex {
    files: Vec<(PathBuf, Entry)>,
}

impl From<SavedIndex> for Index {
    fn from(s: SavedIndex) -> Index {
        Index {
            files: s
                .files
                .into_iter()
                .map(|(p, e)| (p.into_os_string(), e))
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
                .map(|(p, e)| (PathBuf::from(p), e))
                .collect(),
        }
    }
}

impl Clone for Index {
    fn clone(&self) -> Index {
        Index {
            files: self.files.clone(),
            skipped: self.skipped.clone(),
            dirty: self.dirty,
        }
    }
}

/// What a snapshot found after a run.
#[derive(Debug, Default, Clone, Serialize)]
pub struct SnapshotReport {
    /// The journal group (`gateway undo ID` with any of its changes reverts them all).
    pub group: String,
    /// (path, `created` | `changed` | `deleted`, journal id).
    pub changes: Vec<(PathBuf, &'static str, u64)>,
    /// Files too large to snapshot, or unreadable.
    pub skipped: Vec<PathBuf>,
    /// Files in the workspace index.
    pub files: usize,
}

fn index_path(state_dir: &Path, ws: &Path) -> PathBuf {
    let id = journal::sha256_hex(ws.as_os_str().as_encoded_bytes());
    state_dir
        .join("snapshots")
        .join(format!("{}.json", &id[..16]))
}

fn j_err(e: journal::JournalError) -> BrokerError {
    BrokerError::Io {
        what: "snapshot".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Walks the workspace in parallel: (relative path, metadata) of regular files.
fn files(ws: &Path) -> Vec<(PathBuf, std::fs::Metadata)> {
    let out = std::sync::Mutex::new(Vec::new());
    ignore::WalkBuilder::new(ws)
        .hidden(false)
        .require_git(false)
        .threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
        .filter_entry(|e| e.file_name() != ".git")
        .build_parallel()
        .run(|| {
            Box::new(|e| {
                if let Ok(e) = e
                    && e.file_type().is_some_and(|t| t.is_file())
                    && let (Ok(rel), Ok(m)) = (e.path().strip_prefix(ws), e.metadata())
                    && let Ok(mut v) = out.lock()
                {
                    v.push((rel.to_path_buf(), m));
                }
                ignore::WalkState::Continue
            })
        });
    out.into_inner().unwrap_or_default()
}

fn mtime_ns(m: &std::fs::Metadata) -> i128 {
    use std::os::unix::fs::MetadataExt;
    i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec())
}

/// Indexes the tree, reusing `old` entries whose size and mtime did not change.
fn index(state_dir: &Path, ws: &Path, old: &Index, max: u64) -> Result<Index, BrokerError> {
    use std::os::unix::fs::PermissionsExt;
    let mut idx = Index::default();
    for (rel, m) in files(ws) {
        let (size, mt) = (m.len(), mtime_ns(&m));
        let key = rel.as_os_str().to_os_string();
        if let Some(e) = old.files.get(&key)
            && e.size == size
            && e.mtime_ns == mt
        {
            idx.files.insert(key, e.clone());
            continue;
        }
        if size > max {
            idx.skipped.push(rel);
            continue;
        }
        let Ok(data) = std::fs::read(ws.join(&rel)) else {
            idx.skipped.push(rel);
            continue;
        };
        let sha256 = journal::backup_deferred(state_dir, &data).map_err(j_err)?;
        idx.files.insert(
            key,
            Entry {
                size,
                mtime_ns: mt,
                mode: m.permissions().mode() & 0o7777,
                sha256,
            },
        );
    }
    Ok(idx)
}

/// Before a run: the index of the workspace (its files backed up, durably).
pub fn before(state_dir: &Path, ws: &Path, max: u64) -> Result<Index, BrokerError> {
    let old: Index = std::fs::read(index_path(state_dir, ws))
        .ok()
        .and_then(|d| serde_json::from_slice(&d).ok())
        .unwrap_or_default();
    let mut idx = index(state_dir, ws, &old, max)?;
    if idx.files.len() != old.files.len()
        || idx.files.iter().any(|(k, v)| old.files.get(k) != Some(v))
    {
        journal::sync_store(state_dir).map_err(j_err)?;
        idx.dirty = true;
    }
    Ok(idx)
}

/// After a run: journals what changed (one group) and saves the new index.
pub fn after(
    state_dir: &Path,
    ws: &Path,
    pre: &Index,
    max: u64,
) -> Result<SnapshotReport, BrokerError> {
    let post = index(state_dir, ws, pre, max)?;
    let group = format!(
        "exec-{}",
        &journal::sha256_hex(format!("{}{}", journal::now(), std::process::id()).as_bytes())[..12]
    );
    let file = |e: &Entry| PathState::File {
        sha256: e.sha256.clone(),
        mode: e.mode,
        size: e.size,
    };
    let mut diffs: Vec<(PathBuf, PathState, PathState, &'static str)> = Vec::new();
    for (rel, e) in &post.files {
        match pre.files.get(rel) {
            None => diffs.push((PathBuf::from(rel), PathState::Absent, file(e), "created")),
            Some(p) if p.sha256 != e.sha256 || p.mode != e.mode => {
                diffs.push((PathBuf::from(rel), file(p), file(e), "changed"))
            }
            Some(_) => {}
        }
    }
    for (rel, p) in &pre.files {
        if !post.files.contains_key(rel) && !post.skipped.iter().any(|s| s.as_os_str() == rel) {
            diffs.push((PathBuf::from(rel), file(p), PathState::Absent, "deleted"));
        }
    }
    diffs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut report = SnapshotReport {
        group: group.clone(),
        skipped: post.skipped.clone(),
        files: post.files.len(),
        ..SnapshotReport::default()
    };
    if !diffs.is_empty() {
        journal::sync_store(state_dir).map_err(j_err)?;
        let lock = journal::lock(state_dir).map_err(j_err)?;
        let kinds: Vec<&'static str> = diffs.iter().map(|d| d.3).collect();
        // The command already made the changes: recorded as done, in one append.
        let done = journal::record_done(
            state_dir,
            &lock,
            diffs
                .into_iter()
                .map(|(rel, before, after, _)| Change {
                    id: 0,
                    time: 0,
                    tool: "exec".into(),
                    path: ws.join(&rel),
                    before,
                    after,
                    undoes: None,
                    dest: None,
                    trash: None,
                    group: Some(group.clone()),
                })
                .collect(),
        )
        .map_err(j_err)?;
        for (c, kind) in done.into_iter().zip(kinds) {
            report.changes.push((c.path, kind, c.id));
        }
    }
    if report.changes.is_empty() && post.files.len() == pre.files.len() && !pre.dirty {
        // Nothing moved since the index on disk: keep it.
        return Ok(report);
    }
    let p = index_path(state_dir, ws);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).map_err(|e| BrokerError::Io {
            what: format!("creating {}", d.display()),
            source: e,
        })?;
    }
    let data = serde_json::to_vec(&post).map_err(|e| BrokerError::Io {
        what: "encoding the snapshot index".into(),
        source: std::io::Error::other(e),
    })?;
    crate::fsops::write_file_atomic(&p, &data).map_err(|e| BrokerError::Io {
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
    let _ = std::fs::remove_file(to);
    if !idx.dirty && std::fs::hard_link(&saved, to).is_ok() {
        return Ok(());
    }
    let data = serde_json::to_vec(idx).map_err(|e| BrokerError::Io {
        what: "encoding the snapshot index".into(),
        source: std::io::Error::other(e),
    })?;
    crate::fsops::write_file_atomic(to, &data).map_err(|e| BrokerError::Io {
        what: format!("saving {}", to.display()),
        source: std::io::Error::other(e.to_string()),
    })
}

/// An index kept by [`keep_index`].
pub(crate) fn load_index(p: &Path) -> Option<Index> {
    serde_json::from_slice(&std::fs::read(p).ok()?).ok()
}
