//! Command line: dispatch of the one-shot commands, human and `--json` output. Calls the broker
//! only. The grammar (clap's definitions) is in `cli/args.rs`.
//!
//! Exec's front end (its run and its rendering) is in `cli/exec.rs`, the file tools' in
//! `cli/fs.rs`, the log's in `cli/log.rs`, the daemon's in `cli/daemon.rs`.
//!
//! Over 1,000 lines: the dispatch (one arm per subcommand) and the one-shot commands
//! too small for a file of their own (policy list/check/explain/reload, config show, scan,
//! tool, mcp); the policy commands are the next seam to split along (`cli/policy.rs`).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    reason = "a front end: what it prints and its own process's environment are its job"
)]

use crate::broker::{self, BrokerError, ExecRequest};
use crate::model::{Decision, Effect};
use crate::policy::{self, Policy};
use crate::sandbox::{Stdin, Stream};
use crate::serve;
use clap::Parser;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `println!` to the caller's stdout (a daemon client's, or this process's).
macro_rules! outln {
    ($cli:expr, $($t:tt)*) => { $cli.cx.out(|w| writeln!(w, $($t)*)) };
}
/// `println!` to the caller's stdout, through the gate (text outside a report).
macro_rules! gated_ln {
    ($cli:expr, $($t:tt)*) => {
        $cli.cx.out(|w| writeln!(w, "{}", crate::broker::gate::text(&format!($($t)*))))
    };
}
/// `print!` to the caller's stdout.
macro_rules! outs {
    ($cli:expr, $($t:tt)*) => { $cli.cx.out(|w| write!(w, $($t)*)) };
}
/// `eprintln!` to the caller's stderr.
macro_rules! errln {
    ($cli:expr, $($t:tt)*) => { $cli.cx.err(|w| writeln!(w, $($t)*)) };
}
/// `eprint!` to the caller's stderr.
#[allow(unused_macros)]
macro_rules! errs {
    ($cli:expr, $($t:tt)*) => { $cli.cx.err(|w| write!(w, $($t)*)) };
}

/// A typed result as `--json` prints it: one line, object keys sorted at every level — the
/// order `--json` has always printed (a `serde_json::Value`'s map keeps its keys sorted), so
/// that moving a result from a `json!` literal to its type changes no byte of the output.
fn to_json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(v) => v.to_string(),
        Err(e) => render_failed(&e),
    }
}

/// [`to_json`], indented (`policy explain --credentials --json`).
fn to_json_pretty<T: serde::Serialize + ?Sized>(v: &T) -> String {
    match serde_json::to_value(v).and_then(|v| serde_json::to_string_pretty(&v)) {
        Ok(s) => s,
        Err(e) => render_failed(&e),
    }
}

/// The object printed instead of a result that cannot be rendered (a bug: every result type
/// serializes), so that a `--json` reader gets an error rather than nothing.
fn render_failed(e: &serde_json::Error) -> String {
    let r = broker::report::ErrorReport::new(
        broker::report::ErrorCode::Failed,
        format!("gateway: rendering the result as JSON failed ({e}); please report this bug"),
    );
    // A struct of strings always serializes.
    serde_json::to_string(&r).unwrap_or_default()
}

/// One call as the CLI serves it — here, or in the daemon for one of its clients: the
/// options of its command line, its caller (identity, environment, streams, rights,
/// cancellation: [`broker::client::Context`]) and how its failures are said. `Send`: every
/// function that serves a call is handed it; none reads a thread-local or the process for
/// the caller.
pub(crate) struct Call {
    /// `--policy`, `--state-dir`, `--cwd`, `--json`.
    options: Options,
    /// Who calls.
    cx: broker::client::Context,
    /// Whether the call's failures are said as one JSON object on stdout (`--json`, and
    /// every `tool` call), set from the command line before it is parsed (a usage error
    /// too) and again once parsed.
    json_errors: std::sync::atomic::AtomicBool,
    /// A signal this process caught that ended the call's run (0: none).
    interrupt: std::sync::atomic::AtomicI32,
}

impl std::ops::Deref for Call {
    type Target = Options;
    fn deref(&self) -> &Options {
        &self.options
    }
}

impl Call {
    /// A call of `cx` with `options`.
    fn new(options: Options, cx: broker::client::Context) -> Call {
        let json = options.json;
        Call {
            options,
            cx,
            json_errors: std::sync::atomic::AtomicBool::new(json),
            interrupt: std::sync::atomic::AtomicI32::new(0),
        }
    }

