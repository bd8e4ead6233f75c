//! The egress proxy of one exec (issue 36), on the broker's side: the plumbing the run's
//! helper uses to hand over its listening socket, the environment that points clients at
//! it, the hooks through which it asks a person, writes on the command's stderr and scans
//! what leaves in plaintext, and the `net` records of its connections.

use crate::audit;
use crate::broker::{BrokerError, approvals};
use crate::model::{Network, SecretsInput, Unknown};
use crate::net::proxy::{self, Connection, Hooks};
use crate::net::rules::Destination;
use std::io::Write;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Mutex;

/// The broker's ends of one run's proxy.
pub(in crate::broker) struct Egress {
    /// The socket the helper sends its listening socket over.
    sock: OwnedFd,
    /// Where notes for the command's stderr are written.
    notes: Mutex<std::io::PipeWriter>,
    cfg: proxy::Config,
}

fn io(what: &str) -> impl Fn(std::io::Error) -> BrokerError + '_ {
    move |source| BrokerError::Io {
        what: what.into(),
        source,
    }
}

/// For a `proxy` network: the plumbing for the sandbox, and the broker's ends; the proxy's
/// variables are set in `env` (replacing the caller's).
pub(in crate::broker) fn prepare(
    network: &Network,
    env: &mut Vec<(std::ffi::OsString, std::ffi::OsString)>,
) -> Result<Option<(Egress, crate::sandbox::ProxyPlumbing)>, BrokerError> {
    let Network::Proxy(p) = network else {
        return Ok(None);
    };
    let vars = proxy::environment();
    env.retain(|(k, _)| !vars.iter().any(|(v, _)| k == v));
    env.extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
    let (ours, theirs) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::STREAM,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| io("creating the proxy's socket pair")(e.into()))?;
    let (notes_r, notes_w) = std::io::pipe().map_err(io("creating the proxy's notes pipe"))?;
    let notes_r = OwnedFd::from(notes_r);
    rustix::fs::fcntl_setfl(&notes_r, rustix::fs::OFlags::NONBLOCK)
        .map_err(|e| io("configuring the proxy's notes pipe")(e.into()))?;
    rustix::fs::fcntl_setfl(&notes_w, rustix::fs::OFlags::NONBLOCK)
        .map_err(|e| io("configuring the proxy's notes pipe")(e.into()))?;
    Ok(Some((
        Egress {
            sock: ours,
            notes: Mutex::new(notes_w),
            cfg: proxy::Config::new(p.rules.clone(), p.unknown == Unknown::Ask),
        },
        crate::sandbox::ProxyPlumbing {
            listen_to: theirs,
            port: proxy::PORT,
            notes: notes_r,
        },
    )))
}

/// What the proxy asks of the broker for one exec.
struct ExecHooks<'a, 'r> {
    req: &'a crate::broker::ExecRequest<'r>,
    notes: Mutex<std::io::PipeWriter>,
    workspace: &'a std::path::Path,
    cwd: &'a std::path::Path,
    /// The run's intent's side file: each connection's record when it is decided and when
    /// it ends (`{"id", "record"}` lines), for the recovery of a broker that dies before
    /// writing them (`intent::recover`), and how many lines it holds.
    kept: Mutex<(Option<std::fs::File>, usize)>,
}

impl Hooks for ExecHooks<'_, '_> {
    fn ask(&self, dest: &Destination, stop: BorrowedFd<'_>) -> Option<bool> {
        let req = self.req;
        let c = req.context.client()?;
        let command = format!("connect {dest}");
        let o = c.server.approvals.ask(
            (&req.state_dir, Some(&c.server)),
            approvals::Request {
                session: &req.session,
                caller: &req.caller,
                tool: "net",
                command: command.clone(),
                rules: vec![format!(
                    "network.unknown: no network rule covers {dest} (network.proxy.unknown = \"ask\")"
                )],
                risk: "medium",
                question: format!("the command wants to connect to {dest}. Allow it?"),
                // A standing approval (`--always-for-session`) of a host holds for the
                // session's runs in this workspace, from whichever directory.
                workspace: self.workspace,
                cwd: self.workspace,
                env_digest: String::new(),
            },
            std::time::Duration::from_secs(req.policy.approval.timeout),
            (
                &|id, _| {
                    self.note(&format!(
                        "gateway: network: {dest} needs approval: `gateway approve {id}` (or `gateway deny {id}`); waiting up to {} s",
                        req.policy.approval.timeout
                    ));
                    false
                },
                Some(stop),
            ),
        );
        Some(o.approved)
    }

