//! Human output that reads well (issue 15): no Rust debug text where a person looks, durations
//! and sizes in human units, aligned columns in the list outputs, colour on a terminal only
//! and never with `NO_COLOR`.

use crate::util::*;
use std::process::Command;

/// Rust's debug text: `Some(..)`, `None`, `Limits { timeout: .. }`, a debug `Duration`.
fn debug_text(s: &str) -> Vec<String> {
    let re = regex::Regex::new(
        r"\bSome\(|\bNone\b|\b[A-Z]\w* \{ \w+: |\d+(\.\d+)?(s|ms|µs|ns) \}|Redact\b|Loopback\b",
    )
    .expect("regex");
    s.lines()
        .filter(|l| re.is_match(l))
        .map(str::to_string)
        .collect()
}

sandbox_test!(
    fn human_output_has_no_debug_text() {
        // The check sees what was printed before (issue 15's examples), and not what is now.
        for l in [
            "  network    None",
            "  limits     Limits { timeout: Some(600s), cpu: None }",
            "retention:   artifacts_max_age Some(2592000) s",
            "secrets:   output Redact, input Deny",
        ] {
            assert!(!debug_text(l).is_empty(), "{l}");
        }
        assert!(debug_text("  network    none (no sockets but Unix socket pairs)").is_empty());
        let env = Env::new("human-debug");
        env.write("a.txt", "a\n");
        let o = env.exec("standard", &["true"]);
        assert!(o.status.success(), "{}", text(&o));
        let runs: &[&[&str]] = &[
            &["--policy", "strict", "policy", "explain", "--", "ls"],
            &["--policy", "standard", "policy", "explain", "--", "ls"],
            &[
                "--policy",
                "permissive",
                "policy",
                "explain",
                "--",
                "curl",
                "x",
            ],
            &["config", "show"],
            &["fs", "write", "b.txt", "--content", "b\n"],
            &["history"],
            &["log", "query"],
            &["trash", "list"],
            &["policy", "list"],
        ];
        let mut bad = Vec::new();
        for args in runs {
            let o = env.gw(args);
            assert!(o.status.success(), "{args:?}: {}", text(&o));
            // What the person sees: stdout and stderr (not `text`'s own `status=Some(0)`).
            for l in debug_text(&format!("{}\n{}", stdout(&o), stderr(&o))) {
                bad.push(format!("{args:?}: {l}"));
            }
        }
        assert!(
            bad.is_empty(),
            "debug text in human output:\n{}",
            bad.join("\n")
        );
        // In human units: the standard policy's 30-day artifact age, its 1 GiB budget.
        let o = env.gw(&["config", "show"]);
        let t = stdout(&o);
        assert!(
            t.contains("artifacts_max_age 30d") && t.contains("artifacts_max_total 1 GiB"),
            "{t}"
        );
        let o = env.gw(&["--policy", "strict", "policy", "explain", "--", "ls"]);
        let t = stdout(&o);
        assert!(t.contains("limits     timeout 10m,"), "{t}");
    }
);

/// The column at which `word` starts in `line` (in characters).
fn column_of(line: &str, word: &str) -> Option<usize> {
    line.find(word).map(|b| line[..b].chars().count())
}

sandbox_test!(
    fn list_outputs_are_aligned_tables() {
        let env = Env::new("human-table");
        env.write("a.txt", "a\n");
        let o = env.exec("standard", &["true"]);
        assert!(o.status.success(), "{}", text(&o));
        for args in [
            &["fs", "write", "b.txt", "--content", "bb\n"][..],
            &["fs", "mkdir", "dir"][..],
            &["fs", "rm", "a.txt"][..],
        ] {
            let o = env.gw(args);
            assert!(o.status.success(), "{args:?}: {}", text(&o));
        }
        // log query: the decision column starts at one place whatever the tool's name.
        let o = env.gw(&["log", "query"]);
        let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
        assert!(lines.len() >= 4, "{}", text(&o));
        let cols: Vec<Option<usize>> = lines.iter().map(|l| column_of(l, " allow ")).collect();
        assert!(
            cols.iter().all(|c| c.is_some() && *c == cols[0]),
            "the decision column moves: {cols:?}\n{}",
            lines.join("\n")
        );
        // history: the path column lines up across tools of different lengths.
        let o = env.gw(&["history"]);
        let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
        assert!(lines.len() >= 3, "{}", text(&o));
        let ws = env.ws.display().to_string();
        let cols: Vec<Option<usize>> = lines.iter().map(|l| column_of(l, &ws)).collect();
        assert!(
            cols.iter().all(|c| c.is_some() && *c == cols[0]),
            "the path column moves: {cols:?}\n{}",
            lines.join("\n")
        );
    }
);

/// Runs gateway on a pseudo-terminal (python3's pty) with `envs` set; returns what the
/// terminal showed.
fn on_tty(env: &Env, args: &[&str], envs: &[(&str, &str)]) -> String {
    const DRIVER: &str = r#"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
out = b""
while True:
    try:
        d = os.read(fd, 4096)
    except OSError:
        break
    if not d:
        break
    out += d
os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
"#;
    let mut c = Command::new("python3");
    c.args(["-c", DRIVER, BIN])
        .args(args)
        .current_dir(&env.ws)
        .env("HOME", &env.home)
        .env("GATEWAY_STATE_DIR", &env.state)
        .env("GATEWAY_SOCKET", "")
        .env("TERM", "xterm")
        .env_remove("NO_COLOR")
        .env_remove("GATEWAY_POLICY");
    for (k, v) in envs {
        c.env(k, v);
    }
    let o = c.output().expect("python3 pty driver");
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

sandbox_test!(
    fn colour_on_a_terminal_only_and_never_with_no_color() {
        let env = Env::new("human-colour");
        let args = ["policy", "explain", "--", "rm", "-rf", "/"];
        let red = "\u{1b}[1m\u{1b}[31mdeny";
        let tty = on_tty(&env, &args, &[]);
        assert!(tty.contains(red), "no red deny on a terminal: {tty:?}");
        let no_color = on_tty(&env, &args, &[("NO_COLOR", "1")]);
        assert!(
            !no_color.contains('\u{1b}') && no_color.contains("deny"),
            "NO_COLOR: {no_color:?}"
        );
        let dumb = on_tty(&env, &args, &[("TERM", "dumb")]);
        assert!(!dumb.contains('\u{1b}'), "TERM=dumb: {dumb:?}");
        // Not a terminal: plain text.
        let o = env.gw(&args);
        assert!(o.status.success(), "{}", text(&o));
        assert!(!text(&o).contains('\u{1b}'), "{}", text(&o));
        // log query on a terminal: the decisions coloured, the rest not.
        let o = env.exec("standard", &["true"]);
        assert!(o.status.success(), "{}", text(&o));
        let q = on_tty(&env, &["log", "query"], &[]);
        assert!(q.contains("\u{1b}[1m\u{1b}[32mallow"), "{q:?}");
    }
);
