//! Paths resolved at the moment of use, beneath an allowed root: every open goes through
//! `openat2(root_fd, relative, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` (via `rustix`), so
//! `..`, absolute symlinks, symlinks that leave the root and `/proc/self/root` fail in the
//! kernel, at the time of the open — there is no check-then-use window to race. Writes
//! also refuse files with other hard links (their other names may be outside).

use super::FsError;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// An allowed root, held open.
#[derive(Debug)]
pub struct Root {
    /// Its canonical path.
    pub path: PathBuf,
    fd: OwnedFd,
}

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

fn os_err(e: rustix::io::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

/// Turns an `openat2` failure into a message: which path, and why it is refused.
fn refuse(path: &Path, e: rustix::io::Errno, what: &'static str) -> FsError {
    match e {
        rustix::io::Errno::XDEV => FsError::Escape {
            path: path.to_path_buf(),
            why: "it leads outside the allowed directories (through `..` or a symbolic link)",
        },
        rustix::io::Errno::LOOP => FsError::Escape {
            path: path.to_path_buf(),
            why: "it goes through a /proc magic link or too many symbolic links",
        },
        e => FsError::Io {
            what,
            path: path.to_path_buf(),
            source: os_err(e),
        },
    }
}

impl Root {
    /// Opens an allowed root (a directory).
    pub fn open(path: &Path) -> Result<Root, FsError> {
        let canon = std::fs::canonicalize(path).map_err(|source| FsError::Io {
            what: "resolving the allowed directory",
            path: path.to_path_buf(),
            source,
        })?;
        let fd = rustix::fs::open(
            &canon,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| FsError::Io {
            what: "opening the allowed directory",
            path: canon.clone(),
            source: os_err(e),
        })?;
        Ok(Root { path: canon, fd })
    }

    /// `p` (absolute, or relative to `cwd`) as a path relative to the root. Lexical: a path
    /// outside the root by name is refused here, anything else by the kernel at the open.
    pub fn relative(&self, p: &Path, cwd: &Path) -> Result<PathBuf, FsError> {
        let full = lexical(&if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        });
        // Component-wise (never a string prefix: /work/ab is not under /work/a).
        match full.strip_prefix(&self.path) {
            Ok(rel) => Ok(if rel.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                rel.to_path_buf()
            }),
            Err(_) => Err(FsError::Escape {
                path: p.to_path_buf(),
                why: "it is outside the allowed directories",
            }),
        }
    }

    /// Opens `rel` beneath the root with `flags`.
    pub fn open_beneath(&self, rel: &Path, flags: OFlags, mode: u32) -> Result<OwnedFd, FsError> {
        rustix::fs::openat2(
            &self.fd,
            rel,
            flags | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
            RESOLVE,
        )
        .map_err(|e| refuse(&self.path.join(rel), e, "opening"))
    }

    /// The last component of `rel`, which must be a plain name.
    fn last_name(&self, rel: &Path) -> Result<OsString, FsError> {
        match rel.components().next_back() {
            Some(Component::Normal(n)) => Ok(n.to_os_string()),
            _ => Err(FsError::Escape {
                path: self.path.join(rel),
                why: "it does not name a file (it ends in `..`, `.` or `/`)",
            }),
        }
    }

    /// The directory holding `rel` (opened for reading, so it can be synced) and the last
    /// component's name. The last component must be a plain name.
    pub fn parent_of(&self, rel: &Path) -> Result<(OwnedFd, OsString), FsError> {
        let name = self.last_name(rel)?;
        let parent = rel.parent().filter(|p| !p.as_os_str().is_empty());
        let dir = self.open_beneath(
            parent.unwrap_or(Path::new(".")),
            OFlags::RDONLY | OFlags::DIRECTORY,
            0,
        )?;
        Ok((dir, name))
    }

    /// Like [`Root::parent_of`], but no symbolic link is followed on the way
    /// (`RESOLVE_NO_SYMLINKS`): for undo, which acts on names the agent may have replaced
    /// with links, and must reach exactly the directories that were recorded.
    pub fn parent_of_nofollow(&self, rel: &Path) -> Result<(OwnedFd, OsString), FsError> {
        let name = self.last_name(rel)?;
        let parent = rel
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let dir = rustix::fs::openat2(
            &self.fd,
            parent,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            RESOLVE | ResolveFlags::NO_SYMLINKS,
        )
        .map_err(|e| match e {
            rustix::io::Errno::LOOP => FsError::ThroughLink {
                path: self.path.join(rel),
            },
            e => refuse(&self.path.join(parent), e, "opening"),
        })?;
        Ok((dir, name))
    }

    /// Follows a symbolic link in the last component, beneath the root (at most 40 times):
    /// the path a write should replace. A link leading outside the root is refused.
    pub fn final_target(&self, rel: &Path) -> Result<PathBuf, FsError> {
        let mut cur = rel.to_path_buf();
        for _ in 0..40 {
            let (dir, name) = self.parent_of(&cur)?;
            match rustix::fs::readlinkat(&dir, &name, Vec::new()) {
                Ok(target) => {
                    let t = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                    let base = cur.parent().map(Path::to_path_buf).unwrap_or_default();
                    cur = if t.is_absolute() {
                        self.relative(&t, &self.path).map_err(|_| FsError::Escape {
                            path: self.path.join(rel),
                            why: "it is a symbolic link to a path outside the allowed directories",
                        })?
                    } else {
                        normalize(&base.join(t)).ok_or_else(|| FsError::Escape {
                            path: self.path.join(rel),
                            why: "it is a symbolic link that leads outside the allowed directories",
                        })?
                    };
                }
                // Not a link (or does not exist yet): this is the file.
                Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOENT) => return Ok(cur),
                Err(e) => return Err(refuse(&self.path.join(&cur), e, "reading the link")),
            }
        }
        Err(FsError::Escape {
            path: self.path.join(rel),
            why: "too many symbolic links",
        })
    }
}

