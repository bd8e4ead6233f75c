//! File tools run in a confined child: `gateway __fs-worker`, started through the sandbox
//! with the policy's readable and writable trees (landlock), no network, the seccomp filter,
//! no capabilities and the policy's limits. The worker performs the whole tool (path
//! resolution, reads, the edit engine, atomic writes, renames, searches); the broker keeps
//! what no child may touch — the journal, the backup store, the trash's metadata — and does
//! those steps when the worker asks, over its stdin and stdout:
//!
//! ```text
//! frame = header length (u32 LE) | payload length (u64 LE) | header (JSON) | payload
//! broker → worker: Request, then one answer per worker request
//! worker → broker: Backup, Begin, Commit, Abort, TrashReserve, TrashForget, ReadBackup,
//!                  Changes ... then Done (the tool's output or error)
//! ```
//!
//! The order of a change is the journal's: the worker sends the old and new contents for
//! backup and the intent (`Begin`), and acts only after the broker has made them durable;
//! then `Commit`. Changes hold the journal's lock (taken by the broker) for the whole call.
//! Read-only tools get no lock, and the broker refuses their requests to change the journal.
//!
//! Why a worker does not get namespaces: it runs gateway's own code, not a command, and
//! the mount namespace that masks the state directory would also hide the trash (the
//! worker moves removed files into `<state>/trash/files`, the one directory of the state
//! directory its landlock allows, and only for removals and undo). Denied and protected
//! paths inside writable trees, which landlock cannot carve out, are checked by the worker on
//! the file actually opened, as before.
//!
//! Over 1,000 lines: both ends of the worker's pipe (the frames, each request the worker may
//! make and the broker's answer to it, the typed errors that cross it) and their tests; the
//! tools' bodies are in the leaf modules.

use super::ops;
use super::roots::RootPaths;
use super::types::{FsOp, FsOutput};
use super::types::{StateOps, Tools};
use crate::broker;
use crate::broker::BrokerError;
use crate::broker::refusal::Refusal;
use crate::fsops::path::{OwnerFix, Root};
use crate::journal::{self, Change};
use crate::policy::Policy;
use crate::sandbox::{self, Confinement, EnforcementStatus, Network, Spec, Stdin, Stream};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest frame (header plus payload) either side accepts.
const MAX_FRAME: u64 = 1 << 30;
/// The worker's wall-clock limit when the policy sets none: a tool blocked on a FIFO or a
/// slow filesystem must not hold the journal's lock for ever.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// The worker's stderr kept for error messages.
const STDERR_KEPT: usize = 4096;

/// What the broker asks the worker to do.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Request {
    /// The tool call.
    pub(crate) op: FsOp,
    /// The base of relative paths (the session's working directory; not the writable area).
    pub(crate) ws: PathBuf,
    /// The session's workspace, recorded with each change (not sent to the worker).
    #[serde(skip)]
    pub(crate) workspace: PathBuf,
    /// The allowed directories.
    pub(crate) roots: RootPaths,
    /// Redact secrets in what is shown.
    pub(crate) redact: bool,
    /// The largest file read or changed.
    pub(crate) max_size: u64,
    /// The trash's `files/` directory (writable for the worker when the op uses the trash).
    pub(crate) trash_files: PathBuf,
    /// The change an undo or restore reverts (found by the broker in the journal).
    pub(crate) undo_target: Option<Change>,
    /// The daemon client the changes are made for, recorded with each (not sent).
    #[serde(skip)]
    pub(crate) uid: Option<u32>,
}

/// Worker → broker.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "up", rename_all = "snake_case")]
enum Up {
    /// Is this blob in the backup store already? (Then its content need not cross.)
    Have { sha256: String },
    /// Store the payload in the backup store.
    Backup,
    /// Write this change's intent.
    Begin { change: Box<Change> },
    /// Write these changes' intents (one append, one sync).
    BeginMany { changes: Vec<Change> },
    /// The change is done.
    Commit { id: u64 },
    /// These changes are done (one append, one sync).
    CommitMany { ids: Vec<u64> },
    /// The change was not made.
    Abort { id: u64 },
    /// Reserve a trash name for this path.
    TrashReserve {
        #[serde(with = "journal::pathbytes")]
        original: PathBuf,
    },
    /// Forget a trash item's metadata.
    TrashForget { name: String },
    /// A backup's content.
    ReadBackup { sha256: String },
    /// The committed changes of a group that no undo reverted yet.
    Group { group: String },
    /// The tool's result; the last frame.
    Done {
        result: ToolResult,
        #[serde(default)]
        owner_fixes: Vec<OwnerFix>,
    },
}

