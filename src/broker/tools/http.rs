//! The `http` tool (issue 36): one HTTP request made by the broker for its caller
//! (`gateway http`, MCP `http_request`), on the invocation skeleton ([`crate::broker::invoke`]).
//!
//! - **Decided twice, as every connection is.** The policy's rules decide the tool
//!   (`tools = ["http"]`, a rule naming no command, git pattern or path; the subject is
//!   `METHOD URL`), then the destination is decided by the policy's network exactly as the
//!   egress proxy decides a command's connections ([`crate::net::resolve::decide`]):
//!   `proxy` by its `allow`/`deny` rules and `unknown` (`ask` asks a person through the
//!   skeleton's `ask` step: the daemon's queue, or the caller's terminal; nobody to ask is a
//!   refusal); `none` and `loopback` give no network (rule `sandbox.network`); `connect_tcp`
//!   allows any name on its ports, special addresses (loopback, private, link-local and cloud
//!   metadata, …) and IP literals of them still refused (rule `network.address`).
//! - **Each redirect re-decided.** Redirects are followed here, not by the HTTP client: each
//!   hop is decided like the first (and asked about, where the policy asks), recorded in the
//!   report's and the record's `redirects`; a refused hop ends the call there, naming its
//!   rule. Credentials (`Authorization`, `Cookie`) are not carried to another origin.
//! - **Pinned.** The client's resolver answers only the address the decision checked
//!   ([`Pins`]); any other name fails. No proxy from the environment is used.
//! - **TLS always verified**, with rustls and the system's roots; nothing turns it off.
//! - **Secrets.** The URL, the headers and the body are inputs: a secret in them is refused
//!   (`[secrets] input = "deny"`, rule `secrets.input`), or, under `redact`, cut from the
//!   headers and body (a URL is refused: a marker in it makes another request). The response
//!   body and header values are output: redacted by `[secrets] output`.
//! - **Bounded.** The body is read up to `max_body` bytes (then the connection is dropped
//!   and the report says `body_truncated`); a text body is inlined, a binary one (not UTF-8,
//!   or holding NUL) is not: both are stored as the record's artifact (`stdout`, within
//!   `[audit] artifact_max`), `gateway log show SEQ` prints it.
//!
//! About 1,050 lines: the tool's steps, its redirect loop and its typed errors belong
//! together; its tests are beside it in `http_tests.rs`. The report and record types are
//! the seam to move out if it grows.

use crate::audit::{self, Hop, HttpRecord, artifacts::ArtifactWriter};
use crate::broker::invoke::{self, Call, Tool};
use crate::broker::refusal::Refusal;
use crate::broker::{self, BrokerError, guard};
use crate::model::{Decision, Effect, Network, RuleMatch, Unknown};
use crate::net::resolve::Decided;
use crate::net::rules::{Destination, Host};
use crate::policy::Policy;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The body bytes read at most when the call sets no `max_body`.
pub const DEFAULT_MAX_BODY: u64 = 1 << 20;

/// The largest `max_body` a call may ask for.
pub const MAX_BODY: u64 = 64 << 20;

/// Redirects followed at most when the call sets no `max_redirects`.
pub const DEFAULT_MAX_REDIRECTS: u32 = 5;

/// The most redirects a call may ask to follow.
pub const MAX_REDIRECTS: u32 = 20;

/// The time a request may take when neither the call nor the policy sets one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why an `http` call is malformed (a usage error, exit 122): what is wrong and how to
/// write it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The URL does not parse.
    #[error("http: {url:?} is not a URL ({why}); write it as http://host[:port]/path or https://…")]
    BadUrl {
        /// The URL as given (redacted).
        url: String,
        /// What is wrong.
        why: String,
    },
    /// A scheme other than `http` and `https`.
    #[error("http: the scheme {scheme:?} is not supported: only http:// and https:// URLs")]
    Scheme {
        /// The scheme.
        scheme: String,
    },
    /// The URL's host is not one a rule can name.
    #[error("http: the host of {url:?}: {why}")]
    BadHost {
        /// The URL (redacted).
        url: String,
        /// What is wrong.
        why: String,
    },
    /// A method that is not a token, or one this tool does not make.
    #[error("http: the method {method:?} {why}")]
    Method {
        /// The method.
        method: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A header that is not `Name: value`, or one the tool sets itself.
    #[error("http: the header {name:?} {why}")]
    Header {
        /// The header's name.
        name: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A limit out of range.
    #[error("http: {what} {value} is out of range: at most {max}")]
    Limit {
        /// Which limit.
        what: &'static str,
        /// The value asked for.
        value: u64,
        /// The most allowed.
        max: u64,
    },
    /// The HTTP client could not be made (the system's TLS roots).
    #[error(
        "http: the HTTP client could not be set up ({0}); check the system's CA certificates (/etc/ssl/certs)"
    )]
    Client(String),
    /// The call was cancelled (its client cancelled it or went away) before it completed.
    #[error(
        "http: cancelled before the response came (the caller cancelled the call or went away)"
    )]
    Cancelled,
    /// The request failed on the way: the connection, TLS (the server's certificate is
    /// always verified), or reading the response.
    #[error("http: {method} {url}: {why}")]
    Fetch {
        /// The method.
        method: String,
        /// The URL (redacted).
        url: String,
        /// What failed, and what to check.
        why: String,
    },
}

