//! Policies: TOML → typed, validated rules and a sandbox profile; evaluation of a
//! [`ToolCall`] into a [`Decision`]. Pure: no I/O except reading the policy file itself.
//!
//! Semantics (Cedar's forbid-overrides-permit, default deny): for every simple command of a
//! call, any matching `deny` → deny; else any `ask` → ask; else any `allow` → allow; else
//! deny (`default-deny`). The call's effect is the strictest over its commands and over the
//! policy's `unanalysable` fallback for any part that could not be analysed.
//!
//! Matching is three-valued. A rule *certainly* matches when the known words satisfy it; a
//! deny or ask rule *may* match when an unknown word (`$X`, `$(...)`, xargs input) or a glob
//! could make it match. A possible match applies with the milder of the rule's effect and
//! `unanalysable` (strict: deny, standard: ask), so runtime values are decided like text the
//! analyser cannot read instead of as the worst case every deny rule could describe.
//!
//! Every rule may carry `match` / `not_match` examples, checked when the policy loads
//! (schema.rs): a `match` example must certainly match the rule, a `not_match` example must
//! not match it, not even possibly. Every built-in rule has both.

pub mod credentials;
mod examples;
pub mod git;
mod globlang;
mod matcher;
pub mod report;
mod schema;
pub mod shell;

pub use matcher::CommandPattern;
pub use schema::{
    ALWAYS_SCRUB, AuditProfile, Limits, Network, SandboxProfile, SecretsInput, SecretsOutput,
    SecretsProfile, SettingKind, UndoProfile, parse_setting, parse_toml,
};

use crate::model::{Decision, Effect, RuleMatch, Tool, ToolCall};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use shell::{Analysis, ShellEnv};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A rule's path globs: validated at load, compiled into one set on first use.
#[derive(Clone, Debug)]
pub struct PathGlobs {
    /// The globs as written.
    pub texts: Vec<String>,
    set: OnceLock<GlobSet>,
}

impl PathGlobs {
    /// Validates the globs.
    pub fn new(texts: Vec<String>) -> Result<PathGlobs, (usize, globset::Error)> {
        for (i, t) in texts.iter().enumerate() {
            GlobBuilder::new(t)
                .literal_separator(true)
                .build()
                .map_err(|e| (i, e))?;
        }
        Ok(PathGlobs {
            texts,
            set: OnceLock::new(),
        })
    }

    /// Does any glob match?
    pub fn is_match(&self, p: impl AsRef<Path>) -> bool {
        self.set
            .get_or_init(|| {
                let mut b = GlobSetBuilder::new();
                for t in &self.texts {
                    if let Ok(g) = GlobBuilder::new(t).literal_separator(true).build() {
                        b.add(g);
                    }
                }
                b.build().unwrap_or_else(|_| GlobSet::empty())
            })
            .is_match(p)
    }
}

/// Built-in policies, compiled into the binary from `policies/`.
pub const BUILTINS: [(&str, &str); 3] = [
    ("strict", include_str!("../../policies/strict.toml")),
    ("standard", include_str!("../../policies/standard.toml")),
    ("permissive", include_str!("../../policies/permissive.toml")),
];

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read {}: {}", path.display(), crate::shown::os_error(source))]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The policy text is invalid; `file:line:column: message`.
    #[error("{file}:{line}:{column}: {message}")]
    Invalid {
        /// File (or `builtin:NAME`).
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong and, where it helps, what to write instead.
        message: String,
    },
    /// Neither a built-in name nor a path.
    #[error(
        "unknown policy `{0}`: use a built-in (strict, standard, permissive) or a path to a .toml file"
    )]
    UnknownName(String),
    /// `extends` forms a cycle or is too deep.
    #[error("policy {0}: `extends` chain is cyclic or deeper than 8")]
    ExtendsTooDeep(String),
}

