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

use super::{LayerStatus, Limits, SandboxError};
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Why the run's memory cgroup could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// Writing a control file failed.
    #[error("writing {value:?} to {}: {source}", path.display())]
    Write {
        /// The control file.
        path: PathBuf,
        /// What was written.
        value: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Creating a cgroup directory failed.
    #[error("creating {}: {source}", path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Opening the cgroup (v2) or its `tasks` file (v1) failed.
    #[error("opening {}: {source}", path.display())]
    Open {
        /// The cgroup's directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What the cgroup layer adds to a run.
pub(crate) struct CgroupLayer {
    /// The cgroup the helper joins, if any.
    pub cgroup: Option<RunCgroup>,
    /// The line for `EnforcementStatus::limits`, if any.
    pub limit: Option<String>,
    pub status: LayerStatus,
}

/// The cgroup layer: a run with a memory limit, namespaces (the helper is what joins the
/// cgroup) and `memory_cgroup` joins the cgroup shared by runs with its limit. A controller
/// that is missing leaves the layer `NotApplied` (the per-process limit still holds); one that
/// fails to set up is an error unless `best_effort`.
pub(crate) fn layer(
    limits: &Limits,
    use_ns: bool,
    memory_cgroup: bool,
    best_effort: bool,
) -> Result<CgroupLayer, SandboxError> {
    let none = |limit: Option<String>, status| CgroupLayer {
        cgroup: None,
        limit,
        status,
    };
    let not_applied = |why: String| none(None, LayerStatus::NotApplied { why });
    let Some(mem) = limits.memory else {
        return Ok(none(None, LayerStatus::NotRequested));
    };
    if !memory_cgroup {
        let off = "memory_total: off (policy cgroup = false; per-process limit only)";
        return Ok(none(Some(off.into()), LayerStatus::NotRequested));
    }
    if !use_ns {
        return Ok(not_applied(
            "memory total: a memory cgroup needs a broker that may manage cgroups (root, or the daemon of contrib/gateway.service) and the run's namespaces; the per-process limit still applies".into(),
        ));
    }
    match join(mem) {
        Ok(Some(c)) => {
            let v = if c.version == Version::V2 { "v2" } else { "v1" };
            Ok(CgroupLayer {
                cgroup: Some(c),
                limit: Some(format!(
                    "memory_total={mem}B (cgroup {v}, shared by runs with this limit)"
                )),
                status: LayerStatus::Enforced,
            })
        }
        Ok(None) => Ok(not_applied(
            "memory total: no memory cgroup controller (the per-process limit still applies)"
                .into(),
        )),
        Err(e) if best_effort => Ok(not_applied(format!("memory total: {e}"))),
        Err(e) => Err(e.into()),
    }
}

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

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    fs::write(path, value).map_err(|source| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    })
}

fn mkdir(p: &Path) -> Result<bool, CgroupError> {
    match fs::create_dir(p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(CgroupError::Create {
            path: p.to_path_buf(),
            source,
        }),
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
pub(crate) fn join(memory: u64) -> Result<Option<RunCgroup>, CgroupError> {
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
    .map_err(|source| CgroupError::Open {
        path: dir.clone(),
        source,
    })?;
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

#[cfg(test)]
mod tests {
    use super::super::testing::require_root;
    use super::super::{LayerStatus, Limits};
    use super::{Version, layer};

    /// The cgroup layer alone: the shared cgroup for this limit exists with the limit set.
    #[test]
    fn cgroup_alone_sets_the_memory_limit() {
        if !require_root() {
            return;
        }
        let mem: u64 = 96 << 20;
        let l = Limits {
            memory: Some(mem),
            ..Limits::default()
        };
        let c = layer(&l, true, true, false).expect("cgroup");
        assert_eq!(c.status, LayerStatus::Enforced);
        let cg = c.cgroup.expect("a memory controller on this host");
        let file = match cg.version {
            Version::V2 => "memory.max",
            Version::V1 => "memory.limit_in_bytes",
        };
        let v = std::fs::read_to_string(cg.dir.join(file)).expect("limit");
        assert_eq!(v.trim(), mem.to_string());
        assert!(
            c.limit
                .is_some_and(|s| s.starts_with("memory_total=100663296B"))
        );
        assert!(!cg.oom_killed());
    }

    #[test]
    fn cgroup_not_requested_or_without_namespaces() {
        let l = Limits {
            memory: Some(1 << 30),
            ..Limits::default()
        };
        let c = layer(&Limits::default(), true, true, false).expect("layer");
        assert_eq!(c.status, LayerStatus::NotRequested);
        let c = layer(&l, true, false, false).expect("layer");
        assert_eq!(c.status, LayerStatus::NotRequested);
        assert!(c.limit.is_some_and(|s| s.contains("off")));
        let c = layer(&l, false, true, false).expect("layer");
        assert!(c.cgroup.is_none());
        assert!(
            matches!(&c.status, LayerStatus::NotApplied { why } if why.contains("manage cgroups")),
            "{:?}",
            c.status
        );
    }
}