impl HttpError {
    /// The class of the failure: a request that failed on the way is `failed` (exit 1);
    /// the rest are usage errors (exit 122).
    pub fn code(&self) -> crate::broker::report::ErrorCode {
        use crate::broker::report::ErrorCode;
        match self {
            HttpError::Client(_) | HttpError::Fetch { .. } | HttpError::Cancelled => {
                ErrorCode::Failed
            }
            _ => ErrorCode::Usage,
        }
    }
}

/// One `http` call.
pub struct HttpCall<'a> {
    /// The policy deciding it.
    pub policy: &'a Policy,
    /// The state directory (log, artifacts).
    pub state_dir: PathBuf,
    /// The session, recorded.
    pub session: String,
    /// Who asked, recorded.
    pub caller: audit::Caller,
    /// Who calls.
    pub context: broker::client::Context,
    /// The session's workspace (recorded; where an approval applies).
    pub workspace: PathBuf,
    /// The method (`GET`, `POST`, …; case-sensitive).
    pub method: String,
    /// The URL (`http://` or `https://`).
    pub url: String,
    /// Request headers, `(name, value)`.
    pub headers: Vec<(String, String)>,
    /// The request body.
    pub body: Option<Vec<u8>>,
    /// The time the whole call may take (narrows the policy's; default
    /// [`DEFAULT_TIMEOUT`] within it).
    pub timeout: Option<Duration>,
    /// Redirects followed at most (0: none; `None`: [`DEFAULT_MAX_REDIRECTS`]).
    pub max_redirects: Option<u32>,
    /// Body bytes read at most (`None`: [`DEFAULT_MAX_BODY`]).
    pub max_body: Option<u64>,
    /// The call's cancellation (a pipe's read end: readable = cancelled); `None`: its
    /// caller's (a daemon client's, which ends with its connection).
    pub cancel: Option<std::os::fd::OwnedFd>,
}

/// A header as shown (its value redacted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HeaderShown {
    /// The name, lower case.
    pub name: String,
    /// The value, redacted (a value that is not text is shown lossily).
    pub value: String,
}

/// An `http` call's report (CLI `--json`, MCP `structuredContent`).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct HttpReport {
    /// The policy's decision about the call (its rules, and the network's about the first
    /// destination).
    pub decision: Decision,
    /// Why it was not performed, or stopped at a redirect: `kind`, `rule`, `message`;
    /// `null` when it completed.
    pub refusal: Option<serde_json::Value>,
    /// For `ask`: whether a person approved (`null`: nobody was asked).
    pub approved: Option<bool>,
    /// The final response's status.
    pub status: Option<u16>,
    /// The final response's headers (values redacted).
    pub headers: Vec<HeaderShown>,
    /// The body as text (redacted), when it is text; `null` when binary or none.
    pub body: Option<String>,
    /// The body is binary: not inlined; stored as the record's artifact.
    pub body_binary: bool,
    /// Body bytes received (within `max_body`).
    pub body_bytes: u64,
    /// The body was longer than `max_body`: only its first `max_body` bytes were read.
    pub body_truncated: bool,
    /// A secret in the body stopped it there (`[secrets] output = "block"`).
    pub body_blocked: bool,
    /// The artifact holding the (redacted) body (`gateway log show SEQ`); `null` when not
    /// stored (`[audit] store_output = false`) or empty.
    pub body_artifact: Option<String>,
    /// Every request made, in order: the first and each redirect followed.
    pub redirects: Vec<Hop>,
    /// Request body bytes sent, over every hop.
    pub bytes_sent: u64,
    /// Wall time of the whole call, in milliseconds.
    pub duration_ms: f64,
    /// Secrets found: in the inputs (`place:rule`) and the response (`response:rule`).
    pub secrets: Vec<String>,
    /// The audit record's sequence number (`gateway log show SEQ`).
    pub audit_seq: u64,
}

