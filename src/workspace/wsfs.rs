//! The one way the broker touches a workspace as itself.
//!
//! Before and after each run the broker reads, lists, types, renames and puts back entries of
//! trees a run controlled — and a concurrent run may still be changing. Every such access goes
//! through this module (a test checks that no other module of `broker/`, `workspace/` or
//! `serve/` opens, stats, lists or renames a workspace path by name):
//!
//! - a tree is opened once by its canonical path (a directory the broker chose: the session's
//!   workspace, a writable root of the policy), and everything inside it is resolved beneath
//!   that descriptor: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//!   RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV`, so a directory swapped for a link (to `~/.ssh`,
//!   to `/`) between a listing and a read is refused, never followed, and `..` cannot leave;
//! - an entry is typed on an `O_PATH` descriptor before it is opened for reading: FIFOs,
//!   sockets and devices are never opened (an open can block, or act, on them), and the file
//!   read is the one that was typed (same device and inode);
//! - reads are non-blocking and bounded before they start, listings bounded in entries;
//! - renames and links are made relative to the parent's descriptor, so the name acted on is
//!   the one beneath the tree, never one reached through a link;
//! - where the broker serves another user (the daemon), reads can run with that user's
//!   filesystem identity ([`Tree::read_as`]), so the broker never reads for a caller what the
//!   caller could not.
//!
//! `std::fs` works on paths and follows links in every component but the last: none of it is
//! used here on a tree's contents. The source check that keeps `broker/`, the rest of
//! `workspace/` and `serve/` from doing so is `workspace::wsfs_check`.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// How every name inside a tree is resolved.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS)
    .union(ResolveFlags::NO_XDEV);
const NOFOLLOW: OFlags = OFlags::NOFOLLOW.union(OFlags::CLOEXEC);

/// What stands at a name (links never followed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File {
        /// Size in bytes.
        size: u64,
        /// Modification time, nanoseconds since the epoch.
        mtime_ns: i128,
        /// Permission bits.
        mode: u32,
        /// Status change time, nanoseconds since the epoch: no process can set it back.
        ctime_ns: i128,
        /// Inode number (a file replaced by another of the same size and times differs).
        ino: u64,
    },
    /// A directory and its permission bits.
    Dir {
        /// Permission bits.
        mode: u32,
    },
    /// A symbolic link and its target (never followed).
    Link(PathBuf),
    /// A FIFO, socket or device: never opened.
    Special,
}

impl Kind {
    fn of(st: &rustix::fs::Stat) -> Kind {
        let mode = st.st_mode & 0o7777;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => Kind::File {
                size: st.st_size.max(0) as u64,
                mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
                mode,
                ctime_ns: i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec),
                ino: st.st_ino,
            },
            FileType::Directory => Kind::Dir { mode },
            FileType::Symlink => Kind::Link(PathBuf::new()),
            _ => Kind::Special,
        }
    }
}

/// The plain components of a relative path: `..`, `.`, a root or a prefix is refused (a tree's
/// names never need them, and `BENEATH` would refuse most of them anyway).
fn plain(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a plain relative path", rel.display()),
            )),
        })
        .collect()
}

/// A tree the broker acts on: a directory opened once by its path, everything inside it
/// resolved beneath that descriptor.
#[derive(Debug)]
pub struct Tree {
    fd: OwnedFd,
    path: PathBuf,
}

