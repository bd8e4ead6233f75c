//! `Spec` → confined child. Knows nothing of policies: the broker turns a decision into a plain
//! [`Spec`] (paths, network, limits, env) and [`run`] applies it and reports, in
//! [`EnforcementStatus`], what was really enforced.
//!
//! Layers, each enforced on its own:
//! - **namespaces** (when privileged): pid (own /proc; everything dies with the command),
//!   mount (denied paths masked, protected paths read-only), ipc, and net for `loopback` and
//!   `none`;
//! - **capabilities** all cleared, securebits locked, **no_new_privs**;
//! - **landlock**: filesystem rights of the kernel's ABI, TCP bind/connect (ABI ≥ 4), abstract
//!   unix socket and signal scoping (ABI ≥ 6);
//! - **seccomp**: dangerous syscalls and socket families denied; `socketpair` only for
//!   `AF_UNIX` stream and seqpacket pairs (a datagram pair reaches host sockets by path);
//! - **rlimits** and the pid namespace's `pid_max`: CPU, memory, processes, files, file size.
//!
//! Over 1,000 lines: `run` applies every layer and relays the streams; issue 23 (the sandbox as
//! layers) splits each layer into its own function and module.

mod cgroup;
mod landlock;
mod seccomp;
mod sys;

use serde::Serialize;
use std::ffi::{CString, OsString};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use crate::model::{Limits, Network};

/// Where the child's stdin comes from.
#[derive(Debug)]
pub enum Stdin {
    /// The caller's stdin.
    Inherit,
    /// `/dev/null`.
    Null,
    /// The caller's stdin, relayed through a pipe and [`StreamIo::input`] (which may rewrite
    /// it or stop the run).
    Filtered,
    /// A pipe the broker talks through: these bytes first, then whatever
    /// [`StreamIo::reply`] queues (a request/response channel with gateway's own worker).
    Channel(Vec<u8>),
    /// This fd (a daemon client's stdin, passed over the socket), as [`Stdin::Inherit`].
    Fd(OwnedFd),
    /// This fd, relayed as [`Stdin::Filtered`].
    FilteredFd(OwnedFd),
}

/// What the sandbox does with the command's streams. The broker implements it (secrets
/// redaction); a closure `FnMut(Stream, &[u8])` is a pass-through implementation.
pub trait StreamIo {
    /// A chunk of the command's output. Returning false stops the run: the sandbox is killed
    /// and [`Outcome::aborted`] is set.
    fn output(&mut self, stream: Stream, data: &[u8]) -> bool;
    /// The output pipes are drained for now (the command is quiet or waiting). Returning
    /// false stops the run, as for [`StreamIo::output`].
    fn output_idle(&mut self) -> bool {
        true
    }
    /// A chunk of the caller's stdin ([`Stdin::Filtered`]); what to deliver goes to `out`.
    /// Returning false stops the run.
    fn input(&mut self, data: &[u8], out: &mut Vec<u8>) -> bool {
        out.extend_from_slice(data);
        true
    }
    /// The caller's stdin ended; last bytes to deliver go to `out`. False stops the run.
    fn input_end(&mut self, out: &mut Vec<u8>) -> bool {
        let _ = out;
        true
    }
    /// [`Stdin::Channel`]: bytes to send to the command's stdin, asked after each batch of
    /// output. False stops the run.
    fn reply(&mut self, out: &mut Vec<u8>) -> bool {
        let _ = out;
        true
    }
}

impl<F: FnMut(Stream, &[u8])> StreamIo for F {
    fn output(&mut self, stream: Stream, data: &[u8]) -> bool {
        self(stream, data);
        true
    }
}

/// How a run is confined: everything of a [`Spec`] except what to run. Paths are absolute and,
/// where they exist, canonical.
#[derive(Clone, Debug, Serialize)]
pub struct Confinement {
    /// Readable trees.
    pub read: Vec<PathBuf>,
    /// Writable trees.
    pub write: Vec<PathBuf>,
    /// Executable trees.
    pub exec: Vec<PathBuf>,
    /// Never readable (existing paths).
    pub deny: Vec<PathBuf>,
    /// Read-only inside writable trees (existing paths).
    pub protected: Vec<PathBuf>,
    /// Denied paths inside the workspace, hidden by the mount namespace only: landlock cannot
    /// take them away without taking write access from the workspace itself.
    pub hidden: Vec<PathBuf>,
    /// Network.
    pub network: Network,
    /// Limits.
    pub limits: Limits,
    /// Use namespaces when privileged.
    pub namespaces: bool,
    /// Run even if a layer cannot be applied.
    pub best_effort: bool,
    /// Bound the run's total memory (`limits.memory`) with a memory cgroup.
    pub memory_cgroup: bool,
    /// With namespaces: mount a fresh tmpfs here (an existing directory) as the private
    /// TMPDIR (and on /dev/shm), of this many bytes at most.
    pub private_tmp: Option<(PathBuf, u64)>,
    /// Danger: let the child call `openat2`. Seccomp cannot read its mode (it is passed in
    /// memory), so it cannot refuse setuid bits on files the child creates with it; commands
    /// never get it. Only gateway's own file-tool worker, whose path resolution is
    /// `openat2(RESOLVE_BENEATH)` and which never asks for such modes, sets it.
    pub danger_openat2: bool,
    /// Run the program as this user instead of the broker's own (a daemon's client of
    /// another uid): set in the command just before its capabilities are cleared.
    pub run_as: Option<RunAs>,
}

/// A user a command runs as (see [`Confinement::run_as`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunAs {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

/// What to run, and how to confine it.
#[derive(Debug)]
pub struct Spec {
    /// Resolved program path.
    pub program: PathBuf,
    /// argv, program name first.
    pub argv: Vec<OsString>,
    /// The complete environment.
    pub env: Vec<(OsString, OsString)>,
    /// Working directory.
    pub cwd: PathBuf,
    /// stdin.
    pub stdin: Stdin,
    /// The confinement.
    pub confine: Confinement,
}