crate::owned_shape!(HttpReport);

/// The resolver of the call's HTTP client: the names the decisions pinned, each to the one
/// address checked; every other name fails (the client never resolves a name itself).
#[derive(Clone, Default)]
struct Pins(Arc<Mutex<HashMap<String, IpAddr>>>);

impl Pins {
    fn pin(&self, name: &str, addr: IpAddr) {
        let mut m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        m.insert(name.to_ascii_lowercase(), addr);
    }
}

impl reqwest::dns::Resolve for Pins {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let m = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        let out: Result<reqwest::dns::Addrs, Box<dyn std::error::Error + Send + Sync>> =
            match m.get(&key) {
                Some(a) => Ok(Box::new(std::iter::once(SocketAddr::new(*a, 0)))),
                None => Err(format!("{key}: not a destination this call decided").into()),
            };
        Box::pin(std::future::ready(out))
    }
}

/// The destination of `url`: its host and port, as the network rules read them.
fn destination(url: &reqwest::Url) -> Result<Destination, HttpError> {
    let bad = |why: String| HttpError::BadHost {
        url: broker::redact_text(url.as_str()),
        why,
    };
    let host = url
        .host_str()
        .ok_or_else(|| bad("the URL names no host".into()))?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| bad("no port".into()))?;
    Destination::parse(&format!("{host}:{port}"), None).map_err(|e| bad(e.to_string()))
}

