//! `Spec` → confined child. Knows nothing of policies: the broker turns a decision into a plain
//! [`Spec`] (paths, network, limits, env) and [`run`] applies it and reports, in
//! [`EnforcementStatus`], what was really enforced.
//!
//! Over 1,000 lines: the run itself and, beside it, the small per-call helpers the front ends
//! use on the same machinery (cancellation, non-blocking reads and writes of a caller's
//! streams, the caller's rlimits); the seam, when it grows, is those helpers apart from `run`.
//!
//! Layers, each enforced on its own:
//! - **namespaces**, for every run whoever starts the broker: user (the caller mapped to
//!   itself), pid (own /proc; everything dies with the command), mount (the host read-only,
//!   writable areas bound on top from pinned descriptors, denied paths masked, protected paths
//!   read-only, a minimal /dev), ipc, uts, and net for `loopback` and `none`;
//! - **capabilities** all cleared, securebits locked, **no_new_privs**;
//! - **landlock**: filesystem rights of the kernel's ABI, TCP bind/connect (ABI ≥ 4), abstract
//!   unix socket and signal scoping (ABI ≥ 6);
//! - **seccomp**: dangerous syscalls and socket families denied; `socketpair` only for
//!   `AF_UNIX` stream and seqpacket pairs (a datagram pair reaches host sockets by path);
//! - **rlimits** and the pid namespace's `pid_max`: CPU, memory, processes, files, file size.
//!
//! [`run`] calls one function per layer, each returning its [`LayerStatus`] with what it
//! prepared for the child — `ns`, `mounts`, `cgroup`, `rlimits`, `caps`, `landlock`,
//! `seccomp` — then starts the child (`spawn`), which applies them between clone and execve
//! (`sys`), and relays its streams (`relay`). Each layer is unit-tested alone, applied in a
//! forked child (`sys::testing::in_fork`).

mod caps;
mod cgroup;
mod landlock;
mod mounts;
mod ns;
mod reap;
mod relay;
mod rlimits;
mod seccomp;
mod spawn;
mod status;

pub use cgroup::CgroupError;
pub use landlock::LandlockError;
pub use seccomp::SeccompError;
pub use status::{EnforcementStatus, Layer, LayerStatus, Layers};

use crate::sys;
use serde::Serialize;
use std::ffi::{CString, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
    /// Run in the run's own user, mount, pid, ipc, uts (and net) namespaces.
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
    /// Capture the run's changes to this workspace in an overlay (with namespaces only): the
    /// run writes the upper layer, the workspace itself is only its lower layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureLayer>,
}

/// Where a run's changes to its workspace go (see [`Confinement::capture`]).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CaptureLayer {
    /// The workspace (a writable area, or inside one): the overlay's lower layer.
    pub workspace: PathBuf,
    /// The call's capture directory in the state directory, holding `upper` and `work`.
    pub dir: PathBuf,
}

/// A user a command runs as (see [`Confinement::run_as`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
    /// The call's own cancellation: a pipe's read end; the run is killed (and ends
    /// `cancelled`) as soon as it becomes readable or its write end is closed. `None`: none
    /// (a one-shot front end's signals end its runs: [`catch_interrupts`]).
    pub cancel: Option<OwnedFd>,
    /// The `proxy` network's plumbing (with namespaces only).
    pub proxy: Option<ProxyPlumbing>,
}

/// How the egress proxy reaches into a run's network namespace: the run's helper listens on
/// `127.0.0.1:port` there and sends the listening socket over `listen_to` (its end of a
/// socket pair whose other end the broker's proxy reads); lines the proxy writes to the
/// pipe whose read end is `notes` reach the caller as the command's stderr.
#[derive(Debug)]
pub struct ProxyPlumbing {
    /// The helper's end of the socket pair.
    pub listen_to: OwnedFd,
    /// The port.
    pub port: u16,
    /// The read end of the notes pipe (non-blocking).
    pub notes: OwnedFd,
}

