//! Protected paths without a mount namespace: kept before the run, put back after it.
//!
//! With namespaces, protected paths (`.git/hooks`, `.git/config`, `.envrc`, …) are read-only
//! bind mounts. An unprivileged broker has no mount namespace, and landlock cannot keep a
//! subtree of a writable tree read-only. So the broker copies each existing protected path
//! (bounded: [`BUDGET`] bytes, [`MAX_ENTRIES`] entries, [`MAX_DEPTH`] levels) before the run
//! and, once the command and all it started have ended, compares: whatever the run changed,
//! added or removed there is moved to the quarantine (in the state directory, else renamed in
//! place to an inert name) and the kept version is written back. What git, the shell or an
//! editor read later is therefore what was there before the run.
//!
//! What remains (`docs/seams.md`): a program outside the sandbox that reads a protected path
//! *during* the run (an IDE's `git status` while the command runs) can see the run's version.
//! Paths too large to keep refuse the run, unless the policy says `best_effort = true`.
//!
//! Every access is made as the broker, unconfined, on a tree the run controlled: each
//! component is opened relative to its parent's descriptor with `O_NOFOLLOW` (a link is never
//! followed, only read or moved away), files are typed with an `O_PATH` descriptor before any
//! open for reading (FIFOs, sockets and devices are never opened), and reads are bounded.

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{FileType, Mode, OFlags};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// At most this many bytes of protected files are kept per run.
pub const BUDGET: u64 = 16 << 20;
/// At most this many entries.
pub const MAX_ENTRIES: usize = 20_000;
/// At most this deep.
pub const MAX_DEPTH: usize = 16;

/// A kept tree (stored in the state directory while runs overlap: names and bytes as
/// base64, so any file name and content round-trips).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Node {
    File {
        mode: u32,
        #[serde(with = "b64")]
        data: Vec<u8>,
    },
    Dir {
        mode: u32,
        #[serde(with = "b64map")]
        children: BTreeMap<OsString, Node>,
    },
    Link(#[serde(with = "b64")] Vec<u8>),
    /// A FIFO, socket or device: never opened; kept as its type and mode.
    Special {
        mode: u32,
    },
}

/// One protected path and its content before the run.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct KeptPath {
    /// The writable tree it lies in (opened component by component from here).
    root: PathBuf,
    /// Its path relative to `root`.
    rel: PathBuf,
    node: Node,
}

/// The protected paths kept before a run, and the run's place in the workspace's shared
/// record (`<state>/keep/`).
#[derive(Debug, Default)]
pub struct Kept {
    paths: Vec<KeptPath>,
    shared: Option<(PathBuf, u64)>,
}

/// A protected path the run changed, and where the run's version went.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct Restored {
    /// The protected path, put back as it was before the run.
    pub path: PathBuf,
    /// Where the run's version was moved (None: there was nothing there, it was recreated).
    pub moved_to: Option<PathBuf>,
}

/// Why protected paths could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    /// Over the bounds.
    #[error(
        "protected path {path} is too large to keep and restore without a mount namespace (over {BUDGET} bytes, {MAX_ENTRIES} entries or {MAX_DEPTH} levels): run as root (namespaces), trim it, or set `best_effort = true` to run with it writable"
    )]
    TooLarge {
        /// The path.
        path: PathBuf,
    },
    /// The filesystem refused.
    #[error("keeping protected path {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

struct Budget {
    bytes: u64,
    entries: usize,
}

const NOFOLLOW: OFlags = OFlags::NOFOLLOW.union(OFlags::CLOEXEC);

/// Opens the directory `rel`'s parent beneath `root`, every component a real directory
/// (`broker::wsfs`: beneath the root's descriptor, no link followed).
fn open_parent(root: &Path, rel: &Path) -> std::io::Result<(OwnedFd, OsString)> {
    super::wsfs::Tree::open(root)?.open_parent(rel)
}

