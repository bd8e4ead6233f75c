//! The protected places around a run: the directories where relative protected patterns
//! apply, git's places (nested repositories, `gitdir:` files, bare repositories, what their
//! configs include or name to run), what exists there before a run, and what a run created
//! there, quarantined after it. Everything is read beneath the trees' descriptors
//! (`workspace::wsfs`).

use super::*;
/// The directories a run may write in which relative protected patterns apply: the
/// writable trees (a writable `/` stands for the workspace), not the private TMPDIR, not
/// device nodes.
pub(super) fn protected_roots<'a>(c: &'a sandbox::Confinement, ws: &'a Path) -> Vec<&'a Path> {
    let tmp = c.private_tmp.as_ref().map(|(t, _)| t.as_path());
    let mut roots: Vec<&Path> = Vec::new();
    for w in &c.write {
        let root = if w.as_path() == Path::new("/") {
            ws
        } else {
            w.as_path()
        };
        if Some(root) != tmp
            && !roots.contains(&root)
            && wsfs::is_dir(root)
            && !root.starts_with("/dev")
        {
            roots.push(root);
        }
    }
    roots
}

/// What a protected path (or a directory that would hold one) is: compared before and
/// after a run, so that a link re-pointed or a `.git` directory swapped for a `gitdir:` file
/// counts as created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Found {
    Dir,
    File,
    Link(PathBuf),
    Other,
}

impl From<wsfs::Kind> for Found {
    fn from(k: wsfs::Kind) -> Found {
        match k {
            wsfs::Kind::Dir { .. } => Found::Dir,
            wsfs::Kind::File { .. } => Found::File,
            wsfs::Kind::Link(t) => Found::Link(t),
            wsfs::Kind::Special => Found::Other,
        }
    }
}

/// The writable trees protected paths are looked for in, each opened once (a tree that
/// cannot be opened holds nothing the broker will act on).
pub(super) fn protected_trees(c: &sandbox::Confinement, ws: &Path) -> Vec<wsfs::Tree> {
    protected_roots(c, ws)
        .into_iter()
        .filter_map(|r| wsfs::Tree::open(r).ok())
        .collect()
}

/// At most this many directories of a writable tree are listed to find nested repositories
/// before a run; a tree with more refuses the run unless the policy says `best_effort`
/// (`nested_refusal`). After a run whose search was complete, every directory is listed: the
/// run cannot hide a planted repository behind directories it made.
pub(super) const NESTED_MAX_DIRS: usize = 100_000;

/// Where git reads config and hooks from in the writable trees, and what that config makes
/// it read or run (all absolute; found as the broker through `workspace::wsfs`, nothing
/// followed but what git itself would follow, inside the trees only).
#[derive(Debug, Default)]
pub(crate) struct GitPlaces {
    /// Every `.git` entry (a directory, a `gitdir:` file, a link), at any depth.
    pub(super) entries: Vec<PathBuf>,
    /// Git directories: `.git` directories, where a `.git` file's `gitdir:` or a `.git` link
    /// points, and their `commondir`s — those inside a writable tree.
    pub(super) dirs: Vec<PathBuf>,
    /// What their config and the user's global config include (existing or not: git skips a
    /// missing include, and reads it once it exists), the hooks directory they name, and the
    /// paths of the programs they name.
    pub(super) refs: Vec<PathBuf>,
    /// The `.git` directories among `dirs`.
    pub(super) dot_git_dirs: Vec<PathBuf>,
    /// The bare repositories among `dirs` (a directory holding `HEAD`, `objects/`, `refs/`).
    pub(super) bare: Vec<PathBuf>,
    /// Trees with more directories than were searched (`max_dirs` of [`git_places`]).
    pub(super) incomplete: Vec<PathBuf>,
}