/// The seccomp program the sandbox installs for `network`, as raw `struct sock_filter` records
/// (8 bytes each, native byte order): for inspection tools and the spawn benchmark's C floor.
pub fn seccomp_program(network: &Network) -> Result<Vec<u8>, SandboxError> {
    let bpf = seccomp::build(network, false)?;
    let mut out = Vec::with_capacity(bpf.len() * 8);
    for f in &bpf {
        out.extend_from_slice(&f.code.to_ne_bytes());
        out.push(f.jt);
        out.push(f.jf);
        out.extend_from_slice(&f.k.to_ne_bytes());
    }
    Ok(out)
}

/// Does this host let gateway create a run's user namespace (and mount in it)? Probed once
/// per process by a throwaway child; `None` when it does, else what refused it. Runs do not
/// wait for this: they find out when their own clone fails; `policy explain`, and a
/// best-effort policy (which must know before it starts), ask here.
pub fn userns_refused() -> Option<String> {
    static PROBE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PROBE.get_or_init(sys::probe_userns).clone()
}

/// Will runs get their namespaces (and so honour `Spec::private_tmp`)? On every host that
/// allows unprivileged user namespaces, whoever runs the broker.
pub fn namespaces_available() -> bool {
    userns_refused().is_none()
}

/// May this broker manage cgroups (root, or CAP_SYS_ADMIN and CAP_DAC_OVERRIDE: the daemon
/// of contrib/)? The memory cgroup that bounds a run's total needs it.
fn host_privileged() -> bool {
    sys::euid() == 0
        || (caps::has_cap(caps::CAP_SYS_ADMIN) && caps::has_cap(caps::CAP_DAC_OVERRIDE))
}

/// Is a directory above `path` one `uid` owns and cannot search (a `chmod 000` its commands
/// could have made, and could undo)? A link's target counts (lexically, a few levels):
/// `pre-commit -> ../../scripts/hook.sh` is hidden when `scripts` is. One of another user's
/// (`/root` for a normal user) keeps the command out as it keeps the broker out: not hidden
/// by the caller. Metadata only.
pub fn hidden_by_owner(path: &Path, uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let mut at = path.to_path_buf();
    for _ in 0..8 {
        // not-ws: metadata only, of the directories above a path the broker could not open
        let hidden = at.ancestors().skip(1).any(|a| {
            std::fs::symlink_metadata(a)
                .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o100 == 0)
        });
        if hidden {
            return true;
        }
        let Ok(t) = std::fs::read_link(&at) else {
            return false;
        };
        at = match at.parent() {
            Some(d) => d.join(t),
            None => return false,
        };
    }
    false
}

/// Does the run get a `/tmp` of its own? With a private TMPDIR under `/tmp`, whenever no path
/// the policy reads, writes or executes (but the TMPDIR) lies under the host's `/tmp` (a
/// workspace there keeps the host's, read-only).
pub fn private_slash_tmp(c: &Confinement) -> bool {
    let slash_tmp = Path::new("/tmp");
    let Some((tmpdir, _)) = &c.private_tmp else {
        return false;
    };
    tmpdir.starts_with(slash_tmp)
        && !c.write.iter().any(|w| w.as_path() == Path::new("/"))
        && !c
            .read
            .iter()
            .chain(&c.write)
            .chain(&c.exec)
            .any(|p| p.starts_with(slash_tmp) && p != tmpdir)
}

