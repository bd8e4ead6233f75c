//! Issue 24: what a person is shown is what runs. A request or file name holding a carriage
//! return, an ESC sequence, a bidi override and a zero-width space is shown escaped in every
//! human view, and the argv shown (shell-quoted) reads back in bash as exactly the argv
//! that ran (the record's).

use crate::util::*;

/// What an attacker hides in a request: a comment that a CR and `ESC[2K` repaint as
/// `make test`, a right-to-left override and a zero-width space.
const SCRIPT: &str = "rm -r keep #\r\x1b[2Kmake test \u{202e}gpj.exe\u{200b}";
/// A file name with the same characters.
const NAME: &str = "note\u{202e}txt.sh\u{200b}\r\x1b[1m.md";

fn argv() -> Vec<String> {
    vec!["sh".into(), "-c".into(), SCRIPT.into()]
}

/// None of the raw characters reaches the terminal; their escapes do.
fn assert_escaped(shown: &str, what: &str) {
    for raw in ['\r', '\x1b', '\u{202e}', '\u{200b}'] {
        assert!(
            !shown.contains(raw),
            "{what}: the raw {raw:?} reached the terminal: {shown:?}"
        );
    }
    for esc in ["\\r", "\\x1b"] {
        assert!(shown.contains(esc), "{what}: no {esc} shown: {shown:?}");
    }
    assert!(
        shown.contains("\\u202e") || shown.contains("\\u{202e}"),
        "{what}: the bidi override is not shown: {shown:?}"
    );
    assert!(
        shown.contains("\\u200b") || shown.contains("\\u{200b}"),
        "{what}: the zero-width space is not shown: {shown:?}"
    );
}

/// The words bash reads from `shown` (what a person would paste).
fn bash_words(shown: &str) -> Vec<String> {
    let o = Command::new("bash")
        .args(["-c", &format!("printf '%s\\0' {shown}")])
        .env("LC_ALL", "C.UTF-8")
        .output()
        .expect("bash");
    assert!(o.status.success(), "bash could not read {shown:?}: {o:?}");
    let mut w: Vec<String> = String::from_utf8(o.stdout)
        .expect("utf-8")
        .split('\0')
        .map(str::to_string)
        .collect();
    w.pop();
    w
}

/// The part of `line` between `start` and `end`.
fn between<'a>(line: &'a str, start: &str, end: &str) -> &'a str {
    let a = line.find(start).map_or(0, |i| i + start.len());
    let b = line[a..].find(end).map_or(line.len(), |i| a + i);
    &line[a..b]
}