impl Tree {
    /// Opens the tree at `path` (a directory the broker chose; its last component must not be
    /// a link).
    pub fn open(path: &Path) -> io::Result<Tree> {
        let fd = rustix::fs::open(
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | NOFOLLOW,
            Mode::empty(),
        )?;
        Ok(Tree {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The tree's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tree's descriptor, to walk it component by component (`O_NOFOLLOW` each).
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    /// The tree's descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// `rel` relative to the tree, if `p` (absolute) lies inside it.
    pub fn relative<'a>(&self, p: &'a Path) -> Option<&'a Path> {
        p.strip_prefix(&self.path).ok()
    }

    /// Opens `rel` beneath the tree (`RESOLVE_BENEATH | NO_SYMLINKS | NO_MAGICLINKS |
    /// NO_XDEV`, non-blocking). The empty path is the tree itself.
    fn at(&self, rel: &Path, flags: OFlags) -> io::Result<OwnedFd> {
        plain(rel)?;
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        Ok(rustix::fs::openat2(
            &self.fd,
            rel,
            flags | OFlags::NONBLOCK | NOFOLLOW,
            Mode::empty(),
            RESOLVE,
        )?)
    }

    /// Opens the directory `rel` beneath the tree (a link or a non-directory is refused).
    pub fn open_dir(&self, rel: &Path) -> io::Result<OwnedFd> {
        self.at(rel, OFlags::DIRECTORY | OFlags::RDONLY)
    }

    /// The parent directory of `rel` (opened beneath the tree) and its last name.
    pub fn open_parent(&self, rel: &Path) -> io::Result<(OwnedFd, OsString)> {
        let comps = plain(rel)?;
        let Some((last, _)) = comps.split_last() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty path"));
        };
        let parent = rel.parent().unwrap_or(Path::new(""));
        Ok((self.open_dir(parent)?, last.to_os_string()))
    }

    /// What stands at `rel` (None: nothing; a parent that is a link or not a directory is an
    /// error, never followed).
    pub fn kind(&self, rel: &Path) -> io::Result<Option<Kind>> {
        let (dir, name) = self.open_parent(rel)?;
        kind_at(&dir, &name)
    }

    /// The content of the regular file `rel`, at most `max` bytes (None: absent, not a regular
    /// file, larger, or reached through a link).
    pub fn read(&self, rel: &Path, max: u64) -> Option<Vec<u8>> {
        let (dir, name) = self.open_parent(rel).ok()?;
        read_at(&dir, &name, max).ok().flatten()
    }

    /// [`Tree::read`] with the filesystem identity of `who` (uid, gid, groups) and no
    /// capabilities, on a thread of its own: a daemon serving another user reads only what
    /// that user could.
    pub fn read_as(&self, who: Option<&Identity>, rel: &Path, max: u64) -> Option<Vec<u8>> {
        as_identity(who, || self.read(rel, max)).ok().flatten()
    }

    /// The names in directory `rel` and what each is (links not followed), at most `max`
    /// entries (more: an error).
    pub fn list(&self, rel: &Path, max: usize) -> io::Result<Vec<(OsString, Kind)>> {
        let d = self.open_dir(rel)?;
        list_at(&d, max)
    }

    /// Moves `rel` out of the tree to `dst_dir/dst_name` (a directory of the broker's own, on
    /// the same filesystem), never replacing anything there.
    pub fn move_out(&self, rel: &Path, dst_dir: &Path, dst_name: &OsStr) -> io::Result<()> {
        let (dir, name) = self.open_parent(rel)?;
        let to = rustix::fs::open(
            dst_dir,
            OFlags::DIRECTORY | OFlags::RDONLY | NOFOLLOW,
            Mode::empty(),
        )?;
        rustix::fs::renameat_with(
            &dir,
            &name,
            &to,
            dst_name,
            rustix::fs::RenameFlags::NOREPLACE,
        )?;
        Ok(())
    }

    /// Renames `rel` to `new_name` in the same directory, never replacing anything.
    pub fn rename_in_place(&self, rel: &Path, new_name: &OsStr) -> io::Result<()> {
        let (dir, name) = self.open_parent(rel)?;
        rustix::fs::renameat_with(
            &dir,
            &name,
            &dir,
            new_name,
            rustix::fs::RenameFlags::NOREPLACE,
        )?;
        Ok(())
    }

    /// Creates the symbolic link `rel -> target` (fails if anything stands at `rel`).
    pub fn symlink(&self, rel: &Path, target: &Path) -> io::Result<()> {
        let (dir, name) = self.open_parent(rel)?;
        rustix::fs::symlinkat(target, &dir, &name)?;
        Ok(())
    }

