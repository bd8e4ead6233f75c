//! The mounts layer, in the run's mount namespace: denied paths inside allowed trees masked
//! (an empty read-only tmpfs on a directory, `/dev/null` on a file), protected paths bound
//! read-only, the ancestors of protected paths pinned, a private TMPDIR and /dev/shm, and the
//! landlock access for the fresh /proc. Applied by the helper (`sys::apply_mounts`).
//!
//! Without a mount namespace: hidden paths are an error unless `best_effort`, protected paths
//! are left to the broker's keeper (reported `NotApplied`), a private TMPDIR is an error.

use super::{Confinement, LayerStatus, SandboxError, cstr, sys};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What the mounts layer prepared for the helper.
#[derive(Default)]
pub(crate) struct Mounts {
    /// Pins, masks and read-only binds, in order.
    pub steps: Vec<sys::MountStep>,
    /// Fresh tmpfs mounts: path, options, landlock access bits to grant on them.
    pub tmpfs: Vec<(std::ffi::CString, std::ffi::CString, u64)>,
    /// Landlock access bits for the fresh /proc (0: none).
    pub proc_access: u64,
    /// Denied paths masked.
    pub denied_masked: usize,
    /// Protected paths made read-only.
    pub protected_read_only: usize,
}

/// The mounts layer for `c`. `landlock_bits`: every filesystem right of the kernel's landlock
/// ABI when a ruleset is applied (the fresh mounts need their own rules), else `None`.
pub(crate) fn plan(
    c: &Confinement,
    use_ns: bool,
    landlock_bits: Option<u64>,
) -> Result<(Mounts, LayerStatus), SandboxError> {
    if !use_ns {
        return without_namespace(c).map(|s| (Mounts::default(), s));
    }
    let mut m = Mounts::default();
    pins(c, &mut m.steps)?;
    masks(c, &mut m.steps)?;
    for p in &c.protected {
        if std::fs::symlink_metadata(p).is_ok() {
            let p = cstr(p.as_os_str().as_bytes(), "protected path")?;
            m.steps.push(sys::MountStep::ReadOnly(p));
            m.protected_read_only += 1;
        }
    }
    m.denied_masked = m
        .steps
        .iter()
        .filter(|s| matches!(s, sys::MountStep::MaskDir(_) | sys::MountStep::MaskFile(_)))
        .count();
    m.proc_access = proc_access(c, landlock_bits.is_some());
    if let Some((path, size)) = &c.private_tmp {
        m.tmpfs = private_tmp(c, path, *size, landlock_bits.unwrap_or(0))?;
    }
    Ok((m, LayerStatus::Enforced))
}

/// No mount namespace: what that costs, or an error where it cannot be done without.
fn without_namespace(c: &Confinement) -> Result<LayerStatus, SandboxError> {
    if c.private_tmp.is_some() {
        return Err(SandboxError::Required {
            layer: super::Layer::Mounts,
            why:
                "a tmpfs TMPDIR needs a mount namespace; the broker must create a directory instead"
                    .into(),
        });
    }
    let mut missing = Vec::new();
    if !c.hidden.is_empty() {
        let why = format!(
            "{} denied paths inside the workspace are hidden with a mount namespace, which needs a privileged broker",
            c.hidden.len()
        );
        if !c.best_effort {
            return Err(SandboxError::Required {
                layer: super::Layer::Mounts,
                why,
            });
        }
        missing.push(why);
    }
    if !c.protected.is_empty() {
        missing.push(format!(
            "{} protected paths: read-only mounts need a mount namespace; the broker keeps them and puts back what the run changed after it (new ones are quarantined)",
            c.protected.len()
        ));
    }
    Ok(if missing.is_empty() {
        LayerStatus::NotRequested
    } else {
        LayerStatus::NotApplied {
            why: missing.join("; "),
        }
    })
}

/// Ancestors of protected paths inside a writable tree are pinned (self-bind mounts):
/// otherwise `mv .git .git2` would carry the read-only mounts away and a fresh `.git` with new
/// hooks could take its place. Parents first, and before every other mount: a bind made later
/// would cover the masks and read-only mounts beneath it.
fn pins(c: &Confinement, steps: &mut Vec<sys::MountStep>) -> Result<(), SandboxError> {
    let mut pins: Vec<&Path> = Vec::new();
    for p in &c.protected {
        if let Some(root) = c.write.iter().find(|w| p.starts_with(w) && p != *w) {
            let mut a = p.parent();
            while let Some(dir) = a {
                if dir == root.as_path() || !dir.starts_with(root) {
                    break;
                }
                pins.push(dir);
                a = dir.parent();
            }
        }
    }
    pins.sort_by_key(|p| p.as_os_str().len());
    pins.dedup();
    for dir in pins {
        let d = cstr(dir.as_os_str().as_bytes(), "protected path parent")?;
        steps.push(sys::MountStep::Pin(d));
    }
    Ok(())
}

/// Denied paths inside an allowed tree, and hidden ones, masked (the others are unreachable).
fn masks(c: &Confinement, steps: &mut Vec<sys::MountStep>) -> Result<(), SandboxError> {
    use std::os::unix::fs::FileTypeExt;
    let reachable = |d: &PathBuf| {
        c.read
            .iter()
            .chain(&c.write)
            .chain(&c.exec)
            .any(|r| d.starts_with(r))
    };
    for d in c.deny.iter().filter(|d| reachable(d)).chain(&c.hidden) {
        let Ok(m) = std::fs::symlink_metadata(d) else {
            continue;
        };
        // Device nodes are refused by landlock; masking each would cost a mount apiece.
        let ft = m.file_type();
        if ft.is_block_device() || ft.is_char_device() {
            continue;
        }
        let p = cstr(d.as_os_str().as_bytes(), "denied path")?;
        steps.push(if m.is_dir() {
            sys::MountStep::MaskDir(p)
        } else {
            sys::MountStep::MaskFile(p)
        });
    }
    Ok(())
}

