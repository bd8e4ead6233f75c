//! File tools: read, write, edit, history, undo. Each call is decided by the policy, resolved
//! beneath the allowed directories at the moment of use (`fsops::path`), backed up and
//! journalled before a change (`journal`), and recorded in the audit log.
//!
//! The allowed directories are the policy's sandbox: the writable trees for changes, the
//! readable ones for reads, minus denied, hidden and (for changes) protected paths, which are
//! checked on the file actually opened.
//!
//! Over 1,000 lines: the file tools' decision, context and record skeleton, which issue 23 (one
//! typed invocation) replaces with `broker::invoke`; it is split along that seam then, not
//! before (undo already lives in `fs/undo.rs`).

use super::refusal::{Access, Refusal};
use super::{BrokerError, redact_text, workspace};
use crate::audit;
use crate::fsops::path::{self as fpath, Root};
use crate::fsops::search;
use crate::fsops::text;
use crate::journal;

pub use crate::fsops::search::{GrepMode, GrepOptions, GrepResult};
pub use crate::fsops::text::Edit;
pub use crate::journal::{Change, PathState, Phase};
pub use undo::{HistoryEntry, Scope, history, skip};

mod undo;
use crate::model::{Decision, Effect, Tool, ToolCall};
use crate::policy::Policy;
use serde::Serialize;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Who asks, and where.
pub struct FsContext<'a> {
    /// The policy.
    pub policy: &'a Policy,
    /// The workspace: the writable area, fixed for the session (`broker::session`).
    pub workspace: PathBuf,
    /// The session's working directory (`cd`): the base of relative paths, nothing more.
    pub cwd: PathBuf,
    /// State directory.
    pub state_dir: PathBuf,
    /// Session id.
    pub session: String,
    /// Caller.
    pub caller: audit::Caller,
    /// Asks a person (the question in words): `None` when there is nobody to ask (no
    /// terminal), else the answer. For `ask` decisions (no answer: not approved) and to
    /// confirm an allowed permanent removal (no one to ask: the policy's allow stands).
    /// The flag: an `ask` decision (true; the daemon queues it for `gateway approve`) or a
    /// confirmation of what is allowed (false; asked only on a terminal).
    pub confirm: &'a dyn Fn(&str, bool) -> Option<bool>,
}

/// A file tool call.
#[derive(Debug, Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FsOp {
    /// Read lines `offset..offset+limit` (1-based offset).
    Read {
        /// The file.
        path: PathBuf,
        /// First line (1-based).
        offset: Option<usize>,
        /// Lines.
        limit: Option<usize>,
        /// Return binary files too (lossy).
        binary: bool,
    },
    /// Create or replace.
    Write {
        /// The file.
        path: PathBuf,
        /// New content.
        content: Vec<u8>,
    },
    /// Edit in place.
    Edit {
        /// The file.
        path: PathBuf,
        /// The edits, all or nothing.
        edits: Vec<Edit>,
        /// Show the diff only.
        dry_run: bool,
    },
    /// Move to the trash (directories with `recursive`).
    Remove {
        /// What.
        path: PathBuf,
        /// Directories too.
        recursive: bool,
        /// Delete for good, keeping no copy (policy tool `purge`; undo refuses it).
        #[serde(default)]
        permanent: bool,
    },
    /// Create a directory (and missing parents with `parents`).
    Mkdir {
        /// The directory.
        path: PathBuf,
        /// Create missing parents.
        parents: bool,
    },
    /// Move or rename (never over an existing file; into it if `dst` is a directory).
    Move {
        /// From.
        src: PathBuf,
        /// To.
        dst: PathBuf,
    },
    /// List a directory.
    List {
        /// The directory.
        path: PathBuf,
    },
    /// Files matching a glob.
    Glob {
        /// The pattern (relative to `path`; without `/` it matches names anywhere).
        pattern: String,
        /// Where to look.
        path: PathBuf,
    },
    /// Search file contents.
    Grep {
        /// Where to look.
        path: PathBuf,
        /// What.
        options: GrepOptions,
    },
    /// Restore a trash item (by undoing the removal that put it there).
    TrashRestore {
        /// Its name (`gateway trash list`).
        name: String,
    },
    /// Revert a change (the last one if `None`).
    Undo {
        /// The change id.
        id: Option<u64>,
        /// Show what would change only.
        dry_run: bool,
        /// Revert even if the file changed since (its current content is backed up).
        force: bool,
        /// Without an id: the newest change of any workspace (default: of this one).
        #[serde(default)]
        all: bool,
    },
    /// Diagnostics (hidden): what the confined worker can open at `path` with a plain
    /// `open(2)`, bypassing gateway's own path checks, and the worker's confinement as the
    /// kernel reports it. Shows the kernel's layer on its own.
    Probe {
        /// Any path.
        path: PathBuf,
    },
}

impl FsOp {
    /// Reads only: no journal lock, no crash recovery, no requests to change the journal.
    fn read_only(&self) -> bool {
        matches!(
            self,
            FsOp::Read { .. }
                | FsOp::List { .. }
                | FsOp::Glob { .. }
                | FsOp::Grep { .. }
                | FsOp::Probe { .. }
        )
    }

    /// May move things into or out of the trash.
    pub(crate) fn uses_trash(&self) -> bool {
        matches!(
            self,
            FsOp::Remove { .. } | FsOp::Undo { .. } | FsOp::TrashRestore { .. }
        )
    }

    /// Reads the journal and backed-up contents (to revert a change).
    /// It only reads: protected paths (which it never changes) need not be found for it.
    pub(crate) fn only_reads(&self) -> bool {
        matches!(
            self,
            FsOp::Read { .. }
                | FsOp::List { .. }
                | FsOp::Glob { .. }
                | FsOp::Grep { .. }
                | FsOp::Probe { .. }
        )
    }

    pub(crate) fn reads_history(&self) -> bool {
        matches!(self, FsOp::Undo { .. } | FsOp::TrashRestore { .. })
    }
}

/// What a file tool call returned.
#[derive(Debug, Serialize)]
pub struct FsResult {
    /// The decision.
    pub decision: Decision,
    /// What the tool says (text, lines, diff).
    pub output: FsOutput,
    /// The audit record's seq.
    pub audit_seq: u64,
    /// How the worker that performed it was confined (none when denied).
    pub enforcement: Option<crate::sandbox::EnforcementStatus>,
}

