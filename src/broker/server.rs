//! The daemon's state, owned by one value (issue 35): who may do what and what governs the
//! state all clients share ([`authz::Roles`]), the requests waiting for a person and the
//! standing approvals ([`approvals::Approvals`]), the sessions' pinned policies
//! ([`pin::Pins`]). `gateway serve` makes one [`Server`]; each of its calls carries it in its
//! [`super::client::Client`], and the broker reaches it through the call, never through a
//! static — a process may hold two servers (tests do) and nothing of one leaks into the other.
//! Every map in it is keyed by the caller's uid (and session) and bounded per uid and in all.
//! A one-shot front end has no server: no queue, no pins, its own caller its own admin. The
//! daemon's audit writer is the server's too ([`Server::share_log`]): every call of the
//! server appends through it (checkpoints in batches), found through the call's caller.

use super::{approvals, authz, pin};
use crate::audit;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// A daemon's state.
#[derive(Default)]
pub struct Server {
    /// Who may do what, and what governs the shared state.
    pub roles: authz::Roles,
    /// Requests waiting for a person, standing approvals.
    pub approvals: approvals::Approvals,
    /// The sessions' pinned policies.
    pub pins: pin::Pins,
    /// The audit writer of its state directory, once the server shares one.
    log: OnceLock<(PathBuf, Mutex<audit::AuditLog>)>,
}

impl Server {
    /// A server with these roles and nothing pending or pinned yet.
    pub fn new(roles: authz::Roles) -> Arc<Server> {
        Arc::new(Server {
            roles,
            ..Server::default()
        })
    }

    /// Makes `log` (the audit log of `state_dir`) the writer of every call of this server
    /// for that state directory. Returns false if it has one already.
    pub fn share_log(&self, state_dir: &Path, log: audit::AuditLog) -> bool {
        self.log
            .set((state_dir.to_path_buf(), Mutex::new(log)))
            .is_ok()
    }

    /// Runs `f` on the server's audit writer, if it has one.
    pub fn with_log<R>(&self, f: impl FnOnce(&mut audit::AuditLog) -> R) -> Option<R> {
        let (_, m) = self.log.get()?;
        let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
        Some(f(&mut g))
    }

    /// The server's writer for `state_dir`, if it has one for that directory.
    pub(crate) fn log_of(&self, state_dir: &Path) -> Option<&Mutex<audit::AuditLog>> {
        self.log
            .get()
            .filter(|(dir, _)| dir == state_dir)
            .map(|(_, m)| m)
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("roles", &self.roles)
            .finish_non_exhaustive()
    }
}
