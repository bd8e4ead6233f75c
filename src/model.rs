//! Shared value types: what a caller asks for ([`ToolCall`]) and what policy answers
//! ([`Decision`]). Every module may use these; they carry no behaviour beyond ordering.

use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Network access for a sandboxed run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// No sockets at all except `socketpair(AF_UNIX)` of type `SOCK_STREAM` or `SOCK_SEQPACKET`;
    /// with namespaces, an empty network namespace (the host's `/proc/net` is not seen).
    None,
    /// IPv4/IPv6 in a private network namespace with only `lo`; no unix sockets.
    Loopback,
    /// The host network, TCP connect to these ports only; no bind, no UDP, no unix sockets.
    ConnectTcp(Vec<u16>),
    /// Egress by name: a private network namespace with only `lo`, where the broker's proxy
    /// listens (HTTP forward, `CONNECT`, SOCKS5), deciding each connection by these rules.
    Proxy(Box<ProxyNet>),
}

impl Network {
    /// A private network namespace with only `lo` up: `loopback`, and `proxy` (whose proxy
    /// listens on that loopback).
    pub fn private_loopback(&self) -> bool {
        matches!(self, Network::Loopback | Network::Proxy(_))
    }
}

/// The `proxy` network mode: which destinations the broker's proxy connects a command to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ProxyNet {
    /// Destinations allowed, as written (`example.com`, `*.example.org`, `localhost:3000`).
    pub allow: Vec<String>,
    /// Destinations refused whatever `allow` says.
    pub deny: Vec<String>,
    /// What a destination no rule covers gets.
    pub unknown: Unknown,
    /// `allow` and `deny`, parsed.
    #[serde(skip)]
    #[schemars(skip)]
    pub rules: crate::net::rules::Rules,
}

/// What the proxy does with a destination no rule covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Unknown {
    /// Refused, naming `network.unknown`.
    Deny,
    /// A person is asked (the daemon's approval queue); refused where no one can be asked.
    Ask,
}

impl ProxyNet {
    /// Parses the rule lists: the first rule that does not parse is the error.
    pub fn new(
        allow: Vec<String>,
        deny: Vec<String>,
        unknown: Unknown,
    ) -> Result<ProxyNet, crate::net::rules::RuleError> {
        let rules = crate::net::rules::Rules::parse(&allow, &deny)?;
        Ok(ProxyNet {
            allow,
            deny,
            unknown,
            rules,
        })
    }
}

/// The longest wall-clock timeout a run may have when its policy sets none, and the longest
/// a policy may set (`[sandbox.limits] timeout`): 7 days. A request (`exec --timeout`, the
/// daemon's `timeout_ms`, MCP's `timeout`) may only narrow the policy's timeout, or this
/// when the policy sets none; a longer one is refused (rule `limits.timeout`).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Resource limits of a run. `None` = not limited.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Limits {
    /// Wall-clock timeout.
    pub timeout: Option<Duration>,
    /// CPU seconds (RLIMIT_CPU).
    pub cpu: Option<u64>,
    /// Memory in bytes: per process (RLIMIT_AS) and in total (memory cgroup).
    pub memory: Option<u64>,
    /// Processes (pid namespace `pid_max`, RLIMIT_NPROC).
    pub pids: Option<u64>,
    /// Open files per process (RLIMIT_NOFILE).
    pub open_files: Option<u64>,
    /// Largest file a process may write, bytes (RLIMIT_FSIZE).
    pub file_size: Option<u64>,
    /// stdout + stderr bytes before the run is stopped.
    pub output: Option<u64>,
    /// The caller's own resource limits, as (resource, soft, hard) — a daemon client's, read
    /// from its process — which nothing in the run may exceed: the daemon's own (possibly
    /// higher) limits are not what its child inherits, and a policy value above them is
    /// lowered to them. Empty: the run inherits this process's.
    #[serde(skip)]
    #[schemars(skip)]
    pub ceiling: Vec<(u32, u64, u64)>,
}

/// The tools a call can name. `exec` runs a program; the others are file tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Tool {
    /// Run a program.
    Exec,
    /// Read a file.
    Read,
    /// Create or replace a file.
    Write,
    /// Change part of a file.
    Edit,
    /// Delete a file or directory.
    Delete,
    /// Move or rename.
    Move,
    /// Create a directory.
    Mkdir,
    /// List a directory.
    List,
    /// Search file names or contents.
    Search,
    /// Delete permanently, without a copy in the trash (`fs rm --permanent`, `trash empty`).
    Purge,
    /// Upkeep of the broker's own state directory: `log gc` (the policy's retention, now),
    /// `keys rotate` (a new signing key).
    Maintenance,
    /// An HTTP request made by the broker (`gateway http`, MCP `http_request`); its
    /// destination is decided by the policy's `[sandbox] network` as well.
    Http,
}

