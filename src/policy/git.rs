//! Git command lines read the way git reads them, for rules that name what git will do
//! (`git = ["reset --hard", "push --force"]`) instead of how it is spelled.
//!
//! A git command line is parsed like git.c's `handle_options` (global options: `-c k=v`,
//! `-C dir`, `--git-dir`, `--no-pager`, ...) and then like parse-options.c for the
//! subcommand: any unambiguous prefix of a long option (`--har` = `--hard`), `--no-`
//! negations (the last of `--force`/`--no-force` wins), clusters of short options (`-fdx`
//! sets `-f`), values attached or separate (`-e x`, `-ex`), `--` and `--end-of-options`.
//! The option tables are copied from git's sources (builtin/*.c, git 2.5x, commit
//! 1a3e64c6 of github.com/git/git); a subcommand without a table is read without options.
//! `git push` refspecs count as options: `+ref` forces (`--force`), `:ref` deletes
//! (`--delete`). Some short options stand for two (`git branch -D` = `--delete --force`).
//!
//! What static analysis cannot know makes a git command *possibly* match every git pattern
//! (the policy's `unanalysable` effect then caps the rule, as for `$X`): configuration given
//! on the command line (`-c` with any key outside [`SAFE_CONFIG`]: an alias, a program such
//! as `core.pager`, `clean.requireForce=false`, `remote.x.mirror`), `--config-env`,
//! `--exec-path=`, `--git-dir`/`--work-tree`, `GIT_*` variables the script sets (other than
//! [`SAFE_ENV`]), a subcommand that is not a built-in (an alias or an external program), a
//! global option the table does not know, an unknown or ambiguous option of a subcommand
//! that has a table, and a runtime value or a glob where git may read an option.
//!
//! Not covered (the undo snapshot is the backstop): configuration in a repository the
//! command finds by itself (`cd sub && git clean -d` where `sub/.git/config` sets
//! `clean.requireForce=false`; the workspace's own `.git/config` is protected by the
//! built-in policies).

use super::shell::{Arg, SimpleCmd};
use std::collections::BTreeSet;

/// Built-in git commands (git.c `commands[]`, deprecated ones excepted: an alias may
/// override those) and the scripts shipped with git itself. Any other subcommand may be an
/// alias.
#[rustfmt::skip]
const COMMANDS: &[&str] = &[
    "add", "am", "annotate", "apply", "archive", "backfill", "bisect", "blame", "branch",
    "bugreport", "bundle", "cat-file", "check-attr", "check-ignore", "check-mailmap",
    "check-ref-format", "checkout", "checkout--worker", "checkout-index", "cherry", "cherry-pick",
    "clean", "clone", "column", "commit", "commit-graph", "commit-tree", "config", "count-objects",
    "credential", "credential-cache", "credential-cache--daemon", "credential-store", "describe",
    "diagnose", "diff", "diff-files", "diff-index", "diff-pairs", "diff-tree", "difftool",
    "fast-export", "fast-import", "fetch", "fetch-pack", "fmt-merge-msg", "for-each-ref",
    "for-each-repo", "format-patch", "format-rev", "fsck", "fsck-objects", "fsmonitor--daemon",
    "gc", "get-tar-commit-id", "grep", "hash-object", "help", "history", "hook", "index-pack",
    "init", "init-db", "interpret-trailers", "last-modified", "log", "ls-files", "ls-remote",
    "ls-tree", "mailinfo", "mailsplit", "maintenance", "merge", "merge-base", "merge-file",
    "merge-index", "merge-ours", "merge-recursive", "merge-recursive-ours",
    "merge-recursive-theirs", "merge-subtree", "merge-tree", "mktag", "mktree", "multi-pack-index",
    "mv", "name-rev", "notes", "pack-objects", "pack-refs", "patch-id", "pickaxe", "prune",
    "prune-packed", "pull", "push", "range-diff", "read-tree", "rebase", "receive-pack", "reflog",
    "refs", "remote", "remote-ext", "remote-fd", "repack", "replace", "replay", "repo", "rerere",
    "reset", "restore", "rev-list", "rev-parse", "revert", "rm", "send-pack", "shortlog", "show",
    "show-branch", "show-index", "show-ref", "sparse-checkout", "stage", "stash", "status",
    "stripspace", "submodule--helper", "switch", "symbolic-ref", "tag", "unpack-file",
    "unpack-objects", "update-index", "update-ref", "update-server-info", "upload-archive",
    "upload-archive--writer", "upload-pack", "url-parse", "var", "verify-commit", "verify-pack",
    "verify-tag", "version", "worktree", "write-tree",
    // Scripts in git's own distribution.
    "filter-branch", "submodule", "mergetool", "request-pull", "merge-octopus", "merge-resolve",
    "merge-one-file", "quiltimport", "web--browse", "instaweb", "sh-setup", "sh-i18n",
];

