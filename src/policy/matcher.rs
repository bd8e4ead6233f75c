//! Command patterns matched against analysed simple commands.
//!
//! A pattern is `[program, args...]`. The program matches the basename of argv[0] (a glob), or
//! the normalised full path if the pattern contains `/`. Pattern arguments are classified:
//! - `-xyz` (short flags): every letter must be set somewhere in the command's short-flag
//!   clusters, in any order and grouping (`-rf`, `-fr`, `-r -f` are the same). `-R`,
//!   `--recursive` count as `r`; `--force` as `f`.
//! - `--name*` (long flags, a glob): some long option of the command must match.
//! - anything else (positional, a glob): the pattern's positionals must match the command's
//!   non-option arguments as an ordered subsequence. Positionals that start with `/` or `~`
//!   are paths: both sides are normalised (`~` expanded, relative arguments resolved against
//!   the working directory, `//`, `.`, `..` and trailing `/` collapsed) and `*` does not cross
//!   `/`.
//!
//! Unknown words (runtime values) and shell globs are handled by the `may` flag: when true
//! ("may it match?") an unknown word may be any flag or any positional, and a shell glob may be
//! any name it could expand to; when false ("does it certainly match?") they never satisfy a
//! requirement, except a glob that can expand to one name only (`/bin/r[m]`). A glob in
//! command position may match a program pattern only if some name it expands to matches it
//! (globlang.rs), never every pattern. The evaluator (mod.rs) asks both questions.

use super::globlang::GlobLang;
use super::normalize;
use super::shell::{Arg, ShellEnv, SimpleCmd};
use globset::{Glob, GlobBuilder, GlobMatcher};
use std::sync::OnceLock;

/// One pattern token: a literal compared as a string, or a glob validated at load and compiled
/// to a regex only when first used (compiling every glob of a policy up front costs about a
/// millisecond, which is most of a spawn).
#[derive(Clone, Debug)]
enum Pat {
    Lit(String),
    Glob {
        text: String,
        literal_separator: bool,
        compiled: OnceLock<Option<GlobMatcher>>,
    },
}

fn has_meta(p: &str) -> bool {
    p.contains(['*', '?', '[', '{', '\\'])
}

impl Pat {
    fn new(p: &str, literal_separator: bool) -> Result<Pat, globset::Error> {
        if !has_meta(p) {
            return Ok(Pat::Lit(p.to_string()));
        }
        GlobBuilder::new(p)
            .literal_separator(literal_separator)
            .backslash_escape(true)
            .build()?;
        Ok(Pat::Glob {
            text: p.to_string(),
            literal_separator,
            compiled: OnceLock::new(),
        })
    }

    /// The token as written.
    fn text(&self) -> &str {
        match self {
            Pat::Lit(t) | Pat::Glob { text: t, .. } => t,
        }
    }

    fn is_match(&self, s: &str) -> bool {
        match self {
            Pat::Lit(l) => l == s,
            Pat::Glob {
                text,
                literal_separator,
                compiled,
            } => {
                // Most globs have a literal prefix (`mkfs*`, `--force*`): reject without
                // compiling a regex when it does not match.
                let prefix = &text[..text.find(['*', '?', '[', '{', '\\']).unwrap_or(text.len())];
                s.starts_with(prefix)
                    && compiled
                        .get_or_init(|| glob(text, *literal_separator).ok())
                        .as_ref()
                        .is_some_and(|m| m.is_match(s))
            }
        }
    }
}

/// A compiled command pattern.
#[derive(Clone, Debug)]
pub struct CommandPattern {
    /// The pattern as written, for display.
    pub text: String,
    program: Pat,
    program_is_path: bool,
    program_any: bool,
    short: Vec<char>,
    long: Vec<Pat>,
    positional: Vec<Positional>,
}

#[derive(Clone, Debug)]
struct Positional {
    raw: String,
    is_path: bool,
    any: bool,
    /// For patterns that do not depend on `~`: the compiled token (path patterns normalised).
    fixed: Option<Pat>,
}

fn alias_short(c: char) -> char {
    if c == 'R' { 'r' } else { c }
}

fn alias_long(l: &str) -> Option<char> {
    let name = l.split('=').next().unwrap_or(l);
    match name {
        "--recursive" => Some('r'),
        "--force" => Some('f'),
        _ => None,
    }
}

