//! `gateway serve`: the broker as a long-running process on a Unix socket.
//!
//! Over 1,000 lines: the socket, the connection and its streams, and the client side of a
//! call; a call's life (its end, its record) is already apart in `serve::life`, and the client
//! side is the next seam.
//!
//! Each connection is one call: the client sends a [`proto::Request`] (its context — cwd,
//! environment, session — and what to do) with its stdin, stdout and stderr attached
//! (`SCM_RIGHTS`) or relayed as frames; the daemon identifies it by `SO_PEERCRED` (never by
//! anything in the request), builds the call's [`client::Client`] from that identity and the
//! request's context, runs the call on a thread of its own — the very code the CLI runs when
//! it is its own broker, with this client as the caller (see [`crate::broker::client`]) —
//! and answers [`ServerMsg::Done`] with the call's report. Records carry the peer's uid and pid
//! and `client: daemon`. The daemon keeps one audit writer open and signs checkpoints in
//! batches (every 1,000 records or second) instead of after every record.
//!
//! Robustness: a call must arrive whole within [`ServeConfig::first_message`] (slow and
//! silent clients are dropped), messages are bounded by [`proto::MAX_MESSAGE`], anything
//! malformed is answered with [`ServerMsg::Error`] and the connection closed.
//!
//! One life per call: a call ends when its command ends, its deadline passes, its client goes
//! away (the socket hangs up) or the daemon stops — whichever comes first — and then its
//! command is killed and its record written once: by the tool that ran (an exec's record says
//! `cancelled`), or, for a call that records nothing of its own (`log tail -f`), by the daemon
//! (tool `daemon.call`, `cancelled`, why). A panic in a call ends that call (exit 125, its run
//! killed, recorded with the error), never the daemon. Writing to a slow or stuck client never
//! holds a call past its deadline or its client's hang-up (`broker::client::Outlet`); relayed
//! frames the client does not read are given up when the call ends. SIGTERM/SIGINT: no new
//! connections, the socket is removed, every call in flight is ended as if its client had
//! gone (its command killed, recorded), [`ServeConfig::grace`] is the longest the daemon waits
//! for their records, a final checkpoint is signed, and the daemon exits.

use super::life::{
    CallEnd, Ended, FRAMES_AFTER_END, FrameRelay, InFlight, Ran, Unrecorded, run_caught,
};
use super::proto::{self, ClientMsg, ServerMsg};
use crate::audit::{self, Caller, Record, RecordDecision};
use crate::broker::log::BATCH;
use crate::broker::report::Report;
use crate::broker::request::Invocation;
use crate::broker::{BrokerError, Conflict, approvals, client};
use std::collections::HashSet;
use std::io::{IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs one call (a request's body: never [`proto::RequestBody::Hello`], which the daemon
/// answers itself) for the client this thread serves; returns the exit code.
pub type Handler = Arc<
    dyn Fn(crate::broker::request::Invocation, client::Context) -> crate::broker::report::Report
        + Send
        + Sync,
>;

/// How the daemon runs.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The socket's path.
    pub socket: PathBuf,
    /// The state directory it owns.
    pub state_dir: PathBuf,
    /// Connections served at once; more are answered "busy".
    pub max_clients: usize,
    /// How long a client has to send its call.
    pub first_message: Duration,
    /// After SIGTERM, how long the calls in flight (ended at once) may take to be recorded.
    pub grace: Duration,
    /// The daemon's state: roles, approvals, pins (every call carries it).
    pub server: Arc<crate::broker::server::Server>,
}

/// The daemon to go through: `GATEWAY_SOCKET` (empty: none), else `configured` (the config
/// file's `socket`), else the default socket if it exists. A socket named but not answering is
/// an error (the call must not silently go to another audit log).
pub fn socket_to_use(
    configured: impl FnOnce() -> Option<PathBuf>,
) -> Result<Option<PathBuf>, String> {
    let named = match std::env::var_os("GATEWAY_SOCKET") {
        Some(v) if v.is_empty() => return Ok(None),
        Some(v) => Some(PathBuf::from(v)),
        None => configured(),
    };
    if let Some(p) = named {
        return Ok(Some(p));
    }
    let d = default_socket();
    // not-ws: the daemon's socket
    Ok(std::fs::symlink_metadata(&d).is_ok().then_some(d))
}

/// The default socket: `$XDG_RUNTIME_DIR/gateway.sock`, else `/run/user/UID/gateway.sock`.
pub fn default_socket() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|x| !x.is_empty()) {
        Some(d) => PathBuf::from(d).join("gateway.sock"),
        None => PathBuf::from(format!(
            "/run/user/{}/gateway.sock",
            crate::sandbox::effective_uid()
        )),
    }
}

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> BrokerError {
    move |source| BrokerError::Io { what, source }
}

fn lifecycle_record(
    (state_dir, server): (&Path, &crate::broker::server::Server),
    tool: &str,
    reason: String,
) -> Result<(), BrokerError> {
    let mut rec = Record {
        session: "daemon".into(),
        caller: Caller {
            uid: crate::sandbox::effective_uid(),
            pid: std::process::id(),
            client: "daemon".into(),
        },
        tool: tool.into(),
        decision: RecordDecision {
            effect: "allow".into(),
            rules: vec!["builtin".into()],
            reasons: vec![reason],
        },
        exit_code: Some(0),
        ..Record::default()
    };
    crate::broker::append_record(state_dir, Some(server), &mut rec).map(|_| ())
}

