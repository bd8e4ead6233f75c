//! The run's mount tree, by descriptor: the broker pins what it decided about (`pin`: an
//! `openat2` that follows no link, and the object's identity), the helper builds the tree in
//! the run's own user and mount namespaces from descriptors it opens the same way and checks
//! against those identities (`apply`): writable areas cloned (`open_tree`) while the host is
//! still writable, everything made read-only (`mount_setattr(AT_RECURSIVE)`), the writable
//! clones moved back on top, then pins, read-only binds of protected paths and masks of
//! denied ones, each moved onto the descriptor it was checked through.
//!
//! Written by hand with raw syscalls: the helper runs between clone and execve and may not
//! allocate, and the new mount API (`open_tree`, `move_mount`, `mount_setattr`, `fsopen`) has
//! no wrapper in `libc`; `rustix` has some, but they take `impl Arg` paths that may allocate.

use super::stage;
use std::ffi::CStr;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

const OPEN_TREE_CLONE: u32 = 1;
const AT_RECURSIVE: u32 = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;
/// `mount_setattr` attribute bits.
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub(crate) const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x4;
pub(crate) const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const FSCONFIG_SET_FLAG: u32 = 0;
const FSCONFIG_SET_STRING: u32 = 1;
const FSCONFIG_SET_FD: u32 = 5;
const RESOLVE_BENEATH: u64 = 0x08;
const FSOPEN_CLOEXEC: u32 = 1;
const FSMOUNT_CLOEXEC: u32 = 1;
const FSCONFIG_CMD_CREATE: u32 = 6;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// What an object is: device and inode, as `fstat` gives them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub dir: bool,
    pub link: bool,
    /// Hard links (not part of what the object is: compared only by the broker).
    pub nlink: u64,
    /// Found through the run's capture overlay (`Step::Overlay`), where device and inode are
    /// the overlay's, not the object's: only the type is compared. Nothing of the agent can
    /// move it meanwhile: every run writes its own upper layer, never the workspace beneath.
    pub loose: bool,
}

impl Identity {
    /// The same object (device, inode, type; the type only when found through the overlay)?
    fn same(&self, o: &Identity) -> bool {
        if self.loose || o.loose {
            return (self.dir, self.link) == (o.dir, o.link);
        }
        (self.dev, self.ino, self.dir, self.link) == (o.dev, o.ino, o.dir, o.link)
    }
}

/// How the helper finds a path: following no link anywhere (it lies in a tree the agent can
/// write) and checked against the broker's identity, or as the host names it (outside every
/// writable tree: the agent cannot re-point it).
pub(crate) enum Find {
    /// `openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, then the identity must match.
    Pinned(Identity),
    /// `open(O_PATH)`, links followed (what the name reaches is what is masked).
    Named,
}

/// A mount of the run's tree, made by the helper in order.
pub(crate) enum Step {
    /// A writable area: cloned before the host is made read-only, moved back on top after.
    Writable(std::ffi::CString, Identity),
    /// A directory bound onto itself, writable: a mount point cannot be renamed or removed,
    /// so what lies below it (a protected path, a denied one) stays where it was decided.
    Pin(std::ffi::CString, Identity),
    /// A protected path: bound onto itself, read-only.
    ReadOnly(std::ffi::CString, Identity),
    /// A denied directory, hidden under an empty read-only tmpfs.
    MaskDir(std::ffi::CString, Find),
    /// A denied file (or other non-directory), hidden under `/dev/null` on a nodev mount.
    MaskFile(std::ffi::CString, Find),
    /// The workspace, captured: an overlay whose lower layer is the workspace and whose
    /// upper and work directories are `upper` and `work` in the call's capture directory
    /// `base` (in the state directory). Built while the host is still writable, attached in
    /// its place among the writable areas; `access`: the landlock rights on its root.
    Overlay {
        path: std::ffi::CString,
        id: Identity,
        base: std::ffi::CString,
        base_id: Identity,
        access: u64,
        /// For kernels that take layers by name only (before Linux 6.13): the workspace as
        /// `lowerdir+` takes it and, escaped, as `lowerdir` does (before 6.7); `base`'s
        /// `upper` and `work`.
        by_name: [std::ffi::CString; 4],
    },
}

