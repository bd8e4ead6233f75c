//! The broker's upkeep of its own state directory for the file tools: crash recovery of
//! the journal before a change, the trash's list and emptying, backup retention. The broker's
//! side: the confined worker never reaches the state directory.

use super::j_err;
use crate::broker::BrokerError;
use crate::journal::{self, PathState};
use crate::policy::Policy;
use crate::workspace::wsfs;
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
    let pending = journal::pending(state_dir).map_err(j_err)?;
    for c in &pending {
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
    journal::recover_pending(state_dir, lock, pending, &now).map_err(j_err)?;
    Ok(())
}

/// The trash's items.
pub fn trash_list(state_dir: &Path) -> Result<Vec<journal::TrashItem>, BrokerError> {
    journal::trash_list(state_dir).map_err(j_err)
}

/// What `trash empty` removed for good.
#[derive(Debug, serde::Serialize)]
pub struct TrashEmptied {
    /// How many items.
    pub removed: usize,
    /// Each item: its name in the trash, where it was, when it was removed, when emptied.
    pub items: Vec<journal::TrashItem>,
}

/// Empties the trash for good, or only items removed more than `older_than` ago: a tool
/// call (`trash.empty`), decided as the policy's `purge` on the items' original paths,
/// confirmed on a terminal, and recorded with what it removed. Each emptied item's info is
/// kept as a tombstone, so that undo of its removal says it is gone, and when.
pub fn trash_empty(
    ctx: &super::FsContext<'_>,
    older_than: Option<std::time::Duration>,
    yes: bool,
) -> Result<crate::broker::mutation::Done<TrashEmptied>, BrokerError> {
    let state_dir = ctx.state_dir.clone();
    let due = due(&state_dir, older_than)?;
    let (files, _) = journal::trash_dirs(&state_dir);
    let mut paths: Vec<std::path::PathBuf> = due.iter().map(|i| i.original.clone()).collect();
    if paths.is_empty() {
        paths.push(files.clone());
    }
    let mut args = vec![format!(
        "older_than={}",
        older_than.map_or("none".into(), |d| humantime::format_duration(d).to_string())
    )];
    args.extend(
        due.iter()
            .map(|i| format!("item={} ({})", i.name, i.original.display())),
    );
    if yes {
        args.push("yes".into());
    }
    // `--yes`: the caller confirmed it beforehand (nothing is asked); else a person confirms
    // on a terminal, and with none the trash is not emptied.
    let confirm = (!due.is_empty() && !yes).then(|| {
        format!(
            "empty the trash for good ({} item(s))? No copy is kept and `gateway undo` cannot bring them back.",
            due.len()
        )
    });
    crate::broker::mutation::run(
        ctx,
        crate::broker::mutation::Mutation {
            name: "trash.empty",
            tool: crate::model::Tool::Purge,
            args,
            paths,
            confirm,
            perform: Box::new(move || empty(&state_dir, due)),
            describe: |t: &TrashEmptied| {
                std::iter::once(format!("removed={}", t.removed))
                    .chain(
                        t.items
                            .iter()
                            .map(|i| format!("emptied={} ({})", i.name, i.original.display())),
                    )
                    .collect()
            },
            reopens_log: false,
        },
    )
}

/// The trash's items that `trash empty` would remove: not emptied yet, and removed more than
/// `older_than` ago when given.
fn due(
    state_dir: &Path,
    older_than: Option<std::time::Duration>,
) -> Result<Vec<journal::TrashItem>, BrokerError> {
    let cutoff = older_than.and_then(|d| std::time::SystemTime::now().checked_sub(d));
    Ok(journal::trash_list(state_dir)
        .map_err(j_err)?
        .into_iter()
        .filter(|i| i.emptied.is_none())
        // Only names trash_reserve gives: one plain component.
        .filter(|i| !matches!(i.name.as_str(), "" | "." | "..") && !i.name.contains('/'))
        .filter(|i| match cutoff {
            None => true,
            Some(c) => humantime::parse_rfc3339_weak(&i.deleted)
                .ok()
                .is_some_and(|w| w <= c),
        })
        .collect())
}

/// Removes the items decided on, under the journal's lock (an undo or restore in progress
/// finishes first), and marks each emptied.
fn empty(state_dir: &Path, items: Vec<journal::TrashItem>) -> Result<TrashEmptied, BrokerError> {
    let _lock = journal::lock(state_dir).map_err(j_err)?;
    let (files, _) = journal::trash_dirs(state_dir);
    let mut out = Vec::new();
    for mut item in items {
        let p = files.join(&item.name);
        // not-ws: the trash, in the broker's own state directory (not following a link)
        let gone = match std::fs::symlink_metadata(&p) {
            // not-ws: the trash, in the broker's own state directory (remove_dir_all does
            // not follow links)
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p),
            // not-ws: the trash, in the broker's own state directory
            Ok(_) => std::fs::remove_file(&p),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(source) = gone {
            return Err(BrokerError::Io {
                what: format!(
                    "removing trash item {} for good (after {} item(s) removed); run `gateway trash empty` again",
                    item.name,
                    out.len()
                ),
                source,
            });
        }
        item.emptied = Some(journal::trash_mark_emptied(state_dir, &item.name).map_err(j_err)?);
        item.present = false;
        out.push(item);
    }
    Ok(TrashEmptied {
        removed: out.len(),
        items: out,
    })
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
