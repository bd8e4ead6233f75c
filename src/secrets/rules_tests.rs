//! Unit tests of issue 38's detector work: no length cliffs (keyword values and JWTs up to
//! [`VALUE_BOUND`], longer ones cut and their token's rest dropped), values with punctuation,
//! the rules for what real tools print (docker, npm, cookies, headers, Authorization schemes,
//! Google, kubeadm, `.pgpass`, ECR, `openssl -text`) and open private key blocks. Every
//! secret is generated at run time. Over 1,000 lines: one test or two per rule, positives
//! and negatives side by side.

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
            // Found whole (rclone's token JSON may be one finding: every value in it).
            let f = found(&text);
            assert!(
                f.iter().any(|(_, s)| s.contains(&secret)),
                "{n}-byte value not found whole in {:?}: {:?}",
                &text[..text.len().min(60)],
                f.iter().map(|(r, s)| (r, s.len())).collect::<Vec<_>>()
            );
            streams_redacted(&text, &[&secret]);
        }
    }
    // What stays unflagged however long: a reference, code calling a function, a path.
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
            // Alone on its line (`az account get-access-token --query accessToken -o tsv`),
            // first in the text or after another line: the window's rematch must see the
            // line start that the first pass saw.
            format!("{jwt}\n"),
            format!("$ az account get-access-token -o tsv\n{jwt}\n"),
            format!("x\r\n{jwt}\r\n"),
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

/// Standard base64 of `s`.
fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Asserts that `text` (a stream) has exactly the findings `want` (rule, secret), and that
/// its redaction streams as the whole text's.
fn finds(text: &str, want: &[(&str, &str)]) {
    let got = found(text);
    let got: Vec<(&str, &str)> = got.iter().map(|(r, s)| (*r, s.as_str())).collect();
    assert_eq!(got, want, "in {text:?}");
    let secrets: Vec<&str> = want.iter().map(|w| w.1).collect();
    streams_redacted(text, &secrets);
}

/// Asserts that `text` holds no finding of the rules named (as a stream and as the file
/// kinds named).
fn no_finding_of(text: &str, rules: &[&str]) {
    for kind in [TextKind::Stream, TextKind::Config, TextKind::Prose] {
        let got = rules_in(text, kind);
        assert!(
            !got.iter().any(|r| rules.contains(r)),
            "{kind:?} {text:?}: {got:?}"
        );
    }
}

#[test]
fn docker_and_npm_auth_entries() {
    let pw = random_of(AN, 20, 60);
    let auth = b64(&format!("robot$ci:{pw}"));
    finds(
        &format!(
            "{{\n  \"auths\": {{\n    \"registry.example.io\": {{\n      \"auth\": \"{auth}\"\n    }}\n  }}\n}}\n"
        ),
        &[("docker-config-auth", &auth)],
    );
    finds(
        &format!("DOCKER_AUTH_CONFIG={{\"auths\":{{\"r.io\":{{\"auth\":\"{auth}\"}}}}}}\n"),
        &[("docker-config-auth", &auth)],
    );
    finds(&format!("_auth={auth}\n"), &[("npmrc-auth", &auth)]);
    let p64 = b64(&pw);
    finds(
        &format!("//registry.internal/:_password=\"{p64}\"\n"),
        &[("npmrc-auth", &p64)],
    );
    // Not user:password, a placeholder, a reference.
    let not_pair = b64(&random_of(AN, 20, 61));
    no_finding_of(
        &format!(
            "{{\"auth\": \"{not_pair}\", \"oauth\": \"x\"}}\n_auth=${{NPM_AUTH}}\n\"auth\": \"\"\n"
        ),
        &["docker-config-auth", "npmrc-auth"],
    );
}

#[test]
fn cookies_keep_names_and_attributes() {
    let sid = random_of(AN, 32, 62);
    let sess = random_of(B64URL, 40, 63);
    finds(
        &format!("> GET / HTTP/1.1\r\n> Cookie: theme=dark; sid={sid}; lang=en\r\n"),
        &[("http-cookie", &sid)],
    );
    finds(
        &format!(
            "< Set-Cookie: session={sess}; Path=/; Expires=Wed, 09 Jun 2027 10:18:14 GMT; HttpOnly\r\n"
        ),
        &[("http-set-cookie", &sess)],
    );
    let out = String::from_utf8_lossy(&redacted_whole(
        format!("< Set-Cookie: session={sess}; Path=/; HttpOnly\n").as_bytes(),
    ))
    .to_string();
    assert_eq!(
        out,
        "< Set-Cookie: session=[REDACTED:http-set-cookie]; Path=/; HttpOnly\n"
    );
    no_finding_of(
        "Cookie: theme=dark; lang=en-US\nSet-Cookie: seen=1; Path=/\ndocument.cookie = \"a=b\";\n",
        &["http-cookie", "http-set-cookie"],
    );
}