impl Step {
    /// Takes a slot of the helper's detached trees (a writable area's copy, an overlay).
    fn has_tree(&self) -> bool {
        matches!(self, Step::Writable(..) | Step::Overlay { .. })
    }
}

/// Opens `path` as `O_PATH`, following no symlink in any component (`openat2`), and returns
/// the descriptor and what it is. `ELOOP`: a component is a link.
pub(crate) fn pin(path: &CStr) -> io::Result<(OwnedFd, Identity)> {
    let fd = open_nofollow(path);
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let id = identity(super::raw(&fd)).ok_or_else(io::Error::last_os_error)?;
    if id.link {
        // O_PATH | O_NOFOLLOW opens a trailing link itself: it is refused like one on the way.
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    Ok((fd, id))
}

/// `openat2(AT_FDCWD, path, O_PATH | O_NOFOLLOW | O_CLOEXEC, RESOLVE_NO_SYMLINKS |
/// RESOLVE_NO_MAGICLINKS)`: -1 and errno on failure. Async-signal-safe.
fn open_nofollow(path: &CStr) -> RawFd {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads a NUL-terminated path and an open_how of the size given, both
    // live for the call.
    unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        ) as RawFd
    }
}

/// `fstat` of a descriptor: its identity. Async-signal-safe.
fn identity(fd: RawFd) -> Option<Identity> {
    // SAFETY: fstat fills a zeroed stat struct on our stack.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `fd` is a descriptor we hold.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some(Identity {
        dev: st.st_dev,
        ino: st.st_ino,
        dir: st.st_mode & libc::S_IFMT == libc::S_IFDIR,
        link: st.st_mode & libc::S_IFMT == libc::S_IFLNK,
        nlink: st.st_nlink,
        loose: false,
    })
}

fn close(fd: RawFd) {
    // SAFETY: closing a descriptor the helper opened and owns.
    unsafe { libc::close(fd) };
}

/// Finds a step's path in the helper: the descriptor, `None` when it is gone or out of the
/// helper's reach (the command, with the same uid and no capability, cannot reach it either),
/// or the stage to report (errno set; an object other than the one the broker decided about
/// is `MOUNT_MOVED` with `ESTALE`).
fn find(path: &CStr, how: &Find, st: u32) -> Result<Option<RawFd>, u32> {
    let fd = match how {
        Find::Pinned(_) => open_nofollow(path),
        // SAFETY: open(2) of a NUL-terminated path as O_PATH.
        Find::Named => unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) },
    };
    if fd < 0 {
        return match super::errno() {
            libc::ENOENT | libc::EACCES => Ok(None),
            _ => Err(st),
        };
    }
    if let Find::Pinned(want) = how
        && !identity(fd).is_some_and(|id| id.same(want))
    {
        close(fd);
        set_errno(libc::ESTALE);
        return Err(stage::MOUNT_MOVED);
    }
    Ok(Some(fd))
}

fn set_errno(e: i32) {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = e };
}

/// `open_tree(fd, "", OPEN_TREE_CLONE | AT_RECURSIVE | AT_EMPTY_PATH)`: a detached copy of
/// the mount tree at `fd`. Async-signal-safe; -1 on failure.
fn clone_tree(fd: RawFd) -> RawFd {
    // SAFETY: open_tree with a descriptor, an empty static path and flags.
    unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            fd,
            c"".as_ptr(),
            OPEN_TREE_CLONE | AT_RECURSIVE | libc::AT_EMPTY_PATH as u32 | libc::O_CLOEXEC as u32,
        ) as RawFd
    }
}

/// `open_tree(fd, "", OPEN_TREE_CLONE | AT_EMPTY_PATH)`: a detached copy of the one mount at
/// `fd`, without the mounts below it (an overlay's layers may have no locked submounts).
fn clone_one(fd: RawFd) -> RawFd {
    // SAFETY: open_tree with a descriptor, an empty static path and flags.
    unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            fd,
            c"".as_ptr(),
            OPEN_TREE_CLONE | libc::AT_EMPTY_PATH as u32 | libc::O_CLOEXEC as u32,
        ) as RawFd
    }
}

/// A directory `name` beneath `dir`, as `O_PATH`, following no link. -1 on failure.
fn open_below(dir: RawFd, name: &CStr) -> RawFd {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH,
    };
    // SAFETY: openat2 reads a NUL-terminated name and an open_how of the size given, both
    // live for the call; `dir` is a descriptor we hold.
    unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            name.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        ) as RawFd
    }
}

