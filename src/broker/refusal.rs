//! Typed refusals (issue 23): the policy — its roots, its denied and protected paths, its
//! limits — says no. A refusal is not a usage error (the request was well formed) nor a
//! failure (nothing broke): wherever it is decided, in the broker or late in the file tools'
//! confined worker, it is recorded as a `deny` naming its rule, so `gateway log query
//! --decision deny` finds it, and `cli` maps every refusal to exit 120 (`exit::DENIED`),
//! like an exec denial; `--json` adds the refusal's fields beside the error message.
//!
//! The file tools' refusals come first; the messages are those the tools gave as usage
//! errors before, so what a person reads is unchanged.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Why a file tool's path is outside what the policy allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// The policy's readable directories.
    Read,
    /// The directories the policy lets commands change.
    Write,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::Read => "allows",
            Access::Write => "lets commands change",
        })
    }
}

/// A refusal by the policy: what was refused, on which path, by which rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Refusal {
    /// The path lies outside the directories the policy lets the tool read or change
    /// (rule `outside-roots`).
    #[error("refused: {}: outside the directories this policy {access}", path.display())]
    OutsideRoots {
        /// The path as asked for.
        path: PathBuf,
        /// Reading or changing.
        access: Access,
    },
    /// The path is inside an allowed directory as written, but a link or mount on the way
    /// leads outside it (rule `outside-roots`).
    #[error("refused: {}: {why}", path.display())]
    LeadsOutside {
        /// The path as asked for (or the part of it that leads out).
        path: PathBuf,
        /// How it leads out.
        why: String,
    },
    /// The file opened is one the policy denies (`[filesystem] deny`), found where it
    /// really is (rule `denied-path`).
    #[error("refused: {}: the policy denies access to it", path.display())]
    DeniedPath {
        /// The path as asked for.
        path: PathBuf,
    },
    /// The path to change is read-only or denied by the policy, or protected (rule
    /// `protected-path`).
    #[error("refused: {}: protected by the policy (read-only or denied)", path.display())]
    ProtectedPath {
        /// The path as asked for.
        path: PathBuf,
    },
    /// A recursive removal would take a protected or denied path inside it with it (rule
    /// `protected-path`).
    #[error(
        "refused: {} contains {}, which the policy protects; remove the rest piece by piece",
        path.display(),
        inner.display()
    )]
    ContainsProtected {
        /// The directory asked to be removed.
        path: PathBuf,
        /// The protected path inside it.
        inner: PathBuf,
    },
    /// The file is larger than the policy's `[files] max_size` (rule `files.max_size`).
    #[error(
        "refused: {}: {size} bytes, more than the {max} bytes file tools handle (policy [files] max_size)",
        path.display()
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The policy's limit.
        max: u64,
    },
    /// What the call would change cannot be backed up — the backup store's quota (`[undo]
    /// max_state_bytes`, the workspace's share `max_workspace_bytes`) or the free-space
    /// margin — so undo could not restore it: refused before anything is touched (rule
    /// `undo.backup`).
    #[error(
        "refused, nothing was changed: undo could not restore this change, because the content it replaces or writes cannot be backed up: {reason}"
    )]
    NotBackedUp {
        /// Which limit, and what to raise.
        reason: String,
    },
    /// The policy's rules deny the call (rule: the first deciding rule).
    #[error("denied by policy: {}", reasons.join("; "))]
    PolicyDenied {
        /// The ids of the rules that denied it.
        rules: Vec<String>,
        /// Their reasons.
        reasons: Vec<String>,
    },
    /// The policy asks a person, and none approved: denied at the prompt, no answer within
    /// `[approval] timeout`, or nobody to ask (rule: the first rule that asked).
    #[error(
        "needs approval and was not approved (denied, no answer in time, or nobody could answer: `gateway serve` queues it for `gateway approve ID`): {}",
        reasons.join("; ")
    )]
    NotApproved {
        /// The ids of the rules that asked.
        rules: Vec<String>,
        /// Their reasons.
        reasons: Vec<String>,
    },
    /// `--env NAME=…` names a variable that never reaches the sandbox: credentials, loader
    /// and shell-startup variables (rule `env.scrubbed`).
    #[error(
        "--env {name}: the name matches an always-scrubbed pattern (credentials, loader and shell-startup variables never reach the sandbox)"
    )]
    ScrubbedEnv {
        /// The variable's name.
        name: String,
    },
    /// A daemon client asked for what belongs to another uid — a pending request, a record
    /// and its stored output, a change or trash item — and is neither its owner nor in the
    /// daemon's `approvers` (for requests) or `auditors` (to see) group (rule `daemon.owner`).
    #[error(
        "refused: {what} belongs to another user; a daemon client sees and answers only its own (the daemon's config names the groups that may see or answer others': approvers, auditors)"
    )]
    NotYours {
        /// What was asked for (`pending request 3`, `record 12`).
        what: String,
    },
    /// Maintenance (`log gc`, `keys rotate`, `trash empty`) asked of the daemon by a client
    /// that is not its admin — root or the daemon's own uid (rule `daemon.admin`).
    #[error(
        "refused: {what} changes what every client of this daemon relies on; only the daemon's admin (root or the uid it runs as) may run it through the daemon"
    )]
    NotAdmin {
        /// The command.
        what: String,
    },
    /// A daemon client asked for a policy the daemon's config does not let clients pick
    /// (`allow_client_policy`; rule `daemon.client_policy`).
    #[error(
        "refused: policy {policy}: this daemon lets clients use only {allowed} (allow_client_policy in its config); unset --policy/GATEWAY_POLICY to get the daemon's own"
    )]
    ClientPolicy {
        /// The policy asked for.
        policy: String,
        /// The policies allowed, comma-separated.
        allowed: String,
    },
    /// The call asked for a longer wall-clock timeout than the policy's (`[sandbox.limits]
    /// timeout`), or, where the policy sets none, than the longest a run may have
    /// ([`crate::model::MAX_TIMEOUT`]): a request may only narrow it (rule `limits.timeout`).
    #[error(
        "refused: a timeout of {} is longer than {} ({}); ask for at most that",
        shown_ms(*asked_ms),
        shown_ms(*max_ms),
        if *from_policy { "the policy's [sandbox.limits] timeout" } else { "the longest a run may have: the policy sets no timeout" }
    )]
    TimeoutOverLimit {
        /// The timeout asked for, in milliseconds (saturated).
        asked_ms: u64,
        /// The longest allowed, in milliseconds.
        max_ms: u64,
        /// The limit is the policy's own (else the fixed ceiling).
        from_policy: bool,
    },
    /// A secret in the call's input — its command line, environment or stdin — under
    /// `secrets.input = "deny"` (rule `secrets.input`).
    #[error(
        "refused: {place} contains a secret (rule {rule}); the policy refuses secrets in command lines, environment and stdin (secrets.input = \"deny\"): pass it through a file or a variable the policy allows instead"
    )]
    SecretInInput {
        /// `argument N`, `environment variable NAME` or `stdin`.
        place: String,
        /// The secrets rule that matched.
        rule: String,
    },
}

