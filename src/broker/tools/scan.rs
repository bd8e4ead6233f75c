//! `gateway scan`: walk paths (ripgrep's `ignore`, in parallel), find secrets, compare with a
//! baseline, optionally redact files (backed up and journalled first).

use crate::broker;
use crate::broker::{BrokerError, ScanProblem, UsageError};
use crate::model::{Decision, Effect, RuleMatch};
use crate::secrets::{self, TextKind, scanner};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// What to scan and how.
#[derive(Debug, Default)]
pub struct ScanRequest {
    /// Files and directories.
    pub paths: Vec<PathBuf>,
    /// Globs to leave out (gitignore syntax, matched below each path).
    pub exclude: Vec<String>,
    /// Do not honour .gitignore / .ignore files.
    pub no_ignore: bool,
    /// Baseline file: known findings are not reported; the file is written with all current
    /// findings afterwards.
    pub baseline: Option<PathBuf>,
    /// Rewrite files with each (new) secret replaced by `[REDACTED:<rule>]`.
    pub redact: bool,
    /// State directory (backups and journal for `redact`).
    pub state_dir: PathBuf,
    /// Findings below this confidence are neither reported nor redacted (`low`, the default:
    /// every finding); the baseline still lists them.
    pub min_confidence: secrets::Confidence,
    /// An agent's scan (the MCP `scan` tool, `gateway tool scan`): decided by this policy as
    /// a search, its paths judged like the file tools' (a denied path is refused, a path
    /// outside the readable trees too) and its walk kept out of the denied paths and the
    /// state directory. `None`: a person's `gateway scan`, which reads what its caller's own
    /// rights read.
    pub confined: Option<std::sync::Arc<crate::policy::Policy>>,
}

/// Where a confined scan may read (see [`ScanRequest::confined`]).
#[derive(Clone, Debug, Default)]
struct Reach {
    read: Vec<PathBuf>,
    deny: Vec<PathBuf>,
    /// The (device, inode) of the files in the denied paths: another name of one (a hard
    /// link in the workspace) is not read either.
    denied_files: std::collections::HashSet<(u64, u64)>,
}

/// Files looked at in the denied paths for their identities, at most.
const MAX_DENIED_FILES: usize = 10_000;

/// The (device, inode) of every regular file in `deny` (directories walked, without
/// following links, up to [`MAX_DENIED_FILES`] entries in all; `skip`, the state directory,
/// is not walked: what it holds is the broker's, stored compressed).
fn denied_files(deny: &[PathBuf], skip: &Path) -> std::collections::HashSet<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = std::collections::HashSet::new();
    let mut stack: Vec<PathBuf> = deny
        .iter()
        .filter(|d| !d.starts_with(skip))
        .cloned()
        .collect();
    let mut seen = 0usize;
    while let Some(p) = stack.pop() {
        seen += 1;
        if seen > MAX_DENIED_FILES {
            break;
        }
        // not-ws: a denied path's identity, never its content
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        // not-ws: the metadata just read, of a denied path
        if m.is_file() {
            out.insert((m.dev(), m.ino()));
        // not-ws: the metadata just read, of a denied path
        } else if m.is_dir() {
            // not-ws: a denied directory's entries, for their identities
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        }
    }
    out
}

impl Reach {
    /// May a file at `p` (absolute) be read: every form of it (as written, as resolved)
    /// inside a readable tree and outside every denied path?
    fn allows(&self, p: &Path) -> bool {
        broker::paths::forms(p).iter().all(|f| {
            !self.deny.iter().any(|d| f.starts_with(d))
                && self.read.iter().any(|r| f.starts_with(r))
        })
    }
}

/// One finding: where, which rule, and a hash of the secret (never the secret).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct ScanFinding {
    /// File.
    pub path: String,
    /// Line (1-based).
    pub line: usize,
    /// Column (1-based, bytes).
    pub column: usize,
    /// Rule id.
    pub rule: String,
    /// How sure the finding is: `high` (validated vendor format), `medium` (keyword
    /// assignment, URL password), `low` (bare entropy).
    pub confidence: secrets::Confidence,
    /// SHA-256 of the secret, hex.
    pub fingerprint: String,
}