impl GitPlaces {
    /// What the check after a run looks at, from what was found before it (`self`) and after
    /// it (`now`): git directories that existed before, and `.git` directories the run made
    /// (what is in them is the run's); every `.git` entry now (a new `gitdir:` file or link is
    /// moved away as itself, never what it names); the `HEAD` of a bare repository the run
    /// made (moved away, the directory is no longer one); what the config *before* the run
    /// includes or names. A config the run planted names nothing the broker then moves: the
    /// planted config itself is moved.
    pub(super) fn after_run(&self, now: GitPlaces) -> (GitPlaces, Vec<PathBuf>) {
        let mut dirs = self.dirs.clone();
        dirs.extend(
            now.dot_git_dirs
                .iter()
                .filter(|d| !self.dirs.contains(d))
                .cloned(),
        );
        let heads = now
            .bare
            .iter()
            .filter(|b| !self.bare.contains(b))
            .map(|b| b.join("HEAD"))
            .collect();
        let mut entries = now.entries;
        entries.extend(self.entries.iter().cloned());
        let g = GitPlaces {
            entries,
            dirs,
            refs: self.refs.clone(),
            dot_git_dirs: now.dot_git_dirs,
            bare: now.bare,
            incomplete: now.incomplete,
        };
        (g, heads)
    }
}

/// `rel` (a path git read from a file in `dir`, relative to `dir` unless absolute) as an
/// absolute, lexically normal path.
pub(super) fn place_of(dir: &Path, rel: &str) -> PathBuf {
    let p = if Path::new(rel).is_absolute() {
        PathBuf::from(rel)
    } else {
        dir.join(rel)
    };
    PathBuf::from(policy::normalize(&p.to_string_lossy()))
}

/// Finds [`GitPlaces`] in `trees`, listing at most `max_dirs` directories of each; `globals`
/// are the user's and the system's git config files (their relative program paths taken from
/// `ws`).
pub(super) fn git_places(
    trees: &[wsfs::Tree],
    globals: &[PathBuf],
    home: &Path,
    ws: &Path,
    who: Option<&wsfs::Identity>,
    max_dirs: usize,
) -> GitPlaces {
    let found = trees.iter().map(|t| t.find_git(max_dirs)).collect();
    git_places_of(trees, found, globals, home, ws, who)
}

/// [`git_places`] from what was found in each tree (`found[i]` in `trees[i]`: searched now,
/// or known from before, `broker::known_places`).
pub(super) fn git_places_of(
    trees: &[wsfs::Tree],
    found: Vec<wsfs::GitFound>,
    globals: &[PathBuf],
    home: &Path,
    ws: &Path,
    who: Option<&wsfs::Identity>,
) -> GitPlaces {
    let mut g = GitPlaces::default();
    let inside = |p: &Path| tree_of(trees, p).is_some();
    // (config file, the work tree its relative program paths are relative to)
    let mut configs: Vec<(PathBuf, PathBuf)> = Vec::new();
    for (tree, found) in trees.iter().zip(found) {
        if found.incomplete {
            g.incomplete.push(tree.path().to_path_buf());
        }
        // A directory git takes for a bare repository is a git directory itself (its work
        // tree, for relative program paths, is where git runs: the directory above).
        for rel in found.bare {
            let d = tree.path().join(&rel);
            let top = d
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| d.clone());
            configs.push((d.join("config"), top));
            g.bare.push(d.clone());
            g.dirs.push(d);
        }
        for rel in found.dot_git {
            let abs = tree.path().join(&rel);
            let top = abs.parent().map(Path::to_path_buf).unwrap_or_default();
            let gitdir = match tree.kind(&rel) {
                Ok(Some(wsfs::Kind::Dir { .. })) => {
                    g.dot_git_dirs.push(abs.clone());
                    Some(abs.clone())
                }
                Ok(Some(wsfs::Kind::File { .. })) => tree
                    .read(&rel, 4096)
                    .and_then(|d| {
                        String::from_utf8_lossy(&d)
                            .lines()
                            .find_map(|l| l.strip_prefix("gitdir:").map(|v| v.trim().to_string()))
                    })
                    .map(|v| place_of(&top, &v)),
                Ok(Some(wsfs::Kind::Link(t))) => Some(place_of(&top, &t.to_string_lossy())),
                _ => None,
            };
            g.entries.push(abs);
            let Some(d) = gitdir.filter(|d| inside(d)) else {
                continue;
            };
            // A worktree's or a linked repository's common directory holds the config too.
            let common = tree_of(trees, &d)
                .and_then(|(t, r)| t.read(&r.join("commondir"), 4096))
                .map(|c| place_of(&d, String::from_utf8_lossy(&c).trim()))
                .filter(|c| inside(c));
            for dir in std::iter::once(d).chain(common) {
                configs.push((dir.join("config"), top.clone()));
                configs.push((dir.join("config.worktree"), top.clone()));
                g.dirs.push(dir);
            }
        }
    }
    configs.extend(globals.iter().map(|c| (c.clone(), ws.to_path_buf())));
    // Config files are read with the caller's rights (a daemon's client): a config the run
    // planted that includes `/root/x` must not make the broker read it for them.
    // (Where that identity cannot be taken, read as the broker: protect more, not less.)
    g.refs = wsfs::as_identity(who, || git_config_refs(&configs, home))
        .unwrap_or_else(|_| git_config_refs(&configs, home))
        .into_iter()
        .filter(|p| inside(p))
        .collect();
    for v in [&mut g.entries, &mut g.dirs, &mut g.refs] {
        v.sort();
        v.dedup();
    }
    g
}

