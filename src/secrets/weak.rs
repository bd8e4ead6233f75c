//! Entropy where the context says so (issue 38): a random-looking value in a secret's
//! position, where neither the name alone nor the value alone says "secret".
//!
//! The keyword rule redacts what a strongly secret name is assigned (`password`, `api_key`,
//! `secret`...), and vendor rules what has a vendor's shape. Between them are values under
//! weakly secret names and in authentication fields, which tools print:
//!
//! - a name whose last word is `key`, `credential(s)`, `cred(s)` or `auth` (`key=` as
//!   `openssl enc -P` prints it, `encryption_key:`, `PresharedKey =` as `wg showconf` prints
//!   it, `deterministic_key:` as `rails db:encryption:init` does, `APP_KEY=base64:...`,
//!   `"auth":`);
//! - a session cookie (`sessionid=`, `PHPSESSID=`, `JSESSIONID=`, `connect.sid=`,
//!   `_app_session=`; `;jsessionid=` in a path): `=` with no space, as cookies are written;
//! - a URL's query parameter that carries a credential: `sig=` (Azure SAS),
//!   `signature=`/`Signature=` (CloudFront), `X-Amz-Signature=`, `X-Goog-Signature=`,
//!   `X-Amz-Security-Token=`, `code=` (an OAuth authorization code), `key=`, `token=`,
//!   `auth=`;
//! - an `X-...` header naming a key, a signature, a token or auth (`X-Hub-Signature-256:
//!   sha256=...`, `X-Custom-Auth:`): the value after an `alg=` prefix, which stays.
//!
//! `sig`/`signature` under a name (`"sig":` in `npm view`'s registry signatures, a JWKS's
//! `"use": "sig"`) is a published signature, not a credential: only URL parameters and
//! headers count.
//!
//! Such a value is a secret only when it looks random: 20 bytes or more under a name (16 in
//! a URL parameter, a header or a cookie), a digit and a letter, entropy over a limit that
//! grows with its length (as a random string's does), not made of words (`Linux-cargo-`
//! then a hash is a cache key), and none of the shapes of identifiers and digests (UUIDs,
//! `sha256:`/`sha512-`/`h1:` digests, placeholders, sequences, paths and URLs). Bare hex
//! counts only where a credential is hex: a URL parameter (`X-Amz-Signature` is), a header,
//! a cookie, and the bare name `key` in upper case of a cipher key's length (as openssl
//! prints it; build tools print digests in lower case); under any other name hex is a
//! commit, a digest or a key id, and stays readable.
//!
//! A name that says the value is public or an identifier is no secret's name: `public_key`,
//! `pubkey`, `key_id`, `keyId`, `fingerprint`, `cache_key` (and `Cache key:`, `from key:` in
//! prose), `sort_key`, `primaryKey` (a database's: gitleaks' false positive; the one `rails
//! db:encryption:init` prints is left to show), and the like; nor is a name the keyword rule reads (`api_key`,
//! `secret_key`): it judges those.
//!
//! Cost: one Aho-Corasick pass for the anchors (`key`, `sig`, `auth`, `cred`, `sess`, `sid`,
//! `code`, `token`, each in three cases); each hit reads its name and the bytes right after it, and only a name
//! followed by `=` or `:` reads its value. No regex runs.
//!
//! Streaming: a decision reads the name (at most [`NAME_MAX`] bytes before the value, on its
//! line), the word before it (on the line, within [`NAME_MAX`] more) and the value to its end
//! (at most [`VALUE_MAX`] bytes, on its line): within what the redactor keeps before and
//! holds back after a value.

use super::TextKind;
use super::entropy;
use super::precision;
use super::rules::RULES;
use super::scan::{self, Finding};
use aho_corasick::{AhoCorasick, MatchKind};
use std::sync::OnceLock;

/// The rule id of these findings.
pub const RULE: &str = "secret-position-entropy";

/// The longest name read (bytes before the value).
const NAME_MAX: usize = 96;
/// The longest value judged; a longer run is not a token this check takes.
pub(super) const VALUE_MAX: usize = 4096;