/// The result of a scan.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ScanReport {
    /// New findings (not in the baseline), sorted by path and position.
    pub findings: Vec<ScanFinding>,
    /// Files read.
    pub files_scanned: u64,
    /// Bytes read.
    pub bytes_scanned: u64,
    /// Wall time.
    pub duration_ms: u64,
    /// Findings that the baseline already knew (not in `findings`).
    #[serde(skip)]
    pub known: usize,
    /// Files rewritten by `redact`.
    #[serde(skip)]
    pub redacted_files: Vec<PathBuf>,
}

#[derive(Serialize, Deserialize)]
struct Baseline {
    version: u32,
    generated_by: String,
    results: Vec<BaselineEntry>,
}

#[derive(Serialize, Deserialize, Clone)]
struct BaselineEntry {
    path: String,
    rule: String,
    fingerprint: String,
    line: usize,
}

/// Files larger than this are skipped (generated data, not source).
const MAX_FILE: u64 = 64 << 20;

/// Progress callback: (files, bytes) so far.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// The largest baseline `scan` reads (bytes).
const MAX_BASELINE: u64 = 256 << 20;

/// Scans. Errors: bad paths or globs, an unreadable or invalid baseline, failed redaction.
/// `cx` is the caller: its files are read and written with its rights.
pub fn scan(
    cx: &broker::client::Context,
    req: &ScanRequest,
    progress: Progress<'_>,
) -> Result<ScanReport, BrokerError> {
    scan_within(cx, req, progress, None)
}

/// [`scan`], reading only where `reach` allows when given.
fn scan_within(
    cx: &broker::client::Context,
    req: &ScanRequest,
    progress: Progress<'_>,
    reach: Option<&Reach>,
) -> Result<ScanReport, BrokerError> {
    let start = Instant::now();
    if req.paths.is_empty() {
        return Err(UsageError::from(ScanProblem::NoPaths).into());
    }
    // Everything read from the caller's paths is read with the caller's rights (under the
    // daemon: its client's; the walker's threads inherit them).
    let cancel = cx.cancel();
    let gathered = cx
        .as_client(|| gather(req, progress, (reach, cancel)))
        .map_err(|e| BrokerError::Io {
            what: "reading the files to scan with the caller's rights".into(),
            source: e,
        })??;
    let (known, per_file, errors, files, bytes) = gathered;
    for e in errors {
        cx.err(|w| writeln!(w, "gateway scan: skipped: {e}"));
    }
    finish(cx, req, start, known, per_file, files, bytes)
}

/// What the scan read: the baseline's entries, the findings per file, what was skipped,
/// files and bytes scanned.
type Gathered = (
    Vec<BaselineEntry>,
    Vec<(PathBuf, Vec<ScanFinding>)>,
    Vec<String>,
    u64,
    u64,
);

/// The content of the file `path` that a walk found: read whole (a person's scan), or, for a
/// confined scan, only a regular file opened without following a link whose location (as
/// written and as resolved) `reach` allows and which is the very file found there (device
/// and inode compared after the open, so a file swapped for a link or moved in between is
/// not read).
fn read_file(path: &Path, reach: Option<&Reach>) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let Some(reach) = reach else {
        // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
        return std::fs::read(path);
    };
    let refused = || {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "outside what the policy lets a tool read (not scanned)",
        )
    };
    let abs = std::path::absolute(path)?;
    if !reach.allows(&abs) {
        return Err(refused());
    }
    // not-ws: an agent's scan; opened without following a link, checked against the policy's reach below
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&abs)?;
    // not-ws: the descriptor just opened, for its type and identity
    let m = f.metadata()?;
    let resolved = crate::workspace::wsfs::resolve(&abs).ok_or_else(refused)?;
    // not-ws: the resolved location, compared with the file opened
    let there = std::fs::metadata(&resolved)?;
    if !m.is_file()
        || (m.dev(), m.ino()) != (there.dev(), there.ino())
        || !reach.allows(&resolved)
        || reach.denied_files.contains(&(m.dev(), m.ino()))
    {
        return Err(refused());
    }
    let mut data = Vec::with_capacity(m.len().min(MAX_FILE) as usize);
    f.take(MAX_FILE).read_to_end(&mut data)?;
    Ok(data)
}

