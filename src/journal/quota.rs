//! The backup store's bounds (issue 22 item 7): it never grows past the policy's
//! `[undo] max_state_bytes` (allocated bytes of `<state>/backups`), no workspace takes more
//! than `[undo] max_workspace_bytes` of it, and it never fills the file system it is on (a
//! content is not stored if that would leave less than [`disk_margin`] free there).
//!
//! A [`Budget`] stores the blobs of one run (or one tool call) of one workspace. When a blob
//! does not fit, the oldest blobs are expired first: ordered by the time of the newest journal
//! change that refers to them (for a content only a snapshot index refers to: when it was
//! stored). Never expired: the contents the newest change (group) of each workspace refers
//! to, so that the most recent undo keeps working, and the blobs of the run in progress (the
//! budget's protected set). When that is not enough the content is not stored
//! ([`Stored::NotBackedUp`], with the reason): the caller records it (journal, history) or
//! refuses.
//!
//! **Attribution.** Blobs are content-addressed and shared. A blob is charged, whole, to
//! every workspace that claims it: a workspace claims a blob when it stores it or finds it
//! already stored (a snapshot of its files, a file tool's backup); rebuilt from scratch, the
//! claims are exactly the references of each workspace's journal changes and snapshot index.
//! A workspace over its limit gives up its claims, oldest first (never those of its own
//! newest change or of the run in progress); a blob no workspace claims any more is removed,
//! unless some workspace's newest change needs it. So a busy workspace can expire only what
//! it alone holds: another workspace's backups, even of the same content, stay.
//!
//! **The journal counts.** Its lines and index (`journal::compact::bytes`) are counted as used
//! against `max_state_bytes` when a content is stored; the journal keeps itself within a
//! quarter of it (`journal::compact`), knowing the bound from [`Budget::for_workspace`].
//!
//! **The usage record** (`<state>/journal/usage`, a cache): which blobs the store holds, their
//! allocated bytes, when stored and who claims them, as an append-only list of lines replayed
//! when a budget first needs it (instead of listing and `stat`-ing the whole store at each
//! run). Appends take `<state>/journal/usage.lock`; the record is rewritten compactly when it
//! grows to more than twice the store, and rebuilt from the store, the journal and the
//! snapshot indexes when missing, unreadable or older than an hour (what a crash between a
//! blob's write and its line left uncounted is counted again then; the free-space margin is
//! checked on the real file system at every store whatever the record says).
//!
//! Over 1,000 lines: the accounting (~850 lines: attribution, expiry, the usage record) and
//! its unit tests (~260); the seam, when it grows, is the usage record (`journal/usage`) apart
//! from the budget that spends it.

use super::{Change, JournalError, PathState, blob, io, private_dir, sha256_hex};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The free space to leave on the state directory's file system: 5% of its size, at least
/// 16 MiB and at most 1 GiB.
pub fn disk_margin(fs_size: u64) -> u64 {
    (fs_size / 20).clamp(16 << 20, 1 << 30)
}

/// A workspace's key in the usage record (and the name of its snapshot index): the first 16
/// hex digits of the SHA-256 of its path.
pub fn workspace_key(ws: &Path) -> String {
    sha256_hex(ws.as_os_str().as_encoded_bytes())[..16].to_string()
}

/// The policy's bounds for a workspace's budget (`[undo] max_state_bytes`, and the
/// workspace's share: `max_workspace_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The whole store's.
    pub total: u64,
    /// One workspace's.
    pub workspace: u64,
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

/// The first line of the usage record: its format, when it was rebuilt, the bytes of what is
/// in the store besides blobs (markers, a crashed writer's temporary file).
const HEADER: &str = "gwusage1";
/// Rebuilt when older than this (seconds).
const REBUILD_AFTER: u64 = 3600;
/// Lines buffered before they are appended.
const PENDING_MAX: usize = 256;

/// One blob in the usage record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Rec {
    /// Allocated bytes.
    bytes: u64,
    /// When stored, seconds since the epoch.
    time: u64,
    /// The workspaces (keys) that claim it.
    owners: Vec<String>,
}

/// The store's usage, as the record says.
#[derive(Clone, Debug, Default)]
struct Usage {
    blobs: HashMap<String, Rec>,
    /// Bytes of non-blob entries (at the last rebuild).
    other: u64,
    /// When it was last rebuilt.
    built: u64,
    /// The bytes of all blobs and others.
    total: u64,
    /// Per workspace: the bytes of the blobs it claims.
    per_ws: HashMap<String, u64>,
    /// Lines in the record (for compaction).
    lines: usize,
}

