//! Typed reports (issue 23): what a tool call returns, in one shape and one field naming
//! scheme for every front end. The CLI's `--json` (one-shot or through the daemon) and the
//! MCP server's structured content serialize these types and nothing else; the human text
//! of the CLI is rendered from the same values. A field added here appears everywhere at
//! once, and no front end can name a field its own way (`stdout_truncated` once was
//! `truncated` in MCP).

pub mod changes;
pub mod credentials;
pub mod fs;
pub mod log;
pub mod policy;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::tools::fs::{FsOutput, FsResult};
use super::{AuditInfo, ExecResult, Quarantined, SecretsReport};
use crate::model::Decision;
use crate::sandbox::EnforcementStatus;
use crate::workspace::snapshot;

/// An exec call's report.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ExecReport<'a> {
    /// The policy's decision (`effect`: `allow`, `ask` or `deny`), every rule that matched,
    /// the simple commands found and checked, and what could not be analysed: the one
    /// decision shape of `exec`, the file tools, `policy explain` and MCP (issue 15).
    pub decision: &'a Decision,
    /// Why it did not run: denied by the policy's rules, or not approved (`kind`, `rule`,
    /// `rules`, `reasons`); `null` when it ran.
    pub refusal: Option<serde_json::Value>,
    /// Whether the command ran.
    pub ran: bool,
    /// For `ask`: whether a person approved (`null`: nobody was asked).
    pub approved: Option<bool>,
    /// The command's exit code (`null`: it did not run or was killed by a signal).
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// It ran out of time and was killed.
    pub timed_out: bool,
    /// Its output exceeded the policy's limit and it was killed.
    pub output_limit_exceeded: bool,
    /// It hit its memory limit.
    pub memory_limit_hit: bool,
    /// How long it ran, in milliseconds.
    pub duration_ms: Option<f64>,
    /// How it was confined, layer by layer.
    pub enforcement: Option<&'a EnforcementStatus>,
    /// Protected paths it created, moved to the quarantine (protected paths that existed
    /// before it were read-only to it and are never moved).
    pub protected_created: &'a [Quarantined],
    /// Without a pid namespace: processes it left running, killed when it ended.
    pub leftovers_killed: Option<usize>,
    /// Without a pid namespace: why leftovers may survive.
    pub leftovers_warning: Option<&'static str>,
    /// Protected paths that were not held (not read-only during the run, or not searched), and
    /// why.
    pub protected_warnings: &'a [String],
    /// What the secrets policy found (rules and places, never values).
    pub secrets: &'a SecretsReport,
    /// The first `[audit] inline_output` bytes of its stdout (after redaction).
    pub stdout: String,
    /// The first `[audit] inline_output` bytes of its stderr (after redaction).
    pub stderr: String,
    /// stdout was longer than shown (all of it is in the audit artifact).
    pub stdout_truncated: bool,
    /// stderr was longer than shown.
    pub stderr_truncated: bool,
    /// Where it was recorded, and its streams' digests and artifacts.
    pub audit: Option<&'a AuditInfo>,
    /// What it changed in the workspace (when snapshotted).
    pub snapshot: Option<&'a snapshot::SnapshotReport>,
}

impl ExecResult {
    /// The report of this result; `inline` is the policy's `[audit] inline_output`.
    pub fn report(&self, inline: usize) -> ExecReport<'_> {
        let o = self.outcome.as_ref();
        let text = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(inline)]).into_owned();
        ExecReport {
            decision: &self.decision,
            refusal: refusal_of(&self.decision, self.approved),
            ran: self.ran,
            approved: self.approved,
            exit_code: o.and_then(|o| o.exit_code),
            signal: o.and_then(|o| o.signal),
            timed_out: o.is_some_and(|o| o.timed_out),
            output_limit_exceeded: o.is_some_and(|o| o.output_limit_exceeded),
            memory_limit_hit: o.is_some_and(|o| o.memory_limit_hit),
            duration_ms: o.map(|o| o.duration.as_secs_f64() * 1000.0),
            enforcement: o.map(|o| &o.enforcement),
            protected_created: &self.protected_created,
            leftovers_killed: o.and_then(|o| o.leftovers_killed),
            leftovers_warning: super::leftovers_warning(o),
            protected_warnings: &self.protected_warnings,
            secrets: &self.secrets,
            stdout: text(&self.stdout_head),
            stderr: text(&self.stderr_head),
            stdout_truncated: self.stdout_head.len() > inline,
            stderr_truncated: self.stderr_head.len() > inline,
            audit: self.audit.as_ref(),
            snapshot: self.snapshot.as_ref(),
        }
    }
}

