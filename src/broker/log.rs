//! Reviewing the audit log: verify, query, show, keys. Thin: the work is in `audit`; this
//! is where the CLI (and later the daemon) reach it, so that every front end goes through the
//! broker.

use super::BrokerError;
use crate::audit::{self, AuditError};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// The daemon's audit checkpoints: every 1,000 records or second (the daemon's long-lived
/// writer, and its replacement after a key rotation).
pub(crate) const BATCH: audit::Checkpoints = audit::Checkpoints::Batch {
    records: 1000,
    interval: Duration::from_secs(1),
};

pub use audit::query::{Filter, QueryResult, parse_time};
pub use audit::verify::{Problem, VerifyReport};
pub use audit::{Caller, Record, StreamDigest};

/// The largest anchor or key file `log verify` reads (bytes).
const MAX_NAMED: u64 = 1 << 20;

fn read(
    cx: &super::client::Context,
    path: &Path,
    what: &'static str,
) -> Result<String, BrokerError> {
    // A file the caller names: read with the caller's rights.
    // Opened without blocking, a FIFO read as `cat` would but not past the call's end.
    let cancel = cx.cancel();
    cx.as_client(|| crate::sandbox::read_named(path, MAX_NAMED, cancel))
        .and_then(|r| r)
        .and_then(|b| {
            if b.len() as u64 > MAX_NAMED {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("larger than {MAX_NAMED} bytes"),
                ));
            }
            String::from_utf8(b)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .map_err(|source| BrokerError::Io {
            what: format!("reading {what} {}", path.display()),
            source,
        })
}

/// `log verify`'s result: the report, whether it holds, and each problem as a sentence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verified {
    /// Whether everything holds (`report.problems` is empty).
    pub ok: bool,
    /// The figures checked and the problems found.
    pub report: VerifyReport,
    /// Each of `report.problems` as the sentence the human output prints.
    pub messages: Vec<String>,
}

impl From<VerifyReport> for Verified {
    fn from(report: VerifyReport) -> Verified {
        Verified {
            ok: report.ok(),
            messages: report.problems.iter().map(ToString::to_string).collect(),
            report,
        }
    }
}

/// Verifies the log; `anchor`: an exported checkpoint file; `key`: an exported epoch-0 key.
pub fn verify(
    cx: &super::client::Context,
    state_dir: &Path,
    anchor: Option<&Path>,
    key: Option<&Path>,
) -> Result<Verified, BrokerError> {
    // In the daemon: its tail signed now; what is appended after is newer than this verify.
    let signed = sign_pending(cx.server())?;
    let anchor = anchor.map(|p| read(cx, p, "the anchor")).transpose()?;
    let key = match key {
        Some(p) => {
            let text = read(cx, p, "the key")?;
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Some(audit::note::VerifierKey::decode(first).ok_or_else(|| {
                BrokerError::Usage(super::UsageError::NotAVerifierKey {
                    path: p.to_path_buf(),
                })
            })?)
        }
        None => None,
    };
    let mut opts = audit::verify::VerifyOptions {
        anchor,
        key,
        require_covered: true,
        covered_before: signed,
    };
    let report = audit::verify::verify(state_dir, &opts)?;
    if signed.is_some() || !only_uncovered(&report) || !recently_appended(state_dir) {
        return Ok(report.into());
    }
    // Not in the daemon, and the log ends in records written in the last seconds that no
    // checkpoint covers yet: a daemon's batch (it signs within a second). Wait for a
    // checkpoint covering what was read; then those records must be covered, and only later
    // ones may be newer. No checkpoint in time: the uncovered tail fails as before.
    let seen = report.records;
    let until = std::time::Instant::now() + TAIL_WAIT;
    while audit::latest_checkpoint_size(state_dir) < seen && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    opts.covered_before = Some(seen);
    Ok(audit::verify::verify(state_dir, &opts)?.into())
}

/// How long `verify` outside the daemon waits for a daemon's checkpoint of a fresh tail: five
/// of its batch intervals (a loaded machine may delay its timer).
const TAIL_WAIT: Duration = Duration::from_secs(5);

/// The only problem is a tail no checkpoint covers yet.
fn only_uncovered(r: &VerifyReport) -> bool {
    matches!(r.problems.as_slice(), [Problem::Uncovered { .. }])
}

/// The log was appended to within the last few batch intervals (a daemon may be about to sign
/// it); an old uncovered tail (a crash, an append without a key) is not waited for.
fn recently_appended(state_dir: &Path) -> bool {
    audit::log_age(state_dir).is_some_and(|age| age < Duration::from_secs(5))
}

/// Records matching `filter`.
pub fn query(state_dir: &Path, filter: &Filter) -> Result<QueryResult, BrokerError> {
    Ok(audit::query::query(state_dir, filter)?)
}

/// A record and the content of its stored streams (`log show`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Shown {
    /// The record.
    pub record: Record,
    /// Its streams with a size above zero: stdin, stdout, stderr, in that order.
    pub artifacts: Vec<Artifact>,
    /// An exec's connections through the egress proxy: its `net` records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connections: Vec<Record>,
}

