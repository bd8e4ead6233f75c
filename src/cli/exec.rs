//! Exec's front end: the request from the command line (or the REPL), the run, and its
//! report rendered — as human text on stderr beside the command's own output, or as the
//! typed `ExecReport` under `--json` — and its exit code.

use super::*;
use broker::report::{Audience, Note, Outcome};
use broker::request::Exec;

/// Asks on the terminal about `command` (shown as the record keeps it, shell-quoted and
/// escaped). Without a terminal, answers no.
fn tty_ask(command: &[String], d: &Decision) -> bool {
    if !crate::sandbox::stdin_is_tty() {
        return false;
    }
    let Ok(mut tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return false;
    };
    let _ = write!(
        tty,
        "gateway: this command needs approval:\n  $ {}{}\nRun it? [y/N] ",
        shown_argv(command),
        crate::shown::visible_lines(&rules_text(d))
    );
    let _ = tty.flush();
    let mut line = String::new();
    let mut r = std::io::BufReader::new(tty);
    if r.read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Where and as whom a run happens, when not from the command line's options (the REPL).
#[derive(Default)]
pub(super) struct RunAt {
    pub(super) place: Option<broker::session::Place>,
    pub(super) session: Option<String>,
    pub(super) policy: Option<Policy>,
    /// Ctrl-C (SIGINT) stops the command only, not this process (the REPL).
    pub(super) survive_sigint: bool,
    /// Claude Code's wrapper or snapshot, rewritten to print what it writes (`gateway sh`).
    pub(super) agent: Option<super::agent_shell::Prepared>,
}

pub(super) fn run_exec(cli: &Call, e: &Exec) -> Report {
    run_exec_at(cli, e, RunAt::default())
}

/// `e` (whose stdin, through the daemon, is already the call's: see `serve::daemon`) run
/// `at` a place, session and policy (default: the options'). Its output goes to the call's
/// streams as it runs (not under `--json`, whose report holds its first bytes); its report
/// says the rest.
pub(super) fn run_exec_at(cli: &Call, e: &Exec, at: RunAt) -> Report {
    let policy = match at.policy {
        Some(p) => p,
        None => match load_policy(cli) {
            Ok(p) => p,
            Err(e) => return failed(exit::POLICY, e),
        },
    };
    if e.argv.is_empty() {
        return failed(exit::USAGE, crate::model::RequestError::NoCommand);
    }
    let command = &e.argv;
    let env_pairs = e
        .env
        .iter()
        .map(|v| (v.name().to_string(), v.value().to_string()))
        .collect();
    let place = at.place.unwrap_or_else(|| effective_place(cli));
    let req = ExecRequest {
        argv: command.to_vec(),
        workspace: place.workspace,
        cwd: place.cwd,
        policy: &policy,
        state_dir: state_dir(cli),
        env: env_pairs,
        timeout: e.timeout,
        stdin: Stdin::Inherit,
        session: at.session.unwrap_or_else(|| cli.cx.session_id()),
        caller: cli.cx.caller("cli"),
        snapshot: e.snapshot,
        review: e.review,
        context: cli.cx.clone(),
        cancel: None,
    };
    let json = cli.json;
    // In --json mode the report carries the first `inline_output` bytes of each stream; all
    // of it is in the audit artifact.
    let mut tail = at
        .agent
        .as_ref()
        .map(|p| super::agent_shell::TailFilter::new(p.marker.clone()));
    let mut show = |b: &[u8]| {
        if !json {
            cli.cx.out(|o| o.write_all(b));
        }
    };
    let mut sink = |s: Stream, b: &[u8]| match s {
        Stream::Stdout => match tail.as_mut() {
            Some(t) => t.feed(b, &mut show),
            None => show(b),
        },
        Stream::Stderr if !json => cli.cx.err(|o| o.write_all(b)),
        Stream::Stderr => {}
    };
    let mut ask = |d: &Decision| tty_ask(command, d);
    if cli.cx.client().is_none() {
        crate::sandbox::enlarge_output_pipes();
    }
    let res = broker::exec(req, &mut ask, &mut sink);
    // A SIGINT, SIGTERM or SIGHUP caught during the run: it is recorded; this process ends
    // by that signal once its report is shown (the REPL survives a Ctrl-C).
    let interrupt =
        crate::sandbox::take_interrupt().filter(|&sig| !(at.survive_sigint && sig == libc::SIGINT));
    cli.interrupted(interrupt);
    let res = match res {
        Ok(r) => r,
        Err(e) => return broker_failed(e),
    };
    let mut notes = Vec::new();
    if let Some(sig) = interrupt {
        notes.push(Note::new(format!(
            "interrupted by {}: the command was killed{}",
            signal_name(sig),
            match &res.audit {
                Some(a) => format!(" and the run recorded (gateway log show {})", a.seq),
                None => String::new(),
            }
        )));
    }
    exec_notes(&mut notes, &res, &policy);
    let mut code = exec_code(
        (cli, &mut notes),
        &res,
        &policy,
        &super::policy_name(cli),
        command,
    );
    // What Claude Code's wrapper would have written itself (agent_shell): only after a run
    // that got there (its `&&` chain printed the marker last).
    if let (Some(t), Some(p)) = (tail, &at.agent) {
        let payload = t.finish(&mut show);
        if let (0, Some(payload)) = (code, payload)
            && let Err(e) = super::agent_shell::deliver(&p.deliver, &payload)
        {
            notes.push(Note::to(Audience::Everyone, e));
            code = 1;
        }
    }
    let report = res.report(policy.audit.inline_output as usize);
    Report {
        exit: code,
        outcome: Outcome::Exec(broker::report::Json::of(&report)),
        notes,
    }
}

/// What a run's report says on stderr beside the command's own output (not under `--json`):
/// protected paths moved or not held, leftovers, secrets found, what the snapshot could
/// not keep, what changed.
fn exec_notes(notes: &mut Vec<Note>, res: &broker::ExecResult, policy: &Policy) {
    protected_notes(notes, res);
    secret_notes(notes, res, policy);
    if let Some(sn) = &res.snapshot {
        for d in sn.unread_dirs.iter().take(10) {
            notes.push(Note::new(format!("warning: the directory {} could not be read after the run: what changed inside it is not recorded and `gateway undo` cannot revert it",
                shown_path(&broker::redact_text(&d.display().to_string()))
            )));
        }
        for (p, why) in sn.not_backed_up.iter().take(10) {
            notes.push(Note::new(format!(
                "not backed up: {}: {why} (`gateway undo` cannot bring this content back)",
                shown_path(&p.to_string_lossy())
            )));
        }
        if sn.not_backed_up.len() > 10 {
            notes.push(Note::new(format!(
                "and {} more file(s) not backed up (--json lists them)",
                sn.not_backed_up.len() - 10
            )));
        }
        for (p, why) in sn.not_applied.iter().take(10) {
            notes.push(Note::new(format!(
                "not applied: {}: {}",
                shown_path(&p.to_string_lossy()),
                crate::shown::visible(why)
            )));
        }
        for (p, id) in sn.overwrote.iter().take(10) {
            notes.push(Note::new(format!(
                "{} was changed by another call while the command ran (change {id}); the command's version replaced it (`gateway undo` brings that one back)",
                shown_path(&p.to_string_lossy())
            )));
        }
        if let Some(id) = &sn.held {
            notes.push(Note::to(
                Audience::Everyone,
                format!(
                    "the run's changes are held as change set {id} ({} path(s)), not applied: `gateway changes {id} --diff` shows them, `gateway apply {id}` lands them, `gateway discard {id}` drops them",
                    sn.pending.len().max(sn.not_applied.len())
                ),
            ));
        }
        if sn.expired > 0 {
            notes.push(Note::new(format!("{} old backup(s) expired to keep the backup store within [undo] max_state_bytes and max_workspace_bytes and the disk from filling up (`gateway history` shows which changes lost theirs)",
                sn.expired
            )));
        }
    }
    // What changed is the report's (`--json`: `snapshot.changes`; the record's
    // `files_changed`; `gateway history`): said on stderr to a person at a terminal only, so
    // that an agent running `gateway sh`/`exec` as its shell reads the command's output and
    // nothing else.
    if let Some(sn) = &res.snapshot
        && !sn.changes.is_empty()
    {
        notes.push(Note::to(
            Audience::Terminal,
            format!(
                "the command changed {} file(s) in the workspace (`gateway undo {}` reverts them all)",
                sn.changes.len(),
                sn.changes[0].2
            ),
        ));
    }
    if res.outcome.as_ref().is_some_and(|o| o.memory_limit_hit) {
        notes.push(Note::new(
            "the run hit its memory limit; the kernel killed processes of it",
        ));
    }
}

/// What the run did to protected paths, and the processes it left.
fn protected_notes(notes: &mut Vec<Note>, res: &broker::ExecResult) {
    for w in &res.protected_warnings {
        notes.push(Note::new(format!("warning: {w}")));
    }
    if let Some(w) = broker::leftovers_warning(res.outcome.as_ref()) {
        notes.push(Note::new(format!("warning: {w}")));
    }
    // A best-effort run on a host that refused its namespaces: the person reading stderr,
    // not only the record and `--json`, learns which layers the command ran without.
    if let Some(e) = res.outcome.as_ref().map(|o| &o.enforcement)
        && !e.layers.namespaces.is_complete()
    {
        notes.push(Note::new(format!(
            "warning: the command ran without these layers (best_effort): {}",
            e.not_applied().join("; ")
        )));
    }
    if let Some(n) = res
        .outcome
        .as_ref()
        .and_then(|o| o.leftovers_killed)
        .filter(|&n| n > 0)
    {
        notes.push(Note::new(format!(
            "killed {n} process(es) the command left running (they had left its process group)"
        )));
    }
    for q in &res.protected_created {
        match &q.to {
            Some(to) => notes.push(Note::new(format!(
                "the command created protected path {}; moved it to {}",
                shown_path(&q.path.to_string_lossy()),
                shown_path(&to.to_string_lossy())
            ))),
            None => notes.push(Note::new(format!(
                "the command created protected path {} and it could not be moved; inspect it",
                shown_path(&q.path.to_string_lossy())
            ))),
        }
    }
}

/// The secrets the run's inputs and output held (rules and places, never values).
fn secret_notes(notes: &mut Vec<Note>, res: &broker::ExecResult, policy: &Policy) {
    for s in &res.secrets.input {
        notes.push(Note::new(format!(
            "warning: {} contains a secret (rule {}){}",
            s.place,
            s.rule,
            match policy.secrets.input {
                crate::model::SecretsInput::Redact => "; redacted before the command saw it",
                _ => "",
            }
        )));
    }
    let out = &res.secrets.output;
    if !out.is_empty() && res.secrets.blocked.is_none() {
        let mut rules: Vec<&str> = out.iter().map(|o| o.rule).collect();
        rules.sort();
        rules.dedup();
        notes.push(Note::new(format!(
            "{} secret(s) in the output ({}){}",
            out.len(),
            rules.join(", "),
            match policy.secrets.output {
                crate::model::SecretsOutput::Warn => ", passed through (secrets.output = \"warn\")",
                _ => ", redacted",
            }
        )));
    }
    if let Some(b) = &res.secrets.blocked {
        notes.push(Note::new(format!(
            "blocked: the command's {} contained a secret (rule {}); output from there on was withheld and the command killed (secrets.output = \"block\")",
            b.place,
            b.rule
        )));
    }
}

/// A path a note quotes, on one line: a name the command chose may hold a newline that would
/// forge a line of gateway's own.
fn shown_path(p: &str) -> String {
    crate::shown::visible(p).into_owned()
}

/// The command as the record keeps it (each argument redacted), shell-quoted and escaped.
fn shown_argv(command: &[String]) -> String {
    crate::shown::argv_shown(&broker::redact_argv(command))
}

/// The exit code of a run's report (and, in `notes`, why it did not run or ended as it
/// did). `spec` is the policy as it was named (`--policy`, GATEWAY_POLICY, the
/// config file, else standard): the hint to explain the decision names it, so that the line,
/// pasted into a shell, runs the same check.
fn exec_code(
    (cli, notes): (&Call, &mut Vec<Note>),
    res: &broker::ExecResult,
    policy: &Policy,
    spec: &str,
    command: &[String],
) -> u8 {
    let d = &res.decision;
    match (&res.outcome, d.effect) {
        (None, Effect::Deny) => {
            notes.push(Note::new(format!(
                "denied by policy `{}`: {}{}",
                policy.name,
                shown_argv(command),
                rules_text(d)
            )));
            exit::DENIED
        }
        (None, _) => {
            notes.push(Note::new(format!("not run: it needs approval and {}{}\n  to run it: approve at a terminal prompt, or use a policy whose rules allow it (gateway policy explain --policy {} -- {})",
                    if cli.cx.stdin_is_tty() || cli.cx.client().is_some() {
                        "it was not approved"
                    } else {
                        "there is no terminal to ask on"
                    },
                    rules_text(d),
                    crate::shown::arg_shown(spec),
                    shown_argv(command)
                )));
            exit::NOT_APPROVED
        }
        (Some(_), _) if res.secrets.blocked.is_some() => exit::DENIED,
        (Some(o), _) => {
            if o.timed_out {
                notes.push(Note::new(format!(
                    "timed out after {:.1}s; the sandbox and every process in it were killed",
                    o.duration.as_secs_f64()
                )));
                exit::TIMEOUT
            } else if o.output_limit_exceeded {
                notes.push(Note::new(
                    "output exceeded the policy's limit; the sandbox was killed",
                ));
                128 + libc::SIGKILL as u8
            } else if let Some(c) = o.exit_code {
                c as u8
            } else {
                128u8.saturating_add(o.signal.unwrap_or(0) as u8)
            }
        }
    }
}
