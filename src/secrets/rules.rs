//! The detectors: detect-secrets 1.5.0's plugins (except `IPPublicDetector`: an address is not
//! a credential) and the high-value rules of gitleaks, as data.
//!
//! Each rule has keywords, found by one Aho-Corasick automaton over all rules, and an ASCII
//! byte regex run only on the lines around a keyword hit. The secret is the regex group named
//! `s` (or `s2`, `s3` for alternatives), else the whole match. Regexes end tokens with
//! `(?:[^A-Za-z0-9_-]|$)`-style classes where gitleaks uses lookarounds (the `regex` crate has
//! none); the secret group excludes them.
//!
//! Over 1,000 lines: data — one entry per detector (176, covering gitleaks' rule families and
//! detect-secrets' plugins, see docs/secrets-coverage.md) and the few checks they name.

/// The spans (relative) of the secrets inside a rule's secret group ([`Rule::parts`]).
pub type Parts = fn(&[u8]) -> Vec<(usize, usize)>;

/// One detector.
#[derive(Debug)]
pub struct Rule {
    /// Stable id, shown as `[REDACTED:<id>]` and in reports.
    pub id: &'static str,
    /// What it finds.
    pub description: &'static str,
    /// Keywords; one must occur on the lines searched. Matched ASCII-case-insensitively unless
    /// `case_sensitive`.
    pub keywords: &'static [&'static str],
    /// Keywords match exactly (token prefixes such as `AKIA`, `AIza`).
    pub case_sensitive: bool,
    /// The regex (compiled with Unicode off).
    pub regex: &'static str,
    /// Lines after the keyword's line that are searched too (multi-line secrets).
    pub lines_after: usize,
    /// Minimum Shannon entropy of the secret in bits per byte (0: none).
    pub min_entropy: f64,
    /// Generic rules (keyword assignments): placeholder and reference filters apply, and the
    /// file type decides whether unquoted values count.
    pub generic: bool,
    /// An extra check of the secret (structure that a regex cannot express).
    pub check: Option<fn(&[u8]) -> bool>,
    /// A checksum the vendor's format carries (GitHub's and npm's CRC32 tail): a finding
    /// whose checksum verifies is `high` confidence, one that does not is still a finding but
    /// `medium` (a random string in the shape, not a token the vendor issued).
    pub checksum: Option<fn(&[u8]) -> bool>,
    /// Found only by a vendor's name assigned a value of the vendor's shape (gitleaks'
    /// `twitter... = <45 chars>` families): `medium` confidence, as no prefix proves the vendor.
    pub named: bool,
    /// The secret group holds several secrets: these spans of it (relative) are the findings
    /// (a `Cookie:` header's values, not its names; an `openssl -text` dump's hex lines).
    pub parts: Option<Parts>,
    /// Bytes before its keyword's line that the rule's window reaches back (a key block's
    /// tail: the base64 lines before `-----END`); 0: the keyword's line only.
    pub back: usize,
}

impl Rule {
    /// The entropy the secret must reach. A vendor-name rule's value made of digits only
    /// (Asana's 16-digit client id, Discord's 18-digit one) cannot reach 2.5 bits as often as
    /// random letters do: one random 16-digit value in 19 stays under 2.5, one in 350 under 2.2.
    pub fn entropy_floor(&self, secret: &[u8]) -> f64 {
        if self.named && !secret.is_empty() && secret.iter().all(u8::is_ascii_digit) {
            self.min_entropy.min(2.2)
        } else {
            self.min_entropy
        }
    }
}

const fn rule(
    id: &'static str,
    description: &'static str,
    keywords: &'static [&'static str],
    regex: &'static str,
) -> Rule {
    Rule {
        id,
        description,
        keywords,
        case_sensitive: false,
        regex,
        lines_after: 0,
        min_entropy: 0.0,
        generic: false,
        check: None,
        checksum: None,
        named: false,
        parts: None,
        back: 0,
    }
}

const fn exact(
    id: &'static str,
    description: &'static str,
    keywords: &'static [&'static str],
    regex: &'static str,
) -> Rule {
    Rule {
        case_sensitive: true,
        ..rule(id, description, keywords, regex)
    }
}

/// A vendor-name rule (see [`Rule::named`]): placeholders are not values, and a value must
/// not be a run of few characters.
const fn named(
    id: &'static str,
    description: &'static str,
    keywords: &'static [&'static str],
    regex: &'static str,
) -> Rule {
    Rule {
        named: true,
        // `<vendorToken>` then the value on the next line (an XML element).
        lines_after: 1,
        min_entropy: 2.5,
        check: Some(opaque_credential),
        ..rule(id, description, keywords, regex)
    }
}

const fn with_entropy(r: Rule, min_entropy: f64) -> Rule {
    Rule { min_entropy, ..r }
}

/// End of a token made of `[A-Za-z0-9_-]`.
macro_rules! end {
    () => {
        r"(?:[^A-Za-z0-9_-]|$)"
    };
}
/// Start of a token made of `[A-Za-z0-9_-]`.
macro_rules! start {
    () => {
        r"(?:^|[^A-Za-z0-9_-])"
    };
}
/// A `name ... = value` context: up to 25 more name characters, an optional closing quote, an
/// assignment operator (`=`, `:`, `:=`, `=>`, `,` in arrays/calls), optional opening quote.
macro_rules! assign {
    () => {
        r#"[A-Za-z0-9_.-]{0,25}['"]?\s{0,5}(?::=|=>|=|:|,)\s{0,5}['"]?"#
    };
}

/// A name holding `$names` (any case, inside a longer identifier: `MY_TWITTER_API_KEY`), up to
/// 20 more name characters, an assignment (`=`, `:`, `:=`, `::=`, `=>`, `?=`, `.=`, `,`
/// between call arguments, `>` closing an XML element), then `$value` as the secret, ended by
/// a quote, space, `;`, `,`, a bracket or an escaped newline (gitleaks' vendor-name rules).
macro_rules! named {
    ($names:literal, $value:literal) => {
        concat!(
            r"(?i)(?:",
            $names,
            r")[A-Za-z0-9_. \t-]{0,20}",
            r#"['"]?\s{0,5}(?::{1,3}=|=>|\?=|\|\||=|>|:|,)\s{0,5}['"`]?"#,
            r"(?P<s>",
            $value,
            r")",
            r#"(?:[`'"\s;,)}<\]]|\\[nrt]|$)"#
        )
    };
}

/// What names a secret, in a key, a variable, an XML element or attribute, or a flag
/// (`db_password`, `apiKey`, `--client-secret`): the keyword rule's names.
macro_rules! strong_secret_names {
    () => {
        r#"(?:api[_-]?key|auth[_-]?key|service[_-]?key|account[_-]?key|db[_-]?key|database[_-]?key|priv(?:ate)?[_-]?key|client[_-]?key|db[_-]?pass|database[_-]?pass|key[_-]?pass|password|passwd|passphrase|pwd|secret|access[_-]?token|auth[_-]?token|api[_-]?token|contrase(?:n|\xC3\xB1)a)"#
    };
}

/// The keyword rule's names: the strong ones, and `token` (`NOTION_TOKEN`, `notion_token`;
/// the prefilter keyword is `_token`, so `notionToken` is not seen yet),
/// whose values must also look random (see [`STRONG_SECRET_NAME`]), as gitleaks'
/// generic-api-key requires of every keyword's value.
macro_rules! secret_names {
    () => {
        concat!(r#"(?:"#, strong_secret_names!(), r#"|token)"#)
    };
}

/// Names that say a secret by themselves (`password`, `api_key`, `access_token`); a value
/// named only by `token` (`page_token`, `NOTION_TOKEN`) is taken only when long and random
/// (a pagination cursor or a word is not a credential).
pub const STRONG_SECRET_NAME: &str = concat!(r"(?i)", strong_secret_names!());

/// A name (of a key, an XML element or attribute, a long flag) that names a secret, for the
/// context tokenizer (`super::context`): its value goes to the keyword rule. Searched within
/// the name, ASCII case-insensitively, as the keyword rule does.
pub const SECRET_NAME: &str = concat!(r"(?i)", secret_names!());

/// Names of a secret that the keyword rule's keywords cannot anchor, searched exactly:
/// camelCase `...Token` and `...Key` after a lowercase letter or digit (`accessToken`,
/// `githubToken`, `clientKey`) and a `-token` flag (`--token`). Their lines get the keyword
/// rule's window, so its regex and the context tokenizer read them (see `scan.rs`).
pub const CAMEL_SECRET_NAMES: &[&str] = &["Token", "Key", "-token"];

/// Names that contain a secret's name but name where a secret is, or how it is read, not
/// the secret (`--password-file`, `--password-stdin`, `PASSWORD_FILE`): a name ending so is
/// not a secret's name.
pub const SECRET_NAME_NOT_ENDINGS: &[&str] = &[
    "file", "stdin", "fd", "path", "env", "cmd", "command", "prompt", "length", "policy",
];

/// How a command-line flag carries a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagForm {
    /// Glued to the flag only (`mysql -pSECRET`; `mysql -p db` prompts, `db` is a database).
    Glued,
    /// Glued or as the next word (`sshpass -p SECRET`).
    GluedOrNext,
    /// The next word, `user:secret` (`curl -u user:secret`, `http -a user:secret`).
    UserColonSecret,
}

/// A short command-line flag that takes a secret, for the programs named.
#[derive(Debug)]
pub struct SecretFlag {
    /// Program names (the command word's file name).
    pub programs: &'static [&'static str],
    /// The flag, e.g. `-p`.
    pub flag: &'static str,
    /// How the value follows it.
    pub form: FlagForm,
}

/// Short flags that take a password (long ones are known by [`SECRET_NAME`]: `--password`).
pub static SECRET_FLAGS: &[SecretFlag] = &[
    SecretFlag {
        programs: &[
            "mysql",
            "mysqldump",
            "mysqladmin",
            "mysqlimport",
            "mysqlshow",
            "mysqlcheck",
            "mariadb",
            "mariadb-dump",
            "mariadb-admin",
        ],
        flag: "-p",
        form: FlagForm::Glued,
    },
    SecretFlag {
        programs: &["sshpass"],
        flag: "-p",
        form: FlagForm::GluedOrNext,
    },
    SecretFlag {
        programs: &[
            "mongo",
            "mongosh",
            "mongodump",
            "mongorestore",
            "mongoexport",
        ],
        flag: "-p",
        form: FlagForm::GluedOrNext,
    },
    SecretFlag {
        programs: &["redis-cli", "keydb-cli"],
        flag: "-a",
        form: FlagForm::GluedOrNext,
    },
    SecretFlag {
        programs: &["curl", "wget"],
        flag: "-u",
        form: FlagForm::UserColonSecret,
    },
    SecretFlag {
        programs: &["http", "https", "xh", "xhs"],
        flag: "-a",
        form: FlagForm::UserColonSecret,
    },
];

/// The base64url decoding of one JWT part (padding dropped).
fn jwt_part(part: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine;
    let part: Vec<u8> = part.iter().copied().filter(|&b| b != b'=').collect();
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .ok()
}

