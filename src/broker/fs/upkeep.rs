//! The broker's upkeep of its own state directory for the file tools: crash recovery of
//! the journal before a change, the trash's list and emptying, backup retention. The broker's
//! side: the confined worker never reaches the state directory.

use super::j_err;
use crate::broker::{BrokerError, wsfs};
use crate::journal::{self, PathState, Phase};
use crate::policy::Policy;
use std::path::Path;

/// Completes or rolls back changes a crash left pending (see [`journal::recover`]).
pub(super) fn recover(state_dir: &Path, lock: &journal::Lock) -> Result<(), BrokerError> {
    // What stands at a pending change's path now: read as the broker, so beneath no link at
    // all (`wsfs`), a regular file only and bounded (a FIFO or a huge sparse file left there
    // is "unknown": the change stays pending).
    const MAX_HASHED: u64 = 1 << 30;
    let now = |p: &Path| -> Option<PathState> {
        match wsfs::kind_nolinks(p) {
            Ok(None) => Some(PathState::Absent),
            Err(_) => None,
            Ok(Some(wsfs::Kind::File { mode, .. })) => {
                wsfs::read_nolinks(p, MAX_HASHED).map(|d| PathState::File {
                    sha256: journal::sha256_hex(&d),
                    mode,
                    size: d.len() as u64,
                })
            }
            Ok(Some(wsfs::Kind::Dir { .. })) => Some(PathState::Dir),
            Ok(Some(wsfs::Kind::Link(t))) => Some(PathState::Link {
                target: t.to_string_lossy().into_owned(),
            }),
            Ok(Some(wsfs::Kind::Special)) => None,
        }
    };
    // Temporary files of writers killed mid-write (`.NAME.gateway-tmp-PID-N` next to a
    // pending change's file, PID no longer running) are removed.
    for (c, phase) in journal::changes(state_dir).map_err(j_err)? {
        if phase != Phase::Pending {
            continue;
        }
        let (Some(dir), Some(name)) = (c.path.parent(), c.path.file_name()) else {
            continue;
        };
        let prefix = format!(".{}.gateway-tmp-", name.to_string_lossy());
        let Ok(d) = wsfs::open_dir_nolinks(dir) else {
            continue;
        };
        let Ok(entries) = wsfs::list_at(&d, 1 << 20) else {
            continue;
        };
        for (n, kind) in entries {
            let n = n.to_string_lossy().into_owned();
            let Some(rest) = n.strip_prefix(&prefix) else {
                continue;
            };
            let pid = rest.split('-').next().unwrap_or("");
            // not-ws: /proc, whether the writer still runs.
            let alive = !pid.is_empty() && Path::new("/proc").join(pid).exists();
            if !alive && matches!(kind, wsfs::Kind::File { .. }) {
                let _ = wsfs::unlink_at(&d, std::ffi::OsStr::new(&n));
            }
        }
    }
    journal::recover(state_dir, lock, &now).map_err(j_err)?;
    Ok(())
}

/// The trash's items.
pub fn trash_list(state_dir: &Path) -> Result<Vec<journal::TrashItem>, BrokerError> {
    journal::trash_list(state_dir).map_err(j_err)
}

/// Empties the trash (permanently), or only items removed more than `older_than` ago.
/// Returns how many items were removed.
pub fn trash_empty(
    state_dir: &Path,
    older_than: Option<std::time::Duration>,
) -> Result<usize, BrokerError> {
    let (files, _) = journal::trash_dirs(state_dir);
    let cutoff = older_than.and_then(|d| std::time::SystemTime::now().checked_sub(d));
    let mut n = 0;
    for item in journal::trash_list(state_dir).map_err(j_err)? {
        if let Some(c) = cutoff {
            let when = humantime::parse_rfc3339_weak(&item.deleted).ok();
            if when.is_none_or(|w| w > c) {
                continue;
            }
        }
        let p = files.join(&item.name);
        // not-ws: the trash, in the broker's own state directory
        let gone = match std::fs::symlink_metadata(&p) {
            // not-ws: the trash, in the broker's own state directory
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p).is_ok(),
            // not-ws: the trash, in the broker's own state directory
            Ok(_) => std::fs::remove_file(&p).is_ok(),
            Err(_) => true,
        };
        if gone {
            journal::trash_forget(state_dir, &item.name);
            n += 1;
        }
    }
    Ok(n)
}

/// Backup retention (policy `[undo] keep_versions`, `backups_max_total`), keeping every blob a
/// snapshot index refers to. Returns (blobs removed, bytes freed).
pub fn prune_backups(state_dir: &Path, policy: &Policy) -> Result<(u64, u64), BrokerError> {
    let mut pinned = std::collections::HashSet::new();
    // not-ws: the broker's own state directory
    if let Ok(rd) = std::fs::read_dir(state_dir.join("snapshots")) {
        for e in rd.flatten() {
            // not-ws: the broker's own state directory
            if let Ok(d) = std::fs::read(e.path())
                && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&d)
                && let Some(files) = v["files"].as_array()
            {
                for f in files {
                    if let Some(sha) = f[1]["sha256"].as_str() {
                        pinned.insert(sha.to_string());
                    }
                }
            }
        }
    }
    journal::prune_backups(
        state_dir,
        policy.undo.keep_versions as usize,
        policy.undo.backups_max_total,
        &pinned,
    )
    .map_err(j_err)
}

/// Applies the backup retention at most once an hour (it reads the journal and the store).
pub fn prune_backups_hourly(state_dir: &Path, policy: &Policy) {
    let marker = state_dir.join("backups").join(".pruned");
    // not-ws: the broker's own state directory
    let fresh = std::fs::metadata(&marker)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < std::time::Duration::from_secs(3600));
    if fresh {
        return;
    }
    // not-ws: the broker's own state directory
    let _ = std::fs::write(&marker, b"");
    let _ = prune_backups(state_dir, policy);
}