/// Resolves `.` and `..` lexically; `None` if `..` climbs above the start.
fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Opens a regular file beneath `root` for reading. Non-blocking open: a FIFO without a
/// writer would otherwise block the opener for ever; it is refused as not a regular file
/// (for regular files the flag changes nothing).
pub fn open_read(root: &Root, rel: &Path) -> Result<std::fs::File, FsError> {
    let fd = root.open_beneath(rel, OFlags::RDONLY | OFlags::NONBLOCK, 0)?;
    let st = rustix::fs::fstat(&fd).map_err(|e| FsError::Io {
        what: "reading metadata of",
        path: root.path.join(rel),
        source: os_err(e),
    })?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(FsError::NotAFile {
            path: root.path.join(rel),
        });
    }
    Ok(std::fs::File::from(fd))
}

/// The metadata of an existing file that a write will replace, refusing what must not be
/// written through: not a regular file, or other hard links.
pub fn check_writable(root: &Root, rel: &Path) -> Result<Option<rustix::fs::Stat>, FsError> {
    let fd = match root.open_beneath(rel, OFlags::PATH, 0) {
        Ok(fd) => fd,
        Err(FsError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| FsError::Io {
        what: "reading metadata of",
        path: root.path.join(rel),
        source: os_err(e),
    })?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(FsError::NotAFile {
            path: root.path.join(rel),
        });
    }
    if st.st_nlink > 1 {
        return Err(FsError::Escape {
            path: root.path.join(rel),
            why: "it has other hard links, which may be outside the allowed directories",
        });
    }
    Ok(Some(st))
}

/// A file [`write_atomic`] replaced but could not give back to its owner (the writer has no
/// `CAP_CHOWN`, as in the confined worker): who owned it, and which file it is now.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OwnerFix {
    /// The file (absolute, as resolved beneath the root).
    pub path: PathBuf,
    /// Its device and inode after the write.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// The owner it had.
    pub uid: u32,
    /// The group it had.
    pub gid: u32,
}

