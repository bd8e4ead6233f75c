//! The git reader against git's own parsing, the pattern checks and the discards list.

use super::*;
use crate::policy::shell::{ShellEnv, analyse_script};

fn parse_text(s: &str) -> Parsed {
    let env = ShellEnv {
        home: "/h".into(),
        cwd: "/w".into(),
    };
    let a = analyse_script(s, &env);
    let cmd = a.commands.last().expect("a command").clone();
    parse(&cmd, || true)
}

fn opts(s: &str) -> Vec<String> {
    match parse_text(s) {
        Parsed::Call(c) => {
            assert!(!c.wild, "{s}: wild");
            c.options.into_iter().collect()
        }
        other => panic!("{s}: {other:?}"),
    }
}

#[test]
fn every_table_spec_reads_back() {
    for (key, specs) in TABLES {
        for s in *specs {
            let o = Opt::parse(s);
            assert!(o.short.is_some() || o.long.is_some(), "{key}: {s}");
            for i in &o.implies {
                let t = table(key).expect("table");
                assert!(
                    t.iter().any(|x| x.long == Some(i)),
                    "{key}: {s} implies {i}"
                );
            }
        }
        let first = key.split(' ').next().unwrap_or(key);
        assert!(COMMANDS.contains(&first), "{key}");
    }
}

#[test]
fn long_options_are_abbreviated_and_negated_as_git_does() {
    assert_eq!(opts("git reset --har"), vec!["hard"]);
    assert_eq!(opts("git reset --h"), vec!["hard"]);
    assert_eq!(opts("git clean --forc"), vec!["force"]);
    assert_eq!(opts("git push --force-w"), vec!["force-with-lease"]);
    assert_eq!(
        opts("git push --force --no-force origin x"),
        Vec::<String>::new()
    );
    assert_eq!(opts("git clean -f --no-forc"), Vec::<String>::new());
    assert_eq!(
        opts("git push --force-with-lease=main:abc"),
        vec!["force-with-lease"]
    );
    assert_eq!(opts("git push --verify"), Vec::<String>::new());
    assert_eq!(opts("git push --no-verify"), vec!["no-verify"]);
    assert_eq!(opts("git reset HEAD~1 --hard"), vec!["hard"]);
    assert_eq!(opts("git reset -- --hard"), Vec::<String>::new());
    assert_eq!(opts("git gc --prune=now"), vec!["prune"]);
    // Ambiguous (`--forc`: force, force-with-lease, force-if-includes): git
    // refuses, an older git might not; unknown: a newer git might know it.
    for s in [
        "git push --forc origin",
        "git push --frobnicate",
        "git clean -z",
    ] {
        match parse_text(s) {
            Parsed::Call(c) => assert!(c.wild, "{s}"),
            other => panic!("{s}: {other:?}"),
        }
    }
}

#[test]
fn short_clusters_values_and_implied_options() {
    assert_eq!(opts("git clean -xdf"), vec!["-d", "-x", "force"]);
    assert_eq!(opts("git clean -f -d"), vec!["-d", "force"]);
    // `-e` takes the rest of the cluster, or the next word, as its value.
    assert_eq!(opts("git clean -efx"), vec!["exclude"]);
    assert_eq!(opts("git clean -e -f -n"), vec!["dry-run", "exclude"]);
    assert_eq!(opts("git branch -D x"), vec!["-D", "delete", "force"]);
    assert_eq!(opts("git branch -d -f x"), vec!["delete", "force"]);
    assert_eq!(opts("git branch -d merged"), vec!["delete"]);
    assert_eq!(opts("git push origin +main"), vec!["force"]);
    assert_eq!(opts("git push origin :main"), vec!["delete"]);
    assert_eq!(opts("git push origin :"), Vec::<String>::new());
    assert_eq!(opts("git push --mirror"), vec!["force", "mirror"]);
    assert_eq!(
        opts("git update-ref -m x -d refs/heads/x"),
        vec!["-d", "-m"]
    );
}

