//! `--json` everywhere, one shape (issue 15): real commands' outputs validated against the
//! schemas in `docs/schema/` (`commands.json` names each subcommand's), usage errors,
//! refusals and not-found paths as the one error object, and `log tail --json` as JSON lines
//! of records.

use crate::util::*;
use serde_json::Value;
use std::path::Path;

/// `docs/schema/NAME`, parsed.
fn schema_file(name: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schema")
        .join(name);
    let t = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The schema file `commands.json` names for the subcommand `words` (`fs read`).
fn schema_name_of(words: &str) -> String {
    let idx = schema_file("commands.json");
    idx["commands"][words]
        .as_str()
        .unwrap_or_else(|| panic!("commands.json names no schema for `{words}`: {idx}"))
        .to_string()
}

/// What is wrong with `v` by the schema file `name` (empty: valid).
fn problems(name: &str, v: &Value) -> Vec<String> {
    let schema = schema_file(name);
    let val = jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{name}: {e}"));
    val.iter_errors(v)
        .map(|e| format!("{name}: {e} at {}", e.instance_path()))
        .collect()
}

/// One call of the matrix: its subcommand's words, its arguments (after `--json`), the exit
/// code expected, and whether it fails with the error object (else it prints its result).
struct Case<'a> {
    words: &'a str,
    args: &'a [&'a str],
    exit: i32,
    error: Option<&'a str>,
}

/// Runs `c` and returns what is wrong with its output.
fn check(env: &Env, c: &Case) -> Vec<String> {
    check_output(
        &env.cmd().arg("--json").args(c.args).output().expect("run"),
        c,
    )
}

/// What is wrong with `o`, the output of `c`.
fn check_output(o: &std::process::Output, c: &Case) -> Vec<String> {
    let what = format!("gateway --json {}", c.args.join(" "));
    let mut bad = Vec::new();
    if o.status.code() != Some(c.exit) {
        bad.push(format!(
            "{what}: exit {:?}, expected {}: {}",
            o.status.code(),
            c.exit,
            text(o)
        ));
    }
    let v: Value = match serde_json::from_slice(&o.stdout) {
        Ok(v) => v,
        Err(e) => {
            bad.push(format!(
                "{what}: stdout is not one JSON object ({e}): {}",
                text(o)
            ));
            return bad;
        }
    };
    if !v.is_object() {
        bad.push(format!("{what}: not an object: {v}"));
    }
    match c.error {
        Some(code) => {
            if v["error"]["code"] != code {
                bad.push(format!("{what}: expected error code {code}: {v}"));
            }
            bad.extend(
                problems("error.json", &v)
                    .into_iter()
                    .map(|p| format!("{what}: {p}")),
            );
        }
        None => {
            if v.get("error").is_some_and(Value::is_object) {
                bad.push(format!(
                    "{what}: an error object where a result was expected: {v}"
                ));
            }
            let name = schema_name_of(c.words);
            bad.extend(
                problems(&name, &v)
                    .into_iter()
                    .map(|p| format!("{what}: {p}")),
            );
        }
    }
    bad
}

