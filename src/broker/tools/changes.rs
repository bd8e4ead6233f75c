//! The held change sets (`workspace::capture`): a reviewed run's (`exec --review`), a run's
//! whose changes could not all be applied, a run's whose broker died. Listed and shown to
//! their owner; applied (`gateway apply ID`, each path journalled, so `gateway undo` reverts
//! them) or discarded (`gateway discard ID`) on the invocation skeleton, recorded like every
//! call. A daemon client sees and acts on its own sets only (`authz::may_revert`).

use super::fs::FsContext;
use crate::audit;
use crate::broker::report::changes::{ChangeSet, ChangesReport, PendingChange};
use crate::broker::{BrokerError, UsageError};
use crate::model::{Decision, Effect};
use crate::workspace::capture::{self, Layer, Meta, Up};
use crate::workspace::{apply, wsfs};
use std::path::PathBuf;

/// The set `id` if the caller may see it; `None` otherwise (another user's set is as
/// absent as one that does not exist).
fn own(ctx: &FsContext<'_>, id: &str) -> Option<(Layer, Meta)> {
    let (l, m) = Layer::open(&ctx.state_dir, id)?;
    crate::broker::authz::may_revert(&ctx.client, m.uid, String::new)
        .ok()
        .map(|()| (l, m))
}

fn no_such(id: &str) -> BrokerError {
    BrokerError::Usage(UsageError::NoChangeSet { id: id.to_string() })
}

/// A path as a report's JSON string shows it (a name that is not UTF-8 with U+FFFD).
fn lossy(p: PathBuf) -> PathBuf {
    match p.to_str() {
        Some(_) => p,
        None => PathBuf::from(p.to_string_lossy().into_owned()),
    }
}

/// The caller's held sets, oldest first.
pub fn list(ctx: &FsContext<'_>) -> ChangesReport {
    let sets = capture::held(&ctx.state_dir)
        .into_iter()
        .filter(|(_, m)| crate::broker::authz::may_revert(&ctx.client, m.uid, String::new).is_ok())
        .map(|(l, m)| set_of(ctx, &l, &m))
        .collect();
    ChangesReport {
        action: "list".into(),
        sets,
        ..ChangesReport::default()
    }
}

/// One set, and its diff when asked.
pub fn show(ctx: &FsContext<'_>, id: &str, diff: bool) -> Result<ChangesReport, BrokerError> {
    let (l, m) = own(ctx, id).ok_or_else(|| no_such(id))?;
    let set = set_of(ctx, &l, &m);
    let diff = diff.then(|| diff_of(ctx, &l));
    Ok(ChangesReport {
        action: "show".into(),
        sets: vec![set],
        diff,
        ..ChangesReport::default()
    })
}

/// A set as shown: what it would change (paths redacted like any output).
fn set_of(ctx: &FsContext<'_>, l: &Layer, m: &Meta) -> ChangeSet {
    let who = ctx.client.fs_identity();
    ChangeSet {
        id: m.id.clone(),
        workspace: l.workspace.clone(),
        started: m.started,
        command: m.command.clone(),
        state: m.state.clone(),
        why: m.why.clone(),
        changes: pending(l, who.as_ref())
            .into_iter()
            .map(|(p, kind)| PendingChange {
                path: lossy(super::fs::redact_path(p)),
                kind: kind.into(),
            })
            .collect(),
    }
}

/// What a held layer would change: (path, `created` | `changed` | `deleted`), parents first.
pub(crate) fn pending(l: &Layer, who: Option<&wsfs::Identity>) -> Vec<(PathBuf, &'static str)> {
    pending_entries(l, who)
        .into_iter()
        .map(|p| (l.workspace.join(&p.rel), p.kind))
        .collect()
}

/// One path a held layer would change.
struct Pending {
    rel: PathBuf,
    kind: &'static str,
    up: Up,
    lower: Option<wsfs::Kind>,
}

/// [`pending`], with what the run left and what the workspace has at each path.
fn pending_entries(l: &Layer, who: Option<&wsfs::Identity>) -> Vec<Pending> {
    let Ok(entries) = capture::entries(&l.upper()) else {
        return Vec::new();
    };
    let tree = wsfs::as_identity(who, || wsfs::Tree::open(&l.workspace))
        .ok()
        .and_then(Result::ok);
    entries
        .into_iter()
        .filter_map(|e| {
            let lower = tree
                .as_ref()
                .and_then(|t| wsfs::as_identity(who, || t.kind(&e.rel)).ok())
                .and_then(Result::ok)
                .flatten();
            let kind = match (&e.up, &lower) {
                (Up::Whiteout, None) => return None,
                (Up::Whiteout, Some(_)) => "deleted",
                // A directory the run only entered, or whose mode it changed.
                (
                    Up::Dir {
                        opaque: false,
                        mode,
                    },
                    Some(wsfs::Kind::Dir { mode: m }),
                ) => {
                    if (mode & 0o7777) == (m & 0o7777) {
                        return None;
                    }
                    "changed"
                }
                (_, None) => "created",
                _ => "changed",
            };
            Some(Pending {
                rel: e.rel,
                kind,
                up: e.up,
                lower,
            })
        })
        .collect()
}

