//! Every `unsafe` of the crate: process creation, the confinement steps between fork and exec,
//! and the few syscalls that have no safe wrapper in our dependencies.
//!
//! Between `clone` and `execve` the child must be async-signal-safe: it may not allocate, lock
//! or unwind. Everything it needs (C strings, pointer arrays, the landlock ruleset fd, the
//! seccomp BPF program) is prepared by the parent in [`ChildPlan`], and the child only makes raw
//! syscalls through `libc`. The `caps` crate allocates (it builds `HashSet`s), so capability
//! dropping is written here with `prctl`/`capset` directly; the same holds for mounts.
//!
//! A leaf under every module that needs a raw syscall (the sandbox above all): it imports
//! nothing of the crate.
//!
//! Over 1,000 lines by rule: it is the one module allowed `unsafe` (with `mount.rs` beneath
//! it; DESIGN.md), so every raw syscall lives here.
#![allow(unsafe_code)]

pub(crate) mod mount;

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Stages reported by the child when a step fails (the record's first word).
pub(crate) mod stage {
    pub const EXIT_STATUS: u32 = 1;
    pub const MOUNT_PRIVATE: u32 = 10;
    pub const MOUNT_DENY: u32 = 11;
    pub const MOUNT_PROTECT: u32 = 12;
    pub const MOUNT_PROC: u32 = 13;
    pub const PID_MAX: u32 = 14;
    pub const LOOPBACK: u32 = 15;
    pub const FORK: u32 = 16;
    pub const PROC_RULE: u32 = 17;
    pub const MOUNT_TMP: u32 = 18;
    pub const PDEATHSIG: u32 = 19;
    pub const CGROUP: u32 = 32;
    pub const STDIO: u32 = 20;
    pub const CHDIR: u32 = 21;
    pub const RLIMIT: u32 = 22;
    pub const SECUREBITS: u32 = 23;
    pub const CAP_BOUNDING: u32 = 24;
    pub const CAP_AMBIENT: u32 = 25;
    pub const CAPSET: u32 = 26;
    pub const NO_NEW_PRIVS: u32 = 27;
    pub const LANDLOCK: u32 = 28;
    pub const SECCOMP: u32 = 29;
    pub const SETSID: u32 = 30;
    pub const EXEC: u32 = 31;
    pub const IDENTITY: u32 = 33;
    pub const USERNS: u32 = 34;
    pub const MOUNT_WRITABLE: u32 = 35;
    pub const MOUNT_READONLY: u32 = 36;
    pub const MOUNT_PIN: u32 = 37;
    pub const MOUNT_MOVED: u32 = 38;
    pub const MOUNT_DEV: u32 = 39;
    pub const PROXY: u32 = 40;
    pub const MOUNT_OVERLAY: u32 = 41;

    /// Human name of a stage, for errors.
    pub fn name(s: u32) -> &'static str {
        match s {
            MOUNT_PRIVATE => "making the mount namespace private",
            MOUNT_DENY => "masking a denied path in the mount namespace",
            MOUNT_PROTECT => "making a protected path read-only",
            MOUNT_PROC => "mounting /proc for the pid namespace",
            PID_MAX => "setting pid_max in the pid namespace",
            LOOPBACK => "bringing up the loopback interface",
            FORK => "forking the command inside the pid namespace",
            PROC_RULE => "adding a landlock rule for a fresh mount (/proc, TMPDIR)",
            MOUNT_TMP => "mounting the private TMPDIR",
            PDEATHSIG => "tying the sandbox's life to the broker's",
            CGROUP => "joining the memory cgroup",
            STDIO => "setting up stdin/stdout/stderr",
            CHDIR => "changing to the working directory",
            RLIMIT => "setting resource limits",
            SECUREBITS => "locking securebits",
            CAP_BOUNDING => "dropping the capability bounding set",
            CAP_AMBIENT => "clearing ambient capabilities",
            CAPSET => "clearing capabilities",
            NO_NEW_PRIVS => "setting no_new_privs",
            LANDLOCK => "applying the landlock ruleset",
            SECCOMP => "installing the seccomp filter",
            SETSID => "starting a new session",
            EXEC => "executing the program",
            USERNS => {
                "entering the run's user namespace (the broker could not map the caller's uid and gid into it)"
            }
            MOUNT_WRITABLE => "binding a writable area read-write onto the read-only host",
            MOUNT_READONLY => "making the host read-only in the run's mount namespace",
            MOUNT_PIN => "pinning a directory above a protected or denied path",
            MOUNT_MOVED => {
                "binding a path the broker pinned: it was replaced (renamed, re-pointed) between the check and the mount; nothing ran, try again"
            }
            MOUNT_DEV => "building the run's minimal /dev",
            MOUNT_OVERLAY => {
                "mounting the overlay that captures the run's changes to the workspace"
            }
            PROXY => "listening for the egress proxy on the namespace's loopback",
            IDENTITY => {
                "taking the caller's uid and gid (the daemon needs CAP_SETUID and CAP_SETGID to serve other users)"
            }
            _ => "setting up the sandbox",
        }
    }
}

/// The type of setrlimit's resource argument (glibc and musl differ).
#[cfg(target_env = "gnu")]
pub(crate) type RlimitResource = libc::__rlimit_resource_t;
/// The type of setrlimit's resource argument (glibc and musl differ).
#[cfg(not(target_env = "gnu"))]
pub(crate) type RlimitResource = libc::c_int;

/// `struct clone_args` (version 2, with `cgroup`).
#[repr(C)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Namespace work done by the pid-1 helper.
pub(crate) struct NsPlan {
    /// A new network namespace.
    pub net: bool,
    /// Bring up its loopback interface (`loopback` network; `none` leaves it down).
    pub loopback: bool,
    /// The `proxy` network: listen on `127.0.0.1:port` in the namespace and send the
    /// listening socket to the broker over this socket (`SCM_RIGHTS`).
    pub proxy: Option<(RawFd, u16)>,
    /// The run's own user namespace, and the uid and gid maps the broker writes for it.
    pub userns: Option<UserMaps>,
    /// The run's mount tree, in order (see [`mount::apply`]).
    pub mounts: Vec<mount::Step>,
    /// One slot per writable area, for the helper's detached copies.
    pub trees: Vec<std::cell::Cell<RawFd>>,
    /// Make the host read-only (not when the policy writes `/`).
    pub read_only_host: bool,
    pub pid_max: Option<CString>,
    /// Fresh tmpfs mounts (the private TMPDIR and /dev/shm): path, mount options, and the
    /// landlock access to grant on it (added after mounting, like /proc).
    pub tmpfs: Vec<(CString, CString, u64)>,
    /// cgroup v1: the cgroup's `tasks` file; the helper writes `0` to move itself in.
    pub cgroup_tasks: Option<RawFd>,
    /// v2: an fd of the run's cgroup, to be cloned into (clone3 CLONE_INTO_CGROUP).
    pub cgroup_fd: Option<RawFd>,
    /// Landlock access (bits) to grant on the fresh /proc; 0 = none. A rule on the host's /proc
    /// inode does not cover the new procfs, so the helper adds it after mounting.
    pub proc_access: u64,
}