/// What landlock really enforced.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
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
    /// The caller went away (see [`Spec::cancel`]) or the broker was interrupted (see
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
        "landlock: not supported by this kernel (needs Linux 5.13+ with landlock in the lsm= list); this kernel cannot confine the filesystem as the policy requires (set `best_effort = true` in the policy to run anyway, reported as not enforced)"
    )]
    LandlockUnsupported,
    /// The landlock ruleset could not be built (a path, a rule).
    #[error("landlock ruleset: {0}")]
    Landlock(#[from] LandlockError),
    /// The seccomp program could not be built.
    #[error("seccomp filter: {0}")]
    Seccomp(#[from] SeccompError),
    /// The run's memory cgroup could not be set up, and the policy is not best-effort.
    #[error(
        "cannot set up the run's memory cgroup: {0} (set `best_effort = true` in the policy to run without it)"
    )]
    Cgroup(#[from] CgroupError),
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
    #[error("{what} contains a NUL byte")]
    Nul {
        /// Which string (an argument, the working directory, ...).
        what: &'static str,
    },
    /// A layer the confinement requires cannot be applied here.
    #[error("{layer}: {why} (set `best_effort = true` in the policy to run without it)")]
    Required {
        /// The layer.
        layer: Layer,
        /// What it needs that is missing.
        why: String,
    },
    /// A writable area, or a path the run's mount tree pins in one, is a symbolic link or
    /// lies below one: never followed.
    #[error(
        "{what} {}: it is a symbolic link or lies below one, and the sandbox never follows a link in a tree the command could have written (a run may have replaced it to point elsewhere); refused, nothing ran. Check what it points to; if the link is yours, name its real location in the policy",
        path.display()
    )]
    WritableLink {
        /// What the path is (a writable area, a protected path, a denied path).
        what: &'static str,
        /// The path, as the policy gives it.
        path: PathBuf,
    },
    /// A path the run's mount tree must protect, mask or bind cannot be searched by the
    /// broker (a run made a directory above it unsearchable): failing closed.
    #[error(
        "the {what} {} cannot be searched (a directory above it has no search permission: a run may have done `chmod 000` on it to hide it from the sandbox); refused, nothing ran. Restore its mode (chmod u+rwx on the directory) and run again",
        path.display()
    )]
    Unsearchable {
        /// What the path is.
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// A protected or denied file in a writable area has other hard links: its content would
    /// be reachable, writable, under another name.
    #[error(
        "the {what} {} has {links} hard links: a run may have made one to reach it under another name; refused, nothing ran. Find them with `find / -xdev -samefile {}` and remove the ones you did not make",
        path.display(),
        path.display()
    )]
    HardLinked {
        /// What the path is.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Its link count.
        links: u64,
    },
    /// A path of the run's mount tree could not be opened.
    #[error("cannot open the {what} {}: {source}", path.display())]
    Pin {
        /// What the path is.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The run's user namespace cannot be created here, and the policy is not best-effort.
    #[error(
        "user namespaces are not available to gateway here ({why}), and every run needs one: its own user, mount, pid, ipc, uts and network namespaces, with the host read-only. Two ways out: let this binary create user namespaces (on Ubuntu 23.10 and later, install the AppArmor profile shipped in contrib/apparmor/gateway, as Ubuntu ships one for bwrap; elsewhere set the sysctl user.max_user_namespaces above 0), or run the daemon with the capabilities in contrib/gateway.service and point GATEWAY_SOCKET at it. To run with only landlock and seccomp instead, set `best_effort = true` in the policy's [sandbox] (reported as not enforced)"
    )]
    UserNamespaces {
        /// What the kernel said.
        why: String,
    },
    /// Something the broker requires around the sandbox is unavailable (the broker's own
    /// checks).
    #[error("{0} (set `best_effort = true` in the policy to run without it)")]
    Unavailable(String),
}

fn cstr(b: &[u8], what: &'static str) -> Result<CString, SandboxError> {
    CString::new(b).map_err(|_| SandboxError::Nul { what })
}

/// Does the kernel support landlock? Returns the ABI version (0 = no).
pub fn landlock_abi() -> i32 {
    sys::landlock_abi()
}

/// The resource limits of process `pid` (a daemon's client), as [`Limits::ceiling`] holds
/// them: what a run for it may not exceed. Read from `/proc/PID/limits` (readable by every
/// user; prlimit(2) would need CAP_SYS_RESOURCE, which a daemon thread acting with a client's
/// identity does not have).
pub fn caller_rlimits(pid: u32) -> std::io::Result<Vec<(u32, u64, u64)>> {
    // not-ws: procfs, the client's own process
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits"))?;
    parse_limits(&text).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("/proc/{pid}/limits: not in the kernel's format"),
        )
    })
}

