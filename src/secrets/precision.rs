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
    is_metavariable(v)
        || is_uuid(v)
        || is_demo_value(v)
        || names_itself(v)
        || is_other_assignment(v)
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
/// (`=`, `:`, `:=`, `=>`) and the key (at most 96 bytes).
fn key_before(text: &[u8], s: usize) -> Vec<String> {
    let lo = s.saturating_sub(96);
    let mut i = s;
    let skip = |i: &mut usize, set: &[u8]| {
        while *i > lo && set.contains(&text[*i - 1]) {
            *i -= 1;
        }
    };
    skip(&mut i, b"\"' \t\r\n");
    skip(&mut i, b":=>");
    skip(&mut i, b"\"' \t");
    let end = i;
    while i > lo && (text[i - 1].is_ascii_alphanumeric() || b"_.-".contains(&text[i - 1])) {
        i -= 1;
    }
    let mut words = Vec::new();
    let mut cur = String::new();
    let key = &text[i..end];
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
    let l = v.to_ascii_lowercase();
    let base = l
        .iter()
        .rposition(|b| !(b.is_ascii_digit() || matches!(b, b'!' | b'_' | b'-')))
        .map_or(&l[..0], |i| &l[..=i]);
    DEMO.iter().any(|d| d.as_bytes() == base)
}

/// A value made of words joined by `-`/`_` (`xoxb-Slack_BOT_TOKEN`,
/// `gloas-checking_Length-Is-...`): at least two separators, and half its bytes or more in
/// segments that read as words (letters only, one case or capitalised). A random token with
/// `-`/`_` in its alphabet has long mixed-case segments with digits instead.
pub fn is_wordy(v: &[u8]) -> bool {
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