/// The maps of a run's user namespace, written by the broker into `/proc/PID/` once the
/// helper exists (the helper waits for them on a pipe).
pub(crate) struct UserMaps {
    /// `uid_map`'s text.
    pub uid: String,
    /// `gid_map`'s text.
    pub gid: String,
    /// Write `deny` to `setgroups` first (required of an unprivileged broker for a gid map).
    pub deny_setgroups: bool,
}

/// Everything the child needs, prepared by the parent so the child does not allocate.
pub(crate) struct ChildPlan {
    pub path: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    pub cwd: CString,
    pub stdin: Option<RawFd>,
    pub stdout: RawFd,
    pub stderr: RawFd,
    pub report: RawFd,
    pub landlock: Option<RawFd>,
    pub bpf: Vec<libc::sock_filter>,
    pub rlimits: Vec<(RlimitResource, libc::rlim_t, libc::rlim_t)>,
    pub ns: Option<NsPlan>,
    pub cap_last: u32,
    pub privileged: bool,
    /// uid, gid and groups the command takes before its capabilities are cleared.
    pub identity: Option<(u32, u32, Vec<u32>)>,
    /// Stack for the command's vfork-style clone (allocated by the parent).
    pub stack: Vec<u8>,
    /// A pidfd of the broker itself, for the helper's check that the broker is still alive.
    pub broker_pidfd: RawFd,
    /// The broker's own ends of pipes (the write end of a filtered stdin): the helper, which
    /// never execs, closes them first, or the command would never see end of file.
    pub broker_only: Vec<RawFd>,
}

/// Size of [`ChildPlan::stack`]: the command's setup runs only raw syscalls.
pub(crate) const CHILD_STACK: usize = 256 * 1024;

/// What the command's clone callback receives.
struct CommandArgs<'a> {
    plan: &'a ChildPlan,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
}

