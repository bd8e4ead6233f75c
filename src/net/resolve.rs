//! Name resolution for the proxy and the `http` tool, and the decision that joins the
//! policy's rules, the resolver and the connect-time check ([`decide`]).
//!
//! Names are resolved by the broker with the system's resolver (`getaddrinfo`), never inside
//! the command's namespace. Tests map their own names to their own addresses through
//! `GATEWAY_TEST_RESOLVE` (`name=addr[,name=addr]...`), read by the front end from the
//! broker's own environment at start ([`set_overrides`]): a command cannot set it (its
//! environment is not the broker's, and the daemon reads it only from its own). A mapped
//! name is checked like any other: its address must still pass [`super::addr::may_connect`].

use super::addr::{self, Refused};
use super::rules::{Destination, Host, Rules, Verdict};
use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::OnceLock;

/// The names tests map to addresses (`GATEWAY_TEST_RESOLVE`).
static OVERRIDES: OnceLock<HashMap<String, Vec<IpAddr>>> = OnceLock::new();

/// Why `GATEWAY_TEST_RESOLVE` could not be read.
#[derive(Debug, thiserror::Error)]
#[error(
    "GATEWAY_TEST_RESOLVE: {entry:?} is not `name=address` (a host name and an IP address, entries separated by commas)"
)]
pub struct OverrideError {
    /// The entry.
    pub entry: String,
}

/// Parses `GATEWAY_TEST_RESOLVE`'s value: `name=addr[,name=addr]...` (a name may repeat).
pub fn parse_overrides(text: &str) -> Result<HashMap<String, Vec<IpAddr>>, OverrideError> {
    let mut map: HashMap<String, Vec<IpAddr>> = HashMap::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || OverrideError {
            entry: entry.to_owned(),
        };
        let (name, a) = entry.split_once('=').ok_or_else(bad)?;
        let name = super::rules::normalise_name(name.trim()).map_err(|_| bad())?;
        let a: IpAddr = a.trim().parse().map_err(|_| bad())?;
        map.entry(name).or_default().push(a);
    }
    Ok(map)
}

/// Sets the test overrides once, at the front end's start (later calls change nothing).
pub fn set_overrides(map: HashMap<String, Vec<IpAddr>>) {
    let _ = OVERRIDES.set(map);
}

/// The addresses of `name`: the test overrides first, else the system's resolver.
pub fn resolve(name: &str, port: u16) -> std::io::Result<Vec<IpAddr>> {
    if let Some(a) = OVERRIDES.get().and_then(|m| m.get(name)) {
        return Ok(a.clone());
    }
    let mut out: Vec<IpAddr> = Vec::new();
    for sa in (name, port).to_socket_addrs()? {
        if !out.contains(&sa.ip()) {
            out.push(sa.ip());
        }
    }
    Ok(out)
}

/// What the policy says about one connection, before any byte is relayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decided {
    /// Connect to this address (the one checked: the connection is pinned to it).
    Allowed {
        /// The address.
        addr: IpAddr,
        /// The allow rule, as written; `network.unknown` when a person approved.
        rule: String,
    },
    /// Refused.
    Refused {
        /// The deciding rule: a rule as written, `network.unknown`, `network.address`
        /// (an IP literal or a special address no rule names), `network.resolve`.
        rule: String,
        /// Why, for the command's stderr and the record.
        reason: String,
    },
    /// No rule covers it and the policy asks a person: ask, then call
    /// [`decide`] again with `approved` set.
    Ask,
}

