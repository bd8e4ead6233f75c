//! The credential catalogue (`policy::credentials`) applied to this caller: its paths
//! expanded against the caller's home and environment, for `plan` (which denies them to
//! every command and file tool under every policy) and for `policy explain --credentials`.

use super::client;
use crate::policy::credentials::{self, Store};
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

fn caller_var(name: &str) -> Option<String> {
    client::env_var(name).and_then(|v| v.into_string().ok())
}

/// Every catalogue store with the paths it denies to this caller (`*` not yet expanded).
pub fn denied(caller_home: &Path) -> Vec<(&'static Store, Vec<PathBuf>)> {
    let homes = homes(caller_home);
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
pub(crate) fn denied_templates(caller_home: &Path) -> Vec<String> {
    denied(caller_home)
        .into_iter()
        .flat_map(|(_, v)| v)
        .map(|p| p.display().to_string())
        .collect()
}

/// [`denied`] for the caller of this call.
pub fn denied_for_caller() -> Vec<(&'static Store, Vec<PathBuf>)> {
    denied(&super::home())
}
