use super::*;
use crate::model::{Effect, Tool, ToolCall};

fn env() -> ShellEnv {
    ShellEnv {
        home: "/home/u".into(),
        cwd: "/w".into(),
    }
}

fn exec(p: &Policy, argv: &[&str]) -> Decision {
    let call = ToolCall {
        tool: Tool::Exec,
        argv: argv.iter().map(|s| s.to_string()).collect(),
        paths: vec![],
        cwd: "/w".into(),
    };
    p.evaluate(&call, &env())
}

const RM_POLICY: &str = r#"
[[rule]]
id = "allow-all"
effect = "allow"
tools = ["exec"]
reason = "test"

[[rule]]
id = "no-rm-root"
effect = "deny"
tools = ["exec"]
command = ["rm", "-rf", "/"]
reason = "deletes the system"

[[rule]]
id = "ask-force-push"
effect = "ask"
command = ["git", "push", "--force*"]
reason = "rewrites history"
"#;

fn rm_policy() -> Policy {
    match Policy::from_str(RM_POLICY, "t.toml", "t", None) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn flag_order_and_path_independence() {
    let p = rm_policy();
    for argv in [
        vec!["rm", "-rf", "/"],
        vec!["rm", "-fr", "/"],
        vec!["rm", "-r", "-f", "/"],
        vec!["/bin/rm", "-rf", "/"],
        vec!["rm", "-R", "--force", "/"],
        vec!["rm", "--recursive", "-f", "//"],
        vec!["rm", "-rf", "/usr/.."],
        vec!["rm", "-rf", "--", "/"],
        vec!["rm", "-v", "-rf", "x", "/"],
    ] {
        let d = exec(&p, &argv);
        assert_eq!(d.effect, Effect::Deny, "{argv:?}");
        assert!(
            d.rules
                .iter()
                .any(|r| r.id == "no-rm-root" && r.reason == "deletes the system")
        );
    }
    for argv in [
        vec!["rm", "-r", "/"],
        vec!["rm", "-rf", "/tmp/x"],
        vec!["rm", "-f", "/"],
        vec!["ls", "-rf", "/"],
    ] {
        assert_eq!(exec(&p, &argv).effect, Effect::Allow, "{argv:?}");
    }
}

#[test]
fn shell_strings_check_every_simple_command() {
    let p = rm_policy();
    assert_eq!(exec(&p, &["sh", "-c", "ls; rm -rf /"]).effect, Effect::Deny);
    assert_eq!(
        exec(&p, &["bash", "-c", "echo x && rm -rf /"]).effect,
        Effect::Deny
    );
    assert_eq!(
        exec(&p, &["sh", "-c", "true | (cd x; rm -fr /)"]).effect,
        Effect::Deny
    );
    assert_eq!(
        exec(&p, &["sh", "-c", "echo $(rm -rf /)"]).effect,
        Effect::Deny
    );
    // Unresolvable program: the strictest applicable rule.
    let d = exec(&p, &["sh", "-c", "$(echo rm) -rf /"]);
    assert_eq!(d.effect, Effect::Deny);
    assert!(d.rules.iter().any(|r| r.id == "no-rm-root"));
    // Unresolvable argument.
    assert_eq!(
        exec(&p, &["sh", "-c", "rm -rf $TARGET"]).effect,
        Effect::Deny
    );
    assert_eq!(exec(&p, &["sh", "-c", "ls; echo ok"]).effect, Effect::Allow);
    assert_eq!(
        exec(&p, &["sh", "-c", "git push origin main --force-with-lease"]).effect,
        Effect::Ask
    );
}

#[test]
fn deny_beats_ask_beats_allow_and_default_denies() {
    let p = rm_policy();
    let d = exec(&p, &["sh", "-c", "git push --force; rm -rf /"]);
    assert_eq!(d.effect, Effect::Deny);
    let ids: Vec<&str> = d.rules.iter().map(|r| r.id.as_str()).collect();
    assert!(
        ids.contains(&"no-rm-root")
            && ids.contains(&"ask-force-push")
            && ids.contains(&"allow-all")
    );

    let empty = Policy::from_str("", "e.toml", "e", None).expect("empty policy parses");
    let d = exec(&empty, &["ls"]);
    assert_eq!(d.effect, Effect::Deny);
    assert_eq!(d.rules[0].id, "default-deny");
}

#[test]
fn unanalysable_falls_back_to_policy_setting() {
    for (setting, want) in [
        ("deny", Effect::Deny),
        ("ask", Effect::Ask),
        ("allow", Effect::Allow),
    ] {
        let text = format!("unanalysable = \"{setting}\"\n{RM_POLICY}");
        let p = Policy::from_str(&text, "t.toml", "t", None).expect("parses");
        let d = exec(&p, &["sh", "-c", "if then fi ("]);
        assert_eq!(d.effect, want, "{setting}");
        assert!(!d.unanalysable.is_empty());
        assert!(d.rules.iter().any(|r| r.id == "unanalysable"));
    }
}

#[test]
fn builtins_load_and_every_rule_has_a_reason() {
    for (name, _) in BUILTINS {
        let p = Policy::builtin(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!p.rules.is_empty());
        assert!(p.rules.iter().all(|r| !r.reason.is_empty()));
    }
}

#[test]
fn builtin_decisions() {
    let strict = Policy::builtin("strict").expect("strict");
    let standard = Policy::builtin("standard").expect("standard");
    let permissive = Policy::builtin("permissive").expect("permissive");
    assert_eq!(exec(&strict, &["ls", "-la"]).effect, Effect::Allow);
    assert_eq!(exec(&strict, &["rm", "-rf", "build"]).effect, Effect::Deny);
    assert_eq!(
        exec(&strict, &["sh", "-c", "ls; rm -rf ~"]).effect,
        Effect::Deny
    );
    assert_eq!(
        exec(&strict, &["git", "push", "--force"]).effect,
        Effect::Deny
    );
    assert_eq!(
        exec(&strict, &["chmod", "+x", "tests.sh"]).effect,
        Effect::Allow
    );
    assert_eq!(exec(&strict, &["chmod", "u+s", "x"]).effect, Effect::Deny);
    assert_eq!(exec(&standard, &["rm", "-rf", "build"]).effect, Effect::Ask);
    assert_eq!(exec(&standard, &["rm", "-rf", "/"]).effect, Effect::Deny);
    assert_eq!(exec(&standard, &["rm", "-rf", "~"]).effect, Effect::Deny);
    assert_eq!(
        exec(&standard, &["bash", "-c", "rm -fr $HOME"]).effect,
        Effect::Deny
    );
    assert_eq!(
        exec(&standard, &["git", "reset", "--hard"]).effect,
        Effect::Ask
    );
    assert_eq!(exec(&standard, &["cargo", "test"]).effect, Effect::Allow);
    assert_eq!(exec(&standard, &["sh"]).effect, Effect::Ask);
    assert_eq!(exec(&permissive, &["rm", "-rf", "/"]).effect, Effect::Allow);
    // Aliases change what later lines run: unanalysable, so strict denies and standard asks.
    assert_eq!(
        exec(&strict, &["sh", "-c", "alias r=rm\nr -rf /"]).effect,
        Effect::Deny
    );
    assert_eq!(
        exec(&standard, &["sh", "-c", "alias r=ls\nr"]).effect,
        Effect::Ask
    );
    assert_eq!(
        exec(&strict, &["sh", "-c", "trap 'rm -rf ~' EXIT; true"]).effect,
        Effect::Deny
    );
    // Bash-only syntax is outside the POSIX parser: unanalysable.
    assert_eq!(
        exec(&strict, &["bash", "-c", "cat <(rm -rf /)"]).effect,
        Effect::Deny
    );
}

#[test]
fn extends_appends_rules_and_overrides_scalars() {
    let text = r#"
extends = "strict"
unanalysable = "ask"
[sandbox]
read = ["/srv/data"]
[[rule]]
id = "deny-python"
effect = "deny"
tools = ["exec"]
command = ["python3"]
reason = "no python here"
"#;
    let p = Policy::from_str(text, "mine.toml", "mine", None).expect("parses");
    assert_eq!(p.unanalysable, Effect::Ask);
    assert!(p.sandbox.read.contains(&"/usr".to_string()));
    assert!(p.sandbox.read.contains(&"/srv/data".to_string()));
    assert_eq!(exec(&p, &["python3", "-c", "1"]).effect, Effect::Deny);
    assert_eq!(exec(&p, &["rm", "-rf", "x"]).effect, Effect::Deny);
    assert_eq!(exec(&p, &["ls"]).effect, Effect::Allow);
}

fn err(text: &str) -> String {
    match Policy::from_str(text, "bad.toml", "bad", None) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn validation_errors_have_positions() {
    let e = err("[[rule]]\nid = \"x\"\neffect = \"allow\"\n");
    assert!(
        e.starts_with("bad.toml:1:1:") && e.contains("reason"),
        "{e}"
    );
    let e = err("[[rule]]\nid = \"x\"\neffect = \"maybe\"\nreason = \"r\"\n");
    assert!(
        e.starts_with("bad.toml:3:10:") && e.contains("\"allow\""),
        "{e}"
    );
    let e = err("[sandbox]\nreed = [\"/\"]\n");
    assert!(e.starts_with("bad.toml:2:1:") && e.contains("reed"), "{e}");
    let e =
        err("[[rule]]\nid = \"x\"\neffect = \"deny\"\nreason = \"r\"\ncommand = [\"rm\", \"[\"]\n");
    assert!(e.starts_with("bad.toml:5:") && e.contains("glob"), "{e}");
    let e = err("[[rule]]\nid = \"x\"\neffect = \"deny\"\nreason = \"  \"\n");
    assert!(e.starts_with("bad.toml:4:") && e.contains("reason"), "{e}");
    let e = err("[sandbox]\nread = [\"${NOPE}/x\"]\n");
    assert!(e.starts_with("bad.toml:2:") && e.contains("NOPE"), "{e}");
    // `*` and `?` in any component are accepted (`.git/modules/*/config`); other glob syntax
    // is not.
    let e = err("[sandbox]\ndeny = [\"/a/[ab]/b\"]\n");
    assert!(e.contains("only `*` and `?`"), "{e}");
    let e = err("[sandbox]\nread = [\"relative/x\"]\n");
    assert!(e.contains("absolute"), "{e}");
    let e = err("[sandbox]\nnetwork = \"internet\"\n");
    assert!(e.starts_with("bad.toml:2:11:"), "{e}");
    let e = err("[sandbox.limits]\nmemory = \"lots\"\n");
    assert!(e.starts_with("bad.toml:2:"), "{e}");
    let e = err("[[rule]]\nid = \"x\"\neffect = \"deny\"\nreason = \"r\"\ntools = [\"exce\"]\n");
    assert!(e.contains("unknown tool `exce`"), "{e}");
    let e = err("extends = \"nope\"\n");
    assert!(e.contains("no such built-in"), "{e}");
    let e = err(
        "[[rule]]\nid = \"a\"\neffect = \"deny\"\nreason = \"r\"\n[[rule]]\nid = \"a\"\neffect = \"deny\"\nreason = \"r\"\n",
    );
    assert!(e.contains("defined twice"), "{e}");
    assert!(matches!(
        Policy::load("nosuch"),
        Err(PolicyError::UnknownName(_))
    ));
}

#[test]
fn limits_parse_units() {
    let p = Policy::from_str(
        "[sandbox.limits]\ntimeout = \"2m\"\nmemory = \"512MiB\"\nfile_size = 1024\npids = 10\n",
        "l.toml",
        "l",
        None,
    )
    .expect("parses");
    assert_eq!(
        p.sandbox.limits.timeout,
        Some(std::time::Duration::from_secs(120))
    );
    assert_eq!(p.sandbox.limits.memory, Some(512 << 20));
    assert_eq!(p.sandbox.limits.file_size, Some(1024));
    assert_eq!(p.sandbox.limits.pids, Some(10));
}

#[test]
fn normalize_paths() {
    assert_eq!(normalize("//"), "/");
    assert_eq!(normalize("/a/./b/../c/"), "/a/c");
    assert_eq!(normalize("/.."), "/");
}

#[test]
fn env_patterns() {
    assert!(env_match("*_TOKEN", "GITHUB_TOKEN"));
    assert!(!env_match("*_TOKEN", "TOKEN"));
    assert!(env_match("*SECRET*", "MY_SECRET_X"));
    assert!(env_match("*SECRET*", "SECRET"));
    assert!(env_match("LC_*", "LC_ALL"));
    assert!(!env_match("LC_*", "XLC_ALL"));
    assert!(env_match("PATH", "PATH"));
    assert!(!env_match("PATH", "PATHX"));
    assert!(env_match("*", "ANY"));
    assert!(env_match("A*B*C", "AxxBxxC"));
    assert!(!env_match("A*B*C", "AxxC"));
    assert!(!env_match("AB*BA", "ABA"));
    assert!(wildcard(".*history", ".bash_history"));
    assert!(wildcard("ssh_host_*_key", "ssh_host_rsa_key"));
    assert!(!wildcard("ssh_host_*_key", "ssh_host_rsa_key.pub"));
    assert!(wildcard("a?c", "abc") && !wildcard("a?c", "ac"));
    assert!(wildcard(".gateway*", ".gateway") && wildcard(".gateway*", ".gateway.toml"));
    for p in ALWAYS_SCRUB {
        assert!(
            p.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*'),
            "{p}"
        );
    }
    let e = err("[sandbox.env]\nallow = [\"A[B]\"]\n");
    assert!(e.starts_with("bad.toml:2:"), "{e}");
}

#[test]
fn fuzz_entries_survive_the_seed_corpus() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut n = 0;
    for (dir, f) in [
        ("policy_parse", fuzz_policy as fn(&[u8])),
        ("shell_analyse", fuzz_shell),
    ] {
        for e in std::fs::read_dir(root.join(dir)).expect("corpus dir") {
            let data = std::fs::read(e.expect("entry").path()).expect("read");
            f(&data);
            // Truncations and byte flips of each seed, as a quick smoke test.
            for cut in [
                0,
                data.len() / 3,
                data.len() / 2,
                data.len().saturating_sub(1),
            ] {
                f(&data[..cut]);
            }
            let mut flipped = data.clone();
            for i in (0..flipped.len()).step_by(7) {
                flipped[i] ^= 0x20;
            }
            f(&flipped);
            n += 1;
        }
    }
    assert!(n >= 8, "seed corpus too small: {n}");
}

#[test]
fn client_roots_narrow_decisions_and_never_widen() {
    let mut p = Policy::builtin("standard").expect("test setup");
    let read = |p: &Policy, path: &str| {
        p.evaluate(
            &ToolCall {
                tool: Tool::Read,
                argv: vec![],
                paths: vec![path.into()],
                cwd: "/w".into(),
            },
            &env(),
        )
    };
    // Without roots the policy alone decides.
    assert_eq!(read(&p, "/w/a.txt").effect, Effect::Allow);
    assert!(p.within_roots(Path::new("/anything")));
    p.narrow_to(vec!["/w/sub".into(), "/x".into()]);
    assert_eq!(read(&p, "/w/sub/a.txt").effect, Effect::Allow);
    let d = read(&p, "/w/a.txt");
    assert_eq!(d.effect, Effect::Deny);
    let r = d.deciding_rules().next().expect("test setup");
    assert_eq!(r.id, "client-roots");
    assert!(r.reason.contains("/w/sub, /x"), "{}", r.reason);
    // `..` cannot climb out of a root.
    assert_eq!(read(&p, "/w/sub/../a.txt").effect, Effect::Deny);
    // A prefix of a name is not a parent: /w/subway is not in /w/sub.
    assert_eq!(read(&p, "/w/subway/a").effect, Effect::Deny);
    // exec: the working directory must lie in a root.
    assert_eq!(exec(&p, &["ls"]).effect, Effect::Deny);
    let in_root = ToolCall {
        tool: Tool::Exec,
        argv: vec!["ls".into()],
        paths: vec![],
        cwd: "/w/sub".into(),
    };
    assert_eq!(p.evaluate(&in_root, &env()).effect, Effect::Allow);
    // A second narrowing keeps what lies in both; it cannot bring /w back.
    p.narrow_to(vec!["/w".into(), "/x/y".into()]);
    assert_eq!(
        p.sandbox.roots.as_deref().expect("test setup"),
        &[PathBuf::from("/w/sub"), PathBuf::from("/x/y")]
    );
    assert_eq!(read(&p, "/w/a.txt").effect, Effect::Deny);
    assert_eq!(read(&p, "/x/z").effect, Effect::Deny);
    assert_eq!(read(&p, "/x/y/z").effect, Effect::Allow);
    // Disjoint roots leave nothing.
    p.narrow_to(vec!["/elsewhere".into()]);
    assert_eq!(
        p.sandbox.roots.as_deref().expect("test setup"),
        &[] as &[PathBuf]
    );
    let d = read(&p, "/w/sub/a.txt");
    assert_eq!(d.effect, Effect::Deny);
    assert!(d.rules.iter().any(|r| r.reason.contains("(none)")));
}

#[test]
fn every_builtin_rule_has_match_and_not_match_examples() {
    for (name, _) in BUILTINS {
        let p = Policy::builtin(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        for r in &p.rules {
            assert!(
                !r.examples_match.is_empty() && !r.examples_not_match.is_empty(),
                "{name}: rule `{}` needs at least one `match` and one `not_match` example",
                r.id
            );
        }
    }
}

fn load_err(text: &str) -> String {
    match Policy::from_str(text, "u.toml", "u", None) {
        Ok(_) => panic!("loaded:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn examples_are_checked_at_load_for_user_policies_too() {
    let rule = |examples: &str| {
        format!(
            "[[rule]]\nid = \"no-make\"\neffect = \"deny\"\ntools = [\"exec\"]\ncommand = [\"make\"]\nreason = \"r\"\n{examples}\n"
        )
    };
    // Without examples, and with right ones, the policy loads.
    Policy::from_str(&rule(""), "u.toml", "u", None).expect("no examples");
    Policy::from_str(
        &rule("match = [\"make all\", [\"make\"]]\nnot_match = [\"[ -f x ] || touch x\", { tool = \"read\", path = \"/x\" }]"),
        "u.toml",
        "u",
        None,
    )
    .expect("right examples");
    for (examples, needle) in [
        (
            "match = [\"ls\"]",
            "example `ls` is under `match`, but the rule does not match it",
        ),
        (
            "not_match = [\"make -C x\"]",
            "example `make -C x` is under `not_match`, but the rule matches it",
        ),
        ("not_match = [\"$M x\"]", "the rule may match it"),
        ("match = [\"$M x\"]", "only may match it"),
        ("match = [\"if then\"]", "cannot be analysed"),
        ("match = [42]", "an example is shell text"),
        (
            "match = [{ tool = \"read\" }]",
            "a read example needs `path`",
        ),
        (
            "match = [{ tool = \"read\", path = \"x\" }]",
            "needs an absolute `path`",
        ),
        (
            "match = [{ tool = \"nope\", path = \"/x\" }]",
            "unknown tool `nope`",
        ),
    ] {
        let e = load_err(&rule(examples));
        assert!(e.starts_with("u.toml:7:"), "{examples}: {e}");
        assert!(
            e.contains("rule `no-make`") && e.contains(needle),
            "{examples}: {e}"
        );
    }
}

/// Items 10 and 11 of issue 14, and the hostile and ordinary spellings found around them.
#[test]
fn globs_and_unknown_words_match_only_what_they_can_be() {
    let strict = Policy::builtin("strict").expect("strict");
    let standard = Policy::builtin("standard").expect("standard");
    let permissive = Policy::builtin("permissive").expect("permissive");
    let sh = |p: &Policy, s: &str| exec(p, &["sh", "-c", s]);
    let denied_by = |d: &Decision, id: &str| {
        d.rules
            .iter()
            .any(|r| r.id == id && r.effect == Effect::Deny)
    };
    // `[` is a program, not a glob: ordinary tests run under every policy.
    for s in [
        "[ -d / ] && echo ok",
        "[ -n x ]",
        "[ ]",
        "[ -f x ] || touch x",
        "if [ -f x ]; then cat x; fi",
        "test -d /",
        "for f in *.c; do echo $f; done",
        "find . -name x -print",
        "git clean -n",
        "make clean",
        "cargo clean",
        "grep -r sudo .",
        "echo '*' \"?\" '['",
    ] {
        for p in [&strict, &standard, &permissive] {
            assert_eq!(
                sh(p, s).effect,
                Effect::Allow,
                "{}: {s}: {:?}",
                p.name,
                sh(p, s)
            );
        }
    }
    // `[[` is bash syntax the POSIX parser refuses: unanalysable, not "every program".
    let d = sh(&standard, "[[ -n x ]]");
    assert_eq!(d.effect, Effect::Ask, "{d:?}");
    assert!(
        d.rules
            .iter()
            .all(|r| r.id == "unanalysable" || r.effect == Effect::Allow)
    );
    // Item 11: find -delete removes under its starting points, not "/".
    let d = sh(&standard, "find build -name '*.o' -delete");
    assert_eq!(d.effect, Effect::Ask, "{d:?}");
    assert!(!denied_by(&d, "deny-rm-root-home"), "{d:?}");
    assert!(denied_by(
        &sh(&standard, "find / -delete"),
        "deny-rm-root-home"
    ));
    assert!(denied_by(
        &sh(&standard, "find -L ~ -name x -delete"),
        "deny-rm-root-home"
    ));
    // An unknown program is "cannot tell": standard asks, strict denies, never "formats disks".
    let d = sh(&standard, "$echo x");
    assert_eq!(d.effect, Effect::Ask, "{d:?}");
    assert!(!d.rules.iter().any(|r| r.effect == Effect::Deny), "{d:?}");
    assert_eq!(sh(&strict, "$echo x").effect, Effect::Deny);
    // Hostile spellings: certain when the word can be only `rm`, "cannot tell" otherwise.
    for s in [
        "/bin/r[m] -rf /",
        "r\\m -rf ~",
        "\"rm\" -rf /",
        "'r'm -rf /",
        "command rm -rf /",
        "env rm -rf /",
        "busybox rm -rf /",
        "/usr/bin/../bin/rm -rf /",
    ] {
        let d = sh(&standard, s);
        assert!(denied_by(&d, "deny-rm-root-home"), "{s}: {d:?}");
        assert_eq!(sh(&strict, s).effect, Effect::Deny, "{s}");
    }
    for s in [
        "/bin/r? -rf /",
        "./r* -rf ~",
        "$(printf rm) -rf /",
        "`echo rm` -rf /",
        "${X:-rm} -rf /",
        "$RM -rf /",
        "* -rf /",
        "rm -rf $TARGET",
        "echo / | xargs rm -rf",
    ] {
        assert_eq!(
            sh(&standard, s).effect,
            Effect::Ask,
            "{s}: {:?}",
            sh(&standard, s)
        );
        assert_eq!(sh(&strict, s).effect, Effect::Deny, "{s}");
    }
    // A glob that cannot expand to a rule's program does not match it.
    for s in ["./mk* x", "/bin/[!s]udo ls", "/usr/bin/ls? -l"] {
        let d = sh(&standard, s);
        assert!(
            !d.rules.iter().any(|r| r.id == "deny-privilege"),
            "{s}: {d:?}"
        );
    }
    assert!(
        sh(&standard, "./mk* x")
            .rules
            .iter()
            .any(|r| r.id == "deny-disk-destruction")
    );
    // One directory under / or ~ is not "the whole system or home directory"; the glob
    // words `/*` and `~/*` still are.
    for s in [
        "rm -rf ~/.cache",
        "rm -rf /tmp/x",
        "cd /tmp && rm -rf .",
        "rm -rf ~/old-project",
    ] {
        let d = sh(&standard, s);
        assert_eq!(d.effect, Effect::Ask, "{s}: {d:?}");
    }
    for s in ["rm -rf /*", "rm -rf ~/*", "rm -rf /var", "rm -rf /lib64"] {
        assert!(denied_by(&sh(&standard, s), "deny-rm-root-home"), "{s}");
    }
    // Quoted glob characters are literal: `'r?'` names the program `r?`, which is no rule's.
    assert_eq!(sh(&standard, "'r?' -rf /").effect, Effect::Allow);
    assert_eq!(sh(&standard, "'[' -d / ']'").effect, Effect::Allow);
}

#[test]
fn the_content_hash_covers_every_file_of_the_extends_chain() {
    // Issue 25: a pinned session records this hash; it must change with any byte of the
    // policy or of a file it extends, and only then.
    let d = std::env::temp_dir().join(format!("gateway-policy-hash-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    let base = d.join("base.toml");
    let top = d.join("top.toml");
    std::fs::write(&base, "extends = \"strict\"\n").expect("w");
    std::fs::write(&top, "extends = \"base.toml\"\n").expect("w");
    let p = Policy::load_file(&top).expect("load");
    assert_eq!(p.sha256.len(), 64, "{}", p.sha256);
    assert_eq!(
        p.source_sha256().expect("hash"),
        p.sha256,
        "unchanged files"
    );
    assert_eq!(Policy::load_file(&top).expect("load").sha256, p.sha256);
    // The extended file changes: the top file's hash changes.
    std::fs::write(&base, "extends = \"permissive\"\n").expect("w");
    let now = p.source_sha256().expect("hash");
    assert_ne!(now, p.sha256);
    assert_eq!(Policy::load_file(&top).expect("load").sha256, now);
    // The same bytes under another name are another policy.
    let other = d.join("other.toml");
    std::fs::write(&other, "extends = \"base.toml\"\n").expect("w");
    assert_ne!(Policy::load_file(&other).expect("load").sha256, now);
    // A built-in's hash is its text's; it never changes on disk.
    let s = Policy::builtin("strict").expect("strict");
    assert_eq!(s.source_sha256().expect("hash"), s.sha256);
    assert_ne!(
        s.sha256,
        Policy::builtin("standard").expect("standard").sha256
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn undo_max_state_bytes_is_parsed_and_checked() {
    let load = |t: &str| Policy::from_str(t, "t.toml", "t", None);
    let p = load("[undo]\nmax_state_bytes = \"512MiB\"\n").expect("valid");
    assert_eq!(p.undo.max_state_bytes, 512 << 20);
    assert_eq!(
        load("").expect("default").undo.max_state_bytes,
        2 << 30,
        "the default"
    );
    for bad in ["\"1KiB\"", "0", "\"lots\"", "-5"] {
        let e = load(&format!("[undo]\nmax_state_bytes = {bad}\n"))
            .err()
            .unwrap_or_else(|| panic!("{bad} accepted"));
        assert!(e.to_string().contains("max_state_bytes"), "{bad}: {e}");
    }
}

#[test]
fn undo_max_workspace_bytes_is_parsed_checked_and_defaults_to_half_the_store() {
    let load = |t: &str| Policy::from_str(t, "t.toml", "t", None);
    let p = load("[undo]\nmax_workspace_bytes = \"300MiB\"\n").expect("valid");
    assert_eq!(p.undo.workspace_quota(), 300 << 20);
    assert_eq!(load("").expect("default").undo.workspace_quota(), 1 << 30);
    let p = load("[undo]\nmax_state_bytes = \"64MiB\"\n").expect("valid");
    assert_eq!(p.undo.workspace_quota(), 32 << 20, "half of the store");
    let p = load("[undo]\nmax_state_bytes = \"64MiB\"\nmax_workspace_bytes = \"1GiB\"\n")
        .expect("valid");
    assert_eq!(
        p.undo.workspace_quota(),
        64 << 20,
        "never more than the store"
    );
    for bad in ["\"1KiB\"", "0", "\"lots\"", "-5"] {
        let e = load(&format!("[undo]\nmax_workspace_bytes = {bad}\n"))
            .err()
            .unwrap_or_else(|| panic!("{bad} accepted"));
        assert!(e.to_string().contains("max_workspace_bytes"), "{bad}: {e}");
    }
}

#[test]
fn the_proxy_network_is_parsed_and_its_rules_checked_where_written() {
    let p = Policy::from_str(
        "[sandbox]\nnetwork = { proxy = { allow = [\"example.com\", \"*.example.org\", \"localhost:3000\"], deny = [\"bad.example.org\"], unknown = \"ask\" } }\n",
        "p.toml",
        "p",
        None,
    )
    .unwrap();
    let crate::model::Network::Proxy(n) = &p.sandbox.network else {
        panic!("not proxy: {:?}", p.sandbox.network)
    };
    assert_eq!(n.allow.len(), 3);
    assert_eq!(n.deny, ["bad.example.org"]);
    assert_eq!(n.unknown, crate::model::Unknown::Ask);
    assert_eq!(n.rules.allow.len(), 3);
    // Defaults: nothing allowed, unknown denied.
    let p = Policy::from_str("[sandbox]\nnetwork = { proxy = {} }\n", "p.toml", "p", None).unwrap();
    let crate::model::Network::Proxy(n) = &p.sandbox.network else {
        panic!("not proxy")
    };
    assert!(n.allow.is_empty() && n.unknown == crate::model::Unknown::Deny);
    // A bad rule is pointed at where it is written.
    let e = err("[sandbox]\nnetwork = { proxy = { allow = [\"ok.test\", \"1.2.3\"] } }\n");
    assert!(
        e.starts_with("bad.toml:2:43:") && e.contains("1.2.3"),
        "{e}"
    );
    let e = err("[sandbox]\nnetwork = { proxy = { unknown = \"maybe\" } }\n");
    assert!(
        e.starts_with("bad.toml:2:") && e.contains("\"deny\" or \"ask\""),
        "{e}"
    );
    let e = err("[sandbox]\nnetwork = { proxy = { alow = [] } }\n");
    assert!(e.contains("unknown key `alow`"), "{e}");
    let e = err("[sandbox]\nnetwork = { proxy = { allow = \"example.com\" } }\n");
    assert!(e.contains("array"), "{e}");
    let e = err("[sandbox]\nnetwork = { proxy = { allow = [3] } }\n");
    assert!(e.contains("not a string"), "{e}");
}
