//! `gateway policy explain --credentials`: what the credential catalogue denies on this
//! machine and why (owner, what it holds, source), plus the policy's own denied paths and the
//! variables removed from every run.

use crate::broker::credentials as cat;
use crate::policy::{self, Policy};
use serde_json::json;
use std::process::ExitCode;

pub(super) fn explain(policy: &Policy, as_json: bool) -> ExitCode {
    let stores = cat::denied_for_caller();
    let env = &policy::credentials::catalogue().env;
    if as_json {
        let stores: Vec<_> = stores
            .iter()
            .map(|(s, paths)| {
                json!({
                    "group": s.group,
                    "owner": s.owner,
                    "holds": s.holds,
                    "source": s.source,
                    "templates": s.paths,
                    "denied": paths,
                })
            })
            .collect();
        let v = json!({
            "policy": policy.name,
            "catalogue": "policies/credentials.toml",
            "stores": stores,
            "env": env,
            "always_scrubbed": policy::ALWAYS_SCRUB,
            "policy_deny": policy.sandbox.deny,
            "policy_scrub": policy.sandbox.env_scrub,
        });
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    outln!(
        "Credentials no command or file tool may read, under every policy (policies/credentials.toml):"
    );
    let mut group = "";
    for (s, paths) in &stores {
        if s.group != group {
            group = &s.group;
            outln!("\n{group}:");
        }
        outln!("  {}: {}", s.owner, s.holds);
        for p in paths {
            outln!("    {}", p.display());
        }
        outln!("    source: {}", s.source);
    }
    outln!(
        "\nAlso denied by policy `{}`: {}",
        policy.name,
        if policy.sandbox.deny.is_empty() {
            "(nothing more)".to_string()
        } else {
            policy.sandbox.deny.join(", ")
        }
    );
    outln!("\nEnvironment variables removed from every run:");
    for e in env {
        outln!("  {}: {} ({})", e.owner, e.names.join(", "), e.holds);
        outln!("    source: {}", e.source);
    }
    outln!("  always (built in): {}", policy::ALWAYS_SCRUB.join(", "));
    if !policy.sandbox.env_scrub.is_empty() {
        outln!(
            "  by policy `{}`: {}",
            policy.name,
            policy.sandbox.env_scrub.join(", ")
        );
    }
    ExitCode::SUCCESS
}
