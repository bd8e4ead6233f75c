//! `gateway mcp`: an MCP server over stdio (the `rmcp` crate) exposing the broker's tools —
//! `exec`, the file tools, `cd`, `undo`, `history`, `scan`, `http_request` — with JSON Schemas and read-only /
//! destructive hints. A refusal is a tool result with `isError` naming the rule and its
//! reason, not a protocol error. One server process is one session: `cd` moves the session's
//! virtual working directory for the calls after it. Over 1,000 lines: the tool table, the
//! schemas and the per-call dispatch read together; the budget and the transports are
//! modules of their own.
//!
//! One code path: every tool call, whoever makes it, is [`run_tool`] — in this process when
//! the server is its own broker, in the daemon when one runs (`gateway serve`): then the
//! server forwards each call as a typed `Request::Tool` over the daemon's socket, the daemon
//! decides, runs and records it with its own state directory (which the agent's uid need not
//! reach), and an `ask` waits in its approval queue for `gateway approve`. Without a daemon
//! nobody can approve, and `ask` is refused with the rule that asked.
//!
//! Protocol revisions: rmcp 3 serves both from one loop, chosen by the client's first
//! request — 2025-11-25 (`initialize`, a session) and 2026-07-28 (stateless:
//! `server/discover`, each request carrying its `_meta`: protocol version, client info and
//! capabilities). Nothing here depends on a session but the roots cache (below) and `cd`,
//! which is the server process's own session in either revision.
//!
//! Roots: when the client declares the `roots` capability, the server asks for its roots
//! (again after `notifications/roots/list_changed`, and again when that arrives during a
//! fetch: `RootsCache`) and narrows the policy to them ([`Policy::narrow_to`]) for every
//! call — never widening it. A 2026-07-28 client may not be sent requests: each of its calls
//! is answered with an input request for `roots/list` (MRTR) and runs when the client sends
//! it again with the answer. A client offering no roots leaves the policy as it is; roots
//! that are not local directories narrow to nothing.
//!
//! Cancellation: each call has its own pipe, whose read end goes with the call to the
//! broker (`ExecRequest::cancel`, `FsContext::cancel`); the server writes to it when the
//! client cancels the request (`notifications/cancelled`) or goes away (stdin ends, stdout
//! has no reader): the command is killed and recorded as cancelled, and a call waiting for
//! another's capture of the workspace stops waiting. The server ends once every call in
//! flight is recorded.
//!
//! Over 1,000 lines: the tool schemas (one parameter type per tool, each documented for the
//! agent), their thin bodies (each builds one broker call and renders its typed report) and
//! the server loop; the tools' substance is the broker's one invocation (`broker::invoke`).
//! A call's life (roots cache, cancellation, the client going away) is in `serve::mcp_life`.

use crate::audit::Caller;
use crate::broker::tools::fs::{
    self as bfs, Edit, FsContext, FsOp, FsOutput, GrepMode, GrepOptions,
};
use crate::broker::{BrokerError, ExecRequest};
use crate::model::Decision;
use crate::policy::Policy;
use crate::sandbox::{Stdin, Stream};
use rmcp::handler::server::tool::InputResponses as Inputs;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock as Content, Implementation, InputRequiredResult,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use schemars::transform::RecursiveTransform;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::mcp_life::{InFlight, RootsCache, WatchedIn, WatchedOut, cancel, watch_stdout};

/// Who decides and runs the MCP server's calls.
pub enum Backend {
    /// This process, with this policy and state directory.
    Embedded {
        /// The policy every call is decided by: loaded once, pinned for the server's life
        /// (`broker::pin`; a changed file is said in the next result, not obeyed).
        pinned: Arc<crate::broker::pin::Pinned>,
        /// The state directory.
        state_dir: PathBuf,
    },
    /// The daemon at this socket (`gateway tool` calls), with the policy named here (else
    /// the client's GATEWAY_POLICY, else the daemon's default).
    Daemon {
        /// The daemon's socket.
        socket: PathBuf,
        /// `--policy` as given.
        policy: Option<String>,
        /// `--state-dir` (or GATEWAY_STATE_DIR) as given: the daemon checks it is its own.
        state_dir: Option<PathBuf>,
    },
}

/// How the MCP server runs.
pub struct McpConfig {
    /// Where calls are decided and run.
    pub backend: Backend,
    /// The workspace the session starts in.
    pub cwd: PathBuf,
    /// The session id (virtual cwd, audit records).
    pub session: String,
}

/// Serves MCP on stdin/stdout until the client closes the connection.
pub fn serve(cfg: McpConfig) -> Result<(), BrokerError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| BrokerError::Io {
            what: "starting the MCP server's runtime".into(),
            source,
        })?;
    let served = rt.block_on(async move {
        let server = Gateway::new(cfg);
        let gone = server.gone.clone();
        let inflight = server.inflight.clone();
        let (stdin, stdout) = rmcp::transport::stdio();
        let io = (
            WatchedIn {
                inner: stdin,
                gone: gone.clone(),
            },
            WatchedOut {
                inner: stdout,
                gone: gone.clone(),
            },
        );
        let running = server.serve(io).await.map_err(|e| BrokerError::Io {
            what: "starting the MCP session".into(),
            source: std::io::Error::other(e.to_string()),
        })?;
        // A client that stops reading is gone even while nothing is written to it; once it
        // is gone (that, or its stdin ended), the session ends when the calls in flight
        // (cancelled) are recorded.
        watch_stdout(gone.clone());
        let stop = running.cancellation_token();
        let mut left = gone.subscribe();
        tokio::spawn(async move {
            if left.wait_for(|g| *g).await.is_ok() {
                stop.cancel();
            }
        });
        let ended = running.waiting().await.map_err(|e| BrokerError::Io {
            what: "the MCP session".into(),
            source: std::io::Error::other(e.to_string()),
        });
        // Every call in flight ends (cancelled) and is recorded before the server does.
        let _ = inflight.subscribe().wait_for(|n| *n == 0).await;
        ended.map(drop)
    });
    // Not a drop, which would wait for the thread reading stdin: a client that stopped
    // reading may keep it open.
    rt.shutdown_background();
    served
}

#[derive(Clone)]
struct Gateway {
    cfg: Arc<McpConfig>,
    /// The client's roots (a 2025-11-25 session's).
    roots: Arc<Mutex<RootsCache>>,
    /// The client went away (its stdin ended, its stdout is closed): every call in flight
    /// is cancelled.
    gone: Arc<tokio::sync::watch::Sender<bool>>,
    /// The calls running on the blocking pool (the server waits for them to be recorded).
    inflight: Arc<tokio::sync::watch::Sender<usize>>,
    tool_router: rmcp::handler::server::router::tool::ToolRouter<Gateway>,
}

// ---------- parameters (their doc comments are the schemas' descriptions) ----------