fn is_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_key(s: &str) -> bool {
    s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Usage {
    fn ws_used(&self, key: &str) -> u64 {
        self.per_ws.get(key).copied().unwrap_or(0)
    }

    /// A blob is (now) in the store, with these owners added.
    fn add(&mut self, id: &str, bytes: u64, time: u64, owners: &[String]) {
        let rec = self.blobs.entry(id.to_string()).or_default();
        // Stored again (another run's write renamed over it): its size now.
        self.total = self.total.saturating_sub(rec.bytes) + bytes;
        for o in &rec.owners {
            let w = self.per_ws.entry(o.clone()).or_default();
            *w = w.saturating_sub(rec.bytes) + bytes;
        }
        rec.bytes = bytes;
        rec.time = time;
        for o in owners {
            if !rec.owners.contains(o) {
                rec.owners.push(o.clone());
                *self.per_ws.entry(o.clone()).or_default() += bytes;
            }
        }
    }

    /// `key` claims the blob `id` (if the store holds it): true if that is new.
    fn claim(&mut self, id: &str, key: &str) -> bool {
        let Some(rec) = self.blobs.get_mut(id) else {
            return false;
        };
        if rec.owners.iter().any(|o| o == key) {
            return false;
        }
        rec.owners.push(key.to_string());
        *self.per_ws.entry(key.to_string()).or_default() += rec.bytes;
        true
    }

    /// `key` gives up its claim on `id`: the owners left.
    fn release(&mut self, id: &str, key: &str) -> usize {
        let Some(rec) = self.blobs.get_mut(id) else {
            return 0;
        };
        if let Some(i) = rec.owners.iter().position(|o| o == key) {
            rec.owners.swap_remove(i);
            let w = self.per_ws.entry(key.to_string()).or_default();
            *w = w.saturating_sub(rec.bytes);
        }
        rec.owners.len()
    }

    /// The blob `id` is gone from the store.
    fn remove(&mut self, id: &str) -> Option<Rec> {
        let rec = self.blobs.remove(id)?;
        self.total = self.total.saturating_sub(rec.bytes);
        for o in &rec.owners {
            let w = self.per_ws.entry(o.clone()).or_default();
            *w = w.saturating_sub(rec.bytes);
        }
        Some(rec)
    }

    /// Applies one line of the record; None if it is not one.
    fn apply(&mut self, line: &str) -> Option<()> {
        let mut f = line.split(' ');
        let (op, id) = (f.next()?, f.next()?);
        if !is_id(id) {
            return None;
        }
        match op {
            "+" => {
                let bytes = f.next()?.parse().ok()?;
                let time = f.next()?.parse().ok()?;
                let owners: Vec<String> = match f.next()? {
                    "-" => Vec::new(),
                    o => o.split(',').map(str::to_string).collect(),
                };
                if !owners.iter().all(|o| is_key(o)) {
                    return None;
                }
                self.add(id, bytes, time, &owners);
            }
            "c" | "r" => {
                let key = f.next()?;
                if !is_key(key) {
                    return None;
                }
                if op == "c" {
                    self.claim(id, key);
                } else {
                    self.release(id, key);
                }
            }
            "x" => {
                self.remove(id);
            }
            _ => return None,
        }
        if f.next().is_some() {
            return None;
        }
        self.lines += 1;
        Some(())
    }

    /// Reads a record: None if it is damaged (then it is rebuilt).
    fn parse(text: &str) -> Option<Usage> {
        // A torn last line (a crash while appending) is damage too.
        if !text.ends_with('\n') {
            return None;
        }
        let mut lines = text.lines();
        let mut h = lines.next()?.split(' ');
        if h.next()? != HEADER {
            return None;
        }
        let built = h.next()?.parse().ok()?;
        let other = h.next()?.parse().ok()?;
        if h.next().is_some() {
            return None;
        }
        let mut u = Usage {
            built,
            other,
            total: other,
            ..Usage::default()
        };
        for l in lines {
            u.apply(l)?;
        }
        Some(u)
    }

    /// The record's compact text: the header, then one line per blob.
    fn render(&self) -> String {
        let mut out = format!("{HEADER} {} {}\n", self.built, self.other);
        let mut ids: Vec<&String> = self.blobs.keys().collect();
        ids.sort();
        for id in ids {
            let r = &self.blobs[id];
            let owners = if r.owners.is_empty() {
                "-".to_string()
            } else {
                r.owners.join(",")
            };
            out.push_str(&format!("+ {id} {} {} {owners}\n", r.bytes, r.time));
        }
        out
    }
}

fn usage_path(state_dir: &Path) -> PathBuf {
    state_dir.join("journal").join("usage")
}

/// Runs `f` with the usage record's lock held.
fn locked<T>(
    state_dir: &Path,
    f: impl FnOnce() -> Result<T, JournalError>,
) -> Result<T, JournalError> {
    let lock = super::lock_named(state_dir, "usage.lock")?;
    let r = f();
    drop(lock);
    r
}

/// Appends lines to the record (built first if there is none).
fn append(state_dir: &Path, lines: &[String]) -> Result<(), JournalError> {
    if lines.is_empty() {
        return Ok(());
    }
    let p = usage_path(state_dir);
    locked(state_dir, || {
        let open = || std::fs::OpenOptions::new().append(true).open(&p);
        let mut f = match open() {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                write_usage(state_dir, &rebuild(state_dir)?)?;
                open().map_err(io("opening", &p))?
            }
            Err(e) => return Err(io("opening", &p)(e)),
        };
        let mut text = lines.join("\n");
        text.push('\n');
        if let Err(e) = f.write_all(text.as_bytes()) {
            // Half a line would make it unreadable: rebuilt by the next reader instead.
            let _ = std::fs::remove_file(&p);
            return Err(io("appending to", &p)(e));
        }
        Ok(())
    })
}

