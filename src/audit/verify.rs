//! `gateway log verify`: recomputes the hash chain, the Merkle tree, every checkpoint and
//! rotation statement and their signatures, and (optionally) checks an exported checkpoint.

use super::merkle::{self, CompactRange, Hash};
use super::note::{self, Checkpoint, Note, VerifierKey};
use super::{AuditError, Paths, keys, line_prefix, parse_rotation};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

/// What is wrong, first problem first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Problem {
    /// A line is not a record (bad JSON start, bad hash field, not UTF-8).
    Malformed {
        /// 1-based line.
        line: u64,
    },
    /// The last line has no newline.
    Torn {
        /// 1-based line.
        line: u64,
    },
    /// Record `seq`'s content no longer hashes to what record `seq + 1` holds.
    Edited {
        /// The edited record.
        seq: u64,
    },
    /// Records `from..=to` are missing.
    Missing {
        /// First missing seq.
        from: u64,
        /// Last missing seq.
        to: u64,
    },
    /// Records out of order: `found` where `expected` should be.
    Reordered {
        /// 1-based line.
        line: u64,
        /// The seq expected there.
        expected: u64,
        /// The seq found.
        found: u64,
    },
    /// Record `seq` appears twice.
    Duplicated {
        /// The seq.
        seq: u64,
    },
    /// The log ends before a checkpoint's tree size.
    Truncated {
        /// 1-based checkpoint number (`0`: the anchor).
        checkpoint: usize,
        /// Records it commits to.
        size: u64,
        /// Records in the log.
        records: u64,
    },
    /// A checkpoint's root does not match the records (edited after it was signed).
    RootMismatch {
        /// 1-based checkpoint number (`0`: the anchor).
        checkpoint: usize,
        /// Its tree size.
        size: u64,
        /// The largest size, below it, whose commitment held (0: none).
        after: u64,
    },
    /// A checkpoint or rotation statement is not validly signed by the key of its epoch.
    BadSignature {
        /// `checkpoint N`, `rotation N` or `anchor`.
        what: String,
        /// Detail.
        detail: String,
    },
    /// The checkpoint or rotation file is damaged.
    BadFile {
        /// Which file.
        file: String,
        /// Detail.
        detail: String,
    },
    /// Checkpoints whose sizes go backwards.
    CheckpointOrder {
        /// 1-based checkpoint number.
        checkpoint: usize,
    },
    /// A milestone checkpoint (every [`super::MILESTONE`] records) is missing: checkpoints
    /// were deleted.
    MissingCheckpoint {
        /// The tree size it should commit to.
        size: u64,
    },
    /// The public key given (`--key`) is not this log's root key.
    KeyReplaced {
        /// Detail.
        detail: String,
    },
    /// No public key to check signatures with.
    NoKey,
    /// Records exist but no checkpoint covers them all and the writer was one-shot.
    Uncovered {
        /// Records after the newest checkpoint.
        records: u64,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Malformed { line } => write!(f, "line {line} is not a log record (edited)"),
            Problem::Torn { line } => write!(
                f,
                "line {line} is incomplete (no newline): a write was cut short or the file truncated"
            ),
            Problem::Edited { seq } => write!(
                f,
                "record {seq} was edited: its hash no longer matches what record {} holds",
                seq + 1
            ),
            Problem::Missing { from, to } if from == to => {
                write!(f, "record {from} is missing (deleted)")
            }
            Problem::Missing { from, to } => {
                write!(f, "records {from} to {to} are missing (deleted)")
            }
            Problem::Reordered {
                line,
                expected,
                found,
            } => write!(
                f,
                "records reordered: line {line} holds record {found}, expected {expected}"
            ),
            Problem::Duplicated { seq } => write!(f, "record {seq} is duplicated"),
            Problem::Truncated {
                checkpoint,
                size,
                records,
            } => write!(
                f,
                "log truncated after {}: it commits to {size} records, the log has {records}",
                cp_name(*checkpoint)
            ),
            Problem::RootMismatch {
                checkpoint,
                size,
                after,
            } if after + 1 == *size => write!(
                f,
                "record {size} was edited: {} signed a different record {size}",
                cp_name(*checkpoint)
            ),
            Problem::RootMismatch {
                checkpoint,
                size,
                after,
            } => write!(
                f,
                "records {} to {size} were rewritten: they do not match {} (tree size {size})",
                after + 1,
                cp_name(*checkpoint)
            ),
            Problem::BadSignature { what, detail } => {
                write!(f, "bad signature on {what}: {detail}")
            }
            Problem::BadFile { file, detail } => write!(f, "{file} is damaged: {detail}"),
            Problem::CheckpointOrder { checkpoint } => write!(
                f,
                "checkpoint {checkpoint} commits to fewer records than the one before it (checkpoints reordered or replaced)"
            ),
            Problem::MissingCheckpoint { size } => write!(
                f,
                "the checkpoint at tree size {size} is missing: checkpoints were deleted"
            ),
            Problem::KeyReplaced { detail } => write!(f, "key replaced: {detail}"),
            Problem::NoKey => write!(
                f,
                "no public key: keys/epoch-0.pub is missing; pass --key with the key `gateway keys export` printed"
            ),
            Problem::Uncovered { records } => write!(
                f,
                "the last {records} record(s) are not covered by a signed checkpoint"
            ),
        }
    }
}

