//! The landlock ruleset, built in the parent with the `landlock` crate (the child only calls
//! `landlock_restrict_self` on the resulting fd).
//!
//! Landlock grants access to whole hierarchies and cannot subtract. To allow a tree except some
//! denied paths inside it, the tree is enumerated along the way to each denied path: every
//! ancestor gets only `ReadDir` (its entries can be listed), and every sibling that does not
//! lead to a denied path gets the full rights. Symlinks met during enumeration are skipped (a
//! rule on a symlink would apply to its target); access through them is decided by the
//! target's own rules.

use super::{Confinement, LandlockStatus, Network, SandboxError};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Most entries enumerated around denied paths before giving up (fail closed).
const MAX_ENUMERATED: usize = 20_000;

fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

pub(crate) fn build(
    spec: &Confinement,
    network: &Network,
    kernel_abi: i32,
) -> Result<(Option<OwnedFd>, LandlockStatus), SandboxError> {
    let abi = ABI::from(kernel_abi);
    let mut status = LandlockStatus {
        abi: kernel_abi.max(0) as u32,
        ..LandlockStatus::default()
    };
    if kernel_abi <= 0 {
        return Ok((None, status));
    }
    let level = if spec.best_effort {
        CompatLevel::BestEffort
    } else {
        CompatLevel::HardRequirement
    };
    let err = |e: &dyn std::fmt::Display| SandboxError::Landlock(e.to_string());
    let all = AccessFs::from_all(abi);
    let mut rs = Ruleset::default()
        .set_compatibility(level)
        .handle_access(all)
        .map_err(|e| err(&e))?;
    let net_rules = kernel_abi >= 4 && !matches!(network, Network::Loopback);
    if net_rules {
        rs = rs
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| err(&e))?;
    }
    let scoped = kernel_abi >= 6;
    if scoped {
        rs = rs
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| err(&e))?;
    }
    let mut created = rs.create().map_err(|e| err(&e))?;

    // One rule per path with the union of its rights (strict names /usr under both read and
    // exec): fewer opens and rules.
    let exec_rights = read_rights() | AccessFs::Execute;
    let mut wanted: Vec<(&PathBuf, BitFlags<AccessFs>)> = Vec::new();
    for (list, rights) in [
        (&spec.read, read_rights()),
        (&spec.exec, exec_rights),
        (&spec.write, all),
    ] {
        for p in list {
            match wanted.iter_mut().find(|(q, _)| *q == p) {
                Some((_, r)) => *r |= rights,
                None => wanted.push((p, rights)),
            }
        }
    }
    let deny: Vec<&[u8]> = spec
        .deny
        .iter()
        .map(|d| std::os::unix::ffi::OsStrExt::as_bytes(d.as_os_str()))
        .collect();
    if net_rules && let Network::ConnectTcp(ports) = network {
        for port in ports {
            created = created
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(|e| err(&e))?;
        }
    }
    let fd: Option<OwnedFd> = created.into();
    let Some(fd) = fd else {
        return Err(SandboxError::Landlock(
            "the ruleset could not be created".into(),
        ));
    };
    let mut count = 0usize;
    let file_rights = AccessFs::from_file(abi);
    for (p, rights) in wanted {
        add_tree(fd.as_fd(), p, rights, file_rights, &deny, &mut count)?;
    }
    status.fs = true;
    status.net = net_rules;
    status.scoped = scoped;
    status.rules = count;
    Ok((Some(fd), status))
}

/// Landlock access bits for every filesystem right of the ABI (for rules added in the child).
pub(crate) fn all_access_bits(kernel_abi: i32) -> u64 {
    AccessFs::from_all(ABI::from(kernel_abi)).bits()
}

/// Is `d` strictly below `root`? (Byte comparison: this runs for every entry enumerated
/// around denied paths, hundreds of times per run; `Path::starts_with` re-parses components.)
fn below(d: &[u8], root: &[u8]) -> bool {
    d.len() > root.len() && d.starts_with(root) && (root.ends_with(b"/") || d[root.len()] == b'/')
}

