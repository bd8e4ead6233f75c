//! Issue 25 item 2, attacked by every spelling: the files that decide the next run (the policy
//! file in force, every file it extends, the gateway's config, the daemon's config) are never
//! changed by a run or a file tool — through a hard link made before the run, a symbolic
//! link, a `..` after a directory the run may replace, or the rename of a parent — as root
//! and as uid 65534. A run may be refused (with how to fix it) or may run; either way the
//! file the next run reads, by the same spelling, is what it was.

use crate::util::*;

const BASE: &str = "extends = \"standard\"\n";
const EVIL: &str = "extends = \"permissive\"\n";

/// One attack: files planted by `setup` (returns the `--policy` spelling and the paths, as
/// the next run would spell them, that must keep their content), then `script` run by
/// `gateway exec` under that policy, as root or uid 65534, with `vars` set.
struct Case {
    name: &'static str,
    setup: fn(&Env) -> (String, Vec<PathBuf>),
    script: &'static str,
    vars: fn(&Env) -> Vec<(&'static str, PathBuf)>,
}

fn no_vars(_: &Env) -> Vec<(&'static str, PathBuf)> {
    vec![]
}

fn put(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// What went wrong, if anything (every case is tried, then all failures reported).
fn check(case: &Case, nobody: bool) -> Option<String> {
    let env = Env::new(&format!("next-{}", case.name));
    let (policy, keep) = (case.setup)(&env);
    let before: Vec<String> = keep
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("kept file"))
        .collect();
    if nobody {
        env.give_to_nobody();
    }
    let mut c = env.as_user(nobody);
    for (k, v) in (case.vars)(&env) {
        c.env(k, v);
    }
    let o = c
        .args(["--policy", &policy, "exec", "--", "sh", "-c"])
        .arg(format!("{}; echo ran", case.script))
        .output()
        .expect("run gateway");
    let t = text(&o);
    // Refused (exit 125, saying why) or run: both hold if nothing the next run reads changed.
    if std::env::var_os("GW_NEXT_RUN_SHOW").is_some() {
        eprintln!("== {} nobody={nobody}: {t}", case.name);
    }
    if !(o.status.code() == Some(125) || stdout(&o).contains("ran")) {
        return Some(format!(
            "{} (nobody={nobody}): neither ran nor refused: {t}",
            case.name
        ));
    }
    for (p, was) in keep.iter().zip(&before) {
        let now = std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"));
        if &now != was {
            return Some(format!(
                "{} (nobody={nobody}): {} changed for the next run to {now:?}: {t}",
                case.name,
                p.display()
            ));
        }
    }
    None
}

fn check_all(nobody: bool) {
    let failed: Vec<String> = cases().iter().filter_map(|c| check(c, nobody)).collect();
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    // The control: plain spellings still run — a policy outside extending its neighbour, a
    // config in its place, and (as root, whose mount namespace keeps them read-only) a
    // policy in a directory of the workspace extending `../base.toml`.
    let env = Env::new("next-control");
    put(&env.outside.join("p.toml"), "extends = \"base.toml\"\n");
    put(&env.outside.join("base.toml"), BASE);
    put(
        &env.home.join(".config/gateway/config.toml"),
        "policy = \"strict\"\n",
    );
    put(&env.ws.join("cfg/p.toml"), "extends = \"../base.toml\"\n");
    put(&env.ws.join("base.toml"), BASE);
    if nobody {
        env.give_to_nobody();
    }
    let mut policies = vec![env.outside.join("p.toml")];
    if !nobody {
        policies.push(env.ws.join("cfg/p.toml"));
    }
    for p in policies {
        let o = env
            .as_user(nobody)
            .args(["--policy", &s(&p), "exec", "--", "sh", "-c", "echo ran"])
            .output()
            .expect("run gateway");
        assert!(
            o.status.success() && stdout(&o).contains("ran"),
            "nobody={nobody}: --policy {}: {}",
            p.display(),
            text(&o)
        );
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            // A hard link in the workspace to a policy kept outside it.
            name: "hardlink-policy",
            setup: |env| {
                let p = env.outside.join("p.toml");
                put(&p, BASE);
                std::fs::hard_link(&p, env.ws.join("alias.toml")).expect("link");
                (s(&p), vec![p])
            },
            script: "echo 'extends = \"permissive\"' > alias.toml",
            vars: no_vars,
        },
        Case {
            // A hard link in the workspace to a file the policy extends.
            name: "hardlink-extends",
            setup: |env| {
                let p = env.outside.join("p.toml");
                let b = env.outside.join("base.toml");
                put(&p, "extends = \"base.toml\"\n");
                put(&b, BASE);
                std::fs::hard_link(&b, env.ws.join("b.toml")).expect("link");
                (s(&p), vec![b])
            },
            script: "echo 'extends = \"permissive\"' > b.toml",
            vars: no_vars,
        },
        Case {
            // The policy in the workspace and a second name for it beside it.
            name: "hardlink-in-workspace",
            setup: |env| {
                let p = env.ws.join("cfg/p.toml");
                put(&p, BASE);
                std::fs::hard_link(&p, env.ws.join("alias.toml")).expect("link");
                (s(&p), vec![p])
            },
            script: "echo 'extends = \"permissive\"' > alias.toml",
            vars: no_vars,
        },
        Case {
            // `..` after a directory of the workspace: the run makes that directory a link,
            // and `..` then leads into a tree of its own.
            name: "dotdot-after-directory",
            setup: |env| {
                let p = env.outside.join("p.toml");
                put(&p, BASE);
                std::fs::create_dir_all(env.ws.join("sub")).expect("sub");
                let spelled = env.ws.join("sub/../../outside/p.toml");
                (s(&spelled), vec![spelled])
            },
            script: "rmdir sub && mkdir -p evil/x/y evil/outside && ln -s evil/x/y sub && echo 'extends = \"permissive\"' > evil/outside/p.toml",
            vars: no_vars,
        },
        Case {
            // `..` after a link of the workspace (checked by its lexical form only, the link
            // was never seen).
            name: "dotdot-after-link",
            setup: |env| {
                let p = env.outside.join("p.toml");
                put(&p, BASE);
                std::fs::create_dir_all(env.outside.join("d")).expect("d");
                std::os::unix::fs::symlink(env.outside.join("d"), env.ws.join("sub")).expect("ln");
                let spelled = env.ws.join("sub/../p.toml");
                (s(&spelled), vec![spelled])
            },
            script: "rm sub && mkdir -p evil/d && ln -s evil/d sub && echo 'extends = \"permissive\"' > evil/p.toml",
            vars: no_vars,
        },
        Case {
            // The extended file named through a link in the workspace.
            name: "extends-through-link",
            setup: |env| {
                let p = env.outside.join("p.toml");
                put(&env.outside.join("lib/base.toml"), BASE);
                std::os::unix::fs::symlink(env.outside.join("lib"), env.ws.join("lib"))
                    .expect("ln");
                let spelled = env.ws.join("lib/base.toml");
                put(&p, &format!("extends = \"{}\"\n", spelled.display()));
                (s(&p), vec![p, spelled])
            },
            script: "rm lib && mkdir lib && echo 'extends = \"permissive\"' > lib/base.toml",
            vars: no_vars,
        },
        Case {
            // The rename of a parent: the policy's directory moved away, a new one put in
            // its place.
            name: "rename-parent",
            setup: |env| {
                let p = env.ws.join("cfg/p.toml");
                put(&p, BASE);
                (s(&p), vec![p])
            },
            script: "mv cfg cfg.old && mkdir cfg && echo 'extends = \"permissive\"' > cfg/p.toml",
            vars: no_vars,
        },
        Case {
            // The gateway's config named by GATEWAY_CONFIG, with a hard link in the workspace.
            name: "hardlink-config",
            setup: |env| {
                let c = env.outside.join("config.toml");
                put(&c, "policy = \"strict\"\n");
                std::fs::hard_link(&c, env.ws.join("c.toml")).expect("link");
                ("standard".into(), vec![c])
            },
            script: "echo 'policy = \"permissive\"' > c.toml",
            vars: |env| vec![("GATEWAY_CONFIG", env.outside.join("config.toml"))],
        },
        Case {
            // The default config (`~/.config/gateway/config.toml`, what `gateway serve` reads
            // too), with a hard link in the workspace.
            name: "hardlink-default-config",
            setup: |env| {
                let c = env.home.join(".config/gateway/config.toml");
                put(&c, "policy = \"strict\"\n");
                std::fs::hard_link(&c, env.ws.join("c.toml")).expect("link");
                ("standard".into(), vec![c])
            },
            script: "echo 'policy = \"permissive\"' > c.toml",
            vars: no_vars,
        },
    ]
}

