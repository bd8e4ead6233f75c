//! One of each for the crate (DESIGN.md): writing a broker-owned file whole or not at all
//! (a temporary file of this call's own beside it, renamed over it), and lowercase hex.
//!
//! A leaf: it imports nothing of the crate but `shown` (how an OS error reads). Files in the
//! agent's trees are not written here: those are written beneath a descriptor of their root
//! (`fsops::path::write_atomic`, undo's `revert`), keeping the old file's mode and owner,
//! with temporary names crash recovery knows (`.NAME.gateway-tmp-PID-N`).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A step of a write that failed, on which path.
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {}", crate::shown::os_error(source))]
pub struct Error {
    /// The step: creating, writing, syncing, renaming over, syncing directory.
    pub what: &'static str,
    /// The temporary file, the file, or its directory.
    pub path: PathBuf,
    /// The OS error.
    pub source: std::io::Error,
}

fn err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(D[usize::from(b >> 4)] as char);
        s.push(D[usize::from(b & 15)] as char);
    }
    s
}

/// The bytes of lower-case or upper-case hex `s` (None: not hex, or of odd length).
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The directory holding `path`, as a path a system call accepts: its parent, or `.` for a
/// bare relative name, whose `parent()` is `Some("")` (opening `""` fails with ENOENT, so a
/// write to `leak.py` would rename the file and then fail to sync its directory).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Creates a new file (0600) named `.NAME.tmp-<unique>` in `dir` for an atomic write of
/// `name`: a name of this call's own, since calls of one process (the MCP server's, the
/// daemon's) may write the same file at once. Err: the name tried, and why.
fn create_temp(dir: &Path, name: &str) -> Result<(PathBuf, File), (PathBuf, std::io::Error)> {
    use std::os::unix::fs::OpenOptionsExt;
    loop {
        let tmp = dir.join(format!(".{name}.tmp-{}", unique_suffix()));
        // not-ws: a temporary file of the caller's own, created new
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err((tmp, e)),
        }
    }
}

/// A temporary file name's suffix no other call uses: the process, a counter and a random
/// number. Calls of one process (the MCP server's, the daemon's) write the same file at
/// once, and a process may reuse a dead one's pid and find its files.
pub fn unique_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // `RandomState`'s keys come from the OS's random source.
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    format!("{}-{n}-{r:016x}", std::process::id())
}

/// Creates or replaces a broker-owned file (in the state directory) atomically, mode 0600:
/// a temporary file next to it (`create_temp`), synced, renamed over it, the directory
/// synced. A crash leaves the old content or the new, never a torn file.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), Error> {
    replace(path, data, true)
}

/// As [`write_atomic`], for a cache (rebuilt when lost): whole or not at all, but neither the
/// file nor its directory synced.
pub fn write_atomic_unsynced(path: &Path, data: &[u8]) -> Result<(), Error> {
    replace(path, data, false)
}

fn replace(path: &Path, data: &[u8], sync: bool) -> Result<(), Error> {
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let (tmp, mut f) = create_temp(dir, &name).map_err(|(tmp, e)| err("creating", &tmp)(e))?;
    let written = f
        .write_all(data)
        .map_err(err("writing", &tmp))
        .and_then(|()| {
            if sync {
                f.sync_all().map_err(err("syncing", &tmp))
            } else {
                Ok(())
            }
        })
        .and_then(|()| std::fs::rename(&tmp, path).map_err(err("renaming over", path)));
    if let Err(e) = written {
        // Nothing half-written left behind (the name is this call's alone).
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if sync {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(err("syncing directory", dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_two_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0, 1, 0x0f, 0x10, 0xab, 0xff]), "00010f10abff");
    }

    #[test]
    fn parent_dir_of_a_bare_name_is_the_current_directory() {
        assert_eq!(parent_dir(Path::new("leak.py")), Path::new("."));
        assert_eq!(parent_dir(Path::new("src/a.py")), Path::new("src"));
        assert_eq!(parent_dir(Path::new("/a")), Path::new("/"));
    }

    #[test]
    fn a_write_replaces_whole_with_mode_0600_and_leaves_no_temporary_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = PathBuf::from(format!("/tmp/gwu-durable-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        let p = d.join("state.json");
        write_atomic(&p, b"one").expect("write");
        write_atomic_unsynced(&p, b"two").expect("write");
        assert_eq!(std::fs::read(&p).expect("read"), b"two");
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(&d)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["state.json"]);
        let e = write_atomic(&d.join("missing/x"), b"x").expect_err("no directory");
        assert_eq!(e.what, "creating");
        std::fs::remove_dir_all(&d).expect("cleanup");
    }
}
