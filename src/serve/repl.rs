//! `gateway repl`: an interactive shell over the broker (rustyline). A plain line, or
//! `!line`, runs through the gateway as `sh -c line` (decided, confined, recorded; an `ask`
//! prompts here). Slash commands review and revert:
//! `/undo [ID]`, `/history`, `/log [query filters]`, `/policy [NAME]`, `/reload-policy`,
//! `/cd DIR`, `/pending`, `/approve ID`, `/help`, `/exit`. One REPL is one session (its records
//! share an id; `/cd` moves its working directory).
//!
//! The REPL pins the policy it loaded (`broker::pin`): a change of the policy's files is said
//! once on stderr and obeyed only after `/reload-policy` (or `/policy NAME`), each a
//! `policy.reload` record with the old and new hashes; through the daemon, the daemon holds
//! the session's pin and `/reload-policy` is `gateway policy reload`. Lines are kept in a history file, redacted: a secret typed
//! on a command line is not written to disk.
//!
//! With a daemon running (`gateway serve`: GATEWAY_SOCKET, the config's `socket`, or the
//! default socket), the REPL is its front end like every other command: each line and each
//! slash command is a call to the daemon, made with this terminal, the REPL's directory and
//! its session, and recorded in the daemon's log.
//!
//! What only the CLI knows — its `exec` with its output, `log query`, the config file's
//! policy and socket — the REPL reaches through [`Host`], which `cli` implements: `serve`
//! does not import `cli`.

use crate::broker::pin::{self, Pinned};
use crate::broker::report::fs::FsOutcome;
use crate::broker::report::{Outcome, Report};
use crate::broker::session::Place;
use crate::broker::tools::fs::{self as bfs, FsContext, FsOp, FsOutput};
use crate::policy::Policy;
use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};
use std::path::PathBuf;
use std::sync::Arc;

const COMMANDS: &[(&str, &str)] = &[
    (
        "/undo",
        "[ID] [--skip] [--all]  revert the newest change of this workspace (or change ID); --skip passes over it",
    ),
    (
        "/history",
        "[--all]  the journal of changes (this workspace's)",
    ),
    (
        "/log",
        "[filters]  audit records, as `gateway log query` (--tool, --decision, --since, ...)",
    ),
    (
        "/policy",
        "[NAME|PATH]  show the policy, or switch to another (recorded)",
    ),
    (
        "/reload-policy",
        " load the policy's files again (it is pinned until then; recorded)",
    ),
    ("/cd", "DIR  change the session's working directory"),
    (
        "/pending",
        "approval requests waiting in the daemon (`gateway pending`)",
    ),
    (
        "/approve",
        "ID [--always-for-session]  approve a pending request in the daemon",
    ),
    ("/help", "this list"),
    ("/exit", "leave (also Ctrl-D)"),
];

/// Completes slash commands at the start of a line.
struct ReplHelper;

impl Completer for ReplHelper {
    type Candidate = String;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let head = &line[..pos];
        if !head.starts_with('/') || head.contains(' ') {
            return Ok((0, Vec::new()));
        }
        Ok((
            0,
            COMMANDS
                .iter()
                .filter(|(c, _)| c.starts_with(head))
                .map(|(c, _)| c.to_string())
                .collect(),
        ))
    }
}
impl Hinter for ReplHelper {
    type Hint = String;
}
impl Highlighter for ReplHelper {}
impl Validator for ReplHelper {}
impl Helper for ReplHelper {}

