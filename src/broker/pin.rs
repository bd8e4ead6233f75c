//! A long-lived session pins the policy it loaded (issue 25).
//!
//! `gateway mcp`, `gateway repl` and each session of the daemon (`gateway serve`: the calls
//! that share a `GATEWAY_SESSION`, which the MCP server and the REPL set for theirs) load
//! their policy — the file and every file it `extends` — once, and decide every call of the
//! session by that copy. Its content hash ([`Policy::sha256`]) goes into the session's first
//! audit record (`policy_sha256`). When the file changes on disk, the next call still follows
//! the pinned copy and says once that the change is not in force. Only an explicit reload
//! (the REPL's `/reload-policy`, `gateway policy reload` for a daemon session) loads it again:
//! the reload is a `policy.reload` record with the old and new hashes, and a reload that fails
//! keeps the old policy, recorded as such. The MCP server offers no reload tool: its client is
//! the agent, and which policy governs an agent, and from when, is a person's decision (a
//! restart of the server, which is a new session).
//!
//! A call made without a session (a one-shot CLI call) loads the policy for itself: it is the
//! whole of its session.

use super::BrokerError;
use crate::audit::{Caller, Record, RecordDecision};
use crate::policy::Policy;
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

/// Sessions whose next record carries the hash of the policy they pinned: (uid, session,
/// hash) — keyed by the uid too, so that another uid's record under the same session name is
/// not stamped with this one's policy. A daemon's are its [`Pins`]' (its
/// [`super::server::Server`]'s); a one-process front end's (the CLI, `gateway mcp` and
/// `gateway repl` without a daemon) are [`OWN`]. Bounded per uid and in all: one uid's
/// sessions cannot push out another's.
#[derive(Debug, Default)]
pub struct Stamps(Mutex<Vec<(u32, String, String)>>);

/// The stamps of this process's own sessions, when it is not a daemon (see [`Stamps`]).
pub static OWN: Stamps = Stamps(Mutex::new(Vec::new()));

/// Pending first records kept at most, in all (sessions that pin and never record).
const MAX_FIRST: usize = 4096;

/// Pending first records one uid keeps at most.
const MAX_FIRST_PER_UID: usize = 256;

impl Stamps {
    /// The next record of `uid`'s `session` carries `sha256` (the policy it pinned). Beyond
    /// the bounds the oldest goes: the uid's own when it holds its share.
    pub fn announce(&self, uid: u32, session: &str, sha256: &str) {
        let mut f = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f.retain(|(u, s, _)| !(*u == uid && s == session));
        let own = f.iter().filter(|(u, _, _)| *u == uid).count();
        if own >= MAX_FIRST_PER_UID {
            if let Some(i) = f.iter().position(|(u, _, _)| *u == uid) {
                f.remove(i);
            }
        } else if f.len() >= MAX_FIRST {
            f.remove(0);
        }
        f.push((uid, session.to_string(), sha256.to_string()));
    }

    /// Sets the pinned hash on a session's first record (before it is appended).
    pub(crate) fn stamp(&self, rec: &mut Record) {
        if rec.policy_sha256.is_some() {
            return;
        }
        let f = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, _, h)) = f
            .iter()
            .find(|(u, s, _)| *u == rec.caller.uid && *s == rec.session)
        {
            rec.policy_sha256 = Some(h.clone());
        }
    }

    /// The record was appended: the session's first record is written.
    pub(crate) fn stamped(&self, rec: &Record) {
        let mut f = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f.retain(|(u, s, _)| !(*u == rec.caller.uid && *s == rec.session));
    }
}

/// A session's pinned policy.
#[derive(Debug)]
pub struct Pinned {
    policy: Arc<Policy>,
    /// The on-disk hash last reported as changed (a change is reported once).
    reported: Mutex<Option<String>>,
}

impl Pinned {
    /// Pins `policy` for `session`: its next record carries the policy's hash.
    pub fn new(session: &str, policy: Policy) -> Pinned {
        Pinned::shared(
            &OWN,
            crate::sandbox::effective_uid(),
            session,
            Arc::new(policy),
        )
    }

    fn shared(stamps: &Stamps, uid: u32, session: &str, policy: Arc<Policy>) -> Pinned {
        stamps.announce(uid, session, &policy.sha256);
        Pinned {
            policy,
            reported: Mutex::new(None),
        }
    }

    /// The pinned policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Once per change: what to tell the session when its policy's files no longer hold what
    /// it pinned (changed, gone, unreadable). `how` says how to reload. The files are read
    /// with the caller's rights, as loading them was.
    pub fn changed_notice(&self, cx: &super::client::Context, how: &str) -> Option<String> {
        let now = cx
            .as_client(|| self.policy.source_sha256())
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        let key = match &now {
            Ok(h) if *h == self.policy.sha256 => {
                *self.reported.lock().unwrap_or_else(|p| p.into_inner()) = None;
                return None;
            }
            Ok(h) => h.clone(),
            Err(e) => format!("error: {e}"),
        };
        let mut r = self.reported.lock().unwrap_or_else(|p| p.into_inner());
        if r.as_deref() == Some(key.as_str()) {
            return None;
        }
        *r = Some(key);
        let what = match now {
            Ok(h) => format!("changed on disk (sha256 {} now)", short(&h)),
            Err(e) => format!("can no longer be loaded ({e})"),
        };
        Some(format!(
            "policy {} {what}: this session still follows the policy it loaded (sha256 {}); the change is not in force until {how}",
            self.policy.source,
            short(&self.policy.sha256)
        ))
    }
}

