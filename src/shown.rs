//! What a person is shown (issue 24): untrusted text — a request's argv, a file name, a
//! record, a rule's subject — passes through here before any human (non-`--json`) view
//! prints it. Control characters (C0, DEL, C1, so every ESC sequence), bidirectional
//! overrides and isolates, and zero-width or otherwise invisible characters are written as
//! visible escapes (`\r`, `\x1b`, `\u{202e}`), so a request cannot repaint a row, hide a
//! word or reorder what a person reads. An argv is shown as a shell-quoted list
//! ([`argv_shown`]): the word boundaries are visible and the text, pasted into bash, is
//! exactly the argv that runs. `--json` output is not rendered here (JSON escapes, exact).

use std::borrow::Cow;
use std::fmt::Write as _;

/// Would `c` be invisible, move the cursor, or change how the text around it is read?
pub fn hides(c: char) -> bool {
    c.is_control() // C0, DEL, C1 (ESC and CSI included)
        || matches!(c,
            '\u{00ad}'                  // soft hyphen
            | '\u{034f}'                // combining grapheme joiner
            | '\u{061c}'                // arabic letter mark
            | '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}' // hangul fillers
            | '\u{17b4}' | '\u{17b5}'
            | '\u{180b}'..='\u{180f}'   // mongolian selectors and vowel separator
            | '\u{200b}'..='\u{200f}'   // zero-width space/joiners, LRM, RLM
            | '\u{2028}'..='\u{202e}'   // line/paragraph separators, bidi embeddings and overrides
            | '\u{2060}'..='\u{206f}'   // word joiner, invisible operators, bidi isolates
            | '\u{fe00}'..='\u{fe0f}'   // variation selectors
            | '\u{feff}'                // zero-width no-break space (BOM)
            | '\u{fff9}'..='\u{fffb}'   // interlinear annotations
            | '\u{e0000}'..='\u{e007f}' // tags
        )
}

fn escape_into(out: &mut String, c: char, braces: bool) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x100 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if braces => {
            let _ = write!(out, "\\u{{{:04x}}}", c as u32);
        }
        c if (c as u32) <= 0xffff => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
}

fn render(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| hides(c) && !(keep_newlines && c == '\n')) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if hides(c) && !(keep_newlines && c == '\n') {
            escape_into(&mut out, c, true);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` as a person may see it on one line: every character [`hides`] reports (newlines
/// too) written as an escape (`\r`, `\x1b`, `\u{202e}`); other text unchanged.
pub fn visible(s: &str) -> Cow<'_, str> {
    render(s, false)
}

/// [`visible`] for text of several lines that gateway itself composed (a question, a
/// record pretty-printed): newlines stay, every other such character is escaped.
pub fn visible_lines(s: &str) -> Cow<'_, str> {
    render(s, true)
}

/// One argument shell-quoted: as is when it needs no quoting, in single quotes (POSIX,
/// by the `shlex` crate) when it has spaces or shell syntax, and in bash's `$'...'` with
/// escapes (`$'\r'`, `$'\x1b'`, `$'\u202e'`) when it holds a character [`hides`] reports.
pub fn arg_shown(a: &str) -> Cow<'_, str> {
    if a.chars().any(hides) {
        let mut out = String::from("$'");
        for c in a.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                c if hides(c) => escape_into(&mut out, c, false),
                c => out.push(c),
            }
        }
        out.push('\'');
        return Cow::Owned(out);
    }
    // `try_quote` fails on NUL only, which `hides` caught above.
    shlex::try_quote(a).unwrap_or(Cow::Borrowed("''"))
}

/// An OS error in words, without the C library's number: `Permission denied (os error 13)`
/// is `Permission denied (...)` saying what decides it (the policy allowed the call, the
/// file system did not), `No such file or directory (os error 2)` is `No such file or
/// directory`. What a person reads after the path it happened on.
pub fn os_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    let words = match (e.raw_os_error(), s.rfind(" (os error ")) {
        (Some(_), Some(i)) => &s[..i],
        _ => s.as_str(),
    };
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        format!(
            "{words} (the file system does not let this user in: `ls -ld` shows the owner and mode of the path and of the directories on its way)"
        )
    } else {
        words.to_string()
    }
}

/// An argv as a person sees it: a shell-quoted list (word boundaries visible) that bash
/// reads back as exactly `argv`.
pub fn argv_shown<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter()
        .map(|a| arg_shown(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_are_words_without_their_number() {
        let e = std::io::Error::from_raw_os_error(13);
        let w = os_error(&e);
        assert!(w.starts_with("Permission denied (the file system"), "{w}");
        assert!(!w.contains("os error"), "{w}");
        assert_eq!(
            os_error(&std::io::Error::from_raw_os_error(2)),
            "No such file or directory"
        );
        assert_eq!(
            os_error(&std::io::Error::other("plain words")),
            "plain words"
        );
    }

    #[test]
    fn every_hiding_character_is_escaped() {
        let s = "a\rb\x1b[2Kc\u{9b}d\x7fe\u{202e}f\u{200b}g\u{2066}h\u{feff}i\u{0}";
        let v = visible(s);
        assert_eq!(
            v,
            "a\\rb\\x1b[2Kc\\x9bd\\x7fe\\u{202e}f\\u{200b}g\\u{2066}h\\u{feff}i\\x00"
        );
        assert!(!v.chars().any(hides));
        assert_eq!(visible("plain text, é ü 中"), "plain text, é ü 中");
        assert_eq!(visible_lines("a\nb\rc"), "a\nb\\rc");
        assert_eq!(visible("a\nb"), "a\\nb");
    }

    #[test]
    fn argv_is_quoted_and_escaped() {
        let argv = [
            "sh",
            "-c",
            "rm -r keep #\r\x1b[2Kmake test",
            "it's",
            "a\\b\u{202e}",
        ];
        let s = argv_shown(&argv);
        assert_eq!(
            s,
            "sh -c $'rm -r keep #\\r\\x1b[2Kmake test' \"it's\" $'a\\\\b\\u202e'"
        );
        assert!(!s.chars().any(hides));
        assert_eq!(argv_shown(&["", "a b"]), "'' 'a b'");
    }
}