/// A JWT's first part decodes to JSON naming `alg` or `typ` (what follows is not looked at).
fn jwt_header_is_json(s: &[u8]) -> bool {
    s.split(|&b| b == b'.')
        .next()
        .and_then(jwt_part)
        .is_some_and(|h| {
            h.starts_with(b"{")
                && (h.windows(5).any(|w| w == b"\"alg\"") || h.windows(5).any(|w| w == b"\"typ\""))
        })
}

/// A JWT: its header is JSON (see [`jwt_header_is_json`]). An unsigned one (`header.payload`,
/// or `header.payload.` with `alg: none`; detect-secrets and gitleaks both find these) must
/// also have a payload that decodes to a JSON object, as no signature marks it.
fn jwt_structure(s: &[u8]) -> bool {
    let mut parts = s.split(|&b| b == b'.').skip(1);
    let payload = parts.next().unwrap_or(&[]);
    let signed = parts.next().is_some_and(|sig| !sig.is_empty());
    // A payload of 16 KiB or more is judged by its header: a JWT past the scanner's
    // `VALUE_BOUND` is judged on its first bytes, where its payload is cut.
    jwt_header_is_json(s)
        && (signed
            || payload.len() >= 16 * 1024
            || jwt_part(payload).is_some_and(|p| {
                serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&p).is_ok()
            }))
}

/// The base62 alphabet of GitHub's and npm's tokens (digits, upper case, lower case).
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// GitHub's token format (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`; npm's `npm_` the same):
/// a 4-byte prefix, 30 random base62 characters, then the CRC32 (IEEE) of those 30 characters
/// in 6 base62 digits, most significant first, zero-padded. GitHub's blog post "Behind
/// GitHub's new authentication token formats" (2021) describes it; the published example
/// token verifies. `github_pat_` tokens carry no documented checksum and are not checked.
pub fn base62_crc32_verifies(token: &[u8]) -> bool {
    let Some(body) = token.get(4..) else {
        return false;
    };
    if body.len() != 36 {
        return false;
    }
    let (random, tail) = body.split_at(30);
    let mut sum: u64 = 0;
    for &c in tail {
        let Some(d) = BASE62.iter().position(|&b| b == c) else {
            return false;
        };
        sum = sum * 62 + d as u64;
    }
    sum == u64::from(crc32fast::hash(random))
}

/// npm's `npm_` tokens carry GitHub's checksum; the legacy UUID form (`_authToken=<uuid>`)
/// has none to check.
fn npm_checksum(token: &[u8]) -> bool {
    !token.starts_with(b"npm_") || base62_crc32_verifies(token)
}

/// A JWT encoded once more in base64 (`ZXlK` is `eyJ`): the decoded head is a JWT whose
/// header decodes to JSON.
fn is_base64_jwt(s: &[u8]) -> bool {
    use base64::Engine;
    let s: Vec<u8> = s
        .iter()
        .map(|&b| match b {
            b'-' => b'+',
            b'_' => b'/',
            b => b,
        })
        .filter(|&b| b != b'=')
        .collect();
    let head = &s[..s.len().min(120) / 4 * 4];
    match base64::engine::general_purpose::STANDARD_NO_PAD.decode(head) {
        Ok(h) => h.contains(&b'.') && jwt_header_is_json(&h),
        Err(_) => false,
    }
}

/// A private key block has a body, not only the armour line (parsers and docs quote those).
fn has_key_body(s: &[u8]) -> bool {
    s.iter()
        .filter(|b| b.is_ascii_alphanumeric() || **b == b'+' || **b == b'/')
        .count()
        >= 64
}

/// The standard base64 decoding of `s`, if it is some.
fn base64_decoded(s: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine;
    let t: Vec<u8> = s.iter().copied().filter(|&b| b != b'=').collect();
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(t)
        .ok()
}

/// Printable ASCII (and no control byte): what a user name or a password decodes to.
fn is_printable(d: &[u8]) -> bool {
    !d.is_empty() && d.iter().all(|b| (0x20..0x7F).contains(b))
}

/// docker's and npm's `auth`: base64 of `user:password`, both non-empty and printable.
fn decodes_to_user_password(s: &[u8]) -> bool {
    base64_decoded(s).is_some_and(|d| {
        is_printable(&d)
            && d.iter()
                .position(|&b| b == b':')
                .is_some_and(|c| c > 0 && c + 1 < d.len())
    })
}

/// npm's `_auth` (`user:password`) or `_password` (the password): base64 of printable text
/// of 3 bytes or more, not a placeholder.
fn decodes_to_text(s: &[u8]) -> bool {
    base64_decoded(s).is_some_and(|d| d.len() >= 3 && is_printable(&d) && opaque_credential(&d))
}

/// The value of a header whose name says it holds a credential: a value (not a placeholder
/// or reference), and one that a program made (a digit, mixed case or a symbol: not a word
/// such as `required`).
fn header_credential(s: &[u8]) -> bool {
    opaque_credential(s)
        && super::entropy::looks_random(s)
        && super::entropy::shannon(s) >= 2.5
        && !s.ends_with(b":")
}

/// An Authorization header's credential: for Bearer/Basic/token, the token; for another
/// scheme, its parameters, which must hold a run of 12 or more token characters with a digit
/// (an AWS4 signature, a Digest response, an NTLM blob), else it is prose
/// (`Authorization: Negotiate authentication is used`).
fn authorization_credential(s: &[u8]) -> bool {
    if !opaque_credential(s) {
        return false;
    }
    if s.iter()
        .all(|&b| b.is_ascii_alphanumeric() || b"._~+/=-".contains(&b))
    {
        return true;
    }
    s.split(|&b| !(b.is_ascii_alphanumeric() || b"+/=_-".contains(&b)))
        .any(|run| run.len() >= 12 && run.iter().any(u8::is_ascii_digit))
}

/// Parameters of an Authorization scheme that are no secret: Digest's (RFC 7616) but its
/// `response`, AWS SigV4's `Credential` (its access key id is `aws-access-key-id`'s) and
/// `SignedHeaders`, HTTP Signatures' and OAuth 1.0's descriptive ones.
const READABLE_AUTH_PARAMS: &[&str] = &[
    "username",
    "realm",
    "nonce",
    "uri",
    "algorithm",
    "qop",
    "nc",
    "cnonce",
    "opaque",
    "userhash",
    "charset",
    "domain",
    "stale",
    "credential",
    "signedheaders",
    "keyid",
    "headers",
    "created",
    "expires",
    "oauth_signature_method",
    "oauth_timestamp",
    "oauth_nonce",
    "oauth_version",
];

/// One `name=value` parameter of an Authorization header from `p` of `s`: (name, value
/// start, value end, where the next parameter may start). A quoted value (`"..."`, or
/// `\"...\"` inside a JSON string) is its bytes inside the quotes.
fn auth_param(s: &[u8], p: usize) -> Option<(&[u8], usize, usize, usize)> {
    let ne = p + s[p..]
        .iter()
        .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
        .unwrap_or(s.len() - p);
    if ne == p || s.get(ne) != Some(&b'=') {
        return None;
    }
    let v = ne + 1;
    let quote: &[u8] = if s[v..].starts_with(b"\\\"") {
        b"\\\""
    } else if s[v..].starts_with(b"\"") {
        b"\""
    } else {
        b""
    };
    let (vs, ve, next) = if quote.is_empty() {
        let ve = memchr::memchr(b',', &s[v..]).map_or(s.len(), |i| v + i);
        let vt = v + s[v..ve].trim_ascii_end().len();
        (v, vt, ve)
    } else {
        let vs = v + quote.len();
        let ve = vs + memchr::memmem::find(&s[vs..], quote)?;
        (vs, ve, ve + quote.len())
    };
    (ve > vs).then_some((&s[p..ne], vs, ve, next))
}

/// An Authorization header's secret parts: for a scheme with a parameter list (Digest, AWS
/// SigV4, OAuth 1.0, HTTP Signatures: two or more `name=value` pairs), each value but those
/// [`READABLE_AUTH_PARAMS`] names (Digest's `response`, SigV4's `Signature`; `username`,
/// `realm`, `uri` stay readable); otherwise (a Bearer or Basic token, an NTLM blob) the whole.
fn authorization_parts(s: &[u8]) -> Vec<(usize, usize)> {
    let whole = vec![(0, s.len())];
    let mut params = Vec::new();
    let mut p = 0;
    loop {
        while p < s.len() && (s[p] == b',' || s[p].is_ascii_whitespace()) {
            p += 1;
        }
        if p >= s.len() {
            break;
        }
        let Some((name, vs, ve, next)) = auth_param(s, p) else {
            return whole;
        };
        params.push((name, vs, ve));
        p = next;
        // A parameter ends at a comma (spaces before it aside).
        while p < s.len() && s[p].is_ascii_whitespace() {
            p += 1;
        }
        if p < s.len() && s[p] != b',' {
            return whole;
        }
    }
    if params.len() < 2 {
        return whole;
    }
    params
        .into_iter()
        .filter(|(name, _, _)| {
            !READABLE_AUTH_PARAMS
                .iter()
                .any(|r| name.eq_ignore_ascii_case(r.as_bytes()))
        })
        .map(|(_, vs, ve)| (vs, ve))
        .collect()
}

/// Not a run of one character nor the documented example (`abcdef.0123456789abcdef`).
fn not_a_run(s: &[u8]) -> bool {
    !super::entropy::is_repetitive(s)
        && !super::entropy::is_placeholder(s)
        && !super::entropy::is_sequential(s)
        && !s.windows(10).any(|w| w == b"0123456789")
}

/// A line that is only a kubeadm bootstrap token (`kubeadm token create` prints it so, with
/// no name): `[a-z0-9]{6}.[a-z0-9]{16}` once spaces around it are trimmed. A file name, a
/// host or a `module.function` rarely has that shape; what does is told apart by its secret
/// part, which kubeadm draws at random: letters and digits both, 3 bits of entropy or more
/// (16 random characters of 36 reach that but once in millions), no run nor sequence.
pub fn is_bootstrap_token_line(line: &[u8]) -> bool {
    let t = line.trim_ascii();
    let tok = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if t.len() != 23 || t[6] != b'.' || !t[..6].iter().all(tok) || !t[7..].iter().all(tok) {
        return false;
    }
    let secret = &t[7..];
    secret.iter().any(u8::is_ascii_digit)
        && secret.iter().any(u8::is_ascii_lowercase)
        && super::entropy::shannon(secret) >= 3.0
        && not_a_run(t)
        && not_a_run(secret)
}

/// A cookie's value that is a credential: a name saying session, token, auth, key, secret,
/// sid or login with a value of 4 bytes or more, or any value of 8 or more that a program
/// made (a digit, mixed case or a symbol): `theme=dark`, `lang=en` stay.
fn cookie_value_is_secret(name: &[u8], v: &[u8]) -> bool {
    let n = name.to_ascii_lowercase();
    let sessiony = [
        "sess", "sid", "token", "auth", "key", "secret", "login", "jwt",
    ]
    .iter()
    .any(|w| memchr::memmem::find(&n, w.as_bytes()).is_some());
    opaque_credential(v)
        && ((sessiony && v.len() >= 4) || (v.len() >= 8 && super::entropy::looks_random(v)))
}