/// Parses and checks a URL a call names or a redirect leads to.
fn parse_url(text: &str, base: Option<&reqwest::Url>) -> Result<reqwest::Url, HttpError> {
    let parsed = match base {
        Some(b) => b.join(text),
        None => reqwest::Url::parse(text),
    };
    let url = parsed.map_err(|e| HttpError::BadUrl {
        url: broker::redact_text(text),
        why: e.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(HttpError::Scheme {
            scheme: url.scheme().to_owned(),
        });
    }
    destination(&url)?;
    Ok(url)
}

/// How the policy's network decides a connection to `dest` (`approved`: what a person
/// answered, when asked). The same decision as the egress proxy's for `proxy`.
pub fn decide_destination(policy: &Policy, dest: &Destination, approved: Option<bool>) -> Decided {
    match &policy.sandbox.network {
        Network::Proxy(p) => {
            crate::net::resolve::decide(&p.rules, p.unknown == Unknown::Ask, approved, dest)
        }
        Network::None | Network::Loopback => Decided::Refused {
            rule: "sandbox.network".into(),
            reason: format!(
                "policy `{}` gives no network (`[sandbox] network = {}`); to let `http` reach {dest}, give it `network = {{ proxy = {{ allow = [\"{}\"] }} }}`",
                policy.name,
                if matches!(policy.sandbox.network, Network::None) {
                    "\"none\""
                } else {
                    "\"loopback\""
                },
                crate::net::resolve::allow_hint(dest)
            ),
        },
        Network::ConnectTcp(ports) => connect_tcp(ports, dest),
    }
}

/// `connect_tcp(ports)`: any name on those ports, pinned to a checked address; special
/// addresses (and IP literals of them) refused, as the proxy refuses those no rule names.
fn connect_tcp(ports: &[u16], dest: &Destination) -> Decided {
    if !ports.contains(&dest.port) {
        let list: Vec<String> = ports.iter().map(u16::to_string).collect();
        return Decided::Refused {
            rule: "sandbox.network".into(),
            reason: format!(
                "{dest}: the policy's network allows TCP to port(s) {} only",
                list.join(", ")
            ),
        };
    }
    let rules = crate::net::rules::Rules::default();
    let resolved = match &dest.host {
        Host::Ip(ip) if crate::net::addr::special(*ip).is_none() => {
            return Decided::Allowed {
                addr: ip.to_canonical(),
                rule: "sandbox.network".into(),
            };
        }
        Host::Ip(_) => Vec::new(),
        Host::Name(n) => match crate::net::resolve::resolve(n, dest.port) {
            Ok(a) => a,
            Err(e) => {
                return Decided::Refused {
                    rule: "network.resolve".into(),
                    reason: format!("{dest}: the name could not be resolved ({e})"),
                };
            }
        },
    };
    match crate::net::addr::may_connect(&rules, dest, &resolved) {
        Ok(addr) => Decided::Allowed {
            addr,
            rule: "sandbox.network".into(),
        },
        Err(e) => Decided::Refused {
            rule: "network.address".into(),
            reason: e.to_string(),
        },
    }
}

/// The question put to a person about a destination no rule covers.
fn ask_decision(dest: &Destination, url: &str) -> Decision {
    Decision {
        effect: Effect::Ask,
        rules: vec![RuleMatch {
            id: "network.unknown".into(),
            effect: Effect::Ask,
            reason: format!(
                "{dest}: no network rule covers it, and the policy asks (network.proxy.unknown = \"ask\"); to allow it for good, add {:?} to network.proxy.allow",
                crate::net::resolve::allow_hint(dest)
            ),
            subject: url.to_owned(),
        }],
        commands: vec![],
        unanalysable: vec![],
    }
}

/// Runs an `http` call: decided, asked, performed and recorded through the skeleton.
/// `ask` answers an `ask` decision where no daemon client can be asked (the CLI's terminal;
/// MCP: nobody, so no).
pub fn http(
    req: HttpCall<'_>,
    ask: &mut dyn FnMut(&Decision) -> bool,
) -> Result<HttpReport, BrokerError> {
    let call_policy = req.policy.name.clone();
    let mut tool = HttpTool {
        req: &req,
        ask,
        url: None,
        first: None,
        report: None,
        secrets: vec![],
        body: None,
        headers: vec![],
        shown_args: vec![],
        stored: None,
        late: None,
        cancelled: false,
    };
    let call = Call {
        policy: &call_policy,
        state_dir: &req.state_dir,
        session: &req.session,
        caller: &req.caller,
        context: &req.context,
    };
    let done = invoke::invoke(&call, &mut tool)?;
    let mut r = done.output;
    r.audit_seq = done.seq;
    Ok(r)
}

/// One `http` call between the skeleton's steps.
struct HttpTool<'r, 'a> {
    req: &'r HttpCall<'a>,
    ask: &'r mut dyn FnMut(&Decision) -> bool,
    /// The URL, parsed (set by `decide`).
    url: Option<reqwest::Url>,
    /// The first destination's decision (set by `decide`).
    first: Option<Decided>,
    /// What the call did so far (for the record, whatever happened).
    report: Option<HttpReport>,
    /// Secrets found in the inputs (`place:rule`).
    secrets: Vec<String>,
    /// The body to send (after the secrets check).
    body: Option<Vec<u8>>,
    /// The headers to send (after the secrets check).
    headers: Vec<(String, String)>,
    /// The record's args: method and URL, redacted.
    shown_args: Vec<String>,
    /// The body as stored (the record's `stdout`).
    stored: Option<audit::StreamDigest>,
    /// A hop after the first was refused or not approved: the call's record is a deny.
    late: Option<Refusal>,
    /// The call was cancelled while a request was under way.
    cancelled: bool,
}

impl Tool for HttpTool<'_, '_> {
    type Output = HttpReport;

    fn name(&self) -> &str {
        "http"
    }

    fn decide(&mut self, rec: &mut audit::Record) -> Result<Decision, BrokerError> {
        let req = self.req;
        self.shown_args = vec![req.method.clone(), broker::redact_text(&req.url)];
        rec.args = self.shown_args.clone();
        rec.cwd = std::path::absolute(&req.workspace)
            .unwrap_or_else(|_| req.workspace.clone())
            .display()
            .to_string();
        rec.http = Some(HttpRecord {
            method: req.method.clone(),
            url: broker::redact_text(&req.url),
            ..HttpRecord::default()
        });
        check_shape(req)?;
        Refusal::check_timeout(req.timeout, req.policy.sandbox.limits.timeout)?;
        let url = parse_url(&req.url, None).map_err(usage)?;
        // The URL as sent and percent-decoded (`?t=ghp_%54...` is the secret the server
        // reads).
        let decoded = percent_encoding::percent_decode_str(&req.url).collect::<Vec<u8>>();
        let mut parts = vec![
            ("the URL".to_owned(), req.url.as_bytes().to_vec(), false),
            ("the URL, percent-decoded".to_owned(), decoded, false),
        ];
        for (k, v) in &req.headers {
            parts.push((format!("header {k}"), v.as_bytes().to_vec(), true));
        }
        if let Some(b) = &req.body {
            parts.push(("the body".to_owned(), b.clone(), true));
        }
        let found = guard::check_parts(&req.policy.secrets, &mut parts)?;
        self.secrets = found
            .iter()
            .map(|s| format!("{}:{}", s.place, s.rule))
            .collect();
        if req.body.is_some() {
            self.body = parts.pop().map(|p| p.1);
        }
        // The headers as checked (under `redact`, without their secrets).
        self.headers = req
            .headers
            .iter()
            .zip(parts.iter().skip(2))
            .map(|((k, _), p)| (k.clone(), String::from_utf8_lossy(&p.1).into_owned()))
            .collect();
        let subject = self.shown_args.join(" ");
        let mut decision = req.policy.evaluate(
            &crate::model::ToolCall {
                tool: crate::model::Tool::Http,
                argv: self.shown_args.clone(),
                paths: vec![],
                cwd: req.workspace.clone(),
            },
            &broker::shell_env(&req.context, &req.workspace),
        );
        if decision.effect != Effect::Deny {
            let dest = destination(&url).map_err(usage)?;
            let first = decide_destination(req.policy, &dest, None);
            let (id, effect, reason) = match &first {
                Decided::Allowed { addr, rule } => (
                    rule.clone(),
                    Effect::Allow,
                    format!("{dest} ({addr}) is allowed by the network rule {rule:?}"),
                ),
                Decided::Refused { rule, reason } => (rule.clone(), Effect::Deny, reason.clone()),
                Decided::Ask => {
                    let d = ask_decision(&dest, &subject);
                    let r = &d.rules[0];
                    (r.id.clone(), Effect::Ask, r.reason.clone())
                }
            };
            decision.rules.push(RuleMatch {
                id,
                effect,
                reason,
                subject,
            });
            decision.effect = decision.effect.max(effect);
            self.first = Some(first);
        }
        guard::redact_decision(&mut decision);
        self.url = Some(url);
        Ok(decision)
    }

    fn ask(&mut self, decision: &Decision) -> bool {
        self.ask_person(decision)
    }

    fn not_performed(&mut self, decision: Decision, approved: Option<bool>) -> HttpReport {
        let refusal = Refusal::of_decision(&decision, approved).map(|r| r.shown());
        let r = self.empty_report(decision, approved, refusal);
        self.report = Some(r.clone());
        r
    }

    fn perform(
        &mut self,
        decision: Decision,
        approved: Option<bool>,
    ) -> Result<HttpReport, BrokerError> {
        let mut r = self.empty_report(decision, approved, None);
        let res = self.run(&mut r, approved);
        self.report = Some(r.clone());
        res.map(|()| r)
    }

    fn record(&mut self, res: &Result<HttpReport, BrokerError>, rec: &mut audit::Record) {
        rec.secrets.clone_from(&self.secrets);
        rec.cancelled = self.cancelled;
        let Some(r) = self.report.as_ref() else {
            return;
        };
        rec.secrets.clone_from(&r.secrets);
        rec.duration_ms = Some((r.duration_ms * 1e3).round() / 1e3);
        rec.stdout.clone_from(&self.stored);
        if let Some(h) = rec.http.as_mut() {
            h.status = r.status;
            h.bytes_sent = r.bytes_sent;
            h.bytes_received = r.body_bytes;
            h.hops.clone_from(&r.redirects);
        }
        // A hop refused (or not approved) after the first: the call's record is a deny
        // naming that rule, as a refusal before it would be.
        if let (Ok(_), Some(l)) = (res, &self.late) {
            rec.decision = audit::RecordDecision {
                effect: "deny".into(),
                rules: vec![l.rule().to_owned()],
                reasons: vec![l.redacted_message()],
            };
            if matches!(l, Refusal::NotApproved { .. }) {
                rec.approved = Some(false);
            }
        }
    }

    fn recorded(&mut self, _res: &Result<HttpReport, BrokerError>, _rec: &audit::Record) {
        if self.stored.as_ref().is_some_and(|d| d.artifact.is_some()) {
            broker::prune_artifacts(&self.req.state_dir, &self.req.policy.audit);
        }
    }
}

/// A malformed call as the broker's error (usage, or a failure on the way).
fn usage(e: HttpError) -> BrokerError {
    BrokerError::Http(e)
}

/// Headers the tool sets itself: from the URL (`host`) or the body.
const OWN_HEADERS: &[&str] = &["host", "content-length", "transfer-encoding", "connection"];

/// The method, headers and limits of a call, checked before anything is decided.
fn check_shape(req: &HttpCall<'_>) -> Result<(), BrokerError> {
    let method = reqwest::Method::from_bytes(req.method.as_bytes()).map_err(|_| {
        usage(HttpError::Method {
            method: req.method.clone(),
            why: "is not an HTTP method (a token such as GET, POST, PUT, DELETE; case-sensitive)",
        })
    })?;
    if method == reqwest::Method::CONNECT {
        return Err(usage(HttpError::Method {
            method: req.method.clone(),
            why: "opens a tunnel, which this tool does not make (commands reach hosts through the policy's proxy)",
        }));
    }
    for (k, v) in &req.headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            usage(HttpError::Header {
                name: k.clone(),
                why: "is not a header name (write -H 'Name: value')",
            })
        })?;
        if OWN_HEADERS.contains(&name.as_str()) {
            return Err(usage(HttpError::Header {
                name: k.clone(),
                why: "is set by gateway itself (from the URL, which the policy decides, and the body)",
            }));
        }
        reqwest::header::HeaderValue::from_str(v).map_err(|_| {
            usage(HttpError::Header {
                name: k.clone(),
                why: "has a value that is not visible ASCII text",
            })
        })?;
    }
    if let Some(n) = req.max_redirects.filter(|&n| n > MAX_REDIRECTS) {
        return Err(usage(HttpError::Limit {
            what: "max_redirects",
            value: u64::from(n),
            max: u64::from(MAX_REDIRECTS),
        }));
    }
    if let Some(n) = req.max_body.filter(|&n| n > MAX_BODY) {
        return Err(usage(HttpError::Limit {
            what: "max_body",
            value: n,
            max: MAX_BODY,
        }));
    }
    Ok(())
}

