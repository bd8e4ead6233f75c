//! The credential catalogue (`policies/credentials.toml`), attacked: for every entry a fake
//! credential is planted where the tool keeps it (under a fake HOME, and under the variables
//! an entry reads: `XDG_CONFIG_HOME`, `CODEX_HOME`, `KUBECONFIG`, ...), and a command tries
//! `cat`, `base64` and `cp` into the workspace, and the file tools try `fs read` — under
//! strict and standard, as root and as uid 65534. One `sh` per run tries every path (a
//! control file proves the same script does read what is not catalogued); markers and their
//! base64 must not come out.

use crate::util::*;
use base64::prelude::*;
use gateway::policy::credentials::{catalogue, path_variables, split_var};

/// A planted credential.
struct Planted {
    path: PathBuf,
    content: String,
    what: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Pass {
    /// Variables unset: the templates' defaults under the fake HOME.
    Defaults,
    /// Every variable the catalogue reads set to a directory of its own under the test tree.
    Vars,
}

fn var_dir(env: &Env, name: &str) -> PathBuf {
    env.root.join("var").join(name)
}

/// Where `template` puts a credential in this pass (None: nothing to plant in this pass, or a
/// system path, which is tested where it exists).
fn location(env: &Env, template: &str, pass: Pass) -> Option<PathBuf> {
    let home = env.home.display().to_string();
    let base = if let Some(rest) = template.strip_prefix("~/") {
        (pass == Pass::Defaults).then(|| format!("{home}/{rest}"))?
    } else if template.starts_with('/') {
        return None;
    } else {
        let (name, default, rest) = split_var(template).expect("template");
        match pass {
            Pass::Vars => format!("{}{rest}", var_dir(env, name).display()),
            Pass::Defaults => {
                let d = default?.strip_prefix("~/").expect("defaults are under ~/");
                format!("{home}/{d}{rest}")
            }
        }
    };
    // A directory: plant a file in it. `*`: an instance of the pattern.
    let p = match base.strip_suffix('/') {
        Some(dir) => PathBuf::from(dir).join("planted-credential"),
        None => PathBuf::from(base.replace('*', "gw")),
    };
    Some(p)
}

fn plant(env: &Env, pass: Pass) -> Vec<Planted> {
    let mut out: Vec<Planted> = Vec::new();
    for (i, s) in catalogue().stores.iter().enumerate() {
        for (j, t) in s.paths.iter().enumerate() {
            let Some(path) = location(env, t, pass) else {
                continue;
            };
            if out.iter().any(|p| p.path == path) {
                continue;
            }
            let content = format!("GWCRED{}x{i}x{j}MARK", pass as u8);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, format!("{content}\n")).expect("plant");
            out.push(Planted {
                path,
                content,
                what: format!("{} `{t}`", s.owner),
            });
        }
    }
    out
}

/// The catalogue's system paths that exist here, with a line of their real content (read by
/// the test as root) that must not come out.
fn system_files() -> Vec<Planted> {
    let mut out = Vec::new();
    for s in &catalogue().stores {
        for t in s.paths.iter().filter(|t| t.starts_with('/')) {
            let t = t.trim_end_matches('/');
            let (dir, name) = t.rsplit_once('/').expect("absolute");
            let mut paths = vec![];
            if name.contains('*') {
                let (pre, post) = name.split_once('*').expect("star");
                for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if n.starts_with(pre) && n.ends_with(post) && n.len() >= pre.len() + post.len()
                    {
                        paths.push(e.path());
                    }
                }
            } else {
                paths.push(PathBuf::from(t));
            }
            for p in paths {
                let files: Vec<PathBuf> = if p.is_dir() {
                    std::fs::read_dir(&p)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|e| e.path())
                        .collect()
                } else {
                    vec![p]
                };
                for f in files {
                    let Ok(text) = std::fs::read_to_string(&f) else {
                        continue;
                    };
                    if let Some(line) = text.lines().map(str::trim).find(|l| l.len() >= 8) {
                        out.push(Planted {
                            path: f,
                            content: line.to_string(),
                            what: format!("{} `{t}`", s.owner),
                        });
                    }
                }
            }
        }
    }
    out
}

