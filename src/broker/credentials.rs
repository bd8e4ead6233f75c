//! The credential catalogue (`policy::credentials`) applied to this caller: its paths
//! expanded against the caller's home and environment, for `plan` (which denies them to
//! every command and file tool under every policy) and for `policy explain --credentials`.

use super::client;
use crate::policy::credentials::{self, EnvVars, Store};
use crate::policy::{self, Policy};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The homes `~/` stands for: the caller's (`HOME` of the client), this process's, and the
/// home of the account this process runs as (a root broker started with another `HOME`
/// still keeps `/root/.ssh` from its runs).
pub(crate) fn homes(caller_home: &Path) -> Vec<PathBuf> {
    let mut v = vec![caller_home.to_path_buf(), super::own_home()];
    if let Some(h) = account_home() {
        v.push(h);
    }
    v.retain(|h| h.is_absolute() && h.as_path() != Path::new("/"));
    let mut out: Vec<PathBuf> = Vec::new();
    for h in v {
        if !out.contains(&h) {
            out.push(h);
        }
    }
    out
}

/// The passwd home of the uid this process runs as.
fn account_home() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    // not-ws: /proc/self and /etc/passwd: whose home this is
    let uid = std::fs::metadata("/proc/self").ok()?.uid().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2] == uid).then(|| PathBuf::from(f[5]))
    })
}

/// Every catalogue store with the paths it denies to this caller (`*` not yet expanded).
pub fn denied(cx: &client::Context, caller_home: &Path) -> Vec<(&'static Store, Vec<PathBuf>)> {
    let homes = homes(caller_home);
    let caller_var = |name: &str| cx.env_var(name).and_then(|v| v.into_string().ok());
    credentials::catalogue()
        .stores
        .iter()
        .map(|s| {
            let mut v: Vec<PathBuf> = s
                .paths
                .iter()
                .flat_map(|t| credentials::expand(t, &homes, &caller_var))
                .collect();
            v.dedup();
            (s, v)
        })
        .collect()
}

/// The caller's denied paths as plain strings, for `plan`'s expansion (globs, canonical forms).
pub(crate) fn denied_templates(cx: &client::Context, caller_home: &Path) -> Vec<String> {
    denied(cx, caller_home)
        .into_iter()
        .flat_map(|(_, v)| v)
        .map(|p| p.display().to_string())
        .collect()
}

/// [`denied`] for the caller of this call.
pub fn denied_for_caller(cx: &client::Context) -> Vec<(&'static Store, Vec<PathBuf>)> {
    denied(cx, &super::home(cx))
}

/// What `policy explain --credentials` shows: what the catalogue denies to this caller under
/// `policy`, what the policy denies besides, and the variables removed from every run.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Explained {
    /// The policy's name.
    pub policy: String,
    /// Where the catalogue comes from (compiled in).
    pub catalogue: &'static str,
    /// Each credential store, in the catalogue's order.
    pub stores: Vec<DeniedStore>,
    /// The catalogue's credential variables.
    pub env: &'static [EnvVars],
    /// Variables every run loses whatever the policy (built in).
    pub always_scrubbed: &'static [&'static str],
    /// The policy's own `[sandbox] deny` paths.
    pub policy_deny: Vec<String>,
    /// The policy's own `[sandbox] env_scrub` variables.
    pub policy_scrub: Vec<String>,
}

/// A catalogue store and the paths it denies to this caller.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct DeniedStore {
    /// Kind of tool (the README table's sections).
    pub group: &'static str,
    /// The tool.
    pub owner: &'static str,
    /// What the files hold.
    pub holds: &'static str,
    /// Where the tool documents them.
    pub source: &'static str,
    /// The catalogue's path templates.
    pub templates: &'static [String],
    /// The templates expanded for this caller (`*` not yet expanded).
    pub denied: Vec<PathBuf>,
}

/// [`Explained`] for the caller of this call under `policy`.
pub fn explain(cx: &client::Context, policy: &Policy) -> Explained {
    Explained {
        policy: policy.name.clone(),
        catalogue: "policies/credentials.toml",
        stores: denied_for_caller(cx)
            .into_iter()
            .map(|(s, denied)| DeniedStore {
                group: &s.group,
                owner: &s.owner,
                holds: &s.holds,
                source: &s.source,
                templates: &s.paths,
                denied,
            })
            .collect(),
        env: &credentials::catalogue().env,
        always_scrubbed: policy::ALWAYS_SCRUB,
        policy_deny: policy.sandbox.deny.clone(),
        policy_scrub: policy.sandbox.env_scrub.clone(),
    }
}
