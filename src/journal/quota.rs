//! The backup store's bounds (issue 22 item 7): it never grows past the policy's
//! `[undo] max_state_bytes` (allocated bytes of `<state>/backups`), and never fills the file
//! system it is on (a content is not stored if that would leave less than [`disk_margin`]
//! free there).
//!
//! A [`Budget`] stores the blobs of one run (or one tool call). When a blob does not fit, the
//! oldest blobs are expired first: ordered by the time of the newest journal change that
//! refers to them (for a content only a snapshot index refers to: when it was stored). Never
//! expired: the contents the newest change (group) of each workspace refers to, so that the
//! most recent undo keeps working, and the blobs of the run in progress (the budget's
//! protected set). When that is not enough the content is not stored ([`Stored::NotBackedUp`],
//! with the reason): the caller records it (journal, history) or refuses.

use super::{Change, JournalError, PathState, blob, io, private_dir, sha256_hex};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The free space to leave on the state directory's file system: 5% of its size, at least
/// 16 MiB and at most 1 GiB.
pub fn disk_margin(fs_size: u64) -> u64 {
    (fs_size / 20).clamp(16 << 20, 1 << 30)
}

/// What became of a content given to [`Budget::store`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// In the store (now or already): its id.
    Kept(String),
    /// Not stored: its id (the SHA-256 of the content) and why.
    NotBackedUp {
        /// The id it would have had.
        id: String,
        /// Why it was not stored (names the limit and what to do).
        reason: String,
    },
}

/// One blob of the store.
#[derive(Clone, Copy)]
struct Blob {
    /// Allocated bytes.
    bytes: u64,
    /// Modification time (when stored), seconds since the epoch.
    mtime: u64,
}

/// Stores blobs within the store's bounds.
pub struct Budget {
    dir: PathBuf,
    state_dir: PathBuf,
    limit: Option<u64>,
    /// The store's blobs, listed when first needed.
    blobs: Option<HashMap<String, Blob>>,
    used: u64,
    protected: HashSet<String>,
    /// The blobs this budget expired.
    pub expired: Vec<String>,
}

fn human(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.1} GiB", n as f64 / f64::from(1u32 << 30))
    } else {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    }
}

impl Budget {
    /// A budget for the store of `state_dir`, at most `limit` allocated bytes (None: only the
    /// file system's free space bounds it).
    pub fn new(state_dir: &Path, limit: Option<u64>) -> Budget {
        Budget {
            dir: state_dir.join("backups"),
            state_dir: state_dir.to_path_buf(),
            limit,
            blobs: None,
            used: 0,
            protected: HashSet::new(),
            expired: Vec::new(),
        }
    }

    /// These blobs are not expired by this budget (the run in progress needs them).
    pub fn protect(&mut self, ids: impl IntoIterator<Item = String>) {
        self.protected.extend(ids);
    }

    /// Stores `data` (if not there yet and if it fits), synced when `sync`.
    pub fn store(&mut self, data: &[u8], sync: bool) -> Result<Stored, JournalError> {
        private_dir(&self.dir)?;
        let id = sha256_hex(data);
        let path = self.dir.join(&id);
        if path.exists() {
            self.protected.insert(id.clone());
            return Ok(Stored::Kept(id));
        }
        let enc = blob::encode(data).map_err(io("compressing a backup into", &path))?;
        // What it will occupy: whole 4 KiB blocks.
        let need = (enc.len() as u64).div_ceil(4096) * 4096;
        if let Some(reason) = self.make_room(need)? {
            return Ok(Stored::NotBackedUp { id, reason });
        }
        super::write_blob(&self.dir, &id, &enc, sync)?;
        self.used += need;
        if let Some(b) = self.blobs.as_mut() {
            b.insert(
                id.clone(),
                Blob {
                    bytes: need,
                    mtime: super::now(),
                },
            );
        }
        self.protected.insert(id.clone());
        Ok(Stored::Kept(id))
    }

