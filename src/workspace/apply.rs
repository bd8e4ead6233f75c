//! Applying a captured upper layer (`workspace::capture`) to the workspace, each path
//! journalled on its own.
//!
//! Over 1,000 lines: the plan, the backups, the journal and the acts on each path are one
//! sequence under one lock, with their unit tests; split, each part would take the others'
//! state as arguments.
//!
//! The plan is made from the upper layer and the workspace as it is now (the lower layer,
//! which the run could not write): for each entry, what stands in the workspace (the change's
//! `before`) and what the run left (its `after`). Then, in order: every content the undo
//! needs is put in the backup store; all intents are written in one append (durable before
//! anything changes); each path is changed beneath the workspace's descriptor (a file through
//! a temporary name and a rename: a file with other names is never written through, as the
//! run itself did not write them, and one of them may lie outside the workspace); one
//! `syncfs`; the commits in one append. A path that cannot be backed up (over
//! `[undo] snapshot_max_file`, the store full) is still applied and journalled as not
//! undoable, with why. A path that cannot be applied stays in the upper layer (nothing is
//! lost) and the layer is kept for `gateway apply` or `gateway discard`; the others land.
//!
//! Ignore rules are read from the workspace, never from the upper layer: an ignore file the
//! run wrote cannot hide what it did. Paths that `.gitignore`, `.ignore` or
//! `.git/info/exclude` exclude (and everything in a `.git` directory) are applied but not
//! journalled, as the walk never journalled them.

use super::capture::{Entry, Layer, Up};
use super::wsfs::{self, Kind};
use crate::broker::BrokerError;
use crate::journal::{self, Change, PathState};
use rustix::fs::{AtFlags, Mode, OFlags, Timespec, Timestamps};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What applying a layer did.
#[derive(Debug, Default)]
pub struct Applied {
    /// Journalled changes: (path, `created` | `changed` | `deleted`, journal id).
    pub changes: Vec<(PathBuf, &'static str, u64)>,
    /// Paths applied but not undoable, and why.
    pub not_undoable: Vec<(PathBuf, String)>,
    /// Paths not applied (still in the layer), and why.
    pub not_applied: Vec<(PathBuf, String)>,
    /// Paths changed in all (journalled or not).
    pub applied: usize,
    /// Old backups expired to make room.
    pub expired: usize,
    /// Paths another call changed while the run ran, which this apply overwrote: (path,
    /// that change's journal id).
    pub overwrote: Vec<(PathBuf, u64)>,
    /// Paths (relative) of the layer the broker keeps out of the workspace ([`Apply::quarantine`]):
    /// not applied, not held (their entries are moved out of the layer by the caller), with
    /// why; the flag: the run deleted the path (a whiteout; the workspace keeps it).
    pub quarantined: Vec<(PathBuf, String, bool)>,
    /// Directories named `.git` the apply made (relative): repositories the run created.
    pub new_git_dirs: Vec<PathBuf>,
    /// The first and last journal id of its changes (None: nothing journalled).
    pub journalled: Option<(u64, u64)>,
    /// Deletions the run made that are not applied (a repository's `.git` directory), with
    /// why: the workspace keeps them.
    pub kept: Vec<(PathBuf, String)>,
}

/// A rule on a layer's path (relative), what the run left there, and whether the workspace
/// has something there now: why it is held or kept out, if it is.
pub type PathRule<'a> = &'a dyn Fn(&Path, &Up, bool) -> Option<String>;

/// How to apply a layer.
pub struct Apply<'a> {
    /// The broker's state directory.
    pub state_dir: &'a Path,
    /// The layer.
    pub layer: &'a Layer,
    /// The journal group of its changes.
    pub group: &'a str,
    /// The tool that made them (`exec`, `apply`).
    pub tool: &'a str,
    /// Largest content backed up (`[undo] snapshot_max_file`).
    pub max_file: u64,
    /// The backup store's limits.
    pub quota: journal::quota::Limits,
    /// The caller's filesystem identity (a daemon's client): the workspace is changed as it.
    pub who: Option<&'a wsfs::Identity>,
    /// Paths (relative) the broker holds back (git's places): not applied, with why; the
    /// flag: the workspace has something at that path now.
    pub hold: PathRule<'a>,
    /// Paths (relative) of a run's own layer that must not land where git, a shell or an
    /// editor would obey them (git's places, the policy's protected paths: `broker::places`),
    /// with why: kept out of the workspace and reported ([`Applied::quarantined`]). None for a
    /// held change set, whose `hold` keeps such paths in the layer.
    pub quarantine: Option<PathRule<'a>>,
    /// Journalled, with backups (`[undo] snapshot`); else applied plainly: a run the policy
    /// does not snapshot still writes through its layer, so that what it wrote is known
    /// without a walk of the workspace.
    pub record: bool,
    /// When the run started (seconds since the epoch), and the journal's last change id then
    /// (when known): changes journalled after it by other calls (else since that second), to
    /// the paths this apply changes, are said to be overwritten.
    pub since: (u64, Option<u64>),
}

