//! Turns an argv, or a shell string, into the simple commands it would run.
//!
//! Shell text is parsed by `yash-syntax` (a POSIX shell parser, from the yash shell), and every
//! simple command of a list, pipeline, subshell, group, loop, `if`, `case`, function body,
//! `$(...)`, backquotes and here-documents is collected. Wrappers that run another command
//! (`env`, `sudo`, `nice`, `timeout`, `xargs`, `find -exec`, `sh -c`, `eval`, ...) are unwrapped so
//! that the inner command is checked too (the wrapper itself is checked as well).
//!
//! Words the analyser cannot resolve statically (a `$(...)` result, `$VAR` other than `HOME` and
//! `PWD`) become [`Arg::Unknown`]; the matcher treats them as "could be anything", so deny and ask
//! rules may match them and allow rules do not. Constructs that cannot be analysed at all (syntax
//! errors, a shell reading commands from stdin, `eval` of an unknown string, nesting deeper than
//! [`MAX_DEPTH`]) are reported in [`Analysis::unanalysable`].
//!
//! Over 1,000 lines: one analyser walking yash-syntax's whole AST (every compound command, word
//! and expansion); the unit tests are most of the rest.

use super::globlang::GlobLang;
use std::task::{Context, Poll, Waker};
use yash_syntax::parser::Parser;
use yash_syntax::parser::lex::Lexer;
use yash_syntax::syntax::{
    BackquoteUnit, Command, CompoundCommand, List, MaybeLiteral, Modifier, RedirBody,
    SimpleCommand, Text, TextUnit, Word, WordUnit,
};

/// How deep `sh -c "sh -c '...'"`, `$(...)` and wrappers may nest before we give up.
pub const MAX_DEPTH: usize = 16;

/// Largest shell string we parse (bytes); longer strings are unanalysable.
pub const MAX_SCRIPT_LEN: usize = 256 * 1024;

/// One argument of a simple command, as far as static analysis can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// Known exactly.
    Lit(String),
    /// Known text with unquoted glob characters; the shell expands it to matching names.
    Glob(String),
    /// Depends on runtime values; the text is for display only.
    Unknown(String),
}

impl Arg {
    /// Display form.
    pub fn text(&self) -> &str {
        match self {
            Arg::Lit(s) | Arg::Glob(s) | Arg::Unknown(s) => s,
        }
    }
}

/// One simple command found by the analysis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimpleCmd {
    /// Program first.
    pub argv: Vec<Arg>,
    /// Environment variables the script sets, anywhere (assignment prefixes, `env NAME=...`,
    /// `export`, plain assignments): flow-insensitive, so every command of a script carries
    /// every name its script assigns. Sorted, without duplicates.
    pub env: Vec<String>,
}

impl SimpleCmd {
    /// Shell-like display, for decisions and errors.
    pub fn display(&self) -> String {
        self.argv
            .iter()
            .map(|a| match a {
                Arg::Lit(s) if needs_quotes(s) => format!("'{}'", s.replace('\'', "'\\''")),
                other => other.text().to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn needs_quotes(s: &str) -> bool {
    s.is_empty()
        || s.chars()
            .any(|c| !(c.is_ascii_alphanumeric() || "-_./=:,+@%~".contains(c)))
}

/// The result of analysing an argv or a script.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Analysis {
    /// Every simple command, outermost first.
    pub commands: Vec<SimpleCmd>,
    /// What could not be analysed, and why.
    pub unanalysable: Vec<String>,
    /// The variable names the script assigns (copied into each command's `env` when the
    /// analysis ends).
    pub assigned: Vec<String>,
}

impl Analysis {
    /// Gives every command the names the whole script assigns.
    fn finish(mut self) -> Analysis {
        self.assigned.sort();
        self.assigned.dedup();
        if !self.assigned.is_empty() {
            for c in &mut self.commands {
                c.env.clone_from(&self.assigned);
            }
        }
        self
    }
}

/// Values the analyser may substitute for `~`, `$HOME` and `$PWD`.
#[derive(Clone, Debug, Default)]
pub struct ShellEnv {
    /// The user's home directory.
    pub home: String,
    /// The working directory the command starts in.
    pub cwd: String,
}

/// Analyses a program's argv (as passed to execve: no shell expansion at the top level).
pub fn analyse_argv(argv: &[String], env: &ShellEnv) -> Analysis {
    let mut a = Analysis::default();
    let args: Vec<Arg> = argv.iter().map(|s| Arg::Lit(s.clone())).collect();
    if args.is_empty() {
        a.unanalysable.push("empty command".into());
        return a;
    }
    command(&args, env, &mut a, 0);
    a.finish()
}

/// Analyses shell text, as `sh -c TEXT` would run it.
pub fn analyse_script(script: &str, env: &ShellEnv) -> Analysis {
    let mut a = Analysis::default();
    script_into(script, env, &mut a, 0);
    a.finish()
}

fn script_into(script: &str, env: &ShellEnv, a: &mut Analysis, depth: usize) {
    if !ON_BIG_STACK.with(|b| b.get()) {
        quiet_parser_panics();
        // The AST holds `Rc`s, so the whole walk of this script runs on the big-stack thread
        // and only the (Send) result comes back.
        let res = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name(PARSER_THREAD.into())
                .stack_size(PARSER_STACK)
                .spawn_scoped(s, || {
                    ON_BIG_STACK.with(|b| b.set(true));
                    let mut sub = Analysis::default();
                    script_into(script, env, &mut sub, depth);
                    sub
                })
                .map(|h| h.join())
        });
        match res {
            Ok(Ok(sub)) => {
                a.commands.extend(sub.commands);
                a.unanalysable.extend(sub.unanalysable);
                a.assigned.extend(sub.assigned);
            }
            Ok(Err(_)) => a
                .unanalysable
                .push("the shell parser failed on this text".into()),
            Err(e) => a
                .unanalysable
                .push(format!("cannot start the shell parser thread: {e}")),
        }
        return;
    }
    if depth > MAX_DEPTH {
        a.unanalysable
            .push(format!("nesting deeper than {MAX_DEPTH} levels"));
        return;
    }
    if script.len() > MAX_SCRIPT_LEN {
        a.unanalysable
            .push(format!("shell text longer than {MAX_SCRIPT_LEN} bytes"));
        return;
    }
    if let Some(d) = too_deep(script) {
        a.unanalysable
            .push(format!("shell text nests brackets {d} levels deep"));
        return;
    }
    match parse(script) {
        Ok(lists) => {
            for list in &lists {
                walk_list(list, env, a, depth);
            }
        }
        Err(e) => a
            .unanalysable
            .push(format!("shell syntax the analyser cannot parse: {e}")),
    }
}

/// Name of the thread the parser runs on.
const PARSER_THREAD: &str = "shell-parse";

/// A panic in the third-party parser is caught (the script becomes unanalysable) and is not
/// a crash of the gateway: keep the default panic message for every other thread only.
fn quiet_parser_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() != Some(PARSER_THREAD) {
                previous(info);
            }
        }));
    });
}