/// The tool's result, across the pipe.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
enum ToolResult {
    Ok {
        output: Box<FsOutput>,
    },
    /// A usage error, typed; `not_undone`: the undo of that change failed with it
    /// (`BrokerError::NotUndone`).
    Usage {
        error: broker::UsageError,
        #[serde(default)]
        not_undone: Option<u64>,
    },
    /// Any other failure: its class and its message. (The errors on paths and of I/O it may
    /// be, `FsError` and `io::Error`, are not serializable; nothing reads the message but a
    /// person.)
    Err {
        code: broker::report::ErrorCode,
        message: String,
    },
    /// The policy refused, found late (in the worker): recorded as a deny with its rule.
    Refused {
        refusal: broker::refusal::Refusal,
    },
}

/// Broker → worker.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "down", rename_all = "snake_case")]
enum Down {
    Request {
        request: Box<Request>,
    },
    Sha {
        sha256: String,
    },
    Have {
        present: bool,
    },
    Change {
        change: Box<Change>,
    },
    Begun {
        changes: Vec<Change>,
    },
    Ok,
    Name {
        name: String,
    },
    /// The payload is the data.
    Data,
    Members {
        changes: Vec<Change>,
    },
    Err {
        message: String,
    },
    /// The request is refused by a limit of the policy (the tool fails as refused: exit 120,
    /// recorded as a deny with the refusal's rule).
    Refused {
        refusal: Refusal,
    },
}

/// Encodes one frame's lengths and header (the payload follows as is).
fn frame_head(header: &impl Serialize, payload_len: usize) -> Vec<u8> {
    // Serialising these types cannot fail (no maps with non-string keys, no custom
    // serialisers); an empty header would be refused by the other side.
    let h = serde_json::to_vec(header).unwrap_or_default();
    let mut out = Vec::with_capacity(12 + h.len());
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(&(payload_len as u64).to_le_bytes());
    out.extend_from_slice(&h);
    out
}

/// Encodes one frame.
fn frame(header: &impl Serialize, payload: &[u8]) -> Vec<u8> {
    let mut out = frame_head(header, payload.len());
    out.extend_from_slice(payload);
    out
}

/// The whole length of the frame that `buf` starts with, once its lengths are in.
fn frame_len(buf: &[u8]) -> Option<u64> {
    let hl = u32::from_le_bytes(buf.get(0..4)?.try_into().ok()?) as u64;
    let pl = u64::from_le_bytes(buf.get(4..12)?.try_into().ok()?);
    Some(hl.saturating_add(pl).saturating_add(12))
}

/// The first complete frame of `buf`: (header, payload range, bytes used), `Ok(None)` if
/// incomplete.
#[allow(clippy::type_complexity)]
fn parse<T: for<'de> Deserialize<'de>>(
    buf: &[u8],
) -> Result<Option<(T, std::ops::Range<usize>, usize)>, String> {
    if buf.len() < 12 {
        return Ok(None);
    }
    let hl = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as u64;
    let mut p = [0u8; 8];
    p.copy_from_slice(&buf[4..12]);
    let pl = u64::from_le_bytes(p);
    let total = hl.saturating_add(pl);
    if total > MAX_FRAME {
        return Err(format!("a frame of {total} bytes (at most {MAX_FRAME})"));
    }
    let (hl, pl) = (hl as usize, pl as usize);
    if buf.len() < 12 + hl + pl {
        return Ok(None);
    }
    let h = serde_json::from_slice(&buf[12..12 + hl]).map_err(|e| format!("a bad frame: {e}"))?;
    Ok(Some((h, 12 + hl..12 + hl + pl, 12 + hl + pl)))
}

// ---------- the broker's side ----------

