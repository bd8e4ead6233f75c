//! Issue 15's consistency fixes and the file tools' seams real agents hit: each test makes
//! the inconsistent call and checks the consistent answer.

use crate::util::*;

sandbox_test!(
    fn fs_edit_takes_its_edits_from_stdin_as_write_takes_its_content() {
        let env = Env::new("edits-stdin");
        env.write("a.txt", "one\ntwo\n");
        let mut c = env
            .cmd()
            .args(["fs", "edit", "a.txt", "--edits", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        c.stdin
            .take()
            .expect("stdin")
            .write_all(
                br#"[{"replace": {"old": "two", "new": "2"}}, {"append": {"text": "three"}}]"#,
            )
            .expect("write stdin");
        let o = c.wait_with_output().expect("wait");
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("a.txt")).expect("read"),
            "one\n2\nthree\n"
        );
        // Not a list of edits on stdin: a usage error naming stdin.
        let mut c = env
            .cmd()
            .args(["fs", "edit", "a.txt", "--edits", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        c.stdin
            .take()
            .expect("stdin")
            .write_all(b"nonsense")
            .expect("w");
        let o = c.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("--edits -"), "{}", text(&o));
    }
);

sandbox_test!(
    fn the_not_approved_hint_pasted_into_a_shell_runs_the_same_check() {
        let env = Env::new("explain-hint");
        let dir = env.root.join("my policies");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let pf = dir.join("p.toml");
        std::fs::write(
            &pf,
            "extends = \"permissive\"\n[[rule]]\nid = \"ask-touch\"\neffect = \"ask\"\ntools = [\"exec\"]\ncommand = [[\"touch\"]]\nreason = \"touching needs a yes\"\n",
        )
        .expect("write policy");
        let o = env
            .cmd()
            .args(["exec", "--policy"])
            .arg(&pf)
            .args(["--", "sh", "-c", "touch \"a b\" && echo $HOME"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        let err = stderr(&o);
        let start = err.find("(gateway policy explain").expect("the hint") + 1;
        let hint = err[start..]
            .trim_end()
            .strip_suffix(')')
            .expect("hint ends the line");
        let rest = hint.strip_prefix("gateway ").expect("starts with gateway");
        // Pasted into bash (as `gateway --json ...`): the same policy, argv and decision.
        let o = env
            .raw("bash")
            .arg("-c")
            .arg(format!("'{BIN}' --json {rest}"))
            .output()
            .expect("bash");
        assert!(o.status.success(), "{hint}\n{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["decision"]["effect"], "ask", "{hint}\n{v}");
        assert!(
            v["decision"]["rules"]
                .as_array()
                .expect("rules")
                .iter()
                .any(|r| r["id"] == "ask-touch"),
            "{hint}\n{v}"
        );
        assert_eq!(
            v["decision"]["commands"][0], "sh -c 'touch \"a b\" && echo $HOME'",
            "{hint}\n{v}"
        );
    }
);

sandbox_test!(
    fn fs_read_of_a_binary_file_says_what_it_is_and_how_to_see_it() {
        let env = Env::new("read-binary");
        std::fs::write(env.ws.join("blob.bin"), b"ab\0cd\xff").expect("write");
        let o = env.gw(&["fs", "read", "blob.bin"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        let err = stderr(&o);
        assert!(!err.contains("edit"), "a read is not an edit: {err}");
        for want in [
            "binary file",
            "6 bytes",
            "fs read --binary blob.bin",
            "od -A x -t x1z blob.bin",
        ] {
            assert!(err.contains(want), "{want:?} missing: {err}");
        }
        // The ways it names work.
        let o = env.gw(&["fs", "read", "--binary", "blob.bin"]);
        assert!(o.status.success(), "{}", text(&o));
        let o = env.exec("standard", &["od", "-A", "x", "-t", "x1z", "blob.bin"]);
        assert!(
            o.status.success() && stdout(&o).contains("61 62 00 63 64 ff"),
            "{}",
            text(&o)
        );
    }
);

/// README.md's text.
fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md")
}

/// A directory holding `gateway` (a link to the binary under test), for a README line run by
/// a shell as a user would type it.
fn path_with_gateway(env: &Env) -> String {
    let bin = env.root.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let _ = std::os::unix::fs::symlink(BIN, bin.join("gateway"));
    format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display())
}

/// The `gateway sh` option forms the README's "Agents" section lists, each run as written
/// (`NAME`: a POSIX option) with the default shell, and its word on `pipefail` checked.
fn check_readme_sh_option_forms(env: &Env, doc: &str) {
    let marker = "the option forms agents use —";
    let start = doc.find(marker).expect("the forms") + marker.len();
    let end = start + doc[start..].find("— `$0`").expect("end of the forms");
    let forms: Vec<String> = doc[start..end]
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.replace("NAME", "nounset"))
        .collect();
    assert!(forms.len() >= 4, "{forms:?}");
    let path = path_with_gateway(env);
    for form in &forms {
        let script = if form.contains('c') {
            format!("gateway sh {form} 'echo ran'")
        } else {
            format!("gateway sh {form} -c 'echo ran'")
        };
        let o = env
            .raw("sh")
            .args(["-c", &script])
            .env("PATH", &path)
            .stdin(Stdio::null())
            .output()
            .expect("sh");
        assert!(
            o.status.success() && stdout(&o) == "ran\n",
            "README's form {form:?} ({script}): {}",
            text(&o)
        );
    }
    // pipefail: as the README says, bash has it (set as the config's shell) and dash not.
    let cfg = env.root.join("config.toml");
    std::fs::write(&cfg, "shell = \"/bin/bash\"\n").expect("config");
    let o = env
        .cmd()
        .env("GATEWAY_CONFIG", &cfg)
        .args([
            "sh",
            "-euo",
            "pipefail",
            "-c",
            "false | true; echo not reached",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(!stdout(&o).contains("not reached"), "{}", text(&o));
    if std::fs::canonicalize("/bin/sh").is_ok_and(|p| p.ends_with("dash")) {
        let o = env.gw(&["sh", "-o", "pipefail", "-c", "true"]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(
            stderr(&o).contains("Illegal option -o pipefail"),
            "{}",
            text(&o)
        );
        assert!(doc.contains("Illegal option -o pipefail"));
    }
}

sandbox_test!(
    fn the_readme_examples_run_as_written() {
        let env = Env::new("readme-usage");
        let doc = readme();
        check_readme_sh_option_forms(&env, &doc);
        let block = doc
            .split("```sh\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap_or(""))
            .find(|b| b.contains("gateway policy list"))
            .expect("the usage block");
        // What the examples work on: a Makefile, a script, a file to edit, a policy, a repo.
        env.write(
            "Makefile",
            "all: test\ntest:\n\t@echo tested\nclean:\n\trm -f x.o\n",
        );
        env.write("run.sh", "#!/bin/sh\necho \"run $RUST_LOG\"\n");
        std::fs::set_permissions(
            env.ws.join("run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        env.write("src/main.rs", "fn main() { let c = a + b; }\n");
        env.write("my-policy.toml", "extends = \"strict\"\n");
        let git = env
            .raw("git")
            .args(["init", "-q", "."])
            .status()
            .expect("git");
        assert!(git.success());
        let path = path_with_gateway(&env);
        let run = |line: &str| {
            env.raw("sh")
                .args(["-c", line])
                .env("PATH", &path)
                .stdin(Stdio::null())
                .output()
                .expect("sh")
        };
        // `log show 42` needs 42 records.
        for _ in 0..42 {
            assert!(run("gateway exec -- true").status.success());
        }
        let mut lines: Vec<&str> = block
            .lines()
            .map(|l| l.split("  #").next().unwrap_or("").trim())
            .filter(|l| !l.is_empty())
            .collect();
        // `log verify` checks the checkpoint and keys the two lines after it export.
        let verify = lines
            .iter()
            .position(|l| l.contains("log verify"))
            .expect("verify");
        let verify = lines.remove(verify);
        lines.push(verify);
        let mut ran = 0;
        for line in lines {
            // Not run here: `cargo test` needs a crate and a toolchain in $HOME; `gateway mcp`
            // needs an MCP client (tests/mcp.rs drives it).
            if line.contains("cargo test") || line == "gateway mcp" {
                continue;
            }
            let o = run(line);
            assert!(o.status.success(), "README example `{line}`: {}", text(&o));
            ran += 1;
        }
        assert!(ran >= 18, "only {ran} examples ran");
        assert_eq!(
            std::fs::read_to_string(env.ws.join("src/main.rs")).expect("read"),
            "fn main() { let c = a + b; }\n",
            "`gateway history && gateway undo` reverts the edit"
        );
    }
);

sandbox_test!(
    fn trash_empty_asks_as_rm_permanent_does_and_without_a_terminal_needs_yes() {
        for nobody in [false, true] {
            let env = Env::new("trash-empty-yes");
            env.write("f.txt", "keep me");
            if nobody {
                env.give_to_nobody();
            }
            let gw = |args: &[&str]| env.as_user(nobody).args(args).output().expect("run");
            let o = gw(&["fs", "rm", "f.txt"]);
            assert!(o.status.success(), "{}", text(&o));
            let item = env.state.join("trash/files/f.txt");
            assert!(item.exists());
            // No terminal, no --yes: not done, and the error says why and what to do.
            let o = gw(&["--policy", "permissive", "trash", "empty"]);
            assert_eq!(o.status.code(), Some(121), "{}", text(&o));
            let err = stderr(&o);
            assert!(
                err.contains("not confirmed")
                    && err.contains("no terminal")
                    && err.contains("--yes"),
                "{}",
                text(&o)
            );
            assert!(item.exists(), "trash empty removed an item unconfirmed");
            let recs = log_records(&env);
            let r = recs.last().expect("a record");
            assert_eq!(r["tool"], "trash.empty", "{r}");
            assert_eq!(r["decision"]["effect"], "deny", "{r}");
            assert_eq!(r["approved"], false, "{r}");
            // --json: the same refusal as an object.
            let o = gw(&["--policy", "permissive", "--json", "trash", "empty"]);
            assert_eq!(o.status.code(), Some(121), "{}", text(&o));
            assert_eq!(json_of(&o)["refusal"]["rule"], "confirm", "{}", text(&o));
            // --yes never answers the policy's ask.
            let o = gw(&["--policy", "standard", "trash", "empty", "--yes"]);
            assert_eq!(o.status.code(), Some(121), "{}", text(&o));
            assert!(item.exists());
            if !nobody {
                // On a terminal: the question `fs rm --permanent` asks; no keeps it.
                let (code, shown) =
                    gw_on_tty(&env, &["--policy", "permissive", "trash", "empty"], "n");
                assert_eq!(code, 121, "{shown}");
                assert!(
                    shown.contains("for good") && shown.contains("[y/N]"),
                    "{shown}"
                );
                assert!(item.exists(), "{shown}");
            }
            let o = gw(&["--policy", "permissive", "trash", "empty", "--yes"]);
            assert!(o.status.success(), "{}", text(&o));
            assert!(stdout(&o).contains("removed 1 item"), "{}", text(&o));
            assert!(!item.exists());
        }
    }
);

/// Plain JSON-RPC over `gateway mcp`'s stdio (no SDK, a client that declares no roots, as
/// Codex): initialize, then each request in turn; the result (or error) of each, in order.
fn mcp_session(mut cmd: Command, requests: &[(&str, serde_json::Value)]) -> Vec<serde_json::Value> {
    use std::io::BufRead;
    let mut child = cmd
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gateway mcp");
    let mut input = child.stdin.take().expect("stdin");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut answer = |id: usize| -> serde_json::Value {
        loop {
            let l = lines.next().expect("an answer").expect("a line");
            let v: serde_json::Value = serde_json::from_str(&l).expect("json");
            if v["id"] == id {
                return if v["result"].is_null() {
                    v["error"].clone()
                } else {
                    v["result"].clone()
                };
            }
        }
    };
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
    )
    .expect("write");
    answer(0);
    writeln!(
        input,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .expect("w");
    let mut out = Vec::new();
    for (i, (method, params)) in requests.iter().enumerate() {
        let m =
            serde_json::json!({"jsonrpc": "2.0", "id": i + 1, "method": method, "params": params});
        writeln!(input, "{m}").expect("write");
        out.push(answer(i + 1));
    }
    drop(input);
    let _ = child.wait();
    out
}

fn read_file(path: &str) -> (&'static str, serde_json::Value) {
    (
        "tools/call",
        serde_json::json!({"name": "read_file", "arguments": {"path": path}}),
    )
}

sandbox_test!(
    fn credentials_are_refused_at_policy_time_and_os_errors_are_said_in_words() {
        for nobody in [false, true] {
            let env = Env::new("shadow-words");
            // A file and a directory the OS keeps from uid 65534 (root's, mode 0600/0700):
            // the policy allows reading them, the file system does not.
            let closed = env.ws.join("closed");
            std::fs::create_dir(&closed).expect("mkdir");
            std::fs::write(closed.join("f"), "x").expect("w");
            std::fs::write(env.ws.join("rootonly"), "x").expect("w");
            if nobody {
                env.give_to_nobody();
                for p in [&closed, &env.ws.join("rootonly")] {
                    std::os::unix::fs::chown(p, Some(0), Some(0)).expect("chown");
                }
                std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700))
                    .expect("chmod");
                std::fs::set_permissions(
                    env.ws.join("rootonly"),
                    std::fs::Permissions::from_mode(0o600),
                )
                .expect("chmod");
            }
            let who = if nobody { "uid 65534" } else { "root" };
            // CLI: a deny naming the rule, recorded as a deny.
            for policy in ["strict", "standard", "permissive"] {
                let o = env
                    .as_user(nobody)
                    .args(["--policy", policy, "fs", "read", "/etc/shadow"])
                    .output()
                    .expect("run");
                assert_eq!(o.status.code(), Some(120), "{who} {policy}: {}", text(&o));
                assert!(stderr(&o).contains("denied-path"), "{}", text(&o));
                let r = log_records(&env).pop().expect("record");
                assert_eq!(r["decision"]["effect"], "deny", "{r}");
                assert_eq!(r["decision"]["rules"][0], "denied-path", "{r}");
            }
            // MCP, a client without roots: the same refusal, before the worker runs.
            let res = mcp_session(env.as_user(nobody), &[read_file("/etc/shadow")]);
            assert_eq!(res[0]["isError"], true, "{who}: {}", res[0]);
            let s = &res[0]["structuredContent"];
            assert_eq!(s["decision"]["effect"], "deny", "{who}: {s}");
            assert_eq!(s["refusal"]["rule"], "denied-path", "{who}: {s}");
            let r = log_records(&env).pop().expect("record");
            assert_eq!(r["tool"], "fs.read", "{r}");
            assert_eq!(r["decision"]["effect"], "deny", "{r}");
            if !nobody {
                continue;
            }
            // What the OS refuses: said in words with the path, never `(os error 13)`.
            for args in [
                &["fs", "read", "rootonly"][..],
                &["fs", "read", "closed/f"][..],
                &["fs", "ls", "closed"][..],
                &["fs", "write", "closed/g", "--content", "y"][..],
                &["fs", "edit", "rootonly", "--old", "x", "--new", "y"][..],
            ] {
                let o = env.nobody().args(args).output().expect("run");
                assert!(!o.status.success(), "{args:?}: {}", text(&o));
                let err = stderr(&o);
                assert!(!err.contains("os error"), "{args:?}: {err}");
                assert!(
                    err.contains("Permission denied (the file system"),
                    "{args:?}: {err}"
                );
                assert!(
                    err.contains(&*env.ws.to_string_lossy()),
                    "{args:?} names no path: {err}"
                );
            }
            let res = mcp_session(
                env.nobody(),
                &[read_file("rootonly"), read_file("closed/f")],
            );
            for r in &res {
                let t = r["content"][0]["text"].as_str().expect("text");
                assert!(r["isError"] == true && !t.contains("os error"), "{r}");
                assert!(
                    t.contains("Permission denied (the file system") && t.contains("cannot read"),
                    "{r}"
                );
            }
        }
    }
);

/// Every `format` in a JSON value, with where it is.
fn formats(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                // A keyword `format` has a string value; a property named `format` (the `scan`
                // tool's) has a schema object.
                if k == "format" && x.is_string() {
                    out.push(format!("{at}: {x}"));
                }
                formats(x, &format!("{at}/{k}"), out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                formats(x, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

sandbox_test!(
    fn mcp_tool_schemas_say_integers_without_a_rust_width_format() {
        let env = Env::new("mcp-schemas");
        let res = mcp_session(env.cmd(), &[("tools/list", serde_json::json!({}))]);
        let tools = res[0]["tools"].as_array().expect("tools");
        assert!(tools.len() >= 10, "{}", res[0]);
        let mut found = Vec::new();
        for t in tools {
            formats(t, t["name"].as_str().expect("name"), &mut found);
        }
        assert!(found.is_empty(), "formats clients do not know: {found:?}");
        let read = tools
            .iter()
            .find(|t| t["name"] == "read_file")
            .expect("read_file");
        for k in ["offset", "limit"] {
            let p = &read["inputSchema"]["properties"][k];
            assert_eq!(p["minimum"], 0, "{k}: {p}");
            assert!(
                p["type"] == "integer"
                    || p["type"]
                        .as_array()
                        .is_some_and(|a| a.contains(&"integer".into())),
                "{k}: {p}"
            );
        }
    }
);

sandbox_test!(
    fn an_agent_reads_the_commands_output_and_what_changed_is_in_the_report() {
        let env = Env::new("changed-line");
        let script = "echo out; echo err >&2; echo x > f.txt; mkdir -p sub/deeper";
        // gateway sh and exec with stderr not a terminal (an agent's shell): exactly the
        // command's output.
        for o in [
            env.cmd().args(["sh", "-c", script]).output().expect("sh"),
            env.exec(
                "standard",
                &[
                    "sh",
                    "-c",
                    &script.replace("f.txt", "g.txt").replace("sub", "sub2"),
                ],
            ),
        ] {
            assert!(o.status.success(), "{}", text(&o));
            assert_eq!(stdout(&o), "out\n", "{}", text(&o));
            assert_eq!(stderr(&o), "err\n", "{}", text(&o));
            let r = log_records(&env).pop().expect("record");
            assert_eq!(
                r["files_changed"], 3,
                "the record counts files and directories: {r}"
            );
        }
        // --json: the report says what changed, the streams are the command's.
        let o = env
            .cmd()
            .args([
                "--json",
                "exec",
                "--",
                "sh",
                "-c",
                &script.replace("f.txt", "h.txt").replace("sub", "sub3"),
            ])
            .output()
            .expect("run");
        let v = json_of(&o);
        assert_eq!(v["stdout"], "out\n", "{v}");
        assert_eq!(v["stderr"], "err\n", "{v}");
        assert_eq!(
            v["snapshot"]["changes"].as_array().expect("changes").len(),
            3,
            "{v}"
        );
        // MCP exec: the same.
        let res = mcp_session(
            env.cmd(),
            &[(
                "tools/call",
                serde_json::json!({"name": "exec", "arguments": {"command": script.replace("f.txt", "i.txt").replace("sub", "sub4")}}),
            )],
        );
        let s = &res[0]["structuredContent"];
        assert_eq!(s["stdout"], "out\n", "{s}");
        assert_eq!(s["stderr"], "err\n", "{s}");
        assert_eq!(
            s["snapshot"]["changes"].as_array().expect("changes").len(),
            3,
            "{s}"
        );
        assert!(
            !res[0].to_string().contains("the command changed"),
            "{}",
            res[0]
        );
        // A person at a terminal is told, with how to undo it.
        let (code, shown) = gw_on_tty(&env, &["sh", "-c", "echo y > j.txt"], "n");
        assert_eq!(code, 0, "{shown}");
        assert!(
            shown.contains("the command changed 1 file(s)") && shown.contains("gateway undo"),
            "{shown}"
        );
    }
);

sandbox_test!(
    fn directories_a_command_makes_or_removes_are_counted_and_undone_without_losing_anything() {
        for nobody in [false, true] {
            let env = Env::new("dirs-undo");
            std::fs::create_dir(env.ws.join("gone")).expect("mkdir");
            env.write("kept/file", "mine\n");
            if nobody {
                env.give_to_nobody();
            }
            let gw = |args: &[&str]| env.as_user(nobody).args(args).output().expect("run");
            let o = gw(&["sh", "-c", "mkdir -p made/deeper && rmdir gone"]);
            assert!(o.status.success(), "{}", text(&o));
            let r = log_records(&env).pop().expect("record");
            assert_eq!(r["files_changed"], 3, "made, made/deeper, gone: {r}");
            let o = gw(&["undo"]);
            assert!(o.status.success(), "{}", text(&o));
            assert!(
                !env.ws.join("made").exists(),
                "undo left the directories the run made"
            );
            assert!(
                env.ws.join("gone").is_dir(),
                "undo did not recreate the removed directory"
            );
            assert_eq!(
                std::fs::read_to_string(env.ws.join("kept/file")).expect("r"),
                "mine\n"
            );
            // A directory the run made that something else put a file in since: the undo
            // takes it away whole to the trash, says so, and the file comes back from there.
            let o = gw(&["sh", "-c", "mkdir made2"]);
            assert!(o.status.success(), "{}", text(&o));
            std::fs::write(env.ws.join("made2/later.txt"), "later\n").expect("w");
            // A link the run left in a directory it made is removed as a link, never followed.
            let o = gw(&["sh", "-c", "mkdir made3 && ln -s ../kept made3/link"]);
            assert!(o.status.success(), "{}", text(&o));
            let o = gw(&["undo"]);
            assert!(o.status.success(), "{}", text(&o));
            assert!(!env.ws.join("made3").exists());
            assert_eq!(
                std::fs::read_to_string(env.ws.join("kept/file")).expect("r"),
                "mine\n"
            );
            let o = gw(&["undo"]);
            assert!(o.status.success(), "{}", text(&o));
            let err = stderr(&o);
            assert!(err.contains("trash restore made2"), "{}", text(&o));
            assert!(!env.ws.join("made2").exists());
            let o = gw(&["trash", "restore", "made2"]);
            assert!(o.status.success(), "{}", text(&o));
            assert_eq!(
                std::fs::read_to_string(env.ws.join("made2/later.txt")).expect("r"),
                "later\n"
            );
        }
    }
);