/// Binds the socket: refuses if a daemon answers there; replaces a stale socket file; never
/// removes anything that is not a socket. Mode 0660.
fn bind(path: &Path) -> Result<std::os::unix::net::UnixListener, BrokerError> {
    // not-ws: the daemon's own socket, from its configuration
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(Conflict::NotASocket {
                path: path.to_path_buf(),
            }
            .into());
        }
        if UnixStream::connect(path).is_ok() {
            return Err(Conflict::DaemonRunning {
                path: path.to_path_buf(),
            }
            .into());
        }
        // not-ws: the daemon's own socket, from its configuration
        std::fs::remove_file(path).map_err(io_err(format!(
            "removing the stale socket {}",
            path.display()
        )))?;
    }
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
        // not-ws: the daemon's own socket, from its configuration
        && !dir.exists()
    {
        use std::os::unix::fs::DirBuilderExt;
        // not-ws: the daemon's own socket, from its configuration
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err(format!("creating {}", dir.display())))?;
    }
    let l = std::os::unix::net::UnixListener::bind(path)
        .map_err(io_err(format!("binding {}", path.display())))?;
    // not-ws: the daemon's own socket, from its configuration
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(io_err(format!("setting the mode of {}", path.display())))?;
    Ok(l)
}

/// Serves until SIGTERM or SIGINT.
pub fn serve(cfg: ServeConfig, handler: Handler) -> Result<(), BrokerError> {
    // A client's message of megabytes must not leave the daemon megabytes larger.
    crate::sandbox::map_large_allocations();
    crate::broker::ensure_state_dir(&cfg.state_dir)?;
    let log = audit::AuditLog::open(&cfg.state_dir, BATCH)?;
    cfg.server.share_log(&cfg.state_dir, log);
    let listener = bind(&cfg.socket)?;
    listener
        .set_nonblocking(true)
        .map_err(io_err("configuring the socket".into()))?;
    lifecycle_record(
        (&cfg.state_dir, &cfg.server),
        "daemon.start",
        format!("serving on {}", cfg.socket.display()),
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(io_err("starting the runtime".into()))?;
    let active = Arc::new(AtomicUsize::new(0));
    let calls = InFlight::default();
    let served = rt.block_on(accept_loop(
        listener,
        &cfg,
        handler,
        active.clone(),
        calls.clone(),
    ))?;
    // not-ws: the daemon's own socket, from its configuration
    let _ = std::fs::remove_file(&cfg.socket);
    // The server stops: so does every call in flight (its command killed), each recorded by
    // its own thread; the grace bounds the wait for those records.
    let ended = calls.end_all(Ended::ServerStopping);
    let until = Instant::now() + cfg.grace;
    while active.load(Ordering::SeqCst) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = active.load(Ordering::SeqCst);
    lifecycle_record(
        (&cfg.state_dir, &cfg.server),
        "daemon.stop",
        format!(
            "stopped by a signal after {served} connection(s); {ended} call(s) in flight were ended{}",
            if left > 0 {
                format!(", {left} of them not yet recorded when the daemon exited")
            } else {
                String::new()
            }
        ),
    )?;
    cfg.server.with_log(|l| l.checkpoint()).transpose()?;
    Ok(())
}

async fn accept_loop(
    listener: std::os::unix::net::UnixListener,
    cfg: &ServeConfig,
    handler: Handler,
    active: Arc<AtomicUsize>,
    calls: InFlight,
) -> Result<u64, BrokerError> {
    use tokio::signal::unix::{SignalKind, signal};
    let listener = tokio::net::UnixListener::from_std(listener)
        .map_err(io_err("registering the socket".into()))?;
    let mut term = signal(SignalKind::terminate()).map_err(io_err("handling SIGTERM".into()))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io_err("handling SIGINT".into()))?;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut served = 0u64;
    let users = Users::default();
    loop {
        tokio::select! {
            _ = term.recv() => return Ok(served),
            _ = int.recv() => return Ok(served),
            _ = tick.tick() => {
                // The last records of a burst get their checkpoint within a second.
                if let Some(Err(e)) = cfg.server.with_log(|l| l.checkpoint_if_due()) {
                    eprintln!("gateway serve: signing an audit checkpoint failed: {e}");
                }
            }
            r = listener.accept() => {
                let Ok((stream, _)) = r else { continue };
                let Ok(stream) = stream.into_std() else { continue };
                served += 1;
                if stream.set_nonblocking(false).is_err() {
                    continue;
                }
                let uid = rustix::net::sockopt::socket_peercred(&stream)
                    .map_or(u32::MAX, |c| c.uid.as_raw());
                let busy = busy(cfg.max_clients, active.load(Ordering::SeqCst), &users, uid);
                if let Some(message) = busy {
                    let _ = (&stream).write_all(&proto::encode(&ServerMsg::Error { message }));
                    continue;
                }
                active.fetch_add(1, Ordering::SeqCst);
                let place = users.take(uid);
                let (h, a, c) = (handler.clone(), active.clone(), cfg.clone());
                let (calls, id) = (calls.clone(), served);
                let spawned = std::thread::Builder::new()
                    .name("gateway-call".into())
                    .spawn(move || {
                        struct Done(Arc<AtomicUsize>);
                        impl Drop for Done {
                            fn drop(&mut self) {
                                self.0.fetch_sub(1, Ordering::SeqCst);
                            }
                        }
                        let _done = Done(a);
                        let _place = place;
                        connection(stream, &c, &h, (&calls, id));
                    });
                if spawned.is_err() {
                    active.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }
}

/// Places kept for the admin beyond `--max-clients` (root or the daemon's user can always
/// list and answer what is pending, or stop what runs).
const ADMIN_RESERVE: usize = 4;

/// Why a connection of `uid` is not served now (None: it is): one user may hold at most half
/// of the `max` places, and the admin (root, the daemon's own user) has a few kept for it, so
/// that no client can lock the others — or the admin — out.
fn busy(max: usize, active: usize, users: &Users, uid: u32) -> Option<String> {
    let admin = uid == 0 || uid == crate::sandbox::effective_uid();
    let all = || format!("busy: {max} calls in progress (the daemon's limit); try again");
    if admin {
        return (active >= max + ADMIN_RESERVE).then(all);
    }
    if active >= max {
        return Some(all());
    }
    let per_uid = (max / 2).max(1);
    let held = users.held(uid);
    (held >= per_uid).then(|| {
        format!(
            "busy: uid {uid} has {held} calls in progress (at most {per_uid} per user: half of the daemon's --max-clients); try again when one ends"
        )
    })
}

/// The calls each uid has in progress.
#[derive(Clone, Default)]
struct Users(Arc<Mutex<std::collections::HashMap<u32, usize>>>);

/// One call's place, given back when dropped.
struct Place(Users, u32);

impl Drop for Place {
    fn drop(&mut self) {
        let mut m = (self.0).0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.1) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.1);
            }
        }
    }
}