/// A compiled rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// Unique id.
    pub id: String,
    /// Effect when it matches.
    pub effect: Effect,
    /// Shown to users.
    pub reason: String,
    /// Tools it applies to; empty = every tool.
    pub tools: Vec<Tool>,
    /// Command patterns (exec); the rule matches if any pattern matches. `None` = any command.
    pub commands: Option<Vec<CommandPattern>>,
    /// Git patterns (exec, `git = ["reset --hard"]`): matched on what git will do (git.rs).
    /// With `commands`, the rule matches if a pattern of either kind matches.
    pub git: Option<Vec<git::GitPattern>>,
    /// Path globs; the rule matches if any path matches. `None` = any path.
    pub paths: Option<PathGlobs>,
    /// Its `match` examples (checked at load), as written.
    pub examples_match: Vec<String>,
    /// Its `not_match` examples (checked at load), as written.
    pub examples_not_match: Vec<String>,
}

impl Rule {
    /// Does the rule match this simple command of an exec call? `may` = possibly (an
    /// unknown word or a glob could make it match), else certainly.
    pub fn matches_command(&self, cmd: &shell::SimpleCmd, may: bool, env: &ShellEnv) -> bool {
        let cmd_ok = match (&self.commands, &self.git) {
            (None, None) => true,
            (pats, gits) => {
                pats.iter().flatten().any(|p| p.matches(cmd, may, env))
                    || gits
                        .as_ref()
                        .is_some_and(|g| git::matches(g, &self.git_parse(cmd, env), may))
            }
        };
        let path_ok = match &self.paths {
            None => true,
            Some(set) => matcher::exec_paths(cmd, env, may)
                .iter()
                .any(|p| p.as_ref().is_none_or(|p| set.is_match(p))),
        };
        cmd_ok && path_ok
    }

    /// How git reads `cmd` (for `git` patterns).
    fn git_parse(&self, cmd: &shell::SimpleCmd, env: &ShellEnv) -> git::Parsed {
        git_parse(cmd, env)
    }

    /// Why a `git` pattern of this rule may match `cmd` although it does not certainly
    /// match: the git command line cannot be analysed (an alias, configuration, ...).
    pub fn git_unsure(&self, cmd: &shell::SimpleCmd, env: &ShellEnv) -> Option<String> {
        self.git.as_ref()?;
        match self.git_parse(cmd, env) {
            git::Parsed::Unsure(why) => Some(why),
            _ => None,
        }
    }

    /// Does the rule match a file tool's path?
    pub fn matches_path(&self, path: &Path) -> bool {
        self.commands.is_none()
            && self.git.is_none()
            && self.paths.as_ref().is_none_or(|set| set.is_match(path))
    }

    /// Does the rule apply to `tool`?
    pub fn applies_to(&self, tool: Tool) -> bool {
        self.tools.is_empty() || self.tools.contains(&tool)
    }
}

/// How git reads `cmd` (for `git` patterns): a program that is a runtime value or a glob
/// may be git.
fn git_parse(cmd: &shell::SimpleCmd, env: &ShellEnv) -> git::Parsed {
    static PROGRAMS: OnceLock<Vec<CommandPattern>> = OnceLock::new();
    let programs = PROGRAMS.get_or_init(|| {
        ["git", "git-*"]
            .iter()
            .filter_map(|p| CommandPattern::compile(&[p.to_string()]).ok())
            .collect()
    });
    git::parse(cmd, || programs.iter().any(|p| p.matches(cmd, true, env)))
}

/// Whether an exec call's argv may run a git command that throws away uncommitted work or
/// local history ([`git::DISCARDS`]), wherever the shell analysis finds it (`sh -c`, `env`,
/// `git -C dir`, the dashed program). What it may do counts: a git command line that cannot
/// be analysed (an alias, a runtime value) and `git checkout FILE.EXT` (a path unless a
/// revision of that name exists). Decides whether the run is snapshotted for undo, never
/// whether it may run.
pub fn discards_git_work(argv: &[String], env: &ShellEnv) -> bool {
    shell::analyse_argv(argv, env)
        .commands
        .iter()
        .any(|cmd| git::matches(git::discards(), &git_parse(cmd, env), true))
}