/// `/proc/PID/limits`' table (a header, then `Max <name>  <soft>  <hard>  [units]`, the
/// values a number or `unlimited`): every resource named, or `None`.
fn parse_limits(text: &str) -> Option<Vec<(u32, u64, u64)>> {
    const NAMES: [(&str, sys::RlimitResource); 16] = [
        ("Max cpu time", libc::RLIMIT_CPU),
        ("Max file size", libc::RLIMIT_FSIZE),
        ("Max data size", libc::RLIMIT_DATA),
        ("Max stack size", libc::RLIMIT_STACK),
        ("Max core file size", libc::RLIMIT_CORE),
        ("Max resident set", libc::RLIMIT_RSS),
        ("Max processes", libc::RLIMIT_NPROC),
        ("Max open files", libc::RLIMIT_NOFILE),
        ("Max locked memory", libc::RLIMIT_MEMLOCK),
        ("Max address space", libc::RLIMIT_AS),
        ("Max file locks", libc::RLIMIT_LOCKS),
        ("Max pending signals", libc::RLIMIT_SIGPENDING),
        ("Max msgqueue size", libc::RLIMIT_MSGQUEUE),
        ("Max nice priority", libc::RLIMIT_NICE),
        ("Max realtime priority", libc::RLIMIT_RTPRIO),
        ("Max realtime timeout", libc::RLIMIT_RTTIME),
    ];
    let value = |v: &str| match v {
        "unlimited" => Some(libc::RLIM_INFINITY),
        n => n.parse::<u64>().ok(),
    };
    let mut out = Vec::with_capacity(NAMES.len());
    for (name, res) in NAMES {
        let line = text.lines().find(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with("  ") || rest.starts_with(' '))
        })?;
        let mut f = line[name.len()..].split_whitespace();
        let (soft, hard) = (value(f.next()?)?, value(f.next()?)?);
        out.push((sys::resource_id(res), soft, hard));
    }
    Some(out)
}

