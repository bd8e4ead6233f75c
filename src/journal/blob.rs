//! The backup store's blob format (issue 22 item 7).
//!
//! A blob is named by the SHA-256 of the content it holds (the id), whatever its format:
//!
//! - current: [`MAGIC`] (8 bytes), the content's length (u64, little endian), then one zstd
//!   frame of the content. A sparse or highly compressible file costs a few KiB: runs of
//!   zeros (a sparse file's holes as read) compress to almost nothing.
//! - old (before zstd): the content as is.
//!
//! They are told apart by the header and confirmed by the hash: a blob is the content whose
//! SHA-256 is its id, so an old blob that happens to begin with the magic is still read
//! right (decoded, its hash differs, and the raw bytes are then checked instead). A blob
//! that matches its id neither way is an error ([`BlobError`]), never a panic; decoding is
//! streamed and bounded by the declared length, so a corrupted header cannot make the
//! reader allocate more than the frame really decodes to.

use std::io::Read;

/// The header of a compressed blob.
pub const MAGIC: &[u8; 8] = b"GWBLOBz1";
/// Header length: the magic and the content's length.
const HEADER: usize = 16;
/// zstd level: 3 is zstd's default (fast; zeros and text compress well at any level).
const LEVEL: i32 = 3;

/// Why a blob could not be read back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlobError {
    /// The compressed frame does not decode.
    #[error("the compressed backup is damaged ({0})")]
    Corrupt(std::io::Error),
    /// The header's length and the decoded content differ.
    #[error("the compressed backup is damaged (its header says {declared} bytes, it decodes to {actual}{more})", more = if *.actual > *.declared { " or more" } else { "" })]
    Length {
        /// Bytes the header declares.
        declared: u64,
        /// Bytes decoded (at most one past the declared length).
        actual: u64,
    },
    /// Neither the content decoded nor the raw bytes hash to the blob's id.
    #[error("the backup does not match its hash (altered)")]
    Altered,
}

thread_local! {
    /// One compression context per thread (creating one per blob dominated small files).
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Encodes `data` as a current-format blob.
pub fn encode(data: &[u8]) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        let comp = match c.as_mut() {
            Some(comp) => comp,
            None => c.insert(zstd::bulk::Compressor::new(LEVEL)?),
        };
        let bound = zstd::zstd_safe::compress_bound(data.len());
        let mut out = Vec::with_capacity(HEADER + bound);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        let mut frame = Vec::with_capacity(bound);
        comp.compress_to_buffer(data, &mut frame)?;
        out.extend_from_slice(&frame);
        Ok(out)
    })
}

/// The content of the blob `raw` whose id is `id` (the SHA-256 hex of the content), in
/// either format, verified against the id.
pub fn decode(raw: &[u8], id: &str) -> Result<Vec<u8>, BlobError> {
    let mut why = BlobError::Altered;
    if raw.len() >= HEADER && raw[..8] == MAGIC[..] {
        let mut len = [0u8; 8];
        len.copy_from_slice(&raw[8..HEADER]);
        let declared = u64::from_le_bytes(len);
        match inflate(&raw[HEADER..], declared) {
            Ok(data) if super::sha256_hex(&data) == id => return Ok(data),
            Ok(_) => {}
            Err(e) => why = e,
        }
    }
    // An old blob (the content as is), or one whose raw bytes begin like a header.
    if super::sha256_hex(raw) == id {
        return Ok(raw.to_vec());
    }
    Err(why)
}