/// A file tool's output.
#[derive(Debug, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FsOutput {
    /// Denied by policy.
    Denied,
    /// The policy asks for approval, and it was not given (or there was no one to ask).
    NotApproved,
    /// Lines of a file (redacted).
    Read {
        /// The file.
        path: PathBuf,
        /// (line number, text) pairs.
        lines: Vec<(usize, String)>,
        /// Lines in the file.
        total_lines: usize,
        /// Not all lines asked for are shown.
        truncated: bool,
    },
    /// A change was made (or, dry run, would be).
    Changed {
        /// The file.
        path: PathBuf,
        /// Unified diff.
        diff: String,
        /// The journal id (none on dry runs or when nothing changed).
        change: Option<u64>,
        /// Created (did not exist).
        created: bool,
        /// Removed (undo of a creation).
        removed: bool,
    },
    /// A tree operation done (rm, mkdir, mv, restore).
    Done {
        /// What happened, in words.
        what: String,
        /// The journal id.
        change: Option<u64>,
        /// `gateway undo` can revert it (not a permanent deletion).
        undoable: bool,
    },
    /// Paths matching a glob.
    Glob {
        /// Relative to the search directory.
        paths: Vec<String>,
        /// More than shown.
        truncated: bool,
    },
    /// Search results (redacted).
    Grep(GrepResult),
    /// A directory listing.
    List {
        /// The directory.
        path: PathBuf,
        /// (name, kind, size).
        entries: Vec<(String, String, u64)>,
    },
    /// What the confined worker could open ([`FsOp::Probe`]).
    Probe {
        /// Opening for reading: "ok" or the error.
        open: String,
        /// Opening for appending (nothing is written): "ok" or the error.
        write: String,
        /// `Seccomp:`, `NoNewPrivs:` and `CapEff:` of the worker's /proc/self/status.
        status: Vec<String>,
    },
}

/// Errors specific to file tools, as broker errors.
fn usage(msg: impl Into<String>) -> BrokerError {
    BrokerError::Usage(msg.into())
}

fn fs_err(e: crate::fsops::FsError) -> BrokerError {
    match e {
        // A path that leads out of the allowed directories is the policy's no.
        crate::fsops::FsError::Escape { path, why } => Refusal::LeadsOutside {
            path,
            why: why.into(),
        }
        .into(),
        e => BrokerError::Usage(e.to_string()),
    }
}

fn j_err(e: journal::JournalError) -> BrokerError {
    BrokerError::Io {
        what: "journal".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

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
    read: Vec<Root>,
    write: Vec<Root>,
    deny: Vec<PathBuf>,
    protected: Vec<PathBuf>,
}

pub(crate) fn root_paths(
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
    let p = super::plan_with(policy, ws, state_dir, &tmp, false, &[], !only_reads)?;
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
    let readable = super::narrow(readable, roots, |_| false);
    Ok(RootPaths {
        read: readable,
        write: super::narrow(keep(&p.confine.write), roots, |_| false),
        deny,
        protected: p.confine.protected.clone(),
        landlock_deny,
    })
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

fn roots(ctx: &FsContext<'_>, ws: &Path) -> Result<Roots, BrokerError> {
    Ok(root_paths(ctx.policy, &ctx.state_dir, ws, true)?.open())
}

/// What the file tools need from the state directory, which the confined worker cannot
/// reach: the broker does it on the worker's behalf (`broker::worker`), holding the
/// journal's lock for the whole call.
pub(crate) trait StateOps {
    /// Stores `data` in the backup store (durably); returns its SHA-256.
    fn backup(&mut self, data: &[u8]) -> Result<String, BrokerError>;
    /// Writes a change's intent (durably); returns it with its id.
    fn begin(&mut self, change: Change) -> Result<Change, BrokerError>;
    /// Writes many changes' intents (one append, one sync); returns them with their ids.
    fn begin_many(&mut self, changes: Vec<Change>) -> Result<Vec<Change>, BrokerError>;
    /// The change is done.
    fn commit(&mut self, id: u64) -> Result<(), BrokerError>;
    /// These changes are done (one append, one sync).
    fn commit_many(&mut self, ids: &[u64]) -> Result<(), BrokerError>;
    /// The change was not made.
    fn abort(&mut self, id: u64);
    /// A trash name (and its `.trashinfo`) for `original`.
    fn trash_reserve(&mut self, original: &Path) -> Result<String, BrokerError>;
    /// Forgets a trash item's metadata (it was restored, or never filled).
    fn trash_forget(&mut self, name: &str);
    /// A backup's content, verified against its hash.
    fn read_backup(&mut self, sha256: &str) -> Result<Vec<u8>, BrokerError>;
    /// Is this content in the backup store?
    fn has_backup(&mut self, sha256: &str) -> Result<bool, BrokerError>;
    /// Every change in the journal, oldest first.
    fn changes(&mut self) -> Result<Vec<(Change, Phase)>, BrokerError>;
}

/// What a file tool's body works with.
pub(crate) struct Tools<'a> {
    /// The state directory's operations.
    pub(crate) state: &'a mut dyn StateOps,
    /// Redact secrets in what is shown (policy `secrets.output` is not `warn`).
    pub(crate) redact: bool,
    /// The trash's `files/` directory (the worker's landlock lets it in for removals).
    pub(crate) trash_files: PathBuf,
    /// The largest file read or changed (policy `[files] max_size`).
    pub(crate) max_size: u64,
    /// Files replaced whose owner the worker could not keep (it has no capabilities): the
    /// broker gives them back (`broker::worker`).
    pub(crate) owner_fixes: Vec<fpath::OwnerFix>,
}

/// The root (the deepest) that contains `p`, and the path relative to it.
fn pick<'a>(roots: &'a [Root], p: &Path, cwd: &Path) -> Option<(&'a Root, PathBuf)> {
    roots
        .iter()
        .filter_map(|r| r.relative(p, cwd).ok().map(|rel| (r, rel)))
        .max_by_key(|(r, _)| r.path.components().count())
}

/// The real path of an open file (what was actually opened, after every link).
fn real_path(f: &std::fs::File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    // not-ws: /proc/self/fd: the real path of an open descriptor
    std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()
}

fn under(p: &Path, list: &[PathBuf]) -> bool {
    list.iter().any(|d| p.starts_with(d))
}

/// Runs a file tool call through the invocation skeleton (`broker::invoke`): decide (on the
/// path as written and as resolved), ask, act in the confined worker, record.
pub fn run(ctx: &FsContext<'_>, op: FsOp) -> Result<FsResult, BrokerError> {
    let call = super::invoke::Call {
        policy: ctx.policy,
        state_dir: &ctx.state_dir,
        session: &ctx.session,
        caller: &ctx.caller,
    };
    let (tool, name) = op.tool();
    let mut t = FsTool {
        ctx,
        op: Some(op),
        tool,
        name,
        ws: PathBuf::new(),
        base: PathBuf::new(),
        subject: PathBuf::new(),
        paths: None,
        undo_target: None,
        decision: None,
        enforcement: None,
    };
    let done = super::invoke::invoke(&call, &mut t)?;
    Ok(FsResult {
        decision: t
            .decision
            .ok_or_else(|| usage("a file tool call performed without a decision"))?,
        output: done.output.redacted(),
        audit_seq: done.seq,
        enforcement: t.enforcement,
    })
}