/// A file tool call's report.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FsReport<'a> {
    /// The policy's decision, in the shape of [`ExecReport::decision`] (`commands` empty).
    pub decision: &'a Decision,
    /// Why it was not performed: denied by the policy's rules, or not approved; `null`
    /// when it was.
    pub refusal: Option<serde_json::Value>,
    /// What the tool says (lines, a diff, a listing; `denied`, `not_approved`).
    pub output: &'a FsOutput,
    /// The audit record's sequence number (`gateway log show SEQ`).
    pub audit_seq: u64,
    /// How the worker that performed it was confined (none when denied).
    pub enforcement: Option<&'a EnforcementStatus>,
}

impl FsResult {
    /// The report of this result.
    pub fn report(&self) -> FsReport<'_> {
        FsReport {
            decision: &self.decision,
            refusal: match self.output {
                FsOutput::Denied | FsOutput::NotApproved => refusal_of(&self.decision, Some(false)),
                _ => None,
            },
            output: &self.output,
            audit_seq: self.audit_seq,
            enforcement: self.enforcement.as_ref(),
        }
    }
}

/// The refusal of a decided call that was not performed, as shown.
fn refusal_of(d: &crate::model::Decision, approved: Option<bool>) -> Option<serde_json::Value> {
    super::refusal::Refusal::of_decision(d, approved).map(|r| r.shown())
}

/// A failed call's report (issue 15): one shape for every front end and every failure —
/// `{"error": {"code", "message"}, "refusal"?}` — a usage error of the CLI as much as a
/// refusal by the policy or a broker error. `code` is stable (README lists each with its exit
/// code); `message` says what failed, on which path or rule, and what the user can do.
/// `refusal` is where exec's and the file tools' reports have it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorReport {
    /// The error.
    pub error: ErrorDetail,
    /// The refusal, when the policy said no (`kind`, `rule`, `rules`, `reasons`, `message`,
    /// and the path or limit it names; secrets redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<serde_json::Value>,
}

/// What [`ErrorReport`] holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorDetail {
    /// The class of the failure, a stable snake_case name.
    pub code: ErrorCode,
    /// What failed, on which path or rule, and what the user can do (secrets redacted).
    pub message: String,
}

/// The class of a failure, as `--json` and MCP name it (`error.code`). Each has one exit code
/// (README, "Exit codes and error codes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Bad usage: an unknown option, a bad value, a missing argument or operand (exit 122).
    Usage,
    /// The request conflicts with the machine's state: a daemon already serves at the socket,
    /// something else is at its path, file tools for another uid through a daemon running as
    /// root (exit 122).
    Conflict,
    /// Refused by the policy (exit 120).
    Denied,
    /// `ask` and nobody approved (exit 121).
    NotApproved,
    /// The policy or the config file is invalid or unknown (exit 123).
    Policy,
    /// The time limit expired (exit 124).
    Timeout,
    /// The sandbox could not be set up, or the daemon not reached (exit 125).
    Sandbox,
    /// The broker's own I/O failed (exit 125).
    Io,
    /// The command could change a file that decides the next run (exit 125).
    NextRunInReach,
    /// The program exists but cannot be executed (exit 126).
    NotExecutable,
    /// The program or path was not found (exit 127).
    NotFound,
    /// The audit log could not be written or continued (exit 119).
    Audit,
    /// Any other failure (exit 1).
    Failed,
}

