//! Tests of entropy in secret positions (`weak.rs`): each position with generated values (no
//! secret-looking literal here), the identifiers and digests that must stay readable in the
//! same positions, and the stream's agreement with the whole text.

use super::super::{Redactor, TextKind, redacted_whole, scanner};
use super::RULE;

/// A splitmix64 stream from `seed`.
fn stream(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// `n` random characters of `alphabet`, with a digit and a letter (so every seed gives a
/// value a check could take).
fn of(alphabet: &[u8], seed: u64, n: usize) -> String {
    let mut next = stream(seed);
    let mut v: Vec<u8> = (0..n)
        .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
        .collect();
    v[0] = b'7';
    v[n / 2] = alphabet
        .iter()
        .copied()
        .find(u8::is_ascii_alphabetic)
        .unwrap_or(b'a');
    String::from_utf8(v).unwrap_or_default()
}

const B62: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const HEX: &[u8] = b"0123456789abcdef";
const HEX_UP: &[u8] = b"0123456789ABCDEF";

fn b62(seed: u64, n: usize) -> String {
    of(B62, seed, n)
}

/// What this check finds in `text` (a stream).
fn weak_findings(text: &str) -> Vec<String> {
    scanner()
        .scan(text.as_bytes(), TextKind::Stream, false)
        .into_iter()
        .filter(|f| f.rule == RULE)
        .map(|f| text[f.start..f.end].to_string())
        .collect()
}

/// `text` through a stream redactor fed in `chunk`-byte pieces, flushed by lines after each.
fn streamed(text: &str, chunk: usize) -> String {
    let mut r = Redactor::new(TextKind::Stream);
    let mut out = Vec::new();
    for c in text.as_bytes().chunks(chunk) {
        r.feed(c, &mut out);
        r.flush_lines(&mut out);
    }
    r.finish(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Each secret is gone from the redacted stream, each kept part stays, and chunking changes
/// nothing.
#[track_caller]
fn hides(text: &str, secrets: &[&str], kept: &[&str]) {
    let out = String::from_utf8_lossy(&redacted_whole(text.as_bytes())).into_owned();
    for s in secrets {
        assert!(!out.contains(s), "{s:?} shown in\n{out}");
    }
    for k in kept {
        assert!(out.contains(k), "{k:?} lost in\n{out}");
    }
    for chunk in [7, 64, 4096] {
        assert_eq!(streamed(text, chunk), out, "chunks of {chunk}");
    }
}

/// This check takes nothing in `text`: with a witness line after it (a key as `openssl enc
/// -P` prints it), it takes the witness and nothing else (so the check is seen to run).
#[track_caller]
fn readable(text: &str) {
    let witness = of(HEX_UP, text.len() as u64, 64);
    let f = weak_findings(&format!("{text}key={witness}\n"));
    assert_eq!(f, [witness], "taken in\n{text}");
}

#[test]
fn openssl_enc_key_is_hidden_and_its_salt_stays() {
    let (salt, key, iv) = (of(HEX_UP, 1, 16), of(HEX_UP, 2, 64), of(HEX_UP, 3, 32));
    let text = format!("salt={salt}\nkey={key}\niv ={iv}\n");
    hides(&text, &[&key], &[&salt, "key=", "iv ="]);
    assert_eq!(weak_findings(&text), [key]);
}

#[test]
fn weakly_named_values_are_hidden() {
    let v: Vec<String> = (10..16).map(|i| b62(i, 32)).collect();
    let text = format!(
        "encryption_key: {}\nsigningKey={}\n\"auth\": \"{}\"\nDEPLOY_CREDENTIALS={}\nmaster-key = {}\ncreds: '{}'\n",
        v[0], v[1], v[2], v[3], v[4], v[5]
    );
    let refs: Vec<&str> = v.iter().map(String::as_str).collect();
    hides(
        &text,
        &refs,
        &[
            "encryption_key: ",
            "signingKey=",
            "\"auth\": \"",
            "creds: '",
        ],
    );
}

#[test]
fn url_parameters_that_carry_a_credential_are_hidden() {
    let sig = of(B64, 20, 43).replace('+', "%2B").replace('/', "%2F") + "%3D";
    let amz = of(HEX, 21, 64);
    let session = of(B64, 22, 120).replace('+', "%2B").replace('/', "%2F");
    let code = of(HEX, 23, 20);
    let key = b62(24, 39);
    let text = format!(
        "Download: https://acct.blob.core.windows.net/c/b.tar?sv=2022-11-02&ss=b&sp=r&se=2024-03-01T10%3A00%3A00Z&sig={sig}\n\
         curl 'https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20240301T100000Z&X-Amz-Expires=3600&X-Amz-Security-Token={session}&X-Amz-Signature={amz}'\n\
         GET /callback?code={code}&state=af0ifjsldkj HTTP/1.1\n\
         https://maps.example.com/api/geocode?address=x&key={key}\n"
    );
    hides(
        &text,
        &[&sig, &amz, &session, &code, &key],
        &[
            "X-Amz-Algorithm=AWS4-HMAC-SHA256",
            "state=af0ifjsldkj",
            "sv=2022-11-02",
        ],
    );
}

#[test]
fn headers_and_cookies_are_hidden() {
    let hub = of(HEX, 30, 64);
    let auth = b62(31, 37);
    let sid = of(b"abcdefghijklmnopqrstuvwxyz0123456789", 32, 32);
    let php = of(b"abcdefghijklmnopqrstuvwxyz0123456789", 33, 26);
    let text = format!(
        "> X-Hub-Signature-256: sha256={hub}\n< X-Custom-Auth: {auth}\nCookie: theme=dark; sessionid={sid}\nSet-Cookie: PHPSESSID={php}; path=/\n"
    );
    hides(
        &text,
        &[&hub, &auth, &sid, &php],
        &["X-Hub-Signature-256: sha256=", "theme=dark", "path=/"],
    );
}

/// What build logs print in these positions stays readable: hashes, digests, ids, cache keys,
/// public keys, key ids, fingerprints, package signatures, paths and identifiers.
#[test]
fn identifiers_and_digests_in_the_same_positions_stay_readable() {
    let h40 = of(HEX, 40, 40);
    let h64 = of(HEX, 41, 64);
    let b = of(B64, 42, 86);
    let pk = of(B64, 43, 44);
    let kid = of(HEX_UP, 44, 16);
    let uuid = format!(
        "{}-{}-4{}-a{}-{}",
        of(HEX, 45, 8),
        of(HEX, 46, 4),
        of(HEX, 47, 3),
        of(HEX, 48, 3),
        of(HEX, 49, 12)
    );
    let cases = [
        format!("key: {h40}\n"),
        format!("key: {h64}\n"),
        format!("Cache key: node-cache-Linux-npm-{h64}\n"),
        format!("Cache restored from key: Linux-cargo-{h64}\n"),
        format!("    key: Linux-cargo-{h64}\n"),
        format!("    key: macOS-gradle-{h64}\n"),
        format!("Cache not found for input keys: macOS-gradle-{h64}, macOS-gradle-\n"),
        format!("Cache key: {h64}\n"),
        format!("public_key: {pk}\npublicKey={pk}\npubkey = {pk}\n"),
        format!("STRIPE_PUBLISHABLE_KEY=pk_test_{pk}\nRECAPTCHA_SITE_KEY={pk}\n"),
        format!("key_id: {kid}\nkeyId: {kid}\n\"kid\": \"{kid}\"\nsigningkey = {kid}\n"),
        format!("Primary key fingerprint: {h40}\nfingerprint={h40}\n"),
        format!("\"signatures\": [{{\"keyid\": \"SHA256:{pk}\", \"sig\": \"{b}\"}}]\n"),
        format!("signature: {b}\nSignature: {pk}\n"),
        format!("\"integrity\": \"sha512-{b}==\"\ndigest: sha256:{h64}\n"),
        format!("\tdep\tgithub.com/x/y\tv1.2.3\th1:{pk}=\n"),
        format!("key: {uuid}\nsession: {uuid}\n"),
        "key: src/secrets/weak.rs\nkey: https://example.com/a/b\nkey: com.example.app.Service\n"
            .to_string(),
        "exit code: 137\nerror code=ERR_PNPM_FETCH_404\nstatus code: 200\n".to_string(),
        format!("key = \"terraform/{h40}/state.tfstate\"\n"),
        format!("Sort key: {h64}\nkey={h40}\n"),
        format!("<entry key=\"jetbrains.mps.v8_elimination\" value=\"{h40}\" />\n"),
        format!("primaryKey={}\n", b62(52, 30)),
        format!("auth: {}\n", "abcdefghijklmnopqrstuvwx"),
        format!("ssh_key: ~/.ssh/id_{h40}\n"),
        format!("https://registry.example.com/pkg?checksum={h64}&id={kid}\n"),
    ];
    for c in &cases {
        readable(c);
    }
}

/// A value must look random in its position: a word, a version, too short.
#[test]
fn plain_values_in_secret_positions_stay_readable() {
    for text in [
        "key: production\n",
        "auth: basic\n",
        "credentials: none\n",
        "key=value\n",
        "https://x.example.com/cb?code=200&state=ok\n",
        "X-Api-Version: 2024-03-01\n",
        "sessionid=1\n",
        "key: v1.2.3-rc.4+build.20240301\n",
    ] {
        readable(text);
    }
    // Short values, under a name (20 bytes) or in a URL (16).
    readable(&format!("key: {}\n", b62(50, 19)));
    readable(&format!("https://x.example.com/?sig={}\n", b62(51, 15)));
}

/// Output dense with names and separators costs what ordinary output does (the fuzz time
/// budget): a value run read once, not again from each name inside it.
#[test]
fn dense_names_keep_the_time_budget() {
    for unit in [
        &b"key="[..],
        b"key:",
        b"&sig=",
        b"?code=a",
        b"X-Hub-Signature: sha256=",
        b"sessionid=",
        b"credentials: 7",
        b"key=7Qz",
    ] {
        super::super::fuzz_time_budget(unit);
    }
}