const _: () = assert!(2 * NAME_MAX + 8 <= scan::MAX_WINDOW && VALUE_MAX <= scan::MAX_EXTENT);

/// The anchors searched for: every name below holds one, in lower case, capitalised or upper
/// case (`key`, `apiKey`, `KEY`; `PHPSESSID`, `X-Amz-Signature`). Exact variants rather than
/// an ASCII case-insensitive search: the automaton's packed prefilter stays fast.
const ANCHORS: &[&str] = &[
    "key", "Key", "KEY", "sig", "Sig", "SIG", "auth", "Auth", "AUTH", "cred", "Cred", "CRED",
    "sess", "Sess", "SESS", "sid", "Sid", "SID", "code", "Code", "CODE", "token", "Token", "TOKEN",
];

/// Words that make a name an identifier's, a public value's, or a description's.
const NOT_SECRET_WORDS: &[&str] = &[
    "public",
    "publishable",
    "site",
    "pub",
    "pubkey",
    "publickey",
    "id",
    "ids",
    "kid",
    "keyid",
    "fingerprint",
    "fpr",
    "cache",
    "name",
    "names",
    "type",
    "path",
    "file",
    "dir",
    "size",
    "len",
    "length",
    "alg",
    "algorithm",
    "hash",
    "digest",
    "checksum",
    "sum",
    "integrity",
    "url",
    "uri",
    "ref",
    "version",
    "format",
    "mode",
    "count",
    "store",
    "ring",
    "server",
    "foreign",
    "sort",
    "partition",
    "primary",
    "routing",
    "idempotency",
    "lookup",
    "map",
    "index",
    "prefix",
    "suffix",
    "label",
    "bucket",
    "object",
    "field",
    "column",
    "host",
    "known",
    "authorized",
    "usage",
    "schema",
    "policy",
    "expiry",
    "expires",
    "timeout",
    "method",
    "provider",
    "error",
    "status",
    "exit",
    "return",
    "source",
    "unicode",
    "country",
    "zip",
    "postal",
    "region",
    "lang",
    "language",
    "encoding",
    "registry",
    "kms",
    "arn",
];

/// What a position asks of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// A weakly secret name: 20 bytes or more; hex only under the bare name `key`.
    Name { hex: bool },
    /// A URL parameter, an `X-` header, a cookie: 16 bytes or more, hex too.
    Field,
}

fn anchors() -> Option<&'static AhoCorasick> {
    static AC: OnceLock<Option<AhoCorasick>> = OnceLock::new();
    AC.get_or_init(|| {
        AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(ANCHORS)
            .ok()
    })
    .as_ref()
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// A byte of a value: base64 (standard and URL-safe), hex, URL-encoded (`%2B`), `~`, `.`.
fn is_value_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-' | b'.' | b'~' | b'%')
}

/// Finds values in secret positions in `text` (streams, configuration, prose; not code,
/// where an unquoted value is a variable, nor lock files).
pub(super) fn scan(text: &[u8], kind: TextKind, out: &mut Vec<(usize, Finding)>) {
    if matches!(kind, TextKind::Code | TextKind::Lock) {
        return;
    }
    let Some(ac) = anchors() else { return };
    let mut next = 0;
    for m in ac.find_iter(text) {
        if m.start() < next {
            continue;
        }
        // The name holding the anchor.
        let lo = m.start().saturating_sub(NAME_MAX);
        let ns = text[lo..m.start()]
            .iter()
            .rposition(|&b| !is_name_byte(b))
            .map_or(lo, |i| lo + i + 1);
        let hi = (m.end() + NAME_MAX).min(text.len());
        let ne = text[m.end()..hi]
            .iter()
            .position(|&b| !is_name_byte(b))
            .map_or(hi, |i| m.end() + i);
        next = ne;
        if ns == lo && lo > 0 && is_name_byte(text[lo - 1]) {
            continue;
        }
        if let Some((s, e)) = judge(text, ns, ne, &mut next) {
            out.push((
                RULES.len() + 2,
                Finding {
                    rule: RULE,
                    start: s,
                    end: e,
                    specific: true,
                },
            ));
            next = e;
        }
    }
}

