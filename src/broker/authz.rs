//! Who may do what through the daemon (issue 24). Every daemon client is identified by the
//! socket (`SO_PEERCRED`: [`super::client::Client`]); this module says what that identity
//! may see and do:
//!
//! - its own pending requests, records, outputs, history and trash; anyone's if it is in
//!   one of the daemon's `approvers` groups (pending requests: list and answer) or
//!   `auditors` groups (records: see);
//! - maintenance (`log gc`, `keys rotate`, `trash empty`) only as the daemon's admin: root or
//!   the uid the daemon runs as;
//! - a policy of its own choosing only among the daemon's `allow_client_policy`, when its
//!   config names them.
//!
//! A one-shot front end (no daemon) is its own caller and its own admin: nothing changes
//! there. Each refusal is a typed [`Refusal`] (`daemon.owner`, `daemon.admin`,
//! `daemon.client_policy`), recorded as a `deny` by [`refused`].

use super::client::{Client, Context};
use super::refusal::Refusal;
use crate::audit::{Record, RecordDecision};
use std::path::Path;
use std::sync::OnceLock;

/// The daemon's authorization settings (its config file), group names resolved to gids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Roles {
    /// Members of these groups may list and answer every client's pending requests.
    pub approvers: Vec<u32>,
    /// Members of these groups may see every client's records, outputs and history.
    pub auditors: Vec<u32>,
    /// The policies a client may name (`--policy`, `GATEWAY_POLICY`); `None`: any.
    pub allow_client_policy: Option<Vec<String>>,
    /// The state every client shares, as the admin governs it: the daemon's own policy's
    /// `[undo]` and `[audit]` settings. `None`: each call's policy (no daemon).
    pub shared: Option<Shared>,
}

/// What governs the state all of a daemon's clients share (the backup store's quota and
/// retention, the artifact store's retention): the admin's configuration, never a client's
/// policy, which may narrow what its own calls get but not what others keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shared {
    /// The daemon's policy's `[undo]`.
    pub undo: crate::model::UndoProfile,
    /// The daemon's policy's `[audit]`.
    pub audit: crate::model::AuditProfile,
    /// The daemon's policy's `[approval]`: how long a request may hold its place in the
    /// daemon (a client's policy may only shorten it).
    pub approval: crate::model::ApprovalProfile,
}

/// `policy` as it applies to a call of `ctx`: for a daemon client, the shared state's bounds
/// are the admin's ([`Roles::shared`]): the store's quota (`max_state_bytes`), retention
/// (`keep_versions`, `backups_max_total`, the artifacts' age and total) come from the
/// daemon's policy; the client's own workspace share and stored output may only be smaller
/// than the admin's. (A one-shot front end's state is its own user's: its policy governs.)
pub fn govern(ctx: &Context, policy: &mut crate::policy::Policy) {
    let (Some(_), Some(admin)) = (ctx.client(), roles(ctx).shared) else {
        return;
    };
    let own = policy.undo;
    policy.undo = crate::model::UndoProfile {
        snapshot: own.snapshot,
        snapshot_max_file: own.snapshot_max_file.min(admin.undo.snapshot_max_file),
        keep_versions: admin.undo.keep_versions,
        backups_max_total: admin.undo.backups_max_total,
        max_state_bytes: admin.undo.max_state_bytes,
        max_workspace_bytes: Some(own.workspace_quota().min(admin.undo.workspace_quota())),
        capture: own.capture,
        review: own.review,
    };
    policy.approval.timeout = policy.approval.timeout.min(admin.approval.timeout);
    let own = policy.audit;
    policy.audit = crate::model::AuditProfile {
        store_output: own.store_output,
        artifact_max: own.artifact_max.min(admin.audit.artifact_max),
        inline_output: own.inline_output,
        artifacts_max_age: admin.audit.artifacts_max_age,
        artifacts_max_total: admin.audit.artifacts_max_total,
    };
}

/// A group named in the daemon's config that does not exist.
#[derive(Debug, thiserror::Error)]
#[error(
    "config file: {setting}: no group named {name:?} on this system (create it, or name an existing group or a numeric gid)"
)]
pub struct UnknownGroup {
    /// `approvers` or `auditors`.
    pub setting: &'static str,
    /// The name.
    pub name: String,
}

/// Resolves group names (or numeric gids) to gids, from `/etc/group` (gateway is a static
/// executable: glibc's NSS, which `getgrnam` goes through, cannot be loaded in it; a group
/// only an NSS service knows is named by its gid). An unknown name is an error, so that a
/// typo does not silently leave a group without the rights the admin meant it to have.
pub fn resolve_groups(setting: &'static str, names: &[String]) -> Result<Vec<u32>, UnknownGroup> {
    // not-ws: the system's group file, read by the daemon as it starts (unreadable: every
    // group name is unknown, and the daemon does not start)
    let table = std::fs::read_to_string("/etc/group").unwrap_or_default();
    names
        .iter()
        .map(|n| {
            if let Ok(g) = n.parse::<u32>() {
                return Ok(g);
            }
            group_gid(&table, n).ok_or_else(|| UnknownGroup {
                setting,
                name: n.clone(),
            })
        })
        .collect()
}

/// The gid of group `name` in a group file's text (`name:password:gid:members`).
fn group_gid(table: &str, name: &str) -> Option<u32> {
    table.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.trim().parse().ok()
    })
}

