//! What a call asks for, typed: one [`Request`] for every tool and maintenance command, with
//! the [`Options`] every call carries. Every front end builds one — the CLI from clap's
//! parse (`cli::request`), the MCP server from a tool call, the REPL from its line — and the
//! daemon's protocol carries it as it is (`serve::proto::RequestBody::Call`): the daemon
//! never parses a command line.
//!
//! Fields are typed where the command line is text: durations are [`Duration`]s, times are
//! [`SystemTime`]s, environment variables are [`EnvVar`]s (a POSIX name and a value without
//! NUL, checked when one is made or decoded, so a request holding another cannot be built
//! or received), the form of an edit or of a write's content is an enum, not a set of
//! options that may conflict. A request arriving over the socket is checked by decoding it:
//! every object refuses unknown fields, and no field names who calls (the caller is the
//! socket's peer, see `serve::proto`).
//!
//! Just over 1,000 lines: one type per request and its kind, words and samples (the
//! protocol's pinned schema is made of them), and their tests; the seam to split along is
//! one file per request family (fs, log, changes) should it grow further.
//!
//! Front ends that are processes of their own — `serve`, `mcp`, `repl` — and the binary's
//! documentation (`completions`, `man`, `config show`, which reads this process's own config
//! file) are not requests: they run where they are started.

use crate::fsops::search::GrepMode;
use crate::fsops::text::Edit;
use crate::model::RequestError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// One call: the options every command takes, and what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invocation {
    /// `--policy`, `--state-dir`, `--cwd`, `--json`.
    pub options: Options,
    /// What to do.
    pub request: Request,
}

/// The options every command takes (the CLI's global flags). Named on the command line
/// only: what the client's environment says (GATEWAY_POLICY, GATEWAY_STATE_DIR) travels in
/// its environment and is read there as the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    /// The state directory (`--state-dir`).
    pub state_dir: Option<PathBuf>,
    /// The policy, by name or path (`--policy`).
    pub policy: Option<String>,
    /// The workspace (`--cwd`; default: the caller's directory).
    pub cwd: Option<PathBuf>,
    /// One JSON object instead of human output (`--json`).
    pub json: bool,
}

/// Every tool and maintenance command a call can ask for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Run a command confined by the policy (`gateway exec`).
    Exec(Exec),
    /// Run a shell's command line (`gateway sh`, `gateway-bash`): `argv` is the shell and
    /// its arguments, chosen by the client (which shell, which options).
    Sh {
        /// The shell's command line (`/bin/bash -c SCRIPT`).
        argv: Vec<String>,
    },
    /// One agent tool call, as the MCP server makes it (`gateway tool NAME ARGS`).
    Tool {
        /// The tool.
        name: ToolName,
        /// Its arguments: the tool's input schema (`tools/list`), checked by the tool.
        args: serde_json::Map<String, serde_json::Value>,
        /// Which directories the tools may reach.
        roots: Roots,
    },
    /// The requests waiting for approval (`gateway pending`).
    Pending,
    /// Answer a waiting request (`gateway approve ID`, `gateway deny ID`).
    Answer {
        /// The request's id.
        id: u64,
        /// Approve (else deny).
        approve: bool,
        /// Approve this command for the rest of the session, in this directory.
        always_for_session: bool,
    },
    /// Scan files for secrets (`gateway scan`).
    Scan(Scan),
    /// `gateway policy ...`.
    Policy(PolicyRequest),
    /// `gateway log ...`.
    Log(LogRequest),
    /// `gateway keys ...`.
    Keys(KeysRequest),
    /// `gateway fs ...`: the file tools.
    Fs(FsRequest),
    /// The file changes that can be undone (`gateway history`).
    History {
        /// Every workspace's, not only this one's.
        all: bool,
        /// At most this many (0: all).
        limit: usize,
        /// Only changes since.
        since: Option<SystemTime>,
    },
    /// `gateway trash ...`.
    Trash(TrashRequest),
    /// An HTTP request made by the broker (`gateway http`).
    Http(Http),
    /// The change sets held instead of applied: list, show, apply, discard (`gateway
    /// changes`, `gateway apply ID`, `gateway discard ID`).
    Changes(ChangesRequest),
    /// Undo a change, or mark it skipped (`gateway undo`).
    Undo {
        /// The change (default: the newest).
        id: Option<u64>,
        /// Every change of the group (`--all`).
        all: bool,
        /// What to do with it.
        action: UndoAction,
    },
}