fn cp_name(n: usize) -> String {
    if n == 0 {
        "the anchor checkpoint".into()
    } else {
        format!("checkpoint {n}")
    }
}

/// What to check beyond the local files.
#[derive(Default)]
pub struct VerifyOptions {
    /// An exported checkpoint note (`gateway log checkpoint --export`).
    pub anchor: Option<String>,
    /// The epoch-0 public key, from `gateway keys export`, instead of the local copy.
    pub key: Option<VerifierKey>,
    /// Treat records after the newest checkpoint as a problem (one-shot logs checkpoint every
    /// record).
    pub require_covered: bool,
    /// With `require_covered`: only the first N records must be covered — those in the log
    /// when the verify began, which the daemon has just signed (or the verify waited for its
    /// checkpoint of). Records appended after them (calls still being served) are counted in
    /// [`VerifyReport::newer`], not a problem; their chain is still checked.
    pub covered_before: Option<u64>,
}

/// The result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VerifyReport {
    /// Records read.
    pub records: u64,
    /// Checkpoints checked.
    pub checkpoints: usize,
    /// Key epochs (rotations + 1).
    pub epochs: usize,
    /// Tree size of the newest valid checkpoint.
    pub checkpointed: u64,
    /// Records after the newest checkpoint that were appended while the verify ran (see
    /// [`VerifyOptions::covered_before`]): the daemon signs them in its next batch.
    pub newer: u64,
    /// Root of the whole log, hex.
    pub root: String,
    /// Problems; empty means the log verifies.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// Whether everything holds.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// A key epoch: its key and the tree size from which it signs.
struct Epoch {
    key: VerifierKey,
    from: u64,
}