fn add_tree(
    rs: BorrowedFd<'_>,
    root: &Path,
    rights: BitFlags<AccessFs>,
    file_rights: BitFlags<AccessFs>,
    deny: &[&[u8]],
    count: &mut usize,
) -> Result<(), SandboxError> {
    add_tree_typed(rs, root, None, rights, file_rights, deny, count)
}

/// `is_dir`: known from the directory listing (None: find out).
fn add_tree_typed(
    rs: BorrowedFd<'_>,
    root: &Path,
    is_dir: Option<bool>,
    rights: BitFlags<AccessFs>,
    file_rights: BitFlags<AccessFs>,
    deny: &[&[u8]],
    count: &mut usize,
) -> Result<(), SandboxError> {
    use std::os::unix::ffi::OsStrExt;
    let rb = root.as_os_str().as_bytes();
    if deny.contains(&rb) {
        return Ok(());
    }
    let inner: Vec<&[u8]> = deny.iter().copied().filter(|d| below(d, rb)).collect();
    if inner.is_empty() {
        return add_one(rs, root, is_dir, rights, file_rights, count);
    }
    // Some denied path lies below: list-only here, recurse into the entries.
    let dir = match is_dir {
        Some(d) => d,
        None => std::fs::symlink_metadata(root)
            .map(|m| m.is_dir())
            .unwrap_or(false),
    };
    if !dir {
        return Ok(());
    }
    add_one(
        rs,
        root,
        Some(true),
        rights & AccessFs::ReadDir,
        file_rights,
        count,
    )?;
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        // The broker may not list it (an unprivileged broker and /root): then the command,
        // with the same uid and no capabilities, cannot read in it either. Grant nothing
        // below it.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Ok(()),
        Err(e) => {
            return Err(SandboxError::Landlock(format!(
                "cannot list {} to exclude denied paths: {e}",
                root.display()
            )));
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_symlink() {
            continue;
        }
        *count += 1;
        if *count > MAX_ENUMERATED {
            return Err(SandboxError::Landlock(format!(
                "more than {MAX_ENUMERATED} entries around denied paths under {}; narrow the policy's read paths",
                root.display()
            )));
        }
        add_tree_typed(
            rs,
            &path,
            Some(ft.is_dir()),
            rights,
            file_rights,
            &inner,
            count,
        )?;
    }
    Ok(())
}

fn add_one(
    rs: BorrowedFd<'_>,
    path: &Path,
    is_dir: Option<bool>,
    rights: BitFlags<AccessFs>,
    file_rights: BitFlags<AccessFs>,
    count: &mut usize,
) -> Result<(), SandboxError> {
    use std::os::unix::ffi::OsStrExt;
    // A rule on a file may carry only file rights; when the type is not known from a listing,
    // the kernel tells (see `sys::add_landlock_rule`).
    let rights = match is_dir {
        Some(false) => rights & file_rights,
        _ => rights,
    };
    if rights.is_empty() {
        return Ok(());
    }
    // A path with a NUL byte cannot exist: it grants nothing.
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // Paths that do not exist (e.g. /lib32 on some systems) simply grant nothing.
    if super::sys::add_landlock_rule(rs, &c, rights.bits(), file_rights.bits())
        .map_err(|e| SandboxError::Landlock(format!("rule for {}: {e}", path.display())))?
    {
        *count += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::below;

    #[test]
    fn below_compares_whole_components() {
        assert!(below(b"/etc/shadow", b"/etc"));
        assert!(below(b"/etc/shadow", b"/"));
        assert!(!below(b"/etcx/shadow", b"/etc"));
        assert!(!below(b"/etc", b"/etc"));
        assert!(!below(b"/et", b"/etc"));
        assert!(below(b"/root/.ssh", b"/root"));
    }
}
