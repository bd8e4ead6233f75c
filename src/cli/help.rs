//! The CLI explaining itself: every subcommand's examples (shown under its `--help`), the exit
//! codes (`gateway help exit-codes`, the man page), shell completions (`gateway completions`)
//! and the man page (`gateway man`).

use super::args::Cli;
use super::exit;
use clap::CommandFactory;
use std::io::Write;
use std::process::ExitCode;

/// Examples shown under each subcommand's `--help` (clap's `after_help`); the first line is the
/// heading, the rest are command lines a user can copy.
pub(crate) mod ex {
    pub(crate) const TOP: &str = "Examples:\n  gateway exec -- cargo test\n  gateway exec --policy strict -- sh -c 'make test'\n  gateway log query --decision deny --since 2h\n\nExit codes: `gateway help exit-codes`. Completions: `gateway completions bash|zsh|fish`.\nMan page: `gateway man`.";
    pub(crate) const EXEC: &str = "Examples:\n  gateway exec -- cargo test                     # default policy: standard\n  gateway exec --policy strict --timeout 30s -- make test\n  gateway exec --env RUST_LOG=debug -- ./run.sh\n  gateway --json exec -- git status              # one JSON object: decision, exit, output";
    pub(crate) const SH: &str = "Examples:\n  gateway sh -c 'make test && git status'\n  gateway sh -lc 'echo $0 $1' name arg           # as `sh -c`: $0 and arguments\n  ln -s $(command -v gateway) ~/.local/bin/gateway-sh   # then SHELL=~/.local/bin/gateway-sh";
    pub(crate) const REPL: &str = "Examples:\n  gateway repl\n  gateway repl --policy strict                   # then: make test, /undo, /log --decision deny";
    pub(crate) const MCP: &str = "Examples:\n  gateway mcp --policy standard\n  claude mcp add gateway -- gateway mcp --policy standard   # register with Claude Code";
    pub(crate) const TOOL: &str = "Examples:\n  gateway tool exec '{\"command\": \"ls -la\"}'\n  gateway tool read_file '{\"path\": \"src/main.rs\"}' --root .";
    pub(crate) const SERVE: &str = "Examples:\n  gateway serve                                  # default socket: $XDG_RUNTIME_DIR/gateway.sock\n  gateway serve --socket /run/gateway.sock --max-clients 16";
    pub(crate) const PENDING: &str = "Examples:\n  gateway pending\n  gateway --json pending";
    pub(crate) const APPROVE: &str =
        "Examples:\n  gateway approve 7\n  gateway approve 7 --always-for-session";
    pub(crate) const DENY: &str = "Examples:\n  gateway deny 7";
    pub(crate) const CONFIG: &str = "Examples:\n  gateway config show";
    pub(crate) const CONFIG_SHOW: &str =
        "Examples:\n  gateway config show\n  gateway --json config show";
    pub(crate) const SCAN: &str = "Examples:\n  gateway scan .                                 # exit 1 if a secret is found\n  gateway scan --format sarif --baseline .secrets.json src/\n  gateway scan --redact --exclude 'tests/**' .";
    pub(crate) const HTTP: &str = "Examples:\n  gateway http GET https://crates.io/api/v1/crates/serde\n  gateway http POST https://api.example.com/items -H 'Content-Type: application/json' --data '{\"a\": 1}'\n  gateway --json http GET https://example.com/ --max-redirects 0\n\nThe policy needs a rule for the tool (`tools = [\"http\"]`) and a network that reaches the\nhost: `[sandbox] network = { proxy = { allow = [\"example.com\"] } }`.";
    pub(crate) const POLICY: &str = "Examples:\n  gateway policy list\n  gateway policy explain --policy strict -- sh -c 'ls; rm -rf ~'";
    pub(crate) const POLICY_CHECK: &str = "Examples:\n  gateway policy check my-policy.toml";
    pub(crate) const POLICY_EXPLAIN: &str = "Examples:\n  gateway policy explain --policy strict -- sh -c 'ls; rm -rf ~'\n  gateway policy explain --credentials";
    pub(crate) const POLICY_LIST: &str = "Examples:\n  gateway policy list";
    pub(crate) const POLICY_RELOAD: &str =
        "Examples:\n  gateway policy reload\n  gateway policy reload strict";
    pub(crate) const LOG: &str =
        "Examples:\n  gateway log verify\n  gateway log query --decision deny --since 2h";
    pub(crate) const LOG_VERIFY: &str =
        "Examples:\n  gateway log verify\n  gateway log verify --anchor cp.txt --key key0.txt";
    pub(crate) const LOG_QUERY: &str = "Examples:\n  gateway log query --decision deny --since 2h\n  gateway log query --tool edit --path src/ --limit 0";
    pub(crate) const LOG_TAIL: &str = "Examples:\n  gateway log tail -n 20\n  gateway log tail -f";
    pub(crate) const LOG_SHOW: &str = "Examples:\n  gateway log show 42";
    pub(crate) const LOG_CHECKPOINT: &str = "Examples:\n  gateway log checkpoint\n  gateway log checkpoint --export > cp.txt       # keep it off this host";
    pub(crate) const LOG_GC: &str = "Examples:\n  gateway log gc";
    pub(crate) const KEYS: &str = "Examples:\n  gateway keys export > key0.txt";
    pub(crate) const KEYS_EXPORT: &str = "Examples:\n  gateway keys export > key0.txt                 # epoch 0 first: keep it off this host";
    pub(crate) const KEYS_ROTATE: &str = "Examples:\n  gateway keys rotate";
    pub(crate) const FS: &str = "Examples:\n  gateway fs read src/main.rs --offset 10 --limit 20\n  gateway fs edit src/main.rs --old 'a + b' --new 'a - b'";
    pub(crate) const FS_RM: &str = "Examples:\n  gateway fs rm notes.txt                        # to the trash: `gateway undo` brings it back\n  gateway fs rm -r build/";
    pub(crate) const FS_MKDIR: &str = "Examples:\n  gateway fs mkdir -p src/cli/help";
    pub(crate) const FS_MV: &str =
        "Examples:\n  gateway fs mv old.rs new.rs\n  gateway fs mv notes.txt docs/";
    pub(crate) const FS_CD: &str = "Examples:\n  GATEWAY_SESSION=s1 gateway fs cd src\n  GATEWAY_SESSION=s1 gateway fs ls               # lists src/";
    pub(crate) const FS_LS: &str = "Examples:\n  gateway fs ls\n  gateway fs ls src";
    pub(crate) const FS_GLOB: &str =
        "Examples:\n  gateway fs glob '*.rs'\n  gateway fs glob 'src/**/*.rs' --path .";
    pub(crate) const FS_GREP: &str = "Examples:\n  gateway fs grep 'fn main' --glob '*.rs'\n  gateway fs grep -i todo --mode count";
    pub(crate) const FS_READ: &str = "Examples:\n  gateway fs read src/main.rs\n  gateway fs read src/main.rs --offset 10 --limit 20";
    pub(crate) const FS_WRITE: &str = "Examples:\n  gateway fs write notes.txt --content 'hello'\n  make-report | gateway fs write report.txt --content-file -";
    pub(crate) const FS_EDIT: &str = "Examples:\n  gateway fs edit src/main.rs --old 'a + b' --new 'a - b'\n  gateway fs edit notes.txt --append 'one more line'\n  gateway fs edit src/lib.rs --delete-lines 3-5 --dry-run";
    pub(crate) const HISTORY: &str = "Examples:\n  gateway history\n  gateway history --all";
    pub(crate) const TRASH: &str = "Examples:\n  gateway trash list\n  gateway trash restore notes.txt               # a name `gateway trash list` shows";
    pub(crate) const TRASH_LIST: &str = "Examples:\n  gateway trash list";
    pub(crate) const TRASH_RESTORE: &str = "Examples:\n  gateway trash restore notes.txt               # a name `gateway trash list` shows";
    pub(crate) const TRASH_EMPTY: &str = "Examples:\n  gateway trash empty --older-than 7d";
    pub(crate) const UNDO: &str = "Examples:\n  gateway undo                                   # the newest change of this workspace\n  gateway undo 12 --dry-run\n  gateway undo --skip";
    pub(crate) const CHANGES: &str = "Examples:\n  gateway exec --review -- make fmt          # run, hold the changes\n  gateway changes                            # the held change sets\n  gateway changes cap-1a2b3c --diff";
    pub(crate) const APPLY: &str = "Examples:\n  gateway apply cap-1a2b3c                   # land them (gateway undo reverts)";
    pub(crate) const DISCARD: &str = "Examples:\n  gateway discard cap-1a2b3c                 # drop them; the workspace stays as it is";
    pub(crate) const COMPLETIONS: &str = "Examples:\n  gateway completions bash > ~/.local/share/bash-completion/completions/gateway\n  gateway completions zsh > ~/.zfunc/_gateway\n  gateway completions fish > ~/.config/fish/completions/gateway.fish";
    pub(crate) const MAN: &str =
        "Examples:\n  gateway man > ~/.local/share/man/man1/gateway.1\n  gateway man | man -l -";
}

