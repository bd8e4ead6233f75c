//! The first bytes a client sends the proxy: an HTTP proxy request head (`CONNECT` or an
//! absolute-form request) or a SOCKS5 greeting and `CONNECT` request.
//!
//! Every parser here is incremental and sans-IO: it takes the bytes received so far and
//! answers `Ok(None)` when it needs more, `Ok(Some(..))` with how many bytes it used, or a
//! typed error. It is bounded (a head over [`MAX_HEAD`] bytes or with over [`MAX_HEADERS`]
//! headers is an error, whatever follows) and never panics (`fuzz/fuzz_targets/proxy_request.rs`).
//!
//! HTTP is parsed by `httparse` (hyper's parser). SOCKS5 (RFC 1928) is parsed here by hand:
//! the two messages are a few fixed fields, and the SOCKS crates either own the socket (tokio
//! servers) or are not kept; none exposes a sans-IO parser the proxy could drive and fuzz.

use super::rules::{Destination, Host, HostError, parse_host, parse_port};

/// The largest HTTP request head accepted (request line and headers, with the blank line).
pub const MAX_HEAD: usize = 16 * 1024;

/// The most headers an HTTP request head may have.
pub const MAX_HEADERS: usize = 64;

/// Which protocol a client speaks, from its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// SOCKS version 5 (first byte `0x05`).
    Socks5,
    /// Anything else is read as HTTP (an HTTP method starts with a letter; what is not HTTP
    /// fails to parse as it).
    Http,
}

/// The protocol a connection speaks, from its first byte.
pub fn sniff(first: u8) -> Protocol {
    if first == SOCKS_VERSION {
        Protocol::Socks5
    } else {
        Protocol::Http
    }
}

/// What an HTTP proxy request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// `CONNECT host:port`: a tunnel.
    Connect,
    /// An absolute-form request (`GET http://host/path`), to forward with `path` as its
    /// origin-form target.
    Forward {
        /// The path and query (`/` when the target had none).
        path: String,
    },
}

/// A parsed HTTP proxy request head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    /// The method, as sent (`CONNECT`, `GET`, …).
    pub method: String,
    /// Tunnel or forward.
    pub kind: RequestKind,
    /// Where the client wants to go.
    pub destination: Destination,
    /// The minor HTTP version (`0` for HTTP/1.0, `1` for HTTP/1.1).
    pub version: u8,
    /// How many bytes the head took, blank line included: the body or tunnel data start here.
    pub head_len: usize,
}

/// Why an HTTP proxy request head was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The head is longer than [`MAX_HEAD`].
    #[error("the request head is over {MAX_HEAD} bytes")]
    TooLarge,
    /// More than [`MAX_HEADERS`] headers.
    #[error("the request has over {MAX_HEADERS} headers")]
    TooManyHeaders,
    /// Not HTTP/1.x syntax.
    #[error("malformed request head: {0}")]
    Malformed(String),
    /// An origin-form or asterisk-form target (`GET /path`): not a proxy request.
    #[error(
        "{target:?} is not a proxy request target (absolute `http://host/path`, or `CONNECT host:port`)"
    )]
    NotProxyRequest {
        /// The target, as sent (truncated).
        target: String,
    },
    /// An absolute-form target with a scheme other than `http`.
    #[error("the scheme {scheme:?} is not proxied (use `http://`, or `CONNECT` for TLS)")]
    Scheme {
        /// The scheme, as sent (truncated).
        scheme: String,
    },
    /// A target with credentials (`http://user@host/`), refused rather than guessed at.
    #[error("the target holds user information (`user@`)")]
    UserInfo,
    /// The target's host or port is not valid.
    #[error("the request target: {0}")]
    Target(#[from] HostError),
    /// A forward request whose `Host` header names another host than its target.
    #[error("the Host header {header:?} names another host than the target {target}")]
    HostMismatch {
        /// The target's destination.
        target: String,
        /// The header, as sent (truncated).
        header: String,
    },
    /// More than one `Host` header.
    #[error("the request has more than one Host header")]
    DuplicateHost,
}

