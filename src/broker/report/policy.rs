//! The results of `policy list|check|explain|reload`, `scan`, `pending` and
//! `approve`/`deny`, as a [`super::Report`] carries them.

use super::Json;
use crate::broker::approvals::{Answered, Pending};
use crate::broker::request::ScanFormat;
use crate::broker::tools::scan::ScanReport;
use crate::policy::report::{Checked, Listed};
use serde::{Deserialize, Serialize};

/// A `policy` command's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyOutcome {
    /// `policy list`: the built-in policies.
    List(Vec<Listed>),
    /// `policy check FILE`: the file, and what loaded.
    Checked {
        /// The file as named.
        file: String,
        /// Its summary (`--json`'s).
        checked: Checked,
    },
    /// `policy explain -- CMD`.
    Explained(Box<Explained>),
    /// `policy reload`: what a session's pin now holds.
    Reloaded {
        /// The session.
        session: String,
        /// The reload's report (`--json`'s).
        report: crate::broker::pin::ReloadReport,
    },
}

/// `policy explain`'s result: its JSON (`--json`, indented) and what the human text shows
/// of it, each field as it is printed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explained {
    /// The explanation (`--json`).
    pub json: Json<crate::broker::Explanation>,
    /// The policy's name.
    pub policy: String,
    /// The decision's effect (`allow`, `ask`, `deny`).
    pub effect: String,
    /// The simple commands found.
    pub commands: Vec<String>,
    /// Each rule that matched: effect, id, reason, subject.
    pub rules: Vec<[String; 4]>,
    /// What could not be analysed.
    pub unanalysable: Vec<String>,
    /// The kernel's landlock ABI.
    pub landlock_abi: i32,
    /// The sandbox's places, by kind (`read`, `write`, `exec`, `deny`, `protected`,
    /// `hidden`), in that order.
    pub places: Vec<(String, Vec<String>)>,
    /// The network, as said.
    pub network: String,
    /// The limits, as said.
    pub limits: String,
    /// The secrets policy for output and input, as said.
    pub secrets: [String; 2],
    /// Secrets the command line holds: place, rule.
    pub secrets_in_argv: Vec<[String; 2]>,
    /// The names of the variables the run gets.
    pub env: Vec<String>,
    /// The layers that would apply.
    pub layers: Vec<String>,
}

/// `scan`'s result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScanOutcome {
    /// How it is printed.
    pub format: ScanFormat,
    /// The findings and counts.
    pub report: ScanReport,
    /// Findings the baseline already knew.
    pub known: usize,
    /// Files `--redact` rewrote.
    pub redacted: usize,
}

/// `pending`'s and `approve`/`deny`'s results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalOutcome {
    /// The requests waiting for an answer, oldest first.
    Pending(Vec<Pending>),
    /// An answer given.
    Answered(Answered),
}