    fn note(&self, line: &str) {
        if let Ok(mut w) = self.notes.lock() {
            // A full pipe drops the note (the record keeps the refusal).
            let _ = w.write_all(format!("{line}\n").as_bytes());
        }
    }

    fn ended(&self, c: &Connection) {
        let Ok(mut kept) = self.kept.lock() else {
            return;
        };
        let (file, n) = &mut *kept;
        // A decision and an end per connection.
        if *n >= 2 * MAX_NET_RECORDS {
            return;
        }
        let Some(f) = file.as_mut() else {
            return;
        };
        let base = audit::Record {
            session: self.req.session.clone(),
            caller: self.req.caller.clone(),
            cwd: self.cwd.display().to_string(),
            policy: self.req.policy.name.clone(),
            ..audit::Record::default()
        };
        let kept = serde_json::json!({ "id": c.id, "record": net_record(&base, c) });
        if let Ok(mut line) = serde_json::to_vec(&kept) {
            line.push(b'\n');
            // One write per line (O_APPEND): a broker that dies mid-way leaves whole lines
            // before it.
            if f.write_all(&line).is_ok() {
                *n += 1;
            }
        }
    }

    fn secret(&self, bytes: &[u8]) -> Option<String> {
        let found = crate::secrets::scanner()
            .scan(bytes, crate::secrets::TextKind::Stream, false)
            .into_iter()
            .next()?;
        match self.req.policy.secrets.input {
            SecretsInput::Warn => None,
            SecretsInput::Deny | SecretsInput::Redact => Some(found.rule.to_string()),
        }
    }
}

/// Runs `run` with the proxy serving its command; returns what `run` returned and the
/// proxy's connections.
pub(in crate::broker) fn around<T>(
    egress: Egress,
    (req, workspace, cwd, kept): (
        &crate::broker::ExecRequest<'_>,
        &std::path::Path,
        &std::path::Path,
        Option<&std::path::Path>,
    ),
    run: impl FnOnce() -> T,
) -> (T, Vec<Connection>) {
    let Egress { sock, notes, cfg } = egress;
    let file = kept.and_then(|p| {
        // not-ws: the run's intent's side file, in the broker's own state directory
        std::os::unix::fs::OpenOptionsExt::mode(
            std::fs::OpenOptions::new().append(true).create(true),
            0o600,
        )
        .open(p)
        .ok()
    });
    let hooks = ExecHooks {
        req,
        notes,
        workspace,
        cwd,
        kept: Mutex::new((file, 0)),
    };
    let (out, handle) = std::thread::scope(|s| {
        // Without its threads (no pipe could be made) the proxy does not listen: the
        // command's connections are refused, nothing is reached.
        let mut handle = proxy::start(s, proxy::Listen::Receive(sock), &cfg, &hooks).ok();
        let out = run();
        if let Some(h) = handle.as_mut() {
            h.stop();
        }
        (out, handle)
    });
    (out, handle.map(|h| h.connections()).unwrap_or_default())
}

/// A run's connections recorded one by one; those past it are summed up in one more `net`
/// record (a command that opens connections in a loop cannot flood the log, nor hold its
/// caller while thousands of records are written).
pub(in crate::broker) const MAX_NET_RECORDS: usize = 500;