fn b64(content: &str) -> String {
    BASE64_STANDARD.encode(format!("{content}\n"))
}

/// The attack script: every path through cat, base64 and cp into the workspace, then the
/// control.
fn script(paths: &[&Path], control: &Path) -> String {
    let mut s = String::new();
    for (i, p) in paths.iter().chain([&control]).enumerate() {
        let p = p.display();
        s.push_str(&format!(
            "cat '{p}'; base64 '{p}'; cp '{p}' ./copy-{i} && cat ./copy-{i}\n"
        ));
    }
    s
}

/// Runs the whole attack for one policy, as root or as nobody, and checks it.
fn attack(policy: &str, as_nobody: bool) {
    for pass in [Pass::Defaults, Pass::Vars] {
        let env = Env::new("creds");
        let planted = plant(&env, pass);
        assert!(planted.len() >= 30, "{} planted", planted.len());
        let system = system_files();
        // The control: where the policy lets a command read (strict reads no home).
        let control_dir = if policy == "strict" {
            &env.ws
        } else {
            &env.home
        };
        let control = control_dir.join("not-a-credential.txt");
        let control_content = "GWCONTROLREADABLE";
        std::fs::write(&control, format!("{control_content}\n")).expect("control");
        let all: Vec<&Planted> = planted.iter().chain(&system).collect();
        let paths: Vec<&Path> = all.iter().map(|p| p.path.as_path()).collect();
        std::fs::write(env.ws.join("attack.sh"), script(&paths, &control)).expect("script");
        let vars: Vec<(String, PathBuf)> = match pass {
            Pass::Vars => path_variables()
                .into_iter()
                .map(|v| {
                    let d = var_dir(&env, &v);
                    (v, d)
                })
                .collect(),
            Pass::Defaults => vec![],
        };
        if as_nobody {
            env.give_to_nobody();
        }
        let gw = |args: &[&str]| -> Output {
            let mut c = if as_nobody {
                let mut c = env.nobody();
                c.args(args);
                c
            } else {
                let mut c = env.cmd();
                c.args(args);
                c
            };
            for (k, v) in &vars {
                c.env(k, v);
            }
            c.output().expect("run gateway")
        };
        let who = if as_nobody { "uid 65534" } else { "root" };
        let o = gw(&["exec", "--policy", policy, "--", "sh", "attack.sh"]);
        let t = text(&o);
        // The control proves the script reads, encodes and copies what is not catalogued.
        assert!(
            t.contains(control_content) && t.contains(&b64(control_content)),
            "{policy} as {who}: the control was not read: {t}"
        );
        for (i, p) in all.iter().enumerate() {
            let leaked = t.contains(&p.content) || t.contains(&b64(&p.content));
            assert!(
                !leaked,
                "{policy} as {who}: {} ({}) was read by a command: {t}",
                p.what,
                p.path.display()
            );
            let copy = env.ws.join(format!("copy-{i}"));
            assert!(
                std::fs::read_to_string(&copy).map_or(true, |c| !c.contains(&p.content)),
                "{policy} as {who}: {} copied into the workspace",
                p.what
            );
        }
        // The file tools, one read per path (refused before any worker runs: fast).
        std::thread::scope(|s| {
            for chunk in all.chunks(all.len().div_ceil(3)) {
                let gw = &gw;
                s.spawn(move || {
                    for p in chunk {
                        let path = p.path.to_str().expect("utf-8");
                        let o = gw(&["--policy", policy, "fs", "read", path]);
                        let t = text(&o);
                        assert!(
                            o.status.code() == Some(120) && !t.contains(&p.content),
                            "{policy} as {who}: fs read {} ({}) was not refused: {t}",
                            p.what,
                            path
                        );
                        // A search for its content there, and a move into the workspace.
                        let o = gw(&[
                            "--policy", policy, "fs", "grep", "--path", path, "--", &p.content,
                        ]);
                        let t = text(&o);
                        assert!(
                            !t.contains(&p.content) && o.status.code() == Some(120),
                            "{policy} as {who}: fs grep in {} ({}) was not refused: {t}",
                            p.what,
                            path
                        );
                        let dest = format!("moved-{}", p.what.replace(['/', ' '], "_"));
                        let o = gw(&["--policy", policy, "fs", "mv", path, &dest]);
                        assert_eq!(
                            o.status.code(),
                            Some(120),
                            "{policy} as {who}: fs mv {} ({}) was not refused: {}",
                            p.what,
                            path,
                            text(&o)
                        );
                        assert!(
                            std::fs::read_to_string(&p.path).is_ok_and(|c| c.contains(&p.content)),
                            "{policy} as {who}: {} left its place",
                            p.what
                        );
                    }
                });
            }
        });
        // ... while the control is readable by them (standard: home; strict: workspace).
        let o = gw(&[
            "--policy",
            policy,
            "fs",
            "read",
            control.to_str().expect("utf-8"),
        ]);
        assert!(
            o.status.success() && stdout(&o).contains(control_content),
            "{policy} as {who}: fs read of the control: {}",
            text(&o)
        );
    }
}

