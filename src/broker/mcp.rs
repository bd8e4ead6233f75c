//! `gateway mcp`: an MCP server over stdio (the `rmcp` crate) exposing the broker's tools —
//! `exec`, the file tools, `cd`, `undo`, `history` — with JSON Schemas and read-only /
//! destructive hints. Each call goes through the same broker functions as the CLI (decision,
//! confinement, backups, audit record). A refusal is a tool result with `isError` naming the
//! rule and its reason, not a protocol error. One server process is one session: `cd` moves
//! the session's virtual working directory for the calls after it.
//!
//! Until the daemon exists (issue 6 continues), the MCP server is its own broker, like the CLI,
//! and nobody can approve an `ask` decision: those are refused with the rule that asked.

use super::fs::{self as bfs, Edit, FsContext, FsOp, FsOutput, GrepMode, GrepOptions};
use super::{BrokerError, ExecRequest};
use crate::audit::Caller;
use crate::model::{Decision, Effect};
use crate::policy::Policy;
use crate::sandbox::{Stdin, Stream};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Content, Implementation, ServerCapabilities, ServerInfo};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How the MCP server runs.
pub struct McpConfig {
    /// The policy every call is decided by.
    pub policy: Policy,
    /// The state directory.
    pub state_dir: PathBuf,
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
    rt.block_on(async move {
        let server = Gateway::new(cfg);
        let running =
            server
                .serve(rmcp::transport::stdio())
                .await
                .map_err(|e| BrokerError::Io {
                    what: "starting the MCP session".into(),
                    source: std::io::Error::other(e.to_string()),
                })?;
        running.waiting().await.map_err(|e| BrokerError::Io {
            what: "the MCP session".into(),
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok(())
    })
}

#[derive(Clone)]
struct Gateway {
    cfg: std::sync::Arc<McpConfig>,
    tool_router: rmcp::handler::server::router::tool::ToolRouter<Gateway>,
}

// ---------- parameters (their doc comments are the schemas' descriptions) ----------

#[derive(Deserialize, JsonSchema)]
struct ExecParams {
    /// Shell command line, run with `sh -c` in the sandbox.
    command: String,
    /// Working directory (relative to the session's); default the session's.
    cwd: Option<String>,
    /// Wall-clock limit in seconds (the policy's otherwise).
    timeout: Option<f64>,
    /// Extra environment variables (credential and loader variables are refused).
    env: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, JsonSchema)]
struct ReadParams {
    /// The file.
    path: String,
    /// First line to return (1-based).
    offset: Option<usize>,
    /// Number of lines to return.
    limit: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
struct WriteParams {
    /// The file (created, or replaced atomically with a backup).
    path: String,
    /// The new content.
    content: String,
}

#[derive(Deserialize, JsonSchema)]
struct EditSpec {
    /// Exact text to replace (must occur once unless `all`).
    old: String,
    /// Replacement text.
    new: String,
    /// Replace every occurrence.
    #[serde(default)]
    all: bool,
}

#[derive(Deserialize, JsonSchema)]
struct EditParams {
    /// The file.
    path: String,
    /// Edits applied in order, all or nothing.
    edits: Vec<EditSpec>,
    /// Return the diff only; change nothing.
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize, JsonSchema)]
struct GlobParams {
    /// Glob pattern (without `/` it matches names anywhere).
    pattern: String,
    /// Directory to search (default the session's).
    path: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
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
}

#[derive(Deserialize, JsonSchema)]
struct PathParam {
    /// The path (default the session's directory).
    path: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct MoveParams {
    /// What to move.
    source: String,
    /// Where (into it, if it is a directory); never over an existing file.
    destination: String,
}

#[derive(Deserialize, JsonSchema)]
struct DeleteParams {
    /// What to move to the trash (`undo` restores it).
    path: String,
    /// Directories with their contents.
    #[serde(default)]
    recursive: bool,
}

#[derive(Deserialize, JsonSchema)]
struct MkdirParams {
    /// The directory.
    path: String,
    /// Create missing parents.
    #[serde(default)]
    parents: bool,
}

#[derive(Deserialize, JsonSchema)]
struct CdParams {
    /// Directory: absolute, relative, `..`, `~` or `-` (the previous one).
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct UndoParams {
    /// Change id (from `history`); default the newest change not undone.
    id: Option<u64>,
    /// Say what would be reverted; change nothing.
    #[serde(default)]
    dry_run: bool,
    /// Revert even if the file changed since (its current content is backed up first).
    #[serde(default)]
    force: bool,
}

#[derive(Deserialize, JsonSchema)]
struct HistoryParams {
    /// The newest N changes (default 50).
    limit: Option<usize>,
}

// ---------- results ----------

fn ok_json(v: serde_json::Value) -> CallToolResult {
    CallToolResult::success(vec![Content::text(v.to_string())])
}

fn err_text(msg: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![Content::text(msg.into())])
}

/// A refusal: the decision, every rule that made it and why.
fn refused(d: &Decision, what: &str) -> CallToolResult {
    let rules: Vec<serde_json::Value> = d
        .deciding_rules()
        .map(|r| json!({"rule": r.id, "effect": r.effect, "reason": r.reason}))
        .collect();
    CallToolResult::error(vec![Content::text(
        json!({"refused": what, "decision": d.effect, "rules": rules}).to_string(),
    )])
}

fn broker_err(e: BrokerError) -> CallToolResult {
    err_text(super::redact_text(&e.to_string()))
}

impl Gateway {
    fn new(cfg: McpConfig) -> Gateway {
        Gateway {
            cfg: std::sync::Arc::new(cfg),
            tool_router: Self::tool_router(),
        }
    }

