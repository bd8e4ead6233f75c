//! The edit engine: exact-match replacements and line edits on a text file's bytes that keep
//! the file's character — its line endings (LF or CRLF, per file), a UTF-8 byte-order mark,
//! a final newline or its absence. Bytes outside an edit are never touched. Written by hand:
//! editors' crates operate on ropes or normalise line endings; this must be byte-exact.

use std::fmt;

/// How lines end in a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eol {
    /// `\n` only.
    Lf,
    /// `\r\n` only.
    Crlf,
    /// Both occur.
    Mixed,
    /// No line break at all.
    None,
}

impl Eol {
    /// The bytes new lines get: CRLF in CRLF files, LF otherwise.
    fn bytes(self) -> &'static str {
        if self == Eol::Crlf { "\r\n" } else { "\n" }
    }
}

/// A text file's character.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Starts with the UTF-8 byte-order mark.
    pub bom: bool,
    /// Line endings.
    pub eol: Eol,
    /// Ends with a line break (or is empty).
    pub final_newline: bool,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why an edit cannot be made. The file is never touched when one occurs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum TextError {
    /// Not UTF-8.
    #[error(
        "not UTF-8 text (invalid byte at line {line}, byte offset {offset}); gateway does not rewrite files in other encodings: convert it first, or write it whole with `fs write`"
    )]
    NotUtf8 {
        /// 1-based line.
        line: usize,
        /// Byte offset in the file.
        offset: usize,
    },
    /// Contains NUL bytes.
    #[error("binary file (NUL byte at offset {offset}); refusing to edit it as text")]
    Binary {
        /// Byte offset.
        offset: usize,
    },
    /// The new text contains a NUL byte (it would make the file binary).
    #[error("edit {edit}: the new text contains a NUL byte; write binary files whole")]
    NulInText {
        /// 1-based edit number.
        edit: usize,
    },
    /// `old` is empty.
    #[error("edit {edit}: the text to replace is empty")]
    EmptyOld {
        /// 1-based edit number.
        edit: usize,
    },
    /// `old` does not occur.
    #[error(
        "edit {edit}: the text to replace was not found (exact match, including whitespace and indentation); read the file again and copy the text exactly"
    )]
    NotFound {
        /// 1-based edit number.
        edit: usize,
    },
    /// `old` occurs more than once and `all` was not asked.
    #[error(
        "edit {edit}: the text to replace occurs {count} times (lines {}); add surrounding lines to make it unique, or replace all of them",
        lines.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(", ")
    )]
    Ambiguous {
        /// 1-based edit number.
        edit: usize,
        /// Occurrences.
        count: usize,
        /// Their 1-based lines (the first ten).
        lines: Vec<usize>,
    },
    /// A line number outside the file.
    #[error("edit {edit}: line {line} is outside the file ({lines} lines)")]
    LineOutOfRange {
        /// 1-based edit number.
        edit: usize,
        /// The line asked for.
        line: usize,
        /// Lines in the file.
        lines: usize,
    },
}

/// One edit.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Edit {
    /// Replace `old` (exactly; unique unless `all`) by `new`.
    Replace {
        /// The text to find.
        old: String,
        /// Its replacement.
        new: String,
        /// Replace every occurrence.
        #[serde(default)]
        all: bool,
    },
    /// Insert `text` as lines before line `line` (1-based; lines + 1 = at the end).
    InsertAt {
        /// Where.
        line: usize,
        /// The lines.
        text: String,
    },
    /// Append `text` as lines at the end.
    Append {
        /// The lines.
        text: String,
    },
    /// Delete lines `from..=to` (1-based).
    DeleteLines {
        /// First line.
        from: usize,
        /// Last line.
        to: usize,
    },
}

impl fmt::Display for Eol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Eol::Lf => "LF",
            Eol::Crlf => "CRLF",
            Eol::Mixed => "mixed",
            Eol::None => "none",
        })
    }
}

