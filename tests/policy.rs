//! Policy decisions, `policy explain`/`check`, and bad input with its documented exit codes.

use crate::util::*;

sandbox_test! {
    fn policy_denies_destructive_commands() {
        let env = Env::new("deny");
        env.write("keep/a.txt", "keep");
        for argv in [
            vec!["rm", "-rf", "keep"],
            vec!["rm", "-fr", "keep"],
            vec!["rm", "-r", "-f", "keep"],
            vec!["/bin/rm", "-rf", "keep"],
            vec!["sh", "-c", "ls; rm -rf keep"],
            vec!["bash", "-c", "echo x && rm -rf keep"],
            vec!["sh", "-c", "$(echo rm) -rf keep"],
        ] {
            let o = env.exec("strict", &argv);
            assert_eq!(o.status.code(), Some(120), "{argv:?}: {}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("rule deny-rm-recursive-force"),
                "{argv:?}: {err}"
            );
            assert!(env.ws.join("keep/a.txt").exists());
        }
        // standard asks; without a terminal that means "not run", with its own exit code.
        let o = env.exec("standard", &["rm", "-rf", "keep"]);
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("no terminal"),
            "{}",
            text(&o)
        );
        assert!(env.ws.join("keep/a.txt").exists());
        let o = env.exec("standard", &["rm", "-rf", "/"]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
    }
}

#[test]
fn policy_explain_json_names_rules_and_sandbox() {
    let env = Env::new("explain");
    let o = env
        .cmd()
        .args([
            "--json",
            "policy",
            "explain",
            "--policy",
            "strict",
            "--",
            "sh",
            "-c",
            "ls; rm -rf ~",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["decision"]["effect"], "deny");
    let ids: Vec<&str> = v["decision"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert!(ids.contains(&"deny-rm-recursive-force"), "{ids:?}");
    assert_eq!(v["sandbox"]["network"], "none");
    assert!(v["sandbox"]["write"].as_array().expect("write").iter().any(|w| w.as_str() == Some(env.ws.canonicalize().expect("ws").to_str().expect("utf8"))));
    let o = env.cmd().args(["policy", "list"]).output().expect("run");
    let s = stdout(&o);
    assert!(
        s.contains("strict") && s.contains("standard") && s.contains("permissive"),
        "{s}"
    );
}

#[test]
fn policy_check_reports_file_line_column() {
    let env = Env::new("check");
    let p = env.policy_file("[[rule]]\nid = \"x\"\neffect = \"allow\"\nreason = \"r\"\ntools = [\"exec\"]\ncommand = [\"rm\", \"[\"]\n");
    let o = env
        .cmd()
        .args(["policy", "check", &p])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(123), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{p}:6:")), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    let good = env.policy_file("extends = \"strict\"\n");
    let o = env
        .cmd()
        .args(["policy", "check", &good])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

sandbox_test! {
    fn bad_input_gets_one_line_errors_and_documented_codes() {
        let env = Env::new("badinput");
        let bad = env.policy_file("[sandbox]\nnetwork = 5\n");
        let cases: Vec<(Vec<String>, i32, &str)> = vec![
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    bad.clone(),
                    "--".into(),
                    "true".into(),
                ],
                123,
                ":2:",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "nosuch".into(),
                    "--".into(),
                    "true".into(),
                ],
                123,
                "unknown policy `nosuch`",
            ),
            (
                vec!["exec".into(), "--policy".into(), "strict".into()],
                122,
                "required",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--".into(),
                    "no-such-program-xyz".into(),
                ],
                127,
                "command not found",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--cwd".into(),
                    "/".into(),
                    "--".into(),
                    "true".into(),
                ],
                122,
                "workspace",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--cwd".into(),
                    env.home.display().to_string(),
                    "--".into(),
                    "true".into(),
                ],
                122,
                "is not allowed",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--cwd".into(),
                    "/nonexistent-dir".into(),
                    "--".into(),
                    "true".into(),
                ],
                122,
                "--cwd",
            ),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--timeout".into(),
                    "-1".into(),
                    "--".into(),
                    "true".into(),
                ],
                122,
                "timeout",
            ),
            (vec!["exec".into(), "--bogus".into()], 122, "bogus"),
            (
                vec![
                    "exec".into(),
                    "--policy".into(),
                    "strict".into(),
                    "--".into(),
                    "/etc/hostname".into(),
                ],
                126,
                "cannot execute",
            ),
        ];
        std::fs::create_dir_all(env.home.join(".ssh")).expect("mkdir");
        for (args, code, needle) in cases {
            let o = env.cmd().args(&args).output().expect("run");
            let err = String::from_utf8_lossy(&o.stderr).to_string();
            assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
            assert!(err.contains(needle), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        }
    }
}