/// Decodes one zstd frame of exactly `declared` bytes, reading at most one byte more.
fn inflate(frame: &[u8], declared: u64) -> Result<Vec<u8>, BlobError> {
    let dec = zstd::stream::read::Decoder::with_buffer(frame).map_err(BlobError::Corrupt)?;
    let mut data = Vec::new();
    dec.take(declared.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(BlobError::Corrupt)?;
    if data.len() as u64 != declared {
        return Err(BlobError::Length {
            declared,
            actual: data.len() as u64,
        });
    }
    Ok(data)
}

/// The bytes a blob file really occupies on disk (allocated blocks).
pub fn allocated(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    m.blocks().saturating_mul(512)
}

/// Writes `data` at the start of the new, empty file `f`, leaving runs of zeros (whole
/// 64 KiB blocks) as holes: a sparse file restored from a backup stays sparse. The file
/// reads back exactly as `data`.
pub fn write_sparse(f: &std::fs::File, data: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    const BLOCK: usize = 64 << 10;
    for (i, chunk) in data.chunks(BLOCK).enumerate() {
        if chunk.iter().all(|&b| b == 0) {
            continue;
        }
        f.write_all_at(chunk, (i * BLOCK) as u64)?;
    }
    f.set_len(data.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::sha256_hex;

    #[test]
    fn round_trip_and_compression() {
        for data in [
            Vec::new(),
            b"hello\n".to_vec(),
            (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect(),
        ] {
            let id = sha256_hex(&data);
            let blob = encode(&data).expect("encode");
            assert_eq!(&blob[..8], MAGIC);
            assert_eq!(decode(&blob, &id).expect("decode"), data);
        }
        // A sparse file as read (60 MiB of zeros with a little data) costs a few KiB.
        let mut sparse = vec![0u8; 60 << 20];
        sparse[30 << 20..(30 << 20) + 5].copy_from_slice(b"data!");
        let blob = encode(&sparse).expect("encode");
        assert!(blob.len() < 64 << 10, "{} bytes", blob.len());
        assert_eq!(decode(&blob, &sha256_hex(&sparse)).expect("decode"), sparse);
    }

    #[test]
    fn old_uncompressed_blobs_still_read() {
        let data = b"an old backup, stored as is\n".to_vec();
        assert_eq!(decode(&data, &sha256_hex(&data)).expect("old"), data);
        // Even one whose content begins with the magic.
        let mut tricky = MAGIC.to_vec();
        tricky.extend_from_slice(&[0xff; 8]);
        tricky.extend_from_slice(b"not a zstd frame");
        assert_eq!(decode(&tricky, &sha256_hex(&tricky)).expect("raw"), tricky);
    }

    #[test]
    fn damaged_blobs_are_errors() {
        let data: Vec<u8> = b"some content to keep\n".repeat(1000);
        let id = sha256_hex(&data);
        let blob = encode(&data).expect("encode");
        // A flipped byte in the frame, a truncated frame, a lying length, another id.
        let mut flipped = blob.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x55;
        let mut longer = blob.clone();
        longer[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        let mut shorter = blob.clone();
        shorter[8..16].copy_from_slice(&10u64.to_le_bytes());
        for (what, b, want) in [
            ("flipped", &flipped[..], &id),
            ("truncated", &blob[..blob.len() - 7], &id),
            ("header only", &blob[..HEADER], &id),
            ("length too large", &longer[..], &id),
            ("length too small", &shorter[..], &id),
            ("another id", &blob[..], &sha256_hex(b"other")),
        ] {
            assert!(decode(b, want).is_err(), "{what} was accepted");
        }
        assert!(matches!(
            decode(&shorter, &id),
            Err(BlobError::Length {
                declared: 10,
                actual: 11
            })
        ));
    }

    #[test]
    fn sparse_writes_read_back_exactly_and_leave_holes() {
        use std::os::unix::fs::MetadataExt;
        let d = std::env::temp_dir().join(format!("gateway-blob-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        let mut data = vec![0u8; 8 << 20];
        data[100] = 1;
        data[(5 << 20) + 3] = 2;
        data.extend_from_slice(b"tail");
        let p = d.join("f");
        let f = std::fs::File::create_new(&p).expect("create");
        write_sparse(&f, &data).expect("write");
        drop(f);
        assert_eq!(std::fs::read(&p).expect("read"), data);
        let m = std::fs::metadata(&p).expect("stat");
        assert!(
            m.blocks() * 512 < 1 << 20,
            "{} bytes allocated",
            m.blocks() * 512
        );
        // All zeros, and empty.
        for data in [vec![0u8; 200_000], vec![]] {
            let p = d.join(format!("z{}", data.len()));
            let f = std::fs::File::create_new(&p).expect("create");
            write_sparse(&f, &data).expect("write");
            assert_eq!(std::fs::read(&p).expect("read"), data);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