/// A loaded, validated policy.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Name (file stem or built-in name).
    pub name: String,
    /// Where it came from: `builtin:NAME` or a path.
    pub source: String,
    /// One line for `policy list`.
    pub description: String,
    /// Effect for parts of a command that cannot be analysed.
    pub unanalysable: Effect,
    /// Rules, inherited first.
    pub rules: Vec<Rule>,
    /// The sandbox applied to every run.
    pub sandbox: SandboxProfile,
    /// What happens to secrets in inputs and output.
    pub secrets: SecretsProfile,
    /// What the audit log keeps of each run.
    pub audit: AuditProfile,
    /// Whether runs are snapshotted for undo.
    pub undo: UndoProfile,
    /// File tools' settings.
    pub files: crate::model::FilesProfile,
    /// How `ask` waits for a person.
    pub approval: crate::model::ApprovalProfile,
    /// How much output a result carries (`[output]`).
    pub output: crate::model::OutputProfile,
    /// The files it was read from (canonical): the file itself and every file it extends.
    /// Empty for a built-in.
    pub loaded_from: Vec<PathBuf>,
    /// The same files as they were named (the `--policy` spelling, each `extends` joined to
    /// the directory of the file naming it): the next run follows these spellings, so every
    /// link and `..` on their way matters (`broker::next_run`).
    pub loaded_as: Vec<PathBuf>,
    /// SHA-256 (hex) of what it was loaded from: every file of its `extends` chain, in load
    /// order, with its path (built-ins by name and text). A long-lived session pins the
    /// policy it loaded and records this hash (`broker::pin`).
    pub sha256: String,
}

impl Policy {
    /// Loads a built-in by name, or a file if `spec` contains `/` or ends in `.toml`.
    pub fn load(spec: &str) -> Result<Policy, PolicyError> {
        if spec.contains('/') || spec.ends_with(".toml") {
            Policy::load_file(Path::new(spec))
        } else {
            Policy::builtin(spec)
        }
    }

