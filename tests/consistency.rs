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