    /// Sets whether failures are said as JSON.
    fn set_json_errors(&self, on: bool) {
        self.json_errors
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether failures are said as JSON.
    fn json_errors(&self) -> bool {
        self.json_errors.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Notes that a signal (SIGINT, SIGTERM, SIGHUP) this process caught ended the call's
    /// run: the process ends by it once the call's report is shown ([`Call::end`]).
    fn interrupted(&self, sig: Option<i32>) {
        if let Some(sig) = sig {
            self.interrupt
                .store(sig, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// `code`, unless a caught signal ended the call: then this process ends by that
    /// signal (as a shell's child would), its report shown.
    fn end(&self, code: ExitCode) -> ExitCode {
        match self.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            0 => code,
            sig => crate::sandbox::exit_interrupted(sig),
        }
    }
}

/// Whether a command line (without the program name) asks for `--json`, as far as it can be
/// told without parsing it: `--json` before any `--` (a usage error's command line may not
/// parse).
fn argv_wants_json<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> bool {
    args.iter()
        .map(AsRef::as_ref)
        .take_while(|a| *a != "--")
        .any(|a| a == "--json")
}

/// The class of a failure that ends with exit `code` (see [`exit`]).
fn error_code_of_exit(code: u8) -> broker::report::ErrorCode {
    use broker::report::ErrorCode as C;
    match code {
        exit::DENIED => C::Denied,
        exit::NOT_APPROVED => C::NotApproved,
        exit::USAGE => C::Usage,
        exit::POLICY => C::Policy,
        exit::TIMEOUT => C::Timeout,
        exit::SANDBOX => C::Sandbox,
        exit::NOT_EXECUTABLE => C::NotExecutable,
        exit::NOT_FOUND => C::NotFound,
        exit::AUDIT => C::Audit,
        _ => C::Failed,
    }
}

/// The exit code of a failure of class `code` (README, "Exit codes and error codes").
pub(crate) fn exit_of_error_code(code: broker::report::ErrorCode) -> u8 {
    use broker::report::ErrorCode as C;
    match code {
        C::Usage | C::Conflict => exit::USAGE,
        C::Denied => exit::DENIED,
        C::NotApproved => exit::NOT_APPROVED,
        C::Policy => exit::POLICY,
        C::Timeout => exit::TIMEOUT,
        C::Sandbox | C::Io | C::NextRunInReach => exit::SANDBOX,
        C::NotExecutable => exit::NOT_EXECUTABLE,
        C::NotFound => exit::NOT_FOUND,
        C::Audit => exit::AUDIT,
        C::Failed => exit::VERIFY_FAILED,
    }
}

mod agent_shell;
mod args;
mod changes;
mod config;
mod credentials;
mod daemon;
mod exec;
pub use daemon::daemon_call;
use daemon::{answer, config_socket, daemon_socket, pending, serve};
use exec::{RunAt, run_exec, run_exec_at};
mod fs;
mod help;
mod http;
mod human;
#[cfg(test)]
mod json_check;
mod log;
mod policies;
mod repl_host;
mod request;
#[cfg(test)]
mod schema;

pub(crate) use args::{Cli, Cmd};
use broker::report::Report;
use broker::request::{Options, PolicyRequest, Request, ScanFormat, UndoAction};

/// Exit codes (documented in README.md). Other codes are the command's own; 128+N means the
/// command was killed by signal N.
pub mod exit {
    /// Denied by policy.
    pub const DENIED: u8 = 120;
    /// `ask` and nobody approved (no terminal, or the answer was no).
    pub const NOT_APPROVED: u8 = 121;
    /// Bad usage: unknown option, missing command, bad --cwd or --env.
    pub const USAGE: u8 = 122;
    /// The policy is invalid or unknown.
    pub const POLICY: u8 = 123;
    /// The timeout expired; the sandbox was killed.
    pub const TIMEOUT: u8 = 124;
    /// The sandbox could not be set up (e.g. no landlock and not best-effort).
    pub const SANDBOX: u8 = 125;
    /// The program exists but cannot be executed.
    pub const NOT_EXECUTABLE: u8 = 126;
    /// The program was not found.
    pub const NOT_FOUND: u8 = 127;
    /// The audit log could not be written (or is damaged where it must be continued):
    /// nothing runs unrecorded.
    pub const AUDIT: u8 = 119;
    /// `log verify`: the log, a checkpoint or a signature does not hold.
    pub const VERIFY_FAILED: u8 = 1;
}

/// A failure of this process's own front end (its command line, `serve`, `mcp`, `repl`
/// starting): rendered as a call's failure is ([`failed`], [`render`]).
fn fail(cli: &Call, code: u8, msg: impl std::fmt::Display) -> ExitCode {
    render(cli, &failed(code, msg))
}

/// A failure as a call's report: its error object (class from `code`) and exit `code`.
fn failed(code: u8, msg: impl std::fmt::Display) -> Report {
    // Errors quote commands, paths and rule subjects: escaped like any untrusted text.
    let text = crate::shown::visible_lines(&msg.to_string()).into_owned();
    Report::error(
        code,
        broker::report::ErrorReport::new(error_code_of_exit(code), text),
    )
}

/// A broker error as a call's report: its error object (with the refusal, when the policy
/// said no) and the exit code of its class.
fn broker_failed(e: BrokerError) -> Report {
    let r = broker::report::ErrorReport::of(&e);
    Report::error(exit_of_error_code(r.error.code), r)
}

/// Renders a call's [`Report`] on this process's streams — the call's own here, or the
/// daemon's client's own once the daemon has answered — and returns its exit code: the
/// result as JSON under `--json` (and for `tool`), else as text; a failure as its error
/// object under `--json` and its message on stderr; the notes on stderr.
fn render(cli: &Call, r: &Report) -> ExitCode {
    // A report that did not come from `dispatch` or a daemon (a front end's own failure, the
    // REPL's `/log`) passes the gate whole here (`broker::gate`).
    let gated = gate_report(r);
    render_gated(cli, gated.as_ref().unwrap_or(r))
}

/// `r` through the gate: `None` when it is shown as it is; a report that cannot pass (a bug:
/// every report serializes and reads back) is replaced by an error saying so.
fn gate_report(r: &Report) -> Option<Report> {
    broker::gate::gated(r).unwrap_or_else(|e| {
        Some(failed(
            exit::VERIFY_FAILED,
            format!("the report could not pass the redaction gate ({e}); please report this bug"),
        ))
    })
}

/// [`render`] of a report that passed the gate already: `dispatch`'s, here or in a daemon.
fn render_gated(cli: &Call, r: &Report) -> ExitCode {
    use broker::report::{Audience, Outcome};
    let json = cli.json_errors();
    match &r.outcome {
        Outcome::Streamed => {}
        Outcome::Error(e) => {
            if json {
                outln!(cli, "{}", to_json(e));
            }
            errln!(
                cli,
                "gateway: {}",
                crate::shown::visible_lines(&e.error.message)
            );
        }
        Outcome::Exec(j) => {
            if cli.json {
                outln!(cli, "{}", j.value());
            }
        }
        Outcome::Tool(j) => outln!(cli, "{}", j.value()),
        Outcome::Fs(o) => fs::render(cli, o),
        Outcome::Log(o) => log::render(cli, o),
        Outcome::Policy(o) => policies::render(cli, o),
        Outcome::Scan(s) => policies::render_scan(cli, s),
        Outcome::Approval(o) => daemon::render_approval(cli, o),
        Outcome::Credentials(x) => credentials::render(cli, x),
        Outcome::Http(j) => http::render(cli, j),
        Outcome::Changes(c) => changes::render(cli, c),
    }
    for n in &r.notes {
        let said = match n.to {
            Audience::Everyone => true,
            Audience::Human => !cli.json,
            Audience::Terminal => !cli.json && cli.cx.stderr_is_tty(),
        };
        if said {
            errln!(cli, "gateway: {}", crate::shown::visible_lines(&n.text));
        }
    }
    ExitCode::from(r.exit)
}

/// The policy's name or path: `--policy` (or GATEWAY_POLICY), else the config file's, else
/// standard.
fn policy_name(cli: &Call) -> String {
    cli.policy
        .clone()
        .or_else(|| config::get().ok().and_then(|c| c.policy.clone()))
        .unwrap_or_else(|| "standard".into())
}

/// Loads the policy, with the config file's retention overrides. In the daemon, a call of a
/// session (`GATEWAY_SESSION`) gets the policy its session pinned (`broker::pin`), and a
/// change on disk since is said once on stderr.
fn load_policy(cli: &Call) -> Result<Policy, String> {
    let (p, notice) = load_pinned(cli)?;
    if let Some(n) = notice {
        errln!(cli, "gateway: {n}");
    }
    Ok(p)
}

/// How a daemon session's policy is reloaded, for the notice that its file changed.
const SESSION_RELOAD: &str = "the session reloads it (`/reload-policy` in the REPL; `gateway policy reload` with this GATEWAY_SESSION; an MCP server: restart it)";

/// The daemon session this call belongs to (its client's `GATEWAY_SESSION`), if any, with
/// the daemon client (whose server holds the session's pins).
fn daemon_session(cli: &Call) -> Option<(&broker::client::Client, String)> {
    let c = cli.cx.client()?;
    cli.cx
        .env_var("GATEWAY_SESSION")
        .filter(|s| !s.is_empty())
        .map(|s| (c, s.to_string_lossy().into_owned()))
}

/// Whose a daemon session's pinned policy is: the client's uid (issue 24).
fn pin_owner(cli: &Call) -> u32 {
    cli.cx.caller("cli").uid
}

/// The policy and, once per change of its files, the notice that the pinned copy is in force.
fn load_pinned(cli: &Call) -> Result<(Policy, Option<String>), String> {
    let spec = policy_name(cli);
    let cx = cli.cx.clone();
    let (mut policy, notice) = match daemon_session(cli) {
        None => (load_named(cli, &spec)?, None),
        Some((client, session)) => {
            let pinned = client
                .server
                .pins
                .in_session(pin_owner(cli), &session, &spec, || load_named(cli, &spec))?;
            let notice = pinned.changed_notice(&cx, SESSION_RELOAD);
            (pinned.policy().clone(), notice)
        }
    };
    // A daemon client's policy governs its own calls, not the state all clients share.
    broker::authz::govern(&cx, &mut policy);
    Ok((policy, notice))
}

/// `gateway policy reload [NAME]`: a daemon session's pinned policy loaded again (from NAME,
/// else as it is named), recorded as `policy.reload` with the old and new hashes.
fn policy_reload(cli: &Call, name: Option<&str>) -> Report {
    let Some((client, session)) = daemon_session(cli) else {
        return failed(
            exit::USAGE,
            "policy reload: nothing is pinned here: without a daemon session (GATEWAY_SESSION, through `gateway serve`) every call loads the policy itself; in the REPL use /reload-policy, and restart an MCP server to load a changed policy",
        );
    };
    let spec = policy_name(cli);
    let owner = pin_owner(cli);
    let pins = &client.server.pins;
    let old = match pins.session_pin(owner, &session, &spec) {
        Some(p) => p,
        None => match pins.in_session(owner, &session, &spec, || load_named(cli, &spec)) {
            Ok(p) => p,
            Err(e) => return failed(exit::POLICY, e),
        },
    };
    let new_spec = name.map_or_else(|| spec.clone(), str::to_string);
    let by = broker::pin::ReloadBy {
        session: &session,
        caller: cli.cx.caller("policy"),
        rule: "session-reload",
        reason: "the session's client asked to reload its policy (`gateway policy reload`)",
        server: cli.cx.server(),
    };
    match broker::pin::reload(&state_dir(cli), &by, &old, &new_spec, || {
        load_named(cli, &new_spec)
    }) {
        Ok(r) => {
            if let Some(e) = r.failed {
                return failed(
                    exit::POLICY,
                    format!(
                        "policy reload: {e}; the session keeps policy {} (sha256 {}) [audit {}]",
                        old.policy().name,
                        old.policy().sha256,
                        r.seq
                    ),
                );
            }
            let report = r.report();
            // The session's policy from now on: its later calls name it as before (`spec`),
            // and find what was reloaded, from NAME or from the same file.
            pins.set_session_pin(owner, &session, &spec, r.pinned);
            Report::new(
                0,
                broker::report::Outcome::Policy(broker::report::policy::PolicyOutcome::Reloaded {
                    session,
                    report,
                }),
            )
        }
        Err(e) => broker_failed(e),
    }
}

/// Loads a policy by name or path, with the config file's retention overrides.
fn load_named(cli: &Call, name: &str) -> Result<Policy, String> {
    let cfg = config::get().map_err(|e| format!("config file: {e}"))?;
    let mut p = if name.contains('/') || name.ends_with(".toml") {
        // A file the caller names: read with the caller's rights (see `client::as_client`).
        cli.cx
            .as_client(|| Policy::load(name))
            .map_err(|e| format!("policy {name}: {e}"))?
    } else {
        Policy::load(name)
    }
    .map_err(|e| e.to_string())?;
    cfg.apply(&mut p);
    Ok(p)
}

fn state_dir(cli: &Call) -> PathBuf {
    if let Some(d) = &cli.state_dir {
        return std::path::absolute(d).unwrap_or_else(|_| d.clone());
    }
    if let Some(d) = config::get().ok().and_then(|c| c.state_dir.clone()) {
        return d;
    }
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("gateway");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".local/state/gateway")
}

/// Parses arguments, runs, and maps the outcome to an exit code.
pub fn main() -> ExitCode {
    // gateway's own confined file-tool worker, started by the broker (not a user command).
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "__fs-worker")
    {
        return broker::tools::fs::worker::worker_main();
    }
    // Called as `gateway-sh` (a symlink: $SHELL must be one executable): `gateway sh ARGS`;
    // as `gateway-bash` (Claude Code takes a CLAUDE_CODE_SHELL only if its path names bash or
    // zsh), the same, running the command with bash.
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let called = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name().map(ToOwned::to_owned));
    if called
        .as_ref()
        .is_some_and(|n| n == "gateway-sh" || n == "gateway-bash")
    {
        agent_shell::AS_BASH.store(
            called.as_ref().is_some_and(|n| n == "gateway-bash"),
            std::sync::atomic::Ordering::Relaxed,
        );
        args.insert(1, "sh".into());
    }
    // Test-only names for the proxy's resolver, from the broker's own environment (a
    // command's cannot reach it): see `net::resolve`.
    if let Some(v) = std::env::var_os("GATEWAY_TEST_RESOLVE") {
        match crate::net::resolve::parse_overrides(&v.to_string_lossy()) {
            Ok(m) => crate::net::resolve::set_overrides(m),
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "gateway: {e}");
                return ExitCode::from(exit::USAGE);
            }
        }
    }
    // This process is the caller; until the command line is parsed, its failures are said
    // as JSON if it asks for `--json` (a usage error too).
    let mut here = Call::new(Options::default(), broker::client::Context::this_process());
    here.set_json_errors(argv_wants_json(&args[1..]));
    if let Some(code) = help::topic(&args) {
        return code;
    }
    let parsed = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                // One line: what is wrong, clap's tip if any, and where to look for the rest.
                _ => fail(&here, exit::USAGE, help::usage_error_line(&e)),
            };
        }
    };
    // `tool` prints JSON whether or not `--json` is given: its usage errors too.
    if matches!(parsed.cmd, Cmd::Tool { .. }) {
        here.set_json_errors(true);
    }
    let (options, parsed) = match request::of(parsed) {
        Ok(x) => x,
        Err(e) => return fail(&here, exit::USAGE, e),
    };
    here.options = options;
    let cli = &here;
    let req = match parsed {
        // Documentation of this binary: never through a daemon (which may be another
        // version); the front ends and the local config run here.
        request::Parsed::Local(l) => return local(cli, l),
        request::Parsed::Call(r) => r,
    };
    // The report is rendered here, wherever the call runs.
    cli.set_json_errors(json_errors_for(cli, &req));
    // Through the daemon when one is configured or running.
    match daemon_socket() {
        Ok(None) => {
            let r = dispatch(cli, req);
            let code = render_gated(cli, &r);
            cli.end(code)
        }
        Ok(Some(sock)) => {
            let call = broker::request::Invocation {
                options: here.options.clone(),
                request: req,
            };
            let called = match &call.request {
                // Claude Code's wrapper: its files are written here, as this user.
                broker::request::Request::Sh { .. } => agent_shell::via_daemon(&sock, call),
                _ => serve::daemon::call(&sock, call),
            };
            match called {
                // The daemon's `dispatch` gated it.
                Ok(r) => render_gated(cli, &r),
                Err(e) => fail(cli, exit::SANDBOX, e),
            }
        }
        Err(e) => fail(cli, exit::SANDBOX, e),
    }
}

