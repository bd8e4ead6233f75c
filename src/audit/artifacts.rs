//! Content-addressed blobs of (redacted) command output: `<state>/audit/artifacts/<sha256>`,
//! 0600. A stream is hashed whole; the stored copy may be capped (the record says so).

use super::{AuditError, StreamDigest, hex};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Hashes a stream and stores (up to `cap` bytes of) it.
pub struct ArtifactWriter {
    dir: PathBuf,
    cap: u64,
    file: Option<(PathBuf, File)>,
    full: Sha256,
    stored: Sha256,
    bytes: u64,
    kept: u64,
    failed: bool,
}

impl ArtifactWriter {
    /// A writer into `<state>/audit/artifacts`; `cap` = 0 stores nothing (hash only).
    pub fn new(state_dir: &Path, cap: u64) -> ArtifactWriter {
        ArtifactWriter {
            dir: super::Paths::new(state_dir).artifacts,
            cap,
            file: None,
            full: Sha256::new(),
            stored: Sha256::new(),
            bytes: 0,
            kept: 0,
            failed: false,
        }
    }

    /// Feeds a chunk.
    pub fn write(&mut self, data: &[u8]) {
        self.full.update(data);
        self.bytes += data.len() as u64;
        let room = self.cap.saturating_sub(self.kept) as usize;
        if room == 0 || self.failed || data.is_empty() {
            return;
        }
        let part = &data[..room.min(data.len())];
        if self.file.is_none() {
            let _ = super::keys::private_dir(&self.dir);
            let tmp = self.dir.join(format!(
                ".tmp.{}.{}",
                std::process::id(),
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0)
            ));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
            {
                Ok(f) => self.file = Some((tmp, f)),
                Err(_) => {
                    self.failed = true;
                    return;
                }
            }
        }
        if let Some((_, f)) = &mut self.file
            && f.write_all(part).is_err()
        {
            self.failed = true;
        }
        self.stored.update(part);
        self.kept += part.len() as u64;
    }

    /// Finishes: the digest of the whole stream and the artifact id of what was stored.
    pub fn finish(self) -> StreamDigest {
        let sha256 = hex(&self.full.finalize());
        let mut artifact = None;
        if let Some((tmp, f)) = self.file {
            drop(f);
            let id = hex(&self.stored.finalize());
            let dst = self.dir.join(&id);
            if !self.failed && (dst.exists() || std::fs::rename(&tmp, &dst).is_ok()) {
                artifact = Some(id);
            }
            let _ = std::fs::remove_file(&tmp);
        }
        StreamDigest {
            bytes: self.bytes,
            sha256,
            artifact_truncated: artifact.is_some() && self.kept < self.bytes,
            artifact,
        }
    }
}

/// Reads an artifact by id.
pub fn read(state_dir: &Path, id: &str) -> Result<Vec<u8>, AuditError> {
    if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(AuditError::Key(format!("{id} is not an artifact id")));
    }
    let p = super::Paths::new(state_dir).artifacts.join(id);
    std::fs::read(&p).map_err(|source| AuditError::Io {
        what: "reading artifact",
        path: p,
        source,
    })
}

/// Retention: removes artifacts older than `max_age`, then the oldest until the total is at
/// most `max_total` bytes. Returns (removed, bytes freed). Records keep their hashes, so a
/// removed artifact is reported as gone, not as tampering.
pub fn prune(state_dir: &Path, max_age: Option<Duration>, max_total: Option<u64>) -> (u64, u64) {
    let dir = super::Paths::new(state_dir).artifacts;
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return (0, 0);
    };
    let mut files: Vec<(SystemTime, u64, PathBuf)> = rd
        .flatten()
        .filter(|e| e.file_name().len() == 64)
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((m.modified().ok()?, m.len(), e.path()))
        })
        .collect();
    files.sort();
    let now = SystemTime::now();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    let (mut removed, mut freed) = (0, 0);
    for (t, len, p) in files {
        let old = max_age.is_some_and(|a| now.duration_since(t).unwrap_or_default() > a);
        let over = max_total.is_some_and(|m| total > m);
        if (old || over) && std::fs::remove_file(&p).is_ok() {
            removed += 1;
            freed += len;
            total -= len;
        }
    }
    (removed, freed)
}
