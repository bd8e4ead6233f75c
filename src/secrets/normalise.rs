//! Normalisation before matching: the text a terminal shows, not the bytes that draw it.
//!
//! Tools colour what they print (`git diff --color`, `grep --color=always`, `jq -C`, coloured
//! logs): an escape sequence between a name and its value, or inside a value, breaks the
//! shapes the rules match. Windows tools and some editors write UTF-16. So, before matching:
//!
//! - Escape sequences are removed ([`Escapes`]): CSI (`ESC [`, parameters, intermediates, a
//!   final byte; SGR colours among them), the 8-bit CSI `0x9b` where it follows an ASCII byte
//!   (after any other byte it may be a UTF-8 continuation), string sequences (OSC `ESC ]`,
//!   DCS, SOS, PM, APC, up to BEL or `ESC \`; OSC 8 hyperlinks among them) and the other
//!   `ESC` sequences (`ESC ( B`, `ESC =`). A string sequence's payload (a hyperlink's URI, a
//!   window title) is not part of the text around it: it is scanned on its own
//!   ([`Escapes::strings`]). An `ESC` that begins no complete sequence (within [`MAX_CSI`] or
//!   [`MAX_STRING`] bytes, or by the end of the stream) stays, as text. `\r` rewrites stay.
//! - UTF-16's NULs are removed: a NUL in `NUL X NUL` (X not a NUL), so that UTF-16's ASCII
//!   (a NUL after or before each byte, LE or BE) reads as ASCII wherever it starts in a
//!   stream, whatever came before it. A marker replacing such a value is written with a NUL
//!   after each byte: code units stay aligned, the BOM stays. Binary data's NULs (runs of
//!   them, one between two strings) are text: removed, they joined an ELF's strings into
//!   keyword values. NULs inside an escape sequence are part of it. (Files are decoded
//!   whole instead: [`detect`], [`decode_utf16`], for `gateway scan`.)
//!
//! The normalised text is a subsequence of the raw bytes (only whole sequences are removed),
//! so the map back is a list of segments ([`Escapes::raw_of`]): after each removed run,
//! where the next normalised byte is in the raw stream. A finding at `[s, e)` of the
//! normalised text covers the raw `[raw_of(s), raw_of(e - 1) + 1)`: the value's bytes and the
//! escapes inside it; the escapes before and after it stay. A cut at `n` (what a stream emits
//! up to) is at `raw_of(n)`: the escapes just before the byte at `n` go with the text before.
//!
//! All of it works on a stream fed in chunks: a sequence or a code unit cut between two
//! chunks is held until it is whole, and the result does not depend on the cuts.

use super::TextKind;
use super::scan::scanner;
use std::collections::VecDeque;

/// The escape byte.
pub(crate) const ESC: u8 = 0x1b;
/// The 8-bit control sequence introducer (C1 CSI).
pub(crate) const CSI8: u8 = 0x9b;
const BEL: u8 = 0x07;
/// The longest control sequence (CSI, `ESC` with intermediates) recognised: an `ESC [` not
/// finished within it is text. Terminals read any number of parameters (a CSI of 40 of
/// them hid a token from a bound of 64); each byte is read by one sequence at most, so a
/// larger bound costs no more.
pub(crate) const MAX_CSI: usize = 1024;
/// The longest string sequence (OSC and the like) recognised, terminator included.
pub(crate) const MAX_STRING: usize = 4096;
/// The bytes at a stream's start that decide whether it is UTF-16 without a BOM.
pub(crate) const DETECT: usize = 64;

/// What the bytes at an `ESC` (or `0x9b`) are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seq {
    /// A whole sequence of `len` bytes; a string sequence's payload at `payload` in it.
    Whole {
        len: usize,
        payload: Option<(usize, usize)>,
    },
    /// Perhaps a sequence: the bytes so far do not tell.
    Partial,
    /// No sequence: the first byte is text.
    Text,
}

