//! The daemon's socket protocol: typed requests and replies, versioned, framed as
//! length-prefixed JSON.
//!
//! # Frames
//!
//! A message is a 4-byte big-endian length followed by that many bytes of JSON (one object
//! with a `type`). The client's first message is a [`ClientMsg::Request`]: the protocol
//! [`PROTOCOL_VERSION`], a [`RequestContext`] (working directory, environment, session, how
//! its streams travel, whether it answers approval prompts) and a [`RequestBody`] (what to
//! do: a typed [`RequestBody::Call`] — every tool and maintenance command, see
//! [`crate::broker::request`] — or [`RequestBody::Hello`]). With [`StdioMode::Passed`], the client's stdin, stdout and
//! stderr travel in the same `sendmsg` (`SCM_RIGHTS`), so that the command's streams are the
//! client's own (a terminal stays a terminal, a pipe a pipe) and nothing is copied through
//! the daemon; with [`StdioMode::Frames`] none do, stdin is empty (or the call's `stdin`
//! text) and output comes back as [`ServerMsg::Output`] frames. The daemon answers
//! [`ServerMsg::Ask`] when a person must approve (the client asks on its terminal and sends
//! [`ClientMsg::Answer`]) and ends with [`ServerMsg::Done`] (or [`ServerMsg::Hello`] for a
//! hello) or [`ServerMsg::Error`].
//!
//! # Identity
//!
//! Who calls is never something the client says. No request type has a uid, gid, pid or
//! group field, and every object refuses unknown fields, so a request claiming one is
//! refused whole; the daemon takes the caller's uid, gid and pid from the socket's
//! `SO_PEERCRED` and its groups from `SO_PEERGROUPS`, and builds the call's
//! [`crate::broker::client::Client`] from those plus the request's context. Whether a
//! stream is a terminal is measured on the fds received, not claimed either (a stdin
//! claimed to be a terminal would skip the secret scan of what is piped in).
//!
//! # Versioning
//!
//! [`PROTOCOL_VERSION`] is bumped on **any** change to these types or their serde
//! representation (a field, a variant, a rename, a type). A daemon refuses a request of
//! another version before decoding the rest of it ([`RequestError::VersionMismatch`], which
//! names both versions and what to do), in an [`ServerMsg::Error`] frame whose shape has
//! not changed since version 1, so that a client of any version can print why.
//! `tests::the_schema_is_pinned_to_its_version` holds the rule: it serializes a sample of
//! every variant (an exhaustive `match` makes a new variant fail to compile until it has a
//! sample) and compares the digest with the one recorded for the current version; a change
//! without a bump fails it, and the fix is a bump plus a new pin, never an edited one.
//! History: 1, the CLI's argv with cwd and environment; 2, typed requests with a context;
//! 6, `Request::Http` and its report (`Outcome::Http`).
//!
//! Written by hand (no crate frames JSON this way and passes fds with it); the decoder is a
//! pure function of the bytes, fuzzed by `fuzz/fuzz_targets/daemon_proto.rs`.

use serde::{Deserialize, Serialize};

/// The protocol version a client speaks in its request; bumped on any change to the types of
/// this module (see the module's documentation).
pub const PROTOCOL_VERSION: u32 = 7;

/// The largest message either side accepts (a command line is at most ~2 MiB on Linux; its
/// environment counts too).
pub const MAX_MESSAGE: usize = 8 << 20;

/// The largest report sent whole in [`ServerMsg::Done`]; a larger one goes in pieces.
pub const REPORT_INLINE: usize = 4 << 20;

/// The largest piece of a report ([`ServerMsg::ReportPart`]), in bytes of its JSON text:
/// carried as a JSON string, a piece grows by at most twice (each `"` and `\` escaped;
/// serde_json writes control characters as `\u00XX` already), so that its frame stays
/// within [`MAX_MESSAGE`].
pub const REPORT_PART: usize = (MAX_MESSAGE - 4096) / 2;

/// The largest report a client puts together from its pieces (a `fs read` of a large file,
/// a long `log query`): the client's own answer, bounded so that a broken daemon cannot
/// exhaust it.
pub const MAX_REPORT: usize = 1 << 30;