/// A long-lived server's large buffers (a client's message of megabytes) go back to the
/// kernel when freed (see `sys::map_large_allocations`): its memory follows what it holds.
pub fn map_large_allocations() -> bool {
    sys::map_large_allocations(256 << 10)
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

/// Runs `spec` confined; `sink` receives output chunks as they arrive. One function per
/// layer prepares it and says what it enforces; the child applies them all or the run fails.
pub fn run(spec: &Spec, sink: &mut dyn StreamIo) -> Result<Outcome, SandboxError> {
    let c = &spec.confine;
    // A best-effort policy goes on without namespaces where they are refused, so it must
    // know before it starts; the others find out from their own clone (fail closed).
    let refused = if c.namespaces && c.best_effort {
        userns_refused()
    } else {
        None
    };
    run_with(spec, sink, refused.as_deref())
}

fn run_with(
    spec: &Spec,
    sink: &mut dyn StreamIo,
    refused: Option<&str>,
) -> Result<Outcome, SandboxError> {
    let start = Instant::now();
    reap::reap_pending();
    let active = reap::ActiveRun::enter();
    let c = &spec.confine;
    let root = sys::euid() == 0;
    let ns = ns::plan(c, refused);
    if !ns.use_ns {
        active.uncontained();
    }
    let abi = sys::landlock_abi();
    let ll_bits = (abi > 0).then(|| landlock::all_access_bits(abi));
    let (mounts, mounts_status) = mounts::plan(c, ns.use_ns, ll_bits)?;
    let (ll_fd, landlock, landlock_status) = landlock::layer(c, &ns.network, abi, &mounts.pinned)?;
    let (bpf, seccomp_status) = seccomp::layer(&ns.network, c.danger_openat2)?;
    let (rlimits, rlimits_status) = rlimits::plan(&c.limits, ns.use_ns, root)?;
    let (caps, caps_status) = caps::plan(ns.use_ns || root || caps::has_cap(caps::CAP_SETPCAP));
    let cgroup = cgroup::layer(
        &c.limits,
        ns.use_ns && host_privileged(),
        c.memory_cgroup,
        c.best_effort,
    )?;
    let userns = if ns.use_ns {
        Some(ns::user_maps(c.run_as.as_ref())?)
    } else {
        None
    };
    let mut limits = rlimits.names.clone();
    if let Some(u) = &c.run_as {
        limits.push(format!("run as uid {} gid {} (the caller)", u.uid, u.gid));
    }
    limits.extend(cgroup.limit.clone());
    let enforcement = EnforcementStatus {
        layers: Layers {
            namespaces: ns.status.clone(),
            network: ns.network_status.clone(),
            mounts: mounts_status,
            cgroup: cgroup.status.clone(),
            rlimits: rlimits_status,
            capabilities: caps_status,
            landlock: landlock_status,
            seccomp: seccomp_status,
        },
        landlock,
        pid_namespace: ns.use_ns,
        mount_namespace: ns.use_ns,
        ipc_namespace: ns.use_ns,
        net_namespace: ns.net_ns,
        user_namespace: ns.use_ns,
        read_only_host: ns.use_ns && mounts.read_only_host,
        protected_read_only: mounts.protected_read_only,
        denied_masked: mounts.denied_masked,
        limits,
    };
    let layers = spawn::Layers {
        ns: ns.use_ns.then_some(ns.net_ns),
        userns,
        loopback: ns.network.private_loopback(),
        mounts,
        cgroup: cgroup.cgroup,
        rlimits,
        caps,
        landlock: ll_fd,
        bpf,
    };
    let (child, cg) = spawn::start(spec, layers)?;
    let watch = relay::Watch {
        deadline: c.limits.timeout.map(|t| start + t),
        output_limit: c.limits.output,
        cancel_fd: spec.cancel.as_ref().map_or(-1, AsRawFd::as_raw_fd),
        interrupt_fd: interrupt_fd(),
        notes: spec
            .proxy
            .as_ref()
            .and_then(|p| p.notes.try_clone().ok())
            .map(std::fs::File::from),
    };
    let r = relay::relay(child, spec, sink, ns.use_ns, watch)?;
    let duration = start.elapsed();
    let (exit_code, signal) = exit_of(&r, ns.use_ns, spec)?;
    let memory_limit_hit = cg.as_ref().is_some_and(|c| c.oom_killed());
    // Without a pid namespace, what the command left behind (outside its process group) is
    // killed now, before the broker looks at what the run changed.
    let leftovers_killed = active.leave();
    Ok(Outcome {
        leftovers_killed,
        exit_code,
        signal,
        timed_out: r.timed_out,
        output_limit_exceeded: r.over_limit,
        memory_limit_hit,
        aborted: r.aborted,
        cancelled: r.cancelled,
        interrupted: r.interrupted,
        duration,
        stdout_bytes: r.counts[0],
        stderr_bytes: r.counts[1],
        enforcement,
    })
}

/// The command's exit code or signal, from the report pipe (setup failures are errors) and,
/// without namespaces, the direct child's status.
fn exit_of(
    r: &relay::Relayed,
    use_ns: bool,
    spec: &Spec,
) -> Result<(Option<i32>, Option<i32>), SandboxError> {
    let mut cmd_status: Option<i32> = if use_ns { None } else { r.raw_status };
    for (st, val) in relay::records(&r.report) {
        if st == sys::stage::EXIT_STATUS {
            cmd_status = Some(val);
        } else if (st == sys::stage::MOUNT_PRIVATE || st == sys::stage::USERNS)
            && (val == libc::EPERM || val == libc::EACCES)
        {
            // The user namespace was created but gives no capability in it (Ubuntu's
            // AppArmor restriction): it is refused all the same.
            return Err(SandboxError::UserNamespaces {
                why: format!(
                    "{}: {}",
                    sys::stage::name(st),
                    std::io::Error::from_raw_os_error(val)
                ),
            });
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
    Ok(match cmd_status {
        _ if r.timed_out || r.over_limit || r.aborted => (None, Some(libc::SIGKILL)),
        Some(s) if libc::WIFEXITED(s) => (Some(libc::WEXITSTATUS(s)), None),
        Some(s) if libc::WIFSIGNALED(s) => (None, Some(libc::WTERMSIG(s))),
        // The helper died without a report: it was killed (only the broker can do that).
        _ => (None, Some(libc::SIGKILL)),
    })
}

/// The self-pipe of caught termination signals, when this thread's runs are interruptible.
fn interrupt_fd() -> i32 {
    if INTERRUPTIBLE.with(|d| d.get() > 0) {
        INTERRUPT_READ.get().map_or(-1, |f| f.as_raw_fd())
    } else {
        -1
    }
}

/// Whether `fd` (a call's cancellation pipe) is readable or hung up, now.
pub fn fd_ready(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    let mut p = [sys::PollFd {
        fd: fd.as_raw_fd(),
        out: false,
        ready: false,
        hangup: false,
    }];
    sys::poll(&mut p, 0).is_ok() && (p[0].ready || p[0].hangup)
}

/// How [`wait_writable`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Room {
    /// The fd takes more (or reports an error the next write will see).
    Ready,
    /// The deadline passed first.
    Deadline,
    /// The call was cancelled first.
    Cancelled,
}

/// Waits until `fd` is writable, `deadline` passes (None: no deadline) or `cancel` (the
/// call's cancellation) becomes readable, whichever comes first: a write to a slow reader
/// that must not outlive its call.
pub fn wait_writable(
    fd: std::os::fd::BorrowedFd<'_>,
    deadline: Option<Instant>,
    cancel: Option<std::os::fd::BorrowedFd<'_>>,
) -> Room {
    loop {
        let timeout_ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Room::Deadline;
                }
                // Rounded up: a wait that ends just before the deadline would spin.
                left.as_millis().saturating_add(1).min(i32::MAX as u128) as i32
            }
        };
        let mut p = [
            sys::PollFd {
                fd: fd.as_raw_fd(),
                out: true,
                ready: false,
                hangup: false,
            },
            sys::PollFd {
                fd: cancel.map_or(-1, |c| c.as_raw_fd()),
                out: false,
                ready: false,
                hangup: false,
            },
        ];
        if sys::poll(&mut p, timeout_ms).is_err() {
            return Room::Ready;
        }
        if p[1].ready || p[1].hangup {
            return Room::Cancelled;
        }
        if p[0].ready || p[0].hangup {
            return Room::Ready;
        }
    }
}