/// What the REPL does through the one-shot front end (`cli` implements it).
pub trait Host {
    /// Runs `argv` here as the CLI's `exec` does, printing as it runs, at `place`, in
    /// `session`, under `policy`; Ctrl-C stops the command, not the REPL.
    fn exec(&self, argv: &[String], place: Place, session: &str, policy: &Policy);
    /// Shows a call's report (from the daemon) as the CLI shows it.
    fn render(&self, report: &Report);
    /// `/log [filters]`: `gateway log query` with these arguments, or the parse error.
    fn log_query(&self, args: &[&str]);
    /// Loads a policy by name or path (with the config file's overrides).
    fn load_named(&self, name: &str) -> Result<Policy, String>;
    /// The policy's name as the command line and config name it (`--policy`, else the
    /// config's, else standard).
    fn policy_name(&self) -> String;
    /// A CLI command line (without the program name), typed as the CLI types it; Err: what
    /// is wrong with it, said as the CLI says it.
    fn request(&self, argv: &[String]) -> Result<crate::broker::request::Request, String>;
}

/// What the REPL starts with (the CLI resolves it from its options and config).
pub struct Start {
    /// The policy, pinned for the session.
    pub pinned: Arc<Pinned>,
    /// The policy as named (`--policy`), for the daemon's calls.
    pub policy_spec: Option<String>,
    /// The writable area (canonical).
    pub workspace: PathBuf,
    /// The working directory (canonical).
    pub cwd: PathBuf,
    /// The session's id.
    pub session: String,
    /// The state directory.
    pub state: PathBuf,
    /// The daemon this REPL is the front end of, if one runs.
    pub daemon: Option<PathBuf>,
    /// The config file's `socket`, to look for a daemon again (`/pending`, `/approve`).
    pub config_socket: Option<PathBuf>,
}

struct Repl<'a> {
    host: &'a dyn Host,
    /// The policy, pinned for the session (`/reload-policy` replaces it).
    pinned: Arc<Pinned>,
    /// The policy as named (`--policy`, `/policy NAME`), for the daemon's calls.
    policy_spec: Option<String>,
    /// The writable area, fixed for the REPL's life (`/cd` moves only `cwd`).
    workspace: PathBuf,
    cwd: PathBuf,
    session: String,
    state: PathBuf,
    /// The daemon this REPL is the front end of.
    daemon: Option<PathBuf>,
    /// The config file's `socket`.
    config_socket: Option<PathBuf>,
}

