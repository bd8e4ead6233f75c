//! `gateway repl` driven on a terminal in tmux, embedded and through the daemon.

use crate::util::*;

sandbox_test!(
    fn repl_in_tmux_runs_lines_undoes_and_shows_the_log() {
        let env = Env::new("repl");
        repl_in_tmux(&env, Path::new(""), &|args| env.gw(args));
    }
);

sandbox_test!(
    fn repl_goes_through_the_daemon() {
        // With a daemon running, the REPL is its front end: the same session, with every
        // line and slash command a call to the daemon, recorded in the daemon's log.
        let env = Env::new("repl-daemon");
        let d = Daemon::start(&env, "standard", &[]);
        let audit = |args: &[&str]| -> Output { d.cmd(&env).args(args).output().expect("gateway") };
        if repl_in_tmux(&env, &d.socket, &audit) {
            let o = audit(&["log", "query", "--json", "--limit", "0"]);
            let recs = json_of(&o)["records"].as_array().expect("records").clone();
            let execs: Vec<_> = recs.iter().filter(|r| r["tool"] == "exec").collect();
            assert!(execs.len() >= 4, "{execs:?}");
            assert!(
                execs.iter().all(|r| r["caller"]["client"] == "daemon"),
                "{execs:?}"
            );
        }
    }
);

/// Issue 25 on a terminal: the REPL pins the policy it loaded. The file is rewritten from
/// outside to allow a probe: the next line is still refused and the change is said once;
/// `/reload-policy` brings it into force (recorded with both hashes); a reload of a broken
/// file keeps the policy in force (recorded with the error). False when skipped.
fn repl_pin_in_tmux(env: &Env, socket: &Path, audit: &dyn Fn(&[&str]) -> Output) -> bool {
    repl_pin_in_tmux_as(env, socket, false, audit)
}

