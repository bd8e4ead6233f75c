//! Undo's body, in the confined worker: the revert of one change ([`undo`]) and of what one
//! command changed (a snapshot group, [`undo_group`]): files, directories with their modes and
//! symbolic links. Which change to revert is the broker's choice (`fs/undo.rs`).
//!
//! A group is reverted in an order that works whatever the command did: first what is in
//! the way goes, deepest first (a created file, a directory that replaced a file, a link
//! that replaced a directory); then what was there comes back, parents first (directories
//! created 0700 so that their contents can be written whatever their mode); last, the
//! directories get their recorded modes, deepest first. Every name is reached without
//! following a symbolic link on the way (`Root::parent_of_nofollow`) and acted on itself
//! (replaced by rename, removed by unlink): a link the agent left never redirects the
//! undo, inside the workspace or out of it. All intents are journalled (one append) before
//! the first step; after a failure each is committed or aborted by what is really there.
//!
//! A leaf: it imports nothing of `broker::tools::fs` but the call's own types.

use super::file::{Target, change};
use super::roots::{Roots, pick_write};
use super::tree::{Content, PURGE_TOOL, from_trash, move_path, same_state, state_of, to_trash};
use super::types::{Tools, fs_err, usage};
use crate::broker::tools::fs::types::FsOutput;
use crate::broker::{BrokerError, GroupConflict, PathProblem, UndoProblem, redact_text};
use crate::fsops::path::{OwnerFix, Root};
use crate::fsops::text;
use crate::journal::{self, Change, PathState};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Reverts change `c` (with every change of its group, if it has one): refused if the path
/// changed since, unless `force`.
pub(super) fn undo(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    c: &Change,
    dry_run: bool,
    force: bool,
) -> Result<FsOutput, BrokerError> {
    if let Some(g) = &c.group {
        return undo_group(t, rs, ws, g, dry_run, force);
    }
    need_backups(t, std::slice::from_ref(c))?;
    if c.tool == PURGE_TOOL {
        return Err(usage(UndoProblem::Permanent {
            id: c.id,
            path: c.path.clone(),
        }));
    }
    let tree_op = c.dest.is_some()
        || c.trash.is_some()
        || matches!(c.before, PathState::Dir | PathState::Link { .. })
        || matches!(c.after, PathState::Dir | PathState::Link { .. });
    if tree_op {
        if dry_run {
            return Ok(FsOutput::Done {
                what: format!(
                    "dry run: would revert change {} ({} {})",
                    c.id,
                    c.tool,
                    c.path.display()
                ),
                change: None,
                undoable: true,
            });
        }
        if let Some(dest) = &c.dest {
            // A move: back from where it went.
            let expect = if force { None } else { Some(&c.before) };
            return move_path(t, rs, ws, dest, &c.path, "undo", Some(c.id), expect);
        }
        if let (Some(name), PathState::Absent) = (&c.trash, &c.after) {
            return from_trash(t, rs, ws, c, name);
        }
        // A creation (mkdir) or a restore: remove what it made, to the trash.
        let (root, rel) = pick_write(rs, &c.path, ws)?;
        let now = state_of(t, root, &rel, Content::Hash)?;
        if !same_state(&now, &c.after) && !force {
            return Err(usage(UndoProblem::ChangedSince {
                path: c.path.clone(),
                id: c.id,
            }));
        }
        return to_trash(t, root, &rel, true, "undo", Some(c.id));
    }
    let want = match &c.before {
        PathState::Absent => None,
        PathState::File { sha256, .. } => Some(t.state.read_backup(sha256)?),
        PathState::Dir | PathState::Link { .. } => None,
    };
    let after = match &c.after {
        PathState::File { sha256, .. } => t.state.read_backup(sha256).ok(),
        _ => None,
    };
    let path = c.path.clone();
    let id = c.id;
    change(
        t,
        rs,
        ws,
        &path,
        "undo",
        |now| {
            let changed_since = now != after.as_deref();
            if changed_since && !force {
                let d = text::unified_diff(
                    &path.display().to_string(),
                    after.as_deref().unwrap_or_default(),
                    now.unwrap_or_default(),
                );
                return Err(usage(UndoProblem::ContentChangedSince {
                    path: path.clone(),
                    id,
                    diff: redact_text(&d),
                }));
            }
            Ok(match want {
                Some(d) => Target::Write(d),
                None => Target::Remove,
            })
        },
        dry_run,
        Some(id),
    )
}

