//! `gateway repl` from the CLI's side: resolves where and with what the REPL starts (the
//! policy, the places, the daemon, the state directory) and lends it what only the CLI has —
//! its `exec` with its output, `log query`, the config file's policy — as
//! [`serve::repl::Host`]. The REPL itself is `serve::repl`.

use super::{Call, Cli, RunAt, exit, fail, load_policy, state_dir};
use crate::broker::pin::Pinned;
use crate::broker::session::Place;
use crate::policy::Policy;
use crate::serve;
use std::process::ExitCode;
use std::sync::Arc;

struct CliHost<'a> {
    cli: &'a Call,
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
        let e = crate::broker::request::Exec {
            argv: argv.to_vec(),
            ..Default::default()
        };
        let r = super::run_exec_at(self.cli, &e, at);
        let code = super::render(self.cli, &r);
        // A SIGTERM or SIGHUP caught during the run ends the REPL too (a Ctrl-C does not).
        let _ = self.cli.end(code);
    }

    fn render(&self, report: &crate::broker::report::Report) {
        let _ = super::render(self.cli, report);
    }

    fn log_query(&self, args: &[&str]) {
        let mut argv = vec!["gateway", "log", "query"];
        argv.extend(args);
        let argv: Vec<String> = argv.into_iter().skip(1).map(str::to_string).collect();
        match <Self as serve::repl::Host>::request(self, &argv) {
            Ok(crate::broker::request::Request::Log(cmd)) => {
                let report = super::log::run(self.cli, &cmd);
                let _ = super::render(self.cli, &report);
            }
            Ok(_) => {}
            Err(e) => eprintln!("/log: {e}"),
        }
    }

    fn load_named(&self, name: &str) -> Result<Policy, String> {
        super::load_named(self.cli, name)
    }

    fn policy_name(&self) -> String {
        super::policy_name(self.cli)
    }

    fn request(&self, argv: &[String]) -> Result<crate::broker::request::Request, String> {
        let args = std::iter::once("gateway").chain(argv.iter().map(String::as_str));
        let cli = <Cli as clap::Parser>::try_parse_from(args)
            .map_err(|e| e.render().to_string().trim().to_string())?;
        match super::request::of(cli).map_err(|e| e.to_string())? {
            (_, super::request::Parsed::Call(r)) => Ok(r),
            (_, super::request::Parsed::Local(_)) => {
                Err(crate::model::RequestError::NotARequest.to_string())
            }
        }
    }
}

/// Runs the REPL until /exit or end of input.
pub(super) fn run(cli: &Call) -> ExitCode {
    let session = cli.cx.session_id_for("repl");
    // Pinned for the session: the session's first record carries its hash.
    let pinned = match load_policy(cli) {
        Ok(p) => Arc::new(Pinned::new(&session, p)),
        Err(e) => return fail(cli, exit::POLICY, e),
    };
    let place = super::effective_place(cli);
    let (workspace, cwd) = match (
        std::fs::canonicalize(&place.workspace),
        std::fs::canonicalize(&place.cwd),
    ) {
        (Ok(w), Ok(c)) => (w, c),
        (Err(e), _) | (_, Err(e)) => {
            return fail(cli, exit::USAGE, format!("the working directory: {e}"));
        }
    };
    let daemon = match super::daemon_socket() {
        Ok(d) => d,
        Err(e) => return fail(cli, exit::SANDBOX, e),
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
        Err(e) => fail(cli, exit::USAGE, e),
    }
}