/// Checks that `data` is UTF-8 text (no NUL) and returns its shape.
pub fn shape(data: &[u8]) -> Result<Shape, TextError> {
    if let Some(offset) = memchr::memchr(0, data) {
        return Err(TextError::Binary { offset });
    }
    if let Err(e) = std::str::from_utf8(data) {
        let offset = e.valid_up_to();
        let line = 1 + memchr::memchr_iter(b'\n', &data[..offset]).count();
        return Err(TextError::NotUtf8 { line, offset });
    }
    let body = data.strip_prefix(BOM).unwrap_or(data);
    let lf = memchr::memchr_iter(b'\n', body).count();
    let crlf = memchr::memmem::find_iter(body, b"\r\n").count();
    let eol = match (lf, crlf) {
        (0, _) => Eol::None,
        (a, b) if a == b => Eol::Crlf,
        (_, 0) => Eol::Lf,
        _ => Eol::Mixed,
    };
    Ok(Shape {
        bom: data.starts_with(BOM),
        eol,
        final_newline: body.is_empty() || body.ends_with(b"\n"),
    })
}

/// `s` with its line breaks in the file's style (CRLF files: every `\n` becomes `\r\n`; other
/// files: `\r\n` becomes `\n`; mixed files: as given).
fn to_eol(s: &str, eol: Eol) -> String {
    match eol {
        Eol::Crlf => s.replace("\r\n", "\n").replace('\n', "\r\n"),
        Eol::Lf | Eol::None => s.replace("\r\n", "\n"),
        Eol::Mixed => s.to_string(),
    }
}

/// Byte offsets where each line starts (line 1 at index 0), and the body length.
fn line_starts(body: &[u8]) -> Vec<usize> {
    let mut v = vec![0];
    v.extend(memchr::memchr_iter(b'\n', body).map(|i| i + 1));
    if v.len() > 1 && v[v.len() - 1] == body.len() {
        v.pop();
    }
    v
}

/// Lines in a body (a final newline does not start another line; empty: 0).
fn line_count(body: &[u8]) -> usize {
    if body.is_empty() {
        0
    } else {
        line_starts(body).len()
    }
}

/// Applies `edits` in order, all or nothing; returns the new bytes.
pub fn apply(data: &[u8], edits: &[Edit]) -> Result<Vec<u8>, TextError> {
    let sh = shape(data)?;
    let start = if sh.bom { BOM.len() } else { 0 };
    let mut body: Vec<u8> = data[start..].to_vec();
    for (i, e) in edits.iter().enumerate() {
        let edit = i + 1;
        let text = match e {
            Edit::Replace { new, .. } => new.as_str(),
            Edit::InsertAt { text, .. } | Edit::Append { text } => text.as_str(),
            Edit::DeleteLines { .. } => "",
        };
        if text.contains('\0') {
            return Err(TextError::NulInText { edit });
        }
        // The shape of the body as edited so far (an edit may add the first line break).
        let eol = shape(&body).map(|s| s.eol).unwrap_or(sh.eol);
        let eol = if eol == Eol::None { sh.eol } else { eol };
        body = apply_one(&body, e, edit, eol)?;
    }
    let mut out = Vec::with_capacity(start + body.len());
    out.extend_from_slice(&data[..start]);
    out.extend_from_slice(&body);
    Ok(out)
}

