//! The result of `policy explain --credentials`, as a [`super::Report`] carries it.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use super::Json;
use crate::broker::credentials::Explained;

/// What the credential catalogue denies to the caller under a policy, and what the policy
/// denies and removes besides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialsOutcome {
    /// The result, as `--json` prints it ([`Explained`] borrows the compiled-in catalogue,
    /// so it travels as its JSON).
    pub explained: Json<Explained>,
    /// The policy's name.
    pub policy: String,
    /// Each credential store, in the catalogue's order.
    pub stores: Vec<Store>,
    /// The catalogue's credential variables.
    pub env: Vec<EnvVars>,
    /// Variables every run loses whatever the policy (built in).
    pub always_scrubbed: Vec<String>,
    /// The policy's own `[sandbox] deny` paths.
    pub policy_deny: Vec<String>,
    /// The policy's own `[sandbox] env_scrub` variables.
    pub policy_scrub: Vec<String>,
}

/// A catalogue store and the paths it denies to this caller, as the human output shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// Kind of tool (the README table's sections).
    pub group: String,
    /// The tool.
    pub owner: String,
    /// What the files hold.
    pub holds: String,
    /// Where the tool documents them.
    pub source: String,
    /// The paths denied to this caller.
    pub denied: Vec<PathBuf>,
}

/// A tool's credential variables, as the human output shows them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvVars {
    /// The tool.
    pub owner: String,
    /// Names or `*` patterns.
    pub names: Vec<String>,
    /// What the variables hold.
    pub holds: String,
    /// Where the tool documents them.
    pub source: String,
}

impl CredentialsOutcome {
    /// The outcome of `x`.
    pub fn of(x: &Explained) -> CredentialsOutcome {
        CredentialsOutcome {
            explained: Json::of(x),
            policy: x.policy.clone(),
            stores: x
                .stores
                .iter()
                .map(|s| Store {
                    group: s.group.to_string(),
                    owner: s.owner.to_string(),
                    holds: s.holds.to_string(),
                    source: s.source.to_string(),
                    denied: s.denied.clone(),
                })
                .collect(),
            env: x
                .env
                .iter()
                .map(|e| EnvVars {
                    owner: e.owner.clone(),
                    names: e.names.clone(),
                    holds: e.holds.clone(),
                    source: e.source.clone(),
                })
                .collect(),
            always_scrubbed: x.always_scrubbed.iter().map(|s| s.to_string()).collect(),
            policy_deny: x.policy_deny.clone(),
            policy_scrub: x.policy_scrub.clone(),
        }
    }
}
