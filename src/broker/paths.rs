//! The file tools' path rules, decided before anything runs: a path the policy denies
//! (`denied-path`) and a protected path (`protected-path`: git's hooks and config, shell
//! start-up files, editor and agent config, gateway's own files) are refused by every tool,
//! named in the decision and recorded as a deny — the confined worker's landlock domain and
//! its checks on the file it opens stay as the second wall.
//!
//! Paths are judged as written (normalised) **and** as resolved (every existing component's
//! links followed), so `sub/../.git/config`, an alias `g -> .git` or a link to `~/.ssh` are
//! judged by where they lead. Relative protected patterns apply at any depth below a writable
//! tree (`sub/.git/config`, `docs/.vscode`), and to the directories that would hold them
//! (`.git` itself: writing a `.git` *file* or moving a `.git` directory in or out would hand
//! git another config and hooks).

use super::tools::fs::{FsOp, RootPaths};
use crate::model::{Effect, RuleMatch};
use crate::policy::{Policy, normalize, wildcard};
use crate::workspace::wsfs;
use std::path::{Component, Path, PathBuf};

/// `p` (absolute) normalised lexically and with the links of its existing part resolved.
pub(crate) fn forms(p: &Path) -> Vec<PathBuf> {
    let lexical = PathBuf::from(normalize(&p.to_string_lossy()));
    let mut out = vec![lexical.clone()];
    // The deepest existing ancestor, canonicalised, plus what does not exist yet.
    let mut existing = lexical.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Some(c) = wsfs::resolve(existing) {
            let mut r = c;
            for n in rest.iter().rev() {
                r.push(n);
            }
            if r != lexical {
                out.push(r);
            }
            break;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => break,
        }
    }
    out
}

/// Whether the components `rel` contain the pattern's components as a window
/// (`Some(true)`: the path is the protected path or lies inside it), or end with a proper
/// prefix of them (`Some(false)`: the path is where a directory holding it would be).
fn window(rel: &[String], pat: &[&str]) -> Option<bool> {
    let n = pat.len();
    let hit = |i: usize, k: usize| (0..k).all(|j| wildcard(pat[j], &rel[i + j]));
    if n == 0 {
        return None;
    }
    if rel.len() >= n && (0..=rel.len() - n).any(|i| hit(i, n)) {
        return Some(true);
    }
    if (1..n).any(|k| k <= rel.len() && hit(rel.len() - k, k)) {
        return Some(false);
    }
    None
}

/// What changing `p` would touch among the protected paths: the pattern, and whether `p`
/// is the protected path (or inside it) rather than a directory that would hold one.
fn protected_hit(paths: &RootPaths, patterns: &[String], p: &Path) -> Option<(String, bool)> {
    for root in &paths.write {
        let Ok(rel) = p.strip_prefix(root) else {
            continue;
        };
        let rel: Vec<String> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        let mut ancestor = None;
        for t in patterns {
            let pat: Vec<&str> = t.split('/').filter(|c| !c.is_empty()).collect();
            match window(&rel, &pat) {
                Some(true) => return Some((t.clone(), true)),
                Some(false) => ancestor = ancestor.or(Some(t.clone())),
                None => {}
            }
        }
        if let Some(t) = ancestor {
            return Some((t, false));
        }
    }
    None
}

/// The paths a file tool call changes (all but reads, listings and searches; undo and trash
/// restore put back what was there before and are decided on the change they revert).
fn changed(op: &FsOp, abs: &dyn Fn(&Path) -> PathBuf) -> Vec<(PathBuf, bool)> {
    // (path, whether a directory holding a protected path counts: not for mkdir, which
    // makes an empty directory)
    match op {
        FsOp::Write { path, .. } | FsOp::Edit { path, .. } | FsOp::Remove { path, .. } => {
            vec![(abs(path), true)]
        }
        FsOp::Mkdir { path, .. } => vec![(abs(path), false)],
        FsOp::Move { src, dst } => {
            let (s, d) = (abs(src), abs(dst));
            let mut v = vec![(s.clone(), true), (d.clone(), true)];
            // Into an existing directory: the entry it would become.
            if wsfs::is_dir(&d)
                && let Some(name) = s.file_name()
            {
                v.push((d.join(name), true));
            }
            v
        }
        _ => vec![],
    }
}