/// The unified diff of a set's files, redacted: text within the file tools' size bound in
/// full; a mode change as git writes it (`old mode`/`new mode`, directories too); a file over
/// the bound, or not text, by its sizes — never an empty diff that reads as "no change".
fn diff_of(ctx: &FsContext<'_>, l: &Layer) -> String {
    let who = ctx.client.fs_identity();
    let max = ctx.policy.files.max_size.min(1 << 20);
    let tree = wsfs::as_identity(who.as_ref(), || wsfs::Tree::open(&l.workspace))
        .ok()
        .and_then(Result::ok);
    let upper = wsfs::Tree::open(&l.upper()).ok();
    let mut out = String::new();
    for p in pending_entries(l, who.as_ref()) {
        let rel = &p.rel;
        let name = rel.to_string_lossy();
        let (old_mode, old_size) = match &p.lower {
            Some(wsfs::Kind::File { mode, size, .. }) => (Some(0o100_000 | (mode & 0o7777)), *size),
            Some(wsfs::Kind::Dir { mode }) => (Some(0o040_000 | (mode & 0o7777)), 0),
            _ => (None, 0),
        };
        let (new_mode, new_size) = match &p.up {
            Up::File { mode, size, .. } => (Some(0o100_000 | (mode & 0o7777)), *size),
            Up::Dir { mode, .. } => (Some(0o040_000 | (mode & 0o7777)), 0),
            _ => (None, 0),
        };
        if let (Some(a), Some(b)) = (old_mode, new_mode)
            && a != b
        {
            out.push_str(&format!(
                "diff --gateway a/{name} b/{name}\nold mode {a:o}\nnew mode {b:o}\n"
            ));
        }
        let files = matches!(p.lower, None | Some(wsfs::Kind::File { .. }))
            && matches!(p.up, Up::File { .. } | Up::Whiteout);
        if !files {
            continue;
        }
        if old_size > max || new_size > max {
            out.push_str(&format!(
                "diff --gateway a/{name} b/{name}\n{} ({old_size} bytes -> {new_size} bytes; over the diff's bound of {max} bytes, not shown)\n",
                p.kind
            ));
            continue;
        }
        let old = tree
            .as_ref()
            .and_then(|t| t.read_as(who.as_ref(), rel, max))
            .unwrap_or_default();
        let new = upper
            .as_ref()
            .and_then(|u| u.read(rel, max))
            .unwrap_or_default();
        if old == new && p.kind != "deleted" {
            continue;
        }
        out.push_str(&crate::fsops::text::unified_diff(&name, &old, &new));
    }
    crate::shown::visible_lines(&crate::broker::redact_text(&out)).into_owned()
}

/// `gateway apply ID` / `gateway discard ID`.
pub fn act(ctx: &FsContext<'_>, id: &str, apply: bool) -> Result<ChangesReport, BrokerError> {
    let call = crate::broker::invoke::Call {
        policy: &ctx.policy.name,
        state_dir: &ctx.state_dir,
        session: &ctx.session,
        caller: &ctx.caller,
        context: &ctx.client,
    };
    let mut t = ActTool {
        ctx,
        id: id.to_string(),
        apply,
        report: ChangesReport::default(),
    };
    crate::broker::invoke::invoke(&call, &mut t).map(|d| {
        let mut r = d.output;
        r.audit_seq = Some(d.seq);
        r
    })
}

/// Apply or discard on the invocation skeleton: allowed by the built-in rule to the set's
/// owner; another user's set is refused (`daemon.owner`), recorded as a deny.
struct ActTool<'c, 'a> {
    ctx: &'c FsContext<'a>,
    id: String,
    apply: bool,
    report: ChangesReport,
}

impl crate::broker::invoke::Tool for ActTool<'_, '_> {
    type Output = ChangesReport;

    fn name(&self) -> &str {
        if self.apply { "apply" } else { "discard" }
    }