/// Runs `req` in a confined worker, answering its requests; returns the tool's result and
/// what the sandbox enforced.
#[allow(clippy::type_complexity)]
#[allow(
    clippy::too_many_lines,
    reason = "the worker's side of one call, one arm per request it answers"
)]
pub(crate) fn run(
    policy: &Policy,
    state_dir: &Path,
    lock: Option<&journal::Lock>,
    req: Request,
    (ceiling, cancel): (Vec<(u32, u64, u64)>, Option<std::os::fd::BorrowedFd<'_>>),
) -> (Result<FsOutput, BrokerError>, Option<EnforcementStatus>) {
    let workspace = req.workspace.clone();
    let uid = req.uid;
    // not-ws: this program's own executable
    let exe = match std::env::current_exe().and_then(std::fs::canonicalize) {
        Ok(e) => e,
        Err(e) => {
            return (
                Err(BrokerError::Io {
                    what: "finding gateway's own executable to start the file tool worker".into(),
                    source: e,
                }),
                None,
            );
        }
    };
    let write_roots = req.roots.write.clone();
    let mut write = write_roots.clone();
    if req.op.uses_trash() {
        write.push(req.trash_files.clone());
    }
    let mut limits = policy.sandbox.limits.clone();
    // The worker's output is its answer (file contents, search results): bounded by the
    // frame size instead; RLIMIT_NPROC does not bind uid 0 and the worker has no pid
    // namespace, so `pids` is left to the worker itself (it starts only its search threads).
    limits.output = None;
    limits.pids = None;
    limits.timeout = Some(limits.timeout.unwrap_or(DEFAULT_TIMEOUT));
    limits.ceiling = ceiling;
    // Only undo and restore read the journal and old contents: another call's worker, were it
    // subverted, could otherwise list every change and read what other workspaces held.
    let history = req.op.reads_history();
    let cwd = req.ws.clone();
    let read = req.roots.read.clone();
    let deny = req.roots.landlock_deny.clone();
    let spec = Spec {
        program: exe.clone(),
        argv: vec!["gateway".into(), "__fs-worker".into()],
        env: vec![],
        cwd,
        stdin: Stdin::Channel(frame(
            &Down::Request {
                request: Box::new(req),
            },
            &[],
        )),
        confine: Confinement {
            read,
            write,
            exec: vec![exe],
            deny,
            protected: vec![],
            hidden: vec![],
            network: Network::None,
            limits,
            namespaces: false,
            best_effort: policy.sandbox.best_effort,
            memory_cgroup: false,
            private_tmp: None,
            danger_openat2: true,
            run_as: None,
            capture: None,
        },
        // The worker ends with its call (a copy: the spec owns its fd).
        cancel: cancel.and_then(|c| c.try_clone_to_owned().ok()),
        proxy: None,
    };
    let mut server = Server::new(state_dir, lock, history);
    server.ws = workspace;
    server.uid = uid;
    server.limits = Some(broker::undo_limits(&policy.undo));
    let outcome = match sandbox::run(&spec, &mut server) {
        Ok(o) => o,
        Err(e) => return (Err(BrokerError::Sandbox(e)), None),
    };
    let enforcement = Some(outcome.enforcement.clone());
    for fix in &server.owner_fixes {
        // Only for files this call changed (a journal intent was written for them).
        if server.changed.contains(&fix.path) {
            give_back(&write_roots, fix);
        }
    }
    let res = match server.result {
        Some(ToolResult::Ok { output }) => Ok(*output),
        Some(ToolResult::Usage { error, not_undone }) => {
            let e = BrokerError::Usage(error);
            Err(match not_undone {
                Some(id) => BrokerError::NotUndone {
                    id,
                    source: Box::new(e),
                },
                None => e,
            })
        }
        Some(ToolResult::Refused { refusal }) => Err(BrokerError::Refused(refusal)),
        Some(ToolResult::Err { code, message }) => Err(BrokerError::Worker { code, message }),
        None => {
            if outcome.timed_out && server.broken.is_none() {
                return (
                    Err(BrokerError::TimedOut(format!(
                        "the file tool ran out of time after {} s and was killed (the policy's `timeout`); a slow or hung file system?",
                        spec.confine.limits.timeout.map_or(0, |t| t.as_secs())
                    ))),
                    enforcement,
                );
            }
            let why = if let Some(b) = server.broken {
                format!("it broke the protocol ({b})")
            } else if let Some(s) = outcome.signal {
                format!("it was killed by signal {s} (a policy limit: memory, cpu, file_size?)")
            } else {
                format!(
                    "it exited with code {:?} without an answer",
                    outcome.exit_code
                )
            };
            let err = String::from_utf8_lossy(&server.stderr);
            let err = broker::redact_text(err.trim());
            Err(BrokerError::Io {
                what: "the file tool's confined worker failed".into(),
                source: std::io::Error::other(if err.is_empty() {
                    why
                } else {
                    format!("{why}: {err}")
                }),
            })
        }
    };
    (res, enforcement)
}

/// Gives a file the worker replaced back to its owner: opened beneath the writable root
/// that holds it, checked to be the very file the worker wrote (device and inode), then
/// `fchown`. Best effort: without `CAP_CHOWN` the broker cannot either (and then the owner
/// was the broker's uid already, or the worker could not have replaced it).
fn give_back(write_roots: &[PathBuf], fix: &OwnerFix) {
    use rustix::fs::OFlags;
    let Some(root) = write_roots
        .iter()
        .filter_map(|r| Root::open(r).ok())
        .filter(|r| fix.path.starts_with(&r.path))
        .max_by_key(|r| r.path.components().count())
    else {
        return;
    };
    let Ok(rel) = fix.path.strip_prefix(&root.path) else {
        return;
    };
    let Ok(fd) = root.open_beneath(rel, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK, 0)
    else {
        return;
    };
    let same = rustix::fs::fstat(&fd).is_ok_and(|st| {
        st.st_dev == fix.dev
            && st.st_ino == fix.ino
            && rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
    });
    if same {
        let _ = rustix::fs::fchown(
            &fd,
            Some(rustix::fs::Uid::from_raw(fix.uid)),
            Some(rustix::fs::Gid::from_raw(fix.gid)),
        );
    }
}

/// Answers the worker's requests as its output arrives.
struct Server<'a> {
    state_dir: &'a Path,
    lock: Option<&'a journal::Lock>,
    buf: Vec<u8>,
    replies: Vec<u8>,
    result: Option<ToolResult>,
    stderr: Vec<u8>,
    broken: Option<String>,
    /// Paths of the changes begun in this call.
    changed: Vec<PathBuf>,
    /// The journal and old contents may be read (undo, restore).
    history: bool,
    /// The call's workspace: recorded with each change it begins (`history` and `undo` are
    /// per workspace).
    ws: PathBuf,
    /// The client the call's changes are recorded for (`Change::uid`).
    uid: Option<u32>,
    /// Owners to give back, from the worker's answer.
    owner_fixes: Vec<OwnerFix>,
    /// The backup store's bounds (`[undo] max_state_bytes`, `max_workspace_bytes`); None:
    /// only the free-space margin.
    limits: Option<journal::quota::Limits>,
    /// This call's backups, within those bounds (made at its first backup).
    budget: Option<journal::quota::Budget>,
}

