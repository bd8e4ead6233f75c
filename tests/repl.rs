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