/// The capture overlay of [`Step::Overlay`], detached: its lower layer a copy of the mount
/// at the workspace (found as decided), its upper and work directories beneath one copy of
/// the capture directory's mount (overlay wants both on one mount), every layer passed by
/// descriptor (`FSCONFIG_SET_FD`, Linux 6.13), `userxattr` (the only kind a user namespace
/// may write). -1 on failure (errno set).
fn overlay(
    path: &CStr,
    id: &Identity,
    base: &CStr,
    base_id: &Identity,
    by_name: &[std::ffi::CString; 4],
) -> Result<RawFd, u32> {
    let st = stage::MOUNT_OVERLAY;
    let Some(ws) = find(path, &Find::Pinned(*id), st)? else {
        set_errno(libc::ENOENT);
        return Err(st);
    };
    let Some(b) = find(base, &Find::Pinned(*base_id), st)? else {
        close(ws);
        set_errno(libc::ENOENT);
        return Err(st);
    };
    let lower = clone_one(ws);
    let base_tree = clone_one(b);
    close(ws);
    close(b);
    let upper = if base_tree >= 0 {
        open_below(base_tree, c"upper")
    } else {
        -1
    };
    let work = if base_tree >= 0 {
        open_below(base_tree, c"work")
    } else {
        -1
    };
    let mut m = if lower >= 0 && upper >= 0 && work >= 0 {
        overlay_fs(lower, upper, work)
    } else {
        -1
    };
    // A kernel that takes layers by name only: by the names just checked (nothing of the
    // agent runs yet in this namespace, and no run writes the workspace itself).
    if m < 0 {
        m = overlay_by_name(c"lowerdir+", &by_name[0], &by_name[2], &by_name[3]);
    }
    if m < 0 {
        m = overlay_by_name(c"lowerdir", &by_name[1], &by_name[2], &by_name[3]);
    }
    // SAFETY: errno is this thread's; saved across the closes below.
    let e = unsafe { *libc::__errno_location() };
    for fd in [lower, base_tree, upper, work] {
        if fd >= 0 {
            close(fd);
        }
    }
    if m < 0 {
        set_errno(e);
        return Err(st);
    }
    Ok(m)
}

/// `fsopen("overlay")` with the three layers by descriptor: the detached mount, or -1.
fn overlay_fs(lower: RawFd, upper: RawFd, work: RawFd) -> RawFd {
    overlay_with(|fs| {
        let set_fd = |k: &CStr, fd: RawFd| {
            // SAFETY: fsconfig on our fs context with a static key and a descriptor we hold.
            unsafe {
                libc::syscall(
                    libc::SYS_fsconfig,
                    fs,
                    FSCONFIG_SET_FD,
                    k.as_ptr(),
                    std::ptr::null::<libc::c_char>(),
                    fd,
                ) == 0
            }
        };
        set_fd(c"lowerdir+", lower) && set_fd(c"upperdir", upper) && set_fd(c"workdir", work)
    })
}

/// `fsopen("overlay")` with the layers by name (`lower_key`: `lowerdir+`, or `lowerdir`
/// with the name escaped): the detached mount, or -1.
fn overlay_by_name(lower_key: &CStr, lower: &CStr, upper: &CStr, work: &CStr) -> RawFd {
    overlay_with(|fs| {
        let set = |k: &CStr, v: &CStr| {
            // SAFETY: fsconfig on our fs context with NUL-terminated strings that live for
            // the call.
            unsafe {
                libc::syscall(
                    libc::SYS_fsconfig,
                    fs,
                    FSCONFIG_SET_STRING,
                    k.as_ptr(),
                    v.as_ptr(),
                    0,
                ) == 0
            }
        };
        set(lower_key, lower) && set(c"upperdir", upper) && set(c"workdir", work)
    })
}