/// What runs in this process whatever daemon there is.
fn local(cli: &Call, l: request::Local) -> ExitCode {
    use request::Local;
    match l {
        Local::Completions(shell) => help::completions(shell),
        Local::Man => help::man(),
        Local::Serve {
            socket,
            max_clients,
            call_timeout,
        } => {
            recover_dead_runs(cli);
            serve(cli, socket, max_clients, call_timeout)
        }
        Local::Repl => {
            recover_dead_runs(cli);
            repl_host::run(cli)
        }
        Local::Mcp => {
            recover_dead_runs(cli);
            mcp(cli)
        }
        Local::ConfigShow => {
            recover_dead_runs(cli);
            config_show(cli)
        }
    }
}

/// `gateway mcp`: its own broker, or the daemon's front end when one runs.
fn mcp(cli: &Call) -> ExitCode {
    // The server's directory is where its session starts: its workspace.
    let cwd = match std::path::absolute(effective_place(cli).workspace) {
        Ok(c) => c,
        Err(e) => return fail(cli, exit::USAGE, format!("--cwd: {e}")),
    };
    let session = cli.cx.session_id_for("mcp");
    let backend = match daemon_socket() {
        Err(e) => return fail(cli, exit::SANDBOX, e),
        // The daemon refuses the calls if they name another state directory than its own.
        Ok(Some(socket)) => serve::mcp::Backend::Daemon {
            socket,
            policy: cli.policy.clone(),
            state_dir: cli.state_dir.clone(),
        },
        Ok(None) => match load_policy(cli) {
            // Pinned for the server's life: every call follows this copy (issue 25).
            Ok(policy) => serve::mcp::Backend::Embedded {
                pinned: std::sync::Arc::new(broker::pin::Pinned::new(&session, policy)),
                state_dir: state_dir(cli),
            },
            Err(e) => return fail(cli, exit::POLICY, e),
        },
    };
    match serve::mcp::serve(serve::mcp::McpConfig {
        backend,
        cwd,
        session,
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => broker_fail(cli, e),
    }
}

/// `gateway tool NAME [ARGS]`: one MCP tool call, its result printed as JSON.
fn tool(
    cli: &Call,
    tool: broker::request::ToolName,
    args: serde_json::Map<String, serde_json::Value>,
    roots: &broker::request::Roots,
) -> Report {
    let name = tool.as_str();
    // A daemon session's pinned policy; a change of its file is said in the result.
    let (mut policy, notice) = match load_pinned(cli) {
        Ok(p) => p,
        Err(e) => return failed(exit::POLICY, e),
    };
    if *roots == broker::request::Roots::Nothing {
        policy.narrow_to(vec![]);
    } else if let broker::request::Roots::Dirs(roots) = roots {
        let mut dirs = Vec::new();
        for r in roots {
            // With the caller's rights: through a daemon running as another user (root),
            // a client must not learn what lies in directories it cannot search itself.
            let resolved = cli
                .cx
                .as_client(|| {
                    std::fs::canonicalize(r).map(|c| {
                        let dir = c.is_dir();
                        (c, dir)
                    })
                })
                .and_then(|r| r);
            match resolved {
                Ok((c, true)) => dirs.push(c),
                Ok(_) => {
                    return failed(
                        exit::USAGE,
                        format!("--root {}: not a directory", r.display()),
                    );
                }
                Err(e) => return failed(exit::USAGE, format!("--root {}: {e}", r.display())),
            }
        }
        policy.narrow_to(dirs);
    }
    // The session's workspace: `--cwd`, else where the call comes from (the MCP server's
    // starting directory, through the daemon). Not the session's virtual cwd: the tools
    // read that themselves for relative paths, and `history`/`undo` must not move with it.
    let cwd = match std::path::absolute(cli.cwd.clone().unwrap_or_else(|| PathBuf::from("."))) {
        Ok(c) => c,
        Err(e) => return failed(exit::USAGE, format!("--cwd: {e}")),
    };
    let state = state_dir(cli);
    let session = cli.cx.session_id_for("tool");
    let mut r = serve::mcp::run_tool(
        &serve::mcp::ToolSession {
            policy: &policy,
            state_dir: &state,
            cwd: &cwd,
            session: &session,
            client: "tool",
            // In the daemon, its client's (`Context::cancel`).
            cancel: None,
            cx: &cli.cx,
        },
        name,
        serde_json::Value::Object(args),
    );
    if let Some(n) = notice {
        serve::mcp::add_notice(&mut r, &n);
    }
    // The tool's result, not a protocol revision's envelope: 2026-07-28's `resultType` is
    // the MCP server's to add (rmcp does, for the clients that speak it).
    r.result_type = None;
    let exit = if r.is_error == Some(true) { 1 } else { 0 };
    Report::new(
        exit,
        broker::report::Outcome::Tool(broker::report::Json::of(&r)),
    )
}

/// Records the runs of this state directory whose broker died (see `broker::intent`).
fn recover_dead_runs(cli: &Call) {
    let sd = state_dir(cli);
    match broker::intent::recover(&sd, cli.cx.server()) {
        Ok(seqs) if !seqs.is_empty() => errln!(
            cli,
            "gateway: recorded {} run(s) whose broker died before recording them (gateway log show {})",
            seqs.len(),
            seqs.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Ok(_) => {}
        Err(e) => errln!(
            cli,
            "gateway: warning: could not record the unfinished runs in {}: {e}",
            sd.display()
        ),
    }
}

/// A termination signal's name.
fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// Whether a request's failures are said as JSON: under `--json`, for `tool` (which prints
/// JSON whether or not `--json` is given), and for `scan --format json`.
fn json_errors_for(cli: &Call, req: &Request) -> bool {
    cli.json
        || match req {
            Request::Tool { .. } => true,
            Request::Scan(s) => s.format == ScanFormat::Json,
            _ => false,
        }
}

/// Runs one request here: the embedded broker's, or the daemon's for one of its clients
/// (`daemon_call`). The one dispatch of every request, whichever front end made it.
fn dispatch(cli: &Call, req: Request) -> Report {
    let r = dispatch_ungated(cli, req);
    // Every report a call returns passes the gate whole, once: here, whether the call runs
    // in this process or in a daemon for its client.
    match gate_report(&r) {
        Some(g) => g,
        None => r,
    }
}

/// [`dispatch`] before the gate.
#[allow(
    clippy::too_many_lines,
    reason = "one arm per request (the requests are in broker/request.rs)"
)]
fn dispatch_ungated(cli: &Call, req: Request) -> Report {
    cli.set_json_errors(json_errors_for(cli, &req));
    recover_dead_runs(cli);
    match req {
        Request::Pending => pending(cli),
        Request::Answer {
            id,
            approve,
            always_for_session,
        } => answer(cli, id, approve, always_for_session),
        Request::Scan(s) => {
            let format = if cli.json { ScanFormat::Json } else { s.format };
            let req = broker::tools::scan::ScanRequest {
                paths: s.paths,
                exclude: s.exclude,
                no_ignore: s.no_ignore,
                baseline: s.baseline,
                redact: s.redact,
                state_dir: state_dir(cli),
                min_confidence: s.min_confidence,
                confined: None,
            };
            policies::run_scan(cli, &req, format)
        }
        Request::Policy(PolicyRequest::List) => policies::list(),
        Request::Policy(PolicyRequest::Reload { name }) => policy_reload(cli, name.as_deref()),
        Request::Policy(PolicyRequest::Check { file }) => policies::check(cli, &file),
        Request::Policy(PolicyRequest::Explain {
            command,
            credentials,
        }) => policies::explain(cli, &command, credentials),
        Request::Exec(e) => run_exec(cli, &e),
        Request::Sh { argv } => agent_shell::run_sh(cli, argv),
        Request::Tool { name, args, roots } => tool(cli, name, args, &roots),
        Request::Log(cmd) => log::run(cli, &cmd),
        Request::Fs(cmd) => fs::run(cli, &cmd),
        Request::History { all, limit, since } => fs::history(cli, all, (limit, since)),
        Request::Trash(cmd) => fs::trash(cli, &cmd),
        Request::Changes(cmd) => changes::run(cli, &cmd),
        Request::Undo {
            id,
            all,
            action: UndoAction::Skip,
        } => fs::undo_skip(cli, id, all),
        Request::Undo {
            id,
            all,
            action: UndoAction::Undo { dry_run, force },
        } => fs::undo(cli, id, dry_run, force, all),
        Request::Keys(cmd) => log::keys(cli, cmd),
        Request::Http(h) => http::run_http(cli, &h),
    }
}

