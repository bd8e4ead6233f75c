//! The daemon's state, owned by one value (issue 35): who may do what and what governs the
//! state all clients share ([`authz::Roles`]), the requests waiting for a person and the
//! standing approvals ([`approvals::Approvals`]), the sessions' pinned policies
//! ([`pin::Pins`]). `gateway serve` makes one [`Server`]; each of its calls carries it in its
//! [`super::client::Client`], and the broker reaches it through the call, never through a
//! static — a process may hold two servers (tests do) and nothing of one leaks into the other.
//! Every map in it is keyed by the caller's uid (and session) and bounded per uid and in all.
//! A one-shot front end has no server: no queue, no pins, its own caller its own admin.
//!
//! (The audit log's writer is still shared per process and state directory:
//! `broker::share_log`.)

use super::{approvals, authz, pin};
use std::sync::Arc;

/// A daemon's state.
#[derive(Default)]
pub struct Server {
    /// Who may do what, and what governs the shared state.
    pub roles: authz::Roles,
    /// Requests waiting for a person, standing approvals.
    pub approvals: approvals::Approvals,
    /// The sessions' pinned policies.
    pub pins: pin::Pins,
}

impl Server {
    /// A server with these roles and nothing pending or pinned yet.
    pub fn new(roles: authz::Roles) -> Arc<Server> {
        Arc::new(Server {
            roles,
            ..Server::default()
        })
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("roles", &self.roles)
            .finish_non_exhaustive()
    }
}
