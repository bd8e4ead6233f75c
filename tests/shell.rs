//! `gateway sh -c`, the shell shim agents use as `$SHELL`.

use crate::util::*;

sandbox_test!(
    fn gateway_sh_behaves_like_sh_c_but_confined() {
        let env = Env::new("sh-shim");
        let run = |args: &[&str], stdin: Option<&str>| -> Output {
            let mut c = env.cmd();
            c.args(args);
            match stdin {
                Some(s) => {
                    c.stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped());
                    let mut ch = c.spawn().expect("spawn");
                    ch.stdin
                        .take()
                        .expect("stdin")
                        .write_all(s.as_bytes())
                        .expect("write");
                    ch.wait_with_output().expect("wait")
                }
                None => c.output().expect("run"),
            }
        };
        // Exit codes, $0 and positional parameters, stdout and stderr.
        let o = run(
            &[
                "sh",
                "-c",
                "echo out $0 $1; echo err >&2; exit 3",
                "me",
                "one",
            ],
            None,
        );
        assert_eq!(o.status.code(), Some(3), "{}", text(&o));
        assert_eq!(stdout(&o), "out me one\n");
        assert_eq!(stderr(&o), "err\n");
        // The spellings agents use: -lc, -c -l, options before -c.
        for args in [
            vec!["sh", "-lc", "echo ok"],
            vec!["sh", "-c", "-l", "echo ok"],
            vec!["sh", "-e", "-c", "echo ok"],
            vec!["sh", "--login", "-c", "echo ok"],
        ] {
            let o = run(&args, None);
            assert!(o.status.success(), "{args:?}: {}", text(&o));
            assert_eq!(stdout(&o), "ok\n", "{args:?}");
        }
        // stdin reaches the command.
        let o = run(&["sh", "-c", "tr a-z A-Z"], Some("piped\n"));
        assert_eq!(stdout(&o), "PIPED\n", "{}", text(&o));
        // Confined: the policy decides, and the sandbox holds.
        let o = run(&["sh", "-c", "rm -rf ~"], None);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let o = run(&["sh", "-c", "cat /etc/shadow"], None);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!stdout(&o).contains("root:"), "{}", text(&o));
        // A command not found is sh's 127.
        let o = run(&["sh", "-c", "no-such-command-here"], None);
        assert_eq!(o.status.code(), Some(127), "{}", text(&o));
        // Every run is in the audit log.
        let o = env.gw(&["log", "query", "--tool", "exec", "--json", "--limit", "0"]);
        assert!(json_of(&o)["records"].as_array().expect("a").len() >= 9);
        // Without -c there is nothing to run.
        let o = run(&["sh", "script.sh"], None);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        // As $SHELL: a symlink named gateway-sh is `gateway sh`.
        let link = env.root.join("gateway-sh");
        std::os::unix::fs::symlink(BIN, &link).expect("ln");
        let o = Command::new(&link)
            .args(["-c", "echo via $0"])
            .current_dir(&env.ws)
            .env("HOME", &env.home)
            .env("GATEWAY_STATE_DIR", &env.state)
            .env("GATEWAY_SOCKET", "")
            .env_remove("GATEWAY_POLICY")
            .output()
            .expect("gateway-sh");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(stdout(&o), "via /bin/sh\n");
    }
);