/// `b` (starting with `ESC` or `0x9b`) read as an escape sequence; `at_end`: no byte follows.
#[inline]
fn parse(b: &[u8], at_end: bool) -> Seq {
    let more = |limit: usize| {
        if at_end || b.len() >= limit {
            Seq::Text
        } else {
            Seq::Partial
        }
    };
    // NULs inside a sequence are part of it (UTF-16's sequences hold one after each byte).
    let at = 1 + b
        .iter()
        .skip(1)
        .take(MAX_CSI)
        .take_while(|&&c| c == 0)
        .count();
    match b.first() {
        Some(&CSI8) => csi(b, 1, at_end),
        Some(&ESC) => match b.get(at) {
            None => more(MAX_CSI),
            Some(b'[') => csi(b, at + 1, at_end),
            Some(b']' | b'P' | b'X' | b'^' | b'_') => string(b, at + 1, at_end),
            Some(0x20..=0x2f) => {
                // `ESC`, intermediates, a final byte (`ESC ( B`).
                let body = b.get(at + 1..b.len().min(MAX_CSI)).unwrap_or_default();
                for (k, &c) in body.iter().enumerate() {
                    let i = k + at + 1;
                    match c {
                        0 | 0x20..=0x2f => {}
                        0x30..=0x7e => {
                            return Seq::Whole {
                                len: i + 1,
                                payload: None,
                            };
                        }
                        _ => return Seq::Text,
                    }
                }
                more(MAX_CSI)
            }
            Some(0x30..=0x7e) => Seq::Whole {
                len: at + 1,
                payload: None,
            },
            Some(_) => Seq::Text,
        },
        _ => Seq::Text,
    }
}

/// A NUL at `b[0]`, after the raw bytes `prev2`, `prev`: removed when it is UTF-16's, in
/// `NUL X NUL` with X not a NUL (this NUL the first or the last), else text. Binary data's
/// NULs (`name\0value\0`, runs of them) stay: removed, they joined strings a scan then
/// read as one (`STRING\0parse_string` as a keyword's value).
fn nul(b: &[u8], prev2: u8, prev: u8, at_end: bool) -> Seq {
    const WHOLE: Seq = Seq::Whole {
        len: 1,
        payload: None,
    };
    if prev != 0 && prev2 == 0 {
        return WHOLE;
    }
    match (b.get(1), b.get(2)) {
        (Some(&x), Some(&0)) if x != 0 => WHOLE,
        (Some(&0), _) | (Some(_), Some(_)) => Seq::Text,
        _ if at_end => Seq::Text,
        _ => Seq::Partial,
    }
}

/// A control sequence whose parameters start at `from`. (Index loops: an iterator's
/// `skip`/`take` was not inlined, a seventh of a coloured stream's time.)
#[inline]
fn csi(b: &[u8], from: usize, at_end: bool) -> Seq {
    let mut intermediate = false;
    let end = b.len().min(MAX_CSI);
    let mut i = from;
    while i < end {
        let c = b[i];
        i += 1;
        match c {
            0 => {}
            0x30..=0x3f if !intermediate => {}
            0x20..=0x2f => intermediate = true,
            0x40..=0x7e => {
                return Seq::Whole {
                    len: i,
                    payload: None,
                };
            }
            _ => return Seq::Text,
        }
    }
    if at_end || b.len() >= MAX_CSI {
        Seq::Text
    } else {
        Seq::Partial
    }
}

/// A string sequence (`ESC ]` and the like): printable bytes up to BEL or `ESC \`. A control
/// byte inside (a newline) means it was not one: a stray `ESC ]` hides no lines.
fn string(b: &[u8], from: usize, at_end: bool) -> Seq {
    let body = b.get(from..b.len().min(MAX_STRING)).unwrap_or_default();
    for (k, &c) in body.iter().enumerate() {
        let i = k + from;
        match c {
            0 => {}
            BEL => {
                return Seq::Whole {
                    len: i + 1,
                    payload: Some((from, i)),
                };
            }
            ESC => {
                let st = i + 1 + b.iter().skip(i + 1).take_while(|&&c| c == 0).count();
                return match b.get(st) {
                    Some(b'\\') => Seq::Whole {
                        len: st + 1,
                        payload: Some((from, i)),
                    },
                    None if !at_end && b.len() < MAX_STRING => Seq::Partial,
                    _ => Seq::Text,
                };
            }
            0..0x20 | 0x7f => return Seq::Text,
            _ => {}
        }
    }
    if at_end || b.len() >= MAX_STRING {
        Seq::Text
    } else {
        Seq::Partial
    }
}