/// Reads the entry `name` of `dir`, bounded, following no link and opening no special file.
fn read_node(
    dir: &impl AsFd,
    name: &OsStr,
    depth: usize,
    b: &mut Budget,
) -> Option<std::io::Result<Node>> {
    b.entries += 1;
    if b.entries > MAX_ENTRIES || depth > MAX_DEPTH {
        return None;
    }
    let pathfd = match rustix::fs::openat(dir, name, OFlags::PATH | NOFOLLOW, Mode::empty()) {
        Ok(f) => f,
        Err(e) => return Some(Err(e.into())),
    };
    let st = match rustix::fs::fstat(&pathfd) {
        Ok(s) => s,
        Err(e) => return Some(Err(e.into())),
    };
    let mode = st.st_mode & 0o7777;
    let node = match FileType::from_raw_mode(st.st_mode) {
        FileType::Symlink => match rustix::fs::readlinkat(dir, name, Vec::new()) {
            Ok(t) => Node::Link(t.into_bytes()),
            Err(e) => return Some(Err(e.into())),
        },
        FileType::RegularFile => {
            let size = st.st_size.max(0) as u64;
            if b.bytes + size > BUDGET {
                return None;
            }
            let f = match rustix::fs::openat(
                dir,
                name,
                OFlags::RDONLY | OFlags::NONBLOCK | NOFOLLOW,
                Mode::empty(),
            ) {
                Ok(f) => f,
                Err(e) => return Some(Err(e.into())),
            };
            // The same file that was typed (a swap in between is refused, not followed).
            match rustix::fs::fstat(&f) {
                Ok(s2) if s2.st_ino == st.st_ino && s2.st_dev == st.st_dev => {}
                _ => {
                    return Some(Err(std::io::Error::other(
                        "the file changed while it was read",
                    )));
                }
            }
            let mut data = Vec::new();
            let mut file = std::fs::File::from(f);
            let limit = BUDGET - b.bytes;
            if let Err(e) = std::io::Read::read_to_end(
                &mut std::io::Read::take(&mut file, limit + 1),
                &mut data,
            ) {
                return Some(Err(e));
            }
            if data.len() as u64 > limit {
                return None;
            }
            b.bytes += data.len() as u64;
            Node::File { mode, data }
        }
        FileType::Directory => {
            let d = match rustix::fs::openat(
                dir,
                name,
                OFlags::DIRECTORY | OFlags::RDONLY | NOFOLLOW,
                Mode::empty(),
            ) {
                Ok(d) => d,
                Err(e) => return Some(Err(e.into())),
            };
            let mut children = BTreeMap::new();
            let entries = match rustix::fs::Dir::read_from(&d) {
                Ok(e) => e,
                Err(e) => return Some(Err(e.into())),
            };
            for ent in entries {
                let ent = match ent {
                    Ok(e) => e,
                    Err(e) => return Some(Err(e.into())),
                };
                let n = OsStr::from_bytes(ent.file_name().to_bytes());
                if n == "." || n == ".." {
                    continue;
                }
                match read_node(&d, n, depth + 1, b)? {
                    Ok(node) => children.insert(n.to_os_string(), node),
                    Err(e) => return Some(Err(e)),
                };
            }
            Node::Dir { mode, children }
        }
        _ => Node::Special { mode },
    };
    Some(Ok(node))
}

/// Keeps each protected path (absolute, inside one of `roots`, the writable trees) as it is
/// now.
fn keep_fresh(protected: &[PathBuf], roots: &[&Path]) -> Result<Kept, KeepError> {
    let mut kept = Kept::default();
    let mut b = Budget {
        bytes: 0,
        entries: 0,
    };
    for p in protected {
        let Some(root) = roots
            .iter()
            .filter(|r| p.starts_with(r) && p != *r)
            .max_by_key(|r| r.components().count())
        else {
            continue;
        };
        let rel = p.strip_prefix(root).unwrap_or(p).to_path_buf();
        let io = |e: std::io::Error| KeepError::Io {
            path: p.clone(),
            source: e,
        };
        let (dir, name) = open_parent(root, &rel).map_err(io)?;
        match read_node(&dir, &name, 0, &mut b) {
            None => return Err(KeepError::TooLarge { path: p.clone() }),
            Some(Ok(node)) => kept.paths.push(KeptPath {
                root: root.to_path_buf(),
                rel,
                node,
            }),
            // Gone already, or unreadable: nothing to keep there.
            Some(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
            Some(Err(e)) => return Err(io(e)),
        }
    }
    Ok(kept)
}

/// Writes `node` as the entry `name` of `dir` (which holds nothing of that name now).
fn write_node(dir: &impl AsFd, name: &OsStr, node: &Node) -> std::io::Result<()> {
    match node {
        Node::File { mode, data } => {
            let f = rustix::fs::openat(
                dir,
                name,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | NOFOLLOW,
                Mode::from_raw_mode(0o600),
            )?;
            let mut file = std::fs::File::from(f);
            std::io::Write::write_all(&mut file, data)?;
            rustix::fs::fchmod(&file, Mode::from_raw_mode(*mode))?;
            file.sync_all()
        }
        Node::Dir { mode, children } => {
            rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700))?;
            let d = rustix::fs::openat(
                dir,
                name,
                OFlags::DIRECTORY | OFlags::RDONLY | NOFOLLOW,
                Mode::empty(),
            )?;
            for (n, c) in children {
                write_node(&d, n, c)?;
            }
            rustix::fs::fchmod(&d, Mode::from_raw_mode(*mode))?;
            Ok(())
        }
        Node::Link(target) => {
            rustix::fs::symlinkat(OsStr::from_bytes(target), dir, name).map_err(Into::into)
        }
        // A FIFO or device is not recreated (nothing runs it); its absence is harmless.
        Node::Special { .. } => Ok(()),
    }
}