fn truncated(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Parses an HTTP proxy request head from the bytes received so far: `Ok(None)` when it is
/// not complete yet (and still under [`MAX_HEAD`]).
pub fn parse_http(buf: &[u8]) -> Result<Option<HttpRequest>, HttpError> {
    let window = &buf[..buf.len().min(MAX_HEAD)];
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(window) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => return Err(HttpError::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::TooManyHeaders),
        Err(e) => return Err(HttpError::Malformed(e.to_string())),
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(HttpError::Malformed("incomplete request line".into()));
    };
    // Methods are case-sensitive (RFC 9110 9.1): `connect` is not a tunnel, and as a forward
    // request it has no absolute target.
    let (kind, destination) = if method == "CONNECT" {
        (RequestKind::Connect, Destination::parse(target, None)?)
    } else {
        let (destination, path) = absolute_form(target)?;
        check_host_header(req.headers, &destination)?;
        (RequestKind::Forward { path }, destination)
    };
    Ok(Some(HttpRequest {
        method: method.to_owned(),
        kind,
        destination,
        version,
        head_len,
    }))
}

/// Splits `http://authority/path?query` into its destination (port 80 by default) and its
/// origin-form target.
fn absolute_form(target: &str) -> Result<(Destination, String), HttpError> {
    let Some((scheme, rest)) = target.split_once("://") else {
        return Err(HttpError::NotProxyRequest {
            target: truncated(target),
        });
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(HttpError::Scheme {
            scheme: truncated(scheme),
        });
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.contains('@') {
        return Err(HttpError::UserInfo);
    }
    if path.contains('#') {
        return Err(HttpError::Malformed(
            "a fragment in the request target".into(),
        ));
    }
    let destination = Destination::parse(authority, Some(80))?;
    let path = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    Ok((destination, path))
}

/// A forward request's `Host` header, when present, must name its target (a server behind a
/// shared front would otherwise serve the header's host: domain fronting past the allowlist).
fn check_host_header(
    headers: &[httparse::Header<'_>],
    target: &Destination,
) -> Result<(), HttpError> {
    let mut hosts = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"));
    let Some(host) = hosts.next() else {
        return Ok(());
    };
    if hosts.next().is_some() {
        return Err(HttpError::DuplicateHost);
    }
    let text = String::from_utf8_lossy(host.value);
    let mismatch = || HttpError::HostMismatch {
        target: target.to_string(),
        header: truncated(&text),
    };
    match Destination::parse(text.trim(), Some(80)) {
        Ok(d) if d == *target => Ok(()),
        _ => Err(mismatch()),
    }
}

/// The SOCKS protocol version this proxy speaks.
pub const SOCKS_VERSION: u8 = 5;

/// The SOCKS5 method "no authentication required".
pub const METHOD_NO_AUTH: u8 = 0x00;

/// The SOCKS5 method reply "no acceptable methods".
pub const METHOD_NONE_ACCEPTABLE: u8 = 0xff;

/// A SOCKS5 greeting: the authentication methods the client offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Greeting {
    /// The methods, as sent (1–255 of them).
    pub methods: Vec<u8>,
    /// How many bytes the greeting took.
    pub len: usize,
}

impl Greeting {
    /// Whether the client offers "no authentication" (the only method the proxy accepts).
    pub fn offers_no_auth(&self) -> bool {
        self.methods.contains(&METHOD_NO_AUTH)
    }

    /// The proxy's two-byte answer: no authentication, or no acceptable method.
    pub fn reply(&self) -> [u8; 2] {
        if self.offers_no_auth() {
            [SOCKS_VERSION, METHOD_NO_AUTH]
        } else {
            [SOCKS_VERSION, METHOD_NONE_ACCEPTABLE]
        }
    }
}

/// A SOCKS5 `CONNECT` request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocksRequest {
    /// Where the client wants to go (a domain name is resolved by the proxy).
    pub destination: Destination,
    /// How many bytes the request took.
    pub len: usize,
}

