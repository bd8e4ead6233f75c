//! Undo's broker side: which change `undo` takes (per workspace, passing over the ones
//! `undo --skip` set aside), `history` by workspace, and `undo --skip` itself. The revert runs
//! in the confined worker (`fs/revert.rs`).

use super::revert::missing_reason;
use super::types::usage;
use super::{BrokerError, Change, FsContext, PathState, Phase, j_err};
use crate::audit;
use crate::broker::UndoProblem;
use crate::journal;
use crate::model::{Decision, Effect};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Which changes `history` and `undo` (without an id) look at.
#[derive(Clone, Copy, Debug)]
pub enum Scope<'a> {
    /// Those made in this workspace (canonical) or beneath it ([`Change::in_workspace`]).
    Workspace(&'a Path),
    /// Every workspace's.
    All,
}

impl Scope<'_> {
    fn holds(self, c: &Change) -> bool {
        match self {
            Scope::All => true,
            Scope::Workspace(ws) => c.in_workspace(ws),
        }
    }
}

/// One change as `history` shows it.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct HistoryEntry {
    /// The change.
    pub change: Change,
    /// Done, pending or not done.
    pub phase: Phase,
    /// `undo --skip` passed over it: plain `undo` does not take it.
    pub skipped: bool,
    /// Why undo cannot bring back the content before it: not backed up (the store's quota,
    /// the disk nearly full) or expired since. `None`: nothing missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup_missing: Option<String>,
}

/// Which changes of a journal are in a scope, by the index where it can tell (the workspace
/// hashes whose path is in the scope); `None` for a change that did not record its workspace
/// (older journals: its line is read).
struct InScope {
    /// `None`: every workspace.
    hashes: Option<HashSet<u64>>,
    /// The last workspace hash asked about, and the answer.
    last: std::cell::Cell<(u64, bool)>,
}

impl InScope {
    fn new(v: &journal::View, scope: Scope<'_>) -> Result<InScope, BrokerError> {
        Ok(InScope {
            hashes: match scope {
                Scope::All => None,
                Scope::Workspace(ws) => Some(
                    v.workspaces()
                        .map_err(j_err)?
                        .into_iter()
                        .filter(|(_, w)| w.starts_with(ws))
                        .map(|(h, _)| h)
                        .collect(),
                ),
            },
            last: std::cell::Cell::new((0, false)),
        })
    }

    fn holds(&self, e: &journal::Entry) -> Option<bool> {
        match &self.hashes {
            None => Some(true),
            Some(_) if e.ws == 0 => None,
            // Changes come in runs of one workspace: the last answer is kept.
            Some(h) => Some(match self.last.get() {
                (ws, b) if ws == e.ws => b,
                _ => {
                    let b = h.contains(&e.ws);
                    self.last.set((e.ws, b));
                    b
                }
            }),
        }
    }

    /// Is `e` in the scope, its line read only when the index cannot tell.
    fn check(
        &self,
        v: &journal::View,
        scope: Scope<'_>,
        e: &journal::Entry,
    ) -> Result<bool, BrokerError> {
        match self.holds(e) {
            Some(b) => Ok(b),
            None => Ok(scope.holds(&v.load(e).map_err(j_err)?)),
        }
    }
}

/// A page of `history`.
#[derive(Clone, Debug, Default)]
pub struct HistoryPage {
    /// The newest changes asked for, oldest first.
    pub changes: Vec<HistoryEntry>,
    /// How many older ones (in the scope, since the time asked) are left out.
    pub omitted: usize,
}

/// The journal's changes in `scope` that `cx` may see, oldest first: a daemon client that is
/// neither auditor nor admin sees its own changes only (`authz::seen_uid`), whichever front
/// end asks (the CLI, the MCP `history` tool, the REPL).
pub fn history(
    state_dir: &Path,
    scope: Scope<'_>,
    cx: &crate::broker::client::Context,
) -> Result<Vec<HistoryEntry>, BrokerError> {
    Ok(history_page(state_dir, scope, cx, 0, None)?.changes)
}

/// [`history`]'s newest `limit` changes (0: all) made at or after `since` (seconds since the
/// epoch), and how many older ones are left out. Through the journal's index: only the lines
/// shown are read.
pub fn history_page(
    state_dir: &Path,
    scope: Scope<'_>,
    cx: &crate::broker::client::Context,
    limit: usize,
    since: Option<u64>,
) -> Result<HistoryPage, BrokerError> {
    let seen = crate::broker::authz::seen_uid(cx);
    with_view(state_dir, |v| {
        page(state_dir, v, scope, seen, (limit, since))
    })
}

