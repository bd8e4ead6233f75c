//! Signing keys with epochs: `<state>/keys/` (0700) holds `origin`, `epoch-N.key` (PKCS#8,
//! 0600; only the current epoch's exists) and `epoch-N.pub` (verifier keys). Rotation
//! statements, public, are in `<state>/audit/rotations`.

use super::AuditError;
use super::note::{Signer, VerifierKey};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::Ed25519KeyPair;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The keys directory of a state directory.
pub fn keys_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("keys")
}

/// Key name of an epoch: `<origin>/e<N>`.
pub fn key_name(origin: &str, epoch: u32) -> String {
    format!("{origin}/e{epoch}")
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> AuditError + 'a {
    move |source| AuditError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Creates a directory with mode 0700 (and its parents).
pub fn private_dir(p: &Path) -> Result<(), AuditError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(io("creating", p))
}

/// Writes a new file with `mode`, durably and atomically (fails if it exists): a process
/// killed at any moment leaves the whole file or none — a torn key or origin would stop
/// every later call. Written to a temporary name, synced, then hard-linked into place
/// (`link` never replaces, so two racing writers cannot both win), and the directory synced.
pub fn write_new(path: &Path, data: &[u8], mode: u32) -> Result<(), AuditError> {
    // A bare relative name's parent is `Some("")`, which no system call accepts.
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .map_err(io("creating", &tmp))?;
        f.write_all(data).map_err(io("writing", &tmp))?;
        f.sync_all().map_err(io("syncing", &tmp))?;
        std::fs::hard_link(&tmp, path).map_err(io("creating", path))
    })();
    let _ = std::fs::remove_file(&tmp);
    written?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("syncing", dir))
}

/// The log's origin line, created with a random id on first use.
pub fn origin(state_dir: &Path) -> Result<String, AuditError> {
    let dir = keys_dir(state_dir);
    let p = dir.join("origin");
    match std::fs::read_to_string(&p) {
        Ok(s) if !s.trim().is_empty() => return Ok(s.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("reading", &p)(e)),
    }
    private_dir(&dir)?;
    let mut id = [0u8; 8];
    SystemRandom::new()
        .fill(&mut id)
        .map_err(|_| AuditError::Key("the system random generator failed".into()))?;
    let o = format!("gateway.local/audit/{}", crate::durable::hex(&id));
    write_new(&p, format!("{o}\n").as_bytes(), 0o644)?;
    Ok(o)
}

/// Epochs that have a private key file, ascending.
fn private_epochs(dir: &Path) -> Result<Vec<u32>, AuditError> {
    let mut v = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
        Err(e) => return Err(io("listing", dir)(e)),
    };
    for e in rd.flatten() {
        let n = e.file_name();
        let n = n.to_string_lossy();
        if let Some(num) = n
            .strip_prefix("epoch-")
            .and_then(|x| x.strip_suffix(".key"))
            && let Ok(k) = num.parse()
        {
            v.push(k);
        }
    }
    v.sort_unstable();
    Ok(v)
}

fn load_signer(dir: &Path, origin: &str, epoch: u32) -> Result<Signer, AuditError> {
    let p = dir.join(format!("epoch-{epoch}.key"));
    let der = std::fs::read(&p).map_err(io("reading", &p))?;
    let pair = Ed25519KeyPair::from_pkcs8(&der).map_err(|_| {
        AuditError::Key(format!(
            "{} is not an Ed25519 PKCS#8 key; restore it from a backup or start a new state directory",
            p.display()
        ))
    })?;
    Ok(Signer {
        name: key_name(origin, epoch),
        pair,
    })
}

/// Generates the key of `epoch` and writes its private (0600) and public files.
pub fn generate(state_dir: &Path, origin: &str, epoch: u32) -> Result<Signer, AuditError> {
    let dir = keys_dir(state_dir);
    private_dir(&dir)?;
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
        .map_err(|_| AuditError::Key("generating an Ed25519 key failed".into()))?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
        .map_err(|_| AuditError::Key("the new key did not load".into()))?;
    let s = Signer {
        name: key_name(origin, epoch),
        pair,
    };
    // The private key first: a crash before the public key is written is mended on the next
    // load (the public key is derived from it); the other order would leave a public key
    // without its private key, which is how a deleted key looks.
    write_new(
        &dir.join(format!("epoch-{epoch}.key")),
        pkcs8.as_ref(),
        0o600,
    )?;
    write_public(&dir, &s, epoch)?;
    Ok(s)
}

/// Writes `epoch-N.pub` for a signer.
fn write_public(dir: &Path, s: &Signer, epoch: u32) -> Result<(), AuditError> {
    write_new(
        &dir.join(format!("epoch-{epoch}.pub")),
        format!("{}\n", s.verifier().encode()).as_bytes(),
        0o644,
    )
}

/// The current signer: the newest epoch with a private key; on first use, epoch 0 is
/// generated. `rotations` is how many rotations the log records (the current epoch must be
/// that number).
pub fn current(state_dir: &Path, origin: &str, rotations: u32) -> Result<Signer, AuditError> {
    let dir = keys_dir(state_dir);
    let epochs = private_epochs(&dir)?;
    match epochs.last() {
        Some(&e) if e == rotations => {
            let s = load_signer(&dir, origin, e)?;
            // Generation was cut off between the private and the public key.
            if !dir.join(format!("epoch-{e}.pub")).exists() {
                write_public(&dir, &s, e)?;
            }
            Ok(s)
        }
        Some(&e) => Err(AuditError::Key(format!(
            "the newest signing key is epoch {e} but the log records {rotations} rotation(s): keys in {} do not belong to this log",
            dir.display()
        ))),
        None if rotations == 0 && !dir.join("epoch-0.pub").exists() => {
            generate(state_dir, origin, 0)
        }
        None => Err(AuditError::Key(format!(
            "no private key for epoch {rotations} in {}: it was deleted; nothing can be signed (run `gateway keys rotate --new-log` to start a new log)",
            dir.display()
        ))),
    }
}

/// The epoch-0 public key as stored locally.
pub fn root_key(state_dir: &Path) -> Result<Option<VerifierKey>, AuditError> {
    let p = keys_dir(state_dir).join("epoch-0.pub");
    match std::fs::read_to_string(&p) {
        Ok(s) => VerifierKey::decode(&s)
            .map(Some)
            .ok_or_else(|| AuditError::Key(format!("{} is not a verifier key", p.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("reading", &p)(e)),
    }
}

/// Destroys a private key: overwritten with zeros, synced, removed. (On copy-on-write or
/// journalling file systems the old blocks may survive on disk; the file is gone.)
pub fn destroy(state_dir: &Path, epoch: u32) -> Result<(), AuditError> {
    let p = keys_dir(state_dir).join(format!("epoch-{epoch}.key"));
    let len = std::fs::metadata(&p).map_err(io("reading", &p))?.len();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .map_err(io("opening", &p))?;
    f.write_all(&vec![0u8; len as usize])
        .map_err(io("overwriting", &p))?;
    f.sync_all().map_err(io("syncing", &p))?;
    std::fs::remove_file(&p).map_err(io("removing", &p))?;
    let dir = keys_dir(state_dir);
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