/// The frames that carry `report`: one [`ServerMsg::Done`], or its JSON text in
/// [`ServerMsg::ReportPart`]s (cut at character boundaries) and a `Done` without it.
pub fn report_frames(report: crate::broker::report::Report) -> Vec<ServerMsg> {
    let text = match serde_json::to_string(&report) {
        Ok(t) if t.len() > REPORT_INLINE => t,
        _ => {
            return vec![ServerMsg::Done {
                report: Some(Box::new(report)),
            }];
        }
    };
    drop(report);
    let mut frames = Vec::with_capacity(text.len() / REPORT_PART + 2);
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let mut at = rest.len().min(REPORT_PART);
        while !rest.is_char_boundary(at) {
            at -= 1;
        }
        let (piece, tail) = rest.split_at(at);
        frames.push(ServerMsg::ReportPart {
            text: piece.to_string(),
        });
        rest = tail;
    }
    frames.push(ServerMsg::Done { report: None });
    frames
}

/// What a client has of a call's report while its frames arrive ([`report_frames`]).
#[derive(Debug, Default)]
pub struct ReportPieces(String);

impl ReportPieces {
    /// Adds a piece; Err once the report would be larger than [`MAX_REPORT`].
    pub fn add(&mut self, piece: &str) -> Result<(), ProtoError> {
        if self.0.len() + piece.len() > MAX_REPORT {
            return Err(ProtoError::TooLarge((self.0.len() + piece.len()) as u64));
        }
        self.0.push_str(piece);
        Ok(())
    }

    /// The report of a [`ServerMsg::Done`]: its own, else the pieces' together.
    pub fn done(
        self,
        report: Option<Box<crate::broker::report::Report>>,
    ) -> Result<crate::broker::report::Report, ProtoError> {
        match report {
            Some(r) => Ok(*r),
            None => serde_json::from_str(&self.0).map_err(|e| ProtoError::Malformed(e.to_string())),
        }
    }
}

/// A client's message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientMsg {
    /// The call: the first message, and the only one besides answers.
    Request(Request),
    /// The answer to [`ServerMsg::Ask`].
    Answer {
        /// The pending request's id.
        id: u64,
        /// Approved?
        approve: bool,
    },
}

/// One call to the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Must be [`PROTOCOL_VERSION`].
    pub version: u32,
    /// Where and how the call is made (never who makes it: see the module's documentation).
    pub context: RequestContext,
    /// What to do.
    pub body: RequestBody,
}

/// What the client says about its call. Deliberately no identity: the daemon fills the
/// caller's uid, gid, pid and groups from `SO_PEERCRED` into the
/// [`crate::broker::client::Client`] it builds, and a request that names any of them is
/// refused as malformed (unknown field).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestContext {
    /// The client's working directory (absolute).
    pub cwd: String,
    /// The client's environment (the command's environment is built from it, as the policy
    /// allows).
    pub env: Vec<(String, String)>,
    /// The session the call belongs to (`GATEWAY_SESSION`); when given, it is the
    /// environment's `GATEWAY_SESSION` for the call.
    pub session: Option<String>,
    /// How the call's stdin, stdout and stderr travel.
    pub stdio: StdioMode,
    /// Whether the client puts [`ServerMsg::Ask`] to a person (else it is not sent, and the
    /// question waits for `gateway approve|deny`).
    pub prompts: bool,
}

/// How a call's streams travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StdioMode {
    /// The client's stdin, stdout and stderr, passed with the request (`SCM_RIGHTS`).
    Passed,
    /// No fds: stdin is empty (or the call's `stdin`), output comes as
    /// [`ServerMsg::Output`] frames.
    Frames,
}

/// What a call asks the daemon to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RequestBody {
    /// Are you there, and which version? Answered with [`ServerMsg::Hello`]; runs nothing.
    Hello,
    /// A typed call: every tool and maintenance command, with the options of its command
    /// line ([`crate::broker::request`]). The daemon runs it as it is: it parses no command
    /// line.
    Call(Box<crate::broker::request::Invocation>),
}

