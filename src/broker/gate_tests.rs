//! The gate: every string of every record and report type, planted with a token, comes out
//! without it.

use super::*;

/// A GitHub-token-shaped string made at run time (no secret-looking literal in the source).
fn token(seed: u64) -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    let body: String = (0..36)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ALNUM[((x >> 33) % ALNUM.len() as u64) as usize] as char
        })
        .collect();
    format!("{}{}", ["gh", "p_"].concat(), body)
}

#[test]
fn a_token_is_redacted_and_a_marker_is_kept_as_it_is() {
    let t = token(1);
    let s = format!("before {t} after");
    let out = text(&s);
    assert!(!out.contains(&t), "{out}");
    assert!(out.contains("[REDACTED:github-pat]"), "{out}");
    // Text redacted before keeps its markers: not redacted again under another rule.
    let again = text(&out).into_owned();
    assert_eq!(again, out);
    for kept in [
        "password=[REDACTED:github-pat]",
        "\"token\": \"[REDACTED:keyword-secret]\"",
        "DB_PASSWORD='[REDACTED]'",
    ] {
        assert_eq!(text(kept), kept);
    }
    assert!(matches!(
        text("nothing here"),
        std::borrow::Cow::Borrowed(_)
    ));
}

#[test]
fn a_long_record_field_keeps_head_and_tail() {
    let mut s = "a".repeat(RECORD_STRING_MAX) + &"b".repeat(RECORD_STRING_MAX);
    assert!(bounded(&mut s, RECORD_STRING_MAX));
    assert!(s.len() < RECORD_STRING_MAX + 200, "{}", s.len());
    assert!(s.starts_with("aaa") && s.ends_with("bbb") && s.contains("bytes cut here"));
}

/// An instance of the JSON a schema describes with every string holding `tok` (values, and
/// the keys of maps), every array one item, every optional value present.
fn fill(s: &Value, defs: &Value, tok: &str, depth: usize) -> Value {
    if depth > 24 {
        return Value::Null;
    }
    let go = |x: &Value| fill(x, defs, tok, depth + 1);
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        return go(&defs[name]);
    }
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        return e[0].clone();
    }
    for k in ["oneOf", "anyOf"] {
        if let Some(a) = s.get(k).and_then(Value::as_array) {
            // The first branch that is not `null`, with the properties beside it.
            let b = a
                .iter()
                .find(|b| b.get("type") != Some(&Value::from("null")))
                .unwrap_or(&a[0]);
            let mut v = go(b);
            if let (Value::Object(m), Some(Value::Object(p))) = (&mut v, s.get("properties")) {
                for (k, x) in p {
                    m.insert(k.clone(), go(x));
                }
            }
            return v;
        }
    }
    if let Some(a) = s.get("allOf").and_then(Value::as_array) {
        let mut m = serde_json::Map::new();
        for b in a {
            if let Value::Object(o) = go(b) {
                m.extend(o);
            }
        }
        return Value::Object(m);
    }
    let ty = match s.get("type") {
        Some(Value::Array(t)) => t
            .iter()
            .find(|t| *t != "null")
            .and_then(Value::as_str)
            .unwrap_or("null"),
        Some(t) => t.as_str().unwrap_or("null"),
        None if s.get("properties").is_some() => "object",
        None => "string",
    };
    match ty {
        "string" => Value::from(format!("a {tok} b")),
        "integer" | "number" => s.get("minimum").cloned().unwrap_or(Value::from(1)),
        "boolean" => Value::Bool(true),
        "array" => match (s.get("prefixItems"), s.get("items")) {
            (Some(Value::Array(p)), _) => Value::Array(p.iter().map(go).collect()),
            (_, Some(i)) => Value::Array(vec![go(i)]),
            _ => Value::Array(vec![]),
        },
        "object" => {
            let mut m = serde_json::Map::new();
            if let Some(Value::Object(p)) = s.get("properties") {
                for (k, x) in p {
                    m.insert(k.clone(), go(x));
                }
            }
            if let Some(a) = s.get("additionalProperties").filter(|a| a.is_object()) {
                m.insert(format!("key {tok}"), go(a));
            }
            Value::Object(m)
        }
        _ => Value::Null,
    }
}

/// [`fill`] of `T`'s schema.
fn filled<T: schemars::JsonSchema>(tok: &str) -> Value {
    let s = serde_json::to_value(schemars::schema_for!(T)).expect("schema");
    let defs = s.get("$defs").cloned().unwrap_or_default();
    fill(&s, &defs, tok, 0)
}

/// How many strings of `v` (keys too) hold `tok`.
fn planted(v: &Value, tok: &str) -> usize {
    match v {
        Value::String(s) => usize::from(s.contains(tok)),
        Value::Array(a) => a.iter().map(|x| planted(x, tok)).sum(),
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| usize::from(k.contains(tok)) + planted(x, tok))
            .sum(),
        _ => 0,
    }
}