    /// Loads a built-in policy. Built-ins are compiled into the binary: each is parsed once
    /// per process and cloned after that (the daemon loads one per call).
    pub fn builtin(name: &str) -> Result<Policy, PolicyError> {
        static PARSED: std::sync::Mutex<Vec<Policy>> = std::sync::Mutex::new(Vec::new());
        let (_, text) = BUILTINS
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| PolicyError::UnknownName(name.to_string()))?;
        if let Some(p) = PARSED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|p| p.name == name)
        {
            return Ok(p.clone());
        }
        let p = Policy::from_str(text, &format!("builtin:{name}"), name, None)?;
        PARSED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(p.clone());
        Ok(p)
    }

    /// Loads a policy file.
    pub fn load_file(path: &Path) -> Result<Policy, PolicyError> {
        let text = read_policy_file(path).map_err(|source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "policy".into());
        Policy::from_str(&text, &path.display().to_string(), &name, path.parent())
    }

    /// The hash [`Policy::sha256`] the policy's source has now: its files read again (as
    /// loading does, not compiled). A built-in is compiled into the binary and never changes.
    pub fn source_sha256(&self) -> Result<String, PolicyError> {
        if self.source.starts_with("builtin:") {
            return Ok(self.sha256.clone());
        }
        let path = Path::new(&self.source);
        let text = read_policy_file(path).map_err(|source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        schema::sha256_of(&text, &self.source, path.parent())
    }

    /// Parses policy text. `file` names it in errors; `dir` resolves a relative `extends`.
    pub fn from_str(
        text: &str,
        file: &str,
        default_name: &str,
        dir: Option<&Path>,
    ) -> Result<Policy, PolicyError> {
        schema::load(text, file, default_name, dir, 0)
    }

    /// Narrows the policy to the directories `roots` (absolute, canonical): what a caller
    /// (an MCP client's roots, `gateway tool --root`) allows. Narrowing never widens: a second
    /// narrowing keeps only what lies in both. Under roots, a file tool's path and a command's
    /// working directory must lie in one of them ([`Policy::evaluate`] denies the rest with the
    /// rule `client-roots`), a command writes only inside them (`broker::plan`), and the file
    /// tools read only inside them. Commands still read and run what the policy lets them
    /// outside (programs, libraries): roots are about the user's files, not the system's.
    pub fn narrow_to(&mut self, roots: Vec<PathBuf>) {
        let narrowed = match self.sandbox.roots.take() {
            None => roots,
            Some(old) => {
                let mut both: Vec<PathBuf> = roots
                    .iter()
                    .filter(|r| old.iter().any(|o| r.starts_with(o)))
                    .cloned()
                    .collect();
                both.extend(
                    old.iter()
                        .filter(|o| roots.iter().any(|r| o.starts_with(r)))
                        .cloned(),
                );
                both
            }
        };
        let mut narrowed: Vec<PathBuf> = narrowed
            .into_iter()
            .map(|r| PathBuf::from(normalize(&r.to_string_lossy())))
            .collect();
        narrowed.sort();
        narrowed.dedup();
        self.sandbox.roots = Some(narrowed);
    }

    /// Whether `p` (absolute) lies in the caller's roots (always, when there are none).
    pub fn within_roots(&self, p: &Path) -> bool {
        match &self.sandbox.roots {
            None => true,
            Some(roots) => {
                let p = PathBuf::from(normalize(&p.to_string_lossy()));
                roots.iter().any(|r| p.starts_with(r))
            }
        }
    }

    /// Decides a call. `env` supplies `~`, `$HOME` and `$PWD` for the shell analysis.
    pub fn evaluate(&self, call: &ToolCall, env: &ShellEnv) -> Decision {
        let mut rules_out: Vec<RuleMatch> = Vec::new();
        let mut effect = Effect::Allow;
        let mut commands = Vec::new();
        let mut unanalysable = Vec::new();

        if call.tool == Tool::Exec {
            let analysis: Analysis = shell::analyse_argv(&call.argv, env);
            for cmd in &analysis.commands {
                let subject = cmd.display();
                commands.push(subject.clone());
                let e = self.effect_for(
                    call.tool,
                    &subject,
                    &mut rules_out,
                    |rule, may| rule.matches_command(cmd, may, env),
                    |rule| rule.git_unsure(cmd, env),
                );
                effect = effect.max(e);
            }
            for note in analysis.unanalysable {
                rules_out.push(RuleMatch {
                    id: "unanalysable".into(),
                    effect: self.unanalysable,
                    reason: format!(
                        "cannot analyse: {note}; the policy's `unanalysable = \"{}\"` applies",
                        self.unanalysable
                    ),
                    subject: call.argv.join(" "),
                });
                effect = effect.max(self.unanalysable);
                unanalysable.push(note);
            }
            if analysis.commands.is_empty() && unanalysable.is_empty() {
                // An empty script runs nothing; nothing to deny.
                effect = Effect::Allow;
            }
        } else if call.tool == Tool::Http {
            // The subject is the request (`METHOD URL`, redacted by the caller). A rule
            // decides it when it applies to `http` and names no command, git pattern or
            // path: where it may connect is the network's part (`[sandbox] network`),
            // decided by the broker after this.
            let subject = call.argv.join(" ");
            effect = self.effect_for(
                call.tool,
                &subject,
                &mut rules_out,
                |rule, _| rule.commands.is_none() && rule.git.is_none() && rule.paths.is_none(),
                |_| None,
            );
        } else {
            for path in &call.paths {
                let subject = path.display().to_string();
                let e = self.effect_for(
                    call.tool,
                    &subject,
                    &mut rules_out,
                    |rule, _| rule.matches_path(path),
                    |_| None,
                );
                effect = effect.max(e);
            }
            if call.paths.is_empty() {
                effect = Effect::Deny;
                rules_out.push(RuleMatch {
                    id: "default-deny".into(),
                    effect: Effect::Deny,
                    reason: "a file tool call without a path".into(),
                    subject: String::new(),
                });
            }
        }
        // The caller's roots narrow every decision: what lies outside them is denied.
        if let Some(roots) = &self.sandbox.roots {
            let subjects: Vec<&Path> = if call.tool == Tool::Http {
                // A request reaches no file: the roots do not narrow it.
                vec![]
            } else if call.tool == Tool::Exec {
                vec![call.cwd.as_path()]
            } else {
                call.paths.iter().map(PathBuf::as_path).collect()
            };
            for p in subjects.into_iter().filter(|p| !self.within_roots(p)) {
                let list: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
                rules_out.push(RuleMatch {
                    id: "client-roots".into(),
                    effect: Effect::Deny,
                    reason: format!(
                        "{} lies outside the roots the client allowed ({}); roots narrow the policy, never widen it",
                        p.display(),
                        if list.is_empty() { "none".into() } else { list.join(", ") }
                    ),
                    subject: p.display().to_string(),
                });
                effect = Effect::Deny;
            }
        }
        Decision {
            effect,
            rules: rules_out,
            commands,
            unanalysable,
        }
    }

    /// The effect for one subject; pushes every matching rule (or the default-deny fallback).
    fn effect_for(
        &self,
        tool: Tool,
        subject: &str,
        out: &mut Vec<RuleMatch>,
        matches: impl Fn(&Rule, bool) -> bool,
        unsure: impl Fn(&Rule) -> Option<String>,
    ) -> Effect {
        let mut best: Option<Effect> = None;
        for rule in &self.rules {
            if !rule.applies_to(tool) {
                continue;
            }
            // A rule that certainly matches (on what the analysis knows) applies with its
            // effect. A deny or ask rule that only *may* match (an unknown word or a glob
            // could make it match) applies with the milder of its effect and the policy's
            // `unanalysable`: "cannot tell" is decided like unanalysable text, never as a
            // certain match (`$echo x` asks under standard, it is not "formats disks").
            let effect = if matches(rule, false) {
                Some((rule.effect, rule.reason.clone()))
            } else if rule.effect != Effect::Allow && matches(rule, true) {
                let e = rule.effect.min(self.unanalysable);
                let why = unsure(rule).map_or_else(
                    || {
                        "part of the command depends on runtime values or a file-name glob"
                            .to_string()
                    },
                    |w| format!("cannot analyse the git command line: {w}"),
                );
                Some((
                    e,
                    format!(
                        "may match: {} ({why}, so the policy's `unanalysable = \"{}\"` caps this rule at {e})",
                        rule.reason, self.unanalysable
                    ),
                ))
            } else {
                None
            };
            if let Some((e, reason)) = effect {
                out.push(RuleMatch {
                    id: rule.id.clone(),
                    effect: e,
                    reason,
                    subject: subject.to_string(),
                });
                best = Some(best.map_or(e, |b| b.max(e)));
            }
        }
        match best {
            Some(e) => e,
            None => {
                out.push(RuleMatch {
                    id: "default-deny".into(),
                    effect: Effect::Deny,
                    reason: format!("no rule allows this {tool} call (default deny)"),
                    subject: subject.to_string(),
                });
                Effect::Deny
            }
        }
    }
}

