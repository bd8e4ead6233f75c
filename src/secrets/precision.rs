//! Precision filters of the keyword rule: where a keyword-assigned value sits tells whether it
//! is a secret. Each reads a few hundred bytes around the value at most.
//!
//! - the keyword is inside a value, not a key (`NEXTEST_TEST_NAME=secrets::corpus`), or the
//!   "separator" is a path's `::` (`secrets::Scanner` in a log or a changelog);
//! - the key names an object rather than holding a secret (`"secret.name": "istio-cni-token-
//!   pjpbw"`, `secretName`, `password_file`), or the value is a generated object name
//!   (lowercase words joined by `-` with Kubernetes' random suffix);
//! - the value is a metavariable (`--api-key=API_KEY`), a UUID (detect-secrets'
//!   `is_potential_uuid`), or a demo word (`changeme`, `password123`).

/// Whether a value in a slot that declares a credential (a connection string's `Password=`, a
/// URL's userinfo, `curl -u user:...`, an `Authorization:` header, `--password=`, a keyword
/// assignment) stands for one rather than being one. The slot says "secret", so only the value
/// can say otherwise; these are the shapes public scanners' test suites publish as
/// non-secrets:
///
/// - too short or too little entropy for any credential (`foo`, `jwt`, `test`, `aaaaaab`):
///   under 5 bytes, or under 1.5 bits a byte (8 random hex digits can fall under 2);
/// - a mask part (`xoxb-xxx`, `xoxe-1-xxx`) or a vendor prefix with its body left out
///   (`sk_live_`, `bedrock-api-key-`);
/// - a value that describes itself (`s.THISSTRINGISALLUPPERCASE`, `xoxe.xoxp-1-RANDOMSTRING
///   HERE`, `glptt-Need5_T00-be-exactly-40-chars--ELse_failing`, `xoxb-Slack_BOT_TOKEN`): two
///   fixture words, or one in a value made of words;
/// - mostly letters or digits in order (`xoxb-12345-abcd234`, `ntn_12345678901`);
/// - five distinct characters or fewer in 16 or more (a DNA sequence, `AAAA-BBBB-...`);
/// - a JWT shape whose header is not base64 JSON (`eyJAAAA.eyJBBB`);
/// - gitleaks' `curl-auth-user` placeholders: a demo word (`pass`, `changeme`, `token`,
///   `password123`) or a bracketed name (`[PASSWORD]`, `<user:password>`).
///
/// A real password made of words (`correct-horse-battery-staple`) names no fixture and stays
/// a finding.
pub fn credential_is_not_a_secret(v: &[u8]) -> bool {
    const WORDS: &[&[u8]] = &[
        b"token",
        b"pwd",
        b"user",
        b"username",
        b"apikey",
        b"api_key",
    ];
    v.len() < 5
        || is_demo_value(v)
        || WORDS.iter().any(|w| v.eq_ignore_ascii_case(w))
        || v.first() == Some(&b'[')
        || matches!(v.last(), Some(b']' | b'>'))
        || super::entropy::shannon(v) < 1.5
        || has_mask_part(v)
        || is_bare_prefix(v)
        || describes_itself(v)
        || mostly_in_order(v)
        || (v.len() >= 16 && distinct(v) <= 5)
        || is_broken_jwt(v)
}

/// The URL userinfo password at `s..e` repeats the user name (`postgresql://user:user@...`,
/// `//admin:admin@`): a local fixture's.
pub fn password_is_the_user(text: &[u8], s: usize, e: usize) -> bool {
    let v = &text[s..e];
    let Some(colon) = s.checked_sub(1) else {
        return false;
    };
    text[colon] == b':'
        && colon >= v.len() + 2
        && &text[colon - v.len()..colon] == v
        && &text[colon - v.len() - 2..colon - v.len()] == b"//"
}