extern "C" fn command_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points to a CommandArgs on the stack of the (suspended, CLONE_VFORK) parent
    // of this process, valid until this process execs or exits.
    let args = unsafe { &*(arg as *const CommandArgs<'_>) };
    command_main(args.plan, args.argv, args.envp)
}

/// Starts the command with clone(CLONE_VM | CLONE_VFORK) on the plan's stack, like
/// posix_spawn: no page tables are copied, and the caller is suspended until the command execs
/// or exits. Returns its pid or -1.
fn spawn_command(
    plan: &ChildPlan,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
) -> libc::pid_t {
    let args = CommandArgs { plan, argv, envp };
    let base = plan.stack.as_ptr() as usize;
    // The stack grows down: start at the (16-byte aligned) top of the buffer.
    let top = (base + plan.stack.len()) & !15usize;
    // SAFETY: glibc's clone switches to `top` (inside a live buffer owned by `plan`) and calls
    // `command_entry(&args)`. With CLONE_VFORK this thread does not run again until the child
    // has exec'd or exited, so `args` and the stack outlive their use, and the child's writes
    // to shared memory (errno in our TLS) cannot race with us.
    unsafe {
        libc::clone(
            command_entry,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &args as *const CommandArgs<'_> as *mut libc::c_void,
        )
    }
}

const PROC: &std::ffi::CStr = c"/proc";
const PID_MAX_PATH: &std::ffi::CStr = c"/proc/sys/kernel/pid_max";
const TMPFS: &std::ffi::CStr = c"tmpfs";

/// Starts the confined child. With `plan.ns`, the child is pid 1 of new pid, mount and ipc (and
/// net) namespaces; it sets them up, forks the command and reports its wait status. Returns
/// the direct child's pid and a pidfd for it.
pub(crate) fn spawn(plan: &ChildPlan) -> Result<(libc::pid_t, OwnedFd), SpawnError> {
    let argv_ptrs: Vec<*const libc::c_char> = plan
        .argv
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp_ptrs: Vec<*const libc::c_char> = plan
        .envp
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let pid: libc::pid_t = match &plan.ns {
        None => {
            let pid = spawn_command(plan, &argv_ptrs, &envp_ptrs);
            if pid < 0 {
                return Err(SpawnError::Clone(io::Error::last_os_error()));
            }
            pid
        }
        Some(ns) => {
            // The helper waits on this pipe until the broker has written its user
            // namespace's maps (it can do nothing as an unmapped user).
            let sync = match &ns.userns {
                Some(_) => Some(pipe_cloexec().map_err(SpawnError::Other)?),
                None => None,
            };
            let flags =
                (libc::SIGCHLD | namespace_flags(ns.net, ns.userns.is_some())) as libc::c_ulong;
            let (pid, join_by_write) = clone_helper(flags, ns.cgroup_fd);
            if pid < 0 {
                let e = io::Error::last_os_error();
                if let Some((r, w)) = sync {
                    close_fd(r);
                    close_fd(w);
                }
                return Err(SpawnError::Clone(e));
            }
            if pid == 0 {
                init_main(plan, ns, sync, join_by_write, &argv_ptrs, &envp_ptrs);
            }
            let pid = pid as libc::pid_t;
            if let (Some(maps), Some((r, w))) = (&ns.userns, sync) {
                close_fd(r);
                let written = write_maps(pid, maps);
                if written.is_ok() {
                    // SAFETY: a one-byte write from a static to the pipe's write end we own.
                    unsafe { libc::write(w, b"1".as_ptr().cast(), 1) };
                }
                close_fd(w);
                if let Err(e) = written {
                    kill(pid, libc::SIGKILL);
                    let _ = wait(pid);
                    return Err(SpawnError::UserMaps(e));
                }
            }
            pid
        }
    };
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        kill(pid, libc::SIGKILL);
        let _ = wait(pid);
        return Err(SpawnError::Other(e));
    }
    // SAFETY: `fd` was just returned by pidfd_open and is owned by nobody else.
    Ok((pid, unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
}

/// Why the child could not be started.
#[derive(Debug)]
pub(crate) enum SpawnError {
    /// clone(2) failed: with namespaces, EPERM, ENOSPC or EUSERS say that user namespaces
    /// are refused here.
    Clone(io::Error),
    /// The run's user namespace could not be given its uid and gid maps.
    UserMaps(io::Error),
    /// Anything else (a pipe, a pidfd).
    Other(io::Error),
}

/// Clones the helper into the namespaces of `flags` (and the cgroup `cgroup`, a v2 directory
/// fd, with clone3). Where clone3 is refused (ENOSYS: an old kernel, a seccomp filter), falls
/// back to clone, and the helper joins the cgroup itself: then the second value is true.
/// Returns (pid, 0 in the child, -1 with errno on failure; joins-by-write).
fn clone_helper(flags: libc::c_ulong, cgroup: Option<RawFd>) -> (libc::c_long, bool) {
    if let Some(cg) = cgroup {
        let args = CloneArgs {
            // clone3 takes the exit signal separately, not in the flags' low byte.
            flags: (flags & !0xff) | CLONE_INTO_CGROUP,
            pidfd: 0,
            child_tid: 0,
            parent_tid: 0,
            exit_signal: libc::SIGCHLD as u64,
            stack: 0,
            stack_size: 0,
            tls: 0,
            set_tid: 0,
            set_tid_size: 0,
            cgroup: cg as u64,
        };
        // SAFETY: clone3 without a stack behaves like fork: the child gets a copy-on-write
        // copy of the address space and continues here, in the cgroup `cg`; `args` is a valid
        // clone_args (version 2) on our stack. The child then runs only async-signal-safe code
        // (raw syscalls on memory prepared by the parent) and never returns from `init_main`.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        if pid >= 0 || errno() != libc::ENOSYS {
            return (pid, false);
        }
    }
    // SAFETY: clone with a NULL stack behaves like fork (as above).
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    (pid, cgroup.is_some())
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe_cloexec() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two fds into a live array of two.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

fn close_fd(fd: RawFd) {
    // SAFETY: closing a descriptor this function's caller owns.
    unsafe { libc::close(fd) };
}

/// Writes the helper's user namespace maps (`setgroups` first when asked).
fn write_maps(pid: libc::pid_t, maps: &UserMaps) -> io::Result<()> {
    let write = |name: &str, text: &str| {
        let path = format!("/proc/{pid}/{name}");
        // not-ws: the run's own /proc/PID files, written once by the broker
        std::fs::write(&path, text)
            .map_err(|e| io::Error::new(e.kind(), format!("writing {path}: {e}")))
    };
    if maps.deny_setgroups {
        write("setgroups", "deny")?;
    }
    write("uid_map", &maps.uid)?;
    write("gid_map", &maps.gid)
}

/// The namespaces the helper is cloned into: pid, mount, ipc and uts, net if `net`, and its
/// own user namespace if `user`.
pub(crate) fn namespace_flags(net: bool, user: bool) -> libc::c_int {
    let mut flags =
        libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    if net {
        flags |= libc::CLONE_NEWNET;
    }
    if user {
        flags |= libc::CLONE_NEWUSER;
    }
    flags
}

/// Writes an 8-byte record (stage, value) to the report pipe. Async-signal-safe.
fn report(fd: RawFd, st: u32, value: i32) {
    let mut buf = [0u8; 8];
    buf[..4].copy_from_slice(&st.to_ne_bytes());
    buf[4..].copy_from_slice(&value.to_ne_bytes());
    // SAFETY: writes 8 bytes from a stack buffer to an fd; a short or failed write is ignored
    // because the parent treats a missing record as an unexplained failure.
    unsafe {
        libc::write(fd, buf.as_ptr().cast(), buf.len());
    }
}

pub(crate) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn fail(fd: RawFd, st: u32) -> ! {
    report(fd, st, errno());
    // SAFETY: _exit ends the process without running destructors or atexit handlers, which is
    // what a forked child must do.
    unsafe { libc::_exit(125) }
}

/// Pid 1 of the new namespaces: cgroup, mounts, /proc, then fork the command and wait for it.
fn init_main(
    plan: &ChildPlan,
    ns: &NsPlan,
    sync: Option<(RawFd, RawFd)>,
    join_by_write: bool,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
) -> ! {
    let r = plan.report;
    // Wait for the broker to write this user namespace's maps: a byte, or end of file if it
    // could not (it then kills us).
    if let Some((sr, sw)) = sync {
        let mut b = 0u8;
        // SAFETY: close our copy of the write end, then a one-byte read into a live local.
        let n = unsafe {
            libc::close(sw);
            let n = libc::read(sr, (&mut b as *mut u8).cast(), 1);
            libc::close(sr);
            n
        };
        if n != 1 {
            // SAFETY: see `fail`.
            unsafe { libc::_exit(1) };
        }
    }
    for &fd in &plan.broker_only {
        // SAFETY: closing our copy of an fd that belongs to the broker.
        unsafe { libc::close(fd) };
    }
    // If the broker dies (Ctrl-C, SIGKILL), so does this helper, and with it, as pid 1, every
    // process of the run. (The death signal follows the thread that cloned us: callers must
    // spawn from a thread that outlives the run, which the CLI's main thread does.)
    // SAFETY: prctl with integer arguments only.
    if unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    } != 0
    {
        fail(r, stage::PDEATHSIG);
    }
    // The broker may have died before the prctl took effect: its pidfd is then readable.
    let mut pfd = libc::pollfd {
        fd: plan.broker_pidfd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one valid pollfd with a zero timeout; then close our copy of the fd.
    unsafe {
        if libc::poll(&mut pfd, 1, 0) != 0 {
            libc::_exit(1);
        }
        libc::close(plan.broker_pidfd);
    }
    if let Some(tasks) = ns.cgroup_tasks
        && let Err(st) = join_cgroup_v1(tasks)
    {
        fail(r, st);
    }
    if join_by_write
        && let Some(cg) = ns.cgroup_fd
        && let Err(st) = join_cgroup_v2(cg)
    {
        fail(r, st);
    }
    if let Err(st) = apply_mounts(ns, plan.landlock) {
        fail(r, st);
    }
    if let Err(st) = finish_namespaces(ns, plan.landlock) {
        fail(r, st);
    }
    let child = spawn_command(plan, argv, envp);
    if child < 0 {
        fail(r, stage::FORK);
    }
    keep_only(r, plan);
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a valid out-pointer; reaps any process re-parented to us.
        let w = unsafe { libc::waitpid(-1, &mut status, 0) };
        if w == child {
            // The command is done: kill everything else in the namespace and reap it all, so
            // that when the broker reads the status nothing of the run is alive. (The kernel
            // would do the same when pid 1 exits, but only after tearing down the mount
            // namespace, which waits for an RCU grace period; this way the broker does not.)
            // SAFETY: kill(-1) from pid 1 signals every other process in this pid namespace.
            unsafe { libc::kill(-1, libc::SIGKILL) };
            loop {
                let mut st = 0;
                // SAFETY: as above.
                let w = unsafe { libc::waitpid(-1, &mut st, 0) };
                if w < 0 && errno() != libc::EINTR {
                    break;
                }
            }
            report(r, stage::EXIT_STATUS, status);
            // SAFETY: see `fail`.
            unsafe { libc::_exit(0) };
        }
        if w < 0 && errno() != libc::EINTR {
            // SAFETY: see `fail`.
            unsafe { libc::_exit(1) };
        }
    }
}

/// The helper, once the command is started, keeps only the report pipe `r`: the command's
/// output pipes must close when the command's side does, and nothing else the broker had
/// open when it forked the helper (a daemon's: other clients' pipes, the lock of `intents/`,
/// the proxy's socket pair) may be held for the run's life. Async-signal-safe.
fn keep_only(r: RawFd, plan: &ChildPlan) {
    // SAFETY: close_range over fds this process owns copies of, around the one it keeps;
    // errors are irrelevant (a kernel without close_range: the plan's own fds are closed
    // one by one).
    unsafe {
        let all = libc::c_uint::MAX;
        let r = r as libc::c_uint;
        let below = r == 0
            || libc::syscall(
                libc::SYS_close_range,
                0 as libc::c_uint,
                r - 1,
                0 as libc::c_uint,
            ) == 0;
        let above = libc::syscall(libc::SYS_close_range, r + 1, all, 0 as libc::c_uint) == 0;
        if !(below && above) {
            libc::close(plan.stdout);
            libc::close(plan.stderr);
            if let Some(fd) = plan.stdin {
                libc::close(fd);
            }
            if let Some(fd) = plan.landlock {
                libc::close(fd);
            }
        }
    }
}

/// The cgroup layer on cgroup v1, in the helper: moves this (single-threaded) process into
/// the cgroup whose `tasks` file is open as `tasks`, and closes it. (On v2 the helper is cloned
/// into its cgroup.) Async-signal-safe; on failure, the stage.
fn join_cgroup_v1(tasks: RawFd) -> Result<(), u32> {
    // SAFETY: a one-byte write of "0" (this thread) to the cgroup's tasks file.
    let ok = unsafe { libc::write(tasks, b"0".as_ptr().cast(), 1) } == 1;
    // SAFETY: closing our copy of the fd (a successful close leaves the write's errno).
    unsafe { libc::close(tasks) };
    if ok { Ok(()) } else { Err(stage::CGROUP) }
}

/// The cgroup layer on cgroup v2 where clone3 was refused: the helper moves itself into the
/// cgroup `cg` (a directory fd) by writing `0` to its `cgroup.procs`. Async-signal-safe.
fn join_cgroup_v2(cg: RawFd) -> Result<(), u32> {
    // SAFETY: openat of a static name under a directory fd we hold, a one-byte write, close.
    let ok = unsafe {
        let fd = libc::openat(
            cg,
            c"cgroup.procs".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        let ok = fd >= 0 && libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
        if fd >= 0 {
            libc::close(fd);
        }
        ok
    };
    if ok { Ok(()) } else { Err(stage::CGROUP) }
}

/// The mounts layer in the helper's (new, so far shared-propagation) mount namespace: the
/// run's tree ([`mount::apply`]: the host read-only, writable areas, pins, protected paths
/// and masks by descriptor), then the fresh tmpfs mounts (each with its landlock rule on
/// `landlock`, the ruleset not yet applied). Async-signal-safe; on failure, the stage (errno
/// still set).
pub(crate) fn apply_mounts(ns: &NsPlan, landlock: Option<RawFd>) -> Result<(), u32> {
    mount::apply(&ns.mounts, &ns.trees, ns.read_only_host, landlock)?;
    for (path, opts, access) in &ns.tmpfs {
        // A mount point inside a fresh tmpfs mounted just before (the TMPDIR's in the run's
        // own /tmp) is made here; one that exists is left as it is (EEXIST, EROFS ignored).
        // SAFETY: mkdir(2) of a NUL-terminated path owned by `plan`.
        unsafe { libc::mkdir(path.as_ptr(), 0o700) };
        // SAFETY: mounts a tmpfs on a directory that exists; all pointers are NUL-terminated
        // strings owned by `plan`.
        let rc = unsafe {
            libc::mount(
                TMPFS.as_ptr(),
                path.as_ptr(),
                TMPFS.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                opts.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(stage::MOUNT_TMP);
        }
        if let Some(ruleset) = landlock
            && !add_path_rule(ruleset, path, *access)
        {
            return Err(stage::PROC_RULE);
        }
    }
    Ok(())
}

/// The rest of the namespaces layer, in the helper: a fresh /proc (with its landlock rule),
/// `pid_max`, and `lo` up for `loopback`. Async-signal-safe; on failure, the stage.
fn finish_namespaces(ns: &NsPlan, landlock: Option<RawFd>) -> Result<(), u32> {
    // SAFETY: mounts a fresh procfs for our pid namespace over /proc; static strings.
    if unsafe {
        libc::mount(
            c"proc".as_ptr(),
            PROC.as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(stage::MOUNT_PROC);
    }
    if ns.proc_access != 0
        && let Some(ruleset) = landlock
        && !add_path_rule(ruleset, PROC, ns.proc_access)
    {
        return Err(stage::PROC_RULE);
    }
    if let Some(v) = &ns.pid_max {
        // SAFETY: open/write/close of a procfs file with a prepared NUL-terminated value.
        let ok = unsafe {
            let fd = libc::open(PID_MAX_PATH.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            let bytes = v.as_bytes();
            let ok = fd >= 0
                && libc::write(fd, bytes.as_ptr().cast(), bytes.len()) == bytes.len() as isize;
            if fd >= 0 {
                libc::close(fd);
            }
            ok
        };
        if !ok {
            return Err(stage::PID_MAX);
        }
    }
    if ns.loopback && !loopback_up() {
        return Err(stage::LOOPBACK);
    }
    if let Some((to, port)) = ns.proxy
        && !proxy_listen(to, port)
    {
        return Err(stage::PROXY);
    }
    Ok(())
}

/// Listens on `127.0.0.1:port` (this network namespace's loopback) and sends the listening
/// socket over `to` to the broker, whose proxy accepts on it; closes both here. The command
/// inherits neither. Async-signal-safe.
fn proxy_listen(to: RawFd, port: u16) -> bool {
    // SAFETY: socket/setsockopt/bind/listen/sendmsg/close on fds this process owns, with
    // structs zero-initialised on the stack; the control buffer is sized and aligned for one
    // fd (CMSG_SPACE) and written through the CMSG_* accessors within it.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return false;
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            s,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_port = port.to_be();
        sa.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let ok = libc::bind(
            s,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) == 0
            && libc::listen(s, 128) == 0;
        if !ok {
            libc::close(s);
            return false;
        }
        #[repr(C)]
        union Control {
            buf: [u8; 64],
            _align: libc::cmsghdr,
        }
        let mut control: Control = std::mem::zeroed();
        let mut byte = [b'L'];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = (&mut control as *mut Control).cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            libc::close(s);
            return false;
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), s);
        let sent = libc::sendmsg(to, &msg, libc::MSG_NOSIGNAL) == 1;
        libc::close(s);
        libc::close(to);
        sent
    }
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

const LANDLOCK_RULE_PATH_BENEATH: u32 = 1;

/// Adds a landlock path-beneath rule for `path` to the ruleset: `access` if it is a directory,
/// `access & file_access` otherwise. Returns Ok(false) when the path cannot be opened (it
/// grants nothing then). Written here rather than with the `landlock` crate's `PathBeneath`
/// because the crate fstat()s every path to learn its type, and our rule list would fstat it
/// again: the kernel's EINVAL for directory rights on a file tells the same for free.
pub(crate) fn add_landlock_rule(
    ruleset: std::os::fd::BorrowedFd<'_>,
    path: &std::ffi::CStr,
    access: u64,
    file_access: u64,
) -> io::Result<bool> {
    // SAFETY: opens a NUL-terminated path as O_PATH; the fd is owned below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Ok(false);
    }
    // SAFETY: `fd` was just returned by open and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    add_landlock_rule_fd(ruleset, std::os::fd::AsFd::as_fd(&fd), access, file_access)
}

/// [`add_landlock_rule`] for an object already open (`O_PATH`): a pinned writable area.
pub(crate) fn add_landlock_rule_fd(
    ruleset: std::os::fd::BorrowedFd<'_>,
    fd: std::os::fd::BorrowedFd<'_>,
    access: u64,
    file_access: u64,
) -> io::Result<bool> {
    let add = |bits: u64| {
        let attr = PathBeneathAttr {
            allowed_access: bits,
            parent_fd: fd.as_raw_fd(),
        };
        // SAFETY: landlock_add_rule reads a packed attr struct from our stack; both fds are
        // valid for the call.
        unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset.as_raw_fd(),
                LANDLOCK_RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            )
        }
    };
    if add(access) == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    let narrowed = access & file_access;
    if e.raw_os_error() == Some(libc::EINVAL) && narrowed != access && narrowed != 0 {
        if add(narrowed) == 0 {
            return Ok(true);
        }
        return Err(io::Error::last_os_error());
    }
    if e.raw_os_error() == Some(libc::EINVAL) && narrowed == 0 {
        // Only directory rights were asked for, and this is not a directory.
        return Ok(false);
    }
    Err(e)
}