thread_local! {
    static ON_BIG_STACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Stack for the parser thread: enough for [`MAX_NESTING`] levels with a wide margin.
const PARSER_STACK: usize = 256 << 20;

/// Parses a whole script into its command lines. The parser is `async` because it can read
/// from interactive input; on an in-memory string it never waits, so one poll with a no-op
/// waker completes each step. yash's parser recurses to find the end of each `$(...)` (up to
/// ~1 MiB of stack per level in debug builds): callers run it on the big-stack thread
/// (`script_into`).
fn parse(script: &str) -> Result<Vec<List>, String> {
    // yash-syntax 0.21 panics when the input ends right after `${` (it unwraps the next
    // character); a trailing newline, which cannot change what `sh -c` runs, avoids that.
    // Other parser panics are caught by the thread that runs the parser.
    let padded;
    let script = if script.ends_with('\n') {
        script
    } else {
        padded = format!("{script}\n");
        &padded
    };
    let mut lexer = Lexer::with_code(script);
    let mut parser = Parser::new(&mut lexer);
    let mut out = Vec::new();
    loop {
        // Boxed: the parser's futures are large, and nested scripts would otherwise stack them.
        let fut = Box::pin(parser.command_line());
        let mut fut = fut;
        let mut cx = Context::from_waker(Waker::noop());
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(Some(list))) => out.push(list),
            Poll::Ready(Ok(None)) => return Ok(out),
            Poll::Ready(Err(e)) => return Err(e.cause.to_string()),
            Poll::Pending => return Err("parser blocked on in-memory input".into()),
        }
        if out.len() > 100_000 {
            return Err("too many command lines".into());
        }
    }
}

/// Bracket nesting bound: the parser is recursive, so pathological nesting is refused before
/// parsing (counted over the raw text, which over-approximates and so errs on the safe side).
const MAX_NESTING: usize = 32;