impl Tool {
    /// Every tool, in a stable order.
    pub const ALL: [Tool; 12] = [
        Tool::Exec,
        Tool::Read,
        Tool::Write,
        Tool::Edit,
        Tool::Delete,
        Tool::Move,
        Tool::Mkdir,
        Tool::List,
        Tool::Search,
        Tool::Purge,
        Tool::Maintenance,
        Tool::Http,
    ];

    /// The name used in policies and records.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Exec => "exec",
            Tool::Read => "read",
            Tool::Write => "write",
            Tool::Edit => "edit",
            Tool::Delete => "delete",
            Tool::Move => "move",
            Tool::Mkdir => "mkdir",
            Tool::List => "list",
            Tool::Search => "search",
            Tool::Purge => "purge",
            Tool::Maintenance => "maintenance",
            Tool::Http => "http",
        }
    }

    /// Parses a policy name.
    pub fn from_name(s: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == s)
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A rule's effect, ordered by strictness: `Allow < Ask < Deny`.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Run it.
    Allow,
    /// Run it only if a person approves.
    Ask,
    /// Do not run it.
    Deny,
}

impl Effect {
    /// The name used in policies and output.
    pub fn name(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Ask => "ask",
            Effect::Deny => "deny",
        }
    }
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One request to the broker.
#[derive(Clone, Debug)]
pub struct ToolCall {
    /// Which tool.
    pub tool: Tool,
    /// For `exec`: the argv as given (program first).
    pub argv: Vec<String>,
    /// For file tools: the target paths.
    pub paths: Vec<PathBuf>,
    /// The workspace (the caller's `--cwd`), canonical.
    pub cwd: PathBuf,
}

/// Why a rule (or a built-in fallback) contributed to a decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RuleMatch {
    /// The rule's id; built-in fallbacks use `default-deny` and `unanalysable`.
    pub id: String,
    /// What the rule says.
    pub effect: Effect,
    /// The reason shown to users.
    pub reason: String,
    /// The simple command (or path) it matched, as text.
    pub subject: String,
}

/// The answer of policy to a [`ToolCall`].
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Decision {
    /// The combined effect: any deny → deny; else any ask → ask; else allow.
    pub effect: Effect,
    /// Every rule that matched, and the fallbacks that applied.
    pub rules: Vec<RuleMatch>,
    /// The simple commands that were found and checked (for `exec`).
    pub commands: Vec<String>,
    /// Parts that could not be analysed, and why.
    pub unanalysable: Vec<String>,
}

impl Decision {
    /// The rules that made the decision: those whose effect is the decision's.
    pub fn deciding_rules(&self) -> impl Iterator<Item = &RuleMatch> {
        self.rules.iter().filter(|r| r.effect == self.effect)
    }
}

/// What happens to secrets found in a command's output (policy `secrets.output`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SecretsOutput {
    /// Each secret is replaced by `[REDACTED:<rule>]`.
    Redact,
    /// The first secret stops the run: output from it on is withheld and the command killed.
    Block,
    /// Output passes unchanged; the caller is told which rules matched.
    Warn,
}

/// What happens to secrets found in a command's inputs: argv, environment, stdin (policy
/// `secrets.input`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SecretsInput {
    /// The call is refused; the error names the rule and where, never the value.
    Deny,
    /// Each secret is replaced by `[REDACTED:<rule>]` before the command sees it.
    Redact,
    /// The command runs unchanged; the caller is told which rules matched.
    Warn,
}

/// A policy's secrets settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SecretsProfile {
    /// Secrets in output.
    pub output: SecretsOutput,
    /// Secrets in argv, environment and stdin.
    pub input: SecretsInput,
    /// Output findings below this confidence are left as they are (neither redacted, blocked
    /// nor reported); `low`, the default, acts on every finding.
    pub redact_min_confidence: crate::secrets::Confidence,
}

impl Default for SecretsProfile {
    fn default() -> SecretsProfile {
        SecretsProfile {
            output: SecretsOutput::Redact,
            input: SecretsInput::Deny,
            redact_min_confidence: crate::secrets::Confidence::Low,
        }
    }
}

