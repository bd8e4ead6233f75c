//! `gateway policy explain --credentials`: what the credential catalogue denies on this
//! machine and why (owner, what it holds, source), plus the policy's own denied paths and the
//! variables removed from every run.

use super::{Call, to_json_pretty};
use crate::broker::credentials as cat;
use crate::broker::report::credentials::CredentialsOutcome;
use crate::broker::report::{Outcome, Report};
use crate::policy::Policy;

pub(super) fn explain(cli: &Call, policy: &Policy) -> Report {
    let x = cat::explain(&cli.cx, policy);
    Report::new(0, Outcome::Credentials(CredentialsOutcome::of(&x)))
}

/// Renders the result here (the caller's terminal or pipe): under `--json` its JSON,
/// indented, else its human text.
pub(super) fn render(cli: &Call, x: &CredentialsOutcome) {
    if cli.json {
        outln!(cli, "{}", to_json_pretty(x.explained.value()));
        return;
    }
    outln!(
        cli,
        "Credentials no command or file tool may read, under every policy (policies/credentials.toml):"
    );
    let mut group = "";
    for s in &x.stores {
        if s.group != group {
            group = &s.group;
            outln!(cli, "\n{group}:");
        }
        outln!(cli, "  {}: {}", s.owner, s.holds);
        for p in &s.denied {
            outln!(cli, "    {}", p.display());
        }
        outln!(cli, "    source: {}", s.source);
    }
    outln!(
        cli,
        "\nAlso denied by policy `{}`: {}",
        x.policy,
        if x.policy_deny.is_empty() {
            "(nothing more)".to_string()
        } else {
            x.policy_deny.join(", ")
        }
    );
    outln!(cli, "\nEnvironment variables removed from every run:");
    for e in &x.env {
        outln!(cli, "  {}: {} ({})", e.owner, e.names.join(", "), e.holds);
        outln!(cli, "    source: {}", e.source);
    }
    outln!(cli, "  always (built in): {}", x.always_scrubbed.join(", "));
    if !x.policy_scrub.is_empty() {
        outln!(
            cli,
            "  by policy `{}`: {}",
            x.policy,
            x.policy_scrub.join(", ")
        );
    }
}
