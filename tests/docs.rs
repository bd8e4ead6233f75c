//! The documents that promise things: `docs/seams.md` names a test for every row, and each
//! named test exists (the suite running it is what makes the row hold).

use crate::util::*;

/// Where a test named `a::b::name` in the seams table lives: `tests/a.rs` (or `tests/a/b.rs`)
/// for an integration module, else `src/a/b.rs`, `src/a/b_tests.rs` or `src/a/b/mod.rs` (a unit test module
/// `tests` beside the code, or in a file of its own).
fn test_exists(qualified: &str) -> bool {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let parts: Vec<&str> = qualified.split("::").collect();
    let Some((name, modules)) = parts.split_last() else {
        return false;
    };
    let needle = format!("fn {name}()");
    let mut candidates = vec![
        root.join("tests").join(format!("{}.rs", modules[0])),
        root.join("tests/secrets")
            .join(format!("{}.rs", modules[0])),
        // A module of an integration module (`undo::journal`: `tests/undo/journal.rs`).
        root.join("tests").join(format!("{}.rs", modules.join("/"))),
    ];
    let src: Vec<&str> = modules.iter().copied().filter(|m| *m != "tests").collect();
    if !src.is_empty() {
        let base = root.join("src").join(src.join("/"));
        candidates.push(base.with_extension("rs"));
        if let Some(last) = src.last() {
            // A module's tests kept in a file of their own beside it (`redact_tests.rs`).
            candidates.push(base.with_file_name(format!("{last}_tests.rs")));
        }
        candidates.push(base.join("mod.rs"));
        candidates.push(base.join("tests.rs"));
        if let Some(parent) = base.parent() {
            candidates.push(parent.join("tests.rs"));
            // A module's tests in a `mod NAME_tests` of its own file (`sandbox::identity_tests`).
            if src.last().is_some_and(|l| l.ends_with("_tests")) {
                candidates.push(parent.join("mod.rs"));
                candidates.push(parent.with_extension("rs"));
            }
        }
    }
    candidates
        .iter()
        .any(|c| std::fs::read_to_string(c).is_ok_and(|t| t.contains(&needle)))
}

#[test]
fn every_seams_row_names_a_test_that_exists() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/seams.md"))
        .expect("docs/seams.md");
    let mut rows = 0;
    for line in doc
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Promise") && !l.starts_with("| ---"))
    {
        rows += 1;
        let test_cell = line.trim_end_matches('|').rsplit('|').next().unwrap_or("");
        let names: Vec<&str> = test_cell
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, s)| s)
            .filter(|s| s.contains("::"))
            .collect();
        assert!(!names.is_empty(), "a row without a test: {line}");
        for n in names {
            assert!(
                test_exists(n),
                "docs/seams.md names `{n}`, which does not exist: {line}"
            );
        }
    }
    assert!(
        rows >= 40,
        "docs/seams.md has {rows} rows; the issue asks for at least 40"
    );
}