impl<'a> Server<'a> {
    /// `history`: the call may read the journal and backed-up contents (undo, restore).
    fn new(state_dir: &'a Path, lock: Option<&'a journal::Lock>, history: bool) -> Server<'a> {
        Server {
            state_dir,
            lock,
            history,
            ws: PathBuf::new(),
            uid: None,
            buf: Vec::new(),
            replies: Vec::new(),
            result: None,
            stderr: Vec::new(),
            broken: None,
            changed: Vec::new(),
            owner_fixes: Vec::new(),
            limits: None,
            budget: None,
        }
    }

    /// This call's budget: the call's workspace's share and the whole store's quota; what
    /// it stores or finds stored is charged to the workspace, and not expired by the call.
    fn budget(&mut self) -> &mut journal::quota::Budget {
        let (st, ws, limits) = (self.state_dir, &self.ws, self.limits);
        self.budget.get_or_insert_with(|| match limits {
            Some(l) => journal::quota::Budget::for_workspace(st, ws, l),
            None => journal::quota::Budget::new(st, None).workspace(ws, None),
        })
    }

    fn answer(&mut self, up: Up, payload: &[u8]) -> Result<(Down, Vec<u8>), String> {
        let st = self.state_dir;
        let je = |e: journal::JournalError| e.to_string();
        let changing = |what: &str| {
            format!("{what}: a read-only tool may not change the journal or the backups")
        };
        let history =
            |what: &str| format!("{what}: only undo and restore read the journal and old contents");
        Ok(match up {
            Up::Have { sha256 } => {
                self.lock.ok_or_else(|| changing("backup"))?;
                let present = journal::has_backup(st, &sha256);
                if present {
                    // The change will refer to it: charged to this workspace from now on.
                    self.budget().claim(&sha256).map_err(je)?;
                }
                (Down::Have { present }, vec![])
            }
            Up::Backup => {
                self.lock.ok_or_else(|| changing("backup"))?;
                // Within the store's quota and the workspace's share, like a snapshot's; a
                // content that does not fit is refused (the tool cannot promise its undo),
                // before anything is changed.
                match self.budget().store(payload, true).map_err(je)? {
                    journal::quota::Stored::Kept(sha256) => (Down::Sha { sha256 }, vec![]),
                    journal::quota::Stored::NotBackedUp { reason, .. } => (
                        Down::Refused {
                            refusal: Refusal::NotBackedUp { reason },
                        },
                        vec![],
                    ),
                }
            }
            Up::Begin { change } => {
                let lock = self.lock.ok_or_else(|| changing("begin"))?;
                self.changed.push(change.path.clone());
                let mut change = *change;
                change.workspace = Some(self.ws.clone());
                change.uid = self.uid;
                (
                    Down::Change {
                        change: Box::new(journal::begin(st, lock, change).map_err(je)?),
                    },
                    vec![],
                )
            }
            Up::BeginMany { mut changes } => {
                let lock = self.lock.ok_or_else(|| changing("begin"))?;
                for c in &mut changes {
                    self.changed.push(c.path.clone());
                    c.workspace = Some(self.ws.clone());
                    c.uid = self.uid;
                }
                (
                    Down::Begun {
                        changes: journal::begin_many(st, lock, changes).map_err(je)?,
                    },
                    vec![],
                )
            }
            Up::CommitMany { ids } => {
                self.lock.ok_or_else(|| changing("commit"))?;
                journal::commit_many(st, &ids).map_err(je)?;
                (Down::Ok, vec![])
            }
            Up::Commit { id } => {
                self.lock.ok_or_else(|| changing("commit"))?;
                journal::commit(st, id).map_err(je)?;
                (Down::Ok, vec![])
            }
            Up::Abort { id } => {
                self.lock.ok_or_else(|| changing("abort"))?;
                let _ = journal::abort(st, id);
                (Down::Ok, vec![])
            }
            Up::TrashReserve { original } => {
                self.lock.ok_or_else(|| changing("trash"))?;
                (
                    Down::Name {
                        name: journal::trash_reserve(st, &original).map_err(je)?,
                    },
                    vec![],
                )
            }
            Up::TrashForget { name } => {
                self.lock.ok_or_else(|| changing("trash"))?;
                journal::trash_forget(st, &name);
                (Down::Ok, vec![])
            }
            Up::ReadBackup { sha256 } => {
                if !self.history {
                    return Err(history("read_backup"));
                }
                (Down::Data, journal::read_backup(st, &sha256).map_err(je)?)
            }
            Up::Group { .. } if !self.history => return Err(history("group")),
            Up::Group { group } => (
                Down::Members {
                    changes: journal::group_members(st, &group).map_err(je)?,
                },
                vec![],
            ),
            Up::Done { .. } => unreachable!("handled by the caller"),
        })
    }
}