/// The client of one call: no proxy, no redirects of its own, its resolver the call's
/// pins, TLS verified with the system's roots (nothing here may turn verification off).
fn client(pins: &Pins) -> Result<reqwest::blocking::Client, BrokerError> {
    reqwest::blocking::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(pins.clone()))
        .pool_max_idle_per_host(0)
        .referer(false)
        .tls_built_in_root_certs(true)
        .user_agent(concat!("gateway/", env!("CARGO_PKG_VERSION")))
        .timeout(None)
        .build()
        .map_err(|e| usage(HttpError::Client(e.to_string())))
}

/// What failed in a request, in words: the cause chain, and what to check.
fn fetch_error(method: &str, url: &reqwest::Url, e: &reqwest::Error) -> BrokerError {
    let mut why = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        why.push_str(": ");
        why.push_str(&s.to_string());
        src = s.source();
    }
    let shown = broker::redact_text(url.as_str());
    if e.is_timeout() {
        return BrokerError::TimedOut(format!(
            "http: {method} {shown}: no answer within the call's timeout ({why})"
        ));
    }
    if why.contains("certificate") || why.contains("InvalidCertificate") {
        why.push_str(
            " — the server's certificate is not trusted by this system's CA roots (gateway always verifies TLS; add the CA to the system's store if it is yours)",
        );
    }
    usage(HttpError::Fetch {
        method: method.to_owned(),
        url: shown,
        why: broker::redact_text(&why),
    })
}

