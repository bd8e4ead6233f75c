//! Where the benchmarks find gitleaks (shared by `secrets` and `recall`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// gitleaks: `GITLEAKS`, else where .ci/run unpacks Debian's package
/// (target/tools/gitleaks), else on PATH.
pub fn gitleaks_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GITLEAKS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let local =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/gitleaks/usr/bin/gitleaks");
    if local.exists() {
        return Some(local);
    }
    Command::new("gitleaks")
        .arg("version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| PathBuf::from("gitleaks"))
}
