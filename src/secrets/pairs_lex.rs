//! The line lexer of `pairs`: JSON and YAML (block and flow) members of one line, as
//! objects with their members, the key each object is the value of, and whether it closed
//! on the line.

/// A lexed token of a line: JSON and YAML (block and flow) punctuation and scalars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tok {
    Open(u8),
    Close,
    Comma,
    Colon,
    /// A quoted string's content.
    Str(usize, usize),
    /// An unquoted scalar.
    Bare(usize, usize),
}

/// A member's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Val {
    /// A scalar: (start, end, quoted).
    Scalar(usize, usize, bool),
    /// An object opened here: its index among the line's objects.
    Object(usize),
    /// An array, or something not read.
    Other,
    /// Nothing after the `:` on this line.
    Empty,
    /// A YAML block scalar's header (`|`, `>-`).
    Block,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Member {
    pub(super) key: (usize, usize),
    pub(super) val: Val,
}

/// An object read on one line: its members, the key it is the value of, whether it closed.
#[derive(Debug, Default)]
pub(super) struct Object {
    pub(super) members: Vec<Member>,
    pub(super) parent: Option<(usize, usize)>,
    pub(super) closed: bool,
}

/// A key's text without its quotes.
pub(super) fn key_text(text: &[u8], (s, e): (usize, usize)) -> &[u8] {
    &text[s..e]
}

/// Tokens of `text[a..b]`: brackets, commas, colons (a `:` before a space, the line's end, a
/// quote or bracket, or after a quoted key; an `=` between spaces or ending the line),
/// quoted strings (`"` with backslash escapes, `'` with `''`), and unquoted scalars (to
/// the next `,{}[]`, `: ` or ` #`). Stops at a string that does not close on the line.
pub(super) fn lex(text: &[u8], a: usize, b: usize) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut i = a;
    while i < b {
        let c = text[i];
        match c {
            b' ' | b'\t' | b'\r' => i += 1,
            b'{' | b'[' => {
                out.push(Tok::Open(c));
                i += 1;
            }
            b'}' | b']' => {
                out.push(Tok::Close);
                i += 1;
            }
            b',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            b':' | b'=' => {
                out.push(Tok::Colon);
                i += 1;
            }
            b'"' | b'\'' => {
                let mut j = i + 1;
                let mut closed = None;
                while j < b {
                    let d = text[j];
                    if c == b'"' && d == b'\\' {
                        j += 2;
                        continue;
                    }
                    if d == c {
                        if c == b'\'' && j + 1 < b && text[j + 1] == b'\'' {
                            j += 2;
                            continue;
                        }
                        closed = Some(j);
                        break;
                    }
                    j += 1;
                }
                let Some(j) = closed else {
                    // Open at the end of a line cut at its cap (`pairs::LINE_CAP`): the
                    // string runs on past it, a value as far as it is read.
                    if b < text.len() && !matches!(text[b], b'\n' | b'\r') && b > i + 1 {
                        out.push(Tok::Str(i + 1, b));
                    }
                    return out;
                };
                out.push(Tok::Str(i + 1, j));
                i = j + 1;
            }
            b'#' if i > a && text[i - 1] == b' ' => return out,
            _ => {
                let mut j = i;
                while j < b {
                    let d = text[j];
                    if matches!(d, b',' | b'{' | b'}' | b'[' | b']') {
                        break;
                    }
                    if d == b':' && (j + 1 == b || matches!(text[j + 1], b' ' | b'\t' | b'\r')) {
                        break;
                    }
                    if d == b'=' && j > i && text[j - 1] == b' ' {
                        break;
                    }
                    if d == b'#' && j > i && text[j - 1] == b' ' {
                        break;
                    }
                    j += 1;
                }
                let t = text[i..j].trim_ascii_end();
                out.push(Tok::Bare(i, i + t.len()));
                if j == i {
                    i += 1;
                } else {
                    i = j;
                }
            }
        }
    }
    out
}

/// The objects of one line's tokens: the line's top level first (index 0), then each `{`
/// in order. A bare scalar at the top level is the rest of the line (a YAML block value may
/// hold commas and brackets).
pub(super) fn parse(text: &[u8], toks: &[Tok], le: usize) -> Vec<Object> {
    let mut objects = vec![Object::default()];
    // Open containers: an object's index, or `None` for an array.
    let mut stack: Vec<Option<usize>> = vec![Some(0)];
    let mut key: Option<(usize, usize)> = None;
    let mut after_colon = false;
    let mut i = 0;
    while i < toks.len() {
        let cur = stack.last().copied().flatten();
        match toks[i] {
            Tok::Str(s, e) | Tok::Bare(s, e) if !after_colon => {
                if matches!(toks.get(i + 1), Some(Tok::Colon)) {
                    key = Some((s, e));
                    after_colon = true;
                    i += 2;
                    if i >= toks.len()
                        && let (Some(o), Some(k)) = (cur, key.take())
                    {
                        objects[o].members.push(Member {
                            key: k,
                            val: Val::Empty,
                        });
                    }
                    continue;
                }
            }
            Tok::Str(s, e) | Tok::Bare(s, e) => {
                after_colon = false;
                if let (Some(o), Some(k)) = (cur, key.take()) {
                    let val = match toks[i] {
                        Tok::Str(..) => Val::Scalar(s, e, true),
                        _ if stack.len() == 1 => {
                            let rest = text[s..le].trim_ascii_end();
                            let rest =
                                memchr::memmem::find(rest, b" #").map_or(rest, |c| &rest[..c]);
                            let rest = rest.trim_ascii_end();
                            if is_block_header(rest) {
                                Val::Block
                            } else {
                                Val::Scalar(s, s + rest.len(), false)
                            }
                        }
                        _ => Val::Scalar(s, e, false),
                    };
                    objects[o].members.push(Member { key: k, val });
                    if stack.len() == 1 && matches!(toks[i], Tok::Bare(..)) {
                        return objects;
                    }
                }
            }
            Tok::Open(b'{') => {
                let k = if after_colon { key.take() } else { None };
                after_colon = false;
                objects.push(Object {
                    parent: k,
                    ..Object::default()
                });
                let idx = objects.len() - 1;
                if let (Some(o), Some(k)) = (cur, k) {
                    objects[o].members.push(Member {
                        key: k,
                        val: Val::Object(idx),
                    });
                }
                stack.push(Some(idx));
            }
            Tok::Open(_) => {
                if after_colon && let (Some(o), Some(k)) = (cur, key.take()) {
                    objects[o].members.push(Member {
                        key: k,
                        val: Val::Other,
                    });
                }
                after_colon = false;
                stack.push(None);
            }
            Tok::Close => {
                after_colon = false;
                key = None;
                if stack.len() > 1
                    && let Some(Some(o)) = stack.pop()
                {
                    objects[o].closed = true;
                }
            }
            Tok::Comma | Tok::Colon => {
                after_colon = false;
                key = None;
            }
        }
        i += 1;
    }
    objects
}

/// A YAML block scalar's header: `|` or `>`, then up to two of `+`, `-`, a digit.
fn is_block_header(v: &[u8]) -> bool {
    matches!(v.first(), Some(b'|' | b'>'))
        && v.len() <= 3
        && v[1..]
            .iter()
            .all(|b| matches!(b, b'+' | b'-' | b'1'..=b'9'))
}