/// Whether `status` is a redirect this tool follows.
fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// The request that follows a redirect `status` from `from` to `to`: the method (303, and
/// 301/302 after a POST, become GET without a body, as browsers and curl do), and the
/// headers without credentials when the origin changes.
fn follow(
    status: u16,
    method: &mut reqwest::Method,
    body: &mut Option<Vec<u8>>,
    headers: &mut reqwest::header::HeaderMap,
    (from, to): (&reqwest::Url, &reqwest::Url),
) {
    let to_get = status == 303 && *method != reqwest::Method::HEAD
        || matches!(status, 301 | 302) && *method == reqwest::Method::POST;
    if to_get {
        *method = reqwest::Method::GET;
        *body = None;
        headers.remove(reqwest::header::CONTENT_TYPE);
    }
    if from.origin() != to.origin() {
        for h in [
            reqwest::header::AUTHORIZATION,
            reqwest::header::COOKIE,
            reqwest::header::PROXY_AUTHORIZATION,
        ] {
            headers.remove(h);
        }
    }
}

impl HttpTool<'_, '_> {
    /// A report with nothing performed yet.
    fn empty_report(
        &self,
        decision: Decision,
        approved: Option<bool>,
        refusal: Option<serde_json::Value>,
    ) -> HttpReport {
        HttpReport {
            decision,
            refusal,
            approved,
            status: None,
            headers: vec![],
            body: None,
            body_binary: false,
            body_bytes: 0,
            body_truncated: false,
            body_blocked: false,
            body_artifact: None,
            redirects: vec![],
            bytes_sent: 0,
            duration_ms: 0.0,
            secrets: self.secrets.clone(),
            audit_seq: 0,
        }
    }