    /// Makes room for `need` more bytes: None when there is, else why not.
    fn make_room(&mut self, need: u64) -> Result<Option<String>, JournalError> {
        if let Some(limit) = self.limit {
            self.list()?;
            if self.used + need > limit {
                self.expire(self.used + need - limit)?;
            }
            if self.used + need > limit {
                return Ok(Some(format!(
                    "the backup store is at its quota ([undo] max_state_bytes = {}; it holds {}, this content needs {}, and the rest belongs to the newest change of a workspace or to this run); raise max_state_bytes in the policy",
                    human(limit),
                    human(self.used),
                    human(need)
                )));
            }
        }
        let (avail, size) = self.free()?;
        let margin = disk_margin(size);
        if avail < need + margin {
            self.list()?;
            self.expire(need + margin - avail)?;
            let (avail, _) = self.free()?;
            if avail < need + margin {
                return Ok(Some(format!(
                    "the file system of {} is nearly full ({} free; backups leave at least {} free); free space there",
                    self.dir.display(),
                    human(avail),
                    human(margin)
                )));
            }
        }
        Ok(None)
    }

    /// (bytes available to this user, size) of the store's file system.
    fn free(&self) -> Result<(u64, u64), JournalError> {
        let s = rustix::fs::statvfs(&self.dir).map_err(|e| JournalError::Io {
            what: "reading the free space of",
            path: self.dir.clone(),
            source: e.into(),
        })?;
        Ok((
            s.f_bavail.saturating_mul(s.f_frsize),
            s.f_blocks.saturating_mul(s.f_frsize),
        ))
    }

    /// Lists the store (once).
    fn list(&mut self) -> Result<(), JournalError> {
        if self.blobs.is_some() {
            return Ok(());
        }
        let mut blobs = HashMap::new();
        let mut used = 0;
        let rd = std::fs::read_dir(&self.dir).map_err(io("listing", &self.dir))?;
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(n) = name.to_str() else { continue };
            let Ok(m) = e.metadata() else { continue };
            let bytes = blob::allocated(&m);
            // Temporary files of writers count against the quota too, but are not expired.
            used += bytes;
            if n.len() == 64 && m.is_file() {
                let mtime = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs());
                blobs.insert(n.to_string(), Blob { bytes, mtime });
            }
        }
        self.used = used;
        self.blobs = Some(blobs);
        Ok(())
    }

    /// Expires blobs, oldest first, until `bytes` are freed or none may go.
    fn expire(&mut self, bytes: u64) -> Result<(), JournalError> {
        let changes: Vec<Change> = super::changes(&self.state_dir)?
            .into_iter()
            .map(|(c, _)| c)
            .collect();
        let mut keep = newest_groups_blobs(&changes);
        keep.extend(self.protected.iter().cloned());
        let mut last_ref: HashMap<&str, u64> = HashMap::new();
        for c in &changes {
            for id in blob_ids(c) {
                last_ref.insert(id, c.time);
            }
        }
        let Some(blobs) = self.blobs.as_mut() else {
            return Ok(());
        };
        let mut order: Vec<(u64, String)> = blobs
            .iter()
            .filter(|(id, _)| !keep.contains(id.as_str()))
            .map(|(id, b)| {
                (
                    last_ref.get(id.as_str()).copied().unwrap_or(b.mtime),
                    id.clone(),
                )
            })
            .collect();
        order.sort();
        let mut freed = 0;
        for (_, id) in order {
            if freed >= bytes {
                break;
            }
            match std::fs::remove_file(self.dir.join(&id)) {
                Ok(()) => {}
                // Expired meanwhile by another run.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("expiring the backup", &self.dir.join(&id))(e)),
            }
            if let Some(b) = blobs.remove(&id) {
                self.used = self.used.saturating_sub(b.bytes);
                freed += b.bytes;
            }
            self.expired.push(id);
        }
        Ok(())
    }
}

/// The ids of a change's file contents.
fn blob_ids(c: &Change) -> impl Iterator<Item = &str> {
    [&c.before, &c.after].into_iter().filter_map(|s| match s {
        PathState::File { sha256, .. } => Some(sha256.as_str()),
        _ => None,
    })
}

