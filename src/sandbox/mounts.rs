//! The mounts layer: the run's mount tree, built by the helper in the run's own user and
//! mount namespaces (`sys::mount::apply`). The host is read-only (unless the policy writes
//! `/`); the writable areas are bound read-write on top; ancestors of protected and denied
//! paths inside them are pinned (a mount point cannot be renamed); protected paths are bound
//! read-only; denied paths are masked (an empty read-only tmpfs on a directory, `/dev/null`
//! on a file); then a private TMPDIR and /dev/shm, and the landlock access for the fresh
//! /proc.
//!
//! Pinned by descriptor, not by name: every path of the tree that lies in a writable area
//! (and every writable area) is opened here with `openat2(RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)`, and its identity (device, inode) goes to the helper, which opens
//! it the same way in the new namespace and binds only that object. A writable area that is
//! a link, or lies below one, is refused with its name ([`SandboxError::WritableLink`]) —
//! never followed; the descriptors of the writable areas are also what landlock's write rules
//! are added from.
//!
//! Without a mount namespace (best effort on a host that refuses user namespaces, or a policy
//! with `namespaces = false`): denied paths inside the workspace and protected paths cannot
//! be kept from the run, an error unless `best_effort`; a private TMPDIR is an error.

use super::{Confinement, LayerStatus, SandboxError, cstr};
use crate::sys;
use crate::sys::mount::{Find, Identity, Step};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What the mounts layer prepared for the helper.
#[derive(Default)]
pub(crate) struct Mounts {
    /// The tree, in order.
    pub steps: Vec<Step>,
    /// How many of the steps are writable areas (the helper's slots for their copies).
    pub writable: usize,
    /// The writable areas' descriptors, pinned here (landlock's write rules use them).
    pub pinned: Vec<(PathBuf, OwnedFd)>,
    /// The host is made read-only (not when the policy writes `/`).
    pub read_only_host: bool,
    /// Fresh tmpfs mounts: path, options, landlock access bits to grant on them.
    pub tmpfs: Vec<(std::ffi::CString, std::ffi::CString, u64)>,
    /// /tmp is a fresh tmpfs of the run's own.
    pub private_slash_tmp: bool,
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
    let mut m = Mounts {
        read_only_host: !c.write.iter().any(|w| w.as_path() == Path::new("/")),
        ..Mounts::default()
    };
    writable(c, &mut m, landlock_bits)?;
    readable_in_writable(c, &mut m)?;
    pins(c, &mut m.steps)?;
    masks(c, &mut m)?;
    for p in &c.protected {
        if let Some(id) = pinned_in(c, p, "protected path")? {
            single_link(p, &id, "protected path")?;
            m.steps.push(Step::ReadOnly(
                cstr(p.as_os_str().as_bytes(), "protected path")?,
                id,
            ));
            m.protected_read_only += 1;
        }
    }
    loosen_inside_overlay(c, &mut m.steps);
    m.proc_access = proc_access(c, landlock_bits.is_some());
    let access = landlock_bits.unwrap_or(0);
    if let Some((path, size)) = &c.private_tmp {
        // /tmp itself is the run's own too (tools that ignore TMPDIR write there); mounted
        // before the TMPDIR, whose mount point the helper then makes in it.
        if super::private_slash_tmp(c) {
            let opts = cstr(format!("mode=1777,size={size}").as_bytes(), "tmpfs options")?;
            m.tmpfs.push((c"/tmp".to_owned(), opts, access));
            m.private_slash_tmp = true;
        }
        m.tmpfs.extend(private_tmp(c, path, *size, access)?);
    }
    // The minimal /dev's shm: private to the run, whatever its TMPDIR (POSIX semaphores and
    // shared memory, e.g. Python's multiprocessing, live there).
    let size = c
        .private_tmp
        .as_ref()
        .map_or(c.limits.memory.unwrap_or(2 << 30), |t| t.1);
    let shm_opts = cstr(format!("mode=1777,size={size}").as_bytes(), "tmpfs options")?;
    m.tmpfs.push((c"/dev/shm".to_owned(), shm_opts, access));
    Ok((m, LayerStatus::Enforced))
}