/// The reading half of [`scan`]: the baseline and the walk.
#[allow(
    clippy::too_many_lines,
    reason = "the baseline, the walk (ignore rules, progress, the caller's rights) and each file's scan, in one pass"
)]
fn gather(
    req: &ScanRequest,
    progress: Progress<'_>,
    (reach, cancel): (Option<&Reach>, Option<std::os::fd::BorrowedFd<'_>>),
) -> Result<Gathered, BrokerError> {
    for p in &req.paths {
        // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
        if std::fs::symlink_metadata(p).is_err() {
            return Err(UsageError::from(ScanProblem::NoSuchPath { path: p.clone() }).into());
        }
    }
    let known: Vec<BaselineEntry> = match &req.baseline {
        // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
        Some(b) if b.exists() => {
            // A FIFO is read as `cat` would, but not past the call's end.
            let text = crate::sandbox::read_named(b, MAX_BASELINE, cancel).map_err(|e| {
                BrokerError::Io {
                    what: format!("reading the baseline {}", b.display()),
                    source: e,
                }
            })?;
            if text.len() as u64 > MAX_BASELINE {
                return Err(UsageError::from(ScanProblem::BaselineTooLarge {
                    path: b.clone(),
                    max: MAX_BASELINE,
                })
                .into());
            }
            // serde's message may quote the file's content: only the position is shown.
            let parsed: Baseline = serde_json::from_slice(&text).map_err(|e| {
                BrokerError::Usage(
                    ScanProblem::NotABaseline {
                        path: b.clone(),
                        line: e.line(),
                        column: e.column(),
                    }
                    .into(),
                )
            })?;
            parsed.results
        }
        _ => vec![],
    };

    let denied: Option<Vec<PathBuf>> = reach.map(|r| r.deny.clone());
    // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
    let mut wb = ignore::WalkBuilder::new(&req.paths[0]);
    for p in &req.paths[1..] {
        wb.add(p);
    }
    // Secrets hide in dotfiles (.env, .npmrc): scan hidden files, but not VCS internals.
    wb.hidden(false)
        .follow_links(false)
        .threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
        .filter_entry(move |e| {
            e.file_name() != ".git"
                && denied.as_ref().is_none_or(|deny| {
                    // A directory only needs to lie outside the denied paths (a readable
                    // tree may lie below it); files are judged whole when read.
                    broker::paths::forms(e.path())
                        .iter()
                        .all(|f| !deny.iter().any(|d| f.starts_with(d)))
                })
        });
    if req.no_ignore {
        wb.git_ignore(false)
            .git_exclude(false)
            .git_global(false)
            .ignore(false)
            .parents(false);
    }
    if !req.exclude.is_empty() {
        let mut ob = ignore::overrides::OverrideBuilder::new("/");
        for g in &req.exclude {
            ob.add(&format!("!{g}")).map_err(|e| {
                UsageError::from(ScanProblem::BadExclude {
                    glob: g.clone(),
                    why: e.to_string(),
                })
            })?;
        }
        let ov = ob
            .build()
            .map_err(|e| UsageError::from(ScanProblem::BadExcludes { why: e.to_string() }))?;
        wb.overrides(ov);
    }
    let files = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let found: Mutex<Vec<(PathBuf, Vec<ScanFinding>)>> = Mutex::new(Vec::new());
    let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    wb.build_parallel().run(|| {
        let files = &files;
        let bytes = &bytes;
        let found = &found;
        let errors = &errors;
        Box::new(move |entry| {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    if let Ok(mut v) = errors.lock() {
                        v.push(e.to_string());
                    }
                    return ignore::WalkState::Continue;
                }
            };
            // not-ws: scan reads what its caller names, with the caller's rights (client::as_client)
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return ignore::WalkState::Continue;
            }
            let path = entry.path();
            if secrets::is_non_text_path(path) {
                return ignore::WalkState::Continue;
            }
            // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
            if entry.metadata().is_ok_and(|m| m.len() > MAX_FILE) {
                if let Ok(mut v) = errors.lock() {
                    v.push(format!(
                        "{}: larger than {} MiB (generated data, not scanned)",
                        path.display(),
                        MAX_FILE >> 20
                    ));
                }
                return ignore::WalkState::Continue;
            }
            let data = match read_file(path, reach) {
                Ok(d) => d,
                Err(e) => {
                    if let Ok(mut v) = errors.lock() {
                        v.push(format!("{}: {e}", path.display()));
                    }
                    return ignore::WalkState::Continue;
                }
            };
            let n = files.fetch_add(1, Ordering::Relaxed) + 1;
            let b = bytes.fetch_add(data.len() as u64, Ordering::Relaxed) + data.len() as u64;
            if n.is_multiple_of(256) {
                progress(n, b);
            }
            // UTF-16 text is scanned decoded; binary content (a NUL in the first 8 KiB of
            // what is left) is not text.
            let data = secrets::decode_utf16(&data).unwrap_or(data);
            if memchr::memchr(0, &data[..data.len().min(8192)]).is_some() {
                return ignore::WalkState::Continue;
            }
            let hits = scanner().scan(&data, TextKind::of_path(path), true);
            if hits.is_empty() {
                return ignore::WalkState::Continue;
            }
            let shown = path.display().to_string();
            let mut out = Vec::with_capacity(hits.len());
            // Line numbers incrementally: findings come sorted by offset.
            let (mut line, mut at) = (1usize, 0usize);
            for h in hits {
                let confidence = h.confidence(&data);
                line += memchr::memchr_iter(b'\n', &data[at..h.start]).count();
                at = h.start;
                let col =
                    h.start - memchr::memrchr(b'\n', &data[..h.start]).map_or(0, |i| i + 1) + 1;
                out.push(ScanFinding {
                    path: shown.clone(),
                    line,
                    column: col,
                    rule: h.rule.to_string(),
                    confidence,
                    fingerprint: secrets::fingerprint(&data[h.start..h.end]),
                });
            }
            if let Ok(mut v) = found.lock() {
                v.push((path.to_path_buf(), out));
            }
            ignore::WalkState::Continue
        })
    });
    let mut per_file = found.into_inner().unwrap_or_default();
    per_file.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((
        known,
        per_file,
        errors.into_inner().unwrap_or_default(),
        files.load(Ordering::Relaxed),
        bytes.load(Ordering::Relaxed),
    ))
}

