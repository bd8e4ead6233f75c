//! One invocation end to end: decide, build the sandbox spec, (ask), run, report.
//! The only module that imports the others.
//!
//! Every tool call runs through one skeleton (`invoke`); the tools' own steps are in `tools`
//! (exec's in `tools::exec`).
//!
//! About 1,000 lines: the typed `BrokerError` (one variant per way a call fails, each with
//! its message; the usage errors and conflicts it carries are in `error.rs`), the requests of
//! exec and explain, and the audit-log plumbing every tool shares.

pub mod approvals;
pub mod authz;
mod capture;
pub mod client;
pub mod credentials;
mod egress;
mod error;
pub mod gate;
mod guard;
pub mod intent;
mod invoke;
mod known_places;
mod layer_check;
pub mod log;
pub mod mutation;
mod next_run;
mod paths;
pub mod pin;
mod places;
mod planner;
pub mod refusal;
pub mod report;
pub mod request;
pub mod server;
pub mod session;
pub mod tools;

use crate::workspace::{snapshot, wsfs};
#[cfg(test)]
pub(crate) use error::tests::every_usage_error;
pub use error::{
    CdProblem, Conflict, GroupConflict, PathProblem, ScanProblem, UndoProblem, UsageError,
    WorkspaceProblem,
};
pub use guard::{InputSecret, OutputSecret, SecretsReport, redact_argv, redact_text};
use layer_check::*;
use places::*;
use planner::*;
pub use planner::{SandboxPlan, plan};
pub use tools::exec::exec;

use crate::audit::{self, artifacts::ArtifactWriter};
use crate::model::{Decision, Tool, ToolCall};
use crate::policy::shell::ShellEnv;
use crate::policy::{self, Policy};
use crate::sandbox::{self, EnforcementStatus, Outcome, SandboxError, Spec, Stdin, Stream};
use serde::Serialize;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Paths no child may read under any policy: credentials whose loss cannot be undone. The
/// credential catalogue (`policies/credentials.toml`, [`credentials`]) and the state
/// directory are added at run time.
pub const ALWAYS_DENY: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "/etc/shadow",
    "/etc/gshadow",
];

/// The rules that made a decision, one indented line each (`rule ID (effect): reason`), as
/// the file tools' and maintenance commands' approval questions list them.
pub(crate) fn rules_lines(d: &Decision) -> String {
    d.deciding_rules()
        .map(|r| format!("\n  rule {} ({}): {}", r.id, r.effect, r.reason))
        .collect()
}

/// A question for a person, from a daemon client's call.
pub(crate) struct Asking<'a> {
    /// The daemon client asked for (its terminal, its prompt).
    pub client: &'a client::Client,
    pub state_dir: &'a Path,
    pub session: &'a str,
    pub caller: &'a audit::Caller,
    pub policy: &'a Policy,
    pub tool: &'a str,
    /// The call, redacted.
    pub command: String,
    pub decision: &'a Decision,
    /// An `ask` decision (queued for `gateway approve`) rather than a confirmation of what
    /// is allowed (put only to a terminal).
    pub required: bool,
    /// The call's workspace.
    pub workspace: &'a Path,
    /// Its working directory.
    pub cwd: &'a Path,
    /// A digest of the environment it gets (see `approvals::Request::env_digest`).
    pub env_digest: String,
}

/// Asks a person on behalf of the daemon client this thread serves: a pending request that
/// `gateway approve|deny ID` or the client's terminal answers, denied after the policy's
/// `[approval] timeout`. A confirmation (not `required`) without a terminal is `None`: the
/// policy's allow stands.
pub(crate) fn ask_person(a: &Asking<'_>, question: &str) -> Option<bool> {
    let c = a.client;
    let tty = c.tty.stdin;
    if !a.required && !tty {
        return None;
    }
    let o = c.server.approvals.ask(
        (a.state_dir, Some(&c.server)),
        approvals::Request {
            session: a.session,
            caller: a.caller,
            tool: a.tool,
            command: a.command.clone(),
            rules: a
                .decision
                .deciding_rules()
                .map(|r| format!("{}: {}", r.id, r.reason))
                .collect(),
            risk: risk(a.tool, a.decision),
            question: question.into(),
            workspace: a.workspace,
            cwd: a.cwd,
            env_digest: a.env_digest.clone(),
        },
        Duration::from_secs(a.policy.approval.timeout),
        (
            &|id, q| tty && (c.prompt)(id, q),
            c.cancel.as_ref().map(std::os::fd::AsFd::as_fd),
        ),
    );
    if !o.approved {
        let _ = std::io::Write::write_all(
            &mut (&c.stderr),
            format!("gateway: not approved: {}\n", o.by).as_bytes(),
        );
    }
    Some(o.approved)
}