/// Decides a connection to `dest`: deny rules, allow rules, then `unknown` (`ask` gives
/// [`Decided::Ask`] unless `approved`, which is what a person answered); then resolves the
/// name and runs the connect-time check, which pins the connection to one checked address.
pub fn decide(rules: &Rules, ask: bool, approved: Option<bool>, dest: &Destination) -> Decided {
    let verdict = rules.decide(dest);
    let rule = match verdict {
        Verdict::Denied { rule } => {
            return Decided::Refused {
                reason: format!("{dest} is denied by the network rule {rule:?}"),
                rule,
            };
        }
        Verdict::Allowed { rule } => rule,
        Verdict::Unknown => {
            // An IP literal that no rule allows is refused as an address, not asked about
            // (an address is not a name a person can judge).
            if let Host::Ip(_) = dest.host {
                return refused(addr::may_connect(rules, dest, &[]).err(), dest);
            }
            match (ask, approved) {
                (true, None) => return Decided::Ask,
                (true, Some(true)) => "network.unknown".to_owned(),
                (true, Some(false)) => {
                    return Decided::Refused {
                        rule: "network.unknown".into(),
                        reason: format!(
                            "{dest}: no network rule allows it, and it was not approved"
                        ),
                    };
                }
                (false, _) => {
                    return Decided::Refused {
                        rule: "network.unknown".into(),
                        reason: format!(
                            "{dest}: no network rule allows it (network.proxy.unknown = \"deny\"); to allow it, add {:?} to network.proxy.allow",
                            allow_hint(dest)
                        ),
                    };
                }
            }
        }
    };
    let resolved = match &dest.host {
        Host::Ip(_) => Vec::new(),
        Host::Name(n) => match resolve(n, dest.port) {
            Ok(a) => a,
            Err(e) => {
                return Decided::Refused {
                    rule: "network.resolve".into(),
                    reason: format!("{dest}: the name could not be resolved ({e})"),
                };
            }
        },
    };
    match addr::may_connect(rules, dest, &resolved) {
        Ok(addr) => Decided::Allowed { addr, rule },
        Err(e) => refused(Some(e), dest),
    }
}

fn refused(e: Option<Refused>, dest: &Destination) -> Decided {
    match e {
        Some(Refused::Denied { rule, .. }) => Decided::Refused {
            reason: format!("{dest} is denied by the network rule {rule:?}"),
            rule,
        },
        Some(e) => Decided::Refused {
            rule: "network.address".into(),
            reason: e.to_string(),
        },
        None => Decided::Refused {
            rule: "network.address".into(),
            reason: format!("{dest}: no network rule names this address"),
        },
    }
}

/// The rule that would allow `dest`: the name, with its port unless it is 80 or 443.
pub fn allow_hint(dest: &Destination) -> String {
    match &dest.host {
        Host::Ip(ip) => addr::rule_for(*ip, dest.port),
        Host::Name(n) if super::rules::DEFAULT_PORTS.contains(&dest.port) => n.clone(),
        Host::Name(n) => format!("{n}:{}", dest.port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(s: &str) -> Destination {
        Destination::parse(s, None).unwrap()
    }

    #[test]
    fn overrides_parse_and_refuse_nonsense() {
        let m = parse_overrides("pkg.test=127.0.0.1, Pkg.Test=::1,b.test=10.0.0.1").unwrap();
        assert_eq!(m["pkg.test"].len(), 2);
        assert!(parse_overrides("pkg.test").is_err());
        assert!(parse_overrides("pkg.test=nowhere").is_err());
        assert!(parse_overrides("1.2.3.4=1.2.3.4").is_err());
    }

    #[test]
    fn deny_allow_unknown_and_addresses() {
        let rules =
            Rules::parse(&["localhost:3000", "*.example.org"], &["bad.example.org"]).unwrap();
        assert!(matches!(
            decide(&rules, true, None, &dest("bad.example.org:443")),
            Decided::Refused { rule, .. } if rule == "bad.example.org"
        ));
        assert_eq!(
            decide(&rules, true, None, &dest("other.test:443")),
            Decided::Ask
        );
        assert!(matches!(
            decide(&rules, false, None, &dest("other.test:443")),
            Decided::Refused { rule, reason } if rule == "network.unknown" && reason.contains("other.test")
        ));
        assert!(matches!(
            decide(&rules, true, Some(false), &dest("other.test:443")),
            Decided::Refused { rule, .. } if rule == "network.unknown"
        ));
        // An IP literal no rule names: refused, never asked.
        assert!(matches!(
            decide(&rules, true, None, &dest("169.254.169.254:80")),
            Decided::Refused { rule, .. } if rule == "network.address"
        ));
        assert!(matches!(
            decide(&rules, true, None, &dest("93.184.216.34:443")),
            Decided::Refused { rule, .. } if rule == "network.address"
        ));
        // localhost on its allowed port resolves to loopback, which the rule names.
        assert!(matches!(
            decide(&rules, false, None, &dest("localhost:3000")),
            Decided::Allowed { addr, .. } if addr.is_loopback()
        ));
        assert!(matches!(
            decide(&rules, false, None, &dest("localhost:3001")),
            Decided::Refused { .. }
        ));
    }
}