/// The warning for a tree whose nested repositories were not all found (`best_effort`).
pub(super) fn nested_warning(tree: &Path) -> String {
    format!(
        "{} has more than {NESTED_MAX_DIRS} directories (`best_effort = true`): git repositories nested deeper in it were not all found; their config and hooks were writable and one the command planted there was not quarantined",
        tree.display()
    )
}

/// Why a run is refused when the writable trees `trees` are too large to search for nested
/// repositories, and what to do.
pub(super) fn nested_refusal(trees: &[PathBuf]) -> String {
    let names: Vec<String> = trees.iter().map(|t| t.display().to_string()).collect();
    format!(
        "the writable tree {} has more than {NESTED_MAX_DIRS} directories, too many to search for nested git repositories before the run: the config and hooks of one deeper in it could not be kept read-only, nor one the command planted there found after it. Run the command in a smaller workspace (a subdirectory: `--cwd DIR`), or narrow the policy's `write` to the directories it needs",
        names.join(" and ")
    )
}

/// The user's and the system's git config files.
pub(super) fn global_git_configs(home: &Path) -> [PathBuf; 3] {
    [
        home.join(".gitconfig"),
        home.join(".config/git/config"),
        PathBuf::from("/etc/gitconfig"),
    ]
}

/// What stands at `pattern` (relative to `tree`, `*`/`?` in any component) and at the
/// literal directories on the way when one is not a real directory (reported as itself).
pub(super) fn present_at(tree: &wsfs::Tree, pattern: &Path, out: &mut Vec<(PathBuf, Found)>) {
    let comps: Vec<&OsStr> = pattern.iter().collect();
    let mut dir = PathBuf::new();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        if c.to_string_lossy().contains(['*', '?']) {
            break;
        }
        dir.push(c);
        match tree.kind(&dir).ok().flatten().map(Found::from) {
            Some(Found::Dir) => {}
            Some(f) => {
                out.push((tree.path().join(&dir), f));
                return;
            }
            None => return,
        }
    }
    for rel in tree.glob(pattern, 100_000) {
        if let Ok(Some(k)) = tree.kind(&rel) {
            out.push((tree.path().join(rel), Found::from(k)));
        }
    }
}