/// How a pending request's risk is shown: "high" when what it does may not be taken back —
/// an unanalysable command, a removal by the file tools, a deciding rule about destruction
/// (its id names `rm`, `delete`, `destructive`, `purge`, `wipe` or `shred`, or its reason
/// says deletion, discarding, overwriting or "cannot be undone"), or, whatever the policy's
/// rules are called, an analysed `rm` with a recursive flag (`find -delete` is analysed as
/// `rm -r`); else "medium".
pub(crate) fn risk(tool: &str, d: &Decision) -> &'static str {
    const IDS: &[&str] = &[
        "rm",
        "delete",
        "destructive",
        "destruction",
        "purge",
        "wipe",
        "shred",
    ];
    const REASONS: &[&str] = &[
        "delet",
        "destroy",
        "destruct",
        "discard",
        "overwrit",
        "irreversib",
        "cannot be undone",
        "wipe",
    ];
    let rule_says = d.deciding_rules().any(|r| {
        let reason = r.reason.to_lowercase();
        r.id.to_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| IDS.contains(&w))
            || REASONS.iter().any(|w| reason.contains(w))
    });
    let recursive_rm = d.commands.iter().any(|c| {
        let argv = shlex::split(c).unwrap_or_default();
        let is_rm = argv
            .first()
            .is_some_and(|p| Path::new(p).file_name().is_some_and(|n| n == "rm"));
        is_rm
            && argv[1..]
                .iter()
                .take_while(|a| *a != "--")
                .any(|a| match a.strip_prefix("--") {
                    Some(long) => long == "recursive",
                    None => a.starts_with('-') && a.contains(['r', 'R']),
                })
    });
    if !d.unanalysable.is_empty()
        || matches!(tool, "fs.rm" | "fs.rm.permanent" | "purge")
        || rule_says
        || recursive_rm
    {
        "high"
    } else {
        "medium"
    }
}

/// Where a call's records go: its own writer (one-shot: every record checkpointed and
/// synced) or the daemon's shared one.
pub(crate) struct LogWriter<'a> {
    log: Log<'a>,
    /// Whose sessions' first records are stamped with their pinned policy's hash: the
    /// server's, else this process's own.
    stamps: &'a pin::Stamps,
}

enum Log<'a> {
    Own(Box<audit::AuditLog>),
    Shared(&'a std::sync::Mutex<audit::AuditLog>),
}

impl LogWriter<'_> {
    /// Appends a record; returns its seq.
    pub(crate) fn append(&mut self, rec: &mut audit::Record) -> Result<u64, audit::AuditError> {
        // A session's first record names the policy it pinned.
        self.stamps.stamp(rec);
        // Every record passes the gate whole: its working directory (a directory named with
        // a token), its arguments, its error, the names in it — and any field added later.
        gate::record(rec);
        let seq = match &mut self.log {
            Log::Own(l) => l.append(rec),
            Log::Shared(m) => m.lock().unwrap_or_else(|p| p.into_inner()).append(rec),
        }?;
        self.stamps.stamped(rec);
        Ok(seq)
    }
}

/// Opens the audit log of `state_dir` for a call of `server` (the daemon's: its shared
/// writer; None, a one-shot front end's: its own). Opening is also the check that it can be
/// written: nothing runs unrecorded.
pub(crate) fn open_log<'a>(
    state_dir: &Path,
    server: Option<&'a server::Server>,
) -> Result<LogWriter<'a>, audit::AuditError> {
    let stamps = server.map_or(&pin::OWN, |s| s.pins.stamps());
    if let Some(m) = server.and_then(|s| s.log_of(state_dir)) {
        return Ok(LogWriter {
            log: Log::Shared(m),
            stamps,
        });
    }
    let own = audit::AuditLog::open(state_dir, audit::Checkpoints::EveryRecord)?;
    Ok(LogWriter {
        log: Log::Own(Box::new(own)),
        stamps,
    })
}

/// Appends one record to the audit log of `state_dir`, through `server`'s writer when it
/// has one for it (the daemon's calls, its own records).
pub fn append_record(
    state_dir: &Path,
    server: Option<&server::Server>,
    rec: &mut audit::Record,
) -> Result<u64, BrokerError> {
    ensure_state_dir(state_dir)?;
    Ok(open_log(state_dir, server)?.append(rec)?)
}

/// Where gateway's config file is: `$GATEWAY_CONFIG`, else
/// `$XDG_CONFIG_HOME/gateway/config.toml`, else `~/.config/gateway/config.toml`.
#[allow(
    clippy::disallowed_methods,
    reason = "the gateway's own configuration is this process's, never the caller's"
)]
pub fn config_path() -> PathBuf {
    if let Some(p) = std::env::var_os("GATEWAY_CONFIG").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|x| !x.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| own_home().join(".config"));
    base.join("gateway/config.toml")
}

