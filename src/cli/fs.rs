//! `gateway fs ...`, `gateway history`, `gateway undo`.

use super::{Call, broker_failed, exit, failed, state_dir};
use crate::broker::authz;
use crate::broker::report::fs::FsOutcome;
use crate::broker::report::{Json, Note, Outcome, Report};
use crate::broker::request::{Content, FsRequest as FsCmd, Input, TrashRequest};
use crate::broker::tools::fs::{
    self as bfs, Edit, FsContext, FsOp, FsOutput, FsResult, GrepMode, GrepOptions, PathState, Phase,
};
use crate::policy::Policy;
use std::io::Write;
use std::path::PathBuf;

/// The most `fs edit --edits FILE|-` reads: a list of edits is text an agent wrote; more is
/// refused, not held (through the daemon, its memory).
const EDITS_MAX: u64 = 16 << 20;

pub(super) fn context<'a>(cli: &Call, policy: &'a Policy) -> FsContext<'a> {
    let place = super::effective_place(cli);
    FsContext {
        policy,
        workspace: place.workspace,
        cwd: place.cwd,
        state_dir: state_dir(cli),
        session: cli.cx.session_id(),
        caller: cli.cx.caller("cli"),
        confirm: &|q, _| super::tty_confirm(q),
        client: cli.cx.clone(),
        cancel: None,
    }
}

/// The edits of an `fs edit`: those given inline, then those of its `--edits FILE|-`.
fn edits_of(cli: &Call, inline: &[Edit], from: Option<&Input>) -> Result<Vec<Edit>, String> {
    let mut v = inline.to_vec();
    if let Some(f) = from {
        // Read within EDITS_MAX (in the daemon this is its memory): stdin or a FILE that
        // never ends (/dev/zero) or is huge and sparse is refused, not held.
        let mut data = Vec::new();
        match f {
            Input::Stdin => {
                cli.cx
                    .read_stdin_up_to(&mut data, EDITS_MAX)
                    .map_err(|e| format!("--edits -: reading stdin: {e}"))?;
            }
            Input::File(f) => {
                // A FIFO is read as `cat` would, but not past the call's end (`open` of one
                // nobody writes to would otherwise wait forever).
                let cancel = cli.cx.cancel();
                data = cli
                    .cx
                    .as_client(|| crate::sandbox::read_named(f, EDITS_MAX, cancel))
                    .and_then(|r| r)
                    .map_err(|e| format!("--edits {}: {e}", f.display()))?;
            }
        }
        if data.len() as u64 > EDITS_MAX {
            return Err(format!(
                "--edits {}: more than {} MiB of edits: not read (split them into several calls)",
                f.shown(),
                EDITS_MAX >> 20
            ));
        }
        let list: Vec<Edit> = serde_json::from_slice(&data)
            .map_err(|e| format!("--edits {}: not a list of edits: {e}", f.shown()))?;
        v.extend(list);
    }
    if v.is_empty() {
        return Err(crate::model::RequestError::NoEdit.to_string());
    }
    Ok(v)
}

