//! Structure-aware pairing: values whose name is elsewhere than right before them. Over
//! 1,000 lines: one reader per shape (siblings, tables, dumps, redis, next lines) sharing
//! the line walk and `judge`; the lexer is `pairs_lex.rs`.
//!
//! The keyword rule reads `name = value` (and the context tokenizer `"name": "value"`,
//! `<add key= value=>`). Tools print names and values apart as well, and this module reads
//! those shapes, starting from the lines where a secret's name is (the keyword rule's
//! windows, and those of the rules whose keyword is an authentication header's name):
//!
//! - name/value siblings in JSON and YAML, block or flow, in any order on one line, and
//!   across lines name first or value first: Kubernetes and ECS `env` (`- name: DB_PASSWORD`
//!   / `value: ...`), `Name`/`Value`, `key`/`value`, `Key`/`Value` (tags),
//!   `ParameterKey`/`ParameterValue`, `aws ssm get-parameter` (a `Name` that is a path ending
//!   in a secret's name), HAR headers (`{"name": "Authorization", "value": "Bearer ..."}`: the
//!   credential after the scheme) and HAR `cookies` arrays (every cookie's value); a sibling
//!   `"sensitive": true` (`terraform output -json`), `"Type": "SecureString"` (SSM) or
//!   `"masked": true` (GitLab variables) says the same as a secret's name;
//! - the `value` child of an object whose key names a secret (`terraform output -json`:
//!   `"db_password": {"sensitive": true, "type": "string", "value": ...}`);
//! - a YAML value on the next line (`password:` then an indented scalar), the lines of a
//!   block scalar under a secret's name (`password: |`, `>-`), INI continuation lines
//!   (`password =` then indented values), a name alone on a line then its value alone on
//!   the next (`redis-cli CONFIG GET` piped);
//! - tables: a header naming a secret column, then its cells (markdown, mysql, psql), and
//!   vault's `Key`/`Value` tables (`password    s3cr...`);
//! - PHP's `print_r` (`[password] => ...`) and `var_dump` (`["password"]=>` then
//!   `string(N) "..."`), redis-cli's `CONFIG GET` replies (`1) "requirepass"` / `2) "..."`).
//!
//! A paired value passes the keyword rule's checks (`scan::accept`: placeholders, references,
//! `looks_random` for unquoted values, demo words, UUIDs...). Entropy decides where the
//! context says only a little: a name that names a secret only by `token` asks, as the
//! keyword rule does, a long random value (16 bytes, entropy 3.5), and not a digest (hex of
//! a hash's length, `sha256:...`, an `sha512-` integrity string: build logs print those
//! under such names).
//!
//! Over 1,000 lines: one reader per shape, each a few dozen lines, over the state they share
//! (the reach each decision keeps to, the vault rows' memo, the hold a stream waits on);
//! split, each part would need that state and the name tests. The line lexer is in
//! `pairs_lex.rs`, the tests in `pairs_tests.rs`.
//!
//! Streaming: the text that decides a value lies within [`REACH`] bytes before the value's
//! start and on the value's own line (at most [`LINE_CAP`] bytes from that line's start),
//! and never after the value's line but for a value written before its name (the name at
//! most [`REACH`] bytes after it): at a pause, such a value's line is held back
//! (`Trace::hold`) while its object is open, so it is emitted only once decided. The
//! redactor keeps at least [`MAX_WINDOW`] bytes of left context before anything it has not
//! emitted, and holds back [`super::scan::MAX_EXTENT`] bytes (more than the reach and a
//! line's cap) when it cuts between lines, so a stream finds a pair exactly as the whole
//! text does. Beyond the reach (a table more than 3 KiB after its
//! header, a sibling more than 3 KiB after its name) nothing is paired.

use super::TextKind;
use super::context::Trace;
use super::entropy;
use super::precision;
use super::rules::RULES;
use super::scan::{self, Finding, MAX_TOKEN, MAX_WINDOW};
use lex::{Member, Object, Tok, Val, key_text, lex, parse};

/// How far before a value's start the text that pairs it may begin (its name's line, a
/// table's header): what the redactor always keeps as left context.
pub(super) const REACH: usize = MAX_WINDOW;

/// The longest line read (a longer one is read to this length); within the bytes the
/// redactor holds back after a value it has not emitted.
pub(super) const LINE_CAP: usize = 8 * 1024;

// What a value's decision reads after it (its line; for a value before its name, the name's
// line within the reach) must be in the tail the redactor holds back.
const _: () = assert!(REACH + LINE_CAP <= super::scan::MAX_EXTENT);

/// Keys that hold a variable's name in a name/value object.
const NAME_KEYS: &[&[u8]] = &[
    b"name",
    b"Name",
    b"NAME",
    b"key",
    b"Key",
    b"KEY",
    b"ParameterName",
    b"ParameterKey",
    b"OptionName",
];

/// Keys that hold its value.
const VALUE_KEYS: &[&[u8]] = &[b"value", b"Value", b"VALUE", b"ParameterValue"];

/// Sibling members that say the value is secret whatever its name.
const MARKERS: &[(&[u8], &[u8])] = &[
    (b"sensitive", b"true"),
    (b"Type", b"SecureString"),
    (b"type", b"SecureString"),
    (b"masked", b"true"),
];