    /// Expands `*`/`?` in any component of `pattern` (relative) against the tree's entries,
    /// listing beneath the tree; names that exist, or the pattern itself when it has no
    /// wildcard (existing or not).
    pub fn glob(&self, pattern: &Path, max: usize) -> Vec<PathBuf> {
        let Ok(comps) = plain(pattern) else {
            return Vec::new();
        };
        let mut acc = vec![PathBuf::new()];
        for c in comps {
            let name = c.to_string_lossy();
            if !name.contains(['*', '?']) {
                for d in &mut acc {
                    d.push(c);
                }
                continue;
            }
            let mut next = Vec::new();
            for d in &acc {
                if let Ok(entries) = self.list(d, max) {
                    for (n, _) in entries {
                        if crate::policy::wildcard(&name, &n.to_string_lossy()) {
                            next.push(d.join(n));
                        }
                    }
                }
            }
            acc = next;
        }
        acc.sort();
        acc
    }
}

/// The ignore files a walk honours in each directory, lowest precedence first (a later line
/// wins, as in git); `.git/info/exclude` only at the top, below them.
const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];
/// The repository's own exclude file (at the top of the tree only).
const EXCLUDE_FILE: &str = ".git/info/exclude";
/// The largest ignore file read.
pub const IGNORE_MAX: u64 = 1 << 20;
/// At most this many entries in one directory.
const DIR_MAX: usize = 1 << 20;

/// What a walk found: (relative path, kind) of regular files, directories and links, parents
/// before their contents; and the directories it did not enter (their contents unknown).
#[derive(Debug, Default)]
pub struct Walked {
    /// Entries found.
    pub entries: Vec<(PathBuf, Kind)>,
    /// Directories not entered: they could not be opened beneath the tree (swapped for a
    /// link, unreadable): their contents unknown.
    pub skipped: Vec<PathBuf>,
    /// Directories whose ignore file was not safe to read: walked with nothing ignored.
    pub unruled: Vec<PathBuf>,
}

/// An ignore file as found: absent, its content, or present but not safe to read (a link, a
/// FIFO, a device, larger than [`IGNORE_MAX`]).
enum IgnoreFile {
    Absent,
    Content(Vec<u8>),
    Unsafe,
}

fn ignore_file(dir: &impl AsFd, rel: &Path) -> IgnoreFile {
    let (parent, name): (OwnedFd, &OsStr) = match (rel.parent(), rel.file_name()) {
        (Some(p), Some(n)) if !p.as_os_str().is_empty() => {
            match rustix::fs::openat2(
                dir,
                p,
                OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NONBLOCK | NOFOLLOW,
                Mode::empty(),
                RESOLVE,
            ) {
                Ok(d) => (d, n),
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => {
                    return IgnoreFile::Absent;
                }
                Err(_) => return IgnoreFile::Unsafe,
            }
        }
        (_, Some(n)) => {
            match rustix::fs::openat(dir, ".", OFlags::PATH | NOFOLLOW, Mode::empty()) {
                Ok(d) => (d, n),
                Err(_) => return IgnoreFile::Unsafe,
            }
        }
        _ => return IgnoreFile::Absent,
    };
    match kind_at(&parent, name) {
        Ok(None) => IgnoreFile::Absent,
        Ok(Some(Kind::File { size, .. })) if size <= IGNORE_MAX => {
            match read_at(&parent, name, IGNORE_MAX) {
                Ok(Some(d)) => IgnoreFile::Content(d),
                _ => IgnoreFile::Unsafe,
            }
        }
        _ => IgnoreFile::Unsafe,
    }
}