/// The writing half of [`scan`]: redactions and the baseline.
fn finish(
    cx: &broker::client::Context,
    req: &ScanRequest,
    start: Instant,
    known: Vec<BaselineEntry>,
    per_file: Vec<(PathBuf, Vec<ScanFinding>)>,
    files: u64,
    bytes: u64,
) -> Result<ScanReport, BrokerError> {
    let is_known = |f: &ScanFinding| {
        known
            .iter()
            .any(|k| k.path == f.path && k.rule == f.rule && k.fingerprint == f.fingerprint)
    };
    let mut findings = Vec::new();
    let mut known_count = 0;
    let mut all: Vec<BaselineEntry> = Vec::new();
    let mut redacted_files = Vec::new();
    for (path, fs) in &per_file {
        // Below the level: neither reported nor redacted, but kept in the baseline.
        let shown: Vec<&ScanFinding> = fs
            .iter()
            .filter(|f| f.confidence >= req.min_confidence)
            .collect();
        let new: Vec<&ScanFinding> = shown.iter().copied().filter(|f| !is_known(f)).collect();
        known_count += shown.len() - new.len();
        all.extend(fs.iter().map(|f| BaselineEntry {
            path: f.path.clone(),
            rule: f.rule.clone(),
            fingerprint: f.fingerprint.clone(),
            line: f.line,
        }));
        if req.redact && !new.is_empty() {
            redact_file(cx, path, &new, &req.state_dir)?;
            redacted_files.push(path.clone());
        }
        findings.extend(new.into_iter().cloned());
    }
    if let Some(b) = &req.baseline {
        let doc = Baseline {
            version: 1,
            generated_by: format!("gateway {}", env!("CARGO_PKG_VERSION")),
            results: all,
        };
        let mut text = serde_json::to_vec_pretty(&doc).map_err(|e| BrokerError::Io {
            what: "encoding the baseline".into(),
            source: std::io::Error::other(e),
        })?;
        text.push(b'\n');
        cx.as_client(|| write_new_or_replace(b, &text))
            .map_err(|e| BrokerError::Io {
                what: format!(
                    "writing the baseline {} with the caller's rights",
                    b.display()
                ),
                source: e,
            })??;
    }
    Ok(ScanReport {
        findings,
        files_scanned: files,
        bytes_scanned: bytes,
        duration_ms: start.elapsed().as_millis() as u64,
        known: known_count,
        redacted_files,
    })
}

