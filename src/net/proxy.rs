//! The egress proxy of one run (issue 36): HTTP forward proxying, `CONNECT` and SOCKS5 on one
//! listening socket, every connection decided by the policy's rules
//! ([`super::resolve::decide`]), pinned to the address it checked, relayed, and returned as a
//! [`Connection`] for the audit log.
//!
//! The listening socket lives in the command's network namespace: the run's pid-1 helper
//! binds it on the namespace's loopback before the command starts and passes it to the
//! broker over a socket pair ([`Listen::Receive`]). The broker accepts on it from outside:
//! each accepted socket is a connection made inside the namespace, and the broker connects
//! out from its own. The command gets no new socket family and no relay process; the kernel
//! is the relay into the namespace.
//!
//! Relaying: a tunnel (`CONNECT`, SOCKS5) is moved with `splice` through a pipe each way, so
//! its bytes never enter user space. A plaintext forward request is rewritten (origin-form
//! target, `Host` from the target, `Connection: close`, no `Proxy-*` headers), its head and
//! body are scanned for secrets before they leave ([`Hooks::secret`]; the body in windows,
//! never forwarding bytes not yet scanned), and one request is served per connection: bytes
//! after the declared body are not forwarded, and the response head says
//! `Connection: close`.
//!
//! Written by hand rather than with hyper: a forward proxy that must scan, re-decide and
//! pin every request needs the request head as bytes (httparse reads it) and only a
//! byte relay after it; hyper's client and server would own the connections and pooling
//! this must control, and would copy every tunnelled byte through user space.

use super::parse::{self, Protocol, RequestKind};
use super::resolve::{Decided, decide};
use super::rules::{Destination, Rules};
use rustix::event::{PollFd, PollFlags};
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The port the proxy listens on in the command's namespace (`127.0.0.1:3128`, the
/// customary proxy port).
pub const PORT: u16 = 3128;

/// The environment that points a command's clients at the proxy: both cases of each
/// variable, `NO_PROXY` empty so that loopback services are reached through the proxy too
/// (the namespace's own loopback has nothing of the host's).
pub fn environment() -> Vec<(&'static str, String)> {
    let http = format!("http://127.0.0.1:{PORT}");
    let socks = format!("socks5h://127.0.0.1:{PORT}");
    vec![
        ("HTTP_PROXY", http.clone()),
        ("http_proxy", http.clone()),
        ("HTTPS_PROXY", http.clone()),
        ("https_proxy", http),
        ("ALL_PROXY", socks.clone()),
        ("all_proxy", socks),
        ("NO_PROXY", String::new()),
        ("no_proxy", String::new()),
    ]
}

/// How a connection's request head is read and relayed: bounds and timeouts.
#[derive(Clone, Debug)]
pub struct Config {
    /// The policy's rules.
    pub rules: Rules,
    /// `unknown = "ask"`.
    pub ask: bool,
    /// Connections open at once; more are refused.
    pub max_connections: usize,
    /// How long a client may take to send its request head.
    pub head_timeout: Duration,
    /// How long connecting out may take.
    pub connect_timeout: Duration,
}

impl Config {
    /// The defaults for `rules`.
    pub fn new(rules: Rules, ask: bool) -> Config {
        Config {
            rules,
            ask,
            max_connections: 256,
            head_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(15),
        }
    }
}

/// What the proxy needs from the broker.
pub trait Hooks: Sync {
    /// Asks a person whether the command may connect to `dest`, which no rule covers:
    /// `None` when nobody can be asked. `stop` becomes readable when the run ends.
    fn ask(&self, dest: &Destination, stop: std::os::fd::BorrowedFd<'_>) -> Option<bool>;
    /// A line for the command's stderr (a refusal, a question).
    fn note(&self, line: &str);
    /// The secrets rule that finds a secret in plaintext leaving the sandbox, when the
    /// policy refuses it; `None` to let it pass.
    fn secret(&self, bytes: &[u8]) -> Option<String>;
    /// A connection was decided, or has ended: kept where a broker that dies leaves it for
    /// recovery (the last word on each `id` counts).
    fn ended(&self, _c: &Connection) {}
}

/// One connection, as the audit log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// Its number in the run (from 0, in the order accepted).
    pub id: u64,
    /// `connect`, `http` or `socks5`; `unknown` when the request could not be read.
    pub protocol: &'static str,
    /// The host as the command named it (empty when the request could not be read).
    pub host: String,
    /// The port (0 when unknown).
    pub port: u16,
    /// The address connected to (the one checked).
    pub address: Option<IpAddr>,
    /// Relayed (true) or refused.
    pub allowed: bool,
    /// The deciding rule (see [`super::resolve::Decided`]).
    pub rule: String,
    /// Why it was refused, or what failed after it was allowed.
    pub reason: Option<String>,
    /// A person's answer, when asked.
    pub approved: Option<bool>,
    /// Bytes from the command to the destination (request heads included).
    pub bytes_up: u64,
    /// Bytes from the destination to the command.
    pub bytes_down: u64,
    /// From accept to close.
    pub duration: Duration,
}

/// Where the listening socket comes from.
pub enum Listen {
    /// Already listening (tests).
    Ready(OwnedFd),
    /// To be received over this socket (`SCM_RIGHTS`) from the run's helper.
    Receive(OwnedFd),
}

