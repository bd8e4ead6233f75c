//! The audit log: one canonical JSON record per line in `<state>/audit/log.jsonl`, each
//! holding the hash of the one before (`prev`), an RFC 6962 Merkle tree over the lines, and
//! signed checkpoints (C2SP tlog-checkpoint notes, Ed25519) in `<state>/audit/checkpoints`.
//!
//! Appending (one process or many): under an exclusive `flock` on `<state>/audit/lock`, the
//! writer checks that the log still ends where it last saw it (else it reads what others
//! appended), writes the record with one `write` to the `O_APPEND` file, and `fsync`s it;
//! only then is a checkpoint covering it appended and `fsync`ed. So a checkpoint never
//! commits to records that are not on disk, and a crash loses at most the record being
//! written (the next writer finds a torn last line and refuses, naming it). In batch mode
//! (the daemon), records are written one by one but synced and checkpointed every N records
//! or T seconds; a power loss can lose the records since the last sync, a crash of the
//! process loses nothing written.
//!
//! `<state>/audit/head` caches the tree's compact range so that a one-shot append does not
//! reread the log; it is checked against the log's length and last line, and rebuilt when it
//! does not match. Verification never reads it.

pub mod artifacts;
pub mod keys;
pub mod merkle;
pub mod note;
pub mod query;
pub mod verify;

use crate::durable::hex;
use merkle::{CompactRange, Hash};
use note::{Checkpoint, Signer};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why an audit operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// File I/O on the state directory.
    #[error("audit: {what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Keys missing, unreadable or not matching the log.
    #[error("audit keys: {0}")]
    Key(String),
    /// The log is damaged where the writer must continue it.
    #[error(
        "audit log {}: {what}; run `gateway log verify` for details (nothing was appended)",
        path.display()
    )]
    Damaged {
        /// The log file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A record could not be encoded.
    #[error("audit: encoding a record: {0}")]
    Encode(#[from] serde_json::Error),
    /// A stored artifact does not hold what its record says.
    #[error(
        "audit artifact {}: {what}; the record's hash stands, the stored copy is not shown",
        path.display()
    )]
    Artifact {
        /// The artifact file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> AuditError + 'a {
    move |source| AuditError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Parses 64 hex digits.
pub fn unhex32(s: &str) -> Option<Hash> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        let v = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        *o = (v(b[2 * i])? << 4) | v(b[2 * i + 1])?;
    }
    Some(out)
}

/// Who made the call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Caller {
    /// The caller's uid.
    pub uid: u32,
    /// The caller's pid.
    pub pid: u32,
    /// Which front end: `cli`, `daemon`, `mcp`, ...
    pub client: String,
}

/// The policy decision, as recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordDecision {
    /// `allow`, `deny` or `ask`.
    pub effect: String,
    /// The rules that decided (ids).
    pub rules: Vec<String>,
    /// Their reasons.
    pub reasons: Vec<String>,
}

/// Size and hash of a stream (after redaction), and where its content is kept.
///
/// The field holding the hash names its algorithm: `blake3` in records written now (BLAKE3
/// keeps up with a pipe; SHA-256 was a quarter of `exec`'s time on a large output), `sha256`
/// in records written before. The artifact id is the same algorithm's hash of the stored
/// content.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StreamDigest {
    /// Bytes.
    pub bytes: u64,
    /// SHA-256, hex (records written before BLAKE3 stream digests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// BLAKE3, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
    /// Artifact id (the hash, by the algorithm of this digest, of the stored content), if
    /// stored.
    pub artifact: Option<String>,
    /// The artifact holds only the first part (the store's per-artifact cap).
    pub artifact_truncated: bool,
}

/// A stream digest's algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestAlg {
    /// SHA-256 (records written before BLAKE3).
    Sha256,
    /// BLAKE3.
    Blake3,
}