/// A policy's audit settings (policy section `[audit]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AuditProfile {
    /// Store each command's (redacted) stdout and stderr as artifacts.
    pub store_output: bool,
    /// Bytes of each stream stored at most (the record still hashes all of it).
    pub artifact_max: u64,
    /// Bytes of each stream a `--json` result returns inline; beyond, it says `truncated`.
    pub inline_output: u64,
    /// Artifacts older than this many seconds are removed.
    pub artifacts_max_age: Option<u64>,
    /// The oldest artifacts are removed while all of them take more than this many bytes.
    pub artifacts_max_total: Option<u64>,
}

impl Default for AuditProfile {
    fn default() -> AuditProfile {
        AuditProfile {
            store_output: true,
            artifact_max: 16 << 20,
            inline_output: 1 << 20,
            artifacts_max_age: Some(30 * 86_400),
            artifacts_max_total: Some(1 << 30),
        }
    }
}

/// A policy's undo settings (policy section `[undo]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct UndoProfile {
    /// Record what each `exec` changes in the workspace, so `gateway undo` can revert it.
    pub snapshot: bool,
    /// Files larger than this are not snapshotted (reported as skipped).
    pub snapshot_max_file: u64,
    /// Backups kept per path: the contents of its last N changes.
    pub keep_versions: u64,
    /// The backup store's size cap (the oldest changes' contents go first).
    pub backups_max_total: Option<u64>,
    /// The most the backup store may occupy on disk (allocated bytes), enforced whenever a
    /// content is stored: the oldest contents are expired, else the content is not backed up
    /// (recorded). Issue 22 item 7.
    pub max_state_bytes: u64,
    /// The most of the backup store one workspace may hold (`[undo] max_workspace_bytes`;
    /// None: half of `max_state_bytes`). See [`UndoProfile::workspace_quota`].
    pub max_workspace_bytes: Option<u64>,
    /// How a command's changes are captured (`[undo] capture`).
    pub capture: CaptureMode,
    /// Hold every command's changes for review (`gateway apply`/`discard`) unless the call
    /// says otherwise (`[undo] review`).
    pub review: bool,
}

/// How a command's changes to the workspace are captured (`[undo] capture`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureMode {
    /// An overlay of the workspace in the run's mount namespace: what the run wrote, applied
    /// after it (or held for review); a walk where the overlay cannot be mounted.
    #[default]
    Overlay,
    /// A walk of the workspace before and after the run (inode, size, ctime, content).
    Walk,
}

impl UndoProfile {
    /// The per-workspace quota in effect: `max_workspace_bytes`, by default half of
    /// `max_state_bytes`, and never more than it.
    pub fn workspace_quota(&self) -> u64 {
        self.max_workspace_bytes
            .unwrap_or(self.max_state_bytes / 2)
            .min(self.max_state_bytes)
    }
}

/// Settings of the file tools (policy `[files]`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FilesProfile {
    /// The largest file the tools read or change, in bytes (a window of lines of a bigger
    /// text file is not read either: the whole file is loaded).
    pub max_size: u64,
}

/// How much output a result carries (policy `[output]`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct OutputProfile {
    /// Characters of each MCP tool result's text (its JSON) at most: longer outputs keep
    /// their head and tail, the middle replaced by a marker naming where the whole is.
    pub mcp_budget: u64,
}

impl OutputProfile {
    /// The default `mcp_budget`.
    pub const MCP_BUDGET: u64 = 30_000;
    /// The least budget a policy or a call may set (a result must still say something).
    pub const MCP_BUDGET_MIN: u64 = 4_000;
    /// The most a policy or a call may set.
    pub const MCP_BUDGET_MAX: u64 = 200_000;
}

impl Default for OutputProfile {
    fn default() -> OutputProfile {
        OutputProfile {
            mcp_budget: OutputProfile::MCP_BUDGET,
        }
    }
}

/// How `ask` decisions wait for a person (policy `[approval]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalProfile {
    /// Seconds a pending request waits for `gateway approve` (or the terminal) before it is
    /// denied.
    pub timeout: u64,
}

impl Default for ApprovalProfile {
    fn default() -> ApprovalProfile {
        ApprovalProfile { timeout: 300 }
    }
}

impl Default for FilesProfile {
    fn default() -> FilesProfile {
        FilesProfile { max_size: 64 << 20 }
    }
}

impl Default for UndoProfile {
    fn default() -> UndoProfile {
        UndoProfile {
            snapshot: false,
            snapshot_max_file: 64 << 20,
            keep_versions: 20,
            backups_max_total: Some(2 << 30),
            max_state_bytes: 2 << 30,
            max_workspace_bytes: None,
            capture: CaptureMode::Overlay,
            review: false,
        }
    }
}

