//! Destination rules: the strings a policy's `allow` and `deny` lists hold, parsed, and the
//! decision they make about a [`Destination`].
//!
//! A rule is a host pattern with an optional port:
//!
//! - `example.com` — that name only (not its subdomains);
//! - `*.example.org` — every name *below* `example.org`, at any depth (`a.example.org`,
//!   `a.b.example.org`), but **not** `example.org` itself: list the apex as its own rule;
//! - `example.net:8443`, `localhost:3000` — that name on that port only;
//! - `10.0.0.5`, `::1`, `[::1]:8080` — an IP address (an IPv6 address with a port is
//!   bracketed);
//! - `10.0.0.0/8`, `fc00::/7`, `[fd00::]/8:443` — a network (CIDR; its host bits must be zero).
//!
//! A rule without a port covers ports 80 and 443. Names are ASCII (an internationalised name
//! is written in its punycode `xn--` form), compared in lower case, with one trailing dot
//! dropped. A name whose last label is numeric (`127.1`, `2130706433`, `0x7f.1`) is refused:
//! resolvers read such names as IPv4 addresses, so they would be IP literals in disguise.
//!
//! Name rules match name destinations and address rules match address destinations: a name
//! rule never allows an address a client typed, and an address rule decides the addresses a
//! name resolves to only at connect time ([`super::addr::may_connect`]).

use std::fmt;
use std::net::IpAddr;

/// The longest host name (RFC 1035: 253 characters in text form).
pub const MAX_NAME: usize = 253;

/// The longest label of a host name (RFC 1035).
pub const MAX_LABEL: usize = 63;

/// The ports a rule without one covers.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// A host a client asks for: a normalised name or an IP address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Host {
    /// A host name: ASCII, lower case, no trailing dot.
    Name(String),
    /// An IP address literal.
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Host::Ip(IpAddr::V4(a)) => write!(f, "{a}"),
        }
    }
}

/// Where a client wants to connect: a host and a port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Destination {
    /// The host, as the client named it (normalised).
    pub host: Host,
    /// The TCP port (1–65535).
    pub port: u16,
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl Destination {
    /// Parses `host:port` (authority form, as in `CONNECT`), or `host` alone when
    /// `default_port` is given. IPv6 addresses are bracketed.
    pub fn parse(authority: &str, default_port: Option<u16>) -> Result<Self, HostError> {
        let (host, port) = split_host_port(authority)?;
        if host.contains('/') {
            return Err(HostError::BadChar { ch: '/' });
        }
        let host = parse_host(host)?;
        let port = match (port, default_port) {
            (Some(p), _) => parse_port(p)?,
            (None, Some(p)) if p != 0 => p,
            (None, _) => return Err(HostError::MissingPort),
        };
        Ok(Destination { host, port })
    }
}

/// What is wrong with a host, a port or an address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Nothing where a host was expected.
    #[error("the host is empty")]
    Empty,
    /// A character outside ASCII.
    #[error("the host is not ASCII (write an internationalised name in its punycode `xn--` form)")]
    NonAscii,
    /// A character a host name may not hold.
    #[error("the host holds {ch:?}, which a host name may not")]
    BadChar {
        /// The character.
        ch: char,
    },
    /// Two dots in a row, or a leading dot.
    #[error("the host has an empty label")]
    EmptyLabel,
    /// A label over 63 characters.
    #[error("a label of the host is over {MAX_LABEL} characters")]
    LabelTooLong,
    /// A name over 253 characters.
    #[error("the host is over {MAX_NAME} characters")]
    NameTooLong,
    /// A label starting or ending with `-`.
    #[error("a label of the host starts or ends with '-'")]
    Hyphen,
    /// A name whose last label is numeric, which resolvers read as an IPv4 address.
    #[error(
        "the host's last label is numeric: resolvers read it as an IPv4 address; write the address in dotted form"
    )]
    NumericName,
    /// Brackets that do not hold an IPv6 address.
    #[error("the brackets do not hold an IPv6 address")]
    BadBracket,
    /// A port that is not a number from 1 to 65535.
    #[error("the port {port:?} is not a number from 1 to 65535")]
    BadPort {
        /// The port as written.
        port: String,
    },
    /// No port where one is required.
    #[error("a port is required (host:port)")]
    MissingPort,
}

