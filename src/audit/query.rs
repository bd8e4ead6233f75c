//! `gateway log query|tail|show`: a bounded scan from the end of the log. Each filter has a
//! byte pattern that a matching line must contain (found with `memmem` before any JSON is
//! parsed), records are in time order so `--since` stops the scan, and `--limit` stops it
//! once enough records matched. No index to keep consistent with the log.

use super::{AuditError, Paths, Record};
use memchr::memmem::Finder;
use serde::Serialize;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Query filters (all must hold).
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Tool name: a record's (`exec`, `fs.edit`, `fs.rm.permanent`, ...) or a file tool's
    /// short name ([`record_tools`]: `edit` is `fs.edit`, `rm` is `fs.rm` and
    /// `fs.rm.permanent`).
    pub tool: Option<String>,
    /// Decision effect (`allow`, `deny`, `ask`).
    pub decision: Option<String>,
    /// Records at or after this time (RFC 3339 UTC, as records hold it).
    pub since: Option<String>,
    /// Records at or before this time.
    pub until: Option<String>,
    /// Session id.
    pub session: Option<String>,
    /// A path: the working directory is it or under it, or an argument names it.
    pub path: Option<String>,
    /// A substring anywhere in the record.
    pub contains: Option<String>,
    /// Exit code.
    pub exit_code: Option<i32>,
    /// At most this many (the newest); 0 = no limit.
    pub limit: usize,
    /// Only the records of this caller uid (a daemon client that is neither admin nor
    /// auditor sees its own: `broker::authz`).
    pub uid: Option<u32>,
}

/// Parses `--since`/`--until`: an RFC 3339 time, or a duration before now (`90s`, `15m`,
/// `2h`, `3d`), into the records' time format.
pub fn parse_time(s: &str) -> Option<String> {
    if let Ok(t) = humantime::parse_rfc3339_weak(s) {
        return Some(humantime::format_rfc3339_micros(t).to_string());
    }
    let d = humantime::parse_duration(s).ok()?;
    let t = std::time::SystemTime::now().checked_sub(d)?;
    Some(humantime::format_rfc3339_micros(t).to_string())
}

/// The short names of the file tools: the `gateway fs` subcommands and the policy's tool
/// names (`edit`, `rm`, `delete`, `search`, ...), each with the record tools it stands for.
const SHORT_TOOLS: &[(&str, &[&str])] = &[
    ("read", &["fs.read"]),
    ("write", &["fs.write"]),
    ("edit", &["fs.edit"]),
    ("rm", &["fs.rm", "fs.rm.permanent"]),
    ("delete", &["fs.rm"]),
    ("purge", &["fs.rm.permanent"]),
    ("mkdir", &["fs.mkdir"]),
    ("mv", &["fs.mv"]),
    ("move", &["fs.mv"]),
    ("ls", &["fs.ls"]),
    ("list", &["fs.ls"]),
    ("glob", &["fs.glob"]),
    ("grep", &["fs.grep"]),
    ("search", &["fs.glob", "fs.grep"]),
    ("cd", &["fs.cd"]),
    ("restore", &["trash.restore"]),
];

/// The record tools a `--tool` name selects: a short name's ([`SHORT_TOOLS`]), else the
/// name itself (a record's own tool name, matched exactly).
pub fn record_tools(name: &str) -> Vec<String> {
    SHORT_TOOLS
        .iter()
        .find(|(short, _)| *short == name)
        .map_or_else(
            || vec![name.to_string()],
            |(_, full)| full.iter().map(|t| t.to_string()).collect(),
        )
}

/// A JSON string's escaped body, as it appears in a line.
fn json_body(s: &str) -> Vec<u8> {
    let q = serde_json::to_string(s).unwrap_or_default();
    q.as_bytes()[1..q.len().saturating_sub(1)].to_vec()
}

/// The record's time, read from the line without parsing it (`"time":"..."` follows
/// `prev`).
fn line_time(line: &[u8]) -> Option<&[u8]> {
    let i = memchr::memmem::find(line, b"\",\"time\":\"")? + 10;
    let end = memchr::memchr(b'"', &line[i..])?;
    Some(&line[i..i + end])
}

