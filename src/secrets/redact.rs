//! Streaming redaction.
//!
//! The redactor keeps back the last [`MAX_EXTENT`] bytes of what it has been fed, so that a
//! secret whose start it emits has been scanned whole, and it keeps [`CONTEXT`] bytes of what
//! it has emitted as the scan's left context (a `password = ` emitted in one chunk still
//! names the value in the next). When the source goes quiet, [`Redactor::flush_lines`] emits
//! up to the last newline: single-line secrets cannot continue past it, and a private key
//! block still open is held from its armour line on (and key-wide base64 lines that a key's
//! tail may end). A value cut at `scan::VALUE_BOUND` is emitted as its marker as soon as it
//! is seen past the bound, and the rest of its token is dropped as it comes.
//!
//! What is scanned is the stream normalised ([`super::normalise`]): escape sequences and
//! UTF-16's NULs removed (`NUL X NUL`; binary data's stay). UTF-16 is not decoded here: its
//! ASCII is its bytes with a NUL after (or before) each, so removing the NULs reads it,
//! wherever it starts in the stream and whatever came before it (a stream decided UTF-16 by
//! its first bytes once read a `cat` of an ASCII file after a UTF-16 one as UTF-16, and the
//! other way round: both unredacted); a marker in such text is written with a NUL after
//! each byte, keeping the code units aligned.
//!
//! `buf` holds the normalised text; while a sequence was removed from what is pending, `raw`
//! holds the raw bytes not emitted yet and findings are mapped back to them (the escapes
//! inside a redacted value go with it, the others stay). A stream with no escape sequence
//! and no NUL costs one `memchr3` per chunk more.

use super::context::{LexState, REDO_NAMES, Trace};
use super::normalise::{Escapes, RawSpan, has_sequence, payload_findings, write_redacted};
use super::scan::{Finding, MAX_EXTENT, MAX_TOKEN, MAX_WINDOW, rest_end, scanner};
use super::{Confidence, TextKind};

/// Bytes of emitted text kept as left context for the next scan.
const CONTEXT: usize = 1024;
/// Pending bytes beyond the held-back tail before a full scan is worth it: the tail is
/// scanned again with the next batch, so a batch much larger than the tail keeps that cost
/// small (~7% at 1 MiB, the tail being [`MAX_EXTENT`], ~67 KiB). 4 MiB was slower, not faster,
/// in the redactor alone (coloured log 270 -> 226 MB/s, random base64 318 -> 231 MB/s; likely
/// the scan's passes falling out of cache). A quiet source is flushed by lines regardless.
const BATCH: usize = 1024 * 1024;