/// The seccomp program the sandbox installs for `network`, as raw `struct sock_filter` records
/// (8 bytes each, native byte order): for inspection tools and the spawn benchmark's C floor.
pub fn seccomp_program(network: &Network) -> Result<Vec<u8>, SandboxError> {
    let bpf = seccomp::build(network, false).map_err(SandboxError::Seccomp)?;
    let mut out = Vec::with_capacity(bpf.len() * 8);
    for f in &bpf {
        out.extend_from_slice(&f.code.to_ne_bytes());
        out.push(f.jt);
        out.push(f.jf);
        out.extend_from_slice(&f.k.to_ne_bytes());
    }
    Ok(out)
}

/// Capability numbers (linux/capability.h) the sandbox's setup needs.
const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_SETPCAP: u32 = 8;
const CAP_SYS_ADMIN: u32 = 21;

fn has_cap(cap: u32) -> bool {
    sys::effective_caps() & (1u64 << cap) != 0
}

/// Will `run` use namespaces (and so honour `Spec::private_tmp`)? When the broker is root, or
/// has CAP_SYS_ADMIN (namespaces, mounts) and CAP_DAC_OVERRIDE (`/proc/sys` and the cgroup
/// files belong to root): a daemon running as its own user with those capabilities.
pub fn namespaces_available() -> bool {
    sys::euid() == 0 || (has_cap(CAP_SYS_ADMIN) && has_cap(CAP_DAC_OVERRIDE))
}

/// What landlock really enforced.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LandlockStatus {
    /// The kernel's landlock ABI (0 = none).
    pub abi: u32,
    /// Filesystem rules enforced.
    pub fs: bool,
    /// TCP bind/connect rules enforced.
    pub net: bool,
    /// Abstract unix socket and signal scoping enforced.
    pub scoped: bool,
    /// Number of rules in the ruleset.
    pub rules: usize,
    /// Everything requested of landlock was enforced (fs; TCP rules when the network mode
    /// needs them; scoping).
    pub full: bool,
}

/// What the sandbox really applied to a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EnforcementStatus {
    /// Landlock.
    pub landlock: LandlockStatus,
    /// The seccomp filter was installed.
    pub seccomp: bool,
    /// no_new_privs was set.
    pub no_new_privs: bool,
    /// Every capability was cleared and securebits locked.
    pub capabilities_dropped: bool,
    /// pid namespace with its own /proc.
    pub pid_namespace: bool,
    /// mount namespace.
    pub mount_namespace: bool,
    /// ipc namespace.
    pub ipc_namespace: bool,
    /// network namespace.
    pub net_namespace: bool,
    /// Protected paths made read-only.
    pub protected_read_only: usize,
    /// Denied paths masked in the mount namespace.
    pub denied_masked: usize,
    /// Limits applied, by name.
    pub limits: Vec<String>,
    /// Layers that were requested but not applied, and why.
    pub not_applied: Vec<String>,
    /// Every requested layer was applied (`not_applied` is empty).
    pub fully_enforced: bool,
}

/// How a run ended.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// Exit code, if the command exited.
    pub exit_code: Option<i32>,
    /// Signal, if it was killed by one.
    pub signal: Option<i32>,
    /// The timeout expired and the sandbox was killed.
    pub timed_out: bool,
    /// Output exceeded the limit and the sandbox was killed.
    pub output_limit_exceeded: bool,
    /// The run's memory cgroup limit was hit: some process of it was OOM-killed.
    pub memory_limit_hit: bool,
    /// The stream handler stopped the run ([`StreamIo`] returned false).
    pub aborted: bool,
    /// The caller went away (see [`cancel_on_hangup`]) or the broker was interrupted (see
    /// [`catch_interrupts`]) and the sandbox was killed.
    pub cancelled: bool,
    /// The signal (SIGINT, SIGTERM, SIGHUP) the broker received that cancelled the run.
    pub interrupted: Option<i32>,
    /// Processes the run left behind that the broker killed when it ended (their subreaper,
    /// without a pid namespace); None when another run of this process was still in progress
    /// (the last one to end kills them).
    pub leftovers_killed: Option<usize>,
    /// Wall time.
    pub duration: Duration,
    /// Bytes of stdout and stderr produced (including any not delivered past the limit).
    pub stdout_bytes: u64,
    /// See `stdout_bytes`.
    pub stderr_bytes: u64,
    /// What was enforced.
    pub enforcement: EnforcementStatus,
}

/// Which output stream a chunk came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// stdout.
    Stdout,
    /// stderr.
    Stderr,
}

/// Why a run could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The kernel has no landlock, and the policy is not best-effort.
    #[error(
        "landlock: {0}; this kernel cannot confine the filesystem as the policy requires (set `best_effort = true` in the policy to run anyway, reported as not enforced)"
    )]
    LandlockUnsupported(String),
    /// The landlock ruleset could not be built (a path, a rule).
    #[error("landlock ruleset: {0}")]
    Landlock(String),
    /// The seccomp program could not be built.
    #[error("seccomp filter: {0}")]
    Seccomp(String),
    /// A confinement step failed in the child.
    #[error("sandbox setup failed while {stage}: {source}")]
    Setup {
        /// The step.
        stage: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// execve failed.
    #[error("cannot execute {path}: {source}")]
    Exec {
        /// The program.
        path: PathBuf,
        /// The OS error (ENOENT, EACCES, ...).
        source: std::io::Error,
    },
    /// Something the parent needed failed (pipes, clone, poll).
    #[error("{what}: {source}")]
    Io {
        /// What.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A string with a NUL byte cannot be passed to the kernel.
    #[error("{0} contains a NUL byte")]
    Nul(String),
    /// A required layer is unavailable.
    #[error("{0} (set `best_effort = true` in the policy to run without it)")]
    Unavailable(String),
}

fn cstr(b: &[u8], what: &str) -> Result<CString, SandboxError> {
    CString::new(b).map_err(|_| SandboxError::Nul(what.to_string()))
}

/// Does the kernel support landlock? Returns the ABI version (0 = no).
pub fn landlock_abi() -> i32 {
    sys::landlock_abi()
}

/// This process's effective uid.
pub fn effective_uid() -> u32 {
    sys::euid()
}

/// Is this process's stdin a terminal?
pub fn stdin_is_tty() -> bool {
    sys::isatty(0)
}

/// Is this fd a terminal?
pub fn fd_is_tty(fd: BorrowedFd<'_>) -> bool {
    sys::isatty(fd.as_raw_fd())
}

/// Is this fd `/dev/null`?
pub fn fd_is_null(fd: BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let (Ok(ours), Ok(null)) = (
        std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())),
        std::fs::metadata("/dev/null"),
    ) else {
        return false;
    };
    ours.file_type().is_char_device() && ours.rdev() == null.rdev()
}

