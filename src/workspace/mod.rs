//! The policy-free mechanism on the agent's trees, beneath the broker: `wsfs` (every access
//! to a workspace as the broker: resolved beneath a descriptor, no link followed, typed
//! before read, bounded) and `snapshot` (capture of what a command changed, as a walk before
//! and after the run, into the journal). Nothing here decides: the broker passes in what the
//! policy allows and the limits to keep.
//!
//! Dependencies still against DESIGN.md's direction (broker → workspace → sys, durable,
//! model; leaves do not import each other), kept by the layout moves rather than hidden:
//! `snapshot` returns the broker's `BrokerError` and records into `journal` (backup store,
//! quota, `record_done`); `wsfs` uses `policy::wildcard` (git's ignore patterns) and
//! `sandbox::with_fs_identity`/`hidden_by_owner` (a thread with the caller's filesystem
//! identity). The arrows test (`serve::tests::the_arrows_point_down`) lists the first as an
//! exception.

pub mod apply;
pub mod capture;
pub mod snapshot;
pub mod wsfs;
#[cfg(test)]
mod wsfs_check;