/// An overlay's fs context (`userxattr`), its layers set by `layers`, created and mounted
/// detached: the mount, or -1 (errno kept). Async-signal-safe when `layers` is.
fn overlay_with(layers: impl Fn(RawFd) -> bool) -> RawFd {
    // SAFETY: the fs-context syscalls with static NUL-terminated strings; every descriptor
    // but the mount's is closed.
    unsafe {
        let fs = libc::syscall(libc::SYS_fsopen, c"overlay".as_ptr(), FSOPEN_CLOEXEC) as RawFd;
        if fs < 0 {
            return -1;
        }
        let ok = libc::syscall(
            libc::SYS_fsconfig,
            fs,
            FSCONFIG_SET_FLAG,
            c"userxattr".as_ptr(),
            std::ptr::null::<libc::c_char>(),
            0,
        ) == 0
            && layers(fs)
            && libc::syscall(
                libc::SYS_fsconfig,
                fs,
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_char>(),
                0,
            ) == 0;
        let m = if ok {
            libc::syscall(libc::SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV) as RawFd
        } else {
            -1
        };
        let e = *libc::__errno_location();
        libc::close(fs);
        *libc::__errno_location() = e;
        m
    }
}

/// `mount_setattr` on the tree at `fd` (and below), setting `set`.
fn set_attr(fd: RawFd, path: &CStr, set: u64) -> bool {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if path.is_empty() {
        AT_RECURSIVE | libc::AT_EMPTY_PATH as u32
    } else {
        AT_RECURSIVE
    };
    // SAFETY: mount_setattr reads a mount_attr of the size given from our stack and a
    // NUL-terminated path.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) == 0
    }
}

/// Attaches the detached tree `tree` on top of what `target` refers to.
fn move_onto(tree: RawFd, target: RawFd) -> bool {
    // SAFETY: move_mount between two descriptors we hold, with empty static paths.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            target,
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        ) == 0
    }
}

/// A detached, empty, read-only tmpfs (a mask for a denied directory). -1 on failure.
fn empty_tmpfs() -> RawFd {
    new_fs(
        c"tmpfs",
        &[(c"size", c"0"), (c"mode", c"000")],
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
    )
}

/// Attaches the detached tree `tree`, with `attrs` set on it, onto `target`; closes `tree`.
fn attach(tree: RawFd, attrs: u64, target: RawFd) -> bool {
    let ok = (attrs == 0 || set_attr(tree, c"", attrs)) && move_onto(tree, target);
    close(tree);
    ok
}

/// The run's mount tree, in the helper's new (so far shared-propagation) mount namespace,
/// owned by the run's user namespace. `trees` has one slot per [`Step::Writable`] (filled
/// here: the helper has its own copy of memory and allocates nothing). Async-signal-safe; on
/// failure, the stage (errno set).
pub(crate) fn apply(
    steps: &[Step],
    trees: &[std::cell::Cell<RawFd>],
    read_only_host: bool,
    landlock: Option<RawFd>,
) -> Result<(), u32> {
    // SAFETY: mount(2) with NULL source/fstype and a static target; changes propagation of our
    // own (new) mount namespace so nothing below leaks to the host.
    if unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(stage::MOUNT_PRIVATE);
    }
    // The writable areas, cloned, and the capture overlay, built, while the host's mounts
    // are still writable.
    for (s, slot) in steps.iter().filter(|s| s.has_tree()).zip(trees) {
        let t = match s {
            Step::Writable(p, id) => {
                let Some(fd) = find(p, &Find::Pinned(*id), stage::MOUNT_WRITABLE)? else {
                    continue;
                };
                let t = clone_tree(fd);
                close(fd);
                if t < 0 {
                    return Err(stage::MOUNT_WRITABLE);
                }
                t
            }
            Step::Overlay {
                path,
                id,
                base,
                base_id,
                by_name,
                ..
            } => overlay(path, id, base, base_id, by_name)?,
            _ => continue,
        };
        slot.set(t);
    }
    // Everything read-only: a chmod, utimes, setxattr or rename outside the writable areas
    // fails with EROFS, whoever runs.
    if read_only_host && !set_attr(libc::AT_FDCWD, c"/", MOUNT_ATTR_RDONLY) {
        return Err(stage::MOUNT_READONLY);
    }
    minimal_dev()?;
    let mut slot = 0;
    for s in steps {
        let tree = if s.has_tree() {
            slot += 1;
            trees.get(slot - 1).map_or(-1, |c| c.replace(-1))
        } else {
            -1
        };
        place(s, tree, landlock)?;
    }
    Ok(())
}