#[test]
fn headers_named_for_secrets_and_any_authorization_scheme() {
    let key = random_of(AN, 32, 64);
    let tok = random_of(B64URL, 40, 65);
    finds(
        &format!("> X-Api-Key: {key}\r\n"),
        &[("http-secret-header", &key)],
    );
    finds(
        &format!("curl -H 'X-Auth-Token: {tok}' https://api.example.io/v1\n"),
        &[("http-secret-header", &tok)],
    );
    finds(
        &format!("Private-Token: {key}\n"),
        &[("http-secret-header", &key)],
    );
    finds(
        &format!("X-Vault-Token: {tok}\n"),
        &[("http-secret-header", &tok)],
    );
    no_finding_of(
        "X-Api-Key: <your-api-key>\nX-Auth-Token: ${TOKEN}\nX-Request-Id: 42\nx-api-key: required\nX-Session: none\n",
        &["http-secret-header"],
    );
    // Authorization, any scheme.
    let sig = random_of(b"0123456789abcdef", 64, 66);
    let akid = format!(
        "AKIA{}",
        random_of(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, 67)
    );
    let aws4 = format!(
        "Credential={akid}/20261207/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature={sig}"
    );
    // Of a parameter list, the secret parameters: SigV4's `Signature` (the access key id in
    // `Credential` is `aws-access-key-id`'s), Digest's `response`; the rest stays readable.
    let aws4_found = [
        ("aws-access-key-id", akid.as_str()),
        ("http-authorization", &sig),
    ];
    finds(
        &format!("> Authorization: AWS4-HMAC-SHA256 {aws4}\r\n"),
        &aws4_found,
    );
    finds(
        &format!("{{\"Authorization\": \"AWS4-HMAC-SHA256 {aws4}\", \"Host\": \"s3\"}}\n"),
        &aws4_found,
    );
    // botocore's `--debug`: the signature alone after `Signature:`, then the headers as a
    // Python dict's repr of bytes literals, with the session token.
    let st = format!("IQoJb3JpZ2luX2VjE{}", random_of(B64, 400, 80));
    finds(
        &format!(
            "2024-03-01 10:22:31,123 - MainThread - botocore.auth - DEBUG - Signature:\n{sig}\n"
        ),
        &[("aws-sigv4-signature", &sig)],
    );
    finds(
        &format!(
            "headers={{'X-Amz-Date': b'20240301T102231Z', 'Authorization': b'AWS4-HMAC-SHA256 {aws4}', 'X-Amz-Security-Token': b'{st}'}}>\n"
        ),
        &[
            ("aws-access-key-id", &akid),
            ("http-authorization", &sig),
            ("http-secret-header", &st),
        ],
    );
    finds(
        &format!("{{'Authorization': b'Bearer {st}'}}\n"),
        &[("http-authorization", &st)],
    );
    let resp = random_of(b"0123456789abcdef", 32, 68);
    for realm in ["api", "api@example.com"] {
        let digest = format!(
            "username=\"bob\", realm=\"{realm}\", nonce=\"{sig}\", uri=\"/\", cnonce=\"{}\", nc=00000001, qop=auth, response=\"{resp}\", algorithm=MD5",
            &sig[..16]
        );
        finds(
            &format!("> Authorization: Digest {digest}\n"),
            &[("http-authorization", &resp)],
        );
        let escaped = digest.replace('"', "\\\"");
        finds(
            &format!("{{\"Authorization\": \"Digest {escaped}\"}}\n"),
            &[("http-authorization", &resp)],
        );
        let out = String::from_utf8_lossy(&redacted_whole(
            format!("Authorization: Digest {digest}\n").as_bytes(),
        ))
        .to_string();
        assert!(
            out.contains("username=\"bob\"")
                && out.contains("response=\"[REDACTED:http-authorization]\""),
            "{out}"
        );
    }
    let blob = format!("TlRMTVNTUAAB{}", random_of(B64, 120, 69));
    finds(
        &format!("Proxy-Authorization: NTLM {blob}\n"),
        &[("http-authorization", &blob)],
    );
    finds(
        &format!("Authorization: Negotiate {blob}\n"),
        &[("http-authorization", &blob)],
    );
    let custom = format!("00{}", random_of(AN, 40, 70));
    finds(
        &format!("Authorization: SSWS {custom}\n"),
        &[("http-authorization", &custom)],
    );
    no_finding_of(
        "Authorization: Negotiate authentication is used by the proxy\nAuthorization: Bearer $TOKEN\nAuthorization: Digest <credentials>\n",
        &["http-authorization"],
    );
    // A parameter list with no secret parameter, or a placeholder for it; a `Signature:` line
    // followed by what is not a lone 64-hex signature.
    no_finding_of(
        "Authorization: Digest username=\"bob\", realm=\"api\", uri=\"/\"\nAuthorization: Digest username=\"bob\", response=\"<response>\"\n",
        &["http-authorization"],
    );
    no_finding_of(
        &format!(
            "Signature:\n{sig}  release.tar.gz\nSignature:\n{}\nGood signature:\n{}\n",
            "0".repeat(64),
            &sig[..40]
        ),
        &["aws-sigv4-signature"],
    );
}