/// Opens `path` following no link and returns what it is; `None` if it does not exist. A
/// link on the way is refused: a path in a tree the agent writes is never followed. One that
/// cannot be searched is `None` outside every writable area (the command, with the same
/// rights, cannot reach it either) and refused inside one (the command could `chmod` its way
/// back to what the broker could not see).
fn pinned_in(
    c: &Confinement,
    path: &Path,
    what: &'static str,
) -> Result<Option<Identity>, SandboxError> {
    let inside = in_writable(c, path).map(|_| command_uid(c));
    Ok(pin_fd(path, what, inside)?.map(|(_, id)| id))
}

/// The uid the command runs as.
fn command_uid(c: &Confinement) -> u32 {
    c.run_as.as_ref().map_or_else(sys::euid, |u| u.uid)
}

/// A protected or denied file must have no other name: a hard link made by an earlier run
/// would reach its content from outside the mount that protects or hides it.
fn single_link(path: &Path, id: &Identity, what: &'static str) -> Result<(), SandboxError> {
    if !id.dir && id.nlink > 1 {
        return Err(SandboxError::HardLinked {
            what,
            path: path.to_path_buf(),
            links: id.nlink,
        });
    }
    Ok(())
}

/// `inside_writable`: the uid the command runs as, when `path` lies in a writable area.
fn pin_fd(
    path: &Path,
    what: &'static str,
    inside_writable: Option<u32>,
) -> Result<Option<(OwnedFd, Identity)>, SandboxError> {
    let c = cstr(path.as_os_str().as_bytes(), what)?;
    match sys::mount::pin(&c) {
        Ok(x) => Ok(Some(x)),
        Err(e) => match e.raw_os_error() {
            Some(libc::EACCES)
                if inside_writable.is_some_and(|uid| super::hidden_by_owner(path, uid)) =>
            {
                Err(SandboxError::Unsearchable {
                    what,
                    path: path.to_path_buf(),
                })
            }
            Some(libc::ENOENT | libc::ENOTDIR | libc::EACCES) => Ok(None),
            Some(libc::ELOOP) => Err(SandboxError::WritableLink {
                what,
                path: path.to_path_buf(),
            }),
            _ => Err(SandboxError::Pin {
                what,
                path: path.to_path_buf(),
                source: e,
            }),
        },
    }
}

/// The writable areas, parents first, each pinned; a writable `/` stands for the host as it
/// is (nothing to bind, and nothing made read-only). The captured workspace is an overlay in
/// its place (or inside the writable area that holds it).
fn writable(
    c: &Confinement,
    m: &mut Mounts,
    landlock_bits: Option<u64>,
) -> Result<(), SandboxError> {
    if !m.read_only_host {
        return Ok(());
    }
    let capture = c
        .capture
        .as_ref()
        .filter(|cap| c.write.iter().any(|w| cap.workspace.starts_with(w)));
    let mut areas: Vec<&PathBuf> = c
        .write
        .iter()
        .chain(capture.map(|cap| &cap.workspace))
        .collect();
    // Parents first; one step per area (the workspace is named twice when it is one).
    areas.sort_by(|a, b| {
        (a.components().count(), a.as_os_str().len(), *a).cmp(&(
            b.components().count(),
            b.as_os_str().len(),
            *b,
        ))
    });
    areas.dedup();
    for w in areas {
        let inside = in_writable(c, w).map(|_| command_uid(c));
        let Some((fd, id)) = pin_fd(w, "writable area", inside)? else {
            continue;
        };
        let path = cstr(w.as_os_str().as_bytes(), "writable area")?;
        match capture.filter(|cap| &cap.workspace == w) {
            Some(cap) => {
                let (_, base_id) =
                    pin_fd(&cap.dir, "capture directory", None)?.ok_or_else(|| {
                        SandboxError::Pin {
                            what: "capture directory",
                            path: cap.dir.clone(),
                            source: std::io::Error::from_raw_os_error(libc::ENOENT),
                        }
                    })?;
                let name = |p: &Path| cstr(p.as_os_str().as_bytes(), "capture directory");
                let by_name = [
                    path.clone(),
                    cstr(&escape_lowerdir(w.as_os_str().as_bytes()), "writable area")?,
                    name(&cap.dir.join("upper"))?,
                    name(&cap.dir.join("work"))?,
                ];
                m.steps.push(Step::Overlay {
                    path,
                    id,
                    base: name(&cap.dir)?,
                    base_id,
                    access: landlock_bits.unwrap_or(0),
                    by_name,
                });
            }
            None => m.steps.push(Step::Writable(path, id)),
        }
        m.pinned.push((w.clone(), fd));
        m.writable += 1;
    }
    Ok(())
}