/// The ignore rules of one directory (None: it has none), or Err when one of its ignore files
/// is not safe to read.
pub(crate) fn dir_rules(
    dir: &impl AsFd,
    abs: &Path,
    top: bool,
) -> Result<Option<ignore::gitignore::Gitignore>, ()> {
    let mut b = ignore::gitignore::GitignoreBuilder::new(abs);
    let mut any = false;
    let files: &[&str] = if top {
        &[EXCLUDE_FILE, IGNORE_FILES[0], IGNORE_FILES[1]]
    } else {
        &IGNORE_FILES
    };
    for f in files {
        match ignore_file(dir, Path::new(f)) {
            IgnoreFile::Absent => {}
            IgnoreFile::Unsafe => return Err(()),
            IgnoreFile::Content(d) => {
                for line in String::from_utf8_lossy(&d).lines() {
                    // A line git would not take is left out, as git does.
                    if b.add_line(None, line).is_ok() {
                        any = true;
                    }
                }
            }
        }
    }
    Ok(if any { b.build().ok() } else { None })
}

impl Tree {
    /// Walks the tree as git sees its work tree: links never followed, `.git` never entered,
    /// hidden files included, what `.gitignore`/`.ignore` (in each directory) and
    /// `.git/info/exclude` exclude left out. Ignore files are read beneath the tree like any
    /// file (small regular files only). Where one is not safe to read (a FIFO, a link, too
    /// large), nothing is ignored in its directory's subtree (everything there is walked,
    /// so a run cannot hide its changes behind one); when the top's is not, nothing is ignored
    /// anywhere. A directory that cannot be opened beneath the tree is listed as skipped.
    pub fn walk_ignoring(&self) -> Walked {
        let mut out = Walked::default();
        let Ok(top) = self.open_dir(Path::new("")) else {
            out.skipped.push(PathBuf::new());
            return out;
        };
        let top_rules = dir_rules(&top, &self.path, true);
        let use_ignores = top_rules.is_ok();
        let mut rules: std::collections::HashMap<PathBuf, ignore::gitignore::Gitignore> =
            std::collections::HashMap::new();
        if let Ok(Some(r)) = top_rules {
            rules.insert(PathBuf::new(), r);
        }
        // Depth-first; each directory is opened beneath the tree when its turn comes (one
        // open directory at a time, whatever the width).
        let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
        let mut top = Some(top);
        // Subtrees where nothing is ignored (their ignore file was not safe to read).
        let mut unruled: Vec<PathBuf> = Vec::new();
        while let Some(rel) = stack.pop() {
            let dir = match top.take() {
                Some(t) => t,
                None => match self.open_dir(&rel) {
                    Ok(d) => d,
                    Err(_) => {
                        out.skipped.push(rel);
                        continue;
                    }
                },
            };
            let ignoring = use_ignores && !unruled.iter().any(|u| rel.starts_with(u));
            if ignoring && !rel.as_os_str().is_empty() {
                match dir_rules(&dir, &self.path.join(&rel), false) {
                    Err(()) => {
                        out.unruled.push(rel.clone());
                        unruled.push(rel.clone());
                    }
                    Ok(Some(r)) => {
                        rules.insert(rel.clone(), r);
                    }
                    Ok(None) => {}
                }
            }
            let Ok(entries) = list_owned(dir, DIR_MAX) else {
                out.skipped.push(rel);
                continue;
            };
            let mut subdirs = Vec::new();
            for (name, kind) in entries {
                if name == ".git" {
                    continue;
                }
                let child = rel.join(&name);
                let is_dir = matches!(kind, Kind::Dir { .. });
                if ignoring && !unruled.iter().any(|u| rel.starts_with(u)) && !rules.is_empty() {
                    // The nearest directory whose rules say something decides (git's order).
                    let abs = self.path.join(&child);
                    let verdict = rel
                        .ancestors()
                        .filter_map(|a| rules.get(a))
                        .map(|g| g.matched(&abs, is_dir))
                        .find(|m| !m.is_none());
                    if verdict.is_some_and(|m| m.is_ignore()) {
                        continue;
                    }
                }
                match kind {
                    Kind::Special => continue,
                    Kind::Dir { .. } => subdirs.push(child.clone()),
                    _ => {}
                }
                out.entries.push((child, kind));
            }
            // Reversed: popped in name order.
            stack.extend(subdirs.into_iter().rev());
        }
        out
    }
}

