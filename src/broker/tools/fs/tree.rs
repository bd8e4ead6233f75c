//! Tree operations, in the confined worker: removal (to the trash, or for good), mkdir,
//! move, and putting a trash item back; and the state of a name (not following a final link)
//! that each journals before it acts.
//! A leaf: it imports nothing of `broker::tools::fs` but the call's own types.

use super::roots::{Roots, pick_write};
use super::types::{Tools, fs_err, rerr, usage};
use crate::broker::tools::fs::types::FsOutput;
use crate::broker::{BrokerError, PathProblem, UndoProblem};
use crate::fsops::path::{self as fpath, Root};
use crate::journal::{self, Change, PathState};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What [`state_of`] does with a regular file's content.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Content {
    /// Store it in the backup store (a state the journal records, to be restored).
    Backup,
    /// Only hash it (a check, or a state nothing will restore): nothing is stored, nothing
    /// crosses to the broker.
    Hash,
}

/// The state of the name `rel` (not following a final link).
pub(super) fn state_of(
    t: &mut Tools<'_>,
    root: &Root,
    rel: &Path,
    content: Content,
) -> Result<PathState, BrokerError> {
    let abs = root.path.join(rel);
    let (dir, name) = root.parent_of(rel).map_err(fs_err)?;
    let st = match rustix::fs::statat(&dir, &name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Ok(PathState::Absent),
        Err(e) => return Err(rerr(&abs, "reading")(e)),
    };
    match rustix::fs::FileType::from_raw_mode(st.st_mode) {
        rustix::fs::FileType::Directory => Ok(PathState::Dir),
        rustix::fs::FileType::RegularFile => {
            let mut f = fpath::open_read(root, rel).map_err(fs_err)?;
            let mut d = Vec::new();
            f.read_to_end(&mut d).map_err(|e| BrokerError::Io {
                what: format!("reading {}", abs.display()),
                source: e,
            })?;
            Ok(PathState::File {
                sha256: match content {
                    Content::Backup => t.state.backup(&d)?,
                    Content::Hash => journal::sha256_hex(&d),
                },
                mode: st.st_mode & 0o7777,
                size: d.len() as u64,
            })
        }
        rustix::fs::FileType::Symlink => {
            let t = rustix::fs::readlinkat(&dir, &name, Vec::new())
                .map_err(rerr(&abs, "reading the link"))?;
            Ok(PathState::Link {
                target: t.to_string_lossy().into_owned(),
            })
        }
        _ => Err(usage(PathProblem::NotFileDirOrLink { path: abs })),
    }
}

pub(super) fn same_state(a: &PathState, b: &PathState) -> bool {
    match (a, b) {
        (PathState::File { sha256: x, .. }, PathState::File { sha256: y, .. }) => x == y,
        (a, b) => a == b,
    }
}

/// The state of what a removal would take away: refused if there is nothing, or a directory
/// without `recursive` (`what`: what -r would do, for the message).
fn removable(
    t: &mut Tools<'_>,
    root: &Root,
    rel: &Path,
    recursive: bool,
    content: Content,
    what: &str,
) -> Result<PathState, BrokerError> {
    let abs = root.path.join(rel);
    match state_of(t, root, rel, content)? {
        PathState::Absent => Err(usage(PathProblem::NoSuchPath { path: abs })),
        PathState::Dir if !recursive => Err(usage(PathProblem::IsADirectory {
            path: abs,
            what: what.to_string(),
        })),
        s => Ok(s),
    }
}

