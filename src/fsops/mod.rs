//! File operations of the file tools: resolution beneath allowed roots (`path`), the edit
//! engine (`text`), glob and grep (`search`), and atomic replacement (also used by
//! `gateway scan --redact`). Pure of policy: the broker's worker calls them confined.

pub mod path;
pub mod search;
pub mod text;

use std::io::Write;
use std::path::Path;

/// Errors of file operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// An I/O step failed on a path.
    #[error("{what} {path}: {}", crate::shown::os_error(source))]
    Io {
        /// The step.
        what: &'static str,
        /// The path.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The path is outside the allowed directories, or would lead there.
    #[error("refused: {path}: {why}")]
    Escape {
        /// The path as given.
        path: std::path::PathBuf,
        /// Why.
        why: &'static str,
    },
    /// A directory on the way to the path is a symbolic link (where links are not followed).
    #[error("refused: {path}: a directory on its way is a symbolic link now (undo follows none)")]
    ThroughLink {
        /// The path.
        path: std::path::PathBuf,
    },
    /// Not a regular file.
    #[error("{path} is not a regular file")]
    NotAFile {
        /// The path.
        path: std::path::PathBuf,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> FsError + 'a {
    move |source| FsError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Replaces the contents of `path` atomically: a temp file in the same directory, written,
/// fsync'd, given the old file's permissions, renamed over `path`, and the directory fsync'd.
/// A crash leaves the old content or the new, never a torn file.
pub fn atomic_replace(path: &Path, data: &[u8]) -> Result<(), FsError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path).map_err(io("reading metadata of", path))?;
    if !meta.is_file() {
        return Err(FsError::Io {
            what: "refusing to replace (not a regular file)",
            path: path.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        });
    }
    let dir = crate::durable::parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = None;
    for i in 0..100u32 {
        let cand = dir.join(format!(".{name}.gateway-tmp-{}-{i}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&cand)
        {
            Ok(f) => {
                tmp = Some((cand, f));
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io("creating a temporary file next to", path)(e)),
        }
    }
    let Some((tmp_path, mut f)) = tmp else {
        return Err(FsError::Io {
            what: "finding a free temporary name next to",
            path: path.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        });
    };
    let result = (|| {
        f.write_all(data).map_err(io("writing", &tmp_path))?;
        f.set_permissions(std::fs::Permissions::from_mode(meta.permissions().mode()))
            .map_err(io("setting permissions of", &tmp_path))?;
        f.sync_all().map_err(io("syncing", &tmp_path))?;
        std::fs::rename(&tmp_path, path).map_err(io("renaming over", path))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("syncing directory", dir))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp_path);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_keeps_mode() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("gw-fsops-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("dir");
        let p = d.join("f.txt");
        std::fs::write(&p, b"old").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        atomic_replace(&p, b"new").expect("replace");
        assert_eq!(std::fs::read(&p).expect("read"), b"new");
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        assert_eq!(
            std::fs::read_dir(&d).expect("ls").count(),
            1,
            "no temp file left"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