sandbox_test! {
    fn every_catalogued_credential_is_unreadable_under_standard_as_root() {
        attack("standard", false);
    }
}

sandbox_test! {
    fn every_catalogued_credential_is_unreadable_under_standard_as_nobody() {
        attack("standard", true);
    }
}

sandbox_test! {
    fn every_catalogued_credential_is_unreadable_under_strict_as_root() {
        attack("strict", false);
    }
}

sandbox_test! {
    fn every_catalogued_credential_is_unreadable_under_strict_as_nobody() {
        attack("strict", true);
    }
}

sandbox_test! {
    // Claude Code's shell integration sources `~/.claude/shell-snapshots/*` in every command
    // it runs, and both agents read their settings: those stay readable under standard while
    // the token files beside them do not (the catalogue denies files, not the directories).
    fn claude_and_codex_keep_their_own_files_but_not_their_tokens() {
        let env = Env::new("agent-files");
        let h = &env.home;
        let put = |rel: &str, content: &str| {
            let p = h.join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, content).expect("write");
            p
        };
        put(".claude/settings.json", "{\"GWSETTINGS\": 1}\n");
        put(".claude/shell-snapshots/snapshot-bash-1.sh", "gw_snapshot_fn() { echo GWSNAPSHOTRAN; }\n");
        put(".codex/config.toml", "model = \"GWCODEXCONFIG\"\n");
        put(".claude/.credentials.json", "{\"claudeAiOauth\": \"GWCLAUDETOKEN\"}\n");
        put(".codex/auth.json", "{\"OPENAI_API_KEY\": \"GWCODEXTOKEN\"}\n");
        for nobody in [false, true] {
            if nobody {
                env.give_to_nobody();
            }
            let run = |args: &[&str]| -> Output {
                let mut c = if nobody { env.nobody() } else { env.cmd() };
                c.args(args).output().expect("run gateway")
            };
            let who = if nobody { "uid 65534" } else { "root" };
            let o = run(&[
                "exec", "--policy", "standard", "--", "sh", "-c",
                ". ~/.claude/shell-snapshots/snapshot-bash-1.sh && gw_snapshot_fn; cat ~/.claude/settings.json ~/.codex/config.toml; ls ~/.claude ~/.codex; cat ~/.claude/.credentials.json ~/.codex/auth.json",
            ]);
            let t = text(&o);
            for want in ["GWSNAPSHOTRAN", "GWSETTINGS", "GWCODEXCONFIG", "settings.json", "config.toml"] {
                assert!(t.contains(want), "as {who}: {want} missing: {t}");
            }
            for secret in ["GWCLAUDETOKEN", "GWCODEXTOKEN"] {
                assert!(!t.contains(secret), "as {who}: {secret} leaked: {t}");
            }
            for (rel, want, ok) in [
                (".claude/settings.json", "GWSETTINGS", true),
                (".codex/config.toml", "GWCODEXCONFIG", true),
                (".claude/.credentials.json", "GWCLAUDETOKEN", false),
                (".codex/auth.json", "GWCODEXTOKEN", false),
            ] {
                let p = h.join(rel);
                let o = run(&["--policy", "standard", "fs", "read", p.to_str().expect("utf-8")]);
                assert_eq!(
                    o.status.success() && stdout(&o).contains(want),
                    ok,
                    "as {who}: fs read {rel}: {}",
                    text(&o)
                );
            }
        }
    }
}

