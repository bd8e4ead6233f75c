//! Tests of structure-aware pairing (`pairs.rs`): each shape with generated values (no
//! secret-looking literal here), its negatives, and the stream's agreement with the whole
//! text.

use super::super::{Redactor, TextKind, redacted_whole, scanner};
use super::REACH;

/// A random alphanumeric value of `n` bytes with a digit and both cases (a password or a
/// token as tools print them), from `seed`.
fn tok(seed: u64, n: usize) -> String {
    const AN: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v: Vec<u8> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            AN[(s % AN.len() as u64) as usize]
        })
        .collect();
    v[0] = b'Q';
    v[1] = b'z';
    v[2] = b'7';
    String::from_utf8(v).unwrap_or_default()
}

/// `text` as a stream's whole-text redaction.
fn redact(text: &str) -> String {
    String::from_utf8_lossy(&redacted_whole(text.as_bytes())).into_owned()
}

/// Asserts that each secret is gone from the redaction of `text`, and each kept word stays.
#[track_caller]
fn hides(text: &str, secrets: &[&str], kept: &[&str]) {
    let out = redact(text);
    for s in secrets {
        assert!(!out.contains(s), "{s:?} shown in\n{out}");
    }
    for k in kept {
        assert!(out.contains(k), "{k:?} lost in\n{out}");
    }
}

/// Asserts that nothing in `text` is redacted.
#[track_caller]
fn untouched(text: &str) {
    let f = scanner().scan(text.as_bytes(), TextKind::Stream, false);
    assert!(
        f.is_empty(),
        "{:?} redacted in\n{text}",
        f.iter().map(|f| &text[f.start..f.end]).collect::<Vec<_>>()
    );
}

#[test]
fn kubernetes_env_name_then_value() {
    let (a, b, c) = (tok(1, 18), tok(2, 24), tok(3, 12));
    let text = format!(
        "spec:\n  containers:\n  - name: app\n    env:\n    - name: DB_PASSWORD\n      value: {a}\n    - name: API_KEY\n      value: \"{b}\"\n    - name: LOG_LEVEL\n      value: info\n    - {{name: SMTP_PASSWORD, value: {c}}}\n"
    );
    hides(
        &text,
        &[&a, &b, &c],
        &[
            "DB_PASSWORD",
            "API_KEY",
            "SMTP_PASSWORD",
            "value: info",
            "name: app",
        ],
    );
}

#[test]
fn ecs_and_tag_json_in_any_key_order() {
    let v: Vec<String> = (10..16).map(|i| tok(i, 20)).collect();
    let text = format!(
        "{{\n  \"environment\": [\n    {{\n      \"name\": \"DB_PASSWORD\",\n      \"value\": \"{}\"\n    }},\n    {{\"value\": \"{}\", \"name\": \"REDIS_PASSWORD\"}},\n    {{\"Name\": \"STRIPE_SECRET\", \"Value\": \"{}\"}}\n  ],\n  \"Tags\": [{{\"Key\": \"api_key\", \"Value\": \"{}\"}}, {{\"key\": \"client_secret\", \"value\": \"{}\"}}],\n  \"Parameters\": [{{\"ParameterKey\": \"DbPassword\", \"ParameterValue\": \"{}\"}}]\n}}\n",
        v[0], v[1], v[2], v[3], v[4], v[5]
    );
    let secrets: Vec<&str> = v.iter().map(String::as_str).collect();
    hides(
        &text,
        &secrets,
        &["DB_PASSWORD", "REDIS_PASSWORD", "DbPassword"],
    );
}