/// The daemon's message.
/// (Not `Eq`: a [`crate::broker::report::Report`] is not.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ServerMsg {
    /// The answer to [`RequestBody::Hello`].
    Hello {
        /// The daemon's [`PROTOCOL_VERSION`].
        version: u32,
        /// The daemon's gateway version (`CARGO_PKG_VERSION`).
        gateway: String,
    },
    /// A person must approve: ask on the client's terminal.
    Ask {
        /// The pending request's id (`gateway approve ID` answers it too).
        id: u64,
        /// What to show.
        question: String,
    },
    /// Output of the call ([`StdioMode::Frames`] only), in the order written per stream.
    Output {
        /// Which stream.
        stream: OutStream,
        /// The bytes, base64 (standard alphabet, padded).
        #[serde(with = "b64")]
        data: Vec<u8>,
    },
    /// A piece of the call's report, when it is larger than [`REPORT_INLINE`]: its JSON
    /// text, in order, at most [`REPORT_PART`] bytes each; [`ServerMsg::Done`] without a
    /// report follows the last piece.
    ReportPart {
        /// The piece.
        text: String,
    },
    /// The call is done: its report (exit code, typed result, notes), which the client
    /// renders — here, or (`null`) the JSON text of the [`ServerMsg::ReportPart`]s before.
    Done {
        /// The call's report.
        report: Option<Box<crate::broker::report::Report>>,
    },
    /// The call could not be made (bad message, wrong version, busy, shutting down). Its
    /// shape is the same in every version, so that any client can print it.
    Error {
        /// What went wrong and what to do.
        message: String,
    },
}

/// A stream of [`ServerMsg::Output`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutStream {
    /// The call's stdout.
    Stdout,
    /// The call's stderr.
    Stderr,
}

mod b64 {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        STANDARD.decode(s).map_err(serde::de::Error::custom)
    }
}

/// Why a request is refused before anything runs, sent back as [`ServerMsg::Error`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    /// The client speaks another protocol version than this daemon.
    #[error(
        "protocol version {client} is not spoken here (this daemon speaks {daemon}): the client and the daemon are different gateway versions; restart `gateway serve` with the binary the client runs, or run the client of the daemon's version (GATEWAY_SOCKET= runs the embedded broker instead)"
    )]
    VersionMismatch {
        /// The request's version.
        client: u32,
        /// [`PROTOCOL_VERSION`].
        daemon: u32,
    },
    /// The bytes are not a request of this protocol.
    #[error(transparent)]
    Proto(#[from] ProtoError),
    /// The first message is an answer, not a request.
    #[error("the first message must be a request")]
    NotARequest,
    /// Stdio passed does not match the request's [`StdioMode`].
    #[error(
        "the request must carry the client's stdin, stdout and stderr (stdio \"passed\"), or none (stdio \"frames\"); it carried {0} fd(s)"
    )]
    Stdio(usize),
}

/// Reads a first frame's body as a request, refusing another version first: a request of
/// another version is [`RequestError::VersionMismatch`] even when the rest of it is not a
/// request of this version (its version is read alone, from the top level of the object,
/// where every version since 1 has it).
pub fn parse_request(body: &[u8]) -> Result<Request, RequestError> {
    #[derive(Deserialize)]
    struct Versioned {
        version: Option<u32>,
    }
    if let Ok(Versioned {
        version: Some(client),
    }) = serde_json::from_slice::<Versioned>(body)
        && client != PROTOCOL_VERSION
    {
        return Err(RequestError::VersionMismatch {
            client,
            daemon: PROTOCOL_VERSION,
        });
    }
    match serde_json::from_slice::<ClientMsg>(body) {
        Ok(ClientMsg::Request(r)) => Ok(r),
        Ok(ClientMsg::Answer { .. }) => Err(RequestError::NotARequest),
        Err(e) => Err(ProtoError::Malformed(e.to_string()).into()),
    }
}