impl Users {
    fn held(&self, uid: u32) -> usize {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.get(&uid).copied().unwrap_or(0)
    }

    fn take(&self, uid: u32) -> Place {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(uid).or_insert(0) += 1;
        Place(self.clone(), uid)
    }
}

fn send(stream: &UnixStream, msg: &ServerMsg) -> bool {
    let mut s = stream;
    s.write_all(&proto::encode(msg)).is_ok()
}

/// The connection's writer once the call runs: approval questions, output frames and the
/// end are written by several threads, each frame whole. It counts the messages it has
/// sent: the progress a client that still reads is making.
#[derive(Clone)]
struct Sender(Arc<Mutex<UnixStream>>, Arc<AtomicUsize>);

impl Sender {
    fn new(stream: UnixStream) -> Sender {
        Sender(Arc::new(Mutex::new(stream)), Arc::default())
    }

    fn send(&self, msg: &ServerMsg) -> bool {
        let sent = send(&self.0.lock().unwrap_or_else(|p| p.into_inner()), msg);
        if sent {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
        sent
    }

    /// How many messages went out so far.
    fn sent(&self) -> usize {
        self.1.load(Ordering::SeqCst)
    }
}

/// Why a connection's request is refused before it runs.
#[derive(Debug, thiserror::Error)]
enum Refused {
    /// The protocol's refusal (version, malformed, stdio).
    #[error(transparent)]
    Request(#[from] proto::RequestError),
    /// Anything else (timeouts, the connection, the client's directory), said in full.
    #[error("{0}")]
    Other(String),
}

/// Reads the first message (the request) and the fds sent with it, within `deadline`.
fn read_request(
    stream: &UnixStream,
    deadline: Instant,
) -> Result<(proto::Request, Vec<OwnedFd>), Refused> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    let other = |m: &str| Refused::Other(m.into());
    let mut buf: Vec<u8> = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(other(
                "timed out waiting for the call (send it whole, at once)",
            ));
        }
        let _ = stream.set_read_timeout(Some(left));
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
        let mut anc = RecvAncillaryBuffer::new(&mut space);
        let r = recvmsg(
            stream.as_fd(),
            &mut [IoSliceMut::new(&mut chunk)],
            &mut anc,
            RecvFlags::CMSG_CLOEXEC,
        );
        for m in anc.drain() {
            if let RecvAncillaryMessage::ScmRights(it) = m {
                fds.extend(it);
            }
        }
        if fds.len() > 3 {
            return Err(other("more than 3 fds sent with the call"));
        }
        let n = match r {
            Ok(m) => m.bytes,
            Err(e) if e == rustix::io::Errno::INTR => continue,
            Err(e) if e == rustix::io::Errno::AGAIN => {
                return Err(other(
                    "timed out waiting for the call (send it whole, at once)",
                ));
            }
            Err(e) => return Err(Refused::Other(format!("reading the call: {e}"))),
        };
        if n == 0 {
            return Err(match proto::decode_final::<ClientMsg>(&buf) {
                Err(e) => proto::RequestError::from(e).into(),
                Ok(_) => other("connection closed"),
            });
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some((req, used)) = proto::decode_request(&buf)? {
            if used != buf.len() {
                return Err(other("data after the call (one call per connection)"));
            }
            return Ok((req, fds));
        }
    }
}