/// A daemon client's own config: its `$GATEWAY_CONFIG`, else `$XDG_CONFIG_HOME/gateway`, else
/// `~/.config/gateway`, from the client's environment. A run for the client must not change
/// it (it points the client's later calls at a socket, a policy, a state directory), and the
/// daemon's own config (`config_guard`) is somewhere else. `None`: no daemon client.
pub(crate) fn caller_config(cx: &client::Context) -> Option<PathBuf> {
    let c = cx.client()?;
    let var = |k: &str| {
        cx.env_var(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .map(|p| c.cwd.join(p))
    };
    let p = match var("GATEWAY_CONFIG") {
        Some(f) => f,
        None => var("XDG_CONFIG_HOME")
            .unwrap_or_else(|| home(cx).join(".config"))
            .join("gateway"),
    };
    Some(PathBuf::from(policy::normalize(&p.to_string_lossy())))
}

/// What of the config must stay out of every child's reach: the file named by
/// `$GATEWAY_CONFIG`, or the default's directory — created (empty, 0700) when missing, since
/// only an existing path can be excluded, and a run that could create the config could
/// point later runs at another state directory or policy.
#[allow(
    clippy::disallowed_methods,
    reason = "the gateway's own configuration is this process's, never the caller's"
)]
fn config_guard() -> PathBuf {
    let p = config_path();
    if std::env::var_os("GATEWAY_CONFIG").is_some_and(|v| !v.is_empty()) {
        return p;
    }
    let dir = p.parent().map(Path::to_path_buf).unwrap_or(p);
    // not-ws: the gateway's own configuration directory
    if !dir.exists() {
        use std::os::unix::fs::DirBuilderExt;
        // not-ws: the gateway's own configuration directory
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir);
    }
    dir
}