#[test]
fn ssm_parameter_har_header_and_terraform_output() {
    let (a, b, c, d) = (tok(20, 22), tok(21, 40), tok(22, 30), tok(23, 16));
    let ssm = format!(
        "{{\n    \"Parameter\": {{\n        \"Name\": \"/prod/db/password\",\n        \"Type\": \"SecureString\",\n        \"Value\": \"{a}\",\n        \"Version\": 3\n    }}\n}}\n"
    );
    hides(&ssm, &[&a], &["/prod/db/password", "SecureString"]);
    // A SecureString whose name says nothing is a secret too (the name's line is read for
    // the keyword-free name only when some name on it triggers: here `password` does not,
    // so the marker decides on the line the `Name` is).
    let har = format!(
        "\"headers\": [\n  {{\n    \"name\": \"Authorization\",\n    \"value\": \"Bearer {b}\"\n  }},\n  {{\"name\": \"Accept\", \"value\": \"text/html\"}}\n]\n"
    );
    hides(&har, &[&b], &["Authorization", "Bearer", "text/html"]);
    let tf = format!(
        "{{\n  \"db_password\": {{\n    \"sensitive\": true,\n    \"type\": \"string\",\n    \"value\": \"{c}\"\n  }},\n  \"region\": {{\n    \"sensitive\": false,\n    \"type\": \"string\",\n    \"value\": \"eu-west-1\"\n  }}\n}}\n"
    );
    hides(&tf, &[&c], &["db_password", "eu-west-1"]);
    let tf_line = format!(
        "{{\"db_password\":{{\"sensitive\":true,\"type\":\"string\",\"value\":\"{d}\"}}}}\n"
    );
    hides(&tf_line, &[&d], &["db_password"]);
}

#[test]
fn tables_with_a_secret_column() {
    let (a, b, c, d, e) = (
        tok(30, 14),
        tok(31, 14),
        tok(32, 14),
        tok(33, 26),
        tok(34, 12),
    );
    let markdown =
        format!("| user | password |\n|------|----------|\n| bob  | {a} |\n| eve  | {b} |\n");
    hides(&markdown, &[&a, &b], &["bob", "eve", "password"]);
    let mysql = format!(
        "+------+----------------+\n| user | password       |\n+------+----------------+\n| bob  | {c} |\n+------+----------------+\n1 row in set (0.00 sec)\n"
    );
    hides(&mysql, &[&c], &["bob", "1 row in set"]);
    let psql = format!(" user | api_token \n------+-----------\n bob  | {d}\n(1 row)\n");
    hides(&psql, &[&d], &["bob", "(1 row)"]);
    let vault = format!(
        "====== Secret Path ======\nsecret/data/app\n\n====== Data ======\nKey         Value\n---         -----\nusername    bob\npassword    {e}\n"
    );
    hides(&vault, &[&e], &["username    bob", "password"]);
}

#[test]
fn php_dumps_redis_replies_and_next_line_values() {
    let (a, b, c, d, e, f) = (
        tok(40, 14),
        tok(41, 16),
        tok(42, 20),
        tok(43, 18),
        tok(44, 18),
        tok(45, 18),
    );
    let print_r = format!("Array\n(\n    [user] => bob\n    [password] => {a}\n)\n");
    hides(&print_r, &[&a], &["[user] => bob", "[password]"]);
    let var_dump = format!(
        "array(2) {{\n  [\"user\"]=>\n  string(3) \"bob\"\n  [\"password\"]=>\n  string({}) \"{b}\"\n}}\n",
        b.len()
    );
    hides(&var_dump, &[&b], &["\"bob\"", "[\"password\"]"]);
    let yaml = format!("db:\n  password:\n    {c}\n  host: x\n");
    hides(&yaml, &[&c], &["password:", "host: x"]);
    let folded = format!("db:\n  password: >-\n    {d}\n  api_key: |\n    {e}\n");
    hides(&folded, &[&d, &e], &["password: >-"]);
    let ini = format!("[db]\npassword =\n    {f}\nhost = x\n");
    hides(&ini, &[&f], &["password =", "host = x"]);
}

