//! The capabilities layer: the command locks securebits (so that exec as uid 0 regains
//! nothing), empties its bounding and ambient sets, takes the caller's identity if it runs as
//! another user, clears its effective, permitted and inheritable sets and sets no_new_privs
//! (`sys::lock_capabilities`, `sys::clear_capabilities`, `sys::set_no_new_privs`). The `caps`
//! crate allocates, so the child's side is raw `prctl`/`capset` in `src/sys/`.

use super::LayerStatus;
use crate::sys;

/// Capability numbers (linux/capability.h) the sandbox's setup needs.
pub(crate) const CAP_DAC_OVERRIDE: u32 = 1;
pub(crate) const CAP_SETGID: u32 = 6;
pub(crate) const CAP_SETUID: u32 = 7;
pub(crate) const CAP_SETPCAP: u32 = 8;
pub(crate) const CAP_SYS_ADMIN: u32 = 21;

/// Does this process hold `cap` in its effective set?
pub(crate) fn has_cap(cap: u32) -> bool {
    sys::effective_caps() & (1u64 << cap) != 0
}

/// What the capabilities layer prepared.
#[derive(Debug)]
pub(crate) struct Caps {
    /// Empty the bounding set and lock securebits (root or CAP_SETPCAP).
    pub lock: bool,
    /// The kernel's highest capability number.
    pub cap_last: u32,
}

/// The capabilities layer for a broker that can (`lock`: root or CAP_SETPCAP) or cannot empty
/// the bounding set and lock securebits. Either way the command ends with no capability and
/// no_new_privs; without `lock` the bounding set stays, which is `Partial`.
pub(crate) fn plan(lock: bool) -> (Caps, LayerStatus) {
    let status = if lock {
        LayerStatus::Enforced
    } else {
        LayerStatus::Partial {
            why: "the broker lacks CAP_SETPCAP: effective, permitted, inheritable and ambient sets are cleared and no_new_privs set, but the bounding set and securebits stay as they are".into(),
        }
    };
    let caps = Caps {
        lock,
        cap_last: cap_last(),
    };
    (caps, status)
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

#[cfg(test)]
mod tests {
    use super::super::LayerStatus;
    use super::super::testing::require_root;
    use super::plan;
    use crate::sys;

    /// A `/proc/self/status` field, in hex.
    fn field(status: &str, name: &str) -> u64 {
        let v = status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} in {status}"));
        u64::from_str_radix(v.trim(), 16).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// The capabilities alone, dropped in a forked child of a root process: every set empty,
    /// securebits locked, no_new_privs, as /proc/self/status says.
    #[test]
    fn capabilities_alone_leave_every_set_empty() {
        if !require_root() {
            return;
        }
        let (caps, status) = plan(true);
        assert_eq!(status, LayerStatus::Enforced);
        let before = std::fs::read_to_string("/proc/self/status").expect("status");
        assert_ne!(
            field(&before, "CapEff:"),
            0,
            "root starts with capabilities"
        );
        let code = sys::testing::in_fork(|| {
            sys::lock_capabilities(caps.lock, caps.cap_last).expect("lock");
            sys::clear_capabilities().expect("clear");
            sys::set_no_new_privs().expect("no_new_privs");
            let s = std::fs::read_to_string("/proc/self/status").expect("status");
            for f in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
                assert_eq!(field(&s, f), 0, "{f} {s}");
            }
            assert_eq!(field(&s, "NoNewPrivs:"), 1);
            // And root can no longer do what a capability would let it (CAP_SYS_ADMIN).
            assert!(sys::testing::unshare(libc::CLONE_NEWNS).is_err());
            0
        });
        assert_eq!(code, 0);
    }

    #[test]
    fn without_setpcap_the_bounding_set_stays_and_says_so() {
        let (caps, status) = plan(false);
        assert!(!caps.lock);
        assert!(
            matches!(&status, LayerStatus::Partial { why } if why.contains("bounding set")),
            "{status:?}"
        );
    }
}