fn write_new_or_replace(path: &Path, data: &[u8]) -> Result<(), BrokerError> {
    // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
    if path.exists() {
        // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
        crate::fsops::atomic_replace(path, data).map_err(|e| BrokerError::Io {
            what: "writing the baseline".into(),
            source: std::io::Error::other(e.to_string()),
        })
    } else {
        // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
        std::fs::write(path, data).map_err(|e| BrokerError::Io {
            what: format!("writing the baseline {}", path.display()),
            source: e,
        })
    }
}

/// Rewrites one file with the given findings redacted: the old content is backed up and the
/// change journalled before the atomic replace. The file is re-read and re-scanned so that
/// the spans are those of its current content; a file that changed so that a finding is gone
/// is left alone for it.
fn redact_file(
    cx: &broker::client::Context,
    path: &Path,
    which: &[&ScanFinding],
    state_dir: &Path,
) -> Result<(), BrokerError> {
    let err = |what: &str, e: String| BrokerError::Io {
        what: format!("{what} {}", path.display()),
        source: std::io::Error::other(e),
    };
    // The file is read and replaced with the caller's rights; the backup and the journal are
    // the broker's.
    let (data, mode) = cx
        .as_client(|| {
            use std::os::unix::fs::PermissionsExt;
            // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
            let mode = std::fs::metadata(path)
                .map(|m| m.permissions().mode() & 0o7777)
                .unwrap_or(0o644);
            // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
            std::fs::read(path).map(|d| (d, mode))
        })
        .and_then(|r| r)
        .map_err(|e| err("re-reading", e.to_string()))?;
    // A UTF-16 file is scanned decoded, as the scan that found its secrets read it, and
    // written back in UTF-16.
    let decoded = secrets::decode_utf16(&data);
    let text = decoded.as_deref().unwrap_or(&data);
    let hits = scanner().scan(text, TextKind::of_path(path), true);
    let mut out = Vec::with_capacity(data.len());
    let mut pos = 0;
    for h in hits {
        let fp = secrets::fingerprint(&text[h.start..h.end]);
        if !which
            .iter()
            .any(|f| f.fingerprint == fp && f.rule == h.rule)
        {
            continue;
        }
        out.extend_from_slice(&text[pos..h.start]);
        out.extend_from_slice(format!("[REDACTED:{}]", h.rule).as_bytes());
        pos = h.end;
    }
    out.extend_from_slice(&text[pos..]);
    let out = if decoded.is_some() {
        secrets::encode_like(&data, &out)
    } else {
        out
    };
    if out == data {
        return Ok(());
    }
    use crate::journal::{self, Change, PathState};
    let jerr = |what: &'static str| move |e: journal::JournalError| err(what, e.to_string());
    let lock = journal::lock(state_dir).map_err(jerr("locking the journal for"))?;
    let file = |d: &[u8]| -> Result<PathState, BrokerError> {
        Ok(PathState::File {
            sha256: journal::backup(state_dir, d).map_err(jerr("backing up"))?,
            mode,
            size: d.len() as u64,
        })
    };
    let change = journal::begin(
        state_dir,
        &lock,
        Change {
            id: 0,
            time: 0,
            tool: "scan.redact".into(),
            path: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
            before: file(&data)?,
            after: file(&out)?,
            undoes: None,
            dest: None,
            trash: None,
            group: None,
            // `history` and `undo` are per workspace: the directory scan ran in.
            // not-ws: the process's own directory, to name the journal's workspace
            // The caller's directory (a daemon client's, not the daemon's).
            workspace: cx.cwd().and_then(std::fs::canonicalize).ok(),
            dir_mode: None,
            not_backed_up: None,
            not_undoable: None,
            uid: cx.fs_identity().map(|i| i.uid),
        },
    )
    .map_err(jerr("journalling the redaction of"))?;
    let replaced = cx
        .as_client(|| {
            // not-ws: scan reads and writes what its caller names, with the caller's rights (client::as_client)
            crate::fsops::atomic_replace(path, &out).map_err(|e| e.to_string())
        })
        .map_err(|e| e.to_string())
        .and_then(|r| r);
    match replaced {
        Ok(()) => journal::commit(state_dir, change.id).map_err(jerr("journalling")),
        Err(e) => {
            let _ = journal::abort(state_dir, change.id);
            Err(err("rewriting", e.to_string()))
        }
    }
}