/// What to do with the held change sets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ChangesRequest {
    /// The held change sets (`gateway changes`).
    List,
    /// One set's changes, and their diff on request (`gateway changes ID [--diff]`).
    Show {
        /// The set's id.
        id: String,
        /// The full diff of its text files.
        diff: bool,
    },
    /// Land a held set's changes, each journalled (`gateway apply ID`).
    Apply {
        /// The set's id.
        id: String,
    },
    /// Drop a held set (`gateway discard ID`): the workspace stays as it is.
    Discard {
        /// The set's id.
        id: String,
    },
}

/// `gateway exec`'s arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exec {
    /// The command and its arguments (at least the command).
    pub argv: Vec<String>,
    /// Wall-clock limit: narrows the policy's (a longer one is refused, rule
    /// `limits.timeout`).
    pub timeout: Option<Duration>,
    /// Variables set in the sandbox (`--env K=V`).
    pub env: Vec<EnvVar>,
    /// Snapshot the workspace for undo (None: the policy's `[undo] snapshot`).
    pub snapshot: Option<bool>,
    /// Hold the run's changes for review (`gateway apply ID` / `gateway discard ID`) instead
    /// of applying them (None: the policy's `[undo] review`).
    #[serde(default)]
    pub review: Option<bool>,
    /// Text given to the command on its stdin instead of the caller's stdin.
    pub stdin: Option<String>,
}

/// `gateway http`'s arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Http {
    /// The method (`GET`, `POST`, …; case-sensitive).
    pub method: String,
    /// The URL (`http://` or `https://`).
    pub url: String,
    /// Request headers, in order.
    pub headers: Vec<Header>,
    /// The body: text, or what a file or stdin holds (read with the caller's rights).
    pub body: Option<Content>,
    /// The time the whole call may take: narrows the policy's (a longer one is refused,
    /// rule `limits.timeout`).
    pub timeout: Option<Duration>,
    /// Redirects followed at most (0: none; default 5).
    pub max_redirects: Option<u32>,
    /// Body bytes read at most (default 1 MiB).
    pub max_body: Option<u64>,
}

/// A request header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
}

impl Header {
    /// `Name: value` as the command line writes it (`-H`).
    pub fn parse(kv: &str) -> Result<Header, RequestError> {
        match kv.split_once(':') {
            Some((k, v)) if !k.trim().is_empty() => Ok(Header {
                name: k.trim().to_string(),
                value: v.trim().to_string(),
            }),
            _ => Err(RequestError::HeaderPair {
                given: kv.to_string(),
            }),
        }
    }
}

/// An environment variable a request sets: a POSIX name and a value without NUL (checked
/// when made and when decoded).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawEnvVar")]
pub struct EnvVar {
    name: String,
    value: String,
}

impl EnvVar {
    /// `name=value`, checked.
    pub fn new(name: String, value: String) -> Result<EnvVar, RequestError> {
        let pair = (name, value);
        crate::model::check_env(std::slice::from_ref(&pair))?;
        Ok(EnvVar {
            name: pair.0,
            value: pair.1,
        })
    }

    /// `NAME=VALUE` as the command line writes it.
    pub fn parse(kv: &str) -> Result<EnvVar, RequestError> {
        match kv.split_once('=') {
            Some((k, v)) => EnvVar::new(k.to_string(), v.to_string()),
            None => Err(RequestError::EnvPair {
                given: kv.to_string(),
            }),
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value.
    pub fn value(&self) -> &str {
        &self.value
    }
}

/// An [`EnvVar`] as decoded, before its check.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnvVar {
    name: String,
    value: String,
}

impl TryFrom<RawEnvVar> for EnvVar {
    type Error = RequestError;
    fn try_from(r: RawEnvVar) -> Result<EnvVar, RequestError> {
        EnvVar::new(r.name, r.value)
    }
}

/// The agent tools (`tools/list`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolName {
    /// Run a command.
    Exec,
    /// Read a file.
    ReadFile,
    /// Write a file.
    WriteFile,
    /// Edit a file.
    EditFile,
    /// Find files by pattern.
    Glob,
    /// Search files' content.
    Grep,
    /// List a directory.
    ListDirectory,
    /// Move or rename.
    Move,
    /// Delete (to the trash).
    Delete,
    /// Make a directory.
    Mkdir,
    /// Change the session's directory.
    Cd,
    /// Undo a change.
    Undo,
    /// The changes that can be undone.
    History,
    /// Scan for secrets.
    Scan,
    /// Make an HTTP request.
    HttpRequest,
}