/// The longest session name (`GATEWAY_SESSION`, a daemon request's `session`), in bytes.
pub const MAX_SESSION: usize = 128;

/// A field of a request that is not what it must be: refused before anything is decided
/// (exit 122, usage), whichever front end carried it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// An environment variable's name is not a POSIX name.
    #[error(
        "environment variable {name:?}: not a variable name (letters, digits and `_`, not beginning with a digit; no `=`, no NUL)"
    )]
    EnvName {
        /// The name given.
        name: String,
    },
    /// An environment variable's value holds a NUL byte.
    #[error(
        "environment variable {name}: its value holds a NUL byte, which no environment can carry"
    )]
    EnvValue {
        /// The variable.
        name: String,
    },
    /// `--env` without `=`.
    #[error("--env {given}: expected NAME=VALUE")]
    EnvPair {
        /// What was given.
        given: String,
    },
    /// A tool that does not exist.
    #[error("no tool `{name}`; the tools are {tools}")]
    NoTool {
        /// The name given.
        name: String,
        /// The tools there are.
        tools: String,
    },
    /// A tool's arguments that are not one JSON object.
    #[error("tool {name}: the arguments {why}")]
    ToolArgs {
        /// The tool.
        name: String,
        /// What is wrong with them.
        why: String,
    },
    /// An exec with no command.
    #[error("exec: the request names no command (argv is empty)")]
    NoCommand,
    /// `http -H` without `:`.
    #[error("-H {given}: expected 'Name: value'")]
    HeaderPair {
        /// What was given.
        given: String,
    },
    /// A duration that is not one (or is zero where a positive one is needed).
    #[error(
        "{option} {given}: expected a positive duration (seconds like 30 or 2.5, or \"30s\", \"10m\", \"1h\")"
    )]
    Duration {
        /// The option.
        option: &'static str,
        /// What was given.
        given: String,
    },
    /// A time that is not one.
    #[error(
        "{option} {given}: expected an RFC 3339 time (2026-11-21T10:00:00Z) or a duration ago (90s, 15m, 2h, 3d)"
    )]
    Time {
        /// The option.
        option: &'static str,
        /// What was given.
        given: String,
    },
    /// `fs edit` with no edit.
    #[error("fs edit: give --old/--new, --insert-at/--text, --append, --delete-lines or --edits")]
    NoEdit,
    /// `--delete-lines` that is not a range.
    #[error("--delete-lines {given}: expected A-B (1-based line numbers)")]
    LineRange {
        /// What was given.
        given: String,
    },
    /// `fs write` with no content.
    #[error("fs write: give --content or --content-file")]
    NoContent,
    /// A command that runs in the client's own process (a front end, the binary's
    /// documentation), asked for as a request.
    #[error("this command runs in the client's own process, not as a request to a broker")]
    NotARequest,
    /// `gateway sh` with options it does not take.
    #[error("sh: {why}")]
    Shell {
        /// What is wrong.
        why: String,
    },
    /// A session name too long, empty, or with control characters.
    #[error(
        "the session name ({len} bytes) is not one: at most {max} bytes, none of them control characters (GATEWAY_SESSION)"
    )]
    SessionName {
        /// Its length in bytes.
        len: usize,
        /// [`MAX_SESSION`].
        max: usize,
    },
}

/// Is `k` a POSIX environment variable name (`[A-Za-z_][A-Za-z0-9_]*`)?
pub fn is_env_name(k: &str) -> bool {
    let mut b = k.bytes();
    b.next()
        .is_some_and(|c| c == b'_' || c.is_ascii_alphabetic())
        && b.all(|c| c == b'_' || c.is_ascii_alphanumeric())
}

/// Checks the variables a request sets (`--env`, MCP's `env`): POSIX names, values without
/// NUL.
pub fn check_env(env: &[(String, String)]) -> Result<(), RequestError> {
    for (k, v) in env {
        if !is_env_name(k) {
            return Err(RequestError::EnvName { name: k.clone() });
        }
        if v.contains('\0') {
            return Err(RequestError::EnvValue { name: k.clone() });
        }
    }
    Ok(())
}

/// Checks a session name: 1 to [`MAX_SESSION`] bytes, no control characters.
pub fn check_session(s: &str) -> Result<(), RequestError> {
    if s.is_empty() || s.len() > MAX_SESSION || s.chars().any(char::is_control) {
        return Err(RequestError::SessionName {
            len: s.len(),
            max: MAX_SESSION,
        });
    }
    Ok(())
}