fn too_deep(script: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut max = 0usize;
    for b in script.bytes() {
        match b {
            b'(' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    (max > MAX_NESTING).then_some(max)
}

fn walk_list(list: &List, env: &ShellEnv, a: &mut Analysis, depth: usize) {
    for item in &list.0 {
        let pipelines =
            std::iter::once(&item.and_or.first).chain(item.and_or.rest.iter().map(|(_, p)| p));
        for p in pipelines {
            for cmd in &p.commands {
                walk_command(cmd, env, a, depth);
            }
        }
    }
}

fn walk_command(cmd: &Command, env: &ShellEnv, a: &mut Analysis, depth: usize) {
    if depth > MAX_DEPTH {
        a.unanalysable
            .push(format!("nesting deeper than {MAX_DEPTH} levels"));
        return;
    }
    match cmd {
        Command::Simple(sc) => walk_simple(sc, env, a, depth),
        Command::Compound(fc) => {
            walk_compound(&fc.command, env, a, depth);
            for r in &fc.redirs {
                walk_redir_body(&r.body, env, a, depth);
            }
        }
        Command::Function(f) => {
            walk_compound(&f.body.command, env, a, depth + 1);
            for r in &f.body.redirs {
                walk_redir_body(&r.body, env, a, depth);
            }
        }
    }
}

fn walk_compound(c: &CompoundCommand, env: &ShellEnv, a: &mut Analysis, depth: usize) {
    let d = depth + 1;
    match c {
        CompoundCommand::Grouping(l) => walk_list(l, env, a, d),
        CompoundCommand::Subshell { body, .. } => walk_list(body, env, a, d),
        CompoundCommand::For { values, body, .. } => {
            for w in values.iter().flatten() {
                word(w, env, a, d);
            }
            walk_list(body, env, a, d);
        }
        CompoundCommand::While { condition, body } | CompoundCommand::Until { condition, body } => {
            walk_list(condition, env, a, d);
            walk_list(body, env, a, d);
        }
        CompoundCommand::If {
            condition,
            body,
            elifs,
            r#else,
        } => {
            walk_list(condition, env, a, d);
            walk_list(body, env, a, d);
            for e in elifs {
                walk_list(&e.condition, env, a, d);
                walk_list(&e.body, env, a, d);
            }
            if let Some(e) = r#else {
                walk_list(e, env, a, d);
            }
        }
        CompoundCommand::Case { subject, items } => {
            word(subject, env, a, d);
            for i in items {
                for p in &i.patterns {
                    word(p, env, a, d);
                }
                walk_list(&i.body, env, a, d);
            }
        }
    }
}

fn walk_redir_body(b: &RedirBody, env: &ShellEnv, a: &mut Analysis, depth: usize) {
    match b {
        RedirBody::Normal { operand, .. } => {
            word(operand, env, a, depth);
        }
        RedirBody::HereDoc(h) => {
            if let Some(t) = h.content.get() {
                text(&t.0, env, a, depth, &mut String::new());
            }
        }
    }
}

fn walk_simple(sc: &SimpleCommand, env: &ShellEnv, a: &mut Analysis, depth: usize) {
    for asg in &sc.assigns {
        a.assigned.push(asg.name.clone());
        match &asg.value {
            yash_syntax::syntax::Value::Scalar(w) => {
                word(w, env, a, depth);
            }
            yash_syntax::syntax::Value::Array(ws) => {
                for w in ws {
                    word(w, env, a, depth);
                }
            }
        }
    }
    for r in sc.redirs.iter() {
        walk_redir_body(&r.body, env, a, depth);
    }
    let args: Vec<Arg> = sc
        .words
        .iter()
        .flat_map(|(w, _)| fields(w, env, a, depth))
        .collect();
    if !args.is_empty() {
        command(&args, env, a, depth);
    }
}

/// One character of a word and whether the shell sees it unquoted (so it may be a glob or
/// brace-expansion character).
type Ch = (char, bool);

/// Expands a word as far as it is static, analysing any command substitution inside.
///
/// A word is a glob only if its unquoted characters form a pattern by the POSIX rules
/// (2.13): `*`, `?`, or a `[` with a matching `]` (so `[`, `[[` and `]` are plain words). The
/// glob text keeps quoted and backslashed characters escaped (`'*'x*` becomes `\\*x*`), so
/// that matching sees only the wildcards the shell would expand.
fn word(w: &Word, env: &ShellEnv, a: &mut Analysis, depth: usize) -> Arg {
    let (chars, unknown) = word_chars(w, env, a, depth);
    arg_of(&chars, unknown)
}

/// A command word as the fields it becomes: bash, zsh and ksh (and `sh` where it is one of
/// them) brace-expand `{rm,-rf,/}` into `rm -rf /` before anything else; POSIX shells keep
/// the word. Both cannot be known from here, so the expanded fields are analysed (the words
/// rules name appear only there).
fn fields(w: &Word, env: &ShellEnv, a: &mut Analysis, depth: usize) -> Vec<Arg> {
    let (chars, unknown) = word_chars(w, env, a, depth);
    match brace_expand(&chars) {
        Some(words) => words.iter().map(|c| arg_of(c, unknown)).collect(),
        None => vec![Arg::Unknown(chars.iter().map(|c| c.0).collect())],
    }
}

fn arg_of(chars: &[Ch], unknown: bool) -> Arg {
    let s: String = chars.iter().map(|c| c.0).collect();
    if unknown {
        return Arg::Unknown(s);
    }
    let mut g = String::new();
    for &(c, unquoted) in chars {
        if !unquoted && matches!(c, '*' | '?' | '[' | ']' | '\\') {
            g.push('\\');
        }
        g.push(c);
    }
    if GlobLang::shell(&g).has_wildcards() {
        Arg::Glob(g)
    } else {
        Arg::Lit(s)
    }
}

fn word_chars(w: &Word, env: &ShellEnv, a: &mut Analysis, depth: usize) -> (Vec<Ch>, bool) {
    let mut out: Vec<Ch> = Vec::new();
    let mut unknown = false;
    for u in &w.units {
        let mut part = String::new();
        match u {
            WordUnit::Unquoted(TextUnit::Literal(c)) => {
                out.push((*c, true));
                continue;
            }
            WordUnit::Unquoted(tu) => {
                unknown |= text(std::slice::from_ref(tu), env, a, depth, &mut part)
            }
            WordUnit::SingleQuote(q) => part.push_str(q),
            WordUnit::DoubleQuote(t) => unknown |= text(&t.0, env, a, depth, &mut part),
            WordUnit::DollarSingleQuote(e) => {
                if e.extend_literal(&mut part).is_err() {
                    part = "$'…'".into();
                    unknown = true;
                }
            }
            WordUnit::Tilde { name, .. } => {
                if name.is_empty() && !env.home.is_empty() {
                    part.push_str(&env.home);
                } else {
                    part.push('~');
                    part.push_str(name);
                    unknown = true;
                }
            }
        }
        out.extend(part.chars().map(|c| (c, false)));
    }
    (out, unknown)
}

/// Most fields one word may brace-expand into before the analyser gives up on it (the word
/// then becomes unknown).
const MAX_BRACE_FIELDS: usize = 256;

/// Bash's brace expansion of unquoted `{a,b}` (alternatives, nested) and `{1..3}`/`{a..c}`
/// (sequences); `None` if it would make more than [`MAX_BRACE_FIELDS`] fields.
fn brace_expand(w: &[Ch]) -> Option<Vec<Vec<Ch>>> {
    let Some((open, close, commas)) = first_brace(w) else {
        return Some(vec![w.to_vec()]);
    };
    let (pre, body, post) = (&w[..open], &w[open + 1..close], &w[close + 1..]);
    let alts: Vec<Vec<Ch>> = if commas.is_empty() {
        sequence(body)?
    } else {
        let mut v = Vec::new();
        let mut start = 0;
        for &c in commas.iter().chain(std::iter::once(&body.len())) {
            v.push(body[start..c].to_vec());
            start = c + 1;
        }
        v
    };
    let mut out = Vec::new();
    for alt in alts {
        let mut whole = pre.to_vec();
        whole.extend(alt);
        whole.extend_from_slice(post);
        out.extend(brace_expand(&whole)?);
        if out.len() > MAX_BRACE_FIELDS {
            return None;
        }
    }
    // Bash drops fields that expanded to nothing (`{,}` alone).
    out.retain(|f| !f.is_empty());
    Some(out)
}

/// The first unquoted `{` with a matching `}` that contains a top-level `,` or is a `..`
/// sequence: (open, close, comma positions relative to the body).
fn first_brace(w: &[Ch]) -> Option<(usize, usize, Vec<usize>)> {
    for open in 0..w.len() {
        if w[open] != ('{', true) {
            continue;
        }
        let mut depth = 0usize;
        let mut commas = Vec::new();
        for close in open + 1..w.len() {
            match w[close] {
                ('{', true) => depth += 1,
                ('}', true) if depth > 0 => depth -= 1,
                ('}', true) => {
                    let body = &w[open + 1..close];
                    if !commas.is_empty() || is_sequence(body) {
                        return Some((open, close, commas));
                    }
                    break;
                }
                (',', true) if depth == 0 => commas.push(close - open - 1),
                _ => {}
            }
        }
    }
    None
}

/// Is the body of `{...}` a sequence expression (`1..10`, `a..e`, with an optional step)?
fn is_sequence(body: &[Ch]) -> bool {
    let s: String = body.iter().map(|c| c.0).collect();
    let parts: Vec<&str> = s.split("..").collect();
    let int = |p: &str| p.parse::<i64>().is_ok();
    let letter = |p: &str| p.len() == 1 && p.chars().all(|c| c.is_ascii_alphabetic());
    matches!(parts.len(), 2 | 3)
        && ((int(parts[0]) && int(parts[1])) || (letter(parts[0]) && letter(parts[1])))
        && parts.get(2).is_none_or(|p| int(p))
}

/// `a..e` or `1..10` (an optional `..step` is ignored: over-approximating is fine for
/// numbers, which no rule names).
fn sequence(body: &[Ch]) -> Option<Vec<Vec<Ch>>> {
    let s: String = body.iter().map(|c| c.0).collect();
    let mut it = s.split("..");
    let (from, to) = (it.next()?, it.next()?);
    let one = |c: char| vec![(c, false)];
    if let (Ok(a), Ok(b)) = (from.parse::<i64>(), to.parse::<i64>()) {
        let (lo, hi) = (a.min(b), a.max(b));
        if hi - lo >= MAX_BRACE_FIELDS as i64 {
            return None;
        }
        return Some(
            (lo..=hi)
                .map(|n| n.to_string().chars().map(|c| (c, false)).collect())
                .collect(),
        );
    }
    let (mut a, mut b) = (from.chars(), to.chars());
    match (a.next(), a.next(), b.next(), b.next()) {
        (Some(x), None, Some(y), None) if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() => {
            Some((x.min(y)..=x.max(y)).map(one).collect())
        }
        _ => None,
    }
}

/// Appends the static text of `units` to `out`; returns true if some part is not static.
fn text(
    units: &[TextUnit],
    env: &ShellEnv,
    a: &mut Analysis,
    depth: usize,
    out: &mut String,
) -> bool {
    let mut unknown = false;
    for u in units {
        match u {
            TextUnit::Literal(c) | TextUnit::Backslashed(c) => out.push(*c),
            TextUnit::RawParam { param, .. } => match known_param(&param.id, env) {
                Some(v) => out.push_str(v),
                None => {
                    out.push('$');
                    out.push_str(&param.id);
                    unknown = true;
                }
            },
            TextUnit::BracedParam(bp) => {
                let v = if matches!(bp.modifier, Modifier::None) {
                    known_param(&bp.param.id, env)
                } else {
                    None
                };
                match v {
                    Some(v) => out.push_str(v),
                    None => {
                        out.push_str(&format!("${{{}}}", bp.param.id));
                        unknown = true;
                    }
                }
            }
            TextUnit::CommandSubst { content, .. } => {
                script_into(content, env, a, depth + 1);
                out.push_str("$(…)");
                unknown = true;
            }
            TextUnit::Backquote { content, .. } => {
                let mut s = String::new();
                for bu in content {
                    match bu {
                        BackquoteUnit::Literal(c) | BackquoteUnit::Backslashed(c) => s.push(*c),
                    }
                }
                script_into(&s, env, a, depth + 1);
                out.push_str("`…`");
                unknown = true;
            }
            TextUnit::Arith { content, .. } => {
                let Text(inner) = content;
                text(inner, env, a, depth + 1, &mut String::new());
                out.push_str("$((…))");
                unknown = true;
            }
        }
    }
    unknown
}

fn known_param<'a>(id: &str, env: &'a ShellEnv) -> Option<&'a str> {
    match id {
        "HOME" if !env.home.is_empty() => Some(&env.home),
        "PWD" if !env.cwd.is_empty() => Some(&env.cwd),
        _ => None,
    }
}