/// A stream's name, one of three (a `&'static str` that serde does not take for a borrow of
/// what it reads: [`Artifact`] reads back from any JSON, a daemon's report).
pub type StreamName = &'static str;

/// One stored stream of a record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Artifact {
    /// `stdin`, `stdout` or `stderr`.
    #[serde(deserialize_with = "stream_name")]
    pub stream: StreamName,
    /// Its size and hash as recorded.
    pub digest: StreamDigest,
    /// Its content (`content`, as UTF-8 with invalid bytes replaced) or why not (`error`).
    #[serde(flatten)]
    pub content: Stored,
    /// Bytes of the content left out of `content` (`log show --output-limit`): its head and
    /// tail are shown around a marker line. Absent when it is whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_bytes: Option<u64>,
}

/// `log show`'s default `--output-limit`: bytes of each stored stream shown.
pub const SHOW_OUTPUT_LIMIT: usize = 64 << 10;

impl Artifact {
    /// Shows at most `limit` bytes of the content (0: all): the head and the tail, each ended
    /// or begun at a line break when one is near, around a marker saying what was cut and how
    /// to see all of it.
    pub fn limit(&mut self, seq: u64, limit: usize) {
        let Stored::Content(c) = &mut self.content else {
            return;
        };
        if limit == 0 || c.len() <= limit {
            return;
        }
        let half = limit / 2;
        let mut h = half;
        if let Some(n) = memchr::memrchr(b'\n', &c[..h])
            && n >= half / 2
        {
            h = n + 1;
        }
        let mut t = c.len() - half;
        if let Some(n) = memchr::memchr(b'\n', &c[t..])
            && n < half / 2
        {
            t += n + 1;
        }
        let cut = (t - h) as u64;
        let marker = format!(
            "[gateway: {cut} bytes of {} cut here (--output-limit {limit}); `gateway log show {seq} --output-limit 0` shows all]\n",
            self.stream
        );
        let mut v = Vec::with_capacity(h + marker.len() + c.len() - t);
        v.extend_from_slice(&c[..h]);
        v.extend_from_slice(marker.as_bytes());
        v.extend_from_slice(&c[t..]);
        *c = v;
        self.cut_bytes = Some(cut);
    }

    /// Leaves the content out (`log show --no-output`).
    pub fn omit(&mut self) {
        if matches!(self.content, Stored::Content(_)) {
            self.content = Stored::Omitted(true);
        }
    }
}

/// A stream's stored content, or why it cannot be shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Stored {
    /// The bytes stored (checked against their hash).
    #[serde(
        rename = "content",
        serialize_with = "lossy",
        deserialize_with = "bytes"
    )]
    #[schemars(with = "String")]
    Content(Vec<u8>),
    /// Not stored, removed by the retention, or altered.
    #[serde(rename = "error")]
    Unavailable(String),
    /// Stored, and left out (`--no-output`): `"omitted": true`.
    #[serde(rename = "omitted")]
    Omitted(bool),
}

fn lossy<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(b))
}

/// [`Stored::Content`] read back (a daemon's client reading its report): the text `lossy`
/// wrote, whose bytes show as it did.
fn bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    String::deserialize(d).map(String::into_bytes)
}

/// [`Artifact::stream`] read back: one of the three names.
fn stream_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    let s = String::deserialize(d)?;
    ["stdin", "stdout", "stderr"]
        .into_iter()
        .find(|n| *n == s)
        .ok_or_else(|| serde::de::Error::unknown_variant(&s, &["stdin", "stdout", "stderr"]))
}

/// A record by seq, with its stored streams.
pub fn show(state_dir: &Path, seq: u64) -> Result<Option<Shown>, BrokerError> {
    let Some(r) = audit::query::show(state_dir, seq)? else {
        return Ok(None);
    };
    let mut arts = Vec::new();
    for (name, d) in [
        ("stdin", &r.stdin),
        ("stdout", &r.stdout),
        ("stderr", &r.stderr),
    ] {
        let Some(d) = d else { continue };
        if d.bytes == 0 {
            continue;
        }
        let content = match &d.artifact {
            None => Err("not stored (policy audit.store_output = false)".to_string()),
            Some(_) => audit::artifacts::read(state_dir, d).map_err(|e| match e {
                AuditError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                    "removed by the artifact retention".to_string()
                }
                AuditError::Artifact { what, .. } => format!("the stored artifact {what}"),
                e => e.to_string(),
            }),
        };
        arts.push(Artifact {
            stream: name,
            digest: d.clone(),
            content: content.map_or_else(Stored::Unavailable, Stored::Content),
            cut_bytes: None,
        });
    }
    // Its connections were recorded after it, naming its seq.
    let connections = if r.tool == "exec" {
        audit::query::query(
            state_dir,
            &audit::query::Filter {
                tool: Some("net".into()),
                since: Some(r.time.clone()),
                ..Default::default()
            },
        )?
        .records
        .into_iter()
        .filter(|c| c.net.as_ref().is_some_and(|n| n.command == seq))
        .collect()
    } else {
        Vec::new()
    };
    Ok(Some(Shown {
        record: r,
        artifacts: arts,
        connections,
    }))
}