/// Verifies the audit log of a state directory.
#[allow(
    clippy::too_many_lines,
    reason = "the log's checks in one pass, in order (chain, signatures, checkpoints, anchor)"
)]
pub fn verify(state_dir: &Path, opts: &VerifyOptions) -> Result<VerifyReport, AuditError> {
    let paths = Paths::new(state_dir);
    let mut problems = Vec::new();

    // Keys: the root key, then each rotation signed by the epoch before.
    let local_root = keys::root_key(state_dir)?;
    let root_key = match (&opts.key, &local_root) {
        (Some(k), Some(l)) if k != l => {
            problems.push(Problem::KeyReplaced {
                detail: format!(
                    "the local epoch-0 key {} is not the key given ({})",
                    l.encode(),
                    k.encode()
                ),
            });
            Some(k.clone())
        }
        (Some(k), _) => Some(k.clone()),
        (None, l) => l.clone(),
    };
    let origin = std::fs::read_to_string(keys::keys_dir(state_dir).join("origin"))
        .ok()
        .map(|s| s.trim().to_string())
        .or_else(|| {
            root_key
                .as_ref()
                .and_then(|k| k.name.rsplit_once("/e").map(|(o, _)| o.to_string()))
        });

    let read_notes = |path: &Path, file: &str, problems: &mut Vec<Problem>| -> Vec<Note> {
        match std::fs::read(path) {
            Ok(b) => match String::from_utf8(b) {
                Ok(s) => match note::parse_notes(&s) {
                    Ok(n) => n,
                    Err(line) => {
                        problems.push(Problem::BadFile {
                            file: file.into(),
                            detail: format!("line {line} is not part of a signed note"),
                        });
                        Vec::new()
                    }
                },
                Err(_) => {
                    problems.push(Problem::BadFile {
                        file: file.into(),
                        detail: "not UTF-8".into(),
                    });
                    Vec::new()
                }
            },
            Err(_) => Vec::new(),
        }
    };
    let rotations = read_notes(&paths.rotations, "audit/rotations", &mut problems);
    let checkpoints = read_notes(&paths.checkpoints, "audit/checkpoints", &mut problems);

    let mut epochs: Vec<Epoch> = Vec::new();
    // Tree sizes whose root must be checked: size → (what, expected root).
    let mut commitments: BTreeMap<u64, Vec<(usize, Hash)>> = BTreeMap::new();
    let mut rotation_roots: Vec<(u64, Hash, usize)> = Vec::new();
    if let Some(k) = &root_key {
        epochs.push(Epoch {
            key: k.clone(),
            from: 0,
        });
        for (i, n) in rotations.iter().enumerate() {
            let what = format!("rotation {}", i + 1);
            let prev = &epochs[epochs.len() - 1].key;
            if !n.signed_by(prev) {
                problems.push(Problem::BadSignature {
                    what,
                    detail: format!("not signed by the epoch {i} key {}", prev.name),
                });
                break;
            }
            match parse_rotation(&n.text) {
                Some((o, e, size, root, key))
                    if e as usize == i + 1 && Some(&o) == origin.as_ref() =>
                {
                    rotation_roots.push((size, root, i + 1));
                    epochs.push(Epoch { key, from: size });
                }
                _ => {
                    problems.push(Problem::BadFile {
                        file: "audit/rotations".into(),
                        detail: format!("{what} is not a rotation statement of this log"),
                    });
                    break;
                }
            }
        }
    }

    let mut last_size = 0;
    let mut checkpointed = 0;
    for (i, n) in checkpoints.iter().enumerate() {
        let num = i + 1;
        let Some(cp) = Checkpoint::parse(&n.text) else {
            problems.push(Problem::BadFile {
                file: "audit/checkpoints".into(),
                detail: format!("checkpoint {num} is not a checkpoint"),
            });
            continue;
        };
        if Some(&cp.origin) != origin.as_ref() {
            problems.push(Problem::BadFile {
                file: "audit/checkpoints".into(),
                detail: format!("checkpoint {num} is for another log ({})", cp.origin),
            });
            continue;
        }
        if epochs.is_empty() {
            continue;
        }
        // The epoch in force at this size: the newest whose rotation is at or before it. A
        // checkpoint at exactly a rotation's size may be signed by either side.
        let ok = epochs.iter().enumerate().any(|(e, ep)| {
            let until = epochs.get(e + 1).map_or(u64::MAX, |n| n.from);
            ep.from <= cp.size && cp.size <= until && n.signed_by(&ep.key)
        });
        if !ok {
            problems.push(Problem::BadSignature {
                what: format!("checkpoint {num}"),
                detail: format!(
                    "not signed by the key of its epoch (signers named: {})",
                    n.signer_names().join(", ")
                ),
            });
            continue;
        }
        if cp.size < last_size {
            problems.push(Problem::CheckpointOrder { checkpoint: num });
        }
        last_size = cp.size;
        commitments.entry(cp.size).or_default().push((num, cp.root));
    }
    let newest = commitments.keys().next_back().copied().unwrap_or(0);
    let mut m = super::MILESTONE;
    while m <= newest {
        if !commitments.contains_key(&m) {
            problems.push(Problem::MissingCheckpoint { size: m });
            break;
        }
        m += super::MILESTONE;
    }
    if root_key.is_none() && (!checkpoints.is_empty() || paths.log.exists()) {
        problems.push(Problem::NoKey);
    }
    let mut anchor_size = None;
    if let Some(a) = &opts.anchor {
        match note::parse_notes(a)
            .ok()
            .and_then(|n| n.into_iter().next())
            .and_then(|n| Checkpoint::parse(&n.text).map(|c| (n, c)))
        {
            Some((n, cp)) => {
                if Some(&cp.origin) != origin.as_ref() {
                    problems.push(Problem::BadSignature {
                        what: "anchor".into(),
                        detail: format!("it is a checkpoint of another log ({})", cp.origin),
                    });
                } else if !epochs.iter().any(|e| n.signed_by(&e.key)) {
                    problems.push(Problem::BadSignature {
                        what: "anchor".into(),
                        detail: "not signed by any key of this log's key chain (keys replaced?)"
                            .into(),
                    });
                } else {
                    anchor_size = Some(cp.size);
                    commitments.entry(cp.size).or_default().push((0, cp.root));
                }
            }
            None => problems.push(Problem::BadFile {
                file: "anchor".into(),
                detail: "not a signed checkpoint note".into(),
            }),
        }
    }
    for (size, root, e) in &rotation_roots {
        commitments
            .entry(*size)
            .or_default()
            .push((usize::MAX - e, *root));
    }

    // The records.
    let mut chain = ChainCheck::new(commitments);
    let mut f = match std::fs::File::open(&paths.log) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(AuditError::Io {
                what: "reading",
                path: paths.log.clone(),
                source: e,
            });
        }
    };
    if let Some(f) = &mut f {
        let mut buf = vec![0u8; 4 << 20];
        let mut carry: Vec<u8> = Vec::new();
        loop {
            let n = f.read(&mut buf).map_err(|e| AuditError::Io {
                what: "reading",
                path: paths.log.clone(),
                source: e,
            })?;
            if n == 0 {
                break;
            }
            let mut data = &buf[..n];
            if !carry.is_empty() {
                match memchr::memchr(b'\n', data) {
                    Some(i) => {
                        carry.extend_from_slice(&data[..i]);
                        let line = std::mem::take(&mut carry);
                        chain.line(&line);
                        data = &data[i + 1..];
                    }
                    None => {
                        carry.extend_from_slice(data);
                        continue;
                    }
                }
            }
            let mut pos = 0;
            for i in memchr::memchr_iter(b'\n', data) {
                chain.line(&data[pos..i]);
                pos = i + 1;
            }
            carry.extend_from_slice(&data[pos..]);
        }
        if !carry.is_empty() {
            chain.torn = true;
            chain.line(&carry);
        }
    }
    let records = chain.range.size();
    let root = crate::durable::hex(&chain.range.root());
    let mut chain_problems = chain.finish();
    problems.append(&mut chain_problems.0);
    let mut truncated_reported = false;
    for (size, list) in chain_problems.1 {
        for (num, _) in list {
            if num == 0 || (num < usize::MAX / 2 && !truncated_reported) {
                truncated_reported |= num != 0;
                problems.push(Problem::Truncated {
                    checkpoint: num,
                    size,
                    records,
                });
            } else if num >= usize::MAX / 2 {
                problems.push(Problem::BadFile {
                    file: "audit/rotations".into(),
                    detail: format!(
                        "rotation {} commits to {size} records, the log has {records} (truncated)",
                        usize::MAX - num
                    ),
                });
            }
        }
    }
    if let Some(s) = anchor_size {
        checkpointed = checkpointed.max(s.min(records));
    }
    if last_size > checkpointed {
        checkpointed = last_size.min(records);
    }
    let mut newer = 0;
    if opts.require_covered && records > last_size && problems.is_empty() {
        match opts.covered_before {
            // Everything there when the verify began is signed: the rest came after.
            Some(n) if last_size >= n.min(records) => newer = records - last_size,
            _ => problems.push(Problem::Uncovered {
                records: records - last_size,
            }),
        }
    }
    Ok(VerifyReport {
        records,
        checkpoints: checkpoints.len(),
        epochs: epochs.len(),
        checkpointed,
        newer,
        root,
        problems,
    })
}