/// The `net` records of a run's connections, after its own record (`seq`).
pub(in crate::broker) fn record(
    state_dir: &std::path::Path,
    context: &crate::broker::client::Context,
    base: &audit::Record,
    connections: &[Connection],
) {
    if connections.is_empty() {
        return;
    }
    let Ok(mut log) = crate::broker::open_log(state_dir, context.server()) else {
        return;
    };
    let (each, rest) = connections.split_at(connections.len().min(MAX_NET_RECORDS));
    let summary = (!rest.is_empty()).then(|| {
        let allowed = rest.iter().filter(|c| c.allowed).count();
        Connection {
            id: u64::MAX,
            protocol: "summary",
            host: String::new(),
            port: 0,
            address: None,
            allowed: false,
            rule: "network.records".into(),
            reason: Some(format!(
                "{} more connections than the {MAX_NET_RECORDS} recorded one by one: {allowed} allowed, {} refused",
                rest.len(),
                rest.len() - allowed
            )),
            approved: None,
            bytes_up: rest.iter().map(|c| c.bytes_up).sum(),
            bytes_down: rest.iter().map(|c| c.bytes_down).sum(),
            duration: rest.iter().map(|c| c.duration).max().unwrap_or_default(),
        }
    });
    for c in each.iter().chain(summary.as_ref()) {
        let mut rec = net_record(base, c);
        if log.append(&mut rec).is_ok() {
            context.note_recorded();
        }
    }
}

/// The `net` record of one connection, with the session, caller, directory and policy of
/// `base` and its `seq` as the command's.
fn net_record(base: &audit::Record, c: &Connection) -> audit::Record {
    let ms = (c.duration.as_secs_f64() * 1e6).round() / 1e3;
    audit::Record {
        session: base.session.clone(),
        caller: base.caller.clone(),
        tool: "net".into(),
        args: vec![format!("{}:{}", c.host, c.port)],
        cwd: base.cwd.clone(),
        policy: base.policy.clone(),
        decision: audit::RecordDecision {
            effect: if c.allowed { "allow" } else { "deny" }.into(),
            rules: vec![c.rule.clone()],
            reasons: c.reason.iter().cloned().collect(),
        },
        approved: c.approved,
        duration_ms: Some(ms),
        error: c.reason.clone().filter(|_| c.allowed),
        net: Some(audit::NetInfo {
            command: base.seq,
            protocol: c.protocol.into(),
            host: c.host.clone(),
            port: c.port,
            address: c.address.map(|a| a.to_string()),
            bytes_up: c.bytes_up,
            bytes_down: c.bytes_down,
            duration_ms: ms,
        }),
        ..audit::Record::default()
    }
}

/// Recovery of a dead broker's run (`intent::recover`): the `net` records its proxy kept in
/// the side file `kept`, after the run's record `seq`; the file is removed.
pub(in crate::broker) fn recover(
    log: &mut crate::broker::LogWriter<'_>,
    kept: &std::path::Path,
    seq: u64,
) {
    // not-ws: the run's intent's side file, in the broker's own state directory
    let Ok(text) = std::fs::read_to_string(kept) else {
        return;
    };
    // The last word on each connection (its end, else its decision), in the order they
    // were first seen.
    let mut order: Vec<u64> = Vec::new();
    let mut last: std::collections::HashMap<u64, audit::Record> = std::collections::HashMap::new();
    for line in text.lines() {
        #[derive(serde::Deserialize)]
        struct Kept {
            id: u64,
            record: audit::Record,
        }
        let Ok(k) = serde_json::from_str::<Kept>(line) else {
            continue;
        };
        if last.insert(k.id, k.record).is_none() {
            order.push(k.id);
        }
    }
    for id in order {
        let Some(mut rec) = last.remove(&id) else {
            continue;
        };
        let Some(n) = rec.net.as_mut() else { continue };
        n.command = seq;
        let _ = log.append(&mut rec);
    }
    // not-ws: the run's intent's side file, in the broker's own state directory
    let _ = std::fs::remove_file(kept);
}