    /// Asks a person about `decision` for `command` (`METHOD URL`, redacted): the daemon's
    /// queue for its client, else the caller's own way (a terminal; nobody: no).
    fn ask_command(&mut self, decision: &Decision, command: &str) -> bool {
        let req = self.req;
        match req.context.client() {
            Some(c) => {
                broker::ask_person(
                    &broker::Asking {
                        client: c,
                        state_dir: &req.state_dir,
                        session: &req.session,
                        caller: &req.caller,
                        policy: req.policy,
                        tool: "http",
                        command: command.to_owned(),
                        decision,
                        required: true,
                        workspace: &req.workspace,
                        cwd: &req.workspace,
                        env_digest: "http".into(),
                    },
                    &format!(
                        "this HTTP request needs approval:\n  {command}{}\nSend it?",
                        broker::rules_lines(decision)
                    ),
                ) == Some(true)
            }
            None => (self.ask)(decision),
        }
    }

    fn ask_person(&mut self, decision: &Decision) -> bool {
        let command = self.shown_args.join(" ");
        self.ask_command(decision, &command)
    }

    /// The destination of hop `hop` decided (asked about where the policy asks): the
    /// address to connect to, or the refusal that ends the call.
    fn decide_hop(
        &mut self,
        hop: usize,
        dest: &Destination,
        (method, url): (&str, &str),
        approved: Option<bool>,
    ) -> Result<(IpAddr, String), Refusal> {
        let policy = self.req.policy;
        let mut d = match (hop, self.first.take()) {
            (0, Some(Decided::Ask)) => decide_destination(policy, dest, approved),
            (0, Some(first)) => first,
            _ => decide_destination(policy, dest, None),
        };
        if d == Decided::Ask {
            let command = format!("{method} {url}");
            let q = ask_decision(dest, &command);
            if !self.ask_command(&q, &command) {
                let r = &q.rules[0];
                return Err(Refusal::NotApproved {
                    rules: vec![r.id.clone()],
                    reasons: vec![r.reason.clone()],
                });
            }
            d = decide_destination(policy, dest, Some(true));
        }
        match d {
            Decided::Allowed { addr, rule } => Ok((addr, rule)),
            Decided::Refused { rule, reason } => Err(Refusal::PolicyDenied {
                rules: vec![rule],
                reasons: vec![reason],
            }),
            Decided::Ask => Err(Refusal::NotApproved {
                rules: vec!["network.unknown".into()],
                reasons: vec![format!("{dest}: asked twice")],
            }),
        }
    }
}

impl HttpTool<'_, '_> {
    /// The "perform" step: each hop decided, pinned and sent; the last response's body read
    /// within its bound, redacted and stored.
    fn run(&mut self, r: &mut HttpReport, approved: Option<bool>) -> Result<(), BrokerError> {
        let req = self.req;
        let start = Instant::now();
        let timeout = req
            .timeout
            .or(req
                .policy
                .sandbox
                .limits
                .timeout
                .map(|t| t.min(DEFAULT_TIMEOUT)))
            .unwrap_or(DEFAULT_TIMEOUT);
        let pins = Pins::default();
        let client = client(&pins)?;
        let mut url = self
            .url
            .clone()
            .ok_or_else(|| invariant("no URL after the decision"))?;
        let mut method = reqwest::Method::from_bytes(req.method.as_bytes())
            .map_err(|_| invariant("a method not checked"))?;
        let mut headers = reqwest::header::HeaderMap::new();
        for (k, v) in &self.headers {
            if let (Ok(k), Ok(v)) = (
                reqwest::header::HeaderName::from_bytes(k.as_bytes()),
                reqwest::header::HeaderValue::from_str(v),
            ) {
                headers.append(k, v);
            }
        }
        let mut body = self.body.clone();
        let max_redirects = req.max_redirects.unwrap_or(DEFAULT_MAX_REDIRECTS) as usize;
        let result = loop {
            let hop = r.redirects.len();
            let shown = broker::redact_text(url.as_str());
            let dest = destination(&url).map_err(usage)?;
            let mut entry = Hop {
                method: method.to_string(),
                url: shown.clone(),
                address: None,
                rule: String::new(),
                status: None,
            };
            let (addr, rule) =
                match self.decide_hop(hop, &dest, (method.as_str(), &shown), approved) {
                    Ok(x) => x,
                    Err(refusal) => {
                        entry.rule = refusal.rule().to_owned();
                        r.redirects.push(entry);
                        r.refusal = Some(refusal.shown());
                        self.late = Some(refusal);
                        break None;
                    }
                };
            entry.address = Some(addr.to_string());
            entry.rule = rule;
            if let Some(h) = url.host_str() {
                pins.pin(h.trim_start_matches('[').trim_end_matches(']'), addr);
            }
            let left = timeout.saturating_sub(start.elapsed());
            let mut rb = client
                .request(method.clone(), url.clone())
                .headers(headers.clone());
            if let Some(b) = &body {
                rb = rb.body(b.clone());
                r.bytes_sent += b.len() as u64;
            }
            let rb = rb.timeout(left);
            let resp = self
                .cancellable(move || rb.send())?
                .map_err(|e| fetch_error(method.as_str(), &url, &e))?;
            let status = resp.status().as_u16();
            entry.status = Some(status);
            r.redirects.push(entry);
            r.status = Some(status);
            let next = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .filter(|_| is_redirect(status) && hop < max_redirects)
                .and_then(|l| parse_url(l, Some(&url)).ok());
            match next {
                Some(to) => {
                    follow(status, &mut method, &mut body, &mut headers, (&url, &to));
                    url = to;
                }
                None => break Some(resp),
            }
        };
        if let Some(resp) = result {
            self.read_body(r, resp, (method.as_str(), &url))?;
        }
        r.duration_ms = start.elapsed().as_secs_f64() * 1000.0;
        Ok(())
    }