/// Moves `rel` into the trash (journalled; undo restores it).
pub(super) fn to_trash(
    t: &mut Tools<'_>,
    root: &Root,
    rel: &Path,
    recursive: bool,
    tool: &str,
    undoes: Option<u64>,
) -> Result<FsOutput, BrokerError> {
    let abs = root.path.join(rel);
    let before = removable(
        t,
        root,
        rel,
        recursive,
        Content::Backup,
        "move it to the trash",
    )?;
    let name = t.state.trash_reserve(&abs)?;
    let c = t.state.begin(Change {
        id: 0,
        time: 0,
        tool: tool.into(),
        path: abs.clone(),
        before,
        after: PathState::Absent,
        undoes,
        dest: None,
        trash: Some(name.clone()),
        group: None,
        ..Change::default()
    })?;
    let files = t.trash_files.clone();
    let moved = (|| {
        let (dir, fname) = root.parent_of(rel).map_err(fs_err)?;
        // not-ws: the trash, in the broker's own state directory
        let tdir = rustix::fs::open(
            &files,
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(rerr(&files, "opening the trash"))?;
        match rustix::fs::renameat_with(
            &dir,
            &fname,
            &tdir,
            &name,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => {}
            Err(rustix::io::Errno::XDEV) => {
                return Err(usage(PathProblem::TrashOnOtherFileSystem {
                    path: abs.clone(),
                }));
            }
            Err(e) => return Err(rerr(&abs, "moving to the trash")(e)),
        }
        let _ = rustix::fs::fsync(&dir);
        let _ = rustix::fs::fsync(&tdir);
        Ok(())
    })();
    match moved {
        Ok(()) => t.state.commit(c.id)?,
        Err(e) => {
            t.state.abort(c.id);
            t.state.trash_forget(&name);
            return Err(e);
        }
    }
    Ok(FsOutput::Done {
        what: format!("moved {} to the trash as {name}", abs.display()),
        change: Some(c.id),
        undoable: true,
    })
}

/// The journal's tool name for permanent removals (undo refuses them).
pub(super) const PURGE_TOOL: &str = "fs.rm.permanent";

/// Removes `rel` for good (`fs rm --permanent`): no copy kept. Journalled (history shows it,
/// with the removed file's hash and size) so that undo can say why it cannot help.
pub(super) fn purge(
    t: &mut Tools<'_>,
    root: &Root,
    rel: &Path,
    recursive: bool,
) -> Result<FsOutput, BrokerError> {
    let abs = root.path.join(rel);
    // Hashed for the journal's record, never stored: nothing of it is kept.
    let before = removable(t, root, rel, recursive, Content::Hash, "delete it")?;
    let tree = before == PathState::Dir;
    let c = t.state.begin(Change {
        id: 0,
        time: 0,
        tool: PURGE_TOOL.into(),
        path: abs.clone(),
        before,
        after: PathState::Absent,
        undoes: None,
        dest: None,
        trash: None,
        group: None,
        ..Change::default()
    })?;
    let (dir, name) = root.parent_of(rel).map_err(fs_err)?;
    let mut removed = 0u64;
    let res = if tree {
        remove_tree(&dir, &name, 0, &mut removed)
    } else {
        rustix::fs::unlinkat(&dir, &name, rustix::fs::AtFlags::empty())
    };
    let _ = rustix::fs::fsync(&dir);
    match res {
        Ok(()) => t.state.commit(c.id)?,
        Err(e) => {
            t.state.abort(c.id);
            let e = rerr(&abs, "deleting")(e);
            return Err(if removed > 0 {
                BrokerError::Io {
                    what: format!(
                        "{} was partly deleted ({removed} entries removed)",
                        abs.display()
                    ),
                    source: std::io::Error::other(e.to_string()),
                }
            } else {
                e
            });
        }
    }
    Ok(FsOutput::Done {
        what: format!("deleted {} permanently", abs.display()),
        change: Some(c.id),
        undoable: false,
    })
}

/// Deletes the directory `name` in `parent` with everything in it, never following a
/// symbolic link (each level is opened `O_NOFOLLOW` relative to the one above it).
/// Written by hand: `std::fs::remove_dir_all` works on paths, and this must stay beneath
/// the directory fd the root resolution gave.
fn remove_tree(
    parent: &std::os::fd::OwnedFd,
    name: &std::ffi::OsStr,
    depth: usize,
    removed: &mut u64,
) -> Result<(), rustix::io::Errno> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    if depth > 4096 {
        return Err(rustix::io::Errno::LOOP);
    }
    let d = rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut entries = Vec::new();
    for e in rustix::fs::Dir::read_from(&d)? {
        let e = e?;
        let n = e.file_name().to_bytes();
        if n == b"." || n == b".." {
            continue;
        }
        let ft = match e.file_type() {
            FileType::Unknown => FileType::from_raw_mode(
                rustix::fs::statat(&d, e.file_name(), AtFlags::SYMLINK_NOFOLLOW)?.st_mode,
            ),
            ft => ft,
        };
        entries.push((e.file_name().to_owned(), ft));
    }
    for (n, ft) in entries {
        let n = std::ffi::OsStr::from_bytes(n.as_bytes()).to_os_string();
        if ft == FileType::Directory {
            remove_tree(&d, &n, depth + 1, removed)?;
        } else {
            rustix::fs::unlinkat(&d, &n, AtFlags::empty())?;
            *removed += 1;
        }
    }
    rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)?;
    *removed += 1;
    Ok(())
}