/// Paths of a layer the broker never applies silently: git's exclude file in any run (a `*`
/// there would keep every later run's changes out of the journal), and, from a held change
/// set (`gateway apply`, where no quarantine follows), everything in a `.git` and every
/// path the policy protects (`protected`: relative patterns, `*` and `?` per component).
/// Held back, with why; the rest lands.
pub fn git_place(
    rel: &Path,
    protected: &[String],
    held_set: bool,
    existed: bool,
) -> Option<String> {
    let comps: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let is_git = |c: &&std::ffi::OsStr| *c == ".git";
    // (A new repository's own exclude file, which `git init` writes, lands with it.)
    if existed
        && let Some(i) = comps.iter().position(is_git)
        && comps[i + 1..]
            == [
                std::ffi::OsStr::new("info"),
                std::ffi::OsStr::new("exclude"),
            ]
    {
        return Some(
            "git's exclude file is not applied from a run: it would keep later changes out of the journal; write it yourself if it is meant"
                .into(),
        );
    }
    if !held_set {
        return None;
    }
    if comps.iter().any(is_git) {
        return Some("inside a `.git`: not applied from a held change set (git's config, hooks and objects are not landed unseen; run the git command again)".into());
    }
    let names: Vec<String> = comps
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    for p in protected
        .iter()
        .filter(|p| !p.starts_with('/') && !p.starts_with('~'))
    {
        let pat: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
        // A protected name anywhere (a nested repository's, a subdirectory's `.envrc`), and
        // what lies below it.
        let hit = (0..names.len()).any(|start| {
            names.len() - start >= pat.len()
                && pat
                    .iter()
                    .zip(&names[start..])
                    .all(|(g, n)| crate::policy::wildcard(g, n))
        });
        if hit {
            return Some(format!(
                "protected by the policy (`{p}`): not applied from a held change set"
            ));
        }
    }
    None
}

/// What one step does to the workspace.
#[derive(Clone, Debug)]
enum Act {
    Delete,
    MakeDir(u32),
    ChmodDir(u32),
    Write {
        mode: u32,
        times: [(i64, i64); 2],
        linked: Option<(u64, u64)>,
    },
    Link(PathBuf),
    Fifo(u32),
}

/// One step of the plan.
#[derive(Debug)]
struct Op {
    rel: PathBuf,
    act: Act,
    before: PathState,
    dir_mode: Option<u32>,
    after: PathState,
    /// Journalled (not ignored).
    journal: bool,
    /// Why it cannot be undone.
    not_undoable: Option<String>,
    /// Said in the report although not journalled (a FIFO: applied, never undone).
    note: Option<String>,
    /// The content to write, when it was read whole (within the backup bound).
    data: Option<Vec<u8>>,
}