impl DigestAlg {
    /// Its name, as the record's field.
    pub fn name(self) -> &'static str {
        match self {
            DigestAlg::Sha256 => "sha256",
            DigestAlg::Blake3 => "blake3",
        }
    }

    /// Hex hash of `data`.
    pub fn hex(self, data: &[u8]) -> String {
        match self {
            DigestAlg::Sha256 => hex(&sha2::Digest::finalize(
                <sha2::Sha256 as sha2::Digest>::new_with_prefix(data),
            )),
            DigestAlg::Blake3 => blake3::hash(data).to_hex().to_string(),
        }
    }
}

impl StreamDigest {
    /// The algorithm and hex hash of the stream (BLAKE3 if the record has it, else SHA-256);
    /// None for a digest naming neither.
    pub fn hash(&self) -> Option<(DigestAlg, &str)> {
        match (&self.blake3, &self.sha256) {
            (Some(b), _) => Some((DigestAlg::Blake3, b)),
            (None, Some(s)) => Some((DigestAlg::Sha256, s)),
            (None, None) => None,
        }
    }
}

/// One audit record. Field order is the canonical order of the JSON line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Record {
    /// Position in the log, from 1.
    pub seq: u64,
    /// Hex `SHA-256(0x00 || previous line)` (the previous record's Merkle leaf hash); 64
    /// zeros for the first record.
    pub prev: String,
    /// When it was appended: RFC 3339, UTC, microseconds.
    pub time: String,
    /// Session id.
    pub session: String,
    /// Who asked.
    pub caller: Caller,
    /// Tool name (`exec`, `scan`, `keys.rotate`, ...).
    pub tool: String,
    /// Arguments, redacted.
    pub args: Vec<String>,
    /// Working directory.
    pub cwd: String,
    /// Policy name.
    pub policy: String,
    /// The decision.
    pub decision: RecordDecision,
    /// For `ask`: whether a person approved.
    pub approved: Option<bool>,
    /// What confinement was really applied (`full`, or what was not).
    pub enforcement: Option<String>,
    /// Exit code, if it exited.
    pub exit_code: Option<i32>,
    /// Signal, if it was killed.
    pub signal: Option<i32>,
    /// Killed by the timeout.
    pub timed_out: bool,
    /// Killed because the caller went away (the daemon's client disconnected) or the broker
    /// was interrupted (`interrupted`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// The signal (2 SIGINT, 15 SIGTERM, 1 SIGHUP) the broker received while the command ran,
    /// which made it kill the command and record the run before exiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<i32>,
    /// The broker died while the command ran (killed by SIGKILL, crashed, power lost): the
    /// record was written from its intent by the next gateway start; the exit status is
    /// unknown.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub broker_died: bool,
    /// Processes the command left behind (outside its process group, without a pid
    /// namespace) that the broker killed when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leftovers_killed: Option<u64>,
    /// Bytes of the command's stdout and stderr the caller did not take (a daemon's client
    /// that stopped reading until the run's deadline, or went away): never waited on past
    /// the run's end; what the command wrote is in `stdout` and `stderr` (their artifacts,
    /// within the policy's `[audit]` limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_undelivered: Option<u64>,
    /// Wall time of the run, milliseconds.
    pub duration_ms: Option<f64>,
    /// Why the broker could not run it (redacted).
    pub error: Option<String>,
    /// What the command read on stdin.
    pub stdin: Option<StreamDigest>,
    /// What it wrote to stdout.
    pub stdout: Option<StreamDigest>,
    /// What it wrote to stderr.
    pub stderr: Option<StreamDigest>,
    /// Secrets found: `place:rule` (never values).
    pub secrets: Vec<String>,
    /// The journal group of the workspace changes this call made (`gateway undo`).
    #[serde(default)]
    pub journal_group: Option<String>,
    /// How many files it created, changed or deleted (when snapshotted).
    #[serde(default)]
    pub files_changed: u64,
    /// SHA-256 of the policy in force (`Policy::sha256`, over its files): on the first record
    /// of a session that pinned its policy (a long-lived front end, a daemon session), and on
    /// a `policy.reload` record (the policy in force after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_sha256: Option<String>,
    /// On a `policy.reload` record: the hash of the policy it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_replaced: Option<String>,
    /// On a `net` record: one connection a command made through the egress proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<NetInfo>,
    /// An `http` call: method, URL (redacted), status, body bytes each way and every hop
    /// (its address and the network rule that decided it). Its response body (redacted)
    /// is `stdout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpRecord>,
    /// An `exec` whose changes were captured: how, and what did not land as it should.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureRecord>,
}