/// Raw bytes held (a batch's text and the escape sequences among it) before a scan, in
/// batches: a coloured log holds ~1.6 raw bytes for each byte of text, a colour between
/// every two characters 5.
const RAW_BATCHES: usize = 4;

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
    /// Pending bytes beyond the held-back tail before [`Redactor::feed`] scans ([`BATCH`];
    /// smaller in tests, to cut streams mid-line often).
    batch: usize,
    /// The context tokenizer's state at `buf[lex_pos]`, as the scan of the whole stream has
    /// it there (a checkpoint or a region's end the scan before noted; the bytes before
    /// `lex_pos` are kept for the keyword windows and names that reach past it).
    lex: LexState,
    lex_pos: usize,
    /// The last finding emitted was a value cut at `VALUE_BOUND` whose token ran to the
    /// buffer's end: the bytes that continue it are dropped as they come.
    rest: bool,
    /// Bytes drained from the front of `buf` so far (the normalised offset of `buf[0]`).
    drained: usize,
    /// The spans redacted (normalised offsets in the stream): what the property test
    /// compares with the whole text's findings.
    #[cfg(test)]
    spans: Vec<(usize, usize)>,
    /// Escape sequences removed from the stream, and the map back to its bytes.
    esc: Escapes,
    /// Set while a sequence was removed from the pending text (or one is pending): then
    /// `raw` holds the raw bytes not emitted yet (a sequence held included), from raw offset
    /// `raw_base`; else the raw bytes not emitted are `buf[ctx..]`.
    mapped: bool,
    raw: Vec<u8>,
    raw_base: usize,
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
            batch: BATCH,
            lex: LexState::default(),
            lex_pos: 0,
            rest: false,
            drained: 0,
            #[cfg(test)]
            spans: Vec::new(),
            esc: Escapes::default(),
            mapped: false,
            raw: Vec::new(),
            raw_base: 0,
        }
    }

    /// The same with another batch: `feed` scans after `batch` pending bytes (smaller in
    /// tests, to cut streams mid-line often; the secrets benchmark compares sizes).
    #[doc(hidden)]
    pub fn with_batch(mut self, batch: usize) -> Redactor {
        self.batch = batch;
        self
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
        self.feed_text(chunk, out);
    }

    /// The source has paused: emits through the last newline that no open multi-line secret
    /// needs. (Not at `\r`: a quoted value may contain one; no single-line rule crosses `\n`.)
    pub fn flush_lines(&mut self, out: &mut Vec<u8>) {
        self.flush_text(out);
    }

    /// End of stream: emits everything.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.finish_text(out);
    }

    /// Feeds a chunk: escape sequences and NULs are removed from what is scanned.
    fn feed_text(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let before = self.buf.len();
        if !self.mapped
            && !self.esc.pending()
            && !has_sequence(chunk, self.esc.prev2(), self.esc.prev())
        {
            // The common case: no sequence, the chunk is the text.
            self.buf.extend_from_slice(chunk);
            self.esc.skip(chunk);
        } else {
            if !self.mapped {
                self.mapped = true;
                self.raw.clear();
                self.raw.extend_from_slice(&self.buf[self.ctx..]);
                self.raw_base = self.esc.raw_of(self.drained + self.ctx);
            }
            self.raw.extend_from_slice(chunk);
            self.esc.push(chunk, &mut self.buf, false);
        }
        self.unflushed += self.buf.len() - before;
        let pending = self.buf.len() - self.ctx;
        // The raw bytes held count too (RAW_BATCHES batches of them): an escape-dense stream
        // holds several for each byte of text, and the map an entry for each sequence.
        let raw = if self.mapped { self.raw.len() } else { 0 };
        if pending >= MAX_EXTENT + self.batch
            || (pending > MAX_EXTENT && raw >= RAW_BATCHES * (MAX_EXTENT + self.batch))
        {
            let limit = self.buf.len() - MAX_EXTENT;
            self.emit(limit, false, out);
        } else if raw >= RAW_BATCHES * (MAX_EXTENT + self.batch) {
            // Escape sequences and little text (a stream of sequences alone): the text held
            // is emitted whole, so that the raw bytes after it go too; without this they were
            // held without limit. A secret with megabytes of sequences inside it is cut here.
            let limit = self.buf.len();
            self.emit(limit, false, out);
            self.write_sequences(out);
        }
    }

    /// [`Redactor::flush_lines`] of text.
    fn flush_text(&mut self, out: &mut Vec<u8>) {
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

    /// [`Redactor::finish`] of text: a sequence left unfinished is text.
    fn finish_text(&mut self, out: &mut Vec<u8>) {
        if self.esc.pending() {
            self.esc.push(&[], &mut self.buf, true);
        }
        let limit = self.buf.len();
        self.emit(limit, false, out);
        self.write_sequences(out);
    }

    /// Writes the escape sequences held after the last text once all text is out (`emit`
    /// writes raw bytes only with text: the sequences a stream ended on, after its last
    /// text was emitted, were lost).
    fn write_sequences(&mut self, out: &mut Vec<u8>) {
        if self.mapped && self.ctx == self.buf.len() {
            let ctx = self.ctx;
            self.write(&[], ctx, out);
        }
    }

    /// Scans the buffer and emits `buf[ctx..limit]` (or less, never splitting a secret or, with
    /// `lines`, an open private key block), redacted.
    fn emit(&mut self, limit: usize, lines: bool, out: &mut Vec<u8>) {
        if self.rest {
            // The rest of a cut value's token: dropped (its marker is out already).
            let e = rest_end(&self.buf, self.ctx);
            #[cfg(test)]
            if let Some(last) = self.spans.last_mut() {
                last.1 += e - self.ctx;
            }
            if self.mapped {
                // Its raw bytes (escapes inside it too) go with it.
                let cut = (self.esc.raw_of(self.drained + e) - self.raw_base).min(self.raw.len());
                self.raw.drain(..cut);
                self.raw_base += cut;
            }
            self.rest = e == self.buf.len();
            self.ctx = e;
        }
        if limit <= self.ctx {
            return;
        }
        // The tokenizer starts in the state the scan of the whole stream has at the buffer's
        // start (see `resume_at`). Findings starting in the context were emitted whole
        // before (a secret is never split at a limit).
        let mut trace = Trace::default();
        let findings: Vec<Finding> = scanner()
            .scan_from(&self.buf, self.kind, false, self.lex, &mut trace)
            .into_iter()
            .filter(|f| f.start >= self.ctx)
            .collect();
        let mut limit = limit;
        if lines {
            limit = limit.min(open_block(&self.buf, self.ctx, limit, &findings));
            // A construct still open whose value is judged only once it closes (a C#
            // verbatim string, read unescaped whole; the text of `<password>` spanning
            // lines) is held back from its line (it is read at most MAX_VALUE bytes, so
            // then no longer).
            if let Some(h) = trace.hold.filter(|&h| h < limit) {
                limit = limit.min(line_start(&self.buf, h).max(self.ctx));
            }
        }
        for f in &findings {
            if f.start < limit && f.end > limit {
                // A value cut at the bound is final: emitted now, its token's rest dropped.
                limit = if f.end - f.start > MAX_TOKEN {
                    self.rest = f.end == self.buf.len();
                    f.end
                } else {
                    f.start
                };
            }
        }
        if limit <= self.ctx {
            return;
        }
        self.write(&findings, limit, out);
        // Keep CONTEXT bytes of what was emitted, from the last point before them where the
        // tokenizer's state is known (`resume_at`), with the text the keyword windows and the
        // names in that state reach back to, and everything pending.
        let keep = limit.saturating_sub(CONTEXT);
        let (pos, lex) = self.resume_at(keep, limit, &trace);
        let names = if lex.mid {
            lex.names_from().max(pos.saturating_sub(REDO_NAMES))
        } else {
            pos
        };
        let keep_from = pos.saturating_sub(MAX_WINDOW).min(names);
        self.lex = lex.shifted(keep_from);
        self.lex_pos = pos - keep_from;
        self.buf.drain(..keep_from);
        self.drained += keep_from;
        self.ctx = limit - keep_from;
        let at = self.drained + self.ctx;
        self.esc.forget_before(at);
        if self.mapped && self.esc.identity_from(at) {
            // No sequence left in what is pending: `buf[ctx..]` is the raw text again.
            self.mapped = false;
            self.raw = Vec::new();
        }
    }

    /// Writes `buf[ctx..limit]` (its raw bytes) with the findings starting before `limit`
    /// (at the policy's confidence) replaced by their markers.
    fn write(&mut self, findings: &[Finding], limit: usize, out: &mut Vec<u8>) {
        let min = self.min_confidence;
        let chosen = findings.iter().filter(|f| {
            f.start < limit && (min == Confidence::Low || f.confidence(&self.buf) >= min)
        });
        if !self.mapped {
            let mut pos = self.ctx;
            for f in chosen {
                out.extend_from_slice(&self.buf[pos..f.start]);
                out.extend_from_slice(b"[REDACTED:");
                out.extend_from_slice(f.rule.as_bytes());
                out.push(b']');
                self.found.push(f.rule);
                #[cfg(test)]
                self.spans
                    .push((self.drained + f.start, self.drained + f.end));
                pos = f.end;
            }
            out.extend_from_slice(&self.buf[pos..limit]);
            return;
        }
        // Findings in the normalised text cover their raw bytes: from the first byte's (past
        // the escapes before it) to the last's (before the escapes after it).
        let (base, rb) = (self.drained, self.raw_base);
        let mut spans: Vec<RawSpan> = Vec::new();
        for f in chosen {
            let s = self.esc.raw_of(base + f.start) - rb;
            let e = self.esc.raw_of(base + f.end - 1) + 1 - rb;
            spans.push((s, e, f.rule));
            #[cfg(test)]
            self.spans.push((base + f.start, base + f.end));
        }
        let cut = self.esc.raw_of(base + limit) - rb;
        let extra = payload_findings(&self.raw, rb, cut, &mut self.esc.strings, |f, p| {
            min == Confidence::Low || f.confidence(p) >= min
        });
        if !extra.is_empty() {
            spans.extend(extra);
            spans.sort_by_key(|s| s.0);
        }
        let rules = write_redacted(&self.raw, cut, &spans, out);
        self.found.extend(rules);
        self.raw.drain(..cut);
        self.raw_base += cut;
    }

    /// Where the next scan resumes lexing (at or before `keep`) and the tokenizer's state
    /// there, from this scan's `trace`: the last of
    /// - a checkpoint taken inside a region (the whole state there, the line's included:
    ///   a line of megabytes is resumed mid-line exactly as the whole text's scan read it);
    /// - `keep` itself, between regions (the state after the region before it: nothing is
    ///   lexed between regions, and each region begins as a line);
    /// - where this scan resumed
    ///
    /// whose state is final: no construct read up to it was still open at the buffer's end
    /// (what follows may close it: its state is not known yet) or read on past `limit` (its
    /// values after `limit` are not emitted yet, and a scan resumed after it would skip them).
    /// Constructs read at most [`super::context::MAX_VALUE`] bytes and checkpoints come every
    /// 1 KiB of lexing, so this goes back at most [`REDO_MAX`]; past that (not seen), the
    /// scan resumes at `keep` afresh rather than read megabytes again at each pause.
    fn resume_at(&self, keep: usize, limit: usize, trace: &Trace) -> (usize, LexState) {
        let len = self.buf.len();
        let fine = |st: &LexState| st.reach() < len && st.at <= limit;
        let mut best = (self.lex_pos, self.lex);
        let mut consider = |pos: usize, st: LexState| {
            if pos <= keep && pos >= best.0 && fine(&st) {
                best = (pos, st);
            }
        };
        for &(p, st) in &trace.checkpoints {
            consider(p, st);
        }
        let k = trace.regions.partition_point(|r| r.0 <= keep);
        for &(_, e, st) in &trace.regions[..k] {
            if e <= keep {
                consider(e, st);
            }
        }
        // `keep` between regions: the state after the last region begun before it.
        match trace.regions[..k].last() {
            Some(&(_, e, st)) if e <= keep => consider(keep, st),
            None if !self.lex.mid => consider(keep, self.lex),
            _ => {}
        }
        if keep - best.0.min(keep) > REDO_MAX {
            return (keep, LexState::default());
        }
        best
    }
}

