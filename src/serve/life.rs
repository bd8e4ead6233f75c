//! One life per call in the daemon (issue 35): what ends a call besides its own end (its
//! client going away, the daemon stopping: [`Ended`], [`CallEnd`], [`InFlight`]), the frames
//! relay given up when a client stops reading ([`FrameRelay`]), a call's panic caught
//! ([`run_caught`]) and the record the daemon writes for a call it ended, or that panicked,
//! when the call recorded nothing of its own ([`Unrecorded`]).

use super::proto;
use crate::audit::{Caller, Record, RecordDecision};
use crate::broker::client;
use crate::broker::report::{ErrorCode, ErrorReport, Report};
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why the daemon ended a call before it ended by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// The client went away: its connection hung up.
    ClientGone,
    /// The daemon was told to stop (SIGTERM, SIGINT).
    ServerStopping,
}

impl Ended {
    fn reason(self) -> &'static str {
        match self {
            Ended::ClientGone => {
                "the client went away (its connection closed) before the call ended: the call was ended"
            }
            Ended::ServerStopping => {
                "the daemon was stopped (SIGTERM or SIGINT) while the call ran: the call was ended"
            }
        }
    }
}

/// A call in flight, as the daemon can end it: the first reason wins, and a byte on the
/// call's cancel pipe (its client's `broker::client::Client::cancel`) kills its command and ends its loops.
pub(super) struct CallEnd {
    why: Mutex<Option<Ended>>,
    wake: Mutex<std::io::PipeWriter>,
}

impl CallEnd {
    /// A call in flight whose cancel pipe's write end is `wake`.
    pub(super) fn new(wake: std::io::PipeWriter) -> CallEnd {
        CallEnd {
            why: Mutex::new(None),
            wake: Mutex::new(wake),
        }
    }

    pub(super) fn end(&self, why: Ended) {
        self.why
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(why);
        // A byte, not closing the write end: the sandbox's helper, a fork of this process,
        // holds a copy of it.
        let _ = self
            .wake
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(b"x");
    }

    pub(super) fn why(&self) -> Option<Ended> {
        *self.why.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The calls in flight, by connection number: what SIGTERM ends.
#[derive(Clone, Default)]
pub(super) struct InFlight(Arc<Mutex<HashMap<u64, Arc<CallEnd>>>>);

impl InFlight {
    pub(super) fn add(&self, id: u64, end: Arc<CallEnd>) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, end);
    }

    pub(super) fn remove(&self, id: u64) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
    }

    /// Ends every call in flight; how many there were.
    pub(super) fn end_all(&self, why: Ended) -> usize {
        let calls = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for c in calls.values() {
            c.end(why);
        }
        calls.len()
    }
}

/// The thread relaying a call's output as frames, the pipe that tells it the call is over,
/// and what says it has ended.
pub(super) struct FrameRelay {
    pub(super) thread: std::thread::JoinHandle<()>,
    pub(super) stop: std::io::PipeWriter,
    pub(super) done: std::sync::mpsc::Receiver<()>,
}

/// How long a client may take no frame at all once its call has ended, before what is left
/// is given up.
pub(super) const FRAMES_AFTER_END: Duration = Duration::from_secs(2);

impl FrameRelay {
    /// Tells the relay the call is over and waits for it to send what is left while the
    /// client takes it; a client that takes nothing for [`FRAMES_AFTER_END`] gets its
    /// connection's writing side shut (what it did not take is in the call's artifacts) and
    /// holds nothing.
    pub(super) fn finish(mut self, stream: &UnixStream, sent: &dyn Fn() -> usize) {
        let _ = self.stop.write_all(b"x");
        let mut seen = sent();
        while self.done.recv_timeout(FRAMES_AFTER_END).is_err() {
            let now = sent();
            if now == seen {
                let _ = stream.shutdown(std::net::Shutdown::Write);
                break;
            }
            seen = now;
        }
        let _ = self.thread.join();
    }
}

/// How a call ran: its exit code, the thread reading its answers, whether the daemon ended
/// it (and why) or it panicked, and whether it recorded itself.
pub(super) struct Ran {
    pub(super) report: Report,
    pub(super) listener: Option<std::thread::JoinHandle<()>>,
    pub(super) ended: Option<Ended>,
    pub(super) panicked: bool,
    pub(super) recorded_itself: bool,
}

/// What the daemon records of a call it ended, or that panicked, when the call recorded
/// nothing itself (a tool call records its own end, once): who, what, and why.
pub(super) struct Unrecorded {
    caller: Caller,
    session: String,
    cwd: String,
    args: Vec<String>,
}