/// SARIF 2.1.0 for a report.
pub fn sarif(report: &ScanReport) -> serde_json::Value {
    use serde_json::json;
    let mut rule_ids: Vec<&str> = report.findings.iter().map(|f| f.rule.as_str()).collect();
    rule_ids.sort();
    rule_ids.dedup();
    let describe = |id: &str| -> &'static str {
        secrets::rules::RULES
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.description)
            .unwrap_or(match id {
                "high-entropy-hex" => "High-entropy hexadecimal string",
                "secret-position-entropy" => {
                    "Random-looking value in a secret's position (a weakly secret name, a signature or code parameter, a session cookie)"
                }
                _ => "High-entropy base64 string",
            })
    };
    let rules: Vec<serde_json::Value> = rule_ids
        .iter()
        .map(|id| {
            json!({
                "id": id,
                "name": pascal(id),
                "shortDescription": {"text": describe(id)},
                "defaultConfiguration": {"level": "error"},
            })
        })
        .collect();
    let results: Vec<serde_json::Value> = report
        .findings
        .iter()
        .map(|f| {
            json!({
                "ruleId": f.rule,
                "ruleIndex": rule_ids.iter().position(|r| *r == f.rule).unwrap_or(0),
                "level": match f.confidence {
                    secrets::Confidence::High => "error",
                    secrets::Confidence::Medium => "warning",
                    secrets::Confidence::Low => "note",
                },
                "message": {"text": format!("{} ({}, {} confidence)", describe(&f.rule), f.rule, f.confidence)},
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri(&f.path)},
                        "region": {"startLine": f.line, "startColumn": f.column},
                    }
                }],
                "partialFingerprints": {"secretSha256/v1": f.fingerprint},
                "properties": {"confidence": f.confidence},
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "gateway",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/gateway/gateway",
                "rules": rules,
            }},
            "results": results,
        }]
    })
}