impl sandbox::StreamIo for Server<'_> {
    fn output(&mut self, stream: Stream, data: &[u8]) -> bool {
        if stream == Stream::Stderr {
            let room = STDERR_KEPT.saturating_sub(self.stderr.len());
            self.stderr.extend_from_slice(&data[..data.len().min(room)]);
            return true;
        }
        if self.result.is_some() {
            self.broken = Some("output after its answer".into());
            return false;
        }
        self.buf.extend_from_slice(data);
        loop {
            match parse::<Up>(&self.buf) {
                Ok(None) => {
                    // Room for the whole frame at once (file contents come in megabytes).
                    if let Some(n) = frame_len(&self.buf).filter(|&n| n <= MAX_FRAME) {
                        self.buf
                            .reserve((n as usize).saturating_sub(self.buf.len()));
                    }
                    return true;
                }
                Err(e) => {
                    self.broken = Some(e);
                    return false;
                }
                Ok(Some((
                    Up::Done {
                        result,
                        owner_fixes,
                    },
                    _,
                    used,
                ))) => {
                    self.buf.drain(..used);
                    self.result = Some(result);
                    self.owner_fixes = owner_fixes;
                    if !self.buf.is_empty() {
                        self.broken = Some("output after its answer".into());
                        return false;
                    }
                    return true;
                }
                Ok(Some((up, range, used))) => {
                    let buf = std::mem::take(&mut self.buf);
                    let reply = match self.answer(up, &buf[range]) {
                        Ok((down, data)) => frame(&down, &data),
                        Err(message) => frame(&Down::Err { message }, &[]),
                    };
                    self.buf = buf;
                    self.buf.drain(..used);
                    self.replies.extend_from_slice(&reply);
                }
            }
        }
    }

    fn reply(&mut self, out: &mut Vec<u8>) -> bool {
        out.append(&mut self.replies);
        true
    }
}

