//! `gateway exec`: ordinary work (controls), limits, signals, terminals, JSON reports.

use crate::util::*;

sandbox_test! {
    fn control_compile_and_run_c() {
        let env = Env::new("cc");
        env.write(
            "hello.c",
            "#include <stdio.h>\nint main(void){ puts(\"hello from c\"); return 3; }\n",
        );
        let o = env.sh("strict", "gcc -o hello hello.c && ./hello");
        assert_eq!(o.status.code(), Some(3), "{}", text(&o));
        assert_eq!(stdout(&o).trim(), "hello from c");
    }
}

sandbox_test! {
    fn control_python_git_pipes_stdin() {
        let env = Env::new("controls");
        let o = env.exec(
            "strict",
            &[
                "python3",
                "-c",
                "import json,sys; print(json.dumps({'a': 2**10}))",
            ],
        );
        assert_eq!(stdout(&o).trim(), "{\"a\": 1024}", "{}", text(&o));
        let o = env.sh(
            "strict",
            "git init -q . && echo x > f && git add f && git -c user.name=t -c user.email=t@e commit -qm init && git log --oneline | wc -l",
        );
        assert_eq!(stdout(&o).trim(), "1", "{}", text(&o));
        let o = env.sh("standard", "seq 1 100 | sort -rn | head -1");
        assert_eq!(stdout(&o).trim(), "100", "{}", text(&o));
        let mut child = env
            .cmd()
            .args(["exec", "--policy", "strict", "--", "tr", "a-z", "A-Z"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"through stdin\n")
            .expect("write");
        let o = child.wait_with_output().expect("wait");
        assert_eq!(stdout(&o), "THROUGH STDIN\n");
    }
}

sandbox_test! {
    fn control_exit_codes_and_signals() {
        let env = Env::new("codes");
        assert_eq!(env.sh("strict", "exit 7").status.code(), Some(7));
        assert_eq!(
            env.sh("strict", "kill -TERM $$").status.code(),
            Some(128 + 15)
        );
        let o = env
            .cmd()
            .args([
                "--json",
                "exec",
                "--policy",
                "strict",
                "--",
                "sh",
                "-c",
                "echo out; echo err >&2; exit 4",
            ])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(4));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["stdout"], "out\n");
        assert_eq!(v["stderr"], "err\n");
        assert_eq!(v["exit_code"], 4);
        assert_eq!(v["decision"]["effect"], "allow");
        assert_eq!(v["enforcement"]["landlock"]["fs"], true);
        assert_eq!(v["enforcement"]["seccomp"], true);
        assert_eq!(v["enforcement"]["capabilities_dropped"], true);
        assert_eq!(v["enforcement"]["pid_namespace"], true);
        assert_eq!(
            v["enforcement"]["not_applied"].as_array().map(|a| a.len()),
            Some(0)
        );
    }
}

sandbox_test! {
    fn output_limit_stops_the_run() {
        let env = Env::new("outlimit");
        let p = env.policy_file("extends = \"strict\"\n[sandbox.limits]\noutput = \"64KiB\"\n");
        let o = env.exec(&p, &["yes"]);
        assert_eq!(
            o.status.code(),
            Some(137),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.stdout.len(), 64 * 1024);
    }
}

