//! The daemon's socket protocol: length-prefixed JSON messages, versioned.
//!
//! A message is a 4-byte big-endian length followed by that many bytes of JSON (one object
//! with a `type`). The client's first message is a [`ClientMsg::Call`] carrying the protocol
//! [`VERSION`]; with it, in the same `sendmsg`, travel its stdin, stdout and stderr
//! (`SCM_RIGHTS`), so that the command's streams are the client's own (a terminal stays a
//! terminal, a pipe a pipe) and nothing is copied through the daemon. The daemon answers
//! [`ServerMsg::Ask`] when a person must approve (the client asks on its terminal and sends
//! [`ClientMsg::Answer`]) and ends with [`ServerMsg::Exit`] or [`ServerMsg::Error`].
//!
//! Written by hand (no crate frames JSON this way and passes fds with it); the decoder is a
//! pure function of the bytes, fuzzed by `fuzz/fuzz_targets/daemon_proto.rs`.

use serde::{Deserialize, Serialize};

/// The protocol version a client speaks in its `call`.
pub const VERSION: u32 = 1;

/// The largest message either side accepts (a command line is at most ~2 MiB on Linux; its
/// environment counts too).
pub const MAX_MESSAGE: usize = 8 << 20;

/// A client's message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientMsg {
    /// Run one CLI command (the arguments after `gateway`) as the CLI would.
    Call {
        /// Must be [`VERSION`].
        version: u32,
        /// The command line, without the program name.
        argv: Vec<String>,
        /// The client's working directory (absolute).
        cwd: String,
        /// The client's environment (the command's environment is built from it, as the
        /// policy allows).
        env: Vec<(String, String)>,
    },
    /// The answer to [`ServerMsg::Ask`].
    Answer {
        /// The pending request's id.
        id: u64,
        /// Approved?
        approve: bool,
    },
}

/// The daemon's message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ServerMsg {
    /// A person must approve: ask on the client's terminal.
    Ask {
        /// The pending request's id (`gateway approve ID` answers it too).
        id: u64,
        /// What to show.
        question: String,
    },
    /// The call is done: exit with this code.
    Exit {
        /// The CLI's exit code.
        code: u8,
    },
    /// The call could not be made (bad message, wrong version, busy, shutting down).
    Error {
        /// What went wrong and what to do.
        message: String,
    },
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
    // Serializing these enums cannot fail (string keys, no maps with non-string keys).
    let body = serde_json::to_vec(msg).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Decodes the first frame of `buf`: `Ok(None)` when more bytes are needed, else the message
/// and how many bytes it took. An oversized length is refused before its body arrives.
pub fn decode<T: for<'de> Deserialize<'de>>(buf: &[u8]) -> Result<Option<(T, usize)>, ProtoError> {
    let Some(head) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if len > MAX_MESSAGE {
        return Err(ProtoError::TooLarge(len as u64));
    }
    let Some(body) = buf.get(4..4 + len) else {
        return Ok(None);
    };
    let msg = serde_json::from_slice(body).map_err(|e| ProtoError::Malformed(e.to_string()))?;
    Ok(Some((msg, 4 + len)))
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

/// Fuzz entry: decodes `data` as a stream of client messages the way the daemon does, and
/// checks that what decodes re-encodes to the same message.
pub fn fuzz_decode(data: &[u8]) {
    let mut rest = data;
    loop {
        match decode::<ClientMsg>(rest) {
            Ok(Some((msg, used))) => {
                assert!(used >= 4 && used <= rest.len());
                let again = encode(&msg);
                // A property, asserted: what decoded re-encodes and decodes the same.
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

    fn call() -> ClientMsg {
        ClientMsg::Call {
            version: VERSION,
            argv: vec!["exec".into(), "--".into(), "true".into()],
            cwd: "/tmp".into(),
            env: vec![("PATH".into(), "/usr/bin".into())],
        }
    }

    #[test]
    fn round_trip_and_every_truncation() {
        let f = encode(&call());
        assert_eq!(decode::<ClientMsg>(&f), Ok(Some((call(), f.len()))));
        for cut in 0..f.len() {
            assert_eq!(decode::<ClientMsg>(&f[..cut]), Ok(None), "cut at {cut}");
            assert!(matches!(
                decode_final::<ClientMsg>(&f[..cut]),
                Err(ProtoError::Truncated { have, .. }) if have == cut
            ));
        }
        let s = encode(&ServerMsg::Exit { code: 3 });
        assert_eq!(
            decode::<ServerMsg>(&s),
            Ok(Some((ServerMsg::Exit { code: 3 }, s.len())))
        );
    }

    #[test]
    fn oversized_refused_before_the_body() {
        let mut f = ((MAX_MESSAGE + 1) as u32).to_be_bytes().to_vec();
        f.extend_from_slice(b"{");
        assert_eq!(
            decode::<ClientMsg>(&f),
            Err(ProtoError::TooLarge(MAX_MESSAGE as u64 + 1))
        );
        let f = u32::MAX.to_be_bytes();
        assert!(matches!(
            decode::<ClientMsg>(&f),
            Err(ProtoError::TooLarge(_))
        ));
    }

    #[test]
    fn malformed_and_unknown_refused() {
        for body in [
            &b"not json"[..],
            br#"{"type":"call"}"#,
            br#"{"type":"shell","cmd":"x"}"#,
            br#"{"type":"answer","id":1,"approve":true,"extra":1}"#,
            br#"[1,2]"#,
            b"",
        ] {
            let mut f = (body.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(body);
            assert!(
                matches!(decode::<ClientMsg>(&f), Err(ProtoError::Malformed(_))),
                "{}",
                String::from_utf8_lossy(body)
            );
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
    }
}
