//! One module per tool, on the invocation skeleton (`broker::invoke`): `exec` (a command in
//! the sandbox), `fs` (the file tools, with the confined worker that runs their bodies) and
//! `scan` (the secrets scan of files). The core beside them (`broker/`) decides, asks,
//! records and reports; a tool names the core, the core names a tool only to dispatch to it.

pub mod changes;
pub(super) mod exec;
pub mod fs;
pub mod http;
pub mod scan;
