//! The signed, hash-chained audit log: records, verify, tampering, keys, artifacts.

use crate::util::*;

sandbox_test!(
    fn audit_records_every_call_and_verifies() {
        let env = Env::new("audit-calls");
        assert!(env.exec("strict", &["echo", "hello"]).status.success());
        let o = env.exec("strict", &["curl", "http://example.com"]);
        assert_eq!(o.status.code(), Some(120));
        let o = env.exec("strict", &["no-such-program-here"]);
        assert_eq!(o.status.code(), Some(127));
        let o = env.sh("strict", "echo out; echo err >&2; exit 3");
        assert_eq!(o.status.code(), Some(3));
        let o = env.cmd().args(["scan", "."]).output().expect("scan");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let r = log_records(&env);
        assert_eq!(r.len(), 5, "{r:?}");
        let seqs: Vec<u64> = r.iter().map(|x| x["seq"].as_u64().expect("seq")).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        assert_eq!(r[0]["decision"]["effect"], "allow");
        assert_eq!(r[0]["exit_code"], 0);
        assert_eq!(r[0]["stdout"]["bytes"], 6);
        assert!(
            r[0]["enforcement"]
                .as_str()
                .expect("enforcement")
                .contains("seccomp true")
        );
        assert_eq!(r[1]["decision"]["effect"], "deny");
        assert_eq!(r[1]["decision"]["rules"][0], "deny-network-tools");
        assert!(r[1]["exit_code"].is_null());
        assert!(r[2]["error"].as_str().expect("error").contains("not found"));
        assert_eq!(r[3]["exit_code"], 3);
        assert_eq!(r[3]["caller"]["client"], "cli");
        assert_eq!(r[4]["tool"], "scan");
        // Filters.
        let o = env
            .cmd()
            .args(["log", "query", "--json", "--decision", "deny"])
            .output()
            .expect("q");
        assert_eq!(json_of(&o)["records"].as_array().expect("a").len(), 1);
        let o = env
            .cmd()
            .args(["log", "query", "--exit-code", "3", "--since", "1h"])
            .output()
            .expect("q");
        assert!(stdout(&o).contains("echo out"), "{}", text(&o));
        assert_eq!(stdout(&o).lines().count(), 1, "{}", text(&o));
        // Show with the stored output.
        let o = env.cmd().args(["log", "show", "4"]).output().expect("show");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("--- stdout: 4 bytes"), "{}", text(&o));
        assert!(stdout(&o).contains("\nout\n") && stdout(&o).contains("\nerr\n"));
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            stdout(&o).contains("ok: 5 record(s), 5 checkpoint(s)"),
            "{}",
            text(&o)
        );
        let o = env
            .cmd()
            .args(["log", "tail", "-n", "2"])
            .output()
            .expect("tail");
        assert_eq!(stdout(&o).lines().count(), 2, "{}", text(&o));
    }
);