/// Commitments by tree size: (checkpoint number, root).
type Commitments = BTreeMap<u64, Vec<(usize, Hash)>>;

/// Streams lines, checks seq/prev, builds the tree and checks commitments as sizes pass.
struct ChainCheck {
    range: CompactRange,
    last: Hash,
    line_no: u64,
    /// Expected seq of the next record.
    expect: u64,
    problems: Vec<Problem>,
    /// size → (checkpoint number, root).
    pending: Commitments,
    /// Leaf hashes by position, for duplicate detection.
    leaves: Vec<Hash>,
    torn: bool,
    /// Largest size whose commitments held.
    good: u64,
    mismatch: bool,
}

impl ChainCheck {
    fn new(pending: Commitments) -> ChainCheck {
        let mut c = ChainCheck {
            range: CompactRange::new(),
            last: [0; 32],
            line_no: 0,
            expect: 1,
            problems: Vec::new(),
            pending,
            leaves: Vec::new(),
            torn: false,
            good: 0,
            mismatch: false,
        };
        c.check_commitments();
        c
    }

    fn line(&mut self, line: &[u8]) {
        self.line_no += 1;
        let leaf = merkle::leaf_hash(line);
        if self.torn {
            self.problem(Problem::Torn { line: self.line_no });
        }
        match line_prefix(line) {
            None => self.problem(Problem::Malformed { line: self.line_no }),
            Some((seq, prev)) => {
                if seq == self.expect {
                    if prev != self.last {
                        self.problem(Problem::Edited { seq: seq - 1 });
                    }
                } else if seq < self.expect
                    && seq >= 1
                    && self.leaves.get(seq as usize - 1) == Some(&leaf)
                {
                    self.problem(Problem::Duplicated { seq });
                } else if seq < self.expect {
                    self.problem(Problem::Reordered {
                        line: self.line_no,
                        expected: self.expect,
                        found: seq,
                    });
                } else if prev == self.last {
                    // It continues the chain but its number skips: renumbered.
                    self.problem(Problem::Malformed { line: self.line_no });
                } else {
                    self.problem(Problem::Missing {
                        from: self.expect,
                        to: seq - 1,
                    });
                }
                // Resynchronise on what the line says, so one problem is reported once.
                self.expect = seq.saturating_add(1);
            }
        }
        // The previous record's commitments are checked after this line's chain check: an
        // edit is named by the chain (exactly) before a checkpoint notices it (coarsely).
        self.check_commitments();
        self.last = leaf;
        self.leaves.push(leaf);
        self.range.push(leaf);
    }