/// Asks for a 1 MiB buffer on this process's stdout and stderr when they are pipes: relayed
/// output is written in large batches, and a larger pipe means fewer sleeps and wake-ups
/// between gateway and its reader. (Best effort; harmless for other file types.)
pub fn enlarge_output_pipes() {
    for fd in [1, 2] {
        sys::set_pipe_size(fd, 1 << 20);
    }
}

/// Is this process's stderr a terminal?
pub fn stderr_is_tty() -> bool {
    sys::isatty(2)
}

/// Is this process's stdin `/dev/null` (nothing to relay or scan)?
pub fn stdin_is_null() -> bool {
    fd_is_null(std::io::stdin().as_fd())
}

/// The (stage, value) records of the report pipe.
fn records(rep: &[u8]) -> impl Iterator<Item = (u32, i32)> + '_ {
    rep.chunks_exact(8).map(|r| {
        (
            u32::from_ne_bytes([r[0], r[1], r[2], r[3]]),
            i32::from_ne_bytes([r[4], r[5], r[6], r[7]]),
        )
    })
}

/// The highest capability number of the running kernel (read once per process).
fn cap_last() -> u32 {
    static CAP_LAST: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *CAP_LAST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(40)
    })
}

/// Smallest pid_max the kernel accepts in a pid namespace (RESERVED_PIDS + 1).
const PID_MAX_MIN: u64 = 301;

/// Helpers (pid 1 of a run's namespaces) that reported and are exiting, not yet reaped.
static PENDING: std::sync::Mutex<Vec<libc::pid_t>> = std::sync::Mutex::new(Vec::new());

fn pending_reap(pid: libc::pid_t) {
    if let Ok(mut p) = PENDING.lock() {
        p.push(pid);
    }
}

/// Reaps finished helpers without blocking.
fn reap_pending() {
    if let Ok(mut p) = PENDING.lock() {
        p.retain(|&pid| !sys::try_wait(pid));
    }
}

/// Runs in progress in this process. Without a pid namespace a run's descendants that left
/// its process group become this process's children when orphaned (it is their subreaper);
/// when no run is in progress, every such child is a leftover and is killed.
static ACTIVE: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

/// A run without a pid namespace started since the last reaping: only such runs leave
/// orphans here (a namespace's orphans stay in it), so runs in namespaces pay nothing.
static UNCONTAINED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A run counted in [`ACTIVE`] (uncounted on drop, e.g. when setup fails).
struct ActiveRun {
    counted: bool,
}

impl ActiveRun {
    fn enter() -> ActiveRun {
        static SUBREAPER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        SUBREAPER.get_or_init(|| sys::set_child_subreaper().is_ok());
        if let Ok(mut n) = ACTIVE.lock() {
            *n += 1;
        }
        ActiveRun { counted: true }
    }

    /// Leaves the count; the last run out kills and reaps the leftovers of every run.
    /// Returns how many were killed, or None when other runs of this process are still in
    /// progress (their ends will do it).
    fn leave(mut self) -> Option<usize> {
        self.counted = false;
        let mut n = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
        if *n > 0 {
            return None;
        }
        // Under the lock: no run starts (and spawns a child of its own) meanwhile.
        if !UNCONTAINED.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return Some(0);
        }
        Some(kill_leftovers())
    }
}

impl Drop for ActiveRun {
    fn drop(&mut self) {
        if self.counted
            && let Ok(mut n) = ACTIVE.lock()
        {
            *n = n.saturating_sub(1);
        }
    }
}