/// Commands whose first argument names a subcommand (parse-options' `OPT_SUBCOMMAND`): a
/// pattern may name it (`stash drop`).
const SUBCOMMANDED: &[&str] = &["stash", "reflog", "worktree"];

/// `-c` keys that change neither what a command does to refs and files nor which programs
/// git runs: sections (`user.*`) and whole keys, lower case.
#[rustfmt::skip]
pub const SAFE_CONFIG: &[&str] = &[
    "user.", "author.", "committer.", "color.", "advice.", "column.", "i18n.", "core.quotepath",
    "core.autocrlf", "core.safecrlf", "init.defaultbranch", "commit.gpgsign", "tag.gpgsign",
    "safe.directory", "protocol.version", "pull.rebase", "pull.ff", "merge.conflictstyle",
];

/// `GIT_*` variables a script may set for git without making it unanalysable.
#[rustfmt::skip]
pub const SAFE_ENV: &[&str] = &[
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS",
    "GIT_ADVICE", "GIT_FLUSH",
];

/// Git commands that throw away uncommitted work or local history (the work tree, the index,
/// stashes, branches, reflogs): a run of one is snapshotted for `gateway undo` under every
/// policy, also one that takes no snapshot ([`discards`]). Wider than strict's
/// `deny-git-destructive`, which denies what an agent has no business doing:
/// `git checkout -- x` and `git restore .` are ordinary, and lose what they overwrite all
/// the same. `clean --force` is every `git clean` that removes files (`-n` is a dry run;
/// without `-f` git refuses).
#[rustfmt::skip]
pub const DISCARDS: &[&str] = &[
    "reset --hard", "reset --merge", "reset --keep", "checkout --force", "checkout <paths>",
    "switch --force", "switch --discard-changes", "restore --worktree <paths>",
    "clean --force", "clean --interactive", "stash drop", "stash clear",
    "worktree remove --force", "branch --delete --force", "reflog expire", "reflog delete",
    "reflog drop", "gc --prune", "filter-branch", "update-ref -d", "update-ref --stdin",
];

/// [`DISCARDS`], compiled once.
pub fn discards() -> &'static [GitPattern] {
    static COMPILED: std::sync::OnceLock<Vec<GitPattern>> = std::sync::OnceLock::new();
    COMPILED.get_or_init(|| {
        DISCARDS
            .iter()
            .filter_map(|p| GitPattern::compile(p).ok())
            .collect()
    })
}

