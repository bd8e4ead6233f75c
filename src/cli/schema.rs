//! The JSON Schemas of `--json` (issue 15): one per output, generated from the result types
//! (`schemars`) into `docs/schema/`, with `docs/schema/commands.json` naming each
//! subcommand's. A test module only (`#[cfg(test)]` in `cli/mod.rs`):
//! - `the_schemas_in_docs_are_generated_from_the_types` fails when a file in `docs/schema/` is
//!   not what the types say (`GATEWAY_WRITE_SCHEMAS=1 cargo nextest run -E
//!   'test(/schemas_in_docs/)'` writes them);
//! - `every_subcommand_has_a_schema` fails when a subcommand of clap's tree has none.
//!
//! Every object of a schema is closed (`additionalProperties: false`): a field added to a type
//! without the schemas written again fails the integration test that validates real outputs
//! against them (`tests/docs.rs`).

use super::args::Cli;
use crate::broker::{self, report};
use schemars::{JsonSchema, Schema, generate::SchemaSettings};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// `undo`'s output: a file tool's report, or with `--skip` the changes passed over.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, reason = "a schema, never built")]
enum UndoOutput {
    /// `undo [ID]`, `undo --dry-run`.
    Undone(report::FsReport<'static>),
    /// `undo --skip`.
    Skipped(report::SkipReport<'static>),
}

/// `policy explain`'s output: the decision for a command, or `--credentials`' catalogue.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, reason = "a schema, never built")]
enum ExplainOutput {
    /// `policy explain CMD`.
    Command(Box<broker::Explanation>),
    /// `policy explain --credentials`.
    Credentials(broker::credentials::Explained),
}

/// `gateway tool`'s output (and an MCP `tools/call` result): MCP's `CallToolResult` as the
/// gateway fills it — its report as text and as structured content.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "a schema, never built")]
struct ToolOutput {
    /// The report as JSON text (what agents read); a notice may follow.
    content: Vec<ToolContent>,
    /// The report.
    structured_content: ToolReport,
    /// The call was refused or failed (its report is an error object or says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
}

/// One item of a tool result's content.
#[derive(JsonSchema)]
#[allow(dead_code, reason = "a schema, never built")]
struct ToolContent {
    /// Always `text`.
    r#type: TextType,
    /// The text.
    text: String,
}

/// `text`.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code, reason = "a schema, never built")]
enum TextType {
    /// Text.
    Text,
}

/// A tool's structured result: the report of the CLI command it stands for.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, reason = "a schema, never built")]
enum ToolReport {
    /// `exec`.
    Exec(report::ExecReport<'static>),
    /// The file tools, `undo`.
    Fs(report::FsReport<'static>),
    /// `cd`.
    Cd(report::CdReport<'static>),
    /// `undo` with `skip`.
    Skip(report::SkipReport<'static>),
    /// `history`.
    History(report::HistoryReport<'static>),
    /// `http_request`.
    Http(broker::tools::http::HttpReport),
    /// A failure.
    Error(report::ErrorReport),
}

/// A schema of `T`, draft 2020-12, every object closed.
fn schema_of<T: JsonSchema>() -> Value {
    let mut s: Schema = SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut v = Value::Object(s.as_object_mut().map(std::mem::take).unwrap_or_default());
    let mut merged = Vec::new();
    merged_defs(&v, &mut merged);
    close_objects(&mut v, &merged, None, false);
    v
}

const COMBINATORS: [&str; 3] = ["allOf", "oneOf", "anyOf"];

/// The `$defs` whose properties are merged into another object's (a `$ref` beside
/// `properties`: an internally tagged variant, a flattened struct): left open, the object
/// that merges them is closed instead.
fn merged_defs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if o.contains_key("properties")
                && let Some(r) = o.get("$ref").and_then(Value::as_str)
            {
                out.push(r.trim_start_matches("#/$defs/").to_string());
            }
            o.values().for_each(|x| merged_defs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| merged_defs(x, out)),
        _ => {}
    }
}

/// Closes every object schema that lists its properties: `additionalProperties: false`, or
/// where some of its properties come from a `$ref` or a combinator's branch (a flattened
/// enum, a tagged variant) `unevaluatedProperties: false`, which sees those too; the branches
/// and merged definitions themselves are left open. `def`: the `$defs` entry `v` is;
/// `branch`: `v` is a branch of a combinator beside properties.
fn close_objects(v: &mut Value, merged: &[String], def: Option<&str>, branch: bool) {
    match v {
        Value::Object(o) => {
            let combined = COMBINATORS.iter().any(|k| o.contains_key(*k));
            let has_props = o.contains_key("properties");
            let open = branch || def.is_some_and(|d| merged.iter().any(|m| m == d));
            if open {
                o.remove("additionalProperties");
            } else if has_props && (combined || o.contains_key("$ref")) {
                o.remove("additionalProperties");
                o.insert("unevaluatedProperties".into(), Value::Bool(false));
            } else if has_props && !o.contains_key("additionalProperties") {
                o.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (k, x) in o.iter_mut() {
                match k.as_str() {
                    "$defs" => {
                        if let Value::Object(d) = x {
                            for (name, s) in d.iter_mut() {
                                close_objects(s, merged, Some(name), false);
                            }
                        }
                    }
                    c if COMBINATORS.contains(&c) && has_props => {
                        if let Value::Array(a) = x {
                            for b in a {
                                close_objects(b, merged, None, true);
                            }
                        }
                    }
                    _ => close_objects(x, merged, None, false),
                }
            }
        }
        Value::Array(a) => a
            .iter_mut()
            .for_each(|x| close_objects(x, merged, None, false)),
        _ => {}
    }
}

/// Each output's schema file (under `docs/schema/`) and its schema.
fn schemas() -> Vec<(&'static str, Value)> {
    vec![
        ("error.json", schema_of::<report::ErrorReport>()),
        ("exec.json", schema_of::<report::ExecReport<'static>>()),
        ("fs.json", schema_of::<report::FsReport<'static>>()),
        ("fs-cd.json", schema_of::<report::CdReport<'static>>()),
        ("undo.json", schema_of::<UndoOutput>()),
        (
            "changes.json",
            schema_of::<crate::broker::report::changes::ChangesReport>(),
        ),
        (
            "history.json",
            schema_of::<report::HistoryReport<'static>>(),
        ),
        (
            "trash-list.json",
            schema_of::<report::TrashListReport<'static>>(),
        ),
        ("trash-empty.json", schema_of::<report::TrashEmptyReport>()),
        (
            "pending.json",
            schema_of::<report::PendingReport<'static>>(),
        ),
        ("answer.json", schema_of::<broker::approvals::Answered>()),
        ("scan.json", schema_of::<broker::tools::scan::ScanReport>()),
        (
            "config-show.json",
            schema_of::<super::config::Shown<'static>>(),
        ),
        (
            "policy-check.json",
            schema_of::<crate::policy::report::Checked>(),
        ),
        ("policy-explain.json", schema_of::<ExplainOutput>()),
        (
            "policy-list.json",
            schema_of::<report::PolicyListReport<'static>>(),
        ),
        (
            "policy-reload.json",
            schema_of::<broker::pin::ReloadReport>(),
        ),
        ("log-verify.json", schema_of::<broker::log::Verified>()),
        ("log-query.json", schema_of::<broker::log::QueryResult>()),
        ("log-record.json", schema_of::<broker::log::Record>()),
        ("log-show.json", schema_of::<broker::log::Shown>()),
        (
            "log-checkpoint.json",
            schema_of::<broker::log::Checkpoint>(),
        ),
        ("log-gc.json", schema_of::<broker::log::Collected>()),
        ("keys-export.json", schema_of::<broker::log::PublicKeys>()),
        ("keys-rotate.json", schema_of::<broker::log::Rotated>()),
        ("tool.json", schema_of::<ToolOutput>()),
        ("http.json", schema_of::<broker::tools::http::HttpReport>()),
    ]
}

/// Each subcommand (its words) and the schema of what it prints under `--json` (`null`: it
/// prints no JSON, and why). `log tail` prints JSON lines: each line a record.
const COMMANDS: &[(&str, Option<&str>)] = &[
    ("exec", Some("exec.json")),
    ("sh", Some("exec.json")),
    ("repl", None),
    ("mcp", None),
    ("completions", None),
    ("man", None),
    ("tool", Some("tool.json")),
    ("serve", None),
    ("pending", Some("pending.json")),
    ("approve", Some("answer.json")),
    ("deny", Some("answer.json")),
    ("config show", Some("config-show.json")),
    ("scan", Some("scan.json")),
    ("policy check", Some("policy-check.json")),
    ("policy explain", Some("policy-explain.json")),
    ("policy list", Some("policy-list.json")),
    ("policy reload", Some("policy-reload.json")),
    ("log verify", Some("log-verify.json")),
    ("log query", Some("log-query.json")),
    ("log tail", Some("log-record.json")),
    ("log show", Some("log-show.json")),
    ("log checkpoint", Some("log-checkpoint.json")),
    ("log gc", Some("log-gc.json")),
    ("keys export", Some("keys-export.json")),
    ("keys rotate", Some("keys-rotate.json")),
    ("fs probe", None),
    ("fs rm", Some("fs.json")),
    ("fs mkdir", Some("fs.json")),
    ("fs mv", Some("fs.json")),
    ("fs cd", Some("fs-cd.json")),
    ("fs ls", Some("fs.json")),
    ("fs glob", Some("fs.json")),
    ("fs grep", Some("fs.json")),
    ("fs read", Some("fs.json")),
    ("fs write", Some("fs.json")),
    ("fs edit", Some("fs.json")),
    ("history", Some("history.json")),
    ("trash list", Some("trash-list.json")),
    ("trash restore", Some("fs.json")),
    ("trash empty", Some("trash-empty.json")),
    ("undo", Some("undo.json")),
    ("http", Some("http.json")),
    ("changes", Some("changes.json")),
    ("apply", Some("changes.json")),
    ("discard", Some("changes.json")),
];

/// Why the commands of [`COMMANDS`] without a schema print no JSON.
const NO_JSON: &str = "repl, mcp and serve are interactive or speak their own protocol (MCP: \
    tool.json is each call's result); completions and man print a shell script and a roff \
    page; fs probe is a hidden diagnostic";

/// `docs/schema/commands.json`: each subcommand's schema file, and how `log tail` prints.
fn index() -> Value {
    let mut m = BTreeMap::new();
    for (cmd, file) in COMMANDS {
        m.insert(
            (*cmd).to_string(),
            file.map_or(Value::Null, |f| Value::String(f.into())),
        );
    }
    let mut o = serde_json::Map::new();
    o.insert(
        "description".into(),
        Value::String(
            "What each subcommand prints under --json: one object, validated by the schema \
             named here; any failure prints error.json's object instead (exit code != 0). \
             `log tail --json` prints JSON lines, each one object of log-record.json. null: \
             no JSON output."
                .into(),
        ),
    );
    o.insert("error".into(), Value::String("error.json".into()));
    o.insert(
        "commands".into(),
        serde_json::to_value(m).unwrap_or_default(),
    );
    o.insert("no_json".into(), Value::String(NO_JSON.into()));
    Value::Object(o)
}

/// Every file `docs/schema/` must hold, with its text.
fn files() -> Vec<(String, String)> {
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
    let mut out: Vec<(String, String)> = schemas()
        .iter()
        .map(|(f, v)| ((*f).to_string(), pretty(v)))
        .collect();
    out.push(("commands.json".into(), pretty(&index())));
    out
}

#[test]
fn the_schemas_in_docs_are_generated_from_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema");
    let write = std::env::var_os("GATEWAY_WRITE_SCHEMAS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (name, text) in files() {
        let p = dir.join(&name);
        if write {
            std::fs::create_dir_all(&dir).expect("mkdir docs/schema");
            std::fs::write(&p, &text).expect("write a schema");
        } else if std::fs::read_to_string(&p).ok().as_deref() != Some(text.as_str()) {
            stale.push(name);
        }
    }
    // No schema file of an output that is gone.
    let known: Vec<String> = files().into_iter().map(|(n, _)| n).collect();
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if !known.contains(&n) {
            stale.push(format!("{n} (no output has it)"));
        }
    }
    assert!(
        stale.is_empty(),
        "docs/schema/ is not what the types say: {stale:?}; write them with \
         GATEWAY_WRITE_SCHEMAS=1 cargo nextest run -E 'test(/schemas_in_docs/)'"
    );
}

/// The words of every leaf subcommand of clap's tree (`log query`, `fs read`, `exec`).
fn leaf_commands(c: &clap::Command, prefix: &str, out: &mut Vec<String>) {
    for s in c.get_subcommands() {
        if s.get_name() == "help" {
            continue;
        }
        let words = if prefix.is_empty() {
            s.get_name().to_string()
        } else {
            format!("{prefix} {}", s.get_name())
        };
        if s.has_subcommands() {
            leaf_commands(s, &words, out);
        } else {
            out.push(words);
        }
    }
}

#[test]
fn every_subcommand_has_a_schema() {
    use clap::CommandFactory;
    let mut leaves = Vec::new();
    leaf_commands(&Cli::command(), "", &mut leaves);
    assert!(leaves.len() > 30, "{leaves:?}");
    let named: Vec<&str> = COMMANDS.iter().map(|(c, _)| *c).collect();
    let missing: Vec<&String> = leaves
        .iter()
        .filter(|l| !named.contains(&l.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "subcommands with no schema in cli/schema.rs COMMANDS (name its output's schema, or \
         None and why in NO_JSON): {missing:?}"
    );
    let gone: Vec<&&str> = named
        .iter()
        .filter(|c| !leaves.iter().any(|l| l == *c))
        .collect();
    assert!(gone.is_empty(), "COMMANDS names no subcommand: {gone:?}");
    // Each schema named exists among the generated ones.
    let files: Vec<&str> = schemas().iter().map(|(f, _)| *f).collect();
    for (c, f) in COMMANDS {
        if let Some(f) = f {
            assert!(files.contains(f), "{c}: {f} is not generated");
        } else {
            assert!(
                NO_JSON.contains(c),
                "{c}: no schema and NO_JSON does not say why"
            );
        }
    }
}