/// This process's children (every thread's), except namespace helpers that are exiting.
fn children() -> Vec<libc::pid_t> {
    let pending: Vec<libc::pid_t> = PENDING.lock().map(|p| p.clone()).unwrap_or_default();
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<libc::pid_t>().ok())
                        .filter(|p| !pending.contains(p)),
                );
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Kills every child of this process (leftovers of finished runs) and reaps it; their own
/// children, orphaned by that, come back as ours and go the same way. Bounded in time.
fn kill_leftovers() -> usize {
    let mut killed = 0;
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let kids = children();
        if kids.is_empty() || Instant::now() >= until {
            break;
        }
        for &pid in &kids {
            // Stop first: a stopped process forks no more while its siblings die.
            sys::kill(pid, libc::SIGSTOP);
        }
        for &pid in &kids {
            sys::kill(pid, libc::SIGKILL);
        }
        for &pid in &kids {
            let t = Instant::now() + Duration::from_millis(500);
            while !sys::try_wait(pid) && Instant::now() < t {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        killed += kids.len();
    }
    killed
}

/// Runs `spec` confined; `sink` receives output chunks as they arrive.
#[allow(
    clippy::too_many_lines,
    reason = "every layer, spawn and relay; issue 23's sandbox-as-layers stage splits it, one function per layer"
)]
pub fn run(spec: &Spec, sink: &mut dyn StreamIo) -> Result<Outcome, SandboxError> {
    let start = Instant::now();
    reap_pending();
    let active = ActiveRun::enter();
    let c = &spec.confine;
    // Root, or the capabilities namespaces need; and whether the bounding set can be emptied
    // and securebits locked (CAP_SETPCAP).
    let privileged = namespaces_available();
    let root = sys::euid() == 0;
    let lock_caps = root || has_cap(CAP_SETPCAP);
    let mut status = EnforcementStatus::default();

    // Namespaces.
    let use_ns = c.namespaces && privileged;
    if !use_ns {
        UNCONTAINED.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    if c.namespaces && !privileged {
        status.not_applied.push(
            "namespaces: the broker is not privileged (pid, mount, ipc, net isolation off: the host's /proc, including the socket lists in /proc/net, stays readable where the policy reads /proc; descendants that leave the command's session are killed when it ends, by the broker as their subreaper)".into(),
        );
    }
    // Without namespaces (an unprivileged broker): landlock and seccomp still hold; what
    // needs namespaces is reported, and `loopback` (a private network namespace) falls back to
    // no network at all rather than to the host's network.
    let network = if matches!(c.network, Network::Loopback) && !use_ns {
        status.not_applied.push(
            "network loopback: no network namespace, so no network at all (network = none)".into(),
        );
        Network::None
    } else {
        c.network.clone()
    };
    if !c.hidden.is_empty() && !use_ns {
        let msg = format!(
            "{} denied paths inside the workspace are hidden with a mount namespace, which needs a privileged broker",
            c.hidden.len()
        );
        if c.best_effort {
            status.not_applied.push(msg);
        } else {
            return Err(SandboxError::Unavailable(msg));
        }
    }
    if !c.protected.is_empty() && !use_ns {
        status.not_applied.push(format!(
            "{} protected paths: read-only mounts need a mount namespace; the broker keeps them and puts back what the run changed after it (new ones are quarantined)",
            c.protected.len()
        ));
    }

    // Landlock.
    let abi = sys::landlock_abi();
    if abi <= 0 && !c.best_effort {
        return Err(SandboxError::LandlockUnsupported(
            "not supported by this kernel (needs Linux 5.13+ with landlock in the lsm= list)"
                .into(),
        ));
    }
    let (ll_fd, ll_status) = landlock::build(c, &network, abi)?;
    if ll_fd.is_none() {
        status
            .not_applied
            .push("landlock: unsupported by the kernel".into());
    }
    status.landlock = ll_status;
    if matches!(network, Network::None | Network::ConnectTcp(_)) && !status.landlock.net {
        status.not_applied.push(
            "landlock TCP rules: kernel ABI < 4 (seccomp still limits socket families)".into(),
        );
    }
    if !status.landlock.scoped {
        status
            .not_applied
            .push("landlock signal/abstract-socket scoping: kernel ABI < 6".into());
    }

    // Seccomp.
    let bpf = seccomp::build(&network, c.danger_openat2).map_err(SandboxError::Seccomp)?;

    let mut mounts = Vec::new();
    if use_ns {
        // Ancestors of protected paths inside a writable tree are pinned (self-bind mounts):
        // otherwise `mv .git .git2` would carry the read-only mounts away and a fresh `.git`
        // with new hooks could take its place. Parents first, and before every other mount:
        // a bind made later would cover the masks and read-only mounts beneath it.
        let mut pins: Vec<&std::path::Path> = Vec::new();
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
            mounts.push(sys::MountStep::Pin(cstr(
                dir.as_os_str().as_bytes(),
                "protected path parent",
            )?));
        }
        // Only denied paths inside an allowed tree need masking; the others are unreachable.
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
            {
                use std::os::unix::fs::FileTypeExt;
                let ft = m.file_type();
                if ft.is_block_device() || ft.is_char_device() {
                    continue;
                }
            }
            let c = cstr(d.as_os_str().as_bytes(), "denied path")?;
            if m.is_dir() {
                mounts.push(sys::MountStep::MaskDir(c));
            } else {
                mounts.push(sys::MountStep::MaskFile(c));
            }
        }
        for p in &c.protected {
            if std::fs::symlink_metadata(p).is_ok() {
                mounts.push(sys::MountStep::ReadOnly(cstr(
                    p.as_os_str().as_bytes(),
                    "protected path",
                )?));
            }
        }
    }
    let denied_masked = mounts
        .iter()
        .filter(|m| matches!(m, sys::MountStep::MaskDir(_) | sys::MountStep::MaskFile(_)))
        .count();
    let protected_ro = mounts
        .iter()
        .filter(|m| matches!(m, sys::MountStep::ReadOnly(_)))
        .count();

    // Limits.
    let mut rlimits = Vec::new();
    let l = &c.limits;
    if let Some(v) = l.cpu {
        rlimits.push((libc::RLIMIT_CPU, v));
        status.limits.push(format!("cpu={v}s"));
    }
    if let Some(v) = l.memory {
        rlimits.push((libc::RLIMIT_AS, v));
        status
            .limits
            .push(format!("memory={v}B (address space per process)"));
    }
    if let Some(v) = l.open_files {
        rlimits.push((libc::RLIMIT_NOFILE, v));
        status.limits.push(format!("open_files={v}"));
    }
    if let Some(v) = l.file_size {
        rlimits.push((libc::RLIMIT_FSIZE, v));
        status.limits.push(format!("file_size={v}B"));
    }
    let mut pid_max = None;
    if let Some(v) = l.pids {
        rlimits.push((libc::RLIMIT_NPROC, v));
        if use_ns {
            // Pids are numbered from 1 in the namespace; pid_max bounds how many exist at once.
            let pm = (v + 1).max(PID_MAX_MIN);
            pid_max = Some(cstr(pm.to_string().as_bytes(), "pid_max")?);
            status
                .limits
                .push(format!("pids={} (pid namespace pid_max)", pm - 1));
        } else if root {
            status.not_applied.push(
                "pids: RLIMIT_NPROC does not bind uid 0 and there is no pid namespace".into(),
            );
        } else {
            status
                .limits
                .push(format!("pids={v} (RLIMIT_NPROC, per user)"));
        }
    }
    if let Some(t) = l.timeout {
        status.limits.push(format!("timeout={}s", t.as_secs()));
    }
    if let Some(o) = l.output {
        status.limits.push(format!("output={o}B"));
    }

    // The fresh /proc of the pid namespace gets read access if the policy reads /proc.
    let proc_path = std::path::Path::new("/proc");
    let proc_readable = c
        .read
        .iter()
        .chain(&c.exec)
        .chain(&c.write)
        .any(|p| proc_path.starts_with(p))
        && !c.deny.iter().any(|d| d.as_path() == proc_path);
    // LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR.
    let proc_access: u64 = if proc_readable && ll_fd.is_some() {
        (1 << 2) | (1 << 3)
    } else {
        0
    };
    // Private TMPDIR and /dev/shm: fresh tmpfs mounts in the mount namespace (POSIX
    // semaphores and shared memory, e.g. Python's multiprocessing, live in /dev/shm; the
    // host's is shared with every other process).
    let mut tmpfs = Vec::new();
    match (&c.private_tmp, use_ns) {
        (Some((path, size)), true) => {
            let access = if ll_fd.is_some() {
                landlock::all_access_bits(abi)
            } else {
                0
            };
            // The private TMPDIR belongs to whoever the command runs as.
            let owner = c
                .run_as
                .as_ref()
                .map_or(String::new(), |u| format!(",uid={},gid={}", u.uid, u.gid));
            let opts = cstr(
                format!("mode=0700,size={size}{owner}").as_bytes(),
                "tmpfs options",
            )?;
            tmpfs.push((
                cstr(path.as_os_str().as_bytes(), "the private TMPDIR")?,
                opts.clone(),
                access,
            ));
            if std::path::Path::new("/dev/shm").is_dir() {
                let shm_opts = cstr(format!("mode=1777,size={size}").as_bytes(), "tmpfs options")?;
                tmpfs.push((c"/dev/shm".to_owned(), shm_opts, access));
            }
        }
        (Some(_), false) => {
            return Err(SandboxError::Unavailable(
                "a tmpfs TMPDIR needs a mount namespace; the broker must create a directory instead"
                    .into(),
            ));
        }
        (None, _) => {}
    }

    // Total memory: the memory cgroup shared by runs with this limit (namespaces only: the
    // helper is what joins it).
    if let Some(u) = &c.run_as {
        status
            .limits
            .push(format!("run as uid {} gid {} (the caller)", u.uid, u.gid));
    }
    let mut cg = None;
    if let (Some(mem), true, true) = (l.memory, use_ns, c.memory_cgroup) {
        match cgroup::join(mem) {
            Ok(Some(c)) => {
                status.limits.push(format!(
                    "memory_total={mem}B (cgroup {}, shared by runs with this limit)",
                    if c.version == cgroup::Version::V2 {
                        "v2"
                    } else {
                        "v1"
                    }
                ));
                cg = Some(c);
            }
            Ok(None) => status.not_applied.push(
                "memory total: no memory cgroup controller (the per-process limit still applies)"
                    .into(),
            ),
            Err(e) if c.best_effort => status.not_applied.push(format!("memory total: {e}")),
            Err(e) => {
                return Err(SandboxError::Unavailable(format!(
                    "cannot set up the run's memory cgroup: {e}"
                )));
            }
        }
    } else if l.memory.is_some() && !c.memory_cgroup {
        status
            .limits
            .push("memory_total: off (policy cgroup = false; per-process limit only)".into());
    } else if l.memory.is_some() {
        status
            .not_applied
            .push("memory total: needs namespaces (the per-process limit still applies)".into());
    }

    // Pipes.
    let io = |what| move |source| SandboxError::Io { what, source };
    let (mut out_r, out_w) = std::io::pipe().map_err(io("creating the stdout pipe"))?;
    let (mut err_r, err_w) = std::io::pipe().map_err(io("creating the stderr pipe"))?;
    let (mut rep_r, rep_w) = std::io::pipe().map_err(io("creating the report pipe"))?;
    let mut stdin_w: Option<std::io::PipeWriter> = None;
    let null_stdin: Option<OwnedFd> = match &spec.stdin {
        Stdin::Inherit => None,
        Stdin::Fd(fd) => Some(fd.try_clone().map_err(io("passing the caller's stdin"))?),
        Stdin::Null => Some(
            std::fs::File::open("/dev/null")
                .map_err(io("opening /dev/null"))?
                .into(),
        ),
        Stdin::Filtered | Stdin::FilteredFd(_) | Stdin::Channel(_) => {
            let (r, w) = std::io::pipe().map_err(io("creating the stdin pipe"))?;
            sys::set_nonblocking(w.as_raw_fd()).map_err(io("configuring the stdin pipe"))?;
            stdin_w = Some(w);
            Some(r.into())
        }
    };
    let channel = matches!(spec.stdin, Stdin::Channel(_));
    let out_w: OwnedFd = out_w.into();
    let err_w: OwnedFd = err_w.into();
    let rep_w: OwnedFd = rep_w.into();

    let mut env = Vec::with_capacity(spec.env.len());
    for (k, v) in &spec.env {
        let mut b = k.as_bytes().to_vec();
        b.push(b'=');
        b.extend_from_slice(v.as_bytes());
        env.push(cstr(&b, "an environment variable")?);
    }
    let mut argv = Vec::with_capacity(spec.argv.len());
    for a in &spec.argv {
        argv.push(cstr(a.as_bytes(), "an argument")?);
    }
    let broker_pidfd = sys::own_pidfd().map_err(io("opening a pidfd for the broker"))?;
    let plan = sys::ChildPlan {
        path: cstr(spec.program.as_os_str().as_bytes(), "the program path")?,
        argv,
        envp: env,
        cwd: cstr(spec.cwd.as_os_str().as_bytes(), "the working directory")?,
        stdin: null_stdin.as_ref().map(sys::raw),
        stdout: sys::raw(&out_w),
        stderr: sys::raw(&err_w),
        report: sys::raw(&rep_w),
        landlock: ll_fd.as_ref().map(sys::raw),
        bpf,
        rlimits,
        ns: use_ns.then_some(sys::NsPlan {
            // A network namespace for `loopback` (with `lo` up) and for `none`: empty, so the
            // host's sockets are not listed in /proc/net (unix, tcp, ...), and abstract unix
            // names, which belong to a network namespace, are the run's own.
            net: !matches!(network, Network::ConnectTcp(_)),
            loopback: matches!(network, Network::Loopback),
            mounts,
            pid_max,
            proc_access,
            tmpfs,
            cgroup_tasks: cg
                .as_ref()
                .filter(|c| c.version == cgroup::Version::V1)
                .map(|c| sys::raw(&c.fd)),
            cgroup_fd: cg
                .as_ref()
                .filter(|c| c.version == cgroup::Version::V2)
                .map(|c| sys::raw(&c.fd)),
        }),
        cap_last: cap_last(),
        privileged: lock_caps,
        identity: c.run_as.as_ref().map(|u| (u.uid, u.gid, u.groups.clone())),
        stack: vec![0u8; sys::CHILD_STACK],
        broker_pidfd: sys::raw(&broker_pidfd),
        broker_only: stdin_w.iter().map(|w| w.as_raw_fd()).collect(),
    };
    let (pid, pidfd) = sys::spawn(&plan).map_err(io("starting the sandboxed process"))?;
    drop(plan);
    drop(broker_pidfd);
    drop(out_w);
    drop(err_w);
    drop(rep_w);
    drop(ll_fd);
    drop(null_stdin);

    // Relay output until the command is done and the pipes close, enforcing timeout and output
    // cap. With namespaces, "done" is the helper's status record: it sends it only after every
    // process of the run is dead, so the namespace teardown need not be waited for.
    let deadline = l.timeout.map(|t| start + t);
    let mut timed_out = false;
    let mut over_limit = false;
    let mut exited = false;
    let mut out_open = true;
    let mut err_open = true;
    let mut rep_open = true;
    let mut rep: Vec<u8> = Vec::new();
    let mut counts = [0u64; 2];
    // Reads of up to 256 KiB (the pipes are enlarged to 1 MiB below): a command that writes
    // fast is relayed in few, large chunks. The buffer's pages are touched only as far as
    // reads fill it.
    let mut buf = vec![0u8; 256 * 1024];
    for fd in [out_r.as_raw_fd(), err_r.as_raw_fd()] {
        // Best effort: a smaller pipe only means more, smaller reads.
        sys::set_pipe_size(fd, 1 << 20);
    }
    let mut exit_seen_at: Option<Instant> = None;
    let kill_all = |pid: libc::pid_t| {
        if use_ns {
            sys::kill(pid, libc::SIGKILL);
        } else {
            sys::killpg(pid, libc::SIGKILL);
            sys::kill(pid, libc::SIGKILL);
        }
    };
    // With namespaces: the helper's status record has arrived.
    let mut reported = false;
    let mut aborted = false;
    // Filtered stdin: bytes waiting for the pipe, and whether our stdin is still open.
    let mut in_pending: Vec<u8> = match &spec.stdin {
        Stdin::Channel(first) => first.clone(),
        _ => Vec::new(),
    };
    let mut in_open = stdin_w.is_some();
    // Where a filtered stdin comes from: this process's, or the fd given.
    let caller_stdin: std::fs::File = match &spec.stdin {
        Stdin::FilteredFd(fd) => fd.try_clone().map_err(io("reading the caller's stdin"))?,
        _ => std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map_err(io("reading stdin"))?,
    }
    .into();
    let caller_fd = caller_stdin.as_raw_fd();
    let cancel_fd: i32 = CANCEL.with(|c| c.borrow().as_ref().map_or(-1, |f| f.as_raw_fd()));
    let mut cancelled = false;
    // The self-pipe of caught termination signals, when this thread's runs are interruptible.
    let interrupt_fd: i32 = if INTERRUPTIBLE.with(|d| d.get() > 0) {
        INTERRUPT_READ.get().map_or(-1, |f| f.as_raw_fd())
    } else {
        -1
    };
    let mut interrupted = None;
    loop {
        let done = exited || (use_ns && reported);
        if done && stdin_w.is_some() {
            // The command is gone: nobody reads its stdin any more.
            stdin_w = None;
            in_open = false;
        }
        if done && !out_open && !err_open {
            break;
        }
        let mut timeout_ms: i32 = -1;
        if let Some(d) = deadline
            && !timed_out
        {
            let left = d.saturating_duration_since(Instant::now());
            timeout_ms = left.as_millis().min(i32::MAX as u128) as i32;
        }
        if let Some(t) = exit_seen_at {
            // Without a pid namespace, a descendant may keep the pipes open: stop after a grace.
            let left = Duration::from_millis(200).saturating_sub(t.elapsed());
            timeout_ms = left.as_millis() as i32;
            if left.is_zero() {
                break;
            }
        }
        let fd_if = |open: bool, fd: i32| if open { fd } else { -1 };
        let pfd = |fd: i32, out: bool| sys::PollFd {
            fd,
            out,
            ready: false,
            hangup: false,
        };
        let stdin_w_fd = stdin_w.as_ref().map_or(-1, |w| w.as_raw_fd());
        let mut fds = [
            pfd(fd_if(out_open, out_r.as_raw_fd()), false),
            pfd(fd_if(err_open, err_r.as_raw_fd()), false),
            pfd(fd_if(rep_open, rep_r.as_raw_fd()), false),
            pfd(fd_if(!done, pidfd.as_raw_fd()), false),
            // Our stdin, while there is room for more in the pipe's backlog.
            pfd(
                fd_if(
                    !channel && in_open && in_pending.len() < 64 * 1024,
                    caller_fd,
                ),
                false,
            ),
            pfd(fd_if(!in_pending.is_empty(), stdin_w_fd), true),
            pfd(fd_if(!cancelled && !done, cancel_fd), false),
            pfd(fd_if(!cancelled && !done, interrupt_fd), false),
        ];
        sys::poll(&mut fds, timeout_ms).map_err(io("waiting for the sandboxed process"))?;
        let mut drained = false;
        for (i, (reader, open)) in [(&mut out_r, &mut out_open), (&mut err_r, &mut err_open)]
            .into_iter()
            .enumerate()
        {
            if *open && (fds[i].ready || fds[i].hangup) {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => *open = false,
                    Ok(n) => {
                        drained |= n < buf.len();
                        counts[i] += n as u64;
                        let total = counts[0] + counts[1];
                        let limit = l.output.unwrap_or(u64::MAX);
                        let stream = if i == 0 {
                            Stream::Stdout
                        } else {
                            Stream::Stderr
                        };
                        let keep = if total > limit {
                            n.saturating_sub((total - limit) as usize)
                        } else {
                            n
                        };
                        if keep > 0 && !over_limit && !aborted && !sink.output(stream, &buf[..keep])
                        {
                            aborted = true;
                            kill_all(pid);
                        }
                        if total > limit && !over_limit {
                            over_limit = true;
                            kill_all(pid);
                        }
                    }
                }
            }
        }
        // A read shorter than the buffer drained its pipe: the command is quiet for now, and
        // the stream handler may flush what it holds back. (A busy producer fills the buffer
        // and this waits.)
        if drained && !aborted && !sink.output_idle() {
            aborted = true;
            kill_all(pid);
        }
        // A channel: what the handler answers goes to the command's stdin.
        if channel && in_open && !aborted && !sink.reply(&mut in_pending) {
            aborted = true;
            in_pending.clear();
            kill_all(pid);
        }
        // Filtered stdin: read ours, pass it through the filter, write to the command's pipe.
        if !channel && in_open && (fds[4].ready || fds[4].hangup) {
            let mut chunk = vec![0u8; 64 * 1024];
            let n = std::io::Read::read(&mut &caller_stdin, &mut chunk).unwrap_or(0);
            let ok = if n == 0 {
                in_open = false;
                sink.input_end(&mut in_pending)
            } else {
                sink.input(&chunk[..n], &mut in_pending)
            };
            if !ok && !aborted {
                aborted = true;
                in_pending.clear();
                kill_all(pid);
            }
        }
        if let Some(w) = stdin_w.as_mut()
            && !in_pending.is_empty()
            && (fds[5].ready || fds[5].hangup)
        {
            match std::io::Write::write(w, &in_pending) {
                Ok(k) => {
                    in_pending.drain(..k);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                // The command closed its stdin: drop the rest, as a pipe would.
                Err(_) => {
                    in_pending.clear();
                    in_open = false;
                }
            }
        }
        if stdin_w.is_some() && !in_open && in_pending.is_empty() {
            // EOF for the command.
            stdin_w = None;
        }
        if rep_open && (fds[2].ready || fds[2].hangup) {
            match rep_r.read(&mut buf) {
                Ok(0) | Err(_) => rep_open = false,
                Ok(n) => {
                    rep.extend_from_slice(&buf[..n]);
                    reported = records(&rep).any(|(st, _)| st == sys::stage::EXIT_STATUS);
                }
            }
        }
        if !exited && (fds[3].ready || fds[3].hangup) {
            exited = true;
            if !use_ns {
                // The command is gone: its session's stragglers go with it.
                sys::killpg(pid, libc::SIGKILL);
                exit_seen_at = Some(Instant::now());
            }
        }
        if !cancelled && (fds[6].ready || fds[6].hangup) {
            cancelled = true;
            kill_all(pid);
        }
        if !cancelled && (fds[7].ready || fds[7].hangup) {
            cancelled = true;
            interrupted = sys::interrupt_caught();
            kill_all(pid);
        }
        if let Some(d) = deadline
            && !timed_out
            && !exited
            && !(use_ns && reported)
            && Instant::now() >= d
        {
            timed_out = true;
            kill_all(pid);
        }
    }
    let mut raw_status = None;
    if exited {
        raw_status = Some(sys::wait(pid).map_err(io("collecting the sandboxed process"))?);
        let _ = rep_r.read_to_end(&mut rep);
    } else {
        // Everything in the namespace is dead; the helper is exiting. Reap it later.
        pending_reap(pid);
    }
    drop(pidfd);
    let duration = start.elapsed();

    // The report pipe holds setup failures and, with namespaces, the command's wait status.
    let mut cmd_status: Option<i32> = if use_ns { None } else { raw_status };
    for (st, val) in records(&rep) {
        if st == sys::stage::EXIT_STATUS {
            cmd_status = Some(val);
        } else if st == sys::stage::EXEC {
            return Err(SandboxError::Exec {
                path: spec.program.clone(),
                source: std::io::Error::from_raw_os_error(val),
            });
        } else {
            return Err(SandboxError::Setup {
                stage: sys::stage::name(st),
                source: std::io::Error::from_raw_os_error(val),
            });
        }
    }

    status.seccomp = true;
    status.no_new_privs = true;
    status.capabilities_dropped = lock_caps;
    status.pid_namespace = use_ns;
    status.mount_namespace = use_ns;
    status.ipc_namespace = use_ns;
    status.net_namespace = use_ns && !matches!(network, Network::ConnectTcp(_));
    let net_needed = !matches!(network, Network::Loopback);
    status.landlock.full =
        status.landlock.fs && (status.landlock.net || !net_needed) && status.landlock.scoped;
    status.fully_enforced = status.not_applied.is_empty();
    status.protected_read_only = protected_ro;
    status.denied_masked = denied_masked;

    let (exit_code, signal) = match cmd_status {
        _ if timed_out || over_limit || aborted => (None, Some(libc::SIGKILL)),
        Some(s) if libc::WIFEXITED(s) => (Some(libc::WEXITSTATUS(s)), None),
        Some(s) if libc::WIFSIGNALED(s) => (None, Some(libc::WTERMSIG(s))),
        // The helper died without a report: it was killed (only the broker can do that).
        _ => (None, Some(libc::SIGKILL)),
    };
    let memory_limit_hit = cg.as_ref().is_some_and(|c| c.oom_killed());
    // Without a pid namespace, what the command left behind (outside its process group) is
    // killed now, before the broker looks at what the run changed.
    let leftovers_killed = active.leave();
    Ok(Outcome {
        leftovers_killed,
        exit_code,
        signal,
        timed_out,
        output_limit_exceeded: over_limit,
        memory_limit_hit,
        aborted,
        cancelled,
        interrupted,
        duration,
        stdout_bytes: counts[0],
        stderr_bytes: counts[1],
        enforcement: status,
    })
}