impl ErrorCode {
    /// The class of `e`.
    pub fn of(e: &super::BrokerError) -> ErrorCode {
        use super::BrokerError as E;
        match e {
            E::Usage(_) | E::Request(_) | E::Fs(_) | E::CannotRead { .. } => ErrorCode::Usage,
            E::Conflict(_) => ErrorCode::Conflict,
            E::Worker { code, .. } => *code,
            E::NotUndone { source, .. } => ErrorCode::of(source),
            E::Invariant { .. } => ErrorCode::Failed,
            E::NotFound { .. } => ErrorCode::NotFound,
            E::Policy(_) => ErrorCode::Policy,
            E::Refused(super::refusal::Refusal::NotApproved { .. }) => ErrorCode::NotApproved,
            E::Refused(_) => ErrorCode::Denied,
            E::Sandbox(crate::sandbox::SandboxError::Exec { source, .. }) => {
                if source.kind() == std::io::ErrorKind::NotFound {
                    ErrorCode::NotFound
                } else {
                    ErrorCode::NotExecutable
                }
            }
            E::Sandbox(_) => ErrorCode::Sandbox,
            E::Io { .. } => ErrorCode::Io,
            E::Http(h) => h.code(),
            E::NextRunInReach(_) => ErrorCode::NextRunInReach,
            E::Audit(_) => ErrorCode::Audit,
            E::TimedOut(_) => ErrorCode::Timeout,
        }
    }
}

impl ErrorReport {
    /// The report of `e`.
    pub fn of(e: &super::BrokerError) -> ErrorReport {
        ErrorReport {
            error: ErrorDetail {
                code: ErrorCode::of(e),
                message: e.redacted_message(),
            },
            refusal: match e {
                super::BrokerError::Refused(r) => Some(r.shown()),
                _ => None,
            },
        }
    }

    /// A failure that is not a broker error (a usage error of a front end), said in `message`.
    pub fn new(code: ErrorCode, message: String) -> ErrorReport {
        ErrorReport {
            error: ErrorDetail { code, message },
            refusal: None,
        }
    }
}

/// `cd`'s report: the session's new working directory.
#[derive(Debug, Serialize, JsonSchema)]
pub struct CdReport<'a> {
    /// The directory.
    pub cwd: &'a std::path::Path,
}

/// `undo --skip`'s report: the changes passed over.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SkipReport<'a> {
    /// Their journal ids.
    pub skipped: &'a [u64],
}

/// `history`'s report.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HistoryReport<'a> {
    /// The changes, oldest first.
    pub changes: &'a [super::tools::fs::HistoryEntry],
    /// The workspace they were made in (`null`: every workspace's, `--all`).
    pub workspace: Option<&'a std::path::Path>,
    /// Older changes left out by the limit (`history --limit`, the tool's `limit`).
    pub omitted: usize,
}

/// `trash list`'s report.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TrashListReport<'a> {
    /// The items, present or gone.
    pub items: &'a [crate::journal::TrashItem],
}

/// `trash empty`'s report.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TrashEmptyReport {
    /// Items removed for good.
    pub removed: usize,
}

/// A notice added to a tool's result, after its content (the policy file changed).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Notice<'a> {
    /// The notice, in words.
    pub gateway_notice: &'a str,
}

/// The note an MCP result cut to its output budget carries (`budget`): the limit, what was
/// cut and where the whole output is (`serve::budget`).
#[derive(Debug, Serialize)]
pub struct BudgetNote<'a> {
    /// The budget, in characters of the result's JSON text.
    pub limit_chars: usize,
    /// Characters left out.
    pub cut_chars: usize,
    /// Where the whole output is, or how to get the rest, in words.
    pub whole: &'a str,
}

/// `pending`'s report.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PendingReport<'a> {
    /// The requests waiting for an answer, oldest first.
    pub requests: &'a [super::approvals::Pending],
}

/// `policy list`'s report.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PolicyListReport<'a> {
    /// The built-in policies.
    pub policies: &'a [crate::policy::report::Listed],
}