sandbox_test!(
    fn audit_tampering_is_named_by_verify() {
        let env = Env::new("audit-tamper");
        for i in 0..6 {
            assert!(
                env.exec("strict", &["echo", &format!("run {i}")])
                    .status
                    .success()
            );
        }
        let anchor = env.root.join("anchor");
        let o = env
            .cmd()
            .args(["log", "checkpoint", "--export"])
            .output()
            .expect("export");
        assert!(o.status.success(), "{}", text(&o));
        std::fs::write(&anchor, &o.stdout).expect("anchor");
        let logp = env.state.join("audit/log.jsonl");
        let orig = std::fs::read_to_string(&logp).expect("log");
        let verify = |extra: &[&str]| {
            let o = env
                .cmd()
                .args(["log", "verify"])
                .args(extra)
                .output()
                .expect("verify");
            (o.status.code(), stderr(&o))
        };
        // Edit a field of record 2.
        std::fs::write(&logp, orig.replace("run 1", "run X")).expect("w");
        let (code, e) = verify(&[]);
        assert_eq!(code, Some(1));
        assert!(e.contains("record 2 was edited"), "{e}");
        // Delete the last two records and every checkpoint after record 4: only the anchor
        // tells.
        let lines: Vec<&str> = orig.lines().collect();
        std::fs::write(&logp, lines[..4].join("\n") + "\n").expect("w");
        let cps = std::fs::read_to_string(env.state.join("audit/checkpoints")).expect("cps");
        // Each checkpoint: origin, size, root, a blank line, the signature, a blank line.
        let cp_lines: Vec<&str> = cps.lines().collect();
        assert_eq!(cp_lines.len(), 6 * 6, "{cps}");
        let kept: String = cp_lines[..4 * 6].iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(env.state.join("audit/checkpoints"), kept).expect("w");
        let (code, e) = verify(&[]);
        assert_eq!(code, Some(0), "{e}");
        let (code, e) = verify(&["--anchor", anchor.to_str().expect("utf-8")]);
        assert_eq!(code, Some(1));
        assert!(e.contains("truncated after the anchor checkpoint"), "{e}");
        assert!(e.contains("commits to 6 records, the log has 4"), "{e}");
        // A record appended without the key: not covered by any checkpoint.
        std::fs::write(&logp, &orig).expect("w");
        std::fs::write(env.state.join("audit/checkpoints"), &cps).expect("w");
        let last = orig.lines().last().expect("last");
        assert!(last.starts_with("{\"seq\":6,\"prev\":\""), "{last}");
        let prev = {
            use std::fmt::Write as _;
            let mut h = sha256_leaf(last.as_bytes());
            let mut s = String::new();
            for b in h.drain(..) {
                let _ = write!(s, "{b:02x}");
            }
            s
        };
        // Record 6 copied as record 7, chained to it: a valid chain, but no key signed it.
        let forged = format!("{{\"seq\":7,\"prev\":\"{prev}{}", &last[81..]);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&logp)
            .expect("open");
        writeln!(f, "{forged}").expect("append");
        let (code, e) = verify(&[]);
        assert_eq!(code, Some(1));
        assert!(e.contains("not covered by a signed checkpoint"), "{e}");
    }
);

sandbox_test!(
    fn audit_key_rotation_and_replaced_key() {
        let env = Env::new("audit-keys");
        let o = env.cmd().args(["keys", "export"]).output().expect("export");
        assert!(o.status.success(), "{}", text(&o));
        let key0 = env.root.join("key0");
        std::fs::write(&key0, &o.stdout).expect("w");
        assert!(env.exec("strict", &["true"]).status.success());
        let o = env.cmd().args(["keys", "rotate"]).output().expect("rotate");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("/e1+"), "{}", text(&o));
        assert!(!env.state.join("keys/epoch-0.key").exists());
        assert!(env.exec("strict", &["true"]).status.success());
        let o = env
            .cmd()
            .args(["log", "verify", "--key", key0.to_str().expect("utf-8")])
            .output()
            .expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("2 key epoch(s)"), "{}", text(&o));
        let o = env.cmd().args(["keys", "export"]).output().expect("export");
        assert_eq!(stdout(&o).lines().count(), 2, "{}", text(&o));
        // Someone replaces the keys and re-signs nothing: signatures fail. The exported key
        // also tells.
        std::fs::remove_dir_all(env.state.join("keys")).expect("rm");
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(stderr(&o).contains("no public key"), "{}", text(&o));
        let o = env
            .cmd()
            .args(["log", "verify", "--key", key0.to_str().expect("utf-8")])
            .output()
            .expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        // And the writer refuses to go on without the key of the current epoch.
        std::fs::create_dir_all(env.state.join("keys")).expect("mkdir");
        let o = env.exec("strict", &["true"]);
        assert_eq!(o.status.code(), Some(119), "{}", text(&o));
        assert!(stderr(&o).contains("audit"), "{}", text(&o));
    }
);

sandbox_test!(
    fn audit_concurrent_processes_never_fork_the_chain() {
        let env = Env::new("audit-race");
        let children: Vec<_> = (0..12)
            .map(|i| {
                env.cmd()
                    .args(["exec", "--policy", "strict", "--", "echo"])
                    .arg(format!("racer {i}"))
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("spawn")
            })
            .collect();
        for mut c in children {
            assert!(c.wait().expect("wait").success());
        }
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("ok: 12 record(s)"), "{}", text(&o));
    }
);