impl ToolName {
    /// Every tool, in `tools/list`'s order.
    pub const ALL: [ToolName; 15] = [
        ToolName::Exec,
        ToolName::ReadFile,
        ToolName::WriteFile,
        ToolName::EditFile,
        ToolName::Glob,
        ToolName::Grep,
        ToolName::ListDirectory,
        ToolName::Move,
        ToolName::Delete,
        ToolName::Mkdir,
        ToolName::Cd,
        ToolName::Undo,
        ToolName::History,
        ToolName::Scan,
        ToolName::HttpRequest,
    ];

    /// The tool's name, as MCP spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Exec => "exec",
            ToolName::ReadFile => "read_file",
            ToolName::WriteFile => "write_file",
            ToolName::EditFile => "edit_file",
            ToolName::Glob => "glob",
            ToolName::Grep => "grep",
            ToolName::ListDirectory => "list_directory",
            ToolName::Move => "move",
            ToolName::Delete => "delete",
            ToolName::Mkdir => "mkdir",
            ToolName::Cd => "cd",
            ToolName::Undo => "undo",
            ToolName::History => "history",
            ToolName::Scan => "scan",
            ToolName::HttpRequest => "http_request",
        }
    }

    /// The tool named `name`.
    pub fn of(name: &str) -> Result<ToolName, RequestError> {
        ToolName::ALL
            .into_iter()
            .find(|t| t.as_str() == name)
            .ok_or_else(|| RequestError::NoTool {
                name: name.to_string(),
                tools: ToolName::ALL.map(ToolName::as_str).join(", "),
            })
    }
}

/// Which directories a tool call may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Roots {
    /// What the policy allows.
    #[default]
    Policy,
    /// None: the client said it has no roots (`--no-roots`).
    Nothing,
    /// These directories, within what the policy allows (`--root DIR`, MCP roots), resolved
    /// with the caller's rights.
    Dirs(Vec<PathBuf>),
}

/// `gateway scan`'s arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scan {
    /// Files and directories to scan (at least one).
    pub paths: Vec<PathBuf>,
    /// How findings are printed.
    pub format: ScanFormat,
    /// Print the files with the secrets redacted instead.
    pub redact: bool,
    /// Findings to leave out (a previous `--format json` output).
    pub baseline: Option<PathBuf>,
    /// Globs to leave out.
    pub exclude: Vec<String>,
    /// Scan what ignore files hide too.
    pub no_ignore: bool,
    /// The least confidence reported.
    pub min_confidence: crate::secrets::Confidence,
}

/// How `gateway scan` prints its findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanFormat {
    /// One line per finding.
    Text,
    /// One JSON object.
    Json,
    /// SARIF 2.1.0.
    Sarif,
}

/// `gateway policy ...`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum PolicyRequest {
    /// Load and validate a policy file.
    Check {
        /// The file.
        file: PathBuf,
    },
    /// Say what the policy decides for a command, and why.
    Explain {
        /// The command (empty with `credentials`).
        command: Vec<String>,
        /// Explain the credentials the policy protects instead.
        credentials: bool,
    },
    /// The built-in policies.
    List,
    /// Reload the session's pinned policy (or load another).
    Reload {
        /// The policy to load instead (name or path).
        name: Option<String>,
    },
}