/// What the threads of one proxy share.
struct Shared {
    /// Sockets of live connections (clones), shut down when the proxy stops.
    live: Mutex<Vec<(u64, TcpStream)>>,
    next: AtomicUsize,
    open: AtomicUsize,
    done: Mutex<Vec<Connection>>,
}

/// A running proxy: [`Handle::stop`] ends it; its connections are in [`Handle::connections`]
/// once the scope that ran it has ended.
pub struct Handle {
    stop_w: Option<std::io::PipeWriter>,
    shared: Arc<Shared>,
}

impl Handle {
    /// Stops accepting and shuts down every live connection (their threads end).
    pub fn stop(&mut self) {
        self.stop_w = None;
        if let Ok(live) = self.shared.live.lock() {
            for (_, s) in live.iter() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    /// The connections, in the order they ended.
    pub fn connections(&self) -> Vec<Connection> {
        self.shared
            .done
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default()
    }
}

/// Starts the proxy in `scope`: it accepts until [`Handle::stop`].
pub fn start<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    listen: Listen,
    cfg: &'env Config,
    hooks: &'env dyn Hooks,
) -> std::io::Result<Handle> {
    let (stop_r, stop_w) = std::io::pipe()?;
    let shared = Arc::new(Shared {
        live: Mutex::new(Vec::new()),
        next: AtomicUsize::new(0),
        open: AtomicUsize::new(0),
        done: Mutex::new(Vec::new()),
    });
    let sh = shared.clone();
    let stop_r = Arc::new(OwnedFd::from(stop_r));
    scope.spawn(move || {
        let listener = match listen {
            Listen::Ready(fd) => Some(fd),
            Listen::Receive(sock) => receive_listener(&sock, &stop_r),
        };
        if let Some(l) = listener {
            accept_loop(scope, &l, &stop_r, cfg, hooks, &sh);
        }
    });
    Ok(Handle {
        stop_w: Some(stop_w),
        shared,
    })
}

/// Waits for the helper's listening socket (or the stop).
fn receive_listener(sock: &OwnedFd, stop: &OwnedFd) -> Option<OwnedFd> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    if !wait_readable(sock, stop) {
        return None;
    }
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    rustix::net::recvmsg(sock, &mut iov, &mut cmsg, RecvFlags::CMSG_CLOEXEC).ok()?;
    let mut fds = cmsg.drain().filter_map(|m| match m {
        RecvAncillaryMessage::ScmRights(fds) => Some(fds),
        _ => None,
    });
    fds.next().and_then(|mut f| f.next())
}