/// What is wrong with a rule (see [`RuleError`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleProblem {
    /// The host part is not a valid host.
    #[error(transparent)]
    Host(#[from] HostError),
    /// A `*` anywhere but as a whole first label (`*.example.org`).
    #[error("'*' may only be the whole first label (`*.example.org`), which matches subdomains")]
    Wildcard,
    /// A network whose prefix length is too long or not a number.
    #[error("the prefix length {prefix:?} is not a number from 0 to {max}")]
    BadPrefix {
        /// The prefix as written.
        prefix: String,
        /// 32 for IPv4, 128 for IPv6.
        max: u8,
    },
    /// A network whose address has bits set past its prefix.
    #[error("the address has bits set past the prefix: did you mean {canonical}?")]
    HostBits {
        /// The network with those bits cleared.
        canonical: String,
    },
    /// A network written on a host name.
    #[error("a prefix length (`/N`) needs an IP address")]
    PrefixOnName,
}

/// A rule that does not parse: the rule as written and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("network rule {rule:?}: {problem}")]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong.
    pub problem: RuleProblem,
}

/// The host part of a rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// Exactly this name.
    Name(String),
    /// Any name strictly below this one (`*.example.org` holds `example.org`).
    Subdomains(String),
    /// Exactly this address.
    Ip(IpAddr),
    /// Any address in this network (host bits zero).
    Net {
        /// The network's address.
        addr: IpAddr,
        /// Its prefix length.
        prefix: u8,
    },
}

/// The ports a rule covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ports {
    /// No port written: 80 and 443 ([`DEFAULT_PORTS`]).
    Default,
    /// This port only.
    One(u16),
}

impl Ports {
    fn contains(self, port: u16) -> bool {
        match self {
            Ports::Default => DEFAULT_PORTS.contains(&port),
            Ports::One(p) => p == port,
        }
    }
}

/// One parsed destination rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rule {
    /// The rule as the policy wrote it (what a verdict names).
    pub text: String,
    /// The host part.
    pub host: HostPattern,
    /// The ports.
    pub ports: Ports,
}