/// `gateway sh ARGS`: the argv to run, as `sh` would read ARGS — options until the first
/// operand (or `--`); with `-c`, the first operand is the command string and the rest are
/// `$0` and the positional parameters. `-l`/`--login` and `-i` are dropped (the sandbox's
/// environment is the policy's; nothing is interactive), other options go to the shell.
fn sh_command(args: &[String]) -> Result<Vec<String>, String> {
    let bash = ["/bin/bash", "/usr/bin/bash"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| agent_shell::AS_BASH.load(std::sync::atomic::Ordering::Relaxed) && p.is_file());
    let shell = bash.unwrap_or_else(|| {
        config::get()
            .ok()
            .and_then(|c| c.shell.clone())
            .unwrap_or_else(|| PathBuf::from("/bin/sh"))
    });
    let mut opts: Vec<String> = Vec::new();
    let mut with_c = false;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            i += 1;
            break;
        }
        if a == "--login" {
            i += 1;
            continue;
        }
        if (a == "-o" || a == "+o") && i + 1 < args.len() {
            opts.push(a.clone());
            opts.push(args[i + 1].clone());
            i += 2;
            continue;
        }
        let Some(flags) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) else {
            break;
        };
        if flags.is_empty() || a.starts_with("--") {
            return Err(format!(
                "sh: unsupported option {a} (use -c 'command'; gateway's own options go before `sh`)"
            ));
        }
        let sign = &a[..1];
        let kept: String = flags
            .chars()
            .filter(|&f| {
                if f == 'c' {
                    with_c = true;
                }
                !matches!(f, 'c' | 'l' | 'i')
            })
            .collect();
        if !kept.is_empty() {
            opts.push(format!("{sign}{kept}"));
        }
        // Each `o` in a group (`-eo pipefail`, `-euo pipefail`) takes the next word, as in sh.
        let names = kept.matches('o').count();
        if i + names >= args.len() {
            return Err(format!("sh: {a}: -o needs an option name"));
        }
        opts.extend(args[i + 1..=i + names].iter().cloned());
        i += 1 + names;
    }
    let rest = &args[i..];
    if !with_c || rest.is_empty() {
        return Err(
            "sh: expected -c 'command' [name [args...]] (a shell reading a script from stdin or a file is not supported)"
                .into(),
        );
    }
    let mut argv = vec![shell.display().to_string()];
    argv.extend(opts);
    argv.push("-c".into());
    argv.extend(rest.iter().cloned());
    Ok(argv)
}

