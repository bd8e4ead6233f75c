//! What a run really got: one [`LayerStatus`] per [`Layer`], as rust-landlock's
//! `RestrictionStatus` reports what a ruleset enforced, collected in [`EnforcementStatus`].
//!
//! Each layer's function (`ns::plan`, `mounts::plan`, `cgroup::layer`, `rlimits::plan`,
//! `caps::plan`, `landlock::layer`, `seccomp::layer`) returns its status with what it prepared
//! for the child; the child applies every step or fails the run (fail closed), so a run that
//! started has exactly what the statuses say.

use super::LandlockStatus;
use serde::{Serialize, Serializer};

/// A confinement layer of the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// pid, mount, ipc (and net) namespaces.
    Namespaces,
    /// The network mode (a private network namespace, landlock TCP rules, seccomp's socket
    /// families).
    Network,
    /// The mount namespace's masks, read-only binds, pins and private TMPDIR.
    Mounts,
    /// The memory cgroup bounding a run's total memory.
    Cgroup,
    /// Resource limits (rlimits and the pid namespace's `pid_max`).
    Rlimits,
    /// Capabilities cleared, securebits locked, no_new_privs.
    Capabilities,
    /// Landlock filesystem and TCP rules, scoping.
    Landlock,
    /// The seccomp filter.
    Seccomp,
}

impl Layer {
    /// Its name, as the reports spell it.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Namespaces => "namespaces",
            Layer::Network => "network",
            Layer::Mounts => "mounts",
            Layer::Cgroup => "cgroup",
            Layer::Rlimits => "rlimits",
            Layer::Capabilities => "capabilities",
            Layer::Landlock => "landlock",
            Layer::Seccomp => "seccomp",
        }
    }
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What one layer enforced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LayerStatus {
    /// Everything the confinement asked of the layer.
    Enforced,
    /// Some of it; `why` says what is missing and what holds instead.
    Partial {
        /// What is missing.
        why: String,
    },
    /// None of it (best effort, or a layer that needs privileges the broker lacks).
    NotApplied {
        /// Why.
        why: String,
    },
    /// The confinement asked nothing of this layer.
    NotRequested,
}

impl LayerStatus {
    /// Enforced, or nothing asked.
    pub fn is_complete(&self) -> bool {
        matches!(self, LayerStatus::Enforced | LayerStatus::NotRequested)
    }

    /// Why the layer is not (fully) enforced, if it is not.
    pub fn why(&self) -> Option<&str> {
        match self {
            LayerStatus::Partial { why } | LayerStatus::NotApplied { why } => Some(why),
            LayerStatus::Enforced | LayerStatus::NotRequested => None,
        }
    }

    /// `Partial` with the reasons joined, or `Enforced` when there are none.
    pub(crate) fn partial_unless_empty(reasons: Vec<String>) -> LayerStatus {
        if reasons.is_empty() {
            LayerStatus::Enforced
        } else {
            LayerStatus::Partial {
                why: reasons.join("; "),
            }
        }
    }
}

/// One status per layer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Layers {
    /// See [`Layer::Namespaces`].
    pub namespaces: LayerStatus,
    /// See [`Layer::Network`].
    pub network: LayerStatus,
    /// See [`Layer::Mounts`].
    pub mounts: LayerStatus,
    /// See [`Layer::Cgroup`].
    pub cgroup: LayerStatus,
    /// See [`Layer::Rlimits`].
    pub rlimits: LayerStatus,
    /// See [`Layer::Capabilities`].
    pub capabilities: LayerStatus,
    /// See [`Layer::Landlock`].
    pub landlock: LayerStatus,
    /// See [`Layer::Seccomp`].
    pub seccomp: LayerStatus,
}

impl Default for Layers {
    fn default() -> Layers {
        let n = || LayerStatus::NotRequested;
        Layers {
            namespaces: n(),
            network: n(),
            mounts: n(),
            cgroup: n(),
            rlimits: n(),
            capabilities: n(),
            landlock: n(),
            seccomp: n(),
        }
    }
}

impl Layers {
    /// Every layer with its status, in the order the child applies them.
    pub fn iter(&self) -> impl Iterator<Item = (Layer, &LayerStatus)> {
        [
            (Layer::Namespaces, &self.namespaces),
            (Layer::Network, &self.network),
            (Layer::Mounts, &self.mounts),
            (Layer::Cgroup, &self.cgroup),
            (Layer::Rlimits, &self.rlimits),
            (Layer::Capabilities, &self.capabilities),
            (Layer::Landlock, &self.landlock),
            (Layer::Seccomp, &self.seccomp),
        ]
        .into_iter()
    }

    /// This layer's status.
    pub fn get(&self, layer: Layer) -> &LayerStatus {
        match layer {
            Layer::Namespaces => &self.namespaces,
            Layer::Network => &self.network,
            Layer::Mounts => &self.mounts,
            Layer::Cgroup => &self.cgroup,
            Layer::Rlimits => &self.rlimits,
            Layer::Capabilities => &self.capabilities,
            Layer::Landlock => &self.landlock,
            Layer::Seccomp => &self.seccomp,
        }
    }
}