/// `gateway log ...`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum LogRequest {
    /// Check the hash chain and the signed checkpoints.
    Verify {
        /// A checkpoint exported earlier, which the log must still hold.
        anchor: Option<PathBuf>,
        /// The public key to check the signatures with.
        key: Option<PathBuf>,
    },
    /// Records matching a filter.
    Query {
        /// The filter.
        filter: LogFilter,
        /// At most this many (the newest).
        limit: usize,
    },
    /// The newest records, and (with `follow`) those that come.
    Tail {
        /// How many to show first.
        lines: usize,
        /// Keep showing new ones until the call ends.
        follow: bool,
    },
    /// One record, with its stored output.
    Show {
        /// The record.
        seq: u64,
        /// The most bytes of each stored stream shown (None: none shown).
        output_limit: Option<usize>,
    },
    /// Write a signed checkpoint now.
    Checkpoint {
        /// Print it for safekeeping.
        export: bool,
    },
    /// Remove artifacts past their retention.
    Gc,
}

/// A filter of `gateway log query`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogFilter {
    /// The tool (a record's or a short name: `exec`, `read`, `fs`).
    pub tool: Option<String>,
    /// The decision.
    pub decision: Option<Effect>,
    /// Not before.
    pub since: Option<SystemTime>,
    /// Not after.
    pub until: Option<SystemTime>,
    /// The session.
    pub session: Option<String>,
    /// Records naming a path under this one.
    pub path: Option<String>,
    /// Records containing this text.
    pub contains: Option<String>,
    /// Runs that exited with this code.
    pub exit_code: Option<i32>,
}

/// A record's decision, as a filter names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Allowed.
    Allow,
    /// Denied.
    Deny,
    /// Asked.
    Ask,
    /// Failed.
    Error,
}

impl Effect {
    /// As the record writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Deny => "deny",
            Effect::Ask => "ask",
            Effect::Error => "error",
        }
    }
}

/// `gateway keys ...`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeysRequest {
    /// Print the public key.
    Export,
    /// Start a new signing key.
    Rotate,
}

/// `gateway fs ...`: the file tools.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FsRequest {
    /// What the broker would see at a path (a diagnostic).
    Probe {
        /// The path.
        path: PathBuf,
    },
    /// Remove (to the trash unless `permanent`).
    Rm {
        /// The path.
        path: PathBuf,
        /// A directory and what it holds.
        recursive: bool,
        /// Not to the trash.
        permanent: bool,
    },
    /// Make a directory.
    Mkdir {
        /// The path.
        path: PathBuf,
        /// With its parents.
        parents: bool,
    },
    /// Move or rename.
    Mv {
        /// From.
        src: PathBuf,
        /// To.
        dst: PathBuf,
    },
    /// Change the session's directory.
    Cd {
        /// Where.
        path: String,
    },
    /// List a directory.
    Ls {
        /// The directory (default: the session's).
        path: Option<PathBuf>,
    },
    /// Files matching a pattern.
    Glob {
        /// The pattern.
        pattern: String,
        /// Beneath (default: the session's directory).
        path: Option<PathBuf>,
    },
    /// Search files' content.
    Grep {
        /// The regular expression.
        regex: String,
        /// Beneath (default: the session's directory).
        path: Option<PathBuf>,
        /// Only files matching.
        glob: Option<String>,
        /// Lines of context.
        context: usize,
        /// Case-blind.
        ignore_case: bool,
        /// Lines, files or counts.
        mode: GrepMode,
        /// At most this many results.
        max: usize,
    },
    /// Read a file.
    Read {
        /// The file.
        path: PathBuf,
        /// From this line (1-based).
        offset: Option<usize>,
        /// At most this many lines.
        limit: Option<usize>,
        /// Bytes as base64, not text.
        binary: bool,
    },
    /// Write a file.
    Write {
        /// The file.
        path: PathBuf,
        /// What to write.
        content: Content,
        /// Print the diff.
        diff: bool,
    },
    /// Edit a file.
    Edit {
        /// The file.
        path: PathBuf,
        /// The edits given inline, in order.
        edits: Vec<Edit>,
        /// More edits, from a file (a JSON list), after those.
        edits_from: Option<Input>,
        /// Say what would change; change nothing.
        dry_run: bool,
        /// Print the diff.
        diff: bool,
    },
}

/// A file's new content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Content {
    /// This text.
    Text(String),
    /// What this input holds (read by the broker with the caller's rights, within the
    /// policy's `[files] max_size`).
    From(Input),
}