/// `gateway config show`.
fn config_show(cli: &Call) -> ExitCode {
    let cfg = match config::get() {
        Ok(c) => c,
        Err(e) => return fail(cli, exit::POLICY, format!("config file: {e}")),
    };
    let from = |flag: bool, env: &str, in_config: bool| {
        if flag {
            format!("option or ${env}")
        } else if in_config {
            "config file".to_string()
        } else {
            "default".to_string()
        }
    };
    let policy_src = from(cli.policy.is_some(), "GATEWAY_POLICY", cfg.policy.is_some());
    let state_src = from(
        cli.state_dir.is_some(),
        "GATEWAY_STATE_DIR",
        cfg.state_dir.is_some(),
    );
    let shell = cfg
        .shell
        .clone()
        .unwrap_or_else(|| PathBuf::from("/bin/sh"));
    // What is shown passes the gate (a policy's load error quotes its text).
    let policy = load_policy(cli).map_err(|e| crate::broker::gate::text(&e).into_owned());
    if cli.json {
        let shown = config::Shown {
            config_file: &cfg.path,
            found: cfg.found,
            policy: config::Setting {
                value: policy_name(cli),
                from: policy_src,
            },
            state_dir: config::Setting {
                value: state_dir(cli).display().to_string(),
                from: state_src,
            },
            socket: cfg.socket.as_deref(),
            shell: &shell,
            retention: cfg.retention,
            effective_retention: policy.as_ref().ok().map(policy::report::Retention::from),
            policy_error: policy.as_ref().err().map(String::as_str),
        };
        match serde_json::to_value(&shown) {
            Ok(mut v) => {
                crate::broker::gate::value(&mut v);
                outln!(cli, "{v}");
            }
            Err(e) => outln!(cli, "{}", render_failed(&e)),
        }
    } else {
        gated_ln!(
            cli,
            "config file: {} ({})",
            cfg.path.display(),
            if cfg.found { "found" } else { "not found" }
        );
        gated_ln!(cli, "policy:      {} ({policy_src})", policy_name(cli));
        gated_ln!(
            cli,
            "state_dir:   {} ({state_src})",
            state_dir(cli).display()
        );
        gated_ln!(
            cli,
            "socket:      {}",
            cfg.socket
                .as_ref()
                .map_or("(none: the CLI is its own broker)".into(), |s| s
                    .display()
                    .to_string())
        );
        gated_ln!(cli, "shell:       {} (for gateway sh)", shell.display());
        match &policy {
            Ok(p) => {
                use crate::model::units;
                let or_none = |v: Option<String>| v.unwrap_or_else(|| "none".into());
                gated_ln!(
                    cli,
                    "retention:   artifacts_max_age {}, artifacts_max_total {}, backups_max_total {}, keep_versions {}",
                    or_none(
                        p.audit
                            .artifacts_max_age
                            .map(|s| units::duration(Duration::from_secs(s)))
                    ),
                    or_none(p.audit.artifacts_max_total.map(units::bytes)),
                    or_none(p.undo.backups_max_total.map(units::bytes)),
                    p.undo.keep_versions
                );
            }
            Err(e) => gated_ln!(cli, "retention:   (the policy does not load: {e})"),
        }
    }
    if policy.is_err() {
        return ExitCode::from(exit::POLICY);
    }
    ExitCode::SUCCESS
}