/// redis-cli's reply to `CONFIG GET requirepass` (`requirepass` is a trigger word of the
/// keyword rule: its line is read, though the rule's regex takes no value there).
#[test]
fn redis_config_get_reply() {
    let a = tok(50, 18);
    let text = format!("1) \"requirepass\"\n2) \"{a}\"\n3) \"port\"\n4) \"6379\"\n");
    hides(&text, &[&a], &["requirepass", "6379"]);
    let b = tok(51, 24);
    hides(
        &format!("127.0.0.1:6379> CONFIG GET masterauth\n1) \"masterauth\"\n2) \"{b}\"\n"),
        &[&b],
        &["masterauth"],
    );
}

/// What tools print where the value comes first or the name is no keyword of the rule:
/// a hand-written manifest (value, then name), redis-cli piped (a name line, a value line),
/// HAR's `x-api-key` header and `cookies` array.
#[test]
fn value_first_piped_redis_and_har_cookies() {
    let (a, b, c, d, e) = (
        tok(90, 22),
        tok(91, 32),
        tok(92, 40),
        tok(93, 32),
        tok(94, 20),
    );
    let manifest = format!(
        "        env:\n        - value: {a}\n          name: REDIS_PASSWORD\n        - value: \"8080\"\n          name: PORT\n"
    );
    hides(&manifest, &[&a], &["REDIS_PASSWORD", "8080"]);
    let json =
        format!("[\n  {{\n    \"value\": \"{e}\",\n    \"name\": \"DB_PASSWORD\"\n  }}\n]\n");
    hides(&json, &[&e], &["DB_PASSWORD"]);
    let piped = format!("requirepass\n{b}\nport\n6379\n");
    hides(&piped, &[&b], &["requirepass", "6379"]);
    let har = format!(
        "{{\n  \"headers\": [\n    {{\n      \"name\": \"accept\",\n      \"value\": \"application/json\"\n    }},\n    {{\n      \"name\": \"x-api-key\",\n      \"value\": \"{c}\"\n    }}\n  ],\n  \"cookies\": [\n    {{\n      \"name\": \"sessionid\",\n      \"value\": \"{}\",\n      \"httpOnly\": true\n    }}\n  ],\n  \"bodySize\": 0\n}}\n",
        d.to_ascii_lowercase()
    );
    hides(
        &har,
        &[&c, &d.to_ascii_lowercase()],
        &["x-api-key", "sessionid", "application/json"],
    );
    // A request's `Cookie` header as HAR records it: the whole value.
    let f = tok(104, 32).to_ascii_lowercase();
    let cookie = format!(
        "    {{\n      \"name\": \"Cookie\",\n      \"value\": \"sessionid={f}\"\n    }},\n"
    );
    hides(&cookie, &[&f], &["Cookie"]);
}

/// Entropy where the context says so: a value named only by `token` is a secret when long
/// and random, but a digest (hex of a hash's length, `sha256:`, an `sha512-` integrity
/// string), a UUID, a number or a word under such a name stays readable.
#[test]
fn a_value_named_only_by_token_is_random_and_no_digest() {
    let hex = |seed: u64, n: usize| -> String {
        tok(seed, n * 2)
            .bytes()
            .map(|b| char::from(b"0123456789abcdef"[(b % 16) as usize]))
            .take(n)
            .collect()
    };
    let (t, d, g) = (tok(95, 40), hex(96, 64), hex(97, 40));
    let u = format!(
        "{}-{}-4{}-a{}-{}",
        hex(98, 8),
        hex(99, 4),
        hex(100, 3),
        hex(101, 3),
        hex(102, 12)
    );
    let text = format!(
        "- name: SLACK_BOT_TOKEN\n  value: {t}\n- name: TOKEN_CACHE_DIGEST\n  value: sha256:{d}\n- name: COMMIT_TOKEN\n  value: {g}\n- name: NEXT_TOKEN\n  value: {u}\n- name: TOKEN_TTL\n  value: \"3600\"\n"
    );
    hides(&text, &[&t], &[&d, &g, &u, "3600"]);
    assert!(super::is_digest(
        format!("sha512-{}", tok(103, 86)).as_bytes()
    ));
    assert!(super::is_digest(d.as_bytes()) && !super::is_digest(t.as_bytes()));
}

