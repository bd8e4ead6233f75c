//! Pending approvals (the daemon): an `ask` decision becomes a request with an id that waits
//! up to the policy's `[approval] timeout` for an answer — from the client's terminal, or from
//! `gateway approve ID` / `gateway deny ID` on another connection. No answer in time is a
//! deny. Every outcome is written to the audit log as an `approval` record, with who answered.
//!
//! Confined commands cannot answer their own requests: their seccomp filter refuses every
//! `AF_UNIX` socket, so the daemon's socket is out of their reach.

use crate::audit::{self, Caller, Record, RecordDecision};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// What needs approving.
pub struct Request<'a> {
    /// The session asking.
    pub session: &'a str,
    /// Who asks (the client whose call it is).
    pub caller: &'a Caller,
    /// The tool (`exec`, `fs.rm`, ...).
    pub tool: &'a str,
    /// The command or call, redacted.
    pub command: String,
    /// The deciding rules: `id: reason`.
    pub rules: Vec<String>,
    /// How risky: `high` (destructive, cannot be undone, or not analysable) or `medium`.
    pub risk: &'static str,
    /// The question shown on a terminal.
    pub question: String,
    /// Where it runs: the workspace and the working directory (`rm -r build` approved in one
    /// directory is another call in the next).
    pub workspace: &'a Path,
    /// The working directory.
    pub cwd: &'a Path,
    /// A digest of the environment the call gets (what the policy passes of the caller's,
    /// and what it asks for itself): the same command with other variables is another call.
    pub env_digest: String,
}

/// A pending request, as `gateway pending` lists it.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Pending {
    /// Its id (for `gateway approve ID`).
    pub id: u64,
    /// The session asking.
    pub session: String,
    /// The asking client's uid and pid.
    pub uid: u32,
    /// The asking client's pid.
    pub pid: u32,
    /// The tool.
    pub tool: String,
    /// The command, redacted.
    pub command: String,
    /// The directory it runs in (redacted).
    pub cwd: String,
    /// The deciding rules: `id: reason`.
    pub rules: Vec<String>,
    /// `high` or `medium`.
    pub risk: String,
    /// When it was asked (RFC 3339).
    pub asked: String,
    /// Seconds left before it is denied.
    pub expires_in: u64,
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Approved?
    pub approved: bool,
    /// Who or what decided (`uid 1000 pid 42 (gateway approve)`, `the terminal prompt`,
    /// `no answer within 300 s`, ...).
    pub by: String,
}

struct Entry {
    info: Pending,
    deadline: Instant,
    answer: Option<Outcome>,
    always: bool,
}

#[derive(Default)]
struct Queue {
    next: u64,
    entries: HashMap<u64, Entry>,
    /// The calls approved with `--always-for-session`, keyed by the uid too (another uid
    /// naming the same session inherits nothing) and by where and with what environment
    /// they run (another directory is another call).
    always: HashSet<Key>,
}

/// A standing approval's key: what a call is, wherever it comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    uid: u32,
    session: String,
    workspace: std::path::PathBuf,
    cwd: std::path::PathBuf,
    tool: String,
    command: String,
    env_digest: String,
}

/// The most standing approvals kept (all clients together); past it, the oldest is
/// forgotten (asked again), so that a client approving endless distinct calls cannot grow
/// the daemon without bound.
const MAX_STANDING: usize = 4096;
/// The most standing approvals one uid keeps.
const MAX_STANDING_PER_UID: usize = 256;
/// The most requests one uid may have waiting at once: beyond, a request is denied at once
/// (naming the bound).
pub const MAX_PENDING_PER_UID: usize = 64;

/// An answer given (`gateway approve|deny ID`).
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Answered {
    /// The request's id.
    pub id: u64,
    /// Approved (`true`) or denied.
    pub approved: bool,
    /// The request answered.
    pub request: Pending,
}

/// Why a request was not answered.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The one answering may not answer it (`may` said no).
    #[error(transparent)]
    Refused(#[from] super::refusal::Refusal),
    /// No such request, or already answered.
    #[error("{0}")]
    Gone(String),
}