#[test]
fn google_kubeadm_pgpass_and_ecr() {
    let ya = format!("ya29.a0{}", random_of(B64URL, 160, 71));
    finds(
        &format!("access_token\t{ya}\n"),
        &[("google-oauth-access-token", &ya)],
    );
    let kt = format!(
        "{}.{}",
        random_of(LOWER_DIGITS, 6, 72),
        random_of(LOWER_DIGITS, 16, 73)
    );
    finds(
        &format!("kubeadm join 10.0.0.1:6443 --token {kt} \\\n    --control-plane\n"),
        &[("kubeadm-bootstrap-token", &kt)],
    );
    finds(
        &format!(
            "TOKEN                     TTL   EXPIRES                USAGES                   DESCRIPTION   EXTRA GROUPS\n{kt}   23h   2026-12-08T10:00:00Z   authentication,signing   <none>        system:bootstrappers:kubeadm:default-node-token\n"
        ),
        &[("kubeadm-bootstrap-token", &kt)],
    );
    let ts = random_of(LOWER_DIGITS, 16, 75);
    finds(
        &format!(
            "stringData:\n  token-id: {}\n  token-secret: {ts}\n",
            &kt[..6]
        ),
        &[("kubeadm-bootstrap-token", &ts)],
    );
    no_finding_of(
        "kubeadm join 10.0.0.1:6443 --token abcdef.0123456789abcdef\nkubeadm join --token <token>\n",
        &["kubeadm-bootstrap-token"],
    );
    // Alone on its line, as `kubeadm token create` prints it (no name to find it by).
    finds(&format!("{kt}\n"), &[("kubeadm-bootstrap-token", &kt)]);
    finds(
        &format!("$ kubeadm token create --ttl 2h\n{kt}\r\n$ echo done\n"),
        &[("kubeadm-bootstrap-token", &kt)],
    );
    // The CA certificate's hash of a join command is public: the token only.
    let ca = random_of(b"0123456789abcdef", 64, 74);
    finds(
        &format!(
            "kubeadm join 10.0.0.1:6443 --token {kt} --discovery-token-ca-cert-hash sha256:{ca}\n"
        ),
        &[("kubeadm-bootstrap-token", &kt)],
    );
    for text in [
        format!("kubeadm join 10.0.0.1:6443 --discovery-token-ca-cert-hash sha256:{ca}\n"),
        format!("    --discovery-token-ca-cert-hash sha256:{ca} \\\n"),
        format!("discovery-token-ca-cert-hash: sha256:{ca}\n"),
    ] {
        assert!(found(&text).is_empty(), "{text}: {:?}", found(&text));
    }
    // Lines of the shape that are no token: a file, a host, `module.function`, a secret part
    // with no digit, no letter, a run or a sequence; a token inside a sentence is not alone.
    no_finding_of(
        &format!(
            "abcdef.txt\nmodule.function_name_here\ndb01ab.internal-example\nconfig.productionserver\nbackup.2024122520241226\nworker.node1node2node3n\nabcdef.0123456789abcdef\nq1w2e3.aaaaaaaaaaaaaaaa\nsee {kt} above\n"
        ),
        &["kubeadm-bootstrap-token"],
    );
    let pw = random_of(AN, 18, 76);
    finds(
        &format!("db.internal:5432:app:app_user:{pw}\n"),
        &[("pgpass-password", &pw)],
    );
    finds(
        &format!("*:*:*:postgres:{pw}\n"),
        &[("pgpass-password", &pw)],
    );
    no_finding_of(
        "ports:\n  - \"127.0.0.1:5432:5432\"\n*:*:*:postgres:${PGPASSWORD}\n",
        &["pgpass-password"],
    );
    let ecr = b64(&format!(
        "{{\"payload\":\"{}\",\"datakey\":\"{}\",\"version\":\"2\",\"type\":\"DATA_KEY\",\"expiration\":1765000000}}",
        random_of(B64, 1500, 77),
        random_of(B64, 300, 78)
    ));
    finds(&format!("{ecr}\n"), &[("aws-ecr-password", &ecr)]);
    no_finding_of("eyJwYXlsb2FkIjoi\n", &["aws-ecr-password"]);
}