/// Adds a landlock path-beneath rule for the directory `fd` refers to (a fresh overlay's
/// root: a rule on the workspace's own inode does not cover the overlay's). Async-signal-safe.
pub(crate) fn add_fd_rule(ruleset: RawFd, fd: RawFd, access: u64) -> bool {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: fd,
    };
    // SAFETY: landlock_add_rule reads a packed attr struct from our stack; both fds are
    // valid for the call.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        ) == 0
    }
}

fn add_path_rule(ruleset: RawFd, path: &std::ffi::CStr, access: u64) -> bool {
    // SAFETY: opens `path` as O_PATH, passes a packed attr struct on the stack to
    // landlock_add_rule on the ruleset fd prepared by the parent, then closes the O_PATH fd.
    unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
        );
        if fd < 0 {
            return false;
        }
        let attr = PathBeneathAttr {
            allowed_access: access,
            parent_fd: fd,
        };
        let rc = libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        );
        libc::close(fd);
        rc == 0
    }
}

/// Brings up `lo` in this network namespace.
pub(crate) fn loopback_up() -> bool {
    // SAFETY: an AF_INET datagram socket used only for SIOCGIFFLAGS/SIOCSIFFLAGS on "lo"; the
    // ifreq is zero-initialised on the stack and the socket is closed before returning.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return false;
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo\0".iter().enumerate() {
            ifr.ifr_name[i] = *b as libc::c_char;
        }
        // The request's type differs between glibc and musl; the values fit both.
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        let (get, set) = (libc::SIOCGIFFLAGS as _, libc::SIOCSIFFLAGS as _);
        let mut ok = libc::ioctl(s, get, &mut ifr) == 0;
        if ok {
            ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            ok = libc::ioctl(s, set, &ifr) == 0;
        }
        libc::close(s);
        ok
    }
}

