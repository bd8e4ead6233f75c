//! The results of `log ...` and `keys ...`, as a [`super::Report`] carries them.

use serde::{Deserialize, Serialize};

/// A `log` or `keys` command's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogOutcome {}