/// Waits until `fd` is readable; false when `stop` is first (or on error).
fn wait_readable(fd: &impl AsFd, stop: &OwnedFd) -> bool {
    loop {
        let mut fds = [
            PollFd::new(fd, PollFlags::IN),
            PollFd::new(stop, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => {
                if !fds[1].revents().is_empty() {
                    return false;
                }
                if !fds[0].revents().is_empty() {
                    return true;
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

fn accept_loop<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    listener: &OwnedFd,
    stop: &Arc<OwnedFd>,
    cfg: &'env Config,
    hooks: &'env dyn Hooks,
    shared: &Arc<Shared>,
) {
    while wait_readable(listener, stop) {
        let Ok(fd) = rustix::net::accept_with(listener, rustix::net::SocketFlags::CLOEXEC) else {
            continue;
        };
        let client = TcpStream::from(fd);
        let started = Instant::now();
        if shared.open.load(Ordering::SeqCst) >= cfg.max_connections {
            let _ = (&client).write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            );
            record(
                shared,
                hooks,
                Connection {
                    reason: Some(format!(
                        "more than {} connections at once",
                        cfg.max_connections
                    )),
                    ..unread("network.connections", started)
                },
            );
            continue;
        }
        shared.open.fetch_add(1, Ordering::SeqCst);
        let id = shared.next.fetch_add(1, Ordering::SeqCst) as u64;
        if let (Ok(mut live), Ok(c)) = (shared.live.lock(), client.try_clone()) {
            live.push((id, c));
        }
        let sh = shared.clone();
        let stop = stop.clone();
        scope.spawn(move || {
            let mut conn = Conn {
                client,
                upstream: None,
                cfg,
                hooks,
                shared: &sh,
                stop: &stop,
                id,
                rec: Connection {
                    id,
                    ..unread("network.request", started)
                },
            };
            conn.serve();
            let Conn { rec, .. } = conn;
            let mut rec = rec;
            rec.duration = started.elapsed();
            if let Ok(mut live) = sh.live.lock() {
                live.retain(|(i, _)| *i != id);
            }
            sh.open.fetch_sub(1, Ordering::SeqCst);
            record(&sh, hooks, rec);
        });
    }
}

fn unread(rule: &str, _started: Instant) -> Connection {
    Connection {
        id: 0,
        protocol: "unknown",
        host: String::new(),
        port: 0,
        address: None,
        allowed: false,
        rule: rule.into(),
        reason: None,
        approved: None,
        bytes_up: 0,
        bytes_down: 0,
        duration: Duration::ZERO,
    }
}

fn record(shared: &Shared, hooks: &dyn Hooks, c: Connection) {
    hooks.ended(&c);
    if let Ok(mut d) = shared.done.lock() {
        d.push(c);
    }
}

/// One connection being served.
struct Conn<'a> {
    client: TcpStream,
    upstream: Option<TcpStream>,
    cfg: &'a Config,
    hooks: &'a dyn Hooks,
    shared: &'a Shared,
    stop: &'a OwnedFd,
    id: u64,
    rec: Connection,
}

/// How a request head was answered when it was refused.
enum Refusal {
    Http(u16),
    Socks(parse::Reply),
}

impl Conn<'_> {
    fn serve(&mut self) {
        let _ = self.client.set_read_timeout(Some(self.cfg.head_timeout));
        let _ = self.client.set_nodelay(true);
        let mut buf = Vec::with_capacity(4096);
        if read_more(&mut self.client, &mut buf).is_none() {
            self.rec.reason = Some("the command sent nothing".into());
            return;
        }
        match parse::sniff(buf[0]) {
            Protocol::Socks5 => self.socks(buf),
            Protocol::Http => self.http(buf),
        }
    }

    fn http(&mut self, mut buf: Vec<u8>) {
        let req = loop {
            match parse::parse_http(&buf) {
                Ok(Some(r)) => break r,
                Ok(None) if read_more(&mut self.client, &mut buf).is_some() => {}
                Ok(None) => {
                    self.rec.reason = Some("the request head was not complete".into());
                    return;
                }
                Err(e) => {
                    self.rec.reason = Some(format!("not a proxy request: {e}"));
                    self.refuse(Refusal::Http(400), &e.to_string());
                    return;
                }
            }
        };
        self.rec.protocol = match req.kind {
            RequestKind::Connect => "connect",
            RequestKind::Forward { .. } => "http",
        };
        self.rec.host = req.destination.host.to_string();
        self.rec.port = req.destination.port;
        let Some(addr) = self.decide(&req.destination, Refusal::Http(403)) else {
            return;
        };
        match &req.kind {
            RequestKind::Connect => {
                if !self.connect(addr, Refusal::Http(502)) {
                    return;
                }
                if self
                    .client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .is_err()
                {
                    return;
                }
                let early = buf.split_off(req.head_len);
                self.tunnel(&early);
            }
            RequestKind::Forward { path } => {
                let path = path.clone();
                self.forward(&req, &path, buf, addr);
            }
        }
    }

    fn socks(&mut self, mut buf: Vec<u8>) {
        self.rec.protocol = "socks5";
        let greeting = loop {
            match parse::parse_socks_greeting(&buf) {
                Ok(Some(g)) => break g,
                Ok(None) if read_more(&mut self.client, &mut buf).is_some() => {}
                Ok(None) => return,
                Err(e) => {
                    self.rec.reason = Some(format!("not a SOCKS5 greeting: {e}"));
                    return;
                }
            }
        };
        if self.client.write_all(&greeting.reply()).is_err() || !greeting.offers_no_auth() {
            self.rec.reason = Some("the client offered no method without authentication".into());
            return;
        }
        let mut rest = buf.split_off(greeting.len);
        let req = loop {
            match parse::parse_socks_request(&rest) {
                Ok(Some(r)) => break r,
                Ok(None) if read_more(&mut self.client, &mut rest).is_some() => {}
                Ok(None) => return,
                Err(e) => {
                    self.rec.reason = Some(format!("not a SOCKS5 connect request: {e}"));
                    if let Some(r) = e.reply() {
                        let _ = self.client.write_all(&r.message());
                    }
                    return;
                }
            }
        };
        self.rec.host = req.destination.host.to_string();
        self.rec.port = req.destination.port;
        let Some(addr) = self.decide(&req.destination, Refusal::Socks(parse::Reply::NotAllowed))
        else {
            return;
        };
        if !self.connect(addr, Refusal::Socks(parse::Reply::HostUnreachable)) {
            return;
        }
        if self
            .client
            .write_all(&parse::Reply::Succeeded.message())
            .is_err()
        {
            return;
        }
        let early = rest.split_off(req.len);
        self.tunnel(&early);
    }

    /// Decides the destination (asking a person when the policy says so); on a refusal,
    /// answers the client, notes it on the command's stderr and returns `None`.
    fn decide(&mut self, dest: &Destination, refusal: Refusal) -> Option<IpAddr> {
        let mut decided = self.decide_until(None, dest);
        if decided == Decided::Ask {
            let answer = self.hooks.ask(dest, self.stop.as_fd());
            self.rec.approved = answer;
            decided = match answer {
                Some(a) => self.decide_until(Some(a), dest),
                None => Decided::Refused {
                    rule: "network.unknown".into(),
                    reason: format!(
                        "{dest}: no network rule allows it, and no one can be asked here (ask needs the daemon: `gateway serve`); to allow it, add {:?} to network.proxy.allow",
                        super::resolve::allow_hint(dest)
                    ),
                },
            };
        }
        match decided {
            Decided::Allowed { addr, rule } => {
                self.rec.allowed = true;
                self.rec.rule = rule;
                self.rec.address = Some(addr);
                // Kept now, not only at its end: a broker killed while it runs leaves it
                // recorded.
                let open = Connection {
                    reason: Some(
                        "still open when last kept (its broker died: bytes and duration unknown)"
                            .into(),
                    ),
                    ..self.rec.clone()
                };
                self.hooks.ended(&open);
                Some(addr)
            }
            Decided::Refused { rule, reason } => {
                self.rec.rule = rule;
                self.refuse(refusal, &reason);
                self.rec.reason = Some(reason);
                None
            }
            Decided::Ask => None,
        }
    }

    /// [`decide`] in a thread of its own, given up when the run ends: a name whose
    /// resolution hangs (`getaddrinfo` has no deadline of its own) keeps neither the run nor
    /// the broker waiting.
    fn decide_until(&self, approved: Option<bool>, dest: &Destination) -> Decided {
        let (tx, rx) = std::sync::mpsc::channel();
        let (rules, ask, d) = (self.cfg.rules.clone(), self.cfg.ask, dest.clone());
        let spawned = std::thread::Builder::new()
            .name("gateway-resolve".into())
            .spawn(move || {
                let _ = tx.send(decide(&rules, ask, approved, &d));
            });
        let ended = || Decided::Refused {
            rule: "network.resolve".into(),
            reason: format!("{dest}: the run ended while the name was being resolved"),
        };
        if spawned.is_err() {
            return ended();
        }
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(d) => return d,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return ended(),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    let mut fds = [PollFd::new(self.stop, PollFlags::IN)];
                    let zero = rustix::event::Timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    };
                    if rustix::event::poll(&mut fds, Some(&zero)).is_ok()
                        && !fds[0].revents().is_empty()
                    {
                        return ended();
                    }
                }
            }
        }
    }

    /// Answers a refused request and says why on the command's stderr.
    fn refuse(&mut self, how: Refusal, reason: &str) {
        let rule = &self.rec.rule;
        let target = if self.rec.host.is_empty() {
            "a request".to_owned()
        } else {
            format!("{}:{}", self.rec.host, self.rec.port)
        };
        // Reasons from the decision start with the destination; it is said once.
        let reason = reason
            .strip_prefix(&format!("{target}: "))
            .unwrap_or(reason);
        let line = format!("gateway: network: refused {target}: {reason} [rule {rule}]");
        self.hooks.note(&line);
        let _ = match how {
            Refusal::Http(code) => {
                let text = match code {
                    400 => "Bad Request",
                    403 => "Forbidden",
                    _ => "Bad Gateway",
                };
                let body = format!("{line}\n");
                self.client.write_all(
                    format!(
                        "HTTP/1.1 {code} {text}\r\nContent-Type: text/plain; charset=utf-8\r\nX-Gateway-Rule: {}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                        header_safe(rule),
                        body.len()
                    )
                    .as_bytes(),
                )
            }
            Refusal::Socks(r) => self.client.write_all(&r.message()),
        };
        let _ = self.client.shutdown(Shutdown::Write);
    }

    /// Connects out to the checked address; on failure answers the client and returns false.
    fn connect(&mut self, addr: IpAddr, failure: Refusal) -> bool {
        let sa = SocketAddr::new(addr, self.rec.port);
        match connect_until(sa, self.cfg.connect_timeout, self.stop) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                if let (Ok(mut live), Ok(c)) = (self.shared.live.lock(), s.try_clone()) {
                    live.push((self.id, c));
                }
                self.upstream = Some(s);
                true
            }
            Err(e) => {
                let reason = format!("connecting to {sa} failed: {e}");
                // Allowed, but it failed: the rule stays the one that allowed it.
                let how = match failure {
                    Refusal::Socks(_) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                        Refusal::Socks(parse::Reply::ConnectionRefused)
                    }
                    other => other,
                };
                self.refuse(how, &reason);
                self.rec.reason = Some(reason);
                false
            }
        }
    }

    /// Relays a tunnel both ways until both sides are done.
    fn tunnel(&mut self, early: &[u8]) {
        let Some(up) = self.upstream.take() else {
            return;
        };
        let _ = self.client.set_read_timeout(None);
        let mut sent = 0u64;
        if !early.is_empty() {
            if (&up).write_all(early).is_err() {
                return;
            }
            sent = early.len() as u64;
        }
        let (a, b) = (&self.client, &up);
        let (upward, downward) = std::thread::scope(|s| {
            let t = s.spawn(move || pump(a, b));
            let down = pump(b, a);
            (t.join().unwrap_or(0), down)
        });
        self.rec.bytes_up += sent + upward;
        self.rec.bytes_down += downward;
    }

    /// Forwards one plaintext request: scanned, rewritten, its body bounded; then the
    /// response, its head saying `Connection: close`.
    fn forward(&mut self, req: &parse::HttpRequest, path: &str, buf: Vec<u8>, addr: IpAddr) {
        let (head, body) = match rewrite_request(&buf[..req.head_len], req, path) {
            Ok(r) => r,
            Err(why) => {
                // Refused before any byte left: what a server could read otherwise.
                self.rec.allowed = false;
                self.rec.rule = "network.request".into();
                self.rec.reason = Some(why.into());
                self.refuse(Refusal::Http(400), why);
                return;
            }
        };
        // The head, and its target percent-decoded (`?t=%67hp_...`), before anything leaves.
        let target = percent_encoding::percent_decode_str(path).collect::<Vec<u8>>();
        if let Some(rule) = self
            .hooks
            .secret(&buf[..req.head_len])
            .or_else(|| self.hooks.secret(&target))
        {
            self.secret_refused(&rule);
            return;
        }
        if !self.connect(addr, Refusal::Http(502)) {
            return;
        }
        let Some(up) = self.upstream.take() else {
            return;
        };
        if (&up).write_all(&head).is_err() {
            return;
        }
        self.rec.bytes_up += head.len() as u64;
        let _ = self.client.set_read_timeout(None);
        // The bytes that came with the head are the body's first: scanned with what follows
        // before any of them leaves.
        let early = buf[req.head_len..].to_vec();
        let client = &self.client;
        let hooks = self.hooks;
        let (sent, down) = std::thread::scope(|s| {
            let up_ref = &up;
            let t = s.spawn(move || {
                let sent = send_body(client, up_ref, body, early, hooks);
                if matches!(sent, BodySent::Secret(..)) {
                    // Nothing more goes up, and the response (if any) is cut off.
                    let _ = up_ref.shutdown(Shutdown::Both);
                }
                sent
            });
            let down = respond(up_ref, client);
            // The response is over: a body still being read is not waited for.
            let _ = client.shutdown(Shutdown::Read);
            (t.join().unwrap_or(BodySent::Sent(0)), down)
        });
        self.rec.bytes_down += down;
        match sent {
            BodySent::Sent(n) => self.rec.bytes_up += n,
            BodySent::Secret(n, rule) => {
                self.rec.bytes_up += n;
                if down == 0 {
                    self.secret_refused(&rule);
                } else {
                    // A response had begun: the refusal is said on stderr and recorded.
                    self.rec.allowed = false;
                    self.rec.rule = "secrets.input".into();
                    let reason = format!(
                        "the plaintext request body carries a secret ({rule}); the connection was cut"
                    );
                    self.hooks.note(&format!(
                        "gateway: network: refused {}:{}: {reason} [rule secrets.input]",
                        self.rec.host, self.rec.port
                    ));
                    self.rec.reason = Some(reason);
                }
            }
        }
        let _ = self.client.shutdown(Shutdown::Both);
    }

    fn secret_refused(&mut self, rule: &str) {
        self.rec.allowed = false;
        self.rec.rule = "secrets.input".into();
        let reason = format!(
            "the plaintext request carries a secret ({rule}); send it over HTTPS or without the secret"
        );
        self.refuse(Refusal::Http(403), &reason);
        self.rec.reason = Some(reason);
    }
}

