//! `glob` and `grep` over a tree beneath a root, with ripgrep's crates: `ignore` walks in
//! parallel (honouring .gitignore, skipping hidden files, as `rg` does), `globset` matches
//! names, `grep-regex` + `grep-searcher` search. Each file is opened with `openat2` beneath
//! the root, so a link swapped in during the walk cannot make it read outside.

use super::FsError;
use super::path::Root;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, Sink, SinkContext, SinkMatch};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What `grep` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrepMode {
    /// Matching lines (with context).
    Content,
    /// Files with a match.
    Files,
    /// Matches per file.
    Count,
}

/// Options of `grep`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct GrepOptions {
    /// The regular expression (Rust regex syntax).
    pub regex: String,
    /// Only files whose path (relative to the search directory) matches this glob.
    pub glob: Option<String>,
    /// Lines of context before and after.
    pub context: usize,
    /// Case-insensitive.
    pub ignore_case: bool,
    /// What to return.
    pub mode: GrepMode,
    /// At most this many results (lines, files or counts).
    pub max: usize,
}

/// One result line: (path relative to the search directory, line number, text, is a match).
pub type GrepLine = (String, u64, String, bool);

/// Results of `grep`.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct GrepResult {
    /// Content mode: lines, grouped by file, in path order.
    pub lines: Vec<GrepLine>,
    /// Files mode: paths; count mode: (path, matching lines).
    pub files: Vec<(String, u64)>,
    /// More results than `max`.
    pub truncated: bool,
    /// Files searched.
    pub files_searched: u64,
}

fn bad(what: &'static str, e: impl std::fmt::Display) -> FsError {
    FsError::Io {
        what,
        path: PathBuf::from(e.to_string()),
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
    }
}

/// Walks `dir` (relative to the root), calling `f(relative to dir, relative to root)` for
/// each file not under a denied path, in parallel.
fn walk(root: &Root, dir: &Path, deny: &[PathBuf], f: &(dyn Fn(&Path, &Path) -> bool + Sync)) {
    let base = root.path.join(dir);
    // Only denied paths beneath the searched directory can match an entry (one that holds
    // the directory was refused before the walk): checking every entry against the whole
    // list (hundreds of device nodes when a policy reads `/`) cost a quarter of a search.
    let deny: Vec<PathBuf> = deny
        .iter()
        .filter(|d| d.starts_with(&base))
        .cloned()
        .collect();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    ignore::WalkBuilder::new(&base)
        .threads(threads)
        .filter_entry(move |e| !deny.iter().any(|d| e.path().starts_with(d)))
        .build_parallel()
        .run(|| {
            Box::new(|entry| {
                let Ok(e) = entry else {
                    return ignore::WalkState::Continue;
                };
                if !e.file_type().is_some_and(|t| t.is_file()) {
                    return ignore::WalkState::Continue;
                }
                let (Ok(rel_dir), Ok(rel_root)) = (
                    e.path().strip_prefix(&base),
                    e.path().strip_prefix(&root.path),
                ) else {
                    return ignore::WalkState::Continue;
                };
                if f(rel_dir, rel_root) {
                    ignore::WalkState::Continue
                } else {
                    ignore::WalkState::Quit
                }
            })
        });
}

/// Files under `dir` whose path relative to it matches `pattern`, sorted, at most `max`.
pub fn glob(
    root: &Root,
    dir: &Path,
    deny: &[PathBuf],
    pattern: &str,
    max: usize,
) -> Result<(Vec<String>, bool), FsError> {
    let m = globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| bad("invalid glob", e))?
        .compile_matcher();
    // A pattern without a separator matches file names anywhere (as `**/pattern`).
    let anywhere = !pattern.contains('/');
    let found = Mutex::new(Vec::new());
    walk(root, dir, deny, &|rel, _| {
        let hit = m.is_match(rel) || (anywhere && rel.file_name().is_some_and(|n| m.is_match(n)));
        if hit && let Ok(mut v) = found.lock() {
            v.push(rel.to_string_lossy().into_owned());
        }
        true
    });
    let mut v = found.into_inner().unwrap_or_default();
    v.sort();
    let truncated = v.len() > max;
    v.truncate(max);
    Ok((v, truncated))
}

/// Collects a file's lines.
struct Collect<'a> {
    path: &'a str,
    lines: Vec<GrepLine>,
    matches: u64,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _s: &grep_searcher::Searcher,
        m: &SinkMatch<'_>,
    ) -> Result<bool, std::io::Error> {
        self.matches += 1;
        let text = String::from_utf8_lossy(m.bytes());
        self.lines.push((
            self.path.to_string(),
            m.line_number().unwrap_or(0),
            text.trim_end_matches(['\n', '\r']).to_string(),
            true,
        ));
        Ok(true)
    }

    fn context(
        &mut self,
        _s: &grep_searcher::Searcher,
        c: &SinkContext<'_>,
    ) -> Result<bool, std::io::Error> {
        let text = String::from_utf8_lossy(c.bytes());
        self.lines.push((
            self.path.to_string(),
            c.line_number().unwrap_or(0),
            text.trim_end_matches(['\n', '\r']).to_string(),
            false,
        ));
        Ok(true)
    }
}

