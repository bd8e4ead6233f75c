//! The command line's grammar: clap's definitions of every subcommand, flag and argument
//! (as ripgrep keeps `flags/` apart from what runs them). `cli/mod.rs` dispatches.

use super::help;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "gateway",
    version,
    about = "Run agents' commands confined by policy, landlock and seccomp",
    after_help = help::ex::TOP
)]
pub(crate) struct Cli {
    /// Broker state directory (audit log, keys, backups); never reachable by sandboxed commands.
    #[arg(long, global = true, env = "GATEWAY_STATE_DIR", value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// Policy: a built-in name (strict, standard, permissive) or a path to a TOML file
    /// [default: the config file's `policy`, else standard].
    #[arg(long, global = true, env = "GATEWAY_POLICY", value_name = "NAME|PATH")]
    pub(crate) policy: Option<String>,
    /// The workspace (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// Print one JSON object instead of human output.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Cmd {
    /// Run a command confined by the policy's sandbox.
    #[command(after_help = help::ex::EXEC)]
    Exec {
        /// Wall-clock limit, at most the policy's (a longer one is refused, exit 120):
        /// seconds (`30`, `2.5`) or a duration (`30s`, `10m`, `1h 30m`), as a policy's
        /// `timeout` takes it.
        #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
        timeout: Option<String>,
        /// Set an environment variable in the sandbox (repeatable).
        #[arg(long = "env", value_name = "K=V")]
        env: Vec<String>,
        /// Record what the command changes in the workspace so `gateway undo` can revert it
        /// (default: the policy's `[undo] snapshot`; on in standard).
        #[arg(long, overrides_with = "no_snapshot")]
        snapshot: bool,
        /// Do not snapshot the workspace for this run.
        #[arg(long)]
        no_snapshot: bool,
        /// Hold the run's changes instead of applying them: review them (`gateway changes
        /// ID --diff`), then `gateway apply ID` or `gateway discard ID` (default: the
        /// policy's `[undo] review`).
        #[arg(long, overrides_with = "no_review")]
        review: bool,
        /// Apply the run's changes as it ends, whatever the policy's `[undo] review`.
        #[arg(long)]
        no_review: bool,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// A drop-in $SHELL for agents: `gateway sh -c 'CMD' [NAME [ARGS...]]` runs CMD with the
    /// config's `shell` (default /bin/sh), confined like `gateway exec`. Put gateway's own
    /// options before `sh`. As $SHELL, use a symlink named `gateway-sh` to the binary; named
    /// `gateway-bash`, it runs bash (Claude Code's CLAUDE_CODE_SHELL: see README, "Agents").
    #[command(after_help = help::ex::SH)]
    Sh {
        /// Shell options and operands, as `sh` takes them: -c, -l/--login and -i (ignored),
        /// other options (-e, -x, -o pipefail, ...) passed to the shell.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
    /// An interactive shell over the broker: lines run confined; /undo, /history, /log,
    /// /policy, /cd, /help.
    #[command(after_help = help::ex::REPL)]
    Repl,
    /// Serve MCP on stdin/stdout: exec and the file tools for an agent, each decided, confined
    /// and recorded as through the CLI (one server process is one session).
    #[command(after_help = help::ex::MCP)]
    Mcp,
    /// Call one of the MCP server's tools with JSON arguments and print its result (JSON):
    /// what `gateway mcp` does for each call of an agent, and how it reaches the daemon.
    /// Exit 0, or 1 when the result is an error (a refusal names the rule).
    #[command(after_help = help::ex::TOOL)]
    Tool {
        /// The tool: exec, read_file, write_file, edit_file, glob, grep, list_directory, move,
        /// delete, mkdir, cd, undo, history.
        name: String,
        /// Its arguments, a JSON object (as the tool's inputSchema in `tools/list`).
        args: Option<String>,
        /// Narrow the policy to this directory (repeatable; an MCP client's roots).
        #[arg(long)]
        root: Vec<PathBuf>,
        /// Narrow the policy to nothing (a client whose roots are none of them local).
        #[arg(long, conflicts_with = "root")]
        no_roots: bool,
    },
    /// Serve the broker on a Unix socket: while it runs (GATEWAY_SOCKET, the config's
    /// `socket`, or the default socket), every other command goes through it.
    #[command(after_help = help::ex::SERVE)]
    Serve {
        /// The socket [default: the config's `socket`, else $XDG_RUNTIME_DIR/gateway.sock].
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        /// Calls served at once.
        #[arg(long, default_value_t = 64)]
        max_clients: usize,
        /// Seconds a client has to send its call before it is dropped.
        #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
        call_timeout: f64,
    },
    /// Requests waiting for a person's approval (through the daemon).
    #[command(after_help = help::ex::PENDING)]
    Pending,
    /// Approve a pending request.
    #[command(after_help = help::ex::APPROVE)]
    Approve {
        /// Its id (`gateway pending`).
        id: u64,
        /// Approve the same call again, without asking, for the rest of its session.
        #[arg(long)]
        always_for_session: bool,
    },
    /// Deny a pending request.
    #[command(after_help = help::ex::DENY)]
    Deny {
        /// Its id (`gateway pending`).
        id: u64,
    },
    /// Show the config file's location and the settings in effect (and where each comes from).
    #[command(after_help = help::ex::CONFIG)]
    Config {
        #[command(subcommand)]
        cmd: ConfigCmd,
    },
    /// Find secrets in files (exit 1 when something new is found).
    #[command(after_help = help::ex::SCAN)]
    Scan {
        /// Files and directories (walked in parallel; .gitignore is honoured).
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Output format (`--json` is `--format json`).
        #[arg(long, value_enum, default_value = "text")]
        format: ScanFormat,
        /// Rewrite files with each new secret replaced by [REDACTED:<rule>] (backed up and
        /// journalled in the state directory first).
        #[arg(long)]
        redact: bool,
        /// Baseline file: findings it lists are not reported; it is written (or updated) with
        /// every current finding. Entries hold a hash of the secret, never the secret.
        #[arg(long, value_name = "FILE")]
        baseline: Option<PathBuf>,
        /// Leave out paths matching this glob (gitignore syntax; repeatable).
        #[arg(long, value_name = "GLOB")]
        exclude: Vec<String>,
        /// Do not honour .gitignore, .ignore and git exclude files.
        #[arg(long)]
        no_ignore: bool,
        /// Report (and redact) only findings of at least this confidence: high (validated
        /// vendor format), medium (keyword assignment, URL password), low (bare entropy).
        #[arg(long, value_enum, default_value = "low", value_name = "LEVEL")]
        min_confidence: crate::secrets::Confidence,
    },
    /// Make an HTTP request, decided by the policy (`tools = ["http"]` and the network's
    /// rules, every redirect again), pinned to the address checked, TLS always verified,
    /// the response redacted and recorded.
    #[command(after_help = help::ex::HTTP)]
    Http {
        /// The method: GET, POST, PUT, DELETE, HEAD, … (case-sensitive).
        method: String,
        /// The URL: http://host[:port]/path or https://….
        url: String,
        /// A request header, `Name: value` (repeatable).
        #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
        header: Vec<String>,
        /// The request body.
        #[arg(long, value_name = "TEXT", conflicts_with = "data_file")]
        data: Option<String>,
        /// The request body from a file (`-` for stdin), read with your rights.
        #[arg(long, value_name = "FILE")]
        data_file: Option<PathBuf>,
        /// Time the whole call may take, at most the policy's (default 30s): seconds or a
        /// duration (`10s`, `2m`).
        #[arg(long, value_name = "DURATION", allow_negative_numbers = true)]
        timeout: Option<String>,
        /// Redirects followed at most, each decided again (0: none; default 5; at most 20).
        #[arg(long, value_name = "N")]
        max_redirects: Option<u32>,
        /// Body bytes read at most (default 1048576; at most 67108864).
        #[arg(long, value_name = "BYTES")]
        max_body: Option<u64>,
    },
    /// Inspect policies.
    #[command(after_help = help::ex::POLICY)]
    Policy {
        #[command(subcommand)]
        cmd: PolicyCmd,
    },
    /// Review and verify the audit log.
    #[command(after_help = help::ex::LOG)]
    Log {
        #[command(subcommand)]
        cmd: LogCmd,
    },
    /// The audit log's signing keys.
    #[command(after_help = help::ex::KEYS)]
    Keys {
        #[command(subcommand)]
        cmd: KeysCmd,
    },
    /// File tools: decided by the policy, resolved beneath its directories, backed up and
    /// journalled before a change, recorded in the audit log.
    #[command(after_help = help::ex::FS)]
    Fs {
        #[command(subcommand)]
        cmd: FsCmd,
    },
    /// The changes made in this workspace (`--cwd`, else the current directory, or beneath
    /// it) by commands and file tools (the journal), oldest first.
    #[command(after_help = help::ex::HISTORY)]
    History {
        /// Every workspace's changes.
        #[arg(long)]
        all: bool,
        /// The newest N changes (0: all of them); a line says how many older ones are left out.
        #[arg(long, short = 'n', value_name = "N", default_value_t = 20)]
        limit: usize,
        /// Changes at or after: RFC 3339 time or a duration ago (90s, 15m, 2h, 3d).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
    },
    /// What `fs rm` moved to the trash.
    #[command(after_help = help::ex::TRASH)]
    Trash {
        #[command(subcommand)]
        cmd: TrashCmd,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    #[command(after_help = help::ex::COMPLETIONS)]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page, gateway(1) in roff, to stdout (with the exit codes).
    #[command(after_help = help::ex::MAN)]
    Man,
    /// The change sets held instead of applied (`exec --review`, a run whose changes could
    /// not all be applied, a run whose broker died): list them, or show one (ID) with
    /// `--diff` for its full diff.
    #[command(after_help = help::ex::CHANGES)]
    Changes {
        /// The set's id (`gateway changes` lists them).
        id: Option<String>,
        /// The full diff of its text files.
        #[arg(long, requires = "id")]
        diff: bool,
    },
    /// Land a held change set in its workspace, each path journalled (`gateway undo`
    /// reverts them).
    #[command(after_help = help::ex::APPLY)]
    Apply {
        /// The set's id (`gateway changes`).
        id: String,
    },
    /// Drop a held change set: the workspace stays as it is.
    #[command(after_help = help::ex::DISCARD)]
    Discard {
        /// The set's id (`gateway changes`).
        id: String,
    },
    /// Revert a change (ID, or the newest of this workspace not yet undone nor skipped);
    /// refuses if the file changed since.
    #[command(after_help = help::ex::UNDO)]
    Undo {
        /// The change id (`gateway history`).
        id: Option<u64>,
        /// Show the diff only.
        #[arg(long)]
        dry_run: bool,
        /// Undo even if the file changed since (its current content is backed up first).
        #[arg(long)]
        force: bool,
        /// Revert nothing: pass over the change (ID, or the one plain `undo` would take) so
        /// that plain `undo` takes the one before it from now on.
        #[arg(long, conflicts_with_all = ["dry_run", "force"])]
        skip: bool,
        /// Without ID: the newest change of any workspace.
        #[arg(long)]
        all: bool,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GrepModeArg {
    /// Matching lines, `path:line:text`.
    Content,
    /// Files with a match.
    Files,
    /// Matching lines per file.
    Count,
}

#[derive(Subcommand, Debug)]
pub(crate) enum TrashCmd {
    /// Items in the trash: when, name, where they were.
    #[command(after_help = help::ex::TRASH_LIST)]
    List,
    /// Put an item back where it was (undoes the removal; refuses if something is there).
    #[command(after_help = help::ex::TRASH_RESTORE)]
    Restore {
        /// Its name (`gateway trash list`).
        name: String,
    },
    /// Remove items for good (all, or those removed more than --older-than ago); confirmed
    /// on a terminal as `fs rm --permanent` is, refused without one unless --yes.
    #[command(after_help = help::ex::TRASH_EMPTY)]
    Empty {
        /// A duration: 7d, 12h, ...
        #[arg(long, value_name = "DURATION")]
        older_than: Option<String>,
        /// Do it without asking for confirmation (needed where there is no terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum ConfigCmd {
    /// The config file and the settings in effect.
    #[command(after_help = help::ex::CONFIG_SHOW)]
    Show,
}

#[derive(Subcommand, Debug)]
pub(crate) enum FsCmd {
    /// Diagnostics: what the confined file-tool worker can open at PATH with a plain open(2)
    /// (gateway's own path checks bypassed) and its confinement as the kernel reports it.
    #[command(hide = true)]
    Probe {
        /// Any path.
        path: PathBuf,
    },
    /// Move a file (or, with -r, a directory) to the trash.
    #[command(after_help = help::ex::FS_RM)]
    Rm {
        /// What.
        path: PathBuf,
        /// Directories with their contents.
        #[arg(short = 'r', long)]
        recursive: bool,
        /// Delete for good, keeping no copy: needs a policy that allows the `purge` tool
        /// (strict denies it, standard asks), and on a terminal a confirmation.
        #[arg(long)]
        permanent: bool,
    },
    /// Create a directory.
    #[command(after_help = help::ex::FS_MKDIR)]
    Mkdir {
        /// The directory.
        path: PathBuf,
        /// Create missing parents; an existing directory is success (nothing changes).
        #[arg(short = 'p', long)]
        parents: bool,
    },
    /// Move or rename (into DST if it is a directory; never over an existing file).
    #[command(after_help = help::ex::FS_MV)]
    Mv {
        /// From.
        src: PathBuf,
        /// To.
        dst: PathBuf,
    },
    /// Change this session's virtual working directory (`..`, `~`, `-`, absolute or
    /// relative); later `fs` and `exec` calls of the session (GATEWAY_SESSION) start there.
    #[command(after_help = help::ex::FS_CD)]
    Cd {
        /// Where.
        path: String,
    },
    /// List a directory.
    #[command(after_help = help::ex::FS_LS)]
    Ls {
        /// The directory (default: the workspace).
        path: Option<PathBuf>,
    },
    /// Files matching a glob (.gitignore honoured; without `/` it matches names anywhere).
    #[command(after_help = help::ex::FS_GLOB)]
    Glob {
        /// The pattern.
        pattern: String,
        /// Where to look (default: the workspace).
        #[arg(long)]
        path: Option<PathBuf>,
    },
    /// Search file contents with a regular expression (ripgrep's engine; .gitignore honoured).
    #[command(after_help = help::ex::FS_GREP)]
    Grep {
        /// The regular expression.
        regex: String,
        /// Where to look (default: the workspace).
        #[arg(long)]
        path: Option<PathBuf>,
        /// Only files matching this glob.
        #[arg(long)]
        glob: Option<String>,
        /// Lines of context around each match.
        #[arg(short = 'C', long, default_value_t = 0)]
        context: usize,
        /// Case-insensitive.
        #[arg(short = 'i', long)]
        ignore_case: bool,
        /// What to print.
        #[arg(long, value_enum, default_value = "content")]
        mode: GrepModeArg,
        /// At most this many results.
        #[arg(long, default_value_t = 500)]
        max: usize,
    },
    /// Print a text file's lines (numbered with --json); binary files only with --binary.
    #[command(after_help = help::ex::FS_READ)]
    Read {
        /// The file.
        path: PathBuf,
        /// First line (1-based).
        #[arg(long)]
        offset: Option<usize>,
        /// How many lines.
        #[arg(long)]
        limit: Option<usize>,
        /// Read a binary file anyway (lossy text).
        #[arg(long)]
        binary: bool,
    },
    /// Create or replace a file (atomically; the old content is backed up).
    #[command(after_help = help::ex::FS_WRITE)]
    Write {
        /// The file.
        path: PathBuf,
        /// The new content.
        #[arg(
            long,
            conflicts_with = "content_file",
            required_unless_present = "content_file"
        )]
        content: Option<String>,
        /// Read the new content from this file (`-`: stdin).
        #[arg(long, value_name = "FILE")]
        content_file: Option<PathBuf>,
        /// Print the unified diff (at most 200 lines / 20 KiB; the whole is in the audit
        /// record, `gateway log show SEQ`), not only the `path: +N -M lines` stat.
        #[arg(long)]
        diff: bool,
    },
    /// Edit a text file in place, keeping its line endings, BOM and final newline.
    #[command(after_help = help::ex::FS_EDIT)]
    Edit {
        /// The file.
        path: PathBuf,
        /// Exact text to replace (must be unique unless --all).
        #[arg(long, requires = "new")]
        old: Option<String>,
        /// Its replacement.
        #[arg(long, requires = "old")]
        new: Option<String>,
        /// Replace every occurrence.
        #[arg(long, requires = "old")]
        all: bool,
        /// Insert --text before this line (1-based; one past the end appends).
        #[arg(long, requires = "text")]
        insert_at: Option<usize>,
        /// The lines to insert.
        #[arg(long)]
        text: Option<String>,
        /// Append these lines.
        #[arg(long)]
        append: Option<String>,
        /// Delete lines A-B (1-based, inclusive).
        #[arg(long, value_name = "A-B")]
        delete_lines: Option<String>,
        /// Several edits in one atomic step: a JSON array of {"replace": {"old", "new",
        /// "all"}}, {"insert_at": {"line", "text"}}, {"append": {"text"}},
        /// {"delete_lines": {"from", "to"}}. `-`: stdin.
        #[arg(long, value_name = "FILE")]
        edits: Option<PathBuf>,
        /// Print the unified diff; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print the unified diff (at most 200 lines / 20 KiB; the whole is in the audit
        /// record, `gateway log show SEQ`), not only the `path: +N -M lines` stat.
        #[arg(long)]
        diff: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum LogCmd {
    /// Recompute the hash chain, the Merkle tree, every checkpoint and signature (exit 0 only
    /// if all hold).
    #[command(after_help = help::ex::LOG_VERIFY)]
    Verify {
        /// A checkpoint exported earlier (`gateway log checkpoint --export`): detects a
        /// deleted or rewritten tail even if local checkpoints were removed too.
        #[arg(long, value_name = "FILE")]
        anchor: Option<PathBuf>,
        /// The epoch-0 public key exported earlier (`gateway keys export`): detects replaced
        /// keys.
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
    },
    /// List records matching filters (newest last).
    #[command(after_help = help::ex::LOG_QUERY)]
    Query {
        #[command(flatten)]
        filter: FilterArgs,
        /// At most this many (the newest); 0: all.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Show the last records; with -f, keep printing new ones.
    #[command(after_help = help::ex::LOG_TAIL)]
    Tail {
        /// How many.
        #[arg(short = 'n', long, default_value_t = 10)]
        lines: usize,
        /// Follow: print records as they are appended.
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Show one record with its stored output (up to 64 KiB of each stream by default: its
    /// head and tail around a marker saying how much was cut).
    #[command(after_help = help::ex::LOG_SHOW)]
    Show {
        /// The record's sequence number.
        seq: u64,
        /// Leave out the stored output (stdin, stdout, stderr): the record only.
        #[arg(long, conflicts_with = "output_limit")]
        no_output: bool,
        /// Bytes of each stored stream shown at most, head and tail kept (`0`: all of it).
        #[arg(long, value_name = "BYTES", default_value_t = crate::broker::log::SHOW_OUTPUT_LIMIT)]
        output_limit: usize,
    },
    /// Print the newest signed checkpoint.
    #[command(after_help = help::ex::LOG_CHECKPOINT)]
    Checkpoint {
        /// Print it for copying off this host (a C2SP signed note); keep it to use with
        /// `log verify --anchor`.
        #[arg(long)]
        export: bool,
    },
    /// Apply the artifact retention of the policy now.
    #[command(after_help = help::ex::LOG_GC)]
    Gc,
}

#[derive(clap::Args, Debug)]
pub(crate) struct FilterArgs {
    /// Tool name as records hold it (exec, fs.edit, undo, ...) or a file tool's short name
    /// (read, write, edit, rm, delete, purge, mkdir, mv, ls, glob, grep, search, cd, restore).
    #[arg(long)]
    pub(crate) tool: Option<String>,
    /// Decision: allow, deny (every refusal), ask, or error (a call that failed: before it
    /// could be decided, or after, e.g. a sandbox that refused to start it).
    #[arg(long, value_parser = ["allow", "deny", "ask", "error"])]
    pub(crate) decision: Option<String>,
    /// Records at or after: RFC 3339 time or a duration ago (90s, 15m, 2h, 3d).
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Records at or before: RFC 3339 time or a duration ago.
    #[arg(long, value_name = "TIME")]
    pub(crate) until: Option<String>,
    /// Session id.
    #[arg(long)]
    pub(crate) session: Option<String>,
    /// Records whose working directory is under PATH or whose arguments name it.
    #[arg(long)]
    pub(crate) path: Option<String>,
    /// Records containing this text anywhere.
    #[arg(long, value_name = "TEXT")]
    pub(crate) contains: Option<String>,
    /// Exit code.
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) exit_code: Option<i32>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum KeysCmd {
    /// Print the public keys (epoch 0 first: the root of trust to keep off this host).
    #[command(after_help = help::ex::KEYS_EXPORT)]
    Export,
    /// New signing key: the old one signs the new one and a checkpoint, then is destroyed.
    #[command(after_help = help::ex::KEYS_ROTATE)]
    Rotate,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScanFormat {
    /// `path:line:column: rule (fingerprint)` per finding.
    Text,
    /// One JSON object.
    Json,
    /// SARIF 2.1.0.
    Sarif,
}

#[derive(Subcommand, Debug)]
pub(crate) enum PolicyCmd {
    /// Validate a policy file.
    #[command(after_help = help::ex::POLICY_CHECK)]
    Check {
        /// The file.
        file: PathBuf,
    },
    /// Show the decision, the matching rules and the sandbox for a command, without running it;
    /// or (`--credentials`) the credentials every policy denies, and why.
    #[command(after_help = help::ex::POLICY_EXPLAIN)]
    Explain {
        /// List the credential catalogue: each denied path and variable with its owner, what
        /// it holds and the source saying so.
        #[arg(long)]
        credentials: bool,
        /// The command.
        #[arg(
            required_unless_present = "credentials",
            trailing_var_arg = true,
            value_name = "CMD"
        )]
        command: Vec<String>,
    },
    /// List the built-in policies.
    #[command(after_help = help::ex::POLICY_LIST)]
    List,
    /// Load a daemon session's policy again (GATEWAY_SESSION; the REPL's /reload-policy):
    /// a session pins the policy it loaded first, and follows a changed file only after
    /// this. Recorded with the old and new hashes; a policy that fails to load is not used.
    #[command(after_help = help::ex::POLICY_RELOAD)]
    Reload {
        /// Load this policy (name or path) instead of the one in force.
        name: Option<String>,
    },
}