/// Applies `a.layer` to its workspace.
pub fn apply(a: &Apply<'_>) -> Result<Applied, BrokerError> {
    let ws = &a.layer.workspace;
    let tree = wsfs::as_identity(a.who, || wsfs::Tree::open(ws))
        .and_then(|r| r)
        .map_err(|e| io_err(format!("opening the workspace {}", ws.display()), e))?;
    let upper_path = a.layer.upper();
    let upper = wsfs::Tree::open(&upper_path).map_err(|e| {
        io_err(
            format!("opening the capture layer {}", upper_path.display()),
            e,
        )
    })?;
    let entries = super::capture::entries(&upper_path).map_err(|e| {
        io_err(
            format!("listing the capture layer {}", upper_path.display()),
            e,
        )
    })?;
    let mut out = Applied::default();
    // The journal's lock for the whole apply: another call's apply or file tool changing
    // these paths between this plan's `before` and its change would be recorded wrong.
    let lock = journal::lock(a.state_dir).map_err(j_err)?;
    let mut planner = Planner {
        a,
        tree: &tree,
        upper: &upper,
        ignores: HashMap::new(),
        ops: Vec::new(),
        chmods: Vec::new(),
        held: Vec::new(),
        quarantined: Vec::new(),
        new_git_dirs: Vec::new(),
        kept: Vec::new(),
    };
    for e in &entries {
        planner.entry(e);
    }
    let Planner {
        mut ops,
        chmods,
        held,
        quarantined,
        new_git_dirs,
        kept,
        ..
    } = planner;
    out.kept = kept.into_iter().map(|(p, why)| (ws.join(p), why)).collect();
    ops.extend(chmods.into_iter().rev());
    out.not_applied.extend(held);
    out.quarantined = quarantined;
    out.new_git_dirs = new_git_dirs;
    if a.record {
        let mut budget = journal::quota::Budget::for_workspace(a.state_dir, ws, a.quota);
        for op in &mut ops {
            back_up(a, &tree, &upper, &mut budget, op);
        }
        out.expired = budget.expired.len();
        drop(budget);
        journal::sync_store(a.state_dir).map_err(j_err)?;
    } else {
        for op in &mut ops {
            op.journal = false;
            op.not_undoable = None;
            op.note = None;
        }
    }
    let intents: Vec<Change> = ops
        .iter()
        .filter(|o| o.journal)
        .map(|o| Change {
            tool: a.tool.into(),
            path: ws.join(&o.rel),
            before: o.before.clone(),
            after: o.after.clone(),
            dir_mode: o.dir_mode,
            not_backed_up: o.not_undoable.clone(),
            group: Some(a.group.to_string()),
            workspace: Some(ws.clone()),
            uid: a.who.map(|w| w.uid),
            ..Change::default()
        })
        .collect();
    let begun = if a.record {
        out.overwrote = overwritten(a, &ops);
        journal::begin_many(a.state_dir, &lock, intents).map_err(j_err)?
    } else {
        Vec::new()
    };
    out.journalled = begun.first().zip(begun.last()).map(|(f, l)| (f.id, l.id));
    let (done, failed) = perform_all(a, (&tree, &upper), &ops, &begun, &mut out);
    // One sync of the workspace's file system: the changes are on disk before their commits
    // (a crash before it leaves them pending, and the layer still holds them).
    if out.applied > 0 {
        let _ = rustix::fs::syncfs(tree.fd());
    }
    if done.is_empty() && failed.is_empty() {
        return Ok(out);
    }
    journal::commit_many(a.state_dir, &done).map_err(j_err)?;
    for id in failed {
        journal::abort(a.state_dir, id).map_err(j_err)?;
    }
    drop(lock);
    Ok(out)
}

/// Changes each path of `ops` (`begun`: the intents of those journalled, in order): the
/// ids done and those that failed.
fn perform_all(
    a: &Apply<'_>,
    (tree, upper): (&wsfs::Tree, &wsfs::Tree),
    ops: &[Op],
    begun: &[Change],
    out: &mut Applied,
) -> (Vec<u64>, Vec<u64>) {
    let ws = &a.layer.workspace;
    let mut ids = begun.iter().map(|c| c.id);
    let mut done = Vec::new();
    let mut failed = Vec::new();
    let mut first_name: HashMap<(u64, u64), PathBuf> = HashMap::new();
    for op in ops {
        let id = if op.journal { ids.next() } else { None };
        let r = perform(a, tree, upper, op, &mut first_name);
        match r {
            Ok(()) => {
                out.applied += 1;
                if let Some(id) = id {
                    done.push(id);
                    out.changes.push((ws.join(&op.rel), kind_of(op), id));
                }
                if let Some(why) = op.not_undoable.as_ref().or(op.note.as_ref()) {
                    out.not_undoable.push((ws.join(&op.rel), why.clone()));
                }
            }
            Err(e) => {
                failed.extend(id);
                out.not_applied
                    .push((ws.join(&op.rel), crate::shown::os_error(&e)));
            }
        }
    }
    (done, failed)
}

/// The changes other calls journalled since the run started to the paths `ops` change: the
/// run's own view of them was older, and applying it overwrites them.
fn overwritten(a: &Apply<'_>, ops: &[Op]) -> Vec<(PathBuf, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let ws = &a.layer.workspace;
    // Read backwards from the journal's end to the run's start (its index), not whole.
    let wsh = journal::index::hash(ws.as_os_str().as_bytes());
    let (since, since_id) = a.since;
    let read = match since_id {
        Some(id) => journal::index::committed_after(a.state_dir, id, wsh),
        None => journal::index::committed_since(a.state_dir, since, wsh),
    };
    let all = match read {
        Some(v) => v,
        None => match journal::changes(a.state_dir) {
            Ok(all) => all
                .into_iter()
                .filter(|(_, p)| *p == journal::Phase::Committed)
                .map(|(c, _)| c)
                .collect(),
            Err(_) => return Vec::new(),
        },
    };
    let mut latest: HashMap<PathBuf, u64> = HashMap::new();
    for c in all {
        let after = since_id.map_or(c.time >= since, |id| c.id > id);
        if after && c.group.as_deref() != Some(a.group) && c.path.starts_with(ws) {
            latest.insert(c.path, c.id);
        }
    }
    if latest.is_empty() {
        return Vec::new();
    }
    ops.iter()
        .filter_map(|o| {
            let p = ws.join(&o.rel);
            latest.get(&p).map(|id| (p, *id))
        })
        .collect()
}