// Securebits (linux/securebits.h), not exported by libc.
const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_V3: u32 = 0x2008_0522;

/// The command: stdio, session, cwd, limits, capabilities, no_new_privs, landlock, seccomp, exec.
fn command_main(plan: &ChildPlan, argv: &[*const libc::c_char], envp: &[*const libc::c_char]) -> ! {
    let r = plan.report;
    // SAFETY: every call below is a raw syscall on values prepared by the parent (fds, C
    // strings, the BPF program) or on stack memory; none allocates. Each failure is reported
    // with its stage and the process exits without unwinding.
    unsafe {
        // Dies with its parent (the helper, or the broker without namespaces).
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            fail(r, stage::PDEATHSIG);
        }
        if libc::setsid() < 0 {
            fail(r, stage::SETSID);
        }
        let stdin_ok = match plan.stdin {
            Some(fd) => libc::dup2(fd, 0) >= 0,
            None => true,
        };
        if !stdin_ok || libc::dup2(plan.stdout, 1) < 0 || libc::dup2(plan.stderr, 2) < 0 {
            fail(r, stage::STDIO);
        }
        // Every inherited fd above 2 closes at exec (the report pipe and the ruleset fd are
        // still needed until then).
        if libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) != 0
        {
            for fd in 3..65536 {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        // A run of this process's own user enters its directory now; a client's run enters it
        // below, as the client without capabilities, so that the kernel checks the client's
        // rights on the directory it enters (the broker checked them earlier, but a link
        // swapped on the way since would lead a root path walk anywhere).
        if plan.identity.is_none() && libc::chdir(plan.cwd.as_ptr()) != 0 {
            fail(r, stage::CHDIR);
        }
        if let Err(st) = set_rlimits(&plan.rlimits) {
            fail(r, st);
        }
        if let Err(st) = lock_capabilities(plan.privileged, plan.cap_last) {
            fail(r, st);
        }
        // The caller's identity (a daemon's client): groups, then gid, then uid, while
        // CAP_SETGID/CAP_SETUID are still effective; the capabilities go next. Raw syscalls:
        // this process has one thread. With SECBIT_NO_SETUID_FIXUP the uid change keeps the
        // capabilities, so that the capset below is what clears them, in every case.
        if let Some((uid, gid, groups)) = &plan.identity
            && (libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) != 0
                || libc::syscall(libc::SYS_setresgid, *gid, *gid, *gid) != 0
                || libc::syscall(libc::SYS_setresuid, *uid, *uid, *uid) != 0)
        {
            fail(r, stage::IDENTITY);
        }
        if let Err(st) = clear_capabilities() {
            fail(r, st);
        }
        if plan.identity.is_some() && libc::chdir(plan.cwd.as_ptr()) != 0 {
            fail(r, stage::CHDIR);
        }
        if let Err(st) = set_no_new_privs() {
            fail(r, st);
        }
        if let Some(fd) = plan.landlock
            && let Err(st) = restrict_landlock(fd)
        {
            fail(r, st);
        }
        if let Err(st) = install_seccomp(&plan.bpf) {
            fail(r, st);
        }
        libc::execve(plan.path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        report(r, stage::EXEC, errno());
        libc::_exit(127)
    }
}