/// `github-pat` → `GithubPat` (SARIF wants `name` readable and different from `id`).
fn pascal(id: &str) -> String {
    id.split('-')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// A relative or absolute path as a URI reference (percent-encoding what must be).
fn uri(path: &str) -> String {
    let mut s = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    if path.starts_with('/') {
        format!("file://{s}")
    } else {
        s
    }
}

/// [`scan`], recorded in the audit log (tool `scan`: the paths and options, how many files,
/// and each finding as `path:line:rule`, never the value), through the invocation skeleton
/// (`broker::invoke`). Nothing is scanned if the log cannot be opened.
pub fn scan_audited(
    cx: &broker::client::Context,
    req: &ScanRequest,
    progress: Progress<'_>,
    session: &str,
    caller: crate::audit::Caller,
) -> Result<ScanReport, BrokerError> {
    let call = broker::invoke::Call {
        policy: req.confined.as_ref().map_or("", |p| p.name.as_str()),
        state_dir: &req.state_dir,
        session,
        caller: &caller,
        context: cx,
    };
    let mut t = ScanTool {
        cx,
        req,
        progress,
        reach: None,
        refused: None,
    };
    let out = broker::invoke::invoke(&call, &mut t).map(|d| d.output)?;
    // A refused scan is the caller's error (the rule and its reason), not an empty report.
    match t.refused {
        Some(r) => Err(r.into()),
        None => Ok(out),
    }
}

/// `scan` on the invocation skeleton: allowed by the built-in rule (it reads with the
/// caller's own rights, and `--redact` writes what the caller could write).
struct ScanTool<'a, 'p> {
    cx: &'a broker::client::Context,
    req: &'a ScanRequest,
    progress: Progress<'p>,
    /// A confined scan's reach (set by `decide`).
    reach: Option<Reach>,
    /// Why it was not performed, if it was not.
    refused: Option<broker::refusal::Refusal>,
}

impl broker::invoke::Tool for ScanTool<'_, '_> {
    type Output = ScanReport;

    fn name(&self) -> &str {
        "scan"
    }

    fn decide(&mut self, rec: &mut crate::audit::Record) -> Result<Decision, BrokerError> {
        let req = self.req;
        let mut args: Vec<String> = req.paths.iter().map(|p| p.display().to_string()).collect();
        if req.redact {
            args.push("--redact".into());
        }
        if let Some(b) = &req.baseline {
            args.push(format!("--baseline={}", b.display()));
        }
        args.extend(req.exclude.iter().map(|e| format!("--exclude={e}")));
        if req.no_ignore {
            args.push("--no-ignore".into());
        }
        if req.min_confidence != secrets::Confidence::Low {
            args.push(format!("--min-confidence={}", req.min_confidence));
        }
        rec.args = args;
        // The caller's directory (a daemon client's, not the daemon's).
        rec.cwd = self
            .cx
            .cwd()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        if let Some(policy) = &req.confined {
            return self.decide_confined(&policy.clone());
        }
        Ok(Decision {
            effect: Effect::Allow,
            rules: vec![RuleMatch {
                id: "builtin".into(),
                effect: Effect::Allow,
                reason: "scanning reads files with the caller's own rights".into(),
                subject: rec.args.join(" "),
            }],
            commands: vec![],
            unanalysable: vec![],
        })
    }

    fn ask(&mut self, _decision: &Decision) -> bool {
        false
    }

    fn not_performed(&mut self, d: Decision, a: Option<bool>) -> ScanReport {
        self.refused = broker::refusal::Refusal::of_decision(&d, a);
        ScanReport::default()
    }

    fn perform(&mut self, _d: Decision, _a: Option<bool>) -> Result<ScanReport, BrokerError> {
        scan_within(self.cx, self.req, self.progress, self.reach.as_ref())
    }

    fn record(&mut self, res: &Result<ScanReport, BrokerError>, rec: &mut crate::audit::Record) {
        if let Ok(r) = res {
            rec.exit_code = Some(i32::from(!r.findings.is_empty()));
            rec.duration_ms = Some(r.duration_ms as f64);
            rec.secrets = r
                .findings
                .iter()
                .take(1000)
                .map(|f| format!("{}:{}:{}", f.path, f.line, f.rule))
                .collect();
        }
    }
}

impl ScanTool<'_, '_> {
    /// An agent's scan, decided by `policy` as a search of its paths (its rules, the client's
    /// roots), each path judged like the file tools' (`broker::paths`): a denied path, or one
    /// outside the trees the policy lets a tool read, refuses the call. What the walk may
    /// read is kept for `perform`.
    fn decide_confined(&mut self, policy: &crate::policy::Policy) -> Result<Decision, BrokerError> {
        let cwd = self.cx.cwd().map_err(|source| BrokerError::Io {
            what: "reading the caller's working directory".into(),
            source,
        })?;
        let ws = broker::workspace_of(self.cx, &cwd)?;
        let paths: Vec<PathBuf> = self
            .req
            .paths
            .iter()
            .map(|p| {
                if p.is_absolute() {
                    p.clone()
                } else {
                    cwd.join(p)
                }
            })
            .collect();
        let mut decision = policy.evaluate(
            &crate::model::ToolCall {
                tool: crate::model::Tool::Search,
                argv: vec![],
                paths: paths.clone(),
                cwd: ws.clone(),
            },
            &broker::shell_env(self.cx, &ws),
        );
        let rp = broker::tools::fs::root_paths(self.cx, policy, &self.req.state_dir, &ws, true)?;
        let reach = Reach {
            denied_files: denied_files(&rp.deny, &self.req.state_dir),
            read: rp.read,
            deny: rp.deny,
        };
        for p in &paths {
            let forms = broker::paths::forms(p);
            let rule = if let Some(d) = forms
                .iter()
                .find_map(|f| reach.deny.iter().find(|d| f.starts_with(d)))
            {
                Some((
                    "denied-path",
                    format!(
                        "{} is denied by policy `{}` ({}): credentials and gateway's state are never read by a tool",
                        p.display(),
                        policy.name,
                        d.display()
                    ),
                ))
            } else if !forms
                .iter()
                .all(|f| reach.read.iter().any(|r| f.starts_with(r)))
            {
                Some((
                    "unreadable-path",
                    format!(
                        "{} is outside the trees policy `{}` lets a tool read; scan a path in the workspace",
                        p.display(),
                        policy.name
                    ),
                ))
            } else {
                None
            };
            if let Some((id, reason)) = rule {
                decision.effect = Effect::Deny;
                decision.rules.push(RuleMatch {
                    id: id.into(),
                    effect: Effect::Deny,
                    reason,
                    subject: broker::redact_text(&p.display().to_string()),
                });
            }
        }
        broker::guard::redact_decision(&mut decision);
        self.reach = Some(reach);
        Ok(decision)
    }
}