#[test]
fn names_that_name_no_secret_or_values_that_are_none_stay() {
    // Secret-named variables without a literal value, and values that are no secret.
    untouched(
        "env:\n- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db-secret\n      key: password\n- name: PASSWORD_POLICY\n  value: strict\n- name: PASSWORD_MIN_LENGTH\n  value: \"12\"\n- name: API_TOKEN_FILE\n  value: /run/secrets/token\n- name: DB_PASSWORD\n  value: \"${DB_PASSWORD}\"\n- name: SMTP_PASSWORD\n  value: \"\"\n- name: ENABLE_PASSWORD_AUTH\n  value: \"true\"\n",
    );
    untouched(
        "[{\"name\": \"password_policy\", \"value\": \"strict\"}, {\"Key\": \"Name\", \"Value\": \"web-server-01\"}, {\"name\": \"NEXT_PAGE_TOKEN\", \"value\": \"page2\"}]\n",
    );
    // A table without a secret column; a `Key Value` table of non-secrets; a markdown table
    // listing settings whose names hold `password` (a row, not a header).
    untouched(
        "| user | role  |\n|------|-------|\n| bob  | admin |\n\nKey            Value\n---            -----\nlease_id       n/a\ntoken_policies [default]\npassword_policy strict\n",
    );
    untouched(
        "| setting | description |\n|---|---|\n| password_min_length | 12 |\n| api_key_header | X-Api-Key |\n",
    );
    // print_r of a nested array, var_dump of a non-string, redis replies of other settings.
    untouched(
        "    [password] => Array\n    [password_hash] => \n  [\"password\"]=>\n  NULL\n1) \"port\"\n2) \"6379\"\n",
    );
    // A value of a variable named otherwise; an object that refers to a secret.
    untouched(
        "- name: region\n  value: eu-west-1b-az2\nsecretRef:\n  value: db-creds-v2\nsecret_name:\n  value: db-creds-v2\n",
    );
}

/// The stream finds what the whole text finds, however it is cut and paused, for every
/// shape (each spanning lines), and a table's cells up to the reach after its header.
#[test]
fn streamed_pairs_agree_with_the_whole_text() {
    let mut texts = Vec::new();
    let v: Vec<String> = (60..80).map(|i| tok(i, 18)).collect();
    texts.push(format!(
        "env:\n- name: DB_PASSWORD\n  value: {}\n- name: X\n  value: y\n- {{name: API_KEY, value: {}}}\n",
        v[0], v[1]
    ));
    texts.push(format!(
        "{{\n  \"Parameter\": {{\n    \"Name\": \"/prod/db/password\",\n    \"Type\": \"SecureString\",\n    \"Value\": \"{}\"\n  }}\n}}\n",
        v[2]
    ));
    let mut rows = String::from("| user | password |\n|---|---|\n");
    let mut i = 0;
    while rows.len() < REACH + 600 {
        rows.push_str(&format!("| user{i:04} | {} |\n", tok(1000 + i, 18)));
        i += 1;
    }
    texts.push(rows);
    texts.push(format!(
        "Key         Value\n---         -----\npassword    {}\napi_key     {}\n",
        v[3], v[4]
    ));
    texts.push(format!(
        "  [\"password\"]=>\n  string({}) \"{}\"\n    [password] => {}\n",
        v[5].len(),
        v[5],
        v[6]
    ));
    texts.push(format!("db:\n  password: |\n    {}\n    {}\n", v[7], v[8]));
    texts.push(format!(
        "env:\n- value: {}\n  other: 1\n  name: DB_PASSWORD\n- value: {}\n  name: PORT\n",
        v[9], v[10]
    ));
    texts.push(format!("requirepass\n{}\n", v[11]));
    let filler: String = (0..200)
        .map(|i| format!("log line {i} nothing here\n"))
        .collect();
    let all = texts.concat();
    let all = format!("{filler}{all}{filler}{all}");
    let want = redacted_whole(all.as_bytes());
    assert!(
        want.len() < all.len() || want != all.as_bytes(),
        "nothing redacted"
    );
    let mut seed = 7u64;
    for round in 0..48 {
        let mut out = Vec::new();
        let mut r = Redactor::new(TextKind::Stream);
        let mut at = 0;
        while at < all.len() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let step = 1 + (seed % [31, 200, 1500, 6000][round % 4]) as usize;
            let end = (at + step).min(all.len());
            r.feed(&all.as_bytes()[at..end], &mut out);
            if seed & 1 == 0 {
                r.flush_lines(&mut out);
            }
            at = end;
        }
        r.finish(&mut out);
        if out != want {
            let (o, w) = (
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&want),
            );
            let diff: Vec<String> = o
                .lines()
                .zip(w.lines())
                .filter(|(a, b)| a != b)
                .take(6)
                .map(|(a, b)| format!("stream {a:?}\nwhole  {b:?}"))
                .collect();
            panic!(
                "round {round}: the stream differs from the whole text:\n{}",
                diff.join("\n")
            );
        }
    }
    for s in v[..10].iter().chain(&v[11..12]) {
        assert!(
            !String::from_utf8_lossy(&want).contains(s.as_str()),
            "{s} shown"
        );
    }
}