/// What [`Tree::find_git`] found.
#[derive(Clone, Debug, Default)]
pub struct GitFound {
    /// Every `.git` entry (any type; not entered), relative.
    pub dot_git: Vec<PathBuf>,
    /// Directories git would take for a repository themselves (a bare one: `HEAD`, `objects/`
    /// and `refs/` in it), the tree's top included, relative; not entered.
    pub bare: Vec<PathBuf>,
    /// More than `max_dirs` directories: not all were searched.
    pub incomplete: bool,
}

impl Tree {
    /// Finds what git would take for a repository in the tree: every `.git` entry and every
    /// directory holding `HEAD`, `objects/` and `refs/` (git accepts such a directory as a
    /// bare repository when it looks for one). Links are never followed, neither kind is
    /// entered, and at most `max_dirs` directories are listed.
    pub fn find_git(&self, max_dirs: usize) -> GitFound {
        let mut found = GitFound::default();
        let mut stack = vec![PathBuf::new()];
        let mut listed = 0usize;
        while let Some(rel) = stack.pop() {
            listed += 1;
            if listed > max_dirs {
                found.incomplete = true;
                break;
            }
            let Ok(dir) = self.open_dir(&rel) else {
                continue;
            };
            // The descriptor is the listing's own (no second open of `.`).
            let Ok(mut entries) = rustix::fs::Dir::new(dir) else {
                continue;
            };
            let mut subdirs = Vec::new();
            let (mut head, mut objects, mut refs, mut commondir) = (false, false, false, false);
            while let Some(Ok(ent)) = entries.read() {
                let n = OsStr::from_bytes(ent.file_name().to_bytes());
                if n == "." || n == ".." {
                    continue;
                }
                if n == ".git" {
                    found.dot_git.push(rel.join(n));
                    continue;
                }
                let is_dir = match ent.file_type() {
                    FileType::Directory => true,
                    FileType::Unknown => entries
                        .fd()
                        .is_ok_and(|d| matches!(kind_at(&d, n), Ok(Some(Kind::Dir { .. })))),
                    _ => false,
                };
                // As git's `is_git_directory`: `objects` and `refs` of any type (git follows
                // a link, and takes a file it may search), or a `commondir` naming them.
                head |= n == "HEAD" && !is_dir;
                objects |= n == "objects";
                refs |= n == "refs";
                commondir |= n == "commondir" && !is_dir;
                if is_dir {
                    subdirs.push(rel.join(n));
                }
            }
            if head && ((objects && refs) || commondir) {
                found.bare.push(rel);
                continue;
            }
            subdirs.sort();
            stack.extend(subdirs.into_iter().rev());
        }
        found.dot_git.sort();
        found.bare.sort();
        found
    }
}

/// Runs `f` with `who`'s filesystem identity and no capabilities (on a thread of its own), or
/// here with this process's when `who` is None.
pub fn as_identity<R: Send>(who: Option<&Identity>, f: impl FnOnce() -> R + Send) -> io::Result<R> {
    match who {
        None => Ok(f()),
        Some(w) => crate::sandbox::with_fs_identity(w.uid, w.gid, &w.groups, f),
    }
}

/// A filesystem identity to read with (a daemon's client).
#[derive(Clone, Debug)]
pub struct Identity {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

/// What stands at `name` in `dir` (None: nothing there).
pub fn kind_at(dir: &impl AsFd, name: &OsStr) -> io::Result<Option<Kind>> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(s) => s,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let k = Kind::of(&st);
    if k == Kind::Link(PathBuf::new()) {
        let t = rustix::fs::readlinkat(dir, name, Vec::new())?;
        return Ok(Some(Kind::Link(PathBuf::from(OsStr::from_bytes(
            t.as_bytes(),
        )))));
    }
    Ok(Some(k))
}