/// Exit codes and what they mean: `gateway help exit-codes` and the man page's EXIT STATUS
/// (README.md, "Exit codes", says the same).
pub(crate) const EXIT_CODES: &[(&str, &str)] = &[
    (
        "0-118",
        "the command's own exit code (exec, sh); 0 for success otherwise",
    ),
    (
        "1",
        "log verify: the log, a checkpoint or a signature does not hold; scan: a new secret \
         was found; tool: the tool's result is an error (including a refusal)",
    ),
    (
        "119",
        "the audit log could not be written (unreadable keys, a damaged log): nothing ran",
    ),
    (
        "120",
        "denied by policy (a rule, a secret in the inputs or output, a refused --env, a \
         --timeout longer than the policy's, a file tool's refusal)",
    ),
    (
        "121",
        "`ask` and not approved (no terminal, answered no, `gateway deny`, or the approval \
         timed out)",
    ),
    (
        "122",
        "bad usage: unknown option or subcommand, missing command, bad --cwd, --env or \
         --timeout; or a conflict with the machine's state (a daemon already serving at the \
         socket, file tools for another uid through a root daemon)",
    ),
    (
        "123",
        "bad policy: invalid file (file:line:column), unknown name",
    ),
    (
        "124",
        "timed out: the sandbox and every process in it were killed",
    ),
    (
        "125",
        "the sandbox could not be set up, nothing ran (user namespaces refused, a writable \
         area that is a symbolic link, ...), or the daemon could not be reached or refused the \
         call",
    ),
    ("126", "the program exists but cannot be executed"),
    ("127", "command not found"),
    (
        "128+N",
        "the command was killed by signal N (137 also when the output limit was exceeded)",
    ),
];