/// One `name=value` pair of a cookie header at `p..e` of `s`: the value's span, if it is a
/// credential (quotes around it stay).
fn cookie_pair(s: &[u8], p: usize, e: usize) -> Option<(usize, usize)> {
    let pair = &s[p..e];
    let eq = memchr::memchr(b'=', pair)?;
    let name = pair[..eq].trim_ascii();
    let mut vs = p + eq + 1;
    let mut ve = e;
    while vs < ve && s[vs].is_ascii_whitespace() {
        vs += 1;
    }
    while ve > vs && s[ve - 1].is_ascii_whitespace() {
        ve -= 1;
    }
    if ve - vs >= 2 && s[vs] == b'"' && s[ve - 1] == b'"' {
        vs += 1;
        ve -= 1;
    }
    (!name.is_empty() && ve > vs && cookie_value_is_secret(name, &s[vs..ve])).then_some((vs, ve))
}

/// A `Cookie:` header's values (`a=b; sid=...`): each pair's value that is a credential.
fn cookie_values(s: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < s.len() {
        let e = memchr::memchr(b';', &s[p..]).map_or(s.len(), |i| p + i);
        out.extend(cookie_pair(s, p, e));
        p = e + 1;
    }
    out
}

/// A `Set-Cookie:` header's value: its first pair is the cookie; the attributes after `;`
/// (`Path`, `Expires`, `HttpOnly`) are not secrets.
fn set_cookie_value(s: &[u8]) -> Vec<(usize, usize)> {
    let e = memchr::memchr(b';', s).unwrap_or(s.len());
    cookie_pair(s, 0, e).into_iter().collect()
}

/// The hex lines of an `openssl -text` number (`    00:c3:5a:...`), each one a finding (a
/// stream's later lines are still found when the block's head has been emitted).
fn hex_dump_lines(s: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < s.len() {
        let e = memchr::memchr(b'\n', &s[p..]).map_or(s.len(), |i| p + i);
        let line = &s[p..e];
        if let (Some(a), Some(b)) = (
            line.iter().position(|b| !b.is_ascii_whitespace()),
            line.iter().rposition(|b| !b.is_ascii_whitespace()),
        ) {
            out.push((p + a, p + b + 1));
        }
        p = e + 1;
    }
    out
}

/// A credential that is a value, not a placeholder or a reference (`$TOKEN`, `${X}`,
/// `<token>`, `{{ x }}`, `%s`, `xxxx`, `****`, `changeme`).
fn opaque_credential(s: &[u8]) -> bool {
    !matches!(s.first(), Some(b'$' | b'{' | b'<' | b'%' | b'*'))
        && !s.ends_with(b"}")
        && !super::entropy::is_placeholder(s)
        && !super::entropy::is_sequential(s)
}

/// A Slack token whose random part is random: the last `-`-separated part of an
/// `xox[abposr]-` token has 8 or more characters with a letter and a digit (Slack's are 24-32
/// random characters), so `xoxb-12345-abcd234` and `xoxp-1-RANDOMSTRINGHERE` (inside
/// gitleaks' `xoxe.xoxp-1-...` placeholders) are not tokens; `xoxe`/`xapp-` forms have their
/// own lengths in the regex.
fn slack_token_body(s: &[u8]) -> bool {
    if s.len() < 5 || !s[..3].eq_ignore_ascii_case(b"xox") || s[3].eq_ignore_ascii_case(&b'e') {
        return true;
    }
    let last = s.rsplit(|&b| b == b'-').next().unwrap_or(s);
    last.len() >= 8
        && last.iter().any(u8::is_ascii_digit)
        && last.iter().any(u8::is_ascii_alphabetic)
}

/// A base64 value (`LS0tLS1CRUdJTi` is `-----BEGIN`) whose decoded head is a private key's
/// armour line and which holds a key body.
fn is_base64_private_key(s: &[u8]) -> bool {
    use base64::Engine;
    let head = &s[..s.len().min(96) / 4 * 4];
    match base64::engine::general_purpose::STANDARD.decode(head) {
        Ok(h) => {
            let line = h.split(|&b| b == b'\n').next().unwrap_or(&[]);
            line.starts_with(b"-----BEGIN ")
                && line.windows(11).any(|w| w == b"PRIVATE KEY")
                && s.len() >= 200
        }
        Err(_) => false,
    }
}