/// Why the broker could not run a call (beyond policy decisions).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The request names something wrong (no command, a workspace that cannot be one, a
    /// path that is not what a file tool needs, nothing to undo): exit 122.
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// The request conflicts with the machine's state (a daemon already serves at the
    /// socket; file tools for another uid through a root daemon): exit 122, `conflict`.
    #[error(transparent)]
    Conflict(#[from] Conflict),
    /// A file tool's worker failed in a way that does not cross its pipe typed (an error on
    /// a path, an I/O error: `FsError` and `io::Error` are not serializable): its class, as the
    /// worker decided it, and its message. (Usage errors and refusals cross typed.)
    #[error("{}{message}", if *code == report::ErrorCode::Usage { "" } else { "file tool: " })]
    Worker {
        /// The class.
        code: report::ErrorCode,
        /// The worker's message.
        message: String,
    },
    /// A field of the request is not what it must be (an environment variable's name, a
    /// session name): exit 122, as a usage error.
    #[error(transparent)]
    Request(#[from] crate::model::RequestError),
    /// A file operation failed on a path (exit 122: the path asked for is not what the
    /// operation needs, or the caller cannot reach it).
    #[error(transparent)]
    Fs(crate::fsops::FsError),
    /// A file could not be read because of a path on the way to it (a directory the
    /// caller may not enter).
    #[error("cannot read {}: {source}", path.display())]
    CannotRead {
        /// The file asked for.
        path: PathBuf,
        /// What failed, on which path.
        source: crate::fsops::FsError,
    },
    /// An undo that failed, with how not to be stuck on it.
    #[error(
        "{source}\nchange {id} is not undone; `gateway undo --skip` passes over it so that `gateway undo` takes the one before, `gateway undo ID` reverts an older one (`gateway history`)"
    )]
    NotUndone {
        /// The change.
        id: u64,
        /// Why.
        source: Box<BrokerError>,
    },
    /// A step of the broker ran out of its order (a bug in gateway, not in the request).
    #[error("{tool}: {what} (a bug in gateway: please report it)")]
    Invariant {
        /// The tool.
        tool: String,
        /// What happened.
        what: &'static str,
    },
    /// The program was not found.
    #[error("command not found: {program} (searched PATH={path})")]
    NotFound {
        /// What was asked for.
        program: String,
        /// The PATH searched.
        path: String,
    },
    /// The policy is invalid.
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    /// The sandbox could not be set up or the program not executed.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// A file that decides the next run (the policy in force, a file it extends, the config)
    /// could be changed by this command: refused, saying how to fix it (`best_effort` does not
    /// lift it).
    #[error("{0}")]
    NextRunInReach(String),
    /// The policy refused (`refusal::Refusal`: a secret in an input, a file tool's path
    /// outside its roots, denied or protected, a file over its size limit): recorded as a
    /// `deny` with the refusal's rule, exit 120.
    #[error(transparent)]
    Refused(#[from] refusal::Refusal),
    /// The audit log could not be written: nothing runs unrecorded.
    #[error("{0}")]
    Audit(#[from] crate::audit::AuditError),
    /// A file tool's worker ran out of time (the policy's `timeout`, or 10 minutes).
    #[error("{0}")]
    TimedOut(String),
    /// An `http` call that is malformed (exit 122) or failed on the way (exit 1).
    #[error(transparent)]
    Http(#[from] tools::http::HttpError),
    /// Local I/O of the broker (temp dirs).
    #[error("{what}: {}", crate::shown::os_error(source))]
    Io {
        /// What.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl BrokerError {
    /// The message with whatever could carry a secret redacted: a refusal's fields, not its
    /// wording (which names policy keys such as `secrets.input = "deny"`).
    pub fn redacted_message(&self) -> String {
        match self {
            BrokerError::Refused(r) => r.redacted_message(),
            e => redact_text(&e.to_string()),
        }
    }
}

/// An exec request.
pub struct ExecRequest<'a> {
    /// argv.
    pub argv: Vec<String>,
    /// The workspace: the writable area (`${WORKSPACE}`), the tree snapshotted for undo.
    pub workspace: PathBuf,
    /// The command's working directory (a session's `cd`, MCP `exec`'s `cwd`): where it
    /// starts and what its relative paths mean — never what it may write.
    pub cwd: PathBuf,
    /// The policy.
    pub policy: &'a Policy,
    /// Broker state directory (never reachable by children).
    pub state_dir: PathBuf,
    /// `--env K=V` additions.
    pub env: Vec<(String, String)>,
    /// Narrows the policy's timeout; one longer than the policy's (or, where it sets none,
    /// than [`crate::model::MAX_TIMEOUT`]) is refused (rule `limits.timeout`).
    pub timeout: Option<Duration>,
    /// stdin for the child.
    pub stdin: Stdin,
    /// Session id recorded in the audit log.
    pub session: String,
    /// Who asked, recorded in the audit log.
    pub caller: audit::Caller,
    /// Snapshot the workspace for undo (None: as the policy's `[undo] snapshot` says).
    pub snapshot: Option<bool>,
    /// Hold the run's changes for review instead of applying them (None: as the policy's
    /// `[undo] review` says).
    pub review: Option<bool>,
    /// The caller: this process or a daemon client (its environment, rights, streams).
    pub context: client::Context,
    /// The call's cancellation (`sandbox::Spec::cancel`): its client cancelled the call or
    /// went away. The run is killed and recorded as cancelled.
    pub cancel: Option<std::os::fd::OwnedFd>,
}

/// The result of an exec request.
#[derive(Debug, Serialize)]
pub struct ExecResult {
    /// The policy decision.
    pub decision: Decision,
    /// Whether it ran.
    pub ran: bool,
    /// For ask: whether a person approved.
    pub approved: Option<bool>,
    /// How it ended, if it ran.
    pub outcome: Option<Outcome>,
    /// Protected paths that did not exist before the run and were created by it; each was
    /// moved to the quarantine in the state directory (`to`), or left in place if that failed.
    /// A protected path that existed before the run is never moved: it was read-only to the
    /// run, so a change to it is someone else's.
    pub protected_created: Vec<Quarantined>,
    /// Protected paths that were not held (mounted read-only, searched), and why: shown on
    /// stderr every time.
    pub protected_warnings: Vec<String>,
    /// What the secrets policy found (rules and places, never values).
    pub secrets: SecretsReport,
    /// The audit record written for it.
    pub audit: Option<AuditInfo>,
    /// What the run changed in the workspace (when snapshotted): undoable as one group.
    pub snapshot: Option<snapshot::SnapshotReport>,
    /// The first `[audit] inline_output` bytes of stdout and one more (to tell that there
    /// was more), after redaction: the report's `stdout` ([`report::ExecReport`]).
    #[serde(skip)]
    pub stdout_head: Vec<u8>,
    /// The same of stderr.
    #[serde(skip)]
    pub stderr_head: Vec<u8>,
    /// The last [`TAIL_KEEP`] bytes of stdout (after redaction): what a bounded result
    /// shows after the cut (`serve::budget`).
    #[serde(skip)]
    pub stdout_tail: Vec<u8>,
    /// The same of stderr.
    #[serde(skip)]
    pub stderr_tail: Vec<u8>,
}

/// Bytes of the end of each stream an exec result keeps for bounded results (MCP's output
/// budget shows head and tail of a long output).
pub const TAIL_KEEP: usize = 128 << 10;

/// The last [`TAIL_KEEP`] bytes of `t`.
fn tail_of(mut t: Vec<u8>) -> Vec<u8> {
    if t.len() > TAIL_KEEP {
        t.drain(..t.len() - TAIL_KEEP);
    }
    t
}

/// Where the run was recorded, and its streams' digests and artifacts.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AuditInfo {
    /// The record's sequence number (`gateway log show SEQ`).
    pub seq: u64,
    /// What the command read on stdin (when relayed).
    pub stdin: Option<audit::StreamDigest>,
    /// Its stdout, after redaction.
    pub stdout: audit::StreamDigest,
    /// Its stderr, after redaction.
    pub stderr: audit::StreamDigest,
}

/// A protected path created by a run.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Quarantined {
    /// Where the run created it.
    pub path: PathBuf,
    /// Where it was moved (None: moving failed and it is still in place).
    pub to: Option<PathBuf>,
}