/// A path as overlay's `lowerdir` option reads it: `:` separates layers and `\\` escapes.
fn escape_lowerdir(p: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(p.len());
    for &b in p {
        if b == b':' || b == b'\\' || b == b',' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// Paths found through the capture overlay are checked by type only (see
/// [`sys::mount::Identity::loose`]).
fn loosen_inside_overlay(c: &Confinement, steps: &mut [Step]) {
    let Some(ws) = c
        .capture
        .as_ref()
        .map(|cap| cap.workspace.as_os_str().as_bytes())
    else {
        return;
    };
    if !steps.iter().any(|s| matches!(s, Step::Overlay { .. })) {
        return;
    }
    let inside = |p: &std::ffi::CString| {
        let b = p.to_bytes();
        b.len() > ws.len() && b.starts_with(ws) && (b[ws.len()] == b'/' || ws.ends_with(b"/"))
    };
    for s in steps {
        match s {
            Step::Writable(p, id) | Step::Pin(p, id) | Step::ReadOnly(p, id) if inside(p) => {
                id.loose = true;
            }
            Step::MaskDir(p, Find::Pinned(id)) | Step::MaskFile(p, Find::Pinned(id))
                if inside(p) =>
            {
                id.loose = true;
            }
            _ => {}
        }
    }
}

/// Readable and executable areas inside a writable area are pinned too: landlock's rules for
/// them are added from these descriptors, so that a run that replaced one by a link (`lib ->
/// ~`) cannot make the next run read through it; a link is refused by name.
fn readable_in_writable(c: &Confinement, m: &mut Mounts) -> Result<(), SandboxError> {
    if !m.read_only_host {
        return Ok(());
    }
    for r in c.read.iter().chain(&c.exec) {
        if in_writable(c, r).is_none() || m.pinned.iter().any(|(p, _)| p == r) {
            continue;
        }
        if let Some((fd, _)) = pin_fd(r, "readable area", Some(command_uid(c)))? {
            m.pinned.push((r.clone(), fd));
        }
    }
    Ok(())
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
    if !c.namespaces && c.hidden.is_empty() && c.protected.is_empty() {
        // Not asked for (gateway's own file-tool worker, which resolves every path beneath
        // a descriptor itself).
        return Ok(LayerStatus::NotRequested);
    }
    let mut missing = vec![
        "the host is not read-only: only landlock keeps the run from writing outside its writable areas, and landlock has no right for chmod, utimes or xattrs".to_string(),
    ];
    if !c.hidden.is_empty() {
        missing.push(format!(
            "{} denied paths inside the workspace are not hidden (they are hidden by the run's mount namespace)",
            c.hidden.len()
        ));
    }
    if !c.protected.is_empty() {
        missing.push(format!(
            "{} protected paths stay writable (they are read-only mounts in the run's mount namespace)",
            c.protected.len()
        ));
    }
    if !c.best_effort && (!c.hidden.is_empty() || !c.protected.is_empty()) {
        return Err(SandboxError::Required {
            layer: super::Layer::Mounts,
            why: missing[1..].join("; "),
        });
    }
    Ok(LayerStatus::NotApplied {
        why: missing.join("; "),
    })
}

/// Is `p` in /dev? The run's /dev is a minimal one of its own (`sys::mount::minimal_dev`):
/// what the host has there is not in it, so nothing there is masked or pinned.
fn under_dev(p: &Path) -> bool {
    p.starts_with("/dev")
}

/// The writable area `p` lies strictly inside, if any.
fn in_writable<'a>(c: &'a Confinement, p: &Path) -> Option<&'a PathBuf> {
    c.write
        .iter()
        .filter(|w| p.starts_with(w) && p != w.as_path())
        .max_by_key(|w| w.as_os_str().len())
}