sandbox_test! {
    fn no_spelling_lets_a_run_rewrite_what_decides_the_next_run_as_root() {
        check_all(false);
    }
}

sandbox_test! {
    fn no_spelling_lets_a_run_rewrite_what_decides_the_next_run_as_nobody() {
        check_all(true);
    }
}

sandbox_test! {
    // The file tools by every spelling: a hard link, `..`, a link, the rename or removal of
    // the policy's directory. Refused (120) or harmless: the policy keeps its content.
    fn no_spelling_lets_a_file_tool_rewrite_the_policy() {
        let mut failed = Vec::new();
        for nobody in [false, true] {
            let env = Env::new("next-fs");
            let inner = env.ws.join("cfg/p.toml");
            put(&inner, BASE);
            let outer = env.outside.join("p.toml");
            put(&outer, BASE);
            std::fs::hard_link(&inner, env.ws.join("alias-in.toml")).expect("link");
            std::fs::hard_link(&outer, env.ws.join("alias-out.toml")).expect("link");
            std::fs::create_dir_all(env.ws.join("sub")).expect("sub");
            std::os::unix::fs::symlink("cfg/p.toml", env.ws.join("lnk.toml")).expect("ln");
            if nobody {
                env.give_to_nobody();
            }
            for policy in [&inner, &outer] {
                let calls: Vec<Vec<&str>> = vec![
                    vec!["fs", "write", "alias-in.toml", "--content", EVIL],
                    vec!["fs", "write", "alias-out.toml", "--content", EVIL],
                    vec!["fs", "edit", "alias-in.toml", "--old", "standard", "--new", "permissive"],
                    vec!["fs", "edit", "alias-out.toml", "--old", "standard", "--new", "permissive"],
                    vec!["fs", "write", "sub/../cfg/p.toml", "--content", EVIL],
                    vec!["fs", "write", "lnk.toml", "--content", EVIL],
                    vec!["fs", "edit", "lnk.toml", "--old", "standard", "--new", "permissive"],
                    vec!["fs", "mv", "cfg", "cfg.old"],
                    vec!["fs", "rm", "cfg"],
                    vec!["fs", "mv", "cfg/p.toml", "cfg/q.toml"],
                ];
                for args in calls {
                    let o = env
                        .as_user(nobody)
                        .args(["--policy", policy.to_str().expect("utf-8")])
                        .args(&args)
                        .output()
                        .expect("run gateway");
                    // The policy in force (the other file is an ordinary file then). A move
                    // of its directory would leave the path free for a later `fs write`.
                    {
                        let p = policy;
                        let now = std::fs::read_to_string(p).unwrap_or_default();
                        if now != BASE {
                            failed.push(format!(
                                "nobody={nobody} --policy {} {args:?}: {} changed to {now:?}: {}",
                                policy.display(),
                                p.display(),
                                text(&o)
                            ));
                            put(p, BASE);
                        }
                    }
                }
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    }
}