/// In the daemon: signs a checkpoint of the records written since the last one (its batch),
/// so that verification and exports see everything written so far.
/// Returns the records the checkpoint covers (None: not in the daemon).
fn sign_pending(server: Option<&super::server::Server>) -> Result<Option<u64>, BrokerError> {
    Ok(server
        .and_then(|s| s.with_log(|l| l.checkpoint().map(|()| l.size())))
        .transpose()?)
}

/// The newest signed checkpoint (`log checkpoint`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Checkpoint {
    /// The C2SP signed note, as `log verify --anchor FILE` reads it.
    pub checkpoint: String,
}

/// The newest signed checkpoint, if any (through the daemon, `cx`'s server signs what it
/// has pending first).
pub fn checkpoint(
    cx: &super::client::Context,
    state_dir: &Path,
) -> Result<Option<Checkpoint>, BrokerError> {
    sign_pending(cx.server())?;
    Ok(audit::latest_checkpoint(state_dir)?.map(|checkpoint| Checkpoint { checkpoint }))
}

/// The log's public keys (`keys export`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PublicKeys {
    /// One verifier-key line per epoch, oldest first (the first is the root key).
    pub keys: Vec<String>,
}

/// Public keys by epoch, as verifier-key lines.
pub fn public_keys(state_dir: &Path) -> Result<PublicKeys, BrokerError> {
    Ok(PublicKeys {
        keys: audit::public_keys(state_dir)?
            .iter()
            .map(|k| k.encode())
            .collect(),
    })
}

/// Creates the keys (first use) without writing a record.
pub fn ensure_keys(state_dir: &Path) -> Result<(), BrokerError> {
    super::ensure_state_dir(state_dir)?;
    audit::AuditLog::open(state_dir, audit::Checkpoints::EveryRecord)?;
    Ok(())
}

/// A key rotation (`keys rotate`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rotated {
    /// The new signing key's verifier-key line (the old key signed it and was destroyed).
    pub key: String,
}

/// Rotates the signing key: a tool call (`keys.rotate`) decided as the policy's
/// `maintenance`, recorded (signed with the new key) with the new key's verifier line.
pub fn rotate(ctx: &super::tools::fs::FsContext<'_>) -> Result<Rotated, BrokerError> {
    let state_dir = ctx.state_dir.clone();
    super::ensure_state_dir(&state_dir)?;
    let server = ctx.client.client().map(|c| c.server.clone());
    let done = super::mutation::run(
        ctx,
        super::mutation::Mutation {
            name: "keys.rotate",
            tool: crate::model::Tool::Maintenance,
            args: vec![],
            paths: vec![state_dir.clone()],
            confirm: None,
            perform: Box::new(move || {
                sign_pending(server.as_deref())?;
                let vk = audit::rotate(&state_dir)?;
                // The daemon's writer signs with the new key from now on.
                if let Some(r) = server.as_deref().and_then(|s| {
                    s.with_log(|l| audit::AuditLog::open(&state_dir, BATCH).map(|n| *l = n))
                }) {
                    r?;
                }
                Ok(Rotated { key: vk.encode() })
            }),
            describe: |r: &Rotated| vec![r.key.clone()],
            reopens_log: true,
        },
    )?;
    Ok(done.output)
}

/// What `log gc` removed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Collected {
    /// Files removed (artifacts and backups).
    pub removed: u64,
    /// Bytes freed.
    pub bytes: u64,
}

/// Applies the policy's artifact and backup retention now: a tool call (`log.gc`) decided
/// as the policy's `maintenance`, recorded with what it removed.
pub fn gc(ctx: &super::tools::fs::FsContext<'_>) -> Result<Collected, BrokerError> {
    let (state_dir, policy) = (ctx.state_dir.clone(), ctx.policy);
    let done = super::mutation::run(
        ctx,
        super::mutation::Mutation {
            name: "log.gc",
            tool: crate::model::Tool::Maintenance,
            args: vec![],
            paths: vec![state_dir.clone()],
            confirm: None,
            perform: Box::new(move || {
                let (a, ab) = audit::artifacts::prune(
                    &state_dir,
                    policy.audit.artifacts_max_age.map(Duration::from_secs),
                    policy.audit.artifacts_max_total,
                );
                let (b, bb) = super::tools::fs::prune_backups(&state_dir, policy)?;
                Ok(Collected {
                    removed: a + b,
                    bytes: ab + bb,
                })
            }),
            describe: |c: &Collected| {
                vec![
                    format!("removed={}", c.removed),
                    format!("bytes={}", c.bytes),
                ]
            },
            reopens_log: false,
        },
    )?;
    Ok(done.output)
}
