//! The source check that keeps the file tools' circle open (issue 23): the broker's side
//! (`broker/tools/fs.rs`) hands a call to the confined worker (`broker/tools/fs/worker.rs`),
//! which runs the tool's body from the leaf modules under `broker/tools/fs/`; neither the
//! worker nor a leaf imports `broker::tools::fs` itself, only the leaves and the call's own
//! types. A test module only (`#[cfg(test)]` in `broker/tools/fs.rs`).

use std::path::Path;

/// The modules under `broker/tools/fs/` the worker runs: none imports `broker/tools/fs.rs`.
const LEAVES: &[&str] = &["file", "ops", "revert", "roots", "tree", "types"];

/// Items of `broker/tools/fs.rs` a leaf or the worker may name, with the reason: none other.
const SHARED: &[(&str, &str)] = &[];

/// The paths of the use tree that starts `s[i..]` (one path, or a `{..}` group, nested),
/// each as its segments, and where it ends. `s` has no spaces around `::`, braces and commas.
fn tree(s: &[u8], mut i: usize) -> (Vec<Vec<String>>, usize) {
    if s.get(i) == Some(&b'{') {
        i += 1;
        let mut out = Vec::new();
        while i < s.len() && s[i] != b'}' {
            let (paths, j) = tree(s, i);
            out.extend(paths);
            // Past an `as name` to the next element.
            i = j;
            while i < s.len() && s[i] != b',' && s[i] != b'}' {
                i += 1;
            }
            if s.get(i) == Some(&b',') {
                i += 1;
            }
        }
        return (out, i + 1);
    }
    let start = i;
    while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_' || s[i] == b'*') {
        i += 1;
    }
    if i == start {
        return (Vec::new(), i);
    }
    let name = String::from_utf8_lossy(&s[start..i]).into_owned();
    if s[i..].starts_with(b"::") {
        let (rest, j) = tree(s, i + 2);
        if !rest.is_empty() {
            let paths = rest
                .into_iter()
                .map(|mut p| {
                    p.insert(0, name.clone());
                    p
                })
                .collect();
            return (paths, j);
        }
    }
    (vec![vec![name]], i)
}

/// The names a file's code reaches in `broker/tools/fs.rs` (`file` is in `broker/tools/fs/`
/// when `leaf`, else in `broker/tools/`): after `crate::broker::tools::fs::`,
/// `broker::tools::fs::`, `super::super::fs::`, and after `super::` itself in a leaf
/// (`super::fs::` in `broker/tools/`), groups expanded. Comments and the unit tests at the end
/// are not code that runs.
fn reached(text: &str, leaf: bool) -> Vec<(String, String)> {
    let code: String = text
        .split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let code = regex::Regex::new(r"\s*(::|[{},])\s*")
        .expect("regex")
        .replace_all(&code, "$1")
        .into_owned();
    let s = code.as_bytes();
    // Where a path from `broker` starts (`broker::`), or, in a leaf, from `fs` (`super::`).
    let starts = regex::Regex::new(r"\b(broker|super)::").expect("regex");
    let mut out = Vec::new();
    for m in starts.find_iter(&code) {
        let before = &code[..m.start()];
        let after = m.end();
        let from_fs = if m.as_str() == "broker::" {
            false
        } else if before.ends_with("super::") || code[after..].starts_with("super::") {
            // `super::super::` (from a leaf: `broker`) is read at its second `super`.
            if before.ends_with("super::") {
                false
            } else {
                continue;
            }
        } else {
            leaf
        };
        for mut p in tree(s, after).0 {
            // From `broker::`, the file tools are `tools::fs`.
            if m.as_str() == "broker::" && p.len() > 1 && p[0] == "tools" {
                p.remove(0);
            }
            let item = if from_fs {
                p.first().cloned()
            } else if p.first().is_some_and(|f| f == "fs") {
                // `fs` itself (or `fs::self`) names the module, as `fs` does alone.
                Some(p.get(1).cloned().unwrap_or_else(|| "self".into()))
            } else {
                None
            };
            if let Some(item) = item {
                let line = code[..m.start()].lines().count().max(1);
                out.push((item, format!("line {line} (normalised): {}", p.join("::"))));
            }
        }
    }
    out
}

#[test]
fn the_worker_does_not_call_back() {
    let fs = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/broker/tools/fs");
    // The worker is a module under `fs/` too: it may name the leaves, as they may.
    let mut files = vec![(fs.join("worker.rs"), true)];
    files.extend(LEAVES.iter().map(|l| (fs.join(format!("{l}.rs")), true)));
    let mut found = Vec::new();
    let mut used = vec![false; SHARED.len()];
    let mut leaves_used = Vec::new();
    for (f, leaf) in &files {
        // not-ws: a test reading gateway's own source files
        let text = std::fs::read_to_string(f)
            .unwrap_or_else(|e| panic!("{}: {e} (a leaf the worker runs)", f.display()));
        for (item, at) in reached(&text, *leaf) {
            if LEAVES.contains(&item.as_str()) {
                leaves_used.push(item);
            } else if let Some(i) = SHARED.iter().position(|(n, _)| *n == item) {
                used[i] = true;
            } else {
                found.push(format!(
                    "{}: {at}: `{item}` of broker/tools/fs.rs",
                    f.display()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the worker and the leaves it runs reach back into broker/tools/fs.rs (the broker's side): move what they need into a leaf under broker/tools/fs/:\n{}",
        found.join("\n")
    );
    // Not vacuous: the worker runs the tools through the leaves.
    assert!(
        leaves_used.iter().any(|l| l == "ops"),
        "worker.rs no longer names fs::ops: has the dispatch moved? Update LEAVES"
    );
    for ((name, why), used) in SHARED.iter().zip(used) {
        assert!(
            used,
            "{name} is allowed ({why}) but nothing names it: remove it"
        );
    }
}

#[test]
fn the_check_sees_groups_aliases_and_super() {
    let names = |t: &str, leaf: bool| -> Vec<String> {
        reached(t, leaf).into_iter().map(|(n, _)| n).collect()
    };
    assert_eq!(
        names(
            "use super::fs::{self as bfs, FsOp, roots::RootPaths};\nlet x = bfs::act();",
            false
        ),
        ["self", "FsOp", "roots"]
    );
    assert_eq!(
        names(
            "use super::{\n    BrokerError, Tools,\n    pick_write,\n};\nuse super::super::fs::run;",
            true
        ),
        ["BrokerError", "Tools", "pick_write", "run"]
    );
    assert_eq!(
        names(
            "use crate::broker::{self, tools::fs, BrokerError};\nbroker::tools::fs::recover(x);\nuse crate::broker::tools::{fs::{ops, cd}};",
            true
        ),
        ["self", "recover", "ops", "cd"]
    );
    // Not from fs: the broker's own items, a sibling crate path, comments and tests.
    assert!(
        names(
            "use super::BrokerError; // super::fs::run\nuse crate::fsops::path;\n#[cfg(test)]\nuse super::fs::run;",
            false
        )
        .is_empty()
    );
    assert!(names("use super::super::BrokerError;\nbroker::plan_with();", true).is_empty());
}
