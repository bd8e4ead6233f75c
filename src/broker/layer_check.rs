//! What a run's captured layer may land, judged from the layer itself (issue 37): a run the
//! overlay captures is not searched for git's places before or after it; what it wrote there
//! is known exactly, entry by entry (`workspace::apply`'s quarantine rule).

use super::*;
use std::collections::HashMap;

/// Would git take a directory for a repository (`is_git_directory`), from what stands in it
/// (Some(true): a directory; Some(false): anything else)? A `HEAD` that is not a directory,
/// and `objects` and `refs` (anything: git follows links and takes a searchable file), or a
/// `commondir` naming where they are.
pub(super) fn bare_like(
    head: Option<bool>,
    objects: Option<bool>,
    refs: Option<bool>,
    commondir: Option<bool>,
) -> bool {
    head == Some(false) && ((objects.is_some() && refs.is_some()) || commondir == Some(false))
}

/// What a run's captured layer may not land in the workspace, decided from what the run
/// wrote (`workspace::apply`'s quarantine), with no search of the workspace: what git, a
/// shell or an editor would obey next.
///
/// - a `.git` that is a file or a link (git would read its config where it points);
/// - what the policy's relative protected patterns name: at the workspace's top, and, for
///   `.git/…` patterns, in every `.git` and in every bare repository (a directory holding
///   `HEAD`, `objects/` and `refs/`, as the workspace and the layer together show it);
/// - the `HEAD` of a bare repository the run made (the directory is no longer one);
/// - what git's config names (includes, `core.hooksPath`, the programs it runs): of the
///   repositories known before the run, of the user, and of every repository found on the
///   way to a changed path (`.git` in an ancestor: one made outside gateway since the last
///   search, `known_places`).
///
/// A deletion of such a path is not applied either: the workspace keeps it.
pub(super) struct LayerCheck {
    ws: PathBuf,
    /// The relative protected patterns, split: (as written, its components, the components
    /// after `.git/` when it is one of git's).
    patterns: Vec<(String, Vec<String>, Option<Vec<String>>)>,
    refs: Vec<PathBuf>,
    /// Directories (relative) that are bare repositories in the merged view, and whether the
    /// workspace alone has them as one.
    bare: HashMap<PathBuf, bool>,
    /// The layer's `.git` entries where the workspace has a `.git` that is not a directory
    /// (a link, a `gitdir:` file).
    git_pointers: std::collections::HashSet<PathBuf>,
}

impl LayerCheck {
    /// The check for `entries` of a layer over the workspace `ws` (`tree`), with `refs` what
    /// the configs known before the run name; the `.git` entries found on the way to the
    /// changed paths that `known` does not hold (their config's names join `refs`) are the
    /// second value.
    pub(super) fn new(
        ws: &wsfs::Tree,
        entries: &[crate::workspace::capture::Entry],
        protected: &[String],
        mut refs: Vec<PathBuf>,
        known: &[PathBuf],
        (globals, home, who): (&[PathBuf], &Path, Option<&wsfs::Identity>),
    ) -> (LayerCheck, Vec<PathBuf>) {
        use crate::workspace::capture::Up;
        let up: HashMap<&Path, &Up> = entries.iter().map(|e| (e.rel.as_path(), &e.up)).collect();
        let lower_kind = |rel: &Path| {
            wsfs::as_identity(who, || ws.kind(rel))
                .ok()
                .and_then(Result::ok)
                .flatten()
        };
        // What stands at `rel`, in the merged view and in the workspace alone: (a directory,
        // anything else) — git enters `objects` and `refs` through a link, and takes any file
        // it may search (`access(X_OK)`), so anything there counts; `HEAD` is a file or a link.
        let has = |rel: &Path| -> (Option<bool>, Option<bool>) {
            let low = lower_kind(rel).map(|k| matches!(k, wsfs::Kind::Dir { .. }));
            let merged = match up.get(rel) {
                Some(Up::Whiteout) => None,
                Some(Up::Dir { .. }) => Some(true),
                Some(_) => Some(false),
                None => low,
            };
            (merged.or(low), low)
        };
        let mut dirs: std::collections::HashSet<&Path> = std::collections::HashSet::new();
        for e in entries {
            for a in e.rel.ancestors().skip(1) {
                if !dirs.insert(a) {
                    break;
                }
            }
        }
        let mut bare = HashMap::new();
        let mut unknown = Vec::new();
        for d in dirs {
            let at = |n: &str| has(&d.join(n));
            let (h, o, r, c) = (at("HEAD"), at("objects"), at("refs"), at("commondir"));
            let merged = bare_like(h.0, o.0, r.0, c.0);
            if merged {
                bare.insert(d.to_path_buf(), bare_like(h.1, o.1, r.1, c.1));
            }
            let g = d.join(".git");
            if !d.iter().any(|c| c == ".git")
                && lower_kind(&g).is_some()
                && !known.contains(&ws.path().join(&g))
            {
                unknown.push(ws.path().join(g));
            }
        }
        unknown.sort();
        if !unknown.is_empty() {
            let found = wsfs::GitFound {
                dot_git: unknown
                    .iter()
                    .filter_map(|p| p.strip_prefix(ws.path()).ok())
                    .map(Path::to_path_buf)
                    .collect(),
                ..wsfs::GitFound::default()
            };
            let extra = match wsfs::Tree::open(ws.path()) {
                Ok(t) => git_places_of(&[t], vec![found], globals, home, ws.path(), who).refs,
                Err(_) => vec![],
            };
            refs.extend(extra);
        }
        let patterns = protected
            .iter()
            .filter(|p| !(p.starts_with('/') || p.starts_with('~') || p.starts_with("${")))
            .map(|p| {
                let comps: Vec<String> = p
                    .split('/')
                    .filter(|c| !c.is_empty())
                    .map(String::from)
                    .collect();
                let git = (comps.first().map(String::as_str) == Some(".git") && comps.len() > 1)
                    .then(|| comps[1..].to_vec());
                (p.clone(), comps, git)
            })
            .collect();
        let git_pointers = entries
            .iter()
            .filter(|e| e.rel.file_name() == Some(OsStr::new(".git")))
            .filter(|e| !matches!(lower_kind(&e.rel), None | Some(wsfs::Kind::Dir { .. })))
            .map(|e| e.rel.clone())
            .collect();
        let check = LayerCheck {
            ws: ws.path().to_path_buf(),
            patterns,
            refs,
            bare,
            git_pointers,
        };
        (check, unknown)
    }