/// Writes the record whole (a cache: not synced).
fn write_usage(state_dir: &Path, u: &Usage) -> Result<(), JournalError> {
    super::write_whole(
        &state_dir.join("journal"),
        "usage",
        u.render().as_bytes(),
        false,
    )
}

/// The store's usage: the record replayed; rebuilt when missing, damaged or old, rewritten
/// compactly when long.
fn load(state_dir: &Path) -> Result<Usage, JournalError> {
    let p = usage_path(state_dir);
    locked(state_dir, || {
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            // Not UTF-8: damaged, rebuilt.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => None,
            Err(e) => return Err(io("reading", &p)(e)),
        };
        let now = super::now();
        let fresh = |u: &Usage| u.built <= now + 60 && now.saturating_sub(u.built) < REBUILD_AFTER;
        match text.as_deref().and_then(Usage::parse).filter(fresh) {
            Some(u) => {
                if u.lines > 2 * u.blobs.len() + 4096 {
                    write_usage(state_dir, &u)?;
                }
                Ok(u)
            }
            None => {
                let u = rebuild(state_dir)?;
                write_usage(state_dir, &u)?;
                Ok(u)
            }
        }
    })
}

/// The files of a snapshot index (only what attribution needs).
#[derive(serde::Deserialize)]
struct IndexFiles {
    files: Vec<(serde::de::IgnoredAny, IndexEntry)>,
}

#[derive(serde::Deserialize)]
struct IndexEntry {
    sha256: String,
}

/// The usage from scratch: the store listed and `stat`ed; claims from each workspace's
/// journal changes and snapshot index (`<state>/snapshots/<key>.json`).
fn rebuild(state_dir: &Path) -> Result<Usage, JournalError> {
    let dir = state_dir.join("backups");
    let mut u = Usage {
        built: super::now(),
        ..Usage::default()
    };
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => Some(rd),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("listing", &dir)(e)),
    };
    for e in rd.into_iter().flatten().flatten() {
        let name = e.file_name();
        let Ok(m) = e.metadata() else { continue };
        let bytes = blob::allocated(&m);
        match name.to_str() {
            Some(n) if is_id(n) && m.is_file() => {
                let mtime = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs());
                u.add(n, bytes, mtime, &[]);
            }
            // Temporary files of writers count against the quota too, but are not expired.
            _ => u.other += bytes,
        }
    }
    u.total += u.other;
    for (c, _) in super::changes(state_dir)? {
        if let Some(ws) = &c.workspace {
            let key = workspace_key(ws);
            for id in blob_ids(&c) {
                u.claim(id, &key);
            }
        }
    }
    let snaps = state_dir.join("snapshots");
    if let Ok(rd) = std::fs::read_dir(&snaps) {
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(key) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if !is_key(key) || !e.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            // An unreadable index claims nothing (the snapshot rewrites it).
            let Ok(data) = std::fs::read(e.path()) else {
                continue;
            };
            let Ok(idx) = serde_json::from_slice::<IndexFiles>(&data) else {
                continue;
            };
            for (_, f) in &idx.files {
                u.claim(&f.sha256, key);
            }
        }
    }
    Ok(u)
}