/// The caller's identity, from the socket alone.
fn peer_of(stream: &UnixStream) -> Result<client::Peer, String> {
    let peer = rustix::net::sockopt::socket_peercred(stream)
        .map_err(|e| format!("cannot identify the caller (SO_PEERCRED): {e}"))?;
    let groups = crate::sandbox::peer_groups(stream.as_fd())
        .map_err(|e| format!("cannot read the caller's groups (SO_PEERGROUPS): {e}"))?;
    Ok(client::Peer {
        uid: peer.uid.as_raw(),
        gid: peer.gid.as_raw(),
        pid: peer.pid.as_raw_nonzero().get() as u32,
        groups,
    })
}

/// A call's streams and what relays them: the fds the client passed, or (frames) pipes
/// whose output a thread sends back as [`ServerMsg::Output`]; a typed call's `stdin` text
/// replaces the client's stdin with a pipe a thread fills.
struct CallStdio {
    stdio: client::Stdio,
    /// Frames: the relay.
    relay: Option<FrameRelay>,
}

fn call_stdio(
    mode: proto::StdioMode,
    fds: Vec<OwnedFd>,
    stdin_text: Option<String>,
    out: &Sender,
) -> Result<CallStdio, Refused> {
    let pipe = || {
        std::io::pipe().map_err(|e| Refused::Other(format!("cannot make a pipe for the call: {e}")))
    };
    let n = fds.len();
    let (stdin, stdout, stderr, relay) = match (mode, <[OwnedFd; 3]>::try_from(fds)) {
        (proto::StdioMode::Passed, Ok([i, o, e])) => (i, o.into(), e.into(), None),
        (proto::StdioMode::Frames, Err(v)) if v.is_empty() => {
            let (in_r, in_w) = pipe()?;
            drop(in_w);
            let (out_r, out_w) = pipe()?;
            let (err_r, err_w) = pipe()?;
            let (stop_r, stop_w) = pipe()?;
            let tx = out.clone();
            let (done_tx, done) = std::sync::mpsc::channel();
            let t = std::thread::Builder::new()
                .name("gateway-output".into())
                .spawn(move || {
                    relay_output(out_r, err_r, stop_r, &tx);
                    let _ = done_tx.send(());
                })
                .map_err(|e| Refused::Other(format!("cannot start the output relay: {e}")))?;
            (
                in_r.into(),
                OwnedFd::from(out_w).into(),
                OwnedFd::from(err_w).into(),
                Some(FrameRelay {
                    thread: t,
                    stop: stop_w,
                    done,
                }),
            )
        }
        _ => return Err(proto::RequestError::Stdio(n).into()),
    };
    let stdin_known = match (mode, &stdin_text) {
        (_, Some(text)) => Some(format!(
            "text:{}",
            crate::durable::hex(
                &ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref()[..16]
            )
        )),
        (proto::StdioMode::Frames, None) => Some("empty".into()),
        (proto::StdioMode::Passed, None) => None,
    };
    let stdin = match stdin_text {
        None => stdin,
        Some(text) => {
            let (r, mut w) = pipe()?;
            // A command that does not read its stdin closes the pipe when it ends: the write
            // fails then (SIGPIPE is ignored) and the thread ends.
            std::thread::Builder::new()
                .name("gateway-stdin".into())
                .spawn(move || {
                    let _ = w.write_all(text.as_bytes());
                })
                .map_err(|e| Refused::Other(format!("cannot start the stdin writer: {e}")))?;
            r.into()
        }
    };
    Ok(CallStdio {
        stdio: client::Stdio {
            stdin,
            stdout,
            stderr,
            stdin_known,
        },
        relay,
    })
}