/// How a run's changes were captured (`workspace::capture`), on its `exec` record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CaptureRecord {
    /// `overlay` or `walk`.
    pub mechanism: String,
    /// Why the overlay did not capture the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The change set held instead of applied (`gateway apply ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// Paths not applied (held).
    #[serde(default)]
    pub not_applied: u64,
    /// Paths applied but not undoable.
    #[serde(default)]
    pub not_undoable: u64,
    /// Journal ids of other calls' changes this run's apply overwrote (they changed the
    /// same paths while it ran).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overwrote: Vec<u64>,
}

/// One connection through the egress proxy (a `net` record, written after its command's).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NetInfo {
    /// The `seq` of the command's own (`exec`) record.
    pub command: u64,
    /// `connect`, `http` (a plaintext request forwarded), `socks5`, or `unknown` (the
    /// request could not be read).
    pub protocol: String,
    /// The host as the command named it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The address the proxy connected to (the one it checked), if it connected.
    pub address: Option<String>,
    /// Bytes from the command to the destination.
    pub bytes_up: u64,
    /// Bytes from the destination to the command.
    pub bytes_down: u64,
    /// From accept to close, milliseconds.
    pub duration_ms: f64,
}

/// What an `http` call did, in its audit record (`http` field).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HttpRecord {
    /// The method.
    pub method: String,
    /// The URL asked for (redacted).
    pub url: String,
    /// The final response's status.
    pub status: Option<u16>,
    /// Request body bytes sent, over every hop.
    pub bytes_sent: u64,
    /// Response body bytes received.
    pub bytes_received: u64,
    /// Every request made: the first and each redirect.
    pub hops: Vec<Hop>,
}

/// One request the call made: the first, and one per redirect followed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hop {
    /// The method.
    pub method: String,
    /// The URL (redacted).
    pub url: String,
    /// The address connected to (the one checked; none when refused).
    pub address: Option<String>,
    /// The network rule that decided the destination.
    pub rule: String,
    /// The response's status (none when refused or failed).
    pub status: Option<u16>,
}

/// The current time, RFC 3339 UTC with microseconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

/// Paths inside the audit directory.
pub struct Paths {
    /// `<state>/audit`.
    pub dir: PathBuf,
    /// The log.
    pub log: PathBuf,
    /// Signed checkpoints.
    pub checkpoints: PathBuf,
    /// Key rotation statements.
    pub rotations: PathBuf,
    /// The writers' lock.
    pub lock: PathBuf,
    /// The compact-range cache.
    pub head: PathBuf,
    /// Artifact blobs.
    pub artifacts: PathBuf,
}

impl Paths {
    /// The paths for a state directory.
    pub fn new(state_dir: &Path) -> Paths {
        let dir = state_dir.join("audit");
        Paths {
            log: dir.join("log.jsonl"),
            checkpoints: dir.join("checkpoints"),
            rotations: dir.join("rotations"),
            lock: dir.join("lock"),
            head: dir.join("head"),
            artifacts: dir.join("artifacts"),
            dir,
        }
    }
}

/// Where the log ends: what a writer needs to continue it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Head {
    /// Length of the log file in bytes.
    bytes: u64,
    /// Leaf hash of the last line (zeros when empty), hex.
    last: String,
    /// Size of the tree.
    size: u64,
    /// Compact range roots, hex, largest first.
    roots: Vec<String>,
    /// Tree size of the newest checkpoint.
    checkpointed: u64,
}