/// Opens a file a caller names for reading, not blocking (a FIFO). Never through `/proc`'s
/// magic links (`/proc/self/fd/N`, `/dev/stdin`) and never a file of `/proc` itself: a
/// daemon opens it for its client, and there `/proc/self` is the daemon, whose open files
/// and memory maps its own identity may read whatever the client's rights are.
fn open_named(path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    // not-ws: a file the caller names, opened with the caller's rights by the front end
    let fd = match rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        flags,
        Mode::empty(),
        ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) => {
            return Err(std::io::Error::other(
                "it is reached through a link of /proc to a process's files (/dev/stdin, /proc/self/fd/N) or a loop of links; gateway does not read those for a call (for stdin, name `-`)",
            ));
        }
        // A kernel without openat2 (before 5.6): a plain open, still checked below.
        Err(rustix::io::Errno::NOSYS) => rustix::fs::open(path, flags, Mode::empty())?,
        Err(e) => return Err(e.into()),
    };
    // PROC_SUPER_MAGIC (linux/magic.h).
    const PROC: i64 = 0x9fa0;
    // `f_type`'s type differs between targets.
    #[allow(clippy::unnecessary_cast)]
    let on_proc = rustix::fs::fstatfs(&fd).is_ok_and(|st| st.f_type as i64 == PROC);
    if on_proc {
        return Err(std::io::Error::other(
            "it is a file of /proc; gateway does not read those for a call (copy what you need to a file first)",
        ));
    }
    Ok(std::fs::File::from(fd))
}