/// `openssl rsa -text` / `ec -text` / `genpkey -text`: the private numbers' hex lines are
/// redacted, each line, whole-text and streamed; the public ones stay.
#[test]
fn openssl_text_dumps_keep_public_numbers_only() {
    let hex_block = |n: usize, seed: u64| -> Vec<String> {
        let h = random_of(b"0123456789abcdef", n * 2, seed);
        let bytes: Vec<&str> = (0..n).map(|i| &h[2 * i..2 * i + 2]).collect();
        bytes
            .chunks(15)
            .map(|c| format!("    {}", c.join(":")))
            .collect()
    };
    let mut text = String::from("Private-Key: (2048 bit, 2 primes)\nmodulus:\n");
    let public = hex_block(257, 80);
    for l in &public {
        text.push_str(&format!("{l}:\n"));
    }
    text.push_str("publicExponent: 65537 (0x10001)\n");
    let mut secret_lines = Vec::new();
    for (i, name) in [
        "privateExponent",
        "prime1",
        "prime2",
        "exponent1",
        "exponent2",
        "coefficient",
    ]
    .iter()
    .enumerate()
    {
        text.push_str(&format!("{name}:\n"));
        let block = hex_block(if i == 0 { 256 } else { 129 }, 81 + i as u64);
        let last = block.len() - 1;
        for (j, l) in block.iter().enumerate() {
            let line = if j < last { format!("{l}:") } else { l.clone() };
            text.push_str(&format!("{line}\n"));
            secret_lines.push(line.trim().to_string());
        }
    }
    let f = found(&text);
    let got: Vec<&str> = f.iter().map(|(_, s)| s.as_str()).collect();
    let want: Vec<&str> = secret_lines.iter().map(String::as_str).collect();
    assert_eq!(got, want);
    assert!(f.iter().all(|(r, _)| *r == "openssl-private-key-dump"));
    let refs: Vec<&str> = secret_lines.iter().map(String::as_str).collect();
    streams_redacted(&text, &refs);
    // EC: `priv:` is secret, `pub:` is not.
    let pv = hex_block(32, 90);
    let pb = hex_block(65, 91);
    let ec = format!(
        "read EC key\nPrivate-Key: (256 bit)\npriv:\n{}\npub:\n{}\nASN1 OID: prime256v1\n",
        pv.join(":\n"),
        pb.join(":\n")
    );
    let f = found(&ec);
    assert_eq!(f.len(), pv.len(), "{f:?}");
    for l in pb {
        assert!(String::from_utf8_lossy(&redacted_whole(ec.as_bytes())).contains(l.trim()));
    }
}

/// A PEM block's base64 lines, 64 wide, the last one shorter.
fn pem_lines(n: usize, seed: u64) -> Vec<String> {
    let body = random_of(B64, n, seed);
    body.as_bytes()
        .chunks(64)
        .map(|c| String::from_utf8_lossy(c).to_string())
        .collect()
}

