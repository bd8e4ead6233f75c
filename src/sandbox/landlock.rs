//! The landlock ruleset, built in the parent with the `landlock` crate (the child only calls
//! `landlock_restrict_self` on the resulting fd).
//!
//! Landlock grants access to whole hierarchies and cannot subtract. To allow a tree except some
//! denied paths inside it, the tree is enumerated along the way to each denied path: every
//! ancestor gets only `ReadDir` (its entries can be listed), and every sibling that does not
//! lead to a denied path gets the full rights. Symlinks met during enumeration are skipped (a
//! rule on a symlink would apply to its target); access through them is decided by the
//! target's own rules.

use super::{Confinement, LandlockStatus, LayerStatus, Network, SandboxError};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Most entries enumerated around denied paths before giving up (fail closed).
const MAX_ENUMERATED: usize = 20_000;

/// Why the ruleset could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// The `landlock` crate refused an access right, a scope or a rule, or the kernel the
    /// ruleset.
    #[error(transparent)]
    Ruleset(#[from] landlock::RulesetError),
    /// The kernel supports landlock but returned no ruleset.
    #[error("the ruleset could not be created")]
    NoRuleset,
    /// A tree with denied paths inside could not be listed to leave them out.
    #[error("cannot list {} to exclude denied paths: {source}", path.display())]
    List {
        /// The tree.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Too many entries around denied paths (fail closed rather than take unbounded time).
    #[error(
        "more than {max} entries around denied paths under {}; narrow the policy's read paths",
        path.display()
    )]
    TooManyEntries {
        /// The tree being enumerated.
        path: PathBuf,
        /// The bound.
        max: usize,
    },
    /// The kernel refused a path rule.
    #[error("rule for {}: {source}", path.display())]
    Rule {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The landlock layer: the ruleset for `spec` on a kernel of `kernel_abi` (what
/// `sys::landlock_abi` says; a parameter so that an older or absent landlock can be tested),
/// its details and its status. Without landlock: an error unless `best_effort`, else
/// `NotApplied`. Missing TCP rules (ABI < 4) or scoping (ABI < 6) make it `Partial`.
pub(crate) fn layer(
    spec: &Confinement,
    network: &Network,
    kernel_abi: i32,
    pinned: &[(PathBuf, OwnedFd)],
) -> Result<(Option<OwnedFd>, LandlockStatus, LayerStatus), SandboxError> {
    if kernel_abi <= 0 && !spec.best_effort {
        return Err(SandboxError::LandlockUnsupported);
    }
    let (fd, mut ll) = build(spec, network, kernel_abi, pinned)?;
    let net_needed = !network.private_loopback();
    ll.full = ll.fs && (ll.net || !net_needed) && ll.scoped;
    if fd.is_none() {
        let why = "unsupported by the kernel".to_string();
        return Ok((fd, ll, LayerStatus::NotApplied { why }));
    }
    let mut missing = Vec::new();
    if net_needed && !ll.net {
        missing.push("TCP rules: kernel ABI < 4 (seccomp still limits socket families)".into());
    }
    if !ll.scoped {
        missing.push("signal/abstract-socket scoping: kernel ABI < 6".into());
    }
    Ok((fd, ll, LayerStatus::partial_unless_empty(missing)))
}

fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

/// `pinned`: the writable areas' descriptors (the mounts layer's): their rules are added
/// from those, not from their names.
pub(crate) fn build(
    spec: &Confinement,
    network: &Network,
    kernel_abi: i32,
    pinned: &[(PathBuf, OwnedFd)],
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
    let all = AccessFs::from_all(abi);
    let mut rs = Ruleset::default()
        .set_compatibility(level)
        .handle_access(all)
        .map_err(LandlockError::from)?;
    let net_rules = kernel_abi >= 4 && !network.private_loopback();
    if net_rules {
        rs = rs
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(LandlockError::from)?;
    }
    let scoped = kernel_abi >= 6;
    if scoped {
        rs = rs
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(LandlockError::from)?;
    }
    let mut created = rs.create().map_err(LandlockError::from)?;

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
                .map_err(LandlockError::from)?;
        }
    }
    let fd: Option<OwnedFd> = created.into();
    let Some(fd) = fd else {
        return Err(LandlockError::NoRuleset.into());
    };
    let mut count = 0usize;
    let file_rights = AccessFs::from_file(abi);
    for (p, rights) in wanted {
        use std::os::unix::ffi::OsStrExt;
        let pb = p.as_os_str().as_bytes();
        if let Some((_, pin)) = pinned.iter().find(|(q, _)| q == p)
            && !deny.iter().any(|d| *d == pb || below(d, pb))
        {
            let added = crate::sys::add_landlock_rule_fd(
                fd.as_fd(),
                pin.as_fd(),
                rights.bits(),
                file_rights.bits(),
            )
            .map_err(|source| LandlockError::Rule {
                path: p.clone(),
                source,
            })?;
            count += usize::from(added);
            continue;
        }
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
            return Err(LandlockError::List {
                path: root.to_path_buf(),
                source: e,
            }
            .into());
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
            return Err(LandlockError::TooManyEntries {
                path: root.to_path_buf(),
                max: MAX_ENUMERATED,
            }
            .into());
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
    if crate::sys::add_landlock_rule(rs, &c, rights.bits(), file_rights.bits()).map_err(
        |source| LandlockError::Rule {
            path: path.to_path_buf(),
            source,
        },
    )? {
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

#[cfg(test)]
mod layer_tests {
    use super::super::testing::{confinement, scratch};
    use super::super::{LayerStatus, Network, SandboxError};
    use super::layer;
    use crate::sys;

    /// The kernel's landlock ABI; these tests need one (they fail without, unless
    /// GATEWAY_TEST_NO_SANDBOX is set).
    #[allow(
        clippy::disallowed_methods,
        reason = "the test suite's own opt-out variable, not a caller's environment"
    )]
    fn kernel_abi() -> Option<i32> {
        if std::env::var_os("GATEWAY_TEST_NO_SANDBOX").is_some() {
            return None;
        }
        let abi = sys::landlock_abi();
        assert!(
            abi >= 1,
            "this kernel has no landlock (GATEWAY_TEST_NO_SANDBOX=1 skips)"
        );
        Some(abi)
    }

    /// Landlock alone, in a forked child: the readable tree opens, a file beside it is
    /// refused with EACCES.
    #[test]
    fn landlock_alone_refuses_what_the_ruleset_leaves_out() {
        let Some(abi) = kernel_abi() else { return };
        let dir = scratch("landlock");
        let (inside, outside) = (dir.join("in"), dir.join("out"));
        for d in [&inside, &outside] {
            std::fs::create_dir(d).expect("mkdir");
            std::fs::write(d.join("f"), "x").expect("write");
        }
        let mut c = confinement();
        c.read = vec![inside.clone()];
        let (fd, ll, status) = layer(&c, &Network::None, abi, &[]).expect("ruleset");
        assert!(ll.fs && ll.rules >= 1 && ll.abi == abi as u32);
        if abi >= 6 {
            assert_eq!(status, LayerStatus::Enforced);
            assert!(ll.full && ll.net && ll.scoped);
        } else {
            assert!(matches!(status, LayerStatus::Partial { .. }), "{status:?}");
        }
        let fd = fd.expect("a ruleset fd");
        let code = sys::testing::in_fork(|| {
            sys::set_no_new_privs().expect("no_new_privs");
            sys::restrict_landlock(sys::raw(&fd)).expect("restrict");
            std::fs::read(inside.join("f")).expect("inside readable");
            let e = std::fs::read(outside.join("f")).expect_err("outside refused");
            assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
            let e = std::fs::write(inside.join("g"), "x").expect_err("read-only tree");
            assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
            0
        });
        assert_eq!(code, 0);
    }

    /// An older kernel's ABI (3: no TCP rules, no scoping) gives a partial status that says
    /// what is missing; no landlock at all is an error unless best_effort, then NotApplied.
    #[test]
    fn landlock_partial_or_missing_says_so_or_refuses() {
        if kernel_abi().is_none() {
            return;
        }
        let mut c = confinement();
        c.read = vec!["/usr".into()];
        let (fd, ll, status) = layer(&c, &Network::None, 3, &[]).expect("ABI 3 ruleset");
        assert!(fd.is_some() && ll.fs && !ll.net && !ll.scoped && !ll.full);
        let LayerStatus::Partial { why } = status else {
            panic!("{status:?}")
        };
        assert!(
            why.contains("TCP rules") && why.contains("scoping"),
            "{why}"
        );
        // Loopback needs no TCP rules: only scoping is missing.
        let (_, _, status) = layer(&c, &Network::Loopback, 3, &[]).expect("ruleset");
        assert!(matches!(&status, LayerStatus::Partial { why } if !why.contains("TCP")));
        c.best_effort = false;
        let e = layer(&c, &Network::None, 0, &[]).expect_err("refused");
        assert!(matches!(e, SandboxError::LandlockUnsupported), "{e}");
        assert!(e.to_string().contains("best_effort"), "{e}");
        c.best_effort = true;
        let (fd, ll, status) = layer(&c, &Network::None, 0, &[]).expect("best effort");
        assert!(fd.is_none() && !ll.fs);
        assert!(
            matches!(&status, LayerStatus::NotApplied { why } if why.contains("unsupported")),
            "{status:?}"
        );
    }
}
