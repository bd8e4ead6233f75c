//! The source check that keeps workspace access in `workspace::wsfs` (issue 22): no other
//! module of `broker/`, `workspace/` or `serve/` opens, stats, lists or renames a path by its
//! name without saying, on the line, why that path is not a workspace path
//! (`// not-ws: <reason>`), and no module aliases those calls. A test module only
//! (`#[cfg(test)]` in `workspace/mod.rs`).

use std::path::PathBuf;

/// What acts on a path by its name (following links, or reading what it finds): outside
/// `wsfs`, a line of `broker/`, `workspace/` or `serve/` doing it must say why the path is not
/// a workspace path, with `// not-ws: <reason>` on it or on one of the two lines above.
const BY_NAME: &str = concat!(
    r"std::fs::(read|read_to_string|write|metadata|symlink_metadata|read_dir|read_link|",
    r"canonicalize|remove_file|remove_dir|remove_dir_all|rename|create_dir|create_dir_all|",
    r"copy|hard_link|set_permissions|exists)\b",
    r"|\bFile::(open|create)\b|\bOpenOptions\b|\bDirBuilder\b",
    r"|unix::fs::(symlink|chown|lchown)\b",
    r"|\.(exists|try_exists|is_dir|is_file|is_symlink|metadata|symlink_metadata|read_link|",
    r"canonicalize|read_dir)\(\)",
    r"|rustix::fs::(open|stat|lstat|statx|chmod|chown|readlink|unlink|rename|mkdir|symlink|",
    r"access|mkfifo|mknod)\(|\bCWD\b",
    r"|\bWalkBuilder\b|\bwalkdir\b|ignore::Walk\b",
    r"|fsops::atomic_replace\b|durable::(write_atomic|write_atomic_unsynced)\b",
);
/// Imports that would let a call above go by another name: never, outside this module.
const ALIASES: &str = concat!(
    r"^\s*(pub(\([a-z]+\))?\s+)?use\s+(::)?(std|core)::(fs\b|\{[^}]*\bfs\b)",
    r"|^\s*(pub(\([a-z]+\))?\s+)?use\s+(::)?rustix::(fs\s+as|\{[^}]*\bfs\b)",
    r"|^\s*(pub(\([a-z]+\))?\s+)?use\s+(::)?rustix::fs::\{[^}]*\b(open|stat|lstat|statx|chmod|chown|readlink|unlink|rename|mkdir|symlink|access|CWD)\b",
    r"|^\s*(pub(\([a-z]+\))?\s+)?use\s+(::)?std::os::unix::fs::(\{[^}]*)?\b(symlink|chown|lchown)\b",
    r"|^\s*(pub(\([a-z]+\))?\s+)?use\s+(::)?(ignore|walkdir)\b",
    r"|^\s*(pub(\([a-z]+\))?\s+)?use\s+(crate|super)::(fsops|durable)\s*(as|;)",
    r"|^\s*(pub(\([a-z]+\))?\s+)?use\s+(crate|super)::fsops::\{?[^;]*\batomic_replace\b",
    r"|^\s*(pub(\([a-z]+\))?\s+)?use\s+(crate|super)::durable::\{?[^;]*\b(write_atomic|write_atomic_unsynced)\b",
);

fn offences(file: &str, text: &str) -> Vec<String> {
    let by_name = regex::Regex::new(BY_NAME).expect("regex");
    let aliases = regex::Regex::new(ALIASES).expect("regex");
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        // The unit tests at the end of a file set up trees as the test, not as the broker:
        // `#[cfg(test)]` then an inline `mod NAME {`. (`#[cfg(test)] mod x;` — a test module
        // in a file of its own — ends nothing: the rest of the file is still checked.)
        if l.starts_with("#[cfg(test)]")
            && lines
                .get(i + 1)
                .is_some_and(|n| n.trim_start().starts_with("mod ") && n.contains('{'))
        {
            break;
        }
        let code = l.split("//").next().unwrap_or("");
        if aliases.is_match(code) {
            out.push(format!(
                "{file}:{}: an alias of a by-name call: {}",
                i + 1,
                l.trim()
            ));
            continue;
        }
        if !by_name.is_match(code) {
            continue;
        }
        let marked = lines[i.saturating_sub(2)..=i].iter().any(|m| {
            m.split_once("// not-ws:")
                .is_some_and(|(_, why)| why.trim().len() >= 8)
        });
        if !marked {
            out.push(format!("{file}:{}: {}", i + 1, l.trim()));
        }
    }
    out
}

#[test]
fn no_other_broker_module_touches_a_path_by_its_name() {
    // The broker, the workspace mechanism beside `wsfs` (the snapshot) and the long-lived
    // front ends over the broker (`serve`: daemon, MCP, REPL).
    let dirs = [
        concat!(env!("CARGO_MANIFEST_DIR"), "/src/broker"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/src/workspace"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/src/serve"),
    ];
    let mut files = Vec::new();
    let mut stack: Vec<PathBuf> = dirs.iter().map(PathBuf::from).collect();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs")
                && !p.ends_with("wsfs.rs")
                && !p.ends_with("wsfs_check.rs")
            {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 15, "{files:?}");
    for moved in [
        "serve/daemon.rs",
        "serve/mcp.rs",
        "serve/repl.rs",
        "workspace/snapshot.rs",
    ] {
        assert!(
            files.iter().any(|f| f.ends_with(moved)),
            "{moved}: {files:?}"
        );
    }
    let mut all = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        all.extend(offences(&f.display().to_string(), &text));
    }
    assert!(
        all.is_empty(),
        "broker, workspace or serve code acting on a path by its name outside workspace::wsfs (move it there, or \
         say why the path is not a workspace path with `// not-ws: <reason>`):\n{}",
        all.join("\n")
    );
}

#[test]
fn the_check_sees_calls_aliases_and_unmarked_lines() {
    let bad = [
        "    let d = std::fs::read(p);",
        "    let f = File::open(&p)?;",
        "    if p.exists() {",
        "use std::fs;",
        "use std::{fs as f, io};",
        "use rustix::fs::{open as o, Mode};",
        "use std::os::unix::fs::symlink;",
        "    let w = ignore::WalkBuilder::new(ws);",
        "    crate::durable::write_atomic(&p, &d)?;",
        "    crate::fsops::atomic_replace(&p, &d)?;",
        "use crate::durable::{hex, write_atomic};",
        "    // not-ws: short\n    let d = std::fs::read(p);",
        "    let d = std::fs::read(p); // not-ws:",
        // A test module in a file of its own ends nothing: what follows is still checked.
        "#[cfg(test)]\nmod wsfs_check;\nfn f() { std::fs::read(p); }",
    ];
    for b in bad {
        assert_eq!(offences("x.rs", b).len(), 1, "{b}");
    }
    let good = [
        "    let f = std::fs::File::from(fd);",
        "    let d = std::fs::read(p); // not-ws: the state directory",
        "    // not-ws: the broker's own state directory\n    let d = std::fs::read(p);",
        "use rustix::fs::{FileType, Mode, OFlags};",
        "    let k = tree.kind(rel)?; // std::fs::read in a comment",
        "#[cfg(test)]\nmod tests { fn f() { std::fs::read(p); } }",
    ];
    for g in good {
        assert!(
            offences("x.rs", g).is_empty(),
            "{g}: {:?}",
            offences("x.rs", g)
        );
    }
}