/// The rlimits layer, in the command: each limit as both soft and hard limit.
/// Async-signal-safe; on failure, the stage (errno still set).
pub(crate) fn set_rlimits(
    limits: &[(RlimitResource, libc::rlim_t, libc::rlim_t)],
) -> Result<(), u32> {
    for &(res, soft, hard) in limits {
        let lim = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: setrlimit reads a struct on our stack.
        if unsafe { libc::setrlimit(res, &lim) } != 0 {
            return Err(stage::RLIMIT);
        }
    }
    Ok(())
}

/// A resource limit's number as `Limits::ceiling` keeps it, and back (the type is `u32` under
/// glibc, `c_int` elsewhere).
#[allow(
    clippy::unnecessary_cast,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    reason = "the resource type differs between C libraries; the numbers are small"
)]
pub(crate) fn resource_id(r: RlimitResource) -> u32 {
    r as u32
}

/// See [`resource_id`].
#[allow(
    clippy::unnecessary_cast,
    clippy::cast_possible_wrap,
    reason = "the resource type differs between C libraries; the numbers are small"
)]
pub(crate) fn resource_of(id: u32) -> RlimitResource {
    id as RlimitResource
}

/// Makes every allocation of `bytes` or more its own mapping, returned to the kernel when
/// freed (glibc's `M_MMAP_THRESHOLD`, which also stops glibc from raising the threshold after
/// a large free and keeping later large buffers in its arenas). For a long-lived server whose
/// clients may send messages of megabytes: its size then follows what it holds, not the
/// largest message it ever read. False where the allocator is not glibc's, or it refused.
pub(crate) fn map_large_allocations(bytes: usize) -> bool {
    #[cfg(target_env = "gnu")]
    {
        let Ok(n) = libc::c_int::try_from(bytes) else {
            return false;
        };
        // SAFETY: mallopt sets an allocator parameter; it takes two integers.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, n) == 1 }
    }
    #[cfg(not(target_env = "gnu"))]
    {
        let _ = bytes;
        false
    }
}

/// The first half of the capabilities layer, in the command: with `privileged` (root or
/// CAP_SETPCAP), lock securebits so that exec as uid 0 regains nothing and empty the bounding
/// set (capabilities 0..=`cap_last`); in every case clear the ambient set.
/// Async-signal-safe; on failure, the stage.
pub(crate) fn lock_capabilities(privileged: bool, cap_last: u32) -> Result<(), u32> {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        if privileged {
            let bits = SECBIT_NOROOT
                | SECBIT_NOROOT_LOCKED
                | SECBIT_NO_SETUID_FIXUP
                | SECBIT_NO_SETUID_FIXUP_LOCKED
                | SECBIT_KEEP_CAPS_LOCKED
                | SECBIT_NO_CAP_AMBIENT_RAISE
                | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
            if libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) != 0 {
                return Err(stage::SECUREBITS);
            }
            for cap in 0..=cap_last {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(stage::CAP_BOUNDING);
                }
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(stage::CAP_AMBIENT);
        }
    }
    Ok(())
}

/// The second half of the capabilities layer (after the identity change): clear the
/// effective, permitted and inheritable sets. Async-signal-safe; on failure, the stage.
pub(crate) fn clear_capabilities() -> Result<(), u32> {
    let mut hdr = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a header and two CapData (version 3) from our stack.
    if unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut CapHeader, data.as_ptr()) } != 0 {
        return Err(stage::CAPSET);
    }
    Ok(())
}

/// no_new_privs: exec gains no privilege (setuid bits, file capabilities). Async-signal-safe.
pub(crate) fn set_no_new_privs() -> Result<(), u32> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(stage::NO_NEW_PRIVS);
    }
    Ok(())
}

/// The landlock layer, in the command: restricts this thread with the parent's ruleset.
/// Async-signal-safe; on failure, the stage.
pub(crate) fn restrict_landlock(ruleset: RawFd) -> Result<(), u32> {
    // SAFETY: landlock_restrict_self with a ruleset fd and no flags; no memory is passed.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) } != 0 {
        return Err(stage::LANDLOCK);
    }
    Ok(())
}

/// The seccomp layer, in the command (last before execve; needs no_new_privs or
/// CAP_SYS_ADMIN): installs the parent's program. Async-signal-safe; on failure, the stage.
pub(crate) fn install_seccomp(bpf: &[libc::sock_filter]) -> Result<(), u32> {
    if bpf.is_empty() {
        return Ok(());
    }
    let prog = libc::sock_fprog {
        len: bpf.len() as libc::c_ushort,
        filter: bpf.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: seccomp(SET_MODE_FILTER) reads the program (a live slice) through a sock_fprog
    // on our stack; the kernel copies it.
    if unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            &prog as *const libc::sock_fprog,
        )
    } != 0
    {
        return Err(stage::SECCOMP);
    }
    Ok(())
}

/// The kernel's landlock ABI version (0 if landlock is unavailable or disabled).
pub(crate) fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns the ABI version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 { 0 } else { v as i32 }
}