impl FsOp {
    /// The policy's tool and the record's name.
    fn tool(&self) -> (Tool, &'static str) {
        match self {
            FsOp::Read { .. } => (Tool::Read, "fs.read"),
            FsOp::Write { .. } => (Tool::Write, "fs.write"),
            FsOp::Edit { .. } => (Tool::Edit, "fs.edit"),
            FsOp::Remove {
                permanent: true, ..
            } => (Tool::Purge, "fs.rm.permanent"),
            FsOp::Remove { .. } => (Tool::Delete, "fs.rm"),
            FsOp::Mkdir { .. } => (Tool::Mkdir, "fs.mkdir"),
            FsOp::Move { .. } => (Tool::Move, "fs.mv"),
            FsOp::List { .. } => (Tool::List, "fs.ls"),
            FsOp::Glob { .. } => (Tool::Search, "fs.glob"),
            FsOp::Grep { .. } => (Tool::Search, "fs.grep"),
            FsOp::TrashRestore { .. } => (Tool::Write, "trash.restore"),
            FsOp::Undo { .. } => (Tool::Write, "undo"),
            // A diagnostic of the worker's confinement: allowed where listing the workspace is.
            FsOp::Probe { .. } => (Tool::List, "fs.probe"),
        }
    }

    /// The path the call is about, as given (none for undo and restore, which decide on
    /// the change they revert).
    fn subject(&self) -> Option<&Path> {
        match self {
            FsOp::Read { path, .. }
            | FsOp::Write { path, .. }
            | FsOp::Edit { path, .. }
            | FsOp::Remove { path, .. }
            | FsOp::Mkdir { path, .. }
            | FsOp::List { path }
            | FsOp::Glob { path, .. }
            | FsOp::Grep { path, .. } => Some(path),
            FsOp::Move { src, .. } => Some(src),
            FsOp::TrashRestore { .. } | FsOp::Undo { .. } | FsOp::Probe { .. } => None,
        }
    }
}

/// One file tool call, between the skeleton's steps.
struct FsTool<'c, 'a> {
    ctx: &'c FsContext<'a>,
    /// The call (taken by the "perform" step).
    op: Option<FsOp>,
    tool: Tool,
    name: &'static str,
    /// The writable area: the session's workspace.
    ws: PathBuf,
    /// The base of relative paths: the session's working directory (`cd`), which moves
    /// nothing else.
    base: PathBuf,
    /// The path decided on (for undo: the path of the change it reverts).
    subject: PathBuf,
    paths: Option<Result<RootPaths, BrokerError>>,
    undo_target: Option<Change>,
    decision: Option<Decision>,
    /// How the worker that performed it was confined.
    enforcement: Option<crate::sandbox::EnforcementStatus>,
}

impl super::invoke::Tool for FsTool<'_, '_> {
    type Output = FsOutput;

    fn name(&self) -> &str {
        self.name
    }

    fn decide(&mut self, rec: &mut audit::Record) -> Result<Decision, BrokerError> {
        let ctx = self.ctx;
        let Some(op) = self.op.as_ref() else {
            return Err(usage("a file tool call decided twice"));
        };
        // Paths can hold a token (a file named after one): recorded redacted, always.
        rec.args = describe(op).iter().map(|a| redact_text(a)).collect();
        rec.cwd = ctx.cwd.display().to_string();
        self.ws = workspace(&ctx.workspace)?;
        self.base = workspace(&ctx.cwd)?;
        rec.cwd = self.base.display().to_string();
        let base = &self.base;
        let abs_of = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };
        // Undo decides on the path of the change it reverts.
        self.undo_target = match op {
            FsOp::Undo { id, all, .. } => Some(undo::find_change(
                &ctx.state_dir,
                *id,
                if *all {
                    Scope::All
                } else {
                    Scope::Workspace(&self.ws)
                },
            )?),
            FsOp::TrashRestore { name } => Some(find_removal(&ctx.state_dir, name)?),
            _ => None,
        };
        self.subject = match (op, op.subject(), &self.undo_target) {
            (FsOp::Probe { .. }, _, _) => self.ws.clone(),
            (_, Some(p), _) => abs_of(p),
            (_, None, Some(c)) => c.path.clone(),
            _ => PathBuf::new(),
        };
        // A move is decided on both ends.
        let extra = match op {
            FsOp::Move { dst, .. } => Some(abs_of(dst)),
            _ => None,
        };
        let mut decision = ctx.policy.evaluate(
            &ToolCall {
                tool: self.tool,
                argv: vec![],
                paths: std::iter::once(self.subject.clone()).chain(extra).collect(),
                cwd: base.clone(),
            },
            &super::shell_env(base),
        );
        // Denied and protected paths, judged as written and as resolved, refuse the call
        // here, named and recorded as a deny (`broker::paths`); the worker's confinement is
        // the second wall.
        let paths = root_paths(ctx.policy, &ctx.state_dir, &self.ws, op.only_reads());
        if let Ok(rp) = &paths {
            let subjects = decision_paths(&self.subject, op, base);
            let refused = super::paths::refusals(ctx.policy, rp, op, &subjects, &abs_of);
            if !refused.is_empty() {
                decision.effect = Effect::Deny;
                decision.rules.extend(refused);
            }
        }
        self.paths = Some(paths);
        super::guard::redact_decision(&mut decision);
        self.decision = Some(decision.clone());
        Ok(decision)
    }

    fn ask(&mut self, decision: &Decision) -> bool {
        let rules: String = decision
            .deciding_rules()
            .map(|r| format!("\n  rule {} ({}): {}", r.id, r.effect, r.reason))
            .collect();
        let q = format!(
            "{} {} needs approval:{rules}\nDo it?",
            self.name,
            self.subject.display()
        );
        confirm(self.ctx, self.name, &self.subject, decision, &q, true) == Some(true)
    }

    /// An allowed permanent removal is still confirmed when there is someone to ask.
    fn confirm(&mut self, decision: &Decision) -> Option<bool> {
        if !matches!(
            self.op,
            Some(FsOp::Remove {
                permanent: true,
                ..
            })
        ) {
            return None;
        }
        let q = format!(
            "delete {} permanently? No copy is kept and `gateway undo` cannot bring it back.",
            self.subject.display()
        );
        confirm(self.ctx, self.name, &self.subject, decision, &q, false)
    }

    fn not_performed(&mut self, decision: Decision, _approved: Option<bool>) -> FsOutput {
        if decision.effect == Effect::Deny {
            FsOutput::Denied
        } else {
            FsOutput::NotApproved
        }
    }

    fn perform(
        &mut self,
        _decision: Decision,
        _approved: Option<bool>,
    ) -> Result<FsOutput, BrokerError> {
        let (Some(op), Some(paths)) = (self.op.take(), self.paths.take()) else {
            return Err(usage("a file tool call performed twice"));
        };
        let (res, enforcement) = perform(
            self.ctx,
            (&self.ws, &self.base),
            paths,
            op,
            self.undo_target.take(),
        );
        self.enforcement = enforcement;
        res
    }

    fn record(&mut self, res: &Result<FsOutput, BrokerError>, rec: &mut audit::Record) {
        rec.enforcement = self.enforcement.as_ref().map(super::enforcement_summary);
        match res {
            Ok(FsOutput::Changed { change, .. } | FsOutput::Done { change, .. }) => {
                rec.exit_code = Some(0);
                if let Some(id) = change {
                    rec.args.push(format!("journal={id}"));
                }
            }
            Ok(FsOutput::Denied | FsOutput::NotApproved) | Err(_) => {}
            Ok(_) => rec.exit_code = Some(0),
        }
    }

    fn recorded(&mut self, res: &Result<FsOutput, BrokerError>, _rec: &audit::Record) {
        if matches!(
            res,
            Ok(FsOutput::Changed {
                change: Some(_),
                ..
            } | FsOutput::Done {
                change: Some(_),
                ..
            })
        ) {
            prune_backups_hourly(&self.ctx.state_dir, self.ctx.policy);
        }
    }
}