/// Fuzz entry (fuzz/fuzz_targets/policy_parse.rs): any bytes as policy text; never panics.
pub fn fuzz_policy(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(p) = Policy::from_str(text, "fuzz.toml", "fuzz", None)
    {
        // A policy that parsed must also evaluate without panicking.
        let call = ToolCall {
            tool: Tool::Exec,
            argv: vec!["sh".into(), "-c".into(), "ls; rm -rf ~/x".into()],
            paths: vec![],
            cwd: "/w".into(),
        };
        let _ = p.evaluate(&call, &ShellEnv::default());
    }
}

/// Fuzz entry (fuzz/fuzz_targets/shell_analyse.rs): any bytes as `sh -c` text, analysed and
/// evaluated against the strict policy. Never panics; a script that contains a literal
/// `rm -rf /` simple command is never allowed by strict.
pub fn fuzz_shell(data: &[u8]) {
    let Ok(script) = std::str::from_utf8(data) else {
        return;
    };
    let env = ShellEnv {
        home: "/home/u".into(),
        cwd: "/w".into(),
    };
    static STRICT: OnceLock<Option<Policy>> = OnceLock::new();
    if let Some(strict) = STRICT.get_or_init(|| Policy::builtin("strict").ok()) {
        let call = ToolCall {
            tool: Tool::Exec,
            argv: vec!["sh".into(), "-c".into(), script.into()],
            paths: vec![],
            cwd: "/w".into(),
        };
        let d = strict.evaluate(&call, &env);
        if d.commands.iter().any(|c| c == "rm -rf /") {
            assert_eq!(
                d.effect,
                Effect::Deny,
                "strict allowed rm -rf / in {script:?}"
            );
        }
    }
    fuzz_globs_in_command_position(script, &env);
}