impl Refusal {
    /// Why a call that was decided was not performed: denied by its rules, or not
    /// approved. `None` when it was performed.
    pub fn of_decision(d: &crate::model::Decision, approved: Option<bool>) -> Option<Refusal> {
        use crate::model::Effect;
        let (rules, reasons) = d
            .deciding_rules()
            .map(|r| (r.id.clone(), r.reason.clone()))
            .unzip();
        match (d.effect, approved) {
            (Effect::Deny, _) => Some(Refusal::PolicyDenied { rules, reasons }),
            (Effect::Ask, Some(true)) | (Effect::Allow, _) => None,
            (Effect::Ask, _) => Some(Refusal::NotApproved { rules, reasons }),
        }
    }

    /// The id of the rule that refused, as recorded in the audit log's `decision.rules`.
    pub fn rule(&self) -> &str {
        match self {
            Refusal::PolicyDenied { rules, .. } | Refusal::NotApproved { rules, .. } => {
                rules.first().map_or("policy", String::as_str)
            }
            Refusal::SecretInInput { .. } => "secrets.input",
            Refusal::ScrubbedEnv { .. } => "env.scrubbed",
            Refusal::NotBackedUp { .. } => "undo.backup",
            Refusal::OutsideRoots { .. } | Refusal::LeadsOutside { .. } => "outside-roots",
            Refusal::DeniedPath { .. } => "denied-path",
            Refusal::ProtectedPath { .. } | Refusal::ContainsProtected { .. } => "protected-path",
            Refusal::TooLarge { .. } => "files.max_size",
            Refusal::NotYours { .. } => "daemon.owner",
            Refusal::NotAdmin { .. } => "daemon.admin",
            Refusal::ClientPolicy { .. } => "daemon.client_policy",
            Refusal::TimeoutOverLimit { .. } => "limits.timeout",
        }
    }