/// The pin check with the REPL run as root or (`nobody`) as uid 65534 through setpriv.
fn repl_pin_in_tmux_as(
    env: &Env,
    socket: &Path,
    nobody: bool,
    audit: &dyn Fn(&[&str]) -> Output,
) -> bool {
    if std::env::var_os("GATEWAY_TEST_NO_TMUX").is_some() {
        eprintln!("skipped: GATEWAY_TEST_NO_TMUX is set");
        return false;
    }
    let pf = env.policy_file(PROBE_DENIED);
    if nobody {
        env.give_to_nobody();
    }
    let as_who = if nobody {
        "setpriv --reuid=65534 --regid=65534 --clear-groups -- "
    } else {
        ""
    };
    let name = format!(
        "gwt-pin-{}-{}",
        std::process::id(),
        env.root.file_name().expect("name").to_string_lossy()
    );
    let tmux = |args: &[&str]| -> Output {
        Command::new("tmux")
            .args(args)
            .output()
            .expect("tmux (apt-get install tmux)")
    };
    let script = format!(
        "cd '{}' && HOME='{}' GATEWAY_STATE_DIR='{}' GATEWAY_SOCKET='{}' GATEWAY_POLICY='{}' {as_who}'{}' repl",
        env.ws.display(),
        env.home.display(),
        env.state.display(),
        socket.display(),
        pf,
        BIN
    );
    let o = tmux(&[
        "new-session",
        "-d",
        "-s",
        &name,
        "-x",
        "200",
        "-y",
        "60",
        &script,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let screen = || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-J", "-t", &name]).stdout)
            .into_owned()
    };
    let wait_for = |want: &dyn Fn(&str) -> bool, what: &str| {
        for _ in 0..100 {
            if want(&screen()) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let s = screen();
        let _ = tmux(&["kill-session", "-t", &name]);
        panic!("{what} did not appear:\n{s}");
    };
    let send = |keys: &str| {
        assert!(
            tmux(&["send-keys", "-t", &name, "-l", keys])
                .status
                .success()
        );
        assert!(tmux(&["send-keys", "-t", &name, "Enter"]).status.success());
    };
    let count = |s: &str, needle: &str| s.matches(needle).count();
    wait_for(&|s| s.contains("gateway:ws$"), "the prompt");
    send("touch probe1");
    wait_for(&|s| count(s, "deny-probe") >= 1, "the first refusal");
    // Rewritten from outside: the probe is allowed by the file, not by the session.
    std::fs::write(&pf, PROBE_FREE).expect("rewrite");
    send("touch probe2");
    wait_for(
        &|s| count(s, "deny-probe") >= 2 && s.contains("not in force until"),
        "the second refusal and the notice",
    );
    send("touch probe3");
    wait_for(&|s| count(s, "deny-probe") >= 3, "the third refusal");
    assert_eq!(
        count(&screen(), "not in force until"),
        1,
        "said once:\n{}",
        screen()
    );
    for p in ["probe1", "probe2", "probe3"] {
        assert!(!env.ws.join(p).exists(), "{p}:\n{}", screen());
    }
    send("/reload-policy");
    wait_for(
        &|s| s.contains("in force for session") || s.contains("in force, replacing"),
        "the reload",
    );
    send("touch probe4");
    for _ in 0..100 {
        if env.ws.join("probe4").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        env.ws.join("probe4").exists(),
        "after the reload:\n{}",
        screen()
    );
    {
        use std::os::unix::fs::MetadataExt;
        let uid = std::fs::metadata(env.ws.join("probe4"))
            .expect("probe4")
            .uid();
        assert_eq!(uid, if nobody { 65534 } else { 0 }, "who ran the REPL");
    }
    // A broken file: the reload fails, and the policy in force stays.
    std::fs::write(&pf, "extends = [this is not toml\n").expect("rewrite");
    send("/reload-policy");
    wait_for(
        &|s| s.contains("stays in force") || s.contains("the session keeps policy"),
        "the failed reload",
    );
    send("touch probe5");
    for _ in 0..100 {
        if env.ws.join("probe5").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        env.ws.join("probe5").exists(),
        "after the failed reload:\n{}",
        screen()
    );
    send("/exit");
    for _ in 0..50 {
        if !tmux(&["has-session", "-t", &name]).status.success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = tmux(&["kill-session", "-t", &name]);
    let first = probe_policy_sha256(Path::new(&pf), PROBE_DENIED);
    let second = probe_policy_sha256(Path::new(&pf), PROBE_FREE);
    let o = audit(&["log", "query", "--json", "--limit", "0"]);
    let sessions = sessions_of(json_of(&o)["records"].as_array().expect("records"), "repl-");
    assert_eq!(sessions.len(), 1, "{}", text(&o));
    let recs = &sessions[0];
    assert_eq!(recs[0]["tool"], "exec", "{recs:?}");
    assert_eq!(recs[0]["policy_sha256"], first.as_str(), "{}", recs[0]);
    let reloads: Vec<_> = recs
        .iter()
        .filter(|r| r["tool"] == "policy.reload")
        .collect();
    assert_eq!(reloads.len(), 2, "{recs:?}");
    assert_eq!(
        reloads[0]["policy_replaced"],
        first.as_str(),
        "{}",
        reloads[0]
    );
    assert_eq!(
        reloads[0]["policy_sha256"],
        second.as_str(),
        "{}",
        reloads[0]
    );
    assert!(reloads[0]["error"].is_null(), "{}", reloads[0]);
    assert_eq!(
        reloads[1]["policy_replaced"],
        second.as_str(),
        "{}",
        reloads[1]
    );
    assert_eq!(
        reloads[1]["policy_sha256"],
        second.as_str(),
        "kept: {}",
        reloads[1]
    );
    assert!(
        reloads[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("unchanged")),
        "{}",
        reloads[1]
    );
    // Every other record of the session carries no hash.
    let hashed = recs
        .iter()
        .filter(|r| r.get("policy_sha256").is_some())
        .count();
    assert_eq!(hashed, 3, "{recs:?}");
    let o = audit(&["log", "verify"]);
    assert!(o.status.success(), "{}", text(&o));
    true
}

sandbox_test!(
    fn repl_pins_the_policy_it_loaded_until_reload_policy() {
        let env = Env::new("repl-pin");
        repl_pin_in_tmux(&env, Path::new(""), &|args| env.gw(args));
    }
);

sandbox_test!(
    fn repl_as_nobody_pins_the_policy_it_loaded_until_reload_policy() {
        let env = Env::new("repl-pin-nobody");
        repl_pin_in_tmux_as(&env, Path::new(""), true, &|args| env.gw(args));
    }
);

sandbox_test!(
    fn repl_through_the_daemon_pins_the_policy_until_reload_policy() {
        let env = Env::new("repl-pin-daemon");
        let d = Daemon::start(&env, "standard", &[]);
        let audit = |args: &[&str]| -> Output { d.cmd(&env).args(args).output().expect("gateway") };
        repl_pin_in_tmux(&env, &d.socket, &audit);
    }
);