/// What a call returns to the front end that made it (issue 35): its exit code, its typed
/// result, and what gateway says about it beside the result. `handle` (the CLI's dispatch,
/// which the daemon runs for its clients) returns it; the daemon sends it to its client as
/// the call's last message; the CLI renders it (human text, or the result's JSON under
/// `--json`); MCP through the daemon takes its tool result. Nothing is parsed back from
/// printed text. What a call streams while it runs (a command's output, `log tail -f`) goes
/// to the call's own streams (`client::Context`) before its report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// The CLI's exit code (README, "Exit codes and error codes").
    pub exit: u8,
    /// The result.
    pub outcome: Outcome,
    /// What gateway says about the call beside its result: warnings and explanations a
    /// person reads on stderr (`gateway: ...`), not shown under `--json` (whose result holds
    /// the same facts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Note>,
}

/// A sentence gateway says about a call (a warning, why it did not run, what it changed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Note {
    /// The sentence (escaped when shown: it may quote commands and paths).
    pub text: String,
    /// Who it is said to.
    #[serde(default, skip_serializing_if = "Audience::is_default")]
    pub to: Audience,
}

/// Who a [`Note`] is said to, on the caller's stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Audience {
    /// A person reading the human output: not under `--json` (whose result holds the same
    /// facts).
    #[default]
    Human,
    /// A person at a terminal only (an agent using gateway as its shell reads the command's
    /// output and nothing else).
    Terminal,
    /// Every caller, `--json` too (what the result does not say: a failure after it).
    Everyone,
}

impl Audience {
    fn is_default(&self) -> bool {
        *self == Audience::Human
    }
}

impl Note {
    /// A note for a person reading the human output.
    pub fn new(text: impl Into<String>) -> Note {
        Note {
            text: text.into(),
            to: Audience::Human,
        }
    }

    /// A note said to `to`.
    pub fn to(to: Audience, text: impl Into<String>) -> Note {
        Note {
            text: text.into(),
            to,
        }
    }
}

impl Report {
    /// A report of `outcome` ending with `exit`.
    pub fn new(exit: u8, outcome: Outcome) -> Report {
        Report {
            exit,
            outcome,
            notes: Vec::new(),
        }
    }

    /// A call whose output all went to its streams as it ran, ending with `exit`.
    pub fn streamed(exit: u8) -> Report {
        Report::new(exit, Outcome::Streamed)
    }

    /// A failed call: its error report and exit code.
    pub fn error(exit: u8, e: ErrorReport) -> Report {
        Report::new(exit, Outcome::Error(e))
    }

    /// This report with `note` added.
    pub fn with_note(mut self, note: impl Into<String>) -> Report {
        self.notes.push(Note::new(note));
        self
    }
}

/// A call's result, by kind. Each result travels as the JSON its type serializes to — the
/// JSON `--json` prints and docs/schemas documents ([`Json`]) — or, for the results whose
/// fields a renderer reads, as its own type.
/// (Not `Eq`: an audit record holds its duration as a float.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    content = "result",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum Outcome {
    /// Everything the call had to say went to its streams as it ran (`log tail -f`, `log
    /// export`), or it has nothing to say.
    Streamed,
    /// It failed: the error report (`--json`'s `{"error": ...}`).
    Error(ErrorReport),
    /// `exec` and `sh`: the run's report (its output went to the streams as it ran, unless
    /// `--json` asked for it in the report).
    Exec(Json<ExecReport<'static>>),
    /// `tool NAME`: the MCP tool result.
    Tool(Json<rmcp::model::CallToolResult>),
    /// The file tools (`fs ...`), `history`, `trash`, `undo`.
    Fs(fs::FsOutcome),
    /// `log ...` and `keys ...`.
    Log(log::LogOutcome),
    /// `policy list|check|explain|reload`.
    Policy(policy::PolicyOutcome),
    /// `scan`.
    Scan(Box<policy::ScanOutcome>),
    /// `pending`, `approve`, `deny`.
    Approval(policy::ApprovalOutcome),
    /// `policy explain --credentials`.
    Credentials(credentials::CredentialsOutcome),
    /// `http`: the request's report.
    Http(Json<super::tools::http::HttpReport>),
    /// `changes`, `apply`, `discard`: the held change sets.
    Changes(changes::ChangesReport),
}