    /// Reordered records are reported once, as a reorder, not also as a missing range.
    fn problem(&mut self, p: Problem) {
        if let (Some(Problem::Reordered { .. }), Problem::Missing { .. } | Problem::Edited { .. }) =
            (self.problems.last(), &p)
        {
            return;
        }
        if let (Some(Problem::Missing { .. }), Problem::Reordered { .. }) =
            (self.problems.last(), &p)
        {
            // `1 2 4 3 5`: line 3 looked like a gap; line 4 shows a swap.
            self.problems.pop();
        }
        if self.problems.len() < 100 {
            self.problems.push(p);
        }
    }

    fn check_commitments(&mut self) {
        let size = self.range.size();
        if let Some(list) = self.pending.remove(&size) {
            let root = self.range.root();
            let held = list.iter().all(|(_, r)| *r == root);
            for (num, r) in list {
                if r != root {
                    if num >= usize::MAX / 2 {
                        self.problems.push(Problem::BadFile {
                            file: "audit/rotations".into(),
                            detail: format!(
                                "rotation {} commits to a different tree of {size} records (records rewritten)",
                                usize::MAX - num
                            ),
                        });
                    } else if !self.mismatch {
                        // Later checkpoints fail too, as a consequence: the first names it.
                        self.mismatch = true;
                        self.problems.push(Problem::RootMismatch {
                            checkpoint: num,
                            size,
                            after: self.good,
                        });
                    }
                }
            }
            if held && !self.mismatch {
                self.good = size;
            }
        }
    }

