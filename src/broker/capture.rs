//! A run's change capture, on the broker's side: which mechanism captures it (the overlay of
//! `workspace::capture`, or the walk of `workspace::snapshot` where the overlay cannot be
//! mounted, and why), and what becomes of the captured layer after the run (applied with a
//! journal entry per path, held for review, or held because applying failed).

use super::*;
use crate::workspace::apply::{self, Applied};
use crate::workspace::capture::{self, Layer, Meta};

/// Room kept in the state directory for the records of a run that fills its disk: a run's
/// layer lives there, so a run that writes until the disk is full would leave no room for
/// its own record. Released (and the append tried again) when an append fails; made again
/// by the next captured run that finds room.
const RESERVE: u64 = 512 << 10;

fn reserve_path(state_dir: &Path) -> PathBuf {
    state_dir.join("reserve")
}

/// Makes the reserve if it is missing (best effort: a disk without room has none).
pub(super) fn keep_reserve(state_dir: &Path) {
    let p = reserve_path(state_dir);
    // not-ws: the state directory's reserve
    if std::fs::symlink_metadata(&p).is_ok() {
        return;
    }
    use std::os::unix::fs::OpenOptionsExt;
    // not-ws: the state directory's reserve
    let Ok(f) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&p)
    else {
        return;
    };
    if rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, RESERVE).is_err() {
        drop(f);
        // not-ws: the state directory's reserve
        let _ = std::fs::remove_file(&p);
    }
}

/// Gives the reserve back to the disk: whether there was one.
pub(crate) fn release_reserve(state_dir: &Path) -> bool {
    // not-ws: the state directory's reserve
    std::fs::remove_file(reserve_path(state_dir)).is_ok()
}

/// How a run's changes are captured.
pub(super) enum Plan {
    /// Not captured (`[undo] snapshot = false`, `--no-snapshot`).
    None,
    /// The overlay: the run writes this layer, applied after it.
    Overlay(Layer),
    /// The walk, and why the overlay does not capture this run.
    Walk(String),
}

impl Plan {
    /// The layer's id, if any.
    pub(super) fn layer(&self) -> Option<&Layer> {
        match self {
            Plan::Overlay(l) => Some(l),
            _ => None,
        }
    }
}

/// Whether a run of `req` will be captured by the overlay, asked before its plan is made (git's
/// places in the workspace are then taken from the kept list, `known_places`, not searched):
/// the conditions of [`choose`] the policy decides, and the probe's answer. A run where it
/// then does not (`capture::prepare` refuses the workspace) has its places searched again.
pub(super) fn overlay_expected(req: &ExecRequest<'_>) -> bool {
    let sb = &req.policy.sandbox;
    req.policy.undo.capture != crate::model::CaptureMode::Walk
        && sb.namespaces
        && (!sb.best_effort || sandbox::namespaces_available())
        && !sb.write.iter().any(|w| w == "/")
        && overlay_refused(&req.state_dir).is_none()
}

/// Chooses the mechanism for a captured run of `spec` in `ws`, and sets the spec's overlay.
pub(super) fn choose(req: &ExecRequest<'_>, ws: &Path, spec: &mut Spec, command: &str) -> Plan {
    let why_not = (|| {
        if req.policy.undo.capture == crate::model::CaptureMode::Walk {
            return Some("the policy says `[undo] capture = \"walk\"`".to_string());
        }
        if !spec.confine.namespaces
            || (spec.confine.best_effort && !sandbox::namespaces_available())
        {
            return Some("the run has no mount namespace".into());
        }
        let w = &spec.confine.write;
        if w.iter().any(|p| p.as_path() == Path::new("/")) {
            return Some("the policy lets the run write `/`".into());
        }
        if !w.iter().any(|p| ws.starts_with(p)) {
            return Some("the workspace is not writable to the run".into());
        }
        None
    })();
    if let Some(why) = why_not {
        return Plan::Walk(why);
    }
    let meta = Meta {
        id: String::new(),
        workspace: ws.to_path_buf(),
        started: crate::journal::now(),
        command: command.to_string(),
        uid: req.context.fs_identity().map(|w| w.uid),
        state: String::new(),
        why: None,
        seq: None,
        journal_last: match crate::journal::index::last_given(&req.state_dir) {
            crate::journal::index::LastId::Given(n) => Some(n),
            _ => None,
        },
    };
    if let Some(why) = overlay_refused(&req.state_dir) {
        return Plan::Walk(why);
    }
    keep_reserve(&req.state_dir);
    let run_as = req.context.run_as().map(|r| r.uid);
    match capture::prepare(&req.state_dir, ws, meta, run_as) {
        Ok(layer) => {
            spec.confine.capture = Some(sandbox::CaptureLayer {
                workspace: ws.to_path_buf(),
                dir: layer.dir.clone(),
            });
            Plan::Overlay(layer)
        }
        Err(why) => Plan::Walk(why),
    }
}