/// Where a request's data comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Input {
    /// The caller's stdin (`-`).
    Stdin,
    /// A file, read with the caller's rights.
    File(PathBuf),
}

impl Input {
    /// `-` is stdin.
    pub fn of(p: PathBuf) -> Input {
        if p.as_os_str() == "-" {
            Input::Stdin
        } else {
            Input::File(p)
        }
    }

    /// As the command line writes it.
    pub fn shown(&self) -> String {
        match self {
            Input::Stdin => "-".into(),
            Input::File(p) => p.display().to_string(),
        }
    }
}

/// `gateway trash ...`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TrashRequest {
    /// What the trash holds.
    List,
    /// Put an item back.
    Restore {
        /// The item.
        name: String,
    },
    /// Remove items for good (the admin only).
    Empty {
        /// Only items removed longer ago than this.
        older_than: Option<Duration>,
        /// Without asking.
        yes: bool,
    },
}

/// What `gateway undo` does with a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum UndoAction {
    /// Put the files back.
    Undo {
        /// Say what would change; change nothing.
        dry_run: bool,
        /// Over files changed since.
        force: bool,
    },
    /// Mark it skipped: the next `undo` goes past it.
    Skip,
}

impl Request {
    /// The command as the CLI names it (`exec`, `log tail`, `fs write`): one name per
    /// variant (and per answer).
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Exec(_) => "exec",
            Request::Sh { .. } => "sh",
            Request::Tool { .. } => "tool",
            Request::Pending => "pending",
            Request::Answer { approve: true, .. } => "approve",
            Request::Answer { .. } => "deny",
            Request::Scan(_) => "scan",
            Request::Policy(p) => match p {
                PolicyRequest::Check { .. } => "policy check",
                PolicyRequest::Explain { .. } => "policy explain",
                PolicyRequest::List => "policy list",
                PolicyRequest::Reload { .. } => "policy reload",
            },
            Request::Log(l) => match l {
                LogRequest::Verify { .. } => "log verify",
                LogRequest::Query { .. } => "log query",
                LogRequest::Tail { .. } => "log tail",
                LogRequest::Show { .. } => "log show",
                LogRequest::Checkpoint { .. } => "log checkpoint",
                LogRequest::Gc => "log gc",
            },
            Request::Keys(k) => match k {
                KeysRequest::Export => "keys export",
                KeysRequest::Rotate => "keys rotate",
            },
            Request::Fs(f) => match f {
                FsRequest::Probe { .. } => "fs probe",
                FsRequest::Rm { .. } => "fs rm",
                FsRequest::Mkdir { .. } => "fs mkdir",
                FsRequest::Mv { .. } => "fs mv",
                FsRequest::Cd { .. } => "fs cd",
                FsRequest::Ls { .. } => "fs ls",
                FsRequest::Glob { .. } => "fs glob",
                FsRequest::Grep { .. } => "fs grep",
                FsRequest::Read { .. } => "fs read",
                FsRequest::Write { .. } => "fs write",
                FsRequest::Edit { .. } => "fs edit",
            },
            Request::History { .. } => "history",
            Request::Http(_) => "http",
            Request::Trash(t) => match t {
                TrashRequest::List => "trash list",
                TrashRequest::Restore { .. } => "trash restore",
                TrashRequest::Empty { .. } => "trash empty",
            },
            Request::Changes(c) => match c {
                ChangesRequest::List => "changes",
                ChangesRequest::Show { .. } => "changes show",
                ChangesRequest::Apply { .. } => "apply",
                ChangesRequest::Discard { .. } => "discard",
            },
            Request::Undo {
                action: UndoAction::Skip,
                ..
            } => "undo --skip",
            Request::Undo { .. } => "undo",
        }
    }

    /// The words that name the request in a record the daemon writes for a call that did not
    /// record itself (it was ended, or panicked): the command as its CLI spells it, its
    /// command line (an `exec`'s, a shell's) redacted.
    pub fn words(&self) -> Vec<String> {
        let mut v: Vec<String> = self.kind().split(' ').map(str::to_string).collect();
        match self {
            Request::Exec(e) => {
                v.push("--".into());
                v.extend(super::redact_argv(&e.argv));
            }
            Request::Sh { argv } => {
                v.push("--".into());
                v.extend(super::redact_argv(argv));
            }
            Request::Tool { name, .. } => v.push(name.as_str().into()),
            Request::Answer { id, .. } => v.push(id.to_string()),
            Request::Changes(
                ChangesRequest::Show { id, .. }
                | ChangesRequest::Apply { id }
                | ChangesRequest::Discard { id },
            ) => v.push(id.clone()),
            Request::Http(h) => {
                v.push(h.method.clone());
                v.push(super::redact_text(&h.url));
            }
            Request::Log(LogRequest::Tail { follow: true, .. }) => v.push("-f".into()),
            _ => {}
        }
        v
    }

    /// One request of each [`Request::kind`], every field set: what the protocol's pinned
    /// schema is made of.
    #[cfg(test)]
    pub fn samples() -> Vec<Request> {
        let p = || PathBuf::from("/w/a.txt");
        let env = EnvVar::new("K".into(), "V".into()).into_iter().collect();
        vec![
            Request::Exec(Exec {
                argv: vec!["make".into(), "test".into()],
                timeout: Some(Duration::from_millis(1500)),
                env,
                snapshot: Some(false),
                review: Some(true),
                stdin: Some("in\n".into()),
            }),
            Request::Sh {
                argv: vec!["/bin/sh".into(), "-c".into(), "ls".into()],
            },
            Request::Tool {
                name: ToolName::ReadFile,
                args: serde_json::from_str(r#"{"path":"a.txt"}"#).unwrap_or_default(),
                roots: Roots::Dirs(vec![p()]),
            },
            Request::Pending,
            Request::Answer {
                id: 7,
                approve: true,
                always_for_session: true,
            },
            Request::Answer {
                id: 8,
                approve: false,
                always_for_session: false,
            },
            Request::Scan(Scan {
                paths: vec![p()],
                format: ScanFormat::Sarif,
                redact: true,
                baseline: Some(p()),
                exclude: vec!["*.lock".into()],
                no_ignore: true,
                min_confidence: crate::secrets::Confidence::High,
            }),
            Request::Policy(PolicyRequest::Check { file: p() }),
            Request::Policy(PolicyRequest::Explain {
                command: vec!["rm".into()],
                credentials: false,
            }),
            Request::Policy(PolicyRequest::List),
            Request::Policy(PolicyRequest::Reload {
                name: Some("strict".into()),
            }),
            Request::Log(LogRequest::Verify {
                anchor: Some(p()),
                key: Some(p()),
            }),
            Request::Log(LogRequest::Query {
                filter: LogFilter {
                    tool: Some("exec".into()),
                    decision: Some(Effect::Deny),
                    since: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)),
                    until: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_060)),
                    session: Some("s".into()),
                    path: Some("/w".into()),
                    contains: Some("x".into()),
                    exit_code: Some(-1),
                },
                limit: 5,
            }),
            Request::Log(LogRequest::Tail {
                lines: 3,
                follow: true,
            }),
            Request::Log(LogRequest::Show {
                seq: 9,
                output_limit: Some(100),
            }),
            Request::Log(LogRequest::Checkpoint { export: true }),
            Request::Log(LogRequest::Gc),
            Request::Keys(KeysRequest::Export),
            Request::Keys(KeysRequest::Rotate),
            Request::Fs(FsRequest::Probe { path: p() }),
            Request::Fs(FsRequest::Rm {
                path: p(),
                recursive: true,
                permanent: false,
            }),
            Request::Fs(FsRequest::Mkdir {
                path: p(),
                parents: true,
            }),
            Request::Fs(FsRequest::Mv { src: p(), dst: p() }),
            Request::Fs(FsRequest::Cd { path: "..".into() }),
            Request::Fs(FsRequest::Ls { path: Some(p()) }),
            Request::Fs(FsRequest::Glob {
                pattern: "*.rs".into(),
                path: Some(p()),
            }),
            Request::Fs(FsRequest::Grep {
                regex: "fn".into(),
                path: Some(p()),
                glob: Some("*.rs".into()),
                context: 2,
                ignore_case: true,
                mode: GrepMode::Count,
                max: 10,
            }),
            Request::Fs(FsRequest::Read {
                path: p(),
                offset: Some(1),
                limit: Some(2),
                binary: false,
            }),
            Request::Fs(FsRequest::Write {
                path: p(),
                content: Content::From(Input::Stdin),
                diff: true,
            }),
            Request::Fs(FsRequest::Edit {
                path: p(),
                edits: vec![Edit::Append { text: "x".into() }],
                edits_from: Some(Input::File(p())),
                dry_run: true,
                diff: false,
            }),
            Request::History {
                all: true,
                limit: 3,
                since: Some(SystemTime::UNIX_EPOCH),
            },
            Request::Http(Http {
                method: "POST".into(),
                url: "https://example.com/a?b=c".into(),
                headers: vec![Header {
                    name: "Accept".into(),
                    value: "*/*".into(),
                }],
                body: Some(Content::Text("x".into())),
                timeout: Some(Duration::from_secs(5)),
                max_redirects: Some(2),
                max_body: Some(1024),
            }),
            Request::Changes(ChangesRequest::List),
            Request::Changes(ChangesRequest::Show {
                id: "cap-1".into(),
                diff: true,
            }),
            Request::Changes(ChangesRequest::Apply { id: "cap-1".into() }),
            Request::Changes(ChangesRequest::Discard { id: "cap-1".into() }),
            Request::Trash(TrashRequest::List),
            Request::Trash(TrashRequest::Restore { name: "n".into() }),
            Request::Trash(TrashRequest::Empty {
                older_than: Some(Duration::from_secs(86_400)),
                yes: true,
            }),
            Request::Undo {
                id: Some(4),
                all: true,
                action: UndoAction::Undo {
                    dry_run: true,
                    force: false,
                },
            },
            Request::Undo {
                id: None,
                all: false,
                action: UndoAction::Skip,
            },
        ]
    }

    /// Text the call gives the command on its stdin in place of the caller's (an `exec`'s
    /// `stdin`).
    pub fn stdin_text(&self) -> Option<&str> {
        match self {
            Request::Exec(e) => e.stdin.as_deref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_env_var_is_checked_when_made_and_when_decoded() {
        assert!(EnvVar::parse("A_1=x=y").is_ok_and(|v| v.name() == "A_1" && v.value() == "x=y"));
        assert!(matches!(
            EnvVar::parse("novalue"),
            Err(RequestError::EnvPair { .. })
        ));
        assert!(matches!(
            EnvVar::parse("1A=x"),
            Err(RequestError::EnvName { .. })
        ));
        assert!(matches!(
            EnvVar::parse("A=x\0y"),
            Err(RequestError::EnvValue { .. })
        ));
        let bad = r#"{"name":"LD_PRELOAD=/x","value":"y"}"#;
        assert!(serde_json::from_str::<EnvVar>(bad).is_err());
        let good = r#"{"name":"OK","value":"y"}"#;
        assert!(serde_json::from_str::<EnvVar>(good).is_ok());
        let extra = r#"{"name":"OK","value":"y","uid":0}"#;
        assert!(serde_json::from_str::<EnvVar>(extra).is_err());
    }

    #[test]
    fn the_samples_are_one_of_each_kind_and_round_trip() {
        let all = Request::samples();
        let mut kinds: Vec<&str> = all.iter().map(Request::kind).collect();
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), all.len(), "one sample per kind");
        // Every kind: a new variant names its kind (`kind` is exhaustive) and needs a sample.
        assert_eq!(all.len(), 41, "{kinds:?}");
        for r in all {
            let json = serde_json::to_string(&r).expect("serializes");
            assert_eq!(
                serde_json::from_str::<Request>(&json).ok(),
                Some(r),
                "{json}"
            );
        }
    }

    #[test]
    fn every_tool_name_reads_back() {
        for t in ToolName::ALL {
            assert_eq!(ToolName::of(t.as_str()), Ok(t));
            let json = serde_json::to_string(&t).expect("serializes");
            assert_eq!(json, format!("\"{}\"", t.as_str()));
        }
        assert!(matches!(
            ToolName::of("rm"),
            Err(RequestError::NoTool { .. })
        ));
    }
}
