//! `gateway changes [ID] [--diff]`, `gateway apply ID`, `gateway discard ID`: the held change
//! sets (`broker::tools::changes`), rendered.

use super::{Call, Report, broker_failed, failed};
use crate::broker::report::Outcome;
use crate::broker::report::changes::ChangesReport;
use crate::broker::request::ChangesRequest;
use crate::broker::tools::changes;
use crate::cli::exit;

/// A path on one line (a name the run chose may hold a newline).
fn shown_path(p: &str) -> String {
    crate::shown::visible(p).into_owned()
}

/// Seconds since the epoch, as a UTC time.
fn when(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}

/// Runs one changes request.
pub(super) fn run(cli: &Call, req: &ChangesRequest) -> Report {
    let policy = match super::load_policy(cli) {
        Ok(p) => p,
        Err(e) => return failed(exit::POLICY, e),
    };
    let ctx = super::fs::context(cli, &policy);
    let r = match req {
        ChangesRequest::List => Ok(changes::list(&ctx)),
        ChangesRequest::Show { id, diff } => changes::show(&ctx, id, *diff),
        ChangesRequest::Apply { id } => changes::act(&ctx, id, true),
        ChangesRequest::Discard { id } => changes::act(&ctx, id, false),
    };
    match r {
        Ok(r) => {
            let code = u8::from(!r.not_applied.is_empty());
            Report::new(code, Outcome::Changes(r))
        }
        Err(e) => broker_failed(e),
    }
}

/// Prints a changes report: JSON under `--json`, else text.
pub(super) fn render(cli: &Call, r: &ChangesReport) {
    if cli.json {
        outln!(cli, "{}", serde_json::to_string(r).unwrap_or_default());
        return;
    }
    match r.action.as_str() {
        "list" if r.sets.is_empty() => outln!(cli, "no held change sets"),
        "list" => {
            for s in &r.sets {
                outln!(
                    cli,
                    "{}  {}  {}  {} change(s)  $ {}",
                    s.id,
                    s.state,
                    when(s.started),
                    s.changes.len(),
                    crate::shown::visible(&s.command)
                );
                if let Some(w) = &s.why {
                    outln!(cli, "    {}", crate::shown::visible(w));
                }
            }
        }
        "show" => {
            for s in &r.sets {
                outln!(
                    cli,
                    "change set {} ({}) in {}: $ {}",
                    s.id,
                    s.state,
                    shown_path(&s.workspace.to_string_lossy()),
                    crate::shown::visible(&s.command)
                );
                for c in &s.changes {
                    outln!(
                        cli,
                        "  {:<8} {}",
                        c.kind,
                        shown_path(&c.path.to_string_lossy())
                    );
                }
                outln!(
                    cli,
                    "`gateway apply {0}` lands these changes (undoable); `gateway discard {0}` drops them",
                    s.id
                );
            }
            if let Some(d) = &r.diff {
                outs!(cli, "{d}");
            }
        }
        "apply" => {
            let id = r.sets.first().map_or("", |s| s.id.as_str());
            for (p, w) in &r.not_applied {
                errln!(
                    cli,
                    "gateway: not applied: {}: {}",
                    shown_path(&p.to_string_lossy()),
                    crate::shown::visible(w)
                );
            }
            for (p, w) in &r.not_undoable {
                errln!(
                    cli,
                    "gateway: not undoable: {}: {}",
                    shown_path(&p.to_string_lossy()),
                    crate::shown::visible(w)
                );
            }
            outln!(
                cli,
                "applied {} change(s) of change set {id}{}",
                r.applied.len(),
                if r.not_applied.is_empty() {
                    " (`gateway undo` reverts them)".to_string()
                } else {
                    format!(
                        "; {} could not be applied and stay held (`gateway apply {id}` tries again)",
                        r.not_applied.len()
                    )
                }
            );
        }
        _ => {
            let s = r.sets.first();
            outln!(
                cli,
                "discarded change set {} ({} change(s) dropped; the workspace is as it was)",
                s.map_or("", |s| s.id.as_str()),
                s.map_or(0, |s| s.changes.len())
            );
        }
    }
}