    fn decide(&mut self, rec: &mut audit::Record) -> Result<Decision, BrokerError> {
        rec.args = vec![self.id.clone()];
        let Some((l, m)) = Layer::open(&self.ctx.state_dir, &self.id) else {
            return Err(no_such(&self.id));
        };
        rec.cwd = l.workspace.display().to_string();
        crate::broker::authz::may_revert(&self.ctx.client, m.uid, || {
            format!("change set {}", self.id)
        })?;
        let reason = if self.apply {
            "applying a held change set: each path journalled, undoable"
        } else {
            "discarding a held change set: the workspace is not touched"
        };
        Ok(Decision {
            effect: Effect::Allow,
            rules: vec![crate::model::RuleMatch {
                id: "builtin".into(),
                effect: Effect::Allow,
                reason: reason.into(),
                subject: self.id.clone(),
            }],
            commands: vec![],
            unanalysable: vec![],
        })
    }

    fn ask(&mut self, _decision: &Decision) -> bool {
        false
    }

    fn not_performed(&mut self, _d: Decision, _a: Option<bool>) -> ChangesReport {
        ChangesReport::default()
    }

    fn perform(&mut self, _d: Decision, _a: Option<bool>) -> Result<ChangesReport, BrokerError> {
        let ctx = self.ctx;
        let (l, m) = own(ctx, &self.id).ok_or_else(|| no_such(&self.id))?;
        if m.state == "running" && crate::broker::intent::layer_in_flight(&ctx.state_dir, &self.id)
        {
            return Err(BrokerError::Usage(UsageError::ChangeSetRunning {
                id: self.id.clone(),
            }));
        }
        let set = set_of(ctx, &l, &m);
        if !self.apply {
            l.remove().map_err(|e| BrokerError::Io {
                what: format!("removing the change set {}", l.dir.display()),
                source: e,
            })?;
            return Ok(ChangesReport {
                action: "discard".into(),
                sets: vec![set],
                ..ChangesReport::default()
            });
        }
        let who = ctx.client.fs_identity();
        let group = format!("apply-{}", self.id);
        // What the set holds in git's places, bare repositories and what git's config names
        // is held back as from a run (`places::LayerCheck`), with `.git` and every protected
        // name (`git_place`).
        // Judged and applied as one, after any other apply (`broker::capture::finish`).
        let _serial = crate::journal::lock_named(&ctx.state_dir, "apply.lock").map_err(|e| {
            BrokerError::Io {
                what: "the state directory's apply lock".into(),
                source: std::io::Error::other(e.to_string()),
            }
        })?;
        let check = crate::broker::capture::held_set_check(
            &ctx.state_dir,
            &ctx.policy.sandbox.protected,
            &ctx.client,
            &l,
        )?;
        let a = apply::apply(&apply::Apply {
            state_dir: &ctx.state_dir,
            layer: &l,
            group: &group,
            tool: "apply",
            max_file: ctx.policy.undo.snapshot_max_file,
            quota: crate::broker::undo_limits(&ctx.policy.undo),
            who: who.as_ref(),
            hold: &|rel, up, existed| {
                apply::git_place(rel, &ctx.policy.sandbox.protected, true, existed)
                    .or_else(|| check.check(rel, up))
            },
            quarantine: None,
            record: true,
            since: (m.started, m.journal_last),
        })?;
        let shown = |p: PathBuf| lossy(super::fs::redact_path(p));
        let report = ChangesReport {
            action: "apply".into(),
            sets: vec![set],
            group: Some(group),
            applied: a
                .changes
                .iter()
                .map(|(p, k, id)| (shown(p.clone()), (*k).to_string(), *id))
                .collect(),
            not_undoable: a
                .not_undoable
                .iter()
                .map(|(p, w)| (shown(p.clone()), crate::broker::redact_text(w)))
                .collect(),
            not_applied: a
                .not_applied
                .iter()
                .chain(&a.kept)
                .map(|(p, w)| (shown(p.clone()), crate::broker::redact_text(w)))
                .collect(),
            ..ChangesReport::default()
        };
        if a.not_applied.is_empty() {
            let _ = l.remove();
        } else if let Some((_, mut meta)) = Layer::open(&ctx.state_dir, &self.id) {
            meta.state = "failed".into();
            meta.why = Some(format!(
                "{} path(s) could not be applied",
                a.not_applied.len()
            ));
            let _ = l.save(&meta);
        }
        Ok(report)
    }

    fn record(&mut self, res: &Result<ChangesReport, BrokerError>, rec: &mut audit::Record) {
        if let Ok(r) = res {
            rec.exit_code = Some(i32::from(!r.not_applied.is_empty()));
            if !r.applied.is_empty() {
                rec.journal_group.clone_from(&r.group);
                rec.files_changed = r.applied.len() as u64;
            }
            self.report.action.clone_from(&r.action);
        }
    }
}