sandbox_test!(
    fn every_json_output_validates_against_its_schema_in_docs() {
        let env = Env::new("json-schemas");
        env.write("a.txt", "alpha\n");
        let pol = env.policy_file("extends = \"standard\"\n");
        let cases = [
            Case {
                words: "exec",
                args: &["exec", "--", "echo", "hi"],
                exit: 0,
                error: None,
            },
            // A refusal: exec's report, with its refusal (exit 120).
            Case {
                words: "exec",
                args: &["exec", "--", "rm", "-rf", "/"],
                exit: 120,
                error: None,
            },
            Case {
                words: "sh",
                args: &["sh", "-c", "echo hi"],
                exit: 0,
                error: None,
            },
            Case {
                words: "fs write",
                args: &["fs", "write", "b.txt", "--content", "one\n"],
                exit: 0,
                error: None,
            },
            Case {
                words: "fs read",
                args: &["fs", "read", "b.txt"],
                exit: 0,
                error: None,
            },
            Case {
                words: "fs edit",
                args: &["fs", "edit", "b.txt", "--old", "one", "--new", "two"],
                exit: 0,
                error: None,
            },
            Case {
                words: "fs ls",
                args: &["fs", "ls"],
                exit: 0,
                error: None,
            },
            Case {
                words: "fs glob",
                args: &["fs", "glob", "*.txt"],
                exit: 0,
                error: None,
            },
            Case {
                words: "fs grep",
                args: &["fs", "grep", "two"],
                exit: 0,
                error: None,
            },
            Case {
                words: "fs mkdir",
                args: &["fs", "mkdir", "d"],
                exit: 0,
                error: None,
            },
            Case {
                words: "fs mv",
                args: &["fs", "mv", "b.txt", "d"],
                exit: 0,
                error: None,
            },
            Case {
                words: "fs rm",
                args: &["fs", "rm", "d/b.txt"],
                exit: 0,
                error: None,
            },
            Case {
                words: "history",
                args: &["history"],
                exit: 0,
                error: None,
            },
            Case {
                words: "trash list",
                args: &["trash", "list"],
                exit: 0,
                error: None,
            },
            Case {
                words: "undo",
                args: &["undo", "--dry-run"],
                exit: 0,
                error: None,
            },
            Case {
                words: "undo",
                args: &["undo"],
                exit: 0,
                error: None,
            },
            Case {
                words: "undo",
                args: &["undo", "--skip"],
                exit: 0,
                error: None,
            },
            // Emptying the trash deletes for good: standard asks, nobody answers (exit 121).
            Case {
                words: "trash empty",
                args: &["trash", "empty"],
                exit: 121,
                error: Some("not_approved"),
            },
            Case {
                words: "trash empty",
                args: &["--policy", "permissive", "trash", "empty"],
                exit: 0,
                error: None,
            },
            Case {
                words: "log verify",
                args: &["log", "verify"],
                exit: 0,
                error: None,
            },
            Case {
                words: "log query",
                args: &["log", "query"],
                exit: 0,
                error: None,
            },
            Case {
                words: "log show",
                args: &["log", "show", "1"],
                exit: 0,
                error: None,
            },
            Case {
                words: "log checkpoint",
                args: &["log", "checkpoint"],
                exit: 0,
                error: None,
            },
            Case {
                words: "log gc",
                args: &["log", "gc"],
                exit: 0,
                error: None,
            },
            Case {
                words: "keys export",
                args: &["keys", "export"],
                exit: 0,
                error: None,
            },
            Case {
                words: "keys rotate",
                args: &["keys", "rotate"],
                exit: 0,
                error: None,
            },
            Case {
                words: "policy list",
                args: &["policy", "list"],
                exit: 0,
                error: None,
            },
            Case {
                words: "policy check",
                args: &["policy", "check", &pol],
                exit: 0,
                error: None,
            },
            Case {
                words: "policy explain",
                args: &["policy", "explain", "--", "ls", "-l"],
                exit: 0,
                error: None,
            },
            Case {
                words: "policy explain",
                args: &["policy", "explain", "--credentials"],
                exit: 0,
                error: None,
            },
            Case {
                words: "config show",
                args: &["config", "show"],
                exit: 0,
                error: None,
            },
            Case {
                words: "scan",
                args: &["scan", "a.txt"],
                exit: 0,
                error: None,
            },
            // Refused (standard has no rule for the tool): the http report with its refusal.
            Case {
                words: "http",
                args: &["http", "GET", "http://127.0.0.1:9/"],
                exit: 120,
                error: None,
            },
            Case {
                words: "tool",
                args: &["tool", "exec", r#"{"command": "echo hi"}"#],
                exit: 0,
                error: None,
            },
            // A refused tool call: the tool result, an error (exit 1).
            Case {
                words: "tool",
                args: &["tool", "read_file", r#"{"path": "/etc/shadow"}"#],
                exit: 1,
                error: None,
            },
            Case {
                words: "tool",
                args: &["tool", "read_file", r#"{"nopath": 1}"#],
                exit: 1,
                error: None,
            },
            // Usage errors: clap's, the commands' own, an unknown policy, no daemon.
            Case {
                words: "exec",
                args: &["exec", "--timeout", "abc", "--", "true"],
                exit: 122,
                error: Some("usage"),
            },
            Case {
                words: "exec",
                args: &["exec", "--bogus"],
                exit: 122,
                error: Some("usage"),
            },
            Case {
                words: "exec",
                args: &["--policy", "nosuch", "exec", "--", "true"],
                exit: 123,
                error: Some("policy"),
            },
            Case {
                words: "fs cd",
                args: &["fs", "cd", "nonexist"],
                exit: 122,
                error: Some("usage"),
            },
            Case {
                words: "pending",
                args: &["pending"],
                exit: 122,
                error: Some("usage"),
            },
            Case {
                words: "tool",
                args: &["tool", "exec", "not json"],
                exit: 122,
                error: Some("usage"),
            },
            Case {
                words: "policy check",
                args: &["policy", "check", "/nonexistent.toml"],
                exit: 123,
                error: Some("policy"),
            },
            // A refusal of a file tool, and paths that do not exist.
            Case {
                words: "fs read",
                args: &["fs", "read", "/etc/shadow"],
                exit: 120,
                error: None,
            },
            Case {
                words: "fs write",
                args: &["fs", "write", "/etc/gw-json-test", "--content", "x"],
                exit: 120,
                error: Some("denied"),
            },
            Case {
                words: "fs read",
                args: &["fs", "read", "nonexist.txt"],
                exit: 122,
                error: Some("usage"),
            },
            Case {
                words: "log show",
                args: &["log", "show", "99999"],
                exit: 1,
                error: Some("failed"),
            },
        ];
        let mut bad = Vec::new();
        for c in &cases {
            bad.extend(check(&env, c));
        }
        // `tool` prints JSON without `--json` too: its usage errors as well.
        let c = Case {
            words: "tool",
            args: &["tool", "exec", "not json"],
            exit: 122,
            error: Some("usage"),
        };
        bad.extend(check_output(&env.gw(c.args), &c));
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
);

sandbox_test!(
    fn log_tail_json_prints_one_record_object_per_line() {
        let env = Env::new("json-tail");
        for i in 0..3 {
            let o = env.exec("standard", &["echo", &i.to_string()]);
            assert!(o.status.success(), "{}", text(&o));
        }
        let o = env.gw(&["--json", "log", "tail", "-n", "3"]);
        assert!(o.status.success(), "{}", text(&o));
        let lines: Vec<&str> = std::str::from_utf8(&o.stdout)
            .expect("utf8")
            .lines()
            .collect();
        assert_eq!(lines.len(), 3, "{}", text(&o));
        let name = schema_name_of("log tail");
        assert_eq!(name, "log-record.json");
        for l in lines {
            let v: Value = serde_json::from_str(l).expect("a line is one JSON object");
            let p = problems(&name, &v);
            assert!(p.is_empty(), "{l}: {p:?}");
        }
    }
);

#[test]
fn every_schema_named_in_docs_compiles_and_the_error_one_is_strict() {
    let idx = schema_file("commands.json");
    let cmds = idx["commands"].as_object().expect("commands");
    assert!(cmds.len() > 30, "{idx}");
    for (c, f) in cmds {
        if let Some(f) = f.as_str() {
            let s = schema_file(f);
            assert!(jsonschema::validator_for(&s).is_ok(), "{c}: {f}");
        }
    }
    // The error object: code and message required, nothing else but a refusal.
    let ok = serde_json::json!({"error": {"code": "usage", "message": "m"}});
    assert!(problems("error.json", &ok).is_empty());
    for bad in [
        serde_json::json!({"error": "a string, as before"}),
        serde_json::json!({"error": {"code": "no_such_code", "message": "m"}}),
        serde_json::json!({"error": {"code": "usage"}}),
        serde_json::json!({"error": {"code": "usage", "message": "m"}, "extra": 1}),
    ] {
        assert!(!problems("error.json", &bad).is_empty(), "{bad}");
    }
}

sandbox_test!(
    fn through_the_daemon_json_prints_the_same_objects() {
        // The daemon parses and runs the call in its own process: its usage errors, its
        // refusal of another state directory and its results are the same objects.
        let env = Env::new("json-daemon");
        let d = Daemon::start(&env, "standard", &[]);
        let other = env.root.join("other-state");
        let other = other.to_str().expect("utf8");
        let cases = [
            Case {
                words: "pending",
                args: &["pending"],
                exit: 0,
                error: None,
            },
            Case {
                words: "exec",
                args: &["exec", "--", "echo", "hi"],
                exit: 0,
                error: None,
            },
            Case {
                words: "exec",
                args: &["exec", "--timeout", "abc", "--", "true"],
                exit: 122,
                error: Some("usage"),
            },
            Case {
                words: "exec",
                args: &["exec", "--bogus"],
                exit: 122,
                error: Some("usage"),
            },
            Case {
                words: "exec",
                args: &["--state-dir", other, "exec", "--", "true"],
                exit: 122,
                error: Some("usage"),
            },
            Case {
                words: "fs cd",
                args: &["fs", "cd", "nonexist"],
                exit: 122,
                error: Some("usage"),
            },
            Case {
                words: "fs write",
                args: &["fs", "write", "/etc/gw-json-test", "--content", "x"],
                exit: 120,
                error: Some("denied"),
            },
        ];
        let mut bad = Vec::new();
        for c in &cases {
            let mut cmd = d.cmd(&env);
            cmd.arg("--json").args(c.args);
            bad.extend(check_output(&cmd.output().expect("run"), c));
        }
        let (st, err) = d.stop();
        assert!(st.success(), "{st}: {err}");
        assert!(bad.is_empty(), "{}", bad.join("\n"));
    }
);