/// Sends what the call writes to `out` and `err` as output frames until both are closed or
/// `stop` says the call is over; then what is left in them (a copy of a write end held by a
/// fork of this process must not hold the call's end).
fn relay_output(
    out: std::io::PipeReader,
    err: std::io::PipeReader,
    stop: std::io::PipeReader,
    tx: &Sender,
) {
    use rustix::event::{PollFd, PollFlags, poll};
    let streams = [
        (out, proto::OutStream::Stdout),
        (err, proto::OutStream::Stderr),
    ];
    let mut open = [true, true];
    let mut chunk = vec![0u8; 64 * 1024];
    // One read of stream `i`: false when the client is gone (nothing more to relay).
    let mut read_one = |i: usize, open: &mut [bool; 2]| -> bool {
        match std::io::Read::read(&mut &streams[i].0, &mut chunk) {
            Ok(n) if n > 0 => tx.send(&ServerMsg::Output {
                stream: streams[i].1,
                data: chunk[..n].to_vec(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => true,
            _ => {
                open[i] = false;
                true
            }
        }
    };
    let mut stopped = false;
    while open.iter().any(|o| *o) {
        // The open streams (a closed one would be reported ready, hung up, forever), then stop.
        let which: Vec<usize> = (0..2).filter(|&i| open[i]).collect();
        let mut fds: Vec<PollFd<'_>> = which
            .iter()
            .map(|&i| PollFd::new(&streams[i].0, PollFlags::IN))
            .collect();
        fds.push(PollFd::new(&stop, PollFlags::IN));
        // With the call over, only what is already there is read.
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match poll(&mut fds, stopped.then_some(&zero)) {
            Ok(_) => {}
            Err(e) if e == rustix::io::Errno::INTR => continue,
            Err(_) => return,
        }
        let ready: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
        drop(fds);
        let data = which
            .iter()
            .zip(&ready)
            .filter(|(_, r)| **r)
            .map(|(i, _)| *i);
        let data: Vec<usize> = data.collect();
        if stopped && data.is_empty() {
            return;
        }
        stopped |= ready.last().copied().unwrap_or(true);
        for i in data {
            if !read_one(i, &mut open) {
                return;
            }
        }
    }
}

/// Serves one connection (one call) on this thread; `calls` (with this connection's number)
/// is where the daemon finds it to end it.
fn connection(stream: UnixStream, cfg: &ServeConfig, handler: &Handler, calls: (&InFlight, u64)) {
    let fail = |e: Refused| {
        send(
            &stream,
            &ServerMsg::Error {
                message: e.to_string(),
            },
        );
    };
    let peer = match peer_of(&stream) {
        Ok(p) => p,
        Err(m) => return fail(Refused::Other(m)),
    };
    let (req, fds) = match read_request(&stream, Instant::now() + cfg.first_message) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let _ = stream.set_read_timeout(None);
    let proto::Request { context, body, .. } = req;
    if body == proto::RequestBody::Hello {
        send(
            &stream,
            &ServerMsg::Hello {
                version: proto::PROTOCOL_VERSION,
                gateway: env!("CARGO_PKG_VERSION").into(),
            },
        );
        return;
    }
    let Ok(writer) = stream.try_clone() else {
        return fail(Refused::Other("cannot duplicate the connection".into()));
    };
    let tx = Sender::new(writer);
    let call = match body {
        proto::RequestBody::Call(c) => *c,
        // Answered above.
        proto::RequestBody::Hello => return,
    };
    let stdin_text = call.request.stdin_text().map(str::to_string);
    let CallStdio { stdio, relay } = match call_stdio(context.stdio, fds, stdin_text, &tx) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let cwd = context.cwd.clone();
    if let Err(e) = client_can_enter(&peer, &cwd) {
        return fail(Refused::Other(format!(
            "cannot enter the client's directory {cwd} with the client's rights: {e}"
        )));
    }
    if let Err(e) = crate::sandbox::thread_own_cwd().and_then(|_| std::env::set_current_dir(&cwd)) {
        return fail(Refused::Other(format!(
            "cannot enter the client's directory {cwd}: {e}"
        )));
    }
    let who = peer.clone();
    let started = Instant::now();
    let what = Unrecorded::of(&peer, &context, &call.request);
    let ran = run_call(
        &stream,
        peer,
        context,
        stdio,
        call,
        &tx,
        (handler, &cfg.server),
        calls,
    );
    if let Some(r) = relay {
        r.finish(&stream, &|| tx.sent());
    }
    // The end goes to a client that may not read it: never waited on for long.
    let _ = stream.set_write_timeout(Some(FRAMES_AFTER_END));
    let listener = match ran {
        Ok(ran) => {
            if ran.ended.is_some() || ran.panicked {
                what.record((&cfg.state_dir, &cfg.server), &ran, started.elapsed());
            }
            for f in proto::report_frames(ran.report) {
                if !tx.send(&f) {
                    break;
                }
            }
            ran.listener
        }
        Err(message) => {
            record_refused((&cfg.state_dir, &cfg.server), &who, &message);
            tx.send(&ServerMsg::Error { message });
            None
        }
    };
    let _ = stream.shutdown(std::net::Shutdown::Both);
    if let Some(t) = listener {
        let _ = t.join();
    }
}

/// Whether the client `peer` can reach the directory `cwd` it says it is in, with its own
/// rights: paths it names are resolved from there, and a root daemon could enter one the
/// client cannot reach. (A daemon running as a normal user has no more rights than that
/// user: nothing to check.)
fn client_can_enter(peer: &client::Peer, cwd: &str) -> std::io::Result<()> {
    if crate::sandbox::effective_uid() != 0 || peer.uid == 0 {
        return Ok(());
    }
    crate::sandbox::with_fs_identity(peer.uid, peer.gid, &peer.groups, || {
        // not-ws: the client's own directory, looked up with its rights
        std::fs::metadata(cwd).and_then(|m| {
            if m.is_dir() {
                Ok(())
            } else {
                Err(std::io::Error::from(std::io::ErrorKind::NotADirectory))
            }
        })
    })
    .and_then(|r| r)
}

/// Records a call the daemon refused before it ran (a session name over its bound, a
/// directory the client cannot enter, ...): a deny of `daemon.request` by its client.
fn record_refused(
    (state_dir, server): (&Path, &crate::broker::server::Server),
    who: &client::Peer,
    message: &str,
) {
    let mut rec = Record {
        caller: Caller {
            uid: who.uid,
            pid: who.pid,
            client: "daemon".into(),
        },
        tool: "daemon.request".into(),
        decision: RecordDecision {
            effect: "deny".into(),
            rules: vec!["daemon.request".into()],
            reasons: vec![crate::broker::redact_text(message)],
        },
        ..Record::default()
    };
    let _ = crate::broker::append_record(state_dir, Some(server), &mut rec);
}

/// Runs the call for the client `peer` (identity from the socket) with the request's
/// `context`: its answers read on a thread of their own, a hang-up (or the daemon stopping:
/// `calls`) ending it. Returns how it ran, or why the call could not start.
#[allow(
    clippy::too_many_arguments,
    reason = "one call's parts, each from a different stage of the connection"
)]
fn run_call(
    stream: &UnixStream,
    peer: client::Peer,
    context: proto::RequestContext,
    stdio: client::Stdio,
    call: crate::broker::request::Invocation,
    tx: &Sender,
    (handler, server): (&Handler, &Arc<crate::broker::server::Server>),
    (calls, id): (&InFlight, u64),
) -> Result<Ran, String> {
    // Approval questions go to the client (if it puts them to a person), whose answers (read
    // by a second thread) answer only the questions this connection was asked.
    let prompted: Arc<Mutex<HashSet<u64>>> = Arc::default();
    let Ok(reader) = stream.try_clone() else {
        return Err("cannot duplicate the connection".into());
    };
    let asked = prompted.clone();
    let (ptx, prompts) = (tx.clone(), context.prompts);
    let prompt = Box::new(move |id: u64, question: &str| {
        if !prompts {
            return false;
        }
        asked.lock().unwrap_or_else(|p| p.into_inner()).insert(id);
        ptx.send(&ServerMsg::Ask {
            id,
            question: question.into(),
        })
    });
    let who = format!("the terminal of uid {} pid {}", peer.uid, peer.pid);
    // When the client goes away (Ctrl-C, a crash) or the daemon stops, a byte on this pipe
    // says so and the call ends: its command is killed, its loops stop.
    let Ok((gone_r, gone_w)) = std::io::pipe() else {
        return Err("cannot make a pipe for the call".into());
    };
    let end = Arc::new(CallEnd::new(gone_w));
    calls.add(id, end.clone());
    struct Leave<'a>(&'a InFlight, u64);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.0.remove(self.1);
        }
    }
    let _leave = Leave(calls, id);
    let gone = end.clone();
    let answers = server.clone();
    let listener = std::thread::Builder::new()
        .name("gateway-answers".into())
        .spawn(move || {
            read_answers(reader, &prompted, &who, &answers.approvals);
            gone.end(Ended::ClientGone);
        })
        .ok();
    let context = client::CallContext {
        cwd: context.cwd.into(),
        env: context
            .env
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect(),
        session: context.session,
    };
    let client = client::Client::new(
        peer,
        context,
        stdio,
        prompt,
        (server.clone(), Some(OwnedFd::from(gone_r))),
    )
    .map_err(|e| e.to_string())?;
    let cx = client::Context::of_client(client);
    let (report, panicked) = run_caught(|| handler(call, cx.clone()));
    // Read once the call is over: a hang-up after it ended does not make it ended.
    let ended = end.why();
    Ok(Ran {
        report,
        listener,
        ended,
        panicked,
        recorded_itself: cx.records() > 0,
    })
}

