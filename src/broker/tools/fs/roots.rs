//! The allowed directories of the file tools: derived from the policy's sandbox plan by the
//! broker ([`root_paths`]), narrowed to what one call needs ([`narrow`]), sent to the worker as
//! paths ([`RootPaths`]) and opened there beneath its landlock ([`Roots`]); and the root a
//! path lies in, refusing denied and protected ones ([`pick_read`], [`pick_write`]).
//! A leaf: it imports nothing of `broker::tools::fs` but the call's own type.

use super::types::fs_err;
use crate::broker::refusal::{Access, Refusal};
use crate::broker::tools::fs::types::FsOp;
use crate::broker::{self, BrokerError};
use crate::fsops::path::Root;
use crate::policy::Policy;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The allowed directories of file tools, as paths: the broker derives them from the
/// policy's sandbox plan; the confined worker opens them (so its landlock applies).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub(crate) struct RootPaths {
    /// Readable trees (the writable ones included).
    pub(crate) read: Vec<PathBuf>,
    /// Writable trees.
    pub(crate) write: Vec<PathBuf>,
    /// Never opened: the policy's denied paths (those inside the workspace too) and the
    /// state directory. Checked on the file actually opened.
    pub(crate) deny: Vec<PathBuf>,
    /// Read-only inside writable trees. Checked on the file actually opened.
    pub(crate) protected: Vec<PathBuf>,
    /// What landlock excludes: `deny` without the paths inside the workspace, which landlock
    /// cannot take out of a writable tree without taking write access from the tree itself
    /// (commands get a mount namespace for those; the worker's own checks hold them).
    pub(crate) landlock_deny: Vec<PathBuf>,
}

/// The allowed roots for reading or changing, opened.
pub(crate) struct Roots {
    /// Readable and writable trees.
    pub(super) read: Vec<Root>,
    pub(super) write: Vec<Root>,
    pub(super) deny: Vec<PathBuf>,
    pub(super) protected: Vec<PathBuf>,
}

impl RootPaths {
    /// Opens the roots that exist (in the worker: beneath its landlock).
    pub(crate) fn open(&self) -> Roots {
        let open =
            |v: &[PathBuf]| -> Vec<Root> { v.iter().filter_map(|p| Root::open(p).ok()).collect() };
        Roots {
            read: open(&self.read),
            write: open(&self.write),
            deny: self.deny.clone(),
            protected: self.protected.clone(),
        }
    }
}

pub(crate) fn root_paths(
    cx: &crate::broker::client::Context,
    policy: &Policy,
    state_dir: &Path,
    ws: &Path,
    only_reads: bool,
) -> Result<RootPaths, BrokerError> {
    // A command's TMPDIR is its own private tmpfs; file tools have none, so the policy's
    // `${TMPDIR}` grants them nothing (the host's /tmp is not theirs).
    let tmp = state_dir.join("no-tmpdir-for-file-tools");
    // A tool that only reads changes no protected path: the search for git's places (a walk
    // of the workspace) is skipped for it.
    let search = if only_reads {
        broker::GitSearch::Skip
    } else {
        broker::GitSearch::Full
    };
    let p = broker::plan_with(cx, policy, ws, state_dir, &tmp, false, &[], search)?;
    let keep = |v: &[PathBuf]| -> Vec<PathBuf> {
        v.iter().filter(|p| !p.starts_with(&tmp)).cloned().collect()
    };
    let landlock_deny = p.confine.deny.clone();
    let mut deny = p.confine.deny.clone();
    deny.extend(p.confine.hidden.iter().cloned());
    deny.push(state_dir.to_path_buf());
    // Under the caller's roots the file tools read only inside them (commands keep the
    // system's programs and libraries; the file tools have no use for them).
    let roots = policy.sandbox.roots.as_deref();
    let mut readable = keep(&p.confine.read);
    readable.extend(keep(&p.confine.write));
    let readable = broker::narrow(readable, roots, |_| false);
    Ok(RootPaths {
        read: readable,
        write: broker::narrow(keep(&p.confine.write), roots, |_| false),
        deny,
        protected: p.confine.protected.clone(),
        landlock_deny,
    })
}