thread_local! {
    /// See [`cancel_on_hangup`].
    static CANCEL: std::cell::RefCell<Option<OwnedFd>> = const { std::cell::RefCell::new(None) };
}

/// Until the guard is dropped, runs on this thread are killed (and end `cancelled`) as soon
/// as `fd` (a pipe's read end) becomes readable or hangs up: the daemon writes to it when the
/// client that made the call disconnects, so a client's Ctrl-C stops its command.
pub fn cancel_on_hangup(fd: OwnedFd) -> CancelGuard {
    CANCEL.with(|c| *c.borrow_mut() = Some(fd));
    CancelGuard(())
}

/// Ends [`cancel_on_hangup`] for this thread.
pub struct CancelGuard(());

impl Drop for CancelGuard {
    fn drop(&mut self) {
        CANCEL.with(|c| *c.borrow_mut() = None);
    }
}

/// The termination signals a broker turns into a cancellation while it runs a command.
pub const INTERRUPT_SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The read end of the self-pipe the signal handler writes to (created once).
static INTERRUPT_READ: std::sync::OnceLock<OwnedFd> = std::sync::OnceLock::new();

/// How many [`InterruptGuard`]s are alive, and the dispositions they replaced.
static INTERRUPT_HOLDERS: std::sync::Mutex<(usize, Vec<sys::SavedAction>)> =
    std::sync::Mutex::new((0, Vec::new()));