    fn caller() -> Caller {
        super::log::this_caller("mcp")
    }

    /// The session's working directory: what `cd` set, else where the server started.
    fn cwd(&self) -> PathBuf {
        bfs::session_cwd(&self.cfg.state_dir, &self.cfg.session)
            .unwrap_or_else(|| self.cfg.cwd.clone())
    }

    fn path(&self, p: &str) -> PathBuf {
        let p = PathBuf::from(p);
        if p.is_absolute() {
            p
        } else {
            self.cwd().join(p)
        }
    }

    /// A file tool call's context: this session, and no one to ask.
    fn ctx(&self) -> FsContext<'_> {
        fn no_one(_: &str, _: bool) -> Option<bool> {
            None
        }
        FsContext {
            policy: &self.cfg.policy,
            cwd: self.cwd(),
            state_dir: self.cfg.state_dir.clone(),
            session: self.cfg.session.clone(),
            caller: Self::caller(),
            confirm: &no_one,
        }
    }

    fn fs(&self, op: FsOp) -> CallToolResult {
        let ctx = self.ctx();
        match bfs::run(&ctx, op) {
            Ok(r) => match r.output {
                FsOutput::Denied => refused(&r.decision, "denied by policy"),
                FsOutput::NotApproved => refused(
                    &r.decision,
                    "needs approval, and there is no one to approve it yet (the approval queue comes with the daemon)",
                ),
                out => ok_json(
                    json!({"decision": r.decision.effect, "output": out, "audit_seq": r.audit_seq}),
                ),
            },
            Err(e) => broker_err(e),
        }
    }
}

#[tool_router]
impl Gateway {
    /// Run a shell command confined by the policy's sandbox; returns exit code and output.
    #[tool(annotations(destructive_hint = true, open_world_hint = false))]
    async fn exec(&self, Parameters(p): Parameters<ExecParams>) -> CallToolResult {
        let cwd = match &p.cwd {
            Some(c) => self.path(c),
            None => self.cwd(),
        };
        let timeout = match p.timeout {
            None => None,
            Some(t) if t.is_finite() && t > 0.0 => Some(Duration::from_secs_f64(t)),
            Some(t) => {
                return err_text(format!("timeout {t}: must be a positive number of seconds"));
            }
        };
        let keep = self.cfg.policy.audit.inline_output as usize;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut sink = |s: Stream, b: &[u8]| {
            let buf = match s {
                Stream::Stdout => &mut out,
                Stream::Stderr => &mut err,
            };
            let room = (keep + 1).saturating_sub(buf.len());
            buf.extend_from_slice(&b[..room.min(b.len())]);
        };
        // No one to ask yet: `ask` is not approved.
        let mut ask = |_: &Decision| false;
        let req = ExecRequest {
            argv: vec!["sh".into(), "-c".into(), p.command],
            cwd,
            policy: &self.cfg.policy,
            state_dir: self.cfg.state_dir.clone(),
            env: p.env.unwrap_or_default().into_iter().collect(),
            timeout,
            stdin: Stdin::Null,
            session: self.cfg.session.clone(),
            caller: Self::caller(),
            snapshot: None,
        };
        let r = match super::exec(req, &mut ask, &mut sink) {
            Ok(r) => r,
            Err(e) => return broker_err(e),
        };
        if !r.ran {
            return match r.decision.effect {
                Effect::Ask => refused(
                    &r.decision,
                    "needs approval, and there is no one to approve it yet (the approval queue comes with the daemon)",
                ),
                _ => refused(&r.decision, "denied by policy"),
            };
        }
        let text = |b: &[u8]| {
            let shown = &b[..b.len().min(keep)];
            String::from_utf8_lossy(shown).into_owned()
        };
        let o = r.outcome.as_ref();
        let blocked = r.secrets.blocked.is_some();
        let result = json!({
            "exit_code": o.and_then(|o| o.exit_code),
            "signal": o.and_then(|o| o.signal),
            "timed_out": o.is_some_and(|o| o.timed_out),
            "stdout": text(&out),
            "stderr": text(&err),
            "truncated": out.len() > keep || err.len() > keep,
            "secret_blocked": blocked,
            "decision": r.decision.effect,
            "audit": r.audit.as_ref().map(|a| json!({"seq": a.seq, "stdout_artifact": a.stdout.artifact, "stderr_artifact": a.stderr.artifact})),
            "snapshot": r.snapshot.as_ref().map(|s| json!({"group": s.group, "changed_files": s.changes.len()})),
        });
        if blocked {
            return CallToolResult::error(vec![Content::text(result.to_string())]);
        }
        ok_json(result)
    }

