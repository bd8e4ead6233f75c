//! A rule's `match` and `not_match` examples, checked when the policy loads (as Codex's
//! execpolicy does): a rule whose examples fail makes the policy fail to load, with the rule
//! and the example named. Examples are optional in user policies; every built-in rule has
//! both kinds (a unit test checks that), which keeps false denials (`[ -d / ]`,
//! `find build -name '*.o' -delete`) from coming back.
//!
//! An example is shell text (`"rm -rf /"`, analysed as `sh -c` would run it), an argv array
//! (`["rm", "-rf", "/"]`, as `gateway exec -- ...` passes it), or a table naming the tool:
//! `{ tool = "read", path = "/etc/hosts" }`, `{ tool = "exec", command = "ls" }`.
//!
//! `match`: the rule certainly matches some simple command of the example (or its path).
//! `not_match`: it does not match; for deny and ask rules not even possibly (an unknown word
//! or a glob that could make it match counts as matching, since evaluation applies it).
//! Examples are decided with `~` = `/home/user` and the working directory
//! `/home/user/project`.

use super::Rule;
use super::shell::{self, Analysis, ShellEnv};
use crate::model::{Effect, Tool};
use std::path::Path;

/// The `~` and working directory examples are decided with.
pub fn example_env() -> ShellEnv {
    ShellEnv {
        home: "/home/user".into(),
        cwd: "/home/user/project".into(),
    }
}

enum Example {
    Exec {
        text: String,
        analysis: Analysis,
    },
    File {
        tool: Tool,
        path: String,
    },
    /// An http request (`{ tool = "http", url = "https://example.com/" }`): decided by the
    /// rules that apply to `http` and name no command, git pattern or path.
    Http {
        url: String,
    },
}

const SHAPE: &str = "an example is shell text (\"rm -rf /\"), an argv array ([\"rm\", \"-rf\", \"/\"]) or a table ({ tool = \"read\", path = \"/etc/hosts\" } or { tool = \"exec\", command = \"ls\" })";

fn argv_of(v: &toml::Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_str().map(String::from))
        .collect()
}

fn exec_example(v: &toml::Value) -> Result<Example, String> {
    let env = example_env();
    let (text, analysis) = if let Some(s) = v.as_str() {
        (s.to_string(), shell::analyse_script(s, &env))
    } else if let Some(argv) = argv_of(v).filter(|a| !a.is_empty()) {
        (argv.join(" "), shell::analyse_argv(&argv, &env))
    } else {
        return Err(SHAPE.into());
    };
    if !analysis.unanalysable.is_empty() {
        return Err(format!(
            "example `{text}` cannot be analysed ({}); examples must be commands the analyser reads",
            analysis.unanalysable.join("; ")
        ));
    }
    if analysis.commands.is_empty() {
        return Err(format!("example `{text}` runs no command"));
    }
    Ok(Example::Exec { text, analysis })
}

fn parse(v: &toml::Value) -> Result<Example, String> {
    let Some(t) = v.as_table() else {
        return exec_example(v);
    };
    let name = t.get("tool").and_then(|x| x.as_str()).ok_or(SHAPE)?;
    let tool = Tool::from_name(name).ok_or_else(|| {
        format!(
            "example: unknown tool `{name}`; tools are {}",
            Tool::ALL.map(Tool::name).join(", ")
        )
    })?;
    if let Some(k) = t
        .keys()
        .find(|k| !matches!(k.as_str(), "tool" | "path" | "command" | "url"))
    {
        return Err(format!("example: unknown key `{k}`; {SHAPE}"));
    }
    if tool == Tool::Http {
        return match (
            t.get("url").and_then(|u| u.as_str()),
            t.get("command"),
            t.get("path"),
        ) {
            (Some(u), None, None) => Ok(Example::Http { url: u.to_string() }),
            _ => Err("an http example needs `url` (and no `command` or `path`)".into()),
        };
    }
    match (tool, t.get("command"), t.get("path")) {
        (Tool::Exec, Some(c), None) => exec_example(c),
        (Tool::Exec, _, _) => Err("an exec example needs `command` (and no `path`)".into()),
        (_, None, Some(p)) => match p.as_str() {
            Some(p) if p.starts_with('/') => Ok(Example::File {
                tool,
                path: p.to_string(),
            }),
            _ => Err(format!("a {name} example needs an absolute `path`")),
        },
        _ => Err(format!("a {name} example needs `path` (and no `command`)")),
    }
}

/// An example's display text, without checking it (built-in policies: their examples are
/// constants of the binary, checked by the test suite, not by every process at load).
pub(super) fn text_of(v: &toml::Value) -> String {
    if let Some(s) = v.as_str() {
        return s.to_string();
    }
    if let Some(argv) = argv_of(v) {
        return argv.join(" ");
    }
    let Some(t) = v.as_table() else {
        return v.to_string();
    };
    let tool = t.get("tool").and_then(|x| x.as_str()).unwrap_or("?");
    if let Some(u) = t.get("url").and_then(|u| u.as_str()) {
        return format!("{tool} {u}");
    }
    match (t.get("command"), t.get("path").and_then(|p| p.as_str())) {
        (Some(c), _) => text_of(c),
        (None, Some(p)) => format!("{tool} {p}"),
        _ => tool.to_string(),
    }
}

/// Checks one example of `rule`: `want` = listed under `match`. Returns its display text,
/// or what is wrong (the caller adds the rule and the position).
pub(super) fn check(rule: &Rule, v: &toml::Value, want: bool) -> Result<String, String> {
    let ex = parse(v)?;
    let env = example_env();
    let may_counts = rule.effect != Effect::Allow;
    let (text, certain, possible) = match &ex {
        Example::Exec { text, analysis } => {
            let on = rule.applies_to(Tool::Exec);
            let find = |may: bool| {
                analysis
                    .commands
                    .iter()
                    .find(|c| on && rule.matches_command(c, may, &env))
                    .map(shell::SimpleCmd::display)
            };
            (text.clone(), find(false), find(true))
        }
        Example::File { tool, path } => {
            let hit = (rule.applies_to(*tool) && rule.matches_path(Path::new(path)))
                .then(|| format!("{tool} {path}"));
            (format!("{tool} {path}"), hit.clone(), hit)
        }
        Example::Http { url } => {
            let hit = (rule.applies_to(Tool::Http)
                && rule.commands.is_none()
                && rule.git.is_none()
                && rule.paths.is_none())
            .then(|| format!("http {url}"));
            (format!("http {url}"), hit.clone(), hit)
        }
    };
    match (want, certain, possible) {
        (true, Some(_), _) => Ok(text),
        (true, None, Some(c)) => Err(format!(
            "example `{text}` is under `match`, but the rule only may match it (`{c}` has a word it cannot know); give an example it certainly matches"
        )),
        (true, None, None) => Err(format!(
            "example `{text}` is under `match`, but the rule does not match it; fix the rule's `command`/`path`/`tools` or the example"
        )),
        (false, Some(c), _) => Err(format!(
            "example `{text}` is under `not_match`, but the rule matches it (at `{c}`); the rule is too broad, or the example is in the wrong list"
        )),
        (false, None, Some(c)) if may_counts => Err(format!(
            "example `{text}` is under `not_match`, but the rule may match it (at `{c}`: an unknown word or a glob could be what the rule names)"
        )),
        (false, None, _) => Ok(text),
    }
}