/// Makes one step's mount, after the host was made read-only (`tree`: a writable area's
/// copy, taken before). Async-signal-safe; on failure, the stage.
fn place(s: &Step, tree: RawFd, landlock: Option<RawFd>) -> Result<(), u32> {
    match s {
        Step::Overlay {
            path, id, access, ..
        } => {
            let st = stage::MOUNT_OVERLAY;
            let Some(fd) = find(path, &Find::Pinned(*id), st)? else {
                close(tree);
                set_errno(libc::ENOENT);
                return Err(st);
            };
            let ok = move_onto(tree, fd);
            close(fd);
            // The overlay's root has inodes of its own: the workspace's landlock rule (on
            // the directory beneath) does not cover it, so it gets its own, from the mount.
            let ruled = ok && landlock.is_none_or(|r| super::add_fd_rule(r, tree, *access));
            close(tree);
            if !ruled {
                return Err(st);
            }
        }
        Step::Writable(p, id) => {
            if tree < 0 {
                return Ok(());
            }
            let Some(fd) = find(p, &Find::Pinned(*id), stage::MOUNT_WRITABLE)? else {
                close(tree);
                return Ok(());
            };
            let ok = attach(tree, 0, fd);
            close(fd);
            if !ok {
                return Err(stage::MOUNT_WRITABLE);
            }
        }
        Step::Pin(p, id) | Step::ReadOnly(p, id) => {
            let ro = matches!(s, Step::ReadOnly(..));
            let st = if ro {
                stage::MOUNT_PROTECT
            } else {
                stage::MOUNT_PIN
            };
            let Some(fd) = find(p, &Find::Pinned(*id), st)? else {
                return Ok(());
            };
            let t = clone_tree(fd);
            let attrs = if ro {
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
            } else {
                0
            };
            let ok = t >= 0 && attach(t, attrs, fd);
            close(fd);
            if !ok {
                return Err(st);
            }
        }
        Step::MaskDir(p, how) | Step::MaskFile(p, how) => {
            let Some(fd) = find(p, how, stage::MOUNT_DENY)? else {
                return Ok(());
            };
            let dir = matches!(s, Step::MaskDir(..));
            let t = if dir {
                empty_tmpfs()
            } else {
                // SAFETY: open_tree of a static path, a detached copy of /dev/null.
                unsafe {
                    libc::syscall(
                        libc::SYS_open_tree,
                        libc::AT_FDCWD,
                        c"/dev/null".as_ptr(),
                        OPEN_TREE_CLONE | libc::O_CLOEXEC as u32,
                    ) as RawFd
                }
            };
            let attrs = if dir {
                0
            } else {
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC
            };
            let ok = t >= 0 && attach(t, attrs, fd);
            close(fd);
            if !ok {
                return Err(stage::MOUNT_DENY);
            }
        }
    }
    Ok(())
}

/// The devices of a run's minimal /dev, bound from the host's (the same inodes: the policy's
/// landlock rules on them hold).
const DEVICES: [&CStr; 6] = [c"null", c"zero", c"full", c"random", c"urandom", c"tty"];

/// Replaces /dev with a minimal one, as bubblewrap's `--dev` does: a small tmpfs holding the
/// [`DEVICES`] bound from the host's, a fresh devpts instance (`ptmx` a link into it), the
/// usual links into /proc/self/fd and an empty `shm` (the private /dev/shm goes on it later);
/// the tmpfs itself read-only. Disks, memory devices, consoles and every other node of the
/// host are simply not there. Async-signal-safe; on failure, the stage.
pub(crate) fn minimal_dev() -> Result<(), u32> {
    let mut devs: [RawFd; DEVICES.len()] = [-1; DEVICES.len()];
    let mut path = [0u8; 16];
    for (slot, name) in devs.iter_mut().zip(DEVICES) {
        let Some(p) = dev_path(&mut path, name) else {
            continue;
        };
        // SAFETY: open_tree of a NUL-terminated path in a stack buffer: a detached copy of
        // the host's device node (-1 when it does not exist, e.g. no /dev/tty in a container).
        *slot = unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                p.as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as u32,
            ) as RawFd
        };
    }
    let r = build_dev(&devs);
    for fd in devs.into_iter().filter(|&f| f >= 0) {
        close(fd);
    }
    r
}

/// "/dev/NAME" in `buf`, NUL-terminated.
fn dev_path<'b>(buf: &'b mut [u8; 16], name: &CStr) -> Option<&'b CStr> {
    let n = name.to_bytes();
    if 5 + n.len() + 1 > buf.len() {
        return None;
    }
    buf[..5].copy_from_slice(b"/dev/");
    buf[5..5 + n.len()].copy_from_slice(n);
    buf[5 + n.len()] = 0;
    CStr::from_bytes_with_nul(&buf[..5 + n.len() + 1]).ok()
}

