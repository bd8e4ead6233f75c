//! gateway: a security-first sandboxed execution gateway.
//!
//! AI coding agents (and people) run their commands through it: a broker evaluates a
//! default-deny TOML [`policy`], and runs the command in a child confined by the [`sandbox`]
//! (namespaces, cleared capabilities, no_new_privs, landlock, seccomp, limits). One code path:
//! every caller builds a [`model::ToolCall`] and calls the [`broker`].
//!
//! # Threat model
//!
//! The command is hostile: it was chosen by a model that may have read attacker-controlled text.
//! It may try to read credentials (`~/.ssh`, cloud keys, `/etc/shadow`, other processes'
//! environments), reach the network or local daemons (ssh-agent, docker.sock), write outside
//! the workspace or into files that run code later (`.git/hooks`, shell rc files), escape by
//! symlinks, hard links, `..`, `/proc/self/root`, inherited fds or kernel interfaces (ptrace,
//! mount, namespaces, io_uring, bpf, keyrings, `TIOCSTI`), outlive its invocation, or exhaust
//! the machine. The broker runs as root here: capabilities are therefore always dropped and
//! root is stopped by landlock and seccomp, not by file permissions.
//!
//! Out of scope for this layer: kernel exploits (seccomp narrows the surface), side channels,
//! and what a permitted command legitimately does inside the workspace (that is what backups
//! and undo, issue 5, are for).
//!
//! # Compatibility
//!
//! Linux only. Landlock ABI ≥ 1 is required unless a policy says `best_effort = true`; ABI 4
//! adds TCP rules and ABI 6 signal/abstract-socket scoping (reported when missing). Namespaces
//! need a privileged broker; without one, landlock/seccomp/capabilities/rlimits still apply and
//! `EnforcementStatus::not_applied` says what did not. Seccomp filters are built for x86_64
//! and aarch64.
//!
//! # Design decisions (beyond DESIGN.md)
//!
//! - The child between `clone` and `execve` runs only raw syscalls on memory the parent
//!   prepared (`sandbox/sys.rs`): it must be async-signal-safe. The landlock ruleset is built in
//!   the parent with the `landlock` crate and applied in the child with one syscall; the
//!   rule for the pid namespace's fresh `/proc` is added by the namespace helper after it
//!   mounts it (landlock ignores rules on covered mount points).
//! - The command is started with `clone(CLONE_VM | CLONE_VFORK)` (posix_spawn's technique) by
//!   a pid-1 helper that, when the command ends, kills and reaps everything else in the
//!   namespace before reporting: the broker returns without waiting for namespace teardown.
//! - The command runs as uid 0 with no capabilities: setting setuid/setgid bits is denied by
//!   seccomp, because a setuid-root file left in the workspace outlives the sandbox.
//! - Seccomp: `seccompiler` compiles the rules; a hand-written prefix checks the architecture,
//!   refuses x32 syscall numbers (which seccompiler does not) and binary-searches the syscall
//!   numbers that have rules, so unrelated syscalls pay ~10 instructions, not hundreds.
//! - Landlock cannot subtract: "read `/` except `~/.ssh`" is built by enumerating the trees
//!   around denied paths; protected paths inside writable trees are read-only bind mounts in the
//!   mount namespace (landlock alone cannot express them), their ancestors pinned by self-bind
//!   mounts, and protected paths a run creates are quarantined afterwards; denied paths inside
//!   the workspace are hidden by mounts only. Device nodes under `/dev` are denied except a
//!   short safe list wherever a policy reads `/dev`.
//! - `sandbox::Confinement` (paths, network, limits, layers) is what the broker derives from a
//!   policy; `sandbox::Spec` is a Confinement plus what to run. `Network` and `Limits` live in
//!   `model` because both `policy` and `sandbox` use them.
//! - Fork bombs are contained by the pid namespace's `pid_max`; memory by RLIMIT_AS per process
//!   and a memory cgroup shared by runs with the same limit (per-run cgroups cost milliseconds
//!   to create and remove). On cgroup v1 the single-threaded helper joins by writing `0` to
//!   `tasks`: migrating a pid through `cgroup.procs` takes the kernel's global threadgroup
//!   lock and waits for an RCU grace period (0.5 to >10 ms); v2 uses `CLONE_INTO_CGROUP`.
//! - The helper and the command die with the broker (`PR_SET_PDEATHSIG`, with a pidfd check
//!   for the race): killing `gateway` kills the run.
//! - The binary is linked statically (`.cargo/config.toml`): it starts ~0.3 ms faster.
//! - The shell analyser parses with `yash-syntax` on a thread with a large stack: the parser
//!   recurses deeply on nested `$(...)`.
//! - Modules `secrets`, `audit`, `journal` and `fsops` of DESIGN.md's layout arrive with
//!   issues 3–5; nothing here stands in for them.
//!
//! # Test strategy
//!
//! Unit tests sit beside the code (policy semantics, matcher, shell analyser, validation
//! positions, seccomp search tree). `tests/tests.rs` drives the real binary: one test per
//! attack of the escape suite (each asserting the attack fails, with controls showing the
//! fixture does detect an escape when unconfined), ordinary work (C compile and run, python,
//! git, pipes, stdin), and every documented exit code. Sandbox tests fail when the sandbox
//! cannot run; `GATEWAY_TEST_NO_SANDBOX=1` skips them explicitly. Fuzz targets (`fuzz/`) cover
//! the policy parser and the shell analyser; speed is measured by `benches/spawn.rs`.
#![warn(missing_docs)]

pub mod broker;
pub mod cli;
pub mod fsops;
pub mod journal;
pub mod model;
pub mod policy;
pub mod sandbox;
pub mod secrets;