/// Opens the regular file `name` in `dir` for reading: typed on an `O_PATH` descriptor first
/// (a FIFO, socket or device is never opened), then opened non-blocking without following a
/// link, and refused unless it is the same file that was typed.
pub fn open_regular_at(
    dir: &impl AsFd,
    name: &OsStr,
) -> io::Result<Option<(std::fs::File, rustix::fs::Stat)>> {
    let pathfd = match rustix::fs::openat(dir, name, OFlags::PATH | NOFOLLOW, Mode::empty()) {
        Ok(f) => f,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let st = rustix::fs::fstat(&pathfd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Ok(None);
    }
    let f = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NONBLOCK | NOFOLLOW,
        Mode::empty(),
    )?;
    let s2 = rustix::fs::fstat(&f)?;
    if (s2.st_dev, s2.st_ino) != (st.st_dev, st.st_ino) {
        return Err(io::Error::other("the file changed while it was opened"));
    }
    Ok(Some((std::fs::File::from(f), s2)))
}

/// The content of the regular file `name` in `dir`, at most `max` bytes (None: absent, not a
/// regular file, or larger than `max`).
pub fn read_at(dir: &impl AsFd, name: &OsStr, max: u64) -> io::Result<Option<Vec<u8>>> {
    let Some((file, st)) = open_regular_at(dir, name)? else {
        return Ok(None);
    };
    if st.st_size.max(0) as u64 > max {
        return Ok(None);
    }
    let mut data = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(file, max + 1), &mut data)?;
    Ok((data.len() as u64 <= max).then_some(data))
}

/// The entries of the open directory `d` (`.` and `..` left out), at most `max`.
pub fn list_at(d: &impl AsFd, max: usize) -> io::Result<Vec<(OsString, Kind)>> {
    list_dir(rustix::fs::Dir::read_from(d)?, max)
}

/// [`list_at`] on a directory descriptor the listing may own (no second open of `.`).
fn list_owned(d: OwnedFd, max: usize) -> io::Result<Vec<(OsString, Kind)>> {
    list_dir(rustix::fs::Dir::new(d)?, max)
}

fn list_dir(mut dir: rustix::fs::Dir, max: usize) -> io::Result<Vec<(OsString, Kind)>> {
    let mut out = Vec::new();
    while let Some(ent) = dir.read() {
        let ent = ent?;
        let n = OsStr::from_bytes(ent.file_name().to_bytes());
        if n == "." || n == ".." {
            continue;
        }
        if out.len() >= max {
            return Err(io::Error::other(format!("more than {max} entries")));
        }
        // Gone since the listing: left out.
        if let Some(k) = kind_at(&dir.fd()?, n)? {
            out.push((n.to_os_string(), k));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Opens the directory `p` (absolute) with no link in any component (`RESOLVE_NO_SYMLINKS |
/// RESOLVE_NO_MAGICLINKS`, mounts may be crossed): for the real paths the journal holds.
pub fn open_dir_nolinks(p: &Path) -> io::Result<OwnedFd> {
    if !p.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not an absolute path", p.display()),
        ));
    }
    Ok(rustix::fs::openat2(
        rustix::fs::CWD,
        p,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NONBLOCK | NOFOLLOW,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?)
}

/// The parent of `p` (absolute) opened with no link on the way, and its last name.
fn parent_nolinks(p: &Path) -> io::Result<(OwnedFd, OsString)> {
    match (p.parent(), p.file_name()) {
        (Some(d), Some(n)) => Ok((open_dir_nolinks(d)?, n.to_os_string())),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: no parent directory", p.display()),
        )),
    }
}