/// A detached mount of a fresh filesystem `fstype` configured with `opts` (key, value).
fn new_fs(fstype: &CStr, opts: &[(&CStr, &CStr)], attrs: u64) -> RawFd {
    // SAFETY: the fs-context syscalls with NUL-terminated strings that live for the calls;
    // every descriptor but the mount's is closed.
    unsafe {
        let fs = libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC) as RawFd;
        if fs < 0 {
            return -1;
        }
        let mut ok = true;
        for (k, v) in opts {
            ok = ok
                && libc::syscall(
                    libc::SYS_fsconfig,
                    fs,
                    FSCONFIG_SET_STRING,
                    k.as_ptr(),
                    v.as_ptr(),
                    0,
                ) == 0;
        }
        ok = ok
            && libc::syscall(
                libc::SYS_fsconfig,
                fs,
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_char>(),
                0,
            ) == 0;
        let m = if ok {
            libc::syscall(libc::SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs) as RawFd
        } else {
            -1
        };
        libc::close(fs);
        m
    }
}

fn build_dev(devs: &[RawFd]) -> Result<(), u32> {
    let st = stage::MOUNT_DEV;
    let dev = new_fs(
        c"tmpfs",
        &[(c"mode", c"0755"), (c"size", c"64k"), (c"nr_inodes", c"64")],
        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
    );
    if dev < 0 {
        return Err(st);
    }
    // SAFETY: *at calls relative to the detached tmpfs we own, with static NUL-terminated
    // names; each created file's descriptor is closed at once.
    let ok = unsafe {
        let mut ok = true;
        for (name, &fd) in DEVICES.iter().zip(devs) {
            if fd >= 0 {
                let f = libc::openat(
                    dev,
                    name.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o666,
                );
                ok = ok && f >= 0;
                if f >= 0 {
                    libc::close(f);
                }
            }
        }
        for d in [c"pts", c"shm"] {
            ok = ok && libc::mkdirat(dev, d.as_ptr(), 0o755) == 0;
        }
        for (target, name) in [
            (c"pts/ptmx", c"ptmx"),
            (c"/proc/self/fd", c"fd"),
            (c"/proc/self/fd/0", c"stdin"),
            (c"/proc/self/fd/1", c"stdout"),
            (c"/proc/self/fd/2", c"stderr"),
        ] {
            ok = ok && libc::symlinkat(target.as_ptr(), dev, name.as_ptr()) == 0;
        }
        ok
    };
    // The device nodes, bound onto their empty files while the tmpfs is still detached.
    let mut ok = ok;
    for (name, &fd) in DEVICES.iter().zip(devs) {
        if fd < 0 || !ok {
            continue;
        }
        // SAFETY: openat of a static name under the tmpfs we own, as O_PATH.
        let target = unsafe { libc::openat(dev, name.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        ok = target >= 0 && move_onto(fd, target);
        if target >= 0 {
            close(target);
        }
    }
    // A devpts of the run's own (its ptys are not the host's).
    if ok {
        let pts = new_fs(
            c"devpts",
            &[(c"ptmxmode", c"0666"), (c"mode", c"0620")],
            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
        );
        // SAFETY: openat of a static name under the tmpfs we own, as O_PATH.
        let target = unsafe { libc::openat(dev, c"pts".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        ok = pts >= 0 && target >= 0 && move_onto(pts, target);
        for fd in [pts, target] {
            if fd >= 0 {
                close(fd);
            }
        }
    }
    // SAFETY: move_mount of the detached tmpfs onto the static path /dev.
    let ok = ok
        && set_attr_one(dev, MOUNT_ATTR_RDONLY)
        && unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                dev,
                c"".as_ptr(),
                libc::AT_FDCWD,
                c"/dev".as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            ) == 0
        };
    close(dev);
    if ok { Ok(()) } else { Err(st) }
}

/// `mount_setattr` on the one mount `fd` refers to (not below it).
fn set_attr_one(fd: RawFd, set: u64) -> bool {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr reads a mount_attr of the size given from our stack.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as u32,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) == 0
    }
}