    /// Why the layer's entry at `rel` (what the run left there: `up`) is kept out of the
    /// workspace, if it is.
    pub(super) fn check(&self, rel: &Path, up: &crate::workspace::capture::Up) -> Option<String> {
        use crate::workspace::capture::Up;
        let names: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let at = |pat: &[String], start: usize| {
            names.len() - start >= pat.len()
                && pat
                    .iter()
                    .zip(&names[start..])
                    .all(|(g, n)| crate::policy::wildcard(g, n))
        };
        let deleted = matches!(up, Up::Whiteout);
        let said = |what: String| -> Option<String> {
            Some(if deleted {
                format!("{what}: the command deleted it, and the workspace keeps it")
            } else {
                format!(
                    "{what}: what the command wrote there is kept in quarantine, not in the workspace"
                )
            })
        };
        if names.last().map(String::as_str) == Some(".git") {
            if self.git_pointers.contains(rel) {
                return said(
                    "the workspace's `.git` link or `gitdir:` file (where git reads its config)"
                        .into(),
                );
            }
            if !matches!(up, Up::Dir { .. } | Up::Whiteout) {
                return said(
                    "a `.git` file or link (git would read its config where it points)".into(),
                );
            }
        }
        for (p, comps, git) in &self.patterns {
            let hit = at(comps, 0)
                || git.as_ref().is_some_and(|rest| {
                    (0..names.len()).any(|i| names[i] == ".git" && at(rest, i + 1))
                });
            if hit {
                return said(format!("protected by the policy (`{p}`)"));
            }
        }
        for a in rel.ancestors().skip(1) {
            let Some(was_bare) = self.bare.get(a) else {
                continue;
            };
            let start = a.iter().count();
            // What made a directory a repository (in this run, or with what an earlier one
            // left): kept out, so that it is not one.
            let makes = names.len() == start + 1
                && ["HEAD", "objects", "refs", "commondir"].contains(&names[start].as_str());
            if !was_bare && !a.iter().any(|c| c == ".git") && makes && !deleted {
                return said(format!(
                    "`{}` would make {} a git repository (with `HEAD`, `objects/`, `refs/`), whose config and hooks git would obey",
                    names[start],
                    if a.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        a
                    }
                    .display()
                ));
            }
            for (p, _, git) in &self.patterns {
                if git.as_ref().is_some_and(|rest| at(rest, start)) {
                    return said(format!(
                        "protected by the policy (`{p}`, in a bare repository)"
                    ));
                }
            }
        }
        let abs = self.ws.join(rel);
        if let Some(r) = self.refs.iter().find(|r| abs.starts_with(r)) {
            return said(format!("named by git's config ({})", r.display()));
        }
        None
    }
}