// Each code above is one of `exit`'s (checked by a unit test below).
const _: [u8; 7] = [
    exit::AUDIT,
    exit::DENIED,
    exit::NOT_APPROVED,
    exit::USAGE,
    exit::POLICY,
    exit::TIMEOUT,
    exit::SANDBOX,
];

/// The exit codes as `gateway help exit-codes` prints them.
pub(crate) fn exit_codes_text() -> String {
    let mut s = String::from("Exit codes of gateway:\n\n");
    for (code, meaning) in EXIT_CODES {
        s.push_str(&format!("  {code:<6} {meaning}\n"));
    }
    s
}

/// Help topics that are not subcommands (`gateway help TOPIC`): printed, or None when `args`
/// (the whole command line) names none.
pub(crate) fn topic(args: &[std::ffi::OsString]) -> Option<ExitCode> {
    let words: Vec<&str> = args.iter().skip(1).filter_map(|a| a.to_str()).collect();
    match words.as_slice() {
        ["help", "exit-codes"] | ["help", "exit-status"] => {
            println!("{}", exit_codes_text().trim_end());
            Some(ExitCode::SUCCESS)
        }
        _ => None,
    }
}

/// `cmd` without its hidden subcommands, at every level (clap_complete offers hidden ones; clap
/// cannot remove a subcommand, so a command with hidden ones is rebuilt from its name, about,
/// arguments and visible subcommands — what completion needs).
fn visible_only(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let mut cmd = cmd;
    for n in names {
        cmd = cmd.mut_subcommand(n, visible_only);
    }
    if !cmd.get_subcommands().any(clap::Command::is_hide_set) {
        return cmd;
    }
    let mut fresh = clap::Command::new(cmd.get_name().to_string())
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = cmd.get_about() {
        fresh = fresh.about(about.clone());
    }
    fresh
}

/// `gateway completions SHELL`: the completion script on stdout.
pub(crate) fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut cmd = visible_only(Cli::command());
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "gateway", &mut out);
    write_out(&out)
}