// ---------- the worker's side ----------

/// The worker's end of the channel: stdin from the broker, stdout to it.
struct Channel {
    input: std::io::StdinLock<'static>,
    output: std::io::StdoutLock<'static>,
    buf: Vec<u8>,
    /// Read buffer, reused for every answer.
    chunk: Vec<u8>,
}

impl Channel {
    fn send(&mut self, up: &Up, payload: &[u8]) -> Result<(), String> {
        self.output
            .write_all(&frame_head(up, payload.len()))
            .and_then(|()| self.output.write_all(payload))
            .and_then(|()| self.output.flush())
            .map_err(|e| format!("writing to the broker: {e}"))
    }

    fn receive(&mut self) -> Result<(Down, Vec<u8>), String> {
        loop {
            if let Some((down, range, used)) = parse::<Down>(&self.buf)? {
                let payload = if used == self.buf.len() {
                    // Only this frame: keep its buffer, without the lengths and header.
                    let mut b = std::mem::take(&mut self.buf);
                    b.drain(..range.start);
                    b
                } else {
                    let p = self.buf[range].to_vec();
                    self.buf.drain(..used);
                    p
                };
                return Ok((down, payload));
            }
            if let Some(n) = frame_len(&self.buf).filter(|&n| n <= MAX_FRAME) {
                self.buf
                    .reserve((n as usize).saturating_sub(self.buf.len()));
            }
            let n = self
                .input
                .read(&mut self.chunk)
                .map_err(|e| format!("reading from the broker: {e}"))?;
            if n == 0 {
                return Err("the broker closed the channel".into());
            }
            self.buf.extend_from_slice(&self.chunk[..n]);
        }
    }
}

/// [`StateOps`] over the channel.
struct Remote(Channel);

impl Remote {
    fn call(&mut self, up: Up, payload: &[u8]) -> Result<(Down, Vec<u8>), BrokerError> {
        let io = |m: String| BrokerError::Io {
            what: "the broker".into(),
            source: std::io::Error::other(m),
        };
        self.0.send(&up, payload).map_err(io)?;
        match self.0.receive().map_err(io)? {
            (Down::Err { message }, _) => Err(BrokerError::Io {
                what: "journal".into(),
                source: std::io::Error::other(message),
            }),
            (Down::Refused { refusal }, _) => Err(BrokerError::Refused(refusal)),
            r => Ok(r),
        }
    }
}

fn unexpected(d: &Down) -> BrokerError {
    BrokerError::Io {
        what: "the broker".into(),
        source: std::io::Error::other(format!("an unexpected answer: {d:?}")),
    }
}