/// Whether `chunk` holds (the start of) an escape sequence or a UTF-16 NUL, `prev2` and
/// `prev` the bytes before it: if not, a stream that has none pending can take it as it is.
pub(crate) fn has_sequence(chunk: &[u8], prev2: u8, prev: u8) -> bool {
    memchr::memchr3_iter(ESC, CSI8, 0, chunk).any(|j| {
        let before = if j > 0 { chunk[j - 1] } else { prev };
        if chunk[j] == 0 {
            let before2 = match j {
                0 => prev2,
                1 => prev,
                _ => chunk[j - 2],
            };
            return nul(&chunk[j..], before2, before, false) != Seq::Text;
        }
        (chunk[j] == ESC || before < 0x80) && parse(&chunk[j..], false) != Seq::Text
    })
}

/// Text copied between sequences in blocks of this many bytes ([`copy_text`]).
const BLOCK: usize = 32;

/// The first `ESC` or `0x9b` in `bytes` from `i`: the next few bytes looked at one by one
/// (colours come close together), then searched.
#[inline]
fn next_escape(bytes: &[u8], i: usize) -> Option<usize> {
    let near = bytes.len().min(i + 8);
    let mut k = i;
    while k < near {
        if matches!(bytes[k], ESC | CSI8 | 0) {
            return Some(k);
        }
        k += 1;
    }
    memchr::memchr3(ESC, CSI8, 0, &bytes[near..]).map(|k| near + k)
}

/// Copies `src[a..b]` to `dst[w..]`, where room for it and [`BLOCK`] bytes more was made
/// (`w - a` is the room's start: the text is a subsequence); returns the end. A short piece
/// is copied as one block of fixed size (the bytes past it are overwritten later or cut).
#[inline]
fn copy_text(dst: &mut [u8], w: usize, src: &[u8], a: usize, b: usize) -> usize {
    let n = b - a;
    if n <= BLOCK && a + BLOCK <= src.len() {
        dst[w..w + BLOCK].copy_from_slice(&src[a..a + BLOCK]);
    } else {
        dst[w..w + n].copy_from_slice(&src[a..b]);
    }
    w + n
}

/// The escape-sequence remover of one stream, and the map from its output (the normalised
/// text) back to its input (the raw bytes). Offsets are from the stream's start.
#[derive(Debug, Default)]
pub(crate) struct Escapes {
    /// The bytes of a sequence begun and not finished yet (in no output).
    partial: Vec<u8>,
    /// The last raw byte taken (`0x9b` after a byte >= 0x80 is not a CSI), and the one
    /// before it (a NUL is UTF-16's after `NUL X`).
    prev: u8,
    prev2: u8,
    /// Raw bytes taken, normalised bytes given.
    raw_pos: usize,
    norm_pos: usize,
    /// `(n, r)`: from normalised offset `n` on, normalised byte `n + k` is raw byte `r + k`
    /// (up to the next entry). Empty: the identity.
    segs: Vec<(usize, usize)>,
    /// Entries of `segs` before this one are forgotten ([`Escapes::forget_before`]).
    lo: usize,
    /// Raw ranges of string sequences' payloads, scanned apart.
    pub(crate) strings: VecDeque<(usize, usize)>,
}

impl Escapes {
    /// Whether a sequence is pending (begun in a chunk, not finished).
    pub(crate) fn pending(&self) -> bool {
        !self.partial.is_empty()
    }

    /// The last raw byte taken.
    pub(crate) fn prev(&self) -> u8 {
        self.prev
    }

    /// The raw byte taken before the last.
    pub(crate) fn prev2(&self) -> u8 {
        self.prev2
    }

    /// Takes `chunk`, known to hold no sequence, as text (nothing is copied).
    pub(crate) fn skip(&mut self, chunk: &[u8]) {
        if let Some(&last) = chunk.last() {
            self.raw_pos += chunk.len();
            self.norm_pos += chunk.len();
            self.prev2 = if chunk.len() >= 2 {
                chunk[chunk.len() - 2]
            } else {
                self.prev
            };
            self.prev = last;
        }
    }

    /// The raw offset of normalised byte `n` (past the escapes before it); for `n` at the end
    /// of the text so far, past the escapes after it.
    pub(crate) fn raw_of(&self, n: usize) -> usize {
        let segs = &self.segs[self.lo..];
        let k = segs.partition_point(|s| s.0 <= n);
        match k.checked_sub(1).map(|k| segs[k]) {
            Some((sn, sr)) => sr + (n - sn),
            None => n,
        }
    }