/// Writes `data` to `rel` atomically: a temporary file in the same directory (created
/// beneath the root), written, given the old file's mode and owner, synced, renamed over the
/// name, and the directory synced. A crash leaves the old content or the new, never a mix.
/// Returns the owner to restore when this process could not (see [`OwnerFix`]).
pub fn write_atomic(root: &Root, rel: &Path, data: &[u8]) -> Result<Option<OwnerFix>, FsError> {
    let target = root.final_target(rel)?;
    let old = check_writable(root, &target)?;
    let (dir, name) = root.parent_of(&target)?;
    let full = root.path.join(&target);
    let err = |what: &'static str| {
        let full = full.clone();
        move |e: rustix::io::Errno| FsError::Io {
            what,
            path: full,
            source: os_err(e),
        }
    };
    let mode = old.as_ref().map_or(0o644, |s| s.st_mode & 0o7777);
    let mut tmp = None;
    for i in 0..100u32 {
        let mut t = OsString::from(".");
        t.push(&name);
        t.push(format!(".gateway-tmp-{}-{i}", std::process::id()));
        match rustix::fs::openat(
            &dir,
            &t,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => {
                tmp = Some((t, fd));
                break;
            }
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(err("creating a temporary file next to")(e)),
        }
    }
    let Some((tmp_name, fd)) = tmp else {
        return Err(FsError::Io {
            what: "finding a free temporary name next to",
            path: full,
            source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        });
    };
    let result = (|| {
        let mut f = std::fs::File::from(fd);
        std::io::Write::write_all(&mut f, data).map_err(|source| FsError::Io {
            what: "writing",
            path: full.clone(),
            source,
        })?;
        let mut fix = None;
        if let Some(st) = &old {
            // Keep the owner (possible with CAP_CHOWN; otherwise the caller is told).
            let kept = rustix::fs::fchown(
                &f,
                Some(rustix::fs::Uid::from_raw(st.st_uid)),
                Some(rustix::fs::Gid::from_raw(st.st_gid)),
            );
            if kept.is_err() {
                let now = rustix::fs::fstat(&f).map_err(err("reading metadata of"))?;
                fix = Some(OwnerFix {
                    path: full.clone(),
                    dev: now.st_dev,
                    ino: now.st_ino,
                    uid: st.st_uid,
                    gid: st.st_gid,
                });
            }
        }
        rustix::fs::fchmod(&f, Mode::from_raw_mode(mode)).map_err(err("setting the mode of"))?;
        rustix::fs::fsync(&f).map_err(err("syncing"))?;
        rustix::fs::renameat(&dir, &tmp_name, &dir, &name).map_err(err("renaming over"))?;
        rustix::fs::fsync(&dir).map_err(err("syncing the directory of"))?;
        Ok(fix)
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(&dir, &tmp_name, rustix::fs::AtFlags::empty());
    }
    result
}

/// Removes the regular file `rel` beneath the root (its content must be backed up first)
/// and syncs the directory.
pub fn remove_file(root: &Root, rel: &Path) -> Result<(), FsError> {
    check_writable(root, rel)?;
    let (dir, name) = root.parent_of(rel)?;
    let full = root.path.join(rel);
    rustix::fs::unlinkat(&dir, &name, rustix::fs::AtFlags::empty()).map_err(|e| FsError::Io {
        what: "removing",
        path: full.clone(),
        source: os_err(e),
    })?;
    rustix::fs::fsync(&dir).map_err(|e| FsError::Io {
        what: "syncing the directory of",
        path: full,
        source: os_err(e),
    })
}