/// The glob-in-command-position invariants, checked on every simple command of `script`:
/// `[`, `[[` and `]` are never globs (POSIX: no matching `]`); a glob program may match a
/// program pattern exactly when globset (an independent implementation) says the glob
/// matches that program name, so it never "matches every program"; and it certainly matches
/// only when it can expand to that one name.
fn fuzz_globs_in_command_position(script: &str, env: &ShellEnv) {
    const PROBES: [&str; 6] = ["rm", "sudo", "mkfs.ext4", "dd", "git", "zz-probe"];
    static PATTERNS: OnceLock<Vec<CommandPattern>> = OnceLock::new();
    let pats = PATTERNS.get_or_init(|| {
        PROBES
            .iter()
            .filter_map(|p| CommandPattern::compile(&[p.to_string()]).ok())
            .collect()
    });
    for cmd in shell::analyse_script(script, env).commands {
        for a in &cmd.argv {
            if let shell::Arg::Glob(t) = a {
                assert!(
                    !matches!(t.as_str(), "[" | "[[" | "]" | "]]"),
                    "{t:?} is no glob"
                );
            }
        }
        let Some(shell::Arg::Glob(g)) = cmd.argv.first() else {
            continue;
        };
        let base = g.rsplit('/').next().unwrap_or(g);
        // Skip syntax where globset and POSIX differ: `{a,b}`, `**`, named classes, `[!]`.
        if ["{", "}", "**", "[:", "[=", "[.", "[!]", "[^]"]
            .iter()
            .any(|x| base.contains(x))
        {
            continue;
        }
        let Ok(oracle) = GlobBuilder::new(base)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map(|g| g.compile_matcher())
        else {
            continue;
        };
        for (probe, pat) in PROBES.iter().zip(pats) {
            let may = pat.matches(&cmd, true, env);
            assert_eq!(
                may,
                oracle.is_match(probe),
                "glob program {g:?} vs {probe:?} in {script:?}"
            );
            if pat.matches(&cmd, false, env) {
                assert!(may, "certain but not possible: {g:?} vs {probe:?}");
            }
        }
    }
}

/// Matches a name against a pattern where `*` matches any run of characters and `?` one
/// character: env patterns, and the last component of deny/protected paths. Written by hand
/// because compiling globset regexes for these on every run costs ~0.3 ms, more than the rest
/// of the policy work together.
pub fn wildcard(pattern: &str, name: &str) -> bool {
    // Over bytes, without allocating (this runs for every environment variable against every
    // pattern): `?` matches one byte, which is one character for the ASCII names it is used on.
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// Matches an environment variable name against a pattern (`*` = any run of characters).
pub fn env_match(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == name;
    }
    wildcard(pattern, name)
}

/// Largest policy file read (bytes).
pub const MAX_POLICY_BYTES: u64 = 1 << 20;

/// Reads a policy file: a regular file of at most [`MAX_POLICY_BYTES`] (not a device or a
/// pipe that never ends). Opened without blocking: a FIFO nobody writes to is refused at
/// once, never waited on (a call must not outlive its caller in `open`).
pub(crate) fn read_policy_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if m.len() > MAX_POLICY_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_POLICY_BYTES} bytes"),
        ));
    }
    let mut text = String::new();
    f.take(MAX_POLICY_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

/// Lexically normalises an absolute path: collapses `//`, `.` and `..`, drops a trailing `/`.
pub fn normalize(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

#[cfg(test)]
mod tests;
