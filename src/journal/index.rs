//! The journal's index (`<state>/journal/journal.idx`): one fixed 64-byte record per line of
//! `journal.jsonl` — its kind, the change's id, time, uid, a hash of its workspace and of its
//! group, the change it undoes, and where the line is — so that an append does not parse the
//! journal (the next id comes from its tail), and `history` and `undo` read the records (64
//! bytes a line, no JSON) and parse only the lines they show or act on.
//!
//! Over 1,000 lines: the record format, the readers that walk it (forwards, and backwards
//! from its end) and their tests, which share its private layout.
//!
//! **Why an index beside one file, not segments.** The journal stays one append-only file,
//! so what reads it (older builds, `recover`, a person with `jq`) and its crash rules are as
//! before: an intent is synced before its change is made, a torn last line is skipped. The
//! index is a cache derived from the journal alone, never synced: it covers a prefix of the
//! journal (its header names the journal's inode; its last record, where that prefix ends),
//! and whatever it does not cover — lines appended by an older build, a crash between an
//! append and its records — is parsed and added by the next reader or writer. An index
//! that does not match (another inode, a prefix that does not end a line) is rebuilt from the
//! journal. Segments would bound a rewrite, but every reader would still need a summary per
//! change to filter by workspace and phase; with that summary in one flat file, pruning
//! (`compact`) rewrites both at once under the journal's lock.
//!
//! Writers update it under an `flock` on the index file itself (taken after the journal's
//! lock, never the other way round); readers take no lock and ignore a partial last record.

use super::{JournalError, Line, Phase, io};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Bytes of a record, and of the header.
pub(crate) const REC: usize = 64;
const MAGIC: &[u8; 8] = b"gwjidx01";

/// What a line of the journal is.
pub(crate) mod kind {
    /// Not a line this build reads (a torn line, an unknown phase).
    pub const JUNK: u8 = 0;
    /// A change's intent.
    pub const INTENT: u8 = 1;
    /// Done.
    pub const COMMIT: u8 = 2;
    /// Not done.
    pub const ABORT: u8 = 3;
    /// `undo --skip`.
    pub const SKIP: u8 = 4;
    /// The first line of a compacted journal: the last id given before.
    pub const BASE: u8 = 5;
    /// A tombstone: the change's backups expired.
    pub const EXPIRE: u8 = 6;
}

/// One line of the journal, as the index keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rec {
    pub kind: u8,
    /// The change's (for a base line: the last id given).
    pub id: u64,
    pub time: u64,
    /// The daemon client's uid, if recorded.
    pub uid: Option<u32>,
    /// Where the line starts in the journal, and its length (without the newline).
    pub off: u64,
    pub len: u32,
    /// Hash of the workspace's path (0: none recorded).
    pub ws: u64,
    /// Hash of the group (0: none).
    pub group: u64,
    /// The change it undoes (0: none).
    pub undoes: u64,
    /// It names a trash item (a removal, or the restore that undoes one).
    pub trash: bool,
}

impl Rec {
    fn encode(&self) -> [u8; REC] {
        let mut b = [0u8; REC];
        b[0] = self.kind;
        b[1] = u8::from(self.uid.is_some()) | (u8::from(self.trash) << 1);
        b[4..8].copy_from_slice(&self.uid.unwrap_or(0).to_le_bytes());
        b[8..16].copy_from_slice(&self.id.to_le_bytes());
        b[16..24].copy_from_slice(&self.time.to_le_bytes());
        b[24..32].copy_from_slice(&self.off.to_le_bytes());
        b[32..36].copy_from_slice(&self.len.to_le_bytes());
        b[40..48].copy_from_slice(&self.ws.to_le_bytes());
        b[48..56].copy_from_slice(&self.group.to_le_bytes());
        b[56..64].copy_from_slice(&self.undoes.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Rec {
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let u32_at = |i: usize| {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[i..i + 4]);
            u32::from_le_bytes(a)
        };
        Rec {
            kind: b[0],
            uid: (b[1] & 1 == 1).then(|| u32_at(4)),
            trash: b[1] & 2 == 2,
            id: u64_at(8),
            time: u64_at(16),
            off: u64_at(24),
            len: u32_at(32),
            ws: u64_at(40),
            group: u64_at(48),
            undoes: u64_at(56),
        }
    }

    /// Where the journal's next line starts after this one.
    fn end(&self) -> u64 {
        self.off + u64::from(self.len) + 1
    }
}

/// A short hash of a workspace path or a group (never 0: that is "none").
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    let h = blake3::hash(bytes);
    let mut a = [0u8; 8];
    a.copy_from_slice(&h.as_bytes()[..8]);
    u64::from_le_bytes(a).max(1)
}