impl StateOps for Remote {
    fn backup(&mut self, data: &[u8]) -> Result<String, BrokerError> {
        // A content the store has already (the previous change's result, typically) is not
        // sent again: the store is content-addressed and checks each blob on reading.
        let sha256 = journal::sha256_hex(data);
        if let (Down::Have { present: true }, _) = self.call(
            Up::Have {
                sha256: sha256.clone(),
            },
            &[],
        )? {
            return Ok(sha256);
        }
        match self.call(Up::Backup, data)? {
            (Down::Sha { sha256 }, _) => Ok(sha256),
            (d, _) => Err(unexpected(&d)),
        }
    }
    fn begin(&mut self, change: Change) -> Result<Change, BrokerError> {
        match self.call(
            Up::Begin {
                change: Box::new(change),
            },
            &[],
        )? {
            (Down::Change { change }, _) => Ok(*change),
            (d, _) => Err(unexpected(&d)),
        }
    }
    fn commit(&mut self, id: u64) -> Result<(), BrokerError> {
        match self.call(Up::Commit { id }, &[])? {
            (Down::Ok, _) => Ok(()),
            (d, _) => Err(unexpected(&d)),
        }
    }
    fn begin_many(&mut self, changes: Vec<Change>) -> Result<Vec<Change>, BrokerError> {
        match self.call(Up::BeginMany { changes }, &[])? {
            (Down::Begun { changes }, _) => Ok(changes),
            (d, _) => Err(unexpected(&d)),
        }
    }
    fn commit_many(&mut self, ids: &[u64]) -> Result<(), BrokerError> {
        match self.call(Up::CommitMany { ids: ids.to_vec() }, &[])? {
            (Down::Ok, _) => Ok(()),
            (d, _) => Err(unexpected(&d)),
        }
    }
    fn abort(&mut self, id: u64) {
        let _ = self.call(Up::Abort { id }, &[]);
    }
    fn trash_reserve(&mut self, original: &Path) -> Result<String, BrokerError> {
        match self.call(
            Up::TrashReserve {
                original: original.to_path_buf(),
            },
            &[],
        )? {
            (Down::Name { name }, _) => Ok(name),
            (d, _) => Err(unexpected(&d)),
        }
    }
    fn trash_forget(&mut self, name: &str) {
        let _ = self.call(
            Up::TrashForget {
                name: name.to_string(),
            },
            &[],
        );
    }
    fn read_backup(&mut self, sha256: &str) -> Result<Vec<u8>, BrokerError> {
        match self.call(
            Up::ReadBackup {
                sha256: sha256.to_string(),
            },
            &[],
        )? {
            (Down::Data, data) => Ok(data),
            (d, _) => Err(unexpected(&d)),
        }
    }
    fn has_backup(&mut self, sha256: &str) -> Result<bool, BrokerError> {
        match self.call(
            Up::Have {
                sha256: sha256.to_string(),
            },
            &[],
        )? {
            (Down::Have { present }, _) => Ok(present),
            (d, _) => Err(unexpected(&d)),
        }
    }
    fn group(&mut self, group: &str) -> Result<Vec<Change>, BrokerError> {
        match self.call(
            Up::Group {
                group: group.to_string(),
            },
            &[],
        )? {
            (Down::Members { changes }, _) => Ok(changes),
            (d, _) => Err(unexpected(&d)),
        }
    }
}

