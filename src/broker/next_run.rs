//! The files that decide the next run — the policy file in force, every file it extends, the
//! gateway's config (which the daemon reads too) — judged before a command runs, beyond their
//! canonical paths (which `plan` protects): the next run names them again by the same
//! spelling, and reaches the same content through every name it has.
//!
//! - **Spelling.** Each file is followed as the kernel follows it: a symbolic link inside a
//!   writable tree, or a directory inside one that a `..` leaves, could be replaced by the
//!   command (a link re-pointed, a directory swapped for a link), and the same spelling would
//!   then lead to a file of its choosing. A `..` leaving a directory that holds a policy file
//!   is allowed: as root that directory is pinned in place (`sandbox`), and without a mount
//!   namespace a policy file inside a writable tree is refused anyway.
//! - **Other names.** A file with more than one hard link can be written through a name in
//!   the workspace while the protected name stays read-only: refused while it has others.
//!
//! What is refused says which file, through what, and how to fix it.

use crate::policy::Policy;
use crate::workspace::wsfs;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Symbolic links followed on one path before giving up (the kernel's limit).
const MAX_LINKS: usize = 40;

/// Why a place on the way to a file could be replaced by the command.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Way {
    /// A symbolic link inside a writable tree.
    Link(PathBuf),
    /// A directory inside a writable tree that a `..` leaves.
    DotDot(PathBuf),
}

impl std::fmt::Display for Way {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Way::Link(p) => write!(f, "the symbolic link {}", p.display()),
            Way::DotDot(p) => write!(f, "`..` out of the directory {}", p.display()),
        }
    }
}

/// The first place on the way to `path` (followed as the kernel follows it) that a command
/// writing in `write` could replace; `pinned` are directories it cannot (ancestors of the
/// protected policy files). None when nothing on the way is in reach, or the path does not
/// resolve (then loading it fails, closed).
pub(super) fn way_in_reach(path: &Path, write: &[PathBuf], pinned: &[PathBuf]) -> Option<Way> {
    let inside = |p: &Path| write.iter().any(|w| p.starts_with(w) && p != w);
    let abs = std::path::absolute(path).ok()?;
    let mut todo: Vec<OsString> = Vec::new();
    let push = |todo: &mut Vec<OsString>, p: &Path| {
        for c in p.components().rev() {
            match c {
                Component::Normal(n) => todo.push(n.to_os_string()),
                Component::ParentDir => todo.push("..".into()),
                _ => {}
            }
        }
    };
    push(&mut todo, &abs);
    let mut real = PathBuf::from("/");
    let mut links = 0;
    while let Some(c) = todo.pop() {
        if c == ".." {
            if inside(&real) && !pinned.iter().any(|p| p.starts_with(&real)) {
                return Some(Way::DotDot(real));
            }
            real.pop();
            continue;
        }
        let here = real.join(&c);
        if !wsfs::is_link(&here) {
            real = here;
            continue;
        }
        if inside(&here) {
            return Some(Way::Link(here));
        }
        links += 1;
        if links > MAX_LINKS {
            return None;
        }
        // not-ws: a link outside every writable tree, on the way to a policy or config file
        let target = std::fs::read_link(&here).ok()?;
        if target.is_absolute() {
            real = PathBuf::from("/");
        }
        push(&mut todo, &target);
    }
    None
}

/// How many names (hard links) the file at `p` has; 0 when it cannot be read.
fn names(p: &Path) -> u64 {
    // not-ws: the link count of a policy or config file, nothing read or written
    std::fs::metadata(p).map(|m| m.nlink()).unwrap_or(0)
}

/// Why the policy and config files named here could be changed by a command writing in
/// `write`, with what to do about it; None when they cannot.
pub(super) fn in_reach(policy: &Policy, config: &Path, write: &[PathBuf]) -> Option<String> {
    let pinned: Vec<PathBuf> = policy
        .loaded_from
        .iter()
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    for (i, spelled) in policy.loaded_as.iter().enumerate() {
        let real = wsfs::resolve(spelled)
            .map(|c| c.display().to_string())
            .unwrap_or_default();
        if let Some(way) = way_in_reach(spelled, write, &pinned) {
            return Some(if i + 1 == policy.loaded_as.len() {
                format!(
                    "the policy path {} goes through {way}, which this command may replace (and the next run would read what it put there): pass the real path ({real}) to --policy",
                    spelled.display()
                )
            } else {
                format!(
                    "policy `{}` extends {}, which goes through {way}, which this command may replace (and the next run would read what it put there): name the real path ({real}) in `extends`",
                    policy.name,
                    spelled.display()
                )
            });
        }
    }
    for f in &policy.loaded_from {
        let n = names(f);
        if n > 1 {
            return Some(format!(
                "the policy file {} has {n} names (hard links): a command could write it through one in the area it may write, and the next run would obey what it wrote; remove the other names (`find / -xdev -samefile {}` lists them) or pass a copy to --policy",
                f.display(),
                f.display()
            ));
        }
    }
    if let Some(way) = way_in_reach(config, write, &[]) {
        return Some(format!(
            "gateway's config {} goes through {way}, which this command may replace: point GATEWAY_CONFIG at its real path, outside the workspace",
            config.display()
        ));
    }
    let n = names(config);
    if n > 1 {
        return Some(format!(
            "gateway's config {} has {n} names (hard links): a command could write it through one in the area it may write; remove the other names (`find / -xdev -samefile {}` lists them)",
            config.display(),
            config.display()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_dotdot_inside_writable_trees_are_found_as_the_kernel_follows_them() {
        let t = std::env::temp_dir().join(format!("gateway-next-run-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&t);
        let (ws, out) = (t.join("ws"), t.join("out"));
        for d in [ws.join("sub"), ws.join("cfg"), out.join("d")] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::os::unix::fs::symlink(out.join("d"), ws.join("lnk")).expect("ln");
        std::os::unix::fs::symlink(ws.join("sub"), out.join("into")).expect("ln");
        let w = vec![ws.clone()];
        let way = |p: &Path, pinned: &[PathBuf]| way_in_reach(p, &w, pinned);
        assert_eq!(way(&out.join("d/p.toml"), &[]), None);
        assert_eq!(way(&ws.join("p.toml"), &[]), None);
        assert_eq!(way(&ws.join("../out/p.toml"), &[]), None);
        assert_eq!(
            way(&ws.join("sub/../../out/p.toml"), &[]),
            Some(Way::DotDot(ws.join("sub")))
        );
        assert_eq!(way(&ws.join("cfg/../p.toml"), &[ws.join("cfg")]), None);
        assert_eq!(
            way(&ws.join("lnk/../p.toml"), &[]),
            Some(Way::Link(ws.join("lnk")))
        );
        // A link outside leading into the workspace, then `..`.
        assert_eq!(
            way(&out.join("into/../p.toml"), &[]),
            Some(Way::DotDot(ws.join("sub")))
        );
        let _ = std::fs::remove_dir_all(&t);
    }
}