/// The value at the name `text[ns..ne]`, if it is a secret in that position. `next` gets
/// the end of the run of value bytes read (names inside it are not read again: on
/// `key=key=key=...` each value read would otherwise run to the bound).
fn judge(text: &[u8], ns: usize, ne: usize, next: &mut usize) -> Option<(usize, usize)> {
    let name = &text[ns..ne];
    // The separator: `=` or `:` (after a key's closing quote), not `==`, `::`, `:=`.
    let mut p = ne;
    let quoted_name = matches!(text.get(p), Some(b'"' | b'\''));
    if quoted_name {
        p += 1;
    }
    let sp_before = text[p..].iter().take(3).take_while(|&&b| b == b' ').count();
    p += sp_before;
    let sep = *text.get(p)?;
    if sep != b'=' && sep != b':' {
        return None;
    }
    if matches!(text.get(p + 1), Some(b'=' | b':')) {
        return None;
    }
    p += 1;
    let sp_after = text[p..].iter().take(3).take_while(|&&b| b == b' ').count();
    p += sp_after;
    let before = ns.checked_sub(1).map(|i| text[i]);
    let query = sep == b'=' && sp_before + sp_after == 0 && matches!(before, Some(b'?' | b'&'));
    let header = sep == b':' && !quoted_name && is_header(text, ns, name);
    let cookie = sep == b'=' && sp_before + sp_after == 0 && !query;
    let slot = slot(name, query, header, cookie)?;
    if !query && prose_name_before(text, ns) {
        return None;
    }
    // The value: an optional opening quote, then value bytes to a terminator.
    let quote = match text.get(p) {
        Some(&q @ (b'"' | b'\'')) => {
            p += 1;
            Some(q)
        }
        _ => None,
    };
    if header {
        // `sha256=`, `v0=`, `t=...,v1=`: a scheme's prefix stays, the value after it is judged.
        p += scheme_prefix(&text[p..]);
    }
    // `base64:` before a key (Laravel's `APP_KEY=base64:...`) says its encoding.
    if text[p..].len() > 7 && text[p..p + 7].eq_ignore_ascii_case(b"base64:") {
        p += 7;
    }
    let s = p;
    let hi = (s + VALUE_MAX + 1).min(text.len());
    let e = text[s..hi]
        .iter()
        .position(|&b| !is_value_byte(b))
        .map_or(hi, |i| s + i);
    *next = (*next).max(e);
    if e - s > VALUE_MAX {
        return None;
    }
    // A quoted value ends at its quote (a quoted phrase with spaces is no token).
    if let Some(q) = quote
        && text.get(e) != Some(&q)
    {
        return None;
    }
    // `.` or `-` ending a sentence is not the value's.
    let e = s + text[s..e]
        .iter()
        .rposition(|&b| b != b'.')
        .map_or(0, |i| i + 1);
    let v = &text[s..e];
    random_in(slot, v, text, s).then_some((s, e))
}

/// What the name asks of its value, or `None` if it is no secret's name in this position.
fn slot(name: &[u8], query: bool, header: bool, cookie: bool) -> Option<Slot> {
    if name.len() > NAME_MAX || scan::names_a_secret(name) && !query {
        return None;
    }
    let words = words(name);
    if words
        .iter()
        .any(|w| NOT_SECRET_WORDS.contains(&w.as_str()) && !(query || header) || w == "public")
    {
        return None;
    }
    // Trailing numbers (`X-Hub-Signature-256`) say the variant.
    let last = words
        .iter()
        .rev()
        .find(|w| !w.bytes().all(|b| b.is_ascii_digit()))?
        .as_str();
    let lower = name.to_ascii_lowercase();
    if query {
        // `X-Amz-Credential` is the key's id and its scope, not a secret.
        let ok = matches!(
            last,
            "sig" | "signature" | "code" | "key" | "token" | "auth" | "apikey"
        );
        return ok.then_some(Slot::Field);
    }
    if header {
        let ok = matches!(last, "signature" | "key" | "token" | "auth");
        return ok.then_some(Slot::Field);
    }
    if cookie
        && (matches!(
            lower.as_slice(),
            b"sessionid" | b"session" | b"sid" | b"phpsessid" | b"jsessionid" | b"connect.sid"
        ) || lower.ends_with(b"_session")
            || lower.ends_with(b"_sess"))
    {
        return Some(Slot::Field);
    }
    match last {
        "key" | "keys" => Some(Slot::Name {
            hex: lower == b"key",
        }),
        "credential" | "credentials" | "cred" | "creds" | "auth" => Some(Slot::Name { hex: false }),
        _ => None,
    }
}