/// What the sandbox really applied to a run. Serialized (`--json`'s `enforcement`) with the
/// per-layer statuses under `layers`, and, derived from them, the flat view older readers use:
/// `seccomp`, `no_new_privs`, `capabilities_dropped`, `not_applied` ("layer: why" for every
/// layer not fully enforced) and `fully_enforced`.
#[derive(Clone, Debug, Default)]
pub struct EnforcementStatus {
    /// One status per layer.
    pub layers: Layers,
    /// Landlock's details.
    pub landlock: LandlockStatus,
    /// pid namespace with its own /proc.
    pub pid_namespace: bool,
    /// mount namespace.
    pub mount_namespace: bool,
    /// ipc namespace.
    pub ipc_namespace: bool,
    /// network namespace.
    pub net_namespace: bool,
    /// The run's own user namespace (every namespace above is owned by it).
    pub user_namespace: bool,
    /// The host is read-only in the run's mount namespace, except its writable areas.
    pub read_only_host: bool,
    /// Protected paths made read-only.
    pub protected_read_only: usize,
    /// Denied paths masked in the mount namespace.
    pub denied_masked: usize,
    /// Limits applied, by name.
    pub limits: Vec<String>,
}

impl EnforcementStatus {
    /// The seccomp filter was installed.
    pub fn seccomp(&self) -> bool {
        self.layers.seccomp == LayerStatus::Enforced
    }

    /// no_new_privs was set (with the capabilities layer, always, when a run starts).
    pub fn no_new_privs(&self) -> bool {
        matches!(
            self.layers.capabilities,
            LayerStatus::Enforced | LayerStatus::Partial { .. }
        )
    }

    /// Every capability was cleared, the bounding set emptied and securebits locked.
    pub fn capabilities_dropped(&self) -> bool {
        self.layers.capabilities == LayerStatus::Enforced
    }

    /// The layers not fully enforced, as "layer: why".
    pub fn not_applied(&self) -> Vec<String> {
        self.layers
            .iter()
            .filter_map(|(l, s)| s.why().map(|why| format!("{l}: {why}")))
            .collect()
    }

    /// Every layer asked for was fully enforced.
    pub fn fully_enforced(&self) -> bool {
        self.layers.iter().all(|(_, s)| s.is_complete())
    }
}

/// The serialized form (see [`EnforcementStatus`]).
#[derive(Serialize, schemars::JsonSchema)]
struct Wire<'a> {
    landlock: &'a LandlockStatus,
    seccomp: bool,
    no_new_privs: bool,
    capabilities_dropped: bool,
    pid_namespace: bool,
    mount_namespace: bool,
    ipc_namespace: bool,
    net_namespace: bool,
    user_namespace: bool,
    read_only_host: bool,
    protected_read_only: usize,
    denied_masked: usize,
    limits: &'a [String],
    not_applied: Vec<String>,
    fully_enforced: bool,
    layers: &'a Layers,
}

/// Its schema is its serialized form's.
impl schemars::JsonSchema for EnforcementStatus {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "EnforcementStatus".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Wire::<'static>::json_schema(g)
    }
}

impl Serialize for EnforcementStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Wire {
            landlock: &self.landlock,
            seccomp: self.seccomp(),
            no_new_privs: self.no_new_privs(),
            capabilities_dropped: self.capabilities_dropped(),
            pid_namespace: self.pid_namespace,
            mount_namespace: self.mount_namespace,
            ipc_namespace: self.ipc_namespace,
            net_namespace: self.net_namespace,
            user_namespace: self.user_namespace,
            read_only_host: self.read_only_host,
            protected_read_only: self.protected_read_only,
            denied_masked: self.denied_masked,
            limits: &self.limits,
            not_applied: self.not_applied(),
            fully_enforced: self.fully_enforced(),
            layers: &self.layers,
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flat_view_is_derived_from_the_layers() {
        let mut e = EnforcementStatus::default();
        e.layers.seccomp = LayerStatus::Enforced;
        e.layers.capabilities = LayerStatus::Enforced;
        assert!(e.fully_enforced() && e.not_applied().is_empty());
        e.layers.namespaces = LayerStatus::NotApplied {
            why: "the broker is not privileged".into(),
        };
        e.layers.landlock = LayerStatus::Partial {
            why: "TCP rules: kernel ABI < 4".into(),
        };
        assert!(!e.fully_enforced());
        assert_eq!(
            e.not_applied(),
            [
                "namespaces: the broker is not privileged",
                "landlock: TCP rules: kernel ABI < 4"
            ]
        );
        let v = serde_json::to_value(&e).expect("json");
        assert_eq!(v["seccomp"], true);
        assert_eq!(v["capabilities_dropped"], true);
        assert_eq!(v["fully_enforced"], false);
        assert_eq!(v["not_applied"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["layers"]["namespaces"]["status"], "not_applied");
        assert_eq!(v["layers"]["landlock"]["status"], "partial");
        assert_eq!(v["layers"]["seccomp"]["status"], "enforced");
        assert_eq!(v["layers"]["cgroup"]["status"], "not_requested");
    }
}
