//! The CLI explaining itself: examples in every `--help`, exit codes, completions, the man
//! page, typo suggestions, no hidden subcommand in usage errors.

use crate::util::*;

fn gw(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("GATEWAY_SOCKET")
        .stdin(Stdio::null())
        .output()
        .expect("gateway")
}

/// The subcommands `--help` of `path` lists (without `help`).
fn subcommands(path: &[&str]) -> Vec<String> {
    let mut args = path.to_vec();
    args.push("--help");
    let o = gw(&args);
    assert!(o.status.success(), "{path:?} --help: {}", text(&o));
    stdout(&o)
        .split("\nCommands:\n")
        .nth(1)
        .map(|s| {
            s.lines()
                .take_while(|l| l.starts_with("  "))
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| *n != "help")
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_subcommands_help_shows_an_example() {
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    let mut seen = 0;
    let mut missing = Vec::new();
    while let Some(path) = todo.pop() {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        let mut args = p.clone();
        args.push("--help");
        let help = stdout(&gw(&args));
        let name = std::iter::once("gateway")
            .chain(p.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        // An "Examples:" section whose first example is this very command.
        let examples = help.split("\nExamples:\n").nth(1).unwrap_or("");
        let ok = examples
            .lines()
            .take_while(|l| l.starts_with("  "))
            .any(|l| l.contains(&format!("{name} ")) || l.trim_end().ends_with(&name));
        if !ok {
            missing.push(name.clone());
        }
        seen += 1;
        for sub in subcommands(&p) {
            let mut next = path.clone();
            next.push(sub);
            todo.push(next);
        }
    }
    assert!(seen > 40, "only {seen} subcommands found");
    assert!(missing.is_empty(), "no example in the help of: {missing:?}");
}

#[test]
fn help_exit_codes_lists_every_documented_code() {
    let o = gw(&["help", "exit-codes"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = stdout(&o);
    for code in [
        "1", "119", "120", "121", "122", "123", "124", "125", "126", "127", "128+N",
    ] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().next() == Some(code)),
            "{code} missing: {out}"
        );
    }
    // The top-level help says where they are.
    assert!(stdout(&gw(&["--help"])).contains("gateway help exit-codes"));
}

#[test]
fn completions_are_generated_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "complete -F _gateway"),
        ("zsh", "#compdef gateway"),
        ("fish", "complete -c gateway"),
    ] {
        let o = gw(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", text(&o));
        let script = stdout(&o);
        assert!(script.contains(marker), "{shell}: no `{marker}`");
        for sub in [
            "exec", "policy", "explain", "log", "verify", "fs", "edit", "undo", "man",
        ] {
            assert!(
                script.contains(sub),
                "{shell}: no `{sub}` in the completions"
            );
        }
        assert!(
            !script.contains("probe"),
            "{shell}: the hidden `fs probe` is offered"
        );
    }
    // The bash script is valid bash.
    let dir = Env::new("completions");
    let f = dir.root.join("gateway.bash");
    std::fs::write(&f, gw(&["completions", "bash"]).stdout).expect("write");
    let o = Command::new("bash")
        .arg("-n")
        .arg(&f)
        .output()
        .expect("bash");
    assert!(o.status.success(), "bash -n: {}", text(&o));
    // An unknown shell is a usage error naming the valid ones.
    let o = gw(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(122), "{}", text(&o));
    assert!(stderr(&o).contains("bash"), "{}", text(&o));
}

#[test]
fn man_page_has_exit_status_and_examples() {
    let o = gw(&["man"]);
    assert!(o.status.success(), "{}", text(&o));
    let page = stdout(&o);
    assert!(
        page.contains("\n.TH gateway 1 "),
        "no title: {}",
        &page[..200.min(page.len())]
    );
    let exit = page
        .split(".SH \"EXIT STATUS\"\n")
        .nth(1)
        .expect("an EXIT STATUS section");
    let exit = exit.split("\n.SH ").next().unwrap_or(exit);
    for code in ["120", "122", "124", "127"] {
        assert!(
            exit.contains(&format!("\\fB{code}\\fR")),
            "{code} missing: {exit}"
        );
    }
    assert!(page.contains(".SH EXAMPLES\n"), "no EXAMPLES section");
    assert!(
        page.contains("\\fBgateway exec \\-\\- cargo test\\fR"),
        "no exec example"
    );
    assert!(page.contains(".SH SYNOPSIS"), "no synopsis");
}

#[test]
fn a_mistyped_subcommand_gets_a_suggestion() {
    let o = gw(&["exce", "--", "true"]);
    assert_eq!(o.status.code(), Some(122), "{}", text(&o));
    let err = stderr(&o);
    assert!(err.contains("'exce'") && err.contains("'exec'"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let o = gw(&["log", "verfy"]);
    assert_eq!(o.status.code(), Some(122), "{}", text(&o));
    assert!(stderr(&o).contains("'verify'"), "{}", text(&o));
    let o = gw(&["exec", "--timout", "3", "--", "true"]);
    assert_eq!(o.status.code(), Some(122), "{}", text(&o));
    assert!(stderr(&o).contains("'--timeout'"), "{}", text(&o));
}

#[test]
fn fs_usage_error_does_not_list_the_hidden_probe() {
    let o = gw(&["fs", "--cwd", "/tmp"]);
    assert_eq!(o.status.code(), Some(122), "{}", text(&o));
    let err = stderr(&o);
    assert!(err.contains("requires a subcommand"), "{err}");
    assert!(err.contains("rm, mkdir"), "{err}");
    assert!(!err.contains("probe"), "the hidden probe is listed: {err}");
    assert!(!stdout(&gw(&["fs", "--help"])).contains("probe"));
}

sandbox_test!(
    fn completions_and_man_run_in_the_client_when_a_daemon_serves() {
        // Documentation of the binary the user runs: not of the daemon's, and never through it.
        let env = Env::new("help-daemon");
        let d = Daemon::start(&env, "standard", &[]);
        let o = d.cmd(&env).args(["man"]).output().expect("man");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains(".SH \"EXIT STATUS\""), "{}", text(&o));
        let o = d
            .cmd(&env)
            .args(["completions", "zsh"])
            .output()
            .expect("completions");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("#compdef gateway"), "{}", text(&o));
    }
);
