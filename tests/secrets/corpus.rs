//! The labelled secrets corpus: generated positives (at least 3 per detector, in code,
//! configuration and prose contexts) and negatives (the false-positive kinds detect-secrets'
//! filters know, and more), scanned by the real binary with `gateway scan --format json`.
//!
//! Secrets are generated here from templates with a fixed-seed generator, so no secret-looking
//! literal lives in the repository. Template syntax: `{C:N}` is N characters of class C.
//!
//! Over 1,000 lines: data — the templates of the labelled corpus, one per detector and context.

use crate::util::Env;
use std::collections::BTreeMap;

/// Character classes of the templates.
fn class(c: char) -> &'static [u8] {
    match c {
        'U' => b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        'u' => b"ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        'l' => b"abcdefghijklmnopqrstuvwxyz",
        'L' => b"abcdefghijklmnopqrstuvwxyz0123456789",
        'A' => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        'd' => b"0123456789",
        'h' => b"0123456789abcdef",
        'H' => b"0123456789ABCDEF",
        'a' => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        'b' => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        'w' => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
        'z' => b"QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
        _ => panic!("unknown class {c}"),
    }
}

/// `{jwt64}`: a JWT (a JSON header naming its `alg`, a payload, a signature) encoded once
/// more in base64, as gitleaks' `jwt-base64` finds them in Kubernetes secrets and env dumps.
fn jwt_in_base64(seed: u64) -> String {
    use base64::Engine;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let sig: Vec<u8> = (0..32u64)
        .map(|i| (seed.rotate_left(i as u32) ^ (i * 0x9E37)) as u8)
        .collect();
    let jwt = format!(
        "{}.{}.{}",
        url.encode(r#"{"alg":"HS256","typ":"JWT"}"#),
        url.encode(format!(r#"{{"sub":"{seed}","iat":1700000000}}"#)),
        url.encode(sig)
    );
    base64::engine::general_purpose::STANDARD.encode(jwt)
}

/// `{jwtu}`: an unsigned JWT, `header.payload` with an `alg` in the header and a JSON payload
/// (detect-secrets' "no signature - but still valid" form).
fn unsigned_jwt(seed: u64) -> String {
    use base64::Engine;
    let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    format!(
        "{}.{}",
        url.encode(r#"{"typ":"JWT","alg":"HS256"}"#),
        url.encode(format!(r#"{{"sub":"{seed}","name":"ci"}}"#))
    )
}

/// Issue 38's generated values: `{userpass64}` (base64 of `user:password`, docker's and
/// npm's `auth`), `{pass64}` (base64 of a password), `{ecr}` (an `aws ecr
/// get-login-password` token: base64 of its JSON payload), `{hexlines}` (the indented hex
/// lines of an `openssl -text` number).
fn generated(spec: &str, seed: u64) -> Option<String> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let r = |class: char, n: usize, k: u64| expand(&format!("{{{class}:{n}}}"), seed ^ k);
    Some(match spec {
        "userpass64" => b64.encode(format!("ci-{}:{}", r('l', 6, 1), r('a', 20, 2))),
        "pass64" => b64.encode(r('a', 18, 3)),
        "ecr" => b64.encode(format!(
            "{{\"payload\":\"{}\",\"datakey\":\"{}\",\"version\":\"2\",\"type\":\"DATA_KEY\",\"expiration\":1765000000}}",
            r('b', 900, 4),
            r('b', 200, 5)
        )),
        "hexlines" => (0..5)
            .map(|i| {
                let h = r('h', 30, 6 + i);
                let pairs: Vec<&str> = (0..15).map(|j| &h[2 * j..2 * j + 2]).collect();
                format!("    {}:", pairs.join(":"))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    })
}

/// Expands a template with a xorshift generator seeded by `seed`.
pub fn expand(template: &str, seed: u64) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let end = rest[i..].find('}').map(|e| i + e).expect("closing brace");
        let spec = &rest[i + 1..end];
        if spec == "jwt64" {
            out.push_str(&jwt_in_base64(next()));
            rest = &rest[end + 1..];
            continue;
        }
        if spec == "jwtu" {
            out.push_str(&unsigned_jwt(next()));
            rest = &rest[end + 1..];
            continue;
        }
        if let Some(g) = generated(spec, next()) {
            out.push_str(&g);
            rest = &rest[end + 1..];
            continue;
        }
        match spec.split_once(':') {
            Some((c, n)) if c.len() == 1 && n.parse::<usize>().is_ok() => {
                let chars = class(c.chars().next().expect("class"));
                for _ in 0..n.parse::<usize>().expect("count") {
                    out.push(chars[(next() % chars.len() as u64) as usize] as char);
                }
            }
            // Not a generator: a literal brace (JSON, templated values in negatives).
            _ => {
                out.push('{');
                rest = &rest[i + 1..];
                continue;
            }
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `prefix` + `random` + the CRC32 (IEEE) of `random` in 6 base62 digits, most significant
/// first: the tail of GitHub's and npm's tokens.
#[allow(dead_code)]
pub fn checksummed(prefix: &str, random: &str) -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut n = crc32fast::hash(random.as_bytes());
    let mut tail = [b'0'; 6];
    for d in tail.iter_mut().rev() {
        *d = DIGITS[(n % 62) as usize];
        n /= 62;
    }
    format!("{prefix}{random}{}", String::from_utf8_lossy(&tail))
}

/// (rule, file name, template): every rule has at least three.
#[allow(dead_code)]
pub const POSITIVES: &[(&str, &str, &str)] = &[
    // --- gitleaks' rule families (issue 16) ---
    (
        "airtable-pat",
        "airtable-pat0.env",
        "AIRTABLE_TOKEN=pat{a:14}.{h:64}\n",
    ),
    (
        "airtable-pat",
        "airtable-pat1.js",
        "const airtableToken = \"pat{a:14}.{h:64}\";\n",
    ),
    (
        "airtable-pat",
        "airtable-pat2.yaml",
        "airtable_token: pat{a:14}.{h:64}\n",
    ),
    (
        "artifactory-reference-token",
        "artifactory-0.env",
        "JFROG_TOKEN=cmVmd{a:59}\n",
    ),
    (
        "artifactory-reference-token",
        "artifactory-1.py",
        "token = \"cmVmd{a:59}\"\n",
    ),
    (
        "artifactory-reference-token",
        "artifactory-2.yaml",
        "auth: cmVmd{a:59}\n",
    ),
    (
        "authress-access-key",
        "authress-acc0.env",
        "AUTHRESS_KEY=sc_{l:10}.{l:5}.acc_{l:16}.{a:60}\n",
    ),
    (
        "authress-access-key",
        "authress-acc1.py",
        "key = \"authress_{L:12}.{L:4}.acc-{L:20}.{a:40}\"\n",
    ),
    (
        "authress-access-key",
        "authress-acc2.yaml",
        "access_key: ext_{L:8}.{L:6}.acc_{L:12}.{a:50}\n",
    ),
    (
        "clickhouse-cloud-key",
        "clickhouse-c0.env",
        "CLICKHOUSE_SECRET=4b1d{a:38}\n",
    ),
    (
        "clickhouse-cloud-key",
        "clickhouse-c1.py",
        "secret = \"4b1d{a:38}\"\n",
    ),
    (
        "clickhouse-cloud-key",
        "clickhouse-c2.txt",
        "clickhouse key 4b1d{a:38} rotated\n",
    ),
    (
        "clojars-token",
        "clojars-toke0.env",
        "CLOJARS_PASSWORD=CLOJARS_{L:60}\n",
    ),
    (
        "clojars-token",
        "clojars-toke1.clj",
        "(def token \"CLOJARS_{L:60}\")\n",
    ),
    (
        "clojars-token",
        "clojars-toke2.txt",
        "deploy with CLOJARS_{L:60}\n",
    ),
    (
        "cloudflare-origin-ca-key",
        "cloudflare-o0.env",
        "CF_ORIGIN_CA_KEY=v1.0-{h:24}-{h:146}\n",
    ),
    (
        "cloudflare-origin-ca-key",
        "cloudflare-o1.py",
        "key = \"v1.0-{h:24}-{h:146}\"\n",
    ),
    (
        "cloudflare-origin-ca-key",
        "cloudflare-o2.yaml",
        "origin_ca_key: v1.0-{h:24}-{h:146}\n",
    ),
    (
        "defined-networking-token",
        "defined-netw0.env",
        "DN_API_KEY=dnkey-{L:26}-{L:52}\n",
    ),
    (
        "defined-networking-token",
        "defined-netw1.py",
        "key = \"dnkey-{w:26}-{w:52}\"\n",
    ),
    (
        "defined-networking-token",
        "defined-netw2.yaml",
        "api_key: dnkey-{a:26}-{a:52}\n",
    ),
    (
        "duffel-token",
        "duffel-token0.env",
        "DUFFEL_TOKEN=duffel_test_{a:43}\n",
    ),
    (
        "duffel-token",
        "duffel-token1.py",
        "token = \"duffel_live_{w:43}\"\n",
    ),
    (
        "duffel-token",
        "duffel-token2.yaml",
        "duffel: duffel_live_{a:43}\n",
    ),
    (
        "dynatrace-token",
        "dynatrace-to0.env",
        "DT_API_TOKEN=dt0c01.{U:24}.{U:64}\n",
    ),
    (
        "dynatrace-token",
        "dynatrace-to1.py",
        "token = \"dt0c01.{a:24}.{a:64}\"\n",
    ),
    (
        "dynatrace-token",
        "dynatrace-to2.yaml",
        "api_token: dt0c01.{U:24}.{a:64}\n",
    ),
    (
        "easypost-token",
        "easypost-tok0.env",
        "EASYPOST_API_KEY=EZAK{a:54}\n",
    ),
    (
        "easypost-token",
        "easypost-tok1.py",
        "client = EasyPost(\"EZTK{a:54}\")\n",
    ),
    ("easypost-token", "easypost-tok2.yaml", "key: EZAK{a:54}\n"),
    (
        "facebook-page-access-token",
        "facebook-pag0.env",
        "FB_PAGE_TOKEN=EAAM{a:120}\n",
    ),
    (
        "facebook-page-access-token",
        "facebook-pag1.py",
        "token = \"EAAC{a:150}\"\n",
    ),
    (
        "facebook-page-access-token",
        "facebook-pag2.yaml",
        "page_token: EAAM{a:110}\n",
    ),
    (
        "flutterwave-key",
        "flutterwave-0.env",
        "FLW_SECRET_KEY=FLWSECK_TEST-{h:32}-X\n",
    ),
    (
        "flutterwave-key",
        "flutterwave-1.py",
        "pub = \"FLWPUBK_TEST-{h:32}-X\"\n",
    ),
    (
        "flutterwave-key",
        "flutterwave-2.yaml",
        "encryption_key: FLWSECK_TEST{h:12}\n",
    ),
    (
        "frameio-token",
        "frameio-toke0.env",
        "FRAMEIO_TOKEN=fio-u-{w:64}\n",
    ),
    (
        "frameio-token",
        "frameio-toke1.py",
        "token = \"fio-u-{a:64}\"\n",
    ),
    (
        "frameio-token",
        "frameio-toke2.yaml",
        "frameio: fio-u-{a:64}\n",
    ),
    (
        "grafana-api-key",
        "grafana-api-0.env",
        "GRAFANA_API_KEY=eyJrIjoi{a:80}\n",
    ),
    (
        "grafana-api-key",
        "grafana-api-1.py",
        "key = \"eyJrIjoi{a:100}\"\n",
    ),
    (
        "grafana-api-key",
        "grafana-api-2.yaml",
        "grafana:\n  api_key: eyJrIjoi{a:90}==\n",
    ),
    (
        "harness-api-key",
        "harness-api-0.env",
        "HARNESS_API_KEY=pat.{w:22}.{a:24}.{a:20}\n",
    ),
    (
        "harness-api-key",
        "harness-api-1.py",
        "key = \"sat.{a:22}.{a:24}.{a:20}\"\n",
    ),
    (
        "harness-api-key",
        "harness-api-2.yaml",
        "x-api-key: pat.{a:22}.{a:24}.{a:20}\n",
    ),
    (
        "infracost-token",
        "infracost-to0.env",
        "INFRACOST_API_KEY=ico-{a:32}\n",
    ),
    (
        "infracost-token",
        "infracost-to1.py",
        "key = \"ico-{a:32}\"\n",
    ),
    (
        "infracost-token",
        "infracost-to2.yaml",
        "api_key: ico-{a:32}\n",
    ),
    (
        "intra42-client-secret",
        "intra42-clie0.env",
        "FT_SECRET=s-s4t2ud-{h:64}\n",
    ),
    (
        "intra42-client-secret",
        "intra42-clie1.py",
        "secret = \"s-s4t2af-{h:64}\"\n",
    ),
    (
        "intra42-client-secret",
        "intra42-clie2.yaml",
        "client_secret: s-s4t2ud-{h:64}\n",
    ),
    (
        "maxmind-license-key",
        "maxmind-lice0.env",
        "MAXMIND_LICENSE_KEY={a:6}_{a:29}_mmk\n",
    ),
    (
        "maxmind-license-key",
        "maxmind-lice1.py",
        "key = \"{a:6}_{a:29}_mmk\"\n",
    ),
    (
        "maxmind-license-key",
        "maxmind-lice2.txt",
        "LicenseKey {a:6}_{a:29}_mmk\n",
    ),
    (
        "microsoft-teams-webhook",
        "microsoft-te0.env",
        "TEAMS_WEBHOOK=https://{l:8}.webhook.office.com/webhookb2/{h:8}-{h:4}-{h:4}-{h:4}-{h:12}@{h:8}-{h:4}-{h:4}-{h:4}-{h:12}/IncomingWebhook/{h:32}/{h:8}-{h:4}-{h:4}-{h:4}-{h:12}\n",
    ),
    (
        "microsoft-teams-webhook",
        "microsoft-te1.py",
        "url = \"https://{l:6}.webhook.office.com/webhookb2/{h:8}-{h:4}-{h:4}-{h:4}-{h:12}@{h:8}-{h:4}-{h:4}-{h:4}-{h:12}/IncomingWebhook/{L:32}/{h:8}-{h:4}-{h:4}-{h:4}-{h:12}\"\n",
    ),
    (
        "microsoft-teams-webhook",
        "microsoft-te2.txt",
        "curl -X POST https://{l:5}.webhook.office.com/webhookb2/{h:8}-{h:4}-{h:4}-{h:4}-{h:12}@{h:8}-{h:4}-{h:4}-{h:4}-{h:12}/IncomingWebhook/{L:32}/{h:8}-{h:4}-{h:4}-{h:4}-{h:12} -d @msg.json\n",
    ),
    (
        "notion-token",
        "notion-token0.env",
        "NOTION_TOKEN=ntn_{d:11}{a:35}\n",
    ),
    (
        "notion-token",
        "notion-token1.py",
        "notion = Client(auth=\"ntn_{d:11}{a:35}\")\n",
    ),
    (
        "notion-token",
        "notion-token2.yaml",
        "token: ntn_{d:11}{a:35}\n",
    ),
    (
        "octopus-deploy-api-key",
        "octopus-depl0.env",
        "OCTOPUS_API_KEY=API-{U:26}\n",
    ),
    (
        "octopus-deploy-api-key",
        "octopus-depl1.py",
        "key = \"API-{U:26}\"\n",
    ),
    (
        "octopus-deploy-api-key",
        "octopus-depl2.txt",
        "X-Octopus-ApiKey: API-{U:26}\n",
    ),
    (
        "openshift-user-token",
        "openshift-us0.env",
        "OC_TOKEN=sha256~{w:43}\n",
    ),
    (
        "openshift-user-token",
        "openshift-us1.txt",
        "oc login --token=sha256~{w:43} --server=https://api.example:6443\n",
    ),
    (
        "openshift-user-token",
        "openshift-us2.yaml",
        "token: sha256~{a:43}\n",
    ),
    (
        "perplexity-api-key",
        "perplexity-a0.env",
        "PPLX_API_KEY=pplx-{a:48}\n",
    ),
    (
        "perplexity-api-key",
        "perplexity-a1.py",
        "key = \"pplx-{a:48}\"\n",
    ),
    (
        "perplexity-api-key",
        "perplexity-a2.yaml",
        "api_key: pplx-{a:48}\n",
    ),
    (
        "prefect-api-token",
        "prefect-api-0.env",
        "PREFECT_API_KEY=pnu_{a:36}\n",
    ),
    (
        "prefect-api-token",
        "prefect-api-1.py",
        "key = \"pnu_{a:36}\"\n",
    ),
    (
        "prefect-api-token",
        "prefect-api-2.yaml",
        "api_key: pnu_{a:36}\n",
    ),
    (
        "readme-api-token",
        "readme-api-t0.env",
        "README_API_KEY=rdme_{L:70}\n",
    ),
    (
        "readme-api-token",
        "readme-api-t1.py",
        "key = \"rdme_{L:70}\"\n",
    ),
    (
        "readme-api-token",
        "readme-api-t2.yaml",
        "api_key: rdme_{L:70}\n",
    ),
    (
        "scalingo-token",
        "scalingo-tok0.env",
        "SCALINGO_API_TOKEN=tk-us-{w:48}\n",
    ),
    (
        "scalingo-token",
        "scalingo-tok1.py",
        "token = \"tk-us-{a:48}\"\n",
    ),
    (
        "scalingo-token",
        "scalingo-tok2.yaml",
        "api_token: tk-us-{a:48}\n",
    ),
    (
        "sendinblue-api-key",
        "sendinblue-a0.env",
        "BREVO_API_KEY=xkeysib-{h:64}-{a:16}\n",
    ),
    (
        "sendinblue-api-key",
        "sendinblue-a1.py",
        "key = \"xkeysib-{h:64}-{a:16}\"\n",
    ),
    (
        "sendinblue-api-key",
        "sendinblue-a2.yaml",
        "api-key: xkeysib-{h:64}-{a:16}\n",
    ),
    (
        "settlemint-token",
        "settlemint-t0.env",
        "SETTLEMINT_TOKEN=sm_aat_{a:16}\n",
    ),
    (
        "settlemint-token",
        "settlemint-t1.py",
        "token = \"sm_pat_{a:16}\"\n",
    ),
    (
        "settlemint-token",
        "settlemint-t2.yaml",
        "token: sm_sat_{a:16}\n",
    ),
    (
        "shippo-token",
        "shippo-token0.env",
        "SHIPPO_TOKEN=shippo_live_{h:40}\n",
    ),
    (
        "shippo-token",
        "shippo-token1.py",
        "token = \"shippo_test_{h:40}\"\n",
    ),
    (
        "shippo-token",
        "shippo-token2.yaml",
        "api_key: shippo_live_{H:40}\n",
    ),
    (
        "sidekiq-secret",
        "sidekiq-secr0.env",
        "BUNDLE_ENTERPRISE__CONTRIBSYS__COM={h:8}:{h:8}\n",
    ),
    (
        "sidekiq-secret",
        "sidekiq-secr1.py",
        "export BUNDLE_GEMS__CONTRIBSYS__COM=\"{h:8}:{h:8}\"\n",
    ),
    (
        "sidekiq-secret",
        "sidekiq-secr2.yaml",
        "BUNDLE_GEMS__CONTRIBSYS__COM: {h:8}:{h:8}\n",
    ),
    (
        "sourcegraph-token",
        "sourcegraph-0.env",
        "SRC_ACCESS_TOKEN=sgp_{h:16}_{h:40}\n",
    ),
    (
        "sourcegraph-token",
        "sourcegraph-1.py",
        "token = \"sgp_local_{h:40}\"\n",
    ),
    (
        "sourcegraph-token",
        "sourcegraph-2.yaml",
        "token: sgp_{h:40}\n",
    ),
    (
        "typeform-token",
        "typeform-tok0.env",
        "TYPEFORM_TOKEN=tfp_{w:59}\n",
    ),
    (
        "typeform-token",
        "typeform-tok1.py",
        "token = \"tfp_{a:59}\"\n",
    ),
    (
        "typeform-token",
        "typeform-tok2.yaml",
        "typeform: tfp_{a:59}\n",
    ),
    ("jwt-base64", "jwt-base640.env", "JWT_B64={jwt64}\n"),
    ("jwt-base64", "jwt-base641.py", "token = \"{jwt64}\"\n"),
    (
        "jwt-base64",
        "jwt-base642.yaml",
        "data:\n  token: {jwt64}\n",
    ),
    (
        "nuget-config-password",
        "nuget-config0.config",
        "<packageSourceCredentials><feed><add key=\"Username\" value=\"ci\" /><add key=\"ClearTextPassword\" value=\"{a:20}\" /></feed></packageSourceCredentials>\n",
    ),
    (
        "nuget-config-password",
        "nuget-config1.config",
        "<configuration>\n  <packageSourceCredentials>\n    <github>\n      <add key=\"Password\" value=\"{a:24}\" />\n    </github>\n  </packageSourceCredentials>\n</configuration>\n",
    ),
    (
        "nuget-config-password",
        "nuget-config2.xml",
        "    <add key=\"ClearTextPassword\" value=\"{a:16}\"/>\n",
    ),
    (
        "adafruit-api-key",
        "adafruit-api0.env",
        "ADAFRUIT_SECRET_KEY={L:32}\n",
    ),
    (
        "adafruit-api-key",
        "adafruit-api1.py",
        "adafruit_token = \"{L:32}\"\n",
    ),
    (
        "adafruit-api-key",
        "adafruit-api2.yaml",
        "adafruit_api_key: {L:32}\n",
    ),
    (
        "adobe-client-id",
        "adobe-client0.env",
        "ADOBE_SECRET_KEY={h:32}\n",
    ),
    (
        "adobe-client-id",
        "adobe-client1.py",
        "adobe_token = \"{h:32}\"\n",
    ),
    (
        "adobe-client-id",
        "adobe-client2.yaml",
        "adobe_api_key: {h:32}\n",
    ),
    (
        "airtable-api-key",
        "airtable-api0.env",
        "AIRTABLE_SECRET_KEY={L:17}\n",
    ),
    (
        "airtable-api-key",
        "airtable-api1.py",
        "airtable_token = \"{L:17}\"\n",
    ),
    (
        "airtable-api-key",
        "airtable-api2.yaml",
        "airtable_api_key: {L:17}\n",
    ),
    (
        "algolia-api-key",
        "algolia-api-0.env",
        "ALGOLIA_SECRET_KEY={L:32}\n",
    ),
    (
        "algolia-api-key",
        "algolia-api-1.py",
        "algolia_token = \"{L:32}\"\n",
    ),
    (
        "algolia-api-key",
        "algolia-api-2.yaml",
        "algolia_api_key: {L:32}\n",
    ),
    (
        "alibaba-secret-key",
        "alibaba-secr0.env",
        "ALIBABA_SECRET_KEY={L:30}\n",
    ),
    (
        "alibaba-secret-key",
        "alibaba-secr1.py",
        "alibaba_token = \"{L:30}\"\n",
    ),
    (
        "alibaba-secret-key",
        "alibaba-secr2.yaml",
        "alibaba_api_key: {L:30}\n",
    ),
    (
        "asana-credential",
        "asana-creden0.env",
        "ASANA_SECRET_KEY={L:32}\n",
    ),
    (
        "asana-credential",
        "asana-creden1.py",
        "asana_token = \"{L:32}\"\n",
    ),
    (
        "asana-credential",
        "asana-creden2.yaml",
        "asana_api_key: {L:32}\n",
    ),
    // A 16-digit client id whose digits repeat (2.48 bits per digit, under the 2.5 that
    // letters must reach; one random 16-digit id in 19 is like it).
    (
        "asana-credential",
        "asana-creden3.env",
        "ASANA_CLIENT_ID=5305681368608583\n",
    ),
    (
        "atlassian-named-token",
        "atlassian-na0.env",
        "ATLASSIAN_SECRET_KEY={L:20}{h:4}\n",
    ),
    (
        "atlassian-named-token",
        "atlassian-na1.py",
        "atlassian_token = \"{L:20}{h:4}\"\n",
    ),
    (
        "atlassian-named-token",
        "atlassian-na2.yaml",
        "atlassian_api_key: {L:20}{h:4}\n",
    ),
    (
        "beamer-api-token",
        "beamer-api-t0.env",
        "BEAMER_SECRET_KEY=b_{L:44}\n",
    ),
    (
        "beamer-api-token",
        "beamer-api-t1.py",
        "beamer_token = \"b_{L:44}\"\n",
    ),
    (
        "beamer-api-token",
        "beamer-api-t2.yaml",
        "beamer_api_key: b_{L:44}\n",
    ),
    (
        "bitbucket-credential",
        "bitbucket-cr0.env",
        "BITBUCKET_SECRET_KEY={L:32}\n",
    ),
    (
        "bitbucket-credential",
        "bitbucket-cr1.py",
        "bitbucket_token = \"{L:32}\"\n",
    ),
    (
        "bitbucket-credential",
        "bitbucket-cr2.yaml",
        "bitbucket_api_key: {L:32}\n",
    ),
    (
        "bittrex-credential",
        "bittrex-cred0.env",
        "BITTREX_SECRET_KEY={L:32}\n",
    ),
    (
        "bittrex-credential",
        "bittrex-cred1.py",
        "bittrex_token = \"{L:32}\"\n",
    ),
    (
        "bittrex-credential",
        "bittrex-cred2.yaml",
        "bittrex_api_key: {L:32}\n",
    ),
    (
        "cisco-meraki-api-key",
        "cisco-meraki0.env",
        "MERAKI_SECRET_KEY={h:40}\n",
    ),
    (
        "cisco-meraki-api-key",
        "cisco-meraki1.py",
        "meraki_token = \"{h:40}\"\n",
    ),
    (
        "cisco-meraki-api-key",
        "cisco-meraki2.yaml",
        "meraki_api_key: {h:40}\n",
    ),
    (
        "cloudflare-api-key",
        "cloudflare-a0.env",
        "CLOUDFLARE_SECRET_KEY={w:40}\n",
    ),
    (
        "cloudflare-api-key",
        "cloudflare-a1.py",
        "cloudflare_token = \"{w:40}\"\n",
    ),
    (
        "cloudflare-api-key",
        "cloudflare-a2.yaml",
        "cloudflare_api_key: {w:40}\n",
    ),
    (
        "codecov-token",
        "codecov-toke0.env",
        "CODECOV_SECRET_KEY={L:32}\n",
    ),
    (
        "codecov-token",
        "codecov-toke1.py",
        "codecov_token = \"{L:32}\"\n",
    ),
    (
        "codecov-token",
        "codecov-toke2.yaml",
        "codecov_api_key: {L:32}\n",
    ),
    (
        "cohere-api-key",
        "cohere-api-k0.env",
        "COHERE_SECRET_KEY={a:40}\n",
    ),
    (
        "cohere-api-key",
        "cohere-api-k1.py",
        "cohere_token = \"{a:40}\"\n",
    ),
    (
        "cohere-api-key",
        "cohere-api-k2.yaml",
        "cohere_api_key: {a:40}\n",
    ),
    (
        "coinbase-token",
        "coinbase-tok0.env",
        "COINBASE_SECRET_KEY={w:64}\n",
    ),
    (
        "coinbase-token",
        "coinbase-tok1.py",
        "coinbase_token = \"{w:64}\"\n",
    ),
    (
        "coinbase-token",
        "coinbase-tok2.yaml",
        "coinbase_api_key: {w:64}\n",
    ),
    (
        "confluent-credential",
        "confluent-cr0.env",
        "CONFLUENT_SECRET_KEY={L:64}\n",
    ),
    (
        "confluent-credential",
        "confluent-cr1.py",
        "confluent_token = \"{L:64}\"\n",
    ),
    (
        "confluent-credential",
        "confluent-cr2.yaml",
        "confluent_api_key: {L:64}\n",
    ),
    (
        "contentful-token",
        "contentful-t0.env",
        "CONTENTFUL_SECRET_KEY={w:43}\n",
    ),
    (
        "contentful-token",
        "contentful-t1.py",
        "contentful_token = \"{w:43}\"\n",
    ),
    (
        "contentful-token",
        "contentful-t2.yaml",
        "contentful_api_key: {w:43}\n",
    ),
    (
        "discord-credential",
        "discord-cred0.env",
        "DISCORD_SECRET_KEY={h:64}\n",
    ),
    (
        "discord-credential",
        "discord-cred1.py",
        "discord_token = \"{h:64}\"\n",
    ),
    (
        "discord-credential",
        "discord-cred2.yaml",
        "discord_api_key: {h:64}\n",
    ),
    (
        "droneci-token",
        "droneci-toke0.env",
        "DRONECI_SECRET_KEY={L:32}\n",
    ),
    (
        "droneci-token",
        "droneci-toke1.py",
        "droneci_token = \"{L:32}\"\n",
    ),
    (
        "droneci-token",
        "droneci-toke2.yaml",
        "droneci_api_key: {L:32}\n",
    ),
    (
        "dropbox-api-token",
        "dropbox-api-0.env",
        "DROPBOX_SECRET_KEY={L:11}AAAAAAAAAA{w:43}\n",
    ),
    (
        "dropbox-api-token",
        "dropbox-api-1.py",
        "dropbox_token = \"{L:11}AAAAAAAAAA{w:43}\"\n",
    ),
    (
        "dropbox-api-token",
        "dropbox-api-2.yaml",
        "dropbox_api_key: {L:11}AAAAAAAAAA{w:43}\n",
    ),
    ("etsy-token", "etsy-token0.env", "ETSY_SECRET_KEY={L:24}\n"),
    ("etsy-token", "etsy-token1.py", "etsy_token = \"{L:24}\"\n"),
    ("etsy-token", "etsy-token2.yaml", "etsy_api_key: {L:24}\n"),
    (
        "facebook-secret",
        "facebook-sec0.env",
        "FACEBOOK_SECRET_KEY={h:32}\n",
    ),
    (
        "facebook-secret",
        "facebook-sec1.py",
        "facebook_token = \"{h:32}\"\n",
    ),
    (
        "facebook-secret",
        "facebook-sec2.yaml",
        "facebook_api_key: {h:32}\n",
    ),
    (
        "fastly-api-token",
        "fastly-api-t0.env",
        "FASTLY_SECRET_KEY={w:32}\n",
    ),
    (
        "fastly-api-token",
        "fastly-api-t1.py",
        "fastly_token = \"{w:32}\"\n",
    ),
    (
        "fastly-api-token",
        "fastly-api-t2.yaml",
        "fastly_api_key: {w:32}\n",
    ),
    (
        "finicity-credential",
        "finicity-cre0.env",
        "FINICITY_SECRET_KEY={h:32}\n",
    ),
    (
        "finicity-credential",
        "finicity-cre1.py",
        "finicity_token = \"{h:32}\"\n",
    ),
    (
        "finicity-credential",
        "finicity-cre2.yaml",
        "finicity_api_key: {h:32}\n",
    ),
    (
        "finnhub-token",
        "finnhub-toke0.env",
        "FINNHUB_SECRET_KEY={L:20}\n",
    ),
    (
        "finnhub-token",
        "finnhub-toke1.py",
        "finnhub_token = \"{L:20}\"\n",
    ),
    (
        "finnhub-token",
        "finnhub-toke2.yaml",
        "finnhub_api_key: {L:20}\n",
    ),
    (
        "flickr-token",
        "flickr-token0.env",
        "FLICKR_SECRET_KEY={L:32}\n",
    ),
    (
        "flickr-token",
        "flickr-token1.py",
        "flickr_token = \"{L:32}\"\n",
    ),
    (
        "flickr-token",
        "flickr-token2.yaml",
        "flickr_api_key: {L:32}\n",
    ),
    (
        "freshbooks-token",
        "freshbooks-t0.env",
        "FRESHBOOKS_SECRET_KEY={L:64}\n",
    ),
    (
        "freshbooks-token",
        "freshbooks-t1.py",
        "freshbooks_token = \"{L:64}\"\n",
    ),
    (
        "freshbooks-token",
        "freshbooks-t2.yaml",
        "freshbooks_api_key: {L:64}\n",
    ),
    (
        "gitter-token",
        "gitter-token0.env",
        "GITTER_SECRET_KEY={w:40}\n",
    ),
    (
        "gitter-token",
        "gitter-token1.py",
        "gitter_token = \"{w:40}\"\n",
    ),
    (
        "gitter-token",
        "gitter-token2.yaml",
        "gitter_api_key: {w:40}\n",
    ),
    (
        "gocardless-token",
        "gocardless-t0.env",
        "GOCARDLESS_SECRET_KEY=live_{w:40}\n",
    ),
    (
        "gocardless-token",
        "gocardless-t1.py",
        "gocardless_token = \"live_{w:40}\"\n",
    ),
    (
        "gocardless-token",
        "gocardless-t2.yaml",
        "gocardless_api_key: live_{w:40}\n",
    ),
    (
        "hubspot-api-key",
        "hubspot-api-0.env",
        "HUBSPOT_SECRET_KEY={H:8}-{H:4}-{H:4}-{H:4}-{H:12}\n",
    ),
    (
        "hubspot-api-key",
        "hubspot-api-1.py",
        "hubspot_token = \"{H:8}-{H:4}-{H:4}-{H:4}-{H:12}\"\n",
    ),
    (
        "hubspot-api-key",
        "hubspot-api-2.yaml",
        "hubspot_api_key: {H:8}-{H:4}-{H:4}-{H:4}-{H:12}\n",
    ),
    (
        "intercom-token",
        "intercom-tok0.env",
        "INTERCOM_SECRET_KEY={w:60}\n",
    ),
    (
        "intercom-token",
        "intercom-tok1.py",
        "intercom_token = \"{w:60}\"\n",
    ),
    (
        "intercom-token",
        "intercom-tok2.yaml",
        "intercom_api_key: {w:60}\n",
    ),
    (
        "jfrog-credential",
        "jfrog-creden0.env",
        "JFROG_SECRET_KEY={L:64}\n",
    ),
    (
        "jfrog-credential",
        "jfrog-creden1.py",
        "jfrog_token = \"{L:64}\"\n",
    ),
    (
        "jfrog-credential",
        "jfrog-creden2.yaml",
        "jfrog_api_key: {L:64}\n",
    ),
    (
        "kraken-token",
        "kraken-token0.env",
        "KRAKEN_SECRET_KEY={b:86}\n",
    ),
    (
        "kraken-token",
        "kraken-token1.py",
        "kraken_token = \"{b:86}\"\n",
    ),
    (
        "kraken-token",
        "kraken-token2.yaml",
        "kraken_api_key: {b:86}\n",
    ),
    (
        "kucoin-credential",
        "kucoin-crede0.env",
        "KUCOIN_SECRET_KEY={h:24}\n",
    ),
    (
        "kucoin-credential",
        "kucoin-crede1.py",
        "kucoin_token = \"{h:24}\"\n",
    ),
    (
        "kucoin-credential",
        "kucoin-crede2.yaml",
        "kucoin_api_key: {h:24}\n",
    ),
    (
        "launchdarkly-token",
        "launchdarkly0.env",
        "LAUNCHDARKLY_SECRET_KEY={w:40}\n",
    ),
    (
        "launchdarkly-token",
        "launchdarkly1.py",
        "launchdarkly_token = \"{w:40}\"\n",
    ),
    (
        "launchdarkly-token",
        "launchdarkly2.yaml",
        "launchdarkly_api_key: {w:40}\n",
    ),
    (
        "linear-client-secret",
        "linear-clien0.env",
        "LINEAR_SECRET_KEY={h:32}\n",
    ),
    (
        "linear-client-secret",
        "linear-clien1.py",
        "linear_token = \"{h:32}\"\n",
    ),
    (
        "linear-client-secret",
        "linear-clien2.yaml",
        "linear_api_key: {h:32}\n",
    ),
    (
        "linkedin-credential",
        "linkedin-cre0.env",
        "LINKEDIN_SECRET_KEY={L:16}\n",
    ),
    (
        "linkedin-credential",
        "linkedin-cre1.py",
        "linkedin_token = \"{L:16}\"\n",
    ),
    (
        "linkedin-credential",
        "linkedin-cre2.yaml",
        "linkedin_api_key: {L:16}\n",
    ),
    (
        "lob-api-key",
        "lob-api-key0.env",
        "LOB_SECRET_KEY=live_{h:35}\n",
    ),
    (
        "lob-api-key",
        "lob-api-key1.py",
        "lob_token = \"live_{h:35}\"\n",
    ),
    (
        "lob-api-key",
        "lob-api-key2.yaml",
        "lob_api_key: live_{h:35}\n",
    ),
    (
        "looker-credential",
        "looker-crede0.env",
        "LOOKER_SECRET_KEY={L:24}\n",
    ),
    (
        "looker-credential",
        "looker-crede1.py",
        "looker_token = \"{L:24}\"\n",
    ),
    (
        "looker-credential",
        "looker-crede2.yaml",
        "looker_api_key: {L:24}\n",
    ),
    (
        "mailgun-key",
        "mailgun-key0.env",
        "MAILGUN_SECRET_KEY=pubkey-{h:32}\n",
    ),
    (
        "mailgun-key",
        "mailgun-key1.py",
        "mailgun_token = \"pubkey-{h:32}\"\n",
    ),
    (
        "mailgun-key",
        "mailgun-key2.yaml",
        "mailgun_api_key: pubkey-{h:32}\n",
    ),
    (
        "mapbox-public-token",
        "mapbox-publi0.env",
        "MAPBOX_SECRET_KEY=pk.{a:60}.{a:22}\n",
    ),
    (
        "mapbox-public-token",
        "mapbox-publi1.py",
        "mapbox_token = \"pk.{a:60}.{a:22}\"\n",
    ),
    (
        "mapbox-public-token",
        "mapbox-publi2.yaml",
        "mapbox_api_key: pk.{a:60}.{a:22}\n",
    ),
    (
        "mattermost-token",
        "mattermost-t0.env",
        "MATTERMOST_SECRET_KEY={L:26}\n",
    ),
    (
        "mattermost-token",
        "mattermost-t1.py",
        "mattermost_token = \"{L:26}\"\n",
    ),
    (
        "mattermost-token",
        "mattermost-t2.yaml",
        "mattermost_api_key: {L:26}\n",
    ),
    (
        "messagebird-credential",
        "messagebird-0.env",
        "MESSAGEBIRD_SECRET_KEY={L:25}\n",
    ),
    (
        "messagebird-credential",
        "messagebird-1.py",
        "messagebird_token = \"{L:25}\"\n",
    ),
    (
        "messagebird-credential",
        "messagebird-2.yaml",
        "messagebird_api_key: {L:25}\n",
    ),
    (
        "netlify-token",
        "netlify-toke0.env",
        "NETLIFY_SECRET_KEY={w:43}\n",
    ),
    (
        "netlify-token",
        "netlify-toke1.py",
        "netlify_token = \"{w:43}\"\n",
    ),
    (
        "netlify-token",
        "netlify-toke2.yaml",
        "netlify_api_key: {w:43}\n",
    ),
    (
        "newrelic-named-key",
        "newrelic-nam0.env",
        "NEW_RELIC_SECRET_KEY=NRII-{L:32}\n",
    ),
    (
        "newrelic-named-key",
        "newrelic-nam1.py",
        "new_relic_token = \"NRII-{L:32}\"\n",
    ),
    (
        "newrelic-named-key",
        "newrelic-nam2.yaml",
        "new_relic_api_key: NRII-{L:32}\n",
    ),
    (
        "nytimes-token",
        "nytimes-toke0.env",
        "NYTIMES_SECRET_KEY={w:32}\n",
    ),
    (
        "nytimes-token",
        "nytimes-toke1.py",
        "nytimes_token = \"{w:32}\"\n",
    ),
    (
        "nytimes-token",
        "nytimes-toke2.yaml",
        "nytimes_api_key: {w:32}\n",
    ),
    (
        "plaid-credential",
        "plaid-creden0.env",
        "PLAID_SECRET_KEY={L:30}\n",
    ),
    (
        "plaid-credential",
        "plaid-creden1.py",
        "plaid_token = \"{L:30}\"\n",
    ),
    (
        "plaid-credential",
        "plaid-creden2.yaml",
        "plaid_api_key: {L:30}\n",
    ),
    (
        "privateai-token",
        "privateai-to0.env",
        "PRIVATEAI_SECRET_KEY={L:32}\n",
    ),
    (
        "privateai-token",
        "privateai-to1.py",
        "privateai_token = \"{L:32}\"\n",
    ),
    (
        "privateai-token",
        "privateai-to2.yaml",
        "privateai_api_key: {L:32}\n",
    ),
    (
        "rapidapi-token",
        "rapidapi-tok0.env",
        "RAPIDAPI_SECRET_KEY={w:50}\n",
    ),
    (
        "rapidapi-token",
        "rapidapi-tok1.py",
        "rapidapi_token = \"{w:50}\"\n",
    ),
    (
        "rapidapi-token",
        "rapidapi-tok2.yaml",
        "rapidapi_api_key: {w:50}\n",
    ),
    (
        "sendbird-credential",
        "sendbird-cre0.env",
        "SENDBIRD_SECRET_KEY={h:40}\n",
    ),
    (
        "sendbird-credential",
        "sendbird-cre1.py",
        "sendbird_token = \"{h:40}\"\n",
    ),
    (
        "sendbird-credential",
        "sendbird-cre2.yaml",
        "sendbird_api_key: {h:40}\n",
    ),
    (
        "sentry-named-token",
        "sentry-named0.env",
        "SENTRY_SECRET_KEY={h:64}\n",
    ),
    (
        "sentry-named-token",
        "sentry-named1.py",
        "sentry_token = \"{h:64}\"\n",
    ),
    (
        "sentry-named-token",
        "sentry-named2.yaml",
        "sentry_api_key: {h:64}\n",
    ),
    (
        "snyk-token",
        "snyk-token0.env",
        "SNYK_TOKEN={h:8}-{h:4}-{h:4}-{h:4}-{h:12}\n",
    ),
    (
        "snyk-token",
        "snyk-token1.py",
        "snyk_token = \"{h:8}-{h:4}-{h:4}-{h:4}-{h:12}\"\n",
    ),
    (
        "snyk-token",
        "snyk-token2.yaml",
        "snyk_api_key: {h:8}-{h:4}-{h:4}-{h:4}-{h:12}\n",
    ),
    (
        "sonar-named-token",
        "sonar-named-0.env",
        "SONAR_TOKEN={L:40}\n",
    ),
    (
        "sonar-named-token",
        "sonar-named-1.py",
        "sonar_token = \"{L:40}\"\n",
    ),
    (
        "sonar-named-token",
        "sonar-named-2.yaml",
        "sonar.login: {L:40}\n",
    ),
    (
        "squarespace-token",
        "squarespace-0.env",
        "SQUARESPACE_SECRET_KEY={h:8}-{h:4}-{h:4}-{h:4}-{h:12}\n",
    ),
    (
        "squarespace-token",
        "squarespace-1.py",
        "squarespace_token = \"{h:8}-{h:4}-{h:4}-{h:4}-{h:12}\"\n",
    ),
    (
        "squarespace-token",
        "squarespace-2.yaml",
        "squarespace_api_key: {h:8}-{h:4}-{h:4}-{h:4}-{h:12}\n",
    ),
    (
        "sumologic-credential",
        "sumologic-cr0.env",
        "SUMO_SECRET_KEY={a:64}\n",
    ),
    (
        "sumologic-credential",
        "sumologic-cr1.py",
        "sumo_token = \"{a:64}\"\n",
    ),
    (
        "sumologic-credential",
        "sumologic-cr2.yaml",
        "sumo_api_key: {a:64}\n",
    ),
    (
        "travisci-token",
        "travisci-tok0.env",
        "TRAVIS_SECRET_KEY={L:22}\n",
    ),
    (
        "travisci-token",
        "travisci-tok1.py",
        "travis_token = \"{L:22}\"\n",
    ),
    (
        "travisci-token",
        "travisci-tok2.yaml",
        "travis_api_key: {L:22}\n",
    ),
    (
        "twitch-token",
        "twitch-token0.env",
        "TWITCH_SECRET_KEY={L:30}\n",
    ),
    (
        "twitch-token",
        "twitch-token1.py",
        "twitch_token = \"{L:30}\"\n",
    ),
    (
        "twitch-token",
        "twitch-token2.yaml",
        "twitch_api_key: {L:30}\n",
    ),
    (
        "twitter-credential",
        "twitter-cred0.env",
        "TWITTER_SECRET_KEY={L:45}\n",
    ),
    (
        "twitter-credential",
        "twitter-cred1.py",
        "twitter_token = \"{L:45}\"\n",
    ),
    (
        "twitter-credential",
        "twitter-cred2.yaml",
        "twitter_api_key: {L:45}\n",
    ),
    (
        "yandex-credential",
        "yandex-crede0.env",
        "YANDEX_SECRET_KEY=AQVN{w:36}\n",
    ),
    (
        "yandex-credential",
        "yandex-crede1.py",
        "yandex_token = \"AQVN{w:36}\"\n",
    ),
    (
        "yandex-credential",
        "yandex-crede2.yaml",
        "yandex_api_key: AQVN{w:36}\n",
    ),
    (
        "zendesk-secret",
        "zendesk-secr0.env",
        "ZENDESK_SECRET_KEY={L:40}\n",
    ),
    (
        "zendesk-secret",
        "zendesk-secr1.py",
        "zendesk_token = \"{L:40}\"\n",
    ),
    (
        "zendesk-secret",
        "zendesk-secr2.yaml",
        "zendesk_api_key: {L:40}\n",
    ),
    (
        "private-key",
        "id_rsa",
        "-----BEGIN RSA PRIVATE KEY-----\n{b:64}\n{b:64}\n{b:40}==\n-----END RSA PRIVATE KEY-----\n",
    ),
    (
        "private-key",
        "key.py",
        "KEY = \"\"\"-----BEGIN OPENSSH PRIVATE KEY-----\n{b:70}\n{b:70}\n-----END OPENSSH PRIVATE KEY-----\"\"\"\n",
    ),
    (
        "private-key",
        "server.pem",
        "-----BEGIN PRIVATE KEY-----\n{b:64}\n{b:64}\n{b:64}\n-----END PRIVATE KEY-----\n",
    ),
    (
        "private-key",
        "signing.asc",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{b:64}\n{b:64}\n={b:4}\n-----END PGP PRIVATE KEY BLOCK-----\n",
    ),
    (
        "putty-private-key",
        "a.ppk",
        "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: rsa-key\nPublic-Lines: 2\n{b:64}\n{b:30}\nPrivate-Lines: 2\n{b:64}\n{b:30}\nPrivate-MAC: {h:40}\n",
    ),
    (
        "putty-private-key",
        "b.ppk",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: ed\nPublic-Lines: 1\n{b:68}\nPrivate-Lines: 1\n{b:44}\nPrivate-MAC: {h:64}\n",
    ),
    (
        "putty-private-key",
        "c.ppk",
        "PuTTY-User-Key-File-2: ssh-dss\nEncryption: none\nComment: dsa\nPublic-Lines: 1\n{b:60}\nPrivate-Lines: 3\n{b:64}\n{b:64}\n{b:12}\nPrivate-MAC: {h:40}\n",
    ),
    (
        "aws-access-key-id",
        "creds.ini",
        "[default]\naws_access_key_id = AKIA{U:16}\n",
    ),
    (
        "aws-access-key-id",
        "sts.json",
        "{\"Credentials\": {\"AccessKeyId\": \"ASIA{U:16}\"}}\n",
    ),
    (
        "aws-access-key-id",
        "deploy.sh",
        "export AWS_ACCESS_KEY_ID=AKIA{U:16}\n",
    ),
    (
        "aws-secret-access-key",
        "credentials.ini",
        "[prod]\naws_secret_access_key = {b:40}\n",
    ),
    (
        "aws-secret-access-key",
        "aws.env",
        "AWS_SECRET_ACCESS_KEY=\"{b:40}\"\n",
    ),
    (
        "aws-secret-access-key",
        "conf.json",
        "{\"aws_secret_key\": \"{b:40}\"}\n",
    ),
    (
        "azure-storage-key",
        "app.config",
        "conn=DefaultEndpointsProtocol=https;AccountName=acct1;AccountKey={b:86}==;EndpointSuffix=core.windows.net\n",
    ),
    (
        "azure-storage-key",
        "settings.py",
        "AZURE = \"AccountName=x;AccountKey={b:86}==\"\n",
    ),
    (
        "azure-storage-key",
        "local.env",
        "STORAGE=AccountKey={b:86}==\n",
    ),
    (
        "azure-ad-client-secret",
        "auth.py",
        "client_credential = \"{a:3}7Q~{w:34}\"\n",
    ),
    (
        "azure-ad-client-secret",
        "az.yaml",
        "clientSecret: '{a:3}8Q~{w:31}'\n",
    ),
    (
        "azure-ad-client-secret",
        "az.txt",
        "secret value {a:3}1Q~{w:33} copied\n",
    ),
    ("google-api-key", "maps.js", "const key = \"AIza{w:35}\";\n"),
    (
        "google-api-key",
        "firebase.json",
        "{\"apiKey\": \"AIza{w:35}\"}\n",
    ),
    ("google-api-key", "g.env", "GOOGLE_API_KEY=AIza{w:35}\n"),
    (
        "gcp-oauth-client-secret",
        "client.json",
        "{\"client_secret\": \"GOCSPX-{w:28}\"}\n",
    ),
    (
        "gcp-oauth-client-secret",
        "oauth.py",
        "SECRET = 'GOCSPX-{w:28}'\n",
    ),
    (
        "gcp-oauth-client-secret",
        "o.txt",
        "got GOCSPX-{w:28} from console\n",
    ),
    (
        "digitalocean-token",
        "do.env",
        "DIGITALOCEAN_TOKEN=dop_v1_{h:64}\n",
    ),
    ("digitalocean-token", "do.py", "t = \"doo_v1_{h:64}\"\n"),
    ("digitalocean-token", "do.txt", "refresh dor_v1_{h:64}\n"),
    (
        "heroku-api-key",
        "h.env",
        "HEROKU_API_KEY={h:8}-{h:4}-{h:4}-{h:4}-{h:12}\n",
    ),
    (
        "heroku-api-key",
        "h.yaml",
        "heroku_api_key: \"{h:8}-{h:4}-{h:4}-{h:4}-{h:12}\"\n",
    ),
    ("heroku-api-key", "h.txt", "token HRKU-AA{w:58}\n"),
    (
        "alibaba-access-key-id",
        "ali.env",
        "ALIBABA_CLOUD_ACCESS_KEY_ID=LTAI{a:20}\n",
    ),
    ("alibaba-access-key-id", "ali.py", "ak = \"LTAI{a:20}\"\n"),
    ("alibaba-access-key-id", "ali.txt", "id LTAI{a:20} ok\n"),
    (
        "ibm-cloud-iam-key",
        "ibm.py",
        "ibm_cloud_iam_api_key = \"{w:44}\"\n",
    ),
    ("ibm-cloud-iam-key", "ibm.env", "IBM_CLOUD_API_KEY={w:44}\n"),
    (
        "ibm-cloud-iam-key",
        "ibm.yaml",
        "ibm-cloud-password: '{w:44}'\n",
    ),
    (
        "ibm-cos-hmac-secret",
        "cos.py",
        "cos_hmac_secret_access_key = \"{h:48}\"\n",
    ),
    (
        "ibm-cos-hmac-secret",
        "cos.env",
        "IBM_COS_SECRET_ACCESS_KEY={h:48}\n",
    ),
    (
        "ibm-cos-hmac-secret",
        "cos.json",
        "{\"secret_access_key\": \"{h:48}\"}\n",
    ),
    (
        "softlayer-api-key",
        "sl.py",
        "softlayer_api_key = \"{L:64}\"\n",
    ),
    ("softlayer-api-key", "sl.env", "SOFTLAYER_API_KEY={L:64}\n"),
    (
        "softlayer-api-key",
        "sl.txt",
        "https://api.softlayer.com/soap/v3/{L:64}\n",
    ),
    (
        "cloudant-credential",
        "cl.py",
        "cloudant_password = \"{h:64}\"\n",
    ),
    (
        "cloudant-credential",
        "cl.yaml",
        "cloudant_api_key: {l:24}\n",
    ),
    (
        "cloudant-credential",
        "cl.txt",
        "https://user-1:{h:64}@account-2.cloudant.com\n",
    ),
    ("github-pat", "gh.py", "token = \"ghp_{a:36}\"\n"),
    ("github-pat", "gh.env", "GITHUB_TOKEN=ghp_{a:36}\n"),
    (
        "github-pat",
        "gh.txt",
        "git clone https://ghp_{a:36}@github.com/o/r\n",
    ),
    (
        "github-fine-grained-pat",
        "fg.env",
        "GH_PAT=github_pat_{a:22}_{a:59}\n",
    ),
    (
        "github-fine-grained-pat",
        "fg.py",
        "pat = 'github_pat_{a:22}_{a:59}'\n",
    ),
    (
        "github-fine-grained-pat",
        "fg.txt",
        "use github_pat_{a:22}_{a:59} here\n",
    ),
    ("github-oauth-token", "o.env", "OAUTH=gho_{a:36}\n"),
    ("github-oauth-token", "o.js", "const t = `gho_{a:36}`;\n"),
    ("github-oauth-token", "o2.txt", "gho_{a:36}\n"),
    (
        "github-app-token",
        "app.env",
        "INSTALLATION_TOKEN=ghs_{a:36}\n",
    ),
    (
        "github-app-token",
        "app.py",
        "user_token = \"ghu_{a:36}\"\n",
    ),
    ("github-app-token", "app.txt", "auth ghs_{a:36}\n"),
    ("github-refresh-token", "r.env", "REFRESH=ghr_{a:36}\n"),
    ("github-refresh-token", "r.py", "r = \"ghr_{a:76}\"\n"),
    ("github-refresh-token", "r.txt", "ghr_{a:50} expired\n"),
    ("gitlab-token", "gl.env", "GITLAB_TOKEN=glpat-{w:20}\n"),
    ("gitlab-token", "runner.toml", "token = \"glrt-{w:30}\"\n"),
    ("gitlab-token", "gl.txt", "register GR1348941{w:20}\n"),
    ("gitlab-token", "gl2.txt", "job token glcbt-{H:2}_{w:20}\n"),
    ("gitlab-token", "gl3.py", "secret = \"gloas-{w:64}\"\n"),
    (
        "npm-token",
        ".npmrc",
        "//registry.npmjs.org/:_authToken=npm_{a:36}\n",
    ),
    (
        "npm-token",
        "npmrc.txt",
        "//registry.npmjs.org/:_authToken={h:8}-{h:4}-{h:4}-{h:4}-{h:12}\n",
    ),
    ("npm-token", "npm.env", "NPM_TOKEN=npm_{a:36}\n"),
    (
        "pypi-token",
        ".pypirc",
        "[pypi]\npassword = pypi-AgEIcHlwaS5vcmc{w:70}\n",
    ),
    (
        "pypi-token",
        "pypi.env",
        "TWINE_PASSWORD=pypi-AgENdGVzdC5weXBpLm9yZw{w:80}\n",
    ),
    ("pypi-token", "pypi.txt", "pypi-AgEIcHlwaS5vcmc{w:90}\n"),
    (
        "rubygems-token",
        "gem.env",
        "GEM_HOST_API_KEY=rubygems_{h:48}\n",
    ),
    (
        "rubygems-token",
        "gem.yaml",
        ":rubygems_api_key: rubygems_{h:48}\n",
    ),
    ("rubygems-token", "gem.txt", "key rubygems_{h:48}\n"),
    (
        "crates-io-token",
        "cargo.env",
        "CARGO_REGISTRY_TOKEN=cio{a:32}\n",
    ),
    (
        "crates-io-token",
        "credentials.toml",
        "[registry]\ntoken = \"cio{a:32}\"\n",
    ),
    ("crates-io-token", "cio.txt", "login cio{a:32}\n"),
    (
        "dockerhub-pat",
        "d.env",
        "DOCKERHUB_TOKEN=dckr_pat_{w:27}\n",
    ),
    (
        "dockerhub-pat",
        "d.sh",
        "echo dckr_pat_{w:27} | docker login -u me --password-stdin\n",
    ),
    ("dockerhub-pat", "d.txt", "dckr_pat_{w:27}\n"),
    ("sonarqube-token", "s.env", "SONAR_TOKEN=squ_{h:40}\n"),
    (
        "sonarqube-token",
        "s.properties",
        "sonar.token=sqp_{h:40}\n",
    ),
    ("sonarqube-token", "s.txt", "analysis sqa_{h:40}\n"),
    (
        "atlassian-api-token",
        "j.env",
        "JIRA_API_TOKEN=ATATT3{w:186}\n",
    ),
    ("atlassian-api-token", "j.py", "jira = \"ATATT3{w:186}\"\n"),
    ("atlassian-api-token", "j.txt", "ATATT3{w:186}\n"),
    ("linear-api-key", "l.env", "LINEAR_API_KEY=lin_api_{a:40}\n"),
    ("linear-api-key", "l.ts", "const k = 'lin_api_{a:40}';\n"),
    ("linear-api-key", "l.txt", "lin_api_{a:40}\n"),
    (
        "postman-api-key",
        "p.env",
        "POSTMAN_API_KEY=PMAK-{h:24}-{h:34}\n",
    ),
    (
        "postman-api-key",
        "p.json",
        "{\"key\": \"PMAK-{h:24}-{h:34}\"}\n",
    ),
    ("postman-api-key", "p.txt", "PMAK-{h:24}-{h:34}\n"),
    (
        "openai-api-key",
        "oa.env",
        "OPENAI_API_KEY=sk-{a:20}T3BlbkFJ{a:20}\n",
    ),
    (
        "openai-api-key",
        "oa.py",
        "client = OpenAI(api_key=\"sk-proj-{a:40}{a:20}T3BlbkFJ{a:30}{a:20}\")\n",
    ),
    (
        "openai-api-key",
        "oa.txt",
        "sk-svcacct-{a:20}T3BlbkFJ{a:20}\n",
    ),
    (
        "anthropic-api-key",
        "an.env",
        "ANTHROPIC_API_KEY=sk-ant-api03-{w:93}AA\n",
    ),
    (
        "anthropic-api-key",
        "an.py",
        "key = 'sk-ant-api03-{w:93}AA'\n",
    ),
    ("anthropic-api-key", "an.txt", "sk-ant-admin01-{w:93}AA\n"),
    ("huggingface-token", "hf.env", "HF_TOKEN=hf_{A:34}\n"),
    ("huggingface-token", "hf.py", "login(token=\"hf_{A:34}\")\n"),
    ("huggingface-token", "hf.txt", "hf_{A:34}\n"),
    ("stripe-key", "st.env", "STRIPE_SECRET_KEY=sk_live_{a:24}\n"),
    ("stripe-key", "st.rb", "Stripe.api_key = 'rk_live_{a:30}'\n"),
    ("stripe-key", "st.txt", "sk_test_{a:24}\n"),
    (
        "stripe-webhook-secret",
        "wh.env",
        "STRIPE_WEBHOOK_SECRET=whsec_{a:32}\n",
    ),
    (
        "stripe-webhook-secret",
        "wh.py",
        "endpoint_secret = 'whsec_{a:40}'\n",
    ),
    ("stripe-webhook-secret", "wh.txt", "whsec_{a:32}\n"),
    (
        "square-oauth-secret",
        "sq.env",
        "SQUARE_OAUTH_SECRET=sq0csp-{w:43}\n",
    ),
    ("square-oauth-secret", "sq.py", "s = \"sq0csp-{w:43}\"\n"),
    ("square-oauth-secret", "sq.txt", "sq0csp-{w:43}\n"),
    (
        "square-access-token",
        "sqa.env",
        "SQUARE_TOKEN=sq0atp-{w:22}\n",
    ),
    ("square-access-token", "sqa.py", "token = \"EAAA{w:60}\"\n"),
    ("square-access-token", "sqa.txt", "sq0atp-{w:22}\n"),
    (
        "sendgrid-api-key",
        "sg.env",
        "SENDGRID_API_KEY=SG.{w:22}.{w:43}\n",
    ),
    (
        "sendgrid-api-key",
        "sg.py",
        "sg = SendGridAPIClient('SG.{w:22}.{w:43}')\n",
    ),
    ("sendgrid-api-key", "sg.txt", "SG.{w:22}.{w:43}\n"),
    (
        "mailchimp-api-key",
        "mc.env",
        "MAILCHIMP_API_KEY={h:32}-us12\n",
    ),
    ("mailchimp-api-key", "mc.py", "mc = '{h:32}-us6'\n"),
    ("mailchimp-api-key", "mc.txt", "key {h:32}-us21\n"),
    ("mailgun-api-key", "mg.env", "MAILGUN_API_KEY=key-{h:32}\n"),
    ("mailgun-api-key", "mg.py", "mailgun_key = \"key-{h:32}\"\n"),
    ("mailgun-api-key", "mg.yaml", "mailgun: key-{h:32}\n"),
    ("twilio-key", "tw.env", "TWILIO_ACCOUNT_SID=AC{h:32}\n"),
    (
        "twilio-key",
        "tw.py",
        "client = Client(\"SK{h:32}\", secret)\n",
    ),
    ("twilio-key", "tw.txt", "sid AC{h:32}\n"),
    (
        "slack-token",
        "sl.env",
        "SLACK_BOT_TOKEN=xoxb-{d:12}-{d:12}-{a:24}\n",
    ),
    (
        "slack-token",
        "sl.py",
        "token = \"xoxp-{d:12}-{d:12}-{d:12}-{h:32}\"\n",
    ),
    ("slack-token", "sl2.txt", "xapp-1-A{U:10}-{d:13}-{h:64}\n"),
    (
        "slack-webhook",
        "sw.env",
        "SLACK_WEBHOOK=https://hooks.slack.com/services/T{U:8}/B{U:10}/{a:24}\n",
    ),
    (
        "slack-webhook",
        "sw.py",
        "url = \"https://hooks.slack.com/services/T{U:10}/B{U:10}/{a:24}\"\n",
    ),
    (
        "slack-webhook",
        "sw.txt",
        "https://hooks.slack.com/workflows/{a:44}\n",
    ),
    // Without a scheme or with `http://`, as gitleaks' rule finds them.
    (
        "slack-webhook",
        "sw-bare.yaml",
        "alerts:\n  webhook: hooks.slack.com/services/{a:44}\n",
    ),
    (
        "slack-webhook",
        "sw-http.md",
        "Posts to http://hooks.slack.com/services/T{U:8}/B{U:10}/{a:24} on failure.\n",
    ),
    // Unsigned JWTs (header.payload; header.payload. with an empty signature).
    ("jwt", "jwt-unsigned.env", "ID_TOKEN={jwtu}\n"),
    ("jwt", "jwt-unsigned.txt", "token {jwtu}.\n"),
    (
        "discord-bot-token",
        "dc.env",
        "DISCORD_TOKEN=M{w:23}.{w:6}.{w:27}\n",
    ),
    (
        "discord-bot-token",
        "dc.py",
        "discord_client.run(\"N{w:23}.{w:6}.{w:27}\")\n",
    ),
    (
        "discord-bot-token",
        "dc.txt",
        "discord bot O{w:25}.{w:6}.{w:38}\n",
    ),
    (
        "discord-webhook",
        "dw.env",
        "DISCORD_WEBHOOK=https://discord.com/api/webhooks/{d:18}/{w:68}\n",
    ),
    (
        "discord-webhook",
        "dw.py",
        "u = 'https://discordapp.com/api/webhooks/{d:19}/{w:68}'\n",
    ),
    (
        "discord-webhook",
        "dw.txt",
        "https://ptb.discord.com/api/webhooks/{d:18}/{w:64}\n",
    ),
    (
        "telegram-bot-token",
        "tg.env",
        "TELEGRAM_BOT_TOKEN={d:10}:AA{w:33}\n",
    ),
    (
        "telegram-bot-token",
        "tg.py",
        "bot = Bot(\"{d:9}:AA{w:33}\")\n",
    ),
    ("telegram-bot-token", "tg.txt", "token {d:10}:AA{w:33}\n"),
    (
        "jwt",
        "jwt.env",
        "SESSION=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{w:40}.{w:43}\n",
    ),
    (
        "jwt",
        "jwt.py",
        "auth = \"Bearer eyJhbGciOiJSUzI1NiJ9.eyJ{w:60}.{w:86}\"\n",
    ),
    (
        "jwt",
        "jwt.txt",
        "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzUxMiJ9.eyJ{w:30}.{w:86}\n",
    ),
    (
        "artifactory-api-key",
        "af.env",
        "ARTIFACTORY_API_KEY=AKC{a:70}\n",
    ),
    ("artifactory-api-key", "af.py", "key = \"AKC{a:70}\"\n"),
    ("artifactory-api-key", "af.txt", "apikey: AKC{a:60}\n"),
    (
        "artifactory-password",
        "ap.env",
        "ARTIFACTORY_PASSWORD=AP6{a:20}\n",
    ),
    ("artifactory-password", "ap.py", "pw = \"AP3{a:30}\"\n"),
    ("artifactory-password", "ap.txt", "APB{a:24}\n"),
    (
        "shopify-token",
        "sh.env",
        "SHOPIFY_ACCESS_TOKEN=shpat_{h:32}\n",
    ),
    ("shopify-token", "sh.py", "secret = \"shpss_{h:32}\"\n"),
    ("shopify-token", "sh.txt", "shpca_{h:32}\n"),
    ("datadog-api-key", "dd.env", "DD_API_KEY={h:32}\n"),
    ("datadog-api-key", "dd.py", "datadog_app_key = \"{h:40}\"\n"),
    ("datadog-api-key", "dd.yaml", "datadog_api_key: {h:32}\n"),
    ("newrelic-key", "nr.env", "NEW_RELIC_API_KEY=NRAK-{U:27}\n"),
    ("newrelic-key", "nr.js", "const browser = 'NRJS-{h:19}';\n"),
    ("newrelic-key", "nr.txt", "NRAK-{U:27}\n"),
    (
        "sentry-token",
        "se.env",
        "SENTRY_AUTH_TOKEN=sntryu_{h:64}\n",
    ),
    ("sentry-token", "se.py", "t = \"sntrys_eyJ{b:197}\"\n"),
    ("sentry-token", "se.txt", "sntryu_{h:64}\n"),
    (
        "grafana-token",
        "gr.env",
        "GRAFANA_TOKEN=glsa_{a:32}_{h:8}\n",
    ),
    ("grafana-token", "gr.py", "cloud = \"glc_{b:40}\"\n"),
    ("grafana-token", "gr.txt", "glsa_{a:32}_{h:8}\n"),
    ("okta-api-token", "ok.env", "OKTA_API_TOKEN=00{w:40}\n"),
    ("okta-api-token", "ok.py", "okta_token = \"00{w:40}\"\n"),
    (
        "okta-api-token",
        "ok.yaml",
        "okta_client_secret: 00{w:40}\n",
    ),
    (
        "facebook-access-token",
        "fb.env",
        "FB_TOKEN=EAACEdEose0cBA{a:40}\n",
    ),
    (
        "facebook-access-token",
        "fb.py",
        "t = 'EAACEdEose0cBA{a:60}'\n",
    ),
    ("facebook-access-token", "fb.txt", "EAACEdEose0cBA{a:30}\n"),
    (
        "twitter-bearer-token",
        "tw.env2",
        "TWITTER_BEARER=AAAAAAAAAAAAAAAAAAAAA{a:90}\n",
    ),
    (
        "twitter-bearer-token",
        "tw2.py",
        "bearer = \"AAAAAAAAAAAAAAAAAAAAA{a:100}\"\n",
    ),
    (
        "twitter-bearer-token",
        "tw2.txt",
        "AAAAAAAAAAAAAAAAAAAAA{a:85}\n",
    ),
    (
        "mapbox-secret-token",
        "mb.env",
        "MAPBOX_SECRET=sk.eyJ{a:90}.{w:22}\n",
    ),
    (
        "mapbox-secret-token",
        "mb.js",
        "const s = \"sk.eyJ{a:100}.{w:22}\";\n",
    ),
    ("mapbox-secret-token", "mb.txt", "sk.eyJ{a:80}.{w:22}\n"),
    (
        "adobe-client-secret",
        "ad.env",
        "ADOBE_CLIENT_SECRET=p8e-{a:32}\n",
    ),
    ("adobe-client-secret", "ad.py", "s = \"p8e-{a:32}\"\n"),
    ("adobe-client-secret", "ad.txt", "p8e-{a:32}\n"),
    ("dropbox-token", "db.env", "DROPBOX_TOKEN=sl.{w:135}\n"),
    ("dropbox-token", "db.py", "t = \"sl.{w:135}\"\n"),
    ("dropbox-token", "db.txt", "sl.{w:135}\n"),
    (
        "databricks-token",
        "dbr.env",
        "DATABRICKS_TOKEN=dapi{h:32}\n",
    ),
    ("databricks-token", "dbr.py", "t = \"dapi{h:32}-2\"\n"),
    ("databricks-token", "dbr.txt", "dapi{h:32}\n"),
    ("doppler-token", "dp.env", "DOPPLER_TOKEN=dp.pt.{a:43}\n"),
    ("doppler-token", "dp.py", "t = 'dp.pt.{a:43}'\n"),
    ("doppler-token", "dp.txt", "dp.pt.{a:43}\n"),
    (
        "hashicorp-vault-token",
        "v.env",
        "VAULT_TOKEN=hvs.{w:100}\n",
    ),
    ("hashicorp-vault-token", "v.py", "t = \"hvb.{w:150}\"\n"),
    ("hashicorp-vault-token", "v.txt", "hvs.{w:95}\n"),
    (
        "terraform-cloud-token",
        "tf.env",
        "TF_TOKEN={a:14}.atlasv1.{w:65}\n",
    ),
    (
        "terraform-cloud-token",
        "credentials.tfrc.json",
        "{\"token\": \"{a:14}.atlasv1.{w:68}\"}\n",
    ),
    ("terraform-cloud-token", "tf.txt", "{a:14}.atlasv1.{w:62}\n"),
    ("pulumi-token", "pu.env", "PULUMI_ACCESS_TOKEN=pul-{h:40}\n"),
    ("pulumi-token", "pu.py", "t = \"pul-{h:40}\"\n"),
    ("pulumi-token", "pu.txt", "pul-{h:40}\n"),
    (
        "age-secret-key",
        "key.txt",
        "# created: 2024\nAGE-SECRET-KEY-1{z:58}\n",
    ),
    (
        "age-secret-key",
        "age.env",
        "SOPS_AGE_KEY=AGE-SECRET-KEY-1{z:58}\n",
    ),
    (
        "age-secret-key",
        "age.py",
        "k = \"AGE-SECRET-KEY-1{z:58}\"\n",
    ),
    ("flyio-token", "fly.env", "FLY_API_TOKEN=fo1_{w:43}\n"),
    ("flyio-token", "fly.py", "t = \"fm2_{b:120}\"\n"),
    ("flyio-token", "fly.txt", "fo1_{w:43}\n"),
    (
        "planetscale-token",
        "ps.env",
        "PLANETSCALE_TOKEN=pscale_tkn_{w:43}\n",
    ),
    ("planetscale-token", "ps.py", "pw = \"pscale_pw_{w:40}\"\n"),
    ("planetscale-token", "ps.txt", "pscale_oauth_{w:40}\n"),
    (
        "database-url",
        "db1.env",
        "DATABASE_URL=postgres://app:{a:16}@db.internal:5432/app\n",
    ),
    (
        "database-url",
        "db2.py",
        "MONGO = \"mongodb+srv://admin:{a:12}@cluster0.example.net/db\"\n",
    ),
    (
        "database-url",
        "db3.txt",
        "redis://default:{a:20}@cache:6379/0\n",
    ),
    (
        "basic-auth-url",
        "ba.env",
        "REPO=https://deploy:{a:16}@git.example.com/repo.git\n",
    ),
    (
        "basic-auth-url",
        "ba.py",
        "url = 'ftp://user:{a:10}@ftp.example.org/'\n",
    ),
    (
        "basic-auth-url",
        "ba.txt",
        "git remote add origin https://bot:{a:20}@gitea.example.com/o/r\n",
    ),
    ("keyword-secret", "kw.py", "password = \"{a:12}\"\n"),
    ("keyword-secret", "kw.env", "DB_PASSWORD={a:14}\n"),
    ("keyword-secret", "kw.yaml", "secret: {a:16}\n"),
    ("keyword-secret", "kw.json", "{\"api_key\": \"{a:24}\"}\n"),
    (
        "keyword-secret",
        "kw.go",
        "dbPass := \"{a:12}\"\nclient_secret := \"{a:20}\"\n",
    ),
    ("high-entropy-base64", "he.py", "material = \"{b:40}\"\n"),
    ("high-entropy-base64", "he.js", "const blob = '{a:48}';\n"),
    ("high-entropy-base64", "he.env", "SIGNING_MATERIAL={b:44}\n"),
    ("high-entropy-hex", "hx.py", "material = \"{h:40}\"\n"),
    ("high-entropy-hex", "hx.js", "const blob = '{h:64}';\n"),
    ("high-entropy-hex", "hx.env", "ENCRYPTION_MATERIAL={h:48}\n"),
    (
        "openai-api-key",
        "llm.py",
        "client = OpenAI(api_key=\"sk-proj-{a:30}-{w:43}T3BlbkFJ{w:30}_{a:43}\")\n",
    ),
    (
        "openai-api-key",
        "svc.env",
        "OPENAI_API_KEY=sk-svcacct-{a:20}_{w:37}T3BlbkFJ{a:10}-{w:47}\n",
    ),
    (
        "openai-api-key",
        "notes.md",
        "Key: `sk-proj-{w:20}-{a:37}T3BlbkFJ{a:12}-{w:45}`\n",
    ),
    (
        "anthropic-api-key",
        "claude.json",
        "{\"claudeAiOauth\": {\"accessToken\": \"sk-ant-oat01-{w:93}AA\"}}\n",
    ),
    (
        "anthropic-api-key",
        "oauth.sh",
        "export CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-{w:93}AA\n",
    ),
    (
        "huggingface-token",
        "hub.py",
        "HfApi(token=\"api_org_{A:34}\")\n",
    ),
    (
        "huggingface-token",
        "org.yaml",
        "hf_org_token: api_org_{A:34}\n",
    ),
    (
        "slack-webhook",
        "wf.sh",
        "curl -X POST https://hooks.slack.com/workflows/T{U:10}/A{U:10}/{d:18}/{a:24} -d @msg.json\n",
    ),
    (
        "slack-webhook",
        "trigger.yaml",
        "url: https://hooks.slack.com/triggers/T{U:10}/{d:13}/{h:32}\n",
    ),
    (
        "telegram-bot-token",
        "bot.py",
        "TELEGRAM_BOT_TOKEN = \"{d:7}:A{A:1}{w:33}\"\n",
    ),
    (
        "telegram-bot-token",
        "bot.go",
        "const telegramToken = `{d:6}:A{a:1}{w:33}`\n",
    ),
    (
        "1password-service-account-token",
        "op.env",
        "OP_SERVICE_ACCOUNT_TOKEN=ops_eyJ{b:300}\n",
    ),
    (
        "1password-service-account-token",
        "op.sh",
        "export OP_SERVICE_ACCOUNT_TOKEN=\"ops_eyJ{a:420}\"\n",
    ),
    (
        "1password-service-account-token",
        "ci.yaml",
        "env:\n  OP_SERVICE_ACCOUNT_TOKEN: ops_eyJ{b:260}==\n",
    ),
    (
        "1password-secret-key",
        "emergency-kit.txt",
        "Secret Key: A3-{U:6}-{U:11}-{U:5}-{U:5}-{U:5}\n",
    ),
    (
        "1password-secret-key",
        "kit.json",
        "{\"secretKey\": \"A3-{U:6}-{U:6}-{U:5}-{U:5}-{U:5}-{U:5}\"}\n",
    ),
    (
        "1password-secret-key",
        "setup.sh",
        "op account add --secret-key A3-{U:6}-{U:11}-{U:5}-{U:5}-{U:5}\n",
    ),
    (
        "aws-bedrock-api-key",
        "bedrock.env",
        "AWS_BEARER_TOKEN_BEDROCK=ABSKQmVkcm9ja0FQSUtleS0{b:108}=\n",
    ),
    (
        "aws-bedrock-api-key",
        "bedrock.py",
        "client = boto3.client(\"bedrock-runtime\", api_key=\"ABSKQmVkcm9ja0FQSUtleS0{b:132}\")\n",
    ),
    (
        "aws-bedrock-api-key",
        "short.sh",
        "export AWS_BEARER_TOKEN_BEDROCK=bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t{b:120}\n",
    ),
    (
        "gitlab-session-cookie",
        "cookies.txt",
        "gitlab.example.com\tFALSE\t/\tTRUE\t0\tCookie: _gitlab_session={h:32}\n",
    ),
    (
        "gitlab-session-cookie",
        "req.sh",
        "curl -b \"_gitlab_session={L:32}\" https://gitlab.example.com/api/v4/user\n",
    ),
    (
        "gitlab-session-cookie",
        "har.json",
        "{\"name\": \"Cookie\", \"value\": \"_gitlab_session={h:32}; path=/\"}\n",
    ),
    (
        "http-authorization",
        "api.sh",
        "curl -s -H 'Authorization: Bearer {w:40}' https://api.example.com/v1/items\n",
    ),
    (
        "http-authorization",
        "request.http",
        "GET /v1/me HTTP/1.1\nHost: api.example.com\nAuthorization: Basic {b:32}==\n",
    ),
    (
        "http-authorization",
        "client.js",
        "fetch(url, { headers: { \"Authorization\": \"Bearer {a:20}.{w:24}\" } });\n",
    ),
    // --- What tools print (issue 38) ---
    (
        "http-authorization",
        "s3-trace.log",
        "> Authorization: AWS4-HMAC-SHA256 Credential=AKIA{U:16}/20261207/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature={h:64}\r\n",
    ),
    (
        "http-authorization",
        "digest.txt",
        "Authorization: Digest username=\"bob\", realm=\"api\", nonce=\"{h:32}\", uri=\"/\", response=\"{h:32}\"\n",
    ),
    (
        "http-authorization",
        "proxy.log",
        "Proxy-Authorization: NTLM TlRMTVNTUAAB{b:120}\n",
    ),
    (
        "private-key-tail",
        "tail-key.log",
        "$ tail -n 3 key.pem\n{b:64}\n{b:40}==\n-----END PRIVATE KEY-----\n",
    ),
    (
        "private-key-tail",
        "id_rsa.part",
        "{b:70}\n{b:70}\n{b:22}\n-----END OPENSSH PRIVATE KEY-----\n",
    ),
    (
        "private-key-tail",
        "gpg-tail.txt",
        "{b:64}\n{b:64}\n={b:4}\n-----END PGP PRIVATE KEY BLOCK-----\n",
    ),
    (
        "aws-sigv4-signature",
        "aws-debug.log",
        "2026-12-07 10:22:31,123 - MainThread - botocore.auth - DEBUG - Signature:\n{h:64}\n",
    ),
    (
        "aws-sigv4-signature",
        "boto.txt",
        "DEBUG botocore.auth Signature:\r\n{h:64}\r\nDEBUG botocore.endpoint Sending\r\n",
    ),
    (
        "aws-sigv4-signature",
        "s3-sync.log",
        "aws s3 sync . s3://bucket --debug\n...\nbotocore.auth - DEBUG - Signature:\n{h:64}\n",
    ),
    (
        "private-key-body",
        "key-middle.txt",
        "$ sed -n 2,5p server.key\nMIIEowIBAAKCAQEA{b:48}\n{b:64}\n{b:64}\n{b:64}\n",
    ),
    (
        "private-key-body",
        "ec-body.txt",
        "MHcCAQEEI{b:55}\n{b:64}\n{b:24}\n",
    ),
    (
        "private-key-body",
        "pkcs8-body.log",
        "pasted:\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC{b:32}\n{b:64}\n{b:64}\n{b:64}\n",
    ),
    (
        "private-key-open",
        "head-key.log",
        "$ head -n 3 ec.pem\n-----BEGIN EC PRIVATE KEY-----\n{b:64}\n{b:64}\n",
    ),
    (
        "private-key-open",
        "head-rsa.txt",
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{H:32}\n\n{b:64}\n{b:64}\n",
    ),
    (
        "private-key-open",
        "cut-key.pem",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{b:70}\n{b:70}\n{b:70}\n",
    ),
    (
        "docker-config-auth",
        "config.json",
        "{\n  \"auths\": {\n    \"registry.example.io\": {\n      \"auth\": \"{userpass64}\"\n    }\n  }\n}\n",
    ),
    (
        "docker-config-auth",
        "docker-env.sh",
        "export DOCKER_AUTH_CONFIG='{\"auths\":{\"r.example.io\":{\"auth\":\"{userpass64}\"}}}'\n",
    ),
    (
        "docker-config-auth",
        "gitlab-ci.yml",
        "variables:\n  DOCKER_AUTH_CONFIG: '{\"auths\": {\"registry.gitlab.com\": {\"auth\": \"{userpass64}\"}}}'\n",
    ),
    (
        "npmrc-auth",
        ".npmrc",
        "registry=https://npm.internal/\n_auth={userpass64}\n",
    ),
    (
        "npmrc-auth",
        "npmrc-scoped.ini",
        "//npm.internal/:username=ci\n//npm.internal/:_password={pass64}\n",
    ),
    ("npmrc-auth", "npm-config.txt", "_auth = \"{userpass64}\"\n"),
    (
        "http-cookie",
        "curl-verbose.log",
        "> GET /api HTTP/1.1\r\n> Host: app.example.io\r\n> Cookie: theme=dark; sid={a:32}\r\n",
    ),
    (
        "http-cookie",
        "request.txt",
        "Cookie: session_id={w:40}; lang=en\n",
    ),
    (
        "http-cookie",
        "headers.json",
        "{\"Cookie\": \"csrftoken=abc; sessionid={L:32}\"}\n",
    ),
    (
        "http-set-cookie",
        "curl-response.log",
        "< HTTP/1.1 200 OK\r\n< Set-Cookie: session={w:40}; Path=/; HttpOnly; Secure\r\n",
    ),
    (
        "http-set-cookie",
        "response.txt",
        "Set-Cookie: JSESSIONID={H:32}; Path=/app; HttpOnly\n",
    ),
    (
        "http-set-cookie",
        "headers.yaml",
        "set-cookie: auth_token={a:40}; Max-Age=3600; SameSite=Lax\n",
    ),
    (
        "http-secret-header",
        "api-trace.log",
        "> X-Api-Key: {a:32}\r\n",
    ),
    (
        "http-secret-header",
        "call.sh",
        "curl -H 'X-Auth-Token: {w:40}' https://api.example.io/v1/items\n",
    ),
    ("http-secret-header", "gitlab.md", "Private-Token: {a:20}\n"),
    (
        "google-oauth-access-token",
        "gcloud.log",
        "access_token: ya29.a0{w:150}\n",
    ),
    (
        "google-oauth-access-token",
        "token.json",
        "{\"token\": \"ya29.c.{w:160}\", \"expiry\": \"2026-12-08T10:00:00Z\"}\n",
    ),
    (
        "google-oauth-access-token",
        "call.py",
        "headers = {\"Authorization\": \"Bearer \" + \"ya29.a0{w:140}\"}\n",
    ),
    (
        "kubeadm-bootstrap-token",
        "join.sh",
        "kubeadm join 10.0.0.1:6443 --token {L:6}.{L:16} \\\n    --control-plane\n",
    ),
    (
        "kubeadm-bootstrap-token",
        "tokens.txt",
        "TOKEN                     TTL   USAGES                   EXTRA GROUPS\n{L:6}.{L:16}   23h   authentication,signing   system:bootstrappers:kubeadm:default-node-token\n",
    ),
    (
        "kubeadm-bootstrap-token",
        "bootstrap-token.yaml",
        "apiVersion: v1\nkind: Secret\nstringData:\n  token-id: {L:6}\n  token-secret: {L:16}\n",
    ),
    (
        "pgpass-password",
        ".pgpass",
        "db.internal:5432:app:app_user:{a:18}\n",
    ),
    (
        "pgpass-password",
        "pgpass.txt",
        "localhost:5432:*:postgres:{a:16}\n*:6432:*:bouncer:{a:20}\n",
    ),
    (
        "pgpass-password",
        "cat-pgpass.log",
        "*:*:*:replicator:{a:24}\n",
    ),
    ("aws-ecr-password", "ecr.txt", "{ecr}\n"),
    (
        "aws-ecr-password",
        "login.sh",
        "echo {ecr} | docker login --username AWS --password-stdin 123456789012.dkr.ecr.us-east-1.amazonaws.com\n",
    ),
    ("aws-ecr-password", "ci.log", "+ ECR_PASSWORD={ecr}\n"),
    (
        "openssl-private-key-dump",
        "rsa-text.txt",
        "Private-Key: (2048 bit, 2 primes)\npublicExponent: 65537 (0x10001)\nprivateExponent:\n{hexlines}\n",
    ),
    (
        "openssl-private-key-dump",
        "ec-text.log",
        "read EC key\nPrivate-Key: (256 bit)\npriv:\n{hexlines}\nASN1 OID: prime256v1\n",
    ),
    (
        "openssl-private-key-dump",
        "genpkey.out",
        "prime1:\n{hexlines}\ncoefficient:\n{hexlines}\n",
    ),
    (
        "http-authorization",
        "trace.log",
        "2026-11-25T10:00:00Z DEBUG > authorization: token {h:40}\n",
    ),
    (
        "curl-user-password",
        "deploy.sh",
        "curl -u admin:{a:16} https://ci.example.com/job/build\n",
    ),
    (
        "curl-user-password",
        "README.md",
        "Run `curl --user deploy:{w:20} -X POST https://registry.example.com/upload`.\n",
    ),
    (
        "curl-user-password",
        "Makefile",
        "upload:\n\tcurl -sS -u \"$(USER):{a:18}\" -T dist.tgz https://repo.example.com/\n",
    ),
    (
        "connection-string-password",
        "appsettings.json",
        "{\"ConnectionStrings\": {\"Db\": \"Server=db.example.com;Database=app;User Id=sa;Password={a:18};\"}}\n",
    ),
    (
        "connection-string-password",
        "Program.cs",
        "var cs = \"Data Source=sql01;Initial Catalog=app;uid=app;pwd={a:16};\";\n",
    ),
    (
        "connection-string-password",
        "db.py",
        "conn = psycopg2.connect(\"host=db.example.com port=5432 dbname=app user=app password={a:20}\")\n",
    ),
    (
        "connection-string-password",
        "libpq.txt",
        "host=10.0.0.5 user=report password='{a:12} {a:6}' sslmode=require\n",
    ),
    (
        "database-url",
        "cache.py",
        "REDIS_URL = \"redis://:{a:24}@cache.example.com:6379/0\"\n",
    ),
    (
        "database-url",
        "worker.env",
        "BROKER=rediss://:{w:32}@redis.internal:6380\n",
    ),
    (
        "netrc-password",
        ".netrc",
        "machine api.example.com\n  login deploy\n  password {a:24}\n",
    ),
    (
        "netrc-password",
        "netrc",
        "machine github.com login x-access password {a:30}\n",
    ),
    (
        "netrc-password",
        "_netrc",
        "default\nmachine ftp.example.com login anonymous password {w:20}\n",
    ),
    (
        "private-key-base64",
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\ndata:\n  tls.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1J{b:200}\n  tls.key: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpN{b:300}\n",
    ),
    (
        "private-key-base64",
        "secret.json",
        "{\"data\": {\"tls.key\": \"LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1J{b:240}\"}}\n",
    ),
    (
        "private-key-base64",
        "values.yml",
        "sshKey: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1I{b:180}\n",
    ),
    (
        "keyword-secret",
        "deploy.sh",
        "#!/bin/sh\nexport DB_PASSWORD={a:18}\n",
    ),
    ("keyword-secret", ".bashrc", "export API_KEY={a:32}\n"),
    (
        "keyword-secret",
        "notes.txt",
        "staging db\npassword = {a:16}\n",
    ),
    ("keyword-secret", "handover.md", "- Password: {a:14}\n"),
    (
        "keyword-secret",
        "app.log",
        "2026-11-25 boot: db_password={a:20} loaded\n",
    ),
    (
        "keyword-secret",
        "Makefile",
        "DB_PASSWORD = {a:18}\nrun:\n\t./app\n",
    ),
    ("keyword-secret", "credentials", "admin password: {a:16}\n"),
];

/// (file name, template): none of these holds a secret.
pub const NEGATIVES: &[(&str, &str)] = &[
    // What tools print (issue 38): placeholders, public parts, names without values.
    (
        "cookies.log",
        "> Cookie: theme=dark; lang=en-US\n< Set-Cookie: seen=1; Path=/; HttpOnly\n",
    ),
    (
        "headers.md",
        "X-Api-Key: <your-api-key>\nX-Auth-Token: ${TOKEN}\nAuthorization: Negotiate authentication is used by the proxy\n",
    ),
    (
        "ec-public.txt",
        "pub:\n    04:{h:2}:{h:2}:{h:2}:{h:2}:{h:2}:{h:2}:{h:2}:{h:2}:{h:2}:{h:2}:{h:2}:{h:2}:{h:2}:{h:2}:\nASN1 OID: prime256v1\n",
    ),
    (
        "compose.yaml",
        "services:\n  db:\n    ports:\n      - \"127.0.0.1:5432:5432\"\n",
    ),
    // Vendor-name rules (gitleaks' families, issue 16): placeholders, references, digests.
    (
        "vn1.env",
        "DISCORD_CLIENT_ID=000000000000000000\nTWITTER_API_KEY=xxxxxxxxxxxxxxxxxxxxxxxxx\n",
    ),
    (
        "vn2.yaml",
        "sonar_token: ${SONAR_TOKEN}\ncloudflare_api_token: <your-cloudflare-api-token>\n",
    ),
    (
        "vn3.py",
        "plaid_client_id = os.environ[\"PLAID_CLIENT_ID\"]\nalgolia_app = \"abcdefghijklmnopqrstuvwxyzabcdef\"\n",
    ),
    (
        "vn4.js",
        "const twitterHandle = \"@example\";\nconst mapboxStyle = \"mapbox://styles/mapbox/streets-v12\";\n",
    ),
    (
        "vn5.md",
        "Set `ZENDESK_SECRET_KEY` to the key from the admin page; `netlify_token: {{ netlify.token }}`.\n",
    ),
    (
        "vn6.go",
        "discordGuild := \"general\"\nslackChannel := \"#alerts\"\n",
    ),
    ("commit.txt", "commit {h:40}\nAuthor: A <a@example.com>\n"),
    (
        "Cargo.toml",
        "[dependencies]\nfoo = { git = \"https://example.com/foo\", rev = \"{h:40}\" }\n",
    ),
    ("sums.py", "checksum = \"{h:64}\"\n"),
    (
        "digest.json",
        "{\"sha256\": \"{h:64}\", \"digest\": \"{h:64}\"}\n",
    ),
    ("integrity.json", "{\"integrity\": \"{b:64}\"}\n"),
    (
        "uuid.py",
        "request_id = \"{h:8}-{h:4}-{h:4}-{h:4}-{h:12}\"\n",
    ),
    (
        "uuid2.json",
        "{\"id\": \"{h:8}-{h:4}-{h:4}-{h:4}-{h:12}\"}\n",
    ),
    ("uuid3.py", "x = \"{h:8}-{h:4}-{h:4}-{h:4}-{h:12}\"\n"),
    ("userid.py", "user_id = \"{a:32}\"\n"),
    ("ids.js", "const sessionIds = { order_id: '{a:40}' };\n"),
    ("etag.py", "etag = \"{h:32}\"\n"),
    ("nonce.py", "nonce = \"{b:32}\"\n"),
    ("fingerprint.py", "fingerprint = \"{h:40}\"\n"),
    (
        "seq.py",
        "alphabet = \"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef\"\n",
    ),
    (
        "seq2.py",
        "hexdigits = \"0123456789abcdef0123456789abcdef\"\n",
    ),
    ("seq3.py", "digits = \"01234567890123456789\"\n"),
    (
        "seq4.py",
        "b64 = \"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/\"\n",
    ),
    ("tpl1.py", "password = \"${DB_PASSWORD}\"\n"),
    ("tpl2.yaml", "password: \"{{ vault_db_password }}\"\n"),
    ("tpl3.py", "api_key = \"<your-api-key>\"\n"),
    ("tpl4.sh", "secret=\"$SECRET\"\n"),
    ("tpl5.env", "DB_PASSWORD=${DB_PASSWORD}\n"),
    ("tpl6.yaml", "secret: '%(secret)s'\n"),
    ("tpl7.rb", "password = \"#{ENV['PW']}\"\n"),
    ("tpl8.env", "API_KEY=$API_KEY\n"),
    ("tpl9.yaml", "password: ${{ secrets.DB_PASSWORD }}\n"),
    ("ref1.py", "password = os.environ[\"DB_PASSWORD\"]\n"),
    ("ref2.py", "password = get_password()\n"),
    ("ref3.cfg", "secret = settings.SECRET_KEY\n"),
    ("ref4.ini", "password = vault.read(path)\n"),
    ("ref5.js", "const apiKey = process.env.API_KEY;\n"),
    ("ref6.go", "password := os.Getenv(\"PASSWORD\")\n"),
    ("ref7.yaml", "api_key: config.api_key\n"),
    ("ph1.py", "password = \"\"\n"),
    ("ph2.py", "password = \"********\"\n"),
    ("ph3.py", "api_key = \"xxxxxxxxxxxxxxxx\"\n"),
    ("ph4.py", "password = \"password\"\n"),
    ("ph5.yaml", "password: null\n"),
    ("ph6.yaml", "secret: true\n"),
    ("ph7.env", "PASSWORD=\n"),
    ("ph8.py", "secret = \"your-secret-here\"\n"),
    ("ph9.py", "password = \"...\"\n"),
    ("ph10.yaml", "password: REDACTED\n"),
    ("ph11.txt", "token: [REDACTED:github-pat]\n"),
    ("ph12.yaml", "api_key: <API_KEY>\n"),
    (
        "type1.rs",
        "struct Login { password: String, secret: Vec<u8> }\n",
    ),
    (
        "type2.rs",
        "const SECRET_LEN: usize = 32;\nfn check(password: &str) -> bool { password.len() > 8 }\n",
    ),
    (
        "type3.ts",
        "interface Creds { password: string; apiKey?: string }\n",
    ),
    ("type4.yaml", "type: password\n"),
    (
        "type5.py",
        "def login(password: str, secret: bytes) -> None: ...\n",
    ),
    (
        "type6.go",
        "type Config struct { Password string `json:\"password\"` }\n",
    ),
    (
        "prose1.md",
        "The password must be at least 8 characters long.\n",
    ),
    (
        "prose2.md",
        "Use a secret manager; never commit secrets: they leak.\n",
    ),
    ("prose3.txt", "error: password: incorrect\n"),
    ("prose4.txt", "Enter password: \n"),
    ("prose5.md", "Set `api_key` in your config file.\n"),
    ("url1.txt", "https://example.com/path?q=1\n"),
    ("url2.txt", "https://user@host.example.com/repo.git\n"),
    ("url3.env", "DATABASE_URL=postgres://localhost:5432/app\n"),
    ("url4.txt", "http://host.example.com:8080/x\n"),
    (
        "url5.env",
        "DATABASE_URL=postgres://user:${DB_PASS}@db/app\n",
    ),
    ("url6.txt", "https://user:password@host.example.com/\n"),
    ("url7.txt", "https://user:<password>@host.example.com/\n"),
    (
        "url8.yaml",
        "url: \"mysql://root:$MYSQL_ROOT_PASSWORD@db:3306/app\"\n",
    ),
    ("short1.py", "key = \"abc\"\n"),
    ("short2.py", "sk_test_123\nghp_123\nAKIA1234\n"),
    ("short3.txt", "AKIA{U:15}\n"),
    ("long4.txt", "AKIA{U:17}\n"),
    ("short5.txt", "xoxb-your-token-here\n"),
    (
        "armor1.rs",
        "const HEADER: &str = \"-----BEGIN RSA PRIVATE KEY-----\";\n",
    ),
    (
        "armor2.pem",
        "-----BEGIN PUBLIC KEY-----\n{b:64}\n{b:64}\n-----END PUBLIC KEY-----\n",
    ),
    (
        "armor3.pem",
        "-----BEGIN CERTIFICATE-----\n{b:64}\n{b:64}\n-----END CERTIFICATE-----\n",
    ),
    (
        "armor4.py",
        "if line.startswith('-----BEGIN OPENSSH PRIVATE KEY-----'):\n    pass\n",
    ),
    (
        "slack1.md",
        "Post to https://hooks.slack.com/ with your webhook.\n",
    ),
    ("twilio1.txt", "ACCOUNT_SID and SKIP words: ACME SKETCH\n"),
    ("mc1.txt", "ready-use the read-us helper\n"),
    ("tg1.txt", "12:34:56 and 1234567890:AB\n"),
    (
        "words1.py",
        "msg = \"Lorem ipsum dolor sit amet consectetur\"\n",
    ),
    (
        "words2.py",
        "name = \"internationalization_localization\"\n",
    ),
    (
        "words3.py",
        "label = \"ThisIsAVeryLongCamelCaseIdentifierName\"\n",
    ),
    (
        "color.css",
        ".a { color: #ff00ff; background: \"#00ff00\"; }\n",
    ),
    ("jwt1.txt", "eyJub3QiOiJqd3QifQ\n"),
    ("jwt2.txt", "eyJhbGciOi.eyJzdWIiOi.short\n"),
    (
        "data.html",
        "<img src=\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk\">\n",
    ),
    (
        "Cargo.lock",
        "[[package]]\nname = \"x\"\nchecksum = \"{h:64}\"\n",
    ),
    (
        "package-lock.json",
        "{\"integrity\": \"sha512-{b:86}==\", \"resolved\": \"https://r.example/x\"}\n",
    ),
    (
        "yarn.lock",
        "x@1:\n  integrity sha512-{b:86}==\n  checksum \"{h:64}\"\n",
    ),
    ("go.sum", "example.com/x v1.0.0 h1:{b:43}=\n"),
    (
        "pragma1.py",
        "token = \"ghp_{a:36}\"  # pragma: allowlist secret\n",
    ),
    (
        "pragma2.js",
        "// pragma: allowlist nextline secret\nconst t = 'AKIA{U:16}';\n",
    ),
    (
        "pragma3.yaml",
        "key: sk_live_{a:24} # pragma: allowlist secret\n",
    ),
    (
        "pragma4.sql",
        "-- pragma: allowlist nextline secret\nSELECT 'xoxb-{d:12}-{d:12}-{a:24}';\n",
    ),
    (
        "pragma5.html",
        "<!-- pragma: allowlist secret --> <meta k=\"AIza{w:35}\">\n",
    ),
    ("bcrypt.py", "password_hash = \"$2b$12${b:53}\"\n"),
    (
        "env1.sh",
        "export PATH=/usr/local/bin:/usr/bin\nexport PWD=/home/user/project\n",
    ),
    ("env2.env", "OLDPWD=/tmp\nHOME=/root\n"),
    ("ver.txt", "version 1.2.3-beta.4+build.5678\n"),
    ("ip.txt", "listen 192.168.1.10:8443\n"),
    ("email.txt", "contact admin@example.com\n"),
    ("path.py", "key_path = \"/etc/ssl/private/server.key\"\n"),
    ("hash2.txt", "sha256:{h:64}\n"),
    ("docker.txt", "image@sha256:{h:64}\n"),
    ("gitlog.txt", "{h:7} Fix the parser\n{h:7} Add tests\n"),
    (
        "bearer-ref.sh",
        "curl -H \"Authorization: Bearer $API_TOKEN\" https://api.example.com/\n",
    ),
    (
        "bearer-tmpl.md",
        "Send `Authorization: Bearer <your-token>` with each request.\n",
    ),
    (
        "curl-ref.sh",
        "curl -u \"$USER:$PASSWORD\" https://ci.example.com/\n",
    ),
    (
        "conn-ref.cs",
        "var cs = $\"Server={host};Database=app;User Id={user};Password={password};\";\n",
    ),
    (
        "libpq-ref.py",
        "dsn = f\"host={host} user={user} password={password}\"\n",
    ),
    (
        "netrc-doc.md",
        "Use a .netrc line such as: machine example.com login me password ${NETRC_PASSWORD}\n",
    ),
    (
        "notes2.txt",
        "The password: field is required. Run make test before pushing.\n",
    ),
    (
        "readme2.md",
        "Set `DB_PASSWORD` in your environment; password = os.environ value.\n",
    ),
    (
        "Makefile",
        "PASSWORD_FILE = secrets/db.txt\ntest:\n\tcargo test\n",
    ),
    // Issue 16, precision: what `gateway scan ~/.cargo/registry/src` found once prose, logs
    // and scripts were read as configuration, and the README shapes beside them.
    (
        "ecdsa_verify_tests.txt",
        "# NIST vectors\nCurve = P-256\nX = {h:64}\nDigest = {h:40}\nR = {h:64}\n",
    ),
    (
        "poly1305_test.txt",
        "Key = {h:64}\nInput = {h:96}\nMAC = {h:32}\n",
    ),
    ("install-tools.sh", "accept_android_license={h:40}\n"),
    (
        "prose6.md",
        "Remember: the password: is the one you chose at signup.\n",
    ),
    (
        "table.md",
        "| Option | Type | Description |\n|---|---|---|\n| password | string | The user's password |\n| `api_key` | `String` | Your API key |\n",
    ),
    (
        "usage.txt",
        "Usage: tool --token=<TOKEN> --api-key=API_KEY --password=DB_PASSWORD\n",
    ),
    (
        "config-doc.md",
        "Example config:\n\n    password = \"changeme\"\n    secret: changeme123\n",
    ),
    (
        "fields.md",
        "Password:\n    The password you chose at signup, 12 chars or more.\n",
    ),
    (
        "nextest.log",
        "test secrets::tests::keyword_values ... ok\nsee secrets::Scanner and password::hash_v2\n",
    ),
    (
        "environment",
        "NEXTEST_RUN_ID={h:8}-{h:4}-{h:4}-{h:4}-{h:12}\nNEXTEST_TEST_NAME=secrets::corpus_recall_and_precision\n",
    ),
    (
        "k8s.json",
        "{\"secret.name\": \"istio-cni-token-pjpbw\", \"secretName\": \"web-7d4b9c8f6-x2k9q\"}\n",
    ),
    (
        "aws-doc.md",
        "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
    ),
    (
        "uuid-kw.env",
        "API_PASSWORD={h:8}-{h:4}-{h:4}-{h:4}-{h:12}\n",
    ),
    (
        "oauth_test.rs",
        "let c = Creds { client_secret: \"test-m2m-secret\".into() };\nlet b = r#\"{\"access_token\":\"new-token\",\"expires_in\":3600}\"#;\n",
    ),
    // An unsigned JWT shape whose payload is not JSON (`{"truncated payload`).
    (
        "jwt-unsigned-bad.txt",
        "T=eyJhbGciOiJIUzI1NiJ9.eyJ0cnVuY2F0ZWQgcGF5bG9hZA\n",
    ),
    (
        "build-doc.md",
        "cmake -S c -B c/build \"-DCMAKE_INSTALL_PREFIX=/usr/local\"\n",
    ),
];

fn scan_json(env: &Env, dir: &std::path::Path) -> serde_json::Value {
    let out = env
        .cmd()
        .args(["scan", "--format", "json"])
        .arg(dir)
        .output()
        .expect("run gateway scan");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "scan failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("scan json")
}

pub fn corpus_recall_and_precision() {
    let env = Env::new("corpus");
    let pos = env.ws.join("pos");
    let neg = env.ws.join("neg");
    let mut expected: BTreeMap<String, &str> = BTreeMap::new();
    for (i, (rule, name, template)) in POSITIVES.iter().enumerate() {
        let dir = pos.join(format!("{i:03}-{rule}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let p = dir.join(name);
        std::fs::write(&p, expand(template, i as u64 + 1)).expect("write");
        expected.insert(p.display().to_string(), rule);
    }
    for (i, (name, template)) in NEGATIVES.iter().enumerate() {
        let dir = neg.join(format!("{i:03}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        // Several seeds per negative template: over 100 negative files.
        for seed in 0..2u64 {
            let d = dir.join(seed.to_string());
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(d.join(name), expand(template, 1000 + i as u64 * 7 + seed))
                .expect("write");
        }
    }
    let v = scan_json(&env, &env.ws);
    let findings = v["findings"].as_array().expect("findings");
    let mut by_path: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in findings {
        by_path
            .entry(f["path"].as_str().expect("path").to_string())
            .or_default()
            .push(f["rule"].as_str().expect("rule").to_string());
        // Secret values never appear in reports.
        assert!(f.get("secret").is_none() && f.get("match").is_none());
    }
    let mut missed = Vec::new();
    for (path, rule) in &expected {
        if !by_path
            .get(path)
            .is_some_and(|r| r.iter().any(|x| x == rule))
        {
            missed.push(format!("{path}: want {rule}, got {:?}", by_path.get(path)));
        }
    }
    let false_pos: Vec<String> = by_path
        .iter()
        .filter(|(p, _)| p.contains("/neg/"))
        .map(|(p, r)| format!("{p}: {r:?}"))
        .collect();
    let mut rules: Vec<&str> = POSITIVES.iter().map(|p| p.0).collect();
    rules.sort();
    rules.dedup();
    let tp = expected.len() - missed.len();
    let negatives = NEGATIVES.len() * 2;
    eprintln!(
        "corpus: {} positives over {} rules, recall {}/{}; {} negatives, false positives {}",
        expected.len(),
        rules.len(),
        tp,
        expected.len(),
        negatives,
        false_pos.len()
    );
    assert!(negatives >= 100);
    assert!(
        missed.is_empty(),
        "missed positives:\n{}",
        missed.join("\n")
    );
    assert!(
        false_pos.is_empty(),
        "false positives:\n{}",
        false_pos.join("\n")
    );
}

/// Every rule of the engine has at least three positives here.
pub fn every_rule_has_three_positives(rule_ids: &[&str]) {
    for id in rule_ids {
        let n = POSITIVES.iter().filter(|p| p.0 == *id).count();
        assert!(n >= 3, "rule {id} has {n} positives in the corpus (need 3)");
    }
}