/// How far back before the kept context a resumed scan may start: a construct read whole
/// ([`super::context::MAX_VALUE`]) before the one open at the buffer's end, and the lexing
/// between two checkpoints.
const REDO_MAX: usize = 2 * super::context::MAX_VALUE + 8192;

/// How far back from a held construct's opening (`Trace::hold`) the text held back looks
/// for its line's start. (It no longer decides where a resumed scan starts: that is a
/// checkpoint of the tokenizer's, see `Redactor::resume_at`.)
const MAX_LINE_BACK: usize = 1024;

/// The start of the line holding `at`, looked for at most [`MAX_LINE_BACK`] bytes back.
fn line_start(buf: &[u8], at: usize) -> usize {
    let lo = at.saturating_sub(MAX_LINE_BACK);
    memchr::memrchr(b'\n', &buf[lo..at]).map_or(lo, |i| lo + i + 1)
}

/// Where an unfinished multi-line secret (a private key armour line without its end, or a
/// run of key-wide base64 lines that a key's tail may end: `scan::key_body_run_start`)
/// starts in `buf[from..limit]`, else `limit`. Only the last [`MAX_TOKEN`] bytes before `limit` are
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
            // A key block found without its END (issue 38) is still open: more of it may come.
            let covered = findings
                .get(k)
                .is_some_and(|f| f.start <= p && f.rule != "private-key-open");
            let has_end = needle == b"-----begin" && last_end.is_some_and(|e| e >= i);
            if !covered && !has_end {
                return memchr::memrchr(b'\n', &buf[from..p]).map_or(from, |j| from + j + 1);
            }
        }
    }
    // Base64 lines as wide as a key's ending the text: a key's tail may follow (issue 38).
    super::scan::key_body_run_start(buf, from, limit).unwrap_or(limit)
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