/// Connects to `sa` within `timeout`, giving up as soon as `stop` is readable (the run
/// ended: no connect outlives it).
fn connect_until(sa: SocketAddr, timeout: Duration, stop: &OwnedFd) -> std::io::Result<TcpStream> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let family = if sa.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let s = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    match rustix::net::connect(&s, &sa) {
        Ok(()) => {}
        Err(rustix::io::Errno::INPROGRESS) => {
            let deadline = Instant::now() + timeout;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no answer within {} s", timeout.as_secs()),
                    ));
                }
                let ts = rustix::event::Timespec {
                    tv_sec: left.as_secs() as i64,
                    tv_nsec: i64::from(left.subsec_nanos()),
                };
                let mut fds = [
                    PollFd::new(&s, PollFlags::OUT),
                    PollFd::new(stop, PollFlags::IN),
                ];
                match rustix::event::poll(&mut fds, Some(&ts)) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
                if !fds[1].revents().is_empty() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::Interrupted,
                        "the run ended",
                    ));
                }
                if !fds[0].revents().is_empty() {
                    break;
                }
            }
            rustix::net::sockopt::socket_error(&s)??;
        }
        Err(e) => return Err(e.into()),
    }
    let flags = rustix::fs::fcntl_getfl(&s)?;
    rustix::fs::fcntl_setfl(&s, flags - rustix::fs::OFlags::NONBLOCK)?;
    Ok(TcpStream::from(s))
}