fn distinct(v: &[u8]) -> usize {
    let mut seen = [false; 256];
    v.iter()
        .filter(|&&b| !std::mem::replace(&mut seen[b as usize], true))
        .count()
}

/// A part (between `-`, `_`, `.`, `:`) of three or more `x`, `X` or `*`: a mask.
fn has_mask_part(v: &[u8]) -> bool {
    v.split(|b| b"-_.:".contains(b))
        .any(|p| p.len() >= 3 && p.iter().all(|b| b"xX*".contains(b)))
}

/// Words and separators ending in a separator, no digit: a prefix whose body is missing.
fn is_bare_prefix(v: &[u8]) -> bool {
    v.len() >= 3
        && v.last().is_some_and(|b| b"-_.".contains(b))
        && v.iter()
            .all(|b| b.is_ascii_alphabetic() || b"-_.".contains(b))
}

/// Words a test fixture or a documentation sample spells out (never a generated token's).
const FIXTURE_WORDS: &[&[u8]] = &[
    b"this",
    b"string",
    b"here",
    b"random",
    b"token",
    b"secret",
    b"password",
    b"test",
    b"hello",
    b"world",
    b"exactly",
    b"chars",
    b"length",
    b"checking",
    b"lower",
    b"upper",
    b"sample",
    b"dummy",
    b"fake",
    b"invalid",
    b"wrong",
    b"failing",
    b"placeholder",
];

/// Two fixture words anywhere (case-insensitive), or one in a value made of words.
/// One automaton over the words, built once: a `memmem` per word per value (a searcher
/// built each time, and a lowercased copy) was most of the cost of a finding in output dense
/// with keyword assignments (`secrets_time` fuzz finding: `password = 'x` repeated).
fn describes_itself(v: &[u8]) -> bool {
    static WORDS: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>> =
        std::sync::OnceLock::new();
    let Some(ac) = WORDS
        .get_or_init(|| {
            aho_corasick::AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(FIXTURE_WORDS)
                .ok()
        })
        .as_ref()
    else {
        // Not built (cannot happen for these words): the words one by one.
        let l = v.to_ascii_lowercase();
        let n = FIXTURE_WORDS
            .iter()
            .filter(|w| memchr::memmem::find(&l, w).is_some())
            .count();
        return n >= 2 || (n == 1 && is_wordy(v));
    };
    // Which words occur, overlapping ones too (as the word-by-word search counted them).
    const _: () = assert!(FIXTURE_WORDS.len() <= 64);
    let mut seen = 0u64;
    for m in ac.find_overlapping_iter(v) {
        seen |= 1 << m.pattern().as_usize();
    }
    let n = seen.count_ones();
    n >= 2 || (n == 1 && is_wordy(v))
}

/// Runs of four or more consecutive letters or digits (`abcd`, `12345`, `7890`) cover half
/// the value's letters and digits or more.
fn mostly_in_order(v: &[u8]) -> bool {
    let alnum = v.iter().filter(|b| b.is_ascii_alphanumeric()).count();
    let next = |a: u8, b: u8| {
        let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
        a.is_ascii_alphanumeric() && (b == a + 1 || (a == b'9' && b == b'0'))
    };
    let (mut in_runs, mut run) = (0, 1);
    for i in 1..=v.len() {
        if i < v.len() && next(v[i - 1], v[i]) {
            run += 1;
        } else {
            if run >= 4 {
                in_runs += run;
            }
            run = 1;
        }
    }
    alnum >= 8 && in_runs * 2 >= alnum
}

/// `eyJ...` with a `.`, whose first part does not decode to a JSON object: not a JWT, and
/// not an opaque token either (test data for a JWT detector).
fn is_broken_jwt(v: &[u8]) -> bool {
    use base64::Engine;
    if !v.starts_with(b"eyJ") || !v.contains(&b'.') {
        return false;
    }
    let head = v.split(|&b| b == b'.').next().unwrap_or(v);
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let head = head
        .strip_suffix(b"==")
        .or_else(|| head.strip_suffix(b"="))
        .unwrap_or(head);
    !engine
        .decode(head)
        .is_ok_and(|h| h.starts_with(b"{\"") && h.ends_with(b"}"))
}

