//! The results of the file tools (`fs ...`), `history`, `trash` and `undo`, as a
//! [`super::Report`] carries them.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use super::{FsReport, Json};
use crate::broker::tools::fs::{FsOutput, HistoryEntry};
use crate::journal::TrashItem;

/// A file tool's, `history`'s, `trash`'s or `undo`'s result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FsOutcome {
    /// A file tool's call (`fs read`, `fs write`, ..., `undo`, `trash restore`): its report
    /// (`--json`'s), and what the human text is rendered from.
    Tool {
        /// The report, as `--json` prints it, without its `output` (which travels once,
        /// typed, beside it: a large `fs read` is not sent twice).
        report: Json<FsReport<'static>>,
        /// What the tool says (the report's `output`).
        output: FsOutput,
        /// `fs grep --mode count`: files are shown with their counts.
        #[serde(default)]
        counts: bool,
        /// `--diff`: a change's diff is shown (a dry run shows it anyway).
        #[serde(default)]
        show_diff: bool,
    },
    /// `fs cd`: the session's new working directory.
    Cd {
        /// The directory.
        cwd: PathBuf,
    },
    /// `history`: the changes, oldest first.
    History {
        /// The changes shown.
        changes: Vec<HistoryEntry>,
        /// The workspace they were made in (`None`: every workspace's, `--all`).
        workspace: Option<PathBuf>,
        /// Older changes left out by the limit.
        omitted: usize,
        /// The limit (`--limit`; 0: none).
        limit: usize,
    },
    /// `undo --skip`: the changes passed over.
    Skipped {
        /// Their journal ids.
        skipped: Vec<u64>,
    },
    /// `trash list`: the items, present or gone.
    TrashList {
        /// The items.
        items: Vec<TrashItem>,
    },
    /// `trash empty`: how many items were removed for good.
    TrashEmptied {
        /// Items removed.
        removed: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::report::{Outcome, Report};
    use crate::journal::{Change, Phase};

    #[test]
    fn an_fs_report_travels_typed_and_reads_back_the_same() {
        let reports = [
            Report::new(
                0,
                Outcome::Fs(FsOutcome::Cd {
                    cwd: PathBuf::from("/w/sub"),
                }),
            ),
            Report::new(
                0,
                Outcome::Fs(FsOutcome::History {
                    changes: vec![HistoryEntry {
                        change: Change {
                            id: 3,
                            tool: "fs.write".into(),
                            path: PathBuf::from("/w/a"),
                            ..Change::default()
                        },
                        phase: Phase::Committed,
                        skipped: false,
                        backup_missing: Some("expired".into()),
                    }],
                    workspace: Some(PathBuf::from("/w")),
                    omitted: 2,
                    limit: 1,
                }),
            ),
            Report::new(
                0,
                Outcome::Fs(FsOutcome::Skipped {
                    skipped: vec![4, 5],
                }),
            ),
            Report::new(
                0,
                Outcome::Fs(FsOutcome::TrashList {
                    items: vec![TrashItem {
                        name: "a".into(),
                        original: PathBuf::from("/w/a"),
                        deleted: "2026-01-01T00:00:00".into(),
                        present: true,
                        emptied: None,
                    }],
                }),
            ),
            Report::new(0, Outcome::Fs(FsOutcome::TrashEmptied { removed: 7 })),
        ];
        for r in reports {
            let text = serde_json::to_string(&r).expect("serializes");
            let v: serde_json::Value = serde_json::from_str(&text).expect("json");
            assert_eq!(v["outcome"]["kind"], "fs", "{text}");
            let back: Report = serde_json::from_str(&text).expect("reads back");
            assert_eq!(back, r, "{text}");
        }
    }
}