sandbox_test! {
    fn kernel_without_landlock_fails_closed() {
        // A wrapper installs a seccomp filter that makes landlock_create_ruleset fail with ENOSYS,
        // exactly what a kernel without landlock answers, then runs the gateway.
        let env = Env::new("nolandlock");
        let src = env.root.join("nolandlock.c");
        std::fs::write(
            &src,
            r#"#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <errno.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_create_ruleset, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog p = { sizeof f / sizeof f[0], f };
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p)) return 99;
        execv(argv[1], argv + 1);
        return 98;
}
"#,
        )
        .expect("write");
        let wrapper = env.root.join("nolandlock");
        gcc(&src, &wrapper, &[]);
        let o = env
            .raw(&wrapper)
            .args([BIN, "exec", "--policy", "strict", "--", "true"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(125), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("landlock") && err.contains("best_effort"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        // best_effort runs and says landlock was not applied.
        let p = env.policy_file("extends = \"strict\"\n[sandbox]\nbest_effort = true\n");
        let o = env
            .raw(&wrapper)
            .args([BIN, "--json", "exec", "--policy", &p, "--", "true"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["enforcement"]["landlock"]["fs"], false);
        assert!(
            v["enforcement"]["not_applied"]
                .to_string()
                .contains("landlock")
        );
    }
}

// Issue 14 item 10: a command that starts with `[` runs under standard (it was denied as
// disk destruction: the word `[` was taken for a glob that matches every program).
sandbox_test! {
    fn bracket_test_command_runs_and_glob_programs_match_only_their_names() {
        let env = Env::new("bracket");
        let o = env.sh("standard", "[ -d / ] && echo ok");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(stdout(&o).trim(), "ok", "{}", text(&o));
        let o = env.sh("strict", "[ -n x ] && [ ! -e nothing ] && echo yes");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(stdout(&o).trim(), "yes", "{}", text(&o));
        // A glob that can only be rm is still rm.
        env.write("keep/a.txt", "keep");
        let o = env.sh("standard", "/bin/r[m] -rf /");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(stderr(&o).contains("deny-rm-root-home"), "{}", text(&o));
        let o = env.sh("strict", "/bin/r[m] -rf keep");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(env.ws.join("keep/a.txt").exists());
    }
}

/// Issue 14 item 11: `find build -name '*.o' -delete` is not "deletes the whole system",
/// and an unknown program (`$echo x`) is not "formats disks"; built-in rules carry
/// examples that are checked when the policy loads.
#[test]
fn find_delete_and_unknown_programs_are_not_catastrophes() {
    let env = Env::new("finddel");
    let explain = |policy: &str, script: &str| {
        let o = env
            .cmd()
            .args([
                "--json", "policy", "explain", "--policy", policy, "--", "sh", "-c", script,
            ])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        json_of(&o)
    };
    let deny_ids = |v: &serde_json::Value| -> Vec<String> {
        v["decision"]["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .filter(|r| r["effect"] == "deny")
            .filter_map(|r| r["id"].as_str().map(String::from))
            .collect()
    };
    let v = explain("standard", "find build -name '*.o' -delete");
    assert_eq!(v["decision"]["effect"], "ask", "{v}");
    assert!(deny_ids(&v).is_empty(), "{v}");
    let v = explain("standard", "find / -delete");
    assert!(
        deny_ids(&v).contains(&"deny-rm-root-home".to_string()),
        "{v}"
    );
    let v = explain("standard", "$echo x");
    assert_eq!(v["decision"]["effect"], "ask", "{v}");
    assert!(deny_ids(&v).is_empty(), "{v}");
    let v = explain("strict", "$echo x");
    assert_eq!(v["decision"]["effect"], "deny", "{v}");
    // A user rule whose example contradicts it makes the policy fail to load, naming both.
    let p = env.policy_file(
        "extends = \"standard\"\n[[rule]]\nid = \"no-make\"\neffect = \"deny\"\ntools = [\"exec\"]\ncommand = [\"make\"]\nreason = \"r\"\nnot_match = [\"make -C sub\"]\n",
    );
    let o = env
        .cmd()
        .args(["policy", "check", &p])
        .output()
        .expect("run");
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    let err = stderr(&o);
    assert!(
        err.contains("no-make") && err.contains("make -C sub") && err.contains("policy.toml:8:"),
        "{err}"
    );
}

/// `gateway policy explain --json --policy POLICY -- sh -c SCRIPT`: the effect and the ids
/// of the rules with their reasons.
fn explain_sh(env: &Env, policy: &str, script: &str) -> (String, Vec<(String, String)>) {
    let o = env
        .cmd()
        .args([
            "--json", "policy", "explain", "--policy", policy, "--", "sh", "-c", script,
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{script}: {}", text(&o));
    let v = json_of(&o);
    let rules = v["decision"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or_default().to_string(),
                r["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    (
        v["decision"]["effect"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        rules,
    )
}

/// Issue 22 item 9: the destructive-git rules see what git will do, whatever the spelling:
/// abbreviated long options, short clusters, refspecs, `-d -f` for `-D`, global options
/// before the subcommand, the dashed form. Strict denies, standard asks.
#[test]
fn destructive_git_is_recognised_whatever_the_spelling() {
    let env = Env::new("git-spelling");
    for s in [
        "git reset --har",
        "git reset --h HEAD~1",
        "git reset HEAD~1 --hard",
        "git -C sub --no-pager -c user.name=x reset --hard",
        "git push origin +main",
        "git push origin :main",
        "git push origin main --force-w",
        "git push --prune origin",
        "git branch -d -f old",
        "git branch -df old",
        "git stash drop",
        "git checkout -f",
        "git checkout --forc main",
        "git clean -xdf",
        "git clean -fdx",
        "git clean -f -d",
        "git clean --forc",
        "git clean -i",
        "git switch --discard-changes main",
        "git reflog delete HEAD@{1}",
        "git worktree remove --force wt",
        "/usr/lib/git-core/git-reset --hard",
    ] {
        for (policy, want, id) in [
            ("strict", "deny", "deny-git-destructive"),
            ("standard", "ask", "ask-git-destructive"),
        ] {
            let (effect, rules) = explain_sh(&env, policy, s);
            assert_eq!(effect, want, "{policy}: {s}: {rules:?}");
            assert!(
                rules
                    .iter()
                    .any(|(i, r)| i == id && !r.starts_with("may match")),
                "{policy}: {s}: {rules:?}"
            );
        }
    }
}

/// Issue 22 item 9: what git will do cannot be known when the command line defines an
/// alias or configuration, the script sets git's environment, or the subcommand is not a
/// built-in (a user alias): the destructive-git rules then apply with the policy's
/// `unanalysable` effect (strict: deny, standard: ask), saying why. Everyday git stays
/// allowed under standard.
#[test]
fn git_aliases_config_and_environment_are_unanalysable_for_the_git_rules() {
    let env = Env::new("git-unsure");
    for s in [
        "git -c alias.x='reset --hard' x",
        "git -c clean.requireForce=false clean -d",
        "git -c core.pager='rm -rf .' log",
        "git --config-env=alias.x=X x",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0='reset --hard' git x",
        "env GIT_CONFIG_PARAMETERS=\"'alias.x=reset --hard'\" git x",
        "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=clean.requireForce GIT_CONFIG_VALUE_0=false; git clean -d",
        "GIT_DIR=/tmp/r/.git git status",
        "git --exec-path=/tmp status",
        "git undo-everything",
        "git stash $WHAT",
    ] {
        for (policy, want) in [("strict", "deny"), ("standard", "ask")] {
            let (effect, rules) = explain_sh(&env, policy, s);
            assert_eq!(effect, want, "{policy}: {s}: {rules:?}");
            assert!(
                rules
                    .iter()
                    .any(|(i, r)| i.ends_with("git-destructive") && r.contains("may match")),
                "{policy}: {s}: {rules:?}"
            );
        }
    }
    let (_, rules) = explain_sh(&env, "standard", "git -c alias.x='reset --hard' x");
    assert!(
        rules.iter().any(
            |(_, r)| r.contains("cannot analyse the git command line") && r.contains("alias.x")
        ),
        "{rules:?}"
    );
    for s in [
        "git status",
        "git log",
        "git diff",
        "git commit -m x",
        "git add -A",
        "git push origin main",
        "git branch -d merged",
        "git clean -n",
        "git checkout main",
        "git stash",
        "git stash pop",
        "git -c user.name=x -c user.email=y commit -m z",
        "GIT_AUTHOR_NAME=x git commit -m y",
        "git reset -- --hard",
    ] {
        let (effect, rules) = explain_sh(&env, "standard", s);
        assert_eq!(effect, "allow", "{s}: {rules:?}");
    }
}

/// Issue 22 item 9: a `git` pattern names a git command and its options by their full
/// names; a policy with a misspelt one does not load, and the error names the rule, the
/// line and the options git has.
#[test]
fn git_patterns_are_validated_against_git_option_tables() {
    let env = Env::new("git-schema");
    for (pattern, says) in [
        ("reset --har", "`--har` is not an option of git reset"),
        ("clean -f", "write `--force`"),
        ("rest --hard", "`rest` is not a built-in git command"),
        (
            "filter-branch --force",
            "no option table for `git filter-branch`",
        ),
    ] {
        let p = env.policy_file(&format!(
            "extends = \"standard\"\n[[rule]]\nid = \"no-git\"\neffect = \"deny\"\ntools = [\"exec\"]\nreason = \"r\"\ngit = [\"{pattern}\"]\n",
        ));
        let o = env
            .cmd()
            .args(["policy", "check", &p])
            .output()
            .expect("run");
        assert_ne!(o.status.code(), Some(0), "{pattern}: {}", text(&o));
        let err = stderr(&o);
        assert!(
            err.contains("no-git") && err.contains(says) && err.contains("policy.toml:7:"),
            "{pattern}: {err}"
        );
    }
    // A valid one works for user rules too, with examples checked at load.
    let p = env.policy_file(
        "extends = \"standard\"\n[[rule]]\nid = \"no-rebase-force\"\neffect = \"deny\"\ntools = [\"exec\"]\nreason = \"r\"\ngit = [\"push --force-with-lease\"]\nmatch = [\"git push --force-with origin\"]\nnot_match = [\"git push origin\"]\n",
    );
    let o = env
        .cmd()
        .args(["policy", "check", &p])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

sandbox_test! {
    fn exec_timeout_takes_a_duration_as_policies_do() {
        // `--timeout` takes what a policy's `timeout` takes: "30s" runs, "1s" stops a sleep.
        let env = Env::new("timeoutdur");
        let run = |t: &str, cmd: &[&str]| {
            let mut args = vec!["exec", "--policy", "strict", "--timeout", t, "--"];
            args.extend_from_slice(cmd);
            env.cmd().args(&args).output().expect("run")
        };
        for t in ["30s", "30", "2m", "9m 30s"] {
            let o = run(t, &["true"]);
            assert_eq!(o.status.code(), Some(0), "--timeout {t}: {}", text(&o));
        }
        // It may only narrow the policy's (strict: 10m): a longer one is refused.
        let o = run("1h 30m", &["true"]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(stderr(&o).contains("longer than 10m"), "{}", text(&o));
        let started = std::time::Instant::now();
        let o = run("1s", &["sleep", "30"]);
        assert_eq!(o.status.code(), Some(124), "{}", text(&o));
        assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
        for t in ["0s", "abc", "-2"] {
            let o = run(t, &["true"]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(122), "--timeout {t}: {}", text(&o));
            assert!(err.contains("--timeout") && err.contains("\"30s\""), "{t}: {err}");
        }
    }
}
