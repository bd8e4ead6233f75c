//! gateway: a security-first sandboxed execution gateway.
pub mod model;
pub mod policy;