#[test]
fn every_string_of_a_record_passes_the_gate_and_the_writer() {
    // Every record kind is an `audit::Record`: its every string field, planted (a field
    // added later is planted too: the schema is the type's).
    let tok = token(2);
    let v = filled::<crate::audit::Record>(&tok);
    let rec: crate::audit::Record = serde_json::from_value(v.clone()).expect("a record");
    let n = planted(&serde_json::to_value(&rec).expect("json"), &tok);
    assert!(n >= 30, "only {n} strings planted: {v}");
    let mut gated = rec.clone();
    record(&mut gated);
    let out = serde_json::to_string(&gated).expect("json");
    assert!(!out.contains(&tok), "{out}");
    // Through the writer every front end appends with: the log on disk never holds it.
    let dir = std::env::temp_dir().join(format!("gateway-gate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir); // not-ws: the test's own state dir under /tmp
    std::fs::create_dir_all(&dir).expect("tmp"); // not-ws: the same
    let mut r = rec;
    crate::broker::append_record(&dir, None, &mut r).expect("append");
    let log = std::fs::read_to_string(crate::audit::Paths::new(&dir).log).expect("log"); // not-ws: the same
    assert!(log.contains("[REDACTED:github-pat]"), "{log}");
    assert!(!log.contains(&tok), "{log}");
    let _ = std::fs::remove_dir_all(&dir); // not-ws: the same
}

#[test]
fn a_records_digests_are_kept_and_its_strings_bounded() {
    let mut rec = crate::audit::Record {
        prev: "ab".repeat(32),
        args: vec!["x".repeat(3 * RECORD_STRING_MAX)],
        stdout: Some(crate::audit::StreamDigest {
            blake3: Some("0f".repeat(32)),
            artifact: Some("0f".repeat(32)),
            ..Default::default()
        }),
        ..Default::default()
    };
    record(&mut rec);
    assert_eq!(rec.prev, "ab".repeat(32));
    let d = rec.stdout.expect("stdout");
    assert_eq!(d.blake3.as_deref(), Some("0f".repeat(32).as_str()));
    assert_eq!(d.artifact.as_deref(), Some("0f".repeat(32).as_str()));
    assert!(
        rec.args[0].len() < RECORD_STRING_MAX + 200,
        "{}",
        rec.args[0].len()
    );
    assert!(rec.args[0].contains("bytes cut here"));
}

/// A report of every type a front end returns, with `tok` in each of its strings, as the
/// call's `Report` carries it.
fn reports(tok: &str) -> Vec<(&'static str, Value)> {
    use crate::broker::report as r;
    vec![
        ("error", filled::<r::ErrorReport>(tok)),
        ("exec", filled::<r::ExecReport<'static>>(tok)),
        ("fs", filled::<r::FsReport<'static>>(tok)),
        ("cd", filled::<r::CdReport<'static>>(tok)),
        ("history", filled::<r::HistoryReport<'static>>(tok)),
        ("trash", filled::<r::TrashListReport<'static>>(tok)),
        ("pending", filled::<r::PendingReport<'static>>(tok)),
        ("changes", filled::<r::changes::ChangesReport>(tok)),
        ("answer", filled::<crate::broker::approvals::Answered>(tok)),
        (
            "scan",
            filled::<crate::broker::tools::scan::ScanReport>(tok),
        ),
        ("policy list", filled::<r::PolicyListReport<'static>>(tok)),
        (
            "policy reload",
            filled::<crate::broker::pin::ReloadReport>(tok),
        ),
        ("explain", filled::<crate::broker::Explanation>(tok)),
        ("log verify", filled::<crate::broker::log::Verified>(tok)),
        ("log query", filled::<crate::broker::log::QueryResult>(tok)),
        ("log record", filled::<crate::broker::log::Record>(tok)),
        ("log show", filled::<crate::broker::log::Shown>(tok)),
        (
            "http",
            filled::<crate::broker::tools::http::HttpReport>(tok),
        ),
    ]
}

#[test]
fn every_report_type_passes_the_gate_whole() {
    use crate::broker::report::{ErrorCode, ErrorReport, Outcome, Report};
    let tok = token(3);
    for (what, v) in reports(&tok) {
        assert!(planted(&v, &tok) >= 1, "{what}: nothing planted: {v}");
        // As an MCP tool result (text and structured content), as an exec's and an http
        // call's result (the JSON `--json` prints), with a note and an error beside it.
        let tool = rmcp::model::CallToolResult::structured(v.clone());
        for outcome in [
            serde_json::json!({"kind": "tool", "result": tool}),
            serde_json::json!({"kind": "exec", "result": v}),
            serde_json::json!({"kind": "http", "result": v}),
        ] {
            let report: Report = serde_json::from_value(serde_json::json!({
                "exit": 0, "outcome": outcome, "notes": [{"text": format!("note {tok}")}]
            }))
            .expect("a report");
            let gated = gated(&report).expect("gate").expect("something redacted");
            let out = serde_json::to_string(&gated).expect("json");
            assert!(!out.contains(&tok), "{what}: {out}");
        }
    }
    // An error shown to a caller.
    let e = Report::error(
        1,
        ErrorReport::new(ErrorCode::Failed, format!("cannot open {tok}")),
    );
    let g = gated(&e).expect("gate").expect("redacted");
    let Outcome::Error(r) = g.outcome else {
        panic!("not an error")
    };
    assert!(!r.error.message.contains(&tok), "{}", r.error.message);
}
