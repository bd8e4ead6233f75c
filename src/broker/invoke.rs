//! One invocation skeleton (issue 23): every tool call — exec, each file tool, and the tools
//! still to come (git, archive, http, plan steps) — runs through [`invoke`], which holds the
//! sequence every call owes the user:
//!
//! 1. open the audit log (nothing runs if it cannot be opened);
//! 2. **decide**: the tool redacts its inputs (a secret in argv) and the policy decides
//!    ([`Tool::decide`]); the record's arguments are the redacted ones from here on;
//! 3. **ask** a person for an `ask` decision ([`Tool::ask`]), or confirm an allow the tool
//!    wants confirmed ([`Tool::confirm`]);
//! 4. **perform** ([`Tool::perform`]) — the only step in which exec and the file tools
//!    differ in substance; a run records its own intent inside it, just before the command
//!    starts (it needs the snapshot taken there);
//! 5. **record the outcome**: one record whatever happened — a denial, a refusal decided late
//!    (in the tool, recorded as a `deny` naming its rule), an error (recorded as a `deny` by
//!    `broker` when no decision was reached), a success;
//! 6. **after the record** ([`Tool::recorded`]): finish the intent, prune what the call
//!    added to the artifact and backup stores.
//!
//! A tool only fills in its own fields of the record ([`Tool::record`]); the skeleton owns
//! the decision, the approval, the error and the refusal, so no tool can forget one.

use std::path::Path;

use super::{BrokerError, open_log, record_decision};
use crate::audit;
use crate::model::{Decision, Effect};

/// The circumstances every call shares: who asks, under which policy, recorded where.
pub(crate) struct Call<'a> {
    /// The name of the policy in force (recorded; the tools decide with the policy itself).
    pub policy: &'a str,
    /// The broker's state directory (log, journal, artifacts).
    pub state_dir: &'a Path,
    /// Session id, recorded.
    pub session: &'a str,
    /// Who asked, recorded.
    pub caller: &'a audit::Caller,
    /// Who calls: told when the call's record is written (the daemon records a call it
    /// ends only if the call did not).
    pub context: &'a super::client::Context,
}

/// What one tool brings to the skeleton.
pub(crate) trait Tool {
    /// What performing it returns.
    type Output;
    /// The record's tool name (`exec`, `fs.read`, …).
    fn name(&self) -> &str;
    /// Redacts the inputs and decides. Fills the record's `args` and `cwd` (redacted) as
    /// soon as it knows them, so that a call that fails here is recorded with them.
    fn decide(&mut self, rec: &mut audit::Record) -> Result<Decision, BrokerError>;
    /// Asks a person about an `ask` decision: whether it was approved.
    fn ask(&mut self, decision: &Decision) -> bool;
    /// Asks a person to confirm an allowed call (a permanent removal): `None` when the
    /// tool wants no confirmation or there is no one to ask (the allow stands).
    fn confirm(&mut self, _decision: &Decision) -> Option<bool> {
        None
    }
    /// What a call that was not performed returns (denied, or not approved).
    fn not_performed(&mut self, decision: Decision, approved: Option<bool>) -> Self::Output;
    /// Performs the call.
    fn perform(
        &mut self,
        decision: Decision,
        approved: Option<bool>,
    ) -> Result<Self::Output, BrokerError>;
    /// Fills the record's tool-specific fields from what happened.
    fn record(&mut self, res: &Result<Self::Output, BrokerError>, rec: &mut audit::Record);
    /// After the record is written (`seq`): finish what the call began, prune.
    fn recorded(&mut self, _res: &Result<Self::Output, BrokerError>, _rec: &audit::Record) {}
    /// Whether performing it replaced the log's signing key (`keys rotate`): the outcome is
    /// then recorded through a writer opened afresh, signing with the new key.
    fn reopens_log(&self) -> bool {
        false
    }
}

/// A performed (or refused) call and where it was recorded.
pub(crate) struct Invoked<O> {
    /// What the tool returned.
    pub output: O,
    /// The audit record's sequence number.
    pub seq: u64,
}

/// Runs one tool call through the whole sequence (module doc). Every call that gets past
/// opening the log is recorded, whatever happens to it.
pub(crate) fn invoke<T: Tool>(
    call: &Call<'_>,
    tool: &mut T,
) -> Result<Invoked<T::Output>, BrokerError> {
    super::ensure_state_dir(call.state_dir)?;
    let mut log = open_log(call.state_dir, call.context.server())?;
    let mut rec = audit::Record {
        session: call.session.to_string(),
        caller: call.caller.clone(),
        tool: tool.name().to_string(),
        policy: call.policy.to_string(),
        ..audit::Record::default()
    };
    let mut decided = None;
    let res = steps(tool, &mut rec, &mut decided);
    if tool.reopens_log() && res.is_ok() {
        log = open_log(call.state_dir, call.context.server())?;
    }
    tool.record(&res, &mut rec);
    if let Err(e) = &res {
        rec.error = Some(e.redacted_message());
        rec.decision = match e {
            // A refusal decided late (in the tool, on the path as opened) is the policy's
            // no, recorded as a deny with its rule, as one decided before it.
            BrokerError::Refused(r) => audit::RecordDecision {
                effect: "deny".into(),
                rules: vec![r.rule().into()],
                reasons: vec![r.redacted_message()],
            },
            _ => record_decision(decided.as_ref(), Some(e)),
        };
    }
    let seq = match log.append(&mut rec) {
        Ok(s) => s,
        // A run that filled the state directory's disk (its layer lives there): the room
        // kept for its record is given back, and the append tried once more.
        Err(e) => {
            if !super::capture::release_reserve(call.state_dir) {
                return Err(e.into());
            }
            log = open_log(call.state_dir, call.context.server())?;
            log.append(&mut rec)?
        }
    };
    call.context.note_recorded();
    tool.recorded(&res, &rec);
    res.map(|output| Invoked { output, seq })
}

/// Decide, ask, perform.
fn steps<T: Tool>(
    tool: &mut T,
    rec: &mut audit::Record,
    decided: &mut Option<Decision>,
) -> Result<T::Output, BrokerError> {
    let decision = tool.decide(rec)?;
    rec.decision = record_decision(Some(&decision), None);
    *decided = Some(decision.clone());
    let approved = match decision.effect {
        Effect::Deny => None,
        Effect::Ask => Some(tool.ask(&decision)),
        Effect::Allow => tool.confirm(&decision),
    };
    rec.approved = approved;
    if decision.effect == Effect::Deny || approved == Some(false) {
        // Not approved (refused at the prompt, no answer in time, nobody to ask) is a
        // refusal like any other: recorded as a deny naming the rules that asked, with
        // `approved: false` beside it.
        rec.decision.effect = "deny".into();
        return Ok(tool.not_performed(decision, approved));
    }
    tool.perform(decision, approved)
}