    /// Whether normalised bytes from `n` on are the raw bytes from `raw_of(n)` on, one for
    /// one (no sequence removed after `n`, none pending).
    pub(crate) fn identity_from(&self, n: usize) -> bool {
        self.partial.is_empty()
            && self.segs.last().is_none_or(|s| s.0 <= n)
            && self.strings.is_empty()
    }

    /// Forgets the map before normalised offset `n` (no offset before it is asked again).
    pub(crate) fn forget_before(&mut self, n: usize) {
        while self.lo + 1 < self.segs.len() && self.segs[self.lo + 1].0 <= n {
            self.lo += 1;
        }
        if self.lo >= 4096 && self.lo * 2 >= self.segs.len() {
            self.segs.drain(..self.lo);
            self.lo = 0;
        }
    }

    /// Feeds raw bytes: appends the normalised text to `norm` (a sequence not finished at the
    /// chunk's end is held; `at_end`: none follows, it is text). The caller keeps the raw
    /// bytes: the map's offsets are into them, all of them, the held ones included.
    pub(crate) fn push(&mut self, chunk: &[u8], norm: &mut Vec<u8>, at_end: bool) {
        let mut rest = chunk;
        while !self.partial.is_empty() {
            let old = self.partial.len();
            let k = rest.len().min(MAX_STRING + 2);
            self.partial.extend_from_slice(&rest[..k]);
            let end = at_end && k == rest.len();
            let seq = if self.partial[0] == 0 {
                nul(&self.partial, self.prev2, self.prev, end)
            } else {
                parse(&self.partial, end)
            };
            match seq {
                Seq::Partial => return,
                Seq::Whole { len, payload } => {
                    let p = std::mem::take(&mut self.partial);
                    self.remove(&p[..len], payload);
                    if len < old {
                        // Shorter than what was held (a NUL told by the bytes after it):
                        // the rest held is read again, before the chunk.
                        self.push(&p[len..old], norm, false);
                    }
                    rest = &rest[len.saturating_sub(old).min(rest.len())..];
                }
                Seq::Text => {
                    let mut p = std::mem::take(&mut self.partial);
                    p.truncate(old);
                    self.text(&p[..1], norm);
                    // What followed the `ESC` is read again, before the chunk.
                    self.push(&p[1..], norm, false);
                }
            }
        }
        let taken = self.run(rest, norm, at_end);
        self.partial.extend_from_slice(&rest[taken..]);
    }

    /// Normalises `bytes`; returns where a sequence not finished in them starts (else their
    /// length). The text between sequences is copied in blocks into room made in `norm`
    /// beforehand (a `memcpy` call per piece was a tenth of a coloured stream's time), and
    /// the offsets are counted from the indices, once.
    fn run(&mut self, bytes: &[u8], norm: &mut Vec<u8>, at_end: bool) -> usize {
        let len0 = norm.len();
        norm.resize(len0 + bytes.len() + BLOCK, 0);
        let (raw0, norm0) = (self.raw_pos, self.norm_pos);
        // `norm[..w]` is written; `bytes[last..]` not copied yet; the search goes on at `i`.
        let mut w = len0;
        let mut last = 0;
        let mut i = 0;
        let mut held = bytes.len();
        while i < bytes.len() {
            let Some(j) = next_escape(bytes, i) else {
                break;
            };
            let before = if j > 0 { bytes[j - 1] } else { self.prev };
            if bytes[j] == CSI8 && before >= 0x80 {
                i = j + 1;
                continue;
            }
            let seq = if bytes[j] == 0 {
                let before2 = match j {
                    0 => self.prev2,
                    1 => self.prev,
                    _ => bytes[j - 2],
                };
                nul(&bytes[j..], before2, before, at_end)
            } else {
                parse(&bytes[j..], at_end)
            };
            match seq {
                // A run of NULs that are text: its last may begin UTF-16 (`NUL X NUL`).
                Seq::Text if bytes[j] == 0 => {
                    let run = bytes[j..].iter().take_while(|&&c| c == 0).count();
                    i = j + run.saturating_sub(1).max(1);
                }
                Seq::Text => i = j + 1,
                Seq::Partial => {
                    held = j;
                    break;
                }
                Seq::Whole { len, payload } => {
                    w = copy_text(norm, w, bytes, last, j);
                    let r = raw0 + j;
                    if let Some((s, e)) = payload.filter(|p| p.0 < p.1) {
                        self.strings.push_back((r + s, r + e));
                    }
                    let n = norm0 + (w - len0);
                    match self.segs.last_mut() {
                        Some(s) if s.0 == n => s.1 = r + len,
                        _ => self.segs.push((n, r + len)),
                    }
                    i = j + len;
                    last = i;
                }
            }
        }
        w = copy_text(norm, w, bytes, last, held);
        norm.truncate(w);
        self.raw_pos = raw0 + held;
        self.norm_pos = norm0 + (w - len0);
        if held > 0 {
            self.prev2 = if held >= 2 {
                bytes[held - 2]
            } else {
                self.prev
            };
            self.prev = bytes[held - 1];
        }
        held
    }