fn glob(p: &str, literal_separator: bool) -> Result<GlobMatcher, globset::Error> {
    Ok(GlobBuilder::new(p)
        .literal_separator(literal_separator)
        .backslash_escape(true)
        .build()?
        .compile_matcher())
}

impl CommandPattern {
    /// Compiles `[program, args...]`; errors name the bad element.
    pub fn compile(parts: &[String]) -> Result<CommandPattern, String> {
        let Some(prog) = parts.first() else {
            return Err("a command pattern needs at least the program".into());
        };
        if prog.is_empty() {
            return Err("the program of a command pattern is empty".into());
        }
        let program_is_path = prog.contains('/');
        let program = Pat::new(prog, program_is_path)
            .map_err(|e| format!("bad glob `{prog}` in command pattern: {e}"))?;
        let mut short = Vec::new();
        let mut long = Vec::new();
        let mut positional = Vec::new();
        for p in &parts[1..] {
            if p.is_empty() {
                return Err("empty argument in command pattern".into());
            }
            if p.strip_prefix("--").is_some_and(|r| !r.is_empty()) {
                if let Some(c) = alias_long(p) {
                    short.push(c);
                } else {
                    long.push(Pat::new(p, false).map_err(|e| format!("bad glob `{p}`: {e}"))?);
                }
            } else if let Some(rest) = p.strip_prefix('-').filter(|r| !r.is_empty()) {
                if !rest.chars().all(|c| c.is_ascii_alphanumeric()) {
                    return Err(format!(
                        "`{p}`: short flags are letters or digits (`-rf`); use `--name*` for long options"
                    ));
                }
                short.extend(rest.chars().map(alias_short));
            } else {
                let is_path = p.starts_with('/') || p.starts_with('~');
                let checked = Pat::new(p, is_path).map_err(|e| format!("bad glob `{p}`: {e}"))?;
                let fixed = if p.starts_with('~') {
                    None
                } else if is_path {
                    Some(
                        Pat::new(&normalize(p), true)
                            .map_err(|e| format!("bad glob `{p}`: {e}"))?,
                    )
                } else {
                    Some(checked)
                };
                positional.push(Positional {
                    raw: p.clone(),
                    is_path,
                    any: p == "*" || p == "**",
                    fixed,
                });
            }
        }
        Ok(CommandPattern {
            text: parts.join(" "),
            program,
            program_is_path,
            program_any: prog == "*" || prog == "**",
            short,
            long,
            positional,
        })
    }

    /// Does `cmd` match? `may` = treat unknown words as possibly anything (deny/ask rules).
    pub fn matches(&self, cmd: &SimpleCmd, may: bool, env: &ShellEnv) -> bool {
        let Some(first) = cmd.argv.first() else {
            return false;
        };
        let prog_ok = match first {
            _ if self.program_any => true,
            Arg::Lit(p) => {
                if self.program_is_path {
                    p.contains('/') && self.program.is_match(&normalize(&abs(p, env)))
                } else {
                    self.program.is_match(p.rsplit('/').next().unwrap_or(p))
                }
            }
            Arg::Glob(g) => self.glob_program(g, may, env),
            Arg::Unknown(_) => may,
        };
        if !prog_ok {
            return false;
        }

        let mut shorts: Vec<char> = Vec::new();
        let mut longs: Vec<&str> = Vec::new();
        let mut positionals: Vec<&Arg> = Vec::new();
        let mut has_unknown = false;
        let mut end_of_opts = false;
        for a in &cmd.argv[1..] {
            match a {
                Arg::Unknown(_) => {
                    has_unknown = true;
                    positionals.push(a);
                }
                Arg::Lit(t) | Arg::Glob(t) => {
                    if end_of_opts || t == "-" || !t.starts_with('-') {
                        positionals.push(a);
                    } else if t == "--" {
                        end_of_opts = true;
                    } else if t.starts_with("--") {
                        if let Some(c) = alias_long(t) {
                            shorts.push(c);
                        }
                        longs.push(t);
                    } else {
                        shorts.extend(t[1..].chars().map(alias_short));
                    }
                }
            }
        }
        let wild = may && has_unknown;
        if !self.short.iter().all(|c| wild || shorts.contains(c)) {
            return false;
        }
        if !self
            .long
            .iter()
            .all(|g| wild || longs.iter().any(|l| g.is_match(l)))
        {
            return false;
        }
        // Ordered subsequence match of positionals.
        let mut j = 0;
        for p in &self.positional {
            let mut found = false;
            while j < positionals.len() {
                let a = positionals[j];
                j += 1;
                if self.positional_match(p, a, may, env) {
                    found = true;
                    break;
                }
            }
            if !found {
                return false;
            }
        }
        true
    }