    /// Read a text file (line-numbered; secrets redacted).
    #[tool(annotations(read_only_hint = true))]
    async fn read_file(&self, Parameters(p): Parameters<ReadParams>) -> CallToolResult {
        self.fs(FsOp::Read {
            path: self.path(&p.path),
            offset: p.offset,
            limit: p.limit,
            binary: false,
        })
    }

    /// Create or replace a file (atomic; the old content is backed up; `undo` reverts it).
    #[tool(annotations(destructive_hint = true, idempotent_hint = true))]
    async fn write_file(&self, Parameters(p): Parameters<WriteParams>) -> CallToolResult {
        self.fs(FsOp::Write {
            path: self.path(&p.path),
            content: p.content.into_bytes(),
        })
    }

    /// Replace exact text in a file (unique unless `all`); keeps line endings, BOM and final
    /// newline; returns a unified diff. `dry_run` shows the diff only.
    #[tool(annotations(destructive_hint = true))]
    async fn edit_file(&self, Parameters(p): Parameters<EditParams>) -> CallToolResult {
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

    /// Files matching a glob (.gitignore honoured).
    #[tool(annotations(read_only_hint = true))]
    async fn glob(&self, Parameters(p): Parameters<GlobParams>) -> CallToolResult {
        let path = p
            .path
            .as_deref()
            .map_or_else(|| self.cwd(), |d| self.path(d));
        self.fs(FsOp::Glob {
            pattern: p.pattern,
            path,
        })
    }

    /// Search file contents with a regular expression (.gitignore honoured; secrets redacted).
    #[tool(annotations(read_only_hint = true))]
    async fn grep(&self, Parameters(p): Parameters<GrepParams>) -> CallToolResult {
        let mode = match p.mode.as_deref().unwrap_or("content") {
            "content" => GrepMode::Content,
            "files" => GrepMode::Files,
            "count" => GrepMode::Count,
            m => return err_text(format!("grep: mode `{m}`: use content, files or count")),
        };
        let path = p
            .path
            .as_deref()
            .map_or_else(|| self.cwd(), |d| self.path(d));
        self.fs(FsOp::Grep {
            path,
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

    /// List a directory.
    #[tool(annotations(read_only_hint = true))]
    async fn list_directory(&self, Parameters(p): Parameters<PathParam>) -> CallToolResult {
        let path = p
            .path
            .as_deref()
            .map_or_else(|| self.cwd(), |d| self.path(d));
        self.fs(FsOp::List { path })
    }

    /// Move or rename (never over an existing file; `undo` reverts it).
    #[tool(name = "move", annotations(destructive_hint = false))]
    async fn move_path(&self, Parameters(p): Parameters<MoveParams>) -> CallToolResult {
        self.fs(FsOp::Move {
            src: self.path(&p.source),
            dst: self.path(&p.destination),
        })
    }

    /// Move a file (or, with `recursive`, a directory) to the trash; `undo` restores it.
    #[tool(annotations(destructive_hint = true))]
    async fn delete(&self, Parameters(p): Parameters<DeleteParams>) -> CallToolResult {
        self.fs(FsOp::Remove {
            path: self.path(&p.path),
            recursive: p.recursive,
            permanent: false,
        })
    }

    /// Create a directory.
    #[tool(annotations(destructive_hint = false, idempotent_hint = false))]
    async fn mkdir(&self, Parameters(p): Parameters<MkdirParams>) -> CallToolResult {
        self.fs(FsOp::Mkdir {
            path: self.path(&p.path),
            parents: p.parents,
        })
    }

    /// Change the session's working directory (for the calls after this one).
    #[tool(annotations(read_only_hint = true))]
    async fn cd(&self, Parameters(p): Parameters<CdParams>) -> CallToolResult {
        let ctx = self.ctx();
        match bfs::cd(&ctx, &p.path) {
            Ok(dir) => ok_json(json!({"cwd": dir})),
            Err(e) => broker_err(e),
        }
    }

    /// Revert a change of the file tools or of a command's snapshot (the newest by default).
    #[tool(annotations(destructive_hint = true))]
    async fn undo(&self, Parameters(p): Parameters<UndoParams>) -> CallToolResult {
        self.fs(FsOp::Undo {
            id: p.id,
            dry_run: p.dry_run,
            force: p.force,
        })
    }

    /// The journal of changes (newest last): id, time, tool, path, phase.
    #[tool(annotations(read_only_hint = true))]
    async fn history(&self, Parameters(p): Parameters<HistoryParams>) -> CallToolResult {
        match bfs::history(&self.cfg.state_dir) {
            Ok(all) => {
                let n = p.limit.unwrap_or(50);
                let skip = all.len().saturating_sub(n);
                let changes: Vec<serde_json::Value> = all
                    .into_iter()
                    .skip(skip)
                    .map(|(c, phase)| json!({"change": c, "phase": phase}))
                    .collect();
                ok_json(json!({ "changes": changes }))
            }
            Err(e) => broker_err(e),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("gateway", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Every tool call is decided by gateway's policy `{}`, runs confined (landlock, seccomp, no capabilities), is recorded in a signed audit log, and file changes can be reverted with `undo`. A refused call is an error result naming the rule and its reason.",
                self.cfg.policy.name
            ))
    }
}