/// Runs `f` on the journal's view, and once more if it failed after finding the index out of
/// step with the journal (then removed: the view is rebuilt from the journal).
fn with_view<T>(
    state_dir: &Path,
    f: impl Fn(&journal::View) -> Result<T, BrokerError>,
) -> Result<T, BrokerError> {
    let r = f(&journal::View::open(state_dir).map_err(j_err)?);
    let idx = journal::index::index_path(state_dir);
    // not-ws: the journal's index, in the broker's own state directory
    if r.is_err() && !idx.exists() {
        return f(&journal::View::open(state_dir).map_err(j_err)?);
    }
    r
}

fn page(
    state_dir: &Path,
    v: &journal::View,
    scope: Scope<'_>,
    seen: Option<u32>,
    (limit, since): (usize, Option<u64>),
) -> Result<HistoryPage, BrokerError> {
    let within = InScope::new(v, scope)?;
    let mut hits = Vec::new();
    for e in v.entries() {
        if since.is_some_and(|t| e.time < t) || seen.is_some_and(|u| e.uid != Some(u)) {
            continue;
        }
        if within.check(v, scope, e)? {
            hits.push(e);
        }
    }
    let omitted = if limit == 0 {
        0
    } else {
        hits.len().saturating_sub(limit)
    };
    let mut changes = Vec::with_capacity(hits.len() - omitted);
    for e in &hits[omitted..] {
        let mut change = v.load(e).map_err(j_err)?;
        let backup_missing = match &change.before {
            PathState::File { sha256, .. } if !journal::has_backup(state_dir, sha256) => {
                Some(missing_reason(&change))
            }
            _ => None,
        };
        // Shown, not acted on: a secret in a name is redacted as in any output.
        change.path = super::redact_path(change.path);
        change.dest = change.dest.map(super::redact_path);
        changes.push(HistoryEntry {
            skipped: e.skipped,
            backup_missing,
            change,
            phase: e.phase,
        });
    }
    Ok(HistoryPage { changes, omitted })
}

/// Why undo cannot revert `c` (its entry says so, or its content before is not in the backup
/// store), if it cannot.
fn cannot_undo(state_dir: &Path, c: &Change) -> bool {
    c.not_undoable.is_some()
        || matches!(&c.before, PathState::File { sha256, .. } if !journal::has_backup(state_dir, sha256))
}

/// The change to undo: the given id (any workspace's: the policy decides), or the newest
/// committed change in `scope` that is not an undo, not undone and not skipped.
/// The change `undo` reverts: `id`, else the newest open one in `scope` that `mine` accepts
/// (a daemon client's own: another user's newer change in the same workspace is passed
/// over, not refused). A change undo could not revert when it reverted the rest of its group
/// is settled with them: not taken again. Through the journal's index: the lines of the
/// candidates only are read.
pub(super) fn find_change(
    state_dir: &Path,
    id: Option<u64>,
    scope: Scope<'_>,
    mine: &dyn Fn(&Change) -> bool,
) -> Result<Change, BrokerError> {
    with_view(state_dir, |v| find_in(state_dir, v, id, scope, mine))
}

fn find_in(
    state_dir: &Path,
    v: &journal::View,
    id: Option<u64>,
    scope: Scope<'_>,
    mine: &dyn Fn(&Change) -> bool,
) -> Result<Change, BrokerError> {
    let committed = |e: &&journal::Entry| e.phase == Phase::Committed;
    if let Some(id) = id {
        return match v.get(id).filter(committed) {
            Some(e) => v.load(e).map_err(j_err),
            None => Err(usage(UndoProblem::NoSuchChange { id })),
        };
    }
    let undone = v.undone();
    let partly_undone: HashSet<u64> = v
        .entries()
        .iter()
        .filter(|e| e.group != 0 && undone.contains(&e.id))
        .map(|e| e.group)
        .collect();
    let open = |e: &&journal::Entry| {
        e.phase == Phase::Committed && e.undoes.is_none() && !undone.contains(&e.id) && !e.skipped
    };
    let within = InScope::new(v, scope)?;
    let settled = |e: &journal::Entry, c: &Change| {
        e.group != 0 && partly_undone.contains(&e.group) && cannot_undo(state_dir, c)
    };
    for e in v.entries().iter().rev().filter(open) {
        if within.holds(e) == Some(false) {
            continue;
        }
        let c = v.load(e).map_err(j_err)?;
        if scope.holds(&c) && mine(&c) && !settled(e, &c) {
            return Ok(c);
        }
    }
    // Only the caller's own (another user's changes are not counted for it).
    let mut elsewhere = 0;
    for e in v.entries().iter().filter(open) {
        let c = v.load(e).map_err(j_err)?;
        if mine(&c) && !settled(e, &c) {
            elsewhere += 1;
        }
    }
    Err(usage(match scope {
        Scope::Workspace(ws) if elsewhere > 0 => UndoProblem::NothingHereButElsewhere {
            workspace: ws.to_path_buf(),
            elsewhere,
        },
        Scope::Workspace(ws) => UndoProblem::NothingIn {
            workspace: ws.to_path_buf(),
        },
        Scope::All => UndoProblem::Nothing,
    }))
}