    fn text(&mut self, t: &[u8], norm: &mut Vec<u8>) {
        norm.extend_from_slice(t);
        self.skip(t);
    }

    fn remove(&mut self, seq: &[u8], payload: Option<(usize, usize)>) {
        if let Some((s, e)) = payload.filter(|p| p.0 < p.1) {
            self.strings.push_back((self.raw_pos + s, self.raw_pos + e));
        }
        self.raw_pos += seq.len();
        if let Some(&last) = seq.last() {
            self.prev2 = if seq.len() >= 2 {
                seq[seq.len() - 2]
            } else {
                self.prev
            };
            self.prev = last;
        }
        match self.segs.last_mut() {
            Some(s) if s.0 == self.norm_pos => s.1 = self.raw_pos,
            _ => self.segs.push((self.norm_pos, self.raw_pos)),
        }
    }
}

/// A stream's encoding, as far as matching is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// Bytes as they are (UTF-8, ASCII, anything else).
    Bytes,
    /// UTF-16, big-endian or not, with a BOM or not.
    Utf16 { be: bool, bom: bool },
}

/// The encoding of a stream starting with `head`, or `None` while it cannot tell (fewer than
/// [`DETECT`] bytes that look like UTF-16, and more to come). The answer does not depend on
/// how the stream is cut: it is decided on the first [`DETECT`] bytes, or fewer when they
/// already tell (a BOM; two bytes neither NUL).
pub(crate) fn detect(head: &[u8], at_end: bool) -> Option<Encoding> {
    match head {
        [0xff, 0xfe, ..] => {
            return Some(Encoding::Utf16 {
                be: false,
                bom: true,
            });
        }
        [0xfe, 0xff, ..] => {
            return Some(Encoding::Utf16 {
                be: true,
                bom: true,
            });
        }
        [a, b, ..] if *a != 0 && *b != 0 => return Some(Encoding::Bytes),
        _ => {}
    }
    if head.len() < DETECT && !at_end {
        return None;
    }
    let pairs = &head[..head.len().min(DETECT) & !1];
    let (mut le, mut be) = (0, 0);
    for p in pairs.chunks_exact(2) {
        match (p[0] != 0, p[1] != 0) {
            (true, false) => le += 1,
            (false, true) => be += 1,
            _ => {}
        }
    }
    let n = pairs.len() / 2;
    Some(if n >= 2 && le * 4 >= n * 3 {
        Encoding::Utf16 {
            be: false,
            bom: false,
        }
    } else if n >= 2 && be * 4 >= n * 3 {
        Encoding::Utf16 {
            be: true,
            bom: false,
        }
    } else {
        Encoding::Bytes
    })
}

/// Appends the (generalised: surrogates too) UTF-8 of `c`.
fn push_utf8(c: u32, out: &mut Vec<u8>) {
    match c {
        0..0x80 => out.push(c as u8),
        0x80..0x800 => out.extend_from_slice(&[0xc0 | (c >> 6) as u8, 0x80 | (c & 0x3f) as u8]),
        0x800..0x10000 => out.extend_from_slice(&[
            0xe0 | (c >> 12) as u8,
            0x80 | ((c >> 6) & 0x3f) as u8,
            0x80 | (c & 0x3f) as u8,
        ]),
        _ => out.extend_from_slice(&[
            0xf0 | (c >> 18) as u8,
            0x80 | ((c >> 12) & 0x3f) as u8,
            0x80 | ((c >> 6) & 0x3f) as u8,
            0x80 | (c & 0x3f) as u8,
        ]),
    }
}