sandbox_test!(
    fn audit_no_secret_reaches_the_state_directory() {
        let env = Env::new("audit-secrets");
        let gh = gh_token(40);
        let aws = corpus::expand("AKIA{U:16}", 41);
        let slack = corpus::expand("xoxb-{d:11}-{d:12}-{a:24}", 42);
        let redact = env.policy_file("extends = \"strict\"\n[secrets]\ninput = \"redact\"\n");
        env.write("creds.txt", &format!("token = {gh}\n"));
        // In argv (refused, then redacted), env, stdin, output, a scanned file.
        let _ = env.exec("strict", &["echo", &gh]);
        let _ = env.exec(&redact, &["echo", &gh]);
        let _ = env
            .cmd()
            .args(["exec", "--policy", "strict", "--env"])
            .arg(format!("KEY={aws}"))
            .args(["--", "true"])
            .output()
            .expect("run");
        let mut c = env
            .cmd()
            .args(["exec", "--policy", &redact, "--", "cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        c.stdin
            .take()
            .expect("stdin")
            .write_all(format!("{slack}\n").as_bytes())
            .expect("w");
        let o = c.wait_with_output().expect("wait");
        assert!(stdout(&o).contains("[REDACTED:slack"), "{}", text(&o));
        let o = env.sh("strict", &format!("cat creds.txt; echo {aws} >&2"));
        assert!(!stdout(&o).contains(&gh));
        let _ = env.cmd().args(["scan", "."]).output().expect("scan");
        let _ = env
            .cmd()
            .args(["scan", "--redact", "."])
            .output()
            .expect("scan");
        // Every file under the state directory except the backups, which hold what
        // `scan --redact` replaced (by design: undo must restore it).
        let mut files = Vec::new();
        walk(&env.state, &mut files);
        assert!(files.len() > 10, "{files:?}");
        for f in files
            .iter()
            .filter(|f| !f.starts_with(env.state.join("backups")))
        {
            let data = std::fs::read(f).expect("read");
            let data = String::from_utf8_lossy(&data);
            for planted in [&gh, &aws, &slack] {
                assert!(
                    !data.contains(planted.as_str()),
                    "{} holds a planted token",
                    f.display()
                );
            }
        }
        let r = log_records(&env);
        assert!(r.len() >= 7, "{r:?}");
        let all = serde_json::to_string(&r).expect("json");
        assert!(all.contains("argument 1:github-pat"), "{all}");
        assert!(all.contains("stdin:slack"), "{all}");
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
    }
);

sandbox_test!(
    fn exec_json_returns_inline_output_and_the_artifact() {
        let env = Env::new("audit-inline");
        let p = env.policy_file("extends = \"strict\"\n[audit]\ninline_output = \"1KiB\"\n");
        let o = env
            .cmd()
            .args(["exec", "--json", "--policy", &p, "--", "sh", "-c"])
            .arg("yes 0123456789abcdef | head -c 5000")
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let v = json_of(&o);
        assert_eq!(v["stdout"].as_str().expect("stdout").len(), 1024);
        assert_eq!(v["stdout_truncated"], true);
        assert_eq!(v["stderr_truncated"], false);
        assert_eq!(v["audit"]["stdout"]["bytes"], 5000);
        let id = v["audit"]["stdout"]["artifact"].as_str().expect("artifact");
        let stored = std::fs::read(env.state.join("audit/artifacts").join(id)).expect("artifact");
        assert_eq!(stored.len(), 5000);
        let seq = v["audit"]["seq"].as_u64().expect("seq").to_string();
        let o = env
            .cmd()
            .args(["log", "show", "--json", &seq])
            .output()
            .expect("show");
        let s = json_of(&o);
        assert_eq!(
            s["artifacts"][0]["content"].as_str().expect("c").len(),
            5000
        );
    }
);

sandbox_test!(
    fn a_large_output_is_stored_compressed_under_a_blake3_digest_and_shown_whole() {
        let env = Env::new("audit-zstd");
        let o = env
            .cmd()
            .args(["exec", "--json", "--policy", "strict", "--", "sh", "-c"])
            .arg("seq 1 200000")
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let v = json_of(&o);
        let want: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
        let d = &v["audit"]["stdout"];
        assert_eq!(d["bytes"], want.len(), "{v}");
        assert!(d.get("sha256").is_none(), "{d}");
        let b3 = d["blake3"].as_str().expect("blake3 digest");
        assert_eq!(b3.len(), 64);
        let id = d["artifact"].as_str().expect("artifact");
        assert_eq!(id, b3, "a whole stream's artifact id is its digest");
        let stored = std::fs::read(env.state.join("audit/artifacts").join(id)).expect("artifact");
        assert_eq!(stored[..4], [0x28, 0xb5, 0x2f, 0xfd], "zstd frame");
        assert!(
            stored.len() < want.len() / 2,
            "{} bytes stored",
            stored.len()
        );
        let seq = v["audit"]["seq"].as_u64().expect("seq").to_string();
        let o = env
            .cmd()
            .args(["log", "show", "--json", "--output-limit", "0", &seq])
            .output()
            .expect("show");
        let s = json_of(&o);
        assert!(
            s["artifacts"][0]["content"].as_str() == Some(want.as_str()),
            "{s}"
        );
        let o = env
            .cmd()
            .args(["log", "show", &seq])
            .output()
            .expect("show");
        assert!(
            text(&o).contains(&format!("bytes, blake3 {b3}")),
            "{}",
            text(&o)
        );
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
    }
);

sandbox_test! {
    fn secrets_in_paths_and_warned_argv_are_never_recorded() {
        // Issue 22 item 8: a token in a file tool's path, or in argv under `permissive`
        // (`secrets.input = "warn"`), was stored raw in the audit record. "warn" records the
        // finding, not the secret.
        let env = Env::new("audit-raw");
        let tok = gh_token(77);
        let o = env.exec("permissive", &["echo", &tok]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let name = format!("notes-{tok}.txt");
        let o = env.gw(&["--policy", "standard", "fs", "write", &name, "--content", "x"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let o = env.gw(&["--policy", "standard", "fs", "cd", &format!("../{tok}")]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        let mut log = Vec::new();
        for f in std::fs::read_dir(env.state.join("audit")).expect("audit").flatten() {
            if f.path().is_file() {
                log.extend(std::fs::read(f.path()).expect("read"));
            }
        }
        let log = String::from_utf8_lossy(&log);
        assert!(log.contains("REDACTED"), "the records say a secret was there");
        assert!(!log.contains(&tok), "a raw token in the audit log");
    }
}

sandbox_test!(
    fn log_query_tool_takes_the_file_tools_short_names() {
        // Records name file tools `fs.edit`, `fs.rm`, ...: `--tool edit` selects them too
        // (it matched nothing), `--tool rm` both removals, full names still match exactly.
        let env = Env::new("audit-toolname");
        let ok = |args: &[&str]| {
            let o = env.gw(args);
            assert!(o.status.success(), "{args:?}: {}", text(&o));
        };
        ok(&["fs", "write", "a.txt", "--content", "one\n"]);
        ok(&["fs", "edit", "a.txt", "--append", "two\n"]);
        ok(&["fs", "write", "b.txt", "--content", "x"]);
        ok(&["fs", "write", "c.txt", "--content", "x"]);
        ok(&["fs", "rm", "b.txt"]);
        // Standard asks for `purge`; unanswered, it is still recorded as `fs.rm.permanent`.
        let o = env.gw(&["fs", "rm", "--permanent", "c.txt"]);
        assert_eq!(o.status.code(), Some(121), "{}", text(&o));
        assert!(env.exec("strict", &["true"]).status.success());
        let tools = |tool: &str| -> Vec<String> {
            let o = env.gw(&["log", "query", "--json", "--tool", tool]);
            assert!(o.status.success(), "--tool {tool}: {}", text(&o));
            json_of(&o)["records"]
                .as_array()
                .expect("records")
                .iter()
                .map(|r| r["tool"].as_str().expect("tool").to_string())
                .collect()
        };
        assert_eq!(tools("edit"), ["fs.edit"]);
        assert_eq!(tools("fs.edit"), ["fs.edit"]);
        assert_eq!(tools("write"), ["fs.write", "fs.write", "fs.write"]);
        assert_eq!(tools("rm"), ["fs.rm", "fs.rm.permanent"]);
        assert_eq!(tools("delete"), ["fs.rm"]);
        assert_eq!(tools("purge"), ["fs.rm.permanent"]);
        assert_eq!(tools("exec"), ["exec"]);
        assert!(tools("fs.ed").is_empty(), "a full name matches exactly");
    }
);

sandbox_test!(
    fn log_show_caps_the_stored_output_and_can_leave_it_out() {
        // Issue 15: `log show` printed all of a record's stored output (590 KB). Now each
        // stream shows at most 64 KiB by default — head and tail around a marker — or
        // `--output-limit N` bytes (0: all), and `--no-output` leaves it out.
        let env = Env::new("log-show-limit");
        let o = env.sh("standard", "seq 1 200000; echo done >&2");
        assert!(o.status.success(), "{}", text(&o));
        let seq =
            json_of(&env.gw(&["log", "query", "--json", "--limit", "1"]))["records"][0]["seq"]
                .as_u64()
                .expect("seq")
                .to_string();
        let o = env.gw(&["log", "show", &seq]);
        assert!(o.status.success(), "{}", text(&o));
        let out = stdout(&o);
        assert!(out.len() < 72 << 10, "{} bytes", out.len());
        assert!(out.contains("\n1\n2\n3\n"), "head kept");
        assert!(out.contains("\n199999\n200000\n"), "tail kept");
        assert!(
            out.contains(&format!(
                "`gateway log show {seq} --output-limit 0` shows all"
            )),
            "{out}"
        );
        assert!(out.contains("done\n"), "stderr shown: {out}");
        let o = env.gw(&["log", "show", &seq, "--output-limit", "0"]);
        assert!(stdout(&o).len() > 1_200_000, "{}", stdout(&o).len());
        assert!(!stdout(&o).contains("cut here"));
        let o = env.gw(&["log", "show", &seq, "--json", "--output-limit", "1000"]);
        let v = json_of(&o);
        let a = &v["artifacts"][0];
        assert_eq!(a["stream"], "stdout", "{v}");
        assert!(a["content"].as_str().is_some_and(|c| c.len() < 1300), "{a}");
        assert!(
            a["cut_bytes"].as_u64().is_some_and(|c| c > 1_200_000),
            "{a}"
        );
        assert_eq!(a["digest"]["bytes"], 1_288_895, "{a}");
        let o = env.gw(&["log", "show", &seq, "--no-output"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(!stdout(&o).contains("\n200000\n"), "{}", stdout(&o));
        assert!(
            stdout(&o).contains("left out: --no-output"),
            "{}",
            stdout(&o)
        );
        let o = env.gw(&["log", "show", &seq, "--no-output", "--json"]);
        assert_eq!(json_of(&o)["artifacts"][0]["omitted"], true, "{}", text(&o));
    }
);

sandbox_test! {
    fn a_working_directory_named_with_a_secret_is_recorded_redacted() {
        // Issue 38: an exec record's `cwd` was recorded raw; a directory named with a token
        // kept it in the log, `log show` and `--json`.
        let env = Env::new("cwd-secret");
        let token = "AKIAZ4XQ7MBRT2KD9WJH";
        std::fs::create_dir_all(env.ws.join(token)).expect("mkdir");
        let o = env
            .cmd()
            .args(["exec", "--policy", "standard", "--cwd", token, "--", "true"])
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let recs = log_records(&env);
        assert!(!recs.is_empty(), "no records");
        let all = serde_json::to_string(&recs).expect("json");
        assert!(!all.contains(token), "the token is in the log: {all}");
        assert!(all.contains("REDACTED"), "{all}");
    }
}