/// Reads [`ClientMsg::Answer`]s until the connection ends; when it ends early, the questions
/// still open are denied (nobody is left to answer them there).
fn read_answers(
    stream: UnixStream,
    asked: &Mutex<HashSet<u64>>,
    who: &str,
    approvals: &approvals::Approvals,
) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = match std::io::Read::read(&mut &stream, &mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        loop {
            match proto::decode::<ClientMsg>(&buf) {
                Ok(Some((msg, used))) => {
                    buf.drain(..used);
                    if let ClientMsg::Answer { id, approve } = msg
                        && asked
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .contains(&id)
                    {
                        // Asked of this connection: its own request (the prompt goes to
                        // the client whose call it is).
                        let _ = approvals.answer(id, approve, false, who.into(), |_| Ok(()));
                    }
                }
                Ok(None) => break,
                Err(_) => return deny_open(asked, approvals),
            }
        }
    }
    deny_open(asked, approvals);
}

fn deny_open(asked: &Mutex<HashSet<u64>>, approvals: &approvals::Approvals) {
    for id in asked.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        let _ = approvals.answer(
            *id,
            false,
            false,
            "the client's disconnection (nobody left to answer there)".into(),
            |_| Ok(()),
        );
    }
}

/// What a client call carries besides its arguments.
pub struct CallIo<'a> {
    /// The working directory the call runs in (absolute).
    pub cwd: PathBuf,
    /// The environment the call sees.
    pub env: Vec<(String, String)>,
    /// The call's stdin, stdout and stderr.
    pub stdio: [std::os::fd::BorrowedFd<'a>; 3],
    /// Ask this process's terminal when the daemon asks (else the question waits for
    /// `gateway approve|deny`).
    pub ask_here: bool,
    /// The call ends when this becomes readable or hangs up (an MCP call's cancellation):
    /// the connection is closed, so the daemon ends the call — kills its run, records it —
    /// and this side returns at once.
    pub cancel: Option<std::os::fd::BorrowedFd<'a>>,
}