/// Creates a directory (and, with `parents`, its missing parents): one change, for the
/// topmost directory created. With `parents`, a directory that already exists is success
/// and no change.
pub(super) fn mkdir(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    path: &Path,
    parents: bool,
) -> Result<FsOutput, BrokerError> {
    let (root, rel) = pick_write(rs, path, ws)?;
    // The components to create, from the first missing one.
    let comps: Vec<PathBuf> = rel
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty() && *a != Path::new("."))
        .map(Path::to_path_buf)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let mut first_missing = None;
    for (i, c) in comps.iter().enumerate() {
        match state_of(t, root, c, Content::Hash)? {
            PathState::Absent => {
                first_missing = Some(i);
                break;
            }
            PathState::Dir => {}
            _ => {
                return Err(usage(PathProblem::NotADirectory {
                    path: root.path.join(c),
                }));
            }
        }
    }
    let Some(first) = first_missing else {
        // `mkdir -p` of an existing directory succeeds and changes nothing (as mkdir -p);
        // every component was checked to be a directory above.
        if parents {
            return Ok(FsOutput::Done {
                what: format!("{} already exists", root.path.join(&rel).display()),
                change: None,
                undoable: false,
            });
        }
        return Err(usage(PathProblem::AlreadyExists {
            path: root.path.join(&rel),
        }));
    };
    if first + 1 < comps.len() && !parents {
        return Err(usage(PathProblem::MissingParent {
            path: root.path.join(&comps[first]),
        }));
    }
    let top = root.path.join(&comps[first]);
    let c = t.state.begin(Change {
        id: 0,
        time: 0,
        tool: "fs.mkdir".into(),
        path: top.clone(),
        before: PathState::Absent,
        after: PathState::Dir,
        undoes: None,
        dest: None,
        trash: None,
        group: None,
        ..Change::default()
    })?;
    let made = (|| {
        for comp in &comps[first..] {
            let (dir, name) = root.parent_of(comp).map_err(fs_err)?;
            rustix::fs::mkdirat(&dir, &name, rustix::fs::Mode::from_raw_mode(0o755))
                .map_err(rerr(&root.path.join(comp), "creating"))?;
            let _ = rustix::fs::fsync(&dir);
        }
        Ok(())
    })();
    match made {
        Ok(()) => t.state.commit(c.id)?,
        Err(e) => {
            t.state.abort(c.id);
            return Err(e);
        }
    }
    Ok(FsOutput::Done {
        what: format!("created {}", root.path.join(&rel).display()),
        change: Some(c.id),
        undoable: true,
    })
}