/// The protected paths that exist now: the policy's relative patterns in every writable tree,
/// git's (`.git/…`) in every git directory found there, what git's config makes it read or
/// run, and every `.git` entry that is not a directory (a link, a `gitdir:` file). Nothing is
/// followed: a link is reported as itself (`workspace::wsfs`).
pub(super) fn protected_present(
    trees: &[wsfs::Tree],
    policy: &Policy,
    places: &GitPlaces,
) -> Vec<(PathBuf, Found)> {
    let mut out = Vec::new();
    let relative = policy
        .sandbox
        .protected
        .iter()
        .filter(|t| !(t.starts_with('/') || t.starts_with('~') || t.starts_with("${")));
    for t in relative.clone() {
        for tree in trees {
            present_at(tree, Path::new(t), &mut out);
        }
    }
    let git_rest: Vec<&str> = relative.filter_map(|t| t.strip_prefix(".git/")).collect();
    for d in &places.dirs {
        if let Some((tree, rel)) = tree_of(trees, d) {
            for rest in &git_rest {
                present_at(tree, &rel.join(rest), &mut out);
            }
        }
    }
    for p in places.entries.iter().chain(&places.refs) {
        if let Some((tree, rel)) = tree_of(trees, p)
            && let Ok(Some(k)) = tree.kind(rel)
        {
            let f = Found::from(k);
            if !(f == Found::Dir && places.entries.contains(p)) {
                out.push((p.clone(), f));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup();
    out
}

/// The tree `p` lies in (the innermost), and `p` relative to it.
pub(super) fn tree_of<'a>(
    trees: &'a [wsfs::Tree],
    p: &'a Path,
) -> Option<(&'a wsfs::Tree, &'a Path)> {
    trees
        .iter()
        .filter_map(|t| t.relative(p).map(|r| (t, r)))
        .filter(|(_, r)| !r.as_os_str().is_empty())
        .min_by_key(|(_, r)| r.components().count())
}

/// Moves protected paths that a run created (or whose link, file or directory it swapped)
/// into `<state>/quarantine/`; a link that was there before is put back as it was. Nothing at
/// or under `read_only` (the protected paths that existed when the run started, read-only to
/// it) is moved or put back: a change there was made outside the run (the user's own `git
/// remote add` while the command ran). Every step acts on the name beneath its tree
/// (`workspace::wsfs`): a parent swapped for a link makes the step fail, never act elsewhere.
pub(super) fn quarantine_new(
    trees: &[wsfs::Tree],
    before: &[(PathBuf, Found)],
    after: Vec<(PathBuf, Found)>,
    read_only: &[PathBuf],
    state_dir: &Path,
) -> Vec<Quarantined> {
    let mut out = Vec::new();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let present =
        |p: &Path| tree_of(trees, p).is_some_and(|(t, rel)| t.kind(rel).is_ok_and(|k| k.is_some()));
    let relink = |p: &Path, target: &Path| {
        if let Some((t, rel)) = tree_of(trees, p) {
            let _ = t.symlink(rel, target);
        }
    };
    let held = |p: &Path| read_only.iter().any(|r| p.starts_with(r));
    // What the run created or swapped, and the links that stood for a holder before the run
    // and are gone or replaced now (a `.git -> elsewhere` link turned into a planted `.git`
    // directory): those are moved away and the link put back.
    let mut moved: Vec<PathBuf> = after
        .iter()
        .filter(|(p, f)| !before.contains(&(p.clone(), f.clone())) && !held(p))
        .map(|(p, _)| p.clone())
        .collect();
    for (p, f) in before {
        if matches!(f, Found::Link(_))
            && !held(p)
            && !after.contains(&(p.clone(), f.clone()))
            && !moved.contains(p)
        {
            if present(p) {
                moved.push(p.clone());
            } else if let Found::Link(target) = f {
                relink(p, target);
            }
        }
    }
    let dir = state_dir.join("quarantine");
    // not-ws: the broker's own state directory.
    let made = std::fs::create_dir_all(&dir);
    for (i, p) in moved.into_iter().enumerate() {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let to = tree_of(trees, &p).and_then(|(t, rel)| {
            let dst = format!("{stamp}-{i}-{name}");
            match made
                .as_ref()
                .map_err(|_| ())
                .and_then(|_| t.move_out(rel, &dir, OsStr::new(&dst)).map_err(|_| ()))
            {
                Ok(()) => Some(dir.join(dst)),
                // Another filesystem: renamed in place to a name nothing loads.
                Err(()) => {
                    let inert = format!("{name}.gateway-quarantined-{stamp}");
                    t.rename_in_place(rel, OsStr::new(&inert))
                        .ok()
                        .map(|_| p.with_file_name(inert))
                }
            }
        });
        if to.is_some()
            && let Some((_, Found::Link(target))) = before.iter().find(|(b, _)| *b == p)
        {
            relink(&p, target);
        }
        out.push(Quarantined { path: p, to });
    }
    out
}

/// What git's config files `configs` (each with the work tree its relative program paths are
/// relative to) make git read or run from the file system: the files they include,
/// recursively (as git does, up to 10 levels: `path` in `[include]`/`[includeIf "…"]`, `~/`
/// expanded, relative to the including file); `core.hooksPath`; and the paths named by the
/// keys that run a program (`core.fsmonitor`, `core.pager`, filters, diff and merge drivers,
/// `!` aliases, … — each word of the value that is a path). Each config is read as the broker
/// with no link on the way, bounded (`workspace::wsfs`).
pub(super) fn git_config_refs(configs: &[(PathBuf, PathBuf)], home: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut todo: Vec<(PathBuf, PathBuf, usize)> = configs
        .iter()
        .map(|(c, top)| (c.clone(), top.clone(), 0))
        .collect();
    let place = |v: &str, base: &Path| -> PathBuf {
        let p = if let Some(rest) = v.strip_prefix("~/") {
            home.join(rest)
        } else if Path::new(v).is_absolute() {
            PathBuf::from(v)
        } else {
            base.join(v)
        };
        PathBuf::from(policy::normalize(&p.to_string_lossy()))
    };
    while let Some((cfg, top, depth)) = todo.pop() {
        let Some(real) = wsfs::resolve(&cfg) else {
            continue;
        };
        let Some(text) = wsfs::read_nolinks(&real, 1 << 20) else {
            continue;
        };
        let dir = real.parent().map(Path::to_path_buf).unwrap_or_default();
        for (key, value) in git_config_entries(&String::from_utf8_lossy(&text)) {
            if key == "include.path" || key == "includeif.path" {
                let p = place(&value, &dir);
                if !out.contains(&p) {
                    out.push(p.clone());
                    if depth < 10 {
                        todo.push((p, top.clone(), depth + 1));
                    }
                }
            } else if key == "core.hookspath" {
                out.push(place(&value, &top));
            } else if runs_a_program(&key) {
                let v = value.trim_start_matches('!');
                for word in v.split_whitespace() {
                    let w = word.trim_matches(['"', '\'', ';', '&', '|', '(', ')']);
                    if w.contains('/') && !w.starts_with('-') {
                        out.push(place(w, &top));
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Config keys (`section.key`, subsection left out, lower case) whose value git runs as a
/// program or shell command (`git help config`).
pub(super) fn runs_a_program(key: &str) -> bool {
    const KEYS: &[&str] = &[
        "core.fsmonitor",
        "core.pager",
        "core.editor",
        "core.askpass",
        "core.sshcommand",
        "core.gitproxy",
        "sequence.editor",
        "diff.external",
        "diff.textconv",
        "diff.command",
        "merge.driver",
        "filter.clean",
        "filter.smudge",
        "filter.process",
        "credential.helper",
        "gpg.program",
        "interactive.difffilter",
        "web.browser",
        "browser.cmd",
        "man.cmd",
        "mergetool.cmd",
        "difftool.cmd",
        "uploadpack.packobjectshook",
    ];
    KEYS.contains(&key) || key.starts_with("pager.") || key.starts_with("alias.")
}

/// The `(section.key, value)` entries of a git config text (section and key lower-cased,
/// the subsection left out; values unquoted, trailing comments dropped).
pub(super) fn git_config_entries(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let mut l = line.trim();
        if let Some(rest) = l.strip_prefix('[') {
            let Some((head, after)) = rest.split_once(']') else {
                continue;
            };
            // `[section "sub"]` or `[section.sub]`.
            section = head
                .split(['.', ' ', '"', '\t'])
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            l = after.trim();
            if l.is_empty() {
                continue;
            }
        }
        if l.starts_with(['#', ';']) || section.is_empty() {
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let v = v.trim();
        let v = if let Some(q) = v.strip_prefix('"') {
            q.split('"').next().unwrap_or("")
        } else {
            v.split(['#', ';']).next().unwrap_or("").trim()
        };
        if !v.is_empty() {
            out.push((
                format!("{section}.{}", k.trim().to_ascii_lowercase()),
                v.to_string(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gw-places-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::canonicalize(&d).expect("canon")
    }

    fn found(trees: &[wsfs::Tree], ps: &[PathBuf]) -> Vec<(PathBuf, Found)> {
        ps.iter()
            .filter_map(|p| {
                let (t, rel) = tree_of(trees, p)?;
                Some((p.clone(), Found::from(t.kind(rel).ok()??)))
            })
            .collect()
    }

    #[test]
    fn what_existed_read_only_before_the_run_is_never_moved_what_the_run_created_is() {
        // Issue 34: protected paths that existed when the run started were read-only to it, so
        // a change there during the run is the user's own (`git remote add`, `.envrc` made a
        // link, a hook replaced by a link): never moved, never put back. A protected path
        // that did not exist, in a place the run could write, is quarantined.
        let ws = tmp("ws");
        let state = tmp("state");
        std::fs::create_dir_all(ws.join(".git/hooks")).expect("hooks");
        std::fs::write(ws.join(".git/config"), "[core]\n").expect("w");
        std::fs::write(ws.join(".envrc"), "export A=1\n").expect("w");
        std::fs::write(ws.join("envrc.mine"), "export A=2\n").expect("w");
        std::os::unix::fs::symlink("../../hooks.d", ws.join(".git/hooks/pre-push")).expect("ln");
        let trees = vec![wsfs::Tree::open(&ws).expect("tree")];
        let watched = [
            ws.join(".git/config"),
            ws.join(".envrc"),
            ws.join(".git/hooks/pre-push"),
            ws.join(".mcp.json"),
        ];
        let before = found(&trees, &watched);
        let read_only = vec![
            ws.join(".git/config"),
            ws.join(".envrc"),
            ws.join(".git/hooks"),
        ];
        // During the run, outside it: the config rewritten as a link, `.envrc` made a link,
        // the hook link removed; by the run: `.mcp.json`.
        std::fs::remove_file(ws.join(".git/config")).expect("rm");
        std::os::unix::fs::symlink("config.shared", ws.join(".git/config")).expect("ln");
        std::fs::remove_file(ws.join(".envrc")).expect("rm");
        std::os::unix::fs::symlink("envrc.mine", ws.join(".envrc")).expect("ln");
        std::fs::remove_file(ws.join(".git/hooks/pre-push")).expect("rm");
        std::fs::write(ws.join(".mcp.json"), "{}\n").expect("w");
        let after = found(&trees, &watched);
        let q = quarantine_new(&trees, &before, after.clone(), &read_only, &state);
        let moved: Vec<&Path> = q.iter().map(|q| q.path.as_path()).collect();
        assert_eq!(moved, [ws.join(".mcp.json").as_path()], "{q:?}");
        assert!(q[0].to.as_ref().is_some_and(|t| t.exists()), "{q:?}");
        assert_eq!(
            std::fs::read_link(ws.join(".git/config")).ok(),
            Some(PathBuf::from("config.shared"))
        );
        assert_eq!(
            std::fs::read_link(ws.join(".envrc")).ok(),
            Some(PathBuf::from("envrc.mine"))
        );
        assert!(std::fs::symlink_metadata(ws.join(".git/hooks/pre-push")).is_err());
        // The control: without the read-only set, the same changes would be moved away (and
        // the hook link put back) — the revert issue 34 removes.
        let q = quarantine_new(&trees, &before, after, &[], &state);
        let moved: Vec<&Path> = q
            .iter()
            .filter(|q| q.to.is_some())
            .map(|q| q.path.as_path())
            .collect();
        assert_eq!(
            moved,
            [
                ws.join(".git/config").as_path(),
                ws.join(".envrc").as_path()
            ],
            "{q:?}"
        );
        assert!(std::fs::symlink_metadata(ws.join(".git/hooks/pre-push")).is_ok());
        for d in [ws, state] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn the_search_after_a_run_lists_every_directory() {
        // Issue 34: the search for nested repositories stopped at its bound, before and after
        // the run alike; a run could hide a planted repository behind directories it made.
        let ws = tmp("many");
        for i in 0..50 {
            std::fs::create_dir_all(ws.join(format!("aaaa/{i:02}"))).expect("mkdir");
        }
        std::fs::create_dir_all(ws.join("zzz/.git")).expect("mkdir");
        std::fs::write(ws.join("zzz/.git/config"), "[core]\n").expect("w");
        let trees = vec![wsfs::Tree::open(&ws).expect("tree")];
        let home = ws.join("no-home");
        let bounded = git_places(&trees, &[], &home, &ws, None, 10);
        assert_eq!(bounded.incomplete, std::slice::from_ref(&ws));
        assert!(bounded.dot_git_dirs.is_empty(), "{bounded:?}");
        let all = git_places(&trees, &[], &home, &ws, None, usize::MAX);
        assert!(all.incomplete.is_empty(), "{all:?}");
        assert_eq!(all.dot_git_dirs, [ws.join("zzz/.git")]);
        let refused = nested_refusal(&bounded.incomplete);
        assert!(refused.contains(&ws.display().to_string()) && refused.contains("--cwd"));
        let _ = std::fs::remove_dir_all(ws);
    }

    #[test]
    fn what_a_run_wrote_in_gits_places_is_judged_from_its_layer() {
        // Issue 37: no search of the workspace after a run; its layer says what it wrote.
        use crate::workspace::capture::{Entry, Up};
        let ws = tmp("layer");
        for d in [
            ".git/objects",
            ".git/refs",
            "eb/objects",
            "eb/refs",
            "u/.git",
            "tools",
        ] {
            std::fs::create_dir_all(ws.join(d)).expect("mkdir");
        }
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").expect("w");
        std::fs::write(ws.join("eb/HEAD"), "ref: refs/heads/main\n").expect("w");
        // A repository made outside gateway since the last search: its config names a hooks
        // directory of the work tree.
        std::fs::write(ws.join("u/.git/config"), "[core]\n\thooksPath = myhooks\n").expect("w");
        std::fs::write(ws.join("tools/clean.sh"), "#!/bin/sh\n").expect("w");
        std::fs::create_dir_all(ws.join("p")).expect("mkdir");
        std::os::unix::fs::symlink("/elsewhere/.git", ws.join("p/.git")).expect("ln");
        let file = Up::File {
            mode: 0o644,
            size: 1,
            times: [(0, 0), (0, 0)],
            linked: None,
        };
        let dir = Up::Dir {
            mode: 0o755,
            opaque: false,
        };
        let e = |rel: &str, up: &Up| Entry {
            rel: PathBuf::from(rel),
            up: up.clone(),
        };
        let entries = vec![
            e(".envrc", &file),
            e(".git/config", &file),
            e("b/HEAD", &file),
            e("b/config", &file),
            e("b/objects", &dir),
            e("b/refs", &dir),
            e("deep/x/.git", &Up::Link(PathBuf::from("/tmp/evil"))),
            e("deep/y/.git", &dir),
            e("deep/y/.git/HEAD", &file),
            e("deep/y/.git/hooks/pre-commit", &file),
            e("eb/hooks/post-update", &file),
            e("p/.git", &dir),
            e("src/main.rs", &file),
            e("sub/.envrc", &file),
            e("tools/clean.sh", &Up::Whiteout),
            e("u/myhooks/pre-commit", &file),
        ];
        let tree = wsfs::Tree::open(&ws).expect("tree");
        let protected: Vec<String> = [".git/hooks", ".git/config", ".envrc", ".git/commondir"]
            .map(String::from)
            .to_vec();
        let home = ws.join("no-home");
        let (check, unknown) = LayerCheck::new(
            &tree,
            &entries,
            &protected,
            vec![ws.join("tools/clean.sh")],
            &[ws.join(".git")],
            (&[], &home, None),
        );
        assert_eq!(unknown, [ws.join("p/.git"), ws.join("u/.git")]);
        let kept: Vec<&str> = entries
            .iter()
            .filter(|e| check.check(&e.rel, &e.up).is_some())
            .map(|e| e.rel.to_str().expect("utf-8"))
            .collect();
        assert_eq!(
            kept,
            [
                ".envrc",
                ".git/config",
                "b/HEAD",
                "b/config",
                "b/objects",
                "b/refs",
                "deep/x/.git",
                "deep/y/.git/hooks/pre-commit",
                "eb/hooks/post-update",
                "p/.git",
                "tools/clean.sh",
                "u/myhooks/pre-commit",
            ]
        );
        let why = check
            .check(Path::new("tools/clean.sh"), &Up::Whiteout)
            .expect("kept");
        assert!(
            why.contains("deleted") && why.contains("git's config"),
            "{why}"
        );
        let _ = std::fs::remove_dir_all(ws);
    }
}