struct Compiled {
    needles: Vec<Finder<'static>>,
    filter: Filter,
    /// The record tools `filter.tool` selects (any of them).
    tools: Option<Vec<String>>,
}

impl Compiled {
    fn new(f: &Filter) -> Compiled {
        let mut needles = Vec::new();
        let mut add = |v: Vec<u8>| needles.push(Finder::new(&v).into_owned());
        let tools = f.tool.as_deref().map(record_tools);
        // One tool: its field is a needle; several: the field's common prefix is not exact
        // enough to be worth one, so `matches` alone decides.
        if let Some([t]) = tools.as_deref() {
            add(format!("\"tool\":\"{}\"", String::from_utf8_lossy(&json_body(t))).into_bytes());
        }
        // `error` also finds decided calls that then failed (no needle: either of two fields).
        if let Some(d) = f.decision.as_ref().filter(|d| *d != "error") {
            add(format!(
                "\"decision\":{{\"effect\":\"{}\"",
                String::from_utf8_lossy(&json_body(d))
            )
            .into_bytes());
        }
        if let Some(s) = &f.session {
            add(format!("\"session\":\"{}\"", String::from_utf8_lossy(&json_body(s))).into_bytes());
        }
        if let Some(c) = &f.contains {
            add(json_body(c));
        }
        if let Some(p) = &f.path {
            add(json_body(p.trim_end_matches('/')));
        }
        if let Some(e) = f.exit_code {
            add(format!("\"exit_code\":{e},").into_bytes());
        }
        Compiled {
            needles,
            filter: f.clone(),
            tools,
        }
    }

    fn prefilter(&self, line: &[u8]) -> bool {
        self.needles.iter().all(|n| n.find(line).is_some())
    }

    fn matches(&self, r: &Record) -> bool {
        let f = &self.filter;
        if let Some(p) = &f.path {
            let p = p.trim_end_matches('/');
            let under = |s: &str| {
                s == p
                    || s.strip_prefix(p)
                        .is_some_and(|rest| rest.starts_with('/') || p.is_empty())
            };
            if !(under(&r.cwd) || r.args.iter().any(|a| a.contains(p))) {
                return false;
            }
        }
        f.uid.is_none_or(|u| r.caller.uid == u)
            && self.tools.as_ref().is_none_or(|ts| ts.contains(&r.tool))
            && f.decision
                .as_ref()
                .is_none_or(|d| *d == r.decision.effect || (d == "error" && r.error.is_some()))
            && f.session.as_ref().is_none_or(|s| *s == r.session)
            && f.exit_code.is_none_or(|e| r.exit_code == Some(e))
            && f.since.as_ref().is_none_or(|s| r.time >= *s)
            && f.until.as_ref().is_none_or(|u| r.time <= *u)
    }
}

/// Result of a query (`log query --json` prints it as it is).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct QueryResult {
    /// Matching records, oldest first.
    pub records: Vec<Record>,
    /// Lines looked at.
    pub scanned: u64,
}

/// Reads the log backwards in blocks, calling `f` for each line until it returns false.
fn for_each_line_rev(path: &Path, f: &mut dyn FnMut(&[u8]) -> bool) -> Result<(), AuditError> {
    let io = |what| {
        move |source| AuditError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    };
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("opening")(e)),
    };
    let mut end = file.metadata().map_err(io("reading"))?.len();
    const BLOCK: u64 = 4 << 20;
    // `tail`: the start of a line whose beginning is in an earlier block.
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = Vec::new();
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        buf.resize((end - start) as usize, 0);
        file.seek(SeekFrom::Start(start)).map_err(io("reading"))?;
        file.read_exact(&mut buf).map_err(io("reading"))?;
        buf.extend_from_slice(&tail);
        // Lines are complete from the first newline in this block on (or from 0 at the file
        // start). Walk them from the end.
        let first = if start == 0 {
            0
        } else {
            match memchr::memchr(b'\n', &buf) {
                Some(i) => i + 1,
                None => {
                    tail = std::mem::take(&mut buf);
                    end = start;
                    continue;
                }
            }
        };
        let region = &buf[first..];
        let mut hi = region.len();
        if region.last() == Some(&b'\n') {
            hi -= 1;
        }
        loop {
            let lo = memchr::memrchr(b'\n', &region[..hi]).map_or(0, |i| i + 1);
            if hi > lo && !f(&region[lo..hi]) {
                return Ok(());
            }
            if lo == 0 {
                break;
            }
            hi = lo - 1;
        }
        tail = buf[..first].to_vec();
        if let Some(b'\n') = tail.last() {
            tail.pop();
        }
        end = start;
        if start == 0 {
            break;
        }
    }
    Ok(())
}

