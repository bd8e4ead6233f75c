//! Integration tests: drive the real `gateway` binary.
//!
//! The escape suite has one test per attack; each asserts that the attack fails under strict
//! (and standard where it should), and controls prove that ordinary work still works and that
//! the attack fixtures do detect an escape when not confined.
//!
//! These tests need what the sandbox needs: Linux with landlock, seccomp and user namespaces;
//! they run as root, and the escape suite again as uid 65534 (`setpriv`), so root is needed
//! to switch. A test that cannot run fails. Set GATEWAY_TEST_NO_SANDBOX=1
//! to skip the sandbox tests explicitly (CI does not set it).
//!
//! One test binary (as ripgrep's `tests/`): a module per area and a shared `util` module
//! (a fresh temporary tree per test and a command builder for the real binary).

#![allow(
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    clippy::too_many_lines,
    reason = "test code: helpers may expect, tests may print, read their environment and be long"
)]

#[macro_use]
mod util;

#[path = "secrets/buildlog.rs"]
mod buildlog;
#[path = "../benches/support/buildlog.rs"]
mod buildlog_gen;
#[path = "secrets/corpus.rs"]
mod corpus;
#[path = "secrets/stream.rs"]
mod stream;

mod agents;
mod argv_secrets;
mod audit;
mod bootstrap;
mod calls;
mod capture;
mod capture_places;
mod config;
mod confine;
mod consistency;
mod credentials;
mod daemon;
mod docs;
mod escape;
mod exec;
mod fs;
mod gate;
mod help;
mod http;
mod human;
mod json;
mod life;
mod mcp;
mod mcp_calls;
mod net;
mod next_run;
mod policy;
mod repl;
mod reports;
mod secrets;
mod shell;
mod shown;
mod tool_output;
mod undo;