/// The backup store's bounds for one workspace (`[undo] max_state_bytes`, and the
/// workspace's share: `max_workspace_bytes`, by default half of it).
pub(crate) fn undo_limits(undo: &crate::model::UndoProfile) -> crate::journal::quota::Limits {
    crate::journal::quota::Limits {
        total: undo.max_state_bytes,
        workspace: undo.workspace_quota(),
    }
}

/// Creates the state directory (0700) if missing: a denied path that does not exist could
/// otherwise be created, and filled, by a sandboxed run.
pub(crate) fn ensure_state_dir(state_dir: &Path) -> Result<(), BrokerError> {
    use std::os::unix::fs::DirBuilderExt;
    // not-ws: the broker's own state directory
    if std::fs::symlink_metadata(state_dir).is_ok() {
        return Ok(());
    }
    // not-ws: the broker's own state directory
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .map_err(|e| BrokerError::Io {
            what: format!("creating the state directory {}", state_dir.display()),
            source: e,
        })
}

/// The environment the analyser uses for `~`, `$HOME`, `$PWD`.
pub fn shell_env(cx: &client::Context, cwd: &Path) -> ShellEnv {
    ShellEnv {
        home: home(cx).display().to_string(),
        cwd: cwd.display().to_string(),
    }
}

/// The caller's home (a daemon client's `$HOME`): what `~` means in policies and commands.
pub(crate) fn home(cx: &client::Context) -> PathBuf {
    let h = cx
        .env_var("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(own_home);
    // `/home/./u`, `//home/u`: one spelling, so that what is denied under it is denied.
    if h.is_absolute() {
        PathBuf::from(policy::normalize(&h.to_string_lossy()))
    } else {
        h
    }
}

/// What to say when a run's leftovers could not be killed as it ended: without a pid
/// namespace, in a process with other runs in progress (`gateway mcp` without a daemon, an
/// unprivileged daemon), what it left outside its process group lives on until the last of
/// those runs ends. Shown in the result and on stderr.
pub fn leftovers_warning(o: Option<&sandbox::Outcome>) -> Option<&'static str> {
    o.filter(|o| o.leftovers_killed.is_none() && !o.enforcement.pid_namespace)
        .map(|_| {
            "other commands of this gateway were still running, so processes this command left outside its process group (setsid, daemons) were not killed before its changes were recorded; they are killed when the last of those commands ends, and what they change meanwhile is in no run's record or undo group"
        })
}

/// This process's home (where its own config lives).
#[allow(
    clippy::disallowed_methods,
    reason = "this process's own home, for its own configuration, never the caller's"
)]
fn own_home() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"))
}

/// Canonical workspace, or a usage error.
pub fn workspace(cwd: &Path) -> Result<PathBuf, BrokerError> {
    let c = wsfs::resolve(cwd).ok_or_else(|| {
        UsageError::from(WorkspaceProblem::NoSuchDirectory {
            path: cwd.to_path_buf(),
        })
    })?;
    if !wsfs::is_dir(&c) {
        return Err(UsageError::from(WorkspaceProblem::NotADirectory {
            path: cwd.to_path_buf(),
        })
        .into());
    }
    Ok(c)
}

/// [`workspace`] with the rights of `cx`'s caller: a daemon client learns nothing of a
/// directory it could not reach itself (whether a path exists, is a directory, where a link in
/// a directory it cannot search leads).
///
/// (A daemon running as a normal user cannot take another user's identity: it resolves with
/// its own rights, which are no more than its user's, as its clients' runs have.)
pub fn workspace_of(cx: &client::Context, p: &Path) -> Result<PathBuf, BrokerError> {
    if cx.fs_identity().is_none() || sandbox::effective_uid() != 0 {
        return workspace(p);
    }
    cx.as_client(|| workspace(p))
        .map_err(|source| BrokerError::Io {
            what: format!("resolving {} with the caller's rights", p.display()),
            source,
        })?
}