/// Escapes text for roff: backslashes, and a line starting with `.` or `'` (a request).
fn roff_text(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// The man page gateway(1): clap's synopsis, description, options and commands, then EXIT
/// STATUS and EXAMPLES.
pub(crate) fn man_page() -> Result<Vec<u8>, std::io::Error> {
    let cmd = Cli::command();
    let after = cmd.get_after_help().map(|h| h.to_string());
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    man.render_subcommands_section(&mut out)?;
    let mut s = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in EXIT_CODES {
        s.push_str(&format!(
            ".TP\n\\fB{}\\fR\n{}\n",
            roff_text(code),
            roff_text(meaning)
        ));
    }
    s.push_str(".SH EXAMPLES\n");
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        let Some(h) = sub.get_after_help() else {
            continue;
        };
        for line in h.to_string().lines().skip(1) {
            // `command   # what it does`: the command in bold, the comment below it.
            let (command, comment) = match line.split_once(" # ") {
                Some((c, n)) => (c.trim(), Some(n.trim())),
                None => (line.trim(), None),
            };
            if command.is_empty() {
                continue;
            }
            s.push_str(&format!(".TP\n\\fB{}\\fR\n", roff_text(command)));
            if let Some(n) = comment {
                s.push_str(&format!("{}\n", roff_text(n)));
            }
        }
    }
    if let Some(a) = after {
        s.push_str(".SH \"SEE ALSO\"\n");
        for line in a.lines().filter(|l| !l.trim().is_empty()) {
            s.push_str(&format!("{}\n.br\n", roff_text(line.trim())));
        }
    }
    out.extend_from_slice(s.as_bytes());
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// `gateway man`: the man page (roff) on stdout.
pub(crate) fn man() -> ExitCode {
    match man_page() {
        Ok(page) => write_out(&page),
        Err(e) => {
            eprintln!("gateway: could not render the man page: {e}");
            ExitCode::from(exit::USAGE)
        }
    }
}

fn write_out(bytes: &[u8]) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`gateway man | head`) is not an error worth a message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gateway: could not write to stdout: {e}");
            ExitCode::from(exit::USAGE)
        }
    }
}

/// A usage error as one line: clap's first paragraph without its "error: " prefix, clap's
/// tips (a similar subcommand or option: `gateway exce` suggests `exec`), and, for a missing
/// subcommand, the visible subcommands only (clap's own list names hidden ones too).
pub(crate) fn usage_error_line(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let text = e.render().to_string();
    let paragraphs: Vec<String> = text
        .split("\n\n")
        .map(|p| {
            p.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let mut first = paragraphs.first().cloned().unwrap_or_default();
    if e.kind() == ErrorKind::MissingSubcommand
        && let Some(ContextValue::String(parent)) = e.get(ContextKind::InvalidSubcommand)
    {
        let mut cmd = Cli::command();
        cmd.build();
        let mut at = &cmd;
        for word in parent.split_whitespace().skip(1) {
            match at.find_subcommand(word) {
                Some(c) => at = c,
                None => break,
            }
        }
        let names: Vec<&str> = at
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(clap::Command::get_name)
            .collect();
        first = format!(
            "'{parent}' requires a subcommand: {} (see `{parent} --help`)",
            names.join(", ")
        );
        return first;
    }
    let first = first.strip_prefix("error: ").unwrap_or(&first).to_string();
    let tips: Vec<&str> = text
        .split("\n\n")
        .skip(1)
        .flat_map(str::lines)
        .filter_map(|l| l.trim().strip_prefix("tip: "))
        .collect();
    if tips.is_empty() {
        format!("{first} (see `gateway --help`)")
    } else {
        format!("{first}; {} (see `gateway --help`)", tips.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_name_every_code_of_the_exit_module() {
        let text = exit_codes_text();
        for code in [
            exit::AUDIT,
            exit::DENIED,
            exit::NOT_APPROVED,
            exit::USAGE,
            exit::POLICY,
            exit::TIMEOUT,
            exit::SANDBOX,
            exit::NOT_EXECUTABLE,
            exit::NOT_FOUND,
            exit::VERIFY_FAILED,
        ] {
            assert!(
                text.lines()
                    .any(|l| l.split_whitespace().next() == Some(code.to_string().as_str())),
                "exit code {code} missing from:\n{text}"
            );
        }
    }

    #[test]
    fn every_subcommand_has_an_example() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for sub in cmd
                .get_subcommands()
                .filter(|c| !c.is_hide_set() && c.get_name() != "help")
            {
                let name = format!("{path} {}", sub.get_name());
                let ok = sub
                    .get_after_help()
                    .map(|h| h.to_string())
                    .is_some_and(|h| h.contains("Example") && h.contains(&name));
                if !ok {
                    missing.push(name.clone());
                }
                walk(sub, &name, missing);
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "gateway", &mut missing);
        assert!(missing.is_empty(), "no example in --help of: {missing:?}");
    }
}