/// Searches files under `dir` (relative to the root).
pub fn grep(
    root: &Root,
    dir: &Path,
    deny: &[PathBuf],
    o: &GrepOptions,
) -> Result<GrepResult, FsError> {
    // With a line terminator the searcher looks for matches in whole buffers and only then
    // finds their lines (rg's fast path); without it, it goes line by line.
    let matcher = RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .case_insensitive(o.ignore_case)
        .build(&o.regex)
        .map_err(|e| bad("invalid regex", e))?;
    let filter = match &o.glob {
        Some(g) => Some(
            globset::GlobBuilder::new(g)
                .literal_separator(false)
                .build()
                .map_err(|e| bad("invalid glob", e))?
                .compile_matcher(),
        ),
        None => None,
    };
    let per_file: Mutex<Vec<(String, Vec<GrepLine>, u64)>> = Mutex::new(Vec::new());
    let searched = std::sync::atomic::AtomicU64::new(0);
    let context = if o.mode == GrepMode::Content {
        o.context
    } else {
        0
    };
    // Searchers are reused across files (each holds a buffer it would otherwise allocate
    // and zero per file): one per walking thread at most.
    let pool: Mutex<Vec<grep_searcher::Searcher>> = Mutex::new(Vec::new());
    walk(root, dir, deny, &|rel, rel_root| {
        if let Some(g) = &filter
            && !g.is_match(rel)
            && !rel.file_name().is_some_and(|n| g.is_match(n))
        {
            return true;
        }
        let Ok(fd) = root.open_beneath(rel_root, rustix::fs::OFlags::RDONLY, 0) else {
            return true;
        };
        let file = std::fs::File::from(fd);
        searched.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = rel.to_string_lossy().into_owned();
        let mut sink = Collect {
            path: &path,
            lines: Vec::new(),
            matches: 0,
        };
        let mut searcher = pool
            .lock()
            .ok()
            .and_then(|mut p| p.pop())
            .unwrap_or_else(|| {
                SearcherBuilder::new()
                    .line_number(true)
                    .binary_detection(BinaryDetection::quit(0))
                    .before_context(context)
                    .after_context(context)
                    .build()
            });
        if searcher.search_file(&matcher, &file, &mut sink).is_ok()
            && sink.matches > 0
            && let Ok(mut v) = per_file.lock()
        {
            v.push((path.clone(), sink.lines, sink.matches));
        }
        if let Ok(mut p) = pool.lock() {
            p.push(searcher);
        }
        true
    });
    let mut files = per_file.into_inner().unwrap_or_default();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut r = GrepResult {
        files_searched: searched.into_inner(),
        ..GrepResult::default()
    };
    match o.mode {
        GrepMode::Content => {
            for (_, lines, _) in files {
                r.lines.extend(lines);
            }
            r.truncated = r.lines.iter().filter(|l| l.3).count() > o.max;
            let mut matches = 0;
            r.lines.retain(|l| {
                if l.3 {
                    matches += 1;
                }
                matches <= o.max
            });
        }
        GrepMode::Files | GrepMode::Count => {
            r.truncated = files.len() > o.max;
            r.files = files
                .into_iter()
                .take(o.max)
                .map(|(p, _, n)| (p, n))
                .collect();
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_and_grep_honour_gitignore_and_stay_beneath() {
        let d = std::env::temp_dir().join(format!("gateway-search-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("ws/src/deep")).expect("mkdir");
        std::fs::create_dir_all(d.join("ws/target")).expect("mkdir");
        std::fs::create_dir_all(d.join("outside")).expect("mkdir");
        std::fs::write(d.join("ws/.gitignore"), "target/\n").expect("w");
        std::fs::write(d.join("ws/src/a.rs"), "fn alpha() {}\nfn beta() {}\n").expect("w");
        std::fs::write(d.join("ws/src/deep/b.rs"), "// Alpha\nlet x = 1;\n").expect("w");
        std::fs::write(d.join("ws/target/c.rs"), "fn alpha() {}\n").expect("w");
        std::fs::write(d.join("outside/o.rs"), "fn alpha() {}\n").expect("w");
        std::os::unix::fs::symlink(d.join("outside"), d.join("ws/src/out")).expect("ln");
        // ignore needs a git repository for .gitignore.
        std::fs::create_dir_all(d.join("ws/.git")).expect("git");
        let root = Root::open(&d.join("ws")).expect("root");
        let (g, _) = glob(&root, Path::new("."), &[], "*.rs", 100).expect("glob");
        assert_eq!(g, vec!["src/a.rs", "src/deep/b.rs"]);
        let (g, _) = glob(&root, Path::new("src"), &[], "deep/*.rs", 100).expect("glob");
        assert_eq!(g, vec!["deep/b.rs"]);
        let o = GrepOptions {
            regex: "alpha".into(),
            glob: None,
            context: 0,
            ignore_case: true,
            mode: GrepMode::Content,
            max: 100,
        };
        let r = grep(&root, Path::new("."), &[], &o).expect("grep");
        let hits: Vec<(String, u64)> = r.lines.iter().map(|l| (l.0.clone(), l.1)).collect();
        assert_eq!(
            hits,
            vec![
                ("src/a.rs".to_string(), 1),
                ("src/deep/b.rs".to_string(), 1)
            ]
        );
        let r = grep(
            &root,
            Path::new("."),
            &[],
            &GrepOptions {
                context: 1,
                ignore_case: false,
                glob: Some("*.rs".into()),
                ..o.clone()
            },
        )
        .expect("grep");
        assert_eq!(r.lines.len(), 2, "{:?}", r.lines);
        assert!(r.lines[0].3 && !r.lines[1].3);
        let r = grep(
            &root,
            Path::new("."),
            &[d.join("ws/src/deep")],
            &GrepOptions {
                mode: GrepMode::Count,
                ..o.clone()
            },
        )
        .expect("grep");
        assert_eq!(r.files, vec![("src/a.rs".to_string(), 1)]);
        assert!(
            grep(
                &root,
                Path::new("."),
                &[],
                &GrepOptions {
                    regex: "(".into(),
                    ..o
                }
            )
            .is_err()
        );
    }
}
