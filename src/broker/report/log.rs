//! The results of `log ...` and `keys ...`, as a [`super::Report`] carries them.

use serde::{Deserialize, Serialize};

use crate::broker::log::{
    Checkpoint, Collected, PublicKeys, QueryResult, Record, Rotated, Shown, Verified,
};

/// A `log` or `keys` command's result. (Not `Eq`: a [`Record`] holds its duration as a
/// float.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case", deny_unknown_fields)]
pub enum LogOutcome {
    /// `log verify`: what was checked and what does not hold (the report's exit code says
    /// which).
    Verify {
        /// The result, as `--json` prints it.
        verified: Verified,
        /// An anchor (`--anchor FILE`) was checked too.
        anchored: bool,
    },
    /// `log query`: the matching records.
    Query {
        /// The result, as `--json` prints it.
        result: QueryResult,
    },
    /// `log tail` (without `-f`, which streams): the newest records, oldest first.
    Tail {
        /// The records (`--json`: one line each).
        records: Vec<Record>,
    },
    /// `log show SEQ`: the record and its stored streams.
    Show {
        /// The record and its streams, as `--json` prints them.
        shown: Box<Shown>,
    },
    /// `log checkpoint`: the newest signed checkpoint.
    Checkpoint {
        /// The checkpoint.
        checkpoint: Checkpoint,
        /// `--export`: the checkpoint alone, without the line saying what it is.
        export: bool,
    },
    /// `log gc`: what the retention removed.
    Gc {
        /// What was removed.
        collected: Collected,
    },
    /// `keys export`: the public keys.
    KeysExport {
        /// The keys.
        keys: PublicKeys,
    },
    /// `keys rotate`: the new key.
    KeysRotate {
        /// The new key.
        rotated: Rotated,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::log::{Artifact, Stored};
    use crate::broker::report::{Outcome, Report};

    /// A log result read back from its protocol JSON (a daemon's client) is the same value,
    /// and prints the same JSON: every kind of stored stream, a record with a duration.
    #[test]
    fn a_log_report_reads_back_as_it_was_sent() {
        let record = Record {
            seq: 7,
            tool: "exec".into(),
            args: vec!["echo".into(), "hi".into()],
            duration_ms: Some(12.345_678_901_234),
            exit_code: Some(0),
            ..Record::default()
        };
        let artifact = |stream, content| Artifact {
            stream,
            digest: crate::broker::log::StreamDigest::default(),
            content,
            cut_bytes: Some(3),
        };
        let shown = Shown {
            record: record.clone(),
            artifacts: vec![
                artifact("stdin", Stored::Content(b"caf\xc3\xa9\n".to_vec())),
                artifact("stdout", Stored::Omitted(true)),
                artifact("stderr", Stored::Unavailable("removed".into())),
            ],
            connections: vec![crate::audit::Record {
                tool: "net".into(),
                net: Some(crate::audit::NetInfo {
                    command: 1,
                    protocol: "connect".into(),
                    host: "example.com".into(),
                    port: 443,
                    address: Some("93.184.216.34".into()),
                    bytes_up: 5,
                    bytes_down: 7,
                    duration_ms: 1.5,
                }),
                ..Default::default()
            }],
        };
        for o in [
            LogOutcome::Show {
                shown: Box::new(shown),
            },
            LogOutcome::Query {
                result: QueryResult {
                    records: vec![record.clone()],
                    scanned: 9,
                },
            },
            LogOutcome::Tail {
                records: vec![record],
            },
        ] {
            let sent = Report::new(0, Outcome::Log(o));
            let wire = serde_json::to_string(&sent).expect("serialize");
            let read: Report = serde_json::from_str(&wire).expect("read back");
            assert_eq!(read, sent, "{wire}");
            assert_eq!(
                serde_json::to_value(&read).expect("value"),
                serde_json::to_value(&sent).expect("value")
            );
        }
    }
}
