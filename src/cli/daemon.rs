//! The daemon's front end: where its socket is, a one-shot command sent to it
//! (`daemon_call`, the client side of `serve::proto`), `gateway serve`, and the approvals
//! people answer through it (`pending`, `approve`, `deny`).

use super::*;
use broker::report::Outcome;
use broker::report::policy::ApprovalOutcome;
use broker::request::Invocation;

/// The daemon to go through (`serve::daemon::socket_to_use`, with the config's `socket`).
pub(super) fn daemon_socket() -> Result<Option<PathBuf>, String> {
    serve::daemon::socket_to_use(config_socket)
}

/// The config file's `socket`, if it names one.
pub(super) fn config_socket() -> Option<PathBuf> {
    config::get().ok().and_then(|c| c.socket.clone())
}

/// Runs one call for the daemon's client this thread serves: the same dispatch as the CLI's,
/// with the client's policy (its `--policy`, else its GATEWAY_POLICY) and the daemon's state
/// directory (a client asking for another one is refused). The call comes typed: nothing
/// is parsed here.
pub fn daemon_call(
    call: Invocation,
    cx: broker::client::Context,
    state: &std::path::Path,
    policy: &str,
) -> Report {
    let Invocation { options, request } = call;
    let mut cli = Call::new(options, cx);
    cli.set_json_errors(cli.json || matches!(request, Request::Tool { .. }));
    let chosen = cli.options.policy.take().or_else(|| {
        cli.cx
            .env_var("GATEWAY_POLICY")
            .filter(|p| !p.is_empty())
            .map(|p| p.to_string_lossy().into_owned())
    });
    // A policy the client picks is one the daemon's config lets clients pick (an approval
    // gate the admin set up is not stepped around by `--policy permissive`).
    // ... and so is a policy a session reloads into (`gateway policy reload NAME`).
    let reload_to = match &request {
        Request::Policy(PolicyRequest::Reload { name: Some(n) }) => Some(n.clone()),
        _ => None,
    };
    for p in chosen.iter().chain(reload_to.iter()) {
        if let Err(r) = broker::authz::may_use_policy(&cli.cx, p, policy) {
            let r = broker::authz::refused(state, &cli.cx, "policy", vec![p.clone()], r);
            return broker_failed(r.into());
        }
    }
    cli.options.policy = chosen.or_else(|| Some(policy.to_string()));
    let named = cli.options.state_dir.take();
    if let Err(r) = same_state_dir(&cli, named, state) {
        return *r;
    }
    cli.options.state_dir = Some(state.to_path_buf());
    // `dispatch` passes the report through the gate before the daemon sends it.
    dispatch(&cli, request)
}

/// Refuses (its report: the error object) a call that names another state directory than the daemon's: on its command line
/// (`named`), else in its GATEWAY_STATE_DIR.
fn same_state_dir(
    cli: &Call,
    named: Option<PathBuf>,
    state: &std::path::Path,
) -> Result<(), Box<Report>> {
    let asked = named.or_else(|| {
        cli.cx
            .env_var("GATEWAY_STATE_DIR")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    });
    if let Some(d) = asked {
        let d = std::path::absolute(&d).unwrap_or(d);
        if d != state {
            return Err(Box::new(failed(
                exit::USAGE,
                format!(
                    "this daemon keeps its state in {}; the call asked for {} (--state-dir or GATEWAY_STATE_DIR): unset it, or set GATEWAY_SOCKET= to run the embedded broker with that state directory",
                    state.display(),
                    d.display()
                ),
            )));
        }
    }
    Ok(())
}

/// `gateway serve`.
pub(super) fn serve(
    cli: &Call,
    socket: Option<PathBuf>,
    max_clients: usize,
    call_timeout: Duration,
) -> ExitCode {
    // The daemon's own settings are read now, before any client's thread could.
    let cfg = match config::get() {
        Ok(c) => c,
        Err(e) => return fail(cli, exit::POLICY, format!("config file: {e}")),
    };
    let own = match load_policy(cli) {
        Ok(p) => p,
        Err(e) => return fail(cli, exit::POLICY, e),
    };
    let roles = broker::authz::resolve_groups("approvers", &cfg.approvers).and_then(|approvers| {
        Ok(broker::authz::Roles {
            approvers,
            auditors: broker::authz::resolve_groups("auditors", &cfg.auditors)?,
            allow_client_policy: cfg.allow_client_policy.clone(),
            // The state all clients share is governed by the daemon's own policy.
            shared: Some(broker::authz::Shared {
                undo: own.undo,
                audit: own.audit,
                approval: own.approval,
            }),
        })
    });
    let server = match roles {
        Ok(r) => broker::server::Server::new(r),
        Err(e) => return fail(cli, exit::POLICY, e.to_string()),
    };
    let socket = socket
        .or_else(|| {
            std::env::var_os("GATEWAY_SOCKET")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        })
        .or_else(|| cfg.socket.clone())
        .unwrap_or_else(serve::daemon::default_socket);
    let state = state_dir(cli);
    let st = state.clone();
    // Clients that name no policy get the daemon's (a file by its absolute path: calls run
    // in their clients' directories).
    let mut policy = policy_name(cli);
    if (policy.contains('/') || policy.ends_with(".toml"))
        && let Ok(p) = std::path::absolute(&policy)
    {
        policy = p.display().to_string();
    }
    let handler: serve::daemon::Handler =
        std::sync::Arc::new(move |call, cx| daemon_call(call, cx, &st, &policy));
    errln!(
        cli,
        "gateway serve: serving on {} (state {}); SIGTERM or Ctrl-C stops",
        socket.display(),
        state.display()
    );
    match serve::daemon::serve(
        serve::daemon::ServeConfig {
            socket,
            state_dir: state,
            max_clients: max_clients.max(1),
            first_message: call_timeout,
            grace: Duration::from_secs(10),
            server,
        },
        handler,
    ) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => broker_fail(cli, e),
    }
}