/// Names of a secret that the keyword rule's names do not hold: authentication headers
/// (HAR), redis' password settings.
const OTHER_NAMES: &[&[u8]] = &[
    b"authorization",
    b"proxy-authorization",
    b"cookie",
    b"set-cookie",
    b"x-api-key",
    b"x-auth-token",
    b"requirepass",
    b"masterauth",
];

/// Keywords of other rules whose windows are lines worth reading here (the names above).
const TRIGGER_KEYWORDS: &[&str] = &["authorization", "cookie", "requirepass", "masterauth"];

/// Whether rule `ri`'s windows are read here: the keyword rule's, and those of rules whose
/// keywords are names of [`OTHER_NAMES`].
pub(super) fn is_trigger(ri: usize) -> bool {
    static T: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        RULES
            .iter()
            .map(|r| {
                r.generic
                    || r.keywords
                        .iter()
                        .any(|k| TRIGGER_KEYWORDS.iter().any(|t| k.eq_ignore_ascii_case(t)))
            })
            .collect()
    })
    .get(ri)
    .copied()
    .unwrap_or(false)
}

/// How strongly a name says its value is a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Strength {
    /// Only by `token` (`NEXT_PAGE_TOKEN`): the value must be long and random.
    Token,
    /// `password`, `api_key`, a header carrying credentials, a `sensitive` marker.
    Strong,
}

/// Whether `name` names a secret, and how strongly.
fn strength(name: &[u8]) -> Option<Strength> {
    let name = name.trim_ascii();
    if OTHER_NAMES.iter().any(|n| name.eq_ignore_ascii_case(n)) {
        return Some(Strength::Strong);
    }
    if !scan::names_a_secret(name) {
        return None;
    }
    Some(if scan::names_strongly(name) {
        Strength::Strong
    } else {
        Strength::Token
    })
}

/// A key naming an object that refers to a secret or describes it (`secretKeyRef`,
/// `secretName`, `secret_id`), not one holding it: its `value` child is no secret's value.
fn refers(key: &[u8]) -> bool {
    let lower = key.to_ascii_lowercase();
    const ENDINGS: &[&[u8]] = &[
        b"ref",
        b"name",
        b"names",
        b"id",
        b"ids",
        b"type",
        b"selector",
    ];
    ENDINGS
        .iter()
        .any(|e| lower.ends_with(e) && lower.len() > e.len() + 2)
}

/// A digest as build tools print it: hex of a hash's length (MD5 to SHA-512), bare or after
/// `sha256:`, `sha1-` and the like, or an `sha512-` integrity string. A value named only by
/// `token` (`TOKEN_CACHE_DIGEST`) that is one stays readable: the entropy that says a
/// secret elsewhere is a hash's here.
fn is_digest(v: &[u8]) -> bool {
    let lower = v.to_ascii_lowercase();
    let body = [
        "sha512-", "sha384-", "sha256-", "sha256:", "sha512:", "sha1:", "sha1-", "md5:",
    ]
    .iter()
    .find_map(|p| lower.strip_prefix(p.as_bytes()));
    if let Some(b) = body
        && lower.starts_with(b"sha5")
        && lower[6] == b'-'
    {
        return b.len() >= 80;
    }
    let body = body.unwrap_or(&lower);
    [32, 40, 56, 64, 96, 128].contains(&body.len()) && body.iter().all(u8::is_ascii_hexdigit)
}

/// A HAR entry's `cookies` array (and YAML's).
fn is_cookies(key: &[u8]) -> bool {
    key.eq_ignore_ascii_case(b"cookies")
}

/// An authentication header's name: its value's scheme word (`Bearer`) stays readable.
fn is_auth_header(name: &[u8]) -> bool {
    let name = name.trim_ascii();
    name.eq_ignore_ascii_case(b"authorization") || name.eq_ignore_ascii_case(b"proxy-authorization")
}

/// Finds the paired values in `text` from the lines of `windows` (see [`is_trigger`]); adds
/// them to `out` as the keyword rule's findings. `trace.hold` gets a `var_dump` string still
/// open at the text's end.
pub(super) fn scan(
    text: &[u8],
    kind: TextKind,
    windows: &mut [(usize, usize)],
    trace: &mut Trace,
    out: &mut Vec<(usize, Finding)>,
) {
    if !matches!(kind, TextKind::Stream | TextKind::Config) {
        return;
    }
    if let Some(h) = hold_open_values(text) {
        trace.hold = Some(trace.hold.map_or(h, |t| t.min(h)));
    }
    if windows.is_empty() {
        return;
    }
    let Some(gi) = RULES.iter().position(|r| r.generic) else {
        return;
    };
    windows.sort_unstable();
    let mut p = Pairs {
        text,
        kind,
        gi,
        out,
        hold: None,
        vault: None,
    };
    let mut next = 0;
    for &(ws, we) in windows.iter() {
        let from = ws.max(next);
        if from >= text.len() {
            break;
        }
        let Some(mut ls) = line_start(text, from) else {
            continue;
        };
        if ls < next {
            ls = next;
        }
        while ls <= we && ls < text.len() {
            let le = line_end(text, ls);
            p.line(ls, le);
            // A line cut at the cap: the next one starts after its newline.
            ls = if le < text.len() && text[le] != b'\n' {
                memchr::memchr(b'\n', &text[le..]).map_or(text.len(), |i| le + i + 1)
            } else {
                le + 1
            };
        }
        next = ls;
    }
    if let Some(h) = p.hold {
        trace.hold = Some(trace.hold.map_or(h, |t| t.min(h)));
    }
}