#[allow(
    clippy::too_many_lines,
    reason = "one arm per file tool, turning its arguments into the call"
)]
pub(super) fn run(cli: &Call, cmd: &FsCmd) -> Report {
    let policy = match super::load_policy(cli) {
        Ok(p) => p,
        Err(e) => return failed(exit::POLICY, e),
    };
    let op = match cmd {
        FsCmd::Read {
            path,
            offset,
            limit,
            binary,
        } => FsOp::Read {
            path: path.clone(),
            offset: *offset,
            limit: *limit,
            binary: *binary,
        },
        FsCmd::Write { path, content, .. } => {
            // Read within the policy's `[files] max_size` + 1 byte: through the daemon this is
            // the daemon's memory, and stdin or a FILE may never end (/dev/zero) or be huge
            // and sparse. A content over the bound reaches the broker, which refuses it
            // (`files.max_size`) and records the refusal.
            let max = policy.files.max_size;
            let content = match content {
                Content::Text(c) => c.clone().into_bytes(),
                Content::From(Input::Stdin) => {
                    let mut v = Vec::new();
                    if let Err(e) = cli.cx.read_stdin_up_to(&mut v, max) {
                        return failed(exit::USAGE, format!("reading stdin: {e}"));
                    }
                    v
                }
                Content::From(Input::File(f)) => {
                    // A FIFO is read as `cat` would, but not past the call's end.
                    let read = cli
                        .cx
                        .as_client(|| crate::sandbox::read_named(f, max, cli.cx.cancel()))
                        .and_then(|r| r);
                    match read {
                        Ok(v) => v,
                        Err(e) => {
                            return failed(
                                exit::USAGE,
                                format!("--content-file {}: {e}", f.display()),
                            );
                        }
                    }
                }
            };
            FsOp::Write {
                path: path.clone(),
                content,
            }
        }
        FsCmd::Probe { path } => FsOp::Probe { path: path.clone() },
        FsCmd::Rm {
            path,
            recursive,
            permanent,
        } => FsOp::Remove {
            path: path.clone(),
            recursive: *recursive,
            permanent: *permanent,
        },
        FsCmd::Mkdir { path, parents } => FsOp::Mkdir {
            path: path.clone(),
            parents: *parents,
        },
        FsCmd::Mv { src, dst } => FsOp::Move {
            src: src.clone(),
            dst: dst.clone(),
        },
        FsCmd::Cd { path } => {
            if cli
                .cx
                .env_var("GATEWAY_SESSION")
                .is_none_or(|s| s.is_empty())
            {
                return failed(
                    exit::USAGE,
                    "fs cd: set GATEWAY_SESSION to name the session whose directory changes (each gateway process is otherwise a session of its own)",
                );
            }
            return match bfs::cd(&context(cli, &policy), path) {
                Ok(cwd) => Report::new(0, Outcome::Fs(FsOutcome::Cd { cwd })),
                Err(e) => broker_failed(e),
            };
        }
        FsCmd::Glob { pattern, path } => FsOp::Glob {
            pattern: pattern.clone(),
            path: path.clone().unwrap_or_else(|| PathBuf::from(".")),
        },
        FsCmd::Grep {
            regex,
            path,
            glob,
            context,
            ignore_case,
            mode,
            max,
        } => FsOp::Grep {
            path: path.clone().unwrap_or_else(|| PathBuf::from(".")),
            options: GrepOptions {
                regex: regex.clone(),
                glob: glob.clone(),
                context: *context,
                ignore_case: *ignore_case,
                mode: *mode,
                max: *max,
            },
        },
        FsCmd::Ls { path } => FsOp::List {
            path: path.clone().unwrap_or_else(|| PathBuf::from(".")),
        },
        FsCmd::Edit {
            path,
            edits,
            edits_from,
            dry_run,
            ..
        } => match edits_of(cli, edits, edits_from.as_ref()) {
            Ok(edits) => FsOp::Edit {
                path: path.clone(),
                edits,
                dry_run: *dry_run,
            },
            Err(e) => return failed(exit::USAGE, e),
        },
    };
    let counts = matches!(
        &op,
        FsOp::Grep { options, .. } if options.mode == GrepMode::Count
    );
    let show_diff = matches!(
        cmd,
        FsCmd::Write { diff: true, .. } | FsCmd::Edit { diff: true, .. }
    );
    report(
        cli,
        bfs::run(&context(cli, &policy), op),
        (counts, show_diff),
    )
}