/// Why a message could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtoError {
    /// The length prefix says more than [`MAX_MESSAGE`].
    #[error("message of {0} bytes is larger than the limit of {MAX_MESSAGE} bytes")]
    TooLarge(u64),
    /// The body is not a message of this protocol.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The peer closed the connection in the middle of a message.
    #[error("connection closed in the middle of a message ({have} of {want} bytes)")]
    Truncated {
        /// Bytes received.
        have: usize,
        /// Bytes announced (4 for the length prefix itself).
        want: usize,
    },
}

/// Encodes a message as a frame.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serializing these types fails only for a time before 1970 (a `SystemTime`), which no
    // request holds: the CLI makes such a time 1970 (`cli::request`). Were one to fail, the
    // empty frame is refused by the daemon as malformed.
    let body = serde_json::to_vec(msg).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// The body of the first frame of `buf` and the frame's length; `Ok(None)` when more bytes
/// are needed. An oversized length is refused before its body arrives.
fn frame(buf: &[u8]) -> Result<Option<(&[u8], usize)>, ProtoError> {
    let Some(head) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if len > MAX_MESSAGE {
        return Err(ProtoError::TooLarge(len as u64));
    }
    Ok(buf.get(4..4 + len).map(|body| (body, 4 + len)))
}

/// Decodes the first frame of `buf`: `Ok(None)` when more bytes are needed, else the message
/// and how many bytes it took. An oversized length is refused before its body arrives.
pub fn decode<T: for<'de> Deserialize<'de>>(buf: &[u8]) -> Result<Option<(T, usize)>, ProtoError> {
    let Some((body, used)) = frame(buf)? else {
        return Ok(None);
    };
    let msg = serde_json::from_slice(body).map_err(|e| ProtoError::Malformed(e.to_string()))?;
    Ok(Some((msg, used)))
}

/// Decodes the first frame of `buf` as the request that opens a call ([`parse_request`]):
/// `Ok(None)` when more bytes are needed.
pub fn decode_request(buf: &[u8]) -> Result<Option<(Request, usize)>, RequestError> {
    match frame(buf)? {
        None => Ok(None),
        Some((body, used)) => parse_request(body).map(|r| Some((r, used))),
    }
}

/// What `decode` says about a buffer at end of stream: the message, or why there is none.
pub fn decode_final<T: for<'de> Deserialize<'de>>(buf: &[u8]) -> Result<(T, usize), ProtoError> {
    match decode(buf)? {
        Some(m) => Ok(m),
        None => {
            let want = buf.get(..4).map_or(4, |h| {
                4 + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize
            });
            Err(ProtoError::Truncated {
                have: buf.len(),
                want,
            })
        }
    }
}