/// Where a `value` member is, near the text's end, whose object is still open (a name
/// written after it may yet come and make it a secret, see [`Pairs::value_first`]): the
/// redactor holds its line back until the object closes, the reach passes, or the stream
/// ends. Only a member inside a structure (a sequence entry, or indented) is held: a log
/// line `value: 42` at a line's start is not. Reads the last [`REACH`] bytes (and the line
/// they begin in), once per scan.
fn hold_open_values(text: &[u8]) -> Option<usize> {
    let len = text.len();
    let lo = len.saturating_sub(REACH);
    memchr::memmem::find(&text[lo..], b"alue")?;
    let mut ls = line_start(text, lo).unwrap_or(lo);
    // The open candidate so far: its line start and its key's column.
    let mut open: Option<(usize, usize)> = None;
    while ls < len {
        let le = line_end(text, ls);
        let line = &text[ls..le];
        if let Some(c) = indent(line) {
            let mut k = c;
            let entry = line[c..].starts_with(b"- ");
            if entry {
                k += 2;
                while k < line.len() && line[k] == b' ' {
                    k += 1;
                }
            }
            // The candidate's object ends here (a line less indented, a new entry, a
            // bracket, a line at its column that is no member), or its name comes (decided):
            // judged on whole lines only (the last one may go on).
            let whole = le < len && text[le] == b'\n';
            if let Some((_, kc)) = open.filter(|_| whole) {
                let body = &line[c..];
                let closes = c < kc
                    || (c == kc && (entry || body.starts_with(b"}") || body.starts_with(b"]")))
                    || (k == kc
                        && member_key(text, ls + k, le).is_none_or(|(key, _)| {
                            let key = key_text(text, key);
                            NAME_KEYS.contains(&key) || VALUE_KEYS.contains(&key)
                        }));
                if closes {
                    open = None;
                }
            }
            if open.is_none()
                && let Some((key, val)) = member_key(text, ls + k, le)
                && VALUE_KEYS.contains(&key_text(text, key))
                && let Val::Scalar(s, _, _) = val
                && s + REACH >= len
                && (entry || k > 0)
            {
                open = Some((ls, k));
            }
        }
        if le >= len || text[le] != b'\n' {
            break;
        }
        ls = le + 1;
    }
    open.map(|(ls, _)| ls)
}

/// The first member of the line read from `p` (to `le`): its key and value.
fn member_key(text: &[u8], p: usize, le: usize) -> Option<((usize, usize), Val)> {
    let toks = lex(text, p, le);
    let objects = parse(text, &toks, le);
    let m = objects.first()?.members.first()?;
    Some((m.key, m.val))
}

/// The start of the line holding `p`, looked for at most [`REACH`] bytes back; `None` when
/// it is further (a pair read from there could not be decided alike by a stream).
fn line_start(text: &[u8], p: usize) -> Option<usize> {
    let lo = p.saturating_sub(REACH);
    match memchr::memrchr(b'\n', &text[lo..p]) {
        Some(i) => Some(lo + i + 1),
        None => (lo == 0).then_some(0),
    }
}

/// The end of the line starting at `ls` (its `\n`, or the text's end), at most
/// [`LINE_CAP`] bytes on.
fn line_end(text: &[u8], ls: usize) -> usize {
    let hi = (ls + LINE_CAP).min(text.len());
    memchr::memchr(b'\n', &text[ls..hi]).map_or(hi, |i| ls + i)
}

/// The column of a line's first byte that is not a space or tab, or `None` for a blank line.
fn indent(line: &[u8]) -> Option<usize> {
    line.iter()
        .position(|&b| b != b' ' && b != b'\t')
        .filter(|&i| line[i] != b'\r')
}

/// The scanner of one text.
struct Pairs<'a, 'o> {
    text: &'a [u8],
    kind: TextKind,
    gi: usize,
    out: &'o mut Vec<(usize, Finding)>,
    hold: Option<usize>,
    /// The last vault row whose header was looked for, and the header found.
    vault: Option<(usize, Option<usize>)>,
}