/// Records that these blobs were removed from the store (by the backup retention). When
/// that fails the record is dropped instead: the next reader rebuilds it from the store.
pub fn forget(state_dir: &Path, ids: &[String]) {
    let lines: Vec<String> = ids.iter().map(|id| format!("x {id}")).collect();
    if append(state_dir, &lines).is_err() {
        let _ = std::fs::remove_file(usage_path(state_dir));
    }
}

/// The workspace a budget stores for.
struct Ws {
    path: PathBuf,
    key: String,
    limit: Option<u64>,
}

/// Stores blobs within the store's bounds.
pub struct Budget {
    dir: PathBuf,
    state_dir: PathBuf,
    limit: Option<u64>,
    ws: Option<Ws>,
    /// The usage record, read when first needed.
    usage: Option<Usage>,
    /// Lines for the record not appended yet.
    pending: Vec<String>,
    protected: HashSet<String>,
    /// The blobs this budget expired (removed from the store).
    pub expired: Vec<String>,
    /// The journal's changes, read when expiry first needs them (once per budget: not for
    /// every content stored while the store is full).
    changes: Option<std::sync::Arc<Vec<Change>>>,
    /// The journal's bytes, read when the quota first needs them.
    journal_bytes: Option<u64>,
    /// The blobs this budget claimed.
    claimed: HashSet<String>,
}