/// Reads more of a request head; `None` at end of file, an error or when it is too long.
fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<usize> {
    if buf.len() >= parse::MAX_HEAD {
        return None;
    }
    let mut chunk = [0u8; 4096];
    match s.read(&mut chunk) {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Some(n)
        }
    }
}

/// A header value without CR, LF or NUL.
fn header_safe(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Moves bytes from `from` to `to` until `from` ends (then shuts `to` for writing), with
/// `splice` through a pipe; returns how many.
///
/// No `SPLICE_F_MORE`: it corks what reaches `to` until more follows, and a request whose
/// sender then waits for the answer sat corked for the kernel's 200 ms timer.
fn pump(from: &TcpStream, to: &TcpStream) -> u64 {
    let mut total = 0u64;
    let Ok((pr, pw)) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) else {
        return copy(from, to);
    };
    let flags = rustix::pipe::SpliceFlags::MOVE;
    'outer: loop {
        let n = match rustix::pipe::splice(from, None, &pw, None, 1 << 20, flags) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut left = n;
        while left > 0 {
            match rustix::pipe::splice(&pr, None, to, None, left, flags) {
                Ok(0) | Err(_) => break 'outer,
                Ok(m) => left -= m,
            }
        }
        total += n as u64;
    }
    let _ = to.shutdown(Shutdown::Write);
    total
}