/// Why the content before `c` is not in the backup store.
pub(super) fn missing_reason(c: &Change) -> String {
    c.not_undoable
        .as_ref()
        .or(c.not_backed_up.as_ref().filter(|w| w.contains("content before")))
        .cloned()
        .unwrap_or_else(|| {
            "the content before the change expired from the backup store (backup retention: [undo] keep_versions, backups_max_total, max_state_bytes)".into()
        })
}

/// Refuses, before anything is touched, to undo changes whose content before is not in the
/// backup store (never backed up, or expired since): what cannot be brought back is named.
pub(super) fn need_backups(t: &mut Tools<'_>, changes: &[Change]) -> Result<(), BrokerError> {
    let mut missing = Vec::new();
    for c in changes {
        if let PathState::File { sha256, .. } = &c.before
            && !t.state.has_backup(sha256)?
        {
            missing.push((c.path.clone(), missing_reason(c)));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let id = changes.first().map_or(0, |c| c.id);
    Err(usage(UndoProblem::NotBackedUp { id, missing }))
}

/// An undo that failed says how not to be stuck on it (once: an error that says it already
/// is kept as it is; a refusal says its own rule).
pub(super) fn with_hint(e: BrokerError, id: u64) -> BrokerError {
    match e {
        e @ (BrokerError::Usage(_)
        | BrokerError::Fs(_)
        | BrokerError::CannotRead { .. }
        | BrokerError::Io { .. }) => BrokerError::NotUndone {
            id,
            source: Box::new(e),
        },
        e => e,
    }
}

/// What is at a name now (a final link is not followed).
struct Now {
    state: PathState,
    /// Permission bits (of a file or directory).
    mode: u32,
    /// Owner, to keep when a file is replaced.
    owner: (u32, u32),
}

/// One change of the group to revert, where it is, and what is there now.
struct Step<'r> {
    c: Change,
    root: &'r Root,
    rel: PathBuf,
    now: Now,
    /// A directory in the way that holds what the group does not know (ignored files): it
    /// goes to the trash under this name instead of being removed.
    trash: Option<String>,
}

impl Step<'_> {
    fn abs(&self) -> PathBuf {
        self.root.path.join(&self.rel)
    }

    /// Must what is there go before what was there can come back?
    fn clears(&self) -> bool {
        use PathState::{Absent, Dir};
        match (&self.now.state, &self.c.before) {
            (Absent, _) | (Dir, Dir) => false,
            (Dir, _) | (_, Dir | Absent) => true,
            // A file or link over a file or link: the rename replaces the name itself.
            _ => false,
        }
    }

    /// Does it come back from the trash (a directory an earlier undo moved there)?
    fn trash_item(&self) -> Option<&str> {
        match (&self.c.before, &self.c.after) {
            (PathState::Dir, a) if *a != PathState::Dir => self.c.trash.as_deref(),
            _ => None,
        }
    }
}