fn short(h: &str) -> &str {
    &h[..h.len().min(16)]
}

/// Who asked for a reload and by which rule: recorded as the decision of the
/// `policy.reload` record.
pub struct ReloadBy<'a> {
    /// The session.
    pub session: &'a str,
    /// The caller.
    pub caller: Caller,
    /// The rule id (`repl-command`, `session-reload`).
    pub rule: &'a str,
    /// Why it is allowed.
    pub reason: &'a str,
    /// The server whose session it is (its audit writer records the reload), if any.
    pub server: Option<&'a super::server::Server>,
}

/// What a reload did.
#[derive(Debug)]
pub struct Reloaded {
    /// The policy in force now (the old one when the load failed).
    pub pinned: Arc<Pinned>,
    /// The audit record's seq.
    pub seq: u64,
    /// Why the new policy was not loaded (the old one stays).
    pub failed: Option<String>,
    /// The hash of the policy in force before the reload.
    pub replaced: String,
}

/// A reload that took effect, as `policy reload --json` reports it.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq, Clone, schemars::JsonSchema)]
pub struct ReloadReport {
    /// The name of the policy now in force.
    pub policy: String,
    /// Its content hash ([`Policy::sha256`]).
    pub sha256: String,
    /// The hash of the policy it replaced.
    pub replaced: String,
    /// The seq of the `policy.reload` audit record.
    pub audit_seq: u64,
}

impl Reloaded {
    /// The report of this reload (the policy in force, which is the old one if it failed).
    pub fn report(&self) -> ReloadReport {
        let p = self.pinned.policy();
        ReloadReport {
            policy: p.name.clone(),
            sha256: p.sha256.clone(),
            replaced: self.replaced.clone(),
            audit_seq: self.seq,
        }
    }
}

/// Reloads a session's policy from `spec` (`load`): records a `policy.reload` with the old and
/// the new hash, or the error with the old hash still in force. Nothing changes unrecorded: a
/// record that cannot be written keeps the old policy and is the error.
pub fn reload(
    state_dir: &Path,
    by: &ReloadBy<'_>,
    old: &Arc<Pinned>,
    spec: &str,
    load: impl FnOnce() -> Result<Policy, String>,
) -> Result<Reloaded, BrokerError> {
    let loaded = load();
    let old_hash = old.policy.sha256.clone();
    let mut rec = Record {
        session: by.session.to_string(),
        caller: by.caller.clone(),
        tool: "policy.reload".into(),
        args: vec![spec.to_string()],
        decision: RecordDecision {
            effect: "allow".into(),
            rules: vec![by.rule.to_string()],
            reasons: vec![by.reason.to_string()],
        },
        policy_replaced: Some(old_hash.clone()),
        ..Record::default()
    };
    match &loaded {
        Ok(p) => {
            rec.policy = p.name.clone();
            rec.policy_sha256 = Some(p.sha256.clone());
            rec.exit_code = Some(0);
        }
        Err(e) => {
            rec.policy = old.policy.name.clone();
            rec.policy_sha256 = Some(old_hash);
            rec.error = Some(format!("{e}; the policy in force is unchanged"));
        }
    }
    let seq = super::append_record(state_dir, by.server, &mut rec)?;
    let replaced = old.policy.sha256.clone();
    Ok(match loaded {
        Ok(p) => Reloaded {
            pinned: Arc::new(Pinned::shared_recorded(Arc::new(p))),
            seq,
            failed: None,
            replaced,
        },
        Err(e) => Reloaded {
            pinned: old.clone(),
            seq,
            failed: Some(e),
            replaced,
        },
    })
}

impl Pinned {
    /// A pin whose hash a record already names (a reload).
    fn shared_recorded(policy: Arc<Policy>) -> Pinned {
        Pinned {
            policy,
            reported: Mutex::new(None),
        }
    }
}

// ---------- the daemon's sessions ----------

/// A daemon's pinned sessions (owned by its [`super::server::Server`]): (uid:session, policy
/// as named) → pin; policies shared by hash. Bounded in all and per uid.
#[derive(Default)]
pub struct Pins(Mutex<Option<Sessions>>, Stamps);

#[derive(Default)]
struct Sessions {
    pins: HashMap<(String, String), (Arc<Pinned>, u64)>,
    by_hash: HashMap<String, Weak<Policy>>,
    tick: u64,
}