/// Eight little-endian code units each below 0x80 have no bit of this set (read as one
/// little-endian `u128`); [`ASCII_UNITS_BE`] the same for big-endian units.
const ASCII_UNITS_LE: u128 = 0xff80_ff80_ff80_ff80_ff80_ff80_ff80_ff80;
const ASCII_UNITS_BE: u128 = 0x80ff_80ff_80ff_80ff_80ff_80ff_80ff_80ff;

/// UTF-16 to UTF-8 (WTF-8 for lone surrogates), fed in chunks.
#[derive(Debug)]
pub(crate) struct Utf16Decoder {
    be: bool,
    /// A byte of a code unit whose other byte has not come.
    odd: Option<u8>,
    /// A high surrogate waiting for its low one.
    high: Option<u16>,
}

impl Utf16Decoder {
    pub(crate) fn new(be: bool) -> Utf16Decoder {
        Utf16Decoder {
            be,
            odd: None,
            high: None,
        }
    }

    fn unit_of(&self, a: u8, b: u8) -> u16 {
        if self.be {
            u16::from_be_bytes([a, b])
        } else {
            u16::from_le_bytes([a, b])
        }
    }

    /// Decodes `chunk`, appending to `out`.
    pub(crate) fn decode(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let mut b = chunk;
        if let Some(x) = self.odd.take() {
            let Some((&y, rest)) = b.split_first() else {
                self.odd = Some(x);
                return;
            };
            self.unit(self.unit_of(x, y), out);
            b = rest;
        }
        out.reserve(b.len() / 2);
        // ASCII is taken 8 code units at a time: one mask tells that each is below 0x80
        // (its high byte NUL), and their low bytes are the text.
        let (mask, low) = if self.be {
            (ASCII_UNITS_BE, 1)
        } else {
            (ASCII_UNITS_LE, 0)
        };
        let whole = b.len() & !1;
        let mut i = 0;
        while i < whole {
            if self.high.is_none()
                && let Some(block) = b.get(i..i + 16)
                && let Ok(block) = <[u8; 16]>::try_from(block)
                && u128::from_le_bytes(block) & mask == 0
            {
                let mut text = [0u8; 8];
                for (k, t) in text.iter_mut().enumerate() {
                    *t = block[2 * k + low];
                }
                out.extend_from_slice(&text);
                i += 16;
                continue;
            }
            let u = self.unit_of(b[i], b[i + 1]);
            if u < 0x80 && self.high.is_none() {
                out.push(u as u8);
            } else {
                self.unit(u, out);
            }
            i += 2;
        }
        if whole < b.len() {
            self.odd = Some(b[whole]);
        }
    }

    fn unit(&mut self, u: u16, out: &mut Vec<u8>) {
        if let Some(h) = self.high.take() {
            if (0xdc00..0xe000).contains(&u) {
                let c = 0x10000 + ((u32::from(h) - 0xd800) << 10) + (u32::from(u) - 0xdc00);
                push_utf8(c, out);
                return;
            }
            push_utf8(u32::from(h), out);
        }
        if (0xd800..0xdc00).contains(&u) {
            self.high = Some(u);
        } else {
            push_utf8(u32::from(u), out);
        }
    }

    /// End of stream: a high surrogate still waiting is decoded alone; returns a last odd
    /// byte (no code unit: written back as it came).
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) -> Option<u8> {
        if let Some(h) = self.high.take() {
            push_utf8(u32::from(h), out);
        }
        self.odd.take()
    }
}

/// UTF-8 (WTF-8) back to UTF-16, fed in chunks. A byte that begins no sequence (a
/// redaction's end inside a character) becomes U+FFFD.
#[derive(Debug)]
pub(crate) struct Utf16Encoder {
    be: bool,
    /// The start of a sequence cut at the end of the last chunk.
    carry: Vec<u8>,
}