/// `p` with `.` and `..` applied lexically (`/w/sub/../ws` is `/w/ws`), as a shell's `cd`
/// does: a session's `cd ../x` names `x` beside where it is. What is then opened is resolved
/// beneath a root without following links, so the lexical form can never lead out of it.
pub fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> (PathBuf, Root) {
        let d = std::env::temp_dir().join(format!("gateway-path-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("ws/sub")).expect("mkdir");
        std::fs::create_dir_all(d.join("outside")).expect("mkdir");
        std::fs::write(d.join("outside/secret"), "S").expect("w");
        std::fs::write(d.join("ws/sub/a.txt"), "A").expect("w");
        let r = Root::open(&d.join("ws")).expect("root");
        (d, r)
    }

    fn escape(r: Result<impl std::fmt::Debug, FsError>) {
        assert!(matches!(r, Err(FsError::Escape { .. })), "{r:?}");
    }

    #[test]
    fn dotdot_absolute_and_prefix_tricks_are_refused() {
        let (d, r) = tree("dotdot");
        let cwd = r.path.clone();
        escape(r.relative(&d.join("outside/secret"), &cwd));
        escape(r.relative(Path::new("/etc/passwd"), &cwd));
        // A sibling whose name starts with the root's name.
        std::fs::create_dir_all(d.join("wsx")).expect("mkdir");
        escape(r.relative(&d.join("wsx/f"), &cwd));
        // `..` is applied lexically: out of the root, refused before anything is opened.
        escape(r.relative(Path::new("../outside/secret"), &cwd));
        escape(open_read(&r, Path::new("sub/../../outside/secret")));
        assert!(open_read(&r, Path::new("sub/../sub/a.txt")).is_ok());
    }

    #[test]
    fn symlinks_out_are_refused_in_are_followed() {
        let (d, r) = tree("symlink");
        std::os::unix::fs::symlink(d.join("outside"), r.path.join("outdir")).expect("ln");
        std::os::unix::fs::symlink(d.join("outside/secret"), r.path.join("outfile")).expect("ln");
        std::os::unix::fs::symlink("sub/a.txt", r.path.join("infile")).expect("ln");
        escape(open_read(&r, Path::new("outdir/secret")));
        escape(open_read(&r, Path::new("outfile")));
        escape(write_atomic(&r, Path::new("outfile"), b"x"));
        escape(write_atomic(&r, Path::new("outdir/new"), b"x"));
        assert_eq!(std::fs::read(d.join("outside/secret")).expect("r"), b"S");
        // Inside: the link's target is written, the link stays a link.
        write_atomic(&r, Path::new("infile"), b"B").expect("write through");
        assert_eq!(std::fs::read(r.path.join("sub/a.txt")).expect("r"), b"B");
        assert!(
            std::fs::symlink_metadata(r.path.join("infile"))
                .expect("m")
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn proc_self_root_and_hardlinks_are_refused() {
        let (d, r) = tree("proc");
        std::os::unix::fs::symlink("/proc/self/root/etc/passwd", r.path.join("p")).expect("ln");
        escape(open_read(&r, Path::new("p")));
        std::fs::hard_link(d.join("outside/secret"), r.path.join("hl")).expect("ln");
        escape(write_atomic(&r, Path::new("hl"), b"x"));
        assert_eq!(std::fs::read(d.join("outside/secret")).expect("r"), b"S");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let (_d, r) = tree("fifo");
        let st = std::process::Command::new("mkfifo")
            .arg(r.path.join("p"))
            .status()
            .expect("mkfifo");
        assert!(st.success());
        assert!(matches!(
            open_read(&r, Path::new("p")),
            Err(FsError::NotAFile { .. })
        ));
    }

    #[test]
    fn atomic_write_keeps_mode_and_creates() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, r) = tree("atomic");
        let p = r.path.join("sub/a.txt");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).expect("chmod");
        write_atomic(&r, Path::new("sub/a.txt"), b"new").expect("write");
        assert_eq!(std::fs::read(&p).expect("r"), b"new");
        let m = std::fs::metadata(&p).expect("m").permissions().mode() & 0o777;
        assert_eq!(m, 0o751);
        write_atomic(&r, Path::new("sub/b.txt"), b"created").expect("create");
        assert_eq!(
            std::fs::read(r.path.join("sub/b.txt")).expect("r"),
            b"created"
        );
        let left: Vec<_> = std::fs::read_dir(r.path.join("sub"))
            .expect("ls")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("gateway-tmp"))
            .collect();
        assert!(left.is_empty());
    }

    #[test]
    fn a_swapped_symlink_cannot_redirect_a_write() {
        // Between resolving and writing, `sub` becomes a link to the outside: the write
        // still resolves beneath the root, in the kernel, and fails or stays inside.
        let (d, r) = tree("swap");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (ws, out, s2) = (r.path.clone(), d.join("outside"), stop.clone());
        let t = std::thread::spawn(move || {
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::rename(ws.join("sub"), ws.join("sub.real"));
                let _ = std::os::unix::fs::symlink(&out, ws.join("sub"));
                let _ = std::fs::remove_file(ws.join("sub"));
                let _ = std::fs::rename(ws.join("sub.real"), ws.join("sub"));
            }
        });
        // Until the race was hit both ways (a refused write, a write that landed inside); on
        // a loaded machine the swapping thread may get little time, so bounded by time, not
        // by a count of tries.
        let (mut refused, mut written) = (0, 0);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < until {
            match write_atomic(&r, Path::new("sub/x.txt"), b"payload") {
                Err(FsError::Escape { .. }) => refused += 1,
                Ok(_) => written += 1,
                Err(_) => {}
            }
            if refused > 5 && written > 5 {
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        t.join().expect("join");
        let names: Vec<_> = std::fs::read_dir(d.join("outside"))
            .expect("ls")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![OsString::from("secret")], "a write escaped");
        assert!(
            refused > 0 && written > 0,
            "race not hit: {refused} refused, {written} written"
        );
    }
}