/// A parsed head, with the range.
#[derive(Clone, Debug)]
struct Tail {
    bytes: u64,
    last: Hash,
    range: CompactRange,
    checkpointed: u64,
}

impl Tail {
    fn empty() -> Tail {
        Tail {
            bytes: 0,
            last: [0; 32],
            range: CompactRange::new(),
            checkpointed: 0,
        }
    }

    fn to_head(&self) -> Head {
        Head {
            bytes: self.bytes,
            last: hex(&self.last),
            size: self.range.size(),
            roots: self.range.roots().iter().map(|r| hex(r)).collect(),
            checkpointed: self.checkpointed,
        }
    }

    fn from_head(h: &Head) -> Option<Tail> {
        let roots: Option<Vec<Hash>> = h.roots.iter().map(|r| unhex32(r)).collect();
        Some(Tail {
            bytes: h.bytes,
            last: unhex32(&h.last)?,
            range: CompactRange::from_parts(h.size, roots?)?,
            checkpointed: h.checkpointed,
        })
    }
}

/// `seq` and `prev` from the start of a line (`{"seq":N,"prev":"<64 hex>",`), without parsing
/// the rest: verification and catching up need only these (the hashes cover the rest).
pub fn line_prefix(line: &[u8]) -> Option<(u64, Hash)> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 19 || (digits > 1 && rest[0] == b'0') {
        return None;
    }
    let seq: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let rest = rest[digits..].strip_prefix(b",\"prev\":\"")?;
    let prev = unhex32(std::str::from_utf8(rest.get(..64)?).ok()?)?;
    rest.get(64..66).filter(|x| x == b"\",")?;
    Some((seq, prev))
}

/// Every writer signs a checkpoint when the tree reaches a multiple of this size, and keeps
/// those ("milestones") when it compacts the checkpoint file: verification checks that none
/// is missing, and the number of signatures to check stays near `records / MILESTONE`.
pub const MILESTONE: u64 = 1024;

/// When the writer signs a checkpoint.
#[derive(Clone, Copy, Debug)]
pub enum Checkpoints {
    /// After every record, each record synced (one-shot CLI).
    EveryRecord,
    /// After `records` records or `interval`, whichever comes first (the daemon); records are
    /// synced with the checkpoint.
    Batch {
        /// Records per checkpoint.
        records: u64,
        /// Longest time between checkpoints while records arrive.
        interval: Duration,
    },
}

/// An open audit log writer.
pub struct AuditLog {
    paths: Paths,
    origin: String,
    signer: Signer,
    log: File,
    lock: File,
    tail: Tail,
    mode: Checkpoints,
    last_checkpoint: Instant,
    /// `tail` was checked against the file (or built from it).
    tail_checked: bool,
}