/// `head -n 3 key.pem` (BEGIN without END) and `tail -n 4 key.pem` (END without BEGIN):
/// the key's lines are redacted, whole-text and streamed (a pause after each line too).
#[test]
fn open_and_tail_key_blocks_are_redacted() {
    let lines = pem_lines(1600, 100);
    let head = format!(
        "$ head -n 3 key.pem\n-----BEGIN PRIVATE KEY-----\n{}\n{}\n",
        lines[0], lines[1]
    );
    let f = found(&head);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].0, "private-key-open");
    assert!(f[0].1.contains(&lines[1]));
    streams_redacted(&head, &[&lines[0], &lines[1]]);
    // More output after the open block: the block ends at its last base64 line.
    let more = format!("{head}$ echo done\ndone\n");
    let out = String::from_utf8_lossy(&redacted_whole(more.as_bytes())).to_string();
    assert!(
        out.ends_with("$ echo done\ndone\n") && !out.contains(&lines[0][..16]),
        "{out}"
    );
    streams_redacted(&more, &[&lines[0], &lines[1]]);
    let n = lines.len();
    let tail = format!(
        "$ tail -n 4 id_rsa\n{}\n{}\n{}\n-----END OPENSSH PRIVATE KEY-----\n$ ls\n",
        lines[n - 3],
        lines[n - 2],
        lines[n - 1]
    );
    let f = found(&tail);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].0, "private-key-tail");
    assert!(f[0].1.starts_with(&lines[n - 3]));
    streams_redacted(&tail, &[&lines[n - 3], &lines[n - 2]]);
    // Paused after each line: the key-wide lines are held until the END comes.
    let mut r = Redactor::new(TextKind::Stream);
    let mut out = Vec::new();
    for l in tail.split_inclusive('\n') {
        r.feed(l.as_bytes(), &mut out);
        r.flush_lines(&mut out);
    }
    r.finish(&mut out);
    assert_eq!(out, redacted_whole(tail.as_bytes()));
    // A certificate's tail and a lone armour line are not keys.
    let cert = format!(
        "{}\n{}\n-----END CERTIFICATE-----\n-----BEGIN RSA PRIVATE KEY-----\nsee the docs\n",
        lines[0], lines[1]
    );
    assert!(found(&cert).is_empty(), "{:?}", found(&cert));
}

/// Key lines with neither armour line (`sed -n 2,5p key.pem`): from a line opening with a
/// private key's DER prefix over the base64 lines after it, whole-text and streamed (a pause
/// after each line too); certificates' and public keys' lines stay.
#[test]
fn key_lines_without_armour_are_redacted_from_a_private_keys_prefix() {
    for (i, prefix) in [
        "MIIEowIBAAKCAQEA",
        "MIIJKAIBAAKCAgEA",
        "MIIG4wIBAAKCAYEA",
        "MIICXAIBAAKBgQ",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        "MIIJQgIBADANBgkqhkiG9w0BAQEFAASC",
        "MHcCAQEEI",
        "MIGkAgEBBDA",
        "MIGHAgEAMBMGByqGSM49AwEHBG0wawIBAQQg",
        "MC4CAQAwBQYDK2VwBCIEI",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ]
    .into_iter()
    .enumerate()
    {
        let body = format!(
            "{prefix}{}",
            random_of(B64, 300 - prefix.len(), 300 + i as u64)
        );
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        let block = lines.join("\n");
        for text in [
            format!("{block}\n"),
            format!("$ sed -n 2,6p server.key\n{block}\n$ echo done\ndone\n"),
            format!("  key: |\n    {}\n", lines.join("\n    ")),
        ] {
            let f = found(&text);
            assert_eq!(f.len(), 1, "{prefix}: {f:?}");
            assert_eq!(f[0].0, "private-key-body", "{prefix}");
            for l in &lines {
                assert!(f[0].1.contains(l), "{prefix}: a line is left out");
            }
            streams_redacted(&text, &lines);
            let mut r = Redactor::new(TextKind::Stream);
            let mut out = Vec::new();
            for l in text.split_inclusive('\n') {
                r.feed(l.as_bytes(), &mut out);
                r.flush_lines(&mut out);
            }
            r.finish(&mut out);
            assert_eq!(out, redacted_whole(text.as_bytes()), "{prefix}: paused");
        }
        // What follows the block stays.
        let out = String::from_utf8_lossy(&redacted_whole(
            format!("{block}\n$ echo done\ndone.\n").as_bytes(),
        ))
        .to_string();
        assert!(out.ends_with("$ echo done\ndone.\n"), "{out}");
    }
    // Certificates, public keys (SPKI RSA and EC, PKCS#1 RSA), an SSH public key, and a
    // private key's prefix inside a longer base64 word: no key body.
    for (i, prefix) in [
        "MIIDxTCCAq2gAwIBAgIJAK",
        "MIIFazCCA1OgAwIBAgIUE",
        "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA",
        "MIICIjANBgkqhkiG9w0BAQEFAAOCAg8AMIICCgKCAgEA",
        "MIIBCgKCAQEA",
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE",
        "AAAAB3NzaC1yc2EAAAADAQABAAABAQ",
        "QUJDRE1IcCAQEEI",
    ]
    .into_iter()
    .enumerate()
    {
        let body = format!(
            "{prefix}{}",
            random_of(B64, 300 - prefix.len(), 320 + i as u64)
        );
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        no_finding_of(&format!("{}\n", lines.join("\n")), &["private-key-body"]);
    }
}