/// SOCKS5 reply codes (RFC 1928 section 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Reply {
    /// Succeeded.
    Succeeded = 0,
    /// General SOCKS server failure.
    GeneralFailure = 1,
    /// Connection not allowed by ruleset.
    NotAllowed = 2,
    /// Network unreachable.
    NetworkUnreachable = 3,
    /// Host unreachable.
    HostUnreachable = 4,
    /// Connection refused.
    ConnectionRefused = 5,
    /// TTL expired.
    TtlExpired = 6,
    /// Command not supported.
    CommandNotSupported = 7,
    /// Address type not supported.
    AddressTypeNotSupported = 8,
}

impl Reply {
    /// The reply message with this code and an unspecified IPv4 bound address.
    pub fn message(self) -> [u8; 10] {
        [SOCKS_VERSION, self as u8, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0]
    }
}

const CMD_CONNECT: u8 = 1;
const ATYP_IPV4: u8 = 1;
const ATYP_DOMAIN: u8 = 3;
const ATYP_IPV6: u8 = 4;

/// Why a SOCKS5 message was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SocksError {
    /// A version byte other than 5.
    #[error("SOCKS version {0} (only 5 is spoken)")]
    Version(u8),
    /// A greeting offering no method.
    #[error("the SOCKS greeting offers no authentication method")]
    NoMethods,
    /// A command other than `CONNECT` (`BIND`, `UDP ASSOCIATE`, …).
    #[error("SOCKS command {0} is not supported (only CONNECT)")]
    Command(u8),
    /// A reserved byte that is not zero.
    #[error("the SOCKS request's reserved byte is {0}, not 0")]
    Reserved(u8),
    /// An address type other than IPv4, domain name, IPv6.
    #[error("SOCKS address type {0} is not supported")]
    AddressType(u8),
    /// A domain name that is empty, not ASCII or not a valid host.
    #[error("the SOCKS destination: {0}")]
    Host(#[from] HostError),
}

impl SocksError {
    /// The reply code the proxy answers this error with (the greeting's errors have none:
    /// close the connection).
    pub fn reply(&self) -> Option<Reply> {
        match self {
            SocksError::Version(_) | SocksError::NoMethods => None,
            SocksError::Command(_) => Some(Reply::CommandNotSupported),
            SocksError::AddressType(_) => Some(Reply::AddressTypeNotSupported),
            SocksError::Reserved(_) | SocksError::Host(_) => Some(Reply::GeneralFailure),
        }
    }
}

/// Parses a SOCKS5 greeting (`VER NMETHODS METHODS…`).
pub fn parse_socks_greeting(buf: &[u8]) -> Result<Option<Greeting>, SocksError> {
    let Some(&version) = buf.first() else {
        return Ok(None);
    };
    if version != SOCKS_VERSION {
        return Err(SocksError::Version(version));
    }
    let Some(&n) = buf.get(1) else {
        return Ok(None);
    };
    if n == 0 {
        return Err(SocksError::NoMethods);
    }
    let len = 2 + usize::from(n);
    Ok(buf.get(2..len).map(|methods| Greeting {
        methods: methods.to_vec(),
        len,
    }))
}

