//! The credential catalogue (`policies/credentials.toml`, compiled in): where the tools
//! gateway's users run keep their credentials, and the environment variables that carry them,
//! each with its owner, what it holds and a source. Every policy denies every path and scrubs
//! every variable listed (the broker applies it in `plan`, so commands and file tools alike).
//!
//! Pure: expanding a template takes the homes and the caller's environment as arguments.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The catalogue's text, as shipped.
pub const TEXT: &str = include_str!("../../policies/credentials.toml");

/// A tool's credential files.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// Kind of tool (coding agents, clouds, ...): the README table's sections.
    pub group: String,
    /// The tool.
    pub owner: String,
    /// What the files hold.
    pub holds: String,
    /// Path templates (see the file's opening comment).
    pub paths: Vec<String>,
    /// Where the tool documents them.
    pub source: String,
}

/// A tool's credential variables.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvVars {
    /// Kind of tool.
    pub group: String,
    /// The tool.
    pub owner: String,
    /// What the variables hold.
    pub holds: String,
    /// Names or `*` patterns.
    pub names: Vec<String>,
    /// Where the tool documents them.
    pub source: String,
}

/// The parsed catalogue.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Catalogue {
    /// Credential files.
    #[serde(rename = "store")]
    pub stores: Vec<Store>,
    /// Credential variables.
    #[serde(rename = "env")]
    pub env: Vec<EnvVars>,
}

/// The catalogue shipped in the binary.
pub fn catalogue() -> &'static Catalogue {
    static C: OnceLock<Catalogue> = OnceLock::new();
    C.get_or_init(|| {
        // The file is compiled in and parsed by a unit test (`catalogue_parses_...`): a
        // failure here is a build that did not run its tests.
        #[allow(clippy::expect_used)]
        toml::from_str(TEXT).expect("policies/credentials.toml parses (unit-tested)")
    })
}

/// Is the variable a catalogued credential variable?
pub fn env_scrubbed(name: &str) -> bool {
    catalogue()
        .env
        .iter()
        .flat_map(|e| &e.names)
        .any(|p| super::env_match(p, name))
}

/// Expands a path template: `~/` against every home, `${NAME:-default}` to the caller's
/// `NAME` (each absolute part of a `:`-separated value) and to the default, `${NAME}` to the
/// caller's `NAME` only. A trailing `/` is dropped. Relative results, and `/` itself, are
/// never produced (a variable set to `/` or to a relative path denies nothing, rather than
/// everything).
pub fn expand(
    template: &str,
    homes: &[PathBuf],
    var: &dyn Fn(&str) -> Option<String>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = expand_str(template, homes, var)
        .into_iter()
        .map(|s| PathBuf::from(s.trim_end_matches('/')))
        .filter(|p| p.is_absolute() && p.parent().is_some())
        .collect();
    out.dedup();
    out
}

fn expand_str(t: &str, homes: &[PathBuf], var: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    if let Some(rest) = t.strip_prefix("~/") {
        return homes
            .iter()
            .map(|h| format!("{}/{rest}", h.display().to_string().trim_end_matches('/')))
            .collect();
    }
    if t.starts_with('/') {
        return vec![t.to_string()];
    }
    let Some((name, default, rest)) = split_var(t) else {
        return vec![];
    };
    let mut out = Vec::new();
    if let Some(v) = var(name).filter(|v| !v.is_empty()) {
        for part in v.split(':').filter(|p| p.starts_with('/')) {
            out.push(format!("{}{rest}", part.trim_end_matches('/')));
        }
    }
    if let Some(d) = default {
        for base in expand_str(d, homes, var) {
            out.push(format!("{}{rest}", base.trim_end_matches('/')));
        }
    }
    out
}

/// `${NAME:-default}rest` → (NAME, Some(default), rest); `${NAME}rest` → (NAME, None, rest).
/// The default may itself hold `${...}` (braces are balanced).
pub fn split_var(t: &str) -> Option<(&str, Option<&str>, &str)> {
    let body = t.strip_prefix("${")?;
    let mut depth = 1usize;
    let mut end = None;
    let bytes = body.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let end = end?;
    let (inner, rest) = (&body[..end], &body[end + 1..]);
    let (name, default) = match inner.split_once(":-") {
        Some((n, d)) => (n, Some(d)),
        None => (inner, None),
    };
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    valid.then_some((name, default, rest))
}