#[test]
fn global_options_are_skipped_or_unsure() {
    assert_eq!(opts("git -C sub --no-pager -p reset --hard"), vec!["hard"]);
    assert_eq!(
        opts("git -c user.name=x -c color.ui=never reset --hard"),
        vec!["hard"]
    );
    assert_eq!(opts("/usr/lib/git-core/git-reset --hard"), vec!["hard"]);
    for s in [
        "git -c alias.x='reset --hard' x",
        "git -c alias.st=status status",
        "git -c core.pager=sh log",
        "git -c clean.requireForce=false clean -d",
        "git --config-env=alias.x=V x",
        "git --exec-path=/tmp status",
        "git --git-dir=/tmp/r/.git clean -d",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0=reset git x",
        "env GIT_CONFIG_PARAMETERS=x git status",
        "export GIT_DIR=/tmp/x; git status",
        "git lg",
        "git whatchanged",
        "git $SUB --hard",
        "git stash $X",
        "git --frob status",
    ] {
        assert!(
            matches!(parse_text(s), Parsed::Unsure(_)),
            "{s}: {:?}",
            parse_text(s)
        );
    }
    for s in [
        "git --version",
        "git",
        "git -C",
        "git --exec-path",
        "gitk",
        "ls",
    ] {
        assert_eq!(parse_text(s), Parsed::NotGit, "{s}");
    }
    assert!(matches!(
        parse_text("GIT_AUTHOR_NAME=x git commit -m y"),
        Parsed::Call(_)
    ));
}

#[test]
fn patterns_are_checked_against_the_tables() {
    assert!(GitPattern::compile("reset --hard").is_ok());
    assert!(GitPattern::compile("update-ref -d").is_ok());
    assert!(GitPattern::compile("stash drop").is_ok());
    assert!(GitPattern::compile("branch --delete --force").is_ok());
    for (bad, says) in [
        ("rest --hard", "not a built-in"),
        ("reset --har", "not an option of git reset"),
        ("clean -f", "write `--force`"),
        ("filter-branch --force", "no option table"),
        ("git reset", "without `git`"),
        ("reset HEAD", "not an option"),
        ("", "names a command"),
    ] {
        let e = GitPattern::compile(bad).expect_err(bad);
        assert!(e.contains(says), "{bad}: {e}");
    }
    let p = [GitPattern::compile("stash drop").expect("p")];
    assert!(matches(&p, &parse_text("git stash drop"), false));
    assert!(!matches(&p, &parse_text("git stash pop"), true));
    assert!(!matches(&p, &parse_text("git stash"), true));
    let p = [GitPattern::compile("reset --hard").expect("p")];
    assert!(!matches(&p, &parse_text("git reset $X"), false));
    assert!(matches(&p, &parse_text("git reset $X"), true));
    assert!(!matches(&p, &parse_text("git reset --soft HEAD~1"), true));
}

fn discards_text(s: &str) -> bool {
    matches(discards(), &parse_text(s), true)
}

#[test]
fn discards_are_every_git_command_that_throws_uncommitted_work_away() {
    assert_eq!(discards().len(), DISCARDS.len(), "every pattern compiles");
    for s in [
        "git checkout -- .",
        "git checkout -- a.txt b/c",
        "git checkout .",
        "git checkout ./src",
        "git checkout .gitignore",
        "git checkout 'src/*.rs'",
        "git checkout HEAD -- x",
        "git checkout HEAD~1 x",
        "git checkout main a b",
        "git checkout -p",
        "git checkout --ours -- x",
        "git checkout --pathspec-from-file=list",
        "git checkout -f",
        "git checkout --forc main",
        "git restore .",
        "git restore x",
        "git restore --worktree x",
        "git restore -W x",
        "git restore --wor x",
        "git restore --staged --worktree x",
        "git restore -SW x",
        "git restore --source=HEAD~2 x",
        "git restore -p",
        "git stash drop",
        "git stash drop stash@{1}",
        "git stash clear",
        "git clean -f",
        "git clean --force",
        "git clean --forc",
        "git clean -fd",
        "git clean -xdf",
        "git clean -dfx",
        "git clean -f -d",
        "git clean -ffx",
        "git clean -i",
        "git switch --discard-changes main",
        "git switch -f main",
        "git reset --hard",
        "git reset --har HEAD~1",
        "git reset --merge",
        "git reset --keep HEAD~1",
        "git -C sub checkout -- .",
        "git -c user.name=x restore .",
        "git --no-pager clean -fd",
        "/usr/lib/git-core/git-checkout -- x",
        "git-restore .",
        "git worktree remove --force wt",
        "git branch -D old",
        // What cannot be analysed may discard.
        "git stash $WHAT",
        "git checkout -- $F",
        "git -c alias.x='checkout -- .' x",
        "git lg",
    ] {
        assert!(discards_text(s), "{s}: {:?}", parse_text(s));
    }
    for s in [
        "git checkout main",
        "git checkout -b x",
        "git checkout -b x origin/x",
        "git checkout -b fix origin/v1.2",
        "git checkout -",
        "git checkout HEAD~1",
        "git checkout main --",
        "git checkout origin/feature/x",
        "git checkout",
        "git switch main",
        "git switch -c topic",
        "git restore --staged x",
        "git restore -S x",
        "git restore --staged --no-worktree x",
        "git restore --worktree",
        "git stash",
        "git stash push -m x",
        "git stash pop",
        "git stash list",
        "git clean -n",
        "git clean -nd",
        "git clean -d",
        "git clean -f --no-force",
        "git reset",
        "git reset --soft HEAD~1",
        "git reset HEAD -- x",
        "git reset -- --hard",
        "git status",
        "git diff -- .",
        "git add .",
        "git commit -m x",
        "git branch -d merged",
        "git worktree remove wt",
        "echo git checkout -- .",
    ] {
        assert!(!discards_text(s), "{s}: {:?}", parse_text(s));
    }
    // A lone operand that looks like a file name is a path unless a revision of that name
    // exists: it may discard (and is snapshotted); a branch-like name does not.
    assert!(discards_text("git checkout README.md"));
    assert!(!matches(
        discards(),
        &parse_text("git checkout README.md"),
        false
    ));
    // Wrappers the shell analysis sees through.
    let env = ShellEnv {
        home: "/h".into(),
        cwd: "/w".into(),
    };
    let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for a in [
        argv(&["git", "checkout", "--", "."]),
        argv(&["env", "A=1", "git", "restore", "."]),
        argv(&["sh", "-c", "cd sub && git clean -fdx"]),
        argv(&["bash", "-c", "git stash && git stash drop"]),
        argv(&["/usr/bin/git", "-C", "d", "reset", "--hard"]),
    ] {
        assert!(crate::policy::discards_git_work(&a, &env), "{a:?}");
    }
    for a in [
        argv(&["git", "checkout", "main"]),
        argv(&["sh", "-c", "git status && git restore --staged x"]),
        argv(&["env", "A=1", "git", "clean", "-n"]),
        argv(&["echo", "git", "checkout", "--", "."]),
    ] {
        assert!(!crate::policy::discards_git_work(&a, &env), "{a:?}");
    }
}