/// Whether `argv` may run a git command that discards uncommitted work or local history
/// (`policy::discards_git_work`: what git will do, not its spelling; a command it cannot
/// analyse counts). Such a run is snapshotted under every policy.
fn discards_git_work(cx: &client::Context, argv: &[String], cwd: &Path) -> bool {
    argv.iter().any(|a| a.contains("git")) && policy::discards_git_work(argv, &shell_env(cx, cwd))
}

/// Decides an exec call.
pub fn decide_exec(cx: &client::Context, policy: &Policy, argv: &[String], ws: &Path) -> Decision {
    let call = ToolCall {
        tool: Tool::Exec,
        argv: argv.to_vec(),
        paths: vec![],
        cwd: ws.to_path_buf(),
    };
    policy.evaluate(&call, &shell_env(cx, ws))
}

/// The decision as recorded. A request refused before any decision (a secret in argv) is a
/// `deny` naming the refusal's rule; one that failed before it could be decided (a bad
/// `--cwd`, nothing to undo) has the effect `error` — no rule decided it — with the error as
/// its reason, so that `log query --decision deny` lists refusals only.
fn record_decision(d: Option<&Decision>, err: Option<&BrokerError>) -> audit::RecordDecision {
    match d {
        Some(d) => {
            // Each deciding rule once (a rule matching several simple commands is listed
            // once), with its reason.
            let mut rules: Vec<String> = Vec::new();
            let mut reasons = Vec::new();
            for r in d.deciding_rules() {
                if !rules.contains(&r.id) {
                    rules.push(r.id.clone());
                    reasons.push(r.reason.clone());
                }
            }
            audit::RecordDecision {
                effect: d.effect.name().into(),
                rules,
                reasons,
            }
        }
        None => audit::RecordDecision {
            effect: match err {
                Some(BrokerError::Refused(_)) => "deny",
                _ => "error",
            }
            .into(),
            rules: match err {
                Some(BrokerError::Refused(r)) => vec![r.rule().into()],
                _ => vec![],
            },
            reasons: err.map(BrokerError::redacted_message).into_iter().collect(),
        },
    }
}

/// Applies the artifact retention at most once an hour (it lists the store).
fn prune_artifacts(state_dir: &Path, a: &crate::model::AuditProfile) {
    let marker = audit::Paths::new(state_dir).artifacts.join(".pruned");
    // not-ws: the broker's own state directory
    let fresh = std::fs::metadata(&marker)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < Duration::from_secs(3600));
    if fresh {
        return;
    }
    // not-ws: the broker's own state directory
    let _ = std::fs::write(&marker, b"");
    audit::artifacts::prune(
        state_dir,
        a.artifacts_max_age.map(Duration::from_secs),
        a.artifacts_max_total,
    );
}

/// What `policy explain` shows.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Explanation {
    /// Policy name.
    pub policy: String,
    /// The decision.
    pub decision: Decision,
    /// The sandbox that would apply.
    pub sandbox: SandboxPlan,
    /// The kernel's landlock ABI.
    pub landlock_abi: i32,
    /// The layers that would apply on this machine, as the broker would set them up.
    pub layers: Vec<String>,
    /// What happens to secrets in inputs and output.
    pub secrets: crate::model::SecretsProfile,
    /// Secrets the command line holds (rule and place, never the value).
    pub secrets_in_argv: Vec<InputSecret>,
}

/// The mounts a run will have, one line each (for `policy explain`).
fn mounts_explained(c: &sandbox::Confinement) -> Vec<String> {
    let list = |v: &[PathBuf]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let writes_root = c.write.iter().any(|w| w.as_path() == Path::new("/"));
    let mut out = vec![if writes_root {
        "mounts: the host as it is (the policy writes /)".to_string()
    } else {
        format!(
            "mounts: the host read-only; read-write on top (opened without following links): {}",
            list(&c.write)
        )
    }];
    out.push(format!(
        "mounts: read-only (protected): {}",
        list(&c.protected)
    ));
    let masked: Vec<PathBuf> = c
        .hidden
        .iter()
        .chain(c.deny.iter().filter(|d| {
            c.read
                .iter()
                .chain(&c.write)
                .chain(&c.exec)
                .any(|r| d.starts_with(r))
                && !d.starts_with("/dev")
        }))
        .filter(|d| wsfs::exists_nofollow(d))
        .cloned()
        .collect();
    out.push(format!("mounts: masked (denied): {}", list(&masked)));
    out.push(
        "mounts: /dev minimal (null, zero, full, random, urandom, tty, its own devpts), /dev/shm a private tmpfs, /proc the run's own".into(),
    );
    out.push(
        match (sandbox::private_slash_tmp(c), c.private_tmp.is_some()) {
            (true, _) => "mounts: /tmp a private tmpfs of the run's own",
            (false, true) => "mounts: /tmp the host's, read-only (the policy reads or writes under /tmp: the workspace lies there); TMPDIR private",
            _ => "mounts: /tmp the host's (no private TMPDIR)",
        }
        .to_string(),
    );
    out
}