/// The rules that refuse `op`: a denied path anywhere it reads or writes, a protected path
/// it would change. `subjects` are the call's paths (absolute); `paths` the policy's roots.
pub(crate) fn refusals(
    policy: &Policy,
    paths: &RootPaths,
    op: &FsOp,
    subjects: &[PathBuf],
    abs: &dyn Fn(&Path) -> PathBuf,
) -> Vec<RuleMatch> {
    let mut out = Vec::new();
    let seen = |r: RuleMatch, out: &mut Vec<RuleMatch>| {
        if !out
            .iter()
            .any(|o: &RuleMatch| o.subject == r.subject && o.id == r.id)
        {
            out.push(r);
        }
    };
    for s in subjects {
        for f in forms(s) {
            if let Some(d) = paths.deny.iter().find(|d| f.starts_with(d)) {
                seen(
                    RuleMatch {
                        id: "denied-path".into(),
                        effect: Effect::Deny,
                        reason: format!(
                            "{} is denied by policy `{}` ({}): credentials and gateway's state are never read or written by a tool",
                            f.display(),
                            policy.name,
                            d.display()
                        ),
                        subject: s.display().to_string(),
                    },
                    &mut out,
                );
            }
        }
    }
    let patterns: Vec<String> = policy
        .sandbox
        .protected
        .iter()
        .filter(|t| !t.starts_with('/') && !t.starts_with('~') && !t.starts_with("${"))
        .cloned()
        .collect();
    for (p, holders) in changed(op, abs) {
        for f in forms(&p) {
            // Inside a protected path, or (moved or removed) a directory holding a file of
            // the policy in force: moved away with its directory, its path would be free for
            // a later call to put another policy there.
            let absolute = paths
                .protected
                .iter()
                .find(|q| f.starts_with(q))
                .map(|q| (q, true))
                .or_else(|| {
                    policy
                        .loaded_from
                        .iter()
                        .find(|q| holders && q.starts_with(&f) && paths.protected.contains(q))
                        .map(|q| (q, false))
                });
            let hit = absolute
                .map(|(q, inside)| (q.display().to_string(), inside))
                .or_else(|| protected_hit(paths, &patterns, &f))
                .filter(|(_, inside)| *inside || holders);
            if let Some((pattern, inside)) = hit {
                let what = if inside {
                    "is protected"
                } else {
                    "would hold protected paths"
                };
                seen(
                    RuleMatch {
                        id: "protected-path".into(),
                        effect: Effect::Deny,
                        reason: format!(
                            "{} {what} (`{pattern}`): programs outside the sandbox run or load it later (git's hooks and config, shell start-up files, editor and agent config); change it yourself, outside the gateway",
                            f.display()
                        ),
                        subject: p.display().to_string(),
                    },
                    &mut out,
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(s: &str) -> Vec<String> {
        s.split('/').map(String::from).collect()
    }

    #[test]
    fn windows_find_protected_paths_at_any_depth_and_their_holders() {
        let git_hooks = [".git", "hooks"];
        assert_eq!(window(&rel(".git/hooks"), &git_hooks), Some(true));
        assert_eq!(
            window(&rel(".git/hooks/pre-commit"), &git_hooks),
            Some(true)
        );
        assert_eq!(window(&rel("sub/.git/hooks/x"), &git_hooks), Some(true));
        assert_eq!(window(&rel(".git"), &git_hooks), Some(false));
        assert_eq!(window(&rel("sub/.git"), &git_hooks), Some(false));
        assert_eq!(window(&rel(".git/objects/ab"), &git_hooks), None);
        assert_eq!(window(&rel("src/main.rs"), &git_hooks), None);
        assert_eq!(window(&rel(".git/x/.git/hooks"), &git_hooks), Some(true));
        assert_eq!(
            window(&rel(".gateway-policy.toml"), &[".gateway*"]),
            Some(true)
        );
        assert_eq!(
            window(&rel(".vscode/settings.json"), &[".vscode"]),
            Some(true)
        );
        assert_eq!(window(&rel("vscode"), &[".vscode"]), None);
    }

    #[test]
    fn forms_resolve_dotdot_and_links_of_the_existing_part() {
        let t = std::env::temp_dir().join(format!("gateway-paths-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&t);
        std::fs::create_dir_all(t.join(".git")).expect("mkdir");
        std::os::unix::fs::symlink(".git", t.join("g")).expect("link");
        let t = std::fs::canonicalize(&t).expect("canon");
        let f = forms(&t.join("sub/../g/config"));
        assert_eq!(f[0], t.join("g/config"));
        assert!(f.contains(&t.join(".git/config")), "{f:?}");
        let _ = std::fs::remove_dir_all(&t);
    }
}
