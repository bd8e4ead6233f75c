//! `gateway policy explain --credentials`: what the credential catalogue denies on this
//! machine and why (owner, what it holds, source), plus the policy's own denied paths and the
//! variables removed from every run.

use super::to_json_pretty;
use crate::broker::credentials as cat;
use crate::policy::Policy;
use std::process::ExitCode;

pub(super) fn explain(policy: &Policy, as_json: bool) -> ExitCode {
    let x = cat::explain(&crate::broker::client::Context::current(), policy);
    if as_json {
        outln!("{}", to_json_pretty(&x));
        return ExitCode::SUCCESS;
    }
    outln!(
        "Credentials no command or file tool may read, under every policy (policies/credentials.toml):"
    );
    let mut group = "";
    for s in &x.stores {
        if s.group != group {
            group = s.group;
            outln!("\n{group}:");
        }
        outln!("  {}: {}", s.owner, s.holds);
        for p in &s.denied {
            outln!("    {}", p.display());
        }
        outln!("    source: {}", s.source);
    }
    outln!(
        "\nAlso denied by policy `{}`: {}",
        x.policy,
        if x.policy_deny.is_empty() {
            "(nothing more)".to_string()
        } else {
            x.policy_deny.join(", ")
        }
    );
    outln!("\nEnvironment variables removed from every run:");
    for e in x.env {
        outln!("  {}: {} ({})", e.owner, e.names.join(", "), e.holds);
        outln!("    source: {}", e.source);
    }
    outln!("  always (built in): {}", x.always_scrubbed.join(", "));
    if !x.policy_scrub.is_empty() {
        outln!("  by policy `{}`: {}", x.policy, x.policy_scrub.join(", "));
    }
    ExitCode::SUCCESS
}
