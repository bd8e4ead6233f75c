//! The namespaces layer and the network mode it decides: every run, whoever starts the
//! broker, runs under a pid-1 helper in its own user, pid, mount, ipc and uts namespaces, and
//! a network namespace of its own for `none` and `loopback`; the helper mounts a fresh /proc,
//! sets `pid_max` and brings `lo` up (`sys::finish_namespaces`).
//!
//! The user namespace maps the caller to itself, as bubblewrap does without privileges: the
//! command runs as the user and what it creates is the user's. A broker with CAP_SETUID and
//! CAP_SETGID (root, the daemon of contrib/) maps itself and, for a daemon's client of another
//! uid, that client's uid, gid and groups (the command takes them before dropping its
//! capabilities); an unprivileged broker maps its own uid and gid, with `setgroups` denied as
//! the kernel requires.
//!
//! Where user namespaces are refused (`user.max_user_namespaces = 0`, Ubuntu's AppArmor
//! restriction, some containers), the run fails closed with what is missing
//! ([`super::SandboxError::UserNamespaces`]) unless the policy says `best_effort`: then it
//! goes on without namespaces (reported `NotApplied`), landlock and seccomp still hold, and
//! `loopback` becomes no network at all rather than the host's.

use super::{Confinement, LayerStatus, Network, RunAs, SandboxError, caps};
use crate::sys;

/// What the namespaces layer decided.
#[derive(Debug)]
pub(crate) struct Namespaces {
    /// The run gets its namespaces.
    pub use_ns: bool,
    /// A network namespace of its own.
    pub net_ns: bool,
    /// The network mode the other layers enforce (`loopback` becomes `none` without a
    /// network namespace).
    pub network: Network,
    /// Status of [`super::Layer::Namespaces`].
    pub status: LayerStatus,
    /// Status of [`super::Layer::Network`].
    pub network_status: LayerStatus,
}

/// The namespaces layer for `c`; `refused`: why this host refused the run's user namespace
/// (a first attempt failed, and the policy is best-effort), `None` to have them.
pub(crate) fn plan(c: &Confinement, refused: Option<&str>) -> Namespaces {
    let use_ns = c.namespaces && refused.is_none();
    let status = if !c.namespaces {
        LayerStatus::NotRequested
    } else if let Some(why) = refused {
        LayerStatus::NotApplied {
            why: format!(
                "user namespaces are refused here ({why}; best_effort): no user, pid, mount, ipc, uts or net isolation, so the host is not read-only (only landlock confines writes, and it has no right for chmod, utimes or xattrs), the host's processes and /proc/net are visible where the policy reads /proc; descendants that leave the command's session are killed when it ends, by the broker as their subreaper"
            ),
        }
    } else {
        LayerStatus::Enforced
    };
    let (network, network_status) = if c.network.private_loopback() && !use_ns {
        let why = "loopback: no network namespace, so no network at all (network = none)";
        (Network::None, LayerStatus::Partial { why: why.into() })
    } else {
        (c.network.clone(), LayerStatus::Enforced)
    };
    // `loopback` (with `lo` up) and `none` (empty, so the host's sockets are not listed in
    // /proc/net, and abstract unix names, which belong to a network namespace, are the run's
    // own) get a network namespace; `connect_tcp` uses the host's.
    let net_ns = use_ns && !matches!(network, Network::ConnectTcp(_));
    Namespaces {
        use_ns,
        net_ns,
        network,
        status,
        network_status,
    }
}