/// Records a simple command and unwraps the commands it runs.
#[allow(
    clippy::too_many_lines,
    reason = "one arm per builtin and wrapper the analyser understands"
)]
fn command(args: &[Arg], env: &ShellEnv, a: &mut Analysis, depth: usize) {
    if depth > MAX_DEPTH {
        a.unanalysable
            .push(format!("nesting deeper than {MAX_DEPTH} levels"));
        return;
    }
    a.commands.push(SimpleCmd {
        argv: args.to_vec(),
        env: Vec::new(),
    });
    let Some(Arg::Lit(prog)) = args.first() else {
        return;
    };
    let name = prog.rsplit('/').next().unwrap_or(prog);
    let rest = &args[1..];
    match name {
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "yash" | "posh" => {
            shell(name, rest, env, a, depth)
        }
        "busybox" if !rest.is_empty() => command(rest, env, a, depth + 1),
        // Variables these set are seen by later commands (exported or, with `set -a`, not).
        "export" | "declare" | "typeset" | "readonly" | "local" => {
            for r in rest {
                let t = r.text();
                if !t.starts_with('-') {
                    a.assigned
                        .push(t.split_once('=').map_or(t, |(n, _)| n).to_string());
                }
            }
        }
        "eval" => {
            if rest.iter().all(|r| matches!(r, Arg::Lit(_) | Arg::Glob(_))) {
                let s = rest.iter().map(Arg::text).collect::<Vec<_>>().join(" ");
                script_into(&s, env, a, depth + 1);
            } else {
                a.unanalysable
                    .push("eval of text that depends on runtime values".into());
            }
        }
        "env" => unwrap_after(
            rest,
            env,
            a,
            depth,
            &["-u", "--unset", "-C", "--chdir", "-S", "--split-string"],
            true,
        ),
        "sudo" | "doas" => unwrap_after(
            rest,
            env,
            a,
            depth,
            &[
                "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group",
            ],
            true,
        ),
        "nice" => unwrap_after(rest, env, a, depth, &["-n", "--adjustment"], false),
        "ionice" => unwrap_after(
            rest,
            env,
            a,
            depth,
            &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
            false,
        ),
        "nohup" | "command" | "builtin" | "exec" | "time" | "setsid" | "unbuffer" | "stdbuf"
        | "chronic" | "caffeinate" => {
            unwrap_after(rest, env, a, depth, &["-a", "-o", "-i", "-e"], false)
        }
        "timeout" => {
            // timeout [OPTION] DURATION COMMAND [ARG]...
            let mut i = 0;
            while i < rest.len() {
                let t = rest[i].text();
                if t == "-s" || t == "-k" || t == "--signal" || t == "--kill-after" {
                    i += 2;
                } else if t.starts_with('-') {
                    i += 1;
                } else {
                    break;
                }
            }
            if i + 1 < rest.len() {
                command(&rest[i + 1..], env, a, depth + 1);
            }
        }
        "xargs" => {
            let mut i = 0;
            let with_arg = [
                "-I",
                "-L",
                "-n",
                "-P",
                "-s",
                "-d",
                "-E",
                "-a",
                "--max-args",
                "--max-procs",
                "--delimiter",
                "--arg-file",
            ];
            while i < rest.len() {
                let t = rest[i].text();
                if with_arg.contains(&t) {
                    i += 2;
                } else if t.starts_with('-') {
                    i += 1;
                } else {
                    break;
                }
            }
            let mut inner: Vec<Arg> = if i < rest.len() {
                rest[i..].to_vec()
            } else {
                vec![Arg::Lit("echo".into())]
            };
            inner.push(Arg::Unknown("<xargs input>".into()));
            command(&inner, env, a, depth + 1);
        }
        "find" => {
            let mut i = 0;
            while i < rest.len() {
                let t = rest[i].text();
                if matches!(t, "-exec" | "-execdir" | "-ok" | "-okdir") {
                    let start = i + 1;
                    let mut end = start;
                    while end < rest.len() && !matches!(rest[end].text(), ";" | "+") {
                        end += 1;
                    }
                    let inner: Vec<Arg> = rest[start..end]
                        .iter()
                        .map(|x| {
                            if x.text().contains("{}") {
                                Arg::Unknown(x.text().to_string())
                            } else {
                                x.clone()
                            }
                        })
                        .collect();
                    if !inner.is_empty() {
                        command(&inner, env, a, depth + 1);
                    }
                    i = end + 1;
                } else if t == "-delete" {
                    // `-delete` removes what the expression selects under the starting
                    // points (and possibly the starting points themselves): `rm -r` of
                    // those, so `find / -delete` is `rm -r /` and `find build -name '*.o'
                    // -delete` only `rm -r build` (was: `rm -r` of an unknown word, which
                    // deny rules took for `/`).
                    let mut argv = vec![Arg::Lit("rm".into()), Arg::Lit("-r".into())];
                    argv.extend(find_start_points(rest));
                    a.commands.push(SimpleCmd {
                        argv,
                        env: Vec::new(),
                    });
                    i += 1;
                } else {
                    i += 1;
                }
            }
        }
        // Non-interactive sh (dash) expands aliases: `alias r=rm` changes what a later
        // `r -rf /` runs, which static analysis of the later line cannot see.
        "alias"
            if rest
                .iter()
                .any(|r| r.text().contains('=') || matches!(r, Arg::Unknown(_))) =>
        {
            a.unanalysable
                .push("alias definitions change what later commands mean".into());
        }
        "trap" => {
            // trap ACTION SIGNAL...: the action is shell code run later.
            let mut i = 0;
            while i < rest.len() && rest[i].text().starts_with('-') && rest[i].text() != "-" {
                i += 1;
            }
            if let Some(action) = rest.get(i)
                && rest.len() > i + 1
            {
                match action {
                    Arg::Lit(t) | Arg::Glob(t) => script_into(t, env, a, depth + 1),
                    Arg::Unknown(_) => a
                        .unanalysable
                        .push("trap action that depends on runtime values".into()),
                }
            }
        }
        "strace" | "ltrace" | "fakeroot" => unwrap_after(
            rest,
            env,
            a,
            depth,
            &[
                "-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-S", "-X", "-l", "-i",
            ],
            false,
        ),
        "taskset" | "chrt" => {
            // taskset [opts] MASK cmd... / chrt [opts] PRIO cmd...
            let mut i = 0;
            while i < rest.len() && rest[i].text().starts_with('-') {
                i += 1;
            }
            if i + 1 < rest.len() {
                command(&rest[i + 1..], env, a, depth + 1);
            }
        }
        "flock" => {
            // flock [opts] FILE CMD [ARGS] | flock [opts] FILE -c CMD | flock -c CMD FILE
            // (getopt: `-c`/`--command` takes the command string; options may come anywhere).
            let mut script: Option<&Arg> = None;
            let mut positional: Vec<&Arg> = Vec::new();
            let mut i = 0;
            while i < rest.len() {
                let t = rest[i].text();
                if !positional.is_empty() && script.is_none() && !t.starts_with('-') {
                    // FILE CMD ARGS...: the rest is the command.
                    positional.extend(&rest[i..]);
                    break;
                }
                if matches!(t, "-c" | "--command") {
                    script = rest.get(i + 1);
                    i += 2;
                } else if matches!(t, "-w" | "--timeout" | "-E" | "--conflict-exit-code") {
                    i += 2;
                } else if t.starts_with('-') && t.len() > 1 {
                    i += 1;
                } else {
                    positional.push(&rest[i]);
                    i += 1;
                }
            }
            match script {
                Some(Arg::Lit(t)) | Some(Arg::Glob(t)) => script_into(t, env, a, depth + 1),
                Some(Arg::Unknown(_)) => a
                    .unanalysable
                    .push("flock -c with a command that depends on runtime values".into()),
                None if positional.len() > 1 => {
                    let cmd: Vec<Arg> = positional[1..].iter().map(|x| (*x).clone()).collect();
                    command(&cmd, env, a, depth + 1);
                }
                None => {}
            }
        }
        "script" => {
            // script -c CMD [file]
            if let Some(pos) = rest
                .iter()
                .position(|x| matches!(x.text(), "-c" | "--command"))
            {
                match rest.get(pos + 1) {
                    Some(Arg::Lit(t)) | Some(Arg::Glob(t)) => script_into(t, env, a, depth + 1),
                    Some(Arg::Unknown(_)) => a
                        .unanalysable
                        .push("script -c with a command that depends on runtime values".into()),
                    None => {}
                }
            }
        }
        "watch" => {
            let mut i = 0;
            while i < rest.len() && rest[i].text().starts_with('-') {
                let t = rest[i].text();
                i += if matches!(t, "-n" | "--interval" | "-d") {
                    2
                } else {
                    1
                };
            }
            if i < rest.len() {
                join_and_parse(&rest[i..], env, a, depth);
            }
        }
        _ => {}
    }
}

