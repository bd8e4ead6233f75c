//! Issue 16, context-aware detection: every token family and a keyword-assigned secret, each
//! embedded in every context the context tokenizer knows, generated from templates at test
//! time (no secret-looking literal in the repository). Each case must be found where its
//! value sits, and redaction (whole and streamed in small chunks) must remove it.

use super::*;
use base64::Engine;

const AN: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER_DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const LOWER_DIGITS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const DIGITS: &[u8] = b"0123456789";
const URLSAFE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn of(&mut self, alphabet: &[u8], n: usize) -> String {
        (0..n)
            .map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize] as char)
            .collect()
    }
}

/// A token family: its rule and a generator of a fresh token.
struct Family {
    rule: &'static str,
    make: fn(&mut Rng) -> String,
    /// Multi-line (a PEM block): only contexts that can hold lines, or escape them.
    multiline: bool,
}

fn families() -> Vec<Family> {
    fn b64url(s: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
    }
    vec![
        Family {
            rule: "github-pat",
            make: |r| format!("{}{}", ["gh", "p_"].concat(), r.of(AN, 36)),
            multiline: false,
        },
        Family {
            rule: "aws-access-key-id",
            make: |r| format!("{}{}", ["AK", "IA"].concat(), r.of(UPPER_DIGITS, 16)),
            multiline: false,
        },
        Family {
            rule: "slack-token",
            make: |r| {
                format!(
                    "{}{}-{}-{}",
                    ["xo", "xb-"].concat(),
                    r.of(DIGITS, 11),
                    r.of(DIGITS, 13),
                    r.of(LOWER_DIGITS, 24)
                )
            },
            multiline: false,
        },
        Family {
            rule: "stripe-key",
            make: |r| format!("{}{}", ["sk_", "live_"].concat(), r.of(AN, 32)),
            multiline: false,
        },
        Family {
            rule: "openai-api-key",
            make: |r| {
                format!(
                    "{}{}{}{}",
                    ["sk-", "proj-"].concat(),
                    r.of(AN, 40),
                    ["T3Blbk", "FJ"].concat(),
                    r.of(AN, 40)
                )
            },
            multiline: false,
        },
        Family {
            rule: "anthropic-api-key",
            make: |r| {
                format!(
                    "{}{}AA",
                    ["sk-", "ant-", "api03-"].concat(),
                    r.of(URLSAFE, 93)
                )
            },
            multiline: false,
        },
        Family {
            rule: "jwt",
            make: |r| {
                format!(
                    "{}.{}.{}",
                    b64url(r#"{"alg":"HS256","typ":"JWT"}"#),
                    b64url(&format!(r#"{{"sub":"{}","iat":1700000000}}"#, r.of(AN, 12))),
                    r.of(URLSAFE, 43)
                )
            },
            multiline: false,
        },
        Family {
            rule: "private-key",
            make: |r| {
                let kind = "RSA PRIVATE KEY";
                let body: Vec<String> = (0..6).map(|_| r.of(AN, 64)).collect();
                format!(
                    "-----BEGIN {kind}-----\n{}\n-----END {kind}-----",
                    body.join("\n")
                )
            },
            multiline: true,
        },
    ]
}

/// A context: its name, the kind of text it is scanned as, and how a value is rendered into
/// it. `{k}`: the key's name, `{K}`: in upper case, `{v}`: the value (JSON contexts escape
/// it themselves: see [`render`]).
struct Context {
    name: &'static str,
    kind: TextKind,
    template: &'static str,
    /// The value is written JSON-escaped (`\n`, `\"`, `\/`), and with `\u00XX` for its
    /// second byte when `unicode`.
    json: bool,
    unicode: bool,
    /// Can hold a multi-line value.
    lines: bool,
}

const fn ctx(name: &'static str, kind: TextKind, template: &'static str) -> Context {
    Context {
        name,
        kind,
        template,
        json: false,
        unicode: false,
        lines: false,
    }
}

fn contexts() -> Vec<Context> {
    use TextKind::{Code, Config, Prose, Stream};
    vec![
        ctx("unquoted assignment", Config, "{k}={v}\n"),
        ctx("quoted assignment", Code, "{k} = \"{v}\"\n"),
        ctx("single-quoted assignment", Code, "{k} = '{v}'\n"),
        ctx("export", Config, "export {K}={v}\n"),
        ctx("export quoted", Config, "export {K}=\"{v}\"\n"),
        ctx("Dockerfile ENV", Config, "FROM alpine\nENV {K} {v}\n"),
        ctx("Dockerfile ENV =", Config, "FROM alpine\nENV {K}={v}\n"),
        ctx("Dockerfile ARG", Config, "ARG {K}={v}\n"),
        ctx("batch set", Config, "set {K}={v}\n"),
        ctx("YAML", Config, "app:\n  {k}: {v}\n"),
        ctx("YAML quoted", Config, "app:\n  {k}: \"{v}\"\n"),
        ctx("TOML", Config, "[app]\n{k} = \"{v}\"\n"),
        ctx("INI", Config, "[app]\n{k} = {v}\n"),
        ctx(".properties", Config, "app.{k}={v}\n"),
        ctx(
            "Markdown 'to' `...`",
            Prose,
            "# Setup\n\nSet the {k} to `{v}` before running.\n",
        ),
        ctx(
            "prose 'is' \"...\"",
            Prose,
            "The staging {k} is \"{v}\" for now.\n",
        ),
        ctx(
            "XML element",
            Code,
            "<config>\n  <{k}>{v}</{k}>\n</config>\n",
        ),
        ctx(
            "XML add key/value",
            Code,
            "<appSettings>\n  <add key=\"{k}\" value=\"{v}\"/>\n</appSettings>\n",
        ),
        ctx("XML attribute", Code, "<connection {k}=\"{v}\" />\n"),
        Context {
            json: true,
            ..ctx("JSON", Code, "{\"{k}\": \"{v}\"}\n")
        },
        Context {
            json: true,
            ..ctx(
                "JSON-escaped env string",
                Code,
                "{\"env\": \"OTHER=1\\n{K}={v}\\nMORE=2\"}\n",
            )
        },
        Context {
            json: true,
            ..ctx(
                "JSON-escaped nested JSON",
                Code,
                "{\"body\": \"{\\\"{k}\\\": \\\"{v}\\\"}\"}\n",
            )
        },
        Context {
            json: true,
            unicode: true,
            ..ctx("JSON with a \\u escape", Code, "{\"{k}\": \"{v}\"}\n")
        },
        Context {
            lines: true,
            ..ctx("Go backticks", Code, "var {k} = `{v}`\n")
        },
        Context {
            lines: true,
            ..ctx("Go backticks :=", Code, "{k} := `{v}`\n")
        },
        Context {
            lines: true,
            ..ctx("C# verbatim string", Code, "var {k} = @\"{v}\";\n")
        },
        ctx("flag --k=v", Stream, "deploy --{k}={v} --verbose\n"),
        ctx("flag --k v", Stream, "deploy --{k} {v} --verbose\n"),
        ctx("shell word", Stream, "echo \"{v}\" | tee out\n"),
        // Contexts without a name: for token families only.
        Context {
            json: true,
            ..ctx(
                "JSON-escaped script line",
                Code,
                "{\"run\": \"set -e\\n{v}\\nmake\"}\n",
            )
        },
        ctx(
            "HTTP header",
            Stream,
            "GET / HTTP/1.1\nAuthorization: Bearer {v}\n",
        ),
        ctx(
            "curl -H",
            Stream,
            "curl -s -H 'Authorization: Bearer {v}' https://api.example/\n",
        ),
        ctx(
            "URL connection string",
            Stream,
            "DATABASE_URL=postgres://app:{v}@db:5432/shop\n",
        ),
        ctx(
            "key=value connection string",
            Config,
            "conn = Server=db;User Id=sa;Password={v};\n",
        ),
    ]
}

/// The value as written in the context (JSON-escaped where the context is JSON).
fn render_value(c: &Context, v: &str) -> String {
    if !c.json {
        return v.to_string();
    }
    let mut out = String::new();
    for (i, ch) in v.chars().enumerate() {
        match ch {
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            '/' => out.push_str("\\/"),
            _ if c.unicode && i == 1 => out.push_str(&format!("\\u{:04x}", ch as u32)),
            _ => out.push(ch),
        }
    }
    if c.template.contains("\\\"{v}\\\"") {
        // Nested JSON: the value is escaped twice.
        out = out.replace('\\', "\\\\");
    }
    out
}

fn render(c: &Context, key: &str, raw_value: &str) -> String {
    c.template
        .replace("{k}", key)
        .replace("{K}", &key.to_ascii_uppercase())
        .replace("{v}", raw_value)
}

/// Checks one case: a finding of `rule` covers where the value is written, and redaction of
/// the whole text and of the text streamed in 7-byte chunks removes what is written.
fn check(text: &str, written: &str, rule: &str, kind: TextKind) -> Result<(), String> {
    let at = text
        .find(written)
        .ok_or_else(|| "value not in text".to_string())?;
    let (vs, ve) = (at, at + written.len());
    let found = scanner().scan(text.as_bytes(), kind, kind != TextKind::Stream);
    // NuGet's `<add key="...Password" value="..."/>` has a rule of its own (gitleaks'
    // `nuget-config-password`): it finds that form before the keyword rule does.
    let hit = found.iter().any(|f| {
        (f.rule == rule || (rule == "keyword-secret" && f.rule == "nuget-config-password"))
            && f.start < ve
            && vs < f.end
    });
    if !hit {
        let got: Vec<String> = found
            .iter()
            .map(|f| format!("{}@{}..{}", f.rule, f.start, f.end))
            .collect();
        return Err(format!("no {rule} over {vs}..{ve}; found {got:?}"));
    }
    // The whole value (the bytes written) is covered by findings.
    let covered = |p: usize| found.iter().any(|f| f.start <= p && p < f.end);
    if let Some(p) = (vs..ve).find(|&p| !covered(p) && !text.as_bytes()[p].is_ascii_whitespace()) {
        // Quotes or escapes around a token are not part of it; its own bytes are.
        let inner = written.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        let is = text[vs..ve].find(inner).map_or(vs, |i| vs + i);
        if p >= is && p < is + inner.len() {
            return Err(format!("byte {p} of the value is not redacted"));
        }
    }
    // As `gateway exec` output: the streaming redactor, fed in chunks of 7 bytes (every
    // value crosses chunk boundaries) with a flush after each, leaves no 12 bytes of it.
    let mut r = Redactor::new(TextKind::Stream);
    let mut out = Vec::new();
    for c in text.as_bytes().chunks(7) {
        r.feed(c, &mut out);
        r.flush_lines(&mut out);
    }
    r.finish(&mut out);
    // Exactly what redacting the whole text gives (the fuzz target's property).
    let mut whole = Vec::new();
    let mut pos = 0;
    for f in scanner().scan(text.as_bytes(), TextKind::Stream, false) {
        whole.extend_from_slice(&text.as_bytes()[pos..f.start]);
        whole.extend_from_slice(format!("[REDACTED:{}]", f.rule).as_bytes());
        pos = f.end;
    }
    whole.extend_from_slice(&text.as_bytes()[pos..]);
    if out != whole {
        return Err(format!(
            "streamed redaction {:?} differs from the whole text's {:?}",
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&whole)
        ));
    }
    if let Some(w) = written
        .as_bytes()
        .windows(12)
        .find(|w| memchr::memmem::find(&out, w).is_some())
    {
        return Err(format!(
            "streamed redaction left {:?} in {:?}",
            String::from_utf8_lossy(w),
            String::from_utf8_lossy(&out)
        ));
    }
    Ok(())
}

fn run_cases(cases: &[(String, String, String, &'static str, TextKind)]) -> Vec<String> {
    let mut failures = Vec::new();
    for (name, text, written, rule, kind) in cases {
        if let Err(e) = check(text, written, rule, *kind) {
            failures.push(format!("{name}: {e}\n    text: {text:?}"));
        }
    }
    failures
}

/// Every token family in every context.
#[test]
fn token_families_are_found_in_every_context() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut cases = Vec::new();
    for fam in families() {
        for c in contexts() {
            if fam.multiline && !(c.lines || c.json) {
                continue;
            }
            let v = (fam.make)(&mut rng);
            let written = render_value(&c, &v);
            let text = render(&c, "token", &written);
            cases.push((
                format!("{} in {}", fam.rule, c.name),
                text,
                written,
                fam.rule,
                c.kind,
            ));
        }
    }
    // A PEM private key base64-encoded inside YAML or JSON (a Kubernetes Secret).
    let b64 = base64::engine::general_purpose::STANDARD;
    let pem = families()
        .into_iter()
        .find(|f| f.rule == "private-key")
        .map(|f| f.make)
        .expect("a PEM family");
    for (name, template, kind) in [
        (
            "Kubernetes Secret (YAML)",
            "apiVersion: v1\nkind: Secret\ndata:\n  tls.key: {v}\n",
            TextKind::Config,
        ),
        (
            "JSON",
            "{\"data\": {\"tls.key\": \"{v}\"}}\n",
            TextKind::Code,
        ),
        ("stream", "tls.key: {v}\n", TextKind::Stream),
    ] {
        let v = b64.encode(format!("{}\n", pem(&mut rng)));
        cases.push((
            format!("base64 PEM in {name}"),
            template.replace("{v}", &v),
            v,
            "private-key-base64",
            kind,
        ));
    }
    let failures = run_cases(&cases);
    assert!(
        failures.is_empty(),
        "{} of {} cases missed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// A keyword-assigned secret (a random password, no vendor shape) in every context, and
/// behind command-line flags.
#[test]
fn keyword_secrets_are_found_in_every_context() {
    let mut rng = Rng(0x5eed_1234_abcd_0002);
    let mut cases = Vec::new();
    for key in ["password", "db_password", "apiKey"] {
        for c in contexts() {
            if !c.template.contains("{k}") && !c.template.contains("{K}") {
                continue;
            }
            let v = rng.of(AN, 20);
            let written = render_value(&c, &v);
            let text = render(&c, key, &written);
            cases.push((
                format!("{key} in {}", c.name),
                text,
                written,
                "keyword-secret",
                c.kind,
            ));
        }
    }
    for (name, template, rule) in [
        (
            "mysql -p<pw>",
            "mysql -u root -p{v} shop\n",
            "keyword-secret",
        ),
        (
            "mysqldump -p<pw>",
            "mysqldump -h db -p{v} shop > dump.sql\n",
            "keyword-secret",
        ),
        (
            "--password=<pw>",
            "psql-wrapper --password={v} --host db\n",
            "keyword-secret",
        ),
        (
            "--password <pw>",
            "mysql --user root --password {v} shop\n",
            "keyword-secret",
        ),
        (
            "-a user:<pw>",
            "http -a admin:{v} https://api.example/\n",
            "keyword-secret",
        ),
        (
            "-a \"user:<pw>\"",
            "http -a \"admin:{v}\" https://api.example/\n",
            "keyword-secret",
        ),
        (
            "curl -u user:<pw>",
            "curl -s -u admin:{v} https://api.example/\n",
            "curl-user-password",
        ),
        (
            "redis-cli -a <pw>",
            "redis-cli -h cache -a {v} ping\n",
            "keyword-secret",
        ),
        (
            "sshpass -p <pw>",
            "sshpass -p {v} ssh deploy@host\n",
            "keyword-secret",
        ),
    ] {
        let v = rng.of(AN, 20);
        let text = template.replace("{v}", &v);
        for kind in [TextKind::Stream, TextKind::Config] {
            cases.push((
                format!("{name} as {kind:?}"),
                text.clone(),
                v.clone(),
                rule,
                kind,
            ));
        }
    }
    // A quoted value glued to the flag, holding what ends a bare word (`;`, a space), in a
    // shell history's numbered lines and after a prompt.
    for (name, template) in [
        (
            "history: mysql -p'<a;b>'",
            "  512  mysql -h db -u app -p'{v}' shop_prod\n",
        ),
        (
            "mysql -p\"<a;b>\"",
            "mysql -h db -u app -p\"{v}\" shop_prod\n",
        ),
        (
            "$ mysqldump -p'<a;b>'",
            "$ mysqldump -u app -p'{v}' shop > d.sql\n",
        ),
        (
            "mysql --password='<a;b>'",
            "mysql -u app --password='{v}' shop\n",
        ),
        ("history: mysql -p<pw>", "  7  mysql -u root -p{w} shop\n"),
    ] {
        let v = format!("{};{} {}", rng.of(AN, 8), rng.of(AN, 10), rng.of(AN, 4));
        let w = rng.of(AN, 20);
        let text = template.replace("{v}", &v).replace("{w}", &w);
        let written = if template.contains("{w}") { w } else { v };
        for kind in [TextKind::Stream, TextKind::Prose] {
            cases.push((
                format!("{name} as {kind:?}"),
                text.clone(),
                written.clone(),
                "keyword-secret",
                kind,
            ));
        }
    }
    let mut failures = run_cases(&cases);
    // What names a secret but holds none is not a finding in these contexts either.
    for (text, kind) in [
        ("<password>${DB_PASSWORD}</password>\n", TextKind::Code),
        ("<add key=\"Password\" value=\"\" />\n", TextKind::Code),
        (
            "<add key=\"Password\" value=\"{{ db_password }}\" />\n",
            TextKind::Code,
        ),
        (
            "{\"env\": \"DB_PASSWORD=$DB_PASSWORD\\nX=1\"}\n",
            TextKind::Code,
        ),
        ("password := `{{ .Password }}`\n", TextKind::Code),
        ("var password = @\"<your-password>\";\n", TextKind::Code),
        ("ENV DB_PASSWORD changeme\n", TextKind::Config),
        (
            "  --password string   the password to use\n",
            TextKind::Stream,
        ),
        ("  --password PASSWORD\n", TextKind::Stream),
        (
            "deploy --password-file /run/secrets/db_pw\n",
            TextKind::Stream,
        ),
        ("docker login --password-stdin deploy\n", TextKind::Stream),
        ("mysql -p shop\n", TextKind::Stream),
        ("mysql -u root -p\n", TextKind::Stream),
        ("  513  mysql -u root -p shop_prod\n", TextKind::Stream),
        ("mysql -u root -p\"$MYSQL_PWD\" shop\n", TextKind::Stream),
        ("  514  echo 'don't' -p'x' done\n", TextKind::Stream),
        ("sshpass -p \"$SSHPASS\" ssh host\n", TextKind::Stream),
        ("http -a \"$USER:$PASS\" :8080\n", TextKind::Stream),
        (
            "Set the password to `<your-password>` first.\n",
            TextKind::Prose,
        ),
        ("The api_token is `${API_TOKEN}` in CI.\n", TextKind::Prose),
        ("Set the password to `changeme` locally.\n", TextKind::Prose),
        (
            "Set the api_token to `your token from the dashboard`.\n",
            TextKind::Prose,
        ),
    ] {
        let found = scanner().scan(text.as_bytes(), kind, kind != TextKind::Stream);
        if !found.is_empty() {
            failures.push(format!("{text:?} as {kind:?}: {found:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases missed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The context tokenizer's own adversarial inputs (issue 16): 16 MiB of quotes,
/// backslashes, `<`, `=`, `@"`, backticks and unclosed strings, tags and flags pass through
/// `scan` and the streaming redactor in time linear in their size (sizes 1x/4x/16x compared,
/// never a wall-clock threshold), with no finding.
#[test]
fn context_tokenizer_is_linear_on_adversarial_input() {
    use super::tests::{Adversarial, check_linear, repeat_to};
    scanner().compile_all().unwrap_or_else(|e| panic!("{e}"));
    fn units(list: &[&'static [u8]]) -> Vec<Adversarial> {
        list.iter()
            .map(|&u| -> Adversarial {
                (
                    format!("{:?} repeated", String::from_utf8_lossy(u)),
                    Box::new(move |n| repeat_to(u, n)),
                )
            })
            .collect()
    }
    // The brief's 16 MiB runs (1 MiB x 1, 4, 16).
    let big = units(&[
        b"\"", b"\\", b"<", b"=", b"@\"", b"`", b"'", b"\"a", b"\\\"",
    ]);
    let mut failures = check_linear(&big, 1 << 20, 0.05);
    // Near-constructs: unclosed strings, tags, escapes, entities, flags (64 KiB x 1, 4, 16).
    let near = units(&[
        b"\"abc\\\" ",
        b"'abc ",
        b"x = \"",
        b"x: \"",
        b"\"password\": \"\\u00",
        b"\"\\n",
        b"\"\\n\" ",
        b"@\"a\"\"",
        b"`a",
        b"<a b=\"",
        b"<a b='x' ",
        b"<a>",
        b"<password>",
        b"<add key=\"password\" value=\"",
        b"&#x41;&amp;",
        b"--password ",
        b"--password=\"\"",
        b"mysql -p",
        b"curl -u ",
        b"sshpass -p ",
        b"ENV PASSWORD ",
        b"password := `\n",
        // Shell words joined by quoting (`shell_words_in`), camelCase names, prose `to`.
        b"a''",
        b"\"a\"'b",
        b"'a'b ",
        b"a\\b",
        b"--token x''",
        b"accessToken",
        b"aToken=\"",
        b"the password to `",
    ]);
    failures.extend(check_linear(&near, 64 * 1024, 0.02));
    assert!(failures.is_empty(), "{failures:#?}");
    // Work per byte stays within the time-budget fuzz target's bound (20 times ordinary
    // text) on units that make every line go through the tokenizer.
    for u in [
        &b"\"\\n"[..],
        b"\"a\\u0041\" ",
        b"<a b=\"&amp;\">",
        b"@\"a\"\"b\" ",
        b"mysql -p",
        b"{\"password\": \"\\\"",
        b"&#x41;",
    ] {
        super::fuzz_time_budget(u);
    }
}

/// Whether a finding of `rule` covers every byte of `text[vs..ve]` that is not a quote or a
/// backslash, and redacting the findings leaves no 8 bytes of the token's halves.
fn covers_split(text: &str, found: &[Finding], rule: &str, (vs, ve): (usize, usize)) -> bool {
    let b = text.as_bytes();
    // The token's own bytes: the value without its outer quotes.
    let quote = |c: &u8| matches!(c, b'\'' | b'"');
    let ts = vs + b[vs..ve].iter().take_while(|c| quote(c)).count();
    let te = ve - b[vs..ve].iter().rev().take_while(|c| quote(c)).count();
    let hit = found
        .iter()
        .any(|f| f.rule == rule && f.start <= ts && te <= f.end);
    let mut out = Vec::new();
    let mut pos = 0;
    for f in found {
        out.extend_from_slice(&b[pos..f.start]);
        pos = f.end;
    }
    out.extend_from_slice(&b[pos..]);
    let left = text[vs..ve]
        .split(['\'', '"', '\\'])
        .filter(|p| p.len() >= 8)
        .any(|p| memchr::memmem::find(&out, p.as_bytes()).is_some());
    hit && !left
}

/// Issue 16: a token split by shell quoting (`gh''p_<rest>`, `"ghp_"'<rest>'`, `gh\p_<rest>`)
/// in a file that holds command lines (a script, a profile, a Makefile recipe, a Dockerfile
/// `RUN`, a CI workflow's `run:`, Markdown) is read joined after quote removal and found by
/// its rule, and its finding spans the quoted original (redaction removes both halves); a
/// random password split so behind `--password`, `--token` or `NAME=` is found by the keyword
/// rule. Not on a line where the joined word holds an expansion or a space.
#[test]
fn shell_split_tokens_are_found_in_shell_files() {
    let mut rng = Rng(0x5eed_1234_abcd_0003);
    let splits: [fn(&str, &str) -> String; 5] = [
        |a, b| format!("{a}''{b}"),
        |a, b| format!("\"{a}\"'{b}'"),
        |a, b| format!("{a}\"{b}\""),
        |a, b| format!("'{a}'{b}"),
        |a, b| format!("{a}\\{b}"),
    ];
    let places: [(&str, &str, TextKind); 7] = [
        (
            "script",
            "#!/bin/sh\n./client --token {v}\n",
            TextKind::Prose,
        ),
        (
            "echo",
            "set -e\necho {v} | gh auth login --with-token\n",
            TextKind::Prose,
        ),
        (
            "Makefile recipe",
            "deploy:\n\t./push --key {v} dist/\n",
            TextKind::Prose,
        ),
        (
            "Dockerfile RUN",
            "FROM alpine\nRUN fetch --auth {v} && make\n",
            TextKind::Config,
        ),
        (
            "workflow run:",
            "jobs:\n  build:\n    steps:\n      - run: ./ci.sh {v}\n",
            TextKind::Config,
        ),
        ("Markdown", "Run `./client {v}` once.\n", TextKind::Prose),
        ("export", "export UPLOAD={v}\n", TextKind::Prose),
    ];
    let mut failures = Vec::new();
    let mut n = 0;
    for fam in families().iter().filter(|f| !f.multiline) {
        for split in splits {
            for (place, template, kind) in places {
                let v = (fam.make)(&mut rng);
                let mid = v.len() / 2;
                let written = split(&v[..mid], &v[mid..]);
                let text = template.replace("{v}", &written);
                let at = text.find(&written).expect("value in text");
                let found = scanner().scan(text.as_bytes(), kind, true);
                n += 1;
                if !covers_split(&text, &found, fam.rule, (at, at + written.len())) {
                    failures.push(format!("{} in {place}: {text:?}: {found:?}", fam.rule));
                }
            }
        }
    }
    // A random password, no vendor shape: named by its flag or its variable.
    for template in [
        "./deploy --password {v}\n",
        "./client --token {v}\n",
        "./deploy --password={v}\n",
        "export DB_PASSWORD={v}\n",
    ] {
        let v = rng.of(AN, 24);
        let written = format!("{}''{}", &v[..10], &v[10..]);
        let text = template.replace("{v}", &written);
        let at = text.find(&written).expect("value in text");
        let found = scanner().scan(text.as_bytes(), TextKind::Prose, true);
        n += 1;
        if !covers_split(&text, &found, "keyword-secret", (at, at + written.len())) {
            failures.push(format!("keyword-secret: {text:?}: {found:?}"));
        }
    }
    // Joined words that are no token: expansions, prose apostrophes, quoted sentences.
    for text in [
        "echo \"$HOME\"'/.config/gateway/settings.toml'\n",
        "./client --token \"$TOKEN\"''\"$SUFFIX\"\n",
        "It isn't done, but it's close: don''t rotate it yet.\n",
        "printf '%s\\n' 'release'-'candidate'-'notes'\n",
        "cp a\\ b\\ c.txt backups/\n",
    ] {
        let found = scanner().scan(text.as_bytes(), TextKind::Prose, true);
        if !found.is_empty() {
            failures.push(format!("not a secret: {text:?}: {found:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Issue 16: a keyword name in camelCase ending in `Token` or `Key` (`accessToken`,
/// `githubToken`, `clientKey`), which the keyword `_token` cannot anchor, names a secret in
/// every context that has a name (assignments quoted or not, XML elements and attributes, Go
/// backticks, C# verbatim strings, properties, YAML), in short texts (searched directly) and
/// long ones (through the prefilter) alike; a camelCase name that is no secret's
/// (`cancellationToken`, `primaryKey`) is not one, nor is a `Token` value that is a word.
#[test]
fn camel_case_secret_names_feed_the_keyword_rule() {
    let mut rng = Rng(0x5eed_1234_abcd_0004);
    let mut failures = Vec::new();
    let mut n = 0;
    let places: [(&str, TextKind); 8] = [
        ("const {k} = \"{v}\";\n", TextKind::Code),
        ("const {k} = `{v}`\n", TextKind::Code),
        ("const string {k} = @\"{v}\";\n", TextKind::Code),
        ("<config>\n  <{k}>{v}</{k}>\n</config>\n", TextKind::Code),
        ("<add key=\"{k}\" value=\"{v}\" />\n", TextKind::Code),
        ("service.{k}={v}\n", TextKind::Config),
        ("service:\n  {k}: {v}\n", TextKind::Config),
        ("./client --token {v}\n", TextKind::Prose),
    ];
    let pad = "# padding line to make the text longer than a command line\n".repeat(12);
    for key in ["accessToken", "githubToken", "clientKey", "refreshToken"] {
        for (template, kind) in places {
            for padded in [false, true] {
                let v = rng.of(AN, 24);
                let body = template.replace("{k}", key).replace("{v}", &v);
                let text = if padded { format!("{pad}{body}") } else { body };
                let at = text.find(&v).expect("value in text");
                let found = scanner().scan(text.as_bytes(), kind, true);
                n += 1;
                if !found
                    .iter()
                    .any(|f| f.rule == "keyword-secret" && f.start <= at && at + v.len() <= f.end)
                {
                    failures.push(format!("{key} (padded {padded}): {text:?}: {found:?}"));
                }
            }
        }
    }
    for (text, kind) in [
        (
            "const cancellationToken = \"request-scope-default\";\n",
            TextKind::Code,
        ),
        ("primaryKey: accountIdentifierColumn\n", TextKind::Config),
        (
            "service.nextToken=pagination-cursor-value\n",
            TextKind::Config,
        ),
        ("<sortKey>createdAtTimestamp</sortKey>\n", TextKind::Code),
        // Named only by `token`: letters of one case run together are words (gitleaks' fps).
        (
            "aws_token = \"TODAYINASIAASACKOFRICEFELLOVER\"\n",
            TextKind::Code,
        ),
        ("vaultToken: s.THISSTRINGISALLUPPERCASE\n", TextKind::Config),
        (
            "<vaultToken>s.THISSTRINGISALLUPPERCASE</vaultToken>\n",
            TextKind::Code,
        ),
    ] {
        let found = scanner().scan(text.as_bytes(), kind, true);
        if !found.is_empty() {
            failures.push(format!("not a secret: {text:?}: {found:?}"));
        }
    }
    // A CSRF token is a per-session nonce, not a credential, however random.
    for template in [
        "csrf_token = \"{v}\"\n",
        "<input name=\"csrfToken\" value=\"{v}\">\n",
        "csrf-token={v}\n",
    ] {
        let text = template.replace("{v}", &rng.of(AN, 40));
        let found = scanner().scan(text.as_bytes(), TextKind::Config, true);
        if found.iter().any(|f| f.rule == "keyword-secret") {
            failures.push(format!("not a secret: {text:?}: {found:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
