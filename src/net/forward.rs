//! The plaintext forward path of the egress proxy (`super::proxy`): the request head
//! rewritten for the origin, the body scanned in windows and sent (a chunked body decoded,
//! scanned and re-chunked), and the response head made to say `Connection: close`. Apart
//! from the proxy's connection handling because it is a seam of its own: what leaves in
//! plaintext and how a request is framed.

use super::parse;
use super::proxy::{Hooks, pump};
use std::io::{Read, Write};
use std::net::TcpStream;

/// How a request's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Body {
    /// `Content-Length` bytes (0 without one).
    Length(u64),
    /// `Transfer-Encoding: chunked`: decoded, scanned and sent re-chunked.
    Chunked,
}

/// The request head to send upstream, and how its body is framed. Refused: a length
/// that is not one, two lengths, a length with a transfer coding, a coding other than
/// `chunked` (what a server and the proxy could read differently, smuggling a second
/// request past the decision).
pub(super) fn rewrite_request(
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
pub(super) enum BodySent {
    Sent(u64),
    Secret(u64, String),
}

/// Bytes held back from each scanned window, so that a secret across two reads is seen
/// whole before any of it leaves.
pub(super) const SCAN_OVERLAP: usize = 8 * 1024;

/// Sends a request body (`early`, what came with the head, then the rest from the client)
/// upstream, scanning it in windows: a byte is forwarded only once it has been scanned with
/// the [`SCAN_OVERLAP`] bytes after it (or the body has ended). A chunked body is decoded,
/// scanned as its payload, and sent re-chunked; nothing after its last chunk is sent.
pub(super) fn send_body(
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
pub(super) fn respond(mut up: &TcpStream, mut client: &TcpStream) -> u64 {
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