#[allow(clippy::too_many_lines, reason = "one arm per edit kind")]
fn apply_one(body: &[u8], e: &Edit, edit: usize, eol: Eol) -> Result<Vec<u8>, TextError> {
    match e {
        Edit::Replace { old, new, all } => {
            if old.is_empty() {
                return Err(TextError::EmptyOld { edit });
            }
            // The text as given, and in the file's line endings.
            let mut candidates = vec![old.clone()];
            let conv = to_eol(old, if eol == Eol::Mixed { Eol::Crlf } else { eol });
            if conv != *old {
                candidates.push(conv);
            }
            for (ci, cand) in candidates.iter().enumerate() {
                let hits: Vec<usize> = non_overlapping(body, cand.as_bytes());
                if hits.is_empty() {
                    continue;
                }
                if hits.len() > 1 && !all {
                    let starts = line_starts(body);
                    let lines = hits
                        .iter()
                        .take(10)
                        .map(|&h| starts.partition_point(|&s| s <= h))
                        .collect();
                    return Err(TextError::Ambiguous {
                        edit,
                        count: hits.len(),
                        lines,
                    });
                }
                // The replacement gets the line endings of what it replaces.
                let new = if ci == 0 && eol == Eol::Mixed {
                    new.clone()
                } else if ci == 1 {
                    to_eol(new, Eol::Crlf)
                } else {
                    to_eol(new, eol)
                };
                let mut out = Vec::with_capacity(body.len() + new.len());
                let mut pos = 0;
                for h in hits {
                    out.extend_from_slice(&body[pos..h]);
                    out.extend_from_slice(new.as_bytes());
                    pos = h + cand.len();
                }
                out.extend_from_slice(&body[pos..]);
                return Ok(out);
            }
            Err(TextError::NotFound { edit })
        }
        Edit::InsertAt { line, text } => {
            let n = line_count(body);
            if *line == 0 || *line > n + 1 {
                return Err(TextError::LineOutOfRange {
                    edit,
                    line: *line,
                    lines: n,
                });
            }
            if *line == n + 1 {
                return Ok(append(body, text, eol));
            }
            let at = line_starts(body)[line - 1];
            let mut t = to_eol(text, eol);
            if !t.ends_with('\n') {
                t.push_str(eol.bytes());
            }
            let mut out = body[..at].to_vec();
            out.extend_from_slice(t.as_bytes());
            out.extend_from_slice(&body[at..]);
            Ok(out)
        }
        Edit::Append { text } => Ok(append(body, text, eol)),
        Edit::DeleteLines { from, to } => {
            let n = line_count(body);
            for l in [*from, *to] {
                if l == 0 || l > n {
                    return Err(TextError::LineOutOfRange {
                        edit,
                        line: l,
                        lines: n,
                    });
                }
            }
            if from > to {
                return Err(TextError::LineOutOfRange {
                    edit,
                    line: *from,
                    lines: n,
                });
            }
            let starts = line_starts(body);
            let a = starts[from - 1];
            let b = starts.get(*to).copied().unwrap_or(body.len());
            let mut out = body[..a].to_vec();
            out.extend_from_slice(&body[b..]);
            // The last line deleted from a file without a final newline: the new last line
            // loses its line break, so the file keeps its character.
            if *to == n && !body.ends_with(b"\n") && !out.is_empty() {
                if out.ends_with(b"\r\n") {
                    out.truncate(out.len() - 2);
                } else if out.ends_with(b"\n") {
                    out.truncate(out.len() - 1);
                }
            }
            Ok(out)
        }
    }
}

/// Appends `text` as lines: after a final newline it keeps one at the end; in a file without
/// one, the text becomes the new last line, again without one.
fn append(body: &[u8], text: &str, eol: Eol) -> Vec<u8> {
    let mut t = to_eol(text, eol);
    let mut out = body.to_vec();
    if body.is_empty() || body.ends_with(b"\n") {
        if !t.ends_with('\n') {
            t.push_str(eol.bytes());
        }
    } else {
        out.extend_from_slice(eol.bytes().as_bytes());
        while t.ends_with('\n') {
            t.pop();
            if t.ends_with('\r') {
                t.pop();
            }
        }
    }
    out.extend_from_slice(t.as_bytes());
    out
}

/// Start offsets of non-overlapping occurrences, left to right.
fn non_overlapping(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut v = Vec::new();
    let mut pos = 0;
    while let Some(i) = memchr::memmem::find(&hay[pos..], needle) {
        v.push(pos + i);
        pos += i + needle.len();
    }
    v
}