/// The tool schemas' numbers as JSON Schema says them: schemars writes Rust's widths as
/// `format` (`uint`, `uint64`, `double`), which no JSON Schema vocabulary defines and
/// clients warn about (Gemini CLI: `unknown format "uint" ignored in schema`). The width is
/// dropped; an unsigned integer keeps `"minimum": 0`.
fn plain_numbers(schema: &mut schemars::Schema) {
    const WIDTHS: &[&str] = &[
        "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32",
        "uint64", "uint128", "float", "double",
    ];
    let Some(o) = schema.as_object_mut() else {
        return;
    };
    let unsigned = match o.get("format").and_then(|f| f.as_str()) {
        Some(f) if WIDTHS.contains(&f) => f.starts_with("uint"),
        _ => return,
    };
    o.remove("format");
    if unsigned {
        o.entry("minimum").or_insert(serde_json::Value::from(0));
    }
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct ExecParams {
    /// Shell command line, run with `sh -c` in the sandbox.
    command: String,
    /// Working directory (relative to the session's); default the session's.
    cwd: Option<String>,
    /// Wall-clock limit in seconds, at most the policy's (the policy's otherwise).
    timeout: Option<f64>,
    /// Extra environment variables (credential and loader variables are refused).
    env: Option<BTreeMap<String, String>>,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
    /// Hold the command's file changes instead of applying them: the result lists them
    /// (`snapshot.held`, `snapshot.pending`); a person lands them with `gateway apply ID`
    /// or drops them with `gateway discard ID` (default: the policy's `[undo] review`).
    review: Option<bool>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct ReadParams {
    /// The file.
    path: String,
    /// First line to return (1-based).
    offset: Option<usize>,
    /// Number of lines to return.
    limit: Option<usize>,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct WriteParams {
    /// The file (created, or replaced atomically with a backup).
    path: String,
    /// The new content.
    content: String,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct EditSpec {
    /// Exact text to replace (must occur once unless `all`).
    old: String,
    /// Replacement text.
    new: String,
    /// Replace every occurrence.
    #[serde(default)]
    all: bool,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct EditParams {
    /// The file.
    path: String,
    /// Edits applied in order, all or nothing.
    edits: Vec<EditSpec>,
    /// Return the diff only; change nothing.
    #[serde(default)]
    dry_run: bool,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct GlobParams {
    /// Glob pattern (without `/` it matches names anywhere).
    pattern: String,
    /// Directory to search (default the session's).
    path: Option<String>,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct GrepParams {
    /// Regular expression (Rust syntax).
    pattern: String,
    /// Directory to search (default the session's).
    path: Option<String>,
    /// Only files matching this glob.
    glob: Option<String>,
    /// Lines of context around matches.
    #[serde(default)]
    context: usize,
    /// Case-insensitive.
    #[serde(default)]
    ignore_case: bool,
    /// `content` (lines), `files` (paths) or `count` (per file).
    mode: Option<String>,
    /// At most this many results (default 200).
    max: Option<usize>,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct PathParam {
    /// The path (default the session's directory).
    path: Option<String>,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct MoveParams {
    /// What to move.
    source: String,
    /// Where (into it, if it is a directory); never over an existing file.
    destination: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct DeleteParams {
    /// What to move to the trash (`undo` restores it).
    path: String,
    /// Directories with their contents.
    #[serde(default)]
    recursive: bool,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct MkdirParams {
    /// The directory.
    path: String,
    /// Create missing parents; an existing directory is success (nothing changes).
    #[serde(default)]
    parents: bool,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct CdParams {
    /// Directory: absolute, relative, `..`, `~` or `-` (the previous one).
    path: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct UndoParams {
    /// Change id (from `history`); default the newest change not undone.
    id: Option<u64>,
    /// Say what would be reverted; change nothing.
    #[serde(default)]
    dry_run: bool,
    /// Revert even if the file changed since (its current content is backed up first).
    #[serde(default)]
    force: bool,
    /// Revert nothing: pass over the change (`id`, or the one `undo` would take) so that
    /// `undo` takes the one before it from now on.
    #[serde(default)]
    skip: bool,
    /// Without `id`: the newest change of any workspace (default: of this session's).
    #[serde(default)]
    all: bool,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct HistoryParams {
    /// The newest N changes (default 50).
    limit: Option<usize>,
    /// Every workspace's changes (default: this session's workspace's).
    #[serde(default)]
    all: bool,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct ScanParams {
    /// File or directory to scan (default the session's directory).
    path: Option<String>,
    /// Globs to leave out (gitignore syntax, as `gateway scan --exclude`).
    #[serde(default)]
    globs: Vec<String>,
    /// `json` (default: what `gateway scan --json` prints) or `sarif`.
    format: Option<String>,
    /// Only findings of at least this confidence: `low` (default, every finding), `medium`
    /// (keyword assignments, URL passwords) or `high` (validated vendor formats).
    min_confidence: Option<crate::secrets::Confidence>,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[schemars(transform = RecursiveTransform(plain_numbers))]
struct HttpParams {
    /// The method: GET, POST, PUT, DELETE, HEAD, … (case-sensitive).
    method: String,
    /// The URL: http://host[:port]/path or https://… (the policy's network decides the
    /// host; TLS is always verified).
    url: String,
    /// Request headers, name to value (`Host` and `Content-Length` are set by gateway).
    headers: Option<BTreeMap<String, String>>,
    /// The request body, as text.
    body: Option<String>,
    /// Query parameters, added to the URL's (encoded).
    params: Option<BTreeMap<String, String>>,
    /// Seconds the whole call may take, at most the policy's (default 30).
    timeout: Option<f64>,
    /// Follow redirects (default true), each decided again by the policy.
    follow_redirects: Option<bool>,
    /// Redirects followed at most (default 5, at most 20).
    max_redirects: Option<u32>,
    /// Body bytes read at most (default 1048576, at most 67108864).
    max_body: Option<u64>,
    /// Characters of this result at most (default: the policy's `[output] mcp_budget`,
    /// 30,000); longer output keeps its head and tail around a marker naming where the
    /// whole is. Within 4,000..=200,000.
    max_output_chars: Option<u64>,
}

use crate::broker::report::{ErrorCode, ErrorReport};

// ---------- results ----------

/// A report as the tool's result: its JSON as text (what agents read) and as structured
/// content, the same value the CLI's `--json` prints (`broker::report`).
fn ok_report<T: Serialize>(r: &T) -> CallToolResult {
    CallToolResult::structured(serde_json::to_value(r).unwrap_or_default())
}

/// A report of a call that was not performed or did not succeed: the same value, marked as
/// an error (its `refusal` or `error` says why, in words).
fn err_report<T: Serialize>(r: &T) -> CallToolResult {
    CallToolResult::structured_error(serde_json::to_value(r).unwrap_or_default())
}

/// A call refused before it reached the broker (bad arguments): the error object of every
/// front end (`{"error": {"code": "usage", "message"}}`, issue 15), as text and structured.
fn err_text(msg: impl Into<String>) -> CallToolResult {
    err_code(ErrorCode::Usage, msg)
}

/// A call that failed outside the broker (the daemon could not be reached or answered
/// wrongly): the error object with `code`.
fn err_code(code: ErrorCode, msg: impl Into<String>) -> CallToolResult {
    err_report(&ErrorReport::new(code, msg.into()))
}

fn broker_err(e: BrokerError) -> CallToolResult {
    err_report(&ErrorReport::of(&e))
}

/// An exec report's `stdout` and `stderr` within `budget` (with the rest of the report):
/// a stream longer than its share keeps its head and its tail (`ExecResult::stdout_tail`),
/// the middle replaced by a marker with the bytes cut, the record and the artifact holding
/// the whole stream.
fn bound_streams(v: &mut serde_json::Value, r: &crate::broker::ExecResult, budget: usize) {
    use super::budget::{head_within, joined, str_len, tail_within, value_len};
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let streams = [
        ("stdout", text(&r.stdout_head), text(&r.stdout_tail)),
        ("stderr", text(&r.stderr_head), text(&r.stderr_tail)),
    ];
    let total = |name: &str| {
        r.audit.as_ref().map_or(0, |a| {
            if name == "stdout" {
                a.stdout.bytes
            } else {
                a.stderr.bytes
            }
        })
    };
    // Whole: the head holds all of the stream.
    let whole = |i: usize| streams[i].1.len() as u64 >= total(streams[i].0);
    let lens: Vec<usize> = streams.iter().map(|s| str_len(&s.1)).collect();
    let mut base = v.clone();
    for (n, ..) in &streams {
        base[*n] = serde_json::Value::String(String::new());
    }
    let avail = budget.saturating_sub(value_len(&base) + 4);
    if (0..2).all(whole) && lens.iter().sum::<usize>() <= avail {
        return;
    }
    // stderr (usually short, often the reason) gets what it needs up to a third.
    let err_share = lens[1].min(avail / 3).max(avail.saturating_sub(lens[0]));
    let shares = [avail.saturating_sub(err_share), err_share.min(avail)];
    let seq = r.audit.as_ref().map(|a| a.seq);
    for (i, (name, head, tail)) in streams.iter().enumerate() {
        if whole(i) && (lens[i] <= shares[i] || head.is_empty()) {
            continue;
        }
        let art = r.audit.as_ref().and_then(|a| {
            if i == 0 {
                a.stdout.artifact.clone()
            } else {
                a.stderr.artifact.clone()
            }
        });
        let where_ = match (seq, art) {
            (Some(s), Some(a)) => format!(
                "the whole {name} is in the audit log: `gateway log show {s}` (artifact {a})"
            ),
            (Some(s), None) => format!(
                "the whole {name} was not stored (policy audit.store_output = false); record {s}"
            ),
            _ => "the whole output was not recorded".to_string(),
        };
        let marker = str_len(&joined("", "18446744073709551615 bytes", "", &where_));
        let room = shares[i].saturating_sub(marker) / 2;
        let h = head_within(head, room);
        // The tail from the kept end of the stream, never overlapping the head.
        let t_all = if whole(i) {
            &head[h.len()..]
        } else {
            tail.as_str()
        };
        let t_all = t_all.trim_start_matches('\u{fffd}');
        let t = tail_within(t_all, room);
        let cut = total(name).saturating_sub((h.len() + t.len()) as u64);
        v[*name] = serde_json::Value::String(joined(h, &format!("{cut} bytes"), t, &where_));
        v[format!("{name}_truncated")] = serde_json::Value::Bool(true);
    }
}

/// The names of the tools, as `tools/list` gives them.
pub const TOOLS: &[&str] = &[
    "exec",
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "grep",
    "list_directory",
    "move",
    "delete",
    "mkdir",
    "cd",
    "undo",
    "history",
    "scan",
    "http_request",
];

/// One tool call's circumstances.
pub struct ToolSession<'a> {
    /// The policy (narrowed to the client's roots, if it has any).
    pub policy: &'a Policy,
    /// The state directory.
    pub state_dir: &'a Path,
    /// Where the session started (its directory until a `cd`).
    pub cwd: &'a Path,
    /// The session id.
    pub session: &'a str,
    /// The front end, for the record's caller (`mcp`, `tool`).
    pub client: &'a str,
    /// The call's cancellation (a pipe's read end, `sandbox::Spec::cancel`); `None`: its
    /// caller's (a daemon client's, which ends with its connection).
    pub cancel: Option<std::os::fd::BorrowedFd<'a>>,
    /// Who calls: this process (the MCP server's own broker) or the daemon's client
    /// (`gateway tool` through the daemon).
    pub cx: &'a crate::broker::client::Context,
}

/// Runs one tool call: `args` is the call's JSON arguments. The one code path of the MCP
/// server's tools, in the server itself or in the daemon (`gateway tool`).
pub fn run_tool(s: &ToolSession<'_>, name: &str, args: serde_json::Value) -> CallToolResult {
    fn parse<T: DeserializeOwned>(
        name: &str,
        args: serde_json::Value,
    ) -> Result<T, CallToolResult> {
        serde_json::from_value(args).map_err(|e| err_text(format!("{name}: bad arguments: {e}")))
    }
    macro_rules! call {
        ($f:ident) => {
            match parse(name, args) {
                Ok(p) => s.$f(p),
                Err(e) => e,
            }
        };
    }
    let asked = args
        .get("max_output_chars")
        .and_then(serde_json::Value::as_u64);
    let budget = super::budget::of_call(&s.policy.output, asked);
    let mut r = match name {
        "exec" => match parse(name, args) {
            Ok(p) => s.exec(p, budget),
            Err(e) => e,
        },
        "read_file" => call!(read_file),
        "write_file" => call!(write_file),
        "edit_file" => call!(edit_file),
        "glob" => call!(glob),
        "grep" => call!(grep),
        "list_directory" => call!(list_directory),
        "move" => call!(move_path),
        "delete" => call!(delete),
        "mkdir" => call!(mkdir),
        "cd" => call!(cd),
        "undo" => call!(undo),
        "history" => call!(history),
        "scan" => call!(scan),
        "http_request" => call!(http_request),
        other => err_text(format!(
            "no tool `{other}`; the tools are {}",
            TOOLS.join(", ")
        )),
    };
    gate_result(&mut r);
    let whole = whole_of(name, r.structured_content.as_ref());
    bound_result(&mut r, budget, &whole);
    r
}

/// A result through the broker's gate (`broker::gate`): every string of its structured
/// content, and its text content — that content's JSON again, rebuilt from it, or its own
/// text when it has no structured content.
fn gate_result(r: &mut CallToolResult) {
    match r.structured_content.as_mut() {
        Some(v) => {
            if crate::broker::gate::value(v) {
                r.content = vec![Content::text(v.to_string())];
            }
        }
        None => {
            for c in &mut r.content {
                let gated = c
                    .as_text()
                    .map(|t| crate::broker::gate::text(&t.text).into_owned());
                if let Some(t) = gated {
                    *c = Content::text(t);
                }
            }
        }
    }
}

/// Where the whole of a cut result is, in words for the agent.
fn whole_of(name: &str, v: Option<&serde_json::Value>) -> String {
    let seq = v.and_then(|v| {
        v.get("audit_seq")
            .or_else(|| v.get("audit").and_then(|a| a.get("seq")))
    });
    let more = "or call again with a larger `max_output_chars` (at most 200000)";
    let output = v.and_then(|v| v.get("output"));
    let diff_stored = output
        .and_then(|o| o.get("diff_whole"))
        .and_then(|d| d.get("artifact"))
        .is_some_and(serde_json::Value::is_string);
    if output
        .and_then(|o| o.get("kind"))
        .and_then(serde_json::Value::as_str)
        == Some("changed")
        && !diff_stored
    {
        // A diff the broker kept whole: the record holds no copy of it; the file does.
        return format!(
            "the file holds the new content (`read_file` with `offset` and `limit`), {more}"
        );
    }
    match (name, seq) {
        ("read_file", _) => format!("read a window with `offset` and `limit`, {more}"),
        ("grep" | "glob" | "list_directory", _) => {
            format!("narrow the search (`path`, `glob`, `max`), {more}")
        }
        (_, Some(seq)) => {
            format!("the whole output is in the audit log: `gateway log show {seq}`, {more}")
        }
        _ => "call again with a larger `max_output_chars` (at most 200000)".to_string(),
    }
}

/// A result within `budget` characters, whole: its structured content bounded
/// (`serve::budget`: what decided and why it was refused cut last, but cut), and its text
/// content that content's JSON again; a result of plain text has each text cut the same way
/// (head and tail around a marker saying where the whole is).
fn bound_result(r: &mut CallToolResult, budget: usize, whole: &str) {
    use super::budget::{head_within, joined, str_len, tail_within, value_len};
    if let Some(v) = r.structured_content.as_mut() {
        if value_len(v) <= budget {
            return;
        }
        super::budget::bound(v, budget, whole);
        r.content = vec![Content::text(v.to_string())];
        return;
    }
    let share = budget / r.content.len().max(1);
    for c in &mut r.content {
        let cut = c.as_text().filter(|t| str_len(&t.text) > share).map(|t| {
            let room = share.saturating_sub(str_len(&joined("", "", "", whole)) + 40) / 2;
            let head = head_within(&t.text, room);
            let tail = tail_within(&t.text[head.len()..], room);
            let n = t.text.chars().count() - head.chars().count() - tail.chars().count();
            joined(head, &format!("{n} characters"), tail, whole)
        });
        if let Some(t) = cut {
            *c = Content::text(t);
        }
    }
}

impl ToolSession<'_> {
    fn caller(&self) -> Caller {
        self.cx.caller(self.client)
    }

    /// The session's places (`broker::session`): the workspace is where the session
    /// started, and its working directory what `cd` set. Under roots each
    /// is the first root when it lies outside them.
    fn place(&self) -> crate::broker::session::Place {
        // The workspace is where this server started (its own directory, forwarded to the
        // daemon as the call's directory), never a pin left by another process that used
        // the same session name.
        let mut p =
            crate::broker::session::place(self.cx, self.state_dir, self.session, self.cwd, false);
        p.workspace =
            crate::workspace::wsfs::resolve(self.cwd).unwrap_or_else(|| self.cwd.to_path_buf());
        if let Some(roots) = &self.policy.sandbox.roots {
            for d in [&mut p.workspace, &mut p.cwd] {
                if !self.policy.within_roots(d)
                    && let Some(r) = roots.first()
                {
                    *d = r.clone();
                }
            }
        }
        p
    }

    /// The session's working directory.
    fn cwd(&self) -> PathBuf {
        self.place().cwd
    }

    fn path(&self, p: &str) -> PathBuf {
        let p = PathBuf::from(p);
        if p.is_absolute() {
            p
        } else {
            self.cwd().join(p)
        }
    }

    /// A file tool call's context: this session; questions go to the daemon's queue when
    /// there is one (`fs::confirm`), else to no one.
    fn ctx(&self) -> FsContext<'_> {
        fn no_one(_: &str, _: bool) -> Option<bool> {
            None
        }
        let place = self.place();
        FsContext {
            policy: self.policy,
            workspace: place.workspace,
            cwd: place.cwd,
            state_dir: self.state_dir.to_path_buf(),
            session: self.session.to_string(),
            caller: self.caller(),
            confirm: &no_one,
            client: self.cx.clone(),
            cancel: self.cancel,
        }
    }

    fn fs(&self, op: FsOp) -> CallToolResult {
        let ctx = self.ctx();
        match bfs::run(&ctx, op) {
            Ok(r) => match r.output {
                FsOutput::Denied | FsOutput::NotApproved => err_report(&r.report()),
                _ => ok_report(&r.report()),
            },
            Err(e) => broker_err(e),
        }
    }

    fn exec(&self, p: ExecParams, budget: usize) -> CallToolResult {
        // `cwd` is where the command starts, inside or outside the workspace; what it may
        // write is the session's workspace, never its `cwd`.
        let place = self.place();
        let cwd = match &p.cwd {
            Some(c) if Path::new(c).is_absolute() => PathBuf::from(c),
            Some(c) => place.cwd.join(c),
            None => place.cwd.clone(),
        };
        let timeout = match p.timeout {
            None => None,
            // Longer than any clock: the longest, which the broker refuses and records.
            Some(t) if t.is_finite() && t > 0.0 => {
                Some(Duration::try_from_secs_f64(t).unwrap_or(Duration::MAX))
            }
            Some(t) => {
                return err_text(format!("timeout {t}: must be a positive number of seconds"));
            }
        };
        let cancel = match self.cancel.map(|c| c.try_clone_to_owned()).transpose() {
            Ok(c) => c,
            Err(e) => {
                return err_code(
                    ErrorCode::Sandbox,
                    format!("exec: the call's cancellation: {e}"),
                );
            }
        };
        let mut sink = |_: Stream, _: &[u8]| {};
        // In the daemon the broker asks its queue; here no one can answer.
        let mut ask = |_: &Decision| false;
        let req = ExecRequest {
            argv: vec!["sh".into(), "-c".into(), p.command],
            workspace: place.workspace,
            cwd,
            policy: self.policy,
            state_dir: self.state_dir.to_path_buf(),
            env: p.env.unwrap_or_default().into_iter().collect(),
            timeout,
            stdin: Stdin::Null,
            session: self.session.to_string(),
            caller: self.caller(),
            snapshot: None,
            review: p.review,
            context: self.cx.clone(),
            cancel,
        };
        let r = crate::broker::exec(req, &mut ask, &mut sink);
        // A SIGINT, SIGTERM or SIGHUP that cancelled the runs in flight: once the last of
        // them is recorded, the server ends by it.
        if let Some(sig) = crate::sandbox::take_interrupt() {
            crate::sandbox::exit_interrupted(sig);
        }
        let r = match r {
            Ok(r) => r,
            Err(e) => return broker_err(e),
        };
        let report = r.report(self.policy.audit.inline_output as usize);
        let mut v = serde_json::to_value(&report).unwrap_or_default();
        bound_streams(&mut v, &r, budget);
        // Not run (its `refusal` says why), or stopped by a secret in its output.
        if !r.ran || r.secrets.blocked.is_some() {
            return CallToolResult::structured_error(v);
        }
        CallToolResult::structured(v)
    }

    fn read_file(&self, p: ReadParams) -> CallToolResult {
        self.fs(FsOp::Read {
            path: self.path(&p.path),
            offset: p.offset,
            limit: p.limit,
            binary: false,
        })
    }

    fn write_file(&self, p: WriteParams) -> CallToolResult {
        self.fs(FsOp::Write {
            path: self.path(&p.path),
            content: p.content.into_bytes(),
        })
    }

    fn edit_file(&self, p: EditParams) -> CallToolResult {
        if p.edits.is_empty() {
            return err_text("edit_file: give at least one edit");
        }
        self.fs(FsOp::Edit {
            path: self.path(&p.path),
            edits: p
                .edits
                .into_iter()
                .map(|e| Edit::Replace {
                    old: e.old,
                    new: e.new,
                    all: e.all,
                })
                .collect(),
            dry_run: p.dry_run,
        })
    }

    fn dir(&self, p: Option<&str>) -> PathBuf {
        p.map_or_else(|| self.cwd(), |d| self.path(d))
    }

    fn glob(&self, p: GlobParams) -> CallToolResult {
        self.fs(FsOp::Glob {
            pattern: p.pattern,
            path: self.dir(p.path.as_deref()),
        })
    }

    fn grep(&self, p: GrepParams) -> CallToolResult {
        let mode = match p.mode.as_deref().unwrap_or("content") {
            "content" => GrepMode::Content,
            "files" => GrepMode::Files,
            "count" => GrepMode::Count,
            m => return err_text(format!("grep: mode `{m}`: use content, files or count")),
        };
        self.fs(FsOp::Grep {
            path: self.dir(p.path.as_deref()),
            options: GrepOptions {
                regex: p.pattern,
                glob: p.glob,
                context: p.context,
                ignore_case: p.ignore_case,
                mode,
                max: p.max.unwrap_or(200),
            },
        })
    }

    fn list_directory(&self, p: PathParam) -> CallToolResult {
        self.fs(FsOp::List {
            path: self.dir(p.path.as_deref()),
        })
    }

    fn move_path(&self, p: MoveParams) -> CallToolResult {
        self.fs(FsOp::Move {
            src: self.path(&p.source),
            dst: self.path(&p.destination),
        })
    }

    fn delete(&self, p: DeleteParams) -> CallToolResult {
        self.fs(FsOp::Remove {
            path: self.path(&p.path),
            recursive: p.recursive,
            permanent: false,
        })
    }

    fn mkdir(&self, p: MkdirParams) -> CallToolResult {
        self.fs(FsOp::Mkdir {
            path: self.path(&p.path),
            parents: p.parents,
        })
    }

    fn cd(&self, p: CdParams) -> CallToolResult {
        let ctx = self.ctx();
        // Under roots, `bfs::cd` only enters directories beneath them: the file tools'
        // readable roots are narrowed to the client's (`fs::root_paths`).
        match bfs::cd(&ctx, &p.path) {
            Ok(dir) => ok_report(&crate::broker::report::CdReport { cwd: &dir }),
            Err(e) => broker_err(e),
        }
    }

    fn undo(&self, p: UndoParams) -> CallToolResult {
        if p.skip {
            return match bfs::skip(&self.ctx(), p.id, p.all) {
                Ok(ids) => ok_report(&crate::broker::report::SkipReport { skipped: &ids }),
                Err(e) => broker_err(e),
            };
        }
        self.fs(FsOp::Undo {
            id: p.id,
            dry_run: p.dry_run,
            force: p.force,
            all: p.all,
        })
    }

    fn history(&self, p: HistoryParams) -> CallToolResult {
        // The session's workspace: where it started (`cd` moves only the base of relative
        // paths), as in `fs::run`.
        let ws = match crate::broker::workspace_of(self.cx, self.cwd) {
            Ok(w) => w,
            Err(e) => return broker_err(e),
        };
        let scope = if p.all {
            bfs::Scope::All
        } else {
            bfs::Scope::Workspace(&ws)
        };
        // The newest `limit` (50 by default; 0: none, as before).
        let n = p.limit.unwrap_or(50);
        let page = if n == 0 {
            bfs::history_page(self.state_dir, scope, self.cx, 0, None).map(|p| bfs::HistoryPage {
                omitted: p.changes.len(),
                changes: Vec::new(),
            })
        } else {
            bfs::history_page(self.state_dir, scope, self.cx, n, None)
        };
        match page {
            Ok(page) => ok_report(&crate::broker::report::HistoryReport {
                changes: &page.changes,
                workspace: (!p.all).then_some(ws.as_path()),
                omitted: page.omitted,
            }),
            Err(e) => broker_err(e),
        }
    }
}

impl ToolSession<'_> {
    /// `gateway scan --json` (or `--format sarif`) of one path: the same broker call
    /// (`broker::tools::scan::scan_audited`, recorded as the CLI's), but an agent's: decided by the
    /// session's policy as a search, its walk kept to what the file tools may read
    /// (`ScanRequest::confined`), reading with the caller's rights; never redacts and writes
    /// no baseline. Under roots the path must lie within them.
    fn scan(&self, p: ScanParams) -> CallToolResult {
        let sarif = match p.format.as_deref().unwrap_or("json") {
            "json" => false,
            "sarif" => true,
            f => return err_text(format!("scan: format `{f}`: use json or sarif")),
        };
        let path = self.dir(p.path.as_deref());
        if self.policy.sandbox.roots.is_some() && !self.policy.within_roots(&path) {
            return err_text(format!(
                "scan: {} is outside this session's roots; scan a path within them",
                path.display()
            ));
        }
        let req = crate::broker::tools::scan::ScanRequest {
            paths: vec![path],
            exclude: p.globs,
            no_ignore: false,
            baseline: None,
            redact: false,
            state_dir: self.state_dir.to_path_buf(),
            min_confidence: p.min_confidence.unwrap_or_default(),
            confined: Some(Arc::new(self.policy.clone())),
        };
        match crate::broker::tools::scan::scan_audited(
            self.cx,
            &req,
            &|_, _| {},
            self.session,
            self.caller(),
        ) {
            Ok(r) if sarif => ok_report(&crate::broker::tools::scan::sarif(&r)),
            Ok(r) => ok_report(&r),
            Err(e) => broker_err(e),
        }
    }
}

impl ToolSession<'_> {
    /// `gateway http` for an agent: the same broker call (`broker::tools::http::http`),
    /// decided by the session's policy; nobody can approve here (the daemon's queue can,
    /// when the call goes through it).
    fn http_request(&self, p: HttpParams) -> CallToolResult {
        let timeout = match p.timeout {
            None => None,
            Some(t) if t.is_finite() && t > 0.0 => {
                Some(Duration::try_from_secs_f64(t).unwrap_or(Duration::MAX))
            }
            Some(t) => {
                return err_text(format!(
                    "http_request: timeout {t}: must be a positive number of seconds"
                ));
            }
        };
        let mut url = p.url;
        if let Some(params) = p.params.filter(|m| !m.is_empty()) {
            match reqwest::Url::parse(&url) {
                Ok(mut u) => {
                    u.query_pairs_mut().extend_pairs(params.iter());
                    url = u.to_string();
                }
                Err(e) => {
                    return err_text(format!(
                        "http_request: {:?} is not a URL ({e})",
                        crate::broker::redact_text(&url)
                    ));
                }
            }
        }
        let max_redirects = match p.follow_redirects {
            Some(false) => Some(0),
            _ => p.max_redirects,
        };
        let cancel = match self.cancel.map(|c| c.try_clone_to_owned()).transpose() {
            Ok(c) => c,
            Err(e) => {
                return err_code(
                    ErrorCode::Sandbox,
                    format!("http_request: the call's cancellation: {e}"),
                );
            }
        };
        let mut ask = |_: &Decision| false;
        let req = crate::broker::tools::http::HttpCall {
            policy: self.policy,
            state_dir: self.state_dir.to_path_buf(),
            session: self.session.to_string(),
            caller: self.caller(),
            context: self.cx.clone(),
            workspace: self.place().workspace,
            method: p.method,
            url,
            headers: p.headers.unwrap_or_default().into_iter().collect(),
            body: p.body.map(String::into_bytes),
            timeout,
            max_redirects,
            max_body: p.max_body,
            cancel,
        };
        match crate::broker::tools::http::http(req, &mut ask) {
            Ok(r) if r.refusal.is_some() => err_report(&r),
            Ok(r) => ok_report(&r),
            Err(e) => broker_err(e),
        }
    }
}

/// A root's URI as a local directory: `file://` URIs only (host empty or `localhost`),
/// percent-decoded, canonical; `None` for anything else.
pub fn root_dir(uri: &str) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let rest = uri.strip_prefix("file://")?;
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') || path.contains(['?', '#']) {
        return None;
    }
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    let p = PathBuf::from(std::ffi::OsString::from_vec(bytes));
    let c = crate::workspace::wsfs::resolve(&p)?;
    crate::workspace::wsfs::is_dir(&c).then_some(c)
}

/// How often a fetch of the roots is made again because they changed while it was under
/// way, before the call is refused.
const ROOTS_REFETCHES: usize = 8;

/// The key of the `roots/list` input request a 2026-07-28 client is asked to fulfil.
const ROOTS_INPUT: &str = "roots";

/// Roots a client listed, as local directories (those that are not narrow to nothing,
/// never to everything); `None`: it listed none.
#[allow(deprecated)]
fn listed_roots(listed: &rmcp::model::ListRootsResult) -> Option<Vec<PathBuf>> {
    if listed.roots.is_empty() {
        None
    } else {
        Some(
            listed
                .roots
                .iter()
                .filter_map(|r| root_dir(&r.uri))
                .collect(),
        )
    }
}

/// The roots of a call, or what the call must wait for.
enum CallRoots {
    /// Known: `None` when the client offers none.
    Known(Option<Vec<PathBuf>>),
    /// A 2026-07-28 client that declared roots: asked to list them and call again (MRTR).
    Ask(InputRequiredResult),
}

impl Gateway {
    fn new(cfg: McpConfig) -> Gateway {
        Gateway {
            cfg: Arc::new(cfg),
            roots: Arc::default(),
            gone: Arc::new(tokio::sync::watch::Sender::new(false)),
            inflight: Arc::new(tokio::sync::watch::Sender::new(0)),
            tool_router: Self::tool_router(),
        }
    }

    /// The roots of a call. A 2025-11-25 client (a session that began with `initialize`)
    /// is asked with `roots/list` when it declared them, once until it says they changed.
    /// A 2026-07-28 client (no session: each request carries its `_meta`) cannot be asked
    /// by the server; its call is answered with an input request for `roots/list` (MRTR),
    /// and the same call sent again with the client's answer runs within them. An error
    /// result when the client declared roots and could not say which (fail closed).
    #[allow(deprecated)]
    async fn roots(
        &self,
        ctx: &RequestContext<RoleServer>,
        inputs: Option<rmcp::model::InputResponses>,
    ) -> Result<CallRoots, CallToolResult> {
        let modern = ctx.protocol_version().is_some_and(|v| !v.has_initialize());
        let declared = ctx.client_capabilities().is_some_and(|c| c.roots.is_some());
        if !declared {
            return Ok(CallRoots::Known(None));
        }
        if modern {
            let Some(answer) = inputs.and_then(|mut i| i.remove(ROOTS_INPUT)) else {
                let ask = rmcp::model::InputRequest::ListRoots(rmcp::model::ListRootsRequest {
                    method: Default::default(),
                    extensions: Default::default(),
                });
                return Ok(CallRoots::Ask(InputRequiredResult::from_input_requests(
                    [(ROOTS_INPUT.to_string(), ask)].into(),
                )));
            };
            return match serde_json::from_value::<rmcp::model::ListRootsResult>(answer) {
                Ok(l) => Ok(CallRoots::Known(listed_roots(&l))),
                Err(e) => Err(err_text(format!(
                    "the client's answer to roots/list is not a list of roots ({e}); refusing the call rather than running without them"
                ))),
            };
        }
        for _ in 0..ROOTS_REFETCHES {
            let generation = match self.roots.lock().unwrap_or_else(|p| p.into_inner()).begin() {
                Ok(known) => return Ok(CallRoots::Known(known)),
                Err(g) => g,
            };
            // Roots are deprecated by SEP-2577, but the clients agents run in still send them,
            // and they are the user's own statement of what the agent may touch.
            let asked = ctx.peer.list_roots();
            let listed = match tokio::time::timeout(Duration::from_secs(30), asked).await {
                Ok(Ok(l)) => l,
                Ok(Err(e)) => {
                    return Err(err_text(format!(
                        "the client declared roots but listing them failed ({e}); refusing the call rather than running without them"
                    )));
                }
                Err(_) => {
                    return Err(err_text(
                        "the client declared roots but did not list them within 30 s; refusing the call rather than running without them",
                    ));
                }
            };
            let roots = listed_roots(&listed);
            if self
                .roots
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .finish(generation, &roots)
            {
                return Ok(CallRoots::Known(roots));
            }
        }
        Err(err_text(format!(
            "the client's roots changed {ROOTS_REFETCHES} times while they were being listed; refusing the call rather than running with stale ones"
        )))
    }

    /// One tool call: run here, or forwarded to the daemon. The call ends when its tool
    /// does, or when its client cancels it (`notifications/cancelled`) or goes away (its
    /// stdin ends, its stdout is closed): then its command is killed through the call's own
    /// cancellation pipe (`sandbox::Spec::cancel`) and recorded as cancelled.
    async fn call<P: Serialize>(
        &self,
        ctx: RequestContext<RoleServer>,
        inputs: Option<rmcp::model::InputResponses>,
        name: &'static str,
        p: P,
    ) -> CallToolResponse {
        let roots = match self.roots(&ctx, inputs).await {
            Ok(CallRoots::Known(r)) => r,
            Ok(CallRoots::Ask(ask)) => return CallToolResponse::InputRequired(ask),
            Err(e) => return e.into(),
        };
        let args = match serde_json::to_value(p) {
            Ok(a) => a,
            Err(e) => return err_text(format!("{name}: {e}")).into(),
        };
        let (cancel_r, cancel_w) = match std::io::pipe() {
            Ok(p) => p,
            Err(e) => {
                return err_code(
                    ErrorCode::Sandbox,
                    format!("{name}: a cancellation pipe: {e}"),
                )
                .into();
            }
        };
        let cancel_r = std::os::fd::OwnedFd::from(cancel_r);
        let cfg = self.cfg.clone();
        let counted = InFlight::new(&self.inflight);
        let job = tokio::task::spawn_blocking(move || {
            let _counted = counted;
            call_blocking(&cfg, roots, cancel_r, name, args)
        });
        tokio::pin!(job);
        let mut gone = self.gone.subscribe();
        let mut cancel_w = Some(cancel_w);
        let r = loop {
            tokio::select! {
                r = &mut job => break r,
                () = ctx.ct.cancelled(), if cancel_w.is_some() => cancel(&mut cancel_w),
                _ = gone.wait_for(|g| *g), if cancel_w.is_some() => cancel(&mut cancel_w),
            }
        };
        match r {
            Ok(r) => r.into(),
            Err(e) => err_code(ErrorCode::Sandbox, format!("{name}: the call failed: {e}")).into(),
        }
    }
}

/// A tool call on the blocking pool: run here (with the call's cancellation pipe), or
/// forwarded to the daemon.
fn call_blocking(
    cfg: &McpConfig,
    roots: Option<Vec<PathBuf>>,
    cancel_r: std::os::fd::OwnedFd,
    name: &'static str,
    args: serde_json::Value,
) -> CallToolResult {
    match &cfg.backend {
        Backend::Embedded { pinned, state_dir } => {
            // The MCP server's own broker: this process calls.
            let cx = crate::broker::client::Context::this_process();
            let notice = pinned.changed_notice(&cx, RESTART);
            let policy = pinned.policy();
            let narrowed;
            let policy = match roots {
                None => policy,
                Some(r) => {
                    let mut p = policy.clone();
                    p.narrow_to(r);
                    narrowed = p;
                    &narrowed
                }
            };
            let mut r = run_tool(
                &ToolSession {
                    policy,
                    state_dir,
                    cwd: &cfg.cwd,
                    session: &cfg.session,
                    client: "mcp",
                    cancel: Some(cancel_r.as_fd()),
                    cx: &cx,
                },
                name,
                args,
            );
            if let Some(n) = notice {
                // In the server's log too: the person who runs it may read that first.
                eprintln!("gateway mcp: {n}");
                add_notice(&mut r, &n);
            }
            r
        }
        Backend::Daemon {
            socket,
            policy,
            state_dir,
        } => forward(
            socket,
            (policy.as_deref(), state_dir.as_deref()),
            (cfg, cancel_r.as_fd()),
            name,
            args,
            roots.as_deref(),
        ),
    }
}

/// How a pinned MCP server's changed policy comes into force: the server offers its client
/// (the agent) no reload; a person restarts it.
const RESTART: &str =
    "the MCP server is restarted (its client, the agent, cannot reload the policy that governs it)";

/// Adds a notice (the policy file changed) to a result, after its content, as text of its own.
pub fn add_notice(r: &mut CallToolResult, notice: &str) {
    let n = crate::broker::report::Notice {
        gateway_notice: notice,
    };
    r.content.push(Content::text(
        serde_json::to_value(&n).unwrap_or_default().to_string(),
    ));
}

/// Sends one tool call to the daemon as a typed [`Request::Tool`] with pipes for its output,
/// and returns the result it printed. The call ends, in the daemon too, when `cancel` (the
/// call's cancellation pipe) becomes readable: the connection is closed, the daemon kills
/// the run and records it.
fn forward(
    socket: &Path,
    (policy, state_dir): (Option<&str>, Option<&Path>),
    (cfg, cancel): (&McpConfig, std::os::fd::BorrowedFd<'_>),
    name: &str,
    args: serde_json::Value,
    roots: Option<&[PathBuf]>,
) -> CallToolResult {
    use crate::broker::request::{Invocation, Options, Request, Roots, ToolName};
    use std::os::fd::AsFd;
    let tool = match ToolName::of(name) {
        Ok(t) => t,
        Err(e) => return err_text(e.to_string()),
    };
    let serde_json::Value::Object(args) = args else {
        return err_text(format!("{name}: bad arguments: not a JSON object"));
    };
    let call = Invocation {
        options: Options {
            policy: policy.map(str::to_string),
            state_dir: state_dir.map(Path::to_path_buf),
            ..Options::default()
        },
        request: Request::Tool {
            name: tool,
            args,
            roots: match roots {
                None => Roots::Policy,
                Some([]) => Roots::Nothing,
                Some(r) => Roots::Dirs(r.to_vec()),
            },
        },
    };
    // not-ws: /dev/null
    let null = match std::fs::File::open("/dev/null") {
        Ok(f) => f,
        Err(e) => return err_code(ErrorCode::Sandbox, format!("{name}: /dev/null: {e}")),
    };
    let res = crate::serve::daemon::call_captured(
        socket,
        call,
        crate::serve::daemon::Captured {
            cwd: cfg.cwd.clone(),
            env: crate::serve::daemon::env_for_session(&cfg.session),
            stdin: null.as_fd(),
            stderr: None,
            ask_here: false,
            cancel: Some(cancel),
        },
    );
    use crate::broker::report::Outcome;
    match res {
        Ok((r, _, err)) => match r.outcome {
            Outcome::Tool(t) => t.get().unwrap_or_else(|e| {
                err_code(
                    ErrorCode::Failed,
                    format!("{name}: the daemon's tool result does not read as one ({e})"),
                )
            }),
            Outcome::Error(e) => err_code(e.error.code, e.error.message),
            other => err_code(
                ErrorCode::Failed,
                format!(
                    "{name}: the daemon answered the tool call with another kind of report ({}, exit {}): {}",
                    other.kind(),
                    r.exit,
                    String::from_utf8_lossy(&err).trim()
                ),
            ),
        },
        Err(e) => err_code(ErrorCode::Sandbox, format!("{name}: {e}")),
    }
}

#[tool_router]
impl Gateway {
    /// Run a shell command confined by the policy's sandbox; returns exit code and output.
    #[tool(annotations(destructive_hint = true, open_world_hint = false))]
    async fn exec(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<ExecParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "exec", p).await
    }

    /// Make an HTTP request decided by the policy (its network's allowed hosts; every
    /// redirect decided again), TLS always verified; returns status, headers, the body
    /// (secrets redacted; a binary body is stored in the audit log, not inlined), the
    /// redirects and timing.
    #[tool(annotations(destructive_hint = true, open_world_hint = true))]
    async fn http_request(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<HttpParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "http_request", p).await
    }

    /// Read a text file (line-numbered; secrets redacted).
    #[tool(annotations(read_only_hint = true))]
    async fn read_file(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<ReadParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "read_file", p).await
    }

    /// Create or replace a file (atomic; the old content is backed up; `undo` reverts it).
    #[tool(annotations(destructive_hint = true, idempotent_hint = true))]
    async fn write_file(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<WriteParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "write_file", p).await
    }

    /// Replace exact text in a file (unique unless `all`); keeps line endings, BOM and final
    /// newline; returns a unified diff. `dry_run` shows the diff only.
    #[tool(annotations(destructive_hint = true))]
    async fn edit_file(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<EditParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "edit_file", p).await
    }

    /// Files matching a glob (.gitignore honoured).
    #[tool(annotations(read_only_hint = true))]
    async fn glob(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<GlobParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "glob", p).await
    }

    /// Search file contents with a regular expression (.gitignore honoured; secrets redacted).
    #[tool(annotations(read_only_hint = true))]
    async fn grep(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<GrepParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "grep", p).await
    }

    /// List a directory.
    #[tool(annotations(read_only_hint = true))]
    async fn list_directory(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<PathParam>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "list_directory", p).await
    }

    /// Move or rename (never over an existing file; `undo` reverts it).
    #[tool(name = "move", annotations(destructive_hint = false))]
    async fn move_path(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<MoveParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "move", p).await
    }

    /// Move a file (or, with `recursive`, a directory) to the trash; `undo` restores it.
    #[tool(annotations(destructive_hint = true))]
    async fn delete(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<DeleteParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "delete", p).await
    }

    /// Create a directory.
    #[tool(annotations(destructive_hint = false, idempotent_hint = false))]
    async fn mkdir(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<MkdirParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "mkdir", p).await
    }

    /// Change the session's working directory (for the calls after this one).
    #[tool(annotations(read_only_hint = true))]
    async fn cd(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<CdParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "cd", p).await
    }

    /// Revert a change of the file tools or of a command's snapshot (the newest by default).
    #[tool(annotations(destructive_hint = true))]
    async fn undo(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<UndoParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "undo", p).await
    }

    /// The journal of changes (newest last): id, time, tool, path, phase.
    #[tool(annotations(read_only_hint = true))]
    async fn history(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<HistoryParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "history", p).await
    }

    /// Scan files for secrets (as `gateway scan --json`): each finding's path, line, rule,
    /// confidence and a SHA-256 of the secret, never the secret.
    #[tool(annotations(read_only_hint = true))]
    async fn scan(
        &self,
        ctx: RequestContext<RoleServer>,
        Inputs(inputs): Inputs,
        Parameters(p): Parameters<ScanParams>,
    ) -> CallToolResponse {
        self.call(ctx, inputs, "scan", p).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        let policy = match &self.cfg.backend {
            Backend::Embedded { pinned, .. } => format!("policy `{}`", pinned.policy().name),
            Backend::Daemon {
                policy: Some(p), ..
            } => format!("policy `{p}` (in the gateway daemon)"),
            Backend::Daemon { policy: None, .. } => "the gateway daemon's policy".into(),
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("gateway", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Every tool call is decided by {policy}, runs confined (landlock, seccomp, no capabilities), is recorded in a signed audit log, and file changes can be reverted with `undo`. A refused call is an error result naming the rule and its reason. Your roots, if you declare them, narrow what the tools may touch."
            ))
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        // Fetched again before the next call (and by a fetch under way).
        self.roots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .changed();
    }
}

