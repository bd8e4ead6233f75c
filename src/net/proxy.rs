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

use super::forward::{BodySent, respond, rewrite_request, send_body};
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
pub(super) fn pump(from: &TcpStream, to: &TcpStream) -> u64 {
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

#[cfg(test)]
#[path = "proxy_tests.rs"]
mod tests;
