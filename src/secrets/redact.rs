//! Streaming redaction.
//!
//! The redactor keeps back the last [`MAX_EXTENT`] bytes of what it has been fed, so that a
//! secret whose start it emits has been scanned whole, and it keeps [`CONTEXT`] bytes of what
//! it has emitted as the scan's left context (a `password = ` emitted in one chunk still
//! names the value in the next). When the source goes quiet, [`Redactor::flush_lines`] emits
//! up to the last newline: single-line secrets cannot continue past it, and a private key
//! block still open is held from its armour line on.

use super::scan::{Finding, MAX_EXTENT, MAX_TOKEN, scanner};
use super::{Confidence, TextKind};

/// Bytes of emitted text kept as left context for the next scan.
const CONTEXT: usize = 1024;
/// Pending bytes beyond the held-back tail before a full scan is worth it: the tail is
/// scanned again with the next batch, so a batch much larger than the tail keeps that cost
/// small (1.7% at 1 MiB). A quiet source is flushed by lines regardless.
const BATCH: usize = 1024 * 1024;

/// A streaming redactor for one byte stream.
pub struct Redactor {
    kind: TextKind,
    /// `buf[..ctx]` was emitted already (left context); `buf[ctx..]` is pending.
    buf: Vec<u8>,
    ctx: usize,
    found: Vec<&'static str>,
    /// Bytes at the end of `buf` that [`Redactor::flush_lines`] has not looked at for a
    /// newline: a flush without a new newline changes nothing, and looking again over the
    /// whole pending tail at each small chunk was quadratic in the tail's length.
    unflushed: usize,
    /// Findings below this confidence pass unredacted (policy `[secrets]
    /// redact_min_confidence`).
    min_confidence: Confidence,
}

impl Redactor {
    /// A redactor for text of `kind` (program output: [`TextKind::Stream`]).
    pub fn new(kind: TextKind) -> Redactor {
        Redactor {
            kind,
            buf: Vec::new(),
            ctx: 0,
            found: Vec::new(),
            unflushed: 0,
            min_confidence: Confidence::Low,
        }
    }

    /// Redacts only findings of at least `min` confidence; the others pass unchanged and are
    /// not counted in [`Redactor::findings`].
    pub fn with_min_confidence(mut self, min: Confidence) -> Redactor {
        self.min_confidence = min;
        self
    }

    /// The rules that matched so far, once per finding, in stream order.
    pub fn findings(&self) -> &[&'static str] {
        &self.found
    }

    /// Feeds a chunk; appends to `out` what is final (redacted).
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        self.buf.extend_from_slice(chunk);
        self.unflushed += chunk.len();
        let pending = self.buf.len() - self.ctx;
        if pending >= MAX_EXTENT + BATCH {
            let limit = self.buf.len() - MAX_EXTENT;
            self.emit(limit, false, out);
        }
    }

    /// The source has paused: emits through the last newline that no open multi-line secret
    /// needs. (Not at `\r`: a quoted value may contain one; no single-line rule crosses `\n`.)
    pub fn flush_lines(&mut self, out: &mut Vec<u8>) {
        let pending = &self.buf[self.ctx..];
        let new = &pending[pending.len() - self.unflushed.min(pending.len())..];
        self.unflushed = 0;
        if memchr::memchr(b'\n', new).is_none() {
            return;
        }
        let Some(i) = memchr::memrchr(b'\n', pending) else {
            return;
        };
        let limit = self.ctx + i + 1;
        self.emit(limit, true, out);
    }

    /// End of stream: emits everything.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let limit = self.buf.len();
        self.emit(limit, false, out);
    }

    /// Scans the buffer and emits `buf[ctx..limit]` (or less, never splitting a secret or, with
    /// `lines`, an open private key block), redacted.
    fn emit(&mut self, limit: usize, lines: bool, out: &mut Vec<u8>) {
        if limit <= self.ctx {
            return;
        }
        // Findings starting in the context were emitted whole before (a secret is never split
        // at a limit); a match starting there now is an artefact of the cut-off left edge.
        let findings: Vec<Finding> = scanner()
            .scan(&self.buf, self.kind, false)
            .into_iter()
            .filter(|f| f.start >= self.ctx)
            .collect();
        let mut limit = limit;
        for f in &findings {
            if f.start < limit && f.end > limit {
                limit = f.start;
            }
        }
        if lines {
            limit = limit.min(open_block(&self.buf, self.ctx, limit, &findings));
        }
        if limit <= self.ctx {
            return;
        }
        let mut pos = self.ctx;
        let min = self.min_confidence;
        for f in findings.iter().filter(|f| {
            f.start < limit && (min == Confidence::Low || f.confidence(&self.buf) >= min)
        }) {
            out.extend_from_slice(&self.buf[pos..f.start]);
            out.extend_from_slice(b"[REDACTED:");
            out.extend_from_slice(f.rule.as_bytes());
            out.push(b']');
            self.found.push(f.rule);
            pos = f.end;
        }
        out.extend_from_slice(&self.buf[pos..limit]);
        // Keep CONTEXT bytes of what was emitted, and everything pending.
        let keep_from = limit.saturating_sub(CONTEXT);
        self.buf.drain(..keep_from);
        self.ctx = limit - keep_from;
    }
}

/// Where an unfinished multi-line secret (a private key armour line without its end) starts
/// in `buf[from..limit]`, else `limit`. Only the last [`MAX_TOKEN`] bytes before `limit` are
/// looked at: a secret starting earlier ends before `limit` (no finding is longer). Linear:
/// the last `-----end` is found once, and whether a finding covers an armour line by binary
/// search (findings are sorted and disjoint).
fn open_block(buf: &[u8], from: usize, limit: usize, findings: &[Finding]) -> usize {
    let from_ = limit.saturating_sub(MAX_TOKEN).max(from);
    let lower = buf[from_..limit].to_ascii_lowercase();
    let last_end = memchr::memmem::rfind(&lower, b"-----end");
    for needle in [&b"-----begin"[..], b"putty-user-key-file-"] {
        for i in memchr::memmem::find_iter(&lower, needle) {
            let p = from_ + i;
            let k = findings.partition_point(|f| f.end <= p);
            let covered = findings.get(k).is_some_and(|f| f.start <= p);
            let has_end = needle == b"-----begin" && last_end.is_some_and(|e| e >= i);
            if !covered && !has_end {
                return memchr::memrchr(b'\n', &buf[from..p]).map_or(from, |j| from + j + 1);
            }
        }
    }
    limit
}
