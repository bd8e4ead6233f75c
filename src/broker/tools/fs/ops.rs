//! A file tool's body as the confined worker runs it: [`act`] dispatches the call to its
//! module (one file's content: `file`; tree operations: `tree`; undo: `revert`), and holds
//! the read-only searches itself: listing, glob, grep and the confinement probe.
//! A leaf: it imports nothing of `broker::tools::fs` but the call's own types.

use super::file::{Target, change, read};
use super::revert;
use super::roots::{Roots, pick, pick_read, pick_write, real_path, under};
use super::tree::{mkdir, move_path, purge, to_trash};
use super::types::{Tools, fs_err, rerr, usage};
use crate::broker::refusal::{Access, Refusal};
use crate::broker::tools::fs::types::{FsOp, FsOutput};
use crate::broker::{BrokerError, PathProblem, UndoProblem, redact_text};
use crate::fsops::{search, text};
use crate::journal::Change;
use std::path::Path;

/// A file tool's body (in the confined worker): everything but the decision and the record.
pub(crate) fn act(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    op: FsOp,
    undo_target: Option<Change>,
) -> Result<FsOutput, BrokerError> {
    match op {
        FsOp::Read {
            path,
            offset,
            limit,
            binary,
        } => read(t, rs, ws, &path, offset, limit, binary),
        FsOp::Write { path, content } => change(
            t,
            rs,
            ws,
            &path,
            "fs.write",
            |_| Ok(Target::Write(content.clone())),
            false,
            None,
        ),
        FsOp::Edit {
            path,
            edits,
            dry_run,
        } => change(
            t,
            rs,
            ws,
            &path,
            "fs.edit",
            |old| {
                let Some(old) = old else {
                    return Err(usage(PathProblem::NoFileToEdit { path: path.clone() }));
                };
                text::apply(old, &edits)
                    .map(Target::Write)
                    .map_err(|error| {
                        usage(PathProblem::Edit {
                            path: path.clone(),
                            error,
                        })
                    })
            },
            dry_run,
            None,
        ),
        FsOp::Undo { dry_run, force, .. } => {
            let c = undo_target.ok_or_else(|| usage(UndoProblem::Nothing))?;
            revert::undo(t, rs, ws, &c, dry_run, force).map_err(|e| revert::with_hint(e, c.id))
        }
        FsOp::TrashRestore { .. } => {
            let c = undo_target.ok_or_else(|| usage(UndoProblem::NoTrashItemGiven))?;
            revert::undo(t, rs, ws, &c, false, false)
        }
        FsOp::Remove {
            path,
            recursive,
            permanent,
        } => {
            let (root, rel) = pick_write(rs, &path, ws)?;
            // A tree holding a denied or protected path is not removed with it: its
            // contents would go where the policy does not let them (gone, or the trash).
            let abs = root.path.join(&rel);
            if let Some(g) = rs
                .deny
                .iter()
                .chain(&rs.protected)
                .find(|g| g.starts_with(&abs) && **g != abs)
            {
                return Err(Refusal::ContainsProtected {
                    path: path.clone(),
                    inner: g.clone(),
                }
                .into());
            }
            if permanent {
                purge(t, root, &rel, recursive)
            } else {
                to_trash(t, root, &rel, recursive, "fs.rm", None)
            }
        }
        FsOp::Mkdir { path, parents } => mkdir(t, rs, ws, &path, parents),
        FsOp::Move { src, dst } => move_path(t, rs, ws, &src, &dst, "fs.mv", None, None),
        FsOp::List { path } => list(rs, ws, &path),
        FsOp::Probe { path } => Ok(probe(&path)),
        FsOp::Glob { pattern, path } => {
            let (root, rel) = pick_read(rs, &path, ws)?;
            let (paths, truncated) =
                search::glob(root, &rel, &rs.deny, &pattern, 1000).map_err(fs_err)?;
            Ok(FsOutput::Glob { paths, truncated })
        }
        FsOp::Grep { path, options } => {
            let (root, rel) = pick_read(rs, &path, ws)?;
            let mut r = search::grep(root, &rel, &rs.deny, &options).map_err(fs_err)?;
            // Secrets in matching lines are redacted as in command output.
            if t.redact {
                for l in &mut r.lines {
                    l.2 = redact_text(&l.2);
                }
            }
            Ok(FsOutput::Grep(r))
        }
    }
}

/// [`FsOp::Probe`]: plain opens of `path` (no beneath-resolution, no policy check) for
/// reading and for appending (nothing is written), and the confinement the kernel reports
/// for this process.
fn probe(path: &Path) -> FsOutput {
    let show = |r: std::io::Result<std::fs::File>| match r {
        Ok(_) => "ok".to_string(),
        Err(e) => e.to_string(),
    };
    // not-ws: the probe runs in the confined worker: what its confinement lets it open
    let open = show(std::fs::File::open(path));
    // not-ws: the probe runs in the confined worker: what its confinement lets it open
    let write = show(std::fs::OpenOptions::new().append(true).open(path));
    // not-ws: /proc/self/status
    let status = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.starts_with("Seccomp:") || l.starts_with("NoNewPrivs:") || l.starts_with("CapEff:")
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    FsOutput::Probe {
        open,
        write,
        status,
    }
}

/// Lists a directory beneath the readable roots.
fn list(rs: &Roots, ws: &Path, path: &Path) -> Result<FsOutput, BrokerError> {
    let (root, rel) = pick(&rs.read, path, ws).ok_or_else(|| {
        BrokerError::from(Refusal::OutsideRoots {
            path: path.to_path_buf(),
            access: Access::Read,
        })
    })?;
    let fd = root
        .open_beneath(
            &rel,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
            0,
        )
        .map_err(fs_err)?;
    let f = std::fs::File::from(fd);
    if let Some(real) = real_path(&f)
        && under(&real, &rs.deny)
    {
        return Err(Refusal::DeniedPath {
            path: path.to_path_buf(),
        }
        .into());
    }
    let dir = rustix::fs::Dir::read_from(&f).map_err(rerr(path, "listing"))?;
    let mut entries = Vec::new();
    for e in dir {
        let e = e.map_err(rerr(path, "listing"))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        let st = rustix::fs::statat(&f, e.file_name(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok();
        let (kind, size) = match st.map(|s| {
            (
                rustix::fs::FileType::from_raw_mode(s.st_mode),
                s.st_size as u64,
            )
        }) {
            Some((rustix::fs::FileType::Directory, _)) => ("dir", 0),
            Some((rustix::fs::FileType::RegularFile, n)) => ("file", n),
            Some((rustix::fs::FileType::Symlink, _)) => ("link", 0),
            _ => ("other", 0),
        };
        entries.push((name, kind.to_string(), size));
    }
    entries.sort();
    Ok(FsOutput::List {
        path: path.to_path_buf(),
        entries,
    })
}