impl AuditLog {
    /// Opens (creating on first use) the audit log of a state directory.
    pub fn open(state_dir: &Path, mode: Checkpoints) -> Result<AuditLog, AuditError> {
        let paths = Paths::new(state_dir);
        keys::private_dir(&paths.dir)?;
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&paths.lock)
            .map_err(io("opening", &paths.lock))?;
        let log = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&paths.log)
            .map_err(io("opening", &paths.log))?;
        // Under the writers' lock: the first use creates the origin and the key, and
        // concurrent first uses must agree on them.
        lock.lock().map_err(io("locking", &paths.lock))?;
        let opened = (|| {
            let origin = keys::origin(state_dir)?;
            let rotations = rotation_count(&paths)?;
            let signer = keys::current(state_dir, &origin, rotations)?;
            let tail = read_head(&paths);
            Ok::<_, AuditError>((origin, signer, tail))
        })();
        let _ = lock.unlock();
        let (origin, signer, tail) = opened?;
        Ok(AuditLog {
            paths,
            origin,
            signer,
            log,
            lock,
            tail: tail.unwrap_or_else(Tail::empty),
            mode,
            last_checkpoint: Instant::now(),
            tail_checked: false,
        })
    }

    /// The origin line of this log.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Records in the log (as of the last append).
    pub fn size(&self) -> u64 {
        self.tail.range.size()
    }

    /// Appends a record (its `seq` and `prev` are set here) and, as the mode says, syncs and
    /// signs a checkpoint. Returns the record's `seq`.
    pub fn append(&mut self, rec: &mut Record) -> Result<u64, AuditError> {
        self.lock.lock().map_err(io("locking", &self.paths.lock))?;
        let r = self.append_locked(rec);
        let _ = self.lock.unlock();
        r
    }

    fn append_locked(&mut self, rec: &mut Record) -> Result<u64, AuditError> {
        self.catch_up()?;
        rec.seq = self.tail.range.size() + 1;
        rec.prev = hex(&self.tail.last);
        // Stamped under the lock, so that times never go backwards along the log (queries
        // stop at the first record older than `--since`).
        rec.time = now_rfc3339();
        let mut line = serde_json::to_vec(rec)?;
        let leaf = merkle::leaf_hash(&line);
        line.push(b'\n');
        self.log
            .write_all(&line)
            .map_err(io("appending to", &self.paths.log))?;
        self.tail.bytes += line.len() as u64;
        self.tail.last = leaf;
        self.tail.range.push(leaf);
        let due = self.tail.range.size().is_multiple_of(MILESTONE)
            || match self.mode {
                Checkpoints::EveryRecord => true,
                Checkpoints::Batch { records, interval } => {
                    self.tail.range.size() - self.tail.checkpointed >= records
                        || self.last_checkpoint.elapsed() >= interval
                }
            };
        if due {
            self.checkpoint_locked()?;
        }
        Ok(rec.seq)
    }

    /// For the daemon's timer: in batch mode, signs a checkpoint if records are waiting and
    /// the interval has passed (so the last records of a burst do not wait for the next one).
    /// Returns whether it signed.
    pub fn checkpoint_if_due(&mut self) -> Result<bool, AuditError> {
        let Checkpoints::Batch { interval, .. } = self.mode else {
            return Ok(false);
        };
        if self.tail.range.size() > self.tail.checkpointed
            && self.last_checkpoint.elapsed() >= interval
        {
            self.checkpoint()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Syncs the log and signs a checkpoint of everything in it (if not signed yet).
    pub fn checkpoint(&mut self) -> Result<(), AuditError> {
        self.lock.lock().map_err(io("locking", &self.paths.lock))?;
        let r = self.catch_up().and_then(|_| self.checkpoint_locked());
        let _ = self.lock.unlock();
        r
    }

    fn checkpoint_locked(&mut self) -> Result<(), AuditError> {
        self.last_checkpoint = Instant::now();
        if self.tail.range.size() == self.tail.checkpointed {
            return Ok(());
        }
        // The records first: a checkpoint must never commit to records not on disk.
        self.log
            .sync_data()
            .map_err(io("syncing", &self.paths.log))?;
        let cp = Checkpoint {
            origin: self.origin.clone(),
            size: self.tail.range.size(),
            root: self.tail.range.root(),
        };
        append_synced(&self.paths.checkpoints, &self.signer.sign(&cp.text()))?;
        self.tail.checkpointed = cp.size;
        if cp.size.is_multiple_of(MILESTONE) {
            compact_checkpoints(&self.paths)?;
        }
        write_head(&self.paths, &self.tail);
        Ok(())
    }

    /// Brings the tail up to date with what other writers appended.
    fn catch_up(&mut self) -> Result<(), AuditError> {
        let len = self
            .log
            .metadata()
            .map_err(io("reading", &self.paths.log))?
            .len();
        // The tail this writer appended itself is known good; one read from the head cache is
        // checked against the file once.
        if len == self.tail.bytes && (self.tail_checked || self.tail_matches()?) {
            self.tail_checked = true;
            return Ok(());
        }
        let from = if len > self.tail.bytes && self.tail_matches()? {
            self.tail.clone()
        } else {
            Tail::empty()
        };
        self.tail = scan_from(&self.paths.log, from)?;
        self.tail_checked = true;
        self.tail.checkpointed = self.tail.checkpointed.min(self.tail.range.size());
        if let Some(last) = last_checkpoint_size(&self.paths) {
            self.tail.checkpointed = last.min(self.tail.range.size());
        }
        Ok(())
    }

    /// Whether the line ending at `tail.bytes` hashes to `tail.last`.
    fn tail_matches(&self) -> Result<bool, AuditError> {
        if self.tail.bytes == 0 {
            return Ok(self.tail.range.size() == 0);
        }
        // The last line is within the last 64 KiB (records are ~1 KiB); a longer one is
        // treated as a mismatch, and the tail is rebuilt from the file.
        let start = self.tail.bytes.saturating_sub(64 << 10);
        let mut f = &self.log;
        f.seek(SeekFrom::Start(start))
            .map_err(io("reading", &self.paths.log))?;
        let mut buf = vec![0u8; (self.tail.bytes - start) as usize];
        if f.read_exact(&mut buf).is_err() {
            return Ok(false);
        }
        let Some(body) = buf.strip_suffix(b"\n") else {
            return Ok(false);
        };
        let line = match memchr::memrchr(b'\n', body) {
            Some(i) => &body[i + 1..],
            None if start == 0 => body,
            None => return Ok(false),
        };
        Ok(merkle::leaf_hash(line) == self.tail.last)
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        // The daemon's last records get their checkpoint on shutdown.
        if self.tail.range.size() > self.tail.checkpointed {
            let _ = self.checkpoint();
        }
    }
}

/// Appends `data` to a file and syncs it.
fn append_synced(path: &Path, data: &str) -> Result<(), AuditError> {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(io("opening", path))?;
    f.write_all(data.as_bytes())
        .and_then(|_| f.write_all(b"\n"))
        .map_err(io("appending to", path))?;
    f.sync_data().map_err(io("syncing", path))
}

/// Rewrites the checkpoint file keeping the milestones, the checkpoints at rotation sizes
/// and the newest: each one commits to every record before it, so the dropped ones add no
/// evidence, and verification stays fast on logs checkpointed after every record.
fn compact_checkpoints(paths: &Paths) -> Result<(), AuditError> {
    let data =
        std::fs::read_to_string(&paths.checkpoints).map_err(io("reading", &paths.checkpoints))?;
    let damaged = |line| AuditError::Damaged {
        path: paths.checkpoints.clone(),
        what: format!("line {line} is not part of a signed note"),
    };
    let notes = note::parse_notes(&data).map_err(damaged)?;
    let rotation_sizes: Vec<u64> = match std::fs::read_to_string(&paths.rotations) {
        Ok(s) => note::parse_notes(&s)
            .unwrap_or_default()
            .iter()
            .filter_map(|n| parse_rotation(&n.text).map(|r| r.2))
            .collect(),
        Err(_) => Vec::new(),
    };
    let last = notes.len().saturating_sub(1);
    let mut out = String::new();
    for (i, n) in notes.iter().enumerate() {
        let size = Checkpoint::parse(&n.text).map(|c| c.size);
        let keep =
            i == last || size.is_none_or(|s| s % MILESTONE == 0 || rotation_sizes.contains(&s));
        if keep {
            out.push_str(&n.encode());
            out.push('\n');
        }
    }
    let tmp = paths
        .dir
        .join(format!("checkpoints.{}.tmp", std::process::id()));
    keys::write_new(&tmp, out.as_bytes(), 0o600).or_else(|_| {
        let _ = std::fs::remove_file(&tmp);
        keys::write_new(&tmp, out.as_bytes(), 0o600)
    })?;
    std::fs::rename(&tmp, &paths.checkpoints).map_err(io("replacing", &paths.checkpoints))?;
    if let Ok(d) = File::open(&paths.dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// How many key rotations the log records.
fn rotation_count(paths: &Paths) -> Result<u32, AuditError> {
    match std::fs::read_to_string(&paths.rotations) {
        Ok(s) => note::parse_notes(&s)
            .map(|n| n.len() as u32)
            .map_err(|line| AuditError::Damaged {
                path: paths.rotations.clone(),
                what: format!("line {line} is not part of a signed note"),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io("reading", &paths.rotations)(e)),
    }
}

/// The tree size of the last checkpoint in the file, if any parses.
fn last_checkpoint_size(paths: &Paths) -> Option<u64> {
    let s = std::fs::read_to_string(&paths.checkpoints).ok()?;
    let notes = note::parse_notes(&s).ok()?;
    Checkpoint::parse(&notes.last()?.text).map(|c| c.size)
}

fn read_head(paths: &Paths) -> Option<Tail> {
    let s = std::fs::read(&paths.head).ok()?;
    Tail::from_head(&serde_json::from_slice(&s).ok()?)
}

/// Replaces the head cache (not synced: it is checked on use and rebuilt when stale).
fn write_head(paths: &Paths, tail: &Tail) {
    let Ok(data) = serde_json::to_vec(&tail.to_head()) else {
        return;
    };
    let tmp = paths.dir.join(format!("head.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&data));
    if written.is_err() || std::fs::rename(&tmp, &paths.head).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Reads the log from `from.bytes` on, extending the tail; refuses a torn or broken log.
fn scan_from(path: &Path, mut tail: Tail) -> Result<Tail, AuditError> {
    let mut f = File::open(path).map_err(io("opening", path))?;
    f.seek(SeekFrom::Start(tail.bytes))
        .map_err(io("reading", path))?;
    let mut data = Vec::new();
    f.read_to_end(&mut data).map_err(io("reading", path))?;
    let damaged = |what: String| AuditError::Damaged {
        path: path.to_path_buf(),
        what,
    };
    let mut pos = 0;
    while pos < data.len() {
        let Some(n) = memchr::memchr(b'\n', &data[pos..]) else {
            return Err(damaged(format!(
                "the last line (byte {}) is incomplete: a write was interrupted or the file was cut",
                tail.bytes
            )));
        };
        let line = &data[pos..pos + n];
        let expect = tail.range.size() + 1;
        match line_prefix(line) {
            Some((seq, prev)) if seq == expect && prev == tail.last => {}
            _ => {
                return Err(damaged(format!(
                    "record {expect} (byte {}) does not continue the chain",
                    tail.bytes
                )));
            }
        }
        let leaf = merkle::leaf_hash(line);
        tail.range.push(leaf);
        tail.last = leaf;
        tail.bytes += n as u64 + 1;
        pos += n + 1;
    }
    Ok(tail)
}

/// Appends one record in one-shot mode (open, lock, append, sync, sign a checkpoint).
pub fn append_one(state_dir: &Path, rec: &mut Record) -> Result<u64, AuditError> {
    let mut log = AuditLog::open(state_dir, Checkpoints::EveryRecord)?;
    log.append(rec)
}

/// Rotates the signing key: under the writers' lock, signs a checkpoint of the whole log
/// with the old key, generates the new key, writes a rotation statement (new key, tree size
/// and root) signed by the old key, and destroys the old private key. Returns the new
/// epoch's verifier key.
pub fn rotate(state_dir: &Path) -> Result<note::VerifierKey, AuditError> {
    let mut log = AuditLog::open(state_dir, Checkpoints::EveryRecord)?;
    log.lock.lock().map_err(io("locking", &log.paths.lock))?;
    let r = (|| {
        log.catch_up()?;
        log.checkpoint_locked()?;
        let epoch = rotation_count(&log.paths)?;
        let new = keys::generate(state_dir, &log.origin, epoch + 1)?;
        let statement = rotation_text(
            &log.origin,
            epoch + 1,
            log.tail.range.size(),
            &log.tail.range.root(),
            &new.verifier(),
        );
        append_synced(&log.paths.rotations, &log.signer.sign(&statement))?;
        keys::destroy(state_dir, epoch)?;
        let vk = new.verifier();
        log.signer = new;
        Ok(vk)
    })();
    let _ = log.lock.unlock();
    r
}

/// The text of a rotation statement.
pub fn rotation_text(
    origin: &str,
    epoch: u32,
    size: u64,
    root: &Hash,
    key: &note::VerifierKey,
) -> String {
    use base64::Engine;
    format!(
        "gateway key rotation\n{origin}\nepoch {epoch}\nsize {size}\nroot {}\nkey {}\n",
        base64::engine::general_purpose::STANDARD.encode(root),
        key.encode()
    )
}

/// Parses a rotation statement: (origin, epoch, size, root, key).
pub fn parse_rotation(text: &str) -> Option<(String, u32, u64, Hash, note::VerifierKey)> {
    use base64::Engine;
    let mut l = text.lines();
    (l.next()? == "gateway key rotation").then_some(())?;
    let origin = l.next()?.to_string();
    let epoch = l.next()?.strip_prefix("epoch ")?.parse().ok()?;
    let size = l.next()?.strip_prefix("size ")?.parse().ok()?;
    let root = base64::engine::general_purpose::STANDARD
        .decode(l.next()?.strip_prefix("root ")?)
        .ok()?
        .try_into()
        .ok()?;
    let key = note::VerifierKey::decode(l.next()?.strip_prefix("key ")?)?;
    Some((origin, epoch, size, root, key))
}

/// The public keys of every epoch: epoch 0 from `keys/epoch-0.pub`, the others from the
/// rotation statements (as recorded; `verify` checks their signatures).
pub fn public_keys(state_dir: &Path) -> Result<Vec<note::VerifierKey>, AuditError> {
    let mut out: Vec<note::VerifierKey> = keys::root_key(state_dir)?.into_iter().collect();
    let paths = Paths::new(state_dir);
    if let Ok(s) = std::fs::read_to_string(&paths.rotations) {
        for n in note::parse_notes(&s).unwrap_or_default() {
            if let Some((_, _, _, _, k)) = parse_rotation(&n.text) {
                out.push(k);
            }
        }
    }
    Ok(out)
}

/// How long ago the log was last written (its mtime), if it exists.
pub fn log_age(state_dir: &Path) -> Option<std::time::Duration> {
    std::fs::metadata(Paths::new(state_dir).log)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
}

/// The tree size of the newest checkpoint in the checkpoints file (0: none or unreadable; its
/// signature is not checked here — `verify` does).
pub fn latest_checkpoint_size(state_dir: &Path) -> u64 {
    let paths = Paths::new(state_dir);
    let Ok(s) = std::fs::read_to_string(&paths.checkpoints) else {
        return 0;
    };
    note::parse_notes(&s)
        .ok()
        .and_then(|n| n.last().and_then(|n| note::Checkpoint::parse(&n.text)))
        .map_or(0, |cp| cp.size)
}

/// The newest checkpoint note (for export), if any.
pub fn latest_checkpoint(state_dir: &Path) -> Result<Option<String>, AuditError> {
    let paths = Paths::new(state_dir);
    let s = match std::fs::read_to_string(&paths.checkpoints) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("reading", &paths.checkpoints)(e)),
    };
    let notes = note::parse_notes(&s).map_err(|line| AuditError::Damaged {
        path: paths.checkpoints.clone(),
        what: format!("line {line} is not part of a signed note"),
    })?;
    Ok(notes.last().map(note::Note::encode))
}

#[cfg(test)]
mod tests;