/// Human units for what people read (issue 15): durations and sizes as a policy spells them,
/// never Rust's debug text.
pub mod units {
    use std::time::Duration;

    /// A duration in its largest whole units, at most two of them: `10m`, `30d`, `1h 30m`,
    /// `2.5s`, `250ms`.
    pub fn duration(d: Duration) -> String {
        let ms = d.as_millis();
        if ms < 1000 {
            return format!("{ms}ms");
        }
        let secs = d.as_secs();
        if secs < 60 && d.subsec_millis() != 0 {
            return format!("{:.1}s", d.as_secs_f64());
        }
        let parts: Vec<String> = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")]
            .iter()
            .scan(secs, |left, &(unit, name)| {
                let n = *left / unit;
                *left %= unit;
                Some((n, name))
            })
            .filter(|(n, _)| *n > 0)
            .take(2)
            .map(|(n, name)| format!("{n}{name}"))
            .collect();
        parts.join(" ")
    }

    /// A size in bytes with a binary unit: `512 B`, `64 KiB`, `1.5 MiB`, `2 GiB`.
    pub fn bytes(n: u64) -> String {
        const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
        if n < 1024 {
            return format!("{n} B");
        }
        let mut v = n as f64 / 1024.0;
        let mut u = 0;
        while v >= 1024.0 && u + 1 < UNITS.len() {
            v /= 1024.0;
            u += 1;
        }
        if (v - v.round()).abs() < 0.05 {
            format!("{} {}", v.round() as u64, UNITS[u])
        } else {
            format!("{v:.1} {}", UNITS[u])
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn durations_and_sizes_read_as_a_policy_spells_them() {
            let d = |s| duration(Duration::from_secs(s));
            assert_eq!(d(600), "10m");
            assert_eq!(d(30 * 86_400), "30d");
            assert_eq!(d(5_400), "1h 30m");
            assert_eq!(d(90_061), "1d 1h");
            assert_eq!(d(45), "45s");
            assert_eq!(duration(Duration::from_millis(2_500)), "2.5s");
            assert_eq!(duration(Duration::from_millis(250)), "250ms");
            assert_eq!(bytes(512), "512 B");
            assert_eq!(bytes(64 << 10), "64 KiB");
            assert_eq!(bytes(3 << 29), "1.5 GiB");
            assert_eq!(bytes(2 << 30), "2 GiB");
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Network::None => f.write_str("none (no sockets but Unix socket pairs)"),
            Network::Loopback => f.write_str("loopback only"),
            Network::ConnectTcp(ports) => {
                let p: Vec<String> = ports.iter().map(u16::to_string).collect();
                write!(f, "TCP connect to port(s) {}", p.join(", "))
            }
            Network::Proxy(p) => {
                let list = |l: &[String]| {
                    if l.is_empty() {
                        "nothing".to_owned()
                    } else {
                        l.join(", ")
                    }
                };
                write!(
                    f,
                    "through gateway's proxy (HTTP, CONNECT, SOCKS5 at 127.0.0.1:{} in the run's own namespace): allow {}; deny {}; any other host {}; IP addresses and loopback, private, link-local and metadata addresses only where a rule names them",
                    crate::net::proxy::PORT,
                    list(&p.allow),
                    list(&p.deny),
                    match p.unknown {
                        Unknown::Deny => "denied",
                        Unknown::Ask =>
                            "asks a person (through the daemon; denied where no one can be asked)",
                    }
                )
            }
        }
    }
}

impl fmt::Display for Limits {
    /// The limits set, in human units (`timeout 10m, memory 2 GiB, ...`); `none` if none is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |n: u64| n.to_string();
        let set: Vec<String> = [
            ("timeout", self.timeout.map(units::duration)),
            (
                "cpu",
                self.cpu.map(|s| units::duration(Duration::from_secs(s))),
            ),
            ("memory", self.memory.map(units::bytes)),
            ("processes", self.pids.map(count)),
            ("open files", self.open_files.map(count)),
            ("file size", self.file_size.map(units::bytes)),
            ("output", self.output.map(units::bytes)),
        ]
        .into_iter()
        .filter_map(|(name, v)| v.map(|v| format!("{name} {v}")))
        .collect();
        if set.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&set.join(", "))
        }
    }
}

impl fmt::Display for SecretsOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SecretsOutput::Redact => "redact",
            SecretsOutput::Block => "block",
            SecretsOutput::Warn => "warn",
        })
    }
}

impl fmt::Display for SecretsInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SecretsInput::Deny => "deny",
            SecretsInput::Redact => "redact",
            SecretsInput::Warn => "warn",
        })
    }
}
