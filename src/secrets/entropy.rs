//! High-entropy strings (detect-secrets' Base64HighEntropyString limit 4.5 and
//! HexHighEntropyString limit 3.0) and the heuristic filters shared with the keyword rule.

use super::TextKind;
use super::rules::RULES;
use super::scan::Finding;

/// Shannon entropy in bits per byte.
pub fn shannon(s: &[u8]) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in s {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}

const BASE64_LIMIT: f64 = 4.5;
const HEX_LIMIT: f64 = 3.0;
/// Shorter strings are not considered (a 20-byte string can reach 4.3 bits at most).
const MIN_LEN: usize = 20;
const MAX_LEN: usize = 1000;
/// Bytes before a value searched for the name it is assigned to.
const NAME_LOOKBACK: usize = 256;

fn is_b64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'=')
}

/// Finds high-entropy quoted strings (and, in configuration files, unquoted `NAME=value`
/// values). Each candidate must consist wholly of the base64 or hex alphabet.
pub fn scan(text: &[u8], kind: TextKind, out: &mut Vec<(usize, Finding)>) {
    let mut pos = 0;
    while let Some(i) = memchr::memchr2(b'"', b'\'', &text[pos..]) {
        let q = pos + i;
        let quote = text[q];
        let mut j = q + 1;
        while j < text.len() && j - q <= MAX_LEN + 1 && is_b64(text[j]) {
            j += 1;
        }
        if j < text.len() && text[j] == quote && j - q > MIN_LEN {
            consider(text, q + 1, j, out);
            pos = j + 1;
        } else {
            pos = j.max(q + 1);
        }
    }
    if kind == TextKind::Config {
        for (ls, le) in lines(text) {
            let line = &text[ls..le];
            let Some(eq) = line.iter().position(|&b| b == b'=' || b == b':') else {
                continue;
            };
            let name = line[..eq].trim_ascii();
            let name = name.strip_prefix(b"export ").unwrap_or(name).trim_ascii();
            if name.is_empty()
                || !name
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
            {
                continue;
            }
            let v = &line[eq + 1..];
            let lead = v.len() - v.trim_ascii_start().len();
            let value = v.trim_ascii();
            if value.len() >= MIN_LEN && value.len() <= MAX_LEN && value.iter().all(|&b| is_b64(b))
            {
                let s = ls + eq + 1 + lead;
                consider(text, s, s + value.len(), out);
            }
        }
    }
}

fn lines(text: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= text.len() {
            return None;
        }
        let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
        let r = (start, end);
        start = end + 1;
        Some(r)
    })
}

fn consider(text: &[u8], s: usize, e: usize, out: &mut Vec<(usize, Finding)>) {
    let v = &text[s..e];
    // `=` is base64's padding, only at the end: inside, the string is an assignment
    // (`-DCMAKE_INSTALL_PREFIX=/usr/local`, `rerun-if-env-changed=ZSTD_SYS_USE_PKG_CONFIG`).
    let body = v.len() - v.iter().rev().take_while(|&&b| b == b'=').count();
    if v[..body].contains(&b'=') {
        return;
    }
    let hex = v.iter().all(u8::is_ascii_hexdigit);
    let (rule, limit, prio) = if hex {
        ("high-entropy-hex", HEX_LIMIT, RULES.len() + 1)
    } else {
        ("high-entropy-base64", BASE64_LIMIT, RULES.len())
    };
    let mut h = shannon(v);
    if hex && v.iter().all(u8::is_ascii_digit) {
        // detect-secrets: numbers are less likely to be secrets.
        h -= 1.2 / (v.len() as f64).log2();
    }
    if h <= limit {
        return;
    }
    if is_sequential(v)
        || is_uuid(v)
        || has_id_like_name(text, s)
        || is_placeholder(v)
        || super::precision::entropy_value_is_not_a_secret(text, s)
    {
        return;
    }
    out.push((
        prio,
        Finding {
            rule,
            start: s,
            end: e,
            specific: false,
        },
    ));
}

/// detect-secrets' `is_sequential_string`: a run of a well-known sequence (alphabet, digits,
/// hex, base64 alphabet).
pub fn is_sequential(v: &[u8]) -> bool {
    const SEQ: &[&[u8]] = &[
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZ+/",
        b"0123456789ABCDEF0123456789ABCDEF",
        b"01234567890123456789",
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/",
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/",
    ];
    // A sample alphabet's part, any case: compared in place (no uppercased copy, no searcher
    // built per value: this runs once per candidate, and output dense with candidates is
    // the `secrets_time` fuzz target's worst case).
    if let Some(&first) = v.first()
        && SEQ.iter().any(|s| {
            memchr::memchr_iter(first.to_ascii_uppercase(), s).any(|i| {
                s.get(i..i + v.len())
                    .is_some_and(|w| w.eq_ignore_ascii_case(v))
            })
        })
    {
        return true;
    }
    // Alphabets in other orders (`./0-9A-Za-z`, `A-Za-z0-9-_`): mostly runs of consecutive
    // bytes, where a random string has one such pair in 64.
    let steps = v
        .windows(2)
        .filter(|w| w[1] == w[0].wrapping_add(1))
        .count();
    steps * 2 >= v.len()
}