fn human(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.1} GiB", n as f64 / f64::from(1u32 << 30))
    } else {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        // A cache: a failed append removed the record, and the next reader rebuilds it.
        let _ = self.flush();
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
            ws: None,
            usage: None,
            pending: Vec::new(),
            protected: HashSet::new(),
            expired: Vec::new(),
            changes: None,
            journal_bytes: None,
            claimed: HashSet::new(),
        }
    }

    /// The journal's changes (read once).
    fn journal(&mut self) -> Result<std::sync::Arc<Vec<Change>>, JournalError> {
        if let Some(c) = &self.changes {
            return Ok(c.clone());
        }
        let c = std::sync::Arc::new(journal_changes(&self.state_dir)?);
        self.changes = Some(c.clone());
        Ok(c)
    }

    /// A budget for workspace `ws` within `limits` (a workspace limit not below the total is
    /// the total's: the store's quota is what binds, and names itself when it does).
    pub fn for_workspace(state_dir: &Path, ws: &Path, limits: Limits) -> Budget {
        // The journal is pruned within its share of the same bound (`journal::compact`).
        super::compact::set_bound(state_dir, limits.total);
        let own = (limits.workspace < limits.total).then_some(limits.workspace);
        Budget::new(state_dir, Some(limits.total)).workspace(ws, own)
    }

    /// Stores for workspace `ws` (the one its journal changes record): what it stores or finds
    /// stored is charged to it, at most `limit` bytes (`[undo] max_workspace_bytes`; None:
    /// no limit of its own).
    pub fn workspace(mut self, ws: &Path, limit: Option<u64>) -> Budget {
        self.ws = Some(Ws {
            path: ws.to_path_buf(),
            key: workspace_key(ws),
            limit,
        });
        self
    }

    /// These blobs are not expired by this budget (the run in progress needs them).
    pub fn protect(&mut self, ids: impl IntoIterator<Item = String>) {
        self.protected.extend(ids);
    }

    /// Appends the pending lines to the record.
    pub fn flush(&mut self) -> Result<(), JournalError> {
        let lines = std::mem::take(&mut self.pending);
        append(&self.state_dir, &lines)
    }

    fn push(&mut self, line: String) -> Result<(), JournalError> {
        self.pending.push(line);
        if self.pending.len() >= PENDING_MAX {
            self.flush()?;
        }
        Ok(())
    }

    /// The usage record, read (once) after this budget's pending lines are in it.
    fn usage(&mut self) -> Result<&mut Usage, JournalError> {
        if self.usage.is_none() {
            self.flush()?;
            self.usage = Some(load(&self.state_dir)?);
        }
        Ok(self.usage.get_or_insert_default())
    }

    /// The workspace claims the stored blob `id` (found in the store, or told by a file
    /// tool that it is there): charged to it from now on, and not expired by this budget.
    pub fn claim(&mut self, id: &str) -> Result<(), JournalError> {
        // Once per budget: a run of many files with one content (empty files) claims it once,
        // not one line of the record per file.
        if !is_id(id) || !self.claimed.insert(id.to_string()) {
            return Ok(());
        }
        self.protected.insert(id.to_string());
        let Some(key) = self.ws.as_ref().map(|w| w.key.clone()) else {
            return Ok(());
        };
        match self.usage.as_mut() {
            Some(u) if u.blobs.contains_key(id) => {
                if u.claim(id, &key) {
                    self.push(format!("c {id} {key}"))?;
                }
            }
            Some(_) => {
                // In the store but not in the record (written by an older build, or a crash
                // came between): counted from now on.
                let Ok(m) = std::fs::symlink_metadata(self.dir.join(id)) else {
                    return Ok(());
                };
                let bytes = blob::allocated(&m);
                let now = super::now();
                if let Some(u) = self.usage.as_mut() {
                    u.add(id, bytes, now, std::slice::from_ref(&key));
                }
                self.push(format!("+ {id} {bytes} {now} {key}"))?;
            }
            // Resolved when the record is read.
            None => self.push(format!("c {id} {key}"))?,
        }
        Ok(())
    }

    /// Stores `data` (if not there yet and if it fits), synced when `sync`.
    pub fn store(&mut self, data: &[u8], sync: bool) -> Result<Stored, JournalError> {
        private_dir(&self.dir)?;
        let id = sha256_hex(data);
        let path = self.dir.join(&id);
        if path.exists() {
            self.claim(&id)?;
            return Ok(Stored::Kept(id));
        }
        let enc = blob::encode(data).map_err(io("compressing a backup into", &path))?;
        // What it will occupy: whole 4 KiB blocks.
        let need = (enc.len() as u64).div_ceil(4096) * 4096;
        if let Some(reason) = self.make_room(need)? {
            return Ok(Stored::NotBackedUp { id, reason });
        }
        super::write_whole(&self.dir, &id, &enc, sync)?;
        let now = super::now();
        let owners: Vec<String> = self.ws.iter().map(|w| w.key.clone()).collect();
        if let Some(u) = self.usage.as_mut() {
            u.add(&id, need, now, &owners);
        }
        let o = if owners.is_empty() {
            "-".to_string()
        } else {
            owners.join(",")
        };
        self.push(format!("+ {id} {need} {now} {o}"))?;
        self.protected.insert(id.clone());
        Ok(Stored::Kept(id))
    }

    /// Makes room for `need` more bytes: None when there is, else why not.
    fn make_room(&mut self, need: u64) -> Result<Option<String>, JournalError> {
        if let Some((key, limit)) = self
            .ws
            .as_ref()
            .and_then(|w| Some((w.key.clone(), w.limit?)))
        {
            let used = self.usage()?.ws_used(&key);
            if used + need > limit {
                self.expire_workspace(used + need - limit)?;
            }
            let used = self.usage()?.ws_used(&key);
            if used + need > limit {
                let ws = self.ws.as_ref().map(|w| w.path.display().to_string());
                return Ok(Some(format!(
                    "the workspace's share of the backup store is full ([undo] max_workspace_bytes = {}; {} holds {}, this content needs {}, and the rest belongs to its newest change or to this run); raise max_workspace_bytes in the policy",
                    human(limit),
                    ws.unwrap_or_default(),
                    human(used),
                    human(need)
                )));
            }
        }
        if let Some(limit) = self.limit {
            // The journal counts too (its lines and index: `journal::compact` keeps it within
            // its share).
            let journal = *self
                .journal_bytes
                .get_or_insert_with(|| super::compact::bytes(&self.state_dir));
            let used = self.usage()?.total + journal;
            if used + need > limit {
                self.expire(used + need - limit)?;
            }
            let used = self.usage()?.total + journal;
            if used + need > limit {
                return Ok(Some(format!(
                    "the backup store is at its quota ([undo] max_state_bytes = {}; it holds {}, this content needs {}, and the rest belongs to the newest change of a workspace or to this run); raise max_state_bytes in the policy",
                    human(limit),
                    human(used),
                    human(need)
                )));
            }
        }
        let (avail, size) = self.free()?;
        let margin = disk_margin(size);
        if avail < need + margin {
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

    /// Removes a blob from the store and the record.
    fn remove_blob(&mut self, id: &str) -> Result<u64, JournalError> {
        match std::fs::remove_file(self.dir.join(id)) {
            Ok(()) => {}
            // Expired meanwhile by another run.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("expiring the backup", &self.dir.join(id))(e)),
        }
        let bytes = self
            .usage
            .as_mut()
            .and_then(|u| u.remove(id))
            .map_or(0, |r| r.bytes);
        self.push(format!("x {id}"))?;
        self.expired.push(id.to_string());
        Ok(bytes)
    }

    /// Expires blobs, oldest first, until `bytes` are freed or none may go.
    fn expire(&mut self, bytes: u64) -> Result<(), JournalError> {
        self.usage()?;
        let changes = self.journal()?;
        let newest = newest_groups(&changes);
        let mut keep: HashSet<&str> = newest.values().flatten().map(String::as_str).collect();
        keep.extend(self.protected.iter().map(String::as_str));
        let last = last_ref(&changes);
        let Some(u) = self.usage.as_ref() else {
            return Ok(());
        };
        let order = oldest_first(u, &last, |id, _| !keep.contains(id));
        let mut freed = 0;
        for id in order {
            if freed >= bytes {
                break;
            }
            freed += self.remove_blob(&id)?;
        }
        Ok(())
    }

    /// The workspace gives up its claims, oldest first, until `bytes` less are charged to
    /// it: never on what its newest change or this run needs; a blob nobody claims any more
    /// is removed unless some workspace's newest change needs it.
    fn expire_workspace(&mut self, bytes: u64) -> Result<(), JournalError> {
        let Some(key) = self.ws.as_ref().map(|w| w.key.clone()) else {
            return Ok(());
        };
        let changes = self.journal()?;
        let newest = newest_groups(&changes);
        let empty = HashSet::new();
        let own = newest.get(&key).unwrap_or(&empty);
        let needed: HashSet<&str> = newest.values().flatten().map(String::as_str).collect();
        let last = last_ref(&changes);
        self.usage()?;
        let Some(u) = self.usage.as_ref() else {
            return Ok(());
        };
        let protected = &self.protected;
        let order = oldest_first(u, &last, |id, r| {
            r.owners.contains(&key) && !own.contains(id) && !protected.contains(id)
        });
        let mut freed = 0;
        for id in order {
            if freed >= bytes {
                break;
            }
            let u = self.usage()?;
            freed += u.blobs.get(&id).map_or(0, |r| r.bytes);
            let left = u.release(&id, &key);
            self.push(format!("r {id} {key}"))?;
            if left == 0 && !needed.contains(id.as_str()) {
                self.remove_blob(&id)?;
            }
        }
        Ok(())
    }
}

/// The journal's changes (for expiry).
fn journal_changes(state_dir: &Path) -> Result<Vec<Change>, JournalError> {
    Ok(super::changes(state_dir)?
        .into_iter()
        .map(|(c, _)| c)
        .collect())
}

/// For each blob a change refers to: the time of the newest such change.
fn last_ref(changes: &[Change]) -> HashMap<&str, u64> {
    let mut last = HashMap::new();
    for c in changes {
        for id in blob_ids(c) {
            last.insert(id, c.time);
        }
    }
    last
}

/// The blobs of the record that `may_go`, oldest first: by the newest change that refers to
/// them, else by when they were stored.
fn oldest_first(
    u: &Usage,
    last: &HashMap<&str, u64>,
    may_go: impl Fn(&str, &Rec) -> bool,
) -> Vec<String> {
    let mut order: Vec<(u64, &String)> = u
        .blobs
        .iter()
        .filter(|(id, r)| may_go(id, r))
        .map(|(id, r)| (last.get(id.as_str()).copied().unwrap_or(r.time), id))
        .collect();
    order.sort();
    order.into_iter().map(|(_, id)| id.clone()).collect()
}

/// The ids of a change's file contents.
fn blob_ids(c: &Change) -> impl Iterator<Item = &str> {
    [&c.before, &c.after].into_iter().filter_map(|s| match s {
        PathState::File { sha256, .. } => Some(sha256.as_str()),
        _ => None,
    })
}

/// The blobs of the newest change (its whole group) of each workspace, by workspace key
/// (changes from journals that did not record workspaces: under ""): what the next
/// `gateway undo` there needs.
fn newest_groups(changes: &[Change]) -> HashMap<String, HashSet<String>> {
    let key = |c: &Change| {
        c.workspace
            .as_deref()
            .map(workspace_key)
            .unwrap_or_default()
    };
    let tag = |c: &Change| c.group.clone().unwrap_or_else(|| format!("#{}", c.id));
    let mut newest: HashMap<String, String> = HashMap::new();
    for c in changes {
        newest.insert(key(c), tag(c));
    }
    let mut out: HashMap<String, HashSet<String>> = HashMap::new();
    for c in changes {
        let k = key(c);
        if newest.get(&k) == Some(&tag(c)) {
            out.entry(k)
                .or_default()
                .extend(blob_ids(c).map(str::to_string));
        }
    }
    out
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

    const MIB: u64 = 1 << 20;

    fn kept(s: Stored) -> String {
        match s {
            Stored::Kept(id) => id,
            s => panic!("{s:?}"),
        }
    }

    fn file(id: &str) -> PathState {
        PathState::File {
            sha256: id.into(),
            mode: 0o644,
            size: MIB,
        }
    }

    /// A change in workspace `ws` from content `before` to `after`.
    fn change(ws: &str, before: &str, after: &str) -> Change {
        Change {
            tool: "exec".into(),
            path: PathBuf::from(ws).join("f"),
            workspace: Some(PathBuf::from(ws)),
            before: file(before),
            after: file(after),
            ..Change::default()
        }
    }

    #[test]
    fn shared_blobs_count_for_every_workspace_that_claims_them_and_the_record_rebuilds() {
        let d = state("attrib");
        let (w, v) = (Path::new("/w"), Path::new("/v"));
        let (kw, kv) = (workspace_key(w), workspace_key(v));
        let mut bw = Budget::new(&d, None).workspace(w, None);
        let a = kept(bw.store(&random(1 << 20, 1), false).expect("a"));
        let s = kept(bw.store(&random(1 << 20, 2), false).expect("s"));
        drop(bw);
        // /v stores the same content (found there: a claim) and one of its own.
        let mut bv = Budget::new(&d, None).workspace(v, None);
        assert_eq!(kept(bv.store(&random(1 << 20, 2), false).expect("s")), s);
        let b = kept(bv.store(&random(1 << 20, 3), false).expect("b"));
        drop(bv);
        let u = load(&d).expect("load");
        let size = |id: &str| u.blobs[id].bytes;
        assert_eq!(u.ws_used(&kw), size(&a) + size(&s), "/w: a and s");
        assert_eq!(
            u.ws_used(&kv),
            size(&s) + size(&b),
            "/v: s and b, s counted for both"
        );
        assert_eq!(u.total, size(&a) + size(&s) + size(&b), "s stored once");
        let on_disk: u64 = std::fs::read_dir(d.join("backups"))
            .expect("ls")
            .flatten()
            .map(|e| blob::allocated(&e.metadata().expect("stat")))
            .sum();
        assert_eq!(u.total, on_disk, "the record counts what the store holds");
        // Rebuilt from the references (journal changes, snapshot indexes) when the record is
        // gone or damaged: the same attribution.
        let lock = super::super::lock(&d).expect("lock");
        super::super::record_done(&d, &lock, vec![change("/w", &a, &s)]).expect("w");
        std::fs::create_dir_all(d.join("snapshots")).expect("mkdir");
        let index = format!(
            r#"{{"files":[["x",{{"size":1,"mtime_ns":0,"mode":420,"sha256":"{s}"}}],["y",{{"size":1,"mtime_ns":0,"mode":420,"sha256":"{b}"}}]],"dirs":[],"links":[]}}"#
        );
        std::fs::write(d.join("snapshots").join(format!("{kv}.json")), index).expect("idx");
        let log = d.join("journal/usage");
        for damage in ["remove", "garbage", "torn"] {
            match damage {
                "remove" => std::fs::remove_file(&log).expect("rm"),
                "garbage" => std::fs::write(
                    &log,
                    "gwusage1 1 0
+ nonsense
",
                )
                .expect("w"),
                _ => {
                    let mut t = u.render();
                    t.push_str("c 12");
                    std::fs::write(&log, t).expect("w");
                }
            }
            let r = load(&d).expect("rebuilt");
            assert_eq!(r.ws_used(&kw), u.ws_used(&kw), "{damage}");
            assert_eq!(r.ws_used(&kv), u.ws_used(&kv), "{damage}");
            assert_eq!(r.total, u.total, "{damage}");
        }
        // A record older than an hour is rebuilt too (what a crash left uncounted).
        let mut old = u.clone();
        old.built = super::super::now() - 2 * REBUILD_AFTER;
        old.blobs.remove(&b);
        std::fs::write(&log, old.render()).expect("w");
        assert_eq!(load(&d).expect("load").total, u.total);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_workspace_over_its_share_expires_only_what_it_alone_holds() {
        let d = state("wsexpire");
        let lock = super::super::lock(&d).expect("lock");
        let limit = 3 * MIB + (64 << 10);
        let (w, v) = (Path::new("/w"), Path::new("/v"));
        let budget = |ws: &Path| Budget::new(&d, None).workspace(ws, Some(limit));
        // /v holds s (in an older change only) and vb.
        let mut bv = budget(v);
        let s = kept(bv.store(&random(1 << 20, 1), false).expect("s"));
        let vb = kept(bv.store(&random(1 << 20, 2), false).expect("vb"));
        drop(bv);
        super::super::record_done(&d, &lock, vec![change("/v", &s, &vb)]).expect("v1");
        super::super::record_done(&d, &lock, vec![change("/v", &vb, &vb)]).expect("v2");
        // /w: s too (older change), then a1 -> a2 (its newest change).
        let mut bw = budget(w);
        assert_eq!(kept(bw.store(&random(1 << 20, 1), false).expect("s")), s);
        let a1 = kept(bw.store(&random(1 << 20, 3), false).expect("a1"));
        let a2 = kept(bw.store(&random(1 << 20, 4), false).expect("a2"));
        drop(bw);
        super::super::record_done(&d, &lock, vec![change("/w", &s, &a1)]).expect("w1");
        super::super::record_done(&d, &lock, vec![change("/w", &a1, &a2)]).expect("w2");
        let kv = workspace_key(v);
        let v_before = load(&d).expect("load").ws_used(&kv);
        // /w is full: a3 makes it give up s, which /v still claims: the blob stays.
        let mut bw = budget(w);
        let a3 = kept(bw.store(&random(1 << 20, 5), false).expect("a3"));
        assert!(bw.expired.is_empty(), "nothing removed: {:?}", bw.expired);
        assert!(super::super::has_backup(&d, &s), "/v's backup stays");
        // Its newest change (a1, a2) and this run's (a3) are kept: a4 is not backed up.
        match bw.store(&random(1 << 20, 6), false).expect("a4") {
            Stored::NotBackedUp { reason, .. } => {
                assert!(reason.contains("max_workspace_bytes"), "{reason}")
            }
            s => panic!("a4 was stored: {s:?}"),
        }
        drop(bw);
        let u = load(&d).expect("load");
        assert_eq!(u.ws_used(&kv), v_before, "/v is charged as before");
        assert!(u.ws_used(&workspace_key(w)) <= limit);
        assert!(!u.blobs[&s].owners.contains(&workspace_key(w)));
        // Once a2 -> a3 is its newest change, a1 is held by /w alone and needed by no newest
        // change: storing a4 removes it from the store.
        super::super::record_done(&d, &lock, vec![change("/w", &a2, &a3)]).expect("w3");
        let mut bw = budget(w);
        kept(bw.store(&random(1 << 20, 6), false).expect("a4"));
        assert_eq!(bw.expired, vec![a1.clone()]);
        drop(bw);
        assert!(!super::super::has_backup(&d, &a1));
        for id in [&s, &vb, &a2, &a3] {
            assert!(super::super::has_backup(&d, id), "{id}");
        }
        // The record still counts exactly what the store holds.
        let u = load(&d).expect("load");
        let r = rebuild(&d).expect("rebuild");
        assert_eq!(u.total, r.total);
        let mut ids: Vec<&String> = u.blobs.keys().collect();
        let mut want: Vec<&String> = r.blobs.keys().collect();
        ids.sort();
        want.sort();
        assert_eq!(ids, want);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_margin_scales_with_the_file_system() {
        assert_eq!(disk_margin(100 << 20), 16 << 20);
        assert_eq!(disk_margin(10 << 30), 512 << 20);
        assert_eq!(disk_margin(1 << 40), 1 << 30);
    }
}
