//! Unit tests of issue 38's detector work: no length cliffs (keyword values and JWTs up to
//! [`VALUE_BOUND`], longer ones cut and their token's rest dropped), values with punctuation,
//! the rules for what real tools print (docker, npm, cookies, headers, Authorization schemes,
//! Google, kubeadm, `.pgpass`, ECR, `openssl -text`) and open private key blocks. Every
//! secret is generated at run time.

use super::scan::VALUE_BOUND;
use super::*;

/// A xorshift generator.
fn prng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const AN: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const LOWER_DIGITS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// `n` random characters of `alphabet`.
fn random_of(alphabet: &[u8], n: usize, seed: u64) -> String {
    let mut r = prng(seed);
    (0..n)
        .map(|_| alphabet[(r() % alphabet.len() as u64) as usize] as char)
        .collect()
}

/// A signed JWT about `len` bytes long (RS256 header, a payload padded with claims, a
/// 256-byte signature), as `az account get-access-token` prints them.
fn long_jwt(len: usize, seed: u64) -> String {
    use base64::Engine;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = url.encode(r#"{"alg":"RS256","typ":"JWT","kid":"k1"}"#);
    let sig = random_of(B64URL, 342, seed);
    let room = len.saturating_sub(header.len() + sig.len() + 2) * 3 / 4;
    let pad = random_of(AN, room.saturating_sub(40).max(8), seed + 1);
    let payload = url.encode(format!(r#"{{"aud":"x","groups":"{pad}","iat":1}}"#));
    format!("{header}.{payload}.{sig}")
}

/// The findings of a whole-text scan of a stream, as (rule, secret).
fn found(text: &str) -> Vec<(&'static str, String)> {
    scanner()
        .scan(text.as_bytes(), TextKind::Stream, false)
        .into_iter()
        .map(|f| (f.rule, text[f.start..f.end].to_string()))
        .collect()
}

/// The rules found in `text` scanned as `kind`.
fn rules_in(text: &str, kind: TextKind) -> Vec<&'static str> {
    scanner()
        .scan(text.as_bytes(), kind, kind != TextKind::Stream)
        .into_iter()
        .map(|f| f.rule)
        .collect()
}

/// `input` through the streaming redactor in chunks of `chunk` bytes, flushed by lines
/// after each chunk when `flush`.
fn redact_stream(input: &[u8], chunk: usize, flush: bool) -> Vec<u8> {
    let mut r = Redactor::new(TextKind::Stream);
    let mut out = Vec::new();
    for c in input.chunks(chunk.max(1)) {
        r.feed(c, &mut out);
        if flush {
            r.flush_lines(&mut out);
        }
    }
    r.finish(&mut out);
    out
}

/// Streams `input` several ways: the output is the whole text's redaction every time, and
/// none of `secrets`' 12-byte pieces is left in it.
fn streams_redacted(input: &str, secrets: &[&str]) {
    let want = redacted_whole(input.as_bytes());
    let w = String::from_utf8_lossy(&want).to_string();
    for s in secrets {
        for piece in s.as_bytes().chunks(12).filter(|p| p.len() == 12) {
            let p = String::from_utf8_lossy(piece);
            assert!(!w.contains(&*p), "a piece of a secret is left: {p}");
        }
    }
    for (chunk, flush) in [(4096, false), (65536, true), (1 << 20, false), (777, true)] {
        let out = redact_stream(input.as_bytes(), chunk, flush);
        assert!(
            out == want,
            "chunk {chunk} flush {flush}: the stream's redaction differs from the whole text's"
        );
    }
}

/// Keyword values of 300 bytes to 60 KiB (AWS session tokens, MSAL cache entries, rclone's
/// token JSON, `env AWS_SESSION_TOKEN=...` on a command line) are one finding each, whole;
/// before, a value over 200 bytes was not one (quoted) or only its first 200 bytes were.
#[test]
fn long_keyword_values_are_found_whole() {
    for (i, n) in [300usize, 900, 2500, 5000, 40_000, VALUE_BOUND - 10]
        .into_iter()
        .enumerate()
    {
        let v = random_of(B64, n, 10 + i as u64);
        let url = random_of(B64URL, n, 20 + i as u64);
        for (text, secret) in [
            (format!("aws_session_token = {v}\n"), v.clone()),
            (format!("env AWS_SESSION_TOKEN={v} aws s3 ls\n"), v.clone()),
            (format!("export AWS_SESSION_TOKEN=\"{v}\"\n"), v.clone()),
            (
                format!(
                    "{{\n  \"credential_type\": \"RefreshToken\",\n  \"secret\": \"{url}\",\n  \"home_account_id\": \"x\"\n}}\n"
                ),
                url.clone(),
            ),
            (
                format!(
                    "token = {{\"access_token\":\"{url}\",\"token_type\":\"Bearer\",\"refresh_token\":\"1//{v}\"}}\n"
                ),
                url.clone(),
            ),
        ] {
            let f = found(&text);
            assert!(
                f.iter().any(|(_, s)| *s == secret),
                "{n}-byte value not found whole in {:?}: {:?}",
                &text[..text.len().min(60)],
                f.iter().map(|(r, s)| (r, s.len())).collect::<Vec<_>>()
            );
            streams_redacted(&text, &[&secret]);
        }
    }
}

/// JWTs of 3 to 40 KiB, as `az account get-access-token` prints them (JSON
/// `"accessToken": "eyJ..."`), bare in a log line and in an Authorization header: found
/// whole, signature included; before, a JWT over ~2 KiB kept its signature or was missed.
#[test]
fn long_jwts_are_found_whole() {
    for (i, n) in [3 * 1024usize, 6 * 1024, 40 * 1024].into_iter().enumerate() {
        let jwt = long_jwt(n, 30 + i as u64);
        for text in [
            format!(
                "{{\n  \"accessToken\": \"{jwt}\",\n  \"expiresOn\": \"2026-12-08 10:00:00\",\n  \"tokenType\": \"Bearer\"\n}}\n"
            ),
            format!("2026-12-07T10:00:00Z INFO got {jwt} for the session\n"),
            format!("> Authorization: Bearer {jwt}\r\n"),
        ] {
            let f = found(&text);
            assert!(
                f.iter().any(|(_, s)| *s == jwt),
                "{}-byte JWT not found whole: {:?}",
                jwt.len(),
                f.iter().map(|(r, s)| (r, s.len())).collect::<Vec<_>>()
            );
            streams_redacted(&text, &[&jwt]);
        }
    }
}

/// A value that runs past [`VALUE_BOUND`] is redacted to the bound and over the rest of its
/// token, whole-text and streamed alike, and what follows the token stays.
#[test]
fn values_past_the_bound_are_redacted_with_their_token() {
    for (i, n) in [VALUE_BOUND + 1, VALUE_BOUND + 5000, 3 * VALUE_BOUND + 17]
        .into_iter()
        .enumerate()
    {
        let v = random_of(B64, n, 40 + i as u64);
        let jwt = long_jwt(n, 50 + i as u64);
        for (text, secret) in [
            (format!("AWS_SESSION_TOKEN={v} next\n"), &v),
            (format!("\"password\": \"{v}\", \"user\": \"bob\"\n"), &v),
            (format!("got {jwt} done\n"), &jwt),
        ] {
            let f = found(&text);
            assert_eq!(
                f.len(),
                1,
                "{n} {:?}: {:?}",
                &text[..20],
                f.iter().map(|(r, s)| (r, s.len())).collect::<Vec<_>>()
            );
            assert_eq!(f[0].1, *secret, "{n}: not the whole token");
            let out = String::from_utf8_lossy(&redacted_whole(text.as_bytes())).to_string();
            assert!(
                out.ends_with(" next\n") || out.ends_with("\"bob\"\n") || out.ends_with(" done\n")
            );
            streams_redacted(&text, &[secret]);
        }
    }
}

/// What stays unflagged however long: a reference, code calling a function, a path.
#[test]
fn long_values_keep_the_keyword_rule_discipline() {
    let long_word = "x".repeat(5000);
    for text in [
        format!("password = get_password({long_word})\n"),
        format!("PASSWORD=${{{}}}\n", "A".repeat(300)),
        format!("password: <{}>\n", "your-password-".repeat(30)),
        format!("password_file = /etc/{}/db.txt\n", "dir/".repeat(100)),
    ] {
        let f = found(&text);
        assert!(f.is_empty(), "{:?}: {f:?}", &text[..40]);
    }
}