/// Moves the entry `name` of `dir` out of the way: into `quarantine` (same filesystem), else
/// to an inert name beside it.
fn move_away(
    dir: &impl AsFd,
    name: &OsStr,
    quarantine: &Path,
    stamp: &str,
    shown: &Path,
) -> std::io::Result<PathBuf> {
    let label = name.to_string_lossy().replace('/', "_");
    // not-ws: the quarantine, in the broker's own state directory.
    if std::fs::create_dir_all(quarantine).is_ok()
        // not-ws: the quarantine, in the broker's own state directory.
        && let Ok(q) = rustix::fs::open(
            quarantine,
            OFlags::DIRECTORY | OFlags::RDONLY | NOFOLLOW,
            Mode::empty(),
        )
    {
        let to = format!("{stamp}-restored-{label}");
        if rustix::fs::renameat(dir, name, &q, to.as_str()).is_ok() {
            return Ok(quarantine.join(to));
        }
    }
    let inert = format!("{label}.gateway-quarantined-{stamp}");
    rustix::fs::renameat(dir, name, dir, inert.as_str())?;
    Ok(shown.with_file_name(inert))
}

/// Puts back every kept path the run changed; what the run left there goes to `quarantine`.
fn restore_paths(kept: &Kept, quarantine: &Path) -> (Vec<Restored>, Vec<String>) {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
        .to_string();
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for (i, k) in kept.paths.iter().enumerate() {
        let shown = k.root.join(&k.rel);
        let stamp = format!("{stamp}-{i}");
        let res = (|| -> std::io::Result<Option<Restored>> {
            let (dir, name) = match open_parent(&k.root, &k.rel) {
                Ok(d) => d,
                // An ancestor is no longer a real directory: move it away and rebuild.
                Err(_) => return rebuild(k, quarantine, &stamp).map(Some),
            };
            let mut b = Budget {
                bytes: 0,
                entries: 0,
            };
            let now = read_node(&dir, &name, 0, &mut b);
            let moved_to = match now {
                Some(Ok(n)) if n == k.node => return Ok(None),
                Some(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => None,
                _ => Some(move_away(&dir, &name, quarantine, &stamp, &shown)?),
            };
            write_node(&dir, &name, &k.node)?;
            Ok(Some(Restored {
                path: shown.clone(),
                moved_to,
            }))
        })();
        match res {
            Ok(Some(r)) => done.push(r),
            Ok(None) => {}
            Err(e) => failed.push(format!("{}: {e}", shown.display())),
        }
    }
    (done, failed)
}

/// The kept path's ancestors were replaced (a link, a file): each non-directory ancestor is
/// moved away and a fresh directory made in its place, then the kept path is written back.
fn rebuild(k: &KeptPath, quarantine: &Path, stamp: &str) -> std::io::Result<Restored> {
    // Component by component from the tree's descriptor (`broker::wsfs`): a component that
    // is not a real directory is moved away, never followed.
    let mut dir = super::wsfs::Tree::open(&k.root)?.into_fd();
    let comps: Vec<&OsStr> = k.rel.iter().collect();
    let Some((last, ancestors)) = comps.split_last() else {
        return Err(std::io::Error::other("empty path"));
    };
    let mut moved_to = None;
    let mut here = k.root.clone();
    for c in ancestors {
        here.push(c);
        match rustix::fs::openat(
            &dir,
            *c,
            OFlags::DIRECTORY | OFlags::RDONLY | NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(d) => dir = d,
            Err(_) => {
                if rustix::fs::statat(&dir, *c, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                    moved_to = Some(move_away(&dir, c, quarantine, stamp, &here)?);
                }
                rustix::fs::mkdirat(&dir, *c, Mode::from_raw_mode(0o755))?;
                dir = rustix::fs::openat(
                    &dir,
                    *c,
                    OFlags::DIRECTORY | OFlags::RDONLY | NOFOLLOW,
                    Mode::empty(),
                )?;
            }
        }
    }
    if rustix::fs::statat(&dir, *last, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok() {
        move_away(&dir, last, quarantine, stamp, &k.root.join(&k.rel))?;
    }
    write_node(&dir, last, &k.node)?;
    Ok(Restored {
        path: k.root.join(&k.rel),
        moved_to,
    })
}

/// Runs of one workspace that overlap share one copy: the first takes it, the others use it
/// (a second run must not take the first run's changes for the original), and the last to
/// end drops it. `<state>/keep/<workspace hash>.json`, under a lock.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Shared {
    /// Runs in progress: (pid, its start time, a number for the run).
    runs: Vec<(u32, u64, u64)>,
    /// The protected paths as they were before the first of them started.
    baseline: Vec<KeptPath>,
}

/// A process's start time (clock ticks since boot; field 22 of `/proc/PID/stat`): with the
/// pid, it tells a live run from a pid reused after a crash.
fn start_time(pid: u32) -> Option<u64> {
    // not-ws: /proc, a process's start time
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split(' ').nth(19)?.parse().ok()
}

fn shared_file(state_dir: &Path, ws: &Path) -> PathBuf {
    use sha2::Digest;
    let h = sha2::Sha256::digest(ws.as_os_str().as_bytes());
    let hex: String = h[..12].iter().map(|b| format!("{b:02x}")).collect();
    state_dir.join("keep").join(format!("{hex}.json"))
}

/// Runs `f` on the workspace's shared record, under its lock, and saves what it leaves
/// (removing the record when no run remains).
fn with_shared<R>(
    file: &Path,
    f: impl FnOnce(&mut Shared) -> Result<R, KeepError>,
) -> Result<R, KeepError> {
    let io = |e: std::io::Error| KeepError::Io {
        path: file.to_path_buf(),
        source: e,
    };
    let dir = file.parent().unwrap_or(Path::new("."));
    // not-ws: the shared keep record, in the broker's own state directory
    std::fs::create_dir_all(dir).map_err(io)?;
    // not-ws: the shared keep record, in the broker's own state directory
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(file.with_extension("lock"))
        .map_err(io)?;
    lock.lock().map_err(io)?;
    // not-ws: the shared keep record, in the broker's own state directory
    let mut sh: Shared = std::fs::read(file)
        .ok()
        .and_then(|d| serde_json::from_slice(&d).ok())
        .unwrap_or_default();
    // Runs whose process is gone (a broker killed) no longer hold the copy.
    sh.runs
        .retain(|&(pid, start, _)| start_time(pid) == Some(start));
    if sh.runs.is_empty() {
        sh.baseline.clear();
    }
    let r = f(&mut sh)?;
    if sh.runs.is_empty() {
        // not-ws: the shared keep record, in the broker's own state directory
        let _ = std::fs::remove_file(file);
    } else {
        let data = serde_json::to_vec(&sh).map_err(|e| io(std::io::Error::other(e)))?;
        // not-ws: the shared keep record, in the broker's own state directory
        crate::fsops::write_file_atomic(file, &data)
            .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    }
    Ok(r)
}

/// Keeps the protected paths of a run in `ws` before it starts: as they are now when no
/// other run of the workspace is in progress, else as the first of those found them.
pub fn keep(
    protected: &[PathBuf],
    roots: &[&Path],
    state_dir: &Path,
    ws: &Path,
) -> Result<Kept, KeepError> {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let pid = std::process::id();
    let me = (
        pid,
        start_time(pid).unwrap_or(0),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    );
    let file = shared_file(state_dir, ws);
    with_shared(&file, |sh| {
        let known: Vec<PathBuf> = sh.baseline.iter().map(|k| k.root.join(&k.rel)).collect();
        let missing: Vec<PathBuf> = protected
            .iter()
            .filter(|p| !known.contains(p))
            .cloned()
            .collect();
        let fresh = keep_fresh(&missing, roots)?;
        sh.baseline.extend(fresh.paths);
        sh.runs.push(me);
        let paths = sh
            .baseline
            .iter()
            .filter(|k| protected.contains(&k.root.join(&k.rel)))
            .map(|k| KeptPath {
                root: k.root.clone(),
                rel: k.rel.clone(),
                node: k.node.clone(),
            })
            .collect();
        Ok(Kept {
            paths,
            shared: Some((file.clone(), me.2)),
        })
    })
}

/// Puts back what the run changed (under the workspace's lock, so two runs ending together
/// do not interleave), and leaves the shared record.
pub fn restore(kept: &Kept, quarantine: &Path) -> (Vec<Restored>, Vec<String>) {
    let Some((file, run)) = &kept.shared else {
        return restore_paths(kept, quarantine);
    };
    let pid = std::process::id();
    let res = with_shared(file, |sh| {
        let r = restore_paths(kept, quarantine);
        sh.runs.retain(|&(p, _, n)| !(p == pid && n == *run));
        Ok(r)
    });
    match res {
        Ok(r) => r,
        Err(e) => {
            // The lock or record failed: put back anyway (the copy is in memory).
            let (done, mut failed) = restore_paths(kept, quarantine);
            failed.push(e.to_string());
            (done, failed)
        }
    }
}

mod b64 {
    use base64::Engine;
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(v))
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let t: String = serde::Deserialize::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(t)
            .map_err(serde::de::Error::custom)
    }
}