/// Parses a SOCKS5 request (`VER CMD RSV ATYP DST.ADDR DST.PORT`); only `CONNECT` is
/// accepted. A domain name that is an address literal (`"127.0.0.1"`) is that address.
pub fn parse_socks_request(buf: &[u8]) -> Result<Option<SocksRequest>, SocksError> {
    let Some(&version) = buf.first() else {
        return Ok(None);
    };
    if version != SOCKS_VERSION {
        return Err(SocksError::Version(version));
    }
    let Some(&cmd) = buf.get(1) else {
        return Ok(None);
    };
    if cmd != CMD_CONNECT {
        return Err(SocksError::Command(cmd));
    }
    let Some(&rsv) = buf.get(2) else {
        return Ok(None);
    };
    if rsv != 0 {
        return Err(SocksError::Reserved(rsv));
    }
    let Some(&atyp) = buf.get(3) else {
        return Ok(None);
    };
    let (addr_len, addr_start) = match atyp {
        ATYP_IPV4 => (4, 4),
        ATYP_IPV6 => (16, 4),
        ATYP_DOMAIN => match buf.get(4) {
            None => return Ok(None),
            Some(0) => return Err(HostError::Empty.into()),
            Some(&n) => (usize::from(n), 5),
        },
        other => return Err(SocksError::AddressType(other)),
    };
    let end = addr_start + addr_len;
    let (Some(addr), Some(port)) = (buf.get(addr_start..end), buf.get(end..end + 2)) else {
        return Ok(None);
    };
    let host = match (atyp, <[u8; 4]>::try_from(addr), <[u8; 16]>::try_from(addr)) {
        (ATYP_IPV4, Ok(a), _) => Host::Ip(std::net::Ipv4Addr::from(a).into()),
        (ATYP_IPV6, _, Ok(a)) => Host::Ip(std::net::Ipv6Addr::from(a).into()),
        _ => {
            let name = std::str::from_utf8(addr).map_err(|_| HostError::NonAscii)?;
            // A bracketed IPv6 literal is what some clients send as a name.
            let name = name
                .strip_prefix('[')
                .and_then(|n| n.strip_suffix(']'))
                .unwrap_or(name);
            parse_host(name)?
        }
    };
    let port = u16::from_be_bytes([port[0], port[1]]);
    let port = parse_port(&port.to_string())?;
    Ok(Some(SocksRequest {
        destination: Destination { host, port },
        len: end + 2,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn name(n: &str, port: u16) -> Destination {
        Destination {
            host: Host::Name(n.into()),
            port,
        }
    }

    fn ip(a: &str, port: u16) -> Destination {
        Destination {
            host: Host::Ip(a.parse::<IpAddr>().unwrap()),
            port,
        }
    }

    fn http(s: &str) -> Result<Option<HttpRequest>, HttpError> {
        parse_http(s.as_bytes())
    }

    #[test]
    fn connect_is_parsed_with_its_head_length() {
        let head = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
        let mut bytes = head.as_bytes().to_vec();
        bytes.extend_from_slice(b"\x16\x03\x01tls bytes");
        let r = parse_http(&bytes).unwrap().unwrap();
        assert_eq!(r.method, "CONNECT");
        assert_eq!(r.kind, RequestKind::Connect);
        assert_eq!(r.destination, name("example.com", 443));
        assert_eq!(r.head_len, head.len());
        assert_eq!(r.version, 1);
        let r = http("CONNECT [::1]:8080 HTTP/1.0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.destination, ip("::1", 8080));
        assert_eq!(r.version, 0);
        assert!(matches!(
            http("connect example.com:443 HTTP/1.1\r\n\r\n"),
            Err(HttpError::NotProxyRequest { .. })
        ));
        let r = http("CONNECT EXAMPLE.com.:443 HTTP/1.1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.destination, name("example.com", 443));
    }

    #[test]
    fn connect_needs_a_valid_port() {
        for bad in [
            "example.com",
            "example.com:",
            "example.com:0",
            "example.com:65536",
            "::1:443",
            "[::1]",
            "example.com:443/x",
            "http://example.com:443",
        ] {
            let got = http(&format!("CONNECT {bad} HTTP/1.1\r\n\r\n"));
            assert!(matches!(got, Err(HttpError::Target(_))), "{bad}: {got:?}");
        }
    }

    #[test]
    fn absolute_form_requests_are_forwarded_with_their_path() {
        let r = http(
            "GET http://example.com/a/b?c=d HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.destination, name("example.com", 80));
        assert_eq!(
            r.kind,
            RequestKind::Forward {
                path: "/a/b?c=d".into()
            }
        );
        let r = http("POST HTTP://Example.COM:8080 HTTP/1.1\r\nHost: example.com:8080\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.destination, name("example.com", 8080));
        assert_eq!(r.kind, RequestKind::Forward { path: "/".into() });
        let r = http("GET http://[::1]:3000?x HTTP/1.1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.destination, ip("::1", 3000));
        assert_eq!(r.kind, RequestKind::Forward { path: "/?x".into() });
    }

    #[test]
    fn forward_requests_are_refused_when_not_plain_proxy_http() {
        type Check = fn(&HttpError) -> bool;
        let cases: &[(&str, Check)] = &[
            ("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", |e| {
                matches!(e, HttpError::NotProxyRequest { .. })
            }),
            ("OPTIONS * HTTP/1.1\r\n\r\n", |e| {
                matches!(e, HttpError::NotProxyRequest { .. })
            }),
            ("GET https://example.com/ HTTP/1.1\r\n\r\n", |e| {
                matches!(e, HttpError::Scheme { .. })
            }),
            ("GET ftp://example.com/ HTTP/1.1\r\n\r\n", |e| {
                matches!(e, HttpError::Scheme { .. })
            }),
            ("GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n", |e| {
                *e == HttpError::UserInfo
            }),
            ("GET http://allowed.com@evil.com/ HTTP/1.1\r\n\r\n", |e| {
                *e == HttpError::UserInfo
            }),
            ("GET http://example.com#x HTTP/1.1\r\n\r\n", |e| {
                matches!(e, HttpError::Malformed(_))
            }),
            ("GET http:/// HTTP/1.1\r\n\r\n", |e| {
                matches!(e, HttpError::Target(HostError::Empty))
            }),
            ("GET http://127.1/ HTTP/1.1\r\n\r\n", |e| {
                matches!(e, HttpError::Target(HostError::NumericName))
            }),
            ("GET http://b%C3%BCcher.de/ HTTP/1.1\r\n\r\n", |e| {
                matches!(e, HttpError::Target(HostError::BadChar { ch: '%' }))
            }),
            ("GET http://a.com:99999/ HTTP/1.1\r\n\r\n", |e| {
                matches!(e, HttpError::Target(HostError::BadPort { .. }))
            }),
            ("GET http://a.com\\@b.com/ HTTP/1.1\r\n\r\n", |e| {
                matches!(e, HttpError::UserInfo)
            }),
            (
                "GET http://a.com/ HTTP/1.1\r\nHost: evil.com\r\n\r\n",
                |e| matches!(e, HttpError::HostMismatch { .. }),
            ),
            (
                "GET http://a.com/ HTTP/1.1\r\nHost: a.com:8080\r\n\r\n",
                |e| matches!(e, HttpError::HostMismatch { .. }),
            ),
            (
                "GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nhost: a.com\r\n\r\n",
                |e| *e == HttpError::DuplicateHost,
            ),
            ("GET http://a.com/ HTTP/2.0\r\n\r\n", |e| {
                matches!(e, HttpError::Malformed(_))
            }),
            ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", |e| {
                matches!(e, HttpError::Malformed(_))
            }),
            ("GET  http://a.com/ HTTP/1.1\r\n\r\n", |e| {
                matches!(e, HttpError::Malformed(_))
            }),
            ("GET http://a.com/ HTTP/1.1\r\nBad Header: x\r\n\r\n", |e| {
                matches!(e, HttpError::Malformed(_))
            }),
            ("\x16\x03\x01\x02\x00\x01\x00\x01\x7f\x03\x03", |e| {
                matches!(e, HttpError::Malformed(_))
            }),
        ];
        for (req, ok) in cases {
            let got = http(req);
            match &got {
                Err(e) if ok(e) => {}
                _ => panic!("{req:?}: {got:?}"),
            }
        }
        // The same Host in another case or with a trailing dot is the same host.
        assert!(
            http("GET http://a.com/ HTTP/1.1\r\nHOST: A.com.:80\r\n\r\n")
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn heads_are_parsed_incrementally_byte_by_byte() {
        for head in [
            "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nUser-Agent: curl/8\r\n\r\n",
            "GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n",
        ] {
            let bytes = head.as_bytes();
            for end in 0..bytes.len() {
                assert_eq!(parse_http(&bytes[..end]), Ok(None), "{head:?} at {end}");
            }
            let r = parse_http(bytes).unwrap().unwrap();
            assert_eq!(r.head_len, bytes.len());
        }
    }

    #[test]
    fn oversized_heads_and_too_many_headers_are_refused() {
        let mut head = String::from("GET http://a.com/ HTTP/1.1\r\nX: ");
        head.push_str(&"a".repeat(MAX_HEAD));
        assert_eq!(http(&head), Err(HttpError::TooLarge));
        head.push_str("\r\n\r\n");
        assert_eq!(http(&head), Err(HttpError::TooLarge));
        // Just under the limit, complete, is fine; one byte more is not.
        let base = "GET http://a.com/ HTTP/1.1\r\nX: \r\n\r\n";
        let fill = "a".repeat(MAX_HEAD - base.len());
        let exact = format!("GET http://a.com/ HTTP/1.1\r\nX: {fill}\r\n\r\n");
        assert_eq!(exact.len(), MAX_HEAD);
        assert_eq!(http(&exact).unwrap().unwrap().head_len, MAX_HEAD);
        let over = format!("GET http://a.com/ HTTP/1.1\r\nX: a{fill}\r\n\r\n");
        assert_eq!(http(&over), Err(HttpError::TooLarge));
        // An incomplete head exactly at the limit is too large (more bytes cannot help).
        assert_eq!(parse_http(&exact.as_bytes()[..MAX_HEAD - 1]), Ok(None));
        assert_eq!(parse_http(&[b'G'; MAX_HEAD]), Err(HttpError::TooLarge));
        let mut many = String::from("GET http://a.com/ HTTP/1.1\r\n");
        for i in 0..=MAX_HEADERS {
            many.push_str(&format!("X-{i}: v\r\n"));
        }
        many.push_str("\r\n");
        assert_eq!(http(&many), Err(HttpError::TooManyHeaders));
        let mut enough = String::from("CONNECT a.com:443 HTTP/1.1\r\n");
        for i in 0..MAX_HEADERS {
            enough.push_str(&format!("X-{i}: v\r\n"));
        }
        enough.push_str("\r\n");
        assert!(http(&enough).unwrap().is_some());
    }

    #[test]
    fn sniffing_tells_socks5_from_http() {
        assert_eq!(sniff(5), Protocol::Socks5);
        assert_eq!(sniff(b'C'), Protocol::Http);
        assert_eq!(sniff(4), Protocol::Http);
    }

    #[test]
    fn socks5_greetings() {
        let g = parse_socks_greeting(&[5, 2, 0, 2]).unwrap().unwrap();
        assert_eq!(g.methods, [0, 2]);
        assert_eq!(g.len, 4);
        assert!(g.offers_no_auth());
        assert_eq!(g.reply(), [5, 0]);
        let g = parse_socks_greeting(&[5, 1, 2, 9, 9]).unwrap().unwrap();
        assert_eq!(g.len, 3);
        assert_eq!(g.reply(), [5, 0xff]);
        for end in 0..4 {
            assert_eq!(
                parse_socks_greeting(&[5, 2, 0, 2][..end]),
                Ok(None),
                "{end}"
            );
        }
        assert_eq!(
            parse_socks_greeting(&[4, 1, 0]),
            Err(SocksError::Version(4))
        );
        assert_eq!(
            parse_socks_greeting(&[0x47]),
            Err(SocksError::Version(0x47))
        );
        assert_eq!(parse_socks_greeting(&[5, 0]), Err(SocksError::NoMethods));
        let all: Vec<u8> = [5, 255].into_iter().chain(0..=254).collect();
        assert_eq!(parse_socks_greeting(&all).unwrap().unwrap().len, 257);
    }

    fn socks(atyp: u8, addr: &[u8], port: u16) -> Vec<u8> {
        let mut v = vec![5, 1, 0, atyp];
        v.extend_from_slice(addr);
        v.extend_from_slice(&port.to_be_bytes());
        v
    }

    fn domain(n: &[u8]) -> Vec<u8> {
        let mut v = vec![u8::try_from(n.len()).unwrap()];
        v.extend_from_slice(n);
        v
    }

    #[test]
    fn socks5_requests_with_each_address_type() {
        let cases = [
            (socks(1, &[93, 184, 216, 34], 443), ip("93.184.216.34", 443)),
            (
                socks(4, &std::net::Ipv6Addr::LOCALHOST.octets(), 8080),
                ip("::1", 8080),
            ),
            (
                socks(3, &domain(b"Example.COM."), 80),
                name("example.com", 80),
            ),
            (socks(3, &domain(b"127.0.0.1"), 80), ip("127.0.0.1", 80)),
            (socks(3, &domain(b"[::1]"), 80), ip("::1", 80)),
            (socks(3, &domain(b"::1"), 80), ip("::1", 80)),
            (
                socks(3, &domain(b"localhost"), 3000),
                name("localhost", 3000),
            ),
        ];
        for (bytes, want) in cases {
            let mut with_data = bytes.clone();
            with_data.extend_from_slice(b"GET / HTTP/1.1\r\n");
            let r = parse_socks_request(&with_data).unwrap().unwrap();
            assert_eq!(r.destination, want);
            assert_eq!(r.len, bytes.len());
            for end in 0..bytes.len() {
                assert_eq!(
                    parse_socks_request(&bytes[..end]),
                    Ok(None),
                    "{want} at {end}"
                );
            }
        }
    }

    #[test]
    fn bad_socks5_requests_are_refused_with_their_reply() {
        let cases = [
            (
                vec![4, 1, 0, 1, 1, 2, 3, 4, 0, 80],
                SocksError::Version(4),
                None,
            ),
            (
                vec![5, 2, 0, 1],
                SocksError::Command(2),
                Some(Reply::CommandNotSupported),
            ),
            (
                vec![5, 3, 0, 1],
                SocksError::Command(3),
                Some(Reply::CommandNotSupported),
            ),
            (
                vec![5, 0],
                SocksError::Command(0),
                Some(Reply::CommandNotSupported),
            ),
            (
                vec![5, 1, 1, 1],
                SocksError::Reserved(1),
                Some(Reply::GeneralFailure),
            ),
            (
                vec![5, 1, 0, 2],
                SocksError::AddressType(2),
                Some(Reply::AddressTypeNotSupported),
            ),
            (
                vec![5, 1, 0, 0],
                SocksError::AddressType(0),
                Some(Reply::AddressTypeNotSupported),
            ),
            (
                vec![5, 1, 0, 3, 0],
                HostError::Empty.into(),
                Some(Reply::GeneralFailure),
            ),
            (
                socks(1, &[1, 2, 3, 4], 0),
                HostError::BadPort { port: "0".into() }.into(),
                Some(Reply::GeneralFailure),
            ),
            (
                socks(3, &domain("bücher.de".as_bytes()), 80),
                HostError::NonAscii.into(),
                Some(Reply::GeneralFailure),
            ),
            (
                socks(3, &domain(b"\xff\xfe"), 80),
                HostError::NonAscii.into(),
                Some(Reply::GeneralFailure),
            ),
            (
                socks(3, &domain(b"a b"), 80),
                HostError::BadChar { ch: ' ' }.into(),
                Some(Reply::GeneralFailure),
            ),
            (
                socks(3, &domain(b"a.com:80"), 80),
                HostError::BadBracket.into(),
                Some(Reply::GeneralFailure),
            ),
            (
                socks(3, &domain(b"2130706433"), 80),
                HostError::NumericName.into(),
                Some(Reply::GeneralFailure),
            ),
        ];
        for (bytes, want, reply) in cases {
            let got = parse_socks_request(&bytes);
            assert_eq!(got, Err(want.clone()), "{bytes:?}");
            assert_eq!(want.reply(), reply, "{want}");
        }
        let long = "a".repeat(255);
        let got = parse_socks_request(&socks(3, &domain(long.as_bytes()), 80));
        assert_eq!(got, Err(HostError::NameTooLong.into()));
        let label = format!("{}.com", "a".repeat(64));
        let got = parse_socks_request(&socks(3, &domain(label.as_bytes()), 80));
        assert_eq!(got, Err(HostError::LabelTooLong.into()));
        assert_eq!(Reply::NotAllowed.message(), [5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
    }
}