fn os(e: rustix::io::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

fn ioe(what: &str, p: &Path) -> impl FnOnce(rustix::io::Errno) -> BrokerError {
    let what = format!("{what} {}", p.display());
    move |e| BrokerError::Io {
        what,
        source: os(e),
    }
}

/// The directory holding `rel`, no link followed; `None` when it does not exist, is no
/// longer a directory, or is reached through a link: then the name `rel` is not there.
fn parent(root: &Root, rel: &Path) -> Result<Option<(OwnedFd, OsString)>, BrokerError> {
    match root.parent_of_nofollow(rel) {
        Ok(p) => Ok(Some(p)),
        Err(crate::fsops::FsError::ThroughLink { .. }) => Ok(None),
        Err(crate::fsops::FsError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound
                || source.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) =>
        {
            Ok(None)
        }
        Err(e) => Err(fs_err(e)),
    }
}

/// Reads the regular file `name` in `dir` (not following a link).
fn read_at(dir: &OwnedFd, name: &OsString, abs: &Path) -> Result<Vec<u8>, BrokerError> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(ioe("opening", abs))?;
    let st = rustix::fs::fstat(&fd).map_err(ioe("reading", abs))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(usage(UndoProblem::NotRegularNow {
            path: abs.to_path_buf(),
        }));
    }
    let mut data = Vec::new();
    std::fs::File::from(fd)
        .read_to_end(&mut data)
        .map_err(|source| BrokerError::Io {
            what: format!("reading {}", abs.display()),
            source,
        })?;
    Ok(data)
}

/// What is at `rel` now; a file's content is backed up when `backup` (to be restored by
/// undoing the undo), else only hashed.
fn look(t: &mut Tools<'_>, root: &Root, rel: &Path, backup: bool) -> Result<Now, BrokerError> {
    let abs = root.path.join(rel);
    let absent = Now {
        state: PathState::Absent,
        mode: 0,
        owner: (0, 0),
    };
    let Some((dir, name)) = parent(root, rel)? else {
        return Ok(absent);
    };
    let st = match rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Ok(absent),
        Err(e) => return Err(ioe("reading", &abs)(e)),
    };
    let state = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => PathState::Dir,
        FileType::Symlink => {
            let target = rustix::fs::readlinkat(&dir, &name, Vec::new())
                .map_err(ioe("reading the link", &abs))?;
            PathState::Link {
                target: target.to_string_lossy().into_owned(),
            }
        }
        FileType::RegularFile => {
            let data = read_at(&dir, &name, &abs)?;
            PathState::File {
                sha256: if backup {
                    t.state.backup(&data)?
                } else {
                    journal::sha256_hex(&data)
                },
                mode: st.st_mode & 0o7777,
                size: data.len() as u64,
            }
        }
        _ => {
            return Err(usage(UndoProblem::NotFileDirOrLinkNow { path: abs }));
        }
    };
    Ok(Now {
        state,
        mode: st.st_mode & 0o7777,
        owner: (st.st_uid, st.st_gid),
    })
}

fn describe(s: &PathState) -> String {
    match s {
        PathState::Absent => "nothing".into(),
        PathState::Dir => "a directory".into(),
        PathState::Link { target } => format!("a symbolic link to {target}"),
        PathState::File { size, .. } => format!("a file of {size} bytes"),
    }
}

/// Reverts every change of a group (what one command changed, or one undo of it) that is
/// not undone yet; refuses, before touching anything, if any path changed since (unless
/// `force`: what is there is backed up first, and undoing the undo brings it back).
pub(super) fn undo_group(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    group: &str,
    dry_run: bool,
    force: bool,
) -> Result<FsOutput, BrokerError> {
    let (members, cannot) = undoable_members(t, group)?;
    let mut steps = Vec::with_capacity(members.len());
    let mut conflicts = Vec::new();
    for c in members {
        let (root, rel) = pick_write(rs, &c.path, ws)?;
        let now = look(t, root, &rel, false)?;
        if !same_state(&now.state, &c.after) {
            conflicts.push(GroupConflict {
                path: c.path.clone(),
                now: describe(&now.state),
                left: describe(&c.after),
            });
        }
        steps.push(Step {
            c,
            root,
            rel,
            now,
            trash: None,
        });
    }
    if !conflicts.is_empty() && !force {
        return Err(usage(UndoProblem::ChangedSinceCommand { conflicts }));
    }
    add_missing_parents(t, &mut steps)?;
    steps.sort_by(|a, b| a.c.path.cmp(&b.c.path));
    if dry_run {
        return Ok(FsOutput::Done {
            what: format!(
                "dry run: would revert {} file(s): {}{}",
                steps.len(),
                steps
                    .iter()
                    .map(|s| format!("{} ({})", s.c.path.display(), describe(&s.c.before)))
                    .collect::<Vec<_>>()
                    .join(", "),
                not_undoable_note(&cannot)
            ),
            change: None,
            undoable: true,
        });
    }
    plan_trash(t, &mut steps)?;
    let ugroup = format!("undo-{}", crate::workspace::snapshot::unique_id(group));
    let mut intents = Vec::with_capacity(steps.len());
    for s in &mut steps {
        // What is there now, backed up if it differs from what the command left (forced).
        if !same_state(&s.now.state, &s.c.after) {
            s.now = look(t, s.root, &s.rel, true)?;
        }
        intents.push(Change {
            tool: "undo".into(),
            path: s.c.path.clone(),
            before: s.now.state.clone(),
            after: s.c.before.clone(),
            undoes: Some(s.c.id),
            trash: s.trash.clone().or(s.trash_item().map(str::to_string)),
            group: Some(ugroup.clone()),
            dir_mode: (s.now.state == PathState::Dir).then_some(s.now.mode),
            ..Change::default()
        });
    }
    let begun = t.state.begin_many(intents)?;
    let acted = act(t, &steps);
    match settle(t, &steps, &begun, acted)? {
        FsOutput::Done {
            what,
            change,
            undoable,
        } => Ok(FsOutput::Done {
            what: format!("{what}{}", not_undoable_note(&cannot)),
            change,
            undoable,
        }),
        out => Ok(out),
    }
}

