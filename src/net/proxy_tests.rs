//! Tests of the egress proxy (`super`): real sockets on the host's loopback, an origin
//! that reports what it read, and hooks that keep the proxy's notes.

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