/// Least privilege: the roots a call can resolve in, out of the policy's. Each call opens
/// paths beneath one root (two for a move), chosen like [`pick`]: the deepest root holding
/// the path. A search (grep, glob, ls) gets only the directory it searches. The worker then
/// has landlock rules for those alone (a policy reading `/` minus credentials costs ~700
/// rules to build and to check on every open); its own checks are unchanged. Undo, restore
/// and the probe keep every root.
pub(super) fn narrow(mut paths: RootPaths, op: &FsOp, ws: &Path) -> RootPaths {
    let canon = |v: &[PathBuf]| -> Vec<PathBuf> {
        v.iter()
            .map(|r| crate::workspace::wsfs::resolve(r).unwrap_or_else(|| r.clone()))
            .collect()
    };
    let abs = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            ws.join(p)
        }
    };
    let deepest = |list: &[PathBuf], p: &Path| {
        list.iter()
            .filter(|r| p.starts_with(r))
            .max_by_key(|r| r.components().count())
            .cloned()
    };
    let read = canon(&paths.read);
    let write = canon(&paths.write);
    let (r, w): (Vec<PathBuf>, Vec<PathBuf>) = match op {
        FsOp::Read { path, .. } => match deepest(&read, &abs(path)) {
            Some(root) => (vec![root], vec![]),
            None => return paths,
        },
        FsOp::Grep { path, .. } | FsOp::Glob { path, .. } | FsOp::List { path } => {
            let a = abs(path);
            let Some(root) = deepest(&read, &a) else {
                return paths;
            };
            // The directory itself when it is a real directory inside that root (a link
            // out of it is refused beneath the root, as before).
            let dir = crate::workspace::wsfs::resolve(&a)
                .filter(|c| c.starts_with(&root) && crate::workspace::wsfs::is_dir(c));
            (vec![dir.unwrap_or(root)], vec![])
        }
        FsOp::Write { path, .. }
        | FsOp::Edit { path, .. }
        | FsOp::Mkdir { path, .. }
        | FsOp::Remove { path, .. } => match deepest(&write, &abs(path)) {
            Some(root) => (vec![root.clone()], vec![root]),
            None => return paths,
        },
        FsOp::Move { src, dst } => {
            let (Some(a), Some(b)) = (deepest(&write, &abs(src)), deepest(&write, &abs(dst)))
            else {
                return paths;
            };
            let mut v = vec![a, b];
            v.dedup();
            (v.clone(), v)
        }
        FsOp::Undo { .. } | FsOp::TrashRestore { .. } | FsOp::Probe { .. } => return paths,
    };
    paths.read = r;
    paths.write = w;
    paths
}

/// The root (the deepest) that contains `p`, and the path relative to it.
pub(super) fn pick<'a>(roots: &'a [Root], p: &Path, cwd: &Path) -> Option<(&'a Root, PathBuf)> {
    roots
        .iter()
        .filter_map(|r| r.relative(p, cwd).ok().map(|rel| (r, rel)))
        .max_by_key(|(r, _)| r.path.components().count())
}

/// The readable root holding `path` (a directory to search), refusing denied ones.
pub(super) fn pick_read<'a>(
    rs: &'a Roots,
    path: &Path,
    ws: &Path,
) -> Result<(&'a Root, PathBuf), BrokerError> {
    let (root, rel) = pick(&rs.read, path, ws).ok_or_else(|| {
        BrokerError::from(Refusal::OutsideRoots {
            path: path.to_path_buf(),
            access: Access::Read,
        })
    })?;
    // Resolve it beneath the root (refusing links out) and check what it really is.
    let fd = root
        .open_beneath(
            &rel,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
            0,
        )
        .map_err(fs_err)?;
    // not-ws: /proc/self/fd: the real path of an open descriptor
    let real = std::fs::read_link(format!("/proc/self/fd/{}", {
        use std::os::fd::AsRawFd;
        fd.as_raw_fd()
    }))
    .unwrap_or_else(|_| root.path.join(&rel));
    if under(&real, &rs.deny) {
        return Err(Refusal::DeniedPath {
            path: path.to_path_buf(),
        }
        .into());
    }
    let rel = real
        .strip_prefix(&root.path)
        .map(Path::to_path_buf)
        .unwrap_or(rel);
    Ok((root, rel))
}

/// The writable root holding `path`, and the path relative to it (its last component not
/// followed: the name itself is what tree operations act on).
pub(super) fn pick_write<'a>(
    rs: &'a Roots,
    path: &Path,
    ws: &Path,
) -> Result<(&'a Root, PathBuf), BrokerError> {
    let (root, rel) = pick(&rs.write, path, ws).ok_or_else(|| {
        BrokerError::from(Refusal::OutsideRoots {
            path: path.to_path_buf(),
            access: Access::Write,
        })
    })?;
    let abs = root.path.join(&rel);
    if under(&abs, &rs.deny) || under(&abs, &rs.protected) {
        return Err(Refusal::ProtectedPath {
            path: path.to_path_buf(),
        }
        .into());
    }
    Ok((root, rel))
}

/// The real path of an open file (what was actually opened, after every link).
pub(super) fn real_path(f: &std::fs::File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    // not-ws: /proc/self/fd: the real path of an open descriptor
    std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()
}

pub(super) fn under(p: &Path, list: &[PathBuf]) -> bool {
    list.iter().any(|d| p.starts_with(d))
}