/// Fuzz entry: decodes `data` as a stream of client messages the way the daemon does (the
/// first as a request), and checks that what decodes re-encodes to the same message.
pub fn fuzz_decode(data: &[u8]) {
    if let Ok(Some((req, used))) = decode_request(data) {
        assert!(used >= 4 && used <= data.len());
        let again = encode(&ClientMsg::Request(req.clone()));
        // A property, asserted: what decoded re-encodes and decodes the same.
        let Ok(Some((back, n))) = decode_request(&again) else {
            panic!("a decoded request did not decode again once re-encoded");
        };
        assert_eq!(back, req);
        assert_eq!(n, again.len());
    }
    let mut rest = data;
    loop {
        match decode::<ClientMsg>(rest) {
            Ok(Some((msg, used))) => {
                assert!(used >= 4 && used <= rest.len());
                let again = encode(&msg);
                let Some((back, n)) = decode::<ClientMsg>(&again).ok().flatten() else {
                    panic!("a decoded message did not decode again once re-encoded");
                };
                assert_eq!(back, msg);
                assert_eq!(n, again.len());
                rest = &rest[used..];
            }
            Ok(None) => {
                let _ = decode_final::<ClientMsg>(rest);
                return;
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> RequestContext {
        RequestContext {
            cwd: "/tmp".into(),
            env: vec![("PATH".into(), "/usr/bin".into())],
            session: Some("s-1".into()),
            stdio: StdioMode::Passed,
            prompts: true,
        }
    }

    /// A call with every option set.
    fn call_of(request: crate::broker::request::Request) -> RequestBody {
        RequestBody::Call(Box::new(crate::broker::request::Invocation {
            options: crate::broker::request::Options {
                state_dir: Some("/s".into()),
                policy: Some("strict".into()),
                cwd: Some("/w".into()),
                json: true,
            },
            request,
        }))
    }

    fn call() -> ClientMsg {
        ClientMsg::Request(Request {
            version: PROTOCOL_VERSION,
            context: context(),
            body: call_of(crate::broker::request::Request::Exec(
                crate::broker::request::Exec {
                    argv: vec!["true".into()],
                    ..Default::default()
                },
            )),
        })
    }

    /// A sample of every variant of every type on the wire, in a fixed order.
    fn samples() -> (Vec<ClientMsg>, Vec<ServerMsg>) {
        let mut bodies = vec![RequestBody::Hello];
        bodies.extend(
            crate::broker::request::Request::samples()
                .into_iter()
                .map(call_of),
        );
        let mut client: Vec<ClientMsg> = bodies
            .into_iter()
            .zip([StdioMode::Passed, StdioMode::Frames].into_iter().cycle())
            .map(|(body, stdio)| {
                ClientMsg::Request(Request {
                    version: PROTOCOL_VERSION,
                    context: RequestContext { stdio, ..context() },
                    body,
                })
            })
            .collect();
        client.push(ClientMsg::Answer {
            id: 7,
            approve: true,
        });
        let server = vec![
            ServerMsg::Hello {
                version: PROTOCOL_VERSION,
                gateway: "0.0.0".into(),
            },
            ServerMsg::Ask {
                id: 7,
                question: "run `rm -r x`?".into(),
            },
            ServerMsg::Output {
                stream: OutStream::Stdout,
                data: b"out\x00\xff".to_vec(),
            },
            ServerMsg::Output {
                stream: OutStream::Stderr,
                data: b"err".to_vec(),
            },
            ServerMsg::ReportPart {
                text: "{\"exit\":0,".into(),
            },
            ServerMsg::Done {
                report: Some(Box::new(
                    crate::broker::report::Report::error(
                        120,
                        crate::broker::report::ErrorReport::new(
                            crate::broker::report::ErrorCode::Denied,
                            "denied by policy `standard`".into(),
                        ),
                    )
                    .with_note("a note"),
                )),
            },
            ServerMsg::Error {
                message: "busy".into(),
            },
        ];
        (client, server)
    }

    /// Each variant's name: exhaustive, so that a new variant does not compile until it is
    /// named here, and `samples_cover_every_variant` then wants a sample of it.
    fn variant(c: Option<&ClientMsg>, s: Option<&ServerMsg>) -> &'static str {
        match (c, s) {
            (Some(ClientMsg::Request(r)), _) => match (&r.body, r.context.stdio) {
                (RequestBody::Hello, _) => "hello",
                (RequestBody::Call(c), _) => c.request.kind(),
            },
            (Some(ClientMsg::Answer { .. }), _) => "answer",
            (None, Some(m)) => match m {
                ServerMsg::Hello { .. } => "s.hello",
                ServerMsg::Ask { .. } => "s.ask",
                ServerMsg::Output {
                    stream: OutStream::Stdout,
                    ..
                } => "s.output.stdout",
                ServerMsg::Output {
                    stream: OutStream::Stderr,
                    ..
                } => "s.output.stderr",
                ServerMsg::ReportPart { .. } => "s.report_part",
                ServerMsg::Done { .. } => "s.done",
                ServerMsg::Error { .. } => "s.error",
            },
            (None, None) => "",
        }
    }

    #[test]
    fn samples_cover_every_variant() {
        let (c, s) = samples();
        let mut names: Vec<&str> = c.iter().map(|m| variant(Some(m), None)).collect();
        names.extend(s.iter().map(|m| variant(None, Some(m))));
        let mut seen = names.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), names.len(), "one sample per variant: {names:?}");
        assert_eq!(names.len(), 1 + 41 + 1 + 7, "{names:?}");
        let modes: Vec<StdioMode> = c
            .iter()
            .filter_map(|m| match m {
                ClientMsg::Request(r) => Some(r.context.stdio),
                ClientMsg::Answer { .. } => None,
            })
            .collect();
        assert!(modes.contains(&StdioMode::Passed) && modes.contains(&StdioMode::Frames));
    }

    #[test]
    fn a_reports_floats_cross_the_wire_exactly() {
        // A result's floats (an exec's `duration_ms`, a record's) are read back by the client
        // as the daemon wrote them: `--json` through a daemon prints the same digits.
        // Without serde_json's `float_roundtrip` the last three read back one digit off.
        let hard: [f64; 5] = [
            0.1 + 0.2,
            1.0 / 3.0,
            2.883_422_501_388_809e-64,
            3.727_463_511_624_439e-54,
            1.411_914_684_462_342_1e-61,
        ];
        for x in hard {
            let tool = rmcp::model::CallToolResult::structured(serde_json::json!({"d": x}));
            let m = ServerMsg::Done {
                report: Some(Box::new(crate::broker::report::Report::new(
                    0,
                    crate::broker::report::Outcome::Tool(crate::broker::report::Json::of(&tool)),
                ))),
            };
            let f = encode(&m);
            let back: ServerMsg = decode(&f).expect("decode").expect("whole").0;
            assert_eq!(back, m, "{x}");
            let ServerMsg::Done {
                report: Some(report),
            } = back
            else {
                panic!("not done")
            };
            let crate::broker::report::Outcome::Tool(t) = report.outcome else {
                panic!("not a tool result")
            };
            let d = t.value()["structuredContent"]["d"].as_f64();
            assert_eq!(d.map(f64::to_bits), Some(x.to_bits()), "{x}");
        }
    }

    #[test]
    fn every_variant_round_trips() {
        let (c, s) = samples();
        for m in c {
            let f = encode(&m);
            assert_eq!(
                decode::<ClientMsg>(&f),
                Ok(Some((m.clone(), f.len()))),
                "{m:?}"
            );
            if let ClientMsg::Request(r) = &m {
                assert_eq!(decode_request(&f), Ok(Some((r.clone(), f.len()))));
            }
        }
        for m in s {
            let f = encode(&m);
            assert_eq!(
                decode::<ServerMsg>(&f),
                Ok(Some((m.clone(), f.len()))),
                "{m:?}"
            );
        }
    }

    /// The digest of the samples' JSON recorded for each protocol version. A change to the
    /// types changes it: bump [`PROTOCOL_VERSION`] and add a line; never edit a line.
    const SCHEMA_PINS: &[(u32, &str)] = &[
        (
            2,
            "bd8374ac039c1996d5e58d7ed05bcf9369ddfd3c19d3420a302648176fc328ec",
        ),
        (
            3,
            "afb9bc8180a76ff1944e2b18af634b8a8c69c427f430b85f4d6fdbac002e1b63",
        ),
        (
            4,
            "2cd7f47b0c42db3a1cce2ce87827f221db4fffd14e83686ae73546220c8f0078",
        ),
        (
            5,
            "8cf477ed6b8914f024ea43d2e8321eeb9e155a6a44986d18052e81899eb50e95",
        ),
        (
            6,
            "4ed763ca95009c66ff112918a05c9e68d102bc9e67da5928660d068fb9f56bfe",
        ),
        (
            7,
            "fc72a064d62619a4ddb775d903762bdc90bbe02d656dba02f617f02b6539b1fe",
        ),
    ];

    #[test]
    fn the_schema_is_pinned_to_its_version() {
        use sha2::Digest as _;
        let (c, s) = samples();
        let mut text = String::new();
        for m in &c {
            text.push_str(&serde_json::to_string(m).expect("json"));
            text.push('\n');
        }
        for m in &s {
            text.push_str(&serde_json::to_string(m).expect("json"));
            text.push('\n');
        }
        let digest = crate::durable::hex(&sha2::Sha256::digest(text.as_bytes()));
        let newest = SCHEMA_PINS.iter().map(|(v, _)| *v).max().unwrap_or(0);
        assert!(
            newest <= PROTOCOL_VERSION,
            "a pin for version {newest} is newer than PROTOCOL_VERSION {PROTOCOL_VERSION}"
        );
        let pinned = SCHEMA_PINS
            .iter()
            .find(|(v, _)| *v == PROTOCOL_VERSION)
            .map(|(_, d)| *d);
        let Some(pinned) = pinned else {
            panic!(
                "PROTOCOL_VERSION {PROTOCOL_VERSION} has no pin: add ({PROTOCOL_VERSION}, \"{digest}\") \
                 to SCHEMA_PINS. The samples serialize as:\n{text}"
            );
        };
        assert_eq!(
            pinned,
            digest,
            "the wire types changed without a version bump: bump PROTOCOL_VERSION to {} and \
             pin the digest this test then prints (never edit a pin). The samples now \
             serialize as:\n{text}",
            PROTOCOL_VERSION + 1
        );
        let mut digests: Vec<&str> = SCHEMA_PINS.iter().map(|(_, d)| *d).collect();
        digests.sort_unstable();
        digests.dedup();
        assert_eq!(
            digests.len(),
            SCHEMA_PINS.len(),
            "two versions pin one digest"
        );
    }

    #[test]
    fn a_request_of_another_version_is_refused_naming_both() {
        for (body, client) in [
            // Version 1's call, as a client of version 1 sends it.
            (
                r#"{"type":"call","version":1,"argv":["exec","--","true"],"cwd":"/","env":[]}"#
                    .to_string(),
                1,
            ),
            // This version's shape with another number.
            (
                serde_json::to_string(&ClientMsg::Request(Request {
                    version: PROTOCOL_VERSION + 1,
                    context: context(),
                    body: RequestBody::Hello,
                }))
                .expect("json"),
                PROTOCOL_VERSION + 1,
            ),
        ] {
            let e = parse_request(body.as_bytes()).expect_err("refused");
            assert_eq!(
                e,
                RequestError::VersionMismatch {
                    client,
                    daemon: PROTOCOL_VERSION
                }
            );
            let m = e.to_string();
            assert!(
                m.contains(&format!("protocol version {client} "))
                    && m.contains(&format!("this daemon speaks {PROTOCOL_VERSION}"))
                    && m.contains("restart `gateway serve`"),
                "{m}"
            );
        }
        assert!(parse_request(&serde_json::to_vec(&call()).expect("json")).is_ok());
    }

    #[test]
    fn round_trip_and_every_truncation() {
        let f = encode(&call());
        assert_eq!(decode::<ClientMsg>(&f), Ok(Some((call(), f.len()))));
        for cut in 0..f.len() {
            assert_eq!(decode::<ClientMsg>(&f[..cut]), Ok(None), "cut at {cut}");
            assert_eq!(decode_request(&f[..cut]), Ok(None), "cut at {cut}");
            assert!(matches!(
                decode_final::<ClientMsg>(&f[..cut]),
                Err(ProtoError::Truncated { have, .. }) if have == cut
            ));
        }
    }

    #[test]
    fn oversized_refused_before_the_body() {
        let mut f = ((MAX_MESSAGE + 1) as u32).to_be_bytes().to_vec();
        f.extend_from_slice(b"{");
        assert_eq!(
            decode::<ClientMsg>(&f),
            Err(ProtoError::TooLarge(MAX_MESSAGE as u64 + 1))
        );
        assert_eq!(
            decode_request(&f),
            Err(RequestError::Proto(ProtoError::TooLarge(
                MAX_MESSAGE as u64 + 1
            )))
        );
        let f = u32::MAX.to_be_bytes();
        assert!(matches!(
            decode::<ClientMsg>(&f),
            Err(ProtoError::TooLarge(_))
        ));
    }

    /// `call()` as JSON with `edit` applied to it.
    fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
        let mut v = serde_json::to_value(call()).expect("json");
        edit(&mut v);
        serde_json::to_vec(&v).expect("json")
    }

    #[test]
    fn malformed_unknown_fields_and_variants_refused() {
        let v = PROTOCOL_VERSION;
        let mut bodies: Vec<Vec<u8>> = [
            "not json",
            r#"{"type":"request"}"#,
            r#"{"type":"shell","cmd":"x"}"#,
            r#"{"type":"answer","id":1,"approve":true,"extra":1}"#,
            "[1,2]",
            "",
        ]
        .iter()
        .map(|b| b.as_bytes().to_vec())
        .collect();
        bodies.push(
            format!(r#"{{"type":"request","version":{v},"context":{{}},"body":"hello"}}"#)
                .into_bytes(),
        );
        // An unknown field at each level, an unknown variant of each enum.
        bodies.push(edited(|j| j["extra"] = 1.into()));
        bodies.push(edited(|j| j["context"]["tty"] = true.into()));
        bodies.push(edited(|j| j["context"]["stdio"] = "pty".into()));
        bodies.push(edited(|j| j["body"] = serde_json::json!({"shell": ["x"]})));
        bodies.push(edited(|j| j["body"] = "ping".into()));
        bodies.push(edited(
            |j| j["body"] = serde_json::json!({"policy_reload": {"policy": null, "force": true}}),
        ));
        bodies.push(edited(|j| {
            j["body"] = serde_json::json!({"exec": {"argv": ["true"], "sudo": true}})
        }));
        for body in &bodies {
            let mut f = (body.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(body);
            assert!(
                matches!(decode::<ClientMsg>(&f), Err(ProtoError::Malformed(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
            assert!(
                matches!(
                    decode_request(&f),
                    Err(RequestError::Proto(ProtoError::Malformed(_)) | RequestError::NotARequest)
                ),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let answer = encode(&ClientMsg::Answer {
            id: 1,
            approve: true,
        });
        assert_eq!(decode_request(&answer), Err(RequestError::NotARequest));
        // Output data that is not base64.
        let bad = br#"{"type":"output","stream":"stdout","data":"***"}"#;
        let mut f = (bad.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(bad);
        assert!(matches!(
            decode::<ServerMsg>(&f),
            Err(ProtoError::Malformed(_))
        ));
    }

    #[test]
    fn a_request_that_names_an_identity_is_refused() {
        // Whatever key a client uses to claim who it is, at the top, in the context or in a
        // typed body, the request is refused whole: identity comes from SO_PEERCRED alone.
        for key in ["uid", "gid", "pid", "groups", "caller", "user"] {
            for at in ["top", "context", "options", "exec", "env"] {
                let body = edited(|j| {
                    j["body"] = serde_json::json!({"call": {
                        "options": {"state_dir": null, "policy": null, "cwd": null, "json": false},
                        "request": {"exec": {
                            "argv": ["id"], "timeout": null, "snapshot": null,
                            "env": [{"name": "A", "value": "b"}], "stdin": null}}}});
                    let target = match at {
                        "top" => &mut *j,
                        "context" => &mut j["context"],
                        "options" => &mut j["body"]["call"]["options"],
                        "env" => &mut j["body"]["call"]["request"]["exec"]["env"][0],
                        _ => &mut j["body"]["call"]["request"]["exec"],
                    };
                    target[key] = 0.into();
                });
                assert!(
                    matches!(
                        parse_request(&body),
                        Err(RequestError::Proto(ProtoError::Malformed(ref m))) if m.contains(key)
                    ),
                    "{key} at {at}: {:?}",
                    parse_request(&body)
                );
            }
        }
    }

    #[test]
    fn fuzz_seeds() {
        let mut two = encode(&call());
        two.extend(encode(&ClientMsg::Answer {
            id: 7,
            approve: false,
        }));
        fuzz_decode(&two);
        fuzz_decode(&two[..two.len() - 3]);
        fuzz_decode(&[0, 0, 0, 2, b'{', b'}']);
        fuzz_decode(&[]);
        for m in samples().0 {
            fuzz_decode(&encode(&m));
        }
    }
}
