//! The results of the file tools (`fs ...`), `history`, `trash` and `undo`, as a
//! [`super::Report`] carries them.

use serde::{Deserialize, Serialize};

/// A file tool's, `history`'s, `trash`'s or `undo`'s result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsOutcome {}