/// `gateway undo --skip [ID]`: plain `undo` passes over the change (by default the one it
/// would take; a command's whole group) from now on, so that one that cannot be undone
/// does not block the ones before it. Nothing is reverted (`undo ID` still can). Recorded
/// in the journal and the audit log. Returns the ids passed over.
pub fn skip(ctx: &FsContext<'_>, id: Option<u64>, all: bool) -> Result<Vec<u64>, BrokerError> {
    let call = crate::broker::invoke::Call {
        policy: &ctx.policy.name,
        state_dir: &ctx.state_dir,
        session: &ctx.session,
        caller: &ctx.caller,
        context: &ctx.client,
    };
    let mut t = SkipTool {
        ctx,
        id,
        all,
        ws: PathBuf::new(),
    };
    crate::broker::invoke::invoke(&call, &mut t).map(|d| d.output)
}

/// `undo --skip` on the invocation skeleton: allowed by the built-in rule (it marks the
/// journal only); another user's change is refused (`daemon.owner`), recorded as a deny.
struct SkipTool<'c, 'a> {
    ctx: &'c FsContext<'a>,
    id: Option<u64>,
    all: bool,
    ws: PathBuf,
}

impl crate::broker::invoke::Tool for SkipTool<'_, '_> {
    type Output = Vec<u64>;

    fn name(&self) -> &str {
        "undo.skip"
    }

    fn decide(&mut self, rec: &mut audit::Record) -> Result<Decision, BrokerError> {
        rec.args = vec![
            format!("id={}", self.id.map_or("last".into(), |i| i.to_string())),
            format!("all={}", self.all),
        ];
        self.ws = crate::broker::workspace_of(&self.ctx.client, &self.ctx.workspace)?;
        rec.cwd = self.ws.display().to_string();
        Ok(Decision {
            effect: Effect::Allow,
            rules: vec![crate::model::RuleMatch {
                id: "builtin".into(),
                effect: Effect::Allow,
                reason: "passing over a change marks the journal only; no file changes".into(),
                subject: rec.args.join(" "),
            }],
            commands: vec![],
            unanalysable: vec![],
        })
    }

    fn ask(&mut self, _decision: &Decision) -> bool {
        false
    }

    fn not_performed(&mut self, _d: Decision, _a: Option<bool>) -> Vec<u64> {
        vec![]
    }

    fn perform(&mut self, _d: Decision, _a: Option<bool>) -> Result<Vec<u64>, BrokerError> {
        let ctx = self.ctx;
        let scope = if self.all {
            Scope::All
        } else {
            Scope::Workspace(&self.ws)
        };
        let lock = journal::lock(&ctx.state_dir).map_err(j_err)?;
        let mine =
            |c: &Change| crate::broker::authz::may_revert(&ctx.client, c.uid, String::new).is_ok();
        let c = find_change(&ctx.state_dir, self.id, scope, &mine)?;
        // Passing over another user's change would change what their `undo` takes.
        crate::broker::authz::may_revert(&ctx.client, c.uid, || format!("change {}", c.id))?;
        let ids: Vec<u64> = match &c.group {
            Some(g) => {
                let v = journal::View::open(&ctx.state_dir).map_err(j_err)?;
                let mut ids = Vec::new();
                for e in v.group(g).filter(|e| e.phase == Phase::Committed) {
                    if v.load(e).map_err(j_err)?.group.as_ref() == Some(g) {
                        ids.push(e.id);
                    }
                }
                ids
            }
            None => vec![c.id],
        };
        journal::skip(&ctx.state_dir, &lock, &ids).map_err(j_err)?;
        Ok(ids)
    }

    fn record(&mut self, res: &Result<Vec<u64>, BrokerError>, rec: &mut audit::Record) {
        if let Ok(ids) = res {
            rec.exit_code = Some(0);
            rec.args.push(format!("skipped={ids:?}"));
        }
    }
}