/// Reads the file a caller names at `path` (`--content-file`, a baseline, an anchor): a
/// regular file as it is; a FIFO or a pipe as `cat` would (waiting for a writer and its
/// end), but never past `cancel` (the call's cancellation) becoming readable. Opened without
/// blocking, so a FIFO nobody writes to is never waited on in `open`. More than `max` bytes:
/// the first `max` + 1 (the caller refuses what is over).
pub fn read_named(
    path: &Path,
    max: u64,
    cancel: Option<std::os::fd::BorrowedFd<'_>>,
) -> std::io::Result<Vec<u8>> {
    let cancel = cancel.map_or(-1, |c| c.as_raw_fd());
    use std::io::Read;
    use std::os::unix::fs::FileTypeExt;
    let f = open_named(path)?;
    let mut out = Vec::new();
    if !f.metadata()?.file_type().is_fifo() {
        (&f).take(max.saturating_add(1)).read_to_end(&mut out)?;
        return Ok(out);
    }
    let mut chunk = vec![0u8; 64 * 1024];
    while (out.len() as u64) <= max {
        let mut p = [
            sys::PollFd {
                fd: f.as_raw_fd(),
                out: false,
                ready: false,
                hangup: false,
            },
            sys::PollFd {
                fd: cancel,
                out: false,
                ready: false,
                hangup: false,
            },
        ];
        sys::poll(&mut p, -1)?;
        if p[1].ready || p[1].hangup {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "the call ended (its client went away or the daemon stopped) while waiting for the writer",
            ));
        }
        if !(p[0].ready || p[0].hangup) {
            continue;
        }
        match (&f).read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    out.truncate(usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX));
    Ok(out)
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

/// Shared by the layers' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Confinement, Limits, Network};
    use std::path::PathBuf;

    /// A confinement asking for namespaces and nothing else.
    pub(crate) fn confinement() -> Confinement {
        Confinement {
            read: Vec::new(),
            write: Vec::new(),
            exec: Vec::new(),
            deny: Vec::new(),
            protected: Vec::new(),
            hidden: Vec::new(),
            network: Network::None,
            limits: Limits::default(),
            namespaces: true,
            best_effort: false,
            memory_cgroup: true,
            private_tmp: None,
            danger_openat2: false,
            run_as: None,
            capture: None,
        }
    }

    /// A test that needs root (namespaces, mounts, capabilities, cgroups): true when it can
    /// run; it fails, rather than skip, without root, unless GATEWAY_TEST_NO_SANDBOX is set
    /// (as the integration tests' `sandbox_test!`).
    #[allow(
        clippy::disallowed_methods,
        reason = "the test suite's own opt-out variable, not a caller's environment"
    )]
    pub(crate) fn require_root() -> bool {
        if std::env::var_os("GATEWAY_TEST_NO_SANDBOX").is_some() {
            eprintln!("skipped: GATEWAY_TEST_NO_SANDBOX is set");
            return false;
        }
        assert_eq!(
            crate::sys::euid(),
            0,
            "this sandbox test needs root (GATEWAY_TEST_NO_SANDBOX=1 skips it)"
        );
        true
    }

    /// A fresh, empty directory for one test.
    pub(crate) fn scratch(name: &str) -> PathBuf {
        let d = PathBuf::from(format!("/tmp/gwu-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch dir");
        d
    }
}

#[cfg(test)]
mod identity_tests {
    use super::testing::{confinement, require_root};
    use super::{RunAs, Spec, Stdin, Stream, StreamIo};

    /// What a run printed.
    #[derive(Default)]
    struct Out(Vec<u8>);

    impl StreamIo for Out {
        fn output(&mut self, _: Stream, data: &[u8]) -> bool {
            self.0.extend_from_slice(data);
            true
        }
    }