fn kind_of(op: &Op) -> &'static str {
    match (&op.before, &op.after) {
        (PathState::Absent, _) => "created",
        (_, PathState::Absent) => "deleted",
        _ => "changed",
    }
}

fn io_err(what: String, e: std::io::Error) -> BrokerError {
    BrokerError::Io { what, source: e }
}

fn j_err(e: journal::JournalError) -> BrokerError {
    BrokerError::Io {
        what: "the undo journal".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Builds the plan, entry by entry.
struct Planner<'p, 'a> {
    a: &'p Apply<'a>,
    tree: &'p wsfs::Tree,
    upper: &'p wsfs::Tree,
    /// Each workspace directory's ignore rules (None: none, or unreadable).
    ignores: HashMap<PathBuf, Option<ignore::gitignore::Gitignore>>,
    ops: Vec<Op>,
    /// Directory modes, set after everything else (a run that made a directory read-only
    /// after writing in it: its contents first), deepest first.
    chmods: Vec<Op>,
    held: Vec<(PathBuf, String)>,
    /// Quarantined paths (their contents in the layer go with them).
    quarantined: Vec<(PathBuf, String, bool)>,
    new_git_dirs: Vec<PathBuf>,
    /// Deletions not applied (a repository's `.git`), with why.
    kept: Vec<(PathBuf, String)>,
}

impl Planner<'_, '_> {
    /// What stands in the workspace at `rel` (as the caller).
    fn lower(&self, rel: &Path) -> Option<Kind> {
        wsfs::as_identity(self.a.who, || self.tree.kind(rel))
            .ok()
            .and_then(Result::ok)
            .flatten()
    }

    fn entry(&mut self, e: &Entry) {
        let rel = &e.rel;
        // Below a path held back or not applied: held with it.
        if let Some((p, _)) = self
            .held
            .iter()
            .find(|(p, _)| rel.starts_with(p) && p != rel)
        {
            let p = p.clone();
            self.held.push((
                rel.clone(),
                format!("inside {}, which is held", p.display()),
            ));
            return;
        }
        // Below a quarantined directory: moved away with it.
        if self
            .quarantined
            .iter()
            .any(|(p, _, _)| rel.starts_with(p) && p != rel)
        {
            return;
        }
        let lower = self.lower(rel);
        if let Some(why) = (self.a.hold)(rel, &e.up, lower.is_some()) {
            self.held.push((rel.clone(), why));
            return;
        }
        if let Some(q) = self.a.quarantine
            && let Some(why) = q(rel, &e.up, lower.is_some())
        {
            let deleted = matches!(e.up, Up::Whiteout);
            self.quarantined.push((rel.clone(), why, deleted));
            return;
        }
        if rel.file_name() == Some(std::ffi::OsStr::new(".git"))
            && matches!(e.up, Up::Dir { .. })
            && !matches!(lower, Some(Kind::Dir { .. }))
        {
            self.new_git_dirs.push(rel.clone());
        }
        match &e.up {
            Up::Whiteout => {
                if lower.is_some() {
                    self.delete_tree(rel, lower);
                }
            }
            Up::Dir { mode, opaque } => match lower {
                Some(Kind::Dir { mode: m }) => {
                    if *opaque {
                        self.delete_hidden(rel);
                    }
                    if m != *mode {
                        self.chmod_later(rel, *mode);
                    }
                }
                other => {
                    if other.is_some() {
                        self.delete_tree(rel, other);
                    }
                    self.push(rel, Act::MakeDir(*mode), None);
                    self.chmod_later(rel, *mode);
                }
            },
            Up::File {
                mode,
                times,
                linked,
                ..
            } => {
                let Ok(lower) = self.clear_dir(rel, lower) else {
                    return;
                };
                // Replaced by name, never written through: a file with other names (hard links,
                // some outside the workspace: a package store's) keeps them as they were, as the
                // run itself saw them (the overlay copies a file up before it is written).
                let act = Act::Write {
                    mode: *mode & 0o1777,
                    times: *times,
                    linked: *linked,
                };
                self.push(rel, act, lower);
            }
            Up::Link(t) => {
                let Ok(lower) = self.clear_dir(rel, lower) else {
                    return;
                };
                self.push(rel, Act::Link(t.clone()), lower);
            }
            Up::Fifo { mode } => {
                let Ok(mut lower) = self.clear_dir(rel, lower) else {
                    return;
                };
                // What the FIFO replaces is deleted first, journalled (its content backed up).
                if matches!(lower, Some(Kind::File { .. } | Kind::Link(_))) {
                    self.push(rel, Act::Delete, lower.take());
                }
                self.push(rel, Act::Fifo(*mode & 0o1777), lower);
            }
            Up::Other => self.held.push((
                rel.clone(),
                "a socket or device: not applied (it means nothing outside the run)".into(),
            )),
        }
    }

    /// Sets a directory's mode once everything else is applied (not journalled: undo does
    /// not restore directory modes).
    fn chmod_later(&mut self, rel: &Path, mode: u32) {
        self.chmods.push(Op {
            rel: rel.to_path_buf(),
            act: Act::ChmodDir(mode),
            before: PathState::Dir,
            dir_mode: None,
            after: PathState::Dir,
            journal: false,
            not_undoable: None,
            note: None,
            data: None,
        });
    }

    /// A directory where the run left something else: deleted first. Err: it holds a
    /// repository's `.git`, which is kept (`delete_tree`): what the run left there is held.
    fn clear_dir(&mut self, rel: &Path, lower: Option<Kind>) -> Result<Option<Kind>, ()> {
        if matches!(lower, Some(Kind::Dir { .. })) {
            if !self.delete_tree(rel, lower) {
                self.held.push((
                    rel.to_path_buf(),
                    "it replaces a directory holding a repository's `.git`, which is kept".into(),
                ));
                return Err(());
            }
            return Ok(None);
        }
        Ok(lower)
    }

    /// Deletes what the workspace has at `rel`: a directory's contents first. A repository's
    /// `.git` directory is never deleted by an apply (what is in it is not journalled, so its
    /// history could not come back with undo): kept, with why, and the directories above it
    /// with it. Whether `rel` is deleted.
    fn delete_tree(&mut self, rel: &Path, lower: Option<Kind>) -> bool {
        // What makes a `.git` a repository and holds its history: kept as the `.git` is (a
        // run that deleted everything it could in a `.git` whose config is read-only to it
        // would leave a directory git skips, and git in it would use the repository above).
        const HISTORY: [&str; 5] = ["HEAD", "objects", "refs", "packed-refs", "logs"];
        if lower.is_some()
            && rel.parent().and_then(Path::file_name) == Some(std::ffi::OsStr::new(".git"))
            && rel
                .file_name()
                .is_some_and(|n| HISTORY.iter().any(|h| n == *h))
        {
            self.kept.push((
                rel.to_path_buf(),
                "a repository's history: the command deleted it, and the workspace keeps it (what is in a `.git` is not journalled, so undo could not bring it back)".into(),
            ));
            return false;
        }
        if let Some(Kind::Dir { .. }) = lower {
            if rel.file_name() == Some(std::ffi::OsStr::new(".git")) {
                self.kept.push((
                    rel.to_path_buf(),
                    "a repository's `.git` directory: the command deleted it, and the workspace keeps it (its history is not journalled, so undo could not bring it back); delete it yourself if it is meant".into(),
                ));
                return false;
            }
            if !self.delete_hidden(rel) {
                return false;
            }
        }
        self.push(rel, Act::Delete, lower);
        true
    }

    /// An opaque directory (or one deleted): every entry the workspace has in it that the
    /// upper layer does not, deleted (those it has are its own entries). Whether all were.
    fn delete_hidden(&mut self, rel: &Path) -> bool {
        let listed = wsfs::as_identity(self.a.who, || self.tree.list(rel, usize::MAX))
            .ok()
            .and_then(Result::ok);
        let Some(listed) = listed else {
            self.held.push((
                rel.to_path_buf(),
                "its contents in the workspace could not be listed".into(),
            ));
            return false;
        };
        let mut all = true;
        for (name, kind) in listed {
            let child = rel.join(&name);
            if self.in_upper(&child) {
                continue;
            }
            all &= self.delete_tree(&child, Some(kind));
        }
        all
    }

    fn in_upper(&self, rel: &Path) -> bool {
        self.upper.kind(rel).is_ok_and(|k| k.is_some())
    }

    fn push(&mut self, rel: &Path, act: Act, lower: Option<Kind>) {
        let (before, dir_mode) = match &lower {
            None | Some(Kind::Special) => (PathState::Absent, None),
            Some(Kind::Dir { mode }) => (PathState::Dir, Some(*mode)),
            Some(Kind::Link(t)) => (
                PathState::Link {
                    target: t.to_string_lossy().into_owned(),
                },
                None,
            ),
            Some(Kind::File { size, mode, .. }) => (
                PathState::File {
                    sha256: String::new(),
                    mode: *mode,
                    size: *size,
                },
                None,
            ),
        };
        let after = match &act {
            Act::Delete => PathState::Absent,
            Act::MakeDir(_) | Act::ChmodDir(_) => PathState::Dir,
            Act::Link(t) => PathState::Link {
                target: t.to_string_lossy().into_owned(),
            },
            Act::Write { mode, .. } => PathState::File {
                sha256: String::new(),
                mode: *mode,
                size: 0,
            },
            Act::Fifo(_) => PathState::Absent,
        };
        let ignored = self.ignored(rel, matches!(act, Act::MakeDir(_) | Act::ChmodDir(_)));
        // A FIFO is applied, never journalled: an undo could neither remove nor recreate it
        // as it was, and would stop the rest of its group.
        let fifo = matches!(act, Act::Fifo(_)) || matches!(lower, Some(Kind::Special));
        let journal = !ignored && !fifo;
        let note = (fifo && !ignored).then(|| {
            "a FIFO, socket or device: applied, but the journal does not keep them".to_string()
        });
        let not_undoable = match (&act, &lower) {
            (_, Some(Kind::Special)) => {
                Some("it replaced a FIFO, socket or device, which the journal does not keep".into())
            }
            (Act::Link(t), _) | (_, Some(Kind::Link(t))) if t.to_str().is_none() => {
                Some("a symbolic link whose target is not UTF-8".into())
            }
            _ => None,
        };
        let mut op = Op {
            rel: rel.to_path_buf(),
            act,
            before,
            dir_mode,
            after,
            journal,
            not_undoable,
            note,
            data: None,
        };
        // A type changed (a file where a directory was, or the other way): one journal entry
        // from what was there to what the run left, as the walk records it, so that one undo
        // reverts it (two entries for one path, the deletion's `after` no longer there, made
        // undo refuse without `--force`). The deletion before it still acts, unjournalled.
        if op.journal
            && op.before == PathState::Absent
            && let Some(prev) = self.ops.last_mut()
            && prev.rel == op.rel
            && prev.journal
            && matches!(prev.act, Act::Delete)
        {
            op.before = prev.before.clone();
            op.dir_mode = prev.dir_mode;
            op.not_undoable = op.not_undoable.or(prev.not_undoable.take());
            prev.journal = false;
        }
        self.ops.push(op);
    }

    /// Excluded from undo: in a `.git` directory, or ignored by the workspace's own rules
    /// (a directory ignored takes what is below it along).
    fn ignored(&mut self, rel: &Path, is_dir: bool) -> bool {
        if rel.components().any(|c| c.as_os_str() == ".git") {
            return true;
        }
        let ws = self.a.layer.workspace.clone();
        let parents: Vec<PathBuf> = rel
            .ancestors()
            .skip(1)
            .filter(|d| !d.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .collect();
        if parents
            .iter()
            .any(|d| self.ignored_one(d, true, &ws.join(d)))
        {
            return true;
        }
        self.ignored_one(rel, is_dir, &ws.join(rel))
    }

    /// Whether the nearest directory's rules that say something about `rel` ignore it.
    fn ignored_one(&mut self, rel: &Path, is_dir: bool, abs: &Path) -> bool {
        for d in rel.ancestors().skip(1) {
            let d = d.to_path_buf();
            if !self.ignores.contains_key(&d) {
                let rules = self.rules_of(&d);
                self.ignores.insert(d.clone(), rules);
            }
            if let Some(Some(g)) = self.ignores.get(&d) {
                let m = g.matched(abs, is_dir);
                if !m.is_none() {
                    return m.is_ignore();
                }
            }
        }
        false
    }

    fn rules_of(&self, d: &Path) -> Option<ignore::gitignore::Gitignore> {
        let dir = wsfs::as_identity(self.a.who, || self.tree.open_dir(d))
            .ok()
            .and_then(Result::ok)?;
        let abs = self.a.layer.workspace.join(d);
        wsfs::dir_rules(&dir, &abs, d.as_os_str().is_empty())
            .ok()
            .flatten()
    }
}

/// Puts the contents `op`'s undo needs in the backup store: what the workspace has (within
/// the bound) and what the run left; fills in their digests. What cannot be stored makes the
/// change not undoable, with why.
fn back_up(
    a: &Apply<'_>,
    tree: &wsfs::Tree,
    upper: &wsfs::Tree,
    budget: &mut journal::quota::Budget,
    op: &mut Op,
) {
    let mut why: Vec<String> = op.not_undoable.take().into_iter().collect();
    if let PathState::File { sha256, size, .. } = &mut op.before {
        let data = if *size > a.max_file {
            why.push(format!(
                "its content before the run ({size} bytes) is over [undo] snapshot_max_file ({} bytes)",
                a.max_file
            ));
            None
        } else {
            let d = tree.read_as(a.who, &op.rel, a.max_file);
            if d.is_none() {
                why.push("its content before the run could not be read".into());
            }
            d
        };
        match data {
            Some(d) => {
                *sha256 = store(budget, &d, op.journal, &mut why, "before");
            }
            None => *sha256 = "unknown".into(),
        }
    }
    if let Act::Write { mode, .. } = &op.act
        && mode & 0o400 == 0
    {
        why.push(format!(
            "the run left it unreadable to its owner (mode {mode:03o}): `gateway undo` cannot check it"
        ));
    }
    if let (Act::Write { .. }, PathState::File { sha256, size, .. }) = (&op.act, &mut op.after) {
        match read_upper(upper, &op.rel, a.max_file) {
            Ok((data, digest, n)) => {
                *size = n;
                *sha256 = digest;
                if let Some(d) = &data {
                    store(budget, d, op.journal, &mut why, "after");
                } else if op.journal {
                    why.push(format!(
                        "its content after the run ({n} bytes) is over [undo] snapshot_max_file ({} bytes)",
                        a.max_file
                    ));
                }
                op.data = data;
            }
            Err(e) => why.push(format!(
                "its content after the run could not be read: {}",
                crate::shown::os_error(&e)
            )),
        }
    }
    // Only its times or nothing changed (a copy-up by `touch`, or content written back as it
    // was): applied, nothing to undo.
    if op.before == op.after && !matches!(op.after, PathState::Absent | PathState::Dir) {
        op.journal = false;
    }
    if op.journal && !why.is_empty() {
        op.not_undoable = Some(why.join("; "));
    } else if !op.journal {
        op.not_undoable = None;
    }
}

/// Stores `d` (when the change is journalled) and returns its digest.
fn store(
    budget: &mut journal::quota::Budget,
    d: &[u8],
    journal: bool,
    why: &mut Vec<String>,
    which: &str,
) -> String {
    if !journal {
        return journal::sha256_hex(d);
    }
    match budget.store(d, false) {
        Ok(journal::quota::Stored::Kept(id)) => id,
        Ok(journal::quota::Stored::NotBackedUp { id, reason }) => {
            why.push(format!(
                "its content {which} the run was not backed up: {reason}"
            ));
            id
        }
        Err(e) => {
            why.push(format!(
                "its content {which} the run was not backed up: {e}"
            ));
            journal::sha256_hex(d)
        }
    }
}

/// The upper layer's file `rel`: its content when within `max`, its digest and size.
fn read_upper(
    upper: &wsfs::Tree,
    rel: &Path,
    max: u64,
) -> std::io::Result<(Option<Vec<u8>>, String, u64)> {
    use sha2::Digest;
    let mut f = super::capture::open_upper_file(upper, rel)?;
    let mut h = sha2::Sha256::new();
    let mut kept = Vec::new();
    let mut n: u64 = 0;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
        if n <= max {
            kept.extend_from_slice(&buf[..k]);
        }
    }
    let digest = crate::durable::hex(&h.finalize());
    Ok(((n <= max).then_some(kept), digest, n))
}

/// Performs one step beneath the workspace, as the caller.
fn perform(
    a: &Apply<'_>,
    tree: &wsfs::Tree,
    upper: &wsfs::Tree,
    op: &Op,
    first_name: &mut HashMap<(u64, u64), PathBuf>,
) -> std::io::Result<()> {
    // Another name of a file already written: linked to it.
    if let Act::Write {
        linked: Some(key), ..
    } = &op.act
        && let Some(first) = first_name.get(key).cloned()
    {
        return wsfs::as_identity(a.who, || link_to(tree, &first, &op.rel))?;
    }
    let source = match (&op.act, &op.data) {
        (Act::Write { .. }, None) => Some(super::capture::open_upper_file(upper, &op.rel)?),
        _ => None,
    };
    wsfs::as_identity(a.who, || act(tree, op, source))??;
    if let Act::Write {
        linked: Some(key), ..
    } = &op.act
    {
        first_name.insert(*key, op.rel.clone());
    }
    Ok(())
}

fn link_to(tree: &wsfs::Tree, first: &Path, rel: &Path) -> std::io::Result<()> {
    let (fd, fname) = tree.open_parent(first)?;
    let (dir, name) = tree.open_parent(rel)?;
    match rustix::fs::unlinkat(&dir, name.as_os_str(), AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
        Err(e) => return Err(e.into()),
    }
    rustix::fs::linkat(
        &fd,
        fname.as_os_str(),
        &dir,
        name.as_os_str(),
        AtFlags::empty(),
    )?;
    Ok(())
}

/// One step's change, beneath the workspace's descriptor.
fn act(tree: &wsfs::Tree, op: &Op, source: Option<std::fs::File>) -> std::io::Result<()> {
    let (dir, name) = tree.open_parent(&op.rel)?;
    let name = name.as_os_str();
    match &op.act {
        Act::Delete => {
            let flags = if matches!(op.before, PathState::Dir) {
                AtFlags::REMOVEDIR
            } else {
                AtFlags::empty()
            };
            match rustix::fs::unlinkat(&dir, name, flags) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
        Act::MakeDir(mode) => {
            let _ = mode;
            match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
        Act::ChmodDir(mode) => chmod_dir(&dir, name, *mode),
        Act::Link(target) => {
            let tmp = temp_name(name);
            rustix::fs::symlinkat(target.as_path(), &dir, tmp.as_os_str())?;
            rename_over(&dir, &tmp, name)
        }
        Act::Fifo(mode) => {
            match rustix::fs::unlinkat(&dir, name, AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
            rustix::fs::mknodat(
                &dir,
                name,
                rustix::fs::FileType::Fifo,
                Mode::from_raw_mode(*mode),
                0,
            )?;
            Ok(())
        }
        Act::Write { mode, times, .. } => {
            write_file(&dir, name, op.data.as_deref(), source, *mode, *times)
        }
    }
}

/// Copies `src` into `dst` (empty) range by range of data: the holes of a sparse file stay
/// holes (a run's 2 GiB sparse file does not become 2 GiB on the user's disk).
fn copy_sparse(src: &std::fs::File, dst: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let len = u64::try_from(rustix::fs::fstat(src)?.st_size).unwrap_or(0);
    let mut pos: u64 = 0;
    let mut buf = vec![0u8; 1 << 20];
    while pos < len {
        let start = match rustix::fs::seek(src, rustix::fs::SeekFrom::Data(pos)) {
            Ok(s) => s,
            Err(rustix::io::Errno::NXIO) => break,
            Err(e) => return Err(e.into()),
        };
        let end = rustix::fs::seek(src, rustix::fs::SeekFrom::Hole(start))?.min(len);
        let mut at = start;
        while at < end {
            let want = usize::try_from((end - at).min(buf.len() as u64)).unwrap_or(buf.len());
            let n = src.read_at(&mut buf[..want], at)?;
            if n == 0 {
                break;
            }
            dst.write_all_at(&buf[..n], at)?;
            at += n as u64;
        }
        pos = end;
    }
    dst.set_len(len)
}

fn chmod_dir(
    dir: &impl rustix::fd::AsFd,
    name: &std::ffi::OsStr,
    mode: u32,
) -> std::io::Result<()> {
    let d = rustix::fs::openat(
        dir,
        name,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fchmod(&d, Mode::from_raw_mode(mode & 0o1777))?;
    Ok(())
}

/// A temporary name beside `name` (the broker's own, never one the run chose).
fn temp_name(name: &std::ffi::OsStr) -> OsString {
    let mut t = OsString::from(".");
    let short: Vec<u8> = std::os::unix::ffi::OsStrExt::as_bytes(name)
        .iter()
        .take(100)
        .copied()
        .collect();
    t.push(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&short));
    t.push(format!(".gateway-{}", crate::durable::unique_suffix()));
    t
}

fn rename_over(
    dir: &impl rustix::fd::AsFd,
    tmp: &std::ffi::OsStr,
    name: &std::ffi::OsStr,
) -> std::io::Result<()> {
    if let Err(e) = rustix::fs::renameat(dir, tmp, dir, name) {
        let _ = rustix::fs::unlinkat(dir, tmp, AtFlags::empty());
        return Err(e.into());
    }
    Ok(())
}

/// Writes a file's new content through a temporary name and a rename (the name replaced,
/// never the file written through).
fn write_file(
    dir: &impl rustix::fd::AsFd,
    name: &std::ffi::OsStr,
    data: Option<&[u8]>,
    source: Option<std::fs::File>,
    mode: u32,
    times: [(i64, i64); 2],
) -> std::io::Result<()> {
    let tmp = temp_name(name);
    let fd = rustix::fs::openat(
        dir,
        tmp.as_os_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let f = std::fs::File::from(fd);
    let written = (|| {
        match (data, source) {
            // Runs of zeros become holes: a sparse file stays sparse.
            (Some(d), _) => crate::journal::blob::write_sparse(&f, d)?,
            (None, Some(s)) => copy_sparse(&s, &f)?,
            (None, None) => {}
        }
        rustix::fs::fchmod(&f, Mode::from_raw_mode(mode))?;
        let ts = |(s, n): (i64, i64)| Timespec {
            tv_sec: s,
            tv_nsec: n as _,
        };
        rustix::fs::futimens(
            &f,
            &Timestamps {
                last_access: ts(times[0]),
                last_modification: ts(times[1]),
            },
        )?;
        Ok::<_, std::io::Error>(())
    })();
    drop(f);
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(dir, tmp.as_os_str(), AtFlags::empty());
        return Err(e);
    }
    rename_over(dir, &tmp, name)
}