/// Where a call runs: `--cwd` is both its workspace and working directory; else a named
/// session's (GATEWAY_SESSION) pinned workspace and `cd` (`broker::session`); else the
/// current directory.
fn effective_place(cli: &Call) -> broker::session::Place {
    if let Some(c) = &cli.cwd {
        return broker::session::Place::at(c);
    }
    if cli
        .cx
        .env_var("GATEWAY_SESSION")
        .is_some_and(|s| !s.is_empty())
    {
        return broker::session::place(
            &cli.cx,
            &state_dir(cli),
            &cli.cx.session_id(),
            Path::new("."),
            true,
        );
    }
    broker::session::Place::at(Path::new("."))
}

fn rules_text(d: &Decision) -> String {
    let mut s = String::new();
    for r in d.deciding_rules() {
        s.push_str(&format!(
            "\n  rule {} ({}): {}  [{}]",
            r.id,
            r.effect,
            crate::shown::visible(&r.reason),
            crate::shown::visible(&r.subject)
        ));
    }
    s
}

/// Asks `question` on the terminal: `None` when there is none (stdin is not a terminal).
pub(crate) fn tty_confirm(question: &str) -> Option<bool> {
    broker::client::tty_confirm(question)
}

/// [`fail`] of a broker error (the error object with the refusal, the exit code of its class).
fn broker_fail(cli: &Call, e: BrokerError) -> ExitCode {
    render(cli, &broker_failed(e))
}