impl fmt::Display for Rule {
    /// The rule's normalised form (which parses to the same rule).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bracket = matches!(self.ports, Ports::One(_));
        match &self.host {
            HostPattern::Name(n) => f.write_str(n)?,
            HostPattern::Subdomains(n) => write!(f, "*.{n}")?,
            HostPattern::Ip(IpAddr::V6(a)) if bracket => write!(f, "[{a}]")?,
            HostPattern::Ip(a) => write!(f, "{a}")?,
            HostPattern::Net {
                addr: IpAddr::V6(a),
                prefix,
            } if bracket => write!(f, "[{a}]/{prefix}")?,
            HostPattern::Net { addr, prefix } => write!(f, "{addr}/{prefix}")?,
        }
        if let Ports::One(p) = self.ports {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

impl Rule {
    /// Parses one rule as a policy holds it (see the module's documentation).
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        parse_rule(text).map_err(|problem| RuleError {
            rule: text.to_owned(),
            problem,
        })
    }

    /// Whether this rule covers `dest` (name rules cover names, address rules addresses).
    pub fn matches(&self, dest: &Destination) -> bool {
        self.ports.contains(dest.port)
            && match (&self.host, &dest.host) {
                (HostPattern::Name(n), Host::Name(d)) => n == d,
                (HostPattern::Subdomains(base), Host::Name(d)) => d
                    .strip_suffix(base.as_str())
                    .and_then(|head| head.strip_suffix('.'))
                    .is_some_and(|head| !head.is_empty()),
                (HostPattern::Ip(_) | HostPattern::Net { .. }, Host::Ip(ip)) => {
                    self.names_addr(*ip)
                }
                _ => false,
            }
    }

    /// Whether this is an address rule that holds `ip` (ports aside). An IPv4-mapped IPv6
    /// address (`::ffff:a.b.c.d`) is compared as the IPv4 address it is.
    pub fn names_addr(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match self.host {
            HostPattern::Ip(a) => a.to_canonical() == ip,
            HostPattern::Net { addr, prefix } => match addr.to_canonical() {
                // `::ffff:10.0.0.0/104` is `10.0.0.0/8`.
                v4 @ IpAddr::V4(_) if addr.is_ipv6() && prefix >= 96 => in_net(ip, v4, prefix - 96),
                _ => in_net(ip, addr, prefix),
            },
            HostPattern::Name(_) | HostPattern::Subdomains(_) => false,
        }
    }

    /// Whether this rule covers `port`.
    pub fn ports_contain(&self, port: u16) -> bool {
        self.ports.contains(port)
    }

    /// Whether this rule names the host `localhost` exactly.
    pub fn is_localhost(&self) -> bool {
        matches!(&self.host, HostPattern::Name(n) if n == "localhost")
    }
}

/// The first and last address of `net/prefix`.
pub(crate) fn net_ends(net: IpAddr, prefix: u8) -> (IpAddr, IpAddr) {
    match net {
        IpAddr::V4(a) => {
            let host = u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
            (net, IpAddr::V4((u32::from(a) | host).into()))
        }
        IpAddr::V6(a) => {
            let host = u128::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
            (net, IpAddr::V6((u128::from(a) | host).into()))
        }
    }
}

/// Whether `ip` lies in `net/prefix` (same family only).
fn in_net(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

fn parse_rule(text: &str) -> Result<Rule, RuleProblem> {
    // A network may be written `[v6]/N:port`: take the prefix out of the way of the port.
    let (host, prefix, port) = if let Some(rest) = text.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return Err(HostError::BadBracket.into());
        };
        let (prefix, port) = match after.strip_prefix('/') {
            Some(p) => match p.split_once(':') {
                Some((p, port)) => (Some(p), Some(port)),
                None => (Some(p), None),
            },
            None => match after.strip_prefix(':') {
                Some(port) => (None, Some(port)),
                None if after.is_empty() => (None, None),
                None => return Err(HostError::BadBracket.into()),
            },
        };
        let (inner, inner_prefix) = match inner.split_once('/') {
            Some((a, p)) if prefix.is_none() => (a, Some(p)),
            Some(_) => return Err(HostError::BadBracket.into()),
            None => (inner, prefix),
        };
        let ip: std::net::Ipv6Addr = inner.parse().map_err(|_| HostError::BadBracket)?;
        return finish_ip(text, IpAddr::V6(ip), inner_prefix, port);
    } else {
        let (head, port) = if text.matches(':').count() > 1 {
            (text, None) // a bare IPv6 address or network: no port
        } else {
            match text.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (text, None),
            }
        };
        match head.split_once('/') {
            Some((h, p)) => (h, Some(p), port),
            None => (head, None, port),
        }
    };
    if host.contains('[') || host.contains(']') {
        return Err(HostError::BadBracket.into());
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return finish_ip(text, ip, prefix, port);
    }
    if prefix.is_some() {
        return Err(if host.contains(':') {
            HostError::BadBracket.into()
        } else {
            RuleProblem::PrefixOnName
        });
    }
    let ports = match port {
        Some(p) => Ports::One(parse_port(p)?),
        None => Ports::Default,
    };
    let pattern = match host.strip_prefix("*.") {
        Some(base) => {
            if base.contains('*') {
                return Err(RuleProblem::Wildcard);
            }
            HostPattern::Subdomains(normalise_name(base)?)
        }
        None if host.contains('*') => return Err(RuleProblem::Wildcard),
        None => HostPattern::Name(normalise_name(host)?),
    };
    Ok(Rule {
        text: text.to_owned(),
        host: pattern,
        ports,
    })
}

fn finish_ip(
    text: &str,
    ip: IpAddr,
    prefix: Option<&str>,
    port: Option<&str>,
) -> Result<Rule, RuleProblem> {
    let ports = match port {
        Some(p) => Ports::One(parse_port(p)?),
        None => Ports::Default,
    };
    let host = match prefix {
        None => HostPattern::Ip(ip),
        Some(p) => {
            let max: u8 = if ip.is_ipv4() { 32 } else { 128 };
            let prefix = match p.parse::<u8>() {
                Ok(n) if n <= max && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => {
                    return Err(RuleProblem::BadPrefix {
                        prefix: p.to_owned(),
                        max,
                    });
                }
            };
            let masked = mask(ip, prefix);
            if masked != ip {
                return Err(RuleProblem::HostBits {
                    canonical: format!("{masked}/{prefix}"),
                });
            }
            HostPattern::Net { addr: ip, prefix }
        }
    };
    Ok(Rule {
        text: text.to_owned(),
        host,
        ports,
    })
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

/// Splits `host[:port]` / `[v6][:port]` into the host (brackets removed) and the port text.
pub(crate) fn split_host_port(s: &str) -> Result<(&str, Option<&str>), HostError> {
    if let Some(rest) = s.strip_prefix('[') {
        let (inner, after) = rest.split_once(']').ok_or(HostError::BadBracket)?;
        if inner.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(HostError::BadBracket);
        }
        return match after {
            "" => Ok((inner, None)),
            _ => match after.strip_prefix(':') {
                Some(p) => Ok((inner, Some(p))),
                None => Err(HostError::BadBracket),
            },
        };
    }
    match s.rsplit_once(':') {
        // An unbracketed IPv6 address has several colons and no port.
        Some((h, _)) if h.contains(':') => Err(HostError::BadBracket),
        Some((h, p)) => Ok((h, Some(p))),
        None => Ok((s, None)),
    }
}