/// `.env` values in brackets (`API_SECRET=(...)`, `[...]`, `<...>`, `{...}`): a value when
/// what is inside is random, found whole with its brackets; a placeholder of each bracket
/// shape stays.
#[test]
fn env_values_in_brackets_are_judged_by_what_is_inside() {
    for (i, (open, close)) in [("(", ")"), ("[", "]"), ("<", ">"), ("{", "}")]
        .into_iter()
        .enumerate()
    {
        let inner = random_of(AN, 16, 400 + i as u64);
        let v = format!("{open}{inner}{close}");
        for text in [
            format!("API_SECRET={v}\n"),
            format!("DB_PASSWORD={v}\nREDIS_HOST=cache\n"),
            format!("export SMTP_PASSWORD={v}\n"),
        ] {
            finds(&text, &[("keyword-secret", &v)]);
        }
    }
    for text in [
        "SMTP_PASSWORD=<your-password>\n",
        "SMTP_PASSWORD=<PASSWORD>\n",
        "SMTP_PASSWORD=<PASSWORD123>\n",
        "REDIS_PASSWORD={password}\n",
        "REDIS_PASSWORD={{ db_password }}\n",
        "REDIS_PASSWORD={{db_password}}\n",
        "DB_PASSWORD=[REDACTED]\n",
        "DB_PASSWORD=[changeme]\n",
        "API_SECRET=(none)\n",
        "API_SECRET=${X}\n",
        "API_SECRET=(aaaaaaaaaaaaaaaa)\n",
        "API_SECRET=<abcdefghij0123456789>\n",
        "API_SECRET=[your_api_secret_here]\n",
        "API_SECRET={API_SECRET_VALUE}\n",
    ] {
        no_finding_of(text, &["keyword-secret"]);
    }
}