/// Sessions the daemon holds pins for; the least recently used is dropped beyond (its next
/// call pins what is on disk then, recorded as its first record again).
const MAX_SESSIONS: usize = 16384;

/// Pins one uid's sessions hold at most (each may pin a policy of its own).
const MAX_SESSIONS_PER_UID: usize = 256;

impl Pins {
    /// The daemon's sessions' first-record stamps.
    pub fn stamps(&self) -> &Stamps {
        &self.1
    }

    /// The pinned policy of a daemon session for the policy named `spec`: pinned on first use
    /// (`load`), the same copy after that. Sessions are keyed by their client's uid (`owner`)
    /// and name: another uid naming the same session shares nothing with it.
    pub fn in_session(
        &self,
        owner: u32,
        session: &str,
        spec: &str,
        load: impl FnOnce() -> Result<Policy, String>,
    ) -> Result<Arc<Pinned>, String> {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let s = g.get_or_insert_with(Sessions::default);
        s.tick += 1;
        let tick = s.tick;
        let key = (format!("{owner}:{session}"), spec.to_string());
        if let Some((p, used)) = s.pins.get_mut(&key) {
            *used = tick;
            return Ok(p.clone());
        }
        let p = load()?;
        let policy = match s.by_hash.get(&p.sha256).and_then(Weak::upgrade) {
            Some(same) => same,
            None => {
                let a = Arc::new(p);
                s.by_hash.retain(|_, w| w.strong_count() > 0);
                s.by_hash.insert(a.sha256.clone(), Arc::downgrade(&a));
                a
            }
        };
        let pinned = Arc::new(Pinned::shared(&self.1, owner, session, policy));
        // Bounded in all and per uid: the least recently used pin goes (of this uid, when it
        // holds its share), so that one client cannot take the others' places.
        let prefix = format!("{owner}:");
        let own = s
            .pins
            .keys()
            .filter(|(k, _)| k.starts_with(&prefix))
            .count();
        let evict = if own >= MAX_SESSIONS_PER_UID {
            Some(true)
        } else if s.pins.len() >= MAX_SESSIONS {
            Some(false)
        } else {
            None
        };
        if let Some(only_own) = evict
            && let Some(oldest) = s
                .pins
                .iter()
                .filter(|((k, _), _)| !only_own || k.starts_with(&prefix))
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            s.pins.remove(&oldest);
        }
        s.pins.insert(key, (pinned.clone(), tick));
        Ok(pinned)
    }

    /// The pin a daemon session holds for `spec`, if any.
    pub fn session_pin(&self, owner: u32, session: &str, spec: &str) -> Option<Arc<Pinned>> {
        let g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        g.as_ref()?
            .pins
            .get(&(format!("{owner}:{session}"), spec.to_string()))
            .map(|(p, _)| p.clone())
    }

    /// Replaces a daemon session's pin for `spec` (after a reload).
    pub fn set_session_pin(&self, owner: u32, session: &str, spec: &str, pinned: Arc<Pinned>) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let s = g.get_or_insert_with(Sessions::default);
        s.tick += 1;
        let tick = s.tick;
        s.by_hash
            .insert(pinned.policy.sha256.clone(), Arc::downgrade(&pinned.policy));
        s.pins.insert(
            (format!("{owner}:{session}"), spec.to_string()),
            (pinned, tick),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_record(uid: u32, session: &str) -> Record {
        Record {
            caller: Caller {
                uid,
                pid: 1,
                client: "test".into(),
            },
            session: session.into(),
            ..Record::default()
        }
    }

    #[test]
    fn one_uids_sessions_cannot_push_out_anothers_first_stamp() {
        // Two servers keep their own stamps: a daemon's sessions are its own, not the
        // process's. In one, uid 2 pins a session; uid 1 then pins far more sessions than
        // its share without recording: uid 2's first record still names its policy.
        let (a, b) = (Pins::default(), Pins::default());
        a.stamps().announce(2, "s", "hash-2");
        for i in 0..(MAX_FIRST + 10) {
            a.stamps().announce(1, &format!("s{i}"), "hash-1");
        }
        let mut rec = first_record(2, "s");
        b.stamps().stamp(&mut rec);
        assert_eq!(rec.policy_sha256, None, "another server's stamps");
        a.stamps().stamp(&mut rec);
        assert_eq!(rec.policy_sha256.as_deref(), Some("hash-2"));
        a.stamps().stamped(&rec);
        let mut again = first_record(2, "s");
        a.stamps().stamp(&mut again);
        assert_eq!(again.policy_sha256, None, "only the first record");
        // uid 1 keeps its newest sessions, within its share.
        let mut newest = first_record(1, &format!("s{}", MAX_FIRST + 9));
        a.stamps().stamp(&mut newest);
        assert_eq!(newest.policy_sha256.as_deref(), Some("hash-1"));
        let mut oldest = first_record(1, "s0");
        a.stamps().stamp(&mut oldest);
        assert_eq!(oldest.policy_sha256, None);
    }
}
