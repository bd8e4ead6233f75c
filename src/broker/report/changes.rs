//! The report of `gateway changes`, `gateway apply` and `gateway discard`: the held change
//! sets (`workspace::capture`), and what applying one did.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One path a held set would change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PendingChange {
    /// The path (redacted like any output).
    pub path: PathBuf,
    /// `created`, `changed` or `deleted`.
    pub kind: String,
}

/// A held change set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChangeSet {
    /// Its id (`gateway apply ID`, `gateway discard ID`).
    pub id: String,
    /// The workspace it changes.
    pub workspace: PathBuf,
    /// When its run started (seconds since the epoch).
    pub started: u64,
    /// The run's command (redacted).
    pub command: String,
    /// `held` (reviewed, or its broker died), `failed` (applying it failed in part),
    /// `running` (its run has not ended).
    pub state: String,
    /// Why it is held.
    pub why: Option<String>,
    /// What it would change, parents first.
    pub changes: Vec<PendingChange>,
}

/// What `gateway changes`, `apply` and `discard` report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChangesReport {
    /// `list`, `show`, `apply` or `discard`.
    pub action: String,
    /// The sets listed, shown, applied or discarded.
    pub sets: Vec<ChangeSet>,
    /// `changes ID --diff`: the unified diff of its text files (redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// `apply`: the journal group of what it changed (`gateway undo` reverts it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// `apply`: each path changed: (path, `created` | `changed` | `deleted`, journal id).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<(PathBuf, String, u64)>,
    /// `apply`: paths applied but not undoable, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_undoable: Vec<(PathBuf, String)>,
    /// `apply`: paths that could not be applied (still held), and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_applied: Vec<(PathBuf, String)>,
    /// `apply`, `discard`: the audit record (`gateway log show SEQ`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_seq: Option<u64>,
}
