//! Every run leaves a record, even when the broker does not live to write it.
//!
//! Just before a command starts, the broker writes its *intent* durably into
//! `<state>/intents/`: the audit record as it stands (who, what, where, the decision), the
//! broker's pid, its start time and the boot id, and, when the run is snapshotted, the
//! workspace's pre-run index (a hard link to the saved index, or a copy). The intent is
//! removed once the run's own record is in the audit log.
//!
//! - **SIGINT, SIGTERM, SIGHUP** (one-shot front ends: CLI, `sh -c`, REPL, `mcp` without a
//!   daemon): from the intent on, the broker catches them ([`sandbox::catch_interrupts`]); the
//!   run loop kills the command, the normal post-run work runs (quarantine, change capture),
//!   the record says `cancelled` and `interrupted: SIG`, and then the front end ends the
//!   process by that signal. The daemon keeps its own handling (its client's hangup cancels).
//! - **SIGKILL, a crash, power loss**: the next gateway invocation on that state directory
//!   ([`recover`]) finds intents whose broker is gone (pid not running, or running with
//!   another start time, or another boot), appends their record with `broker_died` and an
//!   error saying the exit status is unknown, and, with a pre-run index, journals what the
//!   workspace has changed since (one group, undoable as any run's). Recovery holds a lock, so
//!   two gateways starting together record each intent once.
//!
//! Limits (said, not hidden): the capture at recovery sees the workspace as it is then, so
//! changes made after the broker died (by the user, by a survivor of the run) are journalled
//! with the run's; a broker killed between appending its record and removing its intent is
//! recorded twice (the second time as died). Both windows are small and lose nothing.

use super::BrokerError;
use super::tools::exec::Trace;
use crate::audit;
use crate::sandbox;
use crate::workspace::{snapshot, wsfs};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long recovery may spend capturing one dead run's changes before it records the run
/// without them (a workspace file that hangs a reader must not stop every later command).
const CAPTURE_LIMIT: Duration = Duration::from_secs(30);

/// What is kept on disk for a run in flight.
#[derive(Debug, Serialize, Deserialize)]
struct Intent {
    /// The broker's pid.
    pid: u32,
    /// Its start time (`/proc/PID/stat` field 22, clock ticks since boot).
    start: u64,
    /// The boot it ran in (`/proc/sys/kernel/random/boot_id`).
    boot: String,
    /// The workspace snapshotted before the run, and the policy's size limit for it.
    snapshot: Option<(PathBuf, u64)>,
    /// The run's capture layer (`workspace::capture`), when the overlay captures it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    layer: Option<String>,
    /// The policy's quota for the backup store (`[undo] max_state_bytes`; intents written
    /// before it was recorded: the default).
    #[serde(default)]
    quota: Option<u64>,
    /// The workspace's share of it (`[undo] max_workspace_bytes`; intents written before it
    /// was recorded: half of `quota`).
    #[serde(default)]
    ws_quota: Option<u64>,
    /// The record to write if the broker dies (redacted like every record).
    record: audit::Record,
}

/// A run whose intent is on disk: finished by [`Pending::finish`] once its record is
/// written. While it lives, termination signals cancel the run instead of ending the broker
/// (one-shot front ends).
pub(crate) struct Pending {
    files: Vec<PathBuf>,
    _interrupts: Option<sandbox::InterruptGuard>,
}

impl Pending {
    /// Where the run's egress proxy keeps the records of its ended connections, for
    /// [`recover`] should the broker die (removed with the intent).
    pub(crate) fn connections_file(&self) -> Option<&Path> {
        self.files
            .iter()
            .find(|f| f.extension().is_some_and(|x| x == "net"))
            .map(PathBuf::as_path)
    }

    /// The run's record is in the log: its intent goes.
    pub(crate) fn finish(self) {
        for f in &self.files {
            // not-ws: the intent records, in the broker's own state directory
            let _ = std::fs::remove_file(f);
        }
    }
}

fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("intents")
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> BrokerError {
    move |source| BrokerError::Io { what, source }
}

