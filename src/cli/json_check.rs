//! The source check of issue 23's typed results: a front end (`cli/`, `serve/`) renders the
//! report types of the core (human text, `--json`, MCP content) and builds no result from a
//! `json!` literal. A test module only (`#[cfg(test)]` in `cli/mod.rs`).
//!
//! None is left: exec and the file tools render `broker::report`'s `ExecReport` and
//! `FsReport`, the other commands their own core types.

use std::path::{Path, PathBuf};

/// A `json!` invocation (any delimiter, by any path) or an import that renames the macro.
const LITERAL: &str = r"\bjson!\s*[(\[{]|\bjson\s+as\s+\w+";

/// The lines of `text` that build a `json!` literal, as `file:line: code`. Comment lines do
/// not count; the unit tests at the end of a file (`#[cfg(test)]` then an inline `mod NAME {`)
/// do not either: they build their inputs, not a result. (`#[cfg(test)]` before `mod NAME;`,
/// a test module in its own file, ends nothing.)
fn literals(file: &str, text: &str) -> Vec<String> {
    let re = regex::Regex::new(LITERAL).expect("regex");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("#[cfg(test)]")
            && lines
                .get(i + 1)
                .is_some_and(|n| n.starts_with("mod ") && n.trim_end().ends_with('{'))
        {
            break;
        }
        if l.trim_start().starts_with("//") {
            continue;
        }
        out.extend(
            re.find_iter(l)
                .map(|_| format!("{file}:{}: {}", i + 1, l.trim())),
        );
    }
    out
}

/// Every `.rs` file under the front ends' directories, relative to the crate (`src/...`).
fn front_end_sources() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut stack = vec![root.join("src/cli"), root.join("src/serve")];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(
                std::fs::read_dir(&p)
                    .expect("read_dir")
                    .map(|e| e.expect("dir entry").path()),
            );
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(root).expect("under the crate");
            // This check's own file: a test module, whose literals are its test inputs.
            if rel != Path::new("src/cli/json_check.rs") {
                out.push((rel.display().to_string(), p));
            }
        }
    }
    out.sort();
    out
}

/// What is wrong with the front ends' sources, given each file's literals.
fn offences(found: &[(String, Vec<String>)]) -> Vec<String> {
    let mut out = Vec::new();
    for (file, lits) in found {
        if !lits.is_empty() {
            out.push(format!(
                "{file}: {} json! literal(s): a front end renders a typed report (a \
                 #[derive(Serialize)] type of the core), it does not build one:\n  {}",
                lits.len(),
                lits.join("\n  ")
            ));
        }
    }
    out
}

#[test]
fn no_front_end_builds_a_result_from_a_json_literal() {
    let sources = front_end_sources();
    assert!(
        sources.iter().any(|(f, _)| f == "src/cli/mod.rs")
            && sources.iter().any(|(f, _)| f == "src/serve/mcp.rs"),
        "the front ends' sources were not found: {sources:?}"
    );
    let found: Vec<(String, Vec<String>)> = sources
        .iter()
        .map(|(f, p)| {
            let text = std::fs::read_to_string(p).expect("read a source");
            (f.clone(), literals(f, &text))
        })
        .collect();
    let bad = offences(&found);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_check_sees_every_form_of_a_literal() {
    let text = "#[cfg(test)]\nmod json_check;\nfn f() {\n    outln!(\"{}\", json!({\"a\": 1}));\n    let v = serde_json::json![1, 2];\n    let w = json! { {} };\n    // json!({\"in a comment\": 0})\n}\nuse serde_json::json as j;\n#[cfg(test)]\nmod tests {\n    fn g() { json!({}); }\n}\n";
    let l = literals("src/cli/x.rs", text);
    assert_eq!(
        l.iter()
            .map(|s| s.split(':').nth(1).unwrap_or(""))
            .collect::<Vec<_>>(),
        ["4", "5", "6", "9"],
        "{l:?}"
    );
    // Any literal in a front end is an offence, named with its file and line.
    let one = vec!["src/cli/x.rs:2: json!({})".to_string()];
    let bad = offences(&[
        ("src/cli/log.rs".into(), one),
        ("src/cli/fs.rs".into(), vec![]),
    ]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("src/cli/x.rs:2"), "{bad:?}");
}