/// Option tables, from git's builtin/*.c. One spec per option: `[short]|[long]`, then `=`
/// (takes a value) or `=?` (an optional value, only as `--long=value`), `!` (cannot be
/// negated), `>a,b` (also sets options `a` and `b`).
#[rustfmt::skip]
const TABLES: &[(&str, &[&str])] = &[
    // builtin/reset.c
    ("reset", &[
        "q|quiet", "|no-refresh", "|mixed!", "|soft!", "|hard!", "|merge!", "|keep!",
        "|recurse-submodules=?", "p|patch", "|auto-advance", "U|unified=!",
        "|inter-hunk-context=!", "N|intent-to-add", "|pathspec-from-file=", "|pathspec-file-nul",
    ]),
    // builtin/push.c
    ("push", &[
        "v|verbose", "q|quiet", "|repo=", "|all", "|branches", "|mirror>force", "d|delete",
        "|tags", "n|dry-run", "|porcelain", "f|force", "|force-with-lease=?", "|force-if-includes",
        "|recurse-submodules=", "|thin", "|receive-pack=", "|exec=", "u|set-upstream", "|progress",
        "|prune", "|no-verify", "|follow-tags", "|signed=?", "|atomic", "o|push-option=",
        "4|ipv4!", "6|ipv6!",
    ]),
    // builtin/clean.c
    ("clean", &[
        "q|quiet", "n|dry-run", "f|force", "i|interactive", "d|", "e|exclude=!", "x|", "X|",
    ]),
    // builtin/checkout.c: common, switch-branch and path options, then checkout's own.
    ("checkout", &[
        "q|quiet", "|recurse-submodules=?", "|progress", "m|merge", "|conflict=", "d|detach",
        "t|track=?", "f|force", "|orphan=", "|overwrite-ignore", "|ignore-other-worktrees",
        "2|ours!", "3|theirs!", "p|patch", "U|unified=!", "|inter-hunk-context=!",
        "|ignore-skip-worktree-bits", "|pathspec-from-file=", "|pathspec-file-nul", "b|=", "B|=",
        "l|", "|guess", "|overlay", "|auto-advance",
    ]),
    // builtin/checkout.c: common and switch-branch options, then switch's own.
    ("switch", &[
        "q|quiet", "|recurse-submodules=?", "|progress", "m|merge", "|conflict=", "d|detach",
        "t|track=?", "f|force", "|orphan=", "|overwrite-ignore", "|ignore-other-worktrees",
        "c|create=", "C|force-create=", "|guess", "|discard-changes",
    ]),
    // builtin/checkout.c: common and path options, then restore's own.
    ("restore", &[
        "q|quiet", "|recurse-submodules=?", "|progress", "m|merge", "|conflict=", "2|ours!",
        "3|theirs!", "p|patch", "U|unified=!", "|inter-hunk-context=!",
        "|ignore-skip-worktree-bits", "|pathspec-from-file=", "|pathspec-file-nul",
        "|auto-advance", "s|source=", "S|staged", "W|worktree", "|ignore-unmerged", "|overlay",
    ]),
    // builtin/branch.c (`branch.c`: `if (force) delete *= 2`, so `-d -f` is `-D`).
    ("branch", &[
        "v|verbose", "q|quiet", "t|track=?", "|set-upstream", "u|set-upstream-to=",
        "|unset-upstream", "|color=?", "r|remotes!", "|contains=!", "|no-contains=!", "|with=!",
        "|without=!", "|abbrev=?", "a|all!", "d|delete", "D|>delete,force", "m|move",
        "M|>move,force", "|omit-empty", "c|copy", "C|>copy,force", "l|list", "|show-current",
        "|create-reflog", "|edit-description", "|delete-merged=!", "|dry-run", "f|force",
        "|merged=!", "|no-merged=!", "|forked=!", "|column=?", "|sort=", "|points-at=",
        "i|ignore-case", "|recurse-submodules", "|format=",
    ]),
    // builtin/gc.c
    ("gc", &[
        "q|quiet", "|prune=?", "|cruft", "|max-cruft-size=", "|aggressive", "|auto", "|detach",
        "|force", "|keep-largest-pack", "|expire-to=", "|skip-foreground-tasks",
    ]),
    // builtin/update-ref.c
    ("update-ref", &[
        "m|=", "d|", "|no-deref", "z|", "|stdin", "|create-reflog", "0|batch-updates",
    ]),
    // builtin/reflog.c
    ("reflog expire", &[
        "n|dry-run", "|rewrite", "|updateref", "|verbose", "|expire=!", "|expire-unreachable=!",
        "|stale-fix", "|all", "|single-worktree",
    ]),
    ("reflog delete", &[
        "n|dry-run", "|rewrite", "|updateref", "|verbose",
    ]),
    ("reflog drop", &[
        "|all", "|single-worktree",
    ]),
    // builtin/stash.c
    ("stash drop", &[
        "q|quiet",
    ]),
    ("stash clear", &[

    ]),
    // builtin/worktree.c
    ("worktree remove", &[
        "f|force",
    ]),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Takes {
    No,
    Required,
    Optional,
}

#[derive(Clone, Debug)]
struct Opt {
    short: Option<char>,
    long: Option<&'static str>,
    takes: Takes,
    noneg: bool,
    implies: Vec<&'static str>,
}

impl Opt {
    fn parse(spec: &'static str) -> Opt {
        let (spec, implies) = match spec.split_once('>') {
            Some((s, i)) => (s, i.split(',').collect()),
            None => (spec, Vec::new()),
        };
        let noneg = spec.ends_with('!');
        let spec = spec.trim_end_matches('!');
        let (spec, takes) = if let Some(s) = spec.strip_suffix("=?") {
            (s, Takes::Optional)
        } else if let Some(s) = spec.strip_suffix('=') {
            (s, Takes::Required)
        } else {
            (spec, Takes::No)
        };
        let (s, l) = spec.split_once('|').unwrap_or(("", spec));
        Opt {
            short: s.chars().next(),
            long: (!l.is_empty()).then_some(l),
            takes,
            noneg,
            implies,
        }
    }

    /// The name patterns use: the long name, or `-x` for an option that has none.
    fn canonical(&self) -> String {
        match (self.long, self.short) {
            (Some(l), _) => l.to_string(),
            (None, Some(c)) => format!("-{c}"),
            (None, None) => String::new(),
        }
    }
}

fn table(key: &str) -> Option<Vec<Opt>> {
    TABLES
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, specs)| specs.iter().map(|s| Opt::parse(s)).collect())
}