/// Why this machine cannot mount the capture overlay (an older kernel, a state directory on
/// a file system overlay cannot write its upper layer to), or `None` when it can: found once
/// per boot and state directory by a probe — `true` run with the overlay over a scratch
/// directory, the real mechanism end to end — and kept in `capture/probe`.
fn overlay_refused(state_dir: &Path) -> Option<String> {
    let boot = super::intent::boot_id();
    let kept = state_dir.join("overlay-probe");
    // not-ws: the probe's answer, in the state directory
    if let Ok(t) = std::fs::read_to_string(&kept)
        && let Some((b, answer)) = t.split_once('\n')
        && b == boot
    {
        return (!answer.is_empty()).then(|| answer.to_string());
    }
    let answer = probe(state_dir).err();
    let text = format!("{boot}\n{}", answer.as_deref().unwrap_or(""));
    // not-ws: the probe's answer, in the state directory
    let _ = crate::durable::write_atomic(&kept, text.as_bytes());
    answer
}

/// Runs `true` with the capture overlay over a scratch workspace in the state directory.
fn probe(state_dir: &Path) -> Result<(), String> {
    let scratch = capture::root(state_dir).join(format!("probe-{}", std::process::id()));
    let lower = scratch.join("lower");
    let made = (|| {
        use std::os::unix::fs::DirBuilderExt;
        // not-ws: a scratch directory of the probe, in the state directory
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&lower)?;
        for d in ["upper", "work"] {
            // not-ws: a scratch directory of the probe, in the state directory
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(scratch.join(d))?;
        }
        Ok::<_, std::io::Error>(())
    })();
    let result = made
        .map_err(|e| format!("the probe's scratch directory: {e}"))
        .and_then(|()| probe_run(&lower, &scratch));
    let _ = capture::remove_tree(&scratch);
    result
}

fn probe_run(lower: &Path, dir: &Path) -> Result<(), String> {
    let program = ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .map(PathBuf::from)
        // not-ws: a system program, to probe the overlay with
        .find(|p| std::fs::metadata(p).is_ok())
        .ok_or("no `true` program to probe the overlay with")?;
    let spec = Spec {
        program: program.clone(),
        argv: vec![program.into_os_string()],
        env: vec![],
        cwd: lower.to_path_buf(),
        stdin: Stdin::Null,
        confine: sandbox::Confinement {
            read: vec![PathBuf::from("/")],
            write: vec![lower.to_path_buf()],
            exec: vec![PathBuf::from("/")],
            deny: vec![],
            protected: vec![],
            hidden: vec![],
            network: sandbox::Network::None,
            limits: sandbox::Limits {
                timeout: Some(Duration::from_secs(10)),
                ..sandbox::Limits::default()
            },
            namespaces: true,
            best_effort: false,
            memory_cgroup: false,
            private_tmp: None,
            danger_openat2: false,
            run_as: None,
            capture: Some(sandbox::CaptureLayer {
                workspace: lower.to_path_buf(),
                dir: dir.to_path_buf(),
            }),
        },
        cancel: None,
        proxy: None,
    };
    let mut sink = |_: Stream, _: &[u8]| {};
    match sandbox::run(&spec, &mut sink) {
        Ok(o) if o.exit_code == Some(0) => Ok(()),
        Ok(o) => Err(format!(
            "the overlay probe ended with exit code {:?}, signal {:?}",
            o.exit_code, o.signal
        )),
        Err(e) => Err(format!(
            "this machine cannot mount the capture overlay ({e})"
        )),
    }
}

/// What became of a run's layer after it.
#[derive(Default)]
pub(super) struct AfterRun {
    /// The snapshot report (None: a run the policy does not snapshot, applied whole).
    pub report: Option<snapshot::SnapshotReport>,
    /// What the run wrote in git's or the policy's protected places: kept out of the
    /// workspace, moved to `<state>/quarantine/` (`places::LayerCheck`).
    pub quarantined: Vec<Quarantined>,
    /// Deletions of protected paths, not applied.
    pub warnings: Vec<String>,
}