/// What stands at `p` (absolute), no link followed anywhere on the way (a link as the last
/// component is reported as itself).
pub fn kind_nolinks(p: &Path) -> io::Result<Option<Kind>> {
    let (d, n) = match parent_nolinks(p) {
        Ok(x) => x,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    kind_at(&d, &n)
}

/// The regular file `p` (absolute), at most `max` bytes, no link followed anywhere.
pub fn read_nolinks(p: &Path, max: u64) -> Option<Vec<u8>> {
    let (d, n) = parent_nolinks(p).ok()?;
    read_at(&d, &n, max).ok().flatten()
}

/// The symbolic links anywhere below the directory `p` (absolute, no link on the way), as
/// paths under `p`; at most `max` entries are looked at (more: an error, so that a caller
/// protecting what they lead to fails closed rather than protect part of them).
pub fn links_below(p: &Path, max: usize) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut seen = 0usize;
    let mut stack = vec![(open_dir_nolinks(p)?, p.to_path_buf())];
    while let Some((d, path)) = stack.pop() {
        for (name, kind) in list_at(&d, max.saturating_sub(seen).max(1))? {
            seen += 1;
            if seen > max {
                return Err(io::Error::other(format!(
                    "more than {max} entries below {}",
                    p.display()
                )));
            }
            match kind {
                Kind::Link(_) => out.push(path.join(&name)),
                Kind::Dir { .. } => {
                    let sub = rustix::fs::openat(
                        &d,
                        name.as_os_str(),
                        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NONBLOCK | NOFOLLOW,
                        Mode::empty(),
                    )?;
                    stack.push((sub, path.join(&name)));
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// Removes the file (not a directory) `name` of the open directory `dir`.
pub fn unlink_at(dir: &impl AsFd, name: &OsStr) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?)
}

/// Where `p` really is (links followed, as the kernel would for a program opening it): metadata
/// only, nothing opened for reading. Used to protect a path by what it names (`.git ->
/// realgit` protects `realgit/config`), never to read through it.
pub fn resolve(p: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(p).ok()
}

/// Whether anything stands at `p` (links not followed): metadata only.
pub fn exists_nofollow(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// Whether anything stands at `p` (links not followed), telling "cannot be searched" (a
/// directory above it without search permission) apart from absent: metadata only.
pub fn presence(p: &Path) -> io::Result<bool> {
    match std::fs::symlink_metadata(p) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(e),
        Err(_) => Ok(false),
    }
}

/// Is a directory above `p` (or above a link's target) owned by `uid` and not searchable by
/// it? See [`crate::sandbox::hidden_by_owner`].
pub fn hidden_by_owner(p: &Path, uid: u32) -> bool {
    crate::sandbox::hidden_by_owner(p, uid)
}

/// Where `p` really is, as [`resolve`], telling "cannot be searched" apart from absent.
pub fn resolve_checked(p: &Path) -> io::Result<Option<PathBuf>> {
    match std::fs::canonicalize(p) {
        Ok(c) => Ok(Some(c)),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(e),
        Err(_) => Ok(None),
    }
}

/// Whether `p` itself is a symbolic link: metadata only.
pub fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether `p` is a directory (links followed): metadata only.
pub fn is_dir(p: &Path) -> bool {
    p.is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gw-wsfs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::canonicalize(&d).expect("canon")
    }

    #[test]
    fn nothing_is_followed_opened_special_or_read_unbounded() {
        let d = tmp("basic");
        let outside = tmp("outside");
        std::fs::write(outside.join("secret"), "s3cret").expect("w");
        std::fs::create_dir(d.join("sub")).expect("mkdir");
        std::fs::write(d.join("sub/f"), "hello").expect("w");
        std::os::unix::fs::symlink(&outside, d.join("link")).expect("ln");
        std::os::unix::fs::symlink(outside.join("secret"), d.join("flink")).expect("ln");
        rustix::fs::mkfifoat(rustix::fs::CWD, d.join("fifo"), Mode::from_raw_mode(0o600))
            .expect("mkfifo");
        let t = Tree::open(&d).expect("open");
        assert_eq!(
            t.read(Path::new("sub/f"), 100).as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(t.read(Path::new("sub/f"), 3), None, "bounded");
        assert_eq!(
            t.read(Path::new("link/secret"), 100),
            None,
            "a link in the path"
        );
        assert_eq!(t.read(Path::new("flink"), 100), None, "a link as the file");
        assert_eq!(
            t.read(Path::new("fifo"), 100),
            None,
            "a FIFO is never opened"
        );
        assert!(t.read(Path::new("../outside/secret"), 100).is_none());
        assert!(matches!(
            t.kind(Path::new("link")).expect("kind"),
            Some(Kind::Link(p)) if p == outside
        ));
        assert!(
            t.kind(Path::new("link/secret")).is_err(),
            "never looked through"
        );
        assert_eq!(
            t.kind(Path::new("fifo")).expect("kind"),
            Some(Kind::Special)
        );
        assert_eq!(t.kind(Path::new("none")).expect("kind"), None);
        let names: Vec<OsString> = t
            .list(Path::new(""), 100)
            .expect("list")
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["fifo", "flink", "link", "sub"]);
        assert!(t.list(Path::new(""), 2).is_err(), "bounded in entries");
        assert!(
            t.list(Path::new("link"), 100).is_err(),
            "a link is not listed through"
        );
        assert_eq!(t.glob(Path::new("s*/f"), 100), [PathBuf::from("sub/f")]);
        // `link/secret` comes out by name only (a plain component is not checked); reading
        // it still fails.
        assert_eq!(
            t.glob(Path::new("l*/secret"), 100),
            [PathBuf::from("link/secret")]
        );
        assert!(
            t.glob(Path::new("link/*"), 100).is_empty(),
            "never listed through a link"
        );
        // Moves and links act on the name beneath the tree.
        let q = tmp("q");
        t.move_out(Path::new("link"), &q, OsStr::new("moved"))
            .expect("move");
        assert!(
            outside.join("secret").exists(),
            "the link moved, not its target"
        );
        assert!(
            std::fs::symlink_metadata(q.join("moved"))
                .expect("moved")
                .is_symlink()
        );
        t.symlink(Path::new("link"), &outside).expect("symlink");
        assert!(
            t.symlink(Path::new("link"), &outside).is_err(),
            "never replaces"
        );
        for p in [d, outside, q] {
            let _ = std::fs::remove_dir_all(p);
        }
    }

    #[test]
    fn the_walk_follows_gits_ignore_rules_and_enters_nothing_unsafe() {
        let d = tmp("walk");
        let w = |rel: &str, c: &str| {
            let p = d.join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, c).expect("write");
        };
        w(".gitignore", "*.log\nbuild/\n!keep.log\n");
        w(".ignore", "notes.txt\n");
        w(".git/info/exclude", "excluded.txt\n");
        w(".git/config", "[core]\n");
        for f in [
            "a.log",
            "keep.log",
            "notes.txt",
            "excluded.txt",
            "src/main.rs",
            "build/out",
        ] {
            w(f, "x");
        }
        w("sub/.gitignore", "!again.log\nsecret*\n");
        w("sub/again.log", "x");
        w("sub/other.log", "x");
        w("sub/secret.txt", "x");
        w("sub/deeper/secret2", "x");
        w("odd/x", "x");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            d.join("odd/.gitignore"),
            Mode::from_raw_mode(0o600),
        )
        .expect("mkfifo");
        let t = Tree::open(&d).expect("open");
        let walked = t.walk_ignoring();
        let mut names: Vec<String> = walked
            .entries
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                ".gitignore",
                ".ignore",
                "keep.log",
                "odd",
                "odd/x",
                "src",
                "src/main.rs",
                "sub",
                "sub/.gitignore",
                "sub/again.log",
                "sub/deeper"
            ]
        );
        assert!(walked.skipped.is_empty(), "{:?}", walked.skipped);
        assert_eq!(
            walked.unruled,
            [PathBuf::from("odd")],
            "a FIFO ignore file: its subtree walked with nothing ignored"
        );
        // The top's ignore file unsafe: nothing is ignored, everything is walked.
        std::fs::remove_file(d.join(".gitignore")).expect("rm");
        std::os::unix::fs::symlink("/dev/zero", d.join(".gitignore")).expect("ln");
        let walked = t.walk_ignoring();
        assert!(walked.entries.iter().any(|(p, _)| p == Path::new("a.log")));
        assert!(walked.entries.iter().any(|(p, _)| p == Path::new("odd/x")));
        let _ = std::fs::remove_dir_all(d);
    }
}