/// A git command line, as far as git's own parsing goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitCall {
    /// The command (`reset`).
    pub command: String,
    /// Its subcommand, for [`SUBCOMMANDED`] commands (`drop` of `git stash drop`).
    pub subcommand: Option<String>,
    /// Canonical names of the options in effect (`hard`, `force`, `-d`).
    pub options: BTreeSet<String>,
    /// Some word may be an option or operand the parse could not read (a runtime value, a
    /// glob, an unknown or ambiguous option): a pattern may match although `options` does
    /// not show it.
    pub wild: bool,
    /// Whether the call names paths (`checkout` and `restore` only, for `<paths>` patterns).
    pub paths: Paths,
}

/// Whether a `checkout` or `restore` names paths: then it writes the index's (or a tree's)
/// content over those paths in the work tree, whatever uncommitted work they hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paths {
    /// None (a branch switch, or a command that does not take paths).
    No,
    /// One operand git reads as a path only when no revision of that name exists
    /// (`git checkout README.md`): it looks like a file name.
    Maybe,
    /// Certainly (`-- x`, `.`, two operands, `--patch`, `--pathspec-from-file`).
    Yes,
}

/// What a simple command is, for git patterns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not git, or a git command line git refuses or that only prints (`git --version`).
    NotGit,
    /// Git, but what it will do cannot be known statically; the reason.
    Unsure(String),
    /// Git, read.
    Call(GitCall),
}

fn program_name(a: &Arg) -> Option<&str> {
    match a {
        Arg::Lit(p) => Some(p.rsplit('/').next().unwrap_or(p)),
        _ => None,
    }
}

/// May a word the shell expands (a glob) become a word that starts with `-`?
fn may_be_option(a: &Arg) -> bool {
    match a {
        Arg::Unknown(_) => true,
        Arg::Glob(g) => !g.starts_with(|c: char| c.is_alphanumeric() || "./_~+:".contains(c)),
        Arg::Lit(_) => false,
    }
}

fn safe_config(kv: &str) -> bool {
    let key = kv
        .split_once('=')
        .map_or(kv, |(k, _)| k)
        .to_ascii_lowercase();
    SAFE_CONFIG.iter().any(|s| {
        if s.ends_with('.') {
            key.starts_with(s)
        } else {
            key == *s
        }
    })
}