/// The changes of `group` that undo reverts (committed, not undone yet), and those of them it
/// cannot (their content before is not in the backup store, or their entry says why), which
/// it passes over and names. None that it can: refused, naming why, before anything is
/// touched (`--force` cannot help there).
#[allow(clippy::type_complexity)]
fn undoable_members(
    t: &mut Tools<'_>,
    group: &str,
) -> Result<(Vec<Change>, Vec<(PathBuf, String)>), BrokerError> {
    let members = t.state.group(group)?;
    let Some(first) = members.first().map(|c| c.id) else {
        return Err(usage(UndoProblem::AlreadyUndone {
            group: group.to_string(),
        }));
    };
    let (mut can, mut cannot) = (Vec::new(), Vec::new());
    for c in members {
        match not_undoable(t, &c)? {
            Some(why) => cannot.push((c.path.clone(), why)),
            None => can.push(c),
        }
    }
    if can.is_empty() {
        return Err(usage(UndoProblem::NotBackedUp {
            id: first,
            missing: cannot,
        }));
    }
    Ok((can, cannot))
}

/// Why undo cannot revert `c`, if it cannot: its entry says so, or its content before is not
/// in the backup store.
pub(super) fn not_undoable(t: &mut Tools<'_>, c: &Change) -> Result<Option<String>, BrokerError> {
    if let Some(why) = &c.not_undoable {
        return Ok(Some(why.clone()));
    }
    Ok(match &c.before {
        PathState::File { sha256, .. } if !t.state.has_backup(sha256)? => Some(missing_reason(c)),
        _ => None,
    })
}

