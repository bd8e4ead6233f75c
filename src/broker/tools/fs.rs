//! File tools: read, write, edit, history, undo. Each call is decided by the policy, resolved
//! beneath the allowed directories at the moment of use (`fsops::path`), backed up and
//! journalled before a change (`journal`), and recorded in the audit log. Over 1,000 lines:
//! the tools share one decision and recording path here; the worker, search and undo views
//! are modules of their own already.
//!
//! The allowed directories are the policy's sandbox: the writable trees for changes, the
//! readable ones for reads, minus denied, hidden and (for changes) protected paths, which are
//! checked on the file actually opened.
//!
//! This file is the broker's side: deciding, asking, recording, handing the call to the
//! confined worker (`fs/worker.rs`). Beside it, also the broker's: `fs/undo.rs` (history,
//! which change undo takes, skip) and `fs/upkeep.rs` (crash recovery, the trash, backup
//! retention). What runs inside the worker, the tools' bodies, lives in leaf modules that
//! never import this one but for the call's types (`arrows::the_worker_does_not_call_back`):
//!
//! ```text
//! fs.rs ──> fs/worker.rs ──> fs/ops.rs      act: the dispatch; ls, glob, grep, probe
//!                           ├──> fs/file.rs    one file's content: read, write, edit
//!                           ├──> fs/tree.rs    rm (trash, purge), mkdir, mv, restore
//!                           └──> fs/revert.rs  undo's body: one change, a group
//! the leaves ──> fs/roots.rs (the allowed directories), fs/types.rs (Tools, StateOps, errors)
//! ```
//!
//! About 1,000 lines: the broker's half of every file tool (decide, ask, record, hand to the
//! worker, answer its journal and trash requests) and their tests of that seam; what a tool
//! does is in the leaves above.

use crate::audit;
use crate::broker;
use crate::broker::{BrokerError, CdProblem, UndoProblem, redact_text};
use crate::fsops::path::{self as fpath, Root};
use crate::fsops::text;
use crate::journal;
use crate::model::{Decision, Effect, Tool, ToolCall};
use crate::policy::Policy;
use serde::Serialize;
use std::path::{Path, PathBuf};

pub use crate::fsops::search::{GrepMode, GrepOptions, GrepResult};
pub use crate::fsops::text::Edit;
pub use crate::journal::{Change, PathState, Phase};
pub use undo::{HistoryEntry, HistoryPage, Scope, history, history_page, skip};
pub use upkeep::{TrashEmptied, prune_backups, prune_backups_hourly, trash_empty, trash_list};

#[cfg(test)]
mod arrows;
mod file;
pub(in crate::broker) mod ops;
mod revert;
pub(in crate::broker) mod roots;
mod tree;
pub(in crate::broker) mod types;
mod undo;
pub use types::{DIFF_MAX_BYTES, DIFF_MAX_LINES, FsOp, FsOutput};
mod upkeep;
pub mod worker;

pub(crate) use roots::{RootPaths, root_paths};
use roots::{Roots, narrow, pick_read};
use types::usage;
use upkeep::recover;

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
    /// The caller: this process or a daemon client (its environment, rights, prompt).
    pub client: broker::client::Context,
    /// The call's cancellation (`sandbox::Spec::cancel`): a change waiting for another
    /// call's capture of the workspace stops waiting when it fires.
    pub cancel: Option<std::os::fd::BorrowedFd<'a>>,
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