thread_local! {
    /// Guards held by this thread: its runs watch the self-pipe.
    static INTERRUPTIBLE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Until the guard is dropped, SIGINT, SIGTERM and SIGHUP (those not ignored since the process
/// started: `nohup`, a script's background job) no longer end this process: they
/// are caught (the first one is kept, see [`interrupted`]) and every run on a thread holding
/// a guard is killed and ends `cancelled`, with [`Outcome::interrupted`] set, so that the
/// broker's post-run work (change capture, quarantine, the audit record) still happens. The
/// front end then ends the process with [`exit_interrupted`]. Guards may overlap (runs on
/// several threads); the last one dropped puts the old dispositions back. Not for the
/// daemon, which handles its own signals.
pub fn catch_interrupts() -> std::io::Result<InterruptGuard> {
    let mut h = INTERRUPT_HOLDERS.lock().unwrap_or_else(|p| p.into_inner());
    if INTERRUPT_READ.get().is_none() {
        let r = sys::interrupt_pipe()?;
        let _ = INTERRUPT_READ.set(r);
    }
    if h.0 == 0 {
        let mut saved = Vec::new();
        for sig in INTERRUPT_SIGNALS {
            match sys::catch_interrupt(sig) {
                Ok(s) => saved.extend(s),
                Err(e) => {
                    saved.iter().for_each(sys::restore_action);
                    return Err(e);
                }
            }
        }
        h.1 = saved;
    }
    h.0 += 1;
    INTERRUPTIBLE.with(|d| d.set(d.get() + 1));
    Ok(InterruptGuard(std::marker::PhantomData))
}

/// See [`catch_interrupts`]. Not `Send`: it marks the thread that holds it.
pub struct InterruptGuard(std::marker::PhantomData<*const ()>);

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        INTERRUPTIBLE.with(|d| d.set(d.get().saturating_sub(1)));
        let mut h = INTERRUPT_HOLDERS.lock().unwrap_or_else(|p| p.into_inner());
        h.0 = h.0.saturating_sub(1);
        if h.0 == 0 {
            h.1.iter().for_each(sys::restore_action);
            h.1.clear();
        }
    }
}