/// `p` as shown: a secret in it redacted (unchanged, byte for byte, when it holds none).
pub(crate) fn redact_path(p: PathBuf) -> PathBuf {
    let shown = p.to_string_lossy();
    let r = redact_text(&shown);
    if r == shown { p } else { PathBuf::from(r) }
}

impl FsOutput {
    /// The output as shown: a secret in a file name is redacted like any output, wherever a
    /// name appears (listings, globs, search results, messages). The names are unchanged on
    /// disk and in the journal, which undo needs.
    fn redacted(mut self) -> FsOutput {
        match &mut self {
            FsOutput::Read { path, .. } | FsOutput::Changed { path, .. } => {
                *path = redact_path(std::mem::take(path));
            }
            FsOutput::Done { what, .. } => *what = redact_text(what),
            FsOutput::Glob { paths, .. } => {
                for p in paths {
                    *p = redact_text(p);
                }
            }
            FsOutput::Grep(g) => {
                for l in &mut g.lines {
                    l.0 = redact_text(&l.0);
                }
                for f in &mut g.files {
                    f.0 = redact_text(&f.0);
                }
            }
            FsOutput::List { path, entries } => {
                *path = redact_path(std::mem::take(path));
                for e in entries {
                    e.0 = redact_text(&e.0);
                }
            }
            _ => {}
        }
        self
    }
}

/// The paths a call is decided on: its subject and, for a move, its destination.
fn decision_paths(subject: &Path, op: &FsOp, base: &Path) -> Vec<PathBuf> {
    let mut v = vec![subject.to_path_buf()];
    if let FsOp::Move { dst, .. } = op {
        v.push(if dst.is_absolute() {
            dst.clone()
        } else {
            base.join(dst)
        });
    }
    v.retain(|p| !p.as_os_str().is_empty());
    v
}

/// Runs the tool's body in a confined worker (`broker::worker`), the broker answering its
/// requests for the state directory. Changes hold the journal's lock throughout, and first
/// complete or roll back what a crash left pending.
#[allow(clippy::type_complexity)]
fn perform(
    ctx: &FsContext<'_>,
    (ws, base): (&Path, &Path),
    paths: Result<RootPaths, BrokerError>,
    op: FsOp,
    undo_target: Option<Change>,
) -> (
    Result<FsOutput, BrokerError>,
    Option<crate::sandbox::EnforcementStatus>,
) {
    let prepared = (|| {
        let lock = if !op.read_only() {
            let lock = journal::lock(&ctx.state_dir).map_err(j_err)?;
            recover(&ctx.state_dir, &lock)?;
            Some(lock)
        } else {
            None
        };
        let paths = narrow(paths?, &op, base);
        Ok::<_, BrokerError>((lock, paths))
    })();
    let (lock, paths) = match prepared {
        Ok(p) => p,
        Err(e) => return (Err(e), None),
    };
    let (trash_files, _) = journal::trash_dirs(&ctx.state_dir);
    if op.uses_trash()
        // not-ws: the trash, in the broker's own state directory
        && let Err(e) = std::fs::create_dir_all(&trash_files)
    {
        return (
            Err(BrokerError::Io {
                what: format!("creating {}", trash_files.display()),
                source: e,
            }),
            None,
        );
    }
    // The worker runs as the daemon's uid (it moves removals into the daemon's trash). Under
    // a daemon running as root that would lend another uid root's ownership of files (the
    // worker has no capabilities, but uid 0 owns most of the system): refused. Commands run
    // as the client instead (`client::run_as`).
    if let Some(u) = super::client::run_as()
        && crate::sandbox::effective_uid() == 0
    {
        return (
            Err(BrokerError::Usage(format!(
                "file tools for uid {} through a daemon running as root are refused (they would act with root's ownership of files): run the daemon as its own user (contrib/gateway.service), or run them without the daemon (GATEWAY_SOCKET=)",
                u.uid
            ))),
            None,
        );
    }
    let req = super::worker::Request {
        op,
        ws: base.to_path_buf(),
        workspace: ws.to_path_buf(),
        roots: paths,
        redact: ctx.policy.secrets.output != crate::model::SecretsOutput::Warn,
        max_size: ctx.policy.files.max_size,
        trash_files,
        undo_target,
    };
    super::worker::run(ctx.policy, &ctx.state_dir, lock.as_ref(), req)
}

/// The record's arguments: paths and sizes, never contents.
fn describe(op: &FsOp) -> Vec<String> {
    match op {
        FsOp::Read {
            path,
            offset,
            limit,
            ..
        } => vec![
            path.display().to_string(),
            format!("offset={}", offset.unwrap_or(1)),
            format!("limit={}", limit.map_or("all".into(), |l| l.to_string())),
        ],
        FsOp::Write { path, content } => vec![
            path.display().to_string(),
            format!("bytes={}", content.len()),
        ],
        FsOp::Edit {
            path,
            edits,
            dry_run,
        } => vec![
            path.display().to_string(),
            format!("edits={}", edits.len()),
            format!("dry_run={dry_run}"),
        ],
        FsOp::Remove {
            path,
            recursive,
            permanent,
        } => vec![
            path.display().to_string(),
            format!("recursive={recursive}"),
            format!("permanent={permanent}"),
        ],
        FsOp::Mkdir { path, parents } => {
            vec![path.display().to_string(), format!("parents={parents}")]
        }
        FsOp::Move { src, dst } => vec![src.display().to_string(), dst.display().to_string()],
        FsOp::List { path } => vec![path.display().to_string()],
        FsOp::Glob { pattern, path } => vec![pattern.clone(), path.display().to_string()],
        FsOp::Grep { path, options } => vec![
            options.regex.clone(),
            path.display().to_string(),
            format!("glob={}", options.glob.as_deref().unwrap_or("")),
            format!("mode={:?}", options.mode),
        ],
        FsOp::TrashRestore { name } => vec![name.clone()],
        FsOp::Undo {
            id,
            dry_run,
            force,
            all,
        } => vec![
            format!("id={}", id.map_or("last".into(), |i| i.to_string())),
            format!("dry_run={dry_run}"),
            format!("force={force}"),
            format!("all={all}"),
        ],
        FsOp::Probe { path } => vec![path.display().to_string()],
    }
}