/// A daemon's approvals: its requests waiting for a person and its standing approvals (one
/// value, owned by the daemon's [`super::server::Server`]).
#[derive(Default)]
pub struct Approvals {
    queue: Mutex<Queue>,
    answered: Condvar,
}

impl Approvals {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Asks: queues `req`, calls `prompt(id, question)` (the client's terminal, if it has one),
    /// and waits until someone answers or `timeout` passes. The outcome is recorded in the audit
    /// log of `state_dir` (a failure to record denies).
    pub fn ask(
        &self,
        (state_dir, server): (&Path, Option<&super::server::Server>),
        req: Request<'_>,
        timeout: Duration,
        (prompt, cancel): (Prompt<'_>, Option<std::os::fd::BorrowedFd<'_>>),
    ) -> Outcome {
        let key = Key {
            uid: req.caller.uid,
            session: req.session.to_string(),
            workspace: req.workspace.to_path_buf(),
            cwd: req.cwd.to_path_buf(),
            tool: req.tool.to_string(),
            command: req.command.clone(),
            env_digest: req.env_digest.clone(),
        };
        let (id, outcome) = {
            let mut q = self.lock();
            let waiting = q
                .entries
                .values()
                .filter(|e| e.info.uid == req.caller.uid && e.answer.is_none())
                .count();
            if q.always.contains(&key) {
                (
                    0,
                    Some(Outcome {
                        approved: true,
                        by: "approved earlier for this session (--always-for-session)".into(),
                    }),
                )
            } else if waiting >= MAX_PENDING_PER_UID {
                (
                    0,
                    Some(Outcome {
                        approved: false,
                        by: format!(
                            "the daemon's bound: uid {} already has {MAX_PENDING_PER_UID} requests waiting (answer or deny them: `gateway pending`)",
                            req.caller.uid
                        ),
                    }),
                )
            } else {
                q.next += 1;
                let id = q.next;
                q.entries.insert(
                    id,
                    Entry {
                        info: Pending {
                            id,
                            session: req.session.into(),
                            uid: req.caller.uid,
                            pid: req.caller.pid,
                            tool: req.tool.into(),
                            command: req.command.clone(),
                            cwd: super::redact_text(&req.cwd.display().to_string()),
                            rules: req.rules.clone(),
                            risk: req.risk.into(),
                            asked: audit::now_rfc3339(),
                            expires_in: timeout.as_secs(),
                        },
                        deadline: Instant::now() + timeout,
                        answer: None,
                        always: false,
                    },
                );
                (id, None)
            }
        };
        let outcome = match outcome {
            Some(o) => o,
            None => {
                let question = format!(
                    "{}\n(pending request {id}; `gateway approve {id}` or `gateway deny {id}` answer it too; denied in {} s without an answer)",
                    req.question,
                    timeout.as_secs()
                );
                prompt(id, &question);
                self.wait(id, &key, cancel)
            }
        };
        record((state_dir, server), id, req, outcome)
    }

    /// Waits for the answer to `id`, its deadline, or the end of its call (`cancel`: its
    /// client went away, the daemon is stopping), whichever comes first.
    fn wait(&self, id: u64, key: &Key, cancel: Option<std::os::fd::BorrowedFd<'_>>) -> Outcome {
        let mut q = self.lock();
        loop {
            if cancel.is_some_and(crate::sandbox::fd_ready) {
                q.entries.remove(&id);
                return Outcome {
                    approved: false,
                    by: "the end of its call (the client went away, or the daemon is stopping)"
                        .into(),
                };
            }
            let Some(e) = q.entries.get(&id) else {
                return Outcome {
                    approved: false,
                    by: "the request vanished".into(),
                };
            };
            if let Some(a) = e.answer.clone() {
                let always = e.always;
                q.entries.remove(&id);
                if always && a.approved {
                    // Bounded per uid and in all: past a bound one is forgotten (asked again) —
                    // the uid's own first (a set has no age; any one is as good as another).
                    let own = q.always.iter().filter(|k| k.uid == key.uid).count();
                    let forget = if own >= MAX_STANDING_PER_UID {
                        q.always.iter().find(|k| k.uid == key.uid).cloned()
                    } else if q.always.len() >= MAX_STANDING {
                        q.always.iter().next().cloned()
                    } else {
                        None
                    };
                    if let Some(k) = forget {
                        q.always.remove(&k);
                    }
                    q.always.insert(key.clone());
                }
                return a;
            }
            let now = Instant::now();
            if now >= e.deadline {
                let secs = e.info.expires_in;
                q.entries.remove(&id);
                return Outcome {
                    approved: false,
                    by: format!("no answer within {secs} s"),
                };
            }
            // The cancellation is a pipe, not the condition: looked at every 100 ms.
            let left = (e.deadline - now).min(Duration::from_millis(100));
            q = self
                .answered
                .wait_timeout(q, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// The pending requests, oldest first; with `uid`, only those that uid asked.
    pub fn list(&self, uid: Option<u32>) -> Vec<Pending> {
        let q = self.lock();
        let now = Instant::now();
        let mut v: Vec<Pending> = q
            .entries
            .values()
            .filter(|e| e.answer.is_none() && uid.is_none_or(|u| e.info.uid == u))
            .map(|e| {
                let mut p = e.info.clone();
                p.expires_in = e.deadline.saturating_duration_since(now).as_secs();
                p
            })
            .collect();
        v.sort_by_key(|p| p.id);
        v
    }

    /// Answers request `id` (`always`: approve the same call again for the rest of its session
    /// without asking), if `may` allows the one answering to answer that request — decided under
    /// the queue's lock, on the request as it is. Returns the answer given, or why not.
    pub fn answer(
        &self,
        id: u64,
        approve: bool,
        always: bool,
        by: String,
        may: impl FnOnce(&Pending) -> Result<(), super::refusal::Refusal>,
    ) -> Result<Answered, AnswerError> {
        let mut q = self.lock();
        let Some(e) = q.entries.get_mut(&id) else {
            return Err(AnswerError::Gone(format!(
                "no pending request {id} (answered, timed out, or never asked: see `gateway pending`)"
            )));
        };
        may(&e.info)?;
        if e.answer.is_some() {
            return Err(AnswerError::Gone(format!(
                "request {id} was already answered"
            )));
        }
        e.answer = Some(Outcome {
            approved: approve,
            by,
        });
        e.always = always;
        let info = e.info.clone();
        drop(q);
        self.answered.notify_all();
        Ok(Answered {
            id,
            approved: approve,
            request: info,
        })
    }
}

/// Puts a question to the client whose call it is (pending id, text); false: it could not.
pub type Prompt<'a> = &'a dyn Fn(u64, &str) -> bool;

/// Records how request `id` ended (a failure to record denies).
fn record(
    (state_dir, server): (&Path, Option<&super::server::Server>),
    id: u64,
    req: Request<'_>,
    outcome: Outcome,
) -> Outcome {
    let mut rec = Record {
        session: req.session.into(),
        caller: req.caller.clone(),
        tool: "approval".into(),
        args: vec![id.to_string(), req.tool.into(), req.command],
        decision: RecordDecision {
            effect: if outcome.approved { "allow" } else { "deny" }.into(),
            rules: req
                .rules
                .iter()
                .map(|r| r.split(':').next().unwrap_or("").to_string())
                .collect(),
            reasons: vec![format!(
                "{} by {}",
                if outcome.approved {
                    "approved"
                } else {
                    "denied"
                },
                outcome.by
            )],
        },
        approved: Some(outcome.approved),
        ..Record::default()
    };
    match super::append_record(state_dir, server, &mut rec) {
        Ok(_) => outcome,
        Err(e) => Outcome {
            approved: false,
            by: format!("the audit log (the answer could not be recorded: {e})"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller() -> Caller {
        Caller {
            uid: 1,
            pid: 2,
            client: "test".into(),
        }
    }

    fn req<'a>(c: &'a Caller, session: &'a str, cmd: &str) -> Request<'a> {
        Request {
            session,
            caller: c,
            tool: "exec",
            command: cmd.into(),
            rules: vec!["r1: because".into()],
            risk: "medium",
            question: "run it?".into(),
            workspace: Path::new("/w"),
            cwd: Path::new("/w/a"),
            env_digest: String::new(),
        }
    }

    #[test]
    fn a_question_ends_with_its_call() {
        // Issue 35 (attacker): a call waiting for a person's answer waited out the whole
        // timeout after its client went away, holding a daemon place and a pending entry.
        let dir = std::env::temp_dir().join(format!("gw-approvals-end-{}", std::process::id()));
        let a = Approvals::default();
        let c = caller();
        let (r, w) = std::io::pipe().expect("pipe");
        let t = std::time::Instant::now();
        let ender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(w);
        });
        let o = a.ask(
            (&dir, None),
            req(&c, "s-end", "rm -r build"),
            Duration::from_secs(30),
            (&|_, _| true, Some(std::os::fd::AsFd::as_fd(&r))),
        );
        let _ = ender.join();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!o.approved);
        assert!(o.by.contains("end of its call"), "{}", o.by);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(a.list(None).is_empty(), "the question outlived its call");
    }

    #[test]
    fn answered_from_elsewhere_timed_out_and_always() {
        let dir = std::env::temp_dir().join(format!("gw-approvals-{}", std::process::id()));
        let c = caller();
        let a = std::sync::Arc::new(Approvals::default());
        let a2 = a.clone();
        // Answered by another thread through the queue.
        let d = dir.clone();
        let t = std::thread::spawn(move || {
            let c = caller();
            a2.ask(
                (&d, None),
                req(&c, "s-a", "make deploy"),
                Duration::from_secs(20),
                (&|_, _| true, None),
            )
        });
        let id = loop {
            if let Some(p) = a.list(None).into_iter().find(|p| p.session == "s-a") {
                break p.id;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(
            a.answer(id + 1000, true, false, "x".into(), |_| Ok(()))
                .is_err()
        );
        let p = a
            .answer(id, true, true, "uid 0 (test)".into(), |_| Ok(()))
            .expect("answer");
        assert_eq!(p.request.command, "make deploy");
        assert_eq!((p.id, p.approved), (id, true));
        let o = t.join().expect("thread");
        assert!(o.approved);
        assert_eq!(o.by, "uid 0 (test)");
        assert!(
            a.answer(id, false, false, "again".into(), |_| Ok(()))
                .is_err()
        );
        // Always for this session: the same call is approved without a request...
        let o = a.ask(
            (&dir, None),
            req(&c, "s-a", "make deploy"),
            Duration::from_secs(5),
            (&|_, _| panic!("not asked again"), None),
        );
        assert!(o.approved);
        // ... not in another directory of the same workspace, nor with another
        // environment ...
        for r in [
            Request {
                cwd: Path::new("/w/b"),
                ..req(&c, "s-a", "make deploy")
            },
            Request {
                env_digest: "other".into(),
                ..req(&c, "s-a", "make deploy")
            },
        ] {
            let o = a.ask(
                (&dir, None),
                r,
                Duration::from_millis(50),
                (&|_, _| true, None),
            );
            assert!(!o.approved, "a standing approval carried over: {}", o.by);
        }
        // ... nor for another uid naming the same session (standing approvals are keyed by
        // (uid, session)) ...
        let other = Caller {
            uid: 65534,
            ..caller()
        };
        let o = a.ask(
            (&dir, None),
            req(&other, "s-a", "make deploy"),
            Duration::from_millis(50),
            (&|_, _| true, None),
        );
        assert!(
            !o.approved,
            "another uid inherited a standing approval: {}",
            o.by
        );
        // ... but not in another session, where no answer in time is a deny.
        let o = a.ask(
            (&dir, None),
            req(&c, "s-b", "make deploy"),
            Duration::from_millis(50),
            (&|_, _| true, None),
        );
        assert!(!o.approved);
        assert!(o.by.contains("no answer"), "{}", o.by);
        let v = crate::audit::verify::verify(
            &dir,
            &crate::audit::verify::VerifyOptions {
                anchor: None,
                key: None,
                require_covered: true,
                covered_before: None,
            },
        )
        .expect("verify");
        assert!(v.ok(), "{v:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