#[cfg(test)]
mod tests {
    use super::root_dir;
    use std::path::PathBuf;

    #[test]
    fn root_uris_become_local_directories_or_nothing() {
        let d = std::env::temp_dir().join(format!("gateway-roots-{}", std::process::id()));
        let spaced = d.join("my root");
        std::fs::create_dir_all(&spaced).expect("test setup");
        std::fs::write(d.join("file"), "x").expect("test setup");
        let real = std::fs::canonicalize(&spaced).expect("test setup");
        let uri = format!("file://{}", d.display()).replace(' ', "%20");
        assert_eq!(root_dir(&format!("{uri}/my%20root")), Some(real.clone()));
        assert_eq!(
            root_dir(&format!("file://localhost{}/my%20root", d.display())),
            Some(real)
        );
        // `..` is resolved, not trusted.
        assert_eq!(
            root_dir(&format!("{uri}/my%20root/..")),
            std::fs::canonicalize(&d).ok()
        );
        for bad in [
            format!("{uri}/file"),              // not a directory
            format!("{uri}/missing"),           // does not exist
            format!("{uri}/my%20root?x=1"),     // a query is no path
            format!("https://{}", d.display()), // not a file URI
            "file://otherhost/tmp".to_string(), // a remote host
            "file:relative/dir".to_string(),    // not absolute
            String::new(),
        ] {
            assert_eq!(root_dir(&bad), None::<PathBuf>, "{bad}");
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