    #[test]
    fn a_clients_run_enters_its_directory_with_the_clients_rights() {
        // Issue 35 (attacker): the child entered its directory by path as root, before it took
        // the client's identity, so a link swapped after the broker's check led a client's
        // command into a directory the client may not search. Now a client's run enters it
        // as the client, without capabilities: the kernel checks the client's rights.
        if !require_root() {
            return;
        }
        let closed = std::env::temp_dir().join(format!("gw-closed-{}", std::process::id()));
        let inner = closed.join("pub");
        std::fs::create_dir_all(&inner).expect("mkdir");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let spec = |run_as: Option<RunAs>| {
            let mut confine = confinement();
            confine.read = vec!["/".into()];
            confine.exec = vec!["/".into()];
            confine.namespaces = false;
            confine.memory_cgroup = false;
            confine.run_as = run_as;
            Spec {
                program: "/bin/pwd".into(),
                argv: vec!["pwd".into()],
                env: vec![("PATH".into(), "/usr/bin:/bin".into())],
                cwd: inner.clone(),
                stdin: Stdin::Null,
                confine,
                cancel: None,
                proxy: None,
            }
        };
        let mut out = Out::default();
        let as_root = super::run(&spec(None), &mut out);
        assert!(
            as_root.as_ref().is_ok_and(|o| o.exit_code == Some(0)),
            "{as_root:?}"
        );
        let mut out = Out::default();
        let nobody = RunAs {
            uid: 65534,
            gid: 65534,
            groups: vec![],
        };
        let as_client = super::run(&spec(Some(nobody)), &mut out);
        let _ = std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o755));
        let _ = std::fs::remove_dir_all(&closed);
        assert!(
            out.0.is_empty()
                && matches!(&as_client, Err(super::SandboxError::Setup { source, .. })
                    if source.kind() == std::io::ErrorKind::PermissionDenied),
            "a client's run entered a directory the client cannot search: {as_client:?}, printed {:?}",
            String::from_utf8_lossy(&out.0)
        );
    }
}

#[cfg(test)]
mod limits_tests {
    #[test]
    fn the_kernels_limits_table_is_read_whole_or_not_at_all() {
        let own = super::caller_rlimits(std::process::id()).expect("own limits");
        assert_eq!(own.len(), 16);
        let nofile = own
            .iter()
            .find(|r| r.0 == crate::sys::resource_id(libc::RLIMIT_NOFILE))
            .expect("nofile");
        assert_eq!(
            crate::sys::testing::getrlimit(libc::RLIMIT_NOFILE),
            (nofile.1, nofile.2)
        );
        let text = "Limit                     Soft Limit           Hard Limit           Units\nMax cpu time              unlimited            unlimited            seconds\n";
        assert_eq!(super::parse_limits(text), None, "a resource missing");
        let full = std::fs::read_to_string("/proc/self/limits").expect("limits");
        let broken = full.replace("Max open files            ", "Max open files            x");
        assert_eq!(
            super::parse_limits(&broken),
            None,
            "a value that is not one"
        );
    }
}

#[cfg(test)]
mod named_tests {
    use super::read_named;
    use std::os::fd::AsRawFd;

    /// A daemon opens what its client names: never a file of /proc (its own maps), never
    /// through /proc's magic links (its own open files, another client's workspace among
    /// them). A plain file and a link to it are read.
    #[test]
    fn proc_and_its_magic_links_are_not_read_for_a_caller() {
        let dir = std::env::temp_dir().join(format!("gw-named-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("data");
        std::fs::write(&f, b"data").unwrap();
        std::os::unix::fs::symlink(&f, dir.join("link")).unwrap();
        assert_eq!(read_named(&f, 100, None).unwrap(), b"data");
        assert_eq!(read_named(&dir.join("link"), 100, None).unwrap(), b"data");
        let open = std::fs::File::open(&f).unwrap();
        let through = format!("/proc/self/fd/{}", open.as_raw_fd());
        let e = read_named(through.as_ref(), 100, None).unwrap_err();
        assert!(e.to_string().contains("/proc"), "{e}");
        for p in ["/proc/self/maps", "/proc/self/status", "/dev/stdin"] {
            assert!(read_named(p.as_ref(), 100, None).is_err(), "{p} was read");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
