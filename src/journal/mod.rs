//! Backups and the change journal in the state directory. For now: content-addressed
//! backups and journal entries for `gateway scan --redact`; trash and undo (issue 5) build on
//! them.
//!
//! Layout: `<state>/backups/<sha256>` (the old content, 0600, written once, deduplicated) and
//! `<state>/journal/journal.jsonl` (one JSON object per change, appended and fsync'd before
//! the change is made).

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
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
    use std::os::unix::fs::OpenOptionsExt;
    let dir = state_dir.join("backups");
    private_dir(&dir)?;
    let id = sha256_hex(data);
    let path = dir.join(&id);
    if path.exists() {
        return Ok(id);
    }
    let tmp = dir.join(format!(".{id}.tmp-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("creating", &tmp))?;
    f.write_all(data).map_err(io("writing", &tmp))?;
    f.sync_all().map_err(io("syncing", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(io("storing", &path))?;
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io("syncing", &dir))?;
    Ok(id)
}

/// One change, as journalled.
#[derive(Debug, Serialize)]
pub struct Entry<'a> {
    /// Seconds since the Unix epoch.
    pub time: u64,
    /// What was done (`redact`).
    pub op: &'a str,
    /// The file changed.
    pub path: &'a Path,
    /// Backup id of the content before.
    pub before: &'a str,
    /// sha256 of the content after.
    pub after: &'a str,
}

/// Appends an entry to the journal and fsyncs it.
pub fn record(state_dir: &Path, entry: &Entry<'_>) -> Result<(), JournalError> {
    let dir = state_dir.join("journal");
    private_dir(&dir)?;
    let path = dir.join("journal.jsonl");
    let mut line = serde_json::to_vec(entry).map_err(|e| JournalError::Io {
        what: "encoding an entry for",
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    line.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(io("opening", &path))?;
    f.write_all(&line).map_err(io("appending to", &path))?;
    f.sync_all().map_err(io("syncing", &path))
}

/// Now, in seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