/// Whether the high-entropy string at `s` of `text` is not a secret for the key it is assigned
/// to: a key that names an object (`ANTHROPIC_NAME=...`, `"client_name": "..."`: see
/// [`names_an_object`]) or says the value is a fixture or public (`wrongStart := "..."`,
/// `invalid_key`, `public_key = "..."`, `publicToken`). Reads back 96 bytes at most.
pub fn entropy_value_is_not_a_secret(text: &[u8], s: usize) -> bool {
    const NOT_SECRET: &[&str] = &[
        "wrong",
        "invalid",
        "fake",
        "dummy",
        "mock",
        "bogus",
        "example",
        "sample",
        "placeholder",
        "public",
    ];
    let key = key_before(text, s);
    names_an_object(&key) || key.iter().any(|w| NOT_SECRET.contains(&w.as_str()))
}

/// Whether the keyword-rule value at `s..e` of `text` is not a secret for where it sits.
/// `start` is where the rule's match begins (the key's first byte).
pub fn keyword_value_is_not_a_secret(text: &[u8], start: usize, s: usize, e: usize) -> bool {
    let v = &text[s..e];
    // `secrets::Scanner`, `password::hash`: a path, the `:` is not a separator.
    if v.first() == Some(&b':') {
        return true;
    }
    if keyword_inside_a_value(text, start) {
        return true;
    }
    let key = key_before(text, s);
    if names_an_object(&key) || is_generated_object_name(v) {
        return true;
    }
    // `publicToken`, `public_key`: the name says the value is published (a camelCase
    // `*Token` name reaches the keyword rule; vendor-format rules still judge the value).
    if key.iter().any(|w| w == "public") {
        return true;
    }
    is_metavariable(v)
        || is_published_digest(&key, v)
        || is_uuid(v)
        || is_demo_value(v)
        || names_itself(v)
        || is_other_assignment(v)
        || credential_is_not_a_secret(v)
}

/// A digest written with its algorithm (`sha256:<64 hex>`) under a name that says it is a
/// hash or a fingerprint (`--discovery-token-ca-cert-hash sha256:...`: kubeadm's hash of the
/// cluster's public CA certificate, printed by `kubeadm token create --print-join-command`):
/// it identifies something published, it opens nothing. (A password's hash is written in a
/// crypt form, `$2b$...`, `{SSHA}...`, not so.)
fn is_published_digest(key: &[String], v: &[u8]) -> bool {
    let named = key.last().is_some_and(|w| {
        matches!(
            w.as_str(),
            "hash" | "hashes" | "digest" | "checksum" | "fingerprint" | "thumbprint"
        )
    });
    let Some(colon) = memchr::memchr(b':', v) else {
        return false;
    };
    let (alg, hex) = (&v[..colon], &v[colon + 1..]);
    let len = match alg.to_ascii_lowercase().as_slice() {
        b"md5" => 32,
        b"sha1" => 40,
        b"sha224" => 56,
        b"sha256" => 64,
        b"sha384" => 96,
        b"sha512" => 128,
        _ => return false,
    };
    named && hex.len() == len && hex.iter().all(u8::is_ascii_hexdigit)
}

/// An environment assignment whose name names no secret (`Bench secrets: SCAN_RUNS=0 skips
/// the scans` in a commit message, `token: MAX_RETRIES=3`): prose naming a setting, the value
/// is not a secret. (`password: DB_PASSWORD=...` stays a finding: its name names one.)
fn is_other_assignment(v: &[u8]) -> bool {
    let Some(eq) = memchr::memchr(b'=', v) else {
        return false;
    };
    let name = &v[..eq];
    if name.len() < 2
        || !name[0].is_ascii_uppercase()
        || !name
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
    {
        return false;
    }
    let lower = name.to_ascii_lowercase();
    !["pass", "pwd", "secret", "key", "token", "auth", "cred"]
        .iter()
        .any(|w| memchr::memmem::find(&lower, w.as_bytes()).is_some())
}