/// The uid and gid maps of the run's user namespace, for a command that runs as `run_as` (a
/// daemon's client of another uid) or as the broker itself.
pub(crate) fn user_maps(run_as: Option<&RunAs>) -> Result<sys::UserMaps, SandboxError> {
    let (uid, gid) = (sys::euid(), sys::egid());
    let privileged = caps::has_cap(caps::CAP_SETUID) && caps::has_cap(caps::CAP_SETGID);
    if !privileged {
        if let Some(u) = run_as.filter(|u| u.uid != uid) {
            return Err(SandboxError::Required {
                layer: super::Layer::Namespaces,
                why: format!(
                    "running a command as uid {} needs CAP_SETUID and CAP_SETGID (the daemon of contrib/gateway.service has them)",
                    u.uid
                ),
            });
        }
        return Ok(sys::UserMaps {
            uid: format!("{uid} {uid} 1\n"),
            gid: format!("{gid} {gid} 1\n"),
            deny_setgroups: true,
        });
    }
    let mut uids = vec![uid];
    let mut gids = vec![gid];
    if let Some(u) = run_as {
        uids.push(u.uid);
        gids.push(u.gid);
        gids.extend(&u.groups);
    }
    let lines = |mut v: Vec<u32>| {
        v.sort_unstable();
        v.dedup();
        v.iter().map(|i| format!("{i} {i} 1\n")).collect::<String>()
    };
    if gids.len() > 340 {
        return Err(SandboxError::Required {
            layer: super::Layer::Namespaces,
            why: format!(
                "the caller has {} groups; a user namespace maps at most 340",
                gids.len()
            ),
        });
    }
    Ok(sys::UserMaps {
        uid: lines(uids),
        gid: lines(gids),
        deny_setgroups: false,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{confinement, require_root};
    use super::super::{LayerStatus, Network};
    use super::plan;
    use crate::sys;

    #[test]
    fn refused_namespaces_are_not_applied_and_loopback_becomes_none() {
        let mut c = confinement();
        c.network = Network::Loopback;
        let ns = plan(&c, Some("clone: EPERM"));
        assert!(!ns.use_ns && !ns.net_ns);
        assert!(
            matches!(&ns.status, LayerStatus::NotApplied { why } if why.contains("/proc/net") && why.contains("EPERM")),
            "{:?}",
            ns.status
        );
        assert!(matches!(ns.network, Network::None));
        assert!(
            matches!(&ns.network_status, LayerStatus::Partial { why } if why.contains("loopback"))
        );
        c.namespaces = false;
        let ns = plan(&c, None);
        assert_eq!(ns.status, LayerStatus::NotRequested);
        assert!(!ns.use_ns);
        c.namespaces = true;
        c.network = Network::ConnectTcp(vec![443]);
        let ns = plan(&c, None);
        assert_eq!(ns.status, LayerStatus::Enforced);
        assert!(
            ns.use_ns && !ns.net_ns,
            "connect_tcp keeps the host's network"
        );
    }

    /// The namespaces the helper is cloned into, entered alone in a forked child: its own
    /// network namespace with only `lo`, up; its own ipc namespace; a pid namespace whose
    /// first process is pid 1.
    #[test]
    fn namespaces_alone_isolate_network_ipc_and_pids() {
        if !require_root() {
            return;
        }
        let mut c = confinement();
        c.network = Network::Loopback;
        let ns = plan(&c, None);
        assert_eq!(ns.status, LayerStatus::Enforced);
        assert_eq!(ns.network_status, LayerStatus::Enforced);
        assert!(ns.use_ns && ns.net_ns);
        let host_net = std::fs::read_link("/proc/self/ns/net").expect("ns");
        let host_ipc = std::fs::read_link("/proc/self/ns/ipc").expect("ns");
        let code = sys::testing::in_fork(|| {
            sys::testing::unshare(sys::namespace_flags(ns.net_ns, false)).expect("unshare");
            // A fresh network namespace: `lo` down, nothing reachable even on loopback.
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = l.local_addr().expect("addr");
            assert!(std::net::TcpStream::connect(addr).is_err(), "lo is down");
            assert!(sys::loopback_up(), "lo up");
            std::net::TcpStream::connect(addr).expect("connect on lo");
            assert_ne!(
                std::fs::read_link("/proc/self/ns/net").expect("ns"),
                host_net
            );
            assert_ne!(
                std::fs::read_link("/proc/self/ns/ipc").expect("ns"),
                host_ipc
            );
            let dev = std::fs::read_to_string("/proc/self/net/dev").expect("net/dev");
            assert_eq!(dev.lines().skip(2).count(), 1, "only lo: {dev}");
            // The pid namespace holds the helper's children: the first is pid 1.
            sys::testing::in_fork(|| i32::from(std::process::id() != 1))
        });
        assert_eq!(code, 0);
    }
}
