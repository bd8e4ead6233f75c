//! Streaming redaction.
//!
//! The redactor keeps back the last [`MAX_EXTENT`] bytes of what it has been fed, so that a
//! secret whose start it emits has been scanned whole, and it keeps [`CONTEXT`] bytes of what
//! it has emitted as the scan's left context (a `password = ` emitted in one chunk still
//! names the value in the next). When the source goes quiet, [`Redactor::flush_lines`] emits
//! up to the last newline: single-line secrets cannot continue past it, and a private key
//! block still open is held from its armour line on.

use super::context::{MAX_VALUE, open_across};
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
        // Constructs across `limit` (see `spans`), when looked for already.
        let mut across = None;
        if lines {
            limit = limit.min(open_block(&self.buf, self.ctx, limit, &findings));
            // A construct still open whose value is judged only once it closes (a C#
            // verbatim string, read unescaped whole; the text of `<password>` spanning
            // lines) is held back from its line (at most MAX_VALUE of it, then no longer).
            let (open, hold) = self.spans(limit, limit);
            across = Some(open);
            if let Some(h) = hold {
                let held = line_start(&self.buf, h).max(self.ctx);
                if held < limit {
                    limit = held;
                    across = None;
                }
            }
        }
        for f in &findings {
            if f.start < limit && f.end > limit {
                limit = f.start;
                across = None;
            }
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
        // Keep CONTEXT bytes of what was emitted (more when a construct spans the cut), and
        // everything pending.
        let keep_from = self.keep_from(limit, across);
        self.buf.drain(..keep_from);
        self.ctx = limit - keep_from;
    }

    /// Where the left context kept after emitting up to `limit` starts: [`CONTEXT`] bytes
    /// back, or the line where a construct that may span lines (a C# verbatim or Go raw
    /// string, an XML tag or element text) opened before `limit` and reads on past it. The
    /// scan of the whole text reads a value inside such a construct from its opening (a
    /// `Password=""...""` line deep in a verbatim string, `<add key="Password"` with its
    /// `value=` lines later); a cut at a pause must not lose that. Such a construct is read at
    /// most [`MAX_VALUE`] bytes, so no more is looked at, and only when an opener is there.
    /// `across`: the first of [`Redactor::spans`] at `limit` if known.
    fn keep_from(&self, limit: usize, across: Option<Option<usize>>) -> usize {
        let keep = limit.saturating_sub(CONTEXT);
        // From a line's start, as the scan of the whole text begins its regions.
        let keep = if keep > 0 {
            line_start(&self.buf, keep)
        } else {
            keep
        };
        let keep = match across.unwrap_or_else(|| self.spans(limit, keep).0) {
            Some(o) if o < keep => line_start(&self.buf, o),
            _ => keep,
        };
        // Nor inside a construct open across the kept context's start: read from there, the
        // next scan would take the bytes that close it for an opening (a verbatim string's
        // `@"` closed by the `"` of a later `@"`) and read every quote after inverted, a
        // value the scan of the whole text reads outside any string read inside one.
        match self.spans(keep, keep).0 {
            Some(o) if o < keep => line_start(&self.buf, o),
            _ => keep,
        }
    }

    /// [`open_across`] at `limit` over the last [`MAX_VALUE`] bytes before it, lexed from a
    /// line start (the buffer's start is where the last scan began, as the scan of the
    /// whole text begins its regions at lines); only when an opener is in `buf[..upto]`.
    fn spans(&self, limit: usize, upto: usize) -> (Option<usize>, Option<usize>) {
        let floor = limit.saturating_sub(MAX_VALUE + 1);
        if floor >= upto {
            return (None, None);
        }
        let old = &self.buf[floor..upto];
        if memchr::memchr2(b'`', b'<', old).is_none() && memchr::memmem::find(old, b"@\"").is_none()
        {
            return (None, None);
        }
        let from = match floor {
            0 => 0,
            _ => memchr::memchr(b'\n', old).map_or(floor, |i| floor + i + 1),
        };
        open_across(&self.buf, from, limit)
    }
}

/// How far back from a construct's opening the kept context looks for its line's start (the
/// scan's windows look back as far).
const MAX_LINE_BACK: usize = 1024;

/// The start of the line holding `at`, looked for at most [`MAX_LINE_BACK`] bytes back.
fn line_start(buf: &[u8], at: usize) -> usize {
    let lo = at.saturating_sub(MAX_LINE_BACK);
    memchr::memrchr(b'\n', &buf[lo..at]).map_or(lo, |i| lo + i + 1)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A random alphanumeric string (no secret literal in the repository).
    fn random(seed: u64, n: usize) -> String {
        const A: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                A[(x % A.len() as u64) as usize] as char
            })
            .collect()
    }

    /// What a scan of the whole text redacts.
    fn whole(input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut pos = 0;
        for f in scanner().scan(input, TextKind::Stream, false) {
            out.extend_from_slice(&input[pos..f.start]);
            out.extend_from_slice(format!("[REDACTED:{}]", f.rule).as_bytes());
            pos = f.end;
        }
        out.extend_from_slice(&input[pos..]);
        out
    }

    /// The text fed in pieces cut at `cuts`, the source pausing after each (`flush_lines`).
    fn streamed(input: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut r = Redactor::new(TextKind::Stream);
        let mut out = Vec::new();
        let mut at = 0;
        for &c in cuts.iter().chain([input.len()].iter()) {
            r.feed(&input[at..c], &mut out);
            r.flush_lines(&mut out);
            at = c;
        }
        r.finish(&mut out);
        out
    }

    /// A secret after a pause (a cut at a newline) inside a construct that may span lines,
    /// opened more than [`CONTEXT`] bytes before the cut, is redacted as the scan of the whole
    /// text redacts it: the kept context reaches back to the construct's opening, and a
    /// construct judged whole when it closes is held back until then. (The old code leaked
    /// the verbatim string's and the elements' secrets.)
    #[test]
    fn a_pause_inside_a_construct_opened_before_the_context_changes_nothing() {
        let filler: String = (0..60)
            .map(|i| format!("line {i:03} of the configuration\n"))
            .collect();
        let blank = " \n".repeat(700);
        for seed in 1..3 {
            let pw = random(seed, 24);
            let cases = [
                format!("var cfg = @\"Server=db;\n{filler}Password=\"\"{pw}\"\";\n\";\n"),
                format!("<password>\n{blank}{pw}\n</password>\n"),
                format!("<add key=\"Password\"\n{blank}value=\"{pw}\"/>\n"),
                format!("<config>\n{filler}<password>{pw}</password>\n</config>\n"),
                format!("password := `{pw}`\n{filler}\n"),
                format!("db:\n{filler}  password: {pw}\n"),
                // A held verbatim string whose line starts more than 1 KiB back: the hold
                // begins inside the secret before it, and must not split it.
                format!(
                    "password = \"{pw}\" {} @\"Server=db;\n{filler}Password=\"\"{pw}\"\";\n\";\n",
                    "x".repeat(1000)
                ),
            ];
            for c in &cases {
                let t = c.as_bytes();
                let w = whole(t);
                assert!(
                    !String::from_utf8_lossy(&w).contains(&pw),
                    "the scan of the whole text finds the secret in {c:?}"
                );
                let cuts: Vec<usize> = (0..t.len())
                    .filter(|&i| t[i] == b'\n')
                    .map(|i| i + 1)
                    .collect();
                let s = streamed(t, &cuts);
                assert!(
                    s == w,
                    "paused at each line, the stream differs from the whole text's redaction:\n{}",
                    String::from_utf8_lossy(&s)
                );
            }
        }
    }
}