mod b64map {
    use super::Node;
    use base64::Engine;
    use std::collections::BTreeMap;
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    pub fn serialize<S: serde::Serializer>(
        v: &BTreeMap<OsString, Node>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(v.len()))?;
        for (k, n) in v {
            m.serialize_entry(
                &base64::engine::general_purpose::STANDARD.encode(k.as_bytes()),
                n,
            )?;
        }
        m.end()
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<OsString, Node>, D::Error> {
        let m: BTreeMap<String, Node> = serde::Deserialize::deserialize(d)?;
        m.into_iter()
            .map(|(k, n)| {
                base64::engine::general_purpose::STANDARD
                    .decode(k)
                    .map(|b| (OsString::from_vec(b), n))
                    .map_err(serde::de::Error::custom)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gateway-keep-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("tmp");
        d
    }

    #[test]
    fn changed_added_and_removed_entries_are_put_back_and_links_never_followed() {
        let ws = tmp("ws");
        let q = tmp("q");
        let outside = tmp("outside");
        std::fs::create_dir_all(ws.join(".git/hooks")).expect("hooks");
        std::fs::write(ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").expect("w");
        std::fs::write(ws.join(".git/config"), "[core]\n").expect("w");
        let protected = vec![ws.join(".git/hooks"), ws.join(".git/config")];
        let kept = keep_fresh(&protected, &[ws.as_path()]).expect("keep");
        // The run: a new hook, a changed config.
        std::fs::write(ws.join(".git/hooks/pre-commit"), "evil").expect("w");
        std::fs::write(ws.join(".git/config"), "[core]\n\tfsmonitor = evil\n").expect("w");
        let (done, failed) = restore_paths(&kept, &q);
        assert!(failed.is_empty(), "{failed:?}");
        assert_eq!(done.len(), 2, "{done:?}");
        assert!(!ws.join(".git/hooks/pre-commit").exists());
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/config")).expect("r"),
            "[core]\n"
        );
        // Unchanged: nothing done.
        let (done, _) = restore_paths(&kept, &q);
        assert!(done.is_empty(), "{done:?}");
        // `.git` replaced by a link to another directory: the link is moved away, nothing is
        // written through it.
        std::fs::rename(ws.join(".git"), ws.join("git-moved")).expect("mv");
        std::os::unix::fs::symlink(&outside, ws.join(".git")).expect("ln");
        let (done, failed) = restore_paths(&kept, &q);
        assert!(failed.is_empty(), "{failed:?}");
        assert_eq!(done.len(), 2, "{done:?}");
        assert!(
            std::fs::read_dir(&outside).expect("ls").next().is_none(),
            "wrote through a link"
        );
        assert!(
            std::fs::symlink_metadata(ws.join(".git"))
                .expect("git")
                .is_dir()
        );
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/config")).expect("r"),
            "[core]\n"
        );
        for d in [ws, q, outside] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn special_files_are_never_opened_and_sizes_are_bounded() {
        let ws = tmp("special");
        std::fs::create_dir_all(ws.join("d")).expect("d");
        let st = std::process::Command::new("mkfifo")
            .arg(ws.join("d/fifo"))
            .status()
            .expect("mkfifo");
        assert!(st.success());
        // A FIFO would block an open for reading forever: kept as its type only.
        let kept = keep_fresh(&[ws.join("d")], &[ws.as_path()]).expect("keep");
        assert_eq!(kept.paths.len(), 1);
        let big = std::fs::File::create(ws.join("d/big")).expect("big");
        big.set_len(BUDGET + 1).expect("sparse");
        assert!(matches!(
            keep_fresh(&[ws.join("d")], &[ws.as_path()]),
            Err(KeepError::TooLarge { .. })
        ));
        let _ = std::fs::remove_dir_all(ws);
    }
}
