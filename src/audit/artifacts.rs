//! Content-addressed blobs of (redacted) command output: `<state>/audit/artifacts/<id>`,
//! 0600. A stream is hashed whole; the stored copy may be capped (the record says so).
//!
//! The id is the hash of the stored content by the algorithm the record's digest names:
//! BLAKE3 now, SHA-256 in records written before. A stored copy of [`COMPRESS_AT`] bytes or
//! more is one zstd frame; a smaller one is the content as is (and so is every artifact
//! written before compression). A reader tells them apart by the hash: the decompressed
//! content, bounded by the record's size, must match the id, else the raw bytes must.

use super::{AuditError, DigestAlg, StreamDigest};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Stored copies from this size on are compressed.
pub const COMPRESS_AT: usize = 64 << 10;

/// zstd level of stored copies: the fastest, so that storing keeps up with a pipe.
const LEVEL: i32 = 1;

/// BLAKE3 takes its input in whole subtrees at aligned offsets: fed the relay's odd-sized
/// chunks (whatever a read returned, less what redaction holds back) it hashed 256 MiB in
/// 0.084 s of CPU, fed the same bytes in 64 KiB pieces at 64 KiB offsets in 0.036 s, the
/// copy into this buffer included (issue 16: hashing was ~14% of a redacted exec's CPU).
const HASH_BLOCK: usize = 64 << 10;

/// A BLAKE3 hasher fed in [`HASH_BLOCK`] pieces at aligned offsets.
#[derive(Clone)]
struct Hasher {
    h: blake3::Hasher,
    /// Bytes not yet hashed: fewer than [`HASH_BLOCK`].
    buf: Vec<u8>,
}

impl Hasher {
    fn new() -> Hasher {
        Hasher {
            h: blake3::Hasher::new(),
            buf: Vec::new(),
        }
    }

    fn update(&mut self, mut data: &[u8]) {
        if !self.buf.is_empty() {
            let k = (HASH_BLOCK - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..k]);
            data = &data[k..];
            if self.buf.len() < HASH_BLOCK {
                return;
            }
            self.h.update(&self.buf);
            self.buf.clear();
        }
        let whole = data.len() - data.len() % HASH_BLOCK;
        self.h.update(&data[..whole]);
        self.buf.extend_from_slice(&data[whole..]);
    }

    fn finalize(&self) -> blake3::Hash {
        let mut h = self.h.clone();
        h.update(&self.buf);
        h.finalize()
    }
}