/// The starting points of `find [-H|-L|-P|-D opts|-Olevel]... [path...] expression`: the
/// words before the first that starts an expression (`-x`, `(`, `!`, `)`, `,`); `.` if none.
/// A starting point that starts with `-` is an option to find, so an unknown word here stays
/// unknown (it may be any path).
fn find_start_points(rest: &[Arg]) -> Vec<Arg> {
    let mut i = 0;
    while i < rest.len() {
        match rest[i].text() {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            t if t.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let points: Vec<Arg> = rest[i.min(rest.len())..]
        .iter()
        .take_while(|x| match x {
            Arg::Unknown(_) => true,
            other => {
                let t = other.text();
                !(t.starts_with('-') || matches!(t, "(" | "!" | ")" | ","))
            }
        })
        .cloned()
        .collect();
    if points.is_empty() {
        vec![Arg::Lit(".".into())]
    } else {
        points
    }
}

/// `wrapper [opts] [NAME=VALUE...] cmd args`: skips options (those in `with_arg` take a value)
/// and, if `assignments`, `NAME=VALUE` words; then analyses the rest as a command.
fn unwrap_after(
    rest: &[Arg],
    env: &ShellEnv,
    a: &mut Analysis,
    depth: usize,
    with_arg: &[&str],
    assignments: bool,
) {
    let mut i = 0;
    while i < rest.len() {
        let t = rest[i].text();
        if t == "--" {
            i += 1;
            break;
        }
        if (t == "-S" || t == "--split-string") && i + 1 < rest.len() {
            // env -S "cmd args": the string is split into words, shell-like.
            join_and_parse(&rest[i + 1..], env, a, depth);
            return;
        }
        if with_arg.contains(&t) {
            i += 2;
        } else if t.starts_with('-') && t.len() > 1 {
            i += 1;
        } else if assignments && t.contains('=') && !t.starts_with('=') {
            a.assigned
                .push(t.split_once('=').map_or(t, |(n, _)| n).to_string());
            i += 1;
        } else {
            break;
        }
    }
    if i < rest.len() {
        command(&rest[i..], env, a, depth + 1);
    }
}

fn join_and_parse(rest: &[Arg], env: &ShellEnv, a: &mut Analysis, depth: usize) {
    if rest.iter().all(|r| !matches!(r, Arg::Unknown(_))) {
        let s = rest.iter().map(Arg::text).collect::<Vec<_>>().join(" ");
        script_into(&s, env, a, depth + 1);
    } else {
        a.unanalysable
            .push("command text that depends on runtime values".into());
    }
}

fn shell(name: &str, rest: &[Arg], env: &ShellEnv, a: &mut Analysis, depth: usize) {
    let mut i = 0;
    let mut dash_c = false;
    while i < rest.len() {
        let t = rest[i].text();
        if t == "--" || t == "-" {
            i += 1;
            break;
        }
        if (t == "-o"
            || t == "+o"
            || t == "-O"
            || t == "+O"
            || t == "--rcfile"
            || t == "--init-file")
            && i + 1 < rest.len()
        {
            i += 2;
            continue;
        }
        if t.starts_with("--") {
            i += 1;
            continue;
        }
        if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
            if t[1..].contains('c') && t.starts_with('-') {
                dash_c = true;
            }
            i += 1;
            continue;
        }
        break;
    }
    if dash_c {
        match rest.get(i) {
            Some(Arg::Lit(script)) | Some(Arg::Glob(script)) => {
                script_into(script, env, a, depth + 1)
            }
            Some(Arg::Unknown(_)) => a.unanalysable.push(format!(
                "`{name} -c` with a script that depends on runtime values"
            )),
            None => a.unanalysable.push(format!("`{name} -c` without a script")),
        }
    } else if i >= rest.len() {
        a.unanalysable
            .push(format!("`{name}` reads commands from stdin"));
    }
    // `sh script.sh args`: the script is a file, like running any program.
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> ShellEnv {
        ShellEnv {
            home: "/home/u".into(),
            cwd: "/w".into(),
        }
    }

    fn cmds(s: &str) -> Vec<String> {
        analyse_script(s, &env())
            .commands
            .iter()
            .map(SimpleCmd::display)
            .collect()
    }

    #[test]
    fn lists_pipelines_and_operators() {
        assert_eq!(cmds("ls; rm -rf ~"), vec!["ls", "rm -rf /home/u"]);
        assert_eq!(cmds("echo x && rm -rf /"), vec!["echo x", "rm -rf /"]);
        assert_eq!(cmds("a | b || c & d"), vec!["a", "b", "c", "d"]);
    }

    #[test]
    fn subshells_groups_and_control_flow() {
        assert_eq!(cmds("(cd /; rm -rf x)"), vec!["cd /", "rm -rf x"]);
        assert_eq!(cmds("{ a; b; }"), vec!["a", "b"]);
        assert_eq!(
            cmds("if a; then b; elif c; then d; else e; fi"),
            vec!["a", "b", "c", "d", "e"]
        );
        assert_eq!(cmds("for i in 1 2; do rm $i; done"), vec!["rm $i"]);
        assert_eq!(cmds("while a; do b; done"), vec!["a", "b"]);
        assert_eq!(cmds("case x in y) rm -rf /;; esac"), vec!["rm -rf /"]);
        assert_eq!(cmds("f() { rm -rf /; }; f"), vec!["rm -rf /", "f"]);
    }

    #[test]
    fn command_substitution_is_analysed_and_unknown() {
        let a = analyse_script("$(echo rm) -rf /", &env());
        assert_eq!(a.commands[0].display(), "echo rm");
        assert_eq!(a.commands[1].argv[0], Arg::Unknown("$(…)".into()));
        let a = analyse_script("echo `rm -rf /`", &env());
        assert_eq!(a.commands[0].display(), "rm -rf /");
        let a = analyse_script("x=$(rm -rf /) ls", &env());
        assert_eq!(a.commands[0].display(), "rm -rf /");
        let a = analyse_script("cat <<EOF\n$(rm -rf /)\nEOF\n", &env());
        assert!(a.commands.iter().any(|c| c.display() == "rm -rf /"));
    }

    #[test]
    fn nested_shells_and_wrappers() {
        let a = analyse_argv(
            &["sh".into(), "-c".into(), "bash -c 'rm -rf /'".into()],
            &env(),
        );
        assert!(a.commands.iter().any(|c| c.display() == "rm -rf /"));
        for argv in [
            vec!["env", "FOO=1", "rm", "-rf", "/"],
            vec!["sudo", "-u", "root", "rm", "-rf", "/"],
            vec!["timeout", "-s", "KILL", "5", "rm", "-rf", "/"],
            vec!["nice", "-n", "5", "rm", "-rf", "/"],
            vec!["bash", "-lc", "rm -rf /"],
            vec!["eval", "rm", "-rf", "/"],
            vec!["env", "-S", "rm -rf /"],
        ] {
            let argv: Vec<String> = argv.into_iter().map(String::from).collect();
            let a = analyse_argv(&argv, &env());
            assert!(
                a.commands.iter().any(|c| c.display() == "rm -rf /"),
                "{argv:?}: {a:?}"
            );
        }
        let a = analyse_argv(
            &[
                "find".into(),
                ".".into(),
                "-exec".into(),
                "rm".into(),
                "{}".into(),
                ";".into(),
            ],
            &env(),
        );
        assert_eq!(a.commands[1].argv[0], Arg::Lit("rm".into()));
        let a = analyse_argv(&["xargs".into(), "rm".into(), "-rf".into()], &env());
        assert_eq!(a.commands[1].display(), "rm -rf <xargs input>");
    }

    #[test]
    fn expansions() {
        assert_eq!(cmds("rm -rf $HOME"), vec!["rm -rf /home/u"]);
        assert_eq!(cmds("rm -rf \"${HOME}\""), vec!["rm -rf /home/u"]);
        assert_eq!(cmds("rm -rf ~/"), vec!["rm -rf /home/u/"]);
        let a = analyse_script("rm -rf $X", &env());
        assert_eq!(a.commands[0].argv[2], Arg::Unknown("$X".into()));
        let a = analyse_script("rm -rf /*", &env());
        assert_eq!(a.commands[0].argv[2], Arg::Glob("/*".into()));
        let a = analyse_script("rm -rf '/*'", &env());
        assert_eq!(a.commands[0].argv[2], Arg::Lit("/*".into()));
    }

    #[test]
    fn brace_expansion_and_glob_words() {
        assert_eq!(cmds("{rm,-rf,/}"), vec!["rm -rf /"]);
        assert_eq!(cmds("r{m,} -rf {/,x}"), vec!["rm r -rf / x"]);
        assert_eq!(cmds("echo {1..3}{a,b}"), vec!["echo 1a 1b 2a 2b 3a 3b"]);
        assert_eq!(cmds("echo a{b{c,d},e}"), vec!["echo abc abd ae"]);
        // Quoted braces, `{}`, `{x}` and `${X}` are not brace expansions.
        assert_eq!(
            cmds("echo '{a,b}' {} {x} \\{a,b}"),
            vec!["echo '{a,b}' '{}' '{x}' '{a,b}'"]
        );
        let a = analyse_script("echo {1..100000}", &env());
        assert_eq!(a.commands[0].argv[1], Arg::Unknown("{1..100000}".into()));
        // `[` alone is a word, `[a]` a glob; quoted glob characters are escaped in glob text.
        let a = analyse_script("[ -d / ] && ls [a] '*'x* \\?y?", &env());
        assert_eq!(a.commands[0].argv[0], Arg::Lit("[".into()));
        assert_eq!(a.commands[0].argv[3], Arg::Lit("]".into()));
        assert_eq!(a.commands[1].argv[1], Arg::Glob("[a]".into()));
        assert_eq!(a.commands[1].argv[2], Arg::Glob("\\*x*".into()));
        assert_eq!(a.commands[1].argv[3], Arg::Glob("\\?y?".into()));
        assert_eq!(
            analyse_script("'[a]'", &env()).commands[0].argv[0],
            Arg::Lit("[a]".into())
        );
        // find -delete deletes under its starting points.
        assert_eq!(
            cmds("find -L build src -name '*.o' -delete"),
            vec!["find -L build src -name '*.o' -delete", "rm -r build src"]
        );
        assert_eq!(cmds("find -delete"), vec!["find -delete", "rm -r ."]);
    }

    #[test]
    fn aliases_traps_and_more_wrappers() {
        let a = analyse_script("alias r=rm\nr -rf /", &env());
        assert!(!a.unanalysable.is_empty(), "{a:?}");
        let a = analyse_script("alias", &env());
        assert!(
            a.unanalysable.is_empty(),
            "listing aliases is harmless: {a:?}"
        );
        let a = analyse_script("trap 'rm -rf /' EXIT; true", &env());
        assert!(
            a.commands.iter().any(|c| c.display() == "rm -rf /"),
            "{a:?}"
        );
        for s in [
            "strace -f -o log rm -rf /",
            "taskset 0x1 rm -rf /",
            "chrt -f 10 rm -rf /",
            "flock /tmp/l rm -rf /",
            "flock /tmp/l -c 'rm -rf /'",
            "flock -c 'rm -rf /' /tmp/l",
            "script -q -c 'rm -rf /' /dev/null",
            "fakeroot rm -rf /",
            "setsid -f rm -rf /",
            "command -p rm -rf /",
            "time rm -rf /",
        ] {
            let a = analyse_script(s, &env());
            assert!(
                a.commands.iter().any(|c| c.display() == "rm -rf /"),
                "{s}: {a:?}"
            );
        }
    }

    #[test]
    fn parser_bugs_do_not_crash() {
        // Found by fuzzing: input ending right after `${` made yash-syntax panic.
        for s in ["echo ${", "case ${", "for\x01\x04UUUUcase ${", "${", "x=${"] {
            let a = analyse_script(s, &env());
            assert!(
                !a.unanalysable.is_empty() || !a.commands.is_empty(),
                "{s:?}: {a:?}"
            );
        }
    }

    #[test]
    fn unanalysable_cases() {
        assert!(!analyse_script("if then", &env()).unanalysable.is_empty());
        assert!(
            !analyse_script("echo 'unterminated", &env())
                .unanalysable
                .is_empty()
        );
        assert!(!analyse_argv(&["sh".into()], &env()).unanalysable.is_empty());
        assert!(
            !analyse_script("eval \"$X\"", &env())
                .unanalysable
                .is_empty()
        );
        let deep = "sh -c ".repeat(40) + "x";
        assert!(!analyse_script(&deep, &env()).commands.is_empty());
        let mut nested = String::from("x");
        for _ in 0..40 {
            nested = format!("$({nested})");
        }
        assert!(!analyse_script(&nested, &env()).unanalysable.is_empty());
    }
}