/// Reads a simple command as git would. `could_be_git` is whether the program, when not a
/// literal word (a glob, a runtime value), may name git: then the call is [`Parsed::Unsure`].
pub fn parse(cmd: &SimpleCmd, could_be_git: impl Fn() -> bool) -> Parsed {
    let Some(first) = cmd.argv.first() else {
        return Parsed::NotGit;
    };
    let Some(name) = program_name(first) else {
        return if could_be_git() {
            Parsed::Unsure("the program is a glob or a runtime value that may name git".into())
        } else {
            Parsed::NotGit
        };
    };
    let rest = &cmd.argv[1..];
    let dashed = name.strip_prefix("git-").filter(|c| COMMANDS.contains(c));
    if name != "git" && dashed.is_none() {
        return Parsed::NotGit;
    }
    if let Some(var) = cmd
        .env
        .iter()
        .find(|v| v.starts_with("GIT_") && !SAFE_ENV.contains(&v.as_str()))
    {
        return Parsed::Unsure(format!(
            "the script sets `{var}` for git: it changes git's configuration, repository or programs"
        ));
    }
    // `git-reset --hard` (the dashed form, in git's exec-path) runs the built-in directly.
    let (command, args) = if let Some(c) = dashed {
        (c.to_string(), rest)
    } else {
        match globals(rest) {
            Ok(Some(i)) => match &rest[i] {
                Arg::Lit(c) => (c.clone(), &rest[i + 1..]),
                _ => {
                    return Parsed::Unsure(
                        "the git subcommand is a runtime value or a glob".into(),
                    );
                }
            },
            Ok(None) => return Parsed::NotGit,
            Err(why) => return Parsed::Unsure(why),
        }
    };
    if !COMMANDS.contains(&command.as_str()) {
        return Parsed::Unsure(format!(
            "`git {command}` is not a built-in git command: it may be an alias or an external program"
        ));
    }
    let (subcommand, args) = if SUBCOMMANDED.contains(&command.as_str()) {
        match args.first() {
            Some(Arg::Lit(s)) if !s.starts_with('-') => (Some(s.clone()), &args[1..]),
            Some(a) if may_be_option(a) || matches!(a, Arg::Glob(_)) => {
                return Parsed::Unsure(format!(
                    "the subcommand of `git {command}` is a runtime value or a glob"
                ));
            }
            _ => (None, args),
        }
    } else {
        (None, args)
    };
    let key = match &subcommand {
        Some(s) => format!("{command} {s}"),
        None => command.clone(),
    };
    let mut call = GitCall {
        command,
        subcommand,
        options: BTreeSet::new(),
        wild: false,
        paths: Paths::No,
    };
    let (positionals, dash_dash) = options(args, table(&key).as_deref(), &mut call);
    match call.command.as_str() {
        "checkout" => call.paths = checkout_paths(&call, &positionals, dash_dash),
        "restore" => {
            // Without `--staged` or `--worktree`, restore writes the work tree (restore's
            // `checkout_worktree = -2`, default on); `--staged` alone writes the index only.
            if !call.options.contains("staged") && !call.options.contains("worktree") {
                call.options.insert("worktree".into());
            }
            if !positionals.is_empty()
                || call.options.contains("patch")
                || call.options.contains("pathspec-from-file")
            {
                call.paths = Paths::Yes;
            }
        }
        _ => {}
    }
    if call.command == "push" {
        // Refspecs: `+src:dst` forces that update, `:dst` deletes dst (`:` alone pushes the
        // matching branches). The repository operand is checked too (a `+`/`:` there is no
        // remote anyone names).
        for p in positionals {
            let p = match p.strip_prefix('+') {
                Some(r) => {
                    call.options.insert("force".into());
                    r
                }
                None => p.as_str(),
            };
            if p.len() > 1 && p.starts_with(':') {
                call.options.insert("delete".into());
            }
        }
    }
    Parsed::Call(call)
}

/// Whether `git checkout` names paths (checkout.c's `parse_branchname_arg`): everything
/// after `--` is a path; without `--`, the first operand is a revision if it names one and
/// the rest are paths, a lone operand is a path when it names no revision. `operands` are
/// the operands, `dash_dash` how many of them came before `--`.
fn checkout_paths(call: &GitCall, operands: &[String], dash_dash: Option<usize>) -> Paths {
    let o = |n: &str| call.options.contains(n);
    if o("patch") || o("pathspec-from-file") {
        return Paths::Yes;
    }
    match (dash_dash, operands) {
        (Some(k), _) if operands.len() > k => Paths::Yes,
        (Some(_), _) | (None, []) => Paths::No,
        // The start point of a new branch (`checkout -b x origin/x`), never a path.
        (None, [_]) if o("-b") || o("-B") || o("orphan") || o("detach") => Paths::No,
        (None, [one]) => {
            // No revision has a name component that starts with `.` (check-ref-format), a
            // leading or trailing `/`, or a glob character; `-` is the previous branch and
            // `...B` a merge base.
            let revision = one == "-"
                || one.starts_with("...")
                || !(one.split('/').any(|c| c.starts_with('.'))
                    || one.starts_with('/')
                    || one.ends_with('/')
                    || one.contains(['*', '?', '[']));
            let last = one.rsplit('/').next().unwrap_or(one);
            if !revision {
                Paths::Yes
            } else if last.trim_end_matches('.').contains('.') {
                Paths::Maybe
            } else {
                Paths::No
            }
        }
        (None, _) => Paths::Yes,
    }
}

