//! A policy summarised as the front ends report it (issue 23, typed results): a built-in in
//! `policy list`, a file in `policy check`, the retention in force in `config show`. The CLI
//! renders these (human text or `--json`); it builds no result of its own.

use super::{BUILTINS, Policy, PolicyError};
use serde::Serialize;

/// A built-in policy as `policy list` shows it.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Listed {
    /// Its name (`--policy NAME`).
    pub name: String,
    /// Its one-line description.
    pub description: String,
    /// How many rules it has, inherited ones included.
    pub rules: usize,
}

/// Every built-in policy, in `BUILTINS` order.
pub fn builtins() -> Result<Vec<Listed>, PolicyError> {
    BUILTINS
        .iter()
        .map(|(name, _)| {
            let p = Policy::builtin(name)?;
            Ok(Listed {
                name: (*name).to_string(),
                description: p.description,
                rules: p.rules.len(),
            })
        })
        .collect()
}

/// `policy check FILE`: the file loads (with its `extends`), or why not.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Checked {
    /// Whether it loads.
    pub ok: bool,
    /// Its name, when it loads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// How many rules it has, inherited ones included, when it loads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<usize>,
    /// Why it does not load (`file:line:column: message`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Checked {
    /// A policy that loads.
    pub fn loaded(p: &Policy) -> Checked {
        Checked {
            ok: true,
            policy: Some(p.name.clone()),
            rules: Some(p.rules.len()),
            error: None,
        }
    }

    /// A policy that does not load, and why.
    pub fn failed(error: String) -> Checked {
        Checked {
            ok: false,
            policy: None,
            rules: None,
            error: Some(error),
        }
    }
}

/// The retention a policy puts in force (after the config file's overrides), as
/// `config show` reports it. Sizes in bytes, ages in seconds; `null`: no limit.
#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema)]
pub struct Retention {
    /// `[audit] artifacts_max_age`.
    pub artifacts_max_age: Option<u64>,
    /// `[audit] artifacts_max_total`.
    pub artifacts_max_total: Option<u64>,
    /// `[undo] backups_max_total`.
    pub backups_max_total: Option<u64>,
    /// `[undo] keep_versions`.
    pub keep_versions: u64,
    /// `[undo] max_state_bytes`.
    pub max_state_bytes: u64,
    /// `[undo] max_workspace_bytes`, or its default (half of `max_state_bytes`).
    pub max_workspace_bytes: u64,
}

impl From<&Policy> for Retention {
    fn from(p: &Policy) -> Retention {
        Retention {
            artifacts_max_age: p.audit.artifacts_max_age,
            artifacts_max_total: p.audit.artifacts_max_total,
            backups_max_total: p.undo.backups_max_total,
            keep_versions: p.undo.keep_versions,
            max_state_bytes: p.undo.max_state_bytes,
            max_workspace_bytes: p.undo.workspace_quota(),
        }
    }
}