/// `words` random lower-case words, space-separated (a passphrase).
fn passphrase(words: usize, seed: u64) -> String {
    (0..words)
        .map(|i| random_of(b"abcdefghijklmnopqrstuvwxyz", 6 + i % 4, seed + i as u64))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Passphrases with spaces under a secret name: quoted, whole; unquoted to the line's end in
/// `.env` and YAML shapes (`PASSPHRASE` names anywhere, `PASSWORD` names in configuration).
/// A shell line's environment prefix (`PGPASSWORD=x psql ...`), a reference and prose stay
/// as they are read today.
#[test]
fn passphrases_with_spaces_are_found_whole() {
    let p1 = passphrase(5, 500);
    let p2 = passphrase(4, 510);
    let p3 = passphrase(4, 520);
    for kind in [TextKind::Stream, TextKind::Config, TextKind::Prose] {
        for (text, secret) in [
            (format!("export GPG_PASSPHRASE=\"{p1}\"\n"), &p1),
            (format!("GPG_PASSPHRASE='{p1}'\n"), &p1),
            (format!("BACKUP_PASSPHRASE={p2}\n"), &p2),
            (format!("export BACKUP_PASSPHRASE={p2}\n"), &p2),
            (format!("signing:\n  key_passphrase: {p3}\n"), &p3),
            (format!("BORG_PASSPHRASE={p2}\r\nX=1\n"), &p2),
        ] {
            let f: Vec<_> = scanner()
                .scan(text.as_bytes(), kind, false)
                .into_iter()
                .map(|f| text[f.start..f.end].to_string())
                .collect();
            assert_eq!(f, vec![secret.clone()], "{kind:?} {text:?}");
        }
    }
    finds(
        &format!("BACKUP_PASSPHRASE={p2}\n"),
        &[("keyword-secret", &p2)],
    );
    // `PASSWORD` names: to the line's end in configuration (a `.env` file) only.
    let cfg = format!("DB_PASSWORD={p2}\n");
    let f = scanner().scan(cfg.as_bytes(), TextKind::Config, false);
    assert_eq!(f.len(), 1);
    assert_eq!(&cfg[f[0].start..f[0].end], p2);
    let pw = random_of(AN, 14, 530);
    for (text, kind, want) in [
        // A command's environment: the value is the first word, the rest is the command.
        (
            format!("PGPASSWORD={pw} psql -h db -U app\n"),
            TextKind::Stream,
            Some(pw.as_str()),
        ),
        (
            format!("DB_PASSWORD={pw} ./migrate.sh --up\n"),
            TextKind::Prose,
            Some(&pw),
        ),
        (
            format!("GPG_PASSPHRASE={pw} gpg --batch --sign f\n"),
            TextKind::Stream,
            Some(&pw),
        ),
        (
            format!("DB_PASSWORD={pw} make migrate\n"),
            TextKind::Stream,
            Some(&pw),
        ),
        ("PASSWORD=$1 shift\n".to_string(), TextKind::Stream, None),
        (
            "BACKUP_PASSPHRASE=$BORG_PASSPHRASE borg create ::a\n".to_string(),
            TextKind::Stream,
            None,
        ),
        (
            "Passphrase: must be at least 12 characters\n".to_string(),
            TextKind::Prose,
            None,
        ),
        (
            "passphrase: the one you chose\n".to_string(),
            TextKind::Config,
            None,
        ),
        (
            "password = get_passphrase()\n".to_string(),
            TextKind::Code,
            None,
        ),
    ] {
        let f: Vec<_> = scanner()
            .scan(text.as_bytes(), kind, false)
            .into_iter()
            .map(|f| text[f.start..f.end].to_string())
            .collect();
        let want: Vec<String> = want.into_iter().map(str::to_string).collect();
        assert_eq!(f, want, "{kind:?} {text:?}");
    }
}

/// `AUTH` and `PASS` as a name's last word name a secret (`REDISCLI_AUTH`,
/// `RABBITMQ_DEFAULT_PASS`); inside a name or a word (`OAUTH_...`, `MAX_PASS_COUNT`,
/// `BYPASS`, `DEFAULT_AUTH_METHOD`) they do not.
#[test]
fn auth_and_pass_as_a_names_last_word_name_a_secret() {
    let v = random_of(AN, 20, 600);
    for (text, kind) in [
        (format!("REDISCLI_AUTH={v}\n"), TextKind::Stream),
        (
            format!("export RABBITMQ_DEFAULT_PASS={v}\n"),
            TextKind::Stream,
        ),
        (format!("RABBITMQ_DEFAULT_PASS={v}\n"), TextKind::Config),
        (format!("SMTP_PASS = {v}\n"), TextKind::Config),
        (format!("{{\"REDISCLI_AUTH\": \"{v}\"}}\n"), TextKind::Code),
        (
            format!("  - name: REDIS_AUTH\n    value: {v}\n"),
            TextKind::Stream,
        ),
    ] {
        let f: Vec<_> = scanner()
            .scan(text.as_bytes(), kind, false)
            .into_iter()
            .map(|f| text[f.start..f.end].to_string())
            .collect();
        assert_eq!(f, vec![v.clone()], "{kind:?} {text:?}");
    }
    for text in [
        "OAUTH_CALLBACK_URL=https://app.example.io/oauth/callback\n".to_string(),
        "PASS_COUNT=3\nBYPASS=1\n".to_string(),
        format!("MAX_PASS_COUNT={v}\n"),
        format!("DEFAULT_AUTH_METHOD={v}\n"),
        format!("OAUTH_CALLBACK_URL={v}\n"),
        format!("BYPASS={v}\n"),
        format!("GIT_AUTHOR_NAME={v}\n"),
        format!("FIRST_PASS.RESULT={v}\n"),
    ] {
        no_finding_of(&text, &["keyword-secret"]);
    }
}

#[test]
fn values_with_punctuation_are_found_whole() {
    let pw = random_of(AN, 12, 200);
    for (text, secret) in [
        (format!("DB_PASSWORD=a(b){pw}\n"), format!("a(b){pw}")),
        (format!("PASSWORD={pw};b\n"), format!("{pw};b")),
        (format!("mysql --password=a;{pw} db\n"), format!("a;{pw}")),
        (format!("PASSWORD=({pw}\n"), format!("({pw}")),
        (format!("PASSWORD={{{pw}\n"), format!("{{{pw}")),
        (
            format!("Password: correct horse battery {pw}\n"),
            format!("correct horse battery {pw}"),
        ),
        (
            format!("{{\"password\": \"ab\\\\c{pw}\\\"d\"}}\n"),
            format!("ab\\\\c{pw}\\\"d"),
        ),
    ] {
        let f = found(&text);
        assert!(
            f.iter()
                .any(|(r, s)| *r == "keyword-secret" && *s == secret),
            "{text:?}: {f:?}"
        );
        streams_redacted(&text, &[&pw]);
    }
    for text in [
        "password = get_password()\n",
        "PASSWORD=${DB_PASSWORD}\n",
        "PASSWORD=$(cat /run/secrets/db)\n",
        "password: <your-password>\n",
        "Password: must be at least 8 characters\n",
        "Password: incorrect\n",
        "PASSWORD=(none)\n",
        "PASSWORD=[REDACTED]\n",
        "password=hunter(2)\n",
    ] {
        assert!(found(text).is_empty(), "{text:?}: {:?}", found(text));
    }
    // A name in capitals closing the string it sits in (gitleaks' huggingface fp3): no
    // value; one in capitals and digits still is, and so is a docker Env entry's value.
    for text in [
        "API_ORG_CREATE(\"https://qyapi.weixin.qq.com/cgi-bin/department/create?access_token=ACCESS_TOKEN\"),\n",
        "\"url\": \"https://api.example.io/x?access_token=ACCESS_TOKEN\\\"),\"\n",
        "f(\"?password=DB_PASSWORD'),\n",
    ] {
        no_finding_of(text, &["keyword-secret"]);
    }
    let caps = random_of(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 16, 210);
    let caps = format!("{}7{}", &caps[..8], &caps[8..]);
    let text = format!("f(\"?access_token={caps}\"),\n");
    assert!(
        found(&text).iter().any(|(_, s)| s.contains(&caps)),
        "{text}: {:?}",
        found(&text)
    );
    let env = format!("[\n  \"DB_PASSWORD=({pw})\",\n  \"LANG=C.UTF-8\"\n]\n");
    assert!(
        found(&env).iter().any(|(_, s)| s.contains(&pw)),
        "{env}: {:?}",
        found(&env)
    );
}

/// A bracket a value opens and its word does not close is a tool's note, not a value:
/// terraform's plan printed `password = (known after apply)` as `= [REDACTED] after apply)`.
#[test]
fn an_open_bracket_in_prose_is_no_value() {
    for text in [
        "      + password      = (known after apply)\n",
        "      ~ secret        = (sensitive value)\n",
        "      + auth_token    = (sensitive value)\n",
        "  db_password: [not set]\n",
        "API_SECRET={ see vault }\n",
    ] {
        for kind in [TextKind::Stream, TextKind::Config] {
            assert!(rules_in(text, kind).is_empty(), "{kind:?}: {text}");
        }
    }
    // A generated value that opens with a bracket and closes it is still one.
    let v = random_of(
        b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789",
        20,
        41,
    );
    assert!(!rules_in(&format!("API_SECRET=({v})\n"), TextKind::Stream).is_empty());
}

/// An AWS key id's prefix inside a longer run of capitals and digits (an upper-case hex
/// digest, a fingerprint) is no key id; one standing alone still is.
#[test]
fn aws_key_ids_inside_upper_case_hex_are_not_found() {
    let hex = random_of(b"0123456789ABCDEF", 16, 77);
    for text in [
        format!("SHA256: 0AE91E0F14C22D3948871AACCA{hex}\n"),
        format!("fingerprint 9D0AE91E0F14AKIA{hex}\n"),
    ] {
        assert!(
            !rules_in(&text, TextKind::Stream).contains(&"aws-access-key-id"),
            "{text}"
        );
    }
    let id = format!(
        "AKIA{}",
        random_of(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, 78)
    );
    for text in [
        format!("aws_access_key_id = {id}\n"),
        format!("Credential={id}/20261207/us-east-1/s3/aws4_request\n"),
        format!("\"{id}\"\n"),
        format!("{id}\n"),
    ] {
        assert!(
            rules_in(&text, TextKind::Stream).contains(&"aws-access-key-id"),
            "{text}"
        );
    }
}