/// The termination signal caught while a guard was held, if any (not forgotten).
pub fn interrupted() -> Option<i32> {
    sys::interrupt_caught()
}

/// The termination signal caught while a guard was held, if any, and no guard is held any
/// more (the last run that could see it has recorded it); forgets it. `None` while runs are
/// in flight: the last of them to finish takes it.
pub fn take_interrupt() -> Option<i32> {
    let h = INTERRUPT_HOLDERS.lock().unwrap_or_else(|p| p.into_inner());
    if h.0 > 0 {
        return None;
    }
    let fd = INTERRUPT_READ.get()?;
    sys::take_interrupt(fd.as_fd())
}

/// Ends this process because of `sig` (a caught SIGINT, SIGTERM or SIGHUP) once its work is
/// recorded: output flushed, then the signal's default action, so the caller sees the
/// process killed by it (a shell reports 128 + `sig`); 128 + `sig` as exit code if that does
/// not end it.
pub fn exit_interrupted(sig: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    sys::die_of(sig)
}

/// The supplementary groups of a Unix socket's peer (`SO_PEERGROUPS`).
pub fn peer_groups(fd: BorrowedFd<'_>) -> std::io::Result<Vec<u32>> {
    sys::peer_groups(fd)
}

/// Runs `f` on a thread whose file access is that of `uid`, `gid` and `groups`, with no
/// effective capabilities (see `sys::with_fs_identity`).
pub fn with_fs_identity<R: Send>(
    uid: u32,
    gid: u32,
    groups: &[u32],
    f: impl FnOnce() -> R + Send,
) -> std::io::Result<R> {
    sys::with_fs_identity(uid, gid, groups, f)
}

/// Gives the calling thread its own working directory (see [`sys::unshare_fs`]); then
/// `std::env::set_current_dir` moves this thread only.
pub fn thread_own_cwd() -> std::io::Result<()> {
    sys::unshare_fs()
}