/// Least privilege: the roots a call can resolve in, out of the policy's. Each call opens
/// paths beneath one root (two for a move), chosen like [`pick`]: the deepest root holding
/// the path. A search (grep, glob, ls) gets only the directory it searches. The worker then
/// has landlock rules for those alone (a policy reading `/` minus credentials costs ~700
/// rules to build and to check on every open); its own checks are unchanged. Undo, restore
/// and the probe keep every root.
fn narrow(mut paths: RootPaths, op: &FsOp, ws: &Path) -> RootPaths {
    let canon = |v: &[PathBuf]| -> Vec<PathBuf> {
        v.iter()
            .map(|r| super::wsfs::resolve(r).unwrap_or_else(|| r.clone()))
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
            let dir =
                super::wsfs::resolve(&a).filter(|c| c.starts_with(&root) && super::wsfs::is_dir(c));
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
                    return Err(usage(format!(
                        "{}: no such file (create it with `fs write`)",
                        path.display()
                    )));
                };
                text::apply(old, &edits)
                    .map(Target::Write)
                    .map_err(|e| usage(format!("{}: {e}", path.display())))
            },
            dry_run,
            None,
        ),
        FsOp::Undo { dry_run, force, .. } => {
            let c = undo_target.ok_or_else(|| usage("nothing to undo"))?;
            undo(t, rs, ws, &c, dry_run, force).map_err(|e| undo::with_hint(e, c.id))
        }
        FsOp::TrashRestore { .. } => {
            let c = undo_target.ok_or_else(|| usage("no such trash item"))?;
            undo(t, rs, ws, &c, false, false)
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

/// The readable root holding `path` (a directory to search), refusing denied ones.
fn pick_read<'a>(
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
fn pick_write<'a>(
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

fn rerr<'a>(
    path: &'a Path,
    what: &'static str,
) -> impl FnOnce(rustix::io::Errno) -> BrokerError + 'a {
    move |e| {
        if e == rustix::io::Errno::XDEV {
            return Refusal::LeadsOutside {
                path: path.to_path_buf(),
                why: "it leads outside the allowed directories".into(),
            }
            .into();
        }
        BrokerError::Io {
            what: format!("{what} {}", path.display()),
            source: std::io::Error::from_raw_os_error(e.raw_os_error()),
        }
    }
}

/// What [`state_of`] does with a regular file's content.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Content {
    /// Store it in the backup store (a state the journal records, to be restored).
    Backup,
    /// Only hash it (a check, or a state nothing will restore): nothing is stored, nothing
    /// crosses to the broker.
    Hash,
}

/// The state of the name `rel` (not following a final link).
fn state_of(
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
        _ => Err(usage(format!(
            "{}: not a file, directory or symbolic link",
            abs.display()
        ))),
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
        PathState::Absent => Err(usage(format!(
            "{}: no such file or directory",
            abs.display()
        ))),
        PathState::Dir if !recursive => Err(usage(format!(
            "{}: is a directory (pass -r to {what} with its contents)",
            abs.display()
        ))),
        s => Ok(s),
    }
}

