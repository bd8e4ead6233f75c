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
//! ## The broker's unconfined side
//!
//! Before and after each run the broker acts, unconfined and as its own uid, on a tree the run
//! controlled (and a concurrent run may still be changing).
//!
//! Every such access goes through `workspace::wsfs`: a tree (the workspace, a writable root) is
//! opened once by its canonical path, and every name inside it is resolved beneath that
//! descriptor with `openat2(RESOLVE_BENEATH | NO_SYMLINKS | NO_MAGICLINKS | NO_XDEV)`;
//! entries are typed on an `O_PATH` descriptor before any open for reading (FIFOs, sockets
//! and devices are never opened; the file read is the one typed); reads are non-blocking and
//! bounded before they start; moves and links are made relative to the parent's descriptor.
//! A test fails on any by-name call elsewhere in `broker/`, `workspace/` or `serve/` that does
//! not say why its path is not a workspace path (`// not-ws:`). Identity: the broker's own uid,
//! except that a daemon serving another user reads a workspace's contents with that user's
//! filesystem identity (`Tree::read_as`). What it touches:
//!
//! - **Snapshot** (`workspace::snapshot`): `wsfs::Tree::walk_ignoring` (links never followed,
//!   `.git` never entered, git's ignore rules read beneath like any file; a directory whose
//!   ignore file is not a small regular file is skipped, contents unknown) and bounded reads.
//! - **Quarantine** of protected paths a run created: searched and moved beneath each writable
//!   tree's descriptor; a link or file that stands where a directory should be is reported
//!   and moved as itself, never looked through.
//! - **Journal recovery**: the real paths the journal holds, opened with no link on the way.
//! - **Undo** (`broker::tools::fs::revert`, in the confined worker): names resolved beneath a root
//!   without following links; a directory become a link is refused.
//! - **Leftovers** (no pid namespace): the broker is its runs' subreaper and kills what they
//!   leave, before the snapshot after the run.
//! - **Session places** (`broker::session`): the writable area is pinned; `cd` moves nothing
//!   the broker acts on.
//! - **Git's config** (`git_config_refs`): the writable trees' `.git/config` and the user's
//!   global configs are read (no link on the way, bounded) to protect what they include and the
//!   hooks directory and programs they name.
//!
//! Still by name, and why (`docs/seams.md`): the state directory, `/proc`, `/dev`, the
//! daemon's socket, files the caller names (read as the caller), and `wsfs::resolve`
//! (canonical forms, to protect or deny more — metadata only, never a read).
//!
//! # Compatibility
//!
//! Linux only. Landlock ABI ≥ 1 is required unless a policy says `best_effort = true`; ABI 4
//! adds TCP rules and ABI 6 signal/abstract-socket scoping (reported when missing). Every run
//! gets its namespaces through a user namespace, whoever starts the broker (unprivileged user
//! namespaces: Linux 3.8+, open_tree/move_mount 5.2+, mount_setattr 5.12+, openat2 5.6+); a
//! host that refuses them (sysctl, Ubuntu's AppArmor restriction, a container) refuses the run
//! with the two ways out, unless `best_effort`, where landlock/seccomp/capabilities/rlimits
//! still apply and `EnforcementStatus` says, one `LayerStatus` per `sandbox::Layer` (enforced, partial, not
//! applied with why, not requested, as rust-landlock's `RestrictionStatus`), what did not.
//! Each layer is a function returning its status (`sandbox::run` only calls them, then spawn
//! and relay), unit-tested alone in a forked child. Seccomp filters are built for x86_64
//! and aarch64.
//!
//! # Design decisions (beyond DESIGN.md)
//!
//! - The child between `clone` and `execve` runs only raw syscalls on memory the parent
//!   prepared (`src/sys/`): it must be async-signal-safe. The landlock ruleset is built in
//!   the parent with the `landlock` crate and applied in the child with one syscall; the
//!   rule for the pid namespace's fresh `/proc` is added by the namespace helper after it
//!   mounts it (landlock ignores rules on covered mount points).
//! - One sandbox for every user (issue 34): the helper is cloned into new user, mount, pid,
//!   ipc, uts (and net) namespaces; the broker writes its uid/gid maps (the caller to itself;
//!   a broker with CAP_SETUID/CAP_SETGID also maps a daemon client) while it waits on a pipe.
//!   The mount tree is built from descriptors, not names (`sandbox::mounts`, `sys/mount.rs`):
//!   the broker opens every writable area and every path it pins, protects or masks inside one
//!   with `openat2(RESOLVE_NO_SYMLINKS)` and records its (device, inode); the helper opens each
//!   the same way, refuses another object (`ESTALE`), clones the writable areas (`open_tree`)
//!   before making the whole host read-only (`mount_setattr(AT_RECURSIVE)`) and moves them
//!   back on top, then pins, read-only binds and masks onto the descriptors it checked. Landlock's write rules use the broker's same
//!   descriptors. A writable area that is, or lies below, a link is refused by name: a run
//!   cannot re-point the next run's writable area. Nothing is put back after a run: what must
//!   not change is read-only during it. The memory cgroup still needs a broker that may manage
//!   cgroups; a normal user's runs are bounded per process.
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
//!   the workspace are hidden by mounts only. The run's `/dev` is a minimal one of its own
//!   (null, zero, full, random, urandom, tty, its own devpts); landlock still denies the host's
//!   other device nodes wherever a policy reads `/dev` (defense in depth).
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
//! - Policy matching is three-valued: a rule certainly matches on the words the analyser
//!   knows, or (deny and ask rules) may match through an unknown word or a glob; a possible
//!   match is capped at the policy's `unanalysable`, so "cannot tell" is never decided as the
//!   worst case every deny rule describes (`$echo x` asks under standard). A glob in command
//!   position may match a program pattern only if their languages intersect
//!   (`policy::globlang`, decided on the patterns, not on files a script can change first).
//!   Rules carry `match`/`not_match` examples, as Codex's execpolicy does, checked at load.
//! - Secrets (`secrets`): rules are data; one keyword prefilter (a SIMD searcher over rare
//!   anchors of the keywords, in a lowercased copy) decides where regexes run, and only on
//!   the lines around a hit. The anchor table is generated by a set cover and checked by a
//!   test (computing it per process would cost milliseconds on every exec). The broker
//!   applies the policy's `[secrets]` to argv and environment before the decision, and to
//!   stdin and output through `sandbox::StreamIo` (the sandbox stays ignorant of secrets).
//!   Every rule runs in time linear in its input with a bound on work per byte that does not
//!   depend on its shape (bounded quantifiers, literal anchors, no line-sized windows);
//!   anchors ending in a run of one byte go to `memmem`, not Teddy, whose nibble fingerprint
//!   lets a run through. The anchors are found by Vectorscan (the default `vectorscan`
//!   feature; one literal database, case-blind anchors `CASELESS`, one pass per block, no
//!   lowercased copy) where Teddy made five passes and `memmem` ten: the prefilter was 41% of
//!   a redacted exec's CPU. Vectorscan is a system C++ library, linked statically (the
//!   gateway is a static executable); it is a speed-up only: the Teddy searchers are always
//!   built, take a block Vectorscan fails on, and are the engine without the feature or on a
//!   CPU without SSE4.2; a test holds both engines to the same hits. Run anchors (`AAAAAA`)
//!   stay on `memmem`, which reports a run once where Vectorscan reports every byte. One context tokenizer (`secrets::context`, single pass, a bounded
//!   read-ahead and a dead zone after an unclosed construct) finds where a value sits
//!   (assignments in every syntax, XML, JSON with escapes, Go backticks, C# verbatim, flags
//!   from a data table) and hands the key+value to the keyword rule and the unescaped value
//!   to every rule, findings mapped back to the original bytes so redaction cuts the right
//!   ones. The file's kind decides what counts (`TextKind`: code, configuration, prose —
//!   prose, logs and scripts count keyword values but not entropy on `NAME = value` lines);
//!   `secrets::precision` holds the keyword rule's filters (object names, metavariables,
//!   UUIDs, demo words). A finding's confidence is `high` only for a validated vendor format
//!   (GitHub/npm CRC32 tails, a JWT that decodes): a look-alike is found and redacted at
//!   `medium`, never trusted. Stream digests are BLAKE3 (SHA-256 for the chain, policy
//!   hash and backups). Recall is measured against gitleaks and detect-secrets on their own
//!   test suites' cases (`benches/recall.rs`), re-randomised each run, never on a corpus
//!   tuned to our rules.
//! - What is matched is the text a person would read, not the bytes: escape sequences are
//!   removed first, and UTF-16's NULs (`NUL X NUL`; binary data's NULs stay, they separate
//!   its strings) (`secrets::normalise`), and a finding redacts the raw bytes it maps back
//!   to (the escapes inside the value with it). UTF-16 is read by its NULs going, not
//!   decoded: a stream is not decided UTF-16 or not once, by its start (a `cat` of a UTF-16
//!   file then an ASCII one was read wrong either way); files are decoded whole. Values are paired with
//!   their names by structure too (`secrets::pairs`: name/value siblings, tables, dumps),
//!   within the redactor's held-back tail so that a stream finds what the whole text does.
//!   Values are found whole up to 64 KiB (`VALUE_BOUND`); past it, to the bound and the
//!   rest of the token, never half-shown.
//! - One gate (`broker::gate`) for what leaves the broker: every audit record as it is
//!   appended, every report as a front end renders it, every MCP result before its budget.
//!   It walks the serialised value whole, so a field added later cannot be forgotten; the
//!   undo store keeps real names (undo restores them), its views pass the gate.
//! - File tools run in a confined child (`broker::tools::fs::worker`): the broker starts
//!   `gateway __fs-worker` through the sandbox with landlock rules for just the directories
//!   the call resolves in, seccomp, no capabilities and the policy's limits, and answers the
//!   worker's requests for the state directory (backups, journal intent and commit, trash
//!   names) over a framed pipe protocol (`sandbox::Stdin::Channel`), holding the journal's
//!   lock for the call. The worker gets no namespaces (it runs gateway's code, and the mount
//!   namespace that hides the state directory would hide the trash it moves removals into)
//!   and may call `openat2` (`Confinement::danger_openat2`: its resolution is
//!   `RESOLVE_BENEATH`; commands never get it, since seccomp cannot read its mode). Policy
//!   decisions, audit records, recovery after a crash, `cd` and snapshots stay in the broker.
//! - Credentials are a catalogue, as data (`policies/credentials.toml`, `policy::credentials`):
//!   each store and variable with its owner, what it holds and a source. `broker::plan`
//!   expands it for the caller (`~` is the caller's, the broker's and its account's home;
//!   `${XDG_CONFIG_HOME:-~/.config}`-style templates deny both the caller's value and the
//!   default) and adds it to the never-exposed paths of every policy, so commands (landlock,
//!   masks) and file tools (`broker::paths`, from the same plan) refuse alike; its variables
//!   join the always-scrubbed list. Token files only where an agent's shell integration reads
//!   the rest of its directory (`~/.claude/shell-snapshots/`). README's table is generated
//!   from the data and checked by a test. Denied paths inside other denied paths are dropped
//!   from the plan (the outer mask already hides them; masking both failed the run).
//! - Permanent removal is a tool of its own (`purge`) so that policies decide it apart from
//!   moving to the trash.
//! - Layout: `main → cli, serve → broker → leaves`. `broker` runs one invocation end to end;
//!   the long-lived front ends (the daemon and its protocol, the MCP server, the REPL) are in
//!   `serve`, over it; `cli` is the one-shot front end and starts them. No arrow runs back up:
//!   `serve` never imports `cli` (the REPL reaches the CLI's dispatch and config through
//!   `serve::repl::Host`, the daemon through its `Handler`), `broker` never imports `serve` or
//!   `cli`; `serve::tests::the_arrows_point_down` checks it (issue 23, first stage). In
//!   `broker`, the file tools' bodies are leaves under `broker/tools/fs/` that the confined worker
//!   runs; neither the worker nor a leaf imports `broker::tools::fs` (the broker's side that calls
//!   the worker) but the call's types (`broker::tools::fs::arrows::the_worker_does_not_call_back`).
//! - Lints keep the middle small and quiet (Cargo.toml `[lints.clippy]`, `clippy.toml`): only
//!   the front ends (`cli`, `serve`) print or read the process's environment (the broker reads
//!   the caller's through `broker::client`); no `expect` outside tests (the fuzz hooks return
//!   errors); a function over 100 lines carries an `#[allow]` naming why — each listed by
//!   the compiler.
//! - `gateway mcp` (`serve::mcp`, on `rmcp` with a current-thread tokio runtime): every
//!   tool call is `serve::mcp::run_tool`, run on a blocking-pool thread (which outlives the
//!   run it spawns, as the sandbox's `PR_SET_PDEATHSIG` needs) so that the runtime can still
//!   ask the client for its roots. When a daemon runs, the server is its front end: each
//!   call goes over the socket as the CLI command `gateway tool NAME ARGS [--root DIR]`
//!   (added for this: one protocol, one code path) with pipes for its output, and the
//!   daemon runs the same `run_tool`. The client's roots narrow the policy
//!   (`Policy::narrow_to`, the `client-roots` decision, `broker::narrow` for the sandbox's
//!   writable paths and the file tools' roots). The REPL is a daemon front end the same way.
//!   Both protocol revisions come from rmcp 3's one server loop: 2025-11-25 sessions
//!   (`initialize`, then `roots/list` asked of the client, cached until
//!   `roots/list_changed`, with a generation so that a change during a fetch is not lost)
//!   and 2026-07-28 requests (`server/discover`, `_meta` per request; roots asked per call
//!   with an MRTR input request, since the server may not send requests of its own).
//! - A call's cancellation is its own pipe, not a thread-local: `serve::mcp` makes one per
//!   call, passes its read end with the call (`ExecRequest::cancel` → `sandbox::Spec::cancel`,
//!   and `FsContext::cancel` for a call waiting on a lock) and writes to it when the client
//!   cancels the request or goes away (stdin EOF, stdout without a reader). The daemon's
//!   client carries its connection's (`Client::cancel`, `Context::cancel`): its runs, the
//!   capture lock it waits on, its FIFO reads, its file-tool worker and its writes to a stuck
//!   client watch it. An MCP call forwarded to the daemon closes its connection when it is
//!   cancelled, and the daemon ends it there.
//! - Capture scope: a run the overlay captures takes no lock (each writes its own layer,
//!   applied under the journal's lock). A walk (the fallback) compares before and after the
//!   run, so no other call may change the tree in between. A
//!   per-workspace capture lock (`journal::capture_lock`: `flock`s on files in the state
//!   directory, the workspace's exclusive and its ancestors' shared, taken root first) is
//!   held by a snapshotted run from before to after and by each file tool that changes
//!   files: overlapping calls in one tree run one after the other, in one process or several;
//!   calls in sibling trees do not wait. Temporary files in the state directory have names
//!   unique per call (`durable::unique_suffix`: pid, counter, random).
//! - Audit (`audit`): the log's integrity comes from hashes over the exact line bytes (a
//!   hash chain through `prev` and an RFC 6962 tree), so verification reads only `seq` and
//!   `prev` from the start of each line and never re-serialises. Checkpoints are C2SP signed
//!   notes, written by hand over `ring` (the format is a few lines). Checkpoints are compacted
//!   to milestones every 1,024 records plus the newest, so verifying a log checkpointed after
//!   every call checks ~n/1024 signatures. Queries are a bounded backward scan with byte
//!   prefilters, not an index. The broker opens the log before running anything (fail
//!   closed) and records every outcome, including refusals and errors; the CLI reaches the
//!   log only through `broker::log`.
//! - A session has two places (`broker::session`): its **workspace**, pinned in
//!   `<state>/sessions/<id>.json` at the session's first call (or `--cwd`, or the client's
//!   first root), which is `${WORKSPACE}` — what commands and file tools may write and what
//!   undo snapshots — and its **working directory**, which `cd` and MCP `exec`'s `cwd` move:
//!   the base of relative paths and where a command starts, nothing more. The old rule (the
//!   cwd *is* the workspace) let `cd ~/.local` widen the writable area and `cd ~` brick a
//!   session whose new "workspace" held `~/.ssh`.
//! - File tools decide denied and protected paths before running (`broker::paths`), on the
//!   path as written and as resolved (links of its existing part followed), naming the rules
//!   `denied-path` and `protected-path`; relative protected patterns match at any depth and
//!   also refuse the paths that would hold them (a `.git` file or directory). The worker's
//!   landlock domain and its check of the file it opened remain the second wall. Commands
//!   are held by read-only mounts in the run's mount namespace, for every user; nothing is
//!   copied or put back after a run, so a change made outside the run while it runs is never
//!   reverted. Without a mount namespace the run is refused unless `best_effort`, which leaves
//!   protected paths writable and says so.
//! - A long-lived session pins the policy it loaded (`broker::pin`, issue 25): the MCP
//!   server, the REPL and each daemon session (keyed by `GATEWAY_SESSION` and the policy as
//!   named) decide every call by the copy loaded first; its content hash (`Policy::sha256`,
//!   over every file of the `extends` chain with its path) is stamped on the session's first
//!   audit record at the one append point, so no record site needs to know. A changed file is
//!   said once and obeyed only after an explicit, recorded reload (`policy.reload`, old and new
//!   hashes). The MCP server offers no reload: its client is the agent, and when a new policy
//!   governs an agent is a person's decision (a restart); the REPL (`/reload-policy`) and
//!   `gateway policy reload` are a person's or the session owner's commands.
//! - The daemon's protocol is typed (`serve::proto`, issues 23 and 35): a `Request` of a
//!   version, a context (cwd, environment, session, how stdio travels) and a body (`Hello`,
//!   or `Call`: a `broker::request::Invocation`, the options and one typed `Request` of every
//!   tool and maintenance command). The CLI maps clap's parse to a `Request` once
//!   (`cli::request`: durations, times, env vars checked there and again when decoded); the
//!   MCP server and the REPL send the same type; the daemon parses no command line. Commands
//!   that are processes of their own (serve, mcp, repl) and the binary's own documentation and
//!   config are not requests.
//!   Identity has no field: the daemon builds `broker::client::Client::new` from
//!   `SO_PEERCRED` and the context, and measures tty-ness on the fds (a claimed terminal
//!   stdin would skip its secret scan). `PROTOCOL_VERSION` is bumped on any change to the
//!   wire types; a test pins a digest of a sample of every variant per version, and another
//!   version is refused first, naming both.
//! - Refusals are typed (`broker::refusal::Refusal`, issue 23): denied by a rule, not
//!   approved, a secret in an input, a scrubbed variable asked for by `--env`, a path outside
//!   the roots or leading out of them, a denied or protected path, a protected path inside a
//!   tree to remove, a file over `[files] max_size` are the policy's no, not usage errors.
//!   Each variant carries its fields and names its rule; wherever it is decided — before the
//!   decision, in the broker's perform step, late in the confined worker (which sends it back
//!   typed) — the call's record is a `deny` with that rule (a call nobody approved: a deny
//!   naming the rule that asked, `approved: false`), so `log query --decision deny` finds it;
//!   `cli` maps refusals to exit 120 (121 not approved), and every report carries a `refusal`
//!   object (kind, rule, message, fields). Conflicts (changed since, a file in the way) and bad
//!   arguments stay usage errors (122).
//! - One invocation (`broker::invoke`, issue 23): exec, every file tool, `cd`, `scan` and
//!   `http` are a `Tool` (decide with inputs redacted, ask, confirm, perform, fill the record, after the
//!   record) driven by one function that owns the log, the decision, the approval, the error
//!   and the refusal of the record — no tool can forget one, and a call that fails anywhere
//!   after the log opens is recorded once. Exec's perform step is `broker::exec` (plan, hold
//!   the protected paths, relay, quarantine, snapshot).
//! - Results are typed (`broker::report`): `ExecReport`, `FsReport`, `ErrorReport` and the
//!   small reports of `cd`, `history`, `undo --skip`, `trash`; the CLI's `--json`, the daemon
//!   and MCP (`structuredContent`) render the same values, so a field has one name everywhere
//!   (`reports::every_front_end_returns_the_same_report_for_the_same_call`); no front end
//!   builds a result from a `json!` literal (`cli::json_check`).
//! - A call is a value (issues 23 and 35): `broker::client::Context` is the caller — this
//!   process, or a daemon client as an `Arc` (identity from the socket, environment, streams,
//!   rights, cancellation, the records it appended) — and is `Send` and `Sync`. `ExecRequest`,
//!   `FsContext`, `scan` and the planner take it; the CLI serves every call through a
//!   `cli::Call` (its options, its `Context`, how its failures are said), here or in the
//!   daemon (`daemon_call` gets the client's `Context` from the connection). No thread-local
//!   holds a call's state (`broker::client::tests::no_thread_local_holds_a_calls_state` lists
//!   the few left: caches, and a one-shot process's own signal handling). What stays per
//!   thread is the kernel's per-thread file context, set from the call at its start like
//!   the caller's file identity (`with_fs_identity`): the daemon gives each connection's
//!   thread the client's working directory (`sandbox::thread_own_cwd`), so that a relative
//!   path the client names resolves as it would in the client's own process, `..` after a
//!   symbolic link included — joining it to a string would not; an `openat` from a
//!   directory fd held by the `Context` would, at the cost of every path-taking call.
//! - A call answers with a typed `Report` (issue 35): `handle` — the CLI's `dispatch`, which
//!   the daemon runs for its clients — returns `broker::report::Report` (exit code, the
//!   result as one `Outcome` per kind, notes); the daemon sends it as the call's last
//!   message (`ServerMsg::Done`, in `ReportPart` pieces when over 4 MiB); the front end
//!   renders it — the CLI as text or `--json` where it runs (a daemon's client by its own
//!   terminal), MCP through the daemon as the tool result it is. Nothing is parsed back from
//!   printed text. A result travels as its type where a renderer reads its fields, and as
//!   `report::Json<T>` (the JSON `--json` prints, typed by `T` in Rust) where it is only
//!   printed whole. What a call streams while it runs — a command's output, `log tail -f` —
//!   goes to the call's streams before its report.
//! - Authority from the caller, not the process (issue 35): what a daemon client may see is
//!   filtered in the broker (`history` for every front end, not one CLI path); an agent's
//!   `scan` is decided by its policy as a search and its walk reads only what the file tools
//!   could (`broker::tools::scan`, a regular file opened without following a link and checked to be
//!   the file at its resolved, allowed place); files a client names are resolved with its
//!   rights (`tool --root`); Claude Code's cwd and snapshot files are written by the client
//!   process (`cli::agent_shell::via_daemon`), never by the daemon. What all clients share is
//!   the admin's: the store's quota and retention come from the daemon's own policy
//!   (`authz::govern`: a client's policy narrows its own share only), and a client's run is
//!   capped at the client's own resource limits (`Limits::ceiling`, from `/proc/PID/limits`,
//!   which every user may read; prlimit(2) would need a capability a client-identity thread
//!   lacks). Standing approvals are keyed by what the call is — uid, session, workspace,
//!   directory, command, a digest of the environment it gets — and bounded, as are session
//!   names (128 bytes) and pins per uid; the daemon returns large buffers to the kernel
//!   (`M_MMAP_THRESHOLD`), so a client's megabyte message does not leave it larger.
//! - Egress by name (`network = { proxy = ... }`, issue 36): the run's pid-1 helper, inside the
//!   run's own network namespace, listens on `127.0.0.1:3128` before the command starts and
//!   hands the listening socket to the broker over a socket pair (`SCM_RIGHTS`); the broker
//!   accepts on it from its own namespace and connects out from there. No relay process
//!   runs in the namespace (the kernel carries accepted connections across), and the
//!   command gets no socket family it did not have. The proxy (`net::proxy`) is written on
//!   httparse rather than hyper: it must decide, pin and scan each request from its bytes
//!   and then only move bytes (tunnels with `splice`). One request per plaintext
//!   connection (`Connection: close` both ways; bytes after the body are not forwarded)
//!   keeps every request decided. Names are resolved by the broker (a thread that ends with
//!   the run); the connection is pinned to the address checked. Connection records follow
//!   their exec's record (they name its `seq`, known only then), and are also kept in the
//!   run's intent side file, so a broker that dies leaves them for recovery.
//! - The `http` tool (`broker::tools::http`, issue 36) is the broker's own request, decided
//!   by the policy's rules (`tools = ["http"]`) and then by its network with the egress
//!   proxy's one decision (`net::resolve::decide`; `connect_tcp` allows names on its ports,
//!   never special addresses). It uses `reqwest` (blocking, rustls with ring and the
//!   system's roots; no default features, so no proxy from the environment, no
//!   decompression, no HTTP/2) with redirects off and a resolver that answers only the
//!   addresses its decisions pinned: gateway follows each redirect itself, deciding and
//!   recording each hop. A blocking client's runtime runs on its own thread, so the MCP
//!   server's blocking-pool threads may call it.
//! - The daemon's state is one value (`broker::server::Server`: roles, approvals, pins, its
//!   audit writer), made by `gateway serve` and carried by each of its calls' `Client`: the
//!   broker reaches it through the call (`Context::server`; `broker::open_log` and
//!   `append_record` take it), not through statics, so two servers in one process share
//!   nothing. A record with no server (a one-shot front end) opens the log itself.
//! - Change capture (issue 37) is an overlay, not a walk: the workspace is the lower layer of
//!   an overlayfs the run's helper mounts in its own user and mount namespace (`userxattr`,
//!   every layer passed by descriptor with `FSCONFIG_SET_FD`, the lower a non-recursive
//!   `open_tree` clone of the workspace's mount, upper and work beneath one clone of the
//!   call's capture directory, which overlay wants on one mount); landlock gets a rule on the
//!   overlay's root (a rule on the workspace's inode does not cover the overlay's inodes).
//!   Paths found through the overlay (protected, denied, pinned inside the workspace) are
//!   checked by type only: the overlay reports its own device and inode, and no agent process
//!   writes the lower layer (every run writes its own upper). The upper layer is applied after
//!   the run beneath the workspace's descriptor, each path journalled (`workspace::apply`);
//!   it is the record of what the run did, so mtimes put back, ignore files written, growth
//!   past a bound or `chmod 000` cannot hide a change, and the cost follows what changed.
//!   Alternatives weighed: fanotify (needs CAP_SYS_ADMIN in the initial namespace; no normal
//!   user), a seccomp user-notification tracer of every write (a syscall round trip per
//!   write, and races on paths), and a walk comparing ctime and content (kept as the
//!   fallback: still O(files)). What it costs a command: a directory that existed cannot be
//!   renamed (EXDEV; `mv` copies), a file with hard links is replaced by name, never
//!   written through (its other names, maybe outside the workspace, keep their content), and an unmapped uid's file is read-only (EOVERFLOW).
//!   docs/undo.md says all of it.
//! - Git's places under capture are judged from the run's layer, not searched for
//!   (`broker::places::LayerCheck`): every run the overlay can capture writes through it,
//!   snapshotted or not (applied plainly when not), so what it wrote in a `.git`, a bare
//!   repository, a protected path or what git's config names is known exactly and kept out
//!   of the workspace. The places that exist are kept per workspace between runs
//!   (`broker::known_places`) and searched again only when the journal shows a change that
//!   could have made or moved a repository: a run's cost no longer grows with the workspace.
//!   What the kept list cannot see (a repository made outside gateway since) is not
//!   read-only to the next run, but what the run writes in it is still judged from the layer
//!   (each changed path's ancestors are looked at for a `.git`, as git's discovery does).
//!
//! # Test strategy
//!
//! Unit tests sit beside the code (policy semantics, matcher, shell analyser, validation
//! positions, seccomp search tree). `tests/main.rs` — one binary, a module per area and a
//! shared `util` module, as ripgrep's — drives the real binary: one test per
//! attack of the escape suite (each asserting the attack fails, with controls showing the
//! fixture does detect an escape when unconfined), ordinary work (C compile and run, python,
//! git, pipes, stdin), and every documented exit code. Sandbox tests fail when the sandbox
//! cannot run; `GATEWAY_TEST_NO_SANDBOX=1` skips them explicitly. The secrets corpus
//! (`tests/secrets/corpus.rs`) generates labelled positives and negatives from templates and
//! scans them with the real binary. The audit tests make each kind of tampering and assert
//! that verify names it, flip every byte of a 100-record log, race writers (threads and
//! processes), and grep the state directory for planted tokens. Fuzz targets (`fuzz/`) cover
//! the policy parser, the shell analyser, the secrets scanner, the streaming redactor and the
//! log verifier, the edit engine with undo, and the egress proxy's request parsing
//! (`net`); speed is measured by `benches/spawn.rs`,
//! `benches/secrets.rs`, `benches/audit.rs` and `benches/fs.rs`. The file tools' worker is
//! tested against the kernel with `fs probe`, which opens paths from inside it without
//! gateway's own checks. `docs/seams.md` lists the promises that hold where two features
//! meet (promise, attack, test), each row a test that passes.
#![warn(missing_docs)]
// Tests may be long (a scenario per test); production functions may not (Cargo.toml lints).
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod audit;
pub mod broker;
pub mod cli;
pub mod durable;
pub mod fsops;
pub mod journal;
pub mod model;
pub mod net;
pub mod policy;
pub mod sandbox;
pub mod secrets;
pub mod serve;
pub mod shown;
mod sys;
pub mod workspace;