/// [`pump`] through user space (no pipe could be made).
fn copy(mut from: &TcpStream, mut to: &TcpStream) -> u64 {
    let n = std::io::copy(&mut from, &mut to).unwrap_or(0);
    let _ = to.shutdown(Shutdown::Write);
    n
}

/// How a request's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    /// `Content-Length` bytes (0 without one).
    Length(u64),
    /// `Transfer-Encoding: chunked`: decoded, scanned and sent re-chunked.
    Chunked,
}

/// The request head to send upstream, and how its body is framed. Refused: a length
/// that is not one, two lengths, a length with a transfer coding, a coding other than
/// `chunked` (what a server and the proxy could read differently, smuggling a second
/// request past the decision).
fn rewrite_request(
    head: &[u8],
    req: &parse::HttpRequest,
    path: &str,
) -> Result<(Vec<u8>, Body), &'static str> {
    let mut headers = [httparse::EMPTY_HEADER; parse::MAX_HEADERS];
    let mut r = httparse::Request::new(&mut headers);
    r.parse(head)
        .map_err(|_| "the request head could not be read")?;
    let mut out = format!("{} {path} HTTP/1.{}\r\n", req.method, req.version).into_bytes();
    let host = match req.destination.port {
        80 => req.destination.host.to_string(),
        p => format!("{}:{p}", req.destination.host),
    };
    out.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    let mut len: Option<u64> = None;
    let mut chunked = false;
    for h in r.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        match name.as_str() {
            "host"
            | "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authorization"
            | "proxy-authenticate"
            | "te"
            | "upgrade" => continue,
            "content-length" => {
                let n = std::str::from_utf8(h.value)
                    .ok()
                    .map(str::trim)
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse().ok())
                    .ok_or("the request's Content-Length is not a number")?;
                if len.is_some() {
                    return Err("the request has more than one Content-Length");
                }
                len = Some(n);
                continue;
            }
            "transfer-encoding" => {
                if chunked || !h.value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                    return Err("the request's Transfer-Encoding is not `chunked` alone");
                }
                chunked = true;
                continue;
            }
            _ => {}
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    let body = match (chunked, len) {
        (true, Some(_)) => {
            return Err("the request has both Content-Length and Transfer-Encoding");
        }
        (true, None) => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
            Body::Chunked
        }
        (false, n) => {
            let n = n.unwrap_or(0);
            if n > 0 {
                out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes());
            }
            Body::Length(n)
        }
    };
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok((out, body))
}

/// How much of a body went upstream, and whether a secret stopped it.
enum BodySent {
    Sent(u64),
    Secret(u64, String),
}

/// Bytes held back from each scanned window, so that a secret across two reads is seen
/// whole before any of it leaves.
const SCAN_OVERLAP: usize = 8 * 1024;

/// Sends a request body (`early`, what came with the head, then the rest from the client)
/// upstream, scanning it in windows: a byte is forwarded only once it has been scanned with
/// the [`SCAN_OVERLAP`] bytes after it (or the body has ended). A chunked body is decoded,
/// scanned as its payload, and sent re-chunked; nothing after its last chunk is sent.
fn send_body(
    mut client: &TcpStream,
    mut up: &TcpStream,
    body: Body,
    early: Vec<u8>,
    hooks: &dyn Hooks,
) -> BodySent {
    let mut sent = 0u64;
    let mut held: Vec<u8> = Vec::new();
    let mut decoder = Chunks::default();
    let mut left = match body {
        Body::Length(n) => n,
        Body::Chunked => u64::MAX,
    };
    let mut input = early;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let ended = match body {
            Body::Length(_) => {
                let take = input.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                held.extend_from_slice(&input[..take]);
                left -= take as u64;
                left == 0
            }
            Body::Chunked => match decoder.feed(&input, &mut held) {
                Ok(done) => done,
                // Not chunked as it says: nothing more goes up.
                Err(()) => return BodySent::Sent(sent),
            },
        };
        if let Some(rule) = hooks.secret(&held) {
            return BodySent::Secret(sent, rule);
        }
        let keep = if ended {
            0
        } else {
            held.len().min(SCAN_OVERLAP)
        };
        let out = held.len() - keep;
        if out > 0 {
            let size = format!("{out:x}\r\n");
            let framed = match body {
                Body::Length(_) => up.write_all(&held[..out]).map(|()| 0),
                Body::Chunked => up
                    .write_all(size.as_bytes())
                    .and_then(|()| up.write_all(&held[..out]))
                    .and_then(|()| up.write_all(b"\r\n"))
                    .map(|()| size.len() + 2),
            };
            let Ok(framing) = framed else {
                return BodySent::Sent(sent);
            };
            sent += (out + framing) as u64;
            held.drain(..out);
        }
        if ended {
            if body == Body::Chunked && up.write_all(b"0\r\n\r\n").is_ok() {
                sent += 5;
            }
            return BodySent::Sent(sent);
        }
        let n = client.read(&mut chunk).unwrap_or(0);
        if n == 0 {
            // The client stopped before its body's end: what is held was scanned whole.
            if !held.is_empty() && body != Body::Chunked && up.write_all(&held).is_ok() {
                sent += held.len() as u64;
            }
            return BodySent::Sent(sent);
        }
        input = chunk[..n].to_vec();
    }
}