impl<'a> Pairs<'a, '_> {
    /// Reads the line `ls..le` for every shape it may start or end.
    fn line(&mut self, ls: usize, le: usize) {
        let text = self.text;
        let line = &text[ls..le];
        let Some(col) = indent(line) else { return };
        let body = line[col..].trim_ascii_end();
        if body.starts_with(b"[") {
            self.php(ls, le, col);
        }
        if body.first().is_some_and(u8::is_ascii_digit) {
            self.redis(ls, le, col);
        }
        if memchr::memchr(b'|', body).is_some() {
            self.table(ls, le);
        }
        self.vault_row(ls, le, col);
        self.bare_name(ls, le, col);
        self.members(ls, le, col);
    }

    /// A line that is only a setting's name (`requirepass`, `db_password`), then a line that
    /// is only a value: `redis-cli CONFIG GET` piped (names and values on lines of their
    /// own). Names of one word are not taken (`Password` alone on a line is a prompt).
    fn bare_name(&mut self, ls: usize, le: usize, col: usize) {
        let text = self.text;
        let name = text[ls + col..le].trim_ascii_end();
        let other = OTHER_NAMES.iter().any(|n| name.eq_ignore_ascii_case(n));
        if name.is_empty()
            || !name
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            || !(other || name.contains(&b'_'))
        {
            return;
        }
        let Some(st) = strength(name) else { return };
        let p = le + 1;
        if p >= text.len() {
            return;
        }
        let e = line_end(text, p);
        let v = &text[p..e];
        let v = v.trim_ascii_end();
        if v.is_empty() || v[0].is_ascii_whitespace() || v.iter().any(u8::is_ascii_whitespace) {
            return;
        }
        self.judge(ls, st, (p, p + v.len()), true);
    }

    /// Judges the value `s..e`, named with `strength` by text beginning at `origin`, and
    /// records it. `unquoted`: its extent is not told by quotes or a table's bars.
    fn judge(&mut self, origin: usize, strength: Strength, (s, e): (usize, usize), unquoted: bool) {
        let text = self.text;
        if s < origin || s - origin > REACH || e <= s || e - s > MAX_TOKEN {
            return;
        }
        let v = &text[s..e];
        if !(4..=MAX_TOKEN).contains(&v.len()) || v.contains(&b'\n') {
            return;
        }
        let rule = &RULES[self.gi];
        if !scan::accept(rule, text, (s, s, e), v, self.kind, unquoted) {
            return;
        }
        if strength == Strength::Token
            && (v.len() < 16
                || entropy::shannon(v) < 3.5
                || precision::is_wordy(v)
                || scan::is_letter_run(v)
                || is_digest(v))
        {
            return;
        }
        // A value that runs on past the line's cap (a line of more than LINE_CAP bytes: a
        // 10 KiB value) is judged on what the cap holds and redacted over the rest of its
        // token, as a keyword value past its bound is: never shown whole or half.
        let e = if e < text.len()
            && scan::is_rest_byte(text[e])
            && memchr::memrchr(b'\n', &text[e.saturating_sub(LINE_CAP)..e]).is_none()
            && e >= LINE_CAP
        {
            scan::rest_end(text, e)
        } else {
            e
        };
        self.out.push((
            self.gi,
            Finding {
                rule: rule.id,
                start: s,
                end: e,
                specific: true,
            },
        ));
    }

    /// Judges a scalar member value named by `name_text` (a header's credential after its
    /// scheme word).
    fn judge_named(
        &mut self,
        origin: usize,
        name: &[u8],
        strength: Strength,
        v: (usize, usize, bool),
    ) {
        let (mut s, e, quoted) = v;
        if is_auth_header(name) {
            let val = &self.text[s..e];
            if let Some(sp) = memchr::memchr(b' ', val)
                && (1..=20).contains(&sp)
                && val[..sp].iter().all(u8::is_ascii_alphabetic)
            {
                s += sp + 1;
                while s < e && self.text[s] == b' ' {
                    s += 1;
                }
            }
        }
        self.judge(origin, strength, (s, e), !quoted);
    }

    // ---- JSON and YAML members ----

    /// The members of the line `ls..le` (indented `col`): pairs on the line, and the
    /// searches below it that its last member opens.
    fn members(&mut self, ls: usize, le: usize, col: usize) {
        let text = self.text;
        let mut start = ls + col;
        // A YAML sequence entry: `- name: X`.
        while text[start..le].starts_with(b"- ") {
            start += 2;
            while start < le && text[start] == b' ' {
                start += 1;
            }
        }
        let key_col = start - ls;
        let toks = lex(text, start, le);
        if !toks.contains(&Tok::Colon) {
            return;
        }
        let objects = parse(text, &toks, le);
        // A line cut at its cap: the object open at the cut is read as far as it goes.
        let capped = le < text.len() && !matches!(text[le], b'\n' | b'\r');
        for (i, o) in objects.iter().enumerate() {
            if i == 0 || o.closed || (capped && i + 1 == objects.len()) {
                self.pair_object(ls, o);
            }
        }
        // The line's top level: a name or a marker whose value is below, a key naming a
        // secret whose value (an object, a scalar, a block) is below.
        let Some(top) = objects.first() else { return };
        if top.members.is_empty() {
            return;
        }
        let first = top.members[0].key.0;
        if first != start && !(first == start + 1 && matches!(text[start], b'"' | b'\'')) {
            return;
        }
        let (names, marked, valued) = roles(text, top);
        let Some(&last) = top.members.last() else {
            return;
        };
        if valued.is_none() && (names.is_some() || marked) {
            let st = if marked {
                Some(Strength::Strong)
            } else {
                names
            };
            self.siblings(ls, le, key_col, st);
        }
        if valued.is_none() && names.is_some() {
            self.value_first(ls, le, key_col, names.unwrap_or(Strength::Token));
        }
        if top.members.len() == 1 && last.val == Val::Other && is_cookies(key_text(text, last.key))
        {
            self.cookie_values(ls, le, key_col);
        }
        if top.members.len() == 1 {
            let key = key_text(text, last.key);
            if let Some(st) = strength(key).filter(|_| !refers(key)) {
                match last.val {
                    Val::Object(k) if !objects[k].closed => self.children(ls, le, key_col, st),
                    Val::Empty => {
                        self.children(ls, le, key_col, st);
                        self.next_scalars(ls, le, key_col, st);
                    }
                    Val::Block => self.block_lines(ls, le, key_col, st),
                    _ => {}
                }
            }
        }
    }

    /// Pairs within one object read whole on a line: a name and a value member, a marker and
    /// a value, or the value member of an object whose key names a secret.
    fn pair_object(&mut self, origin: usize, o: &Object) {
        let text = self.text;
        let (names, marked, valued) = roles(text, o);
        let Some(Member {
            val: Val::Scalar(s, e, q),
            ..
        }) = valued
        else {
            return;
        };
        let parent = o
            .parent
            .map(|p| key_text(text, p))
            .filter(|k| !refers(k))
            .and_then(strength);
        let name_member = o
            .members
            .iter()
            .find(|m| NAME_KEYS.contains(&key_text(text, m.key)));
        let name_text: &[u8] = match name_member.map(|m| m.val) {
            Some(Val::Scalar(a, b, _)) => &text[a..b],
            _ => b"",
        };
        let st = [names, parent, marked.then_some(Strength::Strong)]
            .into_iter()
            .flatten()
            .max();
        if let Some(st) = st {
            self.judge_named(origin, name_text, st, (s, e, q));
        }
    }

    /// Lines below a name member (at `key_col` of the line `ls..le`) holding its siblings:
    /// the first `value` member at the same column, before the object ends (a line less
    /// indented, a new sequence entry, a closing bracket) or another name comes.
    fn siblings(&mut self, ls: usize, le: usize, key_col: usize, st: Option<Strength>) {
        let text = self.text;
        let name_text = self.name_on(ls, le);
        let mut st = st;
        let mut p = le + 1;
        while p < text.len() && p <= ls + REACH {
            let e = line_end(text, p);
            let line = &text[p..e];
            let Some(c) = indent(line) else {
                p = e + 1;
                continue;
            };
            if c < key_col {
                return;
            }
            if c > key_col {
                p = e + 1;
                continue;
            }
            let body = &line[c..];
            if body.starts_with(b"- ") || body.starts_with(b"}") || body.starts_with(b"]") {
                return;
            }
            let toks = lex(text, p + c, e);
            let objects = parse(text, &toks, e);
            let Some(m) = objects.first().and_then(|o| o.members.first()).copied() else {
                return;
            };
            let key = key_text(text, m.key);
            if VALUE_KEYS.contains(&key) {
                if let (Val::Scalar(s, e2, q), Some(st)) = (m.val, st) {
                    self.judge_named(ls, &name_text, st, (s, e2, q));
                } else if let (Val::Block, Some(st)) = (m.val, st) {
                    self.block_lines(ls, e, key_col, st);
                }
                return;
            }
            if NAME_KEYS.contains(&key) {
                return;
            }
            if let Val::Scalar(s, e2, _) = m.val
                && MARKERS
                    .iter()
                    .any(|(k, v)| *k == key && text[s..e2].eq_ignore_ascii_case(v))
            {
                st = Some(Strength::Strong);
            }
            p = e + 1;
        }
    }

    /// Lines above a name member (at `key_col` of the line `ls..le`) holding its sibling
    /// `value` member written first (`- value: ...` then `  name: DB_PASSWORD`): the first
    /// member line at the same column going up, within the object (a less indented line, or
    /// the line opening the sequence entry, ends it). A stream holds such a value back until
    /// its object closes or the reach passes (see [`Pairs::hold_open_values`]).
    fn value_first(&mut self, ls: usize, le: usize, key_col: usize, st: Strength) {
        let text = self.text;
        let name_text = self.name_on(ls, le);
        let mut e = ls;
        while e > 0 {
            let lo = e - 1;
            let Some(ps) = line_start(text, lo) else {
                return;
            };
            if ps + REACH < ls {
                return;
            }
            let line = &text[ps..lo];
            let Some(c) = indent(line) else {
                e = ps;
                continue;
            };
            let mut k = c;
            let entry = line[c..].starts_with(b"- ");
            if entry {
                k += 2;
                while k < line.len() && line[k] == b' ' {
                    k += 1;
                }
            }
            if k > key_col && !entry {
                e = ps;
                continue;
            }
            if k != key_col {
                return;
            }
            let toks = lex(text, ps + k, lo);
            let objects = parse(text, &toks, lo);
            let Some(m) = objects.first().and_then(|o| o.members.first()).copied() else {
                return;
            };
            let key = key_text(text, m.key);
            if VALUE_KEYS.contains(&key) {
                if let Val::Scalar(s, e2, q) = m.val {
                    // Decided by the name below it: no further than the reach from it.
                    if ls <= s + REACH {
                        self.judge_named(ps, &name_text, st, (s, e2, q));
                    }
                }
                return;
            }
            if NAME_KEYS.contains(&key) || entry {
                return;
            }
            e = ps;
        }
    }

    /// The `value` members of the objects in a `cookies` array opening at the end of the
    /// line `ls..le` (HAR): a cookie's value is a session's credential whatever its name.
    fn cookie_values(&mut self, ls: usize, le: usize, key_col: usize) {
        let text = self.text;
        let mut p = le + 1;
        while p < text.len() && p <= ls + REACH {
            let e = line_end(text, p);
            let line = &text[p..e];
            let Some(c) = indent(line) else {
                p = e + 1;
                continue;
            };
            if c <= key_col {
                return;
            }
            let mut k = c;
            while text[p + k..e].starts_with(b"- ") {
                k += 2;
            }
            let toks = lex(text, p + k, e);
            for o in parse(text, &toks, e) {
                for m in &o.members {
                    if VALUE_KEYS.contains(&key_text(text, m.key))
                        && let Val::Scalar(s, e2, q) = m.val
                    {
                        self.judge(ls, Strength::Strong, (s, e2), !q);
                    }
                }
            }
            p = e + 1;
        }
    }

    /// The name member's value on the line `ls..le` (for a header's scheme), else empty.
    fn name_on(&self, ls: usize, le: usize) -> Vec<u8> {
        let text = self.text;
        let toks = lex(text, ls, le);
        let objects = parse(text, &toks, le);
        objects
            .first()
            .and_then(|o| {
                o.members
                    .iter()
                    .find(|m| NAME_KEYS.contains(&key_text(text, m.key)))
            })
            .and_then(|m| match m.val {
                Val::Scalar(a, b, _) => Some(text[a..b].to_vec()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The children of a key naming a secret (at `key_col` of the line `ls..le`) whose
    /// value is an object below: its `value` member (`terraform output -json`).
    fn children(&mut self, ls: usize, le: usize, key_col: usize, st: Strength) {
        let text = self.text;
        let mut child_col = None;
        let mut p = le + 1;
        while p < text.len() && p <= ls + REACH {
            let e = line_end(text, p);
            let line = &text[p..e];
            let Some(c) = indent(line) else {
                p = e + 1;
                continue;
            };
            if c <= key_col {
                return;
            }
            let cc = *child_col.get_or_insert(c);
            if c < cc {
                return;
            }
            if c == cc {
                let toks = lex(text, p + c, e);
                let objects = parse(text, &toks, e);
                let Some(m) = objects.first().and_then(|o| o.members.first()).copied() else {
                    return;
                };
                if VALUE_KEYS.contains(&key_text(text, m.key)) {
                    if let Val::Scalar(s, e2, q) = m.val {
                        self.judge(ls, st, (s, e2), !q);
                    }
                    return;
                }
            }
            p = e + 1;
        }
    }

    /// The scalar lines below `name:` or `name =` (at `key_col` of the line `ls..le`): a
    /// YAML value on the next line, or INI continuation values, each a line of one token.
    fn next_scalars(&mut self, ls: usize, le: usize, key_col: usize, st: Strength) {
        let text = self.text;
        let mut p = le + 1;
        let mut col = None;
        while p < text.len() && p <= ls + REACH {
            let e = line_end(text, p);
            let line = &text[p..e];
            let Some(c) = indent(line) else { return };
            if c <= key_col || col.is_some_and(|k| k != c) {
                return;
            }
            col = Some(c);
            let v = line[c..].trim_ascii_end();
            if v.iter().any(u8::is_ascii_whitespace)
                || v.starts_with(b"- ")
                || v.starts_with(b"#")
                || v.starts_with(b";")
                || v.ends_with(b":")
                || v.contains(&b'=')
                || memchr::memmem::find(v, b": ").is_some()
                || matches!(v.first(), Some(b'{' | b'[' | b'|' | b'>'))
            {
                return;
            }
            let s = p + c;
            let quoted = v.len() >= 2 && matches!(v[0], b'"' | b'\'') && v[v.len() - 1] == v[0];
            if quoted {
                self.judge(ls, st, (s + 1, s + v.len() - 1), false);
            } else {
                self.judge(ls, st, (s, s + v.len()), true);
            }
            p = e + 1;
        }
    }

    /// The lines of a block scalar whose header (at `key_col`) ends the line `ls..le`: each
    /// more-indented line of one token is a value (a line with spaces is text, a script).
    fn block_lines(&mut self, ls: usize, le: usize, key_col: usize, st: Strength) {
        let text = self.text;
        let mut p = le + 1;
        while p < text.len() && p <= ls + REACH {
            let e = line_end(text, p);
            let line = &text[p..e];
            let Some(c) = indent(line) else {
                p = e + 1;
                continue;
            };
            if c <= key_col {
                return;
            }
            let v = line[c..].trim_ascii_end();
            if v.iter().any(u8::is_ascii_whitespace) {
                return;
            }
            self.judge(ls, st, (p + c, p + c + v.len()), true);
            p = e + 1;
        }
    }

    // ---- PHP, redis ----

    /// `print_r`'s `[name] => value` and `var_dump`'s `["name"]=>` with `string(N) "..."` on
    /// the next line (`:protected` and `:"Class":private` after the name allowed).
    fn php(&mut self, ls: usize, le: usize, col: usize) {
        let text = self.text;
        let body = text[ls + col..le].trim_ascii_end();
        let Some(close) = memchr::memchr(b']', body) else {
            return;
        };
        let inner = &body[1..close];
        let name = inner.split(|&b| b == b':').next().unwrap_or(inner);
        let name = name.strip_prefix(b"\"").unwrap_or(name);
        let name = name.strip_suffix(b"\"").unwrap_or(name);
        let Some(st) = strength(name) else { return };
        let rest = &body[close + 1..];
        if let Some(v) = rest.strip_prefix(b" => ") {
            // print_r: the rest of the line.
            let s = ls + col + close + 1 + 4;
            let v = v.trim_ascii();
            if !v.is_empty() && !v.starts_with(b"Array") {
                self.judge(ls, st, (s, s + v.len()), true);
            }
            return;
        }
        if rest.trim_ascii() != b"=>" {
            return;
        }
        // var_dump: `string(N) "` on the next line, then N bytes and `"`.
        let p = le + 1;
        if p >= text.len() {
            return;
        }
        let e = line_end(text, p);
        let line = &text[p..e];
        let Some(c) = indent(line) else { return };
        let Some(after) = line[c..].strip_prefix(b"string(") else {
            return;
        };
        let Some(paren) = memchr::memchr(b')', after) else {
            return;
        };
        let Some(n) = std::str::from_utf8(&after[..paren])
            .ok()
            .and_then(|d| d.parse::<usize>().ok())
        else {
            return;
        };
        if !after[paren..].starts_with(b") \"") || n > MAX_TOKEN {
            return;
        }
        let s = p + c + 7 + paren + 3;
        if s + n >= text.len() {
            // Not closed yet: a stream holds the line until it is.
            self.hold = Some(self.hold.map_or(p, |h| h.min(p)));
            return;
        }
        if text[s + n] == b'"' {
            self.judge(ls, st, (s, s + n), false);
        }
    }

    /// redis-cli's `N) "name"` then `N+1) "value"` (`CONFIG GET`, `HGETALL`).
    fn redis(&mut self, ls: usize, le: usize, col: usize) {
        let text = self.text;
        let Some((n, s, e)) = numbered(text, ls + col, le) else {
            return;
        };
        let Some(st) = strength(&text[s..e]) else {
            return;
        };
        let p = le + 1;
        if p >= text.len() {
            return;
        }
        let e2 = line_end(text, p);
        let Some(c) = indent(&text[p..e2]) else {
            return;
        };
        if let Some((m, vs, ve)) = numbered(text, p + c, e2)
            && m == n + 1
        {
            self.judge(ls, st, (vs, ve), false);
        }
    }

    // ---- tables ----

    /// A table whose header (the line `ls..le`) names a secret column, then a separator
    /// line: that column's cells in the rows below (markdown, mysql, psql).
    fn table(&mut self, ls: usize, le: usize) {
        let text = self.text;
        let header = cells(text, ls, le);
        let secret = secret_columns(text, &header);
        if secret.is_empty() {
            return;
        }
        let mut p = le + 1;
        if p >= text.len() {
            return;
        }
        let e = line_end(text, p);
        if !is_rule_line(&text[p..e]) {
            return;
        }
        p = e + 1;
        while p < text.len() && p <= ls + REACH {
            let e = line_end(text, p);
            let line = &text[p..e];
            if is_rule_line(line) {
                p = e + 1;
                continue;
            }
            if memchr::memchr(b'|', line).is_none() {
                return;
            }
            let row = cells(text, p, e);
            if row.len() == header.len() {
                for &(i, st) in &secret {
                    let (s, e2) = row[i];
                    self.judge(ls, st, (s, e2), false);
                }
            }
            // A row that is itself a header (a secret column's name, a rule line below)
            // ends this table: its own rows are its own (each line is read by one header,
            // so a text of headers costs no more than one of rows).
            if !secret_columns(text, &row).is_empty() && e < text.len() {
                let ne = line_end(text, e + 1);
                if is_rule_line(&text[e + 1..ne]) {
                    return;
                }
            }
            p = e + 1;
        }
    }

    /// A row of vault's `Key`/`Value` table (`password    s3cr...`), the header and its
    /// dashes above within the reach, only rows between.
    fn vault_row(&mut self, ls: usize, le: usize, col: usize) {
        let text = self.text;
        if col != 0 {
            return;
        }
        let line = text[ls..le].trim_ascii_end();
        let Some(gap) = memchr::memmem::find(line, b"  ") else {
            return;
        };
        let key = &line[..gap];
        if key.iter().any(u8::is_ascii_whitespace) {
            return;
        }
        let Some(st) = strength(key) else { return };
        let Some(vs) = line[gap..]
            .iter()
            .position(|&b| b != b' ')
            .map(|i| ls + gap + i)
        else {
            return;
        };
        let header = self.vault_header(ls);
        self.vault = Some((ls, header));
        if let Some(hs) = header
            && hs + REACH >= vs
        {
            self.judge(hs, st, (vs, ls + line.len()), true);
        }
    }

    /// The start of the `Key  Value` line over `---  -----` above the row at `ls`, with only
    /// rows between, read back at most [`REACH`] bytes; a row read before (the last) is not
    /// read again: its answer is this one's (so a text of rows is read once).
    fn vault_header(&self, ls: usize) -> Option<usize> {
        let text = self.text;
        let mut e = ls;
        while e > 0 {
            let lo = e - 1;
            let ps = line_start(text, lo)?;
            if let Some((row, header)) = self.vault
                && row == ps
            {
                return header;
            }
            if ps + REACH < ls {
                return None;
            }
            let prev = text[ps..lo].trim_ascii_end();
            if is_vault_dashes(prev) {
                let hs = ps.checked_sub(1).and_then(|h| line_start(text, h))?;
                let head: Vec<&[u8]> = text[hs..ps - 1]
                    .split(u8::is_ascii_whitespace)
                    .filter(|w| !w.is_empty())
                    .collect();
                return (head == [&b"Key"[..], b"Value"]).then_some(hs);
            }
            // A row: a key at the line's start, spaces, a value (or none).
            if prev.is_empty() || prev[0].is_ascii_whitespace() {
                return None;
            }
            e = ps;
        }
        None
    }
}

/// `---  -----`: vault's rule under `Key  Value`.
fn is_vault_dashes(l: &[u8]) -> bool {
    if !l.starts_with(b"---") {
        return false;
    }
    let words: Vec<&[u8]> = l
        .split(u8::is_ascii_whitespace)
        .filter(|w| !w.is_empty())
        .collect();
    words.len() == 2
        && words
            .iter()
            .all(|w| w.len() >= 3 && w.iter().all(|&b| b == b'-'))
}

/// The cells of a table's header that name a secret, with how strongly.
fn secret_columns(text: &[u8], header: &[(usize, usize)]) -> Vec<(usize, Strength)> {
    header
        .iter()
        .enumerate()
        .filter_map(|(i, &(s, e))| {
            let c = &text[s..e];
            // A column's name: words of a name's bytes (not code: `let x = f()?;`).
            let name_like = c
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b"_-. ".contains(&b));
            (!c.is_empty() && c.len() <= 40 && name_like)
                .then(|| strength(c))
                .flatten()
                .map(|st| (i, st))
        })
        .collect()
}

/// A table's rule line: only `-`, `+`, `|`, `:`, `=` and spaces, with `---` in it.
fn is_rule_line(l: &[u8]) -> bool {
    let l = l.trim_ascii();
    !l.is_empty()
        && memchr::memmem::find(l, b"---").is_some()
        && l.iter().all(|b| b"-+|:= \t".contains(b))
}

/// The cells of a table line split at `|` (a leading and a trailing bar make no cell),
/// trimmed.
fn cells(text: &[u8], ls: usize, le: usize) -> Vec<(usize, usize)> {
    let line = &text[ls..le];
    let l = line.trim_ascii_end();
    let mut out = Vec::new();
    let mut s = 0;
    for i in memchr::memchr_iter(b'|', l).chain(std::iter::once(l.len())) {
        out.push((s, i));
        s = i + 1;
    }
    // A leading bar (markdown, mysql) and a trailing one.
    if out
        .first()
        .is_some_and(|&(a, b)| line[a..b].trim_ascii().is_empty())
        && out.len() > 1
    {
        out.remove(0);
    }
    if l.ends_with(b"|") {
        out.pop();
    }
    out.into_iter()
        .map(|(a, b)| {
            let c = &line[a..b];
            let lead = c.len() - c.trim_ascii_start().len();
            let t = c.trim_ascii();
            (ls + a + lead, ls + a + lead + t.len())
        })
        .collect()
}

/// `N) "text"` at `p..le`: N, and the text's span.
fn numbered(text: &[u8], p: usize, le: usize) -> Option<(u64, usize, usize)> {
    let l = text[p..le].trim_ascii_end();
    let paren = memchr::memchr(b')', l)?;
    let n: u64 = std::str::from_utf8(&l[..paren]).ok()?.parse().ok()?;
    let rest = l[paren + 1..].strip_prefix(b" \"")?;
    let rest = rest.strip_suffix(b"\"")?;
    let s = p + paren + 3;
    Some((n, s, s + rest.len()))
}

/// The name, value and marker members of an object: (the strength of a name member that
/// names a secret, whether a marker says the value is secret, the value member).
fn roles(text: &[u8], o: &Object) -> (Option<Strength>, bool, Option<Member>) {
    let mut names = None;
    let mut marked = false;
    let mut valued = None;
    for m in &o.members {
        let key = key_text(text, m.key);
        if NAME_KEYS.contains(&key) {
            if let Val::Scalar(s, e, _) = m.val {
                names = names.max(strength(&text[s..e]));
            }
        } else if VALUE_KEYS.contains(&key) {
            valued = Some(*m);
        } else if let Val::Scalar(s, e, _) = m.val
            && MARKERS
                .iter()
                .any(|(k, v)| *k == key && text[s..e].eq_ignore_ascii_case(v))
        {
            marked = true;
        }
    }
    (names, marked, valued)
}

#[path = "pairs_lex.rs"]
mod lex;

#[cfg(test)]
#[path = "pairs_tests.rs"]
mod tests;