/// Sends a signal to a process. Errors (already gone) are ignored.
pub(crate) fn kill(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: kill(2) with a pid we spawned; no memory is involved.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Makes this process the subreaper of its descendants: a run's processes that leave it
/// (`setsid`, double forks) are reparented here when orphaned, not to init, so the broker can
/// find and kill them when the run ends.
pub(crate) fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends a signal to a process group. Errors are ignored.
pub(crate) fn killpg(pgid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: killpg(2) with a group we created (the command is a session leader).
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// Waits for a child; returns its raw wait status.
pub(crate) fn wait(pid: libc::pid_t) -> io::Result<libc::c_int> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child with a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Reaps a child if it has exited; true if reaped (or gone).
pub(crate) fn try_wait(pid: libc::pid_t) -> bool {
    let mut status = 0;
    // SAFETY: waitpid on our own child with WNOHANG and a valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    r == pid || r < 0
}

/// Readiness of one fd after [`poll`].
pub(crate) struct PollFd {
    pub fd: RawFd,
    /// Wait for writability instead of input.
    pub out: bool,
    pub ready: bool,
    pub hangup: bool,
}

/// Asks for a pipe buffer of `bytes` (F_SETPIPE_SZ); failure (over the unprivileged limit)
/// is harmless.
pub(crate) fn set_pipe_size(fd: RawFd, bytes: i32) {
    // SAFETY: fcntl with integer arguments on a pipe fd we own.
    unsafe {
        libc::fcntl(fd, libc::F_SETPIPE_SZ, bytes);
    }
}

/// Sets O_NONBLOCK on an fd we own (never on one shared with our caller).
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl with integer arguments on an fd the caller owns.
    let ok = unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        fl >= 0 && libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// poll(2) over `fds` for input (or output, per `out`); `timeout_ms` < 0 waits forever.
pub(crate) fn poll(fds: &mut [PollFd], timeout_ms: i32) -> io::Result<usize> {
    let mut raw: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.fd,
            events: if f.out { libc::POLLOUT } else { libc::POLLIN },
            revents: 0,
        })
        .collect();
    // SAFETY: `raw` is a valid array of `raw.len()` pollfd structs.
    let n = unsafe { libc::poll(raw.as_mut_ptr(), raw.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(e);
    }
    for (f, r) in fds.iter_mut().zip(&raw) {
        f.ready = r.revents & (libc::POLLIN | libc::POLLOUT) != 0;
        f.hangup = r.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0;
    }
    Ok(n as usize)
}

/// A pidfd for this process (for the helper's liveness check of the broker).
pub(crate) fn own_pidfd() -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open on our own pid; returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// This thread's capability sets (version 3: two words each).
fn capget() -> io::Result<[CapData; 2]> {
    let mut hdr = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget fills two CapData (version 3) for this thread.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut hdr as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(data)
}

/// This thread's effective capabilities, as a bit set (bit N: capability N).
pub(crate) fn effective_caps() -> u64 {
    capget().map_or(0, |d| {
        u64::from(d[0].effective) | (u64::from(d[1].effective) << 32)
    })
}

/// Effective uid.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// Can this process create a user namespace and mount in it? A throwaway child is cloned into
/// new user and mount namespaces and makes its mounts private (what every run's helper does
/// first); `None` when that works, else what refused it.
pub(crate) fn probe_userns() -> Option<String> {
    let flags = (libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::SIGCHLD) as libc::c_ulong;
    // SAFETY: clone with a NULL stack behaves like fork; the child makes one mount(2) call
    // with static arguments and leaves with _exit, never returning.
    let pid = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    if pid < 0 {
        return Some(format!(
            "clone(CLONE_NEWUSER): {}",
            io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let rc = libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            );
            libc::_exit(if rc == 0 { 0 } else { errno().clamp(1, 255) });
        }
    }
    match wait(pid as libc::pid_t) {
        Ok(st) if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 => None,
        Ok(st) if libc::WIFEXITED(st) => Some(format!(
            "a mount in a new user namespace: {}",
            io::Error::from_raw_os_error(libc::WEXITSTATUS(st))
        )),
        Ok(_) => Some("the probe of user namespaces was killed".into()),
        Err(e) => Some(format!("waiting for the probe of user namespaces: {e}")),
    }
}

/// Effective gid.
pub(crate) fn egid() -> u32 {
    // SAFETY: getegid cannot fail.
    unsafe { libc::getegid() }
}

/// Whether `fd` is a terminal.
pub(crate) fn isatty(fd: RawFd) -> bool {
    // SAFETY: isatty only inspects the fd.
    unsafe { libc::isatty(fd) == 1 }
}

/// Returns the raw fd of an owned fd (helper to keep call sites free of trait imports).
pub(crate) fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

/// Gives the calling thread its own filesystem context (cwd, root, umask), so that a
/// `chdir` by it (a daemon thread serving a client in the client's directory) does not move
/// the rest of the process.
pub(crate) fn unshare_fs() -> io::Result<()> {
    // SAFETY: unshare(CLONE_FS) only copies the thread's fs_struct; no memory is touched.
    if unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The supplementary groups of a Unix socket's peer as they were when it connected
/// (`SO_PEERGROUPS`; rustix has no wrapper).
pub(crate) fn peer_groups(fd: BorrowedFd<'_>) -> io::Result<Vec<u32>> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: `groups` has room for `len` bytes; the kernel writes at most that many and
        // sets `len` to what it wrote (or, with ERANGE, to what it needs).
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        if r == 0 {
            groups.truncate(n);
            return Ok(groups);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ERANGE) || n <= groups.len() || n > 65_536 {
            return Err(e);
        }
        groups.resize(n, 0);
    }
}

/// Runs `f` on a thread of its own that accesses files as `uid`/`gid` with `groups` and no
/// effective capabilities: how the daemon opens a file its client named, so that the
/// daemon's own rights (another uid, `CAP_DAC_OVERRIDE`) never reach files the client could
/// not open itself. Linux keeps credentials per thread and the raw syscalls change only the
/// calling one (glibc's wrappers would change every thread); the thread ends with `f`, and
/// its credentials with it. Fails, running nothing, if the identity cannot be taken (a daemon
/// without CAP_SETUID/CAP_SETGID serving another uid).
pub(crate) fn with_fs_identity<R: Send>(
    uid: u32,
    gid: u32,
    groups: &[u32],
    f: impl FnOnce() -> R + Send,
) -> io::Result<R> {
    std::thread::scope(|s| {
        s.spawn(|| -> io::Result<R> {
            // SAFETY: setgroups reads `groups.len()` gids from a live slice; it changes this
            // thread's credentials only (raw syscall).
            if unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) } != 0
            {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: setfsgid/setfsuid take an id and return the previous one; an invalid id
            // (-1) changes nothing, which is how the result is checked.
            let (fsgid, fsuid) = unsafe {
                libc::syscall(libc::SYS_setfsgid, gid);
                let g = libc::syscall(libc::SYS_setfsgid, u32::MAX) as u32;
                libc::syscall(libc::SYS_setfsuid, uid);
                let u = libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32;
                (g, u)
            };
            if (fsuid, fsgid) != (uid, gid) {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "cannot take the identity of uid {uid} gid {gid} to open the file (the daemon needs CAP_SETUID and CAP_SETGID to serve other users)"
                    ),
                ));
            }
            let mut data = capget()?;
            let mut hdr = CapHeader {
                version: CAP_V3,
                pid: 0,
            };
            for d in &mut data {
                d.effective = 0;
            }
            // SAFETY: capset reads two CapData for this thread (pid 0): the effective set
            // emptied, the permitted and inheritable sets as they were.
            if unsafe { libc::syscall(libc::SYS_capset, &mut hdr as *mut CapHeader, data.as_ptr()) }
                != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the file access thread panicked")))
    })
}

/// The first termination signal caught by [`on_interrupt`] since the last [`take_interrupt`]
/// (0: none).
static INTERRUPT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
/// The write end of the self-pipe [`on_interrupt`] writes to (-1: none yet).
static INTERRUPT_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// The handler of SIGINT, SIGTERM and SIGHUP while a run is interruptible: async-signal-safe
/// (atomics and one `write(2)`, errno preserved). The byte makes the self-pipe readable, which
/// the run loop polls; it is drained only by [`take_interrupt`].
extern "C" fn on_interrupt(sig: libc::c_int) {
    use std::sync::atomic::Ordering::SeqCst;
    let _ = INTERRUPT.compare_exchange(0, sig, SeqCst, SeqCst);
    let fd = INTERRUPT_PIPE.load(SeqCst);
    if fd >= 0 {
        // SAFETY: errno is this thread's; write(2) of one byte from a live local to a
        // non-blocking pipe we own (a full pipe is already readable, so EAGAIN loses nothing).
        unsafe {
            let errno = libc::__errno_location();
            let saved = *errno;
            let b = sig as u8;
            libc::write(fd, (&b as *const u8).cast(), 1);
            *errno = saved;
        }
    }
}