/// The length of the UTF-8 sequence that `lead` begins (0: none).
fn seq_len(lead: u8) -> usize {
    match lead {
        0..0x80 => 1,
        0xc0..0xe0 => 2,
        0xe0..0xf0 => 3,
        0xf0..0xf8 => 4,
        _ => 0,
    }
}

impl Utf16Encoder {
    pub(crate) fn new(be: bool) -> Utf16Encoder {
        Utf16Encoder {
            be,
            carry: Vec::new(),
        }
    }

    fn put(&self, u: u16, out: &mut Vec<u8>) {
        out.extend_from_slice(&if self.be {
            u.to_be_bytes()
        } else {
            u.to_le_bytes()
        });
    }

    /// Encodes `text`, appending to `out`.
    pub(crate) fn encode(&mut self, text: &[u8], out: &mut Vec<u8>) {
        let mut b = text;
        if !self.carry.is_empty() {
            let need = seq_len(self.carry[0]);
            while self.carry.len() < need && b.first().is_some_and(|&c| c & 0xc0 == 0x80) {
                self.carry.push(b[0]);
                b = &b[1..];
            }
            if self.carry.len() < need && b.is_empty() {
                return;
            }
            let c = std::mem::take(&mut self.carry);
            self.sequence(&c, out);
        }
        out.reserve(b.len() * 2);
        let off = usize::from(self.be);
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c < 0x80 {
                // A run of ASCII: each byte and a NUL.
                let run = b[i..]
                    .iter()
                    .position(|&x| x >= 0x80)
                    .unwrap_or(b.len() - i);
                let at = out.len();
                out.resize(at + 2 * run, 0);
                for (d, &x) in out[at..].chunks_exact_mut(2).zip(&b[i..i + run]) {
                    d[off] = x;
                }
                i += run;
                continue;
            }
            let n = seq_len(c);
            let end = (i + n).min(b.len());
            let whole = n > 0 && b[i + 1..end].iter().all(|&x| x & 0xc0 == 0x80);
            if whole && i + n > b.len() {
                self.carry = b[i..].to_vec();
                return;
            }
            if whole {
                self.sequence(&b[i..end], out);
                i = end;
            } else {
                self.put(0xfffd, out);
                i += 1;
            }
        }
    }

    /// One sequence, whole (its length is its lead's) or cut short (U+FFFD for each byte).
    fn sequence(&self, s: &[u8], out: &mut Vec<u8>) {
        if s.is_empty() || s.len() != seq_len(s[0]) {
            for _ in s {
                self.put(0xfffd, out);
            }
            return;
        }
        let mut c = u32::from(s[0]) & (0x7f >> s.len());
        for &x in &s[1..] {
            c = (c << 6) | u32::from(x & 0x3f);
        }
        match c {
            0..0x10000 => self.put(c as u16, out),
            0x10000..0x110000 => {
                let c = c - 0x10000;
                self.put(0xd800 | (c >> 10) as u16, out);
                self.put(0xdc00 | (c & 0x3ff) as u16, out);
            }
            _ => self.put(0xfffd, out),
        }
    }

    /// End of stream: a sequence left cut short.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        let c = std::mem::take(&mut self.carry);
        if !c.is_empty() {
            self.sequence(&c, out);
        }
    }
}

/// A redaction of raw bytes: `[start, end)` and the rule.
pub(crate) type RawSpan = (usize, usize, &'static str);

/// The findings in the string sequences' payloads of `raw` (offsets in `raw`, whose first
/// byte is the stream's `base`) that end before `cut`, dropping their ranges from `strings`.
pub(crate) fn payload_findings(
    raw: &[u8],
    base: usize,
    cut: usize,
    strings: &mut VecDeque<(usize, usize)>,
    keep: impl Fn(&super::Finding, &[u8]) -> bool,
) -> Vec<RawSpan> {
    let mut v = Vec::new();
    while let Some(&(s, e)) = strings.front() {
        if e > base + cut {
            break;
        }
        strings.pop_front();
        let (s, e) = (s - base, e - base);
        let p = &raw[s..e];
        for f in scanner().scan(p, TextKind::Stream, false) {
            if keep(&f, p) {
                v.push((s + f.start, s + f.end, f.rule));
            }
        }
    }
    v
}

/// Writes `raw[..cut]` with `spans` (sorted by start) replaced by their markers; a span
/// inside one written before (a payload's finding inside a redacted value) is dropped.
/// Returns the rules written, in order.
pub(crate) fn write_redacted(
    raw: &[u8],
    cut: usize,
    spans: &[RawSpan],
    out: &mut Vec<u8>,
) -> Vec<&'static str> {
    let mut rules = Vec::new();
    let mut pos = 0;
    for &(s, e, rule) in spans {
        if s < pos || s >= cut {
            continue;
        }
        out.extend_from_slice(&raw[pos..s]);
        if e - s >= 3 && raw[s + 1] == 0 && raw[e - 2] == 0 {
            // UTF-16 text (a NUL after each byte of the value): the marker is written so,
            // keeping the code units around it aligned.
            let marker = format!("[REDACTED:{rule}]");
            for (i, &c) in marker.as_bytes().iter().enumerate() {
                if i > 0 {
                    out.push(0);
                }
                out.push(c);
            }
        } else {
            out.extend_from_slice(b"[REDACTED:");
            out.extend_from_slice(rule.as_bytes());
            out.push(b']');
        }
        rules.push(rule);
        pos = e;
    }
    if pos < cut {
        out.extend_from_slice(&raw[pos..cut]);
    }
    rules
}