/// This process's (or `pid`'s) start time, from `/proc/PID/stat`.
fn start_time(pid: &str) -> Option<u64> {
    // not-ws: /proc, a process's start time
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces and parentheses): state is 3,
    // starttime 22.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

pub(crate) fn boot_id() -> String {
    // not-ws: /proc, the boot id
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Trace {
    /// Writes the run's intent (durably) just before the command starts, and from then on
    /// catches termination signals (one-shot front ends). Fails closed: a run that could not
    /// be journalled does not start.
    pub(crate) fn begin_run(
        &mut self,
        req: &super::ExecRequest<'_>,
        ws: &std::path::Path,
        approved: Option<bool>,
        pre: Option<&snapshot::Index>,
        max_file: u64,
        layer: Option<String>,
    ) -> Result<(), BrokerError> {
        let d = dir(&req.state_dir);
        {
            use std::os::unix::fs::DirBuilderExt;
            // not-ws: the intent records, in the broker's own state directory
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&d)
                .map_err(io(format!("creating {}", d.display())))?;
        }
        let pid = std::process::id();
        let mut nonce = [0u8; 6];
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce);
        let id = format!("{pid}-{}", crate::durable::hex(&nonce));
        let mut files = Vec::new();
        if let Some(pre) = pre {
            let p = d.join(format!("{id}.index"));
            snapshot::keep_index(&req.state_dir, ws, pre, &p)?;
            files.push(p);
        }
        let intent = Intent {
            pid,
            start: start_time("self").unwrap_or(0),
            boot: boot_id(),
            snapshot: pre.map(|_| (ws.to_path_buf(), max_file)),
            layer,
            quota: Some(req.policy.undo.max_state_bytes),
            ws_quota: Some(req.policy.undo.workspace_quota()),
            record: audit::Record {
                session: req.session.clone(),
                caller: req.caller.clone(),
                tool: "exec".into(),
                args: self.argv.clone(),
                cwd: self.cwd.display().to_string(),
                policy: req.policy.name.clone(),
                decision: super::record_decision(self.decision.as_ref(), None),
                approved,
                ..audit::Record::default()
            },
        };
        let p = d.join(format!("{id}.json"));
        let data = serde_json::to_vec(&intent).map_err(|e| BrokerError::Io {
            what: "encoding the run's intent".into(),
            source: std::io::Error::other(e),
        })?;
        // not-ws: the intent records, in the broker's own state directory
        crate::durable::write_atomic(&p, &data).map_err(|e| BrokerError::Io {
            what: format!("journalling the run's intent in {}", p.display()),
            source: std::io::Error::other(e.to_string()),
        })?;
        files.push(p.with_extension("net"));
        files.insert(0, p);
        // The daemon handles its own signals; its client's hangup cancels its runs.
        let interrupts = if req.context.client().is_none() {
            Some(
                sandbox::catch_interrupts()
                    .map_err(io("catching SIGINT, SIGTERM and SIGHUP".into()))?,
            )
        } else {
            None
        };
        self.run = Some(Pending {
            files,
            _interrupts: interrupts,
        });
        Ok(())
    }
}

/// Is the broker that wrote `i` gone?
fn dead(i: &Intent, boot: &str) -> bool {
    if i.boot != boot {
        return true;
    }
    match start_time(&i.pid.to_string()) {
        None => true,
        Some(t) => t != i.start,
    }
}

/// Whether a run in flight (its broker alive) writes the capture layer `id`: such a set may
/// not be applied or discarded yet.
pub(crate) fn layer_in_flight(state_dir: &Path, id: &str) -> bool {
    // not-ws: the intent records, in the broker's own state directory
    let Ok(rd) = std::fs::read_dir(dir(state_dir)) else {
        return false;
    };
    let boot = boot_id();
    rd.filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        // not-ws: the intent records, in the broker's own state directory
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|d| serde_json::from_slice::<Intent>(&d).ok())
        .any(|i| i.layer.as_deref() == Some(id) && !dead(&i, &boot))
}

