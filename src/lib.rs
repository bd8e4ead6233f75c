//! gateway: a security-first sandboxed execution gateway (crate docs are completed below).
pub mod broker;
pub mod cli;
pub mod model;
pub mod policy;
pub mod sandbox;
