//! The `http` tool's unit tests: the network modes' decisions, the pinned resolver, redirects'
//! methods and credentials, the checks of a call's shape.
use super::*;
use reqwest::dns::Resolve as _;

fn policy(network: &str) -> Policy {
    Policy::from_str(
        &format!("[sandbox]\nnetwork = {network}\n"),
        "t.toml",
        "t",
        None,
    )
    .expect("policy")
}

fn dest(s: &str) -> Destination {
    Destination::parse(s, None).expect("destination")
}

#[test]
fn every_network_mode_decides_a_destination() {
    for n in ["\"none\"", "\"loopback\""] {
        let d = decide_destination(&policy(n), &dest("example.com:443"), None);
        assert!(
            matches!(&d, Decided::Refused { rule, reason } if rule == "sandbox.network" && reason.contains("proxy")),
            "{n}: {d:?}"
        );
    }
    let tcp = policy("{ connect_tcp = [443] }");
    assert!(matches!(
        decide_destination(&tcp, &dest("example.com:80"), None),
        Decided::Refused { rule, .. } if rule == "sandbox.network"
    ));
    assert!(matches!(
        decide_destination(&tcp, &dest("93.184.216.34:443"), None),
        Decided::Allowed { rule, .. } if rule == "sandbox.network"
    ));
    for special in [
        "169.254.169.254:443",
        "127.0.0.1:443",
        "[::1]:443",
        "10.1.2.3:443",
    ] {
        assert!(
            matches!(
                decide_destination(&tcp, &dest(special), None),
                Decided::Refused { rule, .. } if rule == "network.address"
            ),
            "{special}"
        );
    }
    // localhost resolves to loopback: refused under connect_tcp.
    assert!(matches!(
        decide_destination(&tcp, &dest("localhost:443"), None),
        Decided::Refused { rule, .. } if rule == "network.address"
    ));
    let proxy = policy("{ proxy = { allow = [\"localhost:8080\"], unknown = \"ask\" } }");
    assert_eq!(
        decide_destination(&proxy, &dest("example.com:443"), None),
        Decided::Ask
    );
    assert!(matches!(
        decide_destination(&proxy, &dest("localhost:8080"), None),
        Decided::Allowed { addr, .. } if addr.is_loopback()
    ));
}

#[test]
fn the_resolver_answers_only_pinned_names() {
    let pins = Pins::default();
    pins.pin("Web.Test", IpAddr::from([127, 0, 0, 1]));
    let run = |n: &str| {
        let name: reqwest::dns::Name = n.parse().expect("name");
        let fut = pins.resolve(name);
        // The future is ready at once (no I/O): poll it with a no-op waker.
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut fut = fut;
        match fut.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(r) => {
                r.map(|a| a.collect::<Vec<_>>()).map_err(|e| e.to_string())
            }
            std::task::Poll::Pending => Err("pending".into()),
        }
    };
    assert_eq!(
        run("web.test").expect("pinned"),
        vec![SocketAddr::from(([127, 0, 0, 1], 0))]
    );
    assert!(run("other.test").is_err());
}

#[test]
fn a_redirect_changes_the_method_as_browsers_do_and_drops_credentials_across_origins() {
    use reqwest::header::{AUTHORIZATION, COOKIE, HeaderMap, HeaderValue};
    let a = reqwest::Url::parse("https://a.test/x").expect("url");
    let same = reqwest::Url::parse("https://a.test/y").expect("url");
    let other = reqwest::Url::parse("https://b.test/y").expect("url");
    let creds = || {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        h.insert(COOKIE, HeaderValue::from_static("s=1"));
        h
    };
    for (status, before, after, kept_body) in [
        (303, "PUT", "GET", false),
        (302, "POST", "GET", false),
        (301, "POST", "GET", false),
        (307, "POST", "POST", true),
        (308, "PUT", "PUT", true),
        (302, "PUT", "PUT", true),
    ] {
        let mut m = reqwest::Method::from_bytes(before.as_bytes()).expect("method");
        let mut body = Some(b"x".to_vec());
        let mut h = creds();
        follow(status, &mut m, &mut body, &mut h, (&a, &same));
        assert_eq!(m.as_str(), after, "{status} {before}");
        assert_eq!(body.is_some(), kept_body, "{status} {before}");
        assert!(
            h.contains_key(AUTHORIZATION),
            "same origin keeps credentials"
        );
    }
    let mut m = reqwest::Method::GET;
    let mut h = creds();
    follow(302, &mut m, &mut None, &mut h, (&a, &other));
    assert!(!h.contains_key(AUTHORIZATION) && !h.contains_key(COOKIE));
}

#[test]
fn urls_methods_and_headers_are_checked() {
    assert!(matches!(
        parse_url("ftp://a.test/", None),
        Err(HttpError::Scheme { .. })
    ));
    assert!(matches!(
        parse_url("not a url", None),
        Err(HttpError::BadUrl { .. })
    ));
    assert!(parse_url("http://a..b/", None).is_err());
    // WHATWG reads `2130706433` as 127.0.0.1: the rules see the address.
    let u = parse_url("http://2130706433/", None).expect("url");
    assert_eq!(
        destination(&u).expect("dest").host,
        Host::Ip(IpAddr::from([127, 0, 0, 1]))
    );
    let base = reqwest::Url::parse("https://a.test/x/y").expect("url");
    assert_eq!(
        parse_url("../z", Some(&base)).expect("relative").as_str(),
        "https://a.test/z"
    );
    let p = policy("\"none\"");
    let call = |method: &str, headers: Vec<(&str, &str)>| HttpCall {
        policy: &p,
        state_dir: PathBuf::from("/nonexistent"),
        session: String::new(),
        caller: audit::Caller::default(),
        context: broker::client::Context::this_process(),
        workspace: PathBuf::from("/"),
        method: method.into(),
        url: "http://a.test/".into(),
        headers: headers
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        body: None,
        timeout: None,
        max_redirects: Some(MAX_REDIRECTS + 1),
        max_body: None,
        cancel: None,
    };
    assert!(check_shape(&call("GET", vec![("Host", "evil.test")])).is_err());
    assert!(check_shape(&call("CONNECT", vec![])).is_err());
    assert!(check_shape(&call("GE T", vec![])).is_err());
    assert!(check_shape(&call("GET", vec![("X", "a\nb")])).is_err());
    let mut ok = call("GET", vec![("Accept", "*/*")]);
    assert!(check_shape(&ok).is_err(), "max_redirects over the limit");
    ok.max_redirects = Some(3);
    assert!(check_shape(&ok).is_ok());
}
