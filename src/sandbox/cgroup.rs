//! A memory cgroup per run, so that the run's *total* memory is bounded (RLIMIT_AS bounds each
//! process, not their sum).
//!
//! - cgroup v2 (unified, with the memory controller): `<root>/gateway/run-*`, `memory.max`,
//!   `memory.swap.max = 0`; the helper is cloned straight into it with
//!   `clone3(CLONE_INTO_CGROUP)`, so nothing is migrated.
//! - cgroup v1 (memory hierarchy): `<memory>/gateway/run-*`, `memory.limit_in_bytes` (and
//!   `memory.memsw.limit_in_bytes` with swap accounting); the broker moves the helper in while
//!   the helper sets up its mounts, and the helper starts the command only afterwards.
//!
//! A run's cgroup is removed once empty; the broker returns before the helper has fully exited,
//! so removal usually happens at the next run's sweep of empty `run-*` cgroups.

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Which hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    V1,
    V2,
}

/// A run's memory cgroup.
pub(crate) struct RunCgroup {
    pub version: Version,
    pub dir: PathBuf,
    /// v2: an O_DIRECTORY fd for clone3's CLONE_INTO_CGROUP.
    pub fd: Option<OwnedFd>,
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

/// Run cgroups of this process that are in use (a daemon may run several at once).
static ACTIVE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes empty `run-*` cgroups left by earlier runs (their helpers had not exited yet when
/// the broker returned). A cgroup is named `run-<broker pid>-<nanos>`; only those of brokers
/// that are gone, or of this process and not in use, are touched: another broker's new cgroup
/// is empty until it moves its helper in.
fn sweep(base: &Path) {
    let Ok(rd) = fs::read_dir(base) else { return };
    let me = std::process::id();
    let active = ACTIVE.lock().map(|a| a.clone()).unwrap_or_default();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(owner) = name
            .strip_prefix("run-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let ours_idle = owner == me && !active.contains(&e.path());
        let orphan = owner != me && !Path::new(&format!("/proc/{owner}")).exists();
        if !(ours_idle || orphan) {
            continue;
        }
        let procs = fs::read_to_string(e.path().join("cgroup.procs")).unwrap_or_default();
        if procs.trim().is_empty() {
            let _ = fs::remove_dir(e.path());
        }
    }
}

/// Creates a run cgroup limited to `memory` bytes. `Ok(None)` when no memory controller is
/// available (the caller reports it); `Err` when one is available but could not be set up.
pub(crate) fn create(memory: u64) -> Result<Option<RunCgroup>, String> {
    let Some(version) = detect() else {
        return Ok(None);
    };
    let base = match version {
        Version::V2 => Path::new(V2_ROOT).join("gateway"),
        Version::V1 => Path::new(V1_MEMORY).join("gateway"),
    };
    if !base.exists() {
        fs::create_dir(&base)
            .or_else(|e| if base.exists() { Ok(()) } else { Err(e) })
            .map_err(|e| format!("creating {}: {e}", base.display()))?;
    }
    if version == Version::V2 {
        // Controllers must be enabled down to our parent (idempotent writes).
        write(
            &Path::new(V2_ROOT).join("cgroup.subtree_control"),
            "+memory",
        )?;
        write(&base.join("cgroup.subtree_control"), "+memory")?;
    }
    sweep(&base);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = base.join(format!("run-{}-{nanos}", std::process::id()));
    fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let setup = || -> Result<Option<OwnedFd>, String> {
        match version {
            Version::V2 => {
                write(&dir.join("memory.max"), &memory.to_string())?;
                if dir.join("memory.swap.max").exists() {
                    write(&dir.join("memory.swap.max"), "0")?;
                }
                let f =
                    fs::File::open(&dir).map_err(|e| format!("opening {}: {e}", dir.display()))?;
                Ok(Some(OwnedFd::from(f)))
            }
            Version::V1 => {
                write(&dir.join("memory.limit_in_bytes"), &memory.to_string())?;
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    write(
                        &dir.join("memory.memsw.limit_in_bytes"),
                        &memory.to_string(),
                    )?;
                }
                Ok(None)
            }
        }
    };
    match setup() {
        Ok(fd) => {
            if let Ok(mut a) = ACTIVE.lock() {
                a.push(dir.clone());
            }
            Ok(Some(RunCgroup { version, dir, fd }))
        }
        Err(e) => {
            let _ = fs::remove_dir(&dir);
            Err(e)
        }
    }
}

impl RunCgroup {
    /// v1: moves a process (the helper) into the cgroup.
    pub(crate) fn add(&self, pid: libc::pid_t) -> Result<(), String> {
        write(&self.dir.join("cgroup.procs"), &pid.to_string())
    }

    /// Was the memory limit hit (some process of the run was OOM-killed)?
    pub(crate) fn oom_killed(&self) -> bool {
        let (file, key) = match self.version {
            Version::V2 => ("memory.events", "oom_kill"),
            Version::V1 => ("memory.oom_control", "oom_kill"),
        };
        fs::read_to_string(self.dir.join(file))
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| {
                    l.strip_prefix(key)
                        .map(|v| v.trim().parse::<u64>().unwrap_or(0))
                })
            })
            .is_some_and(|n| n > 0)
    }

    /// Removes the cgroup if it is already empty; otherwise the next run's sweep does.
    pub(crate) fn remove(self) {
        drop(self.fd);
        if let Ok(mut a) = ACTIVE.lock() {
            a.retain(|d| d != &self.dir);
        }
        let _ = fs::remove_dir(&self.dir);
    }
}