/// The client side: sends `call` to the daemon at `socket` with this process's stdio, cwd
/// and environment; asks the terminal when the daemon asks; returns the call's report.
pub fn call(socket: &Path, inv: Invocation) -> Result<Report, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?;
    let env = own_env();
    let (i, o, e) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    call_with(
        socket,
        inv,
        CallIo {
            cwd,
            env,
            stdio: [i.as_fd(), o.as_fd(), e.as_fd()],
            ask_here: true,
            cancel: None,
        },
    )
}

/// How a captured call is made ([`call_captured`]).
pub struct Captured<'a> {
    /// The working directory the call runs in (absolute).
    pub cwd: PathBuf,
    /// The environment the call sees.
    pub env: Vec<(String, String)>,
    /// The call's stdin.
    pub stdin: std::os::fd::BorrowedFd<'a>,
    /// Where its stderr goes (None: captured too).
    pub stderr: Option<std::os::fd::BorrowedFd<'a>>,
    /// Ask this process's terminal when the daemon asks.
    pub ask_here: bool,
    /// The call ends when this becomes readable (see [`CallIo::cancel`]).
    pub cancel: Option<std::os::fd::BorrowedFd<'a>>,
}

/// [`call_with`] with the call's stdout — and its stderr, unless `how.stderr` is given —
/// captured through pipes that are read while the call runs (the MCP server's calls, the
/// REPL's `/cd`). Returns the call's report, stdout and captured stderr.
pub fn call_captured(
    socket: &Path,
    call: Invocation,
    how: Captured<'_>,
) -> Result<(Report, Vec<u8>, Vec<u8>), String> {
    let drain = |mut r: std::io::PipeReader| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut r, &mut v);
            v
        })
    };
    let pipe = || std::io::pipe().map_err(|e| format!("a pipe for the daemon call: {e}"));
    let (out_r, out_w) = pipe()?;
    let (err_t, err_w) = match how.stderr {
        Some(_) => (None, None),
        None => {
            let (r, w) = pipe()?;
            (Some(drain(r)), Some(w))
        }
    };
    let out_t = drain(out_r);
    let err_fd = how
        .stderr
        .or_else(|| err_w.as_ref().map(|w| w.as_fd()))
        .ok_or("no stderr for the daemon call")?;
    let code = call_with(
        socket,
        call,
        CallIo {
            cwd: how.cwd,
            env: how.env,
            stdio: [how.stdin, out_w.as_fd(), err_fd],
            ask_here: how.ask_here,
            cancel: how.cancel,
        },
    );
    // Our write ends go: the readers end when the daemon has closed its copies.
    drop((out_w, err_w));
    let out = out_t.join().unwrap_or_default();
    let err = err_t
        .map(|t| t.join().unwrap_or_default())
        .unwrap_or_default();
    code.map(|c| (c, out, err))
}

/// This process's environment with `GATEWAY_SESSION` set to `session`: what a front end
/// (the MCP server, the REPL) sends with its calls, so that they share its session.
pub fn env_for_session(session: &str) -> Vec<(String, String)> {
    let mut env = own_env();
    env.retain(|(k, _)| k != "GATEWAY_SESSION");
    env.push(("GATEWAY_SESSION".into(), session.to_string()));
    env
}

/// This process's environment, as the protocol carries it.
pub fn own_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

/// [`call`] with the working directory, environment and streams given (the MCP server's
/// and the REPL's calls).
pub fn call_with(socket: &Path, call: Invocation, io: CallIo<'_>) -> Result<Report, String> {
    request(socket, proto::RequestBody::Call(Box::new(call)), io)
}

/// Waits until the daemon has something to say on `stream` (false) or `cancel` becomes
/// readable or hangs up (true).
fn cancelled_before_answer(stream: &UnixStream, cancel: std::os::fd::BorrowedFd<'_>) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    loop {
        let mut fds = [
            PollFd::new(stream, PollFlags::IN),
            PollFd::from_borrowed_fd(cancel, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) => {
                if !fds[1].revents().is_empty() {
                    return true;
                }
                if !fds[0].revents().is_empty() {
                    return false;
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            // Reading the stream says what is wrong.
            Err(_) => return false,
        }
    }
}

/// The daemon's error, said by the client. (A daemon of another version names both
/// versions itself: [`proto::RequestError::VersionMismatch`].)
fn daemon_error(message: &str) -> String {
    format!("the daemon: {message}")
}

/// The daemon's [`ServerMsg::Error`] already sent on `stream`, if there is one.
fn refusal_of(stream: &UnixStream) -> Option<String> {
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(1)));
    let mut buf = Vec::new();
    let _ = std::io::Read::read_to_end(
        &mut std::io::Read::take(stream, proto::MAX_MESSAGE as u64 + 4),
        &mut buf,
    );
    match proto::decode::<ServerMsg>(&buf) {
        Ok(Some((ServerMsg::Error { message }, _))) => Some(daemon_error(&message)),
        _ => None,
    }
}

