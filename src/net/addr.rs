//! Address classes, and the check the proxy runs once a destination's name is resolved.
//!
//! [`special`] names the class of an address no connection should reach unless a policy says
//! so explicitly: loopback, private, link-local (with the cloud metadata address), shared
//! (CGNAT), multicast, unspecified, broadcast, documentation, benchmarking and reserved
//! ranges, in IPv4 and IPv6, and IPv4 addresses embedded in IPv6 (mapped, IPv4-compatible,
//! NAT64, 6to4), which are classified as the IPv4 address they carry.
//!
//! [`may_connect`] is that check: it takes the destination, the rules and what the name
//! resolved to, and returns the one address the connection is pinned to. The proxy connects
//! to that address and resolves nothing again, so a name cannot answer a public address to
//! the check and a private one to the connection (DNS rebinding).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::rules::{Destination, Host, HostPattern, Rule, Rules, Verdict, net_ends};

/// The class of an address a connection reaches only when a rule names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddrClass {
    /// `127.0.0.0/8`, `::1`: this machine.
    Loopback,
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`) and IPv6 unique local (`fc00::/7`).
    Private,
    /// `169.254/16` and `fe80::/10` (except the cloud metadata address).
    LinkLocal,
    /// `169.254.169.254` (AWS, GCP, Azure, …) and AWS's IPv6 `fd00:ec2::254`: the instance's
    /// credentials.
    CloudMetadata,
    /// `100.64/10`: shared address space (carrier-grade NAT, also Tailscale's addresses).
    SharedCgnat,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `0.0.0.0`, `::` (which connect to this machine).
    Unspecified,
    /// `0.0.0.0/8` other than `0.0.0.0`: "this network".
    ThisNetwork,
    /// `255.255.255.255`.
    Broadcast,
    /// `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`, `3fff::/20`.
    Documentation,
    /// `198.18/15`, `2001:2::/48`.
    Benchmarking,
    /// Reserved or special-purpose: `192.0.0/24`, `240/4`, `100::/64` (discard),
    /// `2001::/23` (IETF protocol assignments, Teredo), `fec0::/10` (old site-local), and
    /// IPv6 outside `2000::/3` that no other class names.
    Reserved,
}

impl AddrClass {
    /// A few words saying what the class is.
    pub fn describe(self) -> &'static str {
        match self {
            AddrClass::Loopback => "loopback (this machine)",
            AddrClass::Private => "private network",
            AddrClass::LinkLocal => "link-local",
            AddrClass::CloudMetadata => "cloud metadata service",
            AddrClass::SharedCgnat => "shared address space (CGNAT)",
            AddrClass::Multicast => "multicast",
            AddrClass::Unspecified => "unspecified (this machine)",
            AddrClass::ThisNetwork => "\"this network\"",
            AddrClass::Broadcast => "broadcast",
            AddrClass::Documentation => "documentation range",
            AddrClass::Benchmarking => "benchmarking range",
            AddrClass::Reserved => "reserved range",
        }
    }
}

impl fmt::Display for AddrClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The class of a special address, or `None` for an ordinary public unicast address.
pub fn special(ip: IpAddr) -> Option<AddrClass> {
    match ip {
        IpAddr::V4(a) => special_v4(a),
        IpAddr::V6(a) => special_v6(a),
    }
}

fn in4(a: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(a) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn special_v4(a: Ipv4Addr) -> Option<AddrClass> {
    use AddrClass as C;
    let table: &[([u8; 4], u32, AddrClass)] = &[
        ([169, 254, 169, 254], 32, C::CloudMetadata),
        ([0, 0, 0, 0], 32, C::Unspecified),
        ([255, 255, 255, 255], 32, C::Broadcast),
        ([0, 0, 0, 0], 8, C::ThisNetwork),
        ([127, 0, 0, 0], 8, C::Loopback),
        ([10, 0, 0, 0], 8, C::Private),
        ([172, 16, 0, 0], 12, C::Private),
        ([192, 168, 0, 0], 16, C::Private),
        ([169, 254, 0, 0], 16, C::LinkLocal),
        ([100, 64, 0, 0], 10, C::SharedCgnat),
        ([224, 0, 0, 0], 4, C::Multicast),
        ([192, 0, 2, 0], 24, C::Documentation),
        ([198, 51, 100, 0], 24, C::Documentation),
        ([203, 0, 113, 0], 24, C::Documentation),
        ([198, 18, 0, 0], 15, C::Benchmarking),
        ([192, 0, 0, 0], 24, C::Reserved),
        ([240, 0, 0, 0], 4, C::Reserved),
    ];
    table
        .iter()
        .find(|(net, prefix, _)| in4(a, *net, *prefix))
        .map(|(_, _, class)| *class)
}

fn in6(a: Ipv6Addr, net: u128, prefix: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    u128::from(a) & mask == net & mask
}

/// The IPv4 address an IPv6 address carries: mapped (`::ffff:0:0/96`), IPv4-compatible
/// (`::/96`, deprecated), NAT64 (`64:ff9b::/96`, `64:ff9b:1::/48`), 6to4 (`2002::/16`).
pub fn embedded_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let n = u128::from(a);
    let low = Ipv4Addr::from((n & 0xffff_ffff) as u32);
    if in6(a, 0xffff << 32, 96)
        || in6(a, 0, 96)
        || in6(a, 0x0064_ff9b << 96, 96)
        || in6(a, 0x0064_ff9b_0001 << 80, 48)
    {
        return Some(low);
    }
    if in6(a, 0x2002 << 112, 16) {
        return Some(Ipv4Addr::from(((n >> 80) & 0xffff_ffff) as u32));
    }
    None
}

fn special_v6(a: Ipv6Addr) -> Option<AddrClass> {
    use AddrClass as C;
    if a == Ipv6Addr::UNSPECIFIED {
        return Some(C::Unspecified);
    }
    if a == Ipv6Addr::LOCALHOST {
        return Some(C::Loopback);
    }
    if let Some(v4) = embedded_v4(a) {
        return special_v4(v4);
    }
    let table: &[(u128, u32, AddrClass)] = &[
        (0xfd00_0ec2 << 96 | 0x254, 128, C::CloudMetadata),
        (0xfc00 << 112, 7, C::Private),
        (0xfe80 << 112, 10, C::LinkLocal),
        (0xfec0 << 112, 10, C::Reserved),
        (0xff00 << 112, 8, C::Multicast),
        (0x2001_0db8 << 96, 32, C::Documentation),
        (0x3fff << 112, 20, C::Documentation),
        (0x2001_0002 << 96, 48, C::Benchmarking),
        (0x0100 << 112, 64, C::Reserved),
        (0x2001 << 112, 23, C::Reserved),
    ];
    if let Some((_, _, class)) = table.iter().find(|(net, prefix, _)| in6(a, *net, *prefix)) {
        return Some(*class);
    }
    // Global unicast is 2000::/3; everything else is unassigned or special.
    if !in6(a, 0x2000 << 112, 3) {
        return Some(C::Reserved);
    }
    None
}

/// Why [`may_connect`] refused a connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// A `deny` rule covers the destination or one of its addresses.
    #[error("{host}:{port} ({addr}) is denied by the network rule {rule:?}", addr = display_opt(*.addr))]
    Denied {
        /// The host as the client named it.
        host: String,
        /// The port.
        port: u16,
        /// The address the rule covers, when it is an address rule on a resolved address.
        addr: Option<IpAddr>,
        /// The deny rule.
        rule: String,
    },
    /// The client named an address, and no rule names it.
    #[error("{host}:{port} is an IP address{class} that no network rule names; to allow it, add {allow_with:?}", class = class_words(*class))]
    IpLiteral {
        /// The address as a host.
        host: String,
        /// The port.
        port: u16,
        /// Its class, when special.
        class: Option<AddrClass>,
        /// The rule that would allow it.
        allow_with: String,
    },
    /// The name resolved to a special address that no rule names.
    #[error(
        "{host}:{port} resolved to {addr}, a {class} address that no network rule names; to allow it, add {allow_with:?}"
    )]
    Special {
        /// The name.
        host: String,
        /// The port.
        port: u16,
        /// The address.
        addr: IpAddr,
        /// Its class.
        class: AddrClass,
        /// The rule that would allow it.
        allow_with: String,
    },
    /// The name resolved to nothing.
    #[error("{host}:{port} resolved to no address")]
    NoAddress {
        /// The name.
        host: String,
        /// The port.
        port: u16,
    },
}

fn display_opt(a: Option<IpAddr>) -> String {
    a.map_or_else(|| "as named".to_owned(), |a| a.to_string())
}

fn class_words(c: Option<AddrClass>) -> String {
    c.map_or_else(String::new, |c| format!(" ({c})"))
}

/// The rule text that names exactly `addr` on `port`.
pub fn rule_for(addr: IpAddr, port: u16) -> String {
    let addr = addr.to_canonical();
    let host = match addr {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    };
    if super::rules::DEFAULT_PORTS.contains(&port) {
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned()
    } else {
        format!("{host}:{port}")
    }
}

/// Whether `rule` names the special address `addr` (of class `class`) on `port`: an address
/// rule for it, or a network rule that lies wholly in that class. `0.0.0.0/0` or
/// `169.254.0.0/16` does not name the cloud metadata address, nor `::/0` loopback: a
/// network that reaches beyond a class is a way of saying "anywhere", not that place.
pub fn names_special(rule: &Rule, addr: IpAddr, class: AddrClass, port: u16) -> bool {
    if !(rule.ports_contain(port) && rule.names_addr(addr)) {
        return false;
    }
    match rule.host {
        HostPattern::Net { addr: net, prefix } => {
            let (first, last) = net_ends(net, prefix);
            special(first) == Some(class) && special(last) == Some(class)
        }
        _ => true,
    }
}

/// The connect-time check: may the proxy connect to `dest`, which resolved to `resolved`,
/// and to which address?
///
/// - A `deny` rule covering the destination refuses it (as [`Rules::decide`] would).
/// - An IP literal destination is refused unless an address rule names it (`resolved` is
///   not consulted: the literal is the address); a special one, unless a rule names it as
///   [`names_special`] says. The address returned is the literal's canonical form
///   (`::ffff:a.b.c.d` is `a.b.c.d`).
/// - A name: every resolved address is checked, and one refused refuses the connection (a
///   name that answers public and special addresses together is an attacker's resolver or a
///   mistake). An address is refused when a `deny` address rule covers it, or when it is
///   special ([`special`]) and no `allow` rule names it on this port ([`names_special`]) — except a
///   loopback address of the name `localhost` itself, which an allow rule for `localhost`
///   on this port names. The first address is returned: the connection is pinned to it.
///
/// A name that no rule covers ([`Verdict::Unknown`]) is not refused here: whether to ask a
/// person is the caller's business, decided before.
pub fn may_connect(
    rules: &Rules,
    dest: &Destination,
    resolved: &[IpAddr],
) -> Result<IpAddr, Refused> {
    let host = dest.host.to_string();
    let port = dest.port;
    let verdict = rules.decide(dest);
    if let Verdict::Denied { rule } = verdict {
        return Err(Refused::Denied {
            host,
            port,
            addr: None,
            rule,
        });
    }
    let name = match &dest.host {
        Host::Ip(ip) => {
            let class = special(*ip);
            let allowed = match class {
                Some(c) => rules.allow.iter().any(|r| names_special(r, *ip, c, port)),
                None => matches!(verdict, Verdict::Allowed { .. }),
            };
            return if allowed {
                Ok(ip.to_canonical())
            } else {
                Err(Refused::IpLiteral {
                    host,
                    port,
                    class,
                    allow_with: rule_for(*ip, port),
                })
            };
        }
        Host::Name(n) => n,
    };
    let Some(first) = resolved.first() else {
        return Err(Refused::NoAddress { host, port });
    };
    for &addr in resolved {
        if let Some(r) = rules
            .deny
            .iter()
            .find(|r| r.ports_contain(port) && r.names_addr(addr))
        {
            return Err(Refused::Denied {
                host,
                port,
                addr: Some(addr),
                rule: r.text.clone(),
            });
        }
        let Some(class) = special(addr) else {
            continue;
        };
        let named = rules
            .allow
            .iter()
            .any(|r| names_special(r, addr, class, port));
        let localhost = class == AddrClass::Loopback
            && name == "localhost"
            && rules
                .allow
                .iter()
                .any(|r| r.is_localhost() && r.ports_contain(port));
        if !(named || localhost) {
            return Err(Refused::Special {
                host,
                port,
                addr,
                class,
                allow_with: rule_for(addr, port),
            });
        }
    }
    Ok(first.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;
    use AddrClass as C;

    fn class(s: &str) -> Option<AddrClass> {
        special(s.parse().unwrap())
    }

    fn name(n: &str, port: u16) -> Destination {
        Destination {
            host: Host::Name(n.into()),
            port,
        }
    }

    fn lit(a: &str, port: u16) -> Destination {
        Destination {
            host: Host::Ip(a.parse().unwrap()),
            port,
        }
    }

    fn addrs(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    fn rules(allow: &[&str], deny: &[&str]) -> Rules {
        Rules::parse(allow, deny).unwrap()
    }

    #[test]
    fn every_v4_class() {
        for (a, want) in [
            ("127.0.0.1", Some(C::Loopback)),
            ("127.255.255.254", Some(C::Loopback)),
            ("10.1.2.3", Some(C::Private)),
            ("172.16.0.1", Some(C::Private)),
            ("172.31.255.255", Some(C::Private)),
            ("172.32.0.1", None),
            ("172.15.255.255", None),
            ("192.168.1.1", Some(C::Private)),
            ("169.254.169.254", Some(C::CloudMetadata)),
            ("169.254.169.253", Some(C::LinkLocal)),
            ("169.254.0.1", Some(C::LinkLocal)),
            ("100.64.0.1", Some(C::SharedCgnat)),
            ("100.127.255.255", Some(C::SharedCgnat)),
            ("100.128.0.1", None),
            ("100.63.255.255", None),
            ("224.0.0.1", Some(C::Multicast)),
            ("239.255.255.250", Some(C::Multicast)),
            ("0.0.0.0", Some(C::Unspecified)),
            ("0.1.2.3", Some(C::ThisNetwork)),
            ("255.255.255.255", Some(C::Broadcast)),
            ("255.255.255.254", Some(C::Reserved)),
            ("240.0.0.1", Some(C::Reserved)),
            ("192.0.0.8", Some(C::Reserved)),
            ("192.0.2.1", Some(C::Documentation)),
            ("198.51.100.7", Some(C::Documentation)),
            ("203.0.113.9", Some(C::Documentation)),
            ("198.18.0.1", Some(C::Benchmarking)),
            ("198.19.255.255", Some(C::Benchmarking)),
            ("198.20.0.1", None),
            ("8.8.8.8", None),
            ("1.1.1.1", None),
            ("93.184.216.34", None),
            ("223.255.255.255", None),
        ] {
            assert_eq!(class(a), want, "{a}");
        }
    }

    #[test]
    fn every_v6_class() {
        for (a, want) in [
            ("::1", Some(C::Loopback)),
            ("::", Some(C::Unspecified)),
            ("fc00::1", Some(C::Private)),
            ("fdff:ffff::1", Some(C::Private)),
            ("fd00:ec2::254", Some(C::CloudMetadata)),
            ("fe80::1", Some(C::LinkLocal)),
            ("febf::1", Some(C::LinkLocal)),
            ("fec0::1", Some(C::Reserved)),
            ("ff02::1", Some(C::Multicast)),
            ("ff0e::1", Some(C::Multicast)),
            ("2001:db8::1", Some(C::Documentation)),
            ("3fff::1", Some(C::Documentation)),
            ("2001:2::1", Some(C::Benchmarking)),
            ("100::1", Some(C::Reserved)),
            ("2001::1", Some(C::Reserved)),
            // IPv4-compatible (deprecated `::a.b.c.d`): 0.0.0.2 is "this network".
            ("::2", Some(C::ThisNetwork)),
            ("4000::1", Some(C::Reserved)),
            ("2606:4700:4700::1111", None),
            ("2a00:1450:4001::1", None),
        ] {
            assert_eq!(class(a), want, "{a}");
        }
    }

    #[test]
    fn embedded_v4_is_classified_as_the_v4_it_carries() {
        for (a, want) in [
            ("::ffff:127.0.0.1", Some(C::Loopback)),
            ("::ffff:7f00:1", Some(C::Loopback)),
            ("::ffff:169.254.169.254", Some(C::CloudMetadata)),
            ("::127.0.0.1", Some(C::Loopback)),
            ("::169.254.169.254", Some(C::CloudMetadata)),
            ("64:ff9b::127.0.0.1", Some(C::Loopback)),
            ("64:ff9b::a9fe:a9fe", Some(C::CloudMetadata)),
            ("64:ff9b:1::7f00:1", Some(C::Loopback)),
            ("2002:7f00:1::", Some(C::Loopback)),
            ("2002:7f00:1:ffff::1", Some(C::Loopback)),
            ("2002:a9fe:a9fe::1", Some(C::CloudMetadata)),
            ("2002:0a00:0001::", Some(C::Private)),
            ("::ffff:10.0.0.1", Some(C::Private)),
            ("::ffff:0.0.0.0", Some(C::Unspecified)),
            ("::ffff:8.8.8.8", None),
            ("64:ff9b::8.8.8.8", None),
            ("2002:0808:0808::1", None),
        ] {
            assert_eq!(class(a), want, "{a}");
        }
        assert_eq!(
            embedded_v4("2002:7f00:1::".parse().unwrap()),
            Some(Ipv4Addr::LOCALHOST)
        );
    }

    #[test]
    fn a_name_resolving_to_loopback_or_metadata_is_refused() {
        let r = rules(&["example.com"], &[]);
        for a in [
            "127.0.0.1",
            "169.254.169.254",
            "::ffff:127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "::1",
            "10.0.0.1",
            "0.0.0.0",
            "::",
        ] {
            let got = may_connect(&r, &name("example.com", 443), &addrs(&[a]));
            assert!(
                matches!(got, Err(Refused::Special { ref host, .. }) if host == "example.com"),
                "{a}: {got:?}"
            );
        }
        let e =
            may_connect(&r, &name("example.com", 443), &addrs(&["169.254.169.254"])).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("cloud metadata"), "{text}");
        assert!(text.contains("\"169.254.169.254\""), "{text}");
    }

    #[test]
    fn one_special_address_among_public_ones_refuses_the_name() {
        let r = rules(&["example.com"], &[]);
        let got = may_connect(
            &r,
            &name("example.com", 443),
            &addrs(&["93.184.216.34", "127.0.0.1"]),
        );
        assert!(
            matches!(
                got,
                Err(Refused::Special {
                    class: C::Loopback,
                    ..
                })
            ),
            "{got:?}"
        );
    }

    #[test]
    fn a_public_address_is_pinned_first() {
        let r = rules(&["example.com"], &[]);
        let got = may_connect(
            &r,
            &name("example.com", 443),
            &addrs(&["93.184.216.34", "2606:2800::1"]),
        );
        assert_eq!(got, Ok("93.184.216.34".parse().unwrap()));
        assert_eq!(
            may_connect(&r, &name("example.com", 443), &[]),
            Err(Refused::NoAddress {
                host: "example.com".into(),
                port: 443
            })
        );
    }

    #[test]
    fn localhost_3000_allows_loopback_on_3000_only() {
        let r = rules(&["localhost:3000"], &[]);
        let lo = addrs(&["127.0.0.1", "::1"]);
        assert_eq!(may_connect(&r, &name("localhost", 3000), &lo), Ok(lo[0]));
        let got = may_connect(&r, &name("localhost", 3001), &lo);
        assert!(
            matches!(got, Err(Refused::Special { ref allow_with, .. }) if allow_with == "127.0.0.1:3001"),
            "{got:?}"
        );
        // Another name that resolves to loopback is not `localhost`.
        let r2 = rules(&["localhost:3000", "evil.example"], &[]);
        let got = may_connect(&r2, &name("evil.example", 3000), &addrs(&["127.0.0.1"]));
        assert!(matches!(got, Err(Refused::Special { .. })), "{got:?}");
        // `localhost` resolving somewhere else than loopback is special-checked like any name.
        let got = may_connect(&r, &name("localhost", 3000), &addrs(&["10.0.0.1"]));
        assert!(
            matches!(
                got,
                Err(Refused::Special {
                    class: C::Private,
                    ..
                })
            ),
            "{got:?}"
        );
    }

    #[test]
    fn an_address_rule_names_a_special_address_explicitly() {
        let r = rules(&["internal.example", "10.0.0.0/8"], &[]);
        assert_eq!(
            may_connect(&r, &name("internal.example", 443), &addrs(&["10.1.2.3"])),
            Ok("10.1.2.3".parse().unwrap())
        );
        // Port matters: the CIDR covers 80 and 443 only.
        assert!(may_connect(&r, &name("internal.example", 8080), &addrs(&["10.1.2.3"])).is_err());
        // A mapped form resolves to the address it maps, and is pinned as that.
        assert_eq!(
            may_connect(
                &r,
                &name("internal.example", 443),
                &addrs(&["::ffff:10.1.2.3"])
            ),
            Ok("10.1.2.3".parse().unwrap())
        );
    }

    #[test]
    fn ip_literals_need_a_rule_that_names_them() {
        let r = rules(&["example.com", "10.0.0.5:8080", "[::1]:8080"], &[]);
        for (a, port) in [
            ("93.184.216.34", 443),
            ("127.0.0.1", 80),
            ("169.254.169.254", 80),
            ("10.0.0.5", 80),
            ("::ffff:169.254.169.254", 80),
        ] {
            let got = may_connect(&r, &lit(a, port), &addrs(&[a]));
            assert!(
                matches!(got, Err(Refused::IpLiteral { .. })),
                "{a}: {got:?}"
            );
        }
        let e = may_connect(&r, &lit("169.254.169.254", 80), &[]).unwrap_err();
        assert_eq!(
            e,
            Refused::IpLiteral {
                host: "169.254.169.254".into(),
                port: 80,
                class: Some(C::CloudMetadata),
                allow_with: "169.254.169.254".into()
            }
        );
        assert_eq!(
            may_connect(&r, &lit("10.0.0.5", 8080), &[]),
            Ok("10.0.0.5".parse().unwrap())
        );
        assert_eq!(
            may_connect(&r, &lit("::ffff:10.0.0.5", 8080), &[]),
            Ok("10.0.0.5".parse().unwrap())
        );
        assert_eq!(
            may_connect(&r, &lit("::1", 8080), &[]),
            Ok("::1".parse().unwrap())
        );
        let e = may_connect(&r, &lit("::1", 9), &[]).unwrap_err();
        assert!(e.to_string().contains("\"[::1]:9\""), "{e}");
    }

    #[test]
    fn a_network_wider_than_a_class_does_not_name_a_special_address() {
        let r = rules(&["0.0.0.0/0", "::/0", "169.254.0.0/16", "example.com"], &[]);
        for a in [
            "127.0.0.1",
            "169.254.169.254",
            "10.0.0.1",
            "::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
        ] {
            let got = may_connect(&r, &lit(a, 80), &[]);
            assert!(
                matches!(got, Err(Refused::IpLiteral { .. })),
                "{a}: {got:?}"
            );
            let got = may_connect(&r, &name("example.com", 80), &addrs(&[a]));
            assert!(matches!(got, Err(Refused::Special { .. })), "{a}: {got:?}");
        }
        // They do name ordinary addresses, and a network within the class names its class.
        assert!(may_connect(&r, &lit("93.184.216.34", 80), &[]).is_ok());
        assert!(may_connect(&r, &lit("169.254.1.1", 80), &[]).is_ok());
        let r = rules(
            &[
                "127.0.0.0/8",
                "fc00::/7",
                "::ffff:10.0.0.0/104",
                "169.254.169.254/32",
            ],
            &[],
        );
        for a in [
            "127.0.0.1",
            "127.9.9.9",
            "fd00::1",
            "::ffff:127.0.0.1",
            "10.1.1.1",
            "169.254.169.254",
        ] {
            assert!(may_connect(&r, &lit(a, 443), &[]).is_ok(), "{a}");
        }
        // fd00:ec2::254 is metadata, inside fc00::/7: named only by itself.
        assert!(may_connect(&r, &lit("fd00:ec2::254", 443), &[]).is_err());
    }

    #[test]
    fn deny_rules_cover_names_and_resolved_addresses() {
        let r = rules(
            &["*.example.com", "10.0.0.0/8"],
            &["bad.example.com", "10.9.0.0/16"],
        );
        let got = may_connect(
            &r,
            &name("bad.example.com", 443),
            &addrs(&["93.184.216.34"]),
        );
        assert!(
            matches!(got, Err(Refused::Denied { addr: None, .. })),
            "{got:?}"
        );
        let got = may_connect(&r, &name("ok.example.com", 443), &addrs(&["10.9.1.1"]));
        assert_eq!(
            got,
            Err(Refused::Denied {
                host: "ok.example.com".into(),
                port: 443,
                addr: Some("10.9.1.1".parse().unwrap()),
                rule: "10.9.0.0/16".into()
            })
        );
        let got = may_connect(&r, &lit("10.9.1.1", 80), &[]);
        assert!(matches!(got, Err(Refused::Denied { .. })), "{got:?}");
        assert!(may_connect(&r, &name("ok.example.com", 443), &addrs(&["10.8.1.1"])).is_ok());
    }

    #[test]
    fn unknown_names_are_the_callers_to_ask_about() {
        let r = Rules::default();
        assert_eq!(
            may_connect(&r, &name("example.com", 443), &addrs(&["93.184.216.34"])),
            Ok("93.184.216.34".parse().unwrap())
        );
        assert!(may_connect(&r, &name("example.com", 443), &addrs(&["127.0.0.1"])).is_err());
    }
}