sandbox_test! {
    fn ask_prompts_on_a_terminal() {
        // Under a pty (python's pty module), `ask` prompts on the terminal: "y" runs the command,
        // anything else does not (exit 121).
        for (answer, code, kept) in [("y", 0, false), ("n", 121, true)] {
            let env = Env::new("ask");
            env.write("victim/a.txt", "x");
            let script = format!(
                "import os,pty,sys\n\
                 pid, fd = pty.fork()\n\
                 if pid == 0:\n\
                 \x20   os.execv(sys.argv[1], sys.argv[1:])\n\
                 out = b''\n\
                 while b'[y/N]' not in out:\n\
                 \x20   out += os.read(fd, 1024)\n\
                 os.write(fd, b'{answer}\\n')\n\
                 while True:\n\
                 \x20   try:\n\
                 \x20       chunk = os.read(fd, 1024)\n\
                 \x20   except OSError:\n\
                 \x20       break\n\
                 \x20   if not chunk:\n\
                 \x20       break\n\
                 \x20   out += chunk\n\
                 sys.stdout.write(out.decode(errors='replace'))\n\
                 sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
            );
            let o = env
                .raw("python3")
                .args([
                    "-c", &script, BIN, "exec", "--policy", "standard", "--", "rm", "-rf", "victim",
                ])
                .output()
                .expect("run under pty");
            assert_eq!(o.status.code(), Some(code), "answer {answer}: {}", text(&o));
            assert!(
                stdout(&o).contains("ask-rm-recursive"),
                "the prompt names the rule: {}",
                text(&o)
            );
            assert_eq!(
                env.ws.join("victim/a.txt").exists(),
                kept,
                "answer {answer}"
            );
        }
    }
}