/// Ancestors of protected and denied paths inside a writable tree are pinned (bound onto
/// themselves): otherwise `mv .git .git2` would carry the read-only mounts away and a fresh
/// `.git` with new hooks could take its place, and `mv config config2` would carry a denied
/// file out from under its name for the next run. Parents first, and before every other
/// mount: a bind made later would cover the masks and read-only mounts beneath it.
fn pins(c: &Confinement, steps: &mut Vec<Step>) -> Result<(), SandboxError> {
    let mut pins: Vec<&Path> = Vec::new();
    for p in c
        .protected
        .iter()
        .chain(&c.hidden)
        .chain(&c.deny)
        .filter(|p| !under_dev(p))
    {
        if let Some(root) = in_writable(c, p) {
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
        if let Some(id) = pinned_in(c, dir, "protected or denied path's parent")?
            && id.dir
        {
            let d = cstr(dir.as_os_str().as_bytes(), "protected path parent")?;
            steps.push(Step::Pin(d, id));
        }
    }
    Ok(())
}

/// Denied paths inside an allowed tree, and hidden ones, masked (the others are unreachable).
/// Those in a writable area are pinned by descriptor; the others are masked where their name
/// leads (the agent cannot re-point a path outside every writable area).
fn masks(c: &Confinement, m: &mut Mounts) -> Result<(), SandboxError> {
    use std::os::unix::fs::FileTypeExt;
    let reachable = |d: &PathBuf| {
        c.read
            .iter()
            .chain(&c.write)
            .chain(&c.exec)
            .any(|r| d.starts_with(r))
    };
    for d in c
        .deny
        .iter()
        .filter(|d| reachable(d))
        .chain(&c.hidden)
        .filter(|d| !under_dev(d))
    {
        let p = cstr(d.as_os_str().as_bytes(), "denied path")?;
        let (find, dir) = if in_writable(c, d).is_some() {
            match pinned_in(c, d, "denied path")? {
                Some(id) => {
                    single_link(d, &id, "denied path")?;
                    (Find::Pinned(id), id.dir)
                }
                None => continue,
            }
        } else {
            // not-ws: a denied path outside every writable area, typed to choose its mask
            let Ok(meta) = std::fs::metadata(d) else {
                continue;
            };
            // Device nodes are refused by landlock; masking each would cost a mount apiece.
            let ft = meta.file_type();
            if ft.is_block_device() || ft.is_char_device() {
                continue;
            }
            (Find::Named, meta.is_dir())
        };
        m.steps.push(if dir {
            Step::MaskDir(p, find)
        } else {
            Step::MaskFile(p, find)
        });
        m.denied_masked += 1;
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

/// Private TMPDIR: a fresh tmpfs mount.
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
    Ok(vec![(
        cstr(path.as_os_str().as_bytes(), "the private TMPDIR")?,
        cstr(opts.as_bytes(), "tmpfs options")?,
        access,
    )])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{confinement, require_root, scratch};
    use super::super::{LayerStatus, SandboxError};
    use super::{Step, plan};
    use crate::sys;

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
        c.best_effort = false;
        // Nothing to hide or protect: it runs, reported as a host that is not read-only.
        let (_, status) = plan(&c, false, None).expect("plan");
        assert!(
            matches!(&status, LayerStatus::NotApplied { why } if why.contains("not read-only")),
            "{status:?}"
        );
        c.private_tmp = Some((dir.clone(), 1 << 20));
        assert!(matches!(
            plan(&c, false, None),
            Err(SandboxError::Required { .. })
        ));
    }

    /// The mounts alone, applied in a forked child's own mount namespace: the host outside the
    /// writable area refuses even a chmod (read-only), the writable area takes writes, the
    /// protected directory refuses them (read-only bind), the denied file cannot be opened
    /// (masked), the pinned parent cannot be renamed; the host's view is untouched.
    #[test]
    fn mounts_alone_make_the_host_and_protected_read_only_and_mask_denied() {
        if !require_root() {
            return;
        }
        let dir = scratch("mounts");
        let ws = dir.join("ws");
        let prot = ws.join("sub").join("protected");
        std::fs::create_dir_all(&prot).expect("mkdir");
        let secret = ws.join("conf").join("secret");
        std::fs::create_dir_all(ws.join("conf")).expect("mkdir");
        std::fs::write(&secret, "SECRET").expect("write");
        let outside = dir.join("outside");
        std::fs::write(&outside, "O").expect("write");
        let mut c = confinement();
        c.write = vec![ws.clone()];
        c.protected = vec![prot.clone()];
        c.hidden = vec![secret.clone()];
        let (m, status) = plan(&c, true, None).expect("plan");
        assert_eq!(status, LayerStatus::Enforced);
        assert_eq!(
            (m.protected_read_only, m.denied_masked, m.writable),
            (1, 1, 1)
        );
        assert!(matches!(&m.steps[0], Step::Writable(p, _) if p.to_bytes().ends_with(b"/ws")));
        // The parents of the denied and protected paths are pinned, before the rest.
        let pinned = |i: usize, name: &[u8]| matches!(&m.steps[i], Step::Pin(p, _) if p.to_bytes().ends_with(name));
        assert!(pinned(1, b"/ws/sub") && pinned(2, b"/ws/conf"));
        let ns = ns_plan(m);
        let code = sys::testing::in_fork(|| {
            sys::testing::unshare(libc::CLONE_NEWNS).expect("unshare");
            sys::apply_mounts(&ns, None).expect("mounts");
            use std::os::unix::fs::PermissionsExt;
            let e = std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o600))
                .expect_err("read-only host");
            assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
            std::fs::write(ws.join("new"), "x").expect("the writable area takes writes");
            let e = std::fs::write(prot.join("f"), "x").expect_err("read-only");
            assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
            // Masked by /dev/null on a nodev mount: it cannot even be opened.
            let e = std::fs::read(&secret).expect_err("masked");
            assert_eq!(e.raw_os_error(), Some(libc::EACCES), "{e}");
            // Pinned parents cannot be moved away (nor the denied file out of its place).
            assert!(std::fs::rename(ws.join("sub"), ws.join("sub2")).is_err());
            assert!(std::fs::rename(ws.join("conf"), ws.join("conf2")).is_err());
            0
        });
        assert_eq!(code, 0);
        // Outside the child's namespace nothing changed.
        std::fs::write(prot.join("f"), "x").expect("host view writable");
        assert_eq!(std::fs::read_to_string(&secret).expect("read"), "SECRET");
        assert_eq!(std::fs::read_to_string(ws.join("new")).expect("read"), "x");
    }

    /// A writable area that is a link (a run replaced `target` by `target -> /elsewhere`),
    /// or lies below one, is refused with its name, never followed.
    #[test]
    fn a_writable_area_that_is_a_link_is_refused_with_its_name() {
        let dir = scratch("mounts-link");
        let elsewhere = dir.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).expect("mkdir");
        std::fs::create_dir_all(dir.join("ws")).expect("mkdir");
        std::os::unix::fs::symlink(&elsewhere, dir.join("ws/target")).expect("symlink");
        std::os::unix::fs::symlink(&elsewhere, dir.join("ws/up")).expect("symlink");
        for w in [dir.join("ws/target"), dir.join("ws/up/below")] {
            let mut c = confinement();
            c.write = vec![dir.join("ws"), w.clone()];
            let e = plan(&c, true, None).err().expect("refused");
            assert!(
                matches!(&e, SandboxError::WritableLink { path, .. } if *path == w),
                "{e}"
            );
            assert!(e.to_string().contains(&w.display().to_string()), "{e}");
        }
    }

    fn ns_plan(m: super::Mounts) -> sys::NsPlan {
        sys::NsPlan {
            net: false,
            loopback: false,
            proxy: None,
            userns: None,
            trees: (0..m.writable).map(|_| std::cell::Cell::new(-1)).collect(),
            read_only_host: m.read_only_host,
            mounts: m.steps,
            pid_max: None,
            tmpfs: m.tmpfs,
            cgroup_tasks: None,
            cgroup_fd: None,
            proc_access: m.proc_access,
        }
    }
}