impl Repl<'_> {
    /// `/undo [ID] [--skip] [--all]`.
    fn undo(&self, args: &[&str]) {
        let (mut id, mut skip, mut all) = (None, false, false);
        for a in args {
            match *a {
                "--skip" => skip = true,
                "--all" => all = true,
                a => match a.parse::<u64>() {
                    Ok(i) if id.is_none() => id = Some(i),
                    _ => {
                        eprintln!("/undo: expected [ID] [--skip] [--all] (see /history)");
                        return;
                    }
                },
            }
        }
        let confirm = |q: &str, _: bool| crate::broker::client::tty_confirm(q);
        let ctx = self.fs_ctx(&confirm);
        if skip {
            match bfs::skip(&ctx, id, all) {
                Ok(ids) => println!(
                    "passed over change(s) {ids:?}: /undo takes the one before from now on"
                ),
                Err(e) => eprintln!("/undo: {e}"),
            }
            return;
        }
        let res = bfs::run(
            &ctx,
            FsOp::Undo {
                id,
                dry_run: false,
                force: false,
                all,
            },
        );
        match res {
            Ok(r) => match r.output {
                FsOutput::Done { what, .. } => println!("{}", crate::shown::visible(&what)),
                FsOutput::Changed { path, change, .. } => println!(
                    "reverted {} (change {})",
                    path.display(),
                    change.map_or("-".into(), |c| c.to_string())
                ),
                FsOutput::Denied | FsOutput::NotApproved => {
                    eprintln!("/undo: refused by the policy")
                }
                _ => {}
            },
            Err(e) => eprintln!("/undo: {e}"),
        }
    }

    /// `/history [--all]`: the newest 20 changes of the session's workspace (or all).
    fn history(&self, args: &[&str]) {
        let all = args.contains(&"--all");
        let confirm = |_: &str, _: bool| None;
        let ws = match crate::broker::workspace(&self.fs_ctx(&confirm).workspace) {
            Ok(w) => w,
            Err(e) => return eprintln!("/history: {e}"),
        };
        let scope = if all {
            bfs::Scope::All
        } else {
            bfs::Scope::Workspace(&ws)
        };
        match bfs::history_page(
            &self.state,
            scope,
            &crate::broker::client::Context::this_process(),
            20,
            None,
        ) {
            Ok(page) => {
                for e in page.changes {
                    let c = &e.change;
                    println!(
                        "{:>5}  {:<16} {:<10} {}{}{}",
                        c.id,
                        crate::shown::visible(&c.tool),
                        format!("{:?}", e.phase).to_lowercase(),
                        crate::shown::arg_shown(&c.path.to_string_lossy()),
                        c.undoes
                            .map_or(String::new(), |u| format!("  (undoes {u})")),
                        if e.skipped { "  [skipped]" } else { "" }
                    );
                }
            }
            Err(e) => eprintln!("/history: {e}"),
        }
    }

    fn fs_ctx<'p>(&'p self, confirm: &'p dyn Fn(&str, bool) -> Option<bool>) -> FsContext<'p> {
        FsContext {
            policy: self.pinned.policy(),
            workspace: self.workspace.clone(),
            cwd: self.cwd.clone(),
            state_dir: self.state.clone(),
            session: self.session.clone(),
            caller: crate::broker::client::Context::this_process().caller("repl"),
            confirm,
            client: crate::broker::client::Context::this_process(),
            cancel: None,
        }
    }

    /// A call to the daemon: `argv` (a CLI command line, typed by the CLI) with this
    /// terminal, the REPL's directory and session. `capture`: its stdout is returned instead
    /// of shown.
    fn daemon_call(
        &self,
        sock: &std::path::Path,
        argv: Vec<String>,
        capture: bool,
    ) -> Result<(Report, String), String> {
        use std::os::fd::AsFd;
        let call = crate::broker::request::Invocation {
            options: crate::broker::request::Options {
                policy: self.policy_spec.clone(),
                ..Default::default()
            },
            request: self.host.request(&argv)?,
        };
        let env = super::daemon::env_for_session(&self.session);
        let (i, o, e) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
        if capture {
            let (report, out, _) = super::daemon::call_captured(
                sock,
                call,
                super::daemon::Captured {
                    cwd: self.workspace.clone(),
                    env,
                    stdin: i.as_fd(),
                    stderr: Some(e.as_fd()),
                    ask_here: true,
                    cancel: None,
                },
            )?;
            return Ok((report, String::from_utf8_lossy(&out).into_owned()));
        }
        let report = super::daemon::call_with(
            sock,
            call,
            super::daemon::CallIo {
                cwd: self.workspace.clone(),
                env,
                stdio: [i.as_fd(), o.as_fd(), e.as_fd()],
                ask_here: true,
                cancel: None,
            },
        )?;
        Ok((report, String::new()))
    }

    /// Runs a CLI command line through the daemon, showing what it prints.
    fn through_daemon(&self, sock: &std::path::Path, what: &str, argv: Vec<String>) {
        match self.daemon_call(sock, argv, false) {
            Ok((r, _)) => self.host.render(&r),
            Err(e) => eprintln!("{what}: {e}"),
        }
    }

    fn run(&self, line: &str) {
        if let Some(sock) = &self.daemon {
            let argv = ["exec", "--", "sh", "-c", line].map(String::from).to_vec();
            return self.through_daemon(sock, "gateway", argv);
        }
        let place = Place {
            workspace: self.workspace.clone(),
            cwd: self.cwd.clone(),
        };
        let argv = vec!["sh".to_string(), "-c".to_string(), line.to_string()];
        // The command's output and gateway's messages are printed as it runs.
        self.host
            .exec(&argv, place, &self.session, self.pinned.policy());
    }

    /// `/reload-policy` (`name` None) or `/policy NAME`: the policy loaded again, from its
    /// files or from NAME, recorded with the old and new hashes; a policy that does not load
    /// leaves the pinned one in force. Through the daemon: `gateway policy reload`.
    fn reload(&mut self, cmd: &str, name: Option<&str>) {
        if let Some(sock) = self.daemon.clone() {
            let mut argv = vec!["policy".to_string(), "reload".to_string()];
            argv.extend(name.map(str::to_string));
            if let Ok((r, out)) = self.daemon_call(&sock, argv, true).map_err(|e| {
                eprintln!("{cmd}: {e}");
            }) {
                print!("{out}");
                self.host.render(&r);
                if r.exit != 0 {
                    return;
                }
                if let Some(n) = name {
                    self.policy_spec = Some(n.to_string());
                    if let Ok(p) = self.host.load_named(n) {
                        self.pinned = Arc::new(Pinned::new(&self.session, p));
                    }
                }
            }
            return;
        }
        let spec = name.map_or_else(
            || {
                self.policy_spec
                    .clone()
                    .unwrap_or_else(|| self.host.policy_name())
            },
            str::to_string,
        );
        let by = pin::ReloadBy {
            session: &self.session,
            caller: crate::broker::client::Context::this_process().caller("repl"),
            rule: "repl-command",
            reason: "a person at the REPL asked to reload the policy",
            server: None,
        };
        match pin::reload(&self.state, &by, &self.pinned, &spec, || {
            self.host.load_named(&spec)
        }) {
            Ok(r) => match r.failed {
                Some(e) => eprintln!(
                    "{cmd}: {e}; policy {} (sha256 {}) stays in force [audit {}]",
                    self.pinned.policy().name,
                    self.pinned.policy().sha256,
                    r.seq
                ),
                None => {
                    println!(
                        "policy {} (sha256 {}) in force, replacing sha256 {} [audit {}]",
                        r.pinned.policy().name,
                        r.pinned.policy().sha256,
                        self.pinned.policy().sha256,
                        r.seq
                    );
                    self.pinned = r.pinned;
                    if name.is_some() {
                        self.policy_spec = Some(spec);
                    }
                }
            },
            Err(e) => eprintln!("{cmd}: {e}; the policy in force is unchanged"),
        }
    }

    /// A slash command through the daemon; `None`: not one the daemon runs.
    fn daemon_slash(&mut self, sock: &std::path::Path, cmd: &str, args: &[&str]) -> Option<()> {
        let owned = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<String>>();
        match cmd {
            "/undo" => self.through_daemon(sock, cmd, [owned(&["undo"]), owned(args)].concat()),
            "/history" => {
                self.through_daemon(sock, cmd, [owned(&["history"]), owned(args)].concat())
            }
            "/log" => {
                self.through_daemon(sock, cmd, [owned(&["log", "query"]), owned(args)].concat())
            }
            "/cd" => {
                let target = args.first().copied().unwrap_or("~");
                match self.daemon_call(sock, owned(&["fs", "cd", target]), false) {
                    Ok((
                        Report {
                            exit: 0,
                            outcome: Outcome::Fs(FsOutcome::Cd { cwd }),
                            ..
                        },
                        _,
                    )) => self.cwd = cwd,
                    Ok((r, _)) => self.host.render(&r),
                    Err(e) => eprintln!("/cd: {e}"),
                }
            }
            _ => return None,
        }
        Some(())
    }

    fn slash(&mut self, cmd: &str, args: &[&str]) -> bool {
        if let Some(sock) = self.daemon.clone()
            && self.daemon_slash(&sock, cmd, args).is_some()
        {
            return true;
        }
        match cmd {
            "/exit" | "/quit" => return false,
            "/help" => {
                println!("a plain line (or !line) runs through the gateway as `sh -c line`");
                for (c, h) in COMMANDS {
                    println!("  {c:<9} {h}");
                }
            }
            "/undo" => self.undo(args),
            "/history" => self.history(args),
            "/log" => self.host.log_query(args),
            "/policy" => match args.first() {
                None => {
                    let p = self.pinned.policy();
                    println!(
                        "policy {}: {} ({} rules; sha256 {})",
                        p.name,
                        p.description,
                        p.rules.len(),
                        p.sha256
                    );
                }
                Some(name) => self.reload(cmd, Some(name)),
            },
            "/reload-policy" => self.reload(cmd, None),
            "/cd" => {
                let target = args.first().copied().unwrap_or("~");
                let confirm = |_: &str, _: bool| None;
                match bfs::cd(&self.fs_ctx(&confirm), target) {
                    Ok(d) => self.cwd = d,
                    Err(e) => eprintln!("/cd: {e}"),
                }
            }
            "/pending" | "/approve" => {
                // The queue lives in the daemon: ask it, as `gateway pending|approve` do.
                let mut argv = vec![cmd.trim_start_matches('/').to_string()];
                argv.extend(args.iter().map(|a| a.to_string()));
                match self.daemon.clone().map_or_else(
                    || super::daemon::socket_to_use(|| self.config_socket.clone()),
                    |d| Ok(Some(d)),
                ) {
                    Ok(Some(sock)) => self.through_daemon(&sock, cmd, argv),
                    Ok(None) => eprintln!(
                        "{cmd}: no daemon is running (`gateway serve`): this REPL is its own broker and asks here when a command needs approval"
                    ),
                    Err(e) => eprintln!("{cmd}: {e}"),
                }
            }
            other => eprintln!("{other}: unknown command (/help lists them)"),
        }
        true
    }
}

