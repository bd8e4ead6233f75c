//! The rlimits layer: CPU seconds, address space per process, open files, file size and
//! processes, set by the command before it drops its capabilities (`sys::set_rlimits`); with a
//! pid namespace, processes are bounded by its `pid_max` (RLIMIT_NPROC counts per user and does
//! not bind uid 0).

use super::{LayerStatus, Limits, SandboxError, cstr};
use crate::sys;

/// Smallest pid_max the kernel accepts in a pid namespace (RESERVED_PIDS + 1).
const PID_MAX_MIN: u64 = 301;

/// What the rlimits layer prepared.
#[derive(Debug, Default)]
pub(crate) struct Rlimits {
    /// (resource, soft, hard).
    pub set: Vec<(sys::RlimitResource, libc::rlim_t, libc::rlim_t)>,
    /// The pid namespace's `pid_max`, written by the helper.
    pub pid_max: Option<std::ffi::CString>,
    /// What is limited, by name, for `EnforcementStatus::limits`.
    pub names: Vec<String>,
}

/// The rlimits layer for `l`, with or without a pid namespace, for a broker that is (or not)
/// root. Timeout and output are enforced by the relay and only named here.
pub(crate) fn plan(
    l: &Limits,
    use_ns: bool,
    root: bool,
) -> Result<(Rlimits, LayerStatus), SandboxError> {
    let mut r = Rlimits::default();
    let mut missing = Vec::new();
    // (resource, value) the policy sets, soft and hard alike.
    let mut want: Vec<(sys::RlimitResource, u64)> = Vec::new();
    if let Some(v) = l.cpu {
        want.push((libc::RLIMIT_CPU, v));
        r.names.push(format!("cpu={v}s"));
    }
    if let Some(v) = l.memory {
        want.push((libc::RLIMIT_AS, v));
        r.names
            .push(format!("memory={v}B (address space per process)"));
    }
    if let Some(v) = l.open_files {
        want.push((libc::RLIMIT_NOFILE, v));
        r.names.push(format!("open_files={v}"));
    }
    if let Some(v) = l.file_size {
        want.push((libc::RLIMIT_FSIZE, v));
        r.names.push(format!("file_size={v}B"));
    }
    if let Some(v) = l.pids {
        want.push((libc::RLIMIT_NPROC, v));
        if use_ns {
            // Pids are numbered from 1 in the namespace; pid_max bounds how many exist at once.
            let pm = (v + 1).max(PID_MAX_MIN);
            r.pid_max = Some(cstr(pm.to_string().as_bytes(), "pid_max")?);
            r.names
                .push(format!("pids={} (pid namespace pid_max)", pm - 1));
        } else if root {
            missing.push(
                "pids: RLIMIT_NPROC does not bind uid 0 and there is no pid namespace".to_string(),
            );
        } else {
            r.names.push(format!("pids={v} (RLIMIT_NPROC, per user)"));
        }
    }
    if let Some(t) = l.timeout {
        r.names.push(format!("timeout={}s", t.as_secs()));
    }
    if let Some(o) = l.output {
        r.names.push(format!("output={o}B"));
    }
    // Never above the caller's own limits; and what the policy leaves alone is the caller's
    // own, not this process's (a daemon's may be higher than its client's).
    let ceiling = |res: sys::RlimitResource| {
        l.ceiling
            .iter()
            .find(|c| sys::resource_of(c.0) == res)
            .map(|c| (c.1, c.2))
    };
    for &(res, v) in &want {
        let (soft, hard) = match ceiling(res) {
            Some((cs, ch)) => (v.min(cs).min(ch), v.min(ch)),
            None => (v, v),
        };
        r.set.push((res, soft, hard));
    }
    for &(res, cs, ch) in &l.ceiling {
        let res = sys::resource_of(res);
        if !want.iter().any(|w| w.0 == res) {
            r.set.push((res, cs, ch));
        }
    }
    let status = if want.is_empty() {
        LayerStatus::NotRequested
    } else {
        LayerStatus::partial_unless_empty(missing)
    };
    Ok((r, status))
}

#[cfg(test)]
mod tests {
    use super::super::{LayerStatus, Limits};
    use super::plan;
    use crate::sys;

    fn limits() -> Limits {
        Limits {
            cpu: Some(7),
            memory: Some(3 << 30),
            open_files: Some(77),
            file_size: Some(1 << 20),
            pids: Some(50),
            ..Limits::default()
        }
    }

    /// The limits alone, set in a forked child and read back with getrlimit.
    #[test]
    fn rlimits_alone_are_read_back_with_getrlimit() {
        let (r, status) = plan(&limits(), true, true).expect("plan");
        assert_eq!(status, LayerStatus::Enforced);
        assert_eq!(r.pid_max.as_deref(), Some(c"301"));
        let code = sys::testing::in_fork(|| {
            sys::set_rlimits(&r.set).expect("setrlimit");
            for (res, want) in [
                (libc::RLIMIT_CPU, 7),
                (libc::RLIMIT_AS, 3 << 30),
                (libc::RLIMIT_NOFILE, 77),
                (libc::RLIMIT_FSIZE, 1 << 20),
                (libc::RLIMIT_NPROC, 50),
            ] {
                assert_eq!(sys::testing::getrlimit(res), (want, want), "resource {res}");
            }
            // The open-files limit binds: fd 77 and above cannot be had.
            let e = std::fs::File::open("/dev/null").map(|f| {
                let mut v = vec![f];
                while let Ok(f) = std::fs::File::open("/dev/null") {
                    v.push(f);
                }
                v.len()
            });
            assert!(e.expect("opened") < 77);
            0
        });
        assert_eq!(code, 0);
    }

    #[test]
    fn pids_without_a_pid_namespace_are_partial_for_root_only() {
        let (r, status) = plan(&limits(), false, true).expect("plan");
        assert!(r.pid_max.is_none());
        assert!(
            matches!(&status, LayerStatus::Partial { why } if why.contains("RLIMIT_NPROC does not bind uid 0")),
            "{status:?}"
        );
        let (r, status) = plan(&limits(), false, false).expect("plan");
        assert_eq!(status, LayerStatus::Enforced);
        assert!(
            r.names
                .iter()
                .any(|n| n == "pids=50 (RLIMIT_NPROC, per user)")
        );
        let (r, status) = plan(&Limits::default(), true, true).expect("plan");
        assert_eq!(status, LayerStatus::NotRequested);
        assert!(r.set.is_empty());
    }
}