/// `gateway pending`: only the daemon holds requests.
pub(super) fn pending(cli: &Call) -> Report {
    if cli.cx.client().is_none() {
        return failed(
            exit::USAGE,
            "pending: no daemon is running (approvals are queued by `gateway serve`; without it, `ask` is answered at the terminal)",
        );
    }
    // A client sees its own requests; an approver (or the admin) everyone's.
    let ctx = cli.cx.clone();
    let uid = ctx
        .client()
        .filter(|_| !broker::authz::answers_all(&ctx))
        .map(|c| c.caller.uid);
    let v = ctx
        .client()
        .map(|c| c.server.approvals.list(uid))
        .unwrap_or_default();
    Report::new(0, Outcome::Approval(ApprovalOutcome::Pending(v)))
}

/// `gateway approve|deny ID`.
pub(super) fn answer(cli: &Call, id: u64, approve: bool, always: bool) -> Report {
    let verb = if approve { "approve" } else { "deny" };
    let Some(c) = cli.cx.client() else {
        return failed(
            exit::USAGE,
            format!("{verb}: no daemon is running (approvals are queued by `gateway serve`)"),
        );
    };
    let by = format!(
        "uid {} pid {} (gateway {verb}{})",
        c.caller.uid,
        c.caller.pid,
        if always { " --always-for-session" } else { "" }
    );
    let ctx = cli.cx.clone();
    let may = |p: &broker::approvals::Pending| {
        broker::authz::may_answer(&ctx, p.uid, || format!("pending request {id}"))
    };
    match c.server.approvals.answer(id, approve, always, by, may) {
        Ok(a) => Report::new(0, Outcome::Approval(ApprovalOutcome::Answered(a))),
        Err(broker::approvals::AnswerError::Refused(r)) => {
            let r = broker::authz::refused(&state_dir(cli), &ctx, verb, vec![id.to_string()], r);
            broker_failed(r.into())
        }
        Err(e) => failed(exit::USAGE, format!("{verb}: {e}")),
    }
}

/// Shows `pending`'s requests, or an answer given.
pub(super) fn render_approval(cli: &Call, o: &ApprovalOutcome) {
    let v = match o {
        ApprovalOutcome::Answered(a) => {
            if cli.json {
                outln!(cli, "{}", to_json(a));
            } else {
                errln!(
                    cli,
                    "gateway: {} request {}: {} {}",
                    if a.approved { "approved" } else { "denied" },
                    a.id,
                    crate::shown::visible(&a.request.tool),
                    crate::shown::visible(&a.request.command)
                );
            }
            return;
        }
        ApprovalOutcome::Pending(v) => v,
    };
    if cli.json {
        outln!(
            cli,
            "{}",
            to_json(&broker::report::PendingReport { requests: v })
        );
    } else if v.is_empty() {
        errln!(cli, "gateway: nothing is waiting for approval");
    } else {
        use super::human::{Cell, Table, colour};
        use crate::shown::visible;
        let risk_style = |r: &str| {
            super::human::effect_style(match r {
                "high" => "deny",
                "medium" => "ask",
                _ => "",
            })
        };
        let mut t = Table::new(&[true, false, false, false]);
        for p in v {
            t.row(vec![
                Cell::new(p.id.to_string()),
                Cell::new(visible(&p.tool)),
                Cell::styled(format!("{} risk", p.risk), risk_style(&p.risk)),
                Cell::new(format!(
                    "{}  (in {}, session {}, uid {} pid {}, denied in {})",
                    visible(&p.command),
                    visible(&p.cwd),
                    visible(&p.session),
                    p.uid,
                    p.pid,
                    crate::model::units::duration(Duration::from_secs(p.expires_in))
                )),
            ]);
        }
        for (l, p) in t.lines(colour(cli)).into_iter().zip(v) {
            outln!(cli, "{l}");
            for r in &p.rules {
                outln!(cli, "      rule {}", visible(r));
            }
        }
    }
}
