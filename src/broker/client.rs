//! Who is calling. The embedded CLI is its own caller: this process's uid and pid, its
//! environment, its stdin/stdout/stderr and its terminal. In the daemon each connection is
//! served on its own thread, which carries here a [`Client`] built by [`Client::new`] from the
//! client's identity ([`Peer`], from `SO_PEERCRED` alone), the context its request gave
//! ([`CallContext`]: cwd, environment, session) and its streams ([`Stdio`], passed over the
//! socket or relayed); the CLI code and the broker read them through these functions and so
//! behave the same either way.
//!
//! (A thread-local, not a parameter threaded through every function: the daemon runs the
//! CLI's own code for a client, and the process-wide things it replaces — environment,
//! stdio, the terminal — are process-wide there too.)

use crate::audit::Caller;
use crate::workspace::wsfs;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// Puts an approval question (pending id, text) to a client.
pub type Prompt = Box<dyn Fn(u64, &str) -> bool + Send + Sync>;

/// Who a daemon client is: from the socket's peer credentials (`SO_PEERCRED`,
/// `SO_PEERGROUPS`), read by the daemon on the connection, never from anything the client
/// sends (the protocol has no field for it: `serve::proto`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The client's uid.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
    /// Its pid.
    pub pid: u32,
    /// Its supplementary groups.
    pub groups: Vec<u32>,
}

/// What a daemon client says about its call (the request's context, decoded by the daemon):
/// where and with what environment it runs. Nothing here says who the client is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallContext {
    /// The client's working directory (absolute).
    pub cwd: std::path::PathBuf,
    /// The client's environment.
    pub env: Vec<(OsString, OsString)>,
    /// The call's session; when given, the environment's `GATEWAY_SESSION` is this.
    pub session: Option<String>,
}

/// How an [`Outlet`] writes.
enum Way {
    /// As given: a regular file, a device such as `/dev/null` (never held up for long).
    Plain,
    /// The same pipe, FIFO or terminal opened anew without blocking (its own open file
    /// description: the client's own is left as it was).
    Reopened(std::fs::File),
    /// A socket, sent to without blocking.
    Socket,
}

/// A daemon client's stdout or stderr as the call writes to it. Writing to a slow or stuck
/// reader (a pipe or FIFO nobody reads, a relay the client stops taking frames from) waits
/// for room, but never past the call's output deadline (its run's timeout) nor its
/// cancellation (the client went away, the daemon stops): then the write is given up, and
/// so is everything after it, counted in [`Outlet::undelivered`] (the run's output is in its
/// artifacts). A slow reader is waited for: nothing it would read is dropped early.
pub struct Outlet {
    file: std::fs::File,
    way: Way,
    deadline: std::sync::Mutex<Option<std::time::Instant>>,
    undelivered: std::sync::atomic::AtomicU64,
    given_up: std::sync::atomic::AtomicBool,
    /// The call's cancellation (see [`Client::cancel`]).
    cancel: Option<OwnedFd>,
}

impl Outlet {
    /// The client's stream `file`, as passed (or the daemon's relay pipe); writing to it
    /// ends when `cancel` (the call's) becomes readable.
    pub fn new(file: std::fs::File, cancel: Option<OwnedFd>) -> Outlet {
        Outlet {
            way: Way::of(&file),
            file,
            deadline: std::sync::Mutex::new(None),
            undelivered: std::sync::atomic::AtomicU64::new(0),
            given_up: std::sync::atomic::AtomicBool::new(false),
            cancel,
        }
    }