/// Made of a short unit repeated: the whole value with a period of at most 32 bytes (a
/// keyword's prefix repeated, `AKIAAKIAAKIA...`), or its last two thirds with a period of at
/// most 8 (`ghp_xxxxxxxx...`, `AAAA...` after a fixed prefix): no random token is.
pub fn is_repetitive(v: &[u8]) -> bool {
    let periodic =
        |v: &[u8], max: usize| (1..=max.min(v.len() / 3)).any(|p| v[p..] == v[..v.len() - p]);
    periodic(v, 32) || periodic(&v[v.len() / 3..], 8)
}

fn is_uuid(v: &[u8]) -> bool {
    if v.len() != 36 {
        return false;
    }
    let parts: Vec<&[u8]> = v.split(|&b| b == b'-').collect();
    parts.len() == 5
        && parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts.iter().all(|p| p.iter().all(u8::is_ascii_hexdigit))
}

/// The name the value is assigned to looks like an id or a digest (`user_id`, `_id`,
/// `checksum`, `sha256`, `integrity`, `commit`, ...): such values are not secrets.
/// Only the last [`NAME_LOOKBACK`] bytes before the value are read (not back to the line's
/// start: on a line of megabytes holding many candidates that was quadratic).
fn has_id_like_name(text: &[u8], s: usize) -> bool {
    let lo = s.saturating_sub(NAME_LOOKBACK);
    let ls = memchr::memrchr(b'\n', &text[lo..s]).map_or(lo, |i| lo + i + 1);
    let before = &text[ls..s];
    // The last identifier before the value.
    let end = before
        .iter()
        .rposition(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
    let Some(end) = end else { return false };
    let start = before[..=end]
        .iter()
        .rposition(|b| !(b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-'))
        .map_or(0, |i| i + 1);
    let name = before[start..=end].to_ascii_lowercase();
    let name = name.as_slice();
    name == b"id"
        || name == b"ids"
        || name.ends_with(b"_id")
        || name.ends_with(b"_ids")
        || name.ends_with(b"-id")
        || name == b"myid"
        || name == b"userid"
        || [
            &b"checksum"[..],
            b"hash",
            b"sha1",
            b"sha256",
            b"sha512",
            b"sha",
            b"md5",
            b"digest",
            b"integrity",
            b"commit",
            b"rev",
            b"revision",
            b"etag",
            b"uuid",
            b"guid",
            b"fingerprint",
            b"signature",
            b"nonce",
        ]
        .iter()
        .any(|h| name.ends_with(h))
}

/// The body of a vendor-format match that is a placeholder: a run of 8 `x`, `X`, `0` or `*`, 12
/// letters or digits in alphabet order, `abcd1234` repeated, or `EXAMPLE` (AWS documents
/// `AKIAIOSFODNN7EXAMPLE`; vendors' docs spell their examples so).
pub fn is_placeholder_token(v: &[u8]) -> bool {
    if has_example(v) {
        return true;
    }
    // A run of 8 `x`, `X`, `0` or `*` (runs of `A` are real: Twitter bearer tokens, PEM).
    let mut run = 1;
    for w in v.windows(2) {
        run = if w[0] == w[1] && b"xX0*".contains(&w[0]) {
            run + 1
        } else {
            1
        };
        if run >= 8 {
            return true;
        }
    }
    // 12 letters or digits in order (`ABCDEFGHIJKL...`, the alphabet typed after a prefix).
    let mut asc = 1;
    for w in v.windows(2) {
        let (a, b) = (w[0].to_ascii_lowercase(), w[1].to_ascii_lowercase());
        asc = if a.is_ascii_alphanumeric() && b == a + 1 {
            asc + 1
        } else {
            1
        };
        if asc >= 12 {
            return true;
        }
    }
    let l = v.to_ascii_lowercase();
    memchr::memmem::find(&l, b"abcd1234abcd1234").is_some()
}

/// `example` in any case: a random token spells it by chance about once in 3*10^10 positions
/// (each letter one chance in 32 in base64, either case).
fn has_example(v: &[u8]) -> bool {
    v.windows(7).any(|w| w.eq_ignore_ascii_case(b"example"))
}

/// Values that stand for a secret rather than being one: variables and templates (`$X`,
/// `${X}`, `{{ x }}`, `<x>`, `%(x)s`, `#{x}`), masks (`****`, `xxxx`), empty-ish words, type
/// names (`String`), and our own redaction marks.
pub fn is_placeholder(v: &[u8]) -> bool {
    let l = v.to_ascii_lowercase();
    let t = l.as_slice();
    if t.is_empty() {
        return true;
    }
    if t[0] == b'$'
        || t.starts_with(b"[redacted")
        // `<` always (`<your-password>`, markup such as `<add key=` read as a value); `{`
        // only when it closes (`{password}`): an unclosed one opens the value (issue 38).
        || t.starts_with(b"<")
        || t.starts_with(b"%(")
        || t.starts_with(b"#{")
        || (t.starts_with(b"{") && t.contains(&b'}'))
        || t.starts_with(b"your")
        || t.starts_with(b"/")
        || t.starts_with(b"./")
        || t.starts_with(b"~/")
    {
        return true;
    }
    // Marks are looked for in the first 256 bytes: a value longer than that (a session
    // token, a JWT) spells `xxxx` by chance (once in about 16 KiB of base64).
    let head = &t[..t.len().min(256)];
    let has = |n: &[u8]| memchr::memmem::find(head, n).is_some();
    if has_example(head) {
        return true;
    }
    if has(b"${") || has(b"{{") || has(b"xxxx") || has(b"****") || has(b"...") || has(b"%s") {
        return true;
    }
    if t.iter().all(|&b| b == t[0]) {
        return true;
    }
    const WORDS: &[&[u8]] = &[
        b"none",
        b"null",
        b"nil",
        b"true",
        b"false",
        b"undefined",
        b"password",
        b"passwd",
        b"pass",
        b"pwd",
        b"pw",
        b"secret",
        b"example",
        b"sample",
        b"placeholder",
        b"redacted",
        b"dummy",
        b"string",
        b"str",
        b"&str",
        b"bytes",
        b"optional",
        b"required",
        b"hidden",
        b"masked",
        b"empty",
        b"notset",
        b"not_set",
        b"unset",
        b"todo",
        b"fixme",
        b"changeme_in_production",
    ];
    if WORDS.contains(&t) {
        return true;
    }
    // Type names and enum-like words: `String`, `SecretKey`, `PasswordHash` (capitalised
    // words, each an uppercase letter and lowercase ones).
    is_camel_words(v) && v.len() <= 40
}

/// `^([A-Z][a-z]+)+$`
fn is_camel_words(v: &[u8]) -> bool {
    let mut i = 0;
    while i < v.len() {
        if !v[i].is_ascii_uppercase() {
            return false;
        }
        let start = i + 1;
        i = start;
        while i < v.len() && v[i].is_ascii_lowercase() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    !v.is_empty()
}

/// An unquoted value is taken for a secret only if it is not a plain word: it has a digit, a
/// symbol, or mixed case, and at least 6 bytes (`password: incorrect` in an error message is
/// prose; `DB_PASSWORD=Tr0ub4dor` is not).
pub fn looks_random(v: &[u8]) -> bool {
    v.len() >= 6
        && (v.iter().any(u8::is_ascii_digit)
            || v.iter().any(|b| !b.is_ascii_alphanumeric())
            || (v.iter().any(u8::is_ascii_uppercase) && v.iter().any(u8::is_ascii_lowercase)))
}

/// An unquoted value that refers to something else: a call or index (`get_pw()`,
/// `env["X"]`), or a dotted path of identifiers (`settings.DB_PASSWORD`).
pub fn is_reference(v: &[u8], after: &[u8]) -> bool {
    if matches!(after.first(), Some(b'(' | b'[')) {
        return true;
    }
    let parts: Vec<&[u8]> = v.split(|&b| b == b'.').collect();
    parts.len() >= 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && (p[0].is_ascii_alphabetic() || p[0] == b'_')
                && p.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_values() {
        assert_eq!(shannon(b"aaaa"), 0.0);
        assert!((shannon(b"ab") - 1.0).abs() < 1e-9);
        assert!(shannon(b"0123456789abcdef") > 3.9);
    }

    #[test]
    fn filters() {
        assert!(is_sequential(b"abcdefghijklmnopqrstuvwxyz"));
        assert!(is_sequential(b"0123456789abcdef0123"));
        assert!(!is_sequential(b"q8Zr2kLm9xW4vB7nT1pS"));
        assert!(is_sequential(
            b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
        ));
        assert!(is_uuid(b"0b4c7e49-1f7a-4cde-9b2a-6f0d2c9e8a11"));
        assert!(is_repetitive(b"AAAAAAAAAAAAAAAAAAAAAAAAA"));
        assert!(is_repetitive(b"AKIAAKIAAKIAAKIAAKIA"));
        assert!(is_repetitive(b"ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"));
        assert!(!is_repetitive(b"ghp_0123456789abcdefABCDEF0123456789abcd"));
        assert!(!is_repetitive(b"q8Zr2kLm9xW4vB7nT1pS"));
        assert!(is_placeholder(b"${DB_PASSWORD}"));
        assert!(is_placeholder(b"{{ vault_pw }}"));
        assert!(is_placeholder(b"<your-token>"));
        assert!(is_placeholder(b"String"));
        assert!(is_placeholder(b"PasswordHash"));
        assert!(!is_placeholder(b"BIdMZIISks"));
        assert!(is_placeholder(b"[REDACTED:github-pat]"));
        assert!(!is_placeholder(b"hunter22"));
        assert!(is_reference(b"get_password", b"()"));
        assert!(is_reference(b"settings.DB_PASSWORD", b""));
        assert!(!is_reference(b"s3cr3t.pw!", b""));
    }
}