    /// Problems, and commitments beyond the end of the log.
    fn finish(mut self) -> (Vec<Problem>, Commitments) {
        self.check_commitments();
        (self.problems, self.pending)
    }
}

/// Fuzz entry: the first byte picks a mode, the rest alters a valid 20-record log (replaced
/// whole, or bytes overwritten or inserted at an offset). Verification must not fail or panic,
/// and must never call an altered log valid (an assertion). Errors (setting up, or verification
/// failing instead of reporting) are returned: the fuzz target panics on them.
#[doc(hidden)]
pub fn fuzz_verify(data: &[u8]) -> Result<(), String> {
    use std::sync::OnceLock;
    static BASE: OnceLock<Result<(std::path::PathBuf, Vec<u8>), String>> = OnceLock::new();
    let (dir, orig) = BASE
        .get_or_init(fuzz_verify_base)
        .as_ref()
        .map_err(Clone::clone)?;
    let Some((&mode, rest)) = data.split_first() else {
        return Ok(());
    };
    let log = match mode % 3 {
        0 => rest.to_vec(),
        m => {
            let (Some(&a), Some(&b)) = (rest.first(), rest.get(1)) else {
                return Ok(());
            };
            let at = (usize::from(a) << 8 | usize::from(b)) % (orig.len() + 1);
            let patch = &rest[2..];
            let mut v = orig.clone();
            if m == 1 {
                let end = (at + patch.len()).min(v.len());
                v.splice(at..end, patch.iter().copied());
            } else {
                v.splice(at..at, patch.iter().copied());
            }
            v
        }
    };
    std::fs::write(Paths::new(dir).log, &log).map_err(|e| format!("writing the log: {e}"))?;
    let r = verify(dir, &VerifyOptions::default()).map_err(|e| format!("verify failed: {e}"))?;
    assert!(
        !r.ok() || log == *orig,
        "an altered log verified: {} bytes (original {})",
        log.len(),
        orig.len()
    );
    std::fs::write(Paths::new(dir).log, orig).map_err(|e| format!("restoring the log: {e}"))
}

/// The fuzz target's valid log: 20 records in a scratch directory, and its bytes.
fn fuzz_verify_base() -> Result<(std::path::PathBuf, Vec<u8>), String> {
    let dir = std::env::temp_dir().join(format!("gateway-fuzz-verify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("fuzz dir: {e}"))?;
    {
        let mut log = super::AuditLog::open(
            &dir,
            super::Checkpoints::Batch {
                records: 5,
                interval: std::time::Duration::from_secs(3600),
            },
        )
        .map_err(|e| format!("fuzz log: {e}"))?;
        for i in 0..20 {
            let mut r = super::Record {
                tool: "exec".into(),
                args: vec!["echo".into(), format!("call {i}")],
                exit_code: Some(i % 2),
                ..super::Record::default()
            };
            log.append(&mut r).map_err(|e| format!("append: {e}"))?;
        }
    }
    let orig = std::fs::read(Paths::new(&dir).log).map_err(|e| format!("log: {e}"))?;
    Ok((dir, orig))
}