/// The rules that made a decision, in one line.
fn rules_of(d: &crate::model::Decision) -> String {
    d.deciding_rules()
        .map(|x| format!("rule {} ({}): {}", x.id, x.effect, x.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A file tool's result as the call's report: exit 0, or 120 (denied) or 121 (not
/// approved) with why, said to a person. `counts`: grep's count mode; `show_diff`: `--diff`
/// (a dry run shows its diff anyway).
fn report(
    cli: &Call,
    res: Result<FsResult, crate::broker::BrokerError>,
    (counts, show_diff): (bool, bool),
) -> Report {
    let r = match res {
        Ok(r) => r,
        Err(e) => return broker_failed(e),
    };
    let (code, note) = match r.output {
        FsOutput::Denied => (
            exit::DENIED,
            Some(format!("denied by policy: {}", rules_of(&r.decision))),
        ),
        FsOutput::NotApproved if r.decision.effect == crate::model::Effect::Allow => (
            exit::NOT_APPROVED,
            Some("not done: the permanent deletion was not confirmed".to_string()),
        ),
        FsOutput::NotApproved => (
            exit::NOT_APPROVED,
            Some(format!(
                "not done: it needs approval and {}: {}\n  to do it: approve at a terminal prompt, or use a policy whose rules allow it",
                if cli.cx.stdin_is_tty() || cli.cx.client().is_some() {
                    "it was not approved"
                } else {
                    "there is no terminal to ask on"
                },
                rules_of(&r.decision)
            )),
        ),
        _ => (0, None),
    };
    // The output travels once, typed, beside the rest of the report.
    let report = Json::of(&r.report()).without("output");
    let mut rep = Report::new(
        code,
        Outcome::Fs(FsOutcome::Tool {
            report,
            output: r.output,
            counts,
            show_diff,
        }),
    );
    rep.notes.extend(note.map(Note::new));
    rep
}

#[allow(
    clippy::too_many_lines,
    reason = "one arm per file tool output, rendered as text for a person"
)]
/// A file tool's output as text for a person: what it read or found on stdout, what it did
/// on stderr. `counts`: grep's count mode; `show_diff`: `--diff`.
/// File names and what the tool says of them are shown escaped (`shown::visible`: a name may
/// hold escape sequences or a newline); a file's own lines are shown as `cat` and `grep`
/// show them.
fn render_output(cli: &Call, output: &FsOutput, counts: bool, show_diff: bool) {
    use crate::shown::visible;
    let mut out = cli.cx.stdout_writer();
    match output {
        FsOutput::Denied | FsOutput::NotApproved => {}
        FsOutput::Done {
            what,
            change,
            undoable,
        } => match change {
            Some(id) if *undoable => {
                errln!(
                    cli,
                    "gateway: {} (change {id}; `gateway undo {id}` reverts it)",
                    visible(what)
                )
            }
            Some(id) => errln!(
                cli,
                "gateway: {} (change {id}; it cannot be undone)",
                visible(what)
            ),
            None => errln!(cli, "gateway: {}", visible(what)),
        },
        FsOutput::Glob { paths, truncated } => {
            for p in paths {
                let _ = writeln!(out, "{}", visible(p));
            }
            if *truncated {
                errln!(cli, "gateway: more matches not shown");
            }
        }
        FsOutput::Grep(g) => {
            for (p, n, t, m) in &g.lines {
                let _ = writeln!(
                    out,
                    "{}{}{n}{}{t}",
                    visible(p),
                    if *m { ":" } else { "-" },
                    if *m { ":" } else { "-" }
                );
            }
            for (p, n) in &g.files {
                if counts {
                    let _ = writeln!(out, "{}:{n}", visible(p));
                } else {
                    let _ = writeln!(out, "{}", visible(p));
                }
            }
            if g.truncated {
                errln!(cli, "gateway: more results not shown (--max)");
            }
        }
        FsOutput::List { entries, .. } => {
            for (name, kind, size) in entries {
                let suffix = match kind.as_str() {
                    "dir" => "/",
                    "link" => "@",
                    _ => "",
                };
                let _ = writeln!(out, "{size:>10}  {}{suffix}", visible(name));
            }
        }
        FsOutput::Read { lines, .. } => {
            for (_, l) in lines {
                let _ = writeln!(out, "{l}");
            }
        }
        FsOutput::Probe {
            open,
            write,
            status,
        } => {
            let _ = writeln!(out, "open: {open}");
            let _ = writeln!(out, "write: {write}");
            for l in status {
                let _ = writeln!(out, "{}", visible(l));
            }
        }
        FsOutput::Changed {
            path,
            diff,
            change,
            created,
            removed,
            lines_added,
            lines_removed,
            ..
        } => {
            // A summary and a stat (as `git diff --stat`); the diff itself with `--diff`
            // or on a dry run, capped by the broker (`DIFF_MAX_LINES`).
            if show_diff || (change.is_none() && !diff.is_empty()) {
                let _ = write!(out, "{diff}");
            }
            if !diff.is_empty() {
                let _ = writeln!(
                    out,
                    "{}: +{lines_added} -{lines_removed} lines",
                    crate::shown::arg_shown(&path.to_string_lossy())
                );
            }
            match change {
                Some(id) => errln!(
                    cli,
                    "gateway: {} {} (change {id}; `gateway undo {id}` reverts it)",
                    if *created {
                        "created"
                    } else if *removed {
                        "removed"
                    } else {
                        "changed"
                    },
                    visible(&path.to_string_lossy())
                ),
                None if diff.is_empty() => {
                    errln!(
                        cli,
                        "gateway: {}: nothing to change",
                        visible(&path.to_string_lossy())
                    )
                }
                None => errln!(cli, "gateway: dry run: nothing was changed"),
            }
        }
    }
}

/// `gateway history [--all] [--limit N] [--since TIME]`.
pub(super) fn history(
    cli: &Call,
    all: bool,
    (limit, since): (usize, Option<std::time::SystemTime>),
) -> Report {
    // Seconds since the epoch (a time before it: from the beginning).
    let since = since.map(|t| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    });
    let ws = match crate::broker::workspace_of(&cli.cx, &super::effective_place(cli).workspace) {
        Ok(w) => w,
        Err(e) => return broker_failed(e),
    };
    let scope = if all {
        bfs::Scope::All
    } else {
        bfs::Scope::Workspace(&ws)
    };
    // Through the daemon, a client sees its own changes (an auditor or the admin all).
    // The newest `limit` (oldest first, as all of them are).
    match bfs::history_page(&state_dir(cli), scope, &cli.cx, limit, since) {
        Ok(bfs::HistoryPage {
            changes: list,
            omitted,
        }) => Report::new(
            0,
            Outcome::Fs(FsOutcome::History {
                changes: list,
                workspace: (!all).then_some(ws),
                omitted,
                limit,
            }),
        ),
        Err(e) => broker_failed(e),
    }
}

/// `history`'s human view: one aligned line per change, and under it why undo cannot restore
/// it, if so.
fn history_table(cli: &Call, list: &[bfs::HistoryEntry]) {
    use super::human::{Cell, Table, colour};
    let mut t = Table::new(&[true, false, false, true, false]);
    // A change's line, then (not aligned) why undo cannot restore it.
    let mut notes: Vec<Option<String>> = Vec::new();
    for e in list {
        let c = &e.change;
        let size = |s: &PathState| match s {
            PathState::Absent => 0i64,
            PathState::File { size, .. } => *size as i64,
            PathState::Dir | PathState::Link { .. } => 0,
        };
        let delta = size(&c.after) - size(&c.before);
        let when = humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(c.time),
        );
        let tail = format!(
            "{}{}{}{}",
            crate::shown::arg_shown(&c.path.to_string_lossy()),
            c.undoes
                .map(|u| format!("  (undoes {u})"))
                .unwrap_or_default(),
            match e.phase {
                Phase::Committed => "",
                Phase::Aborted => "  [aborted]",
                Phase::Pending => "  [pending]",
            },
            if e.skipped { "  [skipped]" } else { "" }
        );
        t.row(vec![
            Cell::new(c.id.to_string()),
            Cell::new(when.to_string()),
            Cell::new(crate::shown::visible(&c.tool)),
            Cell::new(format!("{delta:+}")),
            Cell::new(tail),
        ]);
        // Why undo cannot revert it (its entry says, or its content is not in the store).
        notes.push(match (&c.not_undoable, &e.backup_missing) {
            (Some(why), _) => Some(format!(
                "       not undoable: {}",
                crate::shown::visible(why)
            )),
            (None, Some(why)) => Some(format!(
                "       undo cannot restore its content: {}",
                crate::shown::visible(why)
            )),
            (None, None) => None,
        });
    }
    for (l, n) in t.lines(colour(cli)).into_iter().zip(notes) {
        outln!(cli, "{l}");
        if let Some(n) = n {
            outln!(cli, "{n}");
        }
    }
}