/// A value of lowercase words joined by `-` or `_` that says what it stands for or that it
/// is a test (`super-secret`, `test-m2m-secret`, `new-token`, `access-1`, `wrong_password`):
/// test fixtures and documentation, not a secret (a generated one is not made of words).
fn names_itself(v: &[u8]) -> bool {
    const WORDS: &[&[u8]] = &[
        b"secret",
        b"secrets",
        b"token",
        b"password",
        b"passwd",
        b"pass",
        b"key",
        b"apikey",
        b"access",
        b"refresh",
        b"credential",
        b"credentials",
        b"test",
        b"dummy",
        b"fake",
        b"mock",
        b"sample",
        b"demo",
        b"wrong",
        b"invalid",
        b"bad",
        b"placeholder",
    ];
    if !v.iter().any(|&b| b == b'-' || b == b'_') {
        return false;
    }
    let parts: Vec<&[u8]> = v.split(|&b| b == b'-' || b == b'_').collect();
    parts.len() >= 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 12
                && p.iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
        && parts.iter().any(|p| WORDS.contains(p))
}

/// The match begins right after `NAME=` (an environment or shell assignment whose name has no
/// keyword): the keyword is the start of that assignment's value (`NEXTEST_TEST_NAME=secrets::
/// x`, `FILTER=password:weak`), not a key.
fn keyword_inside_a_value(text: &[u8], start: usize) -> bool {
    let Some(eq) = start.checked_sub(1) else {
        return false;
    };
    if text[eq] != b'=' {
        return false;
    }
    let lo = eq.saturating_sub(128);
    let name_start = text[lo..eq]
        .iter()
        .rposition(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
        .map_or(lo, |i| lo + i + 1);
    let name = &text[name_start..eq];
    // `--set=auth.password=x`, `?password=`: only a bare identifier before the `=`.
    let before = name_start.checked_sub(1).map(|i| text[i]);
    !name.is_empty()
        && (name[0].is_ascii_alphabetic() || name[0] == b'_')
        && matches!(before, None | Some(b'\n' | b' ' | b'\t' | b'\0'))
}

/// The key the value at `s` is assigned to, as lowercase words (`secretName`, `secret.name`,
/// `SECRET_NAME` -> `["secret", "name"]`). Reads back over the quote, spaces, the separator
/// (`=`, `:`, `:=`, `=>`) and the key (at most 96 bytes). Two places name a value from
/// elsewhere: a YAML block scalar's header on the line above (`secretName: |`), and in an XML
/// tag the `key` or `name` attribute before a `value` one (`<add key="secretName" value=`,
/// as the context tokenizer pairs them), not the word `value`.
fn key_before(text: &[u8], s: usize) -> Vec<String> {
    let lo = s.saturating_sub(96);
    let mut i = s;
    let skip = |i: &mut usize, set: &[u8]| {
        while *i > lo && set.contains(&text[*i - 1]) {
            *i -= 1;
        }
    };
    skip(&mut i, b"\"' \t\r\n");
    if memchr::memchr(b'\n', &text[i..s]).is_some() {
        let ls = memchr::memrchr(b'\n', &text[lo..i]).map_or(lo, |k| lo + k + 1);
        if let Some(colon) = block_scalar_colon(&text[ls..i]) {
            i = ls + colon + 1;
        }
    }
    skip(&mut i, b"@"); // C#'s verbatim `@"..."`
    skip(&mut i, b"\t ");
    skip(&mut i, b":=>");
    skip(&mut i, b"\"' \t");
    let end = i;
    while i > lo && (text[i - 1].is_ascii_alphanumeric() || b"_.-".contains(&text[i - 1])) {
        i -= 1;
    }
    let key = &text[i..end];
    if key.eq_ignore_ascii_case(b"value")
        && i > 0
        && text[i - 1].is_ascii_whitespace()
        && let Some(named) = xml_pair_key(text, i)
    {
        return words(named);
    }
    words(key)
}

/// A name split into lowercase words at non-alphanumeric bytes and camelCase humps.
fn words(key: &[u8]) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    for (j, &b) in key.iter().enumerate() {
        let camel = b.is_ascii_uppercase() && j > 0 && key[j - 1].is_ascii_lowercase();
        if !b.is_ascii_alphanumeric() || camel {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            if !b.is_ascii_alphanumeric() {
                continue;
            }
        }
        cur.push(b.to_ascii_lowercase() as char);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Where the `:` of a YAML block scalar's header is in `line` (`password: |`, `key: >-`,
/// `token: |2  # note`): its value is on the lines below.
pub fn block_scalar_colon(line: &[u8]) -> Option<usize> {
    let line = memchr::memmem::find(line, b" #").map_or(line, |c| &line[..c]);
    let t = line.trim_ascii_end();
    let mut k = t.len();
    while k > 0 && t.len() - k < 2 && matches!(t[k - 1], b'+' | b'-' | b'1'..=b'9') {
        k -= 1;
    }
    if k == 0 || !matches!(t[k - 1], b'|' | b'>') {
        return None;
    }
    let before = &t[..k - 1];
    let key = before.trim_ascii_end();
    (key.len() < before.len() && key.len() > 1 && key.ends_with(b":")).then(|| key.len() - 1)
}

/// In the XML tag that the attribute at `attr` is in, the value of its last `key` or `name`
/// attribute before `attr` (`<add key="dbName" type="x" value=...`). Reads back to the tag's
/// `<` (512 bytes at most) and its attributes forward once.
fn xml_pair_key(text: &[u8], attr: usize) -> Option<&[u8]> {
    let lo = attr.saturating_sub(512);
    let lt = lo + memchr::memrchr(b'<', &text[lo..attr])?;
    let tag = &text[lt + 1..attr];
    if memchr::memchr(b'>', tag).is_some() || !tag.first()?.is_ascii_alphabetic() {
        return None;
    }
    let name_char = |b: u8| b.is_ascii_alphanumeric() || b"_:.-".contains(&b);
    let mut j = tag.iter().position(|&b| !name_char(b))?;
    let mut named = None;
    loop {
        while j < tag.len() && tag[j].is_ascii_whitespace() {
            j += 1;
        }
        if j >= tag.len() {
            return named;
        }
        let an = j;
        while j < tag.len() && name_char(tag[j]) {
            j += 1;
        }
        if j == an {
            return None;
        }
        let attr_name = &tag[an..j];
        while j < tag.len() && tag[j].is_ascii_whitespace() {
            j += 1;
        }
        if tag.get(j) != Some(&b'=') {
            continue;
        }
        j += 1;
        while j < tag.len() && tag[j].is_ascii_whitespace() {
            j += 1;
        }
        let q = *tag.get(j).filter(|q| matches!(q, b'"' | b'\''))?;
        let vs = j + 1;
        let ve = vs + memchr::memchr(q, tag.get(vs..)?)?;
        if attr_name.eq_ignore_ascii_case(b"key") || attr_name.eq_ignore_ascii_case(b"name") {
            named = Some(&tag[vs..ve]);
        }
        j = ve + 1;
    }
}

/// The key ends in a word that makes its value the name, place or shape of a secret rather
/// than the secret (`secret.name`, `secretRef`, `password_file`, `api_key_header`,
/// `secret_arn`, `password_min_length`).
fn names_an_object(key: &[String]) -> bool {
    const LAST: &[&str] = &[
        "name",
        "names",
        "ref",
        "namespace",
        "kind",
        "type",
        "path",
        "file",
        "dir",
        "arn",
        "version",
        "length",
        "len",
        "size",
        "count",
        "label",
        "field",
        "header",
        "param",
        "mount",
        "provider",
        "store",
        "backend",
        "url",
        "uri",
        "endpoint",
        "prefix",
        "suffix",
        "format",
        "policy",
        "hint",
        "prompt",
        "regex",
        "pattern",
        "env",
        "var",
        "selector",
        // A setting about secrets (`secrets.input = "deny"`, `password_mode`).
        "input",
        "output",
        "mode",
    ];
    key.len() >= 2 && key.last().is_some_and(|w| LAST.contains(&w.as_str()))
}

/// Kubernetes' generated names: lowercase words joined by `-` and a random suffix of 5
/// characters (or a 8-10 character pod-template hash then 5) from its vowel-free alphabet
/// (`istio-cni-token-pjpbw`, `web-7d4b9c8f6-x2k9q`).
fn is_generated_object_name(v: &[u8]) -> bool {
    const K8S: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    // The suffix first (no list built for the values that have none).
    if !v
        .rsplit(|&b| b == b'-')
        .next()
        .is_some_and(|l| l.len() == 5 && l.iter().all(|b| K8S.contains(b)))
    {
        return false;
    }
    let parts: Vec<&[u8]> = v.split(|&b| b == b'-').collect();
    let Some((last, words)) = parts.split_last() else {
        return false;
    };
    let random =
        |p: &[u8], lens: &[usize]| lens.contains(&p.len()) && p.iter().all(|b| K8S.contains(b));
    if words.is_empty() || !random(last, &[5]) {
        return false;
    }
    // An optional pod-template hash before the suffix, then at least one word.
    let words = match words.split_last() {
        Some((h, rest)) if !rest.is_empty() && random(h, &[8, 9, 10]) => rest,
        _ => words,
    };
    words.iter().all(|w| {
        !w.is_empty()
            && w[0].is_ascii_lowercase()
            && w.iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    }) && words
        .iter()
        .any(|w| w.len() >= 2 && w.iter().all(u8::is_ascii_lowercase))
}

/// An uppercase name with `_` (`API_KEY`, `YOUR_TOKEN`, `DB_PASSWORD`): a metavariable in usage
/// text or the name of an environment variable, not a value.
fn is_metavariable(v: &[u8]) -> bool {
    v.contains(&b'_')
        && v.iter().any(u8::is_ascii_uppercase)
        && v.iter().all(|b| b.is_ascii_uppercase() || *b == b'_')
}

/// detect-secrets' `is_potential_uuid`: a UUID is an identifier.
pub fn is_uuid(v: &[u8]) -> bool {
    // 8-4-4-4-12 hex digits and four `-`: 36 bytes (checked first: no list built per value).
    if v.len() != 36 {
        return false;
    }
    let parts: Vec<&[u8]> = v.split(|&b| b == b'-').collect();
    parts.len() == 5
        && parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts.iter().all(|p| p.iter().all(u8::is_ascii_hexdigit))
}

/// A demo value of documentation: a well-known word, then digits or `!` at most
/// (`changeme`, `changeit`, `password123`, `secret1`, `letmein!`).
fn is_demo_value(v: &[u8]) -> bool {
    const DEMO: &[&str] = &[
        "changeme",
        "change_me",
        "change-me",
        "changeit",
        "letmein",
        "password",
        "passwd",
        "passw0rd",
        "p@ssw0rd",
        "p@ssword",
        "secret",
        "mysecret",
        "mypassword",
        "yourpassword",
        "admin",
        "test",
        "testing",
        "qwerty",
        "foobar",
        "example",
        "default",
        "pass",
    ];
    let base = v
        .iter()
        .rposition(|b| !(b.is_ascii_digit() || matches!(b, b'!' | b'_' | b'-')))
        .map_or(&v[..0], |i| &v[..=i]);
    DEMO.iter().any(|d| d.as_bytes().eq_ignore_ascii_case(base))
}

/// A value made of words joined by `-`/`_` (`xoxb-Slack_BOT_TOKEN`,
/// `gloas-checking_Length-Is-...`): at least two separators, and half its bytes or more in
/// segments that read as words (letters only, one case or capitalised). A random token with
/// `-`/`_` in its alphabet has long mixed-case segments with digits instead.
pub fn is_wordy(v: &[u8]) -> bool {
    if v.iter().filter(|&&b| b == b'-' || b == b'_').count() < 2 {
        return false;
    }
    let parts: Vec<&[u8]> = v.split(|&b| b == b'-' || b == b'_').collect();
    if parts.len() < 3 {
        return false;
    }
    let word = |p: &[u8]| {
        p.len() >= 2
            && p.iter().all(u8::is_ascii_alphabetic)
            && (p.iter().all(u8::is_ascii_lowercase)
                || p.iter().all(u8::is_ascii_uppercase)
                || p[1..].iter().all(u8::is_ascii_lowercase))
    };
    let in_words: usize = parts.iter().filter(|p| word(p)).map(|p| p.len()).sum();
    in_words * 2 >= v.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_shapes() {
        assert_eq!(
            key_before(b"\"secret.name\": \"x\"", 16),
            ["secret", "name"]
        );
        assert_eq!(key_before(b"secretName: x", 12), ["secret", "name"]);
        assert_eq!(key_before(b"export DB_PASSWORD=x", 19), ["db", "password"]);
        let xml = b"<add key=\"clientName\" type=\"t\" value=\"x\"/>";
        assert_eq!(key_before(xml, xml.len() - 4), ["client", "name"]);
        assert_eq!(key_before(b"<add value=\"x\"/>", 12), ["value"]);
        assert_eq!(
            key_before(b"a: |\n  secretName: |\n    x", 25),
            ["secret", "name"]
        );
        assert_eq!(
            key_before(b"secretName: >-  # note\n  x", 25),
            ["secret", "name"]
        );
        assert_eq!(block_scalar_colon(b"  password: |2"), Some(10));
        assert_eq!(block_scalar_colon(b"password: \"|\""), None);
        assert_eq!(block_scalar_colon(b"a || b"), None);
        assert!(names_an_object(&key_before(b"password_file = x", 16)));
        assert!(!names_an_object(&key_before(b"db_password = x", 14)));
        assert!(names_an_object(&key_before(b"secrets.input = x", 16)));
        assert!(is_generated_object_name(b"istio-cni-token-pjpbw"));
        assert!(is_generated_object_name(b"web-7d4b9c8f6-x2k9q"));
        assert!(!is_generated_object_name(b"correct-horse-battery-staple"));
        assert!(!is_generated_object_name(b"pjpbw"));
        assert!(is_metavariable(b"API_KEY"));
        assert!(!is_metavariable(b"Q8_ZR2KL_9xw"));
        assert!(is_demo_value(b"changeme123"));
        assert!(is_demo_value(b"Password1!"));
        assert!(!is_demo_value(b"Tr0ub4dor-x9Q2"));
        assert!(names_itself(b"test-m2m-secret"));
        assert!(names_itself(b"access-1"));
        assert!(!names_itself(b"correct-horse-battery-staple"));
        assert!(!names_itself(b"secret"));
        assert!(keyword_inside_a_value(b"NEXTEST_TEST_NAME=secrets::x", 18));
        assert!(!keyword_inside_a_value(b"--set=auth.password=x", 6));
        assert!(is_other_assignment(b"SCAN_RUNS=0"));
        assert!(is_other_assignment(b"MAX_RETRIES=3"));
        assert!(!is_other_assignment(b"DB_PASSWORD=Zq8vL3mR9wT2"));
        assert!(!is_other_assignment(b"Zq8vL3mR9wT2=="));
        assert!(!is_other_assignment(b"zq8vL3=mR9wT2"));
    }
}
