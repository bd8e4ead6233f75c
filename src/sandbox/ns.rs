//! The namespaces layer and the network mode it decides: with a privileged broker (root, or
//! CAP_SYS_ADMIN and CAP_DAC_OVERRIDE) the command runs under a pid-1 helper in new pid, mount
//! and ipc namespaces, and a new network namespace for `none` and `loopback`; the helper
//! mounts a fresh /proc, sets `pid_max` and brings `lo` up (`sys::finish_namespaces`).
//!
//! Without privileges the run goes on without them (reported `NotApplied`): landlock and
//! seccomp still hold, and `loopback` (a private network namespace) becomes no network at all
//! rather than the host's.

use super::{Confinement, LayerStatus, Network};

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

/// The namespaces layer for `c`, on a broker that is (or not) `privileged`.
pub(crate) fn plan(c: &Confinement, privileged: bool) -> Namespaces {
    let use_ns = c.namespaces && privileged;
    let status = if !c.namespaces {
        LayerStatus::NotRequested
    } else if use_ns {
        LayerStatus::Enforced
    } else {
        LayerStatus::NotApplied {
            why: "the broker is not privileged (pid, mount, ipc, net isolation off: the host's /proc, including the socket lists in /proc/net, stays readable where the policy reads /proc; descendants that leave the command's session are killed when it ends, by the broker as their subreaper)".into(),
        }
    };
    let (network, network_status) = if matches!(c.network, Network::Loopback) && !use_ns {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{confinement, require_root};
    use super::super::{LayerStatus, Network, sys};
    use super::plan;

    #[test]
    fn unprivileged_namespaces_are_not_applied_and_loopback_becomes_none() {
        let mut c = confinement();
        c.network = Network::Loopback;
        let ns = plan(&c, false);
        assert!(!ns.use_ns && !ns.net_ns);
        assert!(
            matches!(&ns.status, LayerStatus::NotApplied { why } if why.contains("/proc/net")),
            "{:?}",
            ns.status
        );
        assert!(matches!(ns.network, Network::None));
        assert!(
            matches!(&ns.network_status, LayerStatus::Partial { why } if why.contains("loopback"))
        );
        c.namespaces = false;
        let ns = plan(&c, true);
        assert_eq!(ns.status, LayerStatus::NotRequested);
        assert!(!ns.use_ns);
        c.namespaces = true;
        c.network = Network::ConnectTcp(vec![443]);
        let ns = plan(&c, true);
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
        let ns = plan(&c, true);
        assert_eq!(ns.status, LayerStatus::Enforced);
        assert_eq!(ns.network_status, LayerStatus::Enforced);
        assert!(ns.use_ns && ns.net_ns);
        let host_net = std::fs::read_link("/proc/self/ns/net").expect("ns");
        let host_ipc = std::fs::read_link("/proc/self/ns/ipc").expect("ns");
        let code = sys::testing::in_fork(|| {
            sys::testing::unshare(sys::namespace_flags(ns.net_ns)).expect("unshare");
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