    /// A glob in command position runs whatever it expands to: it certainly matches when it
    /// can expand to one name only (`/bin/r[m]`) and that name matches; it may match (deny
    /// and ask rules) when some name it can expand to matches the pattern. Never "matches
    /// every program": `./r?` may be `rm`, never `sudo`.
    fn glob_program(&self, g: &str, may: bool, env: &ShellEnv) -> bool {
        let lang = if self.program_is_path {
            if !g.contains('/') {
                // Looked up in PATH, like a literal name without `/`.
                return false;
            }
            GlobLang::shell(&normalize(&abs_glob(g, env)))
        } else {
            GlobLang::shell(g).basename()
        };
        if let Some(name) = lang.single_name() {
            return self.program.is_match(&name);
        }
        may && GlobLang::pattern(self.program.text()).is_none_or(|p| lang.intersects(&p))
    }

    fn positional_match(&self, p: &Positional, a: &Arg, may: bool, env: &ShellEnv) -> bool {
        if p.any {
            return true;
        }
        let pat = if p.is_path {
            normalize(&expand_home(&p.raw, env))
        } else {
            p.raw.clone()
        };
        let home_pat;
        let m = match &p.fixed {
            Some(f) => f,
            None => match Pat::new(&pat, true) {
                Ok(x) => {
                    home_pat = x;
                    &home_pat
                }
                Err(_) => return false,
            },
        };
        match a {
            Arg::Unknown(_) => may,
            Arg::Lit(t) => {
                let t = if p.is_path {
                    normalize(&abs(t, env))
                } else {
                    t.clone()
                };
                m.is_match(&t)
            }
            Arg::Glob(t) => {
                let t = if p.is_path {
                    normalize(&abs(t, env))
                } else {
                    t.clone()
                };
                if m.is_match(&t) {
                    return true;
                }
                // May the shell glob expand to something the pattern names?
                may && !has_meta(&pat)
                    && Glob::new(&t)
                        .map(|g| g.compile_matcher().is_match(&pat))
                        .unwrap_or(true)
            }
        }
    }
}

fn expand_home(p: &str, env: &ShellEnv) -> String {
    if p == "~" {
        env.home.clone()
    } else if let Some(rest) = p.strip_prefix("~/") {
        format!("{}/{rest}", env.home)
    } else {
        p.to_string()
    }
}

/// [`abs`] for shell glob text: the working directory is escaped so that its own `*`, `?`
/// or `[` are not read as wildcards.
fn abs_glob(g: &str, env: &ShellEnv) -> String {
    if g.starts_with('/') || g.starts_with('~') {
        return abs(g, env);
    }
    let mut cwd = String::new();
    for c in env.cwd.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            cwd.push('\\');
        }
        cwd.push(c);
    }
    format!("{cwd}/{g}")
}

fn abs(p: &str, env: &ShellEnv) -> String {
    let p = expand_home(p, env);
    if p.starts_with('/') {
        p
    } else {
        format!("{}/{p}", env.cwd)
    }
}

/// The paths an exec command names (program and arguments that look like paths), normalised.
/// `None` stands for an unknown word (only when `may`).
pub fn exec_paths(cmd: &SimpleCmd, env: &ShellEnv, may: bool) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for (i, a) in cmd.argv.iter().enumerate() {
        match a {
            Arg::Lit(t) | Arg::Glob(t) => {
                if i > 0 && t.starts_with('-') {
                    if let Some((_, v)) = t.split_once('=')
                        && (v.starts_with('/') || v.starts_with('~'))
                    {
                        out.push(Some(normalize(&abs(v, env))));
                    }
                    continue;
                }
                if t.starts_with('/') || t.starts_with('~') || t.contains('/') || i > 0 {
                    out.push(Some(normalize(&abs(t, env))));
                }
            }
            Arg::Unknown(_) => {
                if may {
                    out.push(None);
                }
            }
        }
    }
    out
}