impl Unrecorded {
    pub(super) fn of(
        peer: &client::Peer,
        context: &proto::RequestContext,
        request: &crate::broker::request::Request,
    ) -> Self {
        let args = request.words();
        let session = context
            .session
            .clone()
            .or_else(|| {
                context
                    .env
                    .iter()
                    .find(|(k, _)| k == "GATEWAY_SESSION")
                    .map(|(_, v)| v.clone())
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "daemon".into());
        Unrecorded {
            caller: Caller {
                uid: peer.uid,
                pid: peer.pid,
                client: "daemon".into(),
            },
            session: crate::broker::redact_text(&session),
            cwd: crate::broker::redact_text(&context.cwd),
            args,
        }
    }

    /// Records the call as `daemon.call` unless it recorded itself.
    pub(super) fn record(
        self,
        (state_dir, server): (&Path, &crate::broker::server::Server),
        ran: &Ran,
        took: Duration,
    ) {
        if ran.recorded_itself {
            return;
        }
        let mut reasons: Vec<String> = ran.ended.iter().map(|e| e.reason().into()).collect();
        let error = ran.panicked.then(|| {
            "internal error: the call panicked; it was abandoned (its command, if one ran, was killed) and the daemon went on".to_string()
        });
        reasons.extend(error.clone());
        let mut rec = Record {
            session: self.session,
            caller: self.caller,
            tool: "daemon.call".into(),
            args: self.args,
            cwd: self.cwd,
            decision: RecordDecision {
                effect: "allow".into(),
                rules: vec!["builtin".into()],
                reasons,
            },
            exit_code: Some(i32::from(ran.report.exit)),
            cancelled: ran.ended.is_some(),
            duration_ms: Some((took.as_secs_f64() * 1e6).round() / 1e3),
            error,
            ..Record::default()
        };
        if let Err(e) = crate::broker::append_record(state_dir, Some(server), &mut rec) {
            eprintln!("gateway serve: recording a call that was ended failed: {e}");
        }
    }
}

/// Runs one call, catching a panic in it: its exit code, or 125 and true when it panicked
/// (a run it had started is killed as the panic unwinds through the relay).
pub(super) fn run_caught(call: impl FnOnce() -> Report) -> (Report, bool) {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)) {
        Ok(r) => (r, false),
        Err(_) => (
            Report::error(
                125,
                ErrorReport::new(
                    ErrorCode::Failed,
                    "internal error in the daemon (the call was abandoned and recorded; the daemon goes on)".into(),
                ),
            ),
            true,
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panicking_call_is_caught_and_recorded_once() {
        // The catching wrapper turns a call's panic into exit 125, and the daemon records it
        // (tool `daemon.call`, the error said) unless the call recorded itself.
        let (r, panicked) = super::run_caught(|| panic!("a bug in a call"));
        assert_eq!((r.exit, panicked), (125, true));
        assert!(
            matches!(&r.outcome, crate::broker::report::Outcome::Error(e) if e.error.message.contains("internal error")),
            "{r:?}"
        );
        let three = || crate::broker::report::Report::streamed(3);
        assert_eq!(super::run_caught(three), (three(), false));
        let dir = std::env::temp_dir().join(format!("gwu-daemon-panic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let peer = crate::broker::client::Peer {
            uid: 1234,
            gid: 1234,
            pid: 42,
            groups: vec![],
        };
        let context = crate::serve::proto::RequestContext {
            cwd: "/w".into(),
            env: vec![("GATEWAY_SESSION".into(), "s1".into())],
            session: None,
            stdio: crate::serve::proto::StdioMode::Frames,
            prompts: false,
        };
        let body = crate::broker::request::Request::Log(crate::broker::request::LogRequest::Tail {
            lines: 10,
            follow: false,
        });
        let ran = |recorded_itself| super::Ran {
            report: r.clone(),
            listener: None,
            ended: None,
            panicked,
            recorded_itself,
        };
        // A call that recorded itself is not recorded again.
        let server = crate::broker::server::Server::default();
        super::Unrecorded::of(&peer, &context, &body).record(
            (&dir, &server),
            &ran(true),
            std::time::Duration::from_millis(5),
        );
        super::Unrecorded::of(&peer, &context, &body).record(
            (&dir, &server),
            &ran(false),
            std::time::Duration::from_millis(5),
        );
        let r = crate::broker::log::query(&dir, &crate::audit::query::Filter::default())
            .expect("query");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(r.records.len(), 1, "{:?}", r.records);
        let rec = &r.records[0];
        assert_eq!(rec.tool, "daemon.call");
        assert_eq!(rec.args, ["log", "tail"]);
        assert_eq!((rec.caller.uid, rec.caller.pid), (1234, 42));
        assert_eq!(rec.session, "s1");
        assert_eq!(rec.exit_code, Some(125));
        assert!(!rec.cancelled);
        assert!(
            rec.error.as_deref().is_some_and(|e| e.contains("panicked")),
            "{rec:?}"
        );
    }
}