/// The roles of the server serving `ctx` (none for a one-shot front end: it is its own admin).
fn roles(ctx: &Context) -> &Roles {
    static NONE: OnceLock<Roles> = OnceLock::new();
    match ctx.client() {
        Some(c) => &c.server.roles,
        None => NONE.get_or_init(Roles::default),
    }
}

fn in_any(c: &Client, gids: &[u32]) -> bool {
    gids.iter().any(|g| c.gid == *g || c.groups.contains(g))
}

/// Is the caller the daemon's admin (root, or the uid the daemon runs as)? A one-shot
/// front end is.
pub fn is_admin(ctx: &Context) -> bool {
    match ctx.client() {
        None => true,
        Some(c) => c.caller.uid == 0 || c.caller.uid == crate::sandbox::effective_uid(),
    }
}

/// May the caller see every client's records, outputs and history (admin or auditor)?
pub fn sees_all(ctx: &Context) -> bool {
    is_admin(ctx)
        || ctx
            .client()
            .is_some_and(|c| in_any(c, &roles(ctx).auditors))
}

/// May the caller list and answer every client's requests (admin or approver)?
pub fn answers_all(ctx: &Context) -> bool {
    is_admin(ctx)
        || ctx
            .client()
            .is_some_and(|c| in_any(c, &roles(ctx).approvers))
}

/// The uid whose things the caller is limited to; `None`: it sees all.
pub fn seen_uid(ctx: &Context) -> Option<u32> {
    match ctx.client() {
        Some(c) if !sees_all(ctx) => Some(c.caller.uid),
        _ => None,
    }
}

/// May the caller answer a request asked by `owner`?
pub fn may_answer(ctx: &Context, owner: u32, what: impl FnOnce() -> String) -> Result<(), Refusal> {
    match ctx.client() {
        Some(c) if c.caller.uid != owner && !answers_all(ctx) => {
            Err(Refusal::NotYours { what: what() })
        }
        _ => Ok(()),
    }
}

/// May the caller see a thing of `owner`'s (a record, its output)?
pub fn may_see(ctx: &Context, owner: u32, what: impl FnOnce() -> String) -> Result<(), Refusal> {
    match seen_uid(ctx) {
        Some(uid) if uid != owner => Err(Refusal::NotYours { what: what() }),
        _ => Ok(()),
    }
}

/// May the caller undo or restore a change recorded for `owner` (`Change::uid`: `None` for
/// the daemon's own user, root or a one-shot front end)? Its own, or the admin any. Seeing
/// (an auditor) is not reverting.
pub fn may_revert(
    ctx: &Context,
    owner: Option<u32>,
    what: impl FnOnce() -> String,
) -> Result<(), Refusal> {
    match ctx.client() {
        Some(c) if !is_admin(ctx) && owner != Some(c.caller.uid) => {
            Err(Refusal::NotYours { what: what() })
        }
        _ => Ok(()),
    }
}

/// Maintenance: only the admin.
pub fn require_admin(ctx: &Context, what: &str) -> Result<(), Refusal> {
    if is_admin(ctx) {
        Ok(())
    } else {
        Err(Refusal::NotAdmin { what: what.into() })
    }
}

/// May a daemon client use `policy` (a name or a path) it named itself? `daemon_default`:
/// the daemon's own policy, always allowed.
pub fn may_use_policy(ctx: &Context, policy: &str, daemon_default: &str) -> Result<(), Refusal> {
    let Some(allowed) = &roles(ctx).allow_client_policy else {
        return Ok(());
    };
    if ctx.client().is_none() || policy == daemon_default || allowed.iter().any(|a| a == policy) {
        return Ok(());
    }
    Err(Refusal::ClientPolicy {
        policy: policy.into(),
        allowed: allowed.join(", "),
    })
}

/// Records `r` as a `deny` of `tool` (with `args`) by the caller in `state_dir`'s log, and
/// returns it. A refusal whose record cannot be written is still a refusal.
pub fn refused(
    state_dir: &Path,
    ctx: &Context,
    tool: &str,
    args: Vec<String>,
    r: Refusal,
) -> Refusal {
    let mut rec = Record {
        session: ctx
            .env_var("GATEWAY_SESSION")
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        caller: ctx.caller("cli"),
        tool: tool.into(),
        args,
        decision: RecordDecision {
            effect: "deny".into(),
            rules: vec![r.rule().into()],
            reasons: vec![super::redact_text(&r.to_string())],
        },
        ..Record::default()
    };
    if super::append_record(state_dir, ctx.server(), &mut rec).is_ok() {
        ctx.note_recorded();
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_resolve_by_name_or_gid_and_unknown_names_fail() {
        let t = "# comment\nroot:x:0:\nwheel:x:10:alice,bob\nbad:x:nope:\n";
        assert_eq!(group_gid(t, "wheel"), Some(10));
        assert_eq!(group_gid(t, "whee"), None);
        assert_eq!(group_gid(t, "bad"), None);
        assert_eq!(
            resolve_groups("approvers", &["root".into(), "42".into()]).expect("known"),
            vec![0, 42]
        );
        let e = resolve_groups("auditors", &["no-such-group-gw".into()]).expect_err("unknown");
        assert!(e.to_string().contains("auditors"), "{e}");
    }

    #[test]
    fn one_shot_callers_are_their_own_admin() {
        let ctx = Context::this_process();
        assert!(is_admin(&ctx) && sees_all(&ctx) && answers_all(&ctx));
        assert_eq!(seen_uid(&ctx), None);
        assert!(may_answer(&ctx, 12345, || "x".into()).is_ok());
        assert!(may_use_policy(&ctx, "permissive", "strict").is_ok());
    }
}