/// Moves `src` to `dst` (into `dst` if it is a directory), never replacing anything.
#[allow(clippy::too_many_arguments)]
pub(super) fn move_path(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    src: &Path,
    dst: &Path,
    tool: &str,
    undoes: Option<u64>,
    expect: Option<&PathState>,
) -> Result<FsOutput, BrokerError> {
    let (sroot, srel) = pick_write(rs, src, ws)?;
    let (droot, mut drel) = pick_write(rs, dst, ws)?;
    if state_of(t, droot, &drel, Content::Hash)? == PathState::Dir
        && let Some(n) = srel.file_name()
    {
        drel = drel.join(n);
    }
    let sabs = sroot.path.join(&srel);
    let dabs = droot.path.join(&drel);
    let before = state_of(t, sroot, &srel, Content::Backup)?;
    if before == PathState::Absent {
        return Err(usage(PathProblem::NoSuchPath { path: sabs }));
    }
    if let Some(e) = expect
        && !same_state(e, &before)
    {
        return Err(usage(PathProblem::ChangedSinceMoved { path: sabs }));
    }
    if state_of(t, droot, &drel, Content::Hash)? != PathState::Absent {
        return Err(usage(PathProblem::DestinationExists { path: dabs }));
    }
    let c = t.state.begin(Change {
        id: 0,
        time: 0,
        tool: tool.into(),
        path: sabs.clone(),
        before,
        after: PathState::Absent,
        undoes,
        dest: Some(dabs.clone()),
        trash: None,
        group: None,
        ..Change::default()
    })?;
    let moved = (|| {
        let (sd, sn) = sroot.parent_of(&srel).map_err(fs_err)?;
        let (dd, dn) = droot.parent_of(&drel).map_err(fs_err)?;
        rustix::fs::renameat_with(&sd, &sn, &dd, &dn, rustix::fs::RenameFlags::NOREPLACE)
            .map_err(rerr(&sabs, "moving"))?;
        let _ = rustix::fs::fsync(&sd);
        let _ = rustix::fs::fsync(&dd);
        Ok(())
    })();
    match moved {
        Ok(()) => t.state.commit(c.id)?,
        Err(e) => {
            t.state.abort(c.id);
            return Err(e);
        }
    }
    Ok(FsOutput::Done {
        what: format!("moved {} to {}", sabs.display(), dabs.display()),
        change: Some(c.id),
        undoable: true,
    })
}

/// Puts a trash item back where the change `c` removed it from.
pub(super) fn from_trash(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    c: &Change,
    name: &str,
) -> Result<FsOutput, BrokerError> {
    let (root, rel) = pick_write(rs, &c.path, ws)?;
    if state_of(t, root, &rel, Content::Hash)? != PathState::Absent {
        return Err(usage(UndoProblem::ExistsAgain {
            path: c.path.clone(),
        }));
    }
    let files = t.trash_files.clone();
    // not-ws: the trash, in the broker's own state directory
    if std::fs::symlink_metadata(files.join(name)).is_err() {
        return Err(usage(UndoProblem::TrashItemGone {
            name: name.to_string(),
        }));
    }
    let r = t.state.begin(Change {
        id: 0,
        time: 0,
        tool: "undo".into(),
        path: c.path.clone(),
        before: PathState::Absent,
        after: c.before.clone(),
        undoes: Some(c.id),
        dest: None,
        trash: Some(name.to_string()),
        group: None,
        ..Change::default()
    })?;
    let moved = (|| {
        let (dir, fname) = root.parent_of(&rel).map_err(fs_err)?;
        // not-ws: the trash, in the broker's own state directory
        let tdir = rustix::fs::open(
            &files,
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(rerr(&files, "opening the trash"))?;
        rustix::fs::renameat_with(
            &tdir,
            name,
            &dir,
            &fname,
            rustix::fs::RenameFlags::NOREPLACE,
        )
        .map_err(rerr(&c.path, "restoring"))?;
        let _ = rustix::fs::fsync(&dir);
        Ok(())
    })();
    match moved {
        Ok(()) => {
            t.state.commit(r.id)?;
            t.state.trash_forget(name);
        }
        Err(e) => {
            t.state.abort(r.id);
            return Err(e);
        }
    }
    Ok(FsOutput::Done {
        what: format!("restored {} from the trash", c.path.display()),
        change: Some(r.id),
        undoable: true,
    })
}