    /// The final response's headers and body: read up to `max_body` bytes, redacted, inlined
    /// when text, stored as the record's artifact.
    fn read_body(
        &mut self,
        r: &mut HttpReport,
        resp: reqwest::blocking::Response,
        (method, url): (&str, &reqwest::Url),
    ) -> Result<(), BrokerError> {
        let req = self.req;
        r.headers = resp
            .headers()
            .iter()
            .map(|(k, v)| HeaderShown {
                name: k.as_str().to_owned(),
                value: broker::redact_text(&String::from_utf8_lossy(v.as_bytes())),
            })
            .collect();
        let max = req.max_body.unwrap_or(DEFAULT_MAX_BODY);
        let (raw, read) = self.cancellable(move || {
            let mut raw = Vec::new();
            let read = resp.take(max.saturating_add(1)).read_to_end(&mut raw);
            (raw, read)
        })?;
        let mut raw = raw;
        read.map_err(|e| {
            let why = e.to_string();
            match e
                .into_inner()
                .and_then(|i| i.downcast::<reqwest::Error>().ok())
            {
                Some(re) => fetch_error(method, url, &re),
                None => usage(HttpError::Fetch {
                    method: method.to_owned(),
                    url: broker::redact_text(url.as_str()),
                    why: format!("reading the body: {why}"),
                }),
            }
        })?;
        if raw.len() as u64 > max {
            raw.truncate(usize::try_from(max).unwrap_or(usize::MAX));
            r.body_truncated = true;
        }
        r.body_bytes = raw.len() as u64;
        let (shown, rules, blocked) = guard::redact_output(&req.policy.secrets, &raw);
        r.secrets
            .extend(rules.iter().map(|rule| format!("response:{rule}")));
        r.body_blocked = blocked;
        let binary = match std::str::from_utf8(&shown) {
            Ok(s) => s.contains('\0'),
            // Cut in the middle of a character by `max_body`: still text.
            Err(e) => e.error_len().is_some(),
        };
        r.body_binary = binary;
        if !binary {
            r.body = Some(String::from_utf8_lossy(&shown).into_owned());
        }
        let a = req.policy.audit;
        let mut w = ArtifactWriter::new(
            &req.state_dir,
            if a.store_output { a.artifact_max } else { 0 },
        );
        w.write(&shown);
        let d = w.finish();
        r.body_artifact.clone_from(&d.artifact);
        self.stored = Some(d);
        Ok(())
    }
}

impl HttpTool<'_, '_> {
    /// Runs `f` (a request, a body's read) on a thread of its own and waits for it, unless
    /// the call is cancelled first (its client cancelled it or went away): then the call
    /// ends at once, recorded as cancelled, and `f` ends by the call's timeout on its own.
    fn cancellable<T: Send + 'static>(
        &mut self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, BrokerError> {
        use std::os::fd::AsFd;
        let req = self.req;
        let Some(cancel) = req
            .cancel
            .as_ref()
            .map(AsFd::as_fd)
            .or_else(|| req.context.cancel())
        else {
            return Ok(f());
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(v) => return Ok(v),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(invariant("the request's thread ended without a result"));
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if crate::sandbox::fd_ready(cancel) {
                        self.cancelled = true;
                        return Err(usage(HttpError::Cancelled));
                    }
                }
            }
        }
    }
}

/// A step out of order (a bug in gateway).
fn invariant(what: &'static str) -> BrokerError {
    BrokerError::Invariant {
        tool: "http".into(),
        what,
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