/// Records the runs of `state_dir` whose broker died (see the module's comment). Returns
/// the seqs of the records written. Quiet and cheap when there is nothing to recover.
pub fn recover(
    state_dir: &Path,
    server: Option<&super::server::Server>,
) -> Result<Vec<u64>, BrokerError> {
    let d = dir(state_dir);
    // not-ws: the intent records, in the broker's own state directory
    let Ok(rd) = std::fs::read_dir(&d) else {
        return Ok(vec![]);
    };
    let mut found: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    if found.is_empty() {
        return Ok(vec![]);
    }
    found.sort();
    let lock_path = d.join("lock");
    // not-ws: the intent records, in the broker's own state directory
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io(format!("opening {}", lock_path.display())))?;
    lock.lock()
        .map_err(io(format!("locking {}", lock_path.display())))?;
    let boot = boot_id();
    let mut seqs = Vec::new();
    for p in found {
        if let Some(intent) = claim(&p, &boot, || {}) {
            seqs.push(record_dead((state_dir, server), &p, intent)?);
        }
    }
    Ok(seqs)
}

/// The intent at `p` if its broker is gone and its run is still unrecorded.
///
/// The order of the checks matters. A broker that lives appends its record, removes its
/// intent and only then exits; so an intent read while its broker ran, whose broker is gone
/// by the time it is checked, may belong to a run that finished normally in between. The
/// intent is therefore looked at again *after* its broker is seen gone: if it is still
/// there, the broker died holding it. (Without this second look, twelve concurrent runs on
/// one state directory recorded one of them twice, once as died.) `between` runs between
/// the read and the liveness check, for the test that plays that race.
fn claim(p: &Path, boot: &str, between: impl FnOnce()) -> Option<Intent> {
    // Another gateway may have recovered it while this one waited for the lock.
    // not-ws: the intent records, in the broker's own state directory
    let data = std::fs::read(p).ok()?;
    let Ok(intent) = serde_json::from_slice::<Intent>(&data) else {
        // Torn by a crash while being written (it is written atomically, so only a
        // foreign file): set aside, never in the way.
        // not-ws: the intent records, in the broker's own state directory
        let _ = std::fs::rename(p, p.with_extension("unreadable"));
        return None;
    };
    between();
    if !dead(&intent, boot) {
        return None;
    }
    // not-ws: the intent records, in the broker's own state directory
    std::fs::symlink_metadata(p).ok()?;
    Some(intent)
}

/// Writes the record of one dead run (capturing its changes first), then drops its intent.
fn record_dead(
    (state_dir, server): (&Path, Option<&super::server::Server>),
    p: &Path,
    intent: Intent,
) -> Result<u64, BrokerError> {
    let index = p.with_extension("index");
    let mut rec = intent.record;
    rec.broker_died = true;
    let mut error = format!(
        "the broker (pid {}) died while the command ran (killed, e.g. by SIGKILL, or crashed): its exit status and output are unknown; recorded from its intent by the next gateway start (pid {})",
        intent.pid,
        std::process::id()
    );
    if let Some((ws, max)) = intent.snapshot {
        let total = intent
            .quota
            .unwrap_or(crate::model::UndoProfile::default().max_state_bytes);
        let quota = crate::journal::quota::Limits {
            total,
            workspace: intent.ws_quota.unwrap_or(total / 2).min(total),
        };
        match capture(state_dir, &ws, &index, max, quota) {
            Ok(r) if !r.changes.is_empty() => {
                rec.journal_group = Some(r.group.clone());
                rec.files_changed = r.changes.len() as u64;
            }
            Ok(_) => {}
            Err(e) => error.push_str(&format!("; its changes were not captured: {e}")),
        }
    }
    if let Some(id) = &intent.layer
        && let Some((layer, mut meta)) = crate::workspace::capture::Layer::open(state_dir, id)
    {
        // What the run wrote is in its layer, whole: held for a person to apply or discard
        // (the run did not end as it should; its changes may be half made).
        meta.state = "held".into();
        meta.why = Some("the broker died while the command ran".into());
        let _ = layer.save(&meta);
        error.push_str(&format!(
            "; its changes are held as change set {id}: `gateway apply {id}` lands them, `gateway discard {id}` drops them"
        ));
    }
    rec.error = Some(error);
    let mut log = super::open_log(state_dir, server)?;
    let seq = log.append(&mut rec)?;
    // The connections its proxy had ended, after it.
    super::egress::recover(&mut log, &p.with_extension("net"), seq);
    // not-ws: the intent records, in the broker's own state directory
    let _ = std::fs::remove_file(p);
    // not-ws: the intent records, in the broker's own state directory
    let _ = std::fs::remove_file(&index);
    Ok(seq)
}