/// The name's words, lower case: split at `_`, `-`, `.` and where a lower-case letter or a
/// digit meets an upper-case one (`encryptionKey`, `X-Amz-Signature`).
fn words(name: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev: Option<u8> = None;
    for &b in name {
        if matches!(b, b'_' | b'-' | b'.') {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev = None;
            continue;
        }
        if b.is_ascii_uppercase()
            && prev.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit())
            && !cur.is_empty()
        {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(char::from(b.to_ascii_lowercase()));
        prev = Some(b);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// An HTTP header's name: `X-...`, first on its line but for spaces, `> `/`< ` (curl -v),
/// a quote or `-H ` before it.
fn is_header(text: &[u8], ns: usize, name: &[u8]) -> bool {
    if name.len() < 3 || !name[..2].eq_ignore_ascii_case(b"x-") {
        return false;
    }
    let lo = ns.saturating_sub(NAME_MAX);
    let ls = memchr::memrchr(b'\n', &text[lo..ns]).map_or(lo, |i| lo + i + 1);
    let lead = &text[ls..ns];
    let lead = lead.trim_ascii();
    lead.is_empty()
        || matches!(lead, b">" | b"<" | b"\"" | b"'")
        || lead.ends_with(b"-H \"")
        || lead.ends_with(b"-H '")
        || lead.ends_with(b"--header \"")
        || lead.ends_with(b"--header '")
}

/// `Cache key:`, `Public key:`, `Primary key =`: a word before the name, on its line and
/// one space before it, that makes the name an identifier's.
fn prose_name_before(text: &[u8], ns: usize) -> bool {
    let Some(sp) = ns.checked_sub(1) else {
        return false;
    };
    if text[sp] != b' ' {
        return false;
    }
    let lo = sp.saturating_sub(NAME_MAX);
    let ws = text[lo..sp]
        .iter()
        .rposition(|b| !b.is_ascii_alphanumeric())
        .map_or(lo, |i| lo + i + 1);
    let w = text[ws..sp].to_ascii_lowercase();
    NOT_SECRET_WORDS
        .iter()
        .any(|n| n.as_bytes() == w.as_slice())
        || matches!(
            w.as_slice(),
            b"from" | b"with" | b"for" | b"by" | b"using" | b"matching" | b"restored" | b"saved"
        )
}

/// The length of an algorithm's or a version's prefix before a header's value (`sha256=`,
/// `v0=`), or 0.
fn scheme_prefix(v: &[u8]) -> usize {
    let n = v
        .iter()
        .take(9)
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    if n > 0 && n <= 8 && v.get(n) == Some(&b'=') {
        n + 1
    } else {
        0
    }
}

/// Whether `v` (at `s` of `text`) looks like a random secret for the slot.
fn random_in(slot: Slot, v: &[u8], text: &[u8], s: usize) -> bool {
    let min = match slot {
        Slot::Name { .. } => 20,
        Slot::Field => 16,
    };
    if v.len() < min {
        return false;
    }
    let hex = v.iter().all(u8::is_ascii_hexdigit);
    if hex {
        let ok = match slot {
            // `openssl enc -P`'s `key=`: upper-case hex of a cipher's key length. Build tools
            // print digests in lower case.
            Slot::Name { hex } => {
                hex && matches!(v.len(), 32 | 48 | 64) && !v.iter().any(u8::is_ascii_lowercase)
            }
            Slot::Field => true,
        };
        if !ok {
            return false;
        }
    }
    if !v.iter().any(u8::is_ascii_digit) || !v.iter().any(u8::is_ascii_alphabetic) {
        return false;
    }
    if entropy::shannon(v) < entropy_limit(v.len(), hex) {
        return false;
    }
    !(is_digest(v)
        || is_version(v)
        || is_composed(v)
        || looks_like_path(v)
        || precision::is_uuid(v)
        || precision::is_wordy(v)
        || entropy::is_placeholder(v)
        || entropy::is_sequential(v)
        || entropy::is_repetitive(v)
        || precision::entropy_value_is_not_a_secret(text, s))
}

/// The entropy (bits a byte) a random value of `len` bytes reaches but once in a hundred:
/// over lower-case letters and digits (the smallest alphabet tokens use), or over hex.
/// Identifiers made of words fall under it or fail the other checks.
fn entropy_limit(len: usize, hex: bool) -> f64 {
    match (hex, len) {
        (true, ..20) => 2.6,
        (true, ..32) => 2.8,
        (true, ..64) => 3.1,
        (true, _) => 3.4,
        (false, ..20) => 3.1,
        (false, ..24) => 3.3,
        (false, ..32) => 3.5,
        (false, _) => 3.8,
    }
}

/// A digest as build tools print it: `sha256:`/`sha512-`/`md5:`/`h1:` and the like first.
fn is_digest(v: &[u8]) -> bool {
    let lower = v.to_ascii_lowercase();
    [
        &b"sha1"[..],
        b"sha224",
        b"sha256",
        b"sha384",
        b"sha512",
        b"md5",
        b"h1",
        b"blake2b",
        b"blake3",
        b"xxh64",
    ]
    .iter()
    .any(|p| lower.starts_with(p) && matches!(lower.get(p.len()), Some(b':' | b'-' | b'=')))
}

/// A value composed of parts that are each a word, a number or hex (`Linux-cargo-` then a
/// hash, `node-cache-v2-...`, `build.20240301.abcdef0`): an identifier, not a token. A random
/// token's parts mix cases and digits.
fn is_composed(v: &[u8]) -> bool {
    let parts: Vec<&[u8]> = v
        .split(|&b| matches!(b, b'-' | b'_' | b'.' | b'/' | b'+' | b'~'))
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() < 2 {
        return false;
    }
    // Letters only, in any case (`macOS`, `Linux`, `npm`).
    let word = |p: &[u8]| p.len() >= 2 && p.iter().all(u8::is_ascii_alphabetic);
    // Words hold half its bytes or more (`jetbrains.mps.v8_elimination`).
    let in_words: usize = parts
        .iter()
        .filter(|p| p.len() >= 3 && p.iter().all(u8::is_ascii_alphabetic))
        .map(|p| p.len())
        .sum();
    if in_words * 2 >= v.len() {
        return true;
    }
    let number = |p: &[u8]| p.iter().all(u8::is_ascii_digit);
    let hexy = |p: &[u8]| {
        p.iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            || p.iter()
                .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b))
    };
    parts.iter().any(|p| word(p)) && parts.iter().all(|p| word(p) || number(p) || hexy(p))
}

/// A version (`v1.2.3-rc.4+build.5`, `2.31.0`): digits and a dot first.
fn is_version(v: &[u8]) -> bool {
    let v = v.strip_prefix(b"v").unwrap_or(v);
    let n = v.iter().take_while(|b| b.is_ascii_digit()).count();
    n > 0 && v.get(n) == Some(&b'.') && v.get(n + 1).is_some_and(u8::is_ascii_digit)
}

/// A path or a URL, not a token (`~/.ssh/id`, `s3/bucket/x`, `%2Fhome`).
fn looks_like_path(v: &[u8]) -> bool {
    v.starts_with(b"/")
        || v.starts_with(b"./")
        || v.starts_with(b"~")
        || v.starts_with(b"..")
        || memchr::memmem::find(v, b"//").is_some()
        || v.iter().filter(|&&b| b == b'/').count() >= 3 && !v.ends_with(b"=")
}

#[cfg(test)]
#[path = "weak_tests.rs"]
mod tests;