/// git.c's `handle_options`: the index of the subcommand in `args`, `None` when git only
/// prints something or refuses, or why the call cannot be analysed.
fn globals(args: &[Arg]) -> Result<Option<usize>, String> {
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let t = match a {
            Arg::Lit(t) => t.as_str(),
            _ if may_be_option(a) => {
                return Err("a runtime value or a glob among git's options".into());
            }
            _ => return Ok(Some(i)),
        };
        if !t.starts_with('-') {
            return Ok(Some(i));
        }
        match t {
            // `git --help`, `git --version`: the `help` and `version` commands.
            "--help" | "-h" | "--version" | "-v" => return Ok(None),
            "--html-path" | "--man-path" | "--info-path" => return Ok(None),
            _ if t.starts_with("--list-cmds=") => return Ok(None),
            "-p"
            | "--paginate"
            | "-P"
            | "--no-pager"
            | "--no-lazy-fetch"
            | "--no-replace-objects"
            | "--bare"
            | "--literal-pathspecs"
            | "--no-literal-pathspecs"
            | "--glob-pathspecs"
            | "--noglob-pathspecs"
            | "--icase-pathspecs"
            | "--no-optional-locks"
            | "--no-advice" => i += 1,
            "-C" | "--namespace" | "--shallow-file" | "--attr-source" => {
                if args.get(i + 1).is_none() {
                    return Ok(None);
                }
                i += 2;
            }
            _ if t.starts_with("--namespace=") || t.starts_with("--attr-source=") => i += 1,
            "-c" => match args.get(i + 1) {
                None => return Ok(None),
                Some(Arg::Lit(kv)) if safe_config(kv) => i += 2,
                Some(Arg::Lit(kv)) => {
                    return Err(format!(
                        "`git -c {kv}` sets configuration that may define an alias, name a program or change what the command does"
                    ));
                }
                Some(_) => return Err("`git -c` with a runtime value".into()),
            },
            _ if t == "--config-env" || t.starts_with("--config-env=") => {
                return Err(format!("`git {t}` sets configuration from the environment"));
            }
            _ if t.starts_with("--exec-path") => {
                if t.starts_with("--exec-path=") {
                    return Err("`git --exec-path=` changes which programs git runs".into());
                }
                return Ok(None);
            }
            _ if t == "--git-dir"
                || t.starts_with("--git-dir=")
                || t == "--work-tree"
                || t.starts_with("--work-tree=") =>
            {
                return Err(format!(
                    "`git {t}` points git at another repository or work tree, with its own configuration"
                ));
            }
            _ => {
                return Err(format!(
                    "`git {t}` is a global option the analyser does not know (a newer git?)"
                ));
            }
        }
    }
    Ok(None)
}

enum Long<'a> {
    Found(&'a Opt, bool, Option<&'a str>),
    Unknown,
}