/// What a group's undo left as it was, said after what it did.
fn not_undoable_note(cannot: &[(PathBuf, String)]) -> String {
    if cannot.is_empty() {
        return String::new();
    }
    format!(
        "; not undoable, left as they are: {}",
        cannot
            .iter()
            .map(|(p, why)| format!("{} ({why})", p.display()))
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// A change being undone whose path's directory is gone and that does not recreate it
/// (journals from before directories were recorded): the directories are recreated too,
/// each as a step undoing the same change.
fn add_missing_parents(t: &mut Tools<'_>, steps: &mut Vec<Step<'_>>) -> Result<(), BrokerError> {
    let mut dirs: HashSet<PathBuf> = steps
        .iter()
        .filter(|s| s.c.before == PathState::Dir)
        .map(|s| s.c.path.clone())
        .collect();
    let mut extra = Vec::new();
    for s in steps.iter() {
        if s.c.before == PathState::Absent {
            continue;
        }
        let mut rel = s.rel.clone();
        while rel.pop() && !rel.as_os_str().is_empty() {
            let abs = s.root.path.join(&rel);
            if dirs.contains(&abs) {
                break;
            }
            let now = look(t, s.root, &rel, false)?;
            if now.state == PathState::Dir {
                break;
            }
            if now.state != PathState::Absent {
                return Err(usage(UndoProblem::MustBeDirectory {
                    path: abs,
                    restore: s.c.path.clone(),
                    now: describe(&now.state),
                }));
            }
            dirs.insert(abs.clone());
            extra.push(Step {
                c: Change {
                    id: s.c.id,
                    path: abs,
                    before: PathState::Dir,
                    after: PathState::Absent,
                    ..Change::default()
                },
                root: s.root,
                rel: rel.clone(),
                now,
                trash: None,
            });
        }
    }
    steps.extend(extra);
    Ok(())
}

/// A directory in the way that holds entries the group does not remove (files the snapshot
/// ignores) goes to the trash whole: a trash name is reserved for it.
fn plan_trash(t: &mut Tools<'_>, steps: &mut [Step<'_>]) -> Result<(), BrokerError> {
    let cleared: HashSet<PathBuf> = steps
        .iter()
        .filter(|s| s.clears())
        .map(|s| s.c.path.clone())
        .collect();
    for s in steps.iter_mut() {
        if !(s.clears() && s.now.state == PathState::Dir) {
            continue;
        }
        let abs = s.abs();
        let Some((dir, name)) = parent(s.root, &s.rel)? else {
            continue;
        };
        let d = open_dir_nofollow(&dir, &name, &abs)?;
        let mut kept = false;
        for e in rustix::fs::Dir::read_from(&d).map_err(ioe("listing", &abs))? {
            let e = e.map_err(ioe("listing", &abs))?;
            let n = e.file_name().to_bytes();
            if n == b"." || n == b".." {
                continue;
            }
            let child = s.c.path.join(std::ffi::OsStr::from_bytes(n));
            if !cleared.contains(&child) {
                kept = true;
                break;
            }
        }
        if kept {
            s.trash = Some(t.state.trash_reserve(&abs)?);
        }
    }
    Ok(())
}

/// The three passes (see the module docs).
fn act(t: &mut Tools<'_>, steps: &[Step<'_>]) -> Result<(), BrokerError> {
    for s in steps.iter().rev().filter(|s| s.clears()) {
        clear(t, s)?;
    }
    for s in steps {
        restore(t, s)?;
    }
    for s in steps.iter().rev() {
        if s.c.before == PathState::Dir && s.now.state != PathState::Dir {
            // Recreated here (0700 while its contents came back): its recorded mode.
            let mode = s.c.dir_mode.unwrap_or(0o755);
            if s.trash_item().is_none() || s.c.dir_mode.is_some() {
                set_dir_mode(s, mode)?;
            }
        } else if let (PathState::Dir, Some(mode)) = (&s.c.before, s.c.dir_mode)
            && mode != s.now.mode
        {
            set_dir_mode(s, mode)?;
        }
    }
    Ok(())
}

fn need_parent(s: &Step<'_>) -> Result<(OwnedFd, OsString), BrokerError> {
    // Through a link: refused, with the reason (never followed).
    s.root.parent_of_nofollow(&s.rel).map_err(fs_err)
}