/// The normalised text of a whole byte string (escape sequences removed, UTF-16 not
/// decoded) and its map.
pub(crate) fn strip_escapes(raw: &[u8]) -> (Vec<u8>, Escapes) {
    let mut e = Escapes::default();
    let mut norm = Vec::with_capacity(raw.len());
    e.push(raw, &mut norm, true);
    (norm, e)
}

/// `raw` (escape sequences in it, not UTF-16) with every finding of a scan of its whole
/// normalised text, and of each string payload, replaced by its marker.
fn redact_bytes_whole(raw: &[u8]) -> Vec<u8> {
    let (norm, mut esc) = strip_escapes(raw);
    let mut spans: Vec<RawSpan> = scanner()
        .scan(&norm, TextKind::Stream, false)
        .into_iter()
        .map(|f| (esc.raw_of(f.start), esc.raw_of(f.end - 1) + 1, f.rule))
        .collect();
    let mut strings = std::mem::take(&mut esc.strings);
    spans.extend(payload_findings(raw, 0, raw.len(), &mut strings, |_, _| {
        true
    }));
    spans.sort_by_key(|s| s.0);
    let mut out = Vec::with_capacity(raw.len());
    write_redacted(raw, raw.len(), &spans, &mut out);
    out
}

/// What the streaming redactor makes of a whole input, computed from the whole (the
/// reference the streamed output is compared with): escape sequences and UTF-16's NULs removed (UTF-16
/// read as its bytes without the NULs), scanned whole, redacted in the original bytes.
pub(crate) fn redact_whole(input: &[u8]) -> Vec<u8> {
    redact_bytes_whole(input)
}

/// A file's text as the scanner should read it: UTF-16 (with a BOM, or NUL-interleaved
/// ASCII) decoded to UTF-8; `None` if it is not UTF-16.
pub fn decode_utf16(data: &[u8]) -> Option<Vec<u8>> {
    let Some(Encoding::Utf16 { be, bom }) = detect(data, true) else {
        return None;
    };
    let body = if bom { &data[2..] } else { data };
    let mut text = Vec::with_capacity(body.len());
    let mut dec = Utf16Decoder::new(be);
    dec.decode(body, &mut text);
    let _ = dec.finish(&mut text);
    Some(text)
}

/// `text` (UTF-8, from [`decode_utf16`] of `original`, redacted) encoded back as
/// `original` was (its byte order, its BOM); `text` itself if `original` is not UTF-16.
pub fn encode_like(original: &[u8], text: &[u8]) -> Vec<u8> {
    let Some(Encoding::Utf16 { be, bom }) = detect(original, true) else {
        return text.to_vec();
    };
    let mut out = Vec::with_capacity(text.len() * 2 + 2);
    if bom {
        out.extend_from_slice(&original[..2]);
    }
    let mut enc = Utf16Encoder::new(be);
    enc.encode(text, &mut out);
    enc.finish(&mut out);
    if original.len() % 2 == 1 {
        out.extend_from_slice(&original[original.len() - 1..]);
    }
    out
}

#[cfg(test)]
#[path = "normalise_tests.rs"]
mod tests;