fn j_err(e: journal::JournalError) -> BrokerError {
    BrokerError::Io {
        what: "journal".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

fn roots(ctx: &FsContext<'_>, ws: &Path) -> Result<Roots, BrokerError> {
    Ok(root_paths(&ctx.client, ctx.policy, &ctx.state_dir, ws, true)?.open())
}

/// Runs a file tool call through the invocation skeleton (`broker::invoke`): decide (on the
/// path as written and as resolved), ask, act in the confined worker, record.
pub fn run(ctx: &FsContext<'_>, op: FsOp) -> Result<FsResult, BrokerError> {
    let call = broker::invoke::Call {
        policy: &ctx.policy.name,
        state_dir: &ctx.state_dir,
        session: &ctx.session,
        caller: &ctx.caller,
        context: &ctx.client,
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
        diff_whole: None,
    };
    let done = broker::invoke::invoke(&call, &mut t)?;
    let mut output = done.output.redacted();
    if let FsOutput::Changed {
        diff,
        diff_truncated: true,
        ..
    } = &mut output
    {
        // The record's number is known once it is written.
        if let Some(i) = diff.rfind("[gateway: diff cut here") {
            let marker = diff[i..].replace(
                "`gateway log show SEQ`",
                &format!("`gateway log show {}`", done.seq),
            );
            diff.replace_range(i.., &marker);
        }
    }
    Ok(FsResult {
        decision: t.decision.ok_or_else(|| BrokerError::Invariant {
            tool: "fs".into(),
            what: "the call was performed without a decision",
        })?,
        output,
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
    /// A diff too long for the result: the whole of it as stored (the record's stdout).
    diff_whole: Option<audit::StreamDigest>,
}

impl broker::invoke::Tool for FsTool<'_, '_> {
    type Output = FsOutput;

    fn name(&self) -> &str {
        self.name
    }

    fn decide(&mut self, rec: &mut audit::Record) -> Result<Decision, BrokerError> {
        let ctx = self.ctx;
        let Some(op) = self.op.as_ref() else {
            return Err(BrokerError::Invariant {
                tool: "fs".into(),
                what: "the call was decided twice",
            });
        };
        // Paths can hold a token (a file named after one): the record passes the gate
        // (`broker::gate::record`) whole.
        rec.args = describe(op);
        rec.cwd = ctx.cwd.display().to_string();
        // A content over `[files] max_size` is refused here, before it travels to the worker
        // (copies of it cost the broker several times its size).
        if let FsOp::Write { path, content } = op
            && content.len() as u64 > ctx.policy.files.max_size
        {
            return Err(broker::refusal::Refusal::TooLarge {
                path: path.clone(),
                size: content.len() as u64,
                max: ctx.policy.files.max_size,
            }
            .into());
        }
        self.ws = broker::workspace_of(&ctx.client, &ctx.workspace)?;
        self.base = broker::workspace_of(&ctx.client, &ctx.cwd)?;
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
                &|c: &Change| broker::authz::may_revert(&ctx.client, c.uid, String::new).is_ok(),
            )?),
            FsOp::TrashRestore { name } => Some(find_removal(&ctx.state_dir, name, &ctx.client)?),
            _ => None,
        };
        // A daemon client undoes and restores only its own changes (the admin anyone's).
        if let Some(c) = &self.undo_target {
            broker::authz::may_revert(&ctx.client, c.uid, || format!("change {}", c.id))?;
        }
        // A removal whose trash item `gateway trash empty` removed for good: nothing to
        // restore, said as such (the item's info is its tombstone).
        if let Some(c) = &self.undo_target
            && c.after == PathState::Absent
            && let Some(name) = &c.trash
            && let Some(when) = journal::trash_emptied(&ctx.state_dir, name)
        {
            return Err(usage(UndoProblem::TrashEmptied {
                id: c.id,
                name: name.clone(),
                path: c.path.clone(),
                when: when.to_string(),
            }));
        }
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
            &broker::shell_env(&ctx.client, base),
        );
        // Denied and protected paths, judged as written and as resolved, refuse the call
        // here, named and recorded as a deny (`broker::paths`); the worker's confinement is
        // the second wall.
        let paths = root_paths(
            &ctx.client,
            ctx.policy,
            &ctx.state_dir,
            &self.ws,
            op.only_reads(),
        );
        if let Ok(rp) = &paths {
            let subjects = decision_paths(&self.subject, op, base);
            let refused = broker::paths::refusals(ctx.policy, rp, op, &subjects, &abs_of);
            if !refused.is_empty() {
                decision.effect = Effect::Deny;
                decision.rules.extend(refused);
            }
        }
        self.paths = Some(paths);
        broker::guard::redact_decision(&mut decision);
        self.decision = Some(decision.clone());
        Ok(decision)
    }

    fn ask(&mut self, decision: &Decision) -> bool {
        let rules = broker::rules_lines(decision);
        let q = format!(
            "{} {} needs approval:{rules}\nDo it?",
            self.name,
            crate::shown::visible(&self.subject.to_string_lossy())
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
            crate::shown::visible(&self.subject.to_string_lossy())
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
            return Err(BrokerError::Invariant {
                tool: "fs".into(),
                what: "the call was performed twice",
            });
        };
        let (res, enforcement) = perform(
            self.ctx,
            (&self.ws, &self.base),
            paths,
            op,
            self.undo_target.take(),
        );
        self.enforcement = enforcement;
        let mut res = res;
        if let Ok(out) = &mut res {
            self.diff_whole = bound_diff(&self.ctx.state_dir, self.ctx.policy, out);
        }
        res
    }

    fn record(&mut self, res: &Result<FsOutput, BrokerError>, rec: &mut audit::Record) {
        rec.enforcement = self.enforcement.as_ref().map(broker::enforcement_summary);
        // The whole of a diff the result shows only the head of: `gateway log show SEQ`.
        rec.stdout = self.diff_whole.take();
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

/// Counts a unified diff's added and removed lines (its `---`/`+++` header not counted).
pub(crate) fn diff_stat(diff: &str) -> (u64, u64) {
    let mut lines = diff.lines().peekable();
    if lines.peek().is_some_and(|l| l.starts_with("--- ")) {
        lines.next();
        if lines.peek().is_some_and(|l| l.starts_with("+++ ")) {
            lines.next();
        }
    }
    lines.fold((0, 0), |(a, r), l| match l.as_bytes().first() {
        Some(b'+') => (a + 1, r),
        Some(b'-') => (a, r + 1),
        _ => (a, r),
    })
}

/// The head of `diff` within [`DIFF_MAX_LINES`] lines and [`DIFF_MAX_BYTES`] bytes (cut at
/// a line end), or `None` when all of it fits.
pub(crate) fn diff_head(diff: &str) -> Option<&str> {
    let mut end = 0;
    for (n, l) in diff.split_inclusive('\n').enumerate() {
        if n == DIFF_MAX_LINES || end + l.len() > DIFF_MAX_BYTES {
            return Some(&diff[..end]);
        }
        end += l.len();
    }
    None
}

/// A change's diff as a result carries it: the `+`/`-` line counts, and a diff longer than
/// [`DIFF_MAX_LINES`] lines or [`DIFF_MAX_BYTES`] bytes cut to its head with a marker. The
/// whole (redacted) diff is stored as an audit artifact (policy `audit.store_output`), whose
/// digest is returned for the record's `stdout`. A 4 MB write does not print 4 MB.
fn bound_diff(
    state_dir: &Path,
    policy: &Policy,
    out: &mut FsOutput,
) -> Option<audit::StreamDigest> {
    let FsOutput::Changed {
        diff,
        lines_added,
        lines_removed,
        diff_truncated,
        diff_whole,
        ..
    } = out
    else {
        return None;
    };
    (*lines_added, *lines_removed) = diff_stat(diff);
    let head = diff_head(diff)?;
    let a = policy.audit;
    let mut w = audit::artifacts::ArtifactWriter::new(
        state_dir,
        if a.store_output { a.artifact_max } else { 0 },
    );
    w.write(diff.as_bytes());
    let whole = w.finish();
    let total_lines = diff.lines().count();
    let shown_lines = head.lines().count();
    let mut cut = head.to_string();
    cut.push_str(&format!(
        "[gateway: diff cut here: {} more line(s), {} more byte(s) not shown; {}]\n",
        total_lines - shown_lines,
        diff.len() - head.len(),
        if whole.artifact.is_some() {
            "the whole diff is this call's audit record's stdout: `gateway log show SEQ`"
        } else {
            "the whole diff was not stored (policy audit.store_output = false); the file holds the new content, `gateway undo --dry-run` shows the way back"
        }
    ));
    *diff = cut;
    *diff_truncated = true;
    *diff_whole = Some(whole.clone());
    Some(whole)
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

/// Runs the tool's body in a confined worker (`fs/worker.rs`), the broker answering its
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
            // A change waits for the command that captures this workspace (`journal::capture`),
            // whose snapshot would otherwise claim it; then the journal's lock.
            let cancel = ctx.cancel.or_else(|| ctx.client.cancel());
            let capture = journal::capture_lock(&ctx.state_dir, ws, cancel).map_err(j_err)?;
            let lock = journal::lock(&ctx.state_dir).map_err(j_err)?;
            recover(&ctx.state_dir, &lock)?;
            Some((capture, lock))
        } else {
            None
        };
        let paths = narrow(paths?, &op, base);
        Ok::<_, BrokerError>((lock, paths))
    })();
    let (locks, paths) = match prepared {
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
    if let Some(u) = ctx.client.run_as()
        && crate::sandbox::effective_uid() == 0
    {
        return (
            Err(broker::Conflict::FileToolsThroughRootDaemon { uid: u.uid }.into()),
            None,
        );
    }
    let req = worker::Request {
        op,
        ws: base.to_path_buf(),
        workspace: ws.to_path_buf(),
        roots: paths,
        redact: ctx.policy.secrets.output != crate::model::SecretsOutput::Warn,
        max_size: ctx.policy.files.max_size,
        trash_files,
        undo_target,
        uid: ctx.client.fs_identity().map(|i| i.uid),
    };
    // A daemon client's worker, as its commands, gets no more than the client's own limits.
    let ceiling = match ctx.client.client() {
        None => vec![],
        Some(c) => match crate::sandbox::caller_rlimits(c.caller.pid) {
            Ok(v) => v,
            Err(e) => {
                return (
                    Err(BrokerError::Io {
                        what: format!(
                            "reading the resource limits of the client (pid {}), which the file tool may not exceed",
                            c.caller.pid
                        ),
                        source: e,
                    }),
                    None,
                );
            }
        },
    };
    worker::run(
        ctx.policy,
        &ctx.state_dir,
        locks.as_ref().map(|l| &l.1),
        req,
        (ceiling, ctx.cancel.or_else(|| ctx.client.cancel())),
    )
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

/// The removal (rm) that put trash item `name` there and was not undone.
fn find_removal(
    state_dir: &Path,
    name: &str,
    cx: &broker::client::Context,
) -> Result<Change, BrokerError> {
    // A daemon client that does not see everyone's trash finds only its own items: another
    // user's is "no trash item", as a name nobody removed (not an oracle for what they did).
    let seen = broker::authz::seen_uid(cx);
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
                && seen.is_none_or(|u| c.uid == Some(u))
        })
        .map(|c| (*c).clone())
        .ok_or_else(|| {
            usage(UndoProblem::NoTrashItem {
                name: name.to_string(),
            })
        })
}