/// Where the stored copy goes: held in memory until it reaches [`COMPRESS_AT`], then
/// compressed into a temporary file.
enum Sink {
    Buffer(Vec<u8>),
    File(PathBuf, zstd::stream::write::Encoder<'static, File>),
}

/// Hashes a stream (BLAKE3) and stores (up to `cap` bytes of) it.
pub struct ArtifactWriter {
    dir: PathBuf,
    cap: u64,
    sink: Sink,
    full: Hasher,
    /// The hash of the stored part, once the stream is longer than the cap (until then the
    /// stored part is the whole stream: one hash serves both).
    stored: Option<blake3::Hash>,
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
            sink: Sink::Buffer(Vec::new()),
            full: Hasher::new(),
            stored: None,
            bytes: 0,
            kept: 0,
            failed: false,
        }
    }

    /// Feeds a chunk.
    pub fn write(&mut self, data: &[u8]) {
        self.bytes += data.len() as u64;
        let room = self.cap.saturating_sub(self.kept) as usize;
        let part = &data[..room.min(data.len())];
        self.full.update(part);
        if part.len() < data.len() {
            // The cap is reached: what is stored ends here.
            if self.stored.is_none() {
                self.stored = Some(self.full.finalize());
            }
            self.full.update(&data[part.len()..]);
        }
        if part.is_empty() || self.failed {
            self.kept += part.len() as u64;
            return;
        }
        self.kept += part.len() as u64;
        if let Err(()) = self.store(part) {
            self.failed = true;
        }
    }

    fn store(&mut self, part: &[u8]) -> Result<(), ()> {
        match &mut self.sink {
            Sink::Buffer(b) if b.len() + part.len() < COMPRESS_AT => {
                b.extend_from_slice(part);
                Ok(())
            }
            Sink::Buffer(b) => {
                let head = std::mem::take(b);
                let (tmp, f) = Self::create(&self.dir)?;
                let mut enc = zstd::stream::write::Encoder::new(f, LEVEL).map_err(|_| ())?;
                let r = enc.write_all(&head).and_then(|()| enc.write_all(part));
                self.sink = Sink::File(tmp, enc);
                r.map_err(|_| ())
            }
            Sink::File(_, enc) => enc.write_all(part).map_err(|_| ()),
        }
    }

    /// A new temporary file in the store `dir`.
    fn create(dir: &Path) -> Result<(PathBuf, File), ()> {
        let _ = super::keys::private_dir(dir);
        let tmp = dir.join(format!(
            ".tmp.{}.{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map(|f| (tmp, f))
            .map_err(|_| ())
    }

    /// Finishes: the digest of the whole stream and the artifact id of what was stored.
    pub fn finish(self) -> StreamDigest {
        let full = self.full.finalize().to_hex().to_string();
        let id = match &self.stored {
            Some(h) => h.to_hex().to_string(),
            None => full.clone(),
        };
        let mut artifact = None;
        if self.kept > 0 && !self.failed {
            let tmp = match self.sink {
                Sink::Buffer(b) => Self::create(&self.dir).ok().and_then(|(tmp, mut f)| {
                    let ok = f.write_all(&b).is_ok();
                    ok.then_some(tmp)
                }),
                Sink::File(tmp, enc) => match enc.finish() {
                    Ok(_) => Some(tmp),
                    Err(_) => {
                        let _ = std::fs::remove_file(&tmp);
                        None
                    }
                },
            };
            if let Some(tmp) = tmp {
                let dst = self.dir.join(&id);
                if dst.exists() || std::fs::rename(&tmp, &dst).is_ok() {
                    artifact = Some(id);
                }
                let _ = std::fs::remove_file(&tmp);
            }
        } else if let Sink::File(tmp, _) = self.sink {
            let _ = std::fs::remove_file(&tmp);
        }
        StreamDigest {
            bytes: self.bytes,
            sha256: None,
            blake3: Some(full),
            artifact_truncated: artifact.is_some() && self.kept < self.bytes,
            artifact,
        }
    }
}

/// The stored content of a stream, checked against its artifact id by the digest's
/// algorithm: decompressed if it is a zstd frame (at most `d.bytes` bytes), as is otherwise.
pub fn read(state_dir: &Path, d: &StreamDigest) -> Result<Vec<u8>, AuditError> {
    let dir = super::Paths::new(state_dir).artifacts;
    let Some(id) = &d.artifact else {
        return Err(AuditError::Artifact {
            path: dir,
            what: "not stored".into(),
        });
    };
    let p = dir.join(id);
    if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(AuditError::Artifact {
            path: p,
            what: format!("{id} is not an artifact id"),
        });
    }
    let Some((alg, _)) = d.hash() else {
        return Err(AuditError::Artifact {
            path: p,
            what: "the record names no hash algorithm".into(),
        });
    };
    let raw = std::fs::read(&p).map_err(|source| AuditError::Io {
        what: "reading artifact",
        path: p.clone(),
        source,
    })?;
    decode(&raw, id, alg, d.bytes).map_err(|what| AuditError::Artifact { path: p, what })
}

/// zstd's frame magic number.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// An artifact's content from its stored bytes: a zstd frame of at most `max` bytes whose
/// content hashes to `id`, or the bytes themselves if they do.
fn decode(raw: &[u8], id: &str, alg: DigestAlg, max: u64) -> Result<Vec<u8>, String> {
    let mut why = "does not match its hash (altered)".to_string();
    if raw.starts_with(&ZSTD_MAGIC) {
        let mut data = Vec::new();
        match zstd::stream::read::Decoder::with_buffer(raw)
            .and_then(|d| d.take(max.saturating_add(1)).read_to_end(&mut data))
        {
            Ok(_) if data.len() as u64 > max => {
                why = format!("decompresses to more than the {max} bytes recorded (altered)");
            }
            Ok(_) if alg.hex(&data) == id => return Ok(data),
            Ok(_) => {}
            Err(e) => why = format!("is not a readable zstd frame ({e}) (altered)"),
        }
    }
    // Stored as is (small, or written before compression), or raw bytes that begin like a
    // zstd frame.
    if alg.hex(raw) == id {
        return Ok(raw.to_vec());
    }
    Err(why)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The aligned hasher's digest is BLAKE3's of the whole input, however it is cut (pieces
    /// of 0 bytes to several blocks, ends inside and on block edges), and the digest taken
    /// midway is that of the input so far.
    #[test]
    fn the_aligned_hasher_hashes_what_blake3_hashes_whatever_the_pieces() {
        let data: Vec<u8> = (0..700_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut x = 88_172_645_463_325_252u64;
        for round in 0..40 {
            let mut h = Hasher::new();
            let mut at = 0;
            while at < data.len() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = match x % 5 {
                    0 => 0,
                    1 => (x >> 8) as usize % 64,
                    2 => HASH_BLOCK - at % HASH_BLOCK,
                    3 => (x >> 8) as usize % (3 * HASH_BLOCK),
                    _ => (x >> 8) as usize % 5000,
                };
                let e = (at + n).min(data.len());
                h.update(&data[at..e]);
                at = e;
                if round % 4 == 0 && x.is_multiple_of(7) {
                    assert_eq!(
                        h.finalize(),
                        blake3::hash(&data[..at]),
                        "round {round} at {at}"
                    );
                }
            }
            assert_eq!(h.finalize(), blake3::hash(&data), "round {round}");
        }
    }
}