/// A signal's disposition as it was before [`catch_interrupt`].
pub(crate) struct SavedAction(libc::c_int, libc::sigaction);

/// The self-pipe of [`on_interrupt`] (non-blocking, close-on-exec); returns its read end.
/// Called once per process.
pub(crate) fn interrupt_pipe() -> io::Result<OwnedFd> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two fds into a live array of two.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // The write end lives as long as the process: the handler may run at any time.
    INTERRUPT_PIPE.store(fds[1], std::sync::atomic::Ordering::SeqCst);
    // SAFETY: a fresh fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fds[0]) })
}

/// Makes `sig` run [`on_interrupt`] (SA_RESTART: other blocking calls go on); returns the
/// disposition it had. A signal this process was started with ignored (`nohup`, a
/// background job of a script) stays ignored: `None`.
pub(crate) fn catch_interrupt(sig: libc::c_int) -> io::Result<Option<SavedAction>> {
    // SAFETY: sigaction with a null new action only reads the current one into a live local;
    // then with a zeroed (valid) struct naming an extern "C" handler that is
    // async-signal-safe.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        if old.sa_sigaction == libc::SIG_IGN {
            return Ok(None);
        }
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
        new.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut new.sa_mask);
        if libc::sigaction(sig, &new, &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Some(SavedAction(sig, old)))
    }
}

/// Puts back a disposition saved by [`catch_interrupt`].
pub(crate) fn restore_action(saved: &SavedAction) {
    // SAFETY: sigaction with a struct the kernel gave us for this signal.
    unsafe {
        libc::sigaction(saved.0, &saved.1, std::ptr::null_mut());
    }
}

/// The signal caught since the last [`take_interrupt`], if any.
pub(crate) fn interrupt_caught() -> Option<libc::c_int> {
    Some(INTERRUPT.load(std::sync::atomic::Ordering::SeqCst)).filter(|&s| s != 0)
}

/// Returns the signal caught and forgets it; `pipe` (the read end) is drained.
pub(crate) fn take_interrupt(pipe: BorrowedFd<'_>) -> Option<libc::c_int> {
    let mut buf = [0u8; 64];
    // SAFETY: read(2) into a live buffer of its length from a non-blocking pipe.
    while unsafe { libc::read(pipe.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    Some(INTERRUPT.swap(0, std::sync::atomic::Ordering::SeqCst)).filter(|&s| s != 0)
}

/// Ends the process by `sig` with its default action (so a calling shell sees "killed by
/// SIGINT" and stops its own loop), or, if that does not end it, exits with 128 + `sig`.
pub(crate) fn die_of(sig: libc::c_int) -> ! {
    // SAFETY: signal(SIG_DFL), sigprocmask on a set built in a live local, and raise only
    // change this process's signal state.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}

/// For the layers' unit tests: each layer applied alone in a forked child.
#[cfg(test)]
pub(crate) mod testing {
    use std::io;

    /// Runs `f` in a forked child and returns its exit code: what `f` returns, 101 if it
    /// panics (an assertion failed), 128 + N if signal N killed it. The child never returns
    /// into the test harness. (nextest runs each test in its own process, so no other thread
    /// holds a lock the child could need.)
    pub(crate) fn in_fork(f: impl FnOnce() -> i32) -> i32 {
        // SAFETY: fork(2); the child runs `f` and leaves with _exit, never returning.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
            // SAFETY: ends the forked child without running the harness's destructors.
            unsafe { libc::_exit(code) };
        }
        let status = super::wait(pid).expect("wait");
        if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        }
    }

    /// unshare(2) with these flags.
    pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
        // SAFETY: unshare with integer flags only.
        if unsafe { libc::unshare(flags) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// (soft, hard) limit of a resource.
    pub(crate) fn getrlimit(res: super::RlimitResource) -> (u64, u64) {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills a struct on our stack.
        assert_eq!(unsafe { libc::getrlimit(res, &mut lim) }, 0);
        (lim.rlim_cur, lim.rlim_max)
    }

    /// ptrace(PTRACE_TRACEME): a syscall every seccomp program of the sandbox refuses.
    pub(crate) fn ptrace_traceme() -> io::Result<()> {
        // SAFETY: PTRACE_TRACEME takes no memory; our parent becomes our tracer.
        if unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Every `.rs` file under `dir`.
    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// Lines of `text` (comments aside) with unsafe code, or an attribute allowing it.
    fn unsafe_lines(text: &str) -> Vec<String> {
        let re = regex::Regex::new(
            r"\bunsafe\s*(\{|fn\b|impl\b|extern\b|trait\b)|allow\s*\([^)]*\bunsafe_code\b",
        )
        .expect("regex");
        text.lines()
            .filter(|l| re.is_match(l.split("//").next().unwrap_or("")))
            .map(|l| l.trim().to_string())
            .collect()
    }

    /// DESIGN.md: `unsafe` lives in `src/sys/` only (`Cargo.toml` denies it elsewhere; this
    /// keeps an `allow` from creeping in beside it).
    #[test]
    fn unsafe_code_lives_in_sys_only() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        for d in ["src", "tests", "benches"] {
            sources(&root.join(d), &mut files);
        }
        let sys = root.join("src/sys");
        let found: Vec<String> = files
            .iter()
            .filter(|f| !f.starts_with(&sys))
            .flat_map(|f| {
                let text = std::fs::read_to_string(f).expect("read");
                unsafe_lines(&text)
                    .into_iter()
                    .map(move |l| format!("{}: {l}", f.display()))
            })
            .collect();
        assert!(
            found.is_empty(),
            "unsafe code outside src/sys/ (move it there, with its // SAFETY: comment):\n{}",
            found.join("\n")
        );
        // Not vacuous: this module is where it is.
        let here = std::fs::read_to_string(sys.join("mod.rs")).expect("read");
        assert!(unsafe_lines(&here).len() > 10);
    }

    #[test]
    fn the_check_sees_blocks_fns_impls_and_allows() {
        let bad = [
            "    let x = unsafe { libc::getpid() };",
            "pub unsafe fn f() {}",
            "unsafe impl Send for X {}",
            "#![allow(unsafe_code)]",
            "#[allow(dead_code, unsafe_code)]",
        ];
        for b in bad {
            assert_eq!(unsafe_lines(b).len(), 1, "{b}");
        }
        for g in ["// unsafe { in a comment }", "fn unsafe_ignore_file() {}"] {
            assert!(unsafe_lines(g).is_empty(), "{g}");
        }
    }
}