    /// From now on, writing waits for room at most until `deadline` (None: until the call
    /// is cancelled).
    pub fn set_deadline(&self, deadline: Option<std::time::Instant>) {
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner()) = deadline;
    }

    /// Bytes written to this outlet that the client did not get.
    pub fn undelivered(&self) -> u64 {
        self.undelivered.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn give_up(&self, n: usize) {
        self.given_up
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.undelivered
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// One attempt to write without blocking.
    fn try_write(&self, buf: &[u8]) -> std::io::Result<usize> {
        use std::io::Write as _;
        match &self.way {
            Way::Plain => (&self.file).write(buf),
            Way::Reopened(f) => (&*f).write(buf),
            Way::Socket => rustix::net::send(
                &self.file,
                buf,
                rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
            )
            .map_err(std::io::Error::from),
        }
    }

    /// Waits until the outlet takes more: false when the deadline passed or the call was
    /// cancelled first.
    fn wait_for_room(&self) -> bool {
        let fd = match &self.way {
            Way::Reopened(f) => f.as_fd(),
            _ => self.file.as_fd(),
        };
        let deadline = *self.deadline.lock().unwrap_or_else(|p| p.into_inner());
        crate::sandbox::wait_writable(fd, deadline, self.cancel.as_ref().map(AsFd::as_fd))
            == crate::sandbox::Room::Ready
    }
}

impl Way {
    /// How to write to `file` without blocking: a pipe, FIFO or terminal is opened anew
    /// (only one passed for writing: the reopened one never has more rights than it), a
    /// socket is sent to; anything else is written as given.
    fn of(file: &std::fs::File) -> Way {
        use rustix::fs::{FileType, OFlags};
        let Ok(st) = rustix::fs::fstat(file) else {
            return Way::Plain;
        };
        let writable = rustix::fs::fcntl_getfl(file)
            .is_ok_and(|f| matches!(f & OFlags::RWMODE, OFlags::WRONLY | OFlags::RDWR));
        let reopen = match FileType::from_raw_mode(st.st_mode) {
            FileType::Socket => return Way::Socket,
            FileType::Fifo => writable,
            FileType::CharacterDevice => writable && crate::sandbox::fd_is_tty(file.as_fd()),
            _ => false,
        };
        match reopen {
            true => {
                use std::os::unix::fs::OpenOptionsExt;
                // not-ws: the client's own stream, reopened through this process's fd table
                // (the same pipe or terminal, without blocking)
                std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                    .open(format!("/proc/self/fd/{}", file.as_raw_fd()))
                    .map_or(Way::Plain, Way::Reopened)
            }
            false => Way::Plain,
        }
    }
}

impl Write for &Outlet {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let o: &Outlet = self;
        if o.given_up.load(std::sync::atomic::Ordering::Relaxed) {
            o.give_up(buf.len());
            return Ok(buf.len());
        }
        loop {
            match o.try_write(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if !o.wait_for_room() {
                        o.give_up(buf.len());
                        return Ok(buf.len());
                    }
                }
                Err(e) => {
                    o.give_up(buf.len());
                    return Err(e);
                }
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl AsFd for Outlet {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// A daemon client's streams: the fds it passed, or pipes of the daemon's that relay them.
pub struct Stdio {
    /// Its stdin.
    pub stdin: OwnedFd,
    /// Its stdout.
    pub stdout: std::fs::File,
    /// Its stderr.
    pub stderr: std::fs::File,
    /// What its stdin holds, when the daemon knows (a frames call's: empty, or the text it
    /// gave, as a digest); `None`: a stream the client passed, unknown until read.
    pub stdin_known: Option<String>,
}

/// Which of a client's streams are terminals, measured on the fds the daemon received (a
/// client's claim would not do: a stdin said to be a terminal is not scanned for secrets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TtyFlags {
    /// stdin is a terminal.
    pub stdin: bool,
    /// stdout is a terminal.
    pub stdout: bool,
    /// stderr is a terminal.
    pub stderr: bool,
}

/// A daemon client, as its connection's thread sees it. Built by [`Client::new`] from the
/// peer's credentials and the request's context.
pub struct Client {
    /// uid and pid from the socket's peer credentials; `client` is `daemon`.
    pub caller: Caller,
    /// The client's gid and supplementary groups (peer credentials): with its uid, the
    /// rights [`as_client`] opens the files it names with.
    pub gid: u32,
    /// See `gid`.
    pub groups: Vec<u32>,
    /// The client's working directory.
    pub cwd: std::path::PathBuf,
    /// The client's environment (with `GATEWAY_SESSION` set to the call's session, if any).
    pub env: Vec<(OsString, OsString)>,
    /// Its stdin, stdout and stderr.
    pub stdin: OwnedFd,
    /// Its stdout.
    pub stdout: Outlet,
    /// Its stderr.
    pub stderr: Outlet,
    /// Which of them are terminals.
    pub tty: TtyFlags,
    /// What its stdin holds, when known (see [`Stdio::stdin_known`]).
    pub stdin_known: Option<String>,
    /// Sends an approval question (pending id, text) to the client, which asks on its
    /// terminal and answers over the socket. False: it could not be sent.
    pub prompt: Prompt,
    /// The daemon serving it: its roles, approvals and pins.
    pub server: std::sync::Arc<super::server::Server>,
    /// Readable (or hung up) once the call is to end: its client went away, its server is
    /// stopping. What its runs, its waits and its long operations watch.
    pub cancel: Option<OwnedFd>,
    /// Audit records the call has appended (see [`Context::note_recorded`]).
    recorded: std::sync::atomic::AtomicU64,
}

impl Client {
    /// The client `peer` (its identity, from the socket), calling with `context` and
    /// `stdio`: the only way the daemon builds one, so that the identity the broker acts
    /// for is the socket's, whatever the request says.
    ///
    /// Refused: a session name that is not one (`model::check_session`: bounded, so that what
    /// the daemon keeps per session stays bounded). Entries that cannot be environment
    /// variables (an empty name, `=` or NUL in the name) are dropped.
    pub fn new(
        peer: Peer,
        context: CallContext,
        stdio: Stdio,
        prompt: Prompt,
        (server, cancel): (std::sync::Arc<super::server::Server>, Option<OwnedFd>),
    ) -> Result<Client, crate::model::RequestError> {
        let CallContext {
            cwd,
            mut env,
            session,
        } = context;
        env.retain(|(k, _)| {
            let k = k.as_encoded_bytes();
            !k.is_empty() && !k.contains(&b'=') && !k.contains(&0)
        });
        if let Some(s) = session {
            env.retain(|(k, _)| k != "GATEWAY_SESSION");
            env.push(("GATEWAY_SESSION".into(), s.into()));
        }
        if let Some((_, s)) = env.iter().find(|(k, _)| k == "GATEWAY_SESSION")
            && !s.is_empty()
        {
            crate::model::check_session(&s.to_string_lossy())?;
        }
        let tty = TtyFlags {
            stdin: crate::sandbox::fd_is_tty(stdio.stdin.as_fd()),
            stdout: crate::sandbox::fd_is_tty(stdio.stdout.as_fd()),
            stderr: crate::sandbox::fd_is_tty(stdio.stderr.as_fd()),
        };
        Ok(Client {
            caller: Caller {
                uid: peer.uid,
                pid: peer.pid,
                client: "daemon".into(),
            },
            gid: peer.gid,
            groups: peer.groups,
            cwd,
            env,
            stdin_known: stdio.stdin_known,
            stdin: stdio.stdin,
            stdout: Outlet::new(stdio.stdout, dup(cancel.as_ref())),
            stderr: Outlet::new(stdio.stderr, dup(cancel.as_ref())),
            tty,
            prompt,
            server,
            cancel,
            recorded: std::sync::atomic::AtomicU64::new(0),
        })
    }
}

/// The caller of one call: this process (a one-shot front end: its own environment, stdio
/// and rights) or a daemon client. `Send`: a call's value, handed to whatever serves it —
/// the front end's dispatch, the broker (`ExecRequest::context`, `FsContext::client`,
/// `ScanRequest::context`), the threads it starts. Who calls, their environment, streams,
/// rights and cancellation come from it, never from the thread or the process serving it.
#[derive(Clone, Default)]
pub struct Context(Option<Arc<Client>>);

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.client() {
            Some(c) => write!(f, "daemon client uid {} pid {}", c.caller.uid, c.caller.pid),
            None => f.write_str("this process"),
        }
    }
}

impl Context {
    /// This process is the caller.
    pub fn this_process() -> Context {
        Context(None)
    }

    /// The server the call is made to (a daemon client's), if any.
    pub fn server(&self) -> Option<&super::server::Server> {
        self.client().map(|c| &*c.server)
    }

    /// The daemon's client `c` is the caller.
    pub fn of_client(c: Client) -> Context {
        Context(Some(Arc::new(c)))
    }

    /// The daemon client, if the caller is one.
    pub fn client(&self) -> Option<&Client> {
        self.0.as_deref()
    }

    /// An environment variable of the caller.
    #[allow(
        clippy::disallowed_methods,
        reason = "no client: this process is its own front end, and its environment the caller's"
    )]
    pub fn env_var(&self, name: &str) -> Option<OsString> {
        match self.client() {
            Some(c) => c
                .env
                .iter()
                .find(|(k, _)| k == OsStr::new(name))
                .map(|(_, v)| v.clone()),
            None => std::env::var_os(name),
        }
    }

    /// The caller's whole environment.
    #[allow(
        clippy::disallowed_methods,
        reason = "no client: this process is its own front end, and its environment the caller's"
    )]
    pub fn env_vars(&self) -> Vec<(OsString, OsString)> {
        match self.client() {
            Some(c) => c.env.clone(),
            None => std::env::vars_os().collect(),
        }
    }

    /// Runs `f` with the rights of the caller over files (see [`as_client`]).
    pub fn as_client<R: Send>(&self, f: impl FnOnce() -> R + Send) -> std::io::Result<R> {
        match self.client() {
            Some(c) if !own_rights_suffice(c.caller.uid) => {
                crate::sandbox::with_fs_identity(c.caller.uid, c.gid, &c.groups, f)
            }
            _ => Ok(f()),
        }
    }

    /// What the caller's stdin holds, as far as a standing approval may rely on it:
    /// `null` (/dev/null), `tty` (a person types it), a frames call's known content, or `None`
    /// (a pipe or file the client passed, whose content a later call could change: a standing
    /// approval never covers a call reading it).
    pub fn stdin_identity(&self) -> Option<String> {
        let c = self.client()?;
        if let Some(k) = &c.stdin_known {
            return Some(k.clone());
        }
        if c.tty.stdin {
            return Some("tty".into());
        }
        crate::sandbox::fd_is_null(c.stdin.as_fd()).then(|| "null".into())
    }

    /// The filesystem identity the broker reads a workspace with for this caller (see
    /// [`as_client`]): the daemon's client unless it is root or the daemon's own user;
    /// None: this process's own.
    pub fn fs_identity(&self) -> Option<wsfs::Identity> {
        match self.client() {
            Some(c) if !own_rights_suffice(c.caller.uid) => Some(wsfs::Identity {
                uid: c.caller.uid,
                gid: c.gid,
                groups: c.groups.clone(),
            }),
            _ => None,
        }
    }

    /// Who a command runs as: the daemon's client when its uid is not this process's (its
    /// command gets the client's uid, gid and groups, not the daemon's), else this process.
    pub fn run_as(&self) -> Option<crate::sandbox::RunAs> {
        let c = self.client()?;
        (c.caller.uid != crate::sandbox::effective_uid()).then(|| crate::sandbox::RunAs {
            uid: c.caller.uid,
            gid: c.gid,
            groups: c.groups.clone(),
        })
    }

    /// The caller: the daemon's client, or this process (`client` names the front end).
    pub fn caller(&self, client: &str) -> Caller {
        match self.client() {
            Some(c) => c.caller.clone(),
            None => Caller {
                uid: crate::sandbox::effective_uid(),
                pid: std::process::id(),
                client: client.into(),
            },
        }
    }

    /// Runs `f` with the caller's stdin fd.
    pub fn with_stdin<R>(&self, f: impl FnOnce(BorrowedFd<'_>) -> R) -> R {
        match self.client() {
            Some(c) => f(c.stdin.as_fd()),
            None => f(std::io::stdin().as_fd()),
        }
    }

    /// Is the caller's stdin a terminal?
    pub fn stdin_is_tty(&self) -> bool {
        match self.client() {
            Some(c) => c.tty.stdin,
            None => crate::sandbox::stdin_is_tty(),
        }
    }

    /// The caller's working directory.
    pub fn cwd(&self) -> std::io::Result<std::path::PathBuf> {
        match self.client() {
            Some(c) => Ok(c.cwd.clone()),
            None => std::env::current_dir(),
        }
    }

    /// Writes to the caller's stderr (errors ignored).
    pub fn err(&self, f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
        let mut w: Box<dyn Write + '_> = match self.client() {
            Some(c) => Box::new(&c.stderr),
            None => Box::new(std::io::stderr().lock()),
        };
        let _ = f(&mut w).and_then(|_| w.flush());
    }

    /// Writes to the caller's stdout (errors ignored, as `print!` would not be: a closed
    /// stdout must not take the daemon down).
    pub fn out(&self, f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
        let mut w: Box<dyn Write + '_> = match self.client() {
            Some(c) => Box::new(&c.stdout),
            None => Box::new(std::io::stdout().lock()),
        };
        let _ = f(&mut w).and_then(|_| w.flush());
    }

    /// Is the caller's stderr a terminal?
    pub fn stderr_is_tty(&self) -> bool {
        match self.client() {
            Some(c) => c.tty.stderr,
            None => crate::sandbox::fd_is_tty(std::io::stderr().as_fd()),
        }
    }

    /// Reads the caller's stdin to the end.
    pub fn read_stdin_to_end(&self, buf: &mut Vec<u8>) -> std::io::Result<usize> {
        use std::io::Read;
        match self.client() {
            Some(c) => std::fs::File::from(c.stdin.try_clone()?).read_to_end(buf),
            None => std::io::stdin().read_to_end(buf),
        }
    }

    /// Reads the caller's stdin to the end or to `max` + 1 bytes, whichever comes first (a
    /// caller's stdin may never end: in the daemon this bounds its memory).
    pub fn read_stdin_up_to(&self, buf: &mut Vec<u8>, max: u64) -> std::io::Result<usize> {
        use std::io::Read;
        match self.client() {
            Some(c) => std::fs::File::from(c.stdin.try_clone()?)
                .take(max.saturating_add(1))
                .read_to_end(buf),
            None => std::io::stdin()
                .take(max.saturating_add(1))
                .read_to_end(buf),
        }
    }

    /// A writer to the caller's stdout (buffered for a client; flushed when dropped).
    pub fn stdout_writer(&self) -> Box<dyn Write> {
        /// A client's stdout through its [`Outlet`].
        struct ClientOut(Arc<Client>);
        impl Write for ClientOut {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                (&self.0.stdout).write(buf)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        if let Some(c) = &self.0 {
            return Box::new(std::io::BufWriter::new(ClientOut(c.clone())));
        }
        Box::new(std::io::stdout().lock())
    }

    /// A session id: the caller's `GATEWAY_SESSION`, else a fresh random one named after
    /// the front end (`cli-...`, `mcp-...`, `repl-...`).
    pub fn session_id_for(&self, client: &str) -> String {
        if let Some(s) = self.env_var("GATEWAY_SESSION").filter(|s| !s.is_empty()) {
            return s.to_string_lossy().into_owned();
        }
        let mut b = [0u8; 6];
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b);
        format!("{client}-{}", crate::durable::hex(&b))
    }

    /// The CLI's session id ([`Context::session_id_for`] `cli`).
    pub fn session_id(&self) -> String {
        self.session_id_for("cli")
    }

    /// The call's cancellation: readable (or hung up) once it is to end (its daemon client
    /// went away, the daemon is stopping). None: this process, whose signals end its runs
    /// (`sandbox::catch_interrupts`).
    pub fn cancel(&self) -> Option<BorrowedFd<'_>> {
        self.client()?.cancel.as_ref().map(AsFd::as_fd)
    }

    /// Whether the call was cancelled: what long operations that are not commands (`log
    /// tail -f`, waiting for a client's output to drain) check between steps.
    pub fn cancelled(&self) -> bool {
        self.cancel().is_some_and(crate::sandbox::fd_ready)
    }

    /// Notes that the call appended an audit record (the invocation skeleton does, for each
    /// tool call's record): the daemon records a call it ended only if the call did not.
    pub fn note_recorded(&self) {
        if let Some(c) = self.client() {
            c.recorded
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// How many records the call appended ([`Context::note_recorded`]).
    pub fn records(&self) -> u64 {
        self.client()
            .map_or(0, |c| c.recorded.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// A copy of a call's cancellation fd (None: none, or no fd left to copy it to — then the
/// outlet waits for its deadline only).
fn dup(fd: Option<&OwnedFd>) -> Option<OwnedFd> {
    fd.and_then(|f| f.try_clone().ok())
}

/// Whether the daemon opens files for a client of uid `uid` with its own rights: the client
/// is root, or the daemon's own user (an unprivileged daemon, which could not take another
/// identity — `setgroups` needs CAP_SETGID — and whose rights are the client's own).
fn own_rights_suffice(uid: u32) -> bool {
    uid == 0 || uid == crate::sandbox::effective_uid()
}

/// Asks `question` on this process's terminal: `None` when there is none (stdin is not a
/// terminal).
pub fn tty_confirm(question: &str) -> Option<bool> {
    use std::io::BufRead;
    if !crate::sandbox::stdin_is_tty() {
        return None;
    }
    // not-ws: the caller's terminal (/dev/tty)
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()?;
    let _ = write!(
        tty,
        "gateway: {} [y/N] ",
        crate::shown::visible_lines(question)
    );
    let _ = tty.flush();
    let mut line = String::new();
    let mut r = std::io::BufReader::new(tty);
    if r.read_line(&mut line).is_err() {
        return Some(false);
    }
    Some(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

#[cfg(test)]
mod tests {
    /// The thread-locals the crate may have, each with why it holds no call's state: a
    /// cache, or the process's own signal handling. A call's caller, cancellation, records
    /// and output are its [`super::Context`]'s, handed to whatever serves it.
    const ALLOWED: &[(&str, &str, &str)] = &[
        (
            "src/sandbox/mod.rs",
            "INTERRUPTIBLE",
            "which threads' runs this process's own SIGINT ends (a one-shot front end)",
        ),
        (
            "src/journal/blob.rs",
            "COMPRESSOR",
            "a compression context, reused",
        ),
        (
            "src/policy/shell.rs",
            "ON_BIG_STACK",
            "whether this thread is the shell parser's big-stack thread",
        ),
        (
            "src/secrets/prefilter.rs",
            "FOLDED",
            "the prefilter's folded copy and hits, buffers reused",
        ),
        (
            "src/secrets/scan.rs",
            "CAPTURE_PASSES",
            "counters of the scanner's own unit tests",
        ),
    ];

    /// Every `thread_local!` under `src/`, as (file, the line after it).
    fn thread_locals() -> Vec<(String, String)> {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut stack = vec![std::path::PathBuf::from(root)];
        let mut found = Vec::new();
        while let Some(d) = stack.pop() {
            // not-ws: the crate's own sources, read by a unit test
            for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    // not-ws: the crate's own sources, read by a unit test
                    let text = std::fs::read_to_string(&p).expect("read");
                    let rel = p
                        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                        .unwrap_or(&p)
                        .display()
                        .to_string();
                    let lines: Vec<&str> = text.lines().collect();
                    for (i, l) in lines.iter().enumerate() {
                        if l.trim_start().starts_with("thread_local!") {
                            let body = lines[i + 1..].iter().take(4).copied().collect();
                            found.push((rel.clone(), body));
                        }
                    }
                }
            }
        }
        found
    }

    /// Issue 35: nothing that serves a call keeps it in a thread-local (the caller was one,
    /// the call's cancellation another, its record count a third, `--json` errors a
    /// fourth): a call is a value handed to what serves it. A new thread-local must be a
    /// cache or the process's own, and say so here.
    #[test]
    fn no_thread_local_holds_a_calls_state() {
        let found = thread_locals();
        assert!(!found.is_empty(), "the walk found no thread_local at all");
        let mut bad = Vec::new();
        for (file, body) in &found {
            let ok = ALLOWED
                .iter()
                .any(|(f, name, _)| file == f && body.contains(name));
            if !ok {
                bad.push(format!("{file}: {body}"));
            }
        }
        assert!(
            bad.is_empty(),
            "a thread-local that is not a cache: put it in the call (`broker::client::Context`, the front end's call):\n{}",
            bad.join("\n")
        );
    }

    /// A call's context crosses threads: the daemon hands it to the call's thread, the
    /// broker to the threads it starts.
    #[test]
    fn a_context_is_send_and_sync() {
        fn both<T: Send + Sync>() {}
        both::<super::Context>();
        both::<super::Client>();
    }
}
