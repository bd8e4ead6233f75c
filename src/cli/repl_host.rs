//! `gateway repl` from the CLI's side: resolves where and with what the REPL starts (the
//! policy, the places, the daemon, the state directory) and lends it what only the CLI has —
//! its `exec` with its output, `log query`, the config file's policy — as
//! [`serve::repl::Host`]. The REPL itself is `serve::repl`.

use super::{Cli, RunAt, exit, fail, load_policy, state_dir};
use crate::broker::pin::Pinned;
use crate::broker::session::Place;
use crate::policy::Policy;
use crate::serve;
use std::process::ExitCode;
use std::sync::Arc;

struct CliHost<'a> {
    cli: &'a Cli,
}

impl serve::repl::Host for CliHost<'_> {
    fn exec(&self, argv: &[String], place: Place, session: &str, policy: &Policy) {
        let at = RunAt {
            place: Some(place),
            session: Some(session.to_string()),
            policy: Some(policy.clone()),
            survive_sigint: true,
            agent: None,
        };
        let _ = super::run_exec_at(self.cli, None, &[], argv, None, at);
    }

    fn log_query(&self, args: &[&str]) {
        let mut argv = vec!["gateway", "log", "query"];
        argv.extend(args);
        match <Cli as clap::Parser>::try_parse_from(&argv) {
            Ok(sub) => {
                if let super::Cmd::Log { cmd } = &sub.cmd {
                    let _ = super::log::run(self.cli, cmd);
                }
            }
            Err(e) => eprintln!("/log: {}", e.render().to_string().trim()),
        }
    }

    fn load_named(&self, name: &str) -> Result<Policy, String> {
        super::load_named(name)
    }

    fn policy_name(&self) -> String {
        super::policy_name(self.cli)
    }
}

/// Runs the REPL until /exit or end of input.
pub(super) fn run(cli: &Cli) -> ExitCode {
    let session = crate::broker::log::session_id_for("repl");
    // Pinned for the session: the session's first record carries its hash.
    let pinned = match load_policy(cli) {
        Ok(p) => Arc::new(Pinned::new(&session, p)),
        Err(e) => return fail(exit::POLICY, e),
    };
    let place = super::effective_place(cli);
    let (workspace, cwd) = match (
        std::fs::canonicalize(&place.workspace),
        std::fs::canonicalize(&place.cwd),
    ) {
        (Ok(w), Ok(c)) => (w, c),
        (Err(e), _) | (_, Err(e)) => {
            return fail(exit::USAGE, format!("the working directory: {e}"));
        }
    };
    let daemon = match super::daemon_socket() {
        Ok(d) => d,
        Err(e) => return fail(exit::SANDBOX, e),
    };
    let start = serve::repl::Start {
        pinned,
        policy_spec: cli.policy.clone(),
        workspace,
        cwd,
        session,
        state: state_dir(cli),
        daemon,
        config_socket: super::config_socket(),
    };
    match serve::repl::run(&CliHost { cli }, start) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(exit::USAGE, e),
    }
}