sandbox_test! {
    fn killing_the_broker_kills_the_run() {
        let env = Env::new("brokerkill");
        let marker = format!("3{}.75", std::process::id());
        for policy in ["strict", "standard"] {
            let mut child = env
                .cmd()
                .args(["exec", "--policy", policy, "--", "sh", "-c"])
                .arg(format!("setsid sleep {marker} & sleep {marker}"))
                .spawn()
                .expect("spawn");
            // Wait until the sandboxed sleeps run, then SIGKILL the gateway itself.
            let t = std::time::Instant::now();
            while sleeps(&marker).len() < 2 && t.elapsed() < std::time::Duration::from_secs(10) {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert_eq!(sleeps(&marker).len(), 2, "{policy}: the run did not start");
            child.kill().expect("kill gateway");
            let _ = child.wait();
            let t = std::time::Instant::now();
            while !sleeps(&marker).is_empty() && t.elapsed() < std::time::Duration::from_secs(5) {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert!(
                sleeps(&marker).is_empty(),
                "{policy} survivors: {:?}",
                sleeps(&marker)
            );
        }
    }
}

sandbox_test! {
    fn unprivileged_broker_gets_the_same_sandbox() {
        // As uid 65534 a run gets what root's gets: its own user, pid, mount, ipc, uts and
        // net namespaces, the host read-only, landlock, seccomp and rlimits; only the memory
        // cgroup (which needs a broker that may manage cgroups) is said to be missing.
        let env = Env::new("unpriv");
        std::fs::write(env.outside.join("secret"), "UNPRIV-SECRET").expect("write");
        env.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
        let st = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(&env.root)
            .status()
            .expect("chown");
        assert!(st.success());
        let as_nobody = |policy: &str, script: &str| {
            env.raw("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .args([BIN, "--json", "exec", "--policy", policy, "--", "sh", "-c", script])
                .stdin(Stdio::null())
                .output()
                .expect("setpriv")
        };
        let o = as_nobody("strict", "echo ok > f && cat f");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["stdout"], "ok\n");
        for k in ["user_namespace", "pid_namespace", "mount_namespace", "net_namespace", "read_only_host"] {
            assert_eq!(v["enforcement"][k], true, "{k}: {v}");
        }
        assert_eq!(v["enforcement"]["protected_read_only"], 1, "{v}");
        assert_eq!(v["enforcement"]["landlock"]["fs"], true);
        assert_eq!(v["enforcement"]["seccomp"], true);
        assert_eq!(v["enforcement"]["capabilities_dropped"], true, "{v}");
        let not_applied = v["enforcement"]["not_applied"].as_array().expect("not_applied").clone();
        assert!(
            not_applied.iter().all(|n| n.as_str().is_some_and(|n| n.starts_with("cgroup:"))),
            "{not_applied:?}"
        );
        // Files outside stay unreadable (landlock, not permissions: the file is nobody's).
        let o = as_nobody("strict", &format!("cat {}", env.outside.join("secret").display()));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert!(!v["stdout"].to_string().contains("UNPRIV-SECRET"), "{v}");
        assert_ne!(v["exit_code"], 0);
        // standard's loopback is the run's own, as for root: a server and its client work.
        let o = as_nobody(
            "standard",
            "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); c=socket.create_connection(s.getsockname()); print(\"SOCKET\")'",
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert!(v["stdout"].to_string().contains("SOCKET"), "{v}");
        assert_eq!(v["enforcement"]["net_namespace"], true, "{v}");
    }
}

sandbox_test! {
    fn control_private_dev_shm_and_multiprocessing() {
        // Python's multiprocessing needs POSIX semaphores in /dev/shm: each run gets its own.
        let env = Env::new("shm");
        let marker = format!("gw-shm-{}", std::process::id());
        for policy in ["strict", "standard"] {
            let o = env.exec(
                policy,
                &[
                    "python3",
                    "-c",
                    &format!(
                        "import multiprocessing as m\nprint(m.Pool(2).map(abs, [-1, -2]))\nopen('/dev/shm/{marker}', 'w').write('x')"
                    ),
                ],
            );
            assert_eq!(stdout(&o).trim(), "[1, 2]", "{policy}: {}", text(&o));
            assert!(!Path::new("/dev/shm").join(&marker).exists(), "{policy}: /dev/shm is the host's");
            let o = env.exec(policy, &["ls", "-A", "/dev/shm"]);
            assert_stdout_lacks(&o, &marker, policy);
        }
    }
}

sandbox_test! {
    fn escape_raw_devices() {
        // Under policies that read `/`, block devices and non-safe character devices are not
        // in the run's minimal /dev at all (ENOENT); landlock refuses them too (EACCES) where
        // a policy reads the host's /dev. Some kernels also refuse a capless open of a block
        // device (EPERM); the test does not rely on that.
        let env = Env::new("devices");
        let block = std::fs::read_dir("/dev")
            .expect("/dev")
            .flatten()
            .find(|e| {
                use std::os::unix::fs::FileTypeExt;
                e.file_type().map(|t| t.is_block_device()).unwrap_or(false)
            })
            .map(|e| e.path().display().to_string());
        let mut targets = vec!["/dev/kmsg".to_string()];
        targets.extend(block);
        for policy in ["standard", "permissive"] {
            for dev in &targets {
                let o = env.exec(policy, &["head", "-c", "16", dev]);
                assert_ne!(o.status.code(), Some(0), "{policy} {dev}: {}", text(&o));
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    err.contains("No such file or directory") || err.contains("Permission denied"),
                    "{policy} {dev}: expected the minimal /dev's ENOENT or landlock's EACCES: {}",
                    text(&o)
                );
            }
            // The safe devices still work.
            let o = env.sh(policy, "head -c 4 /dev/urandom | wc -c; echo x > /dev/null && echo ok");
            assert_eq!(stdout(&o), "4\nok\n", "{policy}: {}", text(&o));
        }
    }
}

sandbox_test! {
    fn deny_inside_workspace_hides_files() {
        // A policy may hide files inside the workspace (secrets in .env): the run does not see
        // their content and cannot change them, and the rest of the workspace stays writable.
        let env = Env::new("hidden");
        env.write(".env", "DB_PASSWORD=hunter2-HIDDEN\n");
        env.write(".env.local", "TOKEN-HIDDEN2\n");
        env.write("src/main.c", "int main(void){return 0;}\n");
        let p = env.policy_file("extends = \"strict\"\n[sandbox]\ndeny = [\"${WORKSPACE}/.env*\"]\n");
        let o = env.sh(&p, "cat .env .env.local; echo new > newfile && cat newfile; echo '/* x */' >> src/main.c");
        assert_stdout_lacks(&o, "HIDDEN", "hidden .env");
        assert!(stdout(&o).contains("new"), "{}", text(&o));
        for script in ["echo y > .env", "rm -f .env.local", "mv .env gone"] {
            let o = env.sh(&p, script);
            assert_ne!(o.status.code(), Some(0), "`{script}`: {}", text(&o));
        }
        assert_eq!(std::fs::read_to_string(env.ws.join(".env")).expect("read"), "DB_PASSWORD=hunter2-HIDDEN\n");
        assert!(env.ws.join(".env.local").exists());
        assert!(std::fs::read_to_string(env.ws.join("src/main.c")).expect("read").contains("x */"));
        // Also inside a directory pinned because it holds protected paths (`.git`).
        env.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
        env.write(".git/secret-token", "GIT-TOKEN-HIDDEN\n");
        let p = env.policy_file("extends = \"strict\"\n[sandbox]\ndeny = [\"${WORKSPACE}/.git/secret*\"]\n");
        let o = env.exec(&p, &["cat", ".git/secret-token"]);
        assert_stdout_lacks(&o, "GIT-TOKEN-HIDDEN", "hidden inside a pinned directory");
    }
}

sandbox_test! {
    fn escape_proc_sys_and_sysfs_writes() {
        // Classic container escapes: a core_pattern pipe, sysrq, the uevent helper.
        let env = Env::new("procsys");
        let before = std::fs::read_to_string("/proc/sys/kernel/core_pattern").expect("core_pattern");
        for policy in ["strict", "standard", "permissive"] {
            for (file, value) in [
                ("/proc/sys/kernel/core_pattern", "|/tmp/gw-evil"),
                ("/proc/sysrq-trigger", "h"),
                ("/sys/kernel/uevent_helper", "/tmp/gw-evil"),
            ] {
                let o = env.sh(policy, &format!("printf '%s' '{value}' > {file}"));
                assert_ne!(o.status.code(), Some(0), "{policy} {file}: {}", text(&o));
            }
        }
        assert_eq!(std::fs::read_to_string("/proc/sys/kernel/core_pattern").expect("core_pattern"), before);
    }
}

#[test]
fn json_reports_denials() {
    let env = Env::new("jsondeny");
    let o = env
        .cmd()
        .args([
            "--json", "exec", "--policy", "strict", "--", "rm", "-rf", "x",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(120), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["decision"]["effect"], "deny");
    assert_eq!(v["ran"], false);
    assert!(
        v["decision"]["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .any(|r| r["id"] == "deny-rm-recursive-force"
                && r["reason"].as_str().is_some_and(|s| !s.is_empty())),
        "{v}"
    );
}

sandbox_test! {
    fn escape_setuid_bits_left_behind() {
        // A setuid-root file left in the workspace would give root to whoever runs it later,
        // outside the sandbox. Setting S_ISUID/S_ISGID is refused in every policy.
        for policy in ["strict", "standard", "permissive"] {
            assert_attack_blocked(policy, "setuid-bit", None);
        }
        let env = Env::new("suid");
        env.write("tool", "#!/bin/sh\n");
        let o = env.sh("standard", "chmod u+s tool; chmod 2755 tool; install -m 4755 tool tool2; cp -p /usr/bin/passwd pw 2>/dev/null; true");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        for f in ["tool", "tool2", "pw"] {
            if let Ok(m) = std::fs::metadata(env.ws.join(f)) {
                assert_eq!(m.permissions().mode() & 0o6000, 0, "{f} has a setuid/setgid bit");
            }
        }
        // Control: unconfined, the fixture does set the bits.
        let o = Command::new(attack_bin()).arg("setuid-bit").current_dir(&env.ws).output().expect("run");
        assert!(stdout(&o).contains("ESCAPED"), "{}", text(&o));
    }
}

/// A one-shot `gateway exec` (as `as_nobody` says) that changes important.txt and then sleeps;
/// returned once the change is made (it printed `started`).
fn start_changing_run(env: &Env, marker: &str, as_nobody: bool) -> std::process::Child {
    let script = format!("echo changed > important.txt; echo started; sleep 30 # {marker}");
    let mut c = env.as_user(as_nobody);
    let mut child = c
        .args(["exec", "--policy", "standard", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gateway");
    let mut out = child.stdout.take().expect("stdout");
    let mut seen = Vec::new();
    let mut b = [0u8; 64];
    while !String::from_utf8_lossy(&seen).contains("started") {
        match std::io::Read::read(&mut out, &mut b) {
            Ok(0) | Err(_) => panic!("the run ended before it started: {seen:?}"),
            Ok(n) => seen.extend_from_slice(&b[..n]),
        }
    }
    // The run's writes go to its own layer (the capture overlay): the workspace is unchanged
    // until the run ends.
    assert_eq!(
        std::fs::read_to_string(env.ws.join("important.txt")).expect("r"),
        "original\n"
    );
    child
}

/// Sends `sig` to the gateway and waits (at most 20 s) for it to end.
fn signal_and_wait(child: &mut std::process::Child, sig: &str) -> std::process::ExitStatus {
    let st = Command::new("kill")
        .args(["-s", sig, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let t = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if t.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("gateway did not end within 20 s of {sig}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A workspace with important.txt, owned by uid 65534 when `as_nobody`.
fn important_env(name: &str, as_nobody: bool) -> Env {
    let env = Env::new(name);
    env.write("important.txt", "original\n");
    if as_nobody {
        env.give_to_nobody();
    }
    env
}

/// A gateway command as root or as uid 65534.
fn gw_as(env: &Env, as_nobody: bool, args: &[&str]) -> Output {
    let mut c = env.as_user(as_nobody);
    c.args(args).stdin(Stdio::null()).output().expect("gateway")
}

fn records_as(env: &Env, as_nobody: bool) -> Vec<serde_json::Value> {
    let o = gw_as(env, as_nobody, &["log", "query", "--json", "--limit", "0"]);
    assert!(o.status.success(), "{}", text(&o));
    json_of(&o)["records"].as_array().expect("records").clone()
}

/// Interrupting a one-shot run (Ctrl-C, SIGTERM, a closed terminal) records it, cancelled,
/// with what it changed undoable, and the broker still dies of the signal.
fn interrupted_run_is_recorded(sig: &str, signo: i32, as_nobody: bool) {
    use std::os::unix::process::ExitStatusExt;
    let env = important_env(&format!("sig{signo}"), as_nobody);
    let marker = format!("gw-interrupt-{}-{signo}-{as_nobody}", std::process::id());
    let mut child = start_changing_run(&env, &marker, as_nobody);
    let st = signal_and_wait(&mut child, sig);
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err);
    assert_eq!(st.signal(), Some(signo), "{sig}: {st:?} {err}");
    assert_no_survivors(&marker, sig);
    let r = records_as(&env, as_nobody);
    assert_eq!(r.len(), 1, "{sig}: {r:?}");
    assert!(err.contains(&format!("interrupted by SIG{sig}")), "{err}");
    assert_eq!(r[0]["cancelled"], true, "{}", r[0]);
    assert_eq!(r[0]["interrupted"], signo, "{}", r[0]);
    assert_eq!(r[0]["files_changed"], 1, "{}", r[0]);
    assert!(r[0].get("broker_died").is_none(), "{}", r[0]);
    let o = gw_as(&env, as_nobody, &["undo"]);
    assert!(o.status.success(), "{sig}: {}", text(&o));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("important.txt")).expect("r"),
        "original\n"
    );
    // Recorded once: no intent was left for a later start to record again.
    assert_eq!(records_as(&env, as_nobody).len(), 2);
}

sandbox_test! {
    fn sigint_to_one_shot_exec_records_the_run_and_its_changes() {
        interrupted_run_is_recorded("INT", 2, false);
    }
}

sandbox_test! {
    fn sigterm_to_one_shot_exec_records_the_run_and_its_changes() {
        interrupted_run_is_recorded("TERM", 15, false);
    }
}

sandbox_test! {
    fn sighup_to_one_shot_exec_records_the_run_and_its_changes() {
        interrupted_run_is_recorded("HUP", 1, false);
    }
}

sandbox_test! {
    fn unprivileged_interrupted_exec_records_the_run_and_its_changes() {
        interrupted_run_is_recorded("TERM", 15, true);
        interrupted_run_is_recorded("INT", 2, true);
    }
}

/// SIGKILL of the broker mid-run: the next gateway command records the run from its intent
/// (broker died, exit unknown), once, with its changes undoable.
fn killed_broker_is_recovered(as_nobody: bool) {
    let env = important_env("sigkill", as_nobody);
    let marker = format!("gw-sigkill-{}-{as_nobody}", std::process::id());
    let mut child = start_changing_run(&env, &marker, as_nobody);
    let st = signal_and_wait(&mut child, "KILL");
    assert!(!st.success());
    // The sandbox dies with its broker.
    assert_no_survivors(&marker, "SIGKILL");
    // Any next command on the state directory records it.
    let o = gw_as(&env, as_nobody, &["history"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(stderr(&o).contains("whose broker died"), "{}", text(&o));
    let r = records_as(&env, as_nobody);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0]["broker_died"], true, "{}", r[0]);
    assert!(r[0]["exit_code"].is_null(), "{}", r[0]);
    assert!(
        r[0]["error"].as_str().is_some_and(|e| e.contains("died")),
        "{}",
        r[0]
    );
    assert_eq!(r[0]["args"][0], "sh", "{}", r[0]);
    assert_eq!(r[0]["decision"]["effect"], "allow", "{}", r[0]);
    // What the run wrote is held whole, as a change set, for a person to apply or discard:
    // nothing is lost, and nothing half-made lands by itself.
    let error = r[0]["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("held as change set"), "{}", r[0]);
    assert_eq!(
        std::fs::read_to_string(env.ws.join("important.txt")).expect("r"),
        "original\n"
    );
    let o = gw_as(&env, as_nobody, &["--json", "changes"]);
    assert!(o.status.success(), "{}", text(&o));
    let sets = json_of(&o)["sets"].as_array().cloned().unwrap_or_default();
    assert_eq!(sets.len(), 1, "{}", text(&o));
    let id = sets[0]["id"].as_str().expect("id").to_string();
    assert!(error.contains(&id), "{error}");
    let o = gw_as(&env, as_nobody, &["apply", &id]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("important.txt")).expect("r"),
        "changed\n"
    );
    let o = gw_as(&env, as_nobody, &["undo"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("important.txt")).expect("r"),
        "original\n"
    );
    let o = gw_as(&env, as_nobody, &["log", "verify"]);
    assert!(o.status.success(), "{}", text(&o));
    // Recorded once; the apply and the undo are records of their own.
    assert_eq!(records_as(&env, as_nobody).len(), 3, "recorded once");
}

sandbox_test! {
    fn sigkill_of_the_broker_is_recorded_by_the_next_start() {
        killed_broker_is_recovered(false);
    }
}

sandbox_test! {
    fn unprivileged_sigkill_of_the_broker_is_recorded_by_the_next_start() {
        killed_broker_is_recovered(true);
    }
}

sandbox_test! {
    fn a_signal_ignored_at_start_stays_ignored_during_a_run() {
        // `nohup gateway exec ...` (or a script's background job, which ignores SIGINT): the
        // broker does not turn an ignored signal into a cancellation; the run completes.
        let env = important_env("sigign", false);
        let script = "echo changed > important.txt; echo started; sleep 2";
        let mut child = env
            .raw("sh")
            .args(["-c", "trap '' HUP; exec \"$0\" exec --policy standard -- sh -c \"$1\"", BIN, script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut out = child.stdout.take().expect("stdout");
        let mut seen = Vec::new();
        let mut b = [0u8; 64];
        while !String::from_utf8_lossy(&seen).contains("started") {
            match std::io::Read::read(&mut out, &mut b) {
                Ok(0) | Err(_) => panic!("the run ended before it started"),
                Ok(n) => seen.extend_from_slice(&b[..n]),
            }
        }
        let st = signal_and_wait(&mut child, "HUP");
        assert_eq!(st.code(), Some(0), "{st:?}");
        let r = log_records(&env);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].get("cancelled").is_none(), "{}", r[0]);
        assert_eq!(r[0]["exit_code"], 0, "{}", r[0]);
    }
}

// Issue 23 (the sandbox as layers): `--json`'s enforcement says, per layer, what held, and the
// audit record names the layers that did not; as root everything under strict is enforced,
// as uid 65534 namespaces and mounts are not applied and capabilities are partial.
sandbox_test! {
    fn enforcement_reports_each_layers_status() {
        let env = Env::new("layers");
        // A protected path in the workspace: read-only by a mount, or kept by the broker.
        env.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
        let o = env.gw(&["--json", "exec", "--policy", "strict", "--", "true"]);
        let v = json_of(&o);
        let layers = &v["enforcement"]["layers"];
        for l in ["namespaces", "network", "mounts", "capabilities", "landlock", "seccomp"] {
            assert_eq!(layers[l]["status"], "enforced", "{l}: {v}");
        }
        assert_eq!(v["enforcement"]["fully_enforced"], true, "{v}");
        let rec = log_records(&env).pop().expect("record");
        let enf = rec["enforcement"].as_str().expect("enforcement");
        assert!(!enf.contains("not enforced"), "{enf}");

        env.give_to_nobody();
        let o = env
            .nobody()
            .args(["--json", "exec", "--policy", "strict", "--", "true"])
            .output()
            .expect("run gateway");
        let v = json_of(&o);
        assert_eq!(v["exit_code"], 0, "{v}");
        // A normal user's run: every layer as root's, but the memory cgroup.
        let layers = &v["enforcement"]["layers"];
        for l in ["namespaces", "network", "mounts", "capabilities", "landlock", "seccomp"] {
            assert_eq!(layers[l]["status"], "enforced", "nobody {l}: {v}");
        }
        assert_eq!(layers["cgroup"]["status"], "not_applied", "{v}");
        let not_applied = v["enforcement"]["not_applied"].to_string();
        assert!(not_applied.contains("cgroup: memory total"), "{not_applied}");
        let rec = log_records(&env).pop().expect("record");
        let enf = rec["enforcement"].as_str().expect("enforcement");
        assert!(enf.contains("not enforced: cgroup not applied"), "{enf}");
    }
}

sandbox_test! {
    fn a_system_directory_is_never_a_workspace() {
        // The workspace is writable: run as root from /dev, a command could replace
        // /dev/null by a regular file (or delete any device node) for the whole machine.
        // Only a harmless new name is tried here; every policy refuses before running.
        let env = Env::new("sysdir-ws");
        for (dir, policy) in [("/dev", "permissive"), ("/dev", "standard"), ("/usr/local", "standard")] {
            let probe = Path::new(dir).join(format!("gateway-ws-probe-{}", std::process::id()));
            let o = env
                .cmd()
                .args(["exec", "--policy", policy, "--cwd", dir, "--", "touch"])
                .arg(probe.file_name().expect("name"))
                .output()
                .expect("run");
            let made = probe.exists();
            let _ = std::fs::remove_file(&probe);
            assert!(!made, "{dir} ({policy}): the command wrote in a system directory");
            assert_eq!(o.status.code(), Some(122), "{dir} ({policy}): {}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("system directory") && err.contains(dir), "{dir}: {err}");
        }
    }
}