/// What changed in `ws` since the kept pre-run index, journalled as one group; bounded by
/// [`CAPTURE_LIMIT`] (a stuck capture is left behind on its thread).
fn capture(
    state_dir: &Path,
    ws: &Path,
    index: &Path,
    max: u64,
    quota: crate::journal::quota::Limits,
) -> Result<snapshot::SnapshotReport, BrokerError> {
    let pre = snapshot::load_index(index).ok_or_else(|| BrokerError::Io {
        what: format!("the pre-run index {}", index.display()),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "missing or unreadable"),
    })?;
    if !wsfs::is_dir(ws) {
        return Err(BrokerError::Io {
            what: format!("the workspace {}", ws.display()),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "gone"),
        });
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let (sd, w) = (state_dir.to_path_buf(), ws.to_path_buf());
    std::thread::spawn(move || {
        // The dead run's caller is not known here: read with this process's rights (the
        // same broker, or the daemon that served it), beneath the workspace as always.
        let _ = tx.send(snapshot::after(&sd, &w, &pre, max, quota, None));
    });
    rx.recv_timeout(CAPTURE_LIMIT).unwrap_or_else(|_| {
        Err(BrokerError::TimedOut(format!(
            "reading the workspace {} did not finish within {}s",
            ws.display(),
            CAPTURE_LIMIT.as_secs()
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent_of(pid: u32) -> Intent {
        Intent {
            pid,
            start: start_time(&pid.to_string()).expect("start time"),
            boot: boot_id(),
            snapshot: None,
            layer: None,
            quota: None,
            ws_quota: None,
            record: audit::Record::default(),
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gateway-intent-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    /// A process standing for a broker in the middle of its run.
    fn live_broker() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn")
    }

    fn write(p: &Path, i: &Intent) {
        std::fs::write(p, serde_json::to_vec(i).expect("json")).expect("write intent");
    }

    #[test]
    fn a_run_that_finishes_while_recovery_looks_is_not_recorded_as_died() {
        let d = scratch("finished");
        let p = d.join("run.json");
        // A broker in the middle of its run: alive, intent on disk.
        let mut broker = live_broker();
        write(&p, &intent_of(broker.id()));
        // Between recovery's read and its liveness check, the broker records its run,
        // removes its intent and exits: that run is recorded, not died.
        let got = claim(&p, &boot_id(), || {
            std::fs::remove_file(&p).expect("the broker removes its intent");
            broker.kill().expect("kill");
            broker.wait().expect("wait");
        });
        assert!(got.is_none(), "a finished run was claimed as died");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_intent_whose_broker_is_gone_is_claimed_and_a_live_ones_is_not() {
        let d = scratch("claim");
        let p = d.join("run.json");
        let mut broker = live_broker();
        write(&p, &intent_of(broker.id()));
        assert!(
            claim(&p, &boot_id(), || {}).is_none(),
            "a live broker's run"
        );
        broker.kill().expect("kill");
        broker.wait().expect("wait");
        assert!(
            claim(&p, &boot_id(), || {}).is_some(),
            "a dead broker's run"
        );
        // A foreign file in the directory is set aside.
        let q = d.join("torn.json");
        std::fs::write(&q, b"{").expect("write");
        assert!(claim(&q, &boot_id(), || {}).is_none());
        assert!(q.with_extension("unreadable").exists());
        let _ = std::fs::remove_dir_all(&d);
    }
}