pub(super) fn undo(cli: &Call, id: Option<u64>, dry_run: bool, force: bool, all: bool) -> Report {
    let policy = match super::load_policy(cli) {
        Ok(p) => p,
        Err(e) => return failed(exit::POLICY, e),
    };
    report(
        cli,
        bfs::run(
            &context(cli, &policy),
            FsOp::Undo {
                id,
                dry_run,
                force,
                all,
            },
        ),
        (false, false),
    )
}

/// `gateway undo --skip [ID]`.
pub(super) fn undo_skip(cli: &Call, id: Option<u64>, all: bool) -> Report {
    let policy = match super::load_policy(cli) {
        Ok(p) => p,
        Err(e) => return failed(exit::POLICY, e),
    };
    match bfs::skip(&context(cli, &policy), id, all) {
        Ok(skipped) => Report::new(0, Outcome::Fs(FsOutcome::Skipped { skipped })),
        Err(e) => broker_failed(e),
    }
}

pub(super) fn trash(cli: &Call, cmd: &TrashRequest) -> Report {
    let state = state_dir(cli);
    match cmd {
        TrashRequest::List => match own_trash(cli, &state, bfs::trash_list(&state)) {
            Ok(items) => Report::new(0, Outcome::Fs(FsOutcome::TrashList { items })),
            Err(e) => broker_failed(e),
        },
        TrashRequest::Restore { name } => {
            let policy = match super::load_policy(cli) {
                Ok(p) => p,
                Err(e) => return failed(exit::POLICY, e),
            };
            report(
                cli,
                bfs::run(
                    &context(cli, &policy),
                    FsOp::TrashRestore { name: name.clone() },
                ),
                (false, false),
            )
        }
        TrashRequest::Empty { older_than, yes } => {
            // Emptying the trash destroys every client's removed files for good: the
            // daemon's admin only.
            let ctx = cli.cx.clone();
            if let Err(r) = authz::require_admin(&ctx, "trash empty") {
                let args = vec!["empty".into()];
                return broker_failed(authz::refused(&state, &ctx, "trash", args, r).into());
            }
            let d = *older_than;
            let policy = match super::load_policy(cli) {
                Ok(p) => p,
                Err(e) => return failed(exit::POLICY, e),
            };
            match bfs::trash_empty(&context(cli, &policy), d, *yes) {
                Ok(done) => Report::new(
                    0,
                    Outcome::Fs(FsOutcome::TrashEmptied {
                        removed: done.output.removed,
                    }),
                ),
                Err(crate::broker::BrokerError::Refused(
                    crate::broker::refusal::Refusal::NotApproved { rules, reasons },
                )) if !cli.json && rules.iter().any(|r| r == "confirm") => {
                    // As `fs rm --permanent` says it, with what to do (under `--json`, the
                    // refusal's error object).
                    failed(
                        exit::NOT_APPROVED,
                        format!(
                            "not done: emptying the trash was not confirmed ({}); nothing was removed",
                            reasons.join("; ")
                        ),
                    )
                }
                Err(e) => broker_failed(e),
            }
        }
    }
}