    /// Refuses a requested timeout `asked` longer than the policy's `policy` timeout, or than
    /// [`crate::model::MAX_TIMEOUT`] when the policy sets none.
    pub fn check_timeout(
        asked: Option<std::time::Duration>,
        policy: Option<std::time::Duration>,
    ) -> Result<(), Refusal> {
        let Some(asked) = asked else { return Ok(()) };
        let max = policy.unwrap_or(crate::model::MAX_TIMEOUT);
        if asked <= max {
            return Ok(());
        }
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Err(Refusal::TimeoutOverLimit {
            asked_ms: ms(asked),
            max_ms: ms(max),
            from_policy: policy.is_some(),
        })
    }

    /// The refusal as shown (`--json`, MCP): its fields, the rule, the message in words, and
    /// every field with a secret in it redacted — paths, but also an `--env` name, a place,
    /// a link's story, the rules' reasons: whatever the caller could put a secret in.
    pub fn shown(&self) -> serde_json::Value {
        /// Every string inside `v`, redacted.
        fn redact_all(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::String(s) => *s = super::redact_text(s),
                serde_json::Value::Array(a) => a.iter_mut().for_each(redact_all),
                serde_json::Value::Object(o) => o.values_mut().for_each(redact_all),
                _ => {}
            }
        }
        let mut v = serde_json::to_value(self).unwrap_or_default();
        redact_all(&mut v);
        // The message in words from the redacted fields: the wording itself is never taken
        // for a secret (`secrets.input = "deny"` is a keyword assignment to the scanner).
        let message = serde_json::from_value::<Refusal>(v.clone())
            .map(|r| r.to_string())
            .unwrap_or_else(|_| super::redact_text(&self.to_string()));
        if let Some(o) = v.as_object_mut() {
            o.insert("rule".into(), self.rule().into());
            o.insert("message".into(), message.into());
        }
        v
    }

    /// The message in words with every field that could carry a secret redacted, and the
    /// wording kept.
    pub fn redacted_message(&self) -> String {
        self.shown()["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| super::redact_text(&self.to_string()))
    }
}

/// A duration in milliseconds as people read it (`10m`, `1h 30m 0.5s`).
fn shown_ms(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_names_its_rule_and_keeps_its_fields() {
        let r = Refusal::TooLarge {
            path: "/w/big".into(),
            size: 10,
            max: 5,
        };
        let v = r.shown();
        assert_eq!(v["kind"], "too_large");
        assert_eq!(v["rule"], "files.max_size");
        assert_eq!(v["path"], "/w/big");
        assert_eq!(v["max"], 5);
        let back: Refusal = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        let o = Refusal::OutsideRoots {
            path: "/etc/x".into(),
            access: Access::Write,
        };
        assert_eq!(o.rule(), "outside-roots");
        // A secret in any field, not only in paths, is shown redacted.
        let tok = format!("ghp_{}", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8");
        for r in [
            Refusal::ScrubbedEnv {
                name: format!("GITHUB_TOKEN_{tok}"),
            },
            Refusal::LeadsOutside {
                path: "/w/l".into(),
                why: format!("a link to /o/{tok}"),
            },
        ] {
            let v = r.shown().to_string();
            assert!(!v.contains(&tok), "{v}");
        }
        assert_eq!(
            o.to_string(),
            "refused: /etc/x: outside the directories this policy lets commands change"
        );
    }

    #[test]
    fn a_timeout_may_only_narrow_the_policys() {
        use std::time::Duration;
        let m = Duration::from_secs(600);
        assert_eq!(Refusal::check_timeout(None, Some(m)), Ok(()));
        assert_eq!(Refusal::check_timeout(Some(m), Some(m)), Ok(()));
        let r = Refusal::check_timeout(Some(m + Duration::from_millis(1)), Some(m))
            .expect_err("wider than the policy's");
        assert_eq!(r.rule(), "limits.timeout");
        assert!(
            r.to_string().contains("10m 1ms") && r.to_string().contains("[sandbox.limits]"),
            "{r}"
        );
        // No policy timeout: the fixed ceiling; a timeout too large for any clock saturates.
        let r = Refusal::check_timeout(Some(Duration::MAX), None).expect_err("over the ceiling");
        assert_eq!(
            r,
            Refusal::TimeoutOverLimit {
                asked_ms: u64::MAX,
                max_ms: 7 * 24 * 3600 * 1000,
                from_policy: false
            }
        );
        assert!(r.to_string().contains("7days"), "{r}");
        assert_eq!(
            Refusal::check_timeout(Some(crate::model::MAX_TIMEOUT), None),
            Ok(())
        );
    }
}