impl Outcome {
    /// The kind's name, as the protocol names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Streamed => "streamed",
            Outcome::Error(_) => "error",
            Outcome::Exec(_) => "exec",
            Outcome::Tool(_) => "tool",
            Outcome::Fs(_) => "fs",
            Outcome::Log(_) => "log",
            Outcome::Policy(_) => "policy",
            Outcome::Scan(_) => "scan",
            Outcome::Approval(_) => "approval",
            Outcome::Credentials(_) => "credentials",
            Outcome::Http(_) => "http",
            Outcome::Changes(_) => "changes",
        }
    }
}

/// A typed result as it travels in a [`Report`]: the JSON its type `T` serializes to, which
/// is the JSON `--json` prints and docs/schemas documents for `T`. The type is kept in the
/// Rust type (`Json<ExecReport>` is not `Json<FsReport>`); [`Json::get`] reads it back where
/// `T` can be read.
#[derive(Serialize, Deserialize)]
#[serde(transparent)]
pub struct Json<T> {
    value: serde_json::Value,
    #[serde(skip)]
    of: std::marker::PhantomData<fn() -> T>,
}

/// A result type as [`Json`] names it: its `'static` form (a report that borrows from its
/// result, `ExecReport<'a>`, travels as `Json<ExecReport<'static>>`).
pub trait Shape: Serialize {
    /// The type [`Json`] is of.
    type Of;
}

/// [`Shape`] of a type that borrows nothing.
#[macro_export]
macro_rules! owned_shape {
    ($($t:ty),* $(,)?) => { $(impl $crate::broker::report::Shape for $t { type Of = $t; })* };
}

impl<'a> Shape for ExecReport<'a> {
    type Of = ExecReport<'static>;
}

impl<'a> Shape for FsReport<'a> {
    type Of = FsReport<'static>;
}

owned_shape!(
    rmcp::model::CallToolResult,
    super::Explanation,
    crate::broker::credentials::Explained
);

impl<T> Json<T> {
    /// The JSON of `v` (a value that cannot be serialized — a bug: every result type
    /// serializes — is an error object saying so).
    pub fn of<V: Shape<Of = T>>(v: &V) -> Json<T> {
        let value = serde_json::to_value(v).unwrap_or_else(|e| {
            serde_json::json!({"error": {"code": "failed", "message": format!(
                "gateway: rendering the result as JSON failed ({e}); please report this bug"
            )}})
        });
        Json {
            value,
            of: std::marker::PhantomData,
        }
    }

    /// The JSON.
    pub fn value(&self) -> &serde_json::Value {
        &self.value
    }

    /// This JSON without its field `key` (a part that travels typed beside it).
    pub fn without(mut self, key: &str) -> Json<T> {
        if let serde_json::Value::Object(m) = &mut self.value {
            m.remove(key);
        }
        self
    }

    /// The JSON with `key` set to `v` (a part that travelled typed beside it, put back).
    pub fn with(&self, key: &str, v: &impl Serialize) -> serde_json::Value {
        let mut value = self.value.clone();
        if let serde_json::Value::Object(m) = &mut value {
            m.insert(
                key.to_string(),
                serde_json::to_value(v).unwrap_or(serde_json::Value::Null),
            );
        }
        value
    }

    /// The value, read back as `T`.
    pub fn get(&self) -> Result<T, serde_json::Error>
    where
        T: serde::de::DeserializeOwned,
    {
        T::deserialize(&self.value)
    }
}

impl<T> Clone for Json<T> {
    fn clone(&self) -> Self {
        Json {
            value: self.value.clone(),
            of: std::marker::PhantomData,
        }
    }
}

impl<T> PartialEq for Json<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T> Eq for Json<T> {}

impl<T> std::fmt::Debug for Json<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}