/// The record of one journal line (`line` without its newline, at `off`).
pub(crate) fn rec_of(line: &[u8], off: u64) -> Rec {
    let r = match super::parse_line(line) {
        Ok(l) => rec_for(&l),
        Err(_) => Rec {
            kind: kind::JUNK,
            ..Rec::default()
        },
    };
    Rec {
        off,
        len: u32::try_from(line.len()).unwrap_or(u32::MAX),
        ..r
    }
}

/// The record of a line (its place in the journal not set).
pub(crate) fn rec_for(line: &Line) -> Rec {
    use std::os::unix::ffi::OsStrExt;
    let mut r = Rec::default();
    match line {
        Line::Intent(c) => {
            r.kind = kind::INTENT;
            r.id = c.id;
            r.time = c.time;
            r.uid = c.uid;
            r.ws = c
                .workspace
                .as_ref()
                .map_or(0, |w| hash(w.as_os_str().as_bytes()));
            r.group = c.group.as_ref().map_or(0, |g| hash(g.as_bytes()));
            r.undoes = c.undoes.unwrap_or(0);
            r.trash = c.trash.is_some();
        }
        Line::Commit { id } => (r.kind, r.id) = (kind::COMMIT, *id),
        Line::Abort { id } => (r.kind, r.id) = (kind::ABORT, *id),
        Line::Skip { id } => (r.kind, r.id) = (kind::SKIP, *id),
        Line::Base { last } => (r.kind, r.id) = (kind::BASE, *last),
        Line::Expire { id, .. } => (r.kind, r.id) = (kind::EXPIRE, *id),
    }
    r
}

/// The records of the whole lines of `data` (journal bytes from offset `base`): those lines'
/// records, and where the first incomplete line starts (a torn line, or one being written).
pub(crate) fn recs_of(data: &[u8], base: u64) -> (Vec<Rec>, u64) {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Some(n) = memchr::memchr(b'\n', &data[pos..]) {
        out.push(rec_of(&data[pos..pos + n], base + pos as u64));
        pos += n + 1;
    }
    (out, base + pos as u64)
}

pub(crate) fn journal_path(state_dir: &Path) -> PathBuf {
    state_dir.join("journal").join("journal.jsonl")
}