sandbox_test! {
    // Every catalogued credential variable is removed from a run's environment, even under
    // permissive (which passes `*`), as root and as uid 65534; `--env` refuses them.
    fn every_catalogued_credential_variable_is_scrubbed() {
        let names: Vec<String> = catalogue()
            .env
            .iter()
            .flat_map(|e| e.names.iter().map(|n| n.replace('*', "GW")))
            .collect();
        assert!(names.len() >= 60, "{} names", names.len());
        for nobody in [false, true] {
            let env = Env::new("cred-env");
            if nobody {
                env.give_to_nobody();
            }
            for policy in ["permissive", "standard"] {
                let mut c = if nobody { env.nobody() } else { env.cmd() };
                c.args(["exec", "--policy", policy, "--", "env"]);
                for (i, n) in names.iter().enumerate() {
                    c.env(n, format!("gwvalue{i}mark"));
                }
                c.env("GW_PLAIN_CONTROL", "gwcontrolvisible");
                let o = c.output().expect("run gateway");
                let t = text(&o);
                if policy == "permissive" {
                    assert!(t.contains("gwcontrolvisible"), "{policy}: control missing: {t}");
                }
                for (i, n) in names.iter().enumerate() {
                    assert!(
                        !t.contains(&format!("gwvalue{i}mark")),
                        "{policy} (uid 65534: {nobody}): {n} reached the run: {t}"
                    );
                }
            }
        }
        let env = Env::new("cred-env");
        let o = env
            .cmd()
            .args(["exec", "--policy", "permissive", "--env", "MYSQL_PWD=x", "--", "true"])
            .output()
            .expect("run gateway");
        // A refusal by the policy (issue 23): exit 120, recorded as a deny.
        assert_eq!(o.status.code(), Some(120), "--env MYSQL_PWD: {}", text(&o));
    }
}

#[test]
fn policy_explain_credentials_lists_what_is_denied_and_why() {
    let env = Env::new("cred-explain");
    let xdg = env.root.join("xdg");
    let o = env
        .cmd()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["--json", "policy", "explain", "--credentials"])
        .output()
        .expect("run gateway");
    assert!(o.status.success(), "{}", text(&o));
    let v = json_of(&o);
    let stores = v["stores"].as_array().expect("stores");
    assert_eq!(stores.len(), catalogue().stores.len());
    for s in stores {
        for k in ["owner", "holds", "source", "group"] {
            assert!(!s[k].as_str().unwrap_or_default().is_empty(), "{k}: {s}");
        }
    }
    let denied = |owner: &str| -> Vec<String> {
        stores
            .iter()
            .filter(|s| s["owner"] == owner)
            .flat_map(|s| s["denied"].as_array().expect("denied").iter())
            .map(|p| p.as_str().expect("path").to_string())
            .collect()
    };
    let home = env.home.display().to_string();
    assert!(denied("Claude Code").contains(&format!("{home}/.claude/.credentials.json")));
    let git = denied("git (credential store)");
    assert!(
        git.contains(&format!("{}/git/credentials", xdg.display())),
        "{git:?}"
    );
    assert!(
        git.contains(&format!("{home}/.config/git/credentials")),
        "{git:?}"
    );
    let env_names: Vec<&str> = v["env"]
        .as_array()
        .expect("env")
        .iter()
        .flat_map(|e| e["names"].as_array().expect("names"))
        .filter_map(|n| n.as_str())
        .collect();
    assert!(env_names.contains(&"ANTHROPIC_API_KEY") && env_names.contains(&"OPENAI_API_KEY"));
    // Text: each store with its owner, what it holds, its paths and its source.
    let o = env.gw(&["policy", "explain", "--credentials"]);
    let t = stdout(&o);
    assert!(o.status.success(), "{}", text(&o));
    for want in [
        "Codex: ChatGPT login tokens",
        &format!("{home}/.codex/auth.json"),
        "source: https://github.com/openai/codex/blob/main/docs/authentication.md",
        "ANTHROPIC_API_KEY",
    ] {
        assert!(t.contains(want), "{want} missing: {t}");
    }
}