sandbox_test!(
    fn shown_pending_request_is_escaped_and_its_argv_is_what_runs() {
        let env = Env::new("shown-pending");
        std::fs::create_dir(env.ws.join("keep")).expect("mkdir keep");
        let pf = env.policy_file("extends = \"standard\"\n[approval]\ntimeout = \"60s\"\n");
        let d = Daemon::start(&env, &pf, &[]);
        let ch = d
            .cmd(&env)
            .arg("exec")
            .arg("--")
            .args(argv())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut shown = String::new();
        for _ in 0..500 {
            let o = d.cmd(&env).arg("pending").output().expect("pending");
            assert!(o.status.success(), "{}", text(&o));
            shown = stdout(&o);
            if !shown.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_escaped(&shown, "gateway pending");
        let line = shown.lines().next().expect("a pending line");
        let id = line.split_whitespace().next().expect("id").to_string();
        assert_eq!(bash_words(between(line, " risk  ", "  (in ")), argv());
        let o = d.cmd(&env).args(["deny", &id]).output().expect("deny");
        assert!(o.status.success(), "{}", text(&o));
        assert_escaped(&stderr(&o), "gateway deny");
        let o = ch.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert_escaped(&stderr(&o), "the not-approved error");
        assert!(env.ws.join("keep").exists(), "the denied request ran");
        let recs = log_records(&env);
        let rec = recs.iter().find(|r| r["tool"] == "exec").expect("record");
        assert_eq!(rec["args"], serde_json::json!(argv()));
    }
);

sandbox_test!(
    fn shown_terminal_prompt_is_escaped() {
        let env = Env::new("shown-tty");
        std::fs::create_dir(env.ws.join("keep")).expect("mkdir keep");
        let mut args = vec!["exec", "--policy", "standard", "--"];
        let a = argv();
        args.extend(a.iter().map(String::as_str));
        let (code, shown) = gw_on_tty(&env, &args, "n");
        assert_eq!(code, 121, "{shown}");
        // The terminal writes each newline as CR LF.
        let shown = shown.replace("\r\n", "\n");
        let prompt = between(&shown, "", "[y/N]");
        assert_escaped(prompt, "the terminal prompt");
        let line = prompt
            .lines()
            .find(|l| l.starts_with("  $ "))
            .expect("the command in the prompt");
        assert_eq!(bash_words(&line[4..]), argv());
        assert!(env.ws.join("keep").exists(), "the denied request ran");
    }
);

sandbox_test!(
    fn shown_denied_error_and_policy_explain_are_escaped() {
        let env = Env::new("shown-denied");
        let o = env.exec("strict", &["sh", "-c", SCRIPT]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let err = stderr(&o);
        assert_escaped(&err, "the denied error");
        let line = err
            .lines()
            .find(|l| l.contains("denied by policy"))
            .expect("the denied line");
        assert_eq!(bash_words(between(line, "`strict`: ", "\n")), argv());
        let o = env
            .cmd()
            .args(["policy", "explain", "--policy", "standard", "--"])
            .args(argv())
            .output()
            .expect("explain");
        assert!(o.status.success(), "{}", text(&o));
        assert_escaped(&stdout(&o), "policy explain");
    }
);

sandbox_test!(
    fn shown_log_history_and_trash_are_escaped() {
        let env = Env::new("shown-log");
        let o = env.exec(
            "permissive",
            &argv().iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(o.status.code().is_some(), "{}", text(&o));
        let recs = log_records(&env);
        let rec = recs.iter().find(|r| r["tool"] == "exec").expect("record");
        let seq = rec["seq"].to_string();
        let o = env.gw(&["log", "query", "--tool", "exec"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_escaped(&stdout(&o), "log query");
        let line = stdout(&o);
        let line = line.lines().last().expect("a row");
        let shown = &line[line.find(" sh ").expect("argv") + 1..];
        assert_eq!(bash_words(shown), argv());
        let o = env.gw(&["log", "tail"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_escaped(&stdout(&o), "log tail");
        let o = env.gw(&["log", "show", &seq]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(!stdout(&o).contains('\u{202e}'), "log show: {}", text(&o));
        assert!(!stdout(&o).contains('\u{200b}'), "log show: {}", text(&o));
        // A file name: history and the trash list.
        let o = env.gw(&["fs", "write", NAME, "--content", "x"]);
        assert!(o.status.success(), "{}", text(&o));
        let o = env.gw(&["fs", "rm", NAME]);
        assert!(o.status.success(), "{}", text(&o));
        let o = env.gw(&["history"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_escaped(&stdout(&o), "history");
        let o = env.gw(&["trash", "list"]);
        assert!(o.status.success(), "{}", text(&o));
        let shown = stdout(&o);
        assert_escaped(&shown, "trash list");
        let line = shown.lines().next().expect("an item");
        let path = line.rsplit("  ").next().expect("the original path");
        assert_eq!(
            bash_words(path),
            vec![env.ws.join(NAME).display().to_string()]
        );
    }
);

sandbox_test!(
    fn an_error_that_quotes_a_command_is_shown_escaped() {
        // Issue 24 attack: `gateway: command not found: NAME` (and every other error through
        // the CLI's `fail`) printed the program name raw, so an ESC sequence or a bidi
        // override in argv[0] reached the terminal.
        let env = Env::new("shown-error");
        let name = "nosuch #\r\x1b[2Kmake \u{202e}gpj\u{200b}";
        let o = env.gw(&["exec", "--", name]);
        assert_eq!(o.status.code(), Some(127), "{}", text(&o));
        assert!(stderr(&o).contains("not found"), "{}", text(&o));
        assert_escaped(&stderr(&o), "the command-not-found error");
    }
);

sandbox_test!(
    fn shown_file_names_in_the_file_tools_output_are_escaped_through_every_front_end() {
        // A file name is the agent's to choose: `fs glob`, `ls`, `grep` and what `write` and
        // `rm` say about it show it escaped — embedded, and rendered by a daemon's client.
        let env = Env::new("shown-fs-names");
        std::fs::write(env.ws.join(NAME), "needle\n").expect("write");
        let d = Daemon::start(&env, "standard", &[]);
        let through = |args: &[&str]| d.cmd(&env).args(args).output().expect("run");
        for (what, args) in [
            ("glob", vec!["fs", "glob", "*"]),
            ("ls", vec!["fs", "ls"]),
            ("grep", vec!["fs", "grep", "needle"]),
            ("grep -l", vec!["fs", "grep", "needle", "--mode", "files"]),
        ] {
            for (how, o) in [("embedded", env.gw(&args)), ("daemon", through(&args))] {
                assert!(o.status.success(), "{what} {how}: {}", text(&o));
                assert_escaped(&stdout(&o), &format!("{what} {how}"));
            }
        }
        let written = format!("w-{NAME}");
        for (how, o) in [
            (
                "embedded",
                env.gw(&["fs", "write", &written, "--content", "hi"]),
            ),
            ("daemon", through(&["fs", "rm", &written])),
        ] {
            assert!(o.status.success(), "{how}: {}", text(&o));
            assert_escaped(&stderr(&o), &format!("write/rm {how}"));
        }
    }
);