/// Applies a run's layer (or holds it: `review`), and reports it as the snapshot report the
/// front ends show; `record`: journalled with backups (`[undo] snapshot`), else applied
/// plainly. What the run wrote in git's places is quarantined, judged from the layer with
/// `places` (what was known before the run).
pub(super) fn finish(
    req: &ExecRequest<'_>,
    layer: &Layer,
    review: Option<String>,
    record: bool,
    places: &GitPlaces,
) -> Result<AfterRun, BrokerError> {
    let mut out = AfterRun::default();
    let mut report = snapshot::SnapshotReport {
        group: format!("exec-{}", snapshot::unique_id(&layer.id)),
        mechanism: capture::OVERLAY.into(),
        ..snapshot::SnapshotReport::default()
    };
    if let Some(why) = review {
        hold(layer, "held", &why);
        report.held = Some(layer.id.clone());
        report.pending = pending(req, layer);
        out.report = Some(report);
        return Ok(out);
    }
    let who = req.context.fs_identity();
    // One layer judged and applied at a time: judged against the workspace as another run's
    // apply left it (two runs could each make half a repository, neither seeing the other's).
    let serial =
        crate::journal::lock_named(&req.state_dir, "apply.lock").map_err(|e| BrokerError::Io {
            what: "the state directory's apply lock".into(),
            source: std::io::Error::other(e.to_string()),
        });
    let applied = serial.and_then(|lock| {
        let r = layer_check(req, layer, places, who.as_ref());
        r.map(|c| (c, lock))
    });
    let applied = applied.and_then(|((check, unknown), _lock)| {
        let q = |rel: &Path, up: &capture::Up, _: bool| check.check(rel, up);
        apply_layer(req, layer, &report.group, who.as_ref(), Some(&q), record).map(|a| (a, unknown))
    });
    match applied {
        Ok((mut applied, unknown)) => {
            let mut new_git = std::mem::take(&mut applied.new_git_dirs);
            new_git.extend(
                unknown
                    .iter()
                    .filter_map(|p| p.strip_prefix(&layer.workspace).ok())
                    .map(Path::to_path_buf),
            );
            super::known_places::after_apply(
                &req.state_dir,
                &layer.workspace,
                &new_git,
                applied.journalled,
            );
            quarantine_from_layer(req, layer, &mut applied, &mut out);
            out.warnings.extend(
                std::mem::take(&mut applied.kept)
                    .into_iter()
                    .map(|(p, why)| format!("{}: {why}", p.display())),
            );
            fill(&mut report, applied);
        }
        // Failed as a whole (the journal or the backup store cannot be written): nothing was
        // changed, what the run wrote stays in its layer, held for `gateway apply`.
        Err(e) => {
            let why = format!("its changes could not be applied: {e}");
            hold(layer, "failed", &why);
            report.held = Some(layer.id.clone());
            report.not_applied = vec![(layer.workspace.clone(), why)];
            report.pending = pending(req, layer);
            out.report = Some(report);
            return Ok(out);
        }
    }
    if report.not_applied.is_empty() {
        let _ = layer.remove();
    } else {
        hold(
            layer,
            "failed",
            &format!("{} path(s) could not be applied", report.not_applied.len()),
        );
        report.held = Some(layer.id.clone());
    }
    if record || report.held.is_some() {
        out.report = Some(report);
    }
    Ok(out)
}

/// The check of what the run wrote in git's places, for `layer` (`places::LayerCheck`).
fn layer_check(
    req: &ExecRequest<'_>,
    layer: &Layer,
    places: &GitPlaces,
    who: Option<&wsfs::Identity>,
) -> Result<(LayerCheck, Vec<PathBuf>), BrokerError> {
    check_of(
        &req.context,
        &req.policy.sandbox.protected,
        layer,
        places,
        who,
    )
}

/// [`layer_check`] for the caller `cx` under the protected patterns `protected`.
fn check_of(
    cx: &client::Context,
    protected: &[String],
    layer: &Layer,
    places: &GitPlaces,
    who: Option<&wsfs::Identity>,
) -> Result<(LayerCheck, Vec<PathBuf>), BrokerError> {
    let ws = &layer.workspace;
    let tree = wsfs::as_identity(who, || wsfs::Tree::open(ws))
        .and_then(|r| r)
        .map_err(|e| BrokerError::Io {
            what: format!("opening the workspace {}", ws.display()),
            source: e,
        })?;
    let upper = layer.upper();
    let entries = capture::entries(&upper).map_err(|e| BrokerError::Io {
        what: format!("listing the capture layer {}", upper.display()),
        source: e,
    })?;
    let home = home(cx);
    let globals = global_git_configs(&home);
    Ok(LayerCheck::new(
        &tree,
        &entries,
        protected,
        places.refs.clone(),
        &places.entries,
        (&globals, &home, who),
    ))
}