/// The variables the catalogue's paths read from the caller's environment.
pub fn path_variables() -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for t in catalogue().stores.iter().flat_map(|s| &s.paths) {
        let mut t = t.as_str();
        while let Some((name, default, _)) = split_var(t) {
            v.push(name.to_string());
            match default {
                Some(d) => t = d,
                None => break,
            }
        }
    }
    v.sort();
    v.dedup();
    v
}

/// README's catalogue section, generated from the data (a unit test keeps README equal to it).
pub fn readme_table() -> String {
    let c = catalogue();
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::from(
        "| kind | tool | files (denied to every command and file tool) | holds | source |\n|---|---|---|---|---|\n",
    );
    for s in &c.stores {
        let paths: Vec<String> = s.paths.iter().map(|p| format!("`{}`", cell(p))).collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            s.group,
            cell(&s.owner),
            paths.join("<br>"),
            cell(&s.holds),
            link(&s.source)
        ));
    }
    out.push_str(
        "\n| kind | tool | variables (removed from every run) | holds | source |\n|---|---|---|---|---|\n",
    );
    for e in &c.env {
        let names: Vec<String> = e.names.iter().map(|n| format!("`{}`", cell(n))).collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            e.group,
            cell(&e.owner),
            names.join(", "),
            cell(&e.holds),
            link(&e.source)
        ));
    }
    out
}