/// Explains what would happen to a command, without running it.
pub fn explain(
    cx: &client::Context,
    policy: &Policy,
    argv: &[String],
    cwd: &Path,
    state_dir: &Path,
) -> Result<Explanation, BrokerError> {
    let ws = workspace(cwd)?;
    let mut decision = decide_exec(cx, policy, argv, &ws);
    guard::redact_decision(&mut decision);
    let privileged = sandbox::namespaces_available();
    let sb = &policy.sandbox;
    let use_tmpfs = uses_tmpfs(policy);
    let tmp = if use_tmpfs {
        tmpfs_mountpoint()?
    } else if sb.private_tmp {
        std::env::temp_dir().join("gateway-<per-invocation>")
    } else {
        std::env::temp_dir()
    };
    let mut layers = vec![format!(
        "landlock ABI {}, seccomp, capabilities cleared, no_new_privs",
        sandbox::landlock_abi()
    )];
    let refused = sandbox::userns_refused();
    layers.push(match (&refused, sb.namespaces) {
        (_, false) => "namespaces: off (policy)".to_string(),
        (None, true) => format!(
            "namespaces: user (you, mapped to yourself), pid (its own /proc), mount, ipc, uts{}",
            if matches!(sb.network, crate::model::Network::ConnectTcp(_)) {
                " (the host's network: connect_tcp)"
            } else {
                ", net"
            }
        ),
        (Some(why), true) if sb.best_effort => format!(
            "namespaces: refused on this host ({why}); best_effort: the run goes on without them"
        ),
        (Some(why), true) => format!(
            "namespaces: refused on this host ({why}): runs are refused (see contrib/ for the two ways out, or set best_effort)"
        ),
    });
    layers.push(if use_tmpfs {
        format!("TMPDIR: a fresh tmpfs per run at {}", tmp.display())
    } else if sb.private_tmp {
        "TMPDIR: a new directory per run".into()
    } else {
        "TMPDIR: the global one".into()
    });
    if sb.limits.memory.is_some() {
        let host_privileged = sandbox::effective_uid() == 0;
        layers.push(if sb.cgroup && sb.namespaces && privileged && host_privileged {
            "memory: per process and in total (memory cgroup, when the kernel has the controller)"
                .into()
        } else {
            "memory: per process only".into()
        });
    }
    let sandbox = plan(cx, policy, &ws, state_dir, &tmp, use_tmpfs, &[])?;
    if sb.namespaces && refused.is_none() {
        layers.extend(mounts_explained(&sandbox.confine));
    }
    Ok(Explanation {
        policy: policy.name.clone(),
        decision,
        sandbox,
        landlock_abi: sandbox::landlock_abi(),
        layers,
        secrets: policy.secrets,
        secrets_in_argv: {
            // Reported as `warn` would: explain never refuses.
            let mut report_only = policy.secrets;
            report_only.input = crate::model::SecretsInput::Warn;
            guard::check_argv(&report_only, &mut argv.to_vec()).unwrap_or_default()
        },
    })
}