#[cfg(test)]
mod exit_tests {
    use super::{exit, exit_of_error_code};
    use crate::broker::report::ErrorCode;
    use crate::broker::{BrokerError, Conflict};

    #[test]
    fn usage_errors_and_conflicts_exit_122_and_what_moved_out_of_usage_has_its_code() {
        let exit_of = |e: &BrokerError| exit_of_error_code(ErrorCode::of(e));
        for u in crate::broker::every_usage_error() {
            let e = BrokerError::Usage(u);
            assert_eq!(exit_of(&e), exit::USAGE, "{e}");
        }
        for c in [
            Conflict::NotASocket { path: "/s".into() },
            Conflict::DaemonRunning { path: "/s".into() },
            Conflict::FileToolsThroughRootDaemon { uid: 65534 },
        ] {
            assert_eq!(exit_of(&BrokerError::Conflict(c)), exit::USAGE);
        }
        // The workspace a daemon's client cannot open: the broker's I/O, exit 125.
        let io = BrokerError::Io {
            what: "the workspace /w cannot be opened by uid 65534".into(),
            source: std::io::Error::from_raw_os_error(13),
        };
        assert_eq!(exit_of(&io), exit::SANDBOX);
        let inv = BrokerError::Invariant {
            tool: "fs.read".into(),
            what: "out of order",
        };
        assert_eq!(exit_of(&inv), exit::VERIFY_FAILED);
    }
}