/// A chunked body's decoder: what it has read of the framing so far.
#[derive(Default)]
struct Chunks {
    state: ChunkState,
    /// The size line being read.
    line: Vec<u8>,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Reading a size line.
    #[default]
    Size,
    /// Reading this many bytes of payload.
    Data(u64),
    /// Reading the CRLF after a chunk's payload.
    DataEnd,
    /// Reading trailer lines after the last chunk, until an empty one.
    Trailer,
}

impl Chunks {
    /// Feeds framed bytes; appends payload to `out`. `Ok(true)` once the body has ended
    /// (anything after it is dropped); `Err` when it is not chunked framing.
    fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<bool, ()> {
        while !input.is_empty() {
            match self.state {
                ChunkState::Data(n) => {
                    let take = input.len().min(usize::try_from(n).unwrap_or(usize::MAX));
                    out.extend_from_slice(&input[..take]);
                    input = &input[take..];
                    self.state = match n - take as u64 {
                        0 => ChunkState::DataEnd,
                        left => ChunkState::Data(left),
                    };
                }
                ChunkState::Size | ChunkState::DataEnd | ChunkState::Trailer => {
                    let Some(i) = memchr::memchr(b'\n', input) else {
                        self.line.extend_from_slice(input);
                        if self.line.len() > 4096 {
                            return Err(());
                        }
                        return Ok(false);
                    };
                    self.line.extend_from_slice(&input[..i]);
                    input = &input[i + 1..];
                    let line = std::mem::take(&mut self.line);
                    let line = line.strip_suffix(b"\r").unwrap_or(&line);
                    if line.len() > 4096 {
                        return Err(());
                    }
                    self.state = match self.state {
                        ChunkState::DataEnd if line.is_empty() => ChunkState::Size,
                        ChunkState::DataEnd => return Err(()),
                        ChunkState::Trailer if line.is_empty() => return Ok(true),
                        ChunkState::Trailer => ChunkState::Trailer,
                        _ => {
                            let hex = line.split(|&b| b == b';').next().unwrap_or_default();
                            let hex = std::str::from_utf8(hex).map_err(|_| ())?.trim();
                            if hex.is_empty() || hex.len() > 15 {
                                return Err(());
                            }
                            match u64::from_str_radix(hex, 16).map_err(|_| ())? {
                                0 => ChunkState::Trailer,
                                n => ChunkState::Data(n),
                            }
                        }
                    };
                }
            }
        }
        Ok(false)
    }
}