/// The fresh /proc of the pid namespace gets read access if the policy reads /proc.
fn proc_access(c: &Confinement, landlock: bool) -> u64 {
    let proc_path = Path::new("/proc");
    let readable = c
        .read
        .iter()
        .chain(&c.exec)
        .chain(&c.write)
        .any(|p| proc_path.starts_with(p))
        && !c.deny.iter().any(|d| d.as_path() == proc_path);
    // LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR.
    if readable && landlock {
        (1 << 2) | (1 << 3)
    } else {
        0
    }
}

/// Private TMPDIR and /dev/shm: fresh tmpfs mounts (POSIX semaphores and shared memory, e.g.
/// Python's multiprocessing, live in /dev/shm; the host's is shared with every other process).
fn private_tmp(
    c: &Confinement,
    path: &Path,
    size: u64,
    access: u64,
) -> Result<Vec<(std::ffi::CString, std::ffi::CString, u64)>, SandboxError> {
    // The private TMPDIR belongs to whoever the command runs as.
    let owner = c
        .run_as
        .as_ref()
        .map_or(String::new(), |u| format!(",uid={},gid={}", u.uid, u.gid));
    let opts = format!("mode=0700,size={size}{owner}");
    let mut out = vec![(
        cstr(path.as_os_str().as_bytes(), "the private TMPDIR")?,
        cstr(opts.as_bytes(), "tmpfs options")?,
        access,
    )];
    if Path::new("/dev/shm").is_dir() {
        let shm_opts = cstr(format!("mode=1777,size={size}").as_bytes(), "tmpfs options")?;
        out.push((c"/dev/shm".to_owned(), shm_opts, access));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{confinement, require_root, scratch};
    use super::super::{LayerStatus, SandboxError, sys};
    use super::plan;

    #[test]
    fn without_a_mount_namespace_hidden_paths_need_best_effort() {
        let dir = scratch("mounts-nons");
        let mut c = confinement();
        c.hidden = vec![dir.join("hidden")];
        c.protected = vec![dir.join("protected")];
        c.best_effort = false;
        let e = plan(&c, false, None).err().expect("refused");
        assert!(
            matches!(&e, SandboxError::Required { layer: super::super::Layer::Mounts, why } if why.contains("hidden")),
            "{e}"
        );
        assert!(e.to_string().contains("best_effort"), "{e}");
        c.best_effort = true;
        let (m, status) = plan(&c, false, None).expect("best effort");
        assert!(m.steps.is_empty());
        let LayerStatus::NotApplied { why } = status else {
            panic!("{status:?}")
        };
        assert!(
            why.contains("1 denied paths") && why.contains("1 protected paths"),
            "{why}"
        );
        c.hidden.clear();
        c.protected.clear();
        assert_eq!(
            plan(&c, false, None).expect("plan").1,
            LayerStatus::NotRequested
        );
        c.private_tmp = Some((dir.clone(), 1 << 20));
        assert!(matches!(
            plan(&c, false, None),
            Err(SandboxError::Required { .. })
        ));
    }

    /// The mounts alone, applied in a forked child's own mount namespace: the protected
    /// directory refuses writes (read-only bind), the denied file cannot be opened (masked), the
    /// host's view is untouched.
    #[test]
    fn mounts_alone_make_protected_read_only_and_mask_denied() {
        if !require_root() {
            return;
        }
        let dir = scratch("mounts");
        let ws = dir.join("ws");
        let prot = ws.join("sub").join("protected");
        std::fs::create_dir_all(&prot).expect("mkdir");
        let secret = ws.join("secret");
        std::fs::write(&secret, "SECRET").expect("write");
        let mut c = confinement();
        c.write = vec![ws.clone()];
        c.protected = vec![prot.clone()];
        c.deny = vec![secret.clone()];
        let (m, status) = plan(&c, true, None).expect("plan");
        assert_eq!(status, LayerStatus::Enforced);
        assert_eq!((m.protected_read_only, m.denied_masked), (1, 1));
        // The parent of the protected path is pinned, first.
        assert!(
            matches!(&m.steps[0], sys::MountStep::Pin(p) if p.to_bytes().ends_with(b"/ws/sub"))
        );
        let ns = sys::NsPlan {
            net: false,
            loopback: false,
            mounts: m.steps,
            pid_max: None,
            tmpfs: m.tmpfs,
            cgroup_tasks: None,
            cgroup_fd: None,
            proc_access: m.proc_access,
        };
        let code = sys::testing::in_fork(|| {
            sys::testing::unshare(libc::CLONE_NEWNS).expect("unshare");
            sys::apply_mounts(&ns, None).expect("mounts");
            let e = std::fs::write(prot.join("f"), "x").expect_err("read-only");
            assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
            // Masked by /dev/null on a nodev mount: it cannot even be opened.
            let e = std::fs::read(&secret).expect_err("masked");
            assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
            // The pinned parent cannot be moved away.
            assert!(std::fs::rename(ws.join("sub"), ws.join("sub2")).is_err());
            0
        });
        assert_eq!(code, 0);
        // Outside the child's namespace nothing changed.
        std::fs::write(prot.join("f"), "x").expect("host view writable");
        assert_eq!(std::fs::read_to_string(&secret).expect("read"), "SECRET");
    }
}