/// Parses a host (brackets already removed): an IP address or a normalised name.
pub(crate) fn parse_host(host: &str) -> Result<Host, HostError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Host::Ip(ip));
    }
    if host.contains(':') {
        return Err(HostError::BadBracket);
    }
    normalise_name(host).map(Host::Name)
}

/// Parses a port: decimal digits only, 1–65535.
pub(crate) fn parse_port(p: &str) -> Result<u16, HostError> {
    let bad = || HostError::BadPort {
        port: p.chars().take(16).collect(),
    };
    if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(bad()),
        Ok(n) => Ok(n),
    }
}

/// Normalises a host name: ASCII only, lower case, one trailing dot dropped, labels of
/// letters, digits, `-` and `_` (1–63 characters, no `-` at either end), 253 characters in
/// all, and a last label that is not numeric.
pub fn normalise_name(name: &str) -> Result<String, HostError> {
    if !name.is_ascii() {
        return Err(HostError::NonAscii);
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if name.len() > MAX_NAME {
        return Err(HostError::NameTooLong);
    }
    let name = name.to_ascii_lowercase();
    for label in name.split('.') {
        if label.is_empty() {
            return Err(HostError::EmptyLabel);
        }
        if label.len() > MAX_LABEL {
            return Err(HostError::LabelTooLong);
        }
        if let Some(ch) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(HostError::BadChar { ch });
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(HostError::Hyphen);
        }
    }
    let last = name.rsplit('.').next().unwrap_or_default();
    // WHATWG URL's "ends in a number": all digits, or a hexadecimal `0x` number.
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || last
            .strip_prefix("0x")
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    if numeric {
        return Err(HostError::NumericName);
    }
    Ok(name)
}

/// What [`Rules::decide`] says about a destination, naming the rule that decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// An `allow` rule covers it and no `deny` rule does.
    Allowed {
        /// The deciding rule, as written.
        rule: String,
    },
    /// A `deny` rule covers it (deny wins over allow).
    Denied {
        /// The deciding rule, as written.
        rule: String,
    },
    /// No rule covers it: the policy's `unknown` decides (deny, or ask a person).
    Unknown,
}

/// A policy's destination rules: `deny` wins over `allow`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// Destinations allowed.
    pub allow: Vec<Rule>,
    /// Destinations refused, whatever `allow` says.
    pub deny: Vec<Rule>,
}