/// Runs a query over the log of a state directory.
pub fn query(state_dir: &Path, filter: &Filter) -> Result<QueryResult, AuditError> {
    let c = Compiled::new(filter);
    let mut out = QueryResult::default();
    for_each_line_rev(&Paths::new(state_dir).log, &mut |line| {
        out.scanned += 1;
        if let (Some(since), Some(t)) = (&filter.since, line_time(line))
            && t < since.as_bytes()
        {
            // Records are appended in time order: nothing older can match.
            return false;
        }
        if !c.prefilter(line) {
            return true;
        }
        if let Ok(r) = serde_json::from_slice::<Record>(line)
            && c.matches(&r)
        {
            out.records.push(r);
            if filter.limit > 0 && out.records.len() >= filter.limit {
                return false;
            }
        }
        true
    })?;
    out.records.reverse();
    Ok(out)
}

/// The record with this seq (binary search over the file by seq).
pub fn show(state_dir: &Path, seq: u64) -> Result<Option<Record>, AuditError> {
    let path = Paths::new(state_dir).log;
    let io = |what| {
        let path = path.clone();
        move |source| AuditError::Io { what, path, source }
    };
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("opening")(e)),
    };
    let len = file.metadata().map_err(io("reading"))?.len();
    // The first complete line at or after `at`: (its offset, its bytes).
    let mut line_at = |at: u64| -> Result<Option<(u64, Vec<u8>)>, AuditError> {
        // From the byte before `at`: if it is a newline, the line at `at` is the first.
        let mut off = at.saturating_sub(1);
        let mut buf = vec![0u8; 64 << 10];
        let mut acc = Vec::new();
        let mut skipping = at > 0;
        loop {
            file.seek(SeekFrom::Start(off)).map_err(io("reading"))?;
            let n = file.read(&mut buf).map_err(io("reading"))?;
            if n == 0 {
                return Ok(None);
            }
            let mut chunk = &buf[..n];
            if skipping {
                match memchr::memchr(b'\n', chunk) {
                    Some(i) => {
                        skipping = false;
                        off += i as u64 + 1;
                        chunk = &chunk[i + 1..];
                        if chunk.is_empty() {
                            continue;
                        }
                    }
                    None => {
                        off += n as u64;
                        continue;
                    }
                }
            }
            match memchr::memchr(b'\n', chunk) {
                Some(i) => {
                    acc.extend_from_slice(&chunk[..i]);
                    let start = off - (acc.len() - i) as u64;
                    return Ok(Some((start, acc)));
                }
                None => {
                    acc.extend_from_slice(chunk);
                    off += chunk.len() as u64;
                }
            }
        }
    };
    // Lower bound: every line starting before `lo` has a smaller seq.
    let (mut lo, mut hi) = (0u64, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match line_at(mid)? {
            Some((start, line)) => match super::line_prefix(&line) {
                Some((s, _)) if s < seq => lo = start + line.len() as u64 + 1,
                Some(_) => hi = mid,
                None => return Ok(None),
            },
            None => hi = mid,
        }
    }
    match line_at(lo)? {
        Some((_, line)) if super::line_prefix(&line).is_some_and(|(s, _)| s == seq) => {
            Ok(serde_json::from_slice(&line).ok())
        }
        _ => Ok(None),
    }
}