/// A value written before its name, cut at every byte with a pause: the stream holds the
/// value's line until its object has its name (or closes), never emitting it unredacted.
#[test]
fn a_value_before_its_name_is_held_at_every_pause() {
    let t = format!(
        "x\nenv:\n- value: {}\n  other: 1\n  name: DB_PASSWORD\n- value: {}\n  name: PORT\n",
        tok(1, 18),
        tok(2, 18)
    );
    let want = redacted_whole(t.as_bytes());
    assert!(!String::from_utf8_lossy(&want).contains(&tok(1, 18)));
    for cut in 1..t.len() {
        let mut out = Vec::new();
        let mut r = Redactor::new(TextKind::Stream);
        r.feed(&t.as_bytes()[..cut], &mut out);
        r.flush_lines(&mut out);
        r.feed(&t.as_bytes()[cut..], &mut out);
        r.finish(&mut out);
        assert!(
            out == want,
            "paused after {:?}:\n{}",
            &t[..cut],
            String::from_utf8_lossy(&out)
        );
    }
}

/// Values longer than a line's cap (`LINE_CAP`, 8 KiB) are not shown whole or in part: they
/// were not read at all past it (a JSON sibling value of 8,185 bytes leaked whole, a YAML
/// next-line value of 70,000 bytes kept all but its head). Streamed as well as whole.
#[test]
fn pair_values_past_the_line_cap_are_hidden_whole() {
    for n in [8_150, 8_185, 10_000, 70_000] {
        let v = tok(n as u64, n);
        let tail = &v[v.len() - 16..];
        let cases = [
            format!("{{\"name\": \"DB_PASSWORD\", \"value\": \"{v}\"}}\nnext line\n"),
            format!("  - name: DB_PASSWORD\n    value: \"{v}\"\nnext line\n"),
            format!("password:\n  {v}\nnext: line\n"),
        ];
        for text in &cases {
            let out = redact(text);
            assert!(
                !out.contains(tail),
                "{n}: the value's tail shown in {:.200}",
                out
            );
            assert!(out.contains("next"), "{n}: what follows lost");
            let mut r = Redactor::new(TextKind::Stream);
            let mut streamed = Vec::new();
            for c in text.as_bytes().chunks(4096) {
                r.feed(c, &mut streamed);
                r.flush_lines(&mut streamed);
            }
            r.finish(&mut streamed);
            let streamed = String::from_utf8_lossy(&streamed);
            assert!(
                !streamed.contains(tail),
                "{n}: streamed, the value's tail shown"
            );
        }
    }
}