impl Rules {
    /// Parses both lists; the first rule that does not parse is the error.
    pub fn parse<A: AsRef<str>, D: AsRef<str>>(
        allow: &[A],
        deny: &[D],
    ) -> Result<Rules, RuleError> {
        Ok(Rules {
            allow: allow
                .iter()
                .map(|r| Rule::parse(r.as_ref()))
                .collect::<Result<_, _>>()?,
            deny: deny
                .iter()
                .map(|r| Rule::parse(r.as_ref()))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Decides a destination: the first `deny` rule that covers it, else the first `allow`
    /// rule that does, else [`Verdict::Unknown`].
    pub fn decide(&self, dest: &Destination) -> Verdict {
        if let Some(r) = self.deny.iter().find(|r| r.matches(dest)) {
            return Verdict::Denied {
                rule: r.text.clone(),
            };
        }
        match self.allow.iter().find(|r| r.matches(dest)) {
            Some(r) => Verdict::Allowed {
                rule: r.text.clone(),
            },
            None => Verdict::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str, port: u16) -> Destination {
        Destination {
            host: Host::Name(n.into()),
            port,
        }
    }

    fn ip(a: &str, port: u16) -> Destination {
        Destination {
            host: Host::Ip(a.parse().unwrap()),
            port,
        }
    }

    fn rules(allow: &[&str], deny: &[&str]) -> Rules {
        Rules::parse(allow, deny).unwrap()
    }

    fn allowed(rule: &str) -> Verdict {
        Verdict::Allowed { rule: rule.into() }
    }

    fn problem(rule: &str) -> RuleProblem {
        Rule::parse(rule).unwrap_err().problem
    }

    #[test]
    fn a_name_rule_matches_that_name_on_80_and_443_only() {
        let r = rules(&["example.com"], &[]);
        assert_eq!(r.decide(&name("example.com", 443)), allowed("example.com"));
        assert_eq!(r.decide(&name("example.com", 80)), allowed("example.com"));
        assert_eq!(r.decide(&name("example.com", 8080)), Verdict::Unknown);
        assert_eq!(r.decide(&name("www.example.com", 443)), Verdict::Unknown);
        assert_eq!(r.decide(&name("example.com.evil", 443)), Verdict::Unknown);
        assert_eq!(r.decide(&name("notexample.com", 443)), Verdict::Unknown);
    }

    #[test]
    fn a_wildcard_matches_subdomains_at_any_depth_but_not_the_apex() {
        let r = rules(&["*.example.org"], &[]);
        assert_eq!(
            r.decide(&name("a.example.org", 443)),
            allowed("*.example.org")
        );
        assert_eq!(
            r.decide(&name("a.b.example.org", 80)),
            allowed("*.example.org")
        );
        assert_eq!(r.decide(&name("example.org", 443)), Verdict::Unknown);
        assert_eq!(r.decide(&name("badexample.org", 443)), Verdict::Unknown);
        assert_eq!(r.decide(&name(".example.org", 443)), Verdict::Unknown);
        assert_eq!(
            r.decide(&name("example.org.evil.com", 443)),
            Verdict::Unknown
        );
        assert_eq!(r.decide(&name("a.example.org", 22)), Verdict::Unknown);
    }

    #[test]
    fn wildcards_elsewhere_are_refused() {
        for bad in [
            "*",
            "*.",
            "a.*.org",
            "*example.org",
            "**.example.org",
            "*.*.org",
            "ex*.org",
        ] {
            let p = problem(bad);
            assert!(
                matches!(p, RuleProblem::Wildcard | RuleProblem::Host(_)),
                "{bad}: {p:?}"
            );
        }
    }

    #[test]
    fn names_are_normalised_case_and_one_trailing_dot() {
        let r = rules(&["ExAmPle.COM."], &[]);
        assert_eq!(r.allow[0].host, HostPattern::Name("example.com".into()));
        assert_eq!(r.allow[0].to_string(), "example.com");
        assert_eq!(r.decide(&name("example.com", 443)), allowed("ExAmPle.COM."));
        let d = Destination::parse("EXAMPLE.com.:443", None).unwrap();
        assert_eq!(d, name("example.com", 443));
        assert_eq!(problem("example.com.."), HostError::EmptyLabel.into());
        assert_eq!(problem("."), HostError::Empty.into());
        assert_eq!(problem(""), HostError::Empty.into());
    }

    #[test]
    fn non_ascii_names_are_refused_and_punycode_is_fine() {
        assert_eq!(problem("bücher.example"), HostError::NonAscii.into());
        assert_eq!(problem("*.ﬁle.example"), HostError::NonAscii.into());
        // A fullwidth dot and a Cyrillic 'а' that look like ASCII.
        assert_eq!(problem("example\u{ff0e}com"), HostError::NonAscii.into());
        assert_eq!(problem("ex\u{0430}mple.com"), HostError::NonAscii.into());
        let r = rules(&["xn--bcher-kva.example"], &[]);
        assert_eq!(
            r.decide(&name("xn--bcher-kva.example", 443)),
            allowed("xn--bcher-kva.example")
        );
    }

    #[test]
    fn bad_characters_and_lengths_are_refused() {
        for (bad, want) in [
            ("exa mple.com", HostError::BadChar { ch: ' ' }),
            ("example.com%2f", HostError::BadChar { ch: '%' }),
            ("user@example.com", HostError::BadChar { ch: '@' }),
            ("-a.example.com", HostError::Hyphen),
            ("a-.example.com", HostError::Hyphen),
            ("a\0.com", HostError::BadChar { ch: '\0' }),
        ] {
            assert_eq!(problem(bad), want.into(), "{bad}");
        }
        let long_label = format!("{}.com", "a".repeat(64));
        assert_eq!(problem(&long_label), HostError::LabelTooLong.into());
        let ok_label = format!("{}.com", "a".repeat(63));
        assert!(Rule::parse(&ok_label).is_ok());
        let long_name = vec!["a".repeat(60); 5].join(".");
        assert_eq!(problem(&long_name), HostError::NameTooLong.into());
        assert!(Rule::parse("_acme-challenge.example.com").is_ok());
    }

    #[test]
    fn numeric_names_that_resolvers_read_as_addresses_are_refused() {
        for bad in [
            "127.1",
            "2130706433",
            "0x7f.1",
            "0x7f000001",
            "a.123",
            "10.0.0.256",
            "1.2.3.4.5",
        ] {
            assert_eq!(problem(bad), HostError::NumericName.into(), "{bad}");
            assert_eq!(
                Destination::parse(&format!("{bad}:80"), None),
                Err(HostError::NumericName),
                "{bad}"
            );
        }
        assert!(Rule::parse("123.example").is_ok());
        assert!(Rule::parse("0xfe.example").is_ok());
        assert!(Rule::parse("a.0xg").is_ok());
    }

    #[test]
    fn ports_are_1_to_65535_in_decimal() {
        let r = rules(&["example.net:8443"], &[]);
        assert_eq!(
            r.decide(&name("example.net", 8443)),
            allowed("example.net:8443")
        );
        assert_eq!(r.decide(&name("example.net", 443)), Verdict::Unknown);
        assert_eq!(r.decide(&name("example.net", 80)), Verdict::Unknown);
        assert!(Rule::parse("a.com:65535").is_ok());
        assert!(Rule::parse("a.com:1").is_ok());
        for bad in [
            "a.com:0",
            "a.com:65536",
            "a.com:",
            "a.com:+80",
            "a.com:-1",
            "a.com:08x",
            "a.com:000443",
            "a.com:99999999999999999999",
            "a.com: 80",
        ] {
            assert!(
                matches!(problem(bad), RuleProblem::Host(HostError::BadPort { .. })),
                "{bad}: {:?}",
                problem(bad)
            );
        }
    }

    #[test]
    fn localhost_3000_allows_port_3000_only() {
        let r = rules(&["localhost:3000"], &[]);
        assert_eq!(
            r.decide(&name("localhost", 3000)),
            allowed("localhost:3000")
        );
        assert_eq!(r.decide(&name("localhost", 3001)), Verdict::Unknown);
        assert_eq!(r.decide(&name("localhost", 80)), Verdict::Unknown);
        assert_eq!(r.decide(&ip("127.0.0.1", 3000)), Verdict::Unknown);
        assert!(r.allow[0].is_localhost());
    }

    #[test]
    fn deny_wins_over_allow_and_names_its_rule() {
        let r = rules(&["*.example.org", "example.org"], &["evil.example.org"]);
        assert_eq!(
            r.decide(&name("evil.example.org", 443)),
            Verdict::Denied {
                rule: "evil.example.org".into()
            }
        );
        assert_eq!(
            r.decide(&name("good.example.org", 443)),
            allowed("*.example.org")
        );
        assert_eq!(r.decide(&name("example.org", 80)), allowed("example.org"));
        let r = rules(&["10.0.0.0/8"], &["10.1.0.0/16:443"]);
        assert_eq!(
            r.decide(&ip("10.1.2.3", 443)),
            Verdict::Denied {
                rule: "10.1.0.0/16:443".into()
            }
        );
        assert_eq!(r.decide(&ip("10.1.2.3", 80)), allowed("10.0.0.0/8"));
    }

    #[test]
    fn ip_rules_v4_v6_brackets_and_cidrs() {
        let r = rules(
            &[
                "10.0.0.5",
                "[::1]:8080",
                "::2",
                "10.0.0.0/8:22",
                "fc00::/7",
                "[fd00::]/8:9000",
                "[fe80::/10]:1",
            ],
            &[],
        );
        assert_eq!(r.decide(&ip("10.0.0.5", 443)), allowed("10.0.0.5"));
        assert_eq!(r.decide(&ip("10.0.0.6", 443)), Verdict::Unknown);
        assert_eq!(r.decide(&ip("::1", 8080)), allowed("[::1]:8080"));
        assert_eq!(r.decide(&ip("::1", 443)), Verdict::Unknown);
        assert_eq!(r.decide(&ip("::2", 80)), allowed("::2"));
        assert_eq!(r.decide(&ip("10.200.0.1", 22)), allowed("10.0.0.0/8:22"));
        assert_eq!(r.decide(&ip("11.0.0.1", 22)), Verdict::Unknown);
        assert_eq!(r.decide(&ip("fd12::1", 443)), allowed("fc00::/7"));
        assert_eq!(r.decide(&ip("fd12::1", 9000)), allowed("[fd00::]/8:9000"));
        assert_eq!(r.decide(&ip("fe80::1", 1)), allowed("[fe80::/10]:1"));
        // A mapped address is the IPv4 address it maps.
        assert_eq!(r.decide(&ip("::ffff:10.0.0.5", 443)), allowed("10.0.0.5"));
        // Address rules never match names, nor name rules addresses.
        assert_eq!(r.decide(&name("localhost", 8080)), Verdict::Unknown);
        for text in [
            "10.0.0.5",
            "[::1]:8080",
            "::2",
            "10.0.0.0/8:22",
            "fc00::/7",
            "[fd00::]/8:9000",
        ] {
            let rule = Rule::parse(text).unwrap();
            let again = Rule::parse(&rule.to_string()).unwrap();
            assert_eq!((again.host, again.ports), (rule.host, rule.ports), "{text}");
        }
    }

    #[test]
    fn bad_addresses_and_networks_are_refused_with_a_reason() {
        assert_eq!(
            problem("10.0.0.1/8"),
            RuleProblem::HostBits {
                canonical: "10.0.0.0/8".into()
            }
        );
        assert!(matches!(
            problem("10.0.0.0/33"),
            RuleProblem::BadPrefix { max: 32, .. }
        ));
        assert!(matches!(
            problem("fc00::/129"),
            RuleProblem::BadPrefix { max: 128, .. }
        ));
        assert!(matches!(
            problem("10.0.0.0/"),
            RuleProblem::BadPrefix { .. }
        ));
        assert!(matches!(
            problem("10.0.0.0/+8"),
            RuleProblem::BadPrefix { .. }
        ));
        assert_eq!(problem("example.com/8"), RuleProblem::PrefixOnName);
        for bad in [
            "[::1",
            "[::1]x",
            "[example.com]:80",
            "[10.0.0.1]:80",
            "::1:80]",
            "[::1]:",
            "[[::1]]",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad}");
        }
        assert!(Rule::parse("0.0.0.0/0").is_ok());
        assert!(Rule::parse("::/0").is_ok());
        let e = Rule::parse("a.com:0").unwrap_err();
        assert!(e.to_string().contains("\"a.com:0\""), "{e}");
        assert!(e.to_string().contains("port"), "{e}");
    }

    #[test]
    fn destinations_parse_authority_forms() {
        assert_eq!(
            Destination::parse("example.com:443", None).unwrap(),
            name("example.com", 443)
        );
        assert_eq!(
            Destination::parse("example.com", Some(80)).unwrap(),
            name("example.com", 80)
        );
        assert_eq!(
            Destination::parse("example.com", None),
            Err(HostError::MissingPort)
        );
        assert_eq!(
            Destination::parse("[::1]:8080", None).unwrap(),
            ip("::1", 8080)
        );
        assert_eq!(
            Destination::parse("[::1]", Some(80)).unwrap(),
            ip("::1", 80)
        );
        assert_eq!(
            Destination::parse("::1:80", None),
            Err(HostError::BadBracket)
        );
        assert_eq!(
            Destination::parse("127.0.0.1:1", None).unwrap(),
            ip("127.0.0.1", 1)
        );
        assert!(Destination::parse("a.com:80:80", None).is_err());
        assert!(Destination::parse(":80", None).is_err());
        assert!(Destination::parse("a.com/x:80", None).is_err());
        assert_eq!(ip("::1", 80).to_string(), "[::1]:80");
        assert_eq!(name("a.com", 80).to_string(), "a.com:80");
    }
}
