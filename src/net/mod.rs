//! Egress by name (issue 36): the decision core of the proxy that will give a command the
//! network through a domain allowlist.
//!
//! This module is pure library code, with no sockets: [`rules`] parses the destination
//! rules a policy holds (`example.com`, `*.example.org`, `localhost:3000`, `10.0.0.0/8`) and
//! decides a destination (deny wins over allow; every verdict names its rule); [`addr`]
//! classifies special addresses (loopback, private, link-local and cloud metadata, CGNAT,
//! multicast, IPv4 embedded in IPv6, …) and runs the connect-time check that pins a
//! connection to one checked address; [`parse`] reads the first bytes a client sends a proxy
//! (an HTTP `CONNECT` or absolute-form request head, a SOCKS5 greeting and request),
//! incrementally and within fixed bounds.
//!
//! What uses it next: the egress proxy (HTTP forward, `CONNECT`, SOCKS5) and the relay in the
//! command's network namespace (DESIGN.md's `src/net/`), and the policy's `proxy` network
//! mode, which will hold [`rules::Rules`]. None exists yet: no policy can select this.
//! `net` sits below `broker` and imports nothing from `broker`, `cli` or `serve`.

pub mod addr;
mod forward;
pub mod parse;
pub mod proxy;
pub mod resolve;
pub mod rules;

/// Fuzz entry (`fuzz/fuzz_targets/proxy_request.rs`): feeds `data` to the HTTP and SOCKS5
/// parsers and, as text, to the rule parser, and checks what they promise: no panic, a head
/// length within the bytes and the bound, a result that does not change when the bytes after
/// it are cut off, and rules whose normalised form parses to the same rule.
pub fn fuzz_proxy_request(data: &[u8]) {
    if let Ok(Some(req)) = parse::parse_http(data) {
        assert!(req.head_len <= data.len() && req.head_len <= parse::MAX_HEAD);
        assert_eq!(
            parse::parse_http(&data[..req.head_len]),
            Ok(Some(req.clone()))
        );
        // Any shorter prefix is incomplete, not an error: the parse is incremental.
        for cut in [0, req.head_len / 2, req.head_len.saturating_sub(1)] {
            if cut < req.head_len {
                assert_eq!(parse::parse_http(&data[..cut]), Ok(None), "cut at {cut}");
            }
        }
        let rules = rules::Rules::default();
        let _ = rules.decide(&req.destination);
        let _ = addr::may_connect(&rules, &req.destination, &[]);
    }
    if let Ok(Some(g)) = parse::parse_socks_greeting(data) {
        assert!(g.len <= data.len() && !g.methods.is_empty());
        let rest = &data[g.len..];
        if let Ok(Some(r)) = parse::parse_socks_request(rest) {
            assert!(r.len <= rest.len());
            for cut in 0..r.len {
                assert_eq!(
                    parse::parse_socks_request(&rest[..cut]),
                    Ok(None),
                    "cut at {cut}"
                );
            }
            assert_eq!(parse::parse_socks_request(&rest[..r.len]), Ok(Some(r)));
        }
    }
    let _ = parse::parse_socks_request(data);
    let text = String::from_utf8_lossy(data);
    let mut allow = Vec::new();
    for line in text.lines() {
        if let Ok(rule) = rules::Rule::parse(line) {
            let again = rules::Rule::parse(&rule.to_string());
            assert!(
                again
                    .as_ref()
                    .is_ok_and(|a| a.host == rule.host && a.ports == rule.ports),
                "{line:?} normalised to {:?}, which parses to {again:?}",
                rule.to_string()
            );
            allow.push(rule);
        }
    }
    if data.len() >= 17 {
        let mut v6 = [0u8; 16];
        v6.copy_from_slice(&data[..16]);
        let ip = std::net::IpAddr::from(v6);
        let _ = addr::special(ip);
        let rules = rules::Rules {
            allow,
            deny: Vec::new(),
        };
        let port = u16::from(data[16]).max(1);
        for host in [rules::Host::Ip(ip), rules::Host::Name("localhost".into())] {
            let dest = rules::Destination { host, port };
            let _ = addr::may_connect(&rules, &dest, &[ip, ip.to_canonical()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzz_seeds() {
        for seed in [
            &b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"[..],
            b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\nbody",
            b"\x05\x01\x00\x05\x01\x00\x03\x0bexample.com\x01\xbb",
            b"\x05\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x1f\x90",
            b"example.com\n*.example.org\nexample.net:8443\nlocalhost:3000\n[::1]:8080\n10.0.0.0/8\n[fd00::]/8:443",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
            b"",
        ] {
            fuzz_proxy_request(seed);
        }
    }

    /// A small in-process mutation fuzzer over the seeds (the libFuzzer target goes further):
    /// flips, inserts, deletes and truncates bytes, with a fixed seed.
    #[test]
    fn mutated_seeds_never_panic() {
        let seeds: [&[u8]; 6] = [
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
            b"GET http://[::1]:8080/a?b HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
            b"\x05\x02\x00\x02\x05\x01\x00\x03\x0bexample.com\x01\xbb",
            b"\x05\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x7f\x00\x00\x01\x0b\xb8",
            b"*.example.org:8443\n[fd00::]/8:443\n::ffff:10.0.0.0/104\nlocalhost:3000",
            b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xa9\xfe\xa9\xfe\x50",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let interesting = b":[]/.*@%\r\n \x00\x05\xff0123456789";
        for i in 0..20_000 {
            let mut data = seeds[i % seeds.len()].to_vec();
            for _ in 0..=(next() % 4) {
                let at = (next() as usize) % (data.len() + 1);
                let byte = if next() % 2 == 0 {
                    interesting[(next() as usize) % interesting.len()]
                } else {
                    next() as u8
                };
                match next() % 4 {
                    0 if at < data.len() => data[at] = byte,
                    1 => data.insert(at, byte),
                    2 if at < data.len() => {
                        data.remove(at);
                    }
                    _ => data.truncate(at),
                }
            }
            fuzz_proxy_request(&data);
        }
    }
}