/// Moves `rel` into the trash (journalled; undo restores it).
fn to_trash(
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
                return Err(usage(format!(
                    "{}: the state directory is on another file system, so it cannot be moved to the trash; remove it with a shell command",
                    abs.display()
                )));
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
const PURGE_TOOL: &str = "fs.rm.permanent";

/// Removes `rel` for good (`fs rm --permanent`): no copy kept. Journalled (history shows it,
/// with the removed file's hash and size) so that undo can say why it cannot help.
fn purge(
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
/// topmost directory created.
fn mkdir(
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
                return Err(usage(format!(
                    "{}: exists and is not a directory",
                    root.path.join(c).display()
                )));
            }
        }
    }
    let Some(first) = first_missing else {
        return Err(usage(format!(
            "{}: already exists",
            root.path.join(&rel).display()
        )));
    };
    if first + 1 < comps.len() && !parents {
        return Err(usage(format!(
            "{}: missing parent directory (pass -p to create it)",
            root.path.join(&comps[first]).display()
        )));
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
fn move_path(
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
        return Err(usage(format!(
            "{}: no such file or directory",
            sabs.display()
        )));
    }
    if let Some(e) = expect
        && !same_state(e, &before)
    {
        return Err(usage(format!(
            "refused: {} changed since it was moved there; pass --force to move it back anyway",
            sabs.display()
        )));
    }
    if state_of(t, droot, &drel, Content::Hash)? != PathState::Absent {
        return Err(usage(format!(
            "refused: {} exists; gateway never moves over a file",
            dabs.display()
        )));
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

fn same_state(a: &PathState, b: &PathState) -> bool {
    match (a, b) {
        (PathState::File { sha256: x, .. }, PathState::File { sha256: y, .. }) => x == y,
        (a, b) => a == b,
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

/// The removal (rm) that put trash item `name` there and was not undone.
fn find_removal(state_dir: &Path, name: &str) -> Result<Change, BrokerError> {
    let all = journal::changes(state_dir).map_err(j_err)?;
    let committed: Vec<&Change> = all
        .iter()
        .filter(|(_, p)| *p == Phase::Committed)
        .map(|(c, _)| c)
        .collect();
    let undone: Vec<u64> = committed.iter().filter_map(|c| c.undoes).collect();
    committed
        .iter()
        .rev()
        .find(|c| {
            c.trash.as_deref() == Some(name)
                && c.after == PathState::Absent
                && !undone.contains(&c.id)
        })
        .map(|c| (*c).clone())
        .ok_or_else(|| usage(format!("no trash item {name} (see `gateway trash list`)")))
}

/// Puts a trash item back where the change `c` removed it from.
fn from_trash(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    c: &Change,
    name: &str,
) -> Result<FsOutput, BrokerError> {
    let (root, rel) = pick_write(rs, &c.path, ws)?;
    if state_of(t, root, &rel, Content::Hash)? != PathState::Absent {
        return Err(usage(format!(
            "refused: {} exists again; move it away first",
            c.path.display()
        )));
    }
    let files = t.trash_files.clone();
    // not-ws: the trash, in the broker's own state directory
    if std::fs::symlink_metadata(files.join(name)).is_err() {
        return Err(usage(format!(
            "the trash item {name} is gone (the trash was emptied)"
        )));
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

/// Reads a file's current content beneath the roots: `None` if it does not exist.
fn current(
    rs: &[Root],
    deny: &[PathBuf],
    p: &Path,
    ws: &Path,
    max: u64,
) -> Result<Option<(Vec<u8>, u32)>, BrokerError> {
    let (root, rel) = pick(rs, p, ws).ok_or_else(|| {
        BrokerError::from(Refusal::OutsideRoots {
            path: p.to_path_buf(),
            access: Access::Read,
        })
    })?;
    let target = root.final_target(&rel).map_err(fs_err)?;
    match fpath::open_read(root, &target) {
        Ok(mut f) => {
            if let Some(real) = real_path(&f)
                && under(&real, deny)
            {
                return Err(Refusal::DeniedPath {
                    path: p.to_path_buf(),
                }
                .into());
            }
            // not-ws: the metadata of an open descriptor
            let meta = f.metadata().map_err(|e| BrokerError::Io {
                what: format!("reading {}", p.display()),
                source: e,
            })?;
            if meta.len() > max {
                return Err(Refusal::TooLarge {
                    path: p.to_path_buf(),
                    size: meta.len(),
                    max,
                }
                .into());
            }
            let mut v = Vec::with_capacity(meta.len() as usize);
            f.read_to_end(&mut v).map_err(|e| BrokerError::Io {
                what: format!("reading {}", p.display()),
                source: e,
            })?;
            use std::os::unix::fs::PermissionsExt;
            Ok(Some((v, meta.permissions().mode() & 0o7777)))
        }
        Err(crate::fsops::FsError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        Err(e) => Err(fs_err(e)),
    }
}

fn read(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    path: &Path,
    offset: Option<usize>,
    limit: Option<usize>,
    binary: bool,
) -> Result<FsOutput, BrokerError> {
    let (data, _) = current(&rs.read, &rs.deny, path, ws, t.max_size)?
        .ok_or_else(|| usage(format!("{}: no such file", path.display())))?;
    if !binary && let Err(e) = text::shape(&data) {
        return Err(usage(format!(
            "{}: {e} (pass --binary to read it anyway)",
            path.display()
        )));
    }
    // Secrets in the file are redacted as in command output.
    let shown = if !t.redact {
        String::from_utf8_lossy(&data).into_owned()
    } else {
        redact_text(&String::from_utf8_lossy(&data))
    };
    let lines: Vec<&str> = shown.split_inclusive('\n').collect();
    let total = lines.len();
    let start = offset.unwrap_or(1).max(1);
    let end = limit.map_or(total, |l| (start - 1 + l).min(total));
    let picked: Vec<(usize, String)> = lines
        .iter()
        .enumerate()
        .skip(start - 1)
        .take(end.saturating_sub(start - 1))
        .map(|(i, l)| (i + 1, l.trim_end_matches(['\n', '\r']).to_string()))
        .collect();
    Ok(FsOutput::Read {
        path: path.to_path_buf(),
        truncated: start > 1 || end < total,
        lines: picked,
        total_lines: total,
    })
}

/// What a change leaves at the path.
enum Target {
    /// This content.
    Write(Vec<u8>),
    /// No file (undo of a creation).
    Remove,
}

/// A change to one file: `make` gets the old content (None: absent) and returns what the
/// path should hold. Backs up both states, journals the intent, acts atomically, commits.
#[allow(clippy::too_many_arguments)]
fn change(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    path: &Path,
    tool: &str,
    make: impl FnOnce(Option<&[u8]>) -> Result<Target, BrokerError>,
    dry_run: bool,
    undoes: Option<u64>,
) -> Result<FsOutput, BrokerError> {
    let (root, rel) = pick(&rs.write, path, ws).ok_or_else(|| {
        BrokerError::from(Refusal::OutsideRoots {
            path: path.to_path_buf(),
            access: Access::Write,
        })
    })?;
    let abs = root.path.join(&rel);
    let target_rel = root.final_target(&rel).map_err(fs_err)?;
    let target = root.path.join(&target_rel);
    if under(&target, &rs.deny) || under(&target, &rs.protected) {
        return Err(Refusal::ProtectedPath {
            path: path.to_path_buf(),
        }
        .into());
    }
    let old = current(&rs.write, &rs.deny, &abs, ws, t.max_size)?;
    let new = match make(old.as_ref().map(|(d, _)| d.as_slice()))? {
        Target::Write(d) => Some(Some(d)),
        Target::Remove if old.is_some() => Some(None),
        Target::Remove => None,
    };
    let old_bytes = old.as_ref().map(|(d, _)| d.as_slice()).unwrap_or_default();
    let Some(new) = new else {
        return Ok(FsOutput::Changed {
            path: path.to_path_buf(),
            diff: String::new(),
            change: None,
            created: false,
            removed: false,
        });
    };
    let shown = target.display().to_string();
    let shown = shown.trim_start_matches('/');
    let diff = text::unified_diff(shown, old_bytes, new.as_deref().unwrap_or_default());
    let diff = redact_text(&diff);
    if dry_run || (old.as_ref().map(|(d, _)| d) == new.as_ref()) {
        return Ok(FsOutput::Changed {
            path: path.to_path_buf(),
            diff,
            change: None,
            created: old.is_none(),
            removed: new.is_none(),
        });
    }
    let mode = old.as_ref().map_or(0o644, |(_, m)| *m);
    let mut state = |d: &[u8]| -> Result<PathState, BrokerError> {
        Ok(PathState::File {
            sha256: t.state.backup(d)?,
            mode,
            size: d.len() as u64,
        })
    };
    let before = match &old {
        Some((d, _)) => state(d)?,
        None => PathState::Absent,
    };
    let after = match &new {
        Some(d) => state(d)?,
        None => PathState::Absent,
    };
    let c = t.state.begin(Change {
        id: 0,
        time: 0,
        tool: tool.into(),
        path: target.clone(),
        before,
        after,
        undoes,
        dest: None,
        trash: None,
        group: None,
        ..Change::default()
    })?;
    let acted = match &new {
        Some(d) => fpath::write_atomic(root, &target_rel, d),
        None => fpath::remove_file(root, &target_rel).map(|()| None),
    };
    match acted {
        Ok(fix) => {
            t.owner_fixes.extend(fix);
            t.state.commit(c.id)?
        }
        Err(e) => {
            t.state.abort(c.id);
            return Err(fs_err(e));
        }
    }
    Ok(FsOutput::Changed {
        path: path.to_path_buf(),
        diff,
        change: Some(c.id),
        created: old.is_none(),
        removed: new.is_none(),
    })
}

fn undo(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    c: &Change,
    dry_run: bool,
    force: bool,
) -> Result<FsOutput, BrokerError> {
    if let Some(g) = &c.group {
        return undo::undo_group(t, rs, ws, g, dry_run, force);
    }
    undo::need_backups(t, std::slice::from_ref(c))?;
    if c.tool == PURGE_TOOL {
        return Err(usage(format!(
            "change {} deleted {} permanently (fs rm --permanent): no copy was kept, so it cannot be undone (earlier changes: `gateway undo ID`, see `gateway history`)",
            c.id,
            c.path.display()
        )));
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
            return Err(usage(format!(
                "refused: {} changed since change {}; pass --force to undo anyway",
                c.path.display(),
                c.id
            )));
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
                return Err(usage(format!(
                    "refused: {} changed since change {id}; undoing would lose that (pass --force to undo anyway: the current content is backed up first). What changed since:\n{}",
                    path.display(),
                    redact_text(&d)
                )));
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

/// Completes or rolls back changes a crash left pending (see [`journal::recover`]).
fn recover(state_dir: &Path, lock: &journal::Lock) -> Result<(), BrokerError> {
    use super::wsfs;
    // What stands at a pending change's path now: read as the broker, so beneath no link at
    // all (`wsfs`), a regular file only and bounded (a FIFO or a huge sparse file left there
    // is "unknown": the change stays pending).
    const MAX_HASHED: u64 = 1 << 30;
    let now = |p: &Path| -> Option<PathState> {
        match wsfs::kind_nolinks(p) {
            Ok(None) => Some(PathState::Absent),
            Err(_) => None,
            Ok(Some(wsfs::Kind::File { mode, .. })) => {
                wsfs::read_nolinks(p, MAX_HASHED).map(|d| PathState::File {
                    sha256: journal::sha256_hex(&d),
                    mode,
                    size: d.len() as u64,
                })
            }
            Ok(Some(wsfs::Kind::Dir { .. })) => Some(PathState::Dir),
            Ok(Some(wsfs::Kind::Link(t))) => Some(PathState::Link {
                target: t.to_string_lossy().into_owned(),
            }),
            Ok(Some(wsfs::Kind::Special)) => None,
        }
    };
    // Temporary files of writers killed mid-write (`.NAME.gateway-tmp-PID-N` next to a
    // pending change's file, PID no longer running) are removed.
    for (c, phase) in journal::changes(state_dir).map_err(j_err)? {
        if phase != Phase::Pending {
            continue;
        }
        let (Some(dir), Some(name)) = (c.path.parent(), c.path.file_name()) else {
            continue;
        };
        let prefix = format!(".{}.gateway-tmp-", name.to_string_lossy());
        let Ok(d) = wsfs::open_dir_nolinks(dir) else {
            continue;
        };
        let Ok(entries) = wsfs::list_at(&d, 1 << 20) else {
            continue;
        };
        for (n, kind) in entries {
            let n = n.to_string_lossy().into_owned();
            let Some(rest) = n.strip_prefix(&prefix) else {
                continue;
            };
            let pid = rest.split('-').next().unwrap_or("");
            // not-ws: /proc, whether the writer still runs.
            let alive = !pid.is_empty() && Path::new("/proc").join(pid).exists();
            if !alive && matches!(kind, wsfs::Kind::File { .. }) {
                let _ = wsfs::unlink_at(&d, std::ffi::OsStr::new(&n));
            }
        }
    }
    journal::recover(state_dir, lock, &now).map_err(j_err)?;
    Ok(())
}

/// The trash's items.
pub fn trash_list(state_dir: &Path) -> Result<Vec<journal::TrashItem>, BrokerError> {
    journal::trash_list(state_dir).map_err(j_err)
}

/// Empties the trash (permanently), or only items removed more than `older_than` ago.
/// Returns how many items were removed.
pub fn trash_empty(
    state_dir: &Path,
    older_than: Option<std::time::Duration>,
) -> Result<usize, BrokerError> {
    let (files, _) = journal::trash_dirs(state_dir);
    let cutoff = older_than.and_then(|d| std::time::SystemTime::now().checked_sub(d));
    let mut n = 0;
    for item in journal::trash_list(state_dir).map_err(j_err)? {
        if let Some(c) = cutoff {
            let when = humantime::parse_rfc3339_weak(&item.deleted).ok();
            if when.is_none_or(|w| w > c) {
                continue;
            }
        }
        let p = files.join(&item.name);
        // not-ws: the trash, in the broker's own state directory
        let gone = match std::fs::symlink_metadata(&p) {
            // not-ws: the trash, in the broker's own state directory
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p).is_ok(),
            // not-ws: the trash, in the broker's own state directory
            Ok(_) => std::fs::remove_file(&p).is_ok(),
            Err(_) => true,
        };
        if gone {
            journal::trash_forget(state_dir, &item.name);
            n += 1;
        }
    }
    Ok(n)
}

/// The session's virtual cwd, if `cd` set one (and it still exists).
pub fn session_cwd(state_dir: &Path, session: &str) -> Option<PathBuf> {
    super::session::cwd(state_dir, session)
}

/// `cd`: changes the session's virtual working directory (never the broker's own). `..`,
/// `~`, `~/x`, `-` (the previous one), absolute and relative paths; the target must be a
/// directory the policy lets tools read. Returns the new directory.
pub fn cd(ctx: &FsContext<'_>, target: &str) -> Result<PathBuf, BrokerError> {
    let call = super::invoke::Call {
        policy: ctx.policy,
        state_dir: &ctx.state_dir,
        session: &ctx.session,
        caller: &ctx.caller,
    };
    let mut t = CdTool {
        ctx,
        target,
        ws: PathBuf::new(),
        base: PathBuf::new(),
    };
    super::invoke::invoke(&call, &mut t).map(|d| d.output)
}

/// `cd` on the invocation skeleton: allowed by the built-in rule (a directory the policy
/// lets tools read); a directory outside the readable roots is the policy's refusal,
/// recorded as a deny with its rule; one that does not exist is an error, recorded as such.
struct CdTool<'c, 'a> {
    ctx: &'c FsContext<'a>,
    target: &'c str,
    ws: PathBuf,
    base: PathBuf,
}

impl super::invoke::Tool for CdTool<'_, '_> {
    type Output = PathBuf;

    fn name(&self) -> &str {
        "fs.cd"
    }

    fn decide(&mut self, rec: &mut audit::Record) -> Result<Decision, BrokerError> {
        rec.args = vec![redact_text(self.target)];
        rec.cwd = self.ctx.cwd.display().to_string();
        self.ws = workspace(&self.ctx.workspace)?;
        self.base = workspace(&self.ctx.cwd)?;
        rec.cwd = self.base.display().to_string();
        Ok(Decision {
            effect: Effect::Allow,
            rules: vec![crate::model::RuleMatch {
                id: "builtin".into(),
                effect: Effect::Allow,
                reason: "a directory the policy lets tools read".into(),
                subject: redact_text(self.target),
            }],
            commands: vec![],
            unanalysable: vec![],
        })
    }

    fn ask(&mut self, _decision: &Decision) -> bool {
        false
    }

    fn not_performed(&mut self, _decision: Decision, _approved: Option<bool>) -> PathBuf {
        self.base.clone()
    }

    fn perform(&mut self, _d: Decision, _a: Option<bool>) -> Result<PathBuf, BrokerError> {
        let (ctx, target, base) = (self.ctx, self.target, &self.base);
        let mut dirs = super::session::load(&ctx.state_dir, &ctx.session);
        let home = PathBuf::from(super::shell_env(base).home);
        let wanted = match target {
            "-" => dirs
                .previous
                .clone()
                .ok_or_else(|| usage("cd -: no previous directory in this session"))?,
            "~" => home.clone(),
            t if t.starts_with("~/") => home.join(&t[2..]),
            t => base.join(t),
        };
        // The readable roots are those of the session's workspace: `cd` moves the base of
        // relative paths, never the writable area.
        let real = super::wsfs::resolve(&wanted)
            .ok_or_else(|| usage(format!("cd {target}: no such directory")))?;
        if !super::wsfs::is_dir(&real) {
            return Err(usage(format!("cd {target}: not a directory")));
        }
        let rs = roots(ctx, &self.ws)?;
        pick_read(&rs, &real, base)?;
        dirs.previous = Some(base.clone());
        dirs.cwd = Some(real.clone());
        dirs.workspace.get_or_insert(self.ws.clone());
        super::session::save(&ctx.state_dir, &ctx.session, &dirs).map_err(|e| BrokerError::Io {
            what: format!("saving the directories of session {}", ctx.session),
            source: e,
        })?;
        Ok(real)
    }

    fn record(&mut self, res: &Result<PathBuf, BrokerError>, rec: &mut audit::Record) {
        rec.exit_code = res.as_ref().ok().map(|_| 0);
    }
}

/// Backup retention (policy `[undo] keep_versions`, `backups_max_total`), keeping every blob a
/// snapshot index refers to. Returns (blobs removed, bytes freed).
pub fn prune_backups(state_dir: &Path, policy: &Policy) -> Result<(u64, u64), BrokerError> {
    let mut pinned = std::collections::HashSet::new();
    // not-ws: the broker's own state directory
    if let Ok(rd) = std::fs::read_dir(state_dir.join("snapshots")) {
        for e in rd.flatten() {
            // not-ws: the broker's own state directory
            if let Ok(d) = std::fs::read(e.path())
                && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&d)
                && let Some(files) = v["files"].as_array()
            {
                for f in files {
                    if let Some(sha) = f[1]["sha256"].as_str() {
                        pinned.insert(sha.to_string());
                    }
                }
            }
        }
    }
    journal::prune_backups(
        state_dir,
        policy.undo.keep_versions as usize,
        policy.undo.backups_max_total,
        &pinned,
    )
    .map_err(j_err)
}

/// Applies the backup retention at most once an hour (it reads the journal and the store).
pub fn prune_backups_hourly(state_dir: &Path, policy: &Policy) {
    let marker = state_dir.join("backups").join(".pruned");
    // not-ws: the broker's own state directory
    let fresh = std::fs::metadata(&marker)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < std::time::Duration::from_secs(3600));
    if fresh {
        return;
    }
    // not-ws: the broker's own state directory
    let _ = std::fs::write(&marker, b"");
    let _ = prune_backups(state_dir, policy);
}

/// Fuzz entry for the edit engine with undo: the edits of [`text::fuzz_edit`] (its
/// properties checked), then the undo path for real — the old content backed up, the new
/// written atomically beneath a root, the backup read back and written over it — must give
/// back the exact original bytes (an assertion). Setup and I/O errors are returned: the fuzz
/// target panics on them.
#[doc(hidden)]
pub fn fuzz_edit_undo(data: &[u8]) -> Result<(), String> {
    use std::sync::OnceLock;
    text::fuzz_edit(data);
    let file = data.split(|&b| b == 0xFF).next().unwrap_or_default();
    let edits: Vec<Edit> = data
        .split(|&b| b == 0xFF)
        .skip(1)
        .take(8)
        .filter_map(|p| {
            let (&k, rest) = p.split_first()?;
            let mut s = rest.splitn(2, |&b| b == 0xFE);
            let old = String::from_utf8_lossy(s.next().unwrap_or_default()).into_owned();
            let new = String::from_utf8_lossy(s.next().unwrap_or_default()).into_owned();
            Some(Edit::Replace {
                old,
                new,
                all: k % 2 == 1,
            })
        })
        .collect();
    let Ok(out) = text::apply(file, &edits) else {
        return Ok(());
    };
    static DIR: OnceLock<Result<(PathBuf, Root), String>> = OnceLock::new();
    let (state, root) = DIR
        .get_or_init(|| {
            let d = std::env::temp_dir().join(format!("gateway-fuzz-undo-{}", std::process::id()));
            // not-ws: the fuzz target's own scratch directory
            let _ = std::fs::remove_dir_all(&d);
            // not-ws: the fuzz target's own scratch directory
            std::fs::create_dir_all(d.join("ws")).map_err(|e| format!("fuzz dir: {e}"))?;
            let root = Root::open(&d.join("ws")).map_err(|e| format!("root: {e}"))?;
            Ok((d.join("state"), root))
        })
        .as_ref()
        .map_err(Clone::clone)?;
    let rel = Path::new("f.txt");
    fpath::write_atomic(root, rel, file).map_err(|x| format!("write original: {x}"))?;
    let id = journal::backup_deferred(state, file).map_err(|x| format!("backup: {x}"))?;
    fpath::write_atomic(root, rel, &out).map_err(|x| format!("write edited: {x}"))?;
    let back = journal::read_backup(state, &id).map_err(|x| format!("read backup: {x}"))?;
    fpath::write_atomic(root, rel, &back).map_err(|x| format!("undo: {x}"))?;
    // not-ws: the fuzz target's own scratch directory
    let now = std::fs::read(root.path.join(rel)).map_err(|x| format!("read: {x}"))?;
    assert!(now == file, "undo did not restore the exact bytes");
    Ok(())
}

/// Asks a person about a file tool's call: the daemon's queue for its client, else
/// `ctx.confirm` (`required`: an `ask` decision rather than a confirmation of an allow).
fn confirm(
    ctx: &FsContext<'_>,
    tool: &str,
    subject: &Path,
    decision: &crate::model::Decision,
    question: &str,
    required: bool,
) -> Option<bool> {
    if super::client::current().is_none() {
        return (ctx.confirm)(question, required);
    }
    super::ask_person(
        &super::Asking {
            state_dir: &ctx.state_dir,
            session: &ctx.session,
            caller: &ctx.caller,
            policy: ctx.policy,
            tool,
            command: super::redact_text(&subject.display().to_string()),
            decision,
            required,
        },
        question,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn fuzz_edit_undo_seeds() {
        for f in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/fs_edit"))
            .expect("corpus")
            .flatten()
        {
            let data = std::fs::read(f.path()).expect("seed");
            super::fuzz_edit_undo(&data).expect("fuzz_edit_undo");
        }
        super::fuzz_edit_undo(b"a\r\nb\r\n\xff\x00a\xfeX\nY").expect("fuzz_edit_undo");
        super::fuzz_edit_undo(b"\xef\xbb\xbfx x x\xff\x01x\xfeyy").expect("fuzz_edit_undo");
    }
}