/// The session's virtual cwd, if `cd` set one (and it still exists).
pub fn session_cwd(
    cx: &broker::client::Context,
    state_dir: &Path,
    session: &str,
) -> Option<PathBuf> {
    broker::session::cwd(cx, state_dir, session)
}

/// `cd`: changes the session's virtual working directory (never the broker's own). `..`,
/// `~`, `~/x`, `-` (the previous one), absolute and relative paths; the target must be a
/// directory the policy lets tools read. Returns the new directory.
pub fn cd(ctx: &FsContext<'_>, target: &str) -> Result<PathBuf, BrokerError> {
    let call = broker::invoke::Call {
        policy: &ctx.policy.name,
        state_dir: &ctx.state_dir,
        session: &ctx.session,
        caller: &ctx.caller,
        context: &ctx.client,
    };
    let mut t = CdTool {
        ctx,
        target,
        ws: PathBuf::new(),
        base: PathBuf::new(),
    };
    broker::invoke::invoke(&call, &mut t).map(|d| d.output)
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

impl broker::invoke::Tool for CdTool<'_, '_> {
    type Output = PathBuf;

    fn name(&self) -> &str {
        "fs.cd"
    }

    fn decide(&mut self, rec: &mut audit::Record) -> Result<Decision, BrokerError> {
        rec.args = vec![self.target.to_string()];
        rec.cwd = self.ctx.cwd.display().to_string();
        self.ws = broker::workspace_of(&self.ctx.client, &self.ctx.workspace)?;
        self.base = broker::workspace_of(&self.ctx.client, &self.ctx.cwd)?;
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
        let mut dirs = broker::session::load(&ctx.client, &ctx.state_dir, &ctx.session);
        let home = PathBuf::from(broker::shell_env(&ctx.client, base).home);
        let wanted = match target {
            "-" => dirs
                .previous
                .clone()
                .ok_or_else(|| usage(CdProblem::NoPrevious))?,
            "~" => home.clone(),
            t if t.starts_with("~/") => home.join(&t[2..]),
            t => base.join(t),
        };
        // The readable roots are those of the session's workspace: `cd` moves the base of
        // relative paths, never the writable area.
        // Resolved with the caller's rights: a client learns nothing of a directory it
        // could not enter itself.
        let look = || {
            crate::workspace::wsfs::resolve(&wanted).map(|r| {
                let dir = crate::workspace::wsfs::is_dir(&r);
                (r, dir)
            })
        };
        // (A daemon running as a normal user cannot take another identity: its own rights.)
        let real = if crate::sandbox::effective_uid() == 0 {
            ctx.client
                .as_client(look)
                .map_err(|source| BrokerError::Io {
                    what: format!("cd {target}: resolving it with the caller's rights"),
                    source,
                })?
        } else {
            look()
        };
        let real = match real {
            Some((r, true)) => r,
            Some(_) => {
                return Err(usage(CdProblem::NotADirectory {
                    target: target.to_string(),
                }));
            }
            None => {
                return Err(usage(CdProblem::NoSuchDirectory {
                    target: target.to_string(),
                }));
            }
        };
        let rs = roots(ctx, &self.ws)?;
        pick_read(&rs, &real, base)?;
        dirs.previous = Some(base.clone());
        dirs.cwd = Some(real.clone());
        dirs.workspace.get_or_insert(self.ws.clone());
        broker::session::save(&ctx.client, &ctx.state_dir, &ctx.session, &dirs).map_err(|e| {
            BrokerError::Io {
                what: format!("saving the directories of session {}", ctx.session),
                source: e,
            }
        })?;
        Ok(real)
    }

    fn record(&mut self, res: &Result<PathBuf, BrokerError>, rec: &mut audit::Record) {
        rec.exit_code = res.as_ref().ok().map(|_| 0);
    }
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
    let Some(c) = ctx.client.client() else {
        return (ctx.confirm)(question, required);
    };
    broker::ask_person(
        &broker::Asking {
            client: c,
            state_dir: &ctx.state_dir,
            session: &ctx.session,
            caller: &ctx.caller,
            policy: ctx.policy,
            tool,
            command: broker::redact_text(&subject.display().to_string()),
            decision,
            required,
            workspace: &broker::workspace(&ctx.workspace).unwrap_or_else(|_| ctx.workspace.clone()),
            cwd: &broker::workspace(&ctx.cwd).unwrap_or_else(|_| ctx.cwd.clone()),
            env_digest: String::new(),
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