/// A unified diff of two versions (for `--dry-run`), with 3 lines of context.
pub fn unified_diff(path: &str, old: &[u8], new: &[u8]) -> String {
    let old = String::from_utf8_lossy(old);
    let new = String::from_utf8_lossy(new);
    similar::TextDiff::from_lines(old.as_ref(), new.as_ref())
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// Fuzz entry: `file 0xFF edit 0xFF edit ...`, each edit `kind payload` (replace: `old 0xFE
/// new`). Applying must not panic; a successful edit keeps the BOM, never turns a file with
/// one line-ending style into a mixed one when the inserted text has no `\r`, and (for a
/// single replacement) leaves every byte outside the replaced span as it was.
#[doc(hidden)]
pub fn fuzz_edit(data: &[u8]) {
    let mut parts = data.split(|&b| b == 0xFF);
    let file = parts.next().unwrap_or_default();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut edits = Vec::new();
    for p in parts.take(8) {
        let Some((&k, rest)) = p.split_first() else {
            continue;
        };
        let num = |b: &[u8]| b.iter().fold(0usize, |a, &x| a * 7 + usize::from(x)) % 64;
        edits.push(match k % 5 {
            0 | 1 => {
                let mut s = rest.splitn(2, |&b| b == 0xFE);
                let old = text(s.next().unwrap_or_default());
                let new = text(s.next().unwrap_or_default());
                Edit::Replace {
                    old,
                    new,
                    all: k % 5 == 1,
                }
            }
            2 => Edit::InsertAt {
                line: num(rest.get(..1).unwrap_or_default()),
                text: text(rest.get(1..).unwrap_or_default()),
            },
            3 => Edit::Append { text: text(rest) },
            _ => Edit::DeleteLines {
                from: num(rest.get(..1).unwrap_or_default()),
                to: num(rest.get(1..2).unwrap_or_default()),
            },
        });
    }
    let Ok(out) = apply(file, &edits) else {
        return;
    };
    // Properties, asserted (a failure is what the fuzzer looks for): an input the edit engine
    // accepted is text, and so is what it made of it.
    let Ok(before) = shape(file) else {
        panic!("apply succeeded on an input that is not text");
    };
    let Ok(after) = shape(&out) else {
        panic!("an edit of text with text is not text");
    };
    let inserted = |c: char| {
        edits.iter().any(|e| match e {
            Edit::Replace { old, new, .. } => new.contains(c) || old.contains(c),
            Edit::InsertAt { text, .. } | Edit::Append { text } => text.contains(c),
            Edit::DeleteLines { .. } => false,
        })
    };
    // (A U+FEFF in the text, inserted or already inside, can end up first and read as a BOM.)
    let body = file.strip_prefix(BOM).unwrap_or(file);
    if !inserted('\u{feff}') && memchr::memmem::find(body, BOM).is_none() {
        assert_eq!(before.bom, after.bom, "BOM changed");
    }
    let inserted_cr = inserted('\r');
    // A stray `\r` (not before `\n`) may meet a new line break and form a CRLF: bytes kept
    // as they were, but no longer one style.
    let stray_cr = memchr::memchr_iter(b'\r', file).any(|i| file.get(i + 1) != Some(&b'\n'));
    if matches!(before.eol, Eol::Lf | Eol::Crlf) && !inserted_cr && !stray_cr {
        assert!(
            after.eol == before.eol || after.eol == Eol::None,
            "line endings changed from {} to {}",
            before.eol,
            after.eol
        );
    }
    if let [
        Edit::Replace {
            old,
            new,
            all: false,
        },
    ] = edits.as_slice()
    {
        let cp = file.iter().zip(&out).take_while(|(a, b)| a == b).count();
        let cs = file[cp..]
            .iter()
            .rev()
            .zip(out[cp..].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        assert!(
            file.len() - cp - cs <= 2 * old.len() && out.len() - cp - cs <= 2 * new.len(),
            "bytes outside the replaced span changed"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(old: &str, new: &str) -> Edit {
        Edit::Replace {
            old: old.into(),
            new: new.into(),
            all: false,
        }
    }

    #[test]
    fn shapes() {
        let s = shape(b"\xEF\xBB\xBFa\r\nb\r\n").expect("shape");
        assert_eq!((s.bom, s.eol, s.final_newline), (true, Eol::Crlf, true));
        assert_eq!(shape(b"a\nb").expect("s").eol, Eol::Lf);
        assert!(!shape(b"a\nb").expect("s").final_newline);
        assert_eq!(shape(b"a\r\nb\n").expect("s").eol, Eol::Mixed);
        assert_eq!(shape(b"abc").expect("s").eol, Eol::None);
        assert_eq!(shape(b"a\0b"), Err(TextError::Binary { offset: 1 }));
        assert_eq!(
            shape(b"ok\nok\n\xffbad"),
            Err(TextError::NotUtf8 { line: 3, offset: 6 })
        );
    }

    #[test]
    fn crlf_and_bom_round_trip() {
        let f = b"\xEF\xBB\xBFfn a() {\r\n    1\r\n}\r\n";
        let out = apply(f, &[rep("fn a() {\n    1\n}", "fn a() {\n    2\n}")]).expect("edit");
        assert_eq!(out, b"\xEF\xBB\xBFfn a() {\r\n    2\r\n}\r\n");
        let back = apply(&out, &[rep("    2", "    1")]).expect("edit");
        assert_eq!(back, f);
    }

    #[test]
    fn unique_or_all() {
        let f = b"x = 1\ny = 1\nx = 1\n";
        let e = apply(f, &[rep("x = 1", "x = 2")]).expect_err("ambiguous");
        assert_eq!(
            e,
            TextError::Ambiguous {
                edit: 1,
                count: 2,
                lines: vec![1, 3]
            }
        );
        let out = apply(
            f,
            &[Edit::Replace {
                old: "x = 1".into(),
                new: "x = 2".into(),
                all: true,
            }],
        )
        .expect("all");
        assert_eq!(out, b"x = 2\ny = 1\nx = 2\n");
        assert_eq!(
            apply(f, &[rep("x  = 1", "")]),
            Err(TextError::NotFound { edit: 1 })
        );
        assert_eq!(
            apply(f, &[rep("", "a")]),
            Err(TextError::EmptyOld { edit: 1 })
        );
    }

    #[test]
    fn several_edits_are_all_or_nothing() {
        let f = b"a\nb\nc\n";
        let e = apply(f, &[rep("a", "A"), rep("zzz", "Z")]).expect_err("second fails");
        assert_eq!(e, TextError::NotFound { edit: 2 });
        let out = apply(f, &[rep("a", "A"), rep("A\nb", "A\nB")]).expect("both");
        assert_eq!(out, b"A\nB\nc\n");
    }

    #[test]
    fn line_edits_keep_the_final_newline_or_its_absence() {
        let f = b"one\ntwo\nthree";
        let ins = |line, text: &str| Edit::InsertAt {
            line,
            text: text.into(),
        };
        assert_eq!(
            apply(f, &[ins(1, "zero")]).expect("i"),
            b"zero\none\ntwo\nthree"
        );
        assert_eq!(
            apply(f, &[ins(4, "four")]).expect("i"),
            b"one\ntwo\nthree\nfour"
        );
        assert_eq!(apply(b"one\n", &[ins(2, "two")]).expect("i"), b"one\ntwo\n");
        assert!(matches!(
            apply(f, &[ins(5, "x")]),
            Err(TextError::LineOutOfRange {
                line: 5,
                lines: 3,
                ..
            })
        ));
        let del = |from, to| Edit::DeleteLines { from, to };
        assert_eq!(apply(f, &[del(2, 2)]).expect("d"), b"one\nthree");
        assert_eq!(apply(f, &[del(3, 3)]).expect("d"), b"one\ntwo");
        assert_eq!(apply(b"a\r\nb\r\n", &[del(1, 1)]).expect("d"), b"b\r\n");
        assert_eq!(apply(f, &[del(1, 3)]).expect("d"), b"");
        let app = |t: &str| Edit::Append { text: t.into() };
        assert_eq!(
            apply(f, &[app("four")]).expect("a"),
            b"one\ntwo\nthree\nfour"
        );
        assert_eq!(apply(b"a\r\n", &[app("b\n")]).expect("a"), b"a\r\nb\r\n");
        assert_eq!(apply(b"", &[app("x")]).expect("a"), b"x\n");
    }

    #[test]
    fn fuzz_seeds() {
        for f in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus/fs_edit"))
            .expect("corpus")
            .flatten()
        {
            let data = std::fs::read(f.path()).expect("seed");
            fuzz_edit(&data);
            for cut in 0..data.len() {
                fuzz_edit(&data[..cut]);
            }
        }
    }

    #[test]
    fn diff_is_unified() {
        let d = unified_diff("f.txt", b"a\nb\n", b"a\nc\n");
        assert!(
            d.contains("--- a/f.txt") && d.contains("-b\n") && d.contains("+c\n"),
            "{d}"
        );
    }
}