/// Every detector, most specific first: when two rules find the same bytes, the first wins.
pub static RULES: &[Rule] = &[
    // --- Private keys (multi-line) ---
    Rule {
        lines_after: 400,
        check: Some(has_key_body),
        ..rule(
            "private-key",
            "Private key (PEM, OpenSSH, PGP, SSH2)",
            &["-----begin"],
            r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S]{64,}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----",
        )
    },
    // A rule of its own, not an alternative of the one above: there, each BEGIN's match
    // would look on for an END to the window's end (quadratic on BEGIN lines repeated).
    // A whole block is found by both; the longer (`private-key`) wins.
    Rule {
        lines_after: 400,
        check: Some(has_key_body),
        ..rule(
            "private-key-open",
            "A private key block without its END line (`head -n 3 key.pem`): its armour line and the base64 lines that follow",
            &["-----begin"],
            concat!(
                r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[ \t]*\r?\n",
                r"(?:[A-Za-z][A-Za-z-]{0,40}:[^\r\n]{0,200}\r?\n|[ \t]*\r?\n)*",
                r"(?:[A-Za-z0-9+/=]{4,200}[ \t]*(?:\r?\n|$))+"
            ),
        )
    },
    Rule {
        back: 16 * 1024,
        check: Some(has_key_body),
        ..rule(
            "private-key-tail",
            "The end of a private key block without its BEGIN line (`tail key.pem`): its base64 lines and END line",
            // The armour's end, not `-----end`: an anchor `----` would be searched in
            // every dashed line.
            &["private key-----", "private key block-----"],
            r"(?m)(?P<s>(?:^[A-Za-z0-9+/=]{4,200}\r?\n){2,}-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)",
        )
    },
    // Key lines with neither armour line (`sed -n 2,5p key.pem`, a body pasted alone): a
    // base64 line that opens with a private key's DER (the version `INTEGER 0` or `1` then
    // the key, which no certificate nor public key starts so: theirs hold `AwIBAgI`,
    // `AAOC`, `KoZIzj0CAQ`), and the base64 lines that follow it.
    Rule {
        lines_after: 400,
        check: Some(has_key_body),
        ..exact(
            "private-key-body",
            "The base64 lines of a private key without its armour lines, from a line that opens with a private key's DER (PKCS#1 RSA, PKCS#8, SEC1 EC, OpenSSH)",
            &[
                "IBAAKCAQEA",
                "IBAAKCAgEA",
                "IBAAKCAYEA",
                "IBAAKBgQ",
                "IBADANBgkqhkiG9w0BAQEFAASC",
                "MHcCAQEEI",
                "MIGkAgEBBDA",
                "MIHcAgEBBEI",
                "MIGHAgEAMBMGByqGSM49",
                "MIG2AgEAMBAGByqGSM49",
                "MC4CAQAwBQYDK2VwBCIEI",
                "b3BlbnNzaC1rZXktdjEAAAAA",
            ],
            concat!(
                r"(?m)(?:^|[^A-Za-z0-9+/=])(?P<s>(?:",
                // PKCS#1 RSA (1024 to 4096 bits) and PKCS#8 RSA: `SEQUENCE`, `INTEGER 0`,
                // then the modulus or the rsaEncryption OID and the `OCTET STRING`.
                r"MII[A-Za-z0-9+/]{3}IBA(?:AKCAQEA|AKCAgEA|AKCAYEA|AKBgQ|DANBgkqhkiG9w0BAQEFAASC)",
                // SEC1 EC (P-256, P-384, P-521), PKCS#8 EC (P-256, P-384), PKCS#8 Ed25519,
                // OpenSSH's `openssh-key-v1`.
                r"|MHcCAQEEI|MIGkAgEBBDA|MIHcAgEBBEI|MIGHAgEAMBMGByqGSM49|MIG2AgEAMBAGByqGSM49",
                r"|MC4CAQAwBQYDK2VwBCIEI|b3BlbnNzaC1rZXktdjEAAAAA",
                r")[A-Za-z0-9+/=]*(?:[ \t]*\r?\n[ \t]*[A-Za-z0-9+/]{2,200}={0,2})*)",
                r"[ \t]*(?:\r?\n|$)"
            ),
        )
    },
    Rule {
        lines_after: 60,
        ..rule(
            "putty-private-key",
            "PuTTY private key file",
            &["putty-user-key-file-"],
            r"PuTTY-User-Key-File-[23]: [^\n]{1,200}\n[\s\S]{0,4000}?Private-Lines: \d+\n(?:[A-Za-z0-9+/=]+\n?){1,100}",
        )
    },
    // --- Cloud providers ---
    exact(
        "aws-access-key-id",
        "AWS access key id",
        &["AKIA", "ASIA", "ABIA", "ACCA", "A3T"],
        concat!(
            // Bounded on both sides: inside a longer run of capitals and digits (an
            // upper-case hex digest holding `ACCA` or `AKIA`) it is no key id.
            r"(?:^|[^A-Za-z0-9])(?P<s>(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})",
            r"(?:[^A-Za-z0-9]|$)"
        ),
    ),
    with_entropy(
        rule(
            "aws-secret-access-key",
            "AWS secret access key",
            &["aws"],
            concat!(
                r#"(?i)aws[A-Za-z0-9_.-]{0,20}(?:key|pwd|pw|password|pass|token|secret)"#,
                assign!(),
                r"(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"
            ),
        ),
        3.5,
    ),
    rule(
        "azure-storage-key",
        "Azure storage account key",
        &["accountkey"],
        r"(?i)AccountKey=(?P<s>[a-zA-Z0-9+/]{86}==)",
    ),
    rule(
        "azure-ad-client-secret",
        "Azure AD client secret",
        &["q~"],
        r#"(?:^|[\\'"`\s>=:(,])(?P<s>[a-zA-Z0-9_~.]{3}\dQ~[a-zA-Z0-9_~.-]{31,34})(?:$|[\\'"`\s<),])"#,
    ),
    exact(
        "google-api-key",
        "Google (GCP, Firebase, Maps) API key",
        &["AIza"],
        concat!(r"(?P<s>AIza[0-9A-Za-z_-]{35})", end!()),
    ),
    exact(
        "gcp-oauth-client-secret",
        "Google OAuth client secret",
        &["GOCSPX-"],
        concat!(r"(?P<s>GOCSPX-[a-zA-Z0-9_-]{28})", end!()),
    ),
    rule(
        "digitalocean-token",
        "DigitalOcean token",
        &["dop_v1_", "doo_v1_", "dor_v1_"],
        concat!(r"(?P<s>do[opr]_v1_[a-f0-9]{64})", end!()),
    ),
    rule(
        "heroku-api-key",
        "Heroku API key",
        &["heroku", "hrku-"],
        concat!(
            r#"(?i)(?:heroku"#,
            assign!(),
            r"(?P<s>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})|(?P<s2>HRKU-AA[0-9a-zA-Z_-]{58}))",
            end!()
        ),
    ),
    exact(
        "alibaba-access-key-id",
        "Alibaba Cloud access key id",
        &["LTAI"],
        concat!(start!(), r"(?P<s>LTAI[a-zA-Z0-9]{20})", end!()),
    ),
    rule(
        "ibm-cloud-iam-key",
        "IBM Cloud IAM key",
        &["ibm"],
        concat!(
            r"(?i)ibm[_-]?cloud[_-]?(?:iam)?[_-]?(?:api)?[_-]?(?:key|pwd|password|pass|token)",
            assign!(),
            r"(?P<s>[a-zA-Z0-9_-]{44})",
            end!()
        ),
    ),
    rule(
        "ibm-cos-hmac-secret",
        "IBM Cloud Object Storage HMAC secret",
        &[
            "secret_access_key",
            "secret-access-key",
            "secretaccesskey",
            "secret_key",
        ],
        concat!(
            r"(?i)(?:ibm)?[_-]?(?:cos)?[_-]?(?:hmac)?[_-]?secret[_-]?(?:access)?[_-]?key",
            assign!(),
            r"(?P<s>[a-f0-9]{48})(?:[^a-f0-9]|$)"
        ),
    ),
    rule(
        "softlayer-api-key",
        "SoftLayer API key",
        &["softlayer"],
        concat!(
            r"(?i)(?:softlayer[_-]?(?:api)?[_-]?(?:key|pwd|password|pass|token)",
            assign!(),
            r"(?P<s>[a-z0-9]{64})|api\.softlayer\.com/soap/v3(?:\.1)?/(?P<s2>[a-z0-9]{64}))",
            r"(?:[^a-z0-9]|$)"
        ),
    ),
    rule(
        "cloudant-credential",
        "IBM Cloudant password or API key",
        &["cloudant"],
        concat!(
            r"(?i)(?:cloudant[_-]?(?:api)?[_-]?(?:key|pwd|password|pass|secret)",
            assign!(),
            r"(?P<s>[0-9a-f]{64}|[a-z]{24})",
            r"|[a-z0-9-]{1,64}:(?P<s2>[0-9a-f]{64})@[a-z0-9-]{1,64}\.cloudant\.com)",
            r"(?:[^a-z0-9]|$)"
        ),
    ),
    // --- Source hosting and CI ---
    Rule {
        checksum: Some(base62_crc32_verifies),
        ..exact(
            "github-pat",
            "GitHub personal access token (classic)",
            &["ghp_"],
            concat!(r"(?P<s>ghp_[A-Za-z0-9]{36})", end!()),
        )
    },
    exact(
        "github-fine-grained-pat",
        "GitHub fine-grained personal access token",
        &["github_pat_"],
        concat!(r"(?P<s>github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})", end!()),
    ),
    Rule {
        checksum: Some(base62_crc32_verifies),
        ..exact(
            "github-oauth-token",
            "GitHub OAuth access token",
            &["gho_"],
            concat!(r"(?P<s>gho_[A-Za-z0-9]{36})", end!()),
        )
    },
    Rule {
        checksum: Some(base62_crc32_verifies),
        ..exact(
            "github-app-token",
            "GitHub App user-to-server or installation token",
            &["ghu_", "ghs_"],
            concat!(r"(?P<s>gh[us]_[A-Za-z0-9]{36})", end!()),
        )
    },
    Rule {
        checksum: Some(base62_crc32_verifies),
        ..exact(
            "github-refresh-token",
            "GitHub refresh token",
            &["ghr_"],
            concat!(r"(?P<s>ghr_[A-Za-z0-9]{36,76})", end!()),
        )
    },
    exact(
        "gitlab-token",
        "GitLab token (personal, deploy, feed, runner, OAuth, SCIM, CI, trigger, agent, mail)",
        &[
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "glcbt-",
            "glimt-",
            "glptt-",
            "glagent-",
            "gloas-",
            "GR1348941",
            "glffct-",
        ],
        concat!(
            // Routable tokens (`glpat-<payload>.<2-char version><7-char CRC>`) first.
            r"(?P<s>(?:glpat|glrt)-[A-Za-z0-9_-]{27,300}\.[0-9a-z]{9}",
            r"|(?:glpat|gldt|glft|glsoat|glrt|glffct)-[A-Za-z0-9_-]{20,50}",
            r"|GR1348941[A-Za-z0-9_-]{20,50}",
            r"|glcbt-(?:[0-9a-fA-F]{2}_)?[A-Za-z0-9_-]{20,50}",
            r"|glimt-[A-Za-z0-9_-]{25}",
            r"|glptt-[A-Za-z0-9_-]{40}",
            r"|glagent-[A-Za-z0-9_-]{50,1024}",
            r"|gloas-[A-Za-z0-9_-]{64})",
            end!()
        ),
    ),
    Rule {
        checksum: Some(npm_checksum),
        ..exact(
            "npm-token",
            "npm access token",
            &["npm_", "_authToken"],
            concat!(
                r"(?:(?P<s>npm_[A-Za-z0-9]{36})",
                end!(),
                // Only under a registry scope (`//registry.npmjs.org/:_authToken=`).
                r"|/:_authToken=\s*(?P<s2>[A-Fa-f0-9-]{36})(?:[^A-Fa-f0-9-]|$))"
            ),
        )
    },
    exact(
        "pypi-token",
        "PyPI upload token",
        &["pypi-AgEIcHlwaS5vcmc", "pypi-AgENdGVzdC5weXBpLm9yZw"],
        concat!(
            r"(?P<s>pypi-Ag(?:EIcHlwaS5vcmc|ENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{70,1000})",
            end!()
        ),
    ),
    exact(
        "rubygems-token",
        "RubyGems API token",
        &["rubygems_"],
        concat!(r"(?P<s>rubygems_[a-f0-9]{48})", end!()),
    ),
    exact(
        "crates-io-token",
        "crates.io API token",
        &["cio"],
        concat!(start!(), r"(?P<s>cio[a-zA-Z0-9]{32})", end!()),
    ),
    exact(
        "dockerhub-pat",
        "Docker Hub personal access token",
        &["dckr_pat_"],
        concat!(r"(?P<s>dckr_pat_[a-zA-Z0-9_-]{27})", end!()),
    ),
    exact(
        "sonarqube-token",
        "SonarQube token",
        &["squ_", "sqp_", "sqa_"],
        concat!(start!(), r"(?P<s>sq[upa]_[a-f0-9]{40})", end!()),
    ),
    exact(
        "atlassian-api-token",
        "Atlassian (Jira, Confluence) API token",
        &["ATATT3"],
        concat!(r"(?P<s>ATATT3[A-Za-z0-9_=-]{186})", end!()),
    ),
    exact(
        "linear-api-key",
        "Linear API key",
        &["lin_api_"],
        concat!(r"(?P<s>lin_api_[a-zA-Z0-9]{40})", end!()),
    ),
    exact(
        "postman-api-key",
        "Postman API key",
        &["PMAK-"],
        concat!(r"(?P<s>PMAK-[a-f0-9]{24}-[a-f0-9]{34})", end!()),
    ),
    // --- AI providers ---
    exact(
        "openai-api-key",
        "OpenAI API key",
        &["T3BlbkFJ"],
        concat!(
            r"(?P<s>sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,200}T3BlbkFJ[A-Za-z0-9_-]{20,200}|sk-[A-Za-z0-9_-]{0,200}[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9_-]{0,200}[A-Za-z0-9]{20})",
            end!()
        ),
    ),
    exact(
        "anthropic-api-key",
        "Anthropic API key",
        &["sk-ant-"],
        concat!(
            r"(?P<s>sk-ant-(?:api03|admin01|oat01|ort01)-[a-zA-Z0-9_-]{93}AA)",
            end!()
        ),
    ),
    exact(
        "huggingface-token",
        "Hugging Face access token",
        &["hf_", "api_org_"],
        concat!(start!(), r"(?P<s>(?:hf_|api_org_)[a-zA-Z]{34})", end!()),
    ),
    // --- Payments, messaging, SaaS ---
    exact(
        "stripe-key",
        "Stripe secret or restricted key",
        &[
            "sk_live_", "rk_live_", "sk_test_", "rk_test_", "sk_prod_", "rk_prod_",
        ],
        concat!(
            start!(),
            r"(?P<s>[rs]k_(?:live|test|prod)_[0-9a-zA-Z]{24,99})",
            end!()
        ),
    ),
    exact(
        "stripe-webhook-secret",
        "Stripe webhook signing secret",
        &["whsec_"],
        concat!(r"(?P<s>whsec_[a-zA-Z0-9]{32,100})", end!()),
    ),
    exact(
        "square-oauth-secret",
        "Square OAuth secret",
        &["sq0csp-"],
        concat!(r"(?P<s>sq0csp-[0-9A-Za-z_-]{43})", end!()),
    ),
    exact(
        "square-access-token",
        "Square access token",
        &["sq0atp-", "EAAA"],
        concat!(
            start!(),
            r"(?P<s>(?:sq0atp-[0-9A-Za-z_-]{22}|EAAA[a-zA-Z0-9_+=-]{60}))",
            end!()
        ),
    ),
    exact(
        "sendgrid-api-key",
        "SendGrid API key",
        &["SG."],
        concat!(r"(?P<s>SG\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9_-]{43})", end!()),
    ),
    rule(
        "mailchimp-api-key",
        "Mailchimp API key",
        &["-us"],
        concat!(start!(), r"(?P<s>[0-9a-f]{32}-us[0-9]{1,2})(?:[^0-9]|$)"),
    ),
    rule(
        "mailgun-api-key",
        "Mailgun API key",
        &["mailgun"],
        concat!(
            r"(?i)mailgun",
            assign!(),
            r"(?P<s>key-[a-f0-9]{32})(?:[^a-f0-9]|$)"
        ),
    ),
    exact(
        "twilio-key",
        "Twilio account SID or API key",
        &["AC", "SK"],
        concat!(start!(), r"(?P<s>(?:AC|SK)[a-f0-9]{32})(?:[^A-Za-z0-9]|$)"),
    ),
    Rule {
        check: Some(slack_token_body),
        ..rule(
            "slack-token",
            "Slack bot, user, app or configuration token",
            &[
                "xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe", "xapp-",
            ],
            concat!(
                r"(?i)(?P<s>xox[abposr]-(?:\d{1,20}-){1,6}[a-z0-9]{1,100}(?:-[a-z0-9]{1,100}){0,6}",
                r"|xoxe(?:\.xox[bp])?-\d-[A-Z0-9]{146,300}",
                r"|xapp-\d-[A-Z0-9]{1,32}-\d{1,20}-[a-z0-9]{1,128})",
                end!()
            ),
        )
    },
    rule(
        "slack-webhook",
        "Slack incoming webhook URL",
        &["hooks.slack.com"],
        // Scheme optional or `http://`, as gitleaks' rule has it (config values, docs).
        r"(?P<s>(?:https?://)?hooks\.slack\.com/(?:(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}|(?:workflows|triggers)/T[A-Z0-9]{8,12}/A[A-Z0-9]{8,12}/[0-9]{8,20}/[A-Za-z0-9]{20,40}|services/T[a-zA-Z0-9_]{1,40}/B[a-zA-Z0-9_]{1,40}/[a-zA-Z0-9_]{1,100}))",
    ),
    rule(
        "discord-bot-token",
        "Discord bot token",
        &["discord"],
        concat!(
            r"(?i:discord)[^\n]{0,40}?(?P<s>[MNO][a-zA-Z0-9_-]{23,25}\.[a-zA-Z0-9_-]{6}\.[a-zA-Z0-9_-]{27,38})",
            end!()
        ),
    ),
    rule(
        "discord-webhook",
        "Discord webhook URL",
        &["discord.com/api/webhooks", "discordapp.com/api/webhooks"],
        r"(?P<s>https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/[A-Za-z0-9_-]{60,68})",
    ),
    exact(
        "telegram-bot-token",
        "Telegram bot token",
        &[":AA", "telegr", "Telegr", "TELEGR"],
        concat!(
            r"(?:",
            start!(),
            r"(?P<s>[0-9]{8,10}:AA[0-9A-Za-z_-]{33})",
            r"|(?i:telegr)[A-Za-z0-9_.-]{0,20}",
            assign!(),
            r"`?(?P<s2>[0-9]{5,16}:A[0-9A-Za-z_-]{34}))",
            end!()
        ),
    ),
    Rule {
        check: Some(jwt_structure),
        ..rule(
            "jwt",
            "JSON Web Token",
            &["eyj"],
            concat!(
                start!(),
                r"(?P<s>eyJ[A-Za-z0-9_-]{8,}={0,2}\.eyJ[A-Za-z0-9_-]{8,}={0,2}(?:\.(?:[A-Za-z0-9_-]{8,}={0,2})?)?)",
                r"(?:[^A-Za-z0-9_=.-]|$)"
            ),
        )
    },
    exact(
        "artifactory-api-key",
        "JFrog Artifactory API key",
        &["AKC"],
        // Bounded by any byte that cannot continue the token or a base64 run around it: a
        // backtick, `<...>`, an XML element's text, brackets (detect-secrets' class, only
        // whitespace, `=`, `:` and quotes, missed those).
        r#"(?:^|[^A-Za-z0-9_+/-])(?P<s>AKC[a-zA-Z0-9]{10,100})(?:[^A-Za-z0-9_+/=-]|$)"#,
    ),
    exact(
        "artifactory-password",
        "JFrog Artifactory password (encrypted form)",
        &[
            "AP0", "AP1", "AP2", "AP3", "AP4", "AP5", "AP6", "AP7", "AP8", "AP9", "APA", "APB",
            "APC", "APD", "APE", "APF",
        ],
        // Bounded as `artifactory-api-key` is.
        r#"(?:^|[^A-Za-z0-9_+/-])(?P<s>AP[0-9A-F][a-zA-Z0-9]{8,100})(?:[^A-Za-z0-9_+/=-]|$)"#,
    ),
    exact(
        "shopify-token",
        "Shopify access token or shared secret",
        &["shpat_", "shpss_", "shpca_", "shppa_"],
        concat!(r"(?P<s>shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32})", end!()),
    ),
    rule(
        "datadog-api-key",
        "Datadog API or application key",
        &[
            "datadog",
            "dd_api_key",
            "dd-api-key",
            "dd_app_key",
            "dd-app-key",
        ],
        concat!(
            r"(?i)(?:datadog|dd)[_-]?(?:api|app|application)?[_-]?key",
            assign!(),
            r"(?P<s>[a-f0-9]{32}|[a-f0-9]{40})(?:[^a-f0-9]|$)"
        ),
    ),
    exact(
        "newrelic-key",
        "New Relic user API key or browser key",
        &["NRAK-", "NRJS-"],
        concat!(r"(?P<s>NRAK-[A-Z0-9]{27}|NRJS-[a-f0-9]{19})", end!()),
    ),
    exact(
        "sentry-token",
        "Sentry organization or user token",
        &["sntrys_", "sntryu_"],
        concat!(
            r"(?P<s>sntrys_eyJ[a-zA-Z0-9=_+/]{197}|sntryu_[a-f0-9]{64})",
            end!()
        ),
    ),
    exact(
        "grafana-token",
        "Grafana cloud or service account token",
        &["glc_", "glsa_"],
        concat!(
            start!(),
            r"(?P<s>glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})",
            r"(?:[^A-Za-z0-9+/=_-]|$)"
        ),
    ),
    rule(
        "okta-api-token",
        "Okta API token",
        &["okta"],
        concat!(
            r"(?i)okta[A-Za-z0-9_.-]{0,20}(?:token|key|secret)",
            assign!(),
            r"(?P<s>00[a-zA-Z0-9_-]{40})",
            end!()
        ),
    ),
    exact(
        "facebook-access-token",
        "Facebook access token",
        &["EAACEdEose0cBA"],
        concat!(r"(?P<s>EAACEdEose0cBA[0-9A-Za-z]{20,400})", end!()),
    ),
    exact(
        "twitter-bearer-token",
        "Twitter/X bearer token",
        &["AAAAAAAAAAAAAAAAAAAAA"],
        concat!(
            r"(?P<s>AAAAAAAAAAAAAAAAAAAAA[a-zA-Z0-9%]{80,100})",
            r"(?:[^a-zA-Z0-9%]|$)"
        ),
    ),
    exact(
        "mapbox-secret-token",
        "Mapbox secret token",
        &["sk.eyJ"],
        concat!(
            r"(?P<s>sk\.eyJ[a-zA-Z0-9]{80,300}\.[a-zA-Z0-9_-]{22})",
            end!()
        ),
    ),
    exact(
        "adobe-client-secret",
        "Adobe client secret",
        &["p8e-"],
        concat!(start!(), r"(?P<s>p8e-[a-zA-Z0-9]{32})", end!()),
    ),
    exact(
        "dropbox-token",
        "Dropbox short-lived access token",
        &["sl."],
        concat!(start!(), r"(?P<s>sl\.[a-zA-Z0-9_=-]{135})", end!()),
    ),
    exact(
        "databricks-token",
        "Databricks access token",
        &["dapi"],
        concat!(start!(), r"(?P<s>dapi[a-f0-9]{32}(?:-\d)?)", end!()),
    ),
    exact(
        "doppler-token",
        "Doppler API token",
        &["dp.pt."],
        concat!(r"(?P<s>dp\.pt\.[a-zA-Z0-9]{43})", end!()),
    ),
    // --- Infrastructure ---
    exact(
        "hashicorp-vault-token",
        "HashiCorp Vault service or batch token",
        &["hvs.", "hvb."],
        concat!(
            r"(?P<s>hvs\.[a-zA-Z0-9_-]{90,120}|hvb\.[a-zA-Z0-9_-]{138,300})",
            end!()
        ),
    ),
    exact(
        "terraform-cloud-token",
        "Terraform Cloud / Enterprise API token",
        &[".atlasv1."],
        concat!(
            start!(),
            r"(?P<s>[a-zA-Z0-9]{14}\.atlasv1\.[a-zA-Z0-9_=-]{60,70})",
            end!()
        ),
    ),
    exact(
        "pulumi-token",
        "Pulumi access token",
        &["pul-"],
        concat!(start!(), r"(?P<s>pul-[a-f0-9]{40})", end!()),
    ),
    exact(
        "age-secret-key",
        "age encryption secret key",
        &["AGE-SECRET-KEY-1"],
        r"(?P<s>AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})",
    ),
    exact(
        "flyio-token",
        "Fly.io access token",
        &["fo1_", "fm1", "fm2"],
        concat!(
            start!(),
            r"(?P<s>fo1_[a-zA-Z0-9_-]{43}|fm[12][a-z]?_[a-zA-Z0-9+/]{100,1000}={0,3})",
            r"(?:[^A-Za-z0-9+/=_-]|$)"
        ),
    ),
    exact(
        "planetscale-token",
        "PlanetScale password or token",
        &["pscale_"],
        concat!(
            r"(?P<s>pscale_(?:tkn|pw|oauth)_[a-zA-Z0-9_=.-]{32,64})",
            end!()
        ),
    ),
    // --- Recall (issue 16): vendor shapes after gitleaks' config, HTTP credentials,
    // connection strings outside URLs, base64-wrapped PEM keys ---
    exact(
        "1password-service-account-token",
        "1Password service account token",
        &["ops_eyJ"],
        r"(?P<s>ops_eyJ[a-zA-Z0-9+/]{250}[a-zA-Z0-9+/]*={0,3})(?:[^A-Za-z0-9+/=]|$)",
    ),
    exact(
        "1password-secret-key",
        "1Password account secret key",
        &["A3-"],
        concat!(
            r"(?:^|[^A-Za-z0-9-])(?P<s>A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5})",
            r"(?:[^A-Za-z0-9-]|$)"
        ),
    ),
    exact(
        "aws-bedrock-api-key",
        "Amazon Bedrock API key (long-lived or short-lived)",
        &["ABSKQmVkcm9ja0FQSUtleS", "bedrock-api-key-"],
        concat!(
            start!(),
            r"(?P<s>ABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{100,150}={0,2}",
            r"|bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/%=&?._-]{40,4000})",
            r"(?:[^A-Za-z0-9+/%=&?._-]|$)"
        ),
    ),
    exact(
        "gitlab-session-cookie",
        "GitLab session cookie",
        &["_gitlab_session="],
        r"_gitlab_session=(?P<s>[0-9a-z]{32})(?:[^0-9a-z]|$)",
    ),
    Rule {
        check: Some(authorization_credential),
        parts: Some(authorization_parts),
        ..rule(
            "http-authorization",
            "HTTP Authorization or Proxy-Authorization header, any scheme (Bearer, Basic, token, AWS4-HMAC-SHA256, Digest, Negotiate, NTLM, custom); of a parameter list, the secret parameters (Digest's `response`, SigV4's `Signature`)",
            &["authorization"],
            concat!(
                r#"(?i)authorization['"]?\s{0,5}(?::|=>|=)\s{0,5}(?:"#,
                // Bearer, Basic, token: the credential, one token (a Python bytes literal's
                // `b'` too: botocore's `--debug` prints its headers as a dict's repr).
                r#"b?['"]?\s{0,5}(?:bearer|basic|token)\s{1,5}"#,
                r"(?P<s>[A-Za-z0-9._~+/=-]{12,4000})(?:[^A-Za-z0-9._~+/=-]|$)",
                // Any other scheme: its parameters, to the closing quote of a JSON string...
                r#"|b?"[A-Za-z][A-Za-z0-9_.-]{1,40}[ \t]{1,5}(?P<s2>(?:[^"\\\n]|\\.){8,4000})""#,
                // ... or to the end of the line (a `'...'` argument's closing quote aside).
                r#"|(?:b?')?[A-Za-z][A-Za-z0-9_.-]{1,40}[ \t]{1,5}(?P<s3>[^\s'"][^\r\n']{6,4000}[^\s'])"#,
                r")"
            ),
        )
    },
    Rule {
        lines_after: 1,
        check: Some(not_a_run),
        ..rule(
            "aws-sigv4-signature",
            "AWS SigV4 request signature that botocore's `--debug` log prints alone on the line after `Signature:`",
            &["signature:"],
            r"(?i)signature:[ \t]*\r?\n(?P<s>[0-9a-f]{64})[ \t]*(?:\r?\n|$)",
        )
    },
    Rule {
        check: Some(opaque_credential),
        ..rule(
            "curl-user-password",
            "Password in a curl -u/--user option",
            &["curl"],
            concat!(
                r#"(?i)\bcurl(?:\s[^\n|;&]{0,300}?)?\s(?:-u\s{0,5}|--user[\s=]{1,5})['"]?[^\s:'"]{1,100}:"#,
                r#"(?P<s>[^\s'"]{3,200})"#
            ),
        )
    },
    Rule {
        check: Some(opaque_credential),
        ..rule(
            "connection-string-password",
            "Password in a key=value connection string (ADO.NET, ODBC, JDBC properties, libpq)",
            &["password", "pwd"],
            concat!(
                r#"(?i)(?:^|[\s;'"])(?:host|hostaddr|server|data source|dbname|database|user id|uid|user)\s{0,3}=[^\n]{0,300}?[\s;'"]"#,
                r#"(?:password|pwd)\s{0,3}=\s{0,3}(?:'(?P<s>[^'\n]{3,200})'|(?P<s2>[^\s;'"]{3,200}))"#
            ),
        )
    },
    Rule {
        lines_after: 6,
        check: Some(opaque_credential),
        ..rule(
            "netrc-password",
            "Password in a .netrc machine entry",
            &["machine"],
            concat!(
                r"(?i)(?:^|\s)machine\s{1,5}[^\s]{1,200}(?:\s{1,5}(?:login|account|port)\s{1,5}[^\s]{1,200}){0,3}",
                r"\s{1,5}password\s{1,5}(?P<s>[^\s]{1,200})"
            ),
        )
    },
    Rule {
        check: Some(is_base64_private_key),
        ..exact(
            "private-key-base64",
            "PEM private key encoded in base64 (Kubernetes Secret, JSON or YAML value)",
            // Unbounded tail, not `{100,12000}`: a counted repetition that long keeps one
            // regex thread per start alive over a run of base64 (quadratic on
            // `LS0tLS1CRUdJTi` repeated); the scanner drops matches over MAX_TOKEN.
            &["LS0tLS1CRUdJTi"],
            r"(?P<s>LS0tLS1CRUdJTi[A-Za-z0-9+/]{100}[A-Za-z0-9+/]*={0,2})(?:[^A-Za-z0-9+/=]|$)",
        )
    },
    // --- What tools print (issue 38) ---
    Rule {
        check: Some(decodes_to_user_password),
        ..rule(
            "docker-config-auth",
            "Docker config.json or DOCKER_AUTH_CONFIG `auth` entry (base64 of user:password)",
            &["auth\"", "auth\\\""],
            r#"(?i)(?:^|[^A-Za-z0-9_])auth\\?"\s{0,5}:\s{0,5}\\?"(?P<s>[A-Za-z0-9+/]{4,}={0,2})\\?""#,
        )
    },
    Rule {
        check: Some(decodes_to_text),
        ..rule(
            "npmrc-auth",
            "npm .npmrc `_auth` (base64 of user:password) or `:_password` (base64 password)",
            &["_auth", "_password"],
            r#"(?i)(?:^|[\s:/])_(?:auth|password)\s{0,5}=\s{0,5}["']?(?P<s>[A-Za-z0-9+/]{4,}={0,2})(?:["'\s]|$)"#,
        )
    },
    Rule {
        parts: Some(cookie_values),
        ..rule(
            "http-cookie",
            "Cookie values in a `Cookie:` request header (curl -v `> Cookie: ...`)",
            &["cookie:", "cookie\":", "cookie':"],
            r#"(?i)(?:^|[^A-Za-z0-9-])cookie['"]?[ \t]{0,5}:[ \t]{0,5}['"]?(?P<s>[^\r\n'"]{3,8000})"#,
        )
    },
    Rule {
        parts: Some(set_cookie_value),
        ..rule(
            "http-set-cookie",
            "The cookie value in a `Set-Cookie:` response header (its name and attributes stay)",
            &["set-cookie"],
            r#"(?i)set-cookie['"]?[ \t]{0,5}:[ \t]{0,5}['"]?(?P<s>[^\r\n'"]{3,8000})"#,
        )
    },
    with_entropy(
        exact(
            "google-oauth-access-token",
            "Google OAuth 2.0 access token (`ya29.`)",
            &["ya29."],
            concat!(
                start!(),
                r"(?P<s>ya29\.[A-Za-z0-9._-]{30,})",
                r"(?:[^A-Za-z0-9._-]|$)"
            ),
        ),
        3.0,
    ),
    Rule {
        check: Some(not_a_run),
        ..rule(
            "kubeadm-bootstrap-token",
            "kubeadm bootstrap token (`kubeadm join --token`, `kubeadm token list`, a bootstrap Secret's token-secret; alone on a line, as `kubeadm token create` prints it: `scan`'s line pass, see `is_bootstrap_token_line`)",
            &["kubeadm", "system:bootstrappers", "token-secret"],
            concat!(
                r"(?i)kubeadm\b[^\n]{0,400}?--token(?:[ \t]{1,5}|=)(?P<s>[a-z0-9]{6}\.[a-z0-9]{16})(?:[^a-z0-9]|$)",
                r"|(?:^|\s)(?P<s2>[a-z0-9]{6}\.[a-z0-9]{16})\s[^\n]{0,400}system:bootstrappers",
                r#"|token-secret['"]?[ \t]{0,5}:[ \t]{0,5}['"]?(?P<s3>[a-z0-9]{16}|[A-Za-z0-9+/]{22}==)(?:[^A-Za-z0-9+/=]|$)"#
            ),
        )
    },
    Rule {
        check: Some(opaque_credential),
        ..rule(
            "pgpass-password",
            "Password field of a .pgpass line (host:port:database:user:password; port 5432, 5433, 6432 or *)",
            &[":5432:", ":5433:", ":6432:", ":*:"],
            concat!(
                r"(?m)^[ \t]*(?:[^:\s\\]|\\.)+:(?:5432|5433|6432|\*):(?:[^:\s\\]|\\.)+:(?:[^:\s\\]|\\.)+:",
                r"(?P<s>(?:[^:\r\n\\]|\\.){3,400}?)[ \t]*\r?$"
            ),
        )
    },
    exact(
        "aws-ecr-password",
        "AWS ECR login password (`aws ecr get-login-password`: base64 of a JSON payload)",
        &["eyJwYXlsb2FkIjoi"],
        r"(?P<s>eyJwYXlsb2FkIjoi[A-Za-z0-9+/]{100,}={0,2})(?:[^A-Za-z0-9+/=]|$)",
    ),
    Rule {
        lines_after: 80,
        parts: Some(hex_dump_lines),
        ..rule(
            "openssl-private-key-dump",
            "Private key numbers in `openssl rsa/ec/pkey/genpkey -text` output (privateExponent, primes, exponents, coefficient, priv)",
            &[
                "privateexponent:",
                "prime1:",
                "prime2:",
                "exponent1:",
                "exponent2:",
                "coefficient:",
                "priv:",
                "private-key:",
            ],
            concat!(
                r"(?m)^[ \t]*(?:privateExponent|prime1|prime2|exponent1|exponent2|coefficient|priv|private-key):[ \t]*\r?\n",
                r"(?P<s>(?:[ \t]+[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2})*:?[ \t]*(?:\r?\n|$))+)"
            ),
        )
    },
    // --- gitleaks' rule families (issue 16): vendor prefixes and shapes ---
    rule(
        "airtable-pat",
        "Airtable personal access token (on a line naming Airtable, as gitleaks)",
        &["airtable"],
        concat!(start!(), r"(?P<s>pat[A-Za-z0-9]{14}\.[a-f0-9]{64})", end!()),
    ),
    with_entropy(
        exact(
            "artifactory-reference-token",
            "JFrog Artifactory reference token",
            &["cmVmd"],
            concat!(start!(), r"(?P<s>cmVmd[A-Za-z0-9]{59})", end!()),
        ),
        4.0,
    ),
    with_entropy(
        exact(
            "authress-access-key",
            "Authress service client access key",
            &[".acc_", ".acc-"],
            concat!(
                start!(),
                r"(?P<s>(?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_-][A-Za-z0-9-]{10,32}\.[A-Za-z0-9+/_=-]{30,120})",
                r"(?:[^A-Za-z0-9+/_=.-]|$)"
            ),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "clickhouse-cloud-key",
            "ClickHouse Cloud API secret key",
            &["4b1d"],
            concat!(start!(), r"(?P<s>4b1d[A-Za-z0-9]{38})", end!()),
        ),
        3.0,
    ),
    with_entropy(
        rule(
            "clojars-token",
            "Clojars deploy token",
            &["clojars_"],
            concat!(start!(), r"(?i)(?P<s>CLOJARS_[a-z0-9]{60})", end!()),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "cloudflare-origin-ca-key",
            "Cloudflare Origin CA key",
            &["v1.0-"],
            concat!(start!(), r"(?P<s>v1\.0-[a-f0-9]{24}-[a-f0-9]{146})", end!()),
        ),
        2.0,
    ),
    with_entropy(
        rule(
            "defined-networking-token",
            "Defined Networking (Nebula) API token",
            &["dnkey-"],
            concat!(
                start!(),
                r"(?P<s>dnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{52})",
                end!()
            ),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "duffel-token",
            "Duffel API token",
            &["duffel_"],
            concat!(
                start!(),
                r"(?P<s>duffel_(?:test|live)_[A-Za-z0-9_=-]{43})",
                end!()
            ),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "dynatrace-token",
            "Dynatrace API token",
            &["dt0c01."],
            concat!(
                start!(),
                r"(?P<s>dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64})",
                end!()
            ),
        ),
        3.0,
    ),
    with_entropy(
        exact(
            "easypost-token",
            "EasyPost API token (production or test)",
            &["EZAK", "EZTK"],
            concat!(start!(), r"(?P<s>EZ[AT]K[A-Za-z0-9]{54})", end!()),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "facebook-page-access-token",
            "Facebook page or user access token",
            &["EAAM", "EAAC"],
            concat!(start!(), r"(?P<s>EAA[MC][A-Za-z0-9]{100,400})", end!()),
        ),
        4.0,
    ),
    with_entropy(
        exact(
            "flutterwave-key",
            "Flutterwave secret, public or encryption key (test)",
            &["FLWSECK_TEST", "FLWPUBK_TEST"],
            concat!(
                start!(),
                r"(?P<s>FLW(?:SECK|PUBK)_TEST-[a-hA-H0-9]{32}-X|FLWSECK_TEST[a-hA-H0-9]{12})",
                end!()
            ),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "frameio-token",
            "Frame.io API token",
            &["fio-u-"],
            concat!(start!(), r"(?P<s>fio-u-[A-Za-z0-9_=-]{64})", end!()),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "grafana-api-key",
            "Grafana API key (legacy)",
            &["eyJrIjoi"],
            concat!(
                start!(),
                r"(?P<s>eyJrIjoi[A-Za-z0-9]{70,400}={0,3})",
                r"(?:[^A-Za-z0-9_=-]|$)"
            ),
        ),
        3.0,
    ),
    with_entropy(
        exact(
            "harness-api-key",
            "Harness personal or service account token",
            &["pat.", "sat."],
            concat!(
                start!(),
                r"(?P<s>(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20})",
                end!()
            ),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "infracost-token",
            "Infracost API token",
            &["ico-"],
            concat!(start!(), r"(?P<s>ico-[A-Za-z0-9]{32})", end!()),
        ),
        3.0,
    ),
    with_entropy(
        exact(
            "intra42-client-secret",
            "42 Intra client secret",
            &["s-s4t2ud-", "s-s4t2af-"],
            concat!(start!(), r"(?P<s>s-s4t2(?:ud|af)-[a-f0-9]{64})", end!()),
        ),
        3.0,
    ),
    with_entropy(
        exact(
            "maxmind-license-key",
            "MaxMind license key",
            &["_mmk"],
            concat!(
                start!(),
                r"(?P<s>[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk)",
                end!()
            ),
        ),
        4.0,
    ),
    rule(
        "microsoft-teams-webhook",
        "Microsoft Teams incoming webhook URL",
        &["webhook.office.com"],
        concat!(
            r"(?P<s>https://[a-z0-9]{1,64}\.webhook\.office\.com/webhookb2/[a-z0-9]{8}-(?:[a-z0-9]{4}-){3}[a-z0-9]{12}@[a-z0-9]{8}-(?:[a-z0-9]{4}-){3}[a-z0-9]{12}/IncomingWebhook/[a-z0-9]{32}/[a-z0-9]{8}-(?:[a-z0-9]{4}-){3}[a-z0-9]{12})",
            end!()
        ),
    ),
    with_entropy(
        exact(
            "notion-token",
            "Notion integration token",
            &["ntn_"],
            concat!(start!(), r"(?P<s>ntn_[0-9]{11}[A-Za-z0-9]{35})", end!()),
        ),
        4.0,
    ),
    with_entropy(
        exact(
            "octopus-deploy-api-key",
            "Octopus Deploy API key",
            &["API-"],
            concat!(start!(), r"(?P<s>API-[A-Z0-9]{26})", end!()),
        ),
        3.0,
    ),
    with_entropy(
        exact(
            "openshift-user-token",
            "OpenShift user token",
            &["sha256~"],
            concat!(
                r"(?:^|[^A-Za-z0-9_~-])(?P<s>sha256~[A-Za-z0-9_-]{43})",
                end!()
            ),
        ),
        3.5,
    ),
    with_entropy(
        exact(
            "perplexity-api-key",
            "Perplexity API key",
            &["pplx-"],
            concat!(start!(), r"(?P<s>pplx-[A-Za-z0-9]{48})", end!()),
        ),
        4.0,
    ),
    with_entropy(
        exact(
            "prefect-api-token",
            "Prefect API token",
            &["pnu_"],
            concat!(start!(), r"(?P<s>pnu_[A-Za-z0-9]{36})", end!()),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "readme-api-token",
            "ReadMe API token",
            &["rdme_"],
            concat!(start!(), r"(?P<s>rdme_[a-z0-9]{70})", end!()),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "scalingo-token",
            "Scalingo API token",
            &["tk-us-"],
            concat!(start!(), r"(?P<s>tk-us-[A-Za-z0-9_-]{48})", end!()),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "sendinblue-api-key",
            "Sendinblue (Brevo) API key",
            &["xkeysib-"],
            concat!(
                start!(),
                r"(?P<s>xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16})",
                end!()
            ),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "settlemint-token",
            "SettleMint application, personal or service access token",
            &["sm_aat_", "sm_pat_", "sm_sat_"],
            concat!(
                start!(),
                r"(?P<s>sm_(?:aat|pat|sat)_[A-Za-z0-9]{16})",
                end!()
            ),
        ),
        3.0,
    ),
    with_entropy(
        exact(
            "shippo-token",
            "Shippo API token",
            &["shippo_"],
            concat!(
                start!(),
                r"(?P<s>shippo_(?:live|test)_[a-fA-F0-9]{40})",
                end!()
            ),
        ),
        2.0,
    ),
    with_entropy(
        rule(
            "sidekiq-secret",
            "Sidekiq Pro/Enterprise credentials",
            &["contribsys"],
            concat!(
                r"(?i)contribsys__com[A-Za-z0-9_. \t-]{0,20}[\x27\x22]?\s{0,5}(?::=|=>|=|:|,)\s{0,5}[\x27\x22\x60]?(?P<s>[a-f0-9]{8}:[a-f0-9]{8})",
                r"(?:[^A-Za-z0-9:]|$)"
            ),
        ),
        2.0,
    ),
    with_entropy(
        exact(
            "sourcegraph-token",
            "Sourcegraph access token",
            &["sgp_"],
            concat!(
                start!(),
                r"(?P<s>sgp_(?:[a-fA-F0-9]{16}|local)_[a-fA-F0-9]{40}|sgp_[a-fA-F0-9]{40})",
                end!()
            ),
        ),
        3.0,
    ),
    with_entropy(
        exact(
            "typeform-token",
            "Typeform personal access token",
            &["tfp_"],
            concat!(
                start!(),
                r"(?P<s>tfp_[A-Za-z0-9_.=-]{59})",
                r"(?:[^A-Za-z0-9_.=-]|$)"
            ),
        ),
        2.0,
    ),
    Rule {
        check: Some(is_base64_jwt),
        ..exact(
            "jwt-base64",
            "A JSON Web Token encoded once more in base64",
            &["ZXlK"],
            r"(?:^|[^A-Za-z0-9+/_-])(?P<s>ZXlK[A-Za-z0-9+/_-]{40}[A-Za-z0-9+/_-]*={0,2})(?:[^A-Za-z0-9+/=_-]|$)",
        )
    },
    Rule {
        check: Some(opaque_credential),
        named: true,
        ..rule(
            "nuget-config-password",
            "Password in a NuGet.config packageSourceCredentials entry",
            &["<add key="],
            r#"(?i)<add key="(?:ClearText)?Password"\s{0,5}value="(?P<s>[^"\n]{8,200})"\s{0,5}/>"#,
        )
    },
    // --- gitleaks' vendor-name families: a value of the vendor's shape assigned to a name
    // holding the vendor's name (medium confidence: no prefix or checksum proves the vendor) ---
    named(
        "adafruit-api-key",
        "Adafruit IO key",
        &["adafruit"],
        named!("adafruit", r"[a-z0-9_-]{32}"),
    ),
    named(
        "adobe-client-id",
        "Adobe client id",
        &["adobe"],
        named!("adobe", r"[a-f0-9]{32}"),
    ),
    named(
        "airtable-api-key",
        "Airtable API key (legacy)",
        &["airtable"],
        named!("airtable", r"[a-z0-9]{17}"),
    ),
    named(
        "algolia-api-key",
        "Algolia API key",
        &["algolia"],
        named!("algolia", r"[a-z0-9]{32}"),
    ),
    named(
        "alibaba-secret-key",
        "Alibaba Cloud access key secret",
        &["alibaba"],
        named!("alibaba", r"[a-z0-9]{30}"),
    ),
    named(
        "asana-credential",
        "Asana client id or secret",
        &["asana"],
        named!("asana", r"[0-9]{16}|[a-z0-9]{32}"),
    ),
    named(
        "atlassian-named-token",
        "Atlassian, Jira or Confluence API token assigned by name",
        &["atlassian", "confluence", "jira"],
        named!("atlassian|confluence|jira", r"[a-z0-9]{20}[a-f0-9]{4}"),
    ),
    named(
        "beamer-api-token",
        "Beamer API token",
        &["beamer"],
        named!("beamer", r"b_[a-z0-9=_-]{44}"),
    ),
    named(
        "bitbucket-credential",
        "Bitbucket client id or secret",
        &["bitbucket"],
        named!("bitbucket", r"[a-z0-9]{32}|[a-z0-9=_-]{64}"),
    ),
    named(
        "bittrex-credential",
        "Bittrex access or secret key",
        &["bittrex"],
        named!("bittrex", r"[a-z0-9]{32}"),
    ),
    named(
        "cisco-meraki-api-key",
        "Cisco Meraki API key",
        &["meraki"],
        named!("meraki", r"[0-9a-f]{40}"),
    ),
    named(
        "cloudflare-api-key",
        "Cloudflare API token or global API key",
        &["cloudflare"],
        named!("cloudflare", r"[a-z0-9_-]{40}|[a-f0-9]{37}"),
    ),
    named(
        "codecov-token",
        "Codecov access token",
        &["codecov"],
        named!("codecov", r"[a-z0-9]{32}"),
    ),
    named(
        "cohere-api-key",
        "Cohere API key",
        &["cohere", "co_api_key"],
        named!("cohere|co_api_key", r"[a-z0-9]{40}"),
    ),
    named(
        "coinbase-token",
        "Coinbase access token",
        &["coinbase"],
        named!("coinbase", r"[a-z0-9_-]{64}"),
    ),
    named(
        "confluent-credential",
        "Confluent access token or secret key",
        &["confluent"],
        named!("confluent", r"[a-z0-9]{16}|[a-z0-9]{64}"),
    ),
    named(
        "contentful-token",
        "Contentful delivery API token",
        &["contentful"],
        named!("contentful", r"[a-z0-9=_-]{43}"),
    ),
    named(
        "discord-credential",
        "Discord API token, client id or client secret",
        &["discord"],
        named!("discord", r"[a-f0-9]{64}|[0-9]{18}|[a-z0-9=_-]{32}"),
    ),
    named(
        "droneci-token",
        "Drone CI access token",
        &["droneci"],
        named!("droneci", r"[a-z0-9]{32}"),
    ),
    named(
        "dropbox-api-token",
        "Dropbox API or long-lived token",
        &["dropbox"],
        named!(
            "dropbox",
            r"[a-z0-9]{11}AAAAAAAAAA[a-z0-9_=-]{43}|[a-z0-9]{15}"
        ),
    ),
    named(
        "etsy-token",
        "Etsy access token",
        &["etsy"],
        named!("etsy", r"[a-z0-9]{24}"),
    ),
    named(
        "facebook-secret",
        "Facebook app secret or app access token",
        &["facebook"],
        named!(
            "facebook",
            r"[0-9]{15,16}(?:\||%7C)[0-9a-z_-]{27,40}|[a-f0-9]{32}"
        ),
    ),
    named(
        "fastly-api-token",
        "Fastly API token",
        &["fastly"],
        named!("fastly", r"[a-z0-9=_-]{32}"),
    ),
    named(
        "finicity-credential",
        "Finicity API token or client secret",
        &["finicity"],
        named!("finicity", r"[a-f0-9]{32}|[a-z0-9]{20}"),
    ),
    named(
        "finnhub-token",
        "Finnhub access token",
        &["finnhub"],
        named!("finnhub", r"[a-z0-9]{20}"),
    ),
    named(
        "flickr-token",
        "Flickr access token",
        &["flickr"],
        named!("flickr", r"[a-z0-9]{32}"),
    ),
    named(
        "freshbooks-token",
        "FreshBooks access token",
        &["freshbooks"],
        named!("freshbooks", r"[a-z0-9]{64}"),
    ),
    named(
        "gitter-token",
        "Gitter access token",
        &["gitter"],
        named!("gitter", r"[a-z0-9_-]{40}"),
    ),
    named(
        "gocardless-token",
        "GoCardless API token",
        &["gocardless"],
        named!("gocardless", r"live_[a-z0-9_=-]{40}"),
    ),
    named(
        "hubspot-api-key",
        "HubSpot API key",
        &["hubspot"],
        named!(
            "hubspot",
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        ),
    ),
    named(
        "intercom-token",
        "Intercom access token",
        &["intercom"],
        named!("intercom", r"[a-z0-9=_-]{60}"),
    ),
    named(
        "jfrog-credential",
        "JFrog API key or identity token",
        &["jfrog", "artifactory", "bintray", "xray"],
        named!(
            "jfrog|artifactory|bintray|xray",
            r"[a-z0-9]{73}|[a-z0-9]{64}"
        ),
    ),
    named(
        "kraken-token",
        "Kraken access token",
        &["kraken"],
        named!("kraken", r"[a-z0-9/=_+-]{80,90}"),
    ),
    named(
        "kucoin-credential",
        "KuCoin access token or secret key",
        &["kucoin"],
        named!(
            "kucoin",
            r"[a-f0-9]{24}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        ),
    ),
    named(
        "launchdarkly-token",
        "LaunchDarkly access token",
        &["launchdarkly"],
        named!("launchdarkly", r"[a-z0-9=_-]{40}"),
    ),
    named(
        "linear-client-secret",
        "Linear client secret",
        &["linear"],
        named!("linear", r"[a-f0-9]{32}"),
    ),
    named(
        "linkedin-credential",
        "LinkedIn client id or secret",
        &["linkedin", "linked_in", "linked-in"],
        named!("linked[_-]?in", r"[a-z0-9]{16}|[a-z0-9]{14}"),
    ),
    named(
        "lob-api-key",
        "Lob API key (secret or publishable)",
        // Not `lob` alone: `global`, `blob` are everywhere in code.
        &["lob_", "lob-", "lob.", "lobkey", "lobapi", "lobsecret"],
        named!(
            "(?:^|[^A-Za-z0-9])lob",
            r"(?:live|test)_pub_[a-f0-9]{31}|(?:live|test)_[a-f0-9]{35}"
        ),
    ),
    named(
        "looker-credential",
        "Looker client id or secret",
        &["looker"],
        named!("looker", r"[a-z0-9]{24}|[a-z0-9]{20}"),
    ),
    named(
        "mailgun-key",
        "Mailgun public validation key or webhook signing key",
        &["mailgun"],
        named!(
            "mailgun",
            r"pubkey-[a-f0-9]{32}|[a-h0-9]{32}-[a-h0-9]{8}-[a-h0-9]{8}"
        ),
    ),
    named(
        "mapbox-public-token",
        "Mapbox public token assigned by name",
        &["mapbox"],
        named!("mapbox", r"pk\.[a-z0-9]{60}\.[a-z0-9]{22}"),
    ),
    named(
        "mattermost-token",
        "Mattermost access token",
        &["mattermost"],
        named!("mattermost", r"[a-z0-9]{26}"),
    ),
    named(
        "messagebird-credential",
        "MessageBird API token or client id",
        &["messagebird", "message-bird", "message_bird"],
        named!(
            "message[_-]?bird",
            r"[a-z0-9]{25}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        ),
    ),
    named(
        "netlify-token",
        "Netlify access token",
        &["netlify"],
        named!("netlify", r"[a-z0-9=_-]{40,46}"),
    ),
    named(
        "newrelic-named-key",
        "New Relic insert key or user API id assigned by name",
        &["new-relic", "newrelic", "new_relic"],
        named!("new[_-]?relic", r"NRII-[a-z0-9-]{32}|[a-z0-9]{64}"),
    ),
    named(
        "nytimes-token",
        "New York Times access token",
        &["nytimes", "new-york-times", "newyorktimes"],
        named!("nytimes|new-york-times|newyorktimes", r"[a-z0-9=_-]{32}"),
    ),
    named(
        "plaid-credential",
        "Plaid client id, secret or access token",
        &["plaid"],
        named!(
            "plaid",
            r"access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[a-z0-9]{30}|[a-z0-9]{24}"
        ),
    ),
    named(
        "privateai-token",
        "Private AI API token",
        &["privateai", "private_ai", "private-ai"],
        named!("private[_-]?ai", r"[a-z0-9]{32}"),
    ),
    named(
        "rapidapi-token",
        "RapidAPI access token",
        &["rapidapi"],
        named!("rapidapi", r"[a-z0-9_-]{50}"),
    ),
    named(
        "sendbird-credential",
        "Sendbird application id or API token",
        &["sendbird"],
        named!(
            "sendbird",
            r"[a-f0-9]{40}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        ),
    ),
    named(
        "sentry-named-token",
        "Sentry access token assigned by name",
        &["sentry"],
        named!("sentry", r"[a-f0-9]{64}"),
    ),
    named(
        "snyk-token",
        "Snyk API or OAuth token",
        &["snyk"],
        named!(
            "snyk[_.-]?(?:(?:api|oauth)[_.-]?)?(?:key|token)",
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        ),
    ),
    named(
        "sonar-named-token",
        "SonarQube or SonarCloud token assigned by name",
        &["sonar"],
        named!(
            "sonar[_.-]?(?:login|token)",
            r"(?:squ_|sqp_|sqa_)?[a-z0-9=_-]{40}"
        ),
    ),
    named(
        "squarespace-token",
        "Squarespace access token",
        &["squarespace"],
        named!(
            "squarespace",
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        ),
    ),
    named(
        "sumologic-credential",
        "Sumo Logic access id or key",
        &["sumo"],
        named!("sumo", r"su[a-z0-9]{12}|[a-z0-9]{64}"),
    ),
    named(
        "travisci-token",
        "Travis CI access token",
        &["travis"],
        named!("travis", r"[a-z0-9]{22}"),
    ),
    named(
        "twitch-token",
        "Twitch API token",
        &["twitch"],
        named!("twitch", r"[a-z0-9]{30}"),
    ),
    named(
        "twitter-credential",
        "Twitter/X API key, secret or access token",
        &["twitter"],
        named!(
            "twitter",
            r"[0-9]{15,25}-[a-z0-9]{20,40}|[a-z0-9]{50}|[a-z0-9]{45}|[a-z0-9]{25}"
        ),
    ),
    named(
        "yandex-credential",
        "Yandex Cloud access token, API key or AWS-style key",
        &["yandex"],
        named!(
            "yandex",
            r"t1\.[a-z0-9_-]{1,200}={0,2}\.[a-z0-9_-]{86}={0,2}|AQVN[a-z0-9_-]{35,38}|YC[a-z0-9_-]{38}"
        ),
    ),
    named(
        "zendesk-secret",
        "Zendesk secret key",
        &["zendesk"],
        named!("zendesk", r"[a-z0-9]{40}"),
    ),
    // --- URLs with credentials ---
    rule(
        "database-url",
        "Database or broker URL with a password",
        &["://"],
        r#"(?i)\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|oracle|clickhouse|cockroachdb)://[^\s:/@'"<>{}]{0,256}:(?P<s>[^\s:/@'"<>{}]{1,256})@[^\s/'"@]{1,256}"#,
    ),
    rule(
        "basic-auth-url",
        "URL with a password (basic auth)",
        &["://"],
        r#"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@'"<>{}]{1,256}:(?P<s>[^\s:/@'"<>{}]{1,256})@[^\s/'"@]{1,256}"#,
    ),
    // Any header named for a secret: after every specific and vendor rule.
    Rule {
        check: Some(header_credential),
        ..rule(
            "http-secret-header",
            "HTTP header whose name says token, key, secret, auth, session or password (X-Api-Key, X-Auth-Token, X-Vault-Token, Private-Token)",
            // Not `-secret:` nor `-password:`: the keyword rule reads those names already
            // (and a run of them is its adversarial input).
            &[
                "-token:",
                "-key:",
                "-auth:",
                "-session:",
                "-token\":",
                "-key\":",
                "-auth\":",
                // A Python dict's repr (botocore's `--debug`: `'X-Amz-Security-Token': b'...'`).
                "-token':",
                "-key':",
                "-auth':",
            ],
            concat!(
                r#"(?i)(?:^|[\s'"])(?:[<>][ \t])?(?:x-[A-Za-z0-9-]{0,40}|[A-Za-z0-9]{1,40}-(?:[A-Za-z0-9]{1,40}-)?)"#,
                r#"(?:token|api-?key|key|secret|auth|session(?:-?id)?|password|passwd)['"]?[ \t]{0,5}:[ \t]{0,5}(?:b?['"])?"#,
                r#"(?P<s>[^\s'"]{8,4000})(?:[\s'"]|$)"#
            ),
        )
    },
    // --- Generic keyword assignments (detect-secrets' KeywordDetector) ---
    Rule {
        generic: true,
        ..rule(
            "keyword-secret",
            "Password, secret or key assigned in code or configuration",
            &[
                "password",
                "passwd",
                "passphrase",
                "pwd",
                "secret",
                "api_key",
                "apikey",
                "api-key",
                "auth_key",
                "authkey",
                "service_key",
                "account_key",
                "db_key",
                "database_key",
                "priv_key",
                "private_key",
                "privatekey",
                "client_key",
                "db_pass",
                "database_pass",
                "key_pass",
                // The last word of a name (`REDISCLI_AUTH`, `RABBITMQ_DEFAULT_PASS`).
                "_auth",
                "_pass",
                // `_token` covers `access_token`, `auth_token`, `api_token`.
                "_token",
                "contrase",
                // Not names the regex takes: lines `pairs.rs` reads (redis' password
                // settings, HAR's `cookies`).
                "requirepass",
                "masterauth",
                "cookie",
            ],
            // `scan::keyword_value` reads a match's value off its span by this shape (no
            // capture pass per match); `keyword_values_read_off_the_span_are_the_captures`
            // checks the two agree: change them together.
            concat!(
                r#"(?i)[A-Za-z0-9_.-]{0,40}?"#,
                // `auth` and `pass` count as the name's last word only (`REDISCLI_AUTH`,
                // `RABBITMQ_DEFAULT_PASS`; not `OAUTH_CALLBACK_URL`, `MAX_PASS_COUNT`):
                // `scan::accept` checks the word, `scan::names_by_last_word`.
                r#"(?:"#,
                secret_names!(),
                r#"|[_.-](?:auth|pass))"#,
                r#"[A-Za-z0-9_.-]{0,25}['"]?\s{0,5}(?::=|=>|==|=|:)\s{0,5}"#,
                // Unbounded: a value reaches `scan::VALUE_BOUND` (a window cut inside it is
                // matched again); a quoted one still open at the window's end (`$`) is judged
                // by the scanner (open at its line's end: none; at the window's: go on).
                r#"(?:"(?P<s>[^"\n\\]{4,})(?:"|$)|'(?P<s2>[^'\n\\]{4,})(?:'|$)|(?P<s3>[^\s'",;)(\]\[{}<>\x00]{4,}))"#
            ),
        )
    },
];