/// The trash items the caller may see: all of them, or — a daemon client that is neither
/// auditor nor admin — those its own removals put there (`Change::uid`).
fn own_trash(
    cli: &Call,
    state: &std::path::Path,
    items: Result<Vec<crate::journal::TrashItem>, crate::broker::BrokerError>,
) -> Result<Vec<crate::journal::TrashItem>, crate::broker::BrokerError> {
    let mut items = items?;
    let cx = cli.cx.clone();
    if authz::seen_uid(&cx).is_some() {
        let own: std::collections::HashSet<String> = bfs::history(state, bfs::Scope::All, &cx)?
            .into_iter()
            .filter_map(|e| e.change.trash)
            .collect();
        items.retain(|i| own.contains(&i.name));
    }
    Ok(items)
}

/// Renders a fs result here (the caller's terminal or pipe): under `--json` its JSON, else
/// its human text.
pub(super) fn render(cli: &Call, o: &FsOutcome) {
    use crate::broker::report as rep;
    match o {
        FsOutcome::Tool {
            report,
            output,
            counts,
            show_diff,
        } => {
            if cli.json {
                outln!(cli, "{}", report.with("output", output));
            } else {
                render_output(cli, output, *counts, *show_diff);
            }
        }
        FsOutcome::Cd { cwd } => {
            if cli.json {
                outln!(cli, "{}", super::to_json(&rep::CdReport { cwd }));
            } else {
                outln!(cli, "{}", cwd.display());
            }
        }
        FsOutcome::History {
            changes,
            workspace,
            omitted,
            limit,
        } => {
            if cli.json {
                let r = rep::HistoryReport {
                    changes,
                    workspace: workspace.as_deref(),
                    omitted: *omitted,
                };
                outln!(cli, "{}", super::to_json(&r));
            } else {
                if *omitted > 0 {
                    errln!(
                        cli,
                        "gateway: {omitted} older change(s) not shown (--limit {limit}; `--limit 0` shows all, `--since` a time)"
                    );
                }
                history_table(cli, changes);
            }
        }
        FsOutcome::Skipped { skipped } => {
            if cli.json {
                outln!(cli, "{}", super::to_json(&rep::SkipReport { skipped }));
            } else {
                errln!(
                    cli,
                    "gateway: passed over change(s) {}: `gateway undo` takes the one before from now on (`gateway undo ID` still reverts them)",
                    skipped
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        FsOutcome::TrashList { items } => {
            if cli.json {
                outln!(cli, "{}", super::to_json(&rep::TrashListReport { items }));
            } else {
                use super::human::{Cell, Table, colour};
                let mut t = Table::new(&[]);
                for i in items.iter().filter(|i| i.present) {
                    t.row(vec![
                        Cell::new(crate::shown::visible(&i.deleted)),
                        Cell::new(crate::shown::arg_shown(&i.name)),
                        Cell::new(crate::shown::arg_shown(&i.original.to_string_lossy())),
                    ]);
                }
                for l in t.lines(colour(cli)) {
                    outln!(cli, "{l}");
                }
            }
        }
        FsOutcome::TrashEmptied { removed } => {
            if cli.json {
                outln!(
                    cli,
                    "{}",
                    super::to_json(&rep::TrashEmptyReport { removed: *removed })
                );
            } else {
                outln!(
                    cli,
                    "gateway trash empty: removed {removed} item(s) for good"
                );
            }
        }
    }
}