/// Runs the REPL until /exit or end of input. `Err`: there is no terminal to read from.
pub fn run(host: &dyn Host, start: Start) -> Result<(), String> {
    let Start {
        pinned,
        policy_spec,
        workspace,
        cwd,
        session,
        state,
        daemon,
        config_socket,
    } = start;
    let mut ed: Editor<ReplHelper, DefaultHistory> = match Editor::new() {
        Ok(e) => e,
        Err(e) => return Err(format!("gateway repl needs a terminal: {e}")),
    };
    ed.set_helper(Some(ReplHelper));
    let history = state.join("repl_history");
    let _ = ed.load_history(&history);
    let mut r = Repl {
        host,
        pinned,
        policy_spec,
        workspace,
        cwd,
        session,
        state,
        daemon,
        config_socket,
    };
    println!(
        "gateway repl — policy {}, session {}{}; /help for commands",
        r.pinned.policy().name,
        r.session,
        r.daemon.as_ref().map_or(String::new(), |d| format!(
            ", through the daemon at {}",
            d.display()
        ))
    );
    loop {
        let name = r.cwd.file_name().map_or_else(
            || r.cwd.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let line = match ed.readline(&format!("gateway:{name}$ ")) {
            Ok(l) => l,
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            Err(_) => break,
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // Kept redacted: a token typed on a command line never reaches the history file.
        let _ = ed.add_history_entry(crate::broker::redact_text(line));
        // The policy's files changed since it was pinned: said once, not obeyed.
        if r.daemon.is_none()
            && let Some(n) = r.pinned.changed_notice(
                &crate::broker::client::Context::this_process(),
                "/reload-policy",
            )
        {
            eprintln!("gateway: {n}");
        }
        if let Some(cmd) = line.strip_prefix('!') {
            r.run(cmd.trim());
        } else if line.starts_with('/') {
            let mut parts = line.split_whitespace();
            let cmd = parts.next().unwrap_or("");
            let args: Vec<&str> = parts.collect();
            if !r.slash(cmd, &args) {
                break;
            }
        } else {
            r.run(line);
        }
    }
    // not-ws: the broker's own state directory (the REPL's history file)
    if std::fs::create_dir_all(&r.state).is_ok() {
        let _ = ed.save_history(&history);
    }
    Ok(())
}
