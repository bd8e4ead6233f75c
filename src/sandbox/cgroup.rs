//! A memory cgroup for runs, so that memory is bounded in *total* (RLIMIT_AS bounds each
//! process, not their sum: a run of many processes could otherwise take the host's memory).
//!
//! Runs with the same limit share one long-lived cgroup, `gateway/mem-<bytes>`: creating and
//! removing a memory cgroup per run costs milliseconds, and sharing needs no cleanup. The limit
//! therefore bounds all concurrent runs with that limit together, which is what protects the
//! host.
//!
//! - cgroup v2 (unified, with the memory controller): `memory.max`, `memory.swap.max = 0`; the
//!   helper is cloned straight into it with `clone3(CLONE_INTO_CGROUP)`, nothing is migrated.
//! - cgroup v1 (memory hierarchy): `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`
//!   with swap accounting); the helper (single-threaded) moves itself in by writing `0` to the
//!   cgroup's `tasks` file before it starts the command. Moving oneself as a single thread is
//!   the one migration that skips the kernel's global threadgroup lock and its RCU grace
//!   period; writing a pid to `cgroup.procs` costs from 0.5 ms to over 10 ms on this path.

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Which hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    V1,
    V2,
}

/// The memory cgroup a run joins.
pub(crate) struct RunCgroup {
    pub version: Version,
    pub dir: PathBuf,
    /// v2: an O_DIRECTORY fd for clone3's CLONE_INTO_CGROUP; v1: the `tasks` file, open for
    /// writing, for the helper to move itself.
    pub fd: OwnedFd,
    /// OOM kills in the cgroup before the run.
    oom_before: u64,
}

const V2_ROOT: &str = "/sys/fs/cgroup";
const V1_MEMORY: &str = "/sys/fs/cgroup/memory";

fn has_v2_memory() -> bool {
    fs::read_to_string(Path::new(V2_ROOT).join("cgroup.controllers"))
        .map(|c| c.split_whitespace().any(|x| x == "memory"))
        .unwrap_or(false)
}

fn has_v1_memory() -> bool {
    Path::new(V1_MEMORY).join("memory.limit_in_bytes").exists()
}

/// The hierarchy to use, if any.
pub(crate) fn detect() -> Option<Version> {
    if has_v2_memory() {
        Some(Version::V2)
    } else if has_v1_memory() {
        Some(Version::V1)
    } else {
        None
    }
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("writing {value:?} to {}: {e}", path.display()))
}

fn mkdir(p: &Path) -> Result<bool, String> {
    match fs::create_dir(p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(format!("creating {}: {e}", p.display())),
    }
}

fn oom_kills(version: Version, dir: &Path) -> u64 {
    let file = match version {
        Version::V2 => "memory.events",
        Version::V1 => "memory.oom_control",
    };
    fs::read_to_string(dir.join(file))
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("oom_kill ")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

/// The shared cgroup limited to `memory` bytes. `Ok(None)` when no memory controller is
/// available (the caller reports it); `Err` when one is available but could not be set up.
pub(crate) fn join(memory: u64) -> Result<Option<RunCgroup>, String> {
    let Some(version) = detect() else {
        return Ok(None);
    };
    let base = match version {
        Version::V2 => Path::new(V2_ROOT).join("gateway"),
        Version::V1 => Path::new(V1_MEMORY).join("gateway"),
    };
    let dir = base.join(format!("mem-{memory}"));
    let (limit_file, current) = match version {
        Version::V2 => ("memory.max", memory.to_string()),
        Version::V1 => ("memory.limit_in_bytes", memory.to_string()),
    };
    // Fast path: the cgroup exists with the right limit.
    let ready = fs::read_to_string(dir.join(limit_file)).is_ok_and(|v| v.trim() == current);
    if !ready {
        mkdir(&base)?;
        if version == Version::V2 {
            // Controllers must be enabled down to our parent (idempotent writes).
            write(
                &Path::new(V2_ROOT).join("cgroup.subtree_control"),
                "+memory",
            )?;
            write(&base.join("cgroup.subtree_control"), "+memory")?;
        }
        mkdir(&dir)?;
        match version {
            Version::V2 => {
                write(&dir.join("memory.max"), &current)?;
                if dir.join("memory.swap.max").exists() {
                    write(&dir.join("memory.swap.max"), "0")?;
                }
            }
            Version::V1 => {
                // memsw must stay >= the plain limit: raise the plain one first.
                write(&dir.join("memory.limit_in_bytes"), &current)?;
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    write(&dir.join("memory.memsw.limit_in_bytes"), &current)?;
                }
            }
        }
    }
    let fd = match version {
        Version::V2 => fs::File::open(&dir),
        Version::V1 => fs::OpenOptions::new().write(true).open(dir.join("tasks")),
    }
    .map(OwnedFd::from)
    .map_err(|e| format!("opening {}: {e}", dir.display()))?;
    let oom_before = oom_kills(version, &dir);
    Ok(Some(RunCgroup {
        version,
        dir,
        fd,
        oom_before,
    }))
}

impl RunCgroup {
    /// Did the kernel OOM-kill a process in the cgroup during the run? (Concurrent runs with
    /// the same limit share the counter.)
    pub(crate) fn oom_killed(&self) -> bool {
        oom_kills(self.version, &self.dir) > self.oom_before
    }
}