/// Summary of enforcement for human output.
pub fn enforcement_summary(e: &EnforcementStatus) -> String {
    let mut parts = vec![format!(
        "landlock abi {} (fs {}, net {}, scoped {})",
        e.landlock.abi, e.landlock.fs, e.landlock.net, e.landlock.scoped
    )];
    parts.push(format!("seccomp {}", e.seccomp()));
    parts.push(format!("caps dropped {}", e.capabilities_dropped()));
    parts.push(format!(
        "namespaces pid {} mnt {} ipc {} net {}",
        e.pid_namespace, e.mount_namespace, e.ipc_namespace, e.net_namespace
    ));
    // Each layer not fully enforced, by name (`--json`'s `enforcement.layers` says why).
    let short: Vec<String> = e
        .layers
        .iter()
        .filter_map(|(layer, s)| match s {
            sandbox::LayerStatus::Partial { .. } => Some(format!("{layer} partial")),
            sandbox::LayerStatus::NotApplied { .. } => Some(format!("{layer} not applied")),
            _ => None,
        })
        .collect();
    if !short.is_empty() {
        parts.push(format!("not enforced: {}", short.join(", ")));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn risk_is_high_for_a_recursive_rm_whatever_the_rule_is_called() {
        // A policy that asks about every command, under a name that says nothing.
        let p = Policy::from_str(
            "[[rule]]\nid = \"confirm-all\"\neffect = \"ask\"\ntools = [\"exec\"]\nreason = \"a person looks first\"\n",
            "u.toml",
            "u",
            None,
        )
        .expect("policy");
        let env = ShellEnv {
            home: "/home/u".into(),
            cwd: "/w".into(),
        };
        let risk_of = |s: &str| {
            let call = ToolCall {
                tool: Tool::Exec,
                argv: vec!["sh".into(), "-c".into(), s.into()],
                paths: vec![],
                cwd: "/w".into(),
            };
            risk("exec", &p.evaluate(&call, &env))
        };
        for s in [
            "rm -rf build",
            "rm -R x",
            "/bin/rm --recursive x",
            "echo a && rm -fr x",
            "find . -delete",
        ] {
            assert_eq!(risk_of(s), "high", "{s}");
        }
        for s in ["rm -f x", "rm -- -r", "ls -R", "echo rm -rf x", "make"] {
            assert_eq!(risk_of(s), "medium", "{s}");
        }
    }

    #[test]
    fn git_config_entries_read_what_git_reads() {
        let text = "[core]\n\thooksPath = .husky ; comment\n\tFsMonitor = \"./x y.sh\"\n[include] path = a.cfg\n[includeIf \"gitdir:/r/\"]\n  path=b.cfg # c\n[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n[alias]\n\tz = !sh ./tools/z.sh\n# [core] pager = no\n";
        let e = git_config_entries(text);
        let keys: Vec<(&str, &str)> = e.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            keys,
            [
                ("core.hookspath", ".husky"),
                ("core.fsmonitor", "./x y.sh"),
                ("include.path", "a.cfg"),
                ("includeif.path", "b.cfg"),
                ("filter.clean", "git-lfs clean -- %f"),
                ("alias.z", "!sh ./tools/z.sh"),
            ]
        );
        assert!(runs_a_program("filter.clean") && runs_a_program("alias.z"));
        assert!(!runs_a_program("user.name"));
    }

    #[test]
    fn narrowing_keeps_inside_replaces_containing_and_drops_the_rest() {
        let roots = [PathBuf::from("/w/a"), PathBuf::from("/w/b/c")];
        let list = vec![
            PathBuf::from("/"),
            PathBuf::from("/w/a/deep"),
            PathBuf::from("/home/u"),
            PathBuf::from("/dev/null"),
            PathBuf::from("/w/b"),
        ];
        let keep_dev = |p: &Path| p.starts_with("/dev");
        assert_eq!(
            narrow(list.clone(), Some(&roots), keep_dev),
            vec![
                PathBuf::from("/dev/null"),
                PathBuf::from("/w/a"),
                PathBuf::from("/w/a/deep"),
                PathBuf::from("/w/b/c"),
            ]
        );
        assert_eq!(narrow(list.clone(), None, keep_dev), list);
        assert!(narrow(list, Some(&[]), |_| false).is_empty());
    }

    #[test]
    fn roots_narrow_a_commands_writable_paths() {
        let d = std::env::temp_dir().join(format!("gateway-narrow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("test setup");
        let top = std::fs::canonicalize(&d).expect("test setup");
        let ws = top.join("ws");
        let sub = ws.join("sub");
        std::fs::create_dir_all(&sub).expect("test setup");
        let state = top.join("state");
        let tmp = top.join("tmp");
        let mut p = Policy::builtin("permissive").expect("test setup");
        let before = plan(
            &client::Context::this_process(),
            &p,
            &ws,
            &state,
            &tmp,
            false,
            &[],
        )
        .expect("test setup");
        assert!(before.confine.write.contains(&PathBuf::from("/")));
        p.narrow_to(vec![sub.clone()]);
        let after = plan(
            &client::Context::this_process(),
            &p,
            &ws,
            &state,
            &tmp,
            false,
            &[],
        )
        .expect("test setup");
        assert_eq!(after.confine.write, vec![sub.clone()]);
        // Reads stay the policy's: commands still need the system's programs.
        assert_eq!(after.confine.read, before.confine.read);
        // The file tools read only inside the roots.
        let fs = tools::fs::root_paths(&client::Context::this_process(), &p, &state, &ws, false)
            .expect("test setup");
        assert_eq!(fs.read, vec![sub.clone()]);
        assert_eq!(fs.write, vec![sub]);
        let _ = std::fs::remove_dir_all(&d);
    }
}