/// parse-options.c's `parse_long_opt`: exact names, unambiguous prefixes, `--no-`
/// negation (also abbreviated), options named `no-x` negated as `--x`. `arg` is the word
/// without its leading `--`. Returns the option, whether it is negated and an inline value.
fn long_opt<'a>(table: &'a [Opt], arg: &'a str) -> Long<'a> {
    let name_end = arg.find('=').unwrap_or(arg.len());
    let name = &arg[..name_end];
    let inline = arg.get(name_end + 1..).filter(|_| name_end < arg.len());
    let mut abbrev: Option<(&Opt, bool)> = None;
    let mut ambiguous = false;
    'options: for o in table {
        let Some(mut long_name) = o.long else {
            continue;
        };
        let mut opt_unset = false;
        loop {
            if let Some(rest) = arg.strip_prefix(long_name) {
                if rest.is_empty() || rest.starts_with('=') {
                    return Long::Found(o, opt_unset, inline);
                }
                continue 'options;
            }
            let mut unset = false;
            let abbreviated = if long_name.starts_with(name) {
                true
            } else if o.noneg {
                continue 'options;
            } else if "no-".starts_with(arg) {
                unset = true;
                true
            } else if !arg.starts_with("no-") {
                if let Some(s) = long_name.strip_prefix("no-") {
                    long_name = s;
                    opt_unset = true;
                    continue;
                }
                continue 'options;
            } else {
                unset = true;
                match arg[3..].strip_prefix(long_name) {
                    Some(rest) if rest.is_empty() || rest.starts_with('=') => {
                        return Long::Found(o, !opt_unset, inline);
                    }
                    Some(_) => continue 'options,
                    None => long_name.starts_with(&arg[3..]),
                }
            };
            if abbreviated {
                if abbrev.is_some() {
                    ambiguous = true;
                }
                abbrev = Some((o, unset ^ opt_unset));
            }
            continue 'options;
        }
    }
    match abbrev {
        // Ambiguous: git refuses it, but an older git without one of the candidates would
        // not; unknown: a newer git may have it.
        Some(_) if ambiguous => Long::Unknown,
        Some((o, unset)) => Long::Found(o, unset, inline),
        None => Long::Unknown,
    }
}

/// Reads a subcommand's arguments with its option table (`None`: options are not read);
/// records options in `call` and returns the operands, and how many of them came before the
/// first `--` (after `--end-of-options` too: git leaves a `--` there for the command).
fn options(
    args: &[Arg],
    table: Option<&[Opt]>,
    call: &mut GitCall,
) -> (Vec<String>, Option<usize>) {
    let mut positionals = Vec::new();
    let mut dash_dash = None;
    let mut explicit: BTreeSet<String> = BTreeSet::new();
    let mut implied: BTreeSet<String> = BTreeSet::new();
    let mut set = |o: &Opt, unset: bool, explicit: &mut BTreeSet<String>| {
        if unset {
            explicit.remove(&o.canonical());
        } else {
            explicit.insert(o.canonical());
            implied.extend(o.implies.iter().map(|s| s.to_string()));
        }
    };
    let mut end = false;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let t = match a {
            Arg::Lit(t) => t.as_str(),
            Arg::Glob(g) if end || !may_be_option(a) => {
                positionals.push(g.clone());
                continue;
            }
            _ => {
                call.wild = true;
                continue;
            }
        };
        if t == "--" && dash_dash.is_none() {
            dash_dash = Some(positionals.len());
            end = true;
            continue;
        }
        if end || t == "-" || !t.starts_with('-') {
            positionals.push(t.to_string());
            continue;
        }
        if t == "--end-of-options" {
            end = true;
            continue;
        }
        let Some(table) = table else {
            continue;
        };
        if let Some(body) = t.strip_prefix("--") {
            match long_opt(table, body) {
                Long::Found(o, unset, inline) => {
                    if o.takes == Takes::Required && inline.is_none() && !unset {
                        i += 1;
                    }
                    set(o, unset, &mut explicit);
                }
                Long::Unknown => call.wild = true,
            }
            continue;
        }
        let cluster: Vec<char> = t[1..].chars().collect();
        for (k, c) in cluster.iter().enumerate() {
            let Some(o) = table.iter().find(|o| o.short == Some(*c)) else {
                call.wild = true;
                break;
            };
            set(o, false, &mut explicit);
            if o.takes != Takes::No {
                if k + 1 == cluster.len() && o.takes == Takes::Required {
                    i += 1;
                }
                break;
            }
        }
    }
    call.options = explicit.union(&implied).cloned().collect();
    (positionals, dash_dash)
}

/// A compiled `git` pattern: `<command> [<subcommand>] [--option...] [<paths>]`.
#[derive(Clone, Debug)]
pub struct GitPattern {
    /// As written.
    pub text: String,
    command: String,
    subcommand: Option<String>,
    options: Vec<String>,
    /// `<paths>`: the call names paths (checkout, restore).
    paths: bool,
}