/// Relays the response: its head with `Connection: close` (interim `1xx` heads as they
/// are), then the rest to the end.
fn respond(mut up: &TcpStream, mut client: &TcpStream) -> u64 {
    let mut buf = Vec::with_capacity(8192);
    let mut chunk = [0u8; 8192];
    let mut total = 0u64;
    loop {
        let head_end = loop {
            if let Some(i) = memchr::memmem::find(&buf, b"\r\n\r\n") {
                break Some(i + 4);
            }
            if buf.len() > parse::MAX_HEAD {
                break None;
            }
            match up.read(&mut chunk) {
                Ok(0) | Err(_) => break None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let Some(end) = head_end else {
            if buf.is_empty() && total == 0 {
                // Nothing came back (the upstream closed, or the body was refused): the
                // client's side stays open for the proxy's own answer.
                return 0;
            }
            // Not a head we can read: relayed as it is.
            break;
        };
        match rewrite_response(&buf[..end]) {
            Some(Response::Interim) => {
                if client.write_all(&buf[..end]).is_err() {
                    return total;
                }
                total += end as u64;
                buf.drain(..end);
            }
            Some(Response::Final(h)) => {
                if client.write_all(&h).is_err() {
                    return total;
                }
                total += h.len() as u64;
                buf.drain(..end);
                break;
            }
            None => break,
        }
    }
    if client.write_all(&buf).is_ok() {
        total += buf.len() as u64 + pump(up, client);
    }
    total
}

/// A response head, read.
enum Response {
    /// `1xx` (not 101): relayed as it is, a final head follows.
    Interim,
    /// The final head, rewritten.
    Final(Vec<u8>),
}

/// A response head with `Connection: close` and without hop-by-hop connection headers.
fn rewrite_response(head: &[u8]) -> Option<Response> {
    let mut headers = [httparse::EMPTY_HEADER; parse::MAX_HEADERS];
    let mut r = httparse::Response::new(&mut headers);
    match r.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return None,
    }
    if r.code.is_some_and(|c| (100..200).contains(&c) && c != 101) {
        return Some(Response::Interim);
    }
    let mut out = format!(
        "HTTP/1.{} {} {}\r\n",
        r.version?,
        r.code?,
        r.reason.unwrap_or("")
    )
    .into_bytes();
    for h in r.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if matches!(
            name.as_str(),
            "connection" | "keep-alive" | "proxy-connection"
        ) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Some(Response::Final(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Hooks that keep the notes and find `SECRET-TOKEN` as a secret.
    #[derive(Default)]
    struct Kept(Mutex<Vec<String>>);

    impl Hooks for Kept {
        fn ask(&self, _: &Destination, _: std::os::fd::BorrowedFd<'_>) -> Option<bool> {
            None
        }
        fn note(&self, line: &str) {
            self.0.lock().unwrap().push(line.into());
        }
        fn secret(&self, bytes: &[u8]) -> Option<String> {
            memchr::memmem::find(bytes, b"SECRET-TOKEN").map(|_| "test-rule".into())
        }
    }

    /// An origin that answers each connection with what it read (its first request), then
    /// closes; what it read goes to the channel.
    fn origin() -> (u16, std::sync::mpsc::Receiver<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                s.set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                let mut got = Vec::new();
                let mut b = [0u8; 65536];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&b[..n]);
                }
                let body = format!("read {}", got.len());
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{body}",
                    body.len()
                );
                let _ = tx.send(got);
            }
        });
        (port, rx)
    }

    /// Runs `client` against a proxy allowing `127.0.0.1:port`; returns what it returned
    /// and the connections.
    fn through<T>(port: u16, client: impl FnOnce(u16) -> T) -> (T, Vec<Connection>, Vec<String>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy_port = l.local_addr().unwrap().port();
        let cfg = Config::new(
            Rules::parse(&[format!("127.0.0.1:{port}")], &[] as &[&str]).unwrap(),
            false,
        );
        let hooks = Kept::default();
        let (out, conns) = std::thread::scope(|s| {
            let mut h = start(s, Listen::Ready(l.into()), &cfg, &hooks).unwrap();
            let out = client(proxy_port);
            std::thread::sleep(Duration::from_millis(100));
            h.stop();
            (out, h)
        });
        let conns = conns.connections();
        (out, conns, hooks.0.into_inner().unwrap())
    }

    fn exchange(proxy: u16, parts: &[&[u8]]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", proxy)).unwrap();
        for p in parts {
            s.write_all(p).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = s.shutdown(Shutdown::Write);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn a_secret_split_across_writes_never_reaches_the_origin() {
        let (port, rx) = origin();
        let head = format!(
            "POST http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 20\r\n\r\n"
        );
        let (answer, conns, notes) = through(port, |p| {
            // What comes with the head is the body's first part: the attacker's case.
            exchange(p, &[format!("{head}abcdSECRET-").as_bytes(), b"TOKENxyz"])
        });
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert!(notes[0].contains("[rule secrets.input]"), "{notes:?}");
        assert_eq!(conns[0].rule, "secrets.input");
        assert!(!conns[0].allowed);
        // The origin got the head at most, never a byte of the secret.
        let got = rx.recv_timeout(Duration::from_secs(2)).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&got).contains("SECRET"), "{got:?}");
    }

    #[test]
    fn a_chunked_body_ends_and_nothing_after_it_is_forwarded() {
        let (port, rx) = origin();
        let head = format!(
            "POST http://127.0.0.1:{port}/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: other\r\n\r\n"
        );
        let (answer, conns, _) = through(port, |p| exchange(p, &[head.as_bytes()]));
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("Connection: close"), "{answer}");
        let got = String::from_utf8(rx.recv_timeout(Duration::from_secs(2)).unwrap()).unwrap();
        assert!(
            got.ends_with("\r\n\r\nb\r\nhello world\r\n0\r\n\r\n"),
            "{got:?}"
        );
        assert!(
            !got.contains("smuggled") && got.contains("Connection: close"),
            "{got:?}"
        );
        assert!(conns[0].allowed && conns[0].protocol == "http");
        assert_eq!(conns[0].bytes_up, got.len() as u64);
    }

    #[test]
    fn ambiguous_lengths_and_unlisted_destinations_are_refused() {
        let (port, _rx) = origin();
        let two = format!(
            "POST http://127.0.0.1:{port}/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 60\r\n\r\nhello"
        );
        let (answer, conns, _) = through(port, |p| exchange(p, &[two.as_bytes()]));
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(!conns[0].allowed);
        // Another port of the same address: no rule names it.
        let other = format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", port ^ 1);
        let (answer, conns, notes) = through(port, |p| exchange(p, &[other.as_bytes()]));
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert_eq!(conns[0].rule, "network.address");
        assert!(
            notes[0].starts_with("gateway: network: refused 127.0.0.1:"),
            "{notes:?}"
        );
        // SOCKS5 to the allowed address tunnels; the tunnel's bytes are counted.
        let mut req = vec![5u8, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1];
        req.extend_from_slice(&port.to_be_bytes());
        let (answer, conns, _) = through(port, |p| {
            let mut s = TcpStream::connect(("127.0.0.1", p)).unwrap();
            s.write_all(&req).unwrap();
            let mut r = [0u8; 12];
            s.read_exact(&mut r).unwrap();
            s.write_all(b"ping").unwrap();
            s.shutdown(Shutdown::Write).unwrap();
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out);
            (r, out)
        });
        assert_eq!(&answer.0[..4], &[5, 0, 5, 0][..]);
        assert!(String::from_utf8_lossy(&answer.1).ends_with("read 4"));
        assert_eq!((conns[0].protocol, conns[0].bytes_up), ("socks5", 4));
    }
}