/// The blobs of the newest change (its whole group) of each workspace: what the next
/// `gateway undo` there needs.
fn newest_groups_blobs(changes: &[Change]) -> HashSet<String> {
    let key = |c: &Change| c.workspace.clone();
    let tag = |c: &Change| c.group.clone().unwrap_or_else(|| format!("#{}", c.id));
    let mut newest: HashMap<Option<PathBuf>, String> = HashMap::new();
    for c in changes {
        newest.insert(key(c), tag(c));
    }
    changes
        .iter()
        .filter(|c| newest.get(&key(c)) == Some(&tag(c)))
        .flat_map(|c| blob_ids(c).map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gateway-quota-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn random(n: usize, seed: u64) -> Vec<u8> {
        // xorshift: incompressible enough for zstd.
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn the_quota_expires_the_oldest_and_refuses_what_cannot_fit() {
        let d = state("expire");
        let limit = 3 << 20;
        let mut ids = Vec::new();
        for i in 0..6 {
            // A budget per run: what earlier runs stored may expire.
            let mut b = Budget::new(&d, Some(limit));
            match b.store(&random(1 << 20, i + 1), false).expect("store") {
                Stored::Kept(id) => ids.push(id),
                s => panic!("run {i}: {s:?}"),
            }
            let used: u64 = std::fs::read_dir(d.join("backups"))
                .expect("ls")
                .flatten()
                .map(|e| blob::allocated(&e.metadata().expect("stat")))
                .sum();
            assert!(used <= limit, "run {i}: {used} bytes");
        }
        // The oldest went, the newest stayed.
        assert!(!super::super::has_backup(&d, &ids[0]));
        assert!(super::super::has_backup(&d, &ids[5]));
        // Within one run, its own blobs are protected: the fourth does not fit.
        let mut b = Budget::new(&d, Some(limit));
        let mut refused = 0;
        for i in 10..14 {
            if let Stored::NotBackedUp { reason, .. } =
                b.store(&random(1 << 20, i), false).expect("store")
            {
                assert!(reason.contains("max_state_bytes"), "{reason}");
                refused += 1;
            }
        }
        assert_eq!(refused, 2, "2 fit (3 MiB less the overhead), 2 do not");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_newest_change_of_each_workspace_keeps_its_contents() {
        let d = state("newest");
        let lock = super::super::lock(&d).expect("lock");
        let mut b = Budget::new(&d, None);
        let mut put = |seed| match b.store(&random(1 << 20, seed), false).expect("store") {
            Stored::Kept(id) => id,
            s => panic!("{s:?}"),
        };
        let (a, b1, c) = (put(1), put(2), put(3));
        let file = |id: &str| PathState::File {
            sha256: id.into(),
            mode: 0o644,
            size: 1 << 20,
        };
        let change = |ws: &str, before: &str, after: &str| Change {
            tool: "exec".into(),
            path: PathBuf::from(ws).join("f"),
            workspace: Some(PathBuf::from(ws)),
            before: file(before),
            after: file(after),
            ..Change::default()
        };
        // Workspace /w's newest change needs `a` (its content before), though it is the
        // oldest blob; /v's older change's blobs may go.
        super::super::record_done(&d, &lock, vec![change("/v", &b1, &c)]).expect("v");
        super::super::record_done(&d, &lock, vec![change("/w", &a, &b1)]).expect("w");
        super::super::record_done(&d, &lock, vec![change("/v", &b1, &b1)]).expect("v2");
        let mut b = Budget::new(&d, Some(2 << 20));
        let _ = b.store(b"small", false).expect("store");
        assert_eq!(b.expired, vec![c.clone()], "only c may go");
        assert!(super::super::has_backup(&d, &a));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_margin_scales_with_the_file_system() {
        assert_eq!(disk_margin(100 << 20), 16 << 20);
        assert_eq!(disk_margin(10 << 30), 512 << 20);
        assert_eq!(disk_margin(1 << 40), 1 << 30);
    }
}