/// The commands whose calls say whether they name paths ([`GitCall::paths`]).
const WITH_PATHS: &[&str] = &["checkout", "restore"];

impl GitPattern {
    /// Compiles a pattern, checking its names against git's commands and option tables.
    pub fn compile(text: &str) -> Result<GitPattern, String> {
        let mut words = text.split_whitespace();
        let Some(command) = words.next() else {
            return Err("a git pattern names a command (`reset --hard`)".into());
        };
        if command == "git" {
            return Err(format!(
                "`{text}`: write the git command without `git` (`reset --hard`)"
            ));
        }
        if !COMMANDS.contains(&command) {
            return Err(format!(
                "`{text}`: `{command}` is not a built-in git command"
            ));
        }
        let mut rest: Vec<&str> = words.collect();
        let subcommand = if SUBCOMMANDED.contains(&command)
            && rest.first().is_some_and(|w| !w.starts_with('-'))
        {
            Some(rest.remove(0).to_string())
        } else {
            None
        };
        let key = match &subcommand {
            Some(s) => format!("{command} {s}"),
            None => command.to_string(),
        };
        let table = table(&key);
        let mut options = Vec::new();
        let mut paths = false;
        for w in rest {
            if w == "<paths>" {
                if !WITH_PATHS.contains(&command) {
                    return Err(format!(
                        "`{text}`: `<paths>` is known for git {} only",
                        WITH_PATHS.join(" and git ")
                    ));
                }
                paths = true;
                continue;
            }
            let Some(table) = &table else {
                return Err(format!(
                    "`{text}`: the analyser has no option table for `git {key}`; name the command alone (tables: {})",
                    TABLES
                        .iter()
                        .map(|(k, _)| *k)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            };
            let found = if let Some(l) = w.strip_prefix("--") {
                table.iter().find(|o| o.long == Some(l))
            } else if let Some(s) = w.strip_prefix('-').filter(|s| s.chars().count() == 1) {
                let c = s.chars().next();
                match table.iter().find(|o| o.short == c) {
                    Some(o) if o.long.is_some() => {
                        return Err(format!(
                            "`{text}`: write `--{}` (the long name of `{w}` for git {key})",
                            o.long.unwrap_or_default()
                        ));
                    }
                    other => other,
                }
            } else {
                return Err(format!(
                    "`{text}`: `{w}` is not an option; a git pattern is `<command> [<subcommand>] [--option...] [<paths>]`"
                ));
            };
            let Some(o) = found else {
                let known: Vec<String> = table
                    .iter()
                    .map(|o| match o.long {
                        Some(l) => format!("--{l}"),
                        None => o.canonical(),
                    })
                    .collect();
                return Err(format!(
                    "`{text}`: `{w}` is not an option of git {key} (options: {}); name options in full",
                    known.join(" ")
                ));
            };
            options.push(o.canonical());
        }
        Ok(GitPattern {
            text: text.to_string(),
            command: command.to_string(),
            subcommand,
            options,
            paths,
        })
    }

    /// Does the call certainly match; may it?
    fn decide(&self, call: &GitCall) -> (bool, bool) {
        if call.command != self.command {
            return (false, false);
        }
        if self.subcommand.is_some() && call.subcommand != self.subcommand {
            return (false, false);
        }
        let options = self.options.iter().all(|o| call.options.contains(o));
        let (paths, may_paths) = match (self.paths, call.paths) {
            (false, _) | (true, Paths::Yes) => (true, true),
            (true, Paths::Maybe) => (false, true),
            (true, Paths::No) => (false, false),
        };
        let certain = options && paths;
        (certain, certain || call.wild || (options && may_paths))
    }
}

/// Does any pattern match `parsed`? `may` = possibly (an unsure call may match any).
pub fn matches(pats: &[GitPattern], parsed: &Parsed, may: bool) -> bool {
    match parsed {
        Parsed::NotGit => false,
        Parsed::Unsure(_) => may,
        Parsed::Call(c) => pats.iter().any(|p| {
            let (certain, possible) = p.decide(c);
            certain || (may && possible)
        }),
    }
}

#[cfg(test)]
mod tests;