/// `gateway __fs-worker`: runs one file tool for the broker (see the module docs). Exit 0
/// when an answer was sent (the tool's error included), 1 when the channel failed.
#[allow(
    clippy::print_stderr,
    reason = "the worker process's own entry: its stderr carries its diagnostics to the broker"
)]
pub fn worker_main() -> std::process::ExitCode {
    let mut ch = Channel {
        input: std::io::stdin().lock(),
        output: std::io::stdout().lock(),
        buf: Vec::new(),
        chunk: vec![0u8; 64 * 1024],
    };
    let req = match ch.receive() {
        Ok((Down::Request { request }, _)) => request,
        Ok((d, _)) => {
            eprintln!("gateway __fs-worker: expected a request, got {d:?}");
            return std::process::ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("gateway __fs-worker: {e} (this command is started by gateway itself)");
            return std::process::ExitCode::FAILURE;
        }
    };
    let req = *req;
    let rs = req.roots.open();
    let mut remote = Remote(ch);
    let res = {
        let mut t = Tools {
            state: &mut remote,
            redact: req.redact,
            trash_files: req.trash_files.clone(),
            max_size: req.max_size,
            owner_fixes: Vec::new(),
        };
        let r = ops::act(&mut t, &rs, &req.ws, req.op, req.undo_target);
        (r, std::mem::take(&mut t.owner_fixes))
    };
    let (res, owner_fixes) = res;
    let result = match res {
        Ok(output) => ToolResult::Ok {
            output: Box::new(output),
        },
        Err(BrokerError::Refused(refusal)) => ToolResult::Refused { refusal },
        Err(BrokerError::Usage(error)) => ToolResult::Usage {
            error,
            not_undone: None,
        },
        Err(BrokerError::NotUndone { id, source }) => match *source {
            BrokerError::Usage(error) => ToolResult::Usage {
                error,
                not_undone: Some(id),
            },
            source => {
                let e = BrokerError::NotUndone {
                    id,
                    source: Box::new(source),
                };
                ToolResult::Err {
                    code: crate::broker::report::ErrorCode::of(&e),
                    message: e.to_string(),
                }
            }
        },
        Err(e) => ToolResult::Err {
            code: crate::broker::report::ErrorCode::of(&e),
            message: e.to_string(),
        },
    };
    match remote.0.send(
        &Up::Done {
            result,
            owner_fixes,
        },
        &[],
    ) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gateway __fs-worker: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Fuzz entry for the broker's side of the channel: arbitrary worker output, in chunks of
/// the sizes the data's first byte picks, fed to the frame decoder and the request handler
/// of a read-only call (no journal lock: requests to change anything are refused). Never
/// panics; a bad frame stops the call as a protocol error.
#[doc(hidden)]
pub fn fuzz_frames(data: &[u8]) {
    use std::sync::OnceLock;
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("gateway-fuzz-frames-{}", std::process::id()));
        // not-ws: the fuzz target's own scratch directory
        let _ = std::fs::create_dir_all(&d);
        d
    });
    let Some((&step, rest)) = data.split_first() else {
        return;
    };
    let mut s = Server::new(dir, None, false);
    let step = usize::from(step).max(1);
    for chunk in rest.chunks(step) {
        if !sandbox::StreamIo::output(&mut s, Stream::Stdout, chunk) {
            assert!(s.broken.is_some(), "stopped without saying why");
            return;
        }
        let mut out = Vec::new();
        sandbox::StreamIo::reply(&mut s, &mut out);
        // Every answer is a whole frame the worker can decode.
        let mut at = 0;
        while at < out.len() {
            match parse::<Down>(&out[at..]) {
                Ok(Some((_, _, used))) => at += used,
                other => panic!("the broker sent a bad frame: {other:?}"),
            }
        }
    }
    assert!(
        s.changed.is_empty(),
        "a read-only call began a change in the journal"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzz_frames_seeds() {
        for f in std::fs::read_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fuzz/corpus/fs_worker_frames"
        ))
        .expect("corpus")
        .flatten()
        {
            let data = std::fs::read(f.path()).expect("seed");
            for cut in [data.len(), data.len() / 2, 13] {
                fuzz_frames(&data[..cut.min(data.len())]);
            }
        }
    }

    #[test]
    fn frames_round_trip_and_incomplete_ones_wait() {
        let f = frame(&Up::Commit { id: 7 }, b"payload");
        for cut in 0..f.len() {
            assert!(
                parse::<Up>(&f[..cut]).expect("prefix").is_none(),
                "cut {cut}"
            );
        }
        let (up, range, used) = parse::<Up>(&f).expect("ok").expect("complete");
        assert!(matches!(up, Up::Commit { id: 7 }));
        assert_eq!(&f[range], b"payload");
        assert_eq!(used, f.len());
    }

    #[test]
    fn oversized_and_malformed_frames_are_errors() {
        let mut f = Vec::new();
        f.extend_from_slice(&4u32.to_le_bytes());
        f.extend_from_slice(&MAX_FRAME.to_le_bytes());
        assert!(parse::<Up>(&f).is_err());
        // Lengths that would overflow are refused, not wrapped.
        let mut f = Vec::new();
        f.extend_from_slice(&u32::MAX.to_le_bytes());
        f.extend_from_slice(&u64::MAX.to_le_bytes());
        f.extend_from_slice(&[0u8; 64]);
        assert!(parse::<Up>(&f).is_err());
        assert!(frame_len(&f).is_some_and(|n| n > MAX_FRAME));
        let g = {
            let mut g = Vec::new();
            g.extend_from_slice(&3u32.to_le_bytes());
            g.extend_from_slice(&0u64.to_le_bytes());
            g.extend_from_slice(b"{{{");
            g
        };
        assert!(parse::<Up>(&g).is_err());
    }

    #[test]
    fn a_read_only_call_may_not_touch_the_journal() {
        let d = std::env::temp_dir().join(format!("gateway-worker-ro-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        let mut s = Server::new(&d, None, false);
        for up in [
            Up::Backup,
            Up::Commit { id: 1 },
            Up::TrashReserve {
                original: "/x".into(),
            },
            Up::Group { group: "g".into() },
            Up::ReadBackup {
                sha256: "0".repeat(64),
            },
        ] {
            assert!(s.answer(up, b"x").is_err());
        }
        assert!(
            !d.join("backups").exists()
                || std::fs::read_dir(d.join("backups"))
                    .expect("ls")
                    .next()
                    .is_none()
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