fn trash_dir(t: &Tools<'_>) -> Result<OwnedFd, BrokerError> {
    // not-ws: the trash, in the broker's own state directory
    rustix::fs::open(
        &t.trash_files,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(ioe("opening the trash", &t.trash_files))
}

/// Takes away what is in the way (itself, never what a link points to).
fn clear(t: &mut Tools<'_>, s: &Step<'_>) -> Result<(), BrokerError> {
    let abs = s.abs();
    let (dir, name) = need_parent(s)?;
    if let Some(n) = &s.trash {
        let tdir = trash_dir(t)?;
        rustix::fs::renameat_with(&dir, &name, &tdir, n, rustix::fs::RenameFlags::NOREPLACE)
            .map_err(ioe("moving to the trash", &abs))?;
        let _ = rustix::fs::fsync(&tdir);
    } else if s.now.state == PathState::Dir {
        rustix::fs::unlinkat(&dir, &name, AtFlags::REMOVEDIR).map_err(ioe("removing", &abs))?;
    } else {
        rustix::fs::unlinkat(&dir, &name, AtFlags::empty()).map_err(ioe("removing", &abs))?;
    }
    rustix::fs::fsync(&dir).map_err(ioe("syncing the directory of", &abs))
}

/// Brings back what was there.
fn restore(t: &mut Tools<'_>, s: &Step<'_>) -> Result<(), BrokerError> {
    let abs = s.abs();
    match &s.c.before {
        PathState::Absent => Ok(()),
        PathState::Dir if s.now.state == PathState::Dir => Ok(()),
        PathState::Dir => {
            let (dir, name) = need_parent(s)?;
            if let Some(n) = s.trash_item() {
                let tdir = trash_dir(t)?;
                rustix::fs::renameat_with(
                    &tdir,
                    n,
                    &dir,
                    &name,
                    rustix::fs::RenameFlags::NOREPLACE,
                )
                .map_err(ioe("restoring from the trash", &abs))?;
                t.state.trash_forget(n);
            } else {
                rustix::fs::mkdirat(&dir, &name, Mode::from_raw_mode(0o700))
                    .map_err(ioe("creating", &abs))?;
            }
            rustix::fs::fsync(&dir).map_err(ioe("syncing the directory of", &abs))
        }
        PathState::File { sha256, mode, .. } => {
            let data = t.state.read_backup(sha256)?;
            // The owner of the file it replaces is kept.
            let owner = matches!(s.now.state, PathState::File { .. }).then_some(s.now.owner);
            if let Some(fix) = put(s, &data, *mode, owner)? {
                t.owner_fixes.push(fix);
            }
            Ok(())
        }
        PathState::Link { target } => put_link(s, target),
    }
}

/// A temporary name next to `name` (`.NAME.gateway-tmp-PID-N`: crash recovery removes
/// those of dead writers), created by `make`.
fn temp<T>(
    name: &OsString,
    abs: &Path,
    mut make: impl FnMut(&OsString) -> Result<T, rustix::io::Errno>,
) -> Result<(OsString, T), BrokerError> {
    for i in 0..100u32 {
        let mut n = OsString::from(".");
        n.push(name);
        n.push(format!(".gateway-tmp-{}-{i}", std::process::id()));
        match make(&n) {
            Ok(v) => return Ok((n, v)),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(ioe("creating a temporary file next to", abs)(e)),
        }
    }
    Err(usage(PathProblem::NoTempName {
        path: abs.to_path_buf(),
    }))
}

/// Writes a file at the name (a temporary file renamed over it: a file or link there is
/// replaced, never written through), with `mode` and, if given, that owner.
fn put(
    s: &Step<'_>,
    data: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<Option<OwnerFix>, BrokerError> {
    let abs = s.abs();
    let (dir, name) = need_parent(s)?;
    let (tmp, fd) = temp(&name, &abs, |n| {
        rustix::fs::openat(
            &dir,
            n,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
    })?;
    let done = (|| {
        let f = std::fs::File::from(fd);
        // Runs of zeros become holes again: a sparse file comes back sparse.
        journal::blob::write_sparse(&f, data).map_err(|source| BrokerError::Io {
            what: format!("writing {}", abs.display()),
            source,
        })?;
        let mut fix = None;
        if let Some((uid, gid)) = owner {
            let kept = rustix::fs::fchown(
                &f,
                Some(rustix::fs::Uid::from_raw(uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            );
            if kept.is_err() {
                let st = rustix::fs::fstat(&f).map_err(ioe("reading", &abs))?;
                fix = Some(OwnerFix {
                    path: abs.clone(),
                    dev: st.st_dev,
                    ino: st.st_ino,
                    uid,
                    gid,
                });
            }
        }
        rustix::fs::fchmod(&f, Mode::from_raw_mode(mode))
            .map_err(ioe("setting the mode of", &abs))?;
        rustix::fs::fsync(&f).map_err(ioe("syncing", &abs))?;
        rustix::fs::renameat(&dir, &tmp, &dir, &name).map_err(ioe("renaming over", &abs))?;
        rustix::fs::fsync(&dir).map_err(ioe("syncing the directory of", &abs))?;
        Ok(fix)
    })();
    if done.is_err() {
        let _ = rustix::fs::unlinkat(&dir, &tmp, AtFlags::empty());
    }
    done
}

/// Makes the name a symbolic link to `target` (created aside, renamed over the name).
fn put_link(s: &Step<'_>, target: &str) -> Result<(), BrokerError> {
    let abs = s.abs();
    let (dir, name) = need_parent(s)?;
    let (tmp, ()) = temp(&name, &abs, |n| rustix::fs::symlinkat(target, &dir, n))?;
    let done = rustix::fs::renameat(&dir, &tmp, &dir, &name)
        .map_err(ioe("renaming over", &abs))
        .and_then(|()| rustix::fs::fsync(&dir).map_err(ioe("syncing the directory of", &abs)));
    if done.is_err() {
        let _ = rustix::fs::unlinkat(&dir, &tmp, AtFlags::empty());
    }
    done
}

/// Opens the directory `name` of `dir` without following a link (`abs`: for messages).
fn open_dir_nofollow(
    dir: &impl rustix::fd::AsFd,
    name: &std::ffi::OsStr,
    abs: &Path,
) -> Result<rustix::fd::OwnedFd, BrokerError> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(ioe("opening", abs))
}

fn set_dir_mode(s: &Step<'_>, mode: u32) -> Result<(), BrokerError> {
    let abs = s.abs();
    let (dir, name) = need_parent(s)?;
    let d = open_dir_nofollow(&dir, &name, &abs)?;
    rustix::fs::fchmod(&d, Mode::from_raw_mode(mode)).map_err(ioe("setting the mode of", &abs))
}

/// Commits the steps done and aborts the others: on success all; after a failure, each by
/// what is at its path now (what the change made: done; else not).
fn settle(
    t: &mut Tools<'_>,
    steps: &[Step<'_>],
    begun: &[Change],
    acted: Result<(), BrokerError>,
) -> Result<FsOutput, BrokerError> {
    let last = begun.last().map(|c| c.id);
    let err = match acted {
        Ok(()) => {
            let ids: Vec<u64> = begun.iter().map(|c| c.id).collect();
            t.state.commit_many(&ids)?;
            // A directory the command made that holds what the undo does not remove (what
            // the snapshot ignores, or what appeared since) went to the trash whole: said,
            // with how to get it back.
            let trashed: Vec<String> = steps
                .iter()
                .filter_map(|s| {
                    s.trash.as_ref().map(|n| {
                        format!(
                            "; {} held entries the snapshot did not record (ignored, or made since the command), so it went to the trash whole (`gateway trash restore {}` brings it back)",
                            s.c.path.display(),
                            crate::shown::arg_shown(n)
                        )
                    })
                })
                .collect();
            return Ok(FsOutput::Done {
                what: format!(
                    "reverted {} file(s) the command changed{}",
                    steps.len(),
                    trashed.concat()
                ),
                change: last,
                undoable: true,
            });
        }
        Err(e) => e,
    };
    let mut done = Vec::new();
    for (s, c) in steps.iter().zip(begun) {
        let now = look(t, s.root, &s.rel, false).map(|n| n.state);
        if now.as_ref().is_ok_and(|n| same_state(n, &c.after)) {
            done.push(c.id);
        } else {
            t.state.abort(c.id);
            if let Some(n) = &s.trash
                // not-ws: the trash, in the broker's own state directory
                && std::fs::symlink_metadata(t.trash_files.join(n)).is_err()
            {
                t.state.trash_forget(n);
            }
        }
    }
    t.state.commit_many(&done)?;
    Err(usage(UndoProblem::Stopped {
        cause: err.to_string(),
        reverted: done.len(),
        of: steps.len(),
    }))
}