/// The check for applying a held change set (`gateway apply`): as a run's, with git's places
/// in its workspace as kept (`known_places`; searched when the list is not current).
pub(crate) fn held_set_check(
    state_dir: &Path,
    protected: &[String],
    cx: &client::Context,
    layer: &Layer,
) -> Result<LayerCheck, BrokerError> {
    let who = cx.fs_identity();
    let ws = &layer.workspace;
    let tree = wsfs::as_identity(who.as_ref(), || wsfs::Tree::open(ws))
        .and_then(|r| r)
        .map_err(|e| BrokerError::Io {
            what: format!("opening the workspace {}", ws.display()),
            source: e,
        })?;
    let home = home(cx);
    let (found, _) = super::known_places::found(state_dir, &tree, NESTED_MAX_DIRS);
    let places = git_places_of(
        std::slice::from_ref(&tree),
        vec![found],
        &global_git_configs(&home),
        &home,
        ws,
        who.as_ref(),
    );
    check_of(cx, protected, layer, &places, who.as_ref()).map(|(c, _)| c)
}

/// Moves what the apply kept out of the workspace from the layer to `<state>/quarantine/`
/// (a deletion it kept is a warning).
fn quarantine_from_layer(
    req: &ExecRequest<'_>,
    layer: &Layer,
    applied: &mut Applied,
    out: &mut AfterRun,
) {
    let q = std::mem::take(&mut applied.quarantined);
    if q.is_empty() {
        return;
    }
    let dir = req.state_dir.join("quarantine");
    // not-ws: the broker's own state directory
    let made = std::fs::create_dir_all(&dir);
    let upper = wsfs::Tree::open(&layer.upper());
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    for (i, (rel, why, deleted)) in q.into_iter().enumerate() {
        let path = layer.workspace.join(&rel);
        if deleted {
            out.warnings.push(format!("{}: {why}", path.display()));
            continue;
        }
        let name = rel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dst = format!("{stamp}-{i}-{name}");
        let to = match (&made, &upper) {
            (Ok(()), Ok(t)) => t
                .move_out(&rel, &dir, OsStr::new(&dst))
                .ok()
                .map(|()| dir.join(&dst)),
            _ => None,
        };
        out.quarantined.push(Quarantined { path, to });
    }
}

/// After the run: its layer applied or held (`review`); removed when its command never
/// started (nothing was written).
pub(super) fn after_run(
    req: &ExecRequest<'_>,
    plan: &Plan,
    not_started: bool,
    (review, record): (bool, bool),
    places: &GitPlaces,
) -> Result<AfterRun, BrokerError> {
    let Plan::Overlay(layer) = plan else {
        return Ok(AfterRun::default());
    };
    if not_started {
        let _ = layer.remove();
        return Ok(AfterRun::default());
    }
    let why = review.then(|| {
        if req.review == Some(true) {
            "the run asked for review (--review)".to_string()
        } else {
            "the policy holds every run's changes for review ([undo] review)".to_string()
        }
    });
    finish(req, layer, why, record, places)
}

/// Applies `layer` as the caller `who`; `quarantine`: what the run's own apply keeps out of
/// the workspace; `record`: journalled.
pub(super) fn apply_layer(
    req: &ExecRequest<'_>,
    layer: &Layer,
    group: &str,
    who: Option<&wsfs::Identity>,
    quarantine: Option<apply::PathRule<'_>>,
    record: bool,
) -> Result<Applied, BrokerError> {
    apply::apply(&apply::Apply {
        state_dir: &req.state_dir,
        layer,
        group,
        tool: "exec",
        max_file: req.policy.undo.snapshot_max_file,
        quota: super::undo_limits(&req.policy.undo),
        who,
        hold: &|rel, _, existed| {
            crate::workspace::apply::git_place(rel, &req.policy.sandbox.protected, false, existed)
        },
        quarantine,
        record,
        since: Layer::open(&req.state_dir, &layer.id).map_or_else(
            || (crate::journal::now(), None),
            |(_, m)| (m.started, m.journal_last),
        ),
    })
}

/// The report's fields from what was applied.
pub(super) fn fill(report: &mut snapshot::SnapshotReport, a: Applied) {
    report.changes = a.changes;
    report.not_backed_up = a.not_undoable;
    report.not_applied = a.not_applied;
    report.expired = a.expired;
    report.overwrote = a.overwrote;
}

/// Marks `layer` held, with why.
pub(super) fn hold(layer: &Layer, state: &str, why: &str) {
    if let Some((_, mut meta)) = Layer::open(
        layer
            .dir
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/")),
        &layer.id,
    ) {
        meta.state = state.into();
        meta.why = Some(why.into());
        let _ = layer.save(&meta);
    }
}

/// What a held layer would change, for its review.
pub(super) fn pending(req: &ExecRequest<'_>, layer: &Layer) -> Vec<(PathBuf, &'static str)> {
    super::tools::changes::pending(layer, req.context.fs_identity().as_ref())
}