/// Sends `frame` on `stream` with `fds` passed in the same `sendmsg` (`SCM_RIGHTS`).
fn send_with_fds(
    stream: &UnixStream,
    frame: &[u8],
    fds: &[std::os::fd::BorrowedFd<'_>; 3],
) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    anc.push(SendAncillaryMessage::ScmRights(fds));
    let n = sendmsg(
        stream,
        &[std::io::IoSlice::new(frame)],
        &mut anc,
        SendFlags::empty(),
    )?;
    (&*stream).write_all(&frame[n..])
}

/// Puts the daemon's question `id` to this process's terminal and sends the answer, on a
/// thread of its own: the answer may also come from `gateway approve`, and then the call
/// ends while the prompt still waits.
fn ask_on_terminal(stream: &UnixStream, id: u64, question: String) {
    let Ok(w) = stream.try_clone() else { return };
    std::thread::spawn(move || {
        let yes = crate::broker::client::tty_confirm(&question).unwrap_or(false);
        let _ = (&w).write_all(&proto::encode(&ClientMsg::Answer { id, approve: yes }));
    });
}

/// Sends one request with `io` as its context and streams (passed with it); asks the
/// terminal when the daemon asks (if `io.ask_here`); returns the call's report.
pub fn request(socket: &Path, body: proto::RequestBody, io: CallIo<'_>) -> Result<Report, String> {
    let stream = UnixStream::connect(socket).map_err(|e| {
        format!(
            "cannot reach the daemon at {}: {e} (start `gateway serve`, or set GATEWAY_SOCKET= to run the embedded broker)",
            socket.display()
        )
    })?;
    let CallIo {
        cwd,
        env,
        stdio: fds,
        ask_here,
        cancel,
    } = io;
    let session = env
        .iter()
        .find(|(k, _)| k == "GATEWAY_SESSION")
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty());
    let frame = proto::encode(&ClientMsg::Request(proto::Request {
        version: proto::PROTOCOL_VERSION,
        context: proto::RequestContext {
            cwd: cwd.display().to_string(),
            env,
            session,
            stdio: proto::StdioMode::Passed,
            prompts: ask_here,
        },
        body,
    }));
    if frame.len() > proto::MAX_MESSAGE + 4 {
        return Err("the command line and environment are too large for the daemon".into());
    }
    if let Err(e) = send_with_fds(&stream, &frame, &fds) {
        // A daemon that refuses the call (busy) answers and closes without reading it: its
        // answer says why better than the broken pipe.
        return Err(
            refusal_of(&stream).unwrap_or_else(|| format!("sending the call to the daemon: {e}"))
        );
    }
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut pieces = proto::ReportPieces::default();
    loop {
        while let Some((msg, used)) = proto::decode::<ServerMsg>(&buf).map_err(|e| e.to_string())? {
            buf.drain(..used);
            match msg {
                ServerMsg::ReportPart { text } => pieces
                    .add(&text)
                    .map_err(|e| format!("the daemon's report: {e}"))?,
                ServerMsg::Done { report } => {
                    return pieces
                        .done(report)
                        .map_err(|e| format!("the daemon's report: {e}"));
                }
                ServerMsg::Hello { version, gateway } => {
                    return Err(format!(
                        "the daemon answered a call with its hello (protocol {version}, gateway {gateway})"
                    ));
                }
                ServerMsg::Output {
                    stream: which,
                    data,
                } => {
                    let fd = match which {
                        proto::OutStream::Stdout => fds[1],
                        proto::OutStream::Stderr => fds[2],
                    };
                    let _ = std::fs::File::from(
                        fd.try_clone_to_owned()
                            .map_err(|e| format!("writing the call's output: {e}"))?,
                    )
                    .write_all(&data);
                }
                ServerMsg::Error { message } => return Err(daemon_error(&message)),
                ServerMsg::Ask { id, question } => {
                    if ask_here {
                        ask_on_terminal(&stream, id, question);
                    }
                }
            }
        }
        if let Some(c) = cancel
            && cancelled_before_answer(&stream, c)
        {
            // The daemon sees the hang-up and ends the call (kills, records).
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return Err("the call was cancelled".into());
        }
        let n = std::io::Read::read(&mut &stream, &mut chunk)
            .map_err(|e| format!("reading the daemon's answer: {e}"))?;
        if n == 0 {
            return Err(
                "the daemon closed the connection before the call ended (it may have been stopped)"
                    .into(),
            );
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_daemons_error_is_said_as_it_is_whatever_it_says() {
        // No branching on the daemon's text: an old daemon's parse error is its own message.
        let old = "malformed message: unknown variant `request`, expected `call` or `answer` at line 1 column 17";
        assert_eq!(super::daemon_error(old), format!("the daemon: {old}"));
        assert_eq!(super::daemon_error("busy"), "the daemon: busy");
    }
}