/// A source as a markdown link (its URL is the part from `https://`).
fn link(source: &str) -> String {
    match source.find("https://") {
        Some(i) => {
            let (note, url) = source.split_at(i);
            let label = if note.is_empty() {
                "docs"
            } else {
                "source code"
            };
            format!("[{label}]({url})")
        }
        None => source.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_parses_and_every_entry_has_an_owner_a_reason_and_a_source() {
        let c: Catalogue = toml::from_str(TEXT).expect("credentials.toml parses");
        assert!(c.stores.len() >= 50, "{} stores", c.stores.len());
        fn url(s: &str) -> Option<&str> {
            let i = s.find("https://")?;
            let u = &s[i..];
            (u.len() > "https://x.y".len() && !u.contains(' ')).then_some(u)
        }
        for s in &c.stores {
            let what = format!("store {:?}", s.paths);
            assert!(!s.owner.trim().is_empty(), "{what}: no owner");
            assert!(!s.holds.trim().is_empty(), "{what}: no holds");
            assert!(!s.group.trim().is_empty(), "{what}: no group");
            assert!(url(&s.source).is_some(), "{what}: no source URL");
            assert!(
                s.source.starts_with("https://")
                    || s.source.starts_with("the tool's source code: https://"),
                "{what}: a source is the docs' URL or `the tool's source code: URL`"
            );
            assert!(!s.paths.is_empty(), "{}: no paths", s.owner);
            for p in &s.paths {
                let ok = p.starts_with("~/")
                    || p.starts_with('/')
                    || split_var(p).is_some_and(|(_, d, rest)| {
                        d.is_none_or(|d| d.starts_with("~/") || d.starts_with("${"))
                            && (rest.is_empty() || rest.starts_with('/'))
                    });
                assert!(ok, "{}: bad template {p}", s.owner);
                let glob = p.rsplit('/').next().unwrap_or_default();
                let dir = p.trim_end_matches('/');
                assert!(
                    !dir[..dir.len() - glob.len()].contains('*'),
                    "{p}: `*` only in the last component"
                );
            }
        }
        for e in &c.env {
            let what = format!("env {:?}", e.names);
            assert!(!e.owner.trim().is_empty(), "{what}: no owner");
            assert!(!e.holds.trim().is_empty(), "{what}: no holds");
            assert!(url(&e.source).is_some(), "{what}: no source URL");
            assert!(!e.names.is_empty());
        }
    }

    #[test]
    fn catalogue_covers_the_agents_credentials_and_the_always_denied_paths() {
        let home = PathBuf::from("/h");
        let all: Vec<PathBuf> = catalogue()
            .stores
            .iter()
            .flat_map(|s| &s.paths)
            .flat_map(|t| expand(t, std::slice::from_ref(&home), &|_| None))
            .collect();
        for want in [
            "/h/.claude/.credentials.json",
            "/h/.codex/auth.json",
            "/h/.config/git/credentials",
            "/h/.git-credentials",
            "/h/.gemini/oauth_creds.json",
            "/h/.ssh",
            "/h/.gnupg",
            "/h/.aws",
            "/etc/shadow",
            "/etc/gshadow",
        ] {
            assert!(all.contains(&PathBuf::from(want)), "{want} not catalogued");
        }
        // Not the agents' whole directories: their shell integration reads these.
        for keep in [
            "/h/.claude",
            "/h/.claude/settings.json",
            "/h/.codex",
            "/h/.codex/config.toml",
        ] {
            assert!(
                !all.iter().any(|p| PathBuf::from(keep).starts_with(p)),
                "{keep} must stay readable"
            );
        }
        for v in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "GITLAB_TOKEN",
            "MYSQL_PWD",
            "BW_SESSION",
            "OP_SESSION_abc",
            "npm_config__authToken",
        ] {
            assert!(env_scrubbed(v), "{v} not catalogued");
        }
        assert!(!env_scrubbed("PATH") && !env_scrubbed("HOME"));
    }

    #[test]
    fn templates_expand_against_homes_and_the_callers_variables() {
        let homes = [PathBuf::from("/home/a"), PathBuf::from("/root")];
        let env = |k: &str| match k {
            "XDG_CONFIG_HOME" => Some("/x/cfg".to_string()),
            "KUBECONFIG" => Some("/k/one:relative:/k/two".to_string()),
            "EMPTY" => Some(String::new()),
            "ROOT" => Some("/".to_string()),
            _ => None,
        };
        let e = |t: &str| expand(t, &homes, &env);
        assert_eq!(
            e("${XDG_CONFIG_HOME:-~/.config}/git/credentials"),
            [
                "/x/cfg/git/credentials",
                "/home/a/.config/git/credentials",
                "/root/.config/git/credentials"
            ]
            .map(PathBuf::from)
        );
        assert_eq!(
            e("${KUBECONFIG:-~/.kube/config}"),
            [
                "/k/one",
                "/k/two",
                "/home/a/.kube/config",
                "/root/.kube/config"
            ]
            .map(PathBuf::from)
        );
        assert_eq!(e("${UNSET}/x"), Vec::<PathBuf>::new());
        assert_eq!(e("${EMPTY}"), Vec::<PathBuf>::new());
        assert_eq!(
            e("${ROOT}"),
            Vec::<PathBuf>::new(),
            "`/` is never denied whole"
        );
        assert_eq!(
            e("~/.ssh/"),
            ["/home/a/.ssh", "/root/.ssh"].map(PathBuf::from)
        );
        assert_eq!(
            e("${A:-${XDG_CONFIG_HOME:-~/.config}/gh}/hosts.yml")[0],
            PathBuf::from("/x/cfg/gh/hosts.yml")
        );
        assert!(split_var("${lower}").is_none() && split_var("${X").is_none());
    }

    /// README's catalogue table is generated from the data: `GATEWAY_BLESS=1 cargo test
    /// readme_credentials_table` rewrites it; otherwise a difference fails.
    #[test]
    fn readme_credentials_table_is_generated_from_the_catalogue() {
        const BEGIN: &str = "<!-- credentials:begin (generated from policies/credentials.toml: GATEWAY_BLESS=1 cargo test readme_credentials_table) -->\n";
        const END: &str = "<!-- credentials:end -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
        let readme = std::fs::read_to_string(path).expect("read README.md");
        let (Some(b), Some(e)) = (readme.find(BEGIN), readme.find(END)) else {
            panic!("README.md lacks the markers {BEGIN:?} … {END:?}");
        };
        let want = readme_table();
        let have = &readme[b + BEGIN.len()..e];
        if have != want {
            #[allow(
                clippy::disallowed_methods,
                reason = "the test's own switch to rewrite README"
            )]
            if std::env::var_os("GATEWAY_BLESS").is_some() {
                let new = format!("{}{BEGIN}{want}{}", &readme[..b], &readme[e..]);
                std::fs::write(path, new).expect("write README.md");
            } else {
                panic!(
                    "README.md's credential table differs from policies/credentials.toml; run `GATEWAY_BLESS=1 cargo test readme_credentials_table`"
                );
            }
        }
    }
}