/// Where the journal's index is (`<state>/journal/journal.idx`).
pub fn index_path(state_dir: &Path) -> PathBuf {
    state_dir.join("journal").join("journal.idx")
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`), 16 bytes; zeros if unknown.
fn boot() -> [u8; 16] {
    static BOOT: std::sync::OnceLock<[u8; 16]> = std::sync::OnceLock::new();
    *BOOT.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        let hex: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        let mut out = [0u8; 16];
        for (i, pair) in hex.chunks_exact(2).take(16).enumerate() {
            let v = std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok());
            out[i] = v.unwrap_or(0);
        }
        out
    })
}

/// The header for a journal whose metadata is `m`; `floor`: the journal's size after its last
/// compaction (when to compact next, `compact`). It names the boot that wrote it: the index
/// is never synced, so after a reboot (perhaps a power loss that lost some of its pages)
/// it is rebuilt from the journal, which is.
pub(crate) fn header(m: &std::fs::Metadata, floor: u64) -> [u8; REC] {
    let mut h = [0u8; REC];
    h[..8].copy_from_slice(MAGIC);
    h[8..16].copy_from_slice(&m.ino().to_le_bytes());
    h[16..24].copy_from_slice(&m.dev().to_le_bytes());
    h[24..32].copy_from_slice(&floor.to_le_bytes());
    h[32..48].copy_from_slice(&boot());
    h
}

/// Does the header `h` describe the journal `m`, written in this boot? Its floor if so.
fn header_matches(h: &[u8], m: &std::fs::Metadata) -> Option<u64> {
    let ours = header(m, 0);
    (h.len() >= REC && h[..24] == ours[..24] && h[32..48] == ours[32..48]).then(|| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&h[24..32]);
        u64::from_le_bytes(a)
    })
}

/// Encodes records (for an append, or after a header).
pub(crate) fn encode_all(recs: &[Rec]) -> Vec<u8> {
    let mut out = Vec::with_capacity(recs.len() * REC);
    for r in recs {
        out.extend_from_slice(&r.encode());
    }
    out
}

/// Does the journal have a line ending at `end` (the end of what an index covers)?
fn ends_a_line(journal: &File, size: u64, end: u64) -> bool {
    if end == 0 {
        return true;
    }
    if end > size {
        return false;
    }
    let mut b = [0u8];
    journal.read_exact_at(&mut b, end - 1).is_ok() && b[0] == b'\n'
}

/// The index of an open journal: its records (the index file's, checked, and what it does
/// not cover parsed from the journal), and the journal's floor. The file's records are read
/// in chunks as they are walked, never held whole.
pub(crate) struct Loaded {
    /// The index file, when it matches the journal.
    file: Option<File>,
    /// How many of its records are read.
    stored: usize,
    /// The records of the lines it does not cover.
    tail: Vec<Rec>,
    pub floor: u64,
}

/// Records read per chunk.
const CHUNK_RECS: usize = 4096;

impl Loaded {
    /// Calls `f` with every record, in journal order.
    pub fn each(&self, mut f: impl FnMut(Rec)) -> Result<(), JournalError> {
        if let Some(file) = &self.file {
            let mut buf = Vec::new();
            let mut next = 0usize;
            while next < self.stored {
                let n = CHUNK_RECS.min(self.stored - next);
                buf.resize(n * REC, 0);
                file.read_exact_at(&mut buf, (REC * (next + 1)) as u64)
                    .map_err(|source| JournalError::Io {
                        what: "reading",
                        path: PathBuf::from("journal.idx"),
                        source,
                    })?;
                buf.chunks_exact(REC).map(Rec::decode).for_each(&mut f);
                next += n;
            }
        }
        self.tail.iter().copied().for_each(f);
        Ok(())
    }

    /// Every record, in journal order.
    pub fn recs(&self) -> Result<Vec<Rec>, JournalError> {
        let mut out = Vec::with_capacity(self.len());
        self.each(|r| out.push(r))?;
        Ok(out)
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.stored + self.tail.len()
    }

    /// Does the index file hold them all?
    pub fn complete(&self) -> bool {
        self.tail.is_empty() && self.stored > 0
    }
}

/// Reads the index of `journal` (open, with metadata `m`) and brings it up to date in memory.
pub(crate) fn load(
    state_dir: &Path,
    journal: &File,
    m: &std::fs::Metadata,
) -> Result<Loaded, JournalError> {
    let ip = index_path(state_dir);
    let mut loaded = Loaded {
        file: None,
        stored: 0,
        tail: Vec::new(),
        floor: 0,
    };
    let mut covered = 0;
    match File::open(&ip) {
        Ok(f) => {
            let ilen = f.metadata().map_err(io("reading", &ip))?.len();
            let mut h = [0u8; REC];
            let floor = if ilen >= REC as u64 && f.read_exact_at(&mut h, 0).is_ok() {
                header_matches(&h, m)
            } else {
                None
            };
            if let Some(floor) = floor {
                // A partial last record (an append in progress) is not read.
                let n = usize::try_from((ilen - REC as u64) / REC as u64).unwrap_or(0);
                let mut last = [0u8; REC];
                let end = if n > 0 && f.read_exact_at(&mut last, (REC * n) as u64).is_ok() {
                    Rec::decode(&last).end()
                } else {
                    0
                };
                if ends_a_line(journal, m.len(), end) {
                    covered = end;
                    loaded = Loaded {
                        file: Some(f),
                        stored: n,
                        tail: Vec::new(),
                        floor,
                    };
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("reading", &ip)(e)),
    }
    let jp = journal_path(state_dir);
    let len = m.len().saturating_sub(covered);
    let mut tail = vec![0u8; usize::try_from(len).unwrap_or(0)];
    journal
        .read_exact_at(&mut tail, covered)
        .map_err(io("reading", &jp))?;
    loaded.tail = recs_of(&tail, covered).0;
    Ok(loaded)
}

/// Brings the index file up to date with the journal: called after each append (with the
/// journal's lock held, or by a reader that could take the index's lock). A cache: failures
/// are returned but the journal is whole without it.
pub(crate) fn update(state_dir: &Path) -> Result<(), JournalError> {
    update_with(state_dir, true)
}

/// After an append of lines at `base` whose records (placed from 0) the writer knows: they
/// are added as they are when the index ends where the append began (no line parsed again),
/// else as [`update`] does.
pub(crate) fn append_known(state_dir: &Path, base: u64, known: &[Rec]) -> Result<(), JournalError> {
    update_from(state_dir, true, Some((base, known)))
}

/// [`update`]; when not `wait`, nothing if another holds the index's lock (a writer, which
/// brings it up to date itself).
fn update_with(state_dir: &Path, wait: bool) -> Result<(), JournalError> {
    update_from(state_dir, wait, None)
}

fn update_from(
    state_dir: &Path,
    wait: bool,
    known: Option<(u64, &[Rec])>,
) -> Result<(), JournalError> {
    let jp = journal_path(state_dir);
    let journal = match File::open(&jp) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("opening", &jp)(e)),
    };
    let Some(idx) = lock_index(state_dir, wait)? else {
        return Ok(());
    };
    let m = journal.metadata().map_err(io("reading", &jp))?;
    let ip = index_path(state_dir);
    // Only the header and the last record are read.
    let ilen = idx.metadata().map_err(io("reading", &ip))?.len();
    let mut h = [0u8; REC];
    let head_ok = ilen >= REC as u64 && idx.read_exact_at(&mut h, 0).is_ok();
    let floor = if head_ok {
        header_matches(&h, &m)
    } else {
        None
    };
    let n = ilen.saturating_sub(REC as u64) / REC as u64;
    let last = if n > 0 {
        let mut b = [0u8; REC];
        idx.read_exact_at(&mut b, REC as u64 * n)
            .map_err(io("reading", &ip))?;
        Some(Rec::decode(&b))
    } else {
        None
    };
    let end = last.map_or(0, |r| r.end());
    if floor.is_none() || !ends_a_line(&journal, m.len(), end) {
        // Not this journal's (or damaged): rebuilt whole.
        let loaded = load(state_dir, &journal, &m)?;
        return rewrite(state_dir, &m, 0, &loaded.recs()?);
    }
    if end >= m.len() {
        return Ok(());
    }
    if let Some((base, recs)) = known
        && base == end
        && recs.last().is_none_or(|r| base + r.end() <= m.len())
    {
        let placed: Vec<Rec> = recs
            .iter()
            .map(|r| Rec {
                off: r.off + base,
                ..*r
            })
            .collect();
        return idx
            .write_all_at(&encode_all(&placed), REC as u64 * (n + 1))
            .map_err(io("writing", &ip));
    }
    let mut tail = vec![0u8; usize::try_from(m.len() - end).unwrap_or(0)];
    journal
        .read_exact_at(&mut tail, end)
        .map_err(io("reading", &jp))?;
    let (recs, _) = recs_of(&tail, end);
    if recs.is_empty() {
        return Ok(());
    }
    // After a partial record (a writer that died mid-append), the next whole slot.
    idx.write_all_at(&encode_all(&recs), REC as u64 * (n + 1))
        .map_err(io("writing", &ip))
}

/// The journal's size after its last compaction, as the index's header says (0: unknown).
pub(crate) fn floor(state_dir: &Path) -> u64 {
    let (Ok(j), Ok(i)) = (
        std::fs::metadata(journal_path(state_dir)),
        File::open(index_path(state_dir)),
    ) else {
        return 0;
    };
    let mut h = [0u8; REC];
    if i.read_exact_at(&mut h, 0).is_err() {
        return 0;
    }
    header_matches(&h, &j).unwrap_or(0)
}

/// Notes `floor` in the header of the index open as `idx` (locked), if it describes the journal:
/// a compaction that could remove nothing says so, and the next waits for the journal to grow.
pub(crate) fn set_floor(state_dir: &Path, idx: &File, floor: u64) {
    let (Ok(j), mut h) = (std::fs::metadata(journal_path(state_dir)), [0u8; REC]) else {
        return;
    };
    if idx.read_exact_at(&mut h, 0).is_ok() && header_matches(&h, &j).is_some() {
        let _ = idx.write_all_at(&floor.to_le_bytes(), 24);
    }
}

/// What the index says of the last id given.
pub(crate) enum LastId {
    /// This id, checked against its journal line.
    Given(u64),
    /// The index does not cover the journal (it could not be written): read the journal.
    Stale,
    /// The index's record does not match the journal's line: rebuild it.
    Mismatch,
}

/// The last id given, from the last intent (or base) record of an index that covers the
/// journal, read backwards from its end: an append does not read the whole journal.
pub(crate) fn last_given(state_dir: &Path) -> LastId {
    let (jp, ip) = (journal_path(state_dir), index_path(state_dir));
    let Ok(journal) = File::open(&jp) else {
        return if jp.exists() {
            LastId::Stale
        } else {
            LastId::Given(0)
        };
    };
    let (Ok(m), Ok(idx)) = (journal.metadata(), File::open(&ip)) else {
        return LastId::Stale;
    };
    let ilen = idx.metadata().map_or(0, |m| m.len());
    let mut h = [0u8; REC];
    if ilen < REC as u64
        || idx.read_exact_at(&mut h, 0).is_err()
        || header_matches(&h, &m).is_none()
    {
        return LastId::Stale;
    }
    let n = (ilen - REC as u64) / REC as u64;
    const CHUNK: u64 = 1024;
    let mut hi = n;
    let mut first = true;
    while hi > 0 {
        let lo = hi.saturating_sub(CHUNK);
        let mut b = vec![0u8; ((hi - lo) as usize) * REC];
        if idx.read_exact_at(&mut b, REC as u64 * (lo + 1)).is_err() {
            return LastId::Stale;
        }
        let recs: Vec<Rec> = b.chunks_exact(REC).map(Rec::decode).collect();
        if first {
            // Covers the journal up to a torn line at most.
            let end = recs.last().map_or(0, Rec::end);
            if !covers(&journal, m.len(), end) {
                return LastId::Stale;
            }
            first = false;
        }
        if let Some(r) = recs
            .iter()
            .rev()
            .find(|r| r.kind == kind::INTENT || r.kind == kind::BASE)
        {
            let mut line = vec![0u8; r.len as usize];
            if journal.read_exact_at(&mut line, r.off).is_err() {
                return LastId::Mismatch;
            }
            let back = rec_of(&line, r.off);
            return if back.kind == r.kind && back.id == r.id {
                LastId::Given(r.id)
            } else {
                LastId::Mismatch
            };
        }
        hi = lo;
    }
    LastId::Given(0)
}

/// The changes journalled after the id `after` in the workspace whose hash is `ws` (or with
/// no workspace recorded), parsed; read backwards from the index's end, so that the cost is
/// what was journalled since. None: the index does not cover the journal, or a line does not
/// match its record (the caller treats it as "anything may have changed"). The second value
/// is the journal's last id (`after` when nothing was journalled since).
pub(crate) fn changes_after(
    state_dir: &Path,
    after: u64,
    ws: u64,
) -> Option<(Vec<super::Change>, u64)> {
    let (v, last) = back_until(state_dir, ws, after, |r| r.id <= after)?;
    Some((v.into_iter().map(|(c, _)| c).collect(), last))
}

/// The changes committed since `time` (seconds since the epoch) in the workspace whose hash is
/// `ws`, read backwards from the index's end (None: as [`changes_after`]).
pub(crate) fn committed_since(state_dir: &Path, time: u64, ws: u64) -> Option<Vec<super::Change>> {
    let (v, _) = back_until(state_dir, ws, 0, |r| r.time < time)?;
    Some(
        v.into_iter()
            .filter(|(_, done)| *done)
            .map(|(c, _)| c)
            .collect(),
    )
}

/// The changes committed after the id `after` in the workspace whose hash is `ws`, read
/// backwards from the index's end (None: as [`changes_after`]).
pub(crate) fn committed_after(state_dir: &Path, after: u64, ws: u64) -> Option<Vec<super::Change>> {
    let (v, _) = back_until(state_dir, ws, after, |r| r.id <= after)?;
    Some(
        v.into_iter()
            .filter(|(_, done)| *done)
            .map(|(c, _)| c)
            .collect(),
    )
}

/// The intents read backwards from the index's end until `stop` says so of one (a base line
/// stops too; past an id above `after`, it answers None: what it compacted away is unread),
/// in the workspace `ws` (or none recorded), oldest first, each with whether it was committed;
/// and the last id given.
fn back_until(
    state_dir: &Path,
    ws: u64,
    after: u64,
    stop: impl Fn(&Rec) -> bool,
) -> Option<(Vec<(super::Change, bool)>, u64)> {
    let (jp, ip) = (journal_path(state_dir), index_path(state_dir));
    let Ok(journal) = File::open(&jp) else {
        return (!jp.exists()).then(|| (Vec::new(), after));
    };
    let m = journal.metadata().ok()?;
    let idx = File::open(&ip).ok()?;
    let ilen = idx.metadata().map_or(0, |m| m.len());
    let mut h = [0u8; REC];
    if ilen < REC as u64 || idx.read_exact_at(&mut h, 0).is_err() {
        return None;
    }
    header_matches(&h, &m)?;
    let n = (ilen - REC as u64) / REC as u64;
    const CHUNK: u64 = 1024;
    let mut hi = n;
    let mut first = true;
    let mut out = Vec::new();
    let mut last = after;
    let mut committed = std::collections::HashSet::new();
    'chunks: while hi > 0 {
        let lo = hi.saturating_sub(CHUNK);
        let mut b = vec![0u8; ((hi - lo) as usize) * REC];
        idx.read_exact_at(&mut b, REC as u64 * (lo + 1)).ok()?;
        let recs: Vec<Rec> = b.chunks_exact(REC).map(Rec::decode).collect();
        if first {
            let end = recs.last().map_or(0, Rec::end);
            if !covers(&journal, m.len(), end) {
                return None;
            }
            first = false;
        }
        for r in recs.iter().rev() {
            // A compacted journal's first line: what was journalled after `after` and before
            // it is gone, unread.
            if r.kind == kind::BASE && r.id > after {
                return None;
            }
            if r.kind == kind::BASE || (r.kind == kind::INTENT && stop(r)) {
                break 'chunks;
            }
            if r.kind == kind::COMMIT {
                committed.insert(r.id);
            }
            if r.kind == kind::INTENT {
                last = last.max(r.id);
            }
            if r.kind != kind::INTENT || (r.ws != 0 && r.ws != ws) {
                continue;
            }
            let mut line = vec![0u8; r.len as usize];
            journal.read_exact_at(&mut line, r.off).ok()?;
            match super::parse_line(&line) {
                Ok(Line::Intent(c)) if c.id == r.id => {
                    let done = committed.contains(&c.id);
                    out.push((*c, done));
                }
                _ => return None,
            }
        }
        hi = lo;
    }
    out.reverse();
    Some((out, last))
}

/// Does an index whose records end at `end` cover the journal (of `size` bytes): nothing
/// after but a torn line?
fn covers(journal: &File, size: u64, end: u64) -> bool {
    if end > size || !ends_a_line(journal, size, end) {
        return false;
    }
    let mut rest = vec![0u8; usize::try_from(size - end).unwrap_or(0)];
    journal.read_exact_at(&mut rest, end).is_ok() && memchr::memchr(b'\n', &rest).is_none()
}

/// Writes the index whole (a temporary file renamed over it, not synced: a cache) for the
/// journal `m`.
pub(crate) fn rewrite(
    state_dir: &Path,
    m: &std::fs::Metadata,
    floor: u64,
    recs: &[Rec],
) -> Result<(), JournalError> {
    let mut data = Vec::with_capacity(REC * (recs.len() + 1));
    data.extend_from_slice(&header(m, floor));
    data.extend_from_slice(&encode_all(recs));
    super::write_whole(&state_dir.join("journal"), "journal.idx", &data, false)
}

/// The index file opened and locked (`flock`, exclusive, held while it is open), the lock
/// taken on the file that is at the path (a rewrite may have renamed another over it
/// meanwhile). `wait`: block for the lock, else `None` when another holds it.
pub(crate) fn lock_index(state_dir: &Path, wait: bool) -> Result<Option<File>, JournalError> {
    use std::os::unix::fs::OpenOptionsExt;
    let ip = index_path(state_dir);
    for _ in 0..100 {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&ip)
            .map_err(io("opening", &ip))?;
        if wait {
            f.lock().map_err(io("locking", &ip))?;
        } else {
            match f.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
                Err(std::fs::TryLockError::Error(e)) => return Err(io("locking", &ip)(e)),
            }
        }
        let here = f.metadata().map_err(io("reading", &ip))?;
        match std::fs::metadata(&ip) {
            Ok(now) if now.ino() == here.ino() && now.dev() == here.dev() => {
                return Ok(Some(f));
            }
            _ => continue,
        }
    }
    Err(io("locking", &ip)(std::io::Error::from(
        std::io::ErrorKind::WouldBlock,
    )))
}

/// A change as the index describes it (with its phase and marks from later lines).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The change's id.
    pub id: u64,
    /// When it was journalled (seconds since the epoch).
    pub time: u64,
    /// The daemon client that made it, if recorded.
    pub uid: Option<u32>,
    /// Done, not done, or pending.
    pub phase: Phase,
    /// `undo --skip` passed over it.
    pub skipped: bool,
    /// The change it undoes.
    pub undoes: Option<u64>,
    /// Hash of its workspace (0: none recorded; see [`View::workspaces`]).
    pub ws: u64,
    /// Hash of its group (0: none).
    pub group: u64,
    /// It names a trash item.
    pub trash: bool,
    /// Its backups expired (a tombstone): where the line saying so is.
    pub(crate) expired: Option<(u64, u32)>,
    pub(crate) off: u64,
    pub(crate) len: u32,
}

/// The journal as its index describes it: every change with its phase and marks, oldest
/// first; a change itself is parsed only when asked for ([`View::load`]).
pub struct View {
    journal: Option<File>,
    path: PathBuf,
    entries: Vec<Entry>,
    /// Each workspace hash, and where its first change is.
    spaces: Vec<(u64, usize)>,
    /// The last id given (by a change, or before a compaction).
    last: u64,
    /// The journal's size and floor (for compaction).
    pub(crate) size: u64,
    pub(crate) floor: u64,
}

impl View {
    /// Opens the journal of `state_dir` (empty if there is none). Its index is brought up to
    /// date in memory, and on disk when no writer holds it.
    pub fn open(state_dir: &Path) -> Result<View, JournalError> {
        let path = journal_path(state_dir);
        let mut v = View {
            journal: None,
            path: path.clone(),
            entries: Vec::new(),
            spaces: Vec::new(),
            last: 0,
            size: 0,
            floor: 0,
        };
        let journal = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
            Err(e) => return Err(io("opening", &path)(e)),
        };
        let m = journal.metadata().map_err(io("reading", &path))?;
        let loaded = load(state_dir, &journal, &m)?;
        if !loaded.complete() && loaded.len() > 0 {
            // Persisted when no writer is at it (a cache: a failure changes nothing).
            let _ = update_if_free(state_dir);
        }
        v.size = m.len();
        v.floor = loaded.floor;
        v.journal = Some(journal);
        v.build(&loaded)?;
        Ok(v)
    }

    /// Runs `f` on the journal's view; if the index turns out not to match the journal
    /// ([`JournalError::Index`]: it was removed), once more on a view rebuilt from the journal.
    pub fn retrying<T>(
        state_dir: &Path,
        f: impl Fn(&View) -> Result<T, JournalError>,
    ) -> Result<T, JournalError> {
        match f(&View::open(state_dir)?) {
            Err(JournalError::Index { .. }) => f(&View::open(state_dir)?),
            r => r,
        }
    }

    fn build(&mut self, loaded: &Loaded) -> Result<(), JournalError> {
        let mut sorted = true;
        let (mut seen, mut prev) = (std::collections::HashSet::new(), 0);
        let (entries, spaces, last) = (&mut self.entries, &mut self.spaces, &mut self.last);
        entries.reserve(loaded.len() / 2);
        loaded.each(|r| match r.kind {
            kind::INTENT => {
                sorted &= entries.last().is_none_or(|e| e.id < r.id);
                *last = (*last).max(r.id);
                if r.ws != 0 && r.ws != prev && seen.insert(r.ws) {
                    spaces.push((r.ws, entries.len()));
                }
                prev = r.ws;
                entries.push(Entry {
                    id: r.id,
                    time: r.time,
                    uid: r.uid,
                    phase: Phase::Pending,
                    skipped: false,
                    undoes: (r.undoes != 0).then_some(r.undoes),
                    ws: r.ws,
                    group: r.group,
                    trash: r.trash,
                    expired: None,
                    off: r.off,
                    len: r.len,
                });
            }
            kind::BASE => *last = (*last).max(r.id),
            _ => {}
        })?;
        // Ids grow with each append; a journal where they do not is looked up by map.
        let by_id: Option<HashMap<u64, usize>> = (!sorted).then(|| {
            self.entries
                .iter()
                .enumerate()
                .map(|(i, e)| (e.id, i))
                .collect()
        });
        let entries = &mut self.entries;
        loaded.each(|r| {
            if !matches!(
                r.kind,
                kind::COMMIT | kind::ABORT | kind::SKIP | kind::EXPIRE
            ) {
                return;
            }
            let at = match &by_id {
                Some(m) => m.get(&r.id).copied(),
                None => position(entries, r.id),
            };
            let Some(e) = at.and_then(|i| entries.get_mut(i)) else {
                return;
            };
            match r.kind {
                kind::COMMIT => e.phase = Phase::Committed,
                kind::ABORT => e.phase = Phase::Aborted,
                kind::SKIP => e.skipped = true,
                _ => e.expired = Some((r.off, r.len)),
            }
        })
    }

    fn position(&self, id: u64) -> Option<usize> {
        position(&self.entries, id)
    }

    /// Every change, oldest first.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The last id given (0: none yet).
    pub fn last_id(&self) -> u64 {
        self.last
    }

    /// The change with id `id`.
    pub fn get(&self, id: u64) -> Option<&Entry> {
        match self.position(id) {
            Some(i) => self.entries.get(i),
            None => self.entries.iter().find(|e| e.id == id),
        }
    }

    /// The journal's bytes at `off` (a line without its newline).
    pub(crate) fn line(&self, off: u64, len: u32) -> Result<Vec<u8>, JournalError> {
        let mut b = vec![0u8; len as usize];
        if let Some(f) = &self.journal {
            f.read_exact_at(&mut b, off)
                .map_err(io("reading", &self.path))?;
        }
        Ok(b)
    }

    /// The change of `e`, parsed from its line; a tombstone's why is its `not_undoable`.
    pub fn load(&self, e: &Entry) -> Result<super::Change, JournalError> {
        let mut c = match super::parse_line(&self.line(e.off, e.len)?) {
            Ok(Line::Intent(c)) if c.id == e.id => *c,
            _ => {
                // Damaged (by hand: a crash is caught by the boot id): rebuilt next time.
                if let Some(dir) = self.path.parent() {
                    let _ = std::fs::remove_file(dir.join("journal.idx"));
                }
                return Err(JournalError::Index { id: e.id });
            }
        };
        if let Some((off, len)) = e.expired
            && let Ok(Line::Expire { why, .. }) = super::parse_line(&self.line(off, len)?)
            && c.not_undoable.is_none()
        {
            c.not_undoable = Some(why);
        }
        Ok(c)
    }

    /// The changes of `entries`, parsed.
    pub fn load_all<'a>(
        &self,
        entries: impl IntoIterator<Item = &'a Entry>,
    ) -> Result<Vec<(super::Change, Phase)>, JournalError> {
        entries
            .into_iter()
            .map(|e| Ok((self.load(e)?, e.phase)))
            .collect()
    }

    /// The workspace path of each workspace hash (read from the first change that names it).
    pub fn workspaces(&self) -> Result<HashMap<u64, PathBuf>, JournalError> {
        let mut out = HashMap::new();
        for &(h, i) in &self.spaces {
            if let Some(e) = self.entries.get(i)
                && let Some(w) = self.load(e)?.workspace
            {
                out.insert(h, w);
            }
        }
        Ok(out)
    }

    /// The changes of group `group`, oldest first.
    pub fn group<'a>(&'a self, group: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        let h = hash(group.as_bytes());
        self.entries.iter().filter(move |e| e.group == h)
    }

    /// The ids of the committed changes that committed undos revert.
    pub fn undone(&self) -> std::collections::HashSet<u64> {
        self.entries
            .iter()
            .filter(|e| e.phase == Phase::Committed)
            .filter_map(|e| e.undoes)
            .collect()
    }
}

/// Where change `id` is among `entries` (sorted by id): where it would be if the ids since
/// the first were all there (they mostly are), else by binary search.
fn position(entries: &[Entry], id: u64) -> Option<usize> {
    let first = entries.first()?.id;
    if let Some(i) = id.checked_sub(first).and_then(|d| usize::try_from(d).ok())
        && entries.get(i).is_some_and(|e| e.id == id)
    {
        return Some(i);
    }
    entries.binary_search_by_key(&id, |e| e.id).ok()
}

/// [`update`], unless a writer holds the index's lock (then it brings it up to date itself).
fn update_if_free(state_dir: &Path) -> Result<(), JournalError> {
    update_with(state_dir, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let r = Rec {
            kind: kind::INTENT,
            id: 7,
            time: 1_700_000_000,
            uid: Some(65534),
            off: 123,
            len: 456,
            ws: hash(b"/w"),
            group: hash(b"exec-1"),
            undoes: 3,
            trash: true,
        };
        assert_eq!(Rec::decode(&r.encode()), r);
        let none = Rec { uid: None, ..r };
        assert_eq!(Rec::decode(&none.encode()), none);
        // A torn last line is not indexed; a line that is not ours is junk.
        let (recs, end) = recs_of(b"{\"phase\":\"commit\",\"id\":2}\nnot json\n{\"pha", 10);
        assert_eq!(
            recs.iter()
                .map(|r| (r.kind, r.id, r.off))
                .collect::<Vec<_>>(),
            vec![(kind::COMMIT, 2, 10), (kind::JUNK, 0, 36)]
        );
        assert_eq!(end, 45);
    }
}