#[test]
fn discards_cover_what_strict_denies_in_the_repository() {
    // Strict's rule denies what an agent should not do; what of it happens in the local
    // repository (not a push) is snapshotted under every policy.
    let strict = crate::policy::Policy::builtin("strict").expect("strict");
    let rule = strict
        .rules
        .iter()
        .find(|r| r.id == "deny-git-destructive")
        .expect("rule");
    for s in rule.examples_match.iter().filter(|s| !s.contains("push")) {
        assert!(discards_text(s), "{s}");
    }
    // And strict does not deny the ordinary discards.
    for s in [
        "git checkout -- x",
        "git checkout .",
        "git restore .",
        "git reset --merge",
    ] {
        assert!(
            !matches(
                rule.git.as_deref().unwrap_or_default(),
                &parse_text(s),
                true
            ),
            "{s}"
        );
    }
}

#[test]
fn paths_patterns_read_checkout_and_restore_operands_as_git_does() {
    let paths = |s: &str| match parse_text(s) {
        Parsed::Call(c) => c.paths,
        other => panic!("{s}: {other:?}"),
    };
    assert_eq!(paths("git checkout -- x"), Paths::Yes);
    assert_eq!(paths("git checkout --end-of-options -- x"), Paths::Yes);
    assert_eq!(paths("git checkout main -- x"), Paths::Yes);
    assert_eq!(paths("git checkout main --"), Paths::No);
    assert_eq!(paths("git checkout main"), Paths::No);
    assert_eq!(paths("git checkout v1.2"), Paths::Maybe);
    assert_eq!(paths("git checkout /abs/x"), Paths::Yes);
    assert_eq!(paths("git checkout dir/"), Paths::Yes);
    assert_eq!(paths("git restore x"), Paths::Yes);
    assert_eq!(paths("git restore"), Paths::No);
    assert_eq!(paths("git reset --hard -- x"), Paths::No);
    let p = [GitPattern::compile("checkout <paths>").expect("p")];
    assert!(!matches(&p, &parse_text("git checkout v1.2"), false));
    assert!(matches(&p, &parse_text("git checkout v1.2"), true));
    assert!(!matches(&p, &parse_text("git checkout main"), true));
    assert!(GitPattern::compile("restore --staged <paths>").is_ok());
    let e = GitPattern::compile("reset --hard <paths>").expect_err("reset");
    assert!(
        e.contains("`<paths>` is known for git checkout and git restore only"),
        "{e}"
    );
    let e = GitPattern::compile("clean <path>").expect_err("clean");
    assert!(e.contains("not an option"), "{e}");
}
