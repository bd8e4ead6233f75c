//! The exec tool on the invocation skeleton ([`crate::broker::invoke`]): its decision (secrets in
//! argv first), its question, and its "perform" step — the sandbox plan, the protected paths
//! held around the run (read-only in its mount namespace; git's places searched in full), the
//! run itself, and what is quarantined and snapshotted after it. Nothing is put back: what
//! existed before the run was read-only to it, so a change there is someone else's and stays.

use crate::broker;
use std::ffi::OsString;
use std::path::PathBuf;

use crate::broker::invoke::{self, Call, Tool};
use crate::broker::*;

/// What an exec did, for its audit record, whatever the outcome.
pub(in crate::broker) struct Trace {
    pub(in crate::broker) argv: Vec<String>,
    pub(in crate::broker) cwd: PathBuf,
    pub(in crate::broker) decision: Option<Decision>,
    out: Option<ArtifactWriter>,
    err: Option<ArtifactWriter>,
    stdout: Option<audit::StreamDigest>,
    stderr: Option<audit::StreamDigest>,
    stdin: Option<audit::StreamDigest>,
    /// The first `[audit] inline_output` (and one more) bytes of stdout and stderr.
    heads: [Vec<u8>; 2],
    /// The last [`crate::broker::TAIL_KEEP`] (to twice that) bytes of stdout and stderr.
    tails: [Vec<u8>; 2],
    /// The run's intent, from just before the command starts until its record is written.
    pub(in crate::broker) run: Option<intent::Pending>,
}

/// Runs an exec request. `ask` is called for an `ask` decision and returns whether a person
/// approved; `sink` receives output as it arrives. Every request — allowed, denied, not
/// approved, failed — is recorded in the audit log; if the log cannot be opened, nothing
/// runs.
pub fn exec(
    req: ExecRequest<'_>,
    ask: &mut dyn FnMut(&Decision) -> bool,
    sink: &mut dyn FnMut(Stream, &[u8]),
) -> Result<ExecResult, BrokerError> {
    if req.argv.is_empty() {
        return Err(crate::broker::UsageError::MissingCommand.into());
    }
    let a = req.policy.audit;
    let cap = if a.store_output { a.artifact_max } else { 0 };
    let mut tool = ExecTool {
        req: &req,
        ask,
        sink,
        trace: Trace {
            argv: guard::redact_argv(&req.argv),
            cwd: req.cwd.clone(),
            decision: None,
            out: Some(ArtifactWriter::new(&req.state_dir, cap)),
            err: Some(ArtifactWriter::new(&req.state_dir, cap)),
            stdout: None,
            stderr: None,
            stdin: None,
            heads: [vec![], vec![]],
            tails: [vec![], vec![]],
            run: None,
        },
        argv: vec![],
        ws: PathBuf::new(),
        report: SecretsReport::default(),
        egress: None,
        connections: Vec::new(),
    };
    let call = Call {
        policy: &req.policy.name,
        state_dir: &req.state_dir,
        session: &req.session,
        caller: &req.caller,
        context: &req.context,
    };
    let done = invoke::invoke(&call, &mut tool)?;
    let t = tool.trace;
    let mut r = done.output;
    [r.stdout_head, r.stderr_head] = t.heads;
    [r.stdout_tail, r.stderr_tail] = t.tails.map(broker::tail_of);
    r.audit = Some(AuditInfo {
        seq: done.seq,
        stdin: t.stdin,
        stdout: t.stdout.unwrap_or_default(),
        stderr: t.stderr.unwrap_or_default(),
    });
    Ok(r)
}

/// One exec call, between the skeleton's steps.
struct ExecTool<'r, 'a> {
    req: &'r ExecRequest<'a>,
    ask: &'r mut dyn FnMut(&Decision) -> bool,
    sink: &'r mut dyn FnMut(Stream, &[u8]),
    trace: Trace,
    /// argv after the secrets check (redacted under `secrets.input = "redact"`).
    argv: Vec<String>,
    /// The workspace, resolved.
    ws: PathBuf,
    /// Secrets found in the inputs so far.
    report: SecretsReport,
    /// The `proxy` network's broker side, from the spec until the run.
    egress: Option<broker::egress::Egress>,
    /// The connections the run made through its proxy (recorded after its own record).
    connections: Vec<crate::net::proxy::Connection>,
}

impl Tool for ExecTool<'_, '_> {
    type Output = ExecResult;

    fn name(&self) -> &str {
        "exec"
    }

    fn decide(&mut self, rec: &mut audit::Record) -> Result<Decision, BrokerError> {
        let req = self.req;
        rec.args = self.trace.argv.clone();
        rec.cwd = self.trace.cwd.display().to_string();
        crate::model::check_env(&req.env)?;
        self.ws = broker::workspace_of(&req.context, &req.workspace)?;
        let cwd = broker::workspace_of(&req.context, &req.cwd)?;
        self.trace.cwd = cwd.clone();
        rec.cwd = cwd.display().to_string();
        // A request may only narrow the policy's timeout: refused before anything is decided
        // or run.
        refusal::Refusal::check_timeout(req.timeout, req.policy.sandbox.limits.timeout)?;
        // Secrets in the command line: refused, redacted or reported before anything else,
        // so that the decision is about what would run.
        let mut argv = req.argv.clone();
        self.report.input = guard::check_argv(&req.policy.secrets, &mut argv)?;
        // Under `secrets.input = "warn"` argv keeps its secrets for the command; the record
        // never does ("warn" records the finding, not the secret).
        self.trace.argv = guard::redact_argv(&argv);
        rec.args = self.trace.argv.clone();
        let mut decision = decide_exec(&req.context, req.policy, &argv, &cwd);
        guard::redact_decision(&mut decision);
        self.trace.decision = Some(decision.clone());
        self.argv = argv;
        Ok(decision)
    }

    fn ask(&mut self, decision: &Decision) -> bool {
        let req = self.req;
        match req.context.client() {
            Some(c) => {
                ask_person(
                    &Asking {
                        client: c,
                        state_dir: &req.state_dir,
                        session: &req.session,
                        caller: &req.caller,
                        policy: req.policy,
                        tool: "exec",
                        // The record's argv (redacted), shell-quoted: what `pending` shows
                        // and what standing approvals are keyed by is what runs.
                        command: crate::shown::argv_shown(&self.trace.argv),
                        decision,
                        required: true,
                        workspace: &self.ws,
                        cwd: &self.trace.cwd,
                        // The environment, and what stdin holds (a standing approval of
                        // `xargs rm -r` must not carry to other input).
                        env_digest: format!(
                            "{}|stdin:{}",
                            broker::planner::env_digest(&req.context, req.policy, &req.env),
                            match (&req.stdin, req.context.stdin_identity()) {
                                (Stdin::Null, _) => "null".to_string(),
                                (_, Some(k)) => k,
                                // Unknown: a key no later call has.
                                (_, None) => format!("unknown-{}", crate::durable::unique_suffix()),
                            }
                        ),
                    },
                    &format!(
                        "this command needs approval:\n  $ {}{}\nRun it?",
                        crate::shown::argv_shown(&self.trace.argv),
                        decision
                            .deciding_rules()
                            .map(|r| format!(
                                "\n  rule {} ({}): {}  [{}]",
                                r.id,
                                r.effect,
                                crate::shown::visible(&r.reason),
                                crate::shown::visible(&r.subject)
                            ))
                            .collect::<String>()
                    ),
                ) == Some(true)
            }
            None => (self.ask)(decision),
        }
    }

    fn not_performed(&mut self, decision: Decision, approved: Option<bool>) -> ExecResult {
        ExecResult {
            decision,
            ran: false,
            approved,
            outcome: None,
            protected_created: vec![],
            protected_warnings: vec![],
            secrets: std::mem::take(&mut self.report),
            audit: None,
            snapshot: None,
            stdout_head: vec![],
            stderr_head: vec![],
            stdout_tail: vec![],
            stderr_tail: vec![],
        }
    }

    fn perform(
        &mut self,
        decision: Decision,
        approved: Option<bool>,
    ) -> Result<ExecResult, BrokerError> {
        let run = self.run(approved)?;
        Ok(ExecResult {
            decision,
            ran: true,
            approved,
            outcome: Some(run.outcome),
            protected_created: run.created,
            protected_warnings: run.warnings,
            secrets: std::mem::take(&mut self.report),
            audit: None,
            snapshot: run.snapshot,
            stdout_head: vec![],
            stderr_head: vec![],
            stdout_tail: vec![],
            stderr_tail: vec![],
        })
    }

    fn record(&mut self, res: &Result<ExecResult, BrokerError>, rec: &mut audit::Record) {
        let stdout = self.trace.out.take().map(ArtifactWriter::finish);
        let stderr = self.trace.err.take().map(ArtifactWriter::finish);
        rec.stdout.clone_from(&stdout);
        rec.stderr.clone_from(&stderr);
        rec.stdin.clone_from(&self.trace.stdin);
        rec.output_undelivered = self
            .req
            .context
            .client()
            .map(|c| {
                c.stdout
                    .undelivered()
                    .saturating_add(c.stderr.undelivered())
            })
            .filter(|&n| n > 0);
        self.trace.stdout = stdout;
        self.trace.stderr = stderr;
        match res {
            Ok(r) => record_result(r, rec),
            Err(BrokerError::Refused(refusal::Refusal::SecretInInput { place, rule })) => {
                rec.secrets = vec![format!("{place}:{rule}")];
            }
            Err(_) => {}
        }
    }

    fn recorded(&mut self, _res: &Result<ExecResult, BrokerError>, rec: &audit::Record) {
        if let Some(run) = self.trace.run.take() {
            run.finish();
        }
        broker::egress::record(
            &self.req.state_dir,
            &self.req.context,
            rec,
            &std::mem::take(&mut self.connections),
        );
        let stored =
            |d: &Option<audit::StreamDigest>| d.as_ref().is_some_and(|d| d.artifact.is_some());
        if stored(&self.trace.stdout) || stored(&self.trace.stderr) {
            prune_artifacts(&self.req.state_dir, &self.req.policy.audit);
        }
        if rec.files_changed > 0 {
            super::fs::prune_backups_hourly(&self.req.state_dir, self.req.policy);
        }
    }
}

/// The record's fields from an exec's result.
fn record_result(r: &ExecResult, rec: &mut audit::Record) {
    if let Some(o) = &r.outcome {
        rec.enforcement = Some(enforcement_summary(&o.enforcement));
        rec.exit_code = o.exit_code;
        rec.signal = o.signal;
        rec.timed_out = o.timed_out;
        rec.cancelled = o.cancelled;
        rec.leftovers_killed = o.leftovers_killed.filter(|&n| n > 0).map(|n| n as u64);
        rec.interrupted = o.interrupted;
        rec.duration_ms = Some((o.duration.as_secs_f64() * 1e6).round() / 1e3);
    }
    if let Some(sn) = &r.snapshot
        && !sn.changes.is_empty()
    {
        rec.journal_group = Some(sn.group.clone());
        rec.files_changed = sn.changes.len() as u64;
    }
    if let Some(sn) = &r.snapshot {
        rec.capture = Some(audit::CaptureRecord {
            mechanism: sn.mechanism.clone(),
            fallback: sn.fallback.clone(),
            held: sn.held.clone(),
            not_applied: sn.not_applied.len() as u64,
            not_undoable: sn.not_backed_up.len() as u64,
            overwrote: sn.overwrote.iter().map(|(_, id)| *id).collect(),
        });
    }
    rec.secrets = r
        .secrets
        .input
        .iter()
        .map(|s| format!("{}:{}", s.place, s.rule))
        .chain(
            r.secrets
                .output
                .iter()
                .map(|s| format!("{}:{}", s.stream, s.rule)),
        )
        .collect();
}

/// What a run did, besides its outcome.
struct Ran {
    outcome: Outcome,
    created: Vec<Quarantined>,
    warnings: Vec<String>,
    snapshot: Option<snapshot::SnapshotReport>,
}

/// The protected paths held around a run, and what was found before it.
struct Held {
    trees: Vec<wsfs::Tree>,
    globals: [PathBuf; 3],
    places: GitPlaces,
    before: Vec<(PathBuf, Found)>,
    /// The protected paths that existed when the run started: bound read-only in its mount
    /// namespace, so what changed there during the run was changed by someone else (the
    /// user's own `git remote add`) and is never moved or reverted.
    read_only: Vec<PathBuf>,
    /// The run was planned with a mount namespace (protected paths read-only).
    mounted: bool,
    /// How many directories of each tree the search for git's places after the run lists:
    /// all of them when the search before it was complete (a run cannot hide a planted
    /// repository behind directories it made); the bound when it was not (`best_effort`).
    max_dirs: usize,
    warnings: Vec<String>,
}

impl ExecTool<'_, '_> {
    /// The "perform" step: plan, hold, run, quarantine, report.
    fn run(&mut self, approved: Option<bool>) -> Result<Ran, BrokerError> {
        let req = self.req;
        // A git command that discards work (`git::DISCARDS`: `reset --hard`, `checkout -- x`,
        // `restore .`, `clean -f`, `stash drop`, ...) runs with a snapshot even where the
        // policy takes none (permissive, a user's own): the uncommitted work it throws away
        // stays recoverable with `gateway undo`. `--no-snapshot` still wins. A reviewed run
        // is captured whatever the policy says of snapshots: its changes are what a person
        // reviews.
        let review = req.review.unwrap_or(req.policy.undo.review);
        let snap = review
            || req.snapshot.unwrap_or_else(|| {
                req.policy.undo.snapshot
                    || discards_git_work(&req.context, &self.argv, &self.trace.cwd)
            });
        // Every run the overlay can capture writes through it, snapshotted or not: what it
        // wrote in git's places is judged from its layer, so the workspace is not searched
        // for them before or after it (`known_places`, `places::LayerCheck`).
        let expect_overlay = broker::capture::overlay_expected(req);
        let search = if expect_overlay {
            GitSearch::Known
        } else {
            GitSearch::Full
        };
        let (mut spec, mut tmp, mut places) = self.spec(search)?;
        // Refused before anything else is read or written when the trees are too large to
        // search (`search_bound`).
        let mut bound = search_bound(&places, spec.confine.best_effort)?;
        let max_file = req.policy.undo.snapshot_max_file;
        let ws = self.ws.clone();
        // The workspace is read with the caller's rights (a daemon's client): never more. One
        // the caller cannot open is refused before anything is read or run there.
        let who = req.context.fs_identity();
        if let Some(w) = &who {
            wsfs::as_identity(Some(w), || wsfs::Tree::open(&ws).map(drop))
                .and_then(|r| r)
                .map_err(|source| {
                    // The caller's problem, not the broker's: a usage error (exit 122).
                    BrokerError::Usage(UsageError::Workspace(WorkspaceProblem::Unreadable {
                        path: ws.clone(),
                        uid: w.uid,
                        why: crate::shown::os_error(&source),
                    }))
                })?;
        }
        let plan = self.capture_plan(snap, expect_overlay, &mut spec, &mut tmp, &mut places)?;
        if expect_overlay && plan.layer().is_none() {
            bound = search_bound(&places, spec.confine.best_effort)?;
        }
        if review && let broker::capture::Plan::Walk(why) = &plan {
            return Err(BrokerError::Usage(UsageError::ReviewUnavailable {
                why: why.clone(),
            }));
        }
        let (_capture, pre) = self.walk_before(&plan, who.as_ref())?;
        let mut held = match self.hold(&spec, places, bound) {
            Ok(h) => h,
            Err(e) => {
                discard_layer(&plan);
                return Err(e);
            }
        };
        if let Err(e) = self.trace.begin_run(
            req,
            &ws,
            approved,
            pre.as_ref(),
            max_file,
            plan.layer().map(|l| l.id.clone()),
        ) {
            discard_layer(&plan);
            return Err(e);
        }
        let outcome = self.relay(&spec);
        let not_started = outcome.as_ref().is_err_and(nothing_ran);
        // What the run wrote lands in the workspace, but for what it wrote in git's places
        // (quarantined from its layer); then the writable trees the overlay did not cover
        // are looked at.
        let after =
            broker::capture::after_run(req, &plan, not_started, (review, snap), &held.places)?;
        held.warnings.extend(after.warnings);
        // A run refused before its command started (a linked writable area, a host that
        // refuses user namespaces, a failed setup) changed nothing: nothing to quarantine,
        // and what a person made meanwhile is theirs.
        let mut created = if not_started {
            vec![]
        } else {
            self.quarantine(&mut held, outcome.as_ref().ok(), plan.layer().is_some())
        };
        created.extend(after.quarantined);
        let snapshot_report = after.report;
        let snapshot_report = match (&pre, &plan) {
            (Some(pre), broker::capture::Plan::Walk(why)) => {
                let mut r = snapshot::after(
                    &req.state_dir,
                    &ws,
                    pre,
                    max_file,
                    undo_limits(&req.policy.undo),
                    who.as_ref(),
                )?;
                r.fallback = Some(why.clone());
                Some(r)
            }
            _ => snapshot_report,
        };
        if let Some(b) = &self.report.blocked
            && b.place == "stdin"
        {
            // A secret on stdin under `deny`: the run was stopped before the command saw it.
            return Err(BrokerError::Refused(refusal::Refusal::SecretInInput {
                place: b.place.clone(),
                rule: b.rule.into(),
            }));
        }
        let outcome = outcome?;
        drop(tmp);
        Ok(shown(Ran {
            outcome,
            created,
            warnings: held.warnings,
            snapshot: snapshot_report,
        }))
    }

    /// How the run's changes are captured: the overlay (what the run wrote, in a layer of its
    /// own), else the walk (`broker::capture`); a run the policy does not snapshot and the
    /// overlay cannot capture is not captured. A run planned from the kept list of git's
    /// places that the overlay does not capture has them searched, and its plan made again.
    fn capture_plan(
        &mut self,
        snap: bool,
        expect_overlay: bool,
        spec: &mut Spec,
        tmp: &mut Option<TempDir>,
        places: &mut GitPlaces,
    ) -> Result<broker::capture::Plan, BrokerError> {
        let command = crate::shown::argv_shown(&self.trace.argv);
        let plan = match broker::capture::choose(self.req, &self.ws, spec, &command) {
            broker::capture::Plan::Walk(_) if !snap => broker::capture::Plan::None,
            p => p,
        };
        if expect_overlay && plan.layer().is_none() {
            let input = self.report.input.len();
            (*spec, *tmp, *places) = self.spec(GitSearch::Full)?;
            self.report.input.truncate(input);
        }
        Ok(plan)
    }

    /// The walk's part before the run (when the walk captures it): the workspace's capture
    /// lock (no other call changes the workspace between its before and its after,
    /// `journal::capture`) and its index.
    fn walk_before(
        &self,
        plan: &broker::capture::Plan,
        who: Option<&wsfs::Identity>,
    ) -> Result<(Option<crate::journal::CaptureLock>, Option<snapshot::Index>), BrokerError> {
        let req = self.req;
        if !matches!(plan, broker::capture::Plan::Walk(_)) {
            return Ok((None, None));
        }
        let ws = &self.ws;
        let cancel = req
            .cancel
            .as_ref()
            .map(std::os::fd::AsFd::as_fd)
            .or_else(|| req.context.cancel());
        let lock = crate::journal::capture_lock(&req.state_dir, ws, cancel).map_err(|e| {
            BrokerError::Io {
                what: "the workspace's capture lock".into(),
                source: std::io::Error::other(e.to_string()),
            }
        })?;
        let pre = snapshot::before(
            &req.state_dir,
            ws,
            req.policy.undo.snapshot_max_file,
            undo_limits(&req.policy.undo),
            who,
        )?;
        Ok((Some(lock), Some(pre)))
    }

    /// The sandbox spec: the private TMPDIR, the plan, the environment (its secrets checked),
    /// the program, the confinement and stdin.
    fn spec(
        &mut self,
        search: GitSearch,
    ) -> Result<(Spec, Option<TempDir>, GitPlaces), BrokerError> {
        let req = self.req;
        let (use_tmpfs, mut tmp) = tmp_plan(req.policy)?;
        let tmpdir = match &tmp {
            Some(t) => t.0.clone(),
            // The fixed mount point is not ours (another user made that name first in the
            // shared temporary directory): a fresh one for this run, removed after it, so
            // that no other user can stop this user's runs.
            None if use_tmpfs => match tmpfs_mountpoint() {
                Ok(p) => p,
                Err(_) => {
                    let t = TempDir::new()?;
                    let p = t.0.clone();
                    tmp = Some(t);
                    p
                }
            },
            None => std::env::temp_dir(),
        };
        let plan = plan_with(
            &req.context,
            req.policy,
            &self.ws,
            &req.state_dir,
            &tmpdir,
            use_tmpfs,
            &req.env,
            search,
        )?;
        let mut env = plan.env;
        self.report
            .input
            .extend(guard::check_env(&req.policy.secrets, &mut env)?);
        let cwd = self.trace.cwd.clone();
        let program = resolve_program(&self.argv[0], &cwd, &env)?;
        let mut confine = plan.confine;
        // A daemon's client of another uid: its command runs as the client, not as the
        // daemon (whose uid owns other files), with its private TMPDIR.
        confine.run_as = req.context.run_as();
        // A daemon client's run gets no more than the client's own resource limits (the
        // daemon's may be higher): read from its process, which waits for this call's reply.
        if let Some(c) = req.context.client() {
            confine.limits.ceiling =
                crate::sandbox::caller_rlimits(c.caller.pid).map_err(|e| BrokerError::Io {
                    what: format!(
                        "reading the resource limits of the client (pid {}), which the run may not exceed",
                        c.caller.pid
                    ),
                    source: e,
                })?;
        }
        if let (Some(u), Some(t)) = (&confine.run_as, &tmp) {
            // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
            std::os::unix::fs::chown(&t.0, Some(u.uid), Some(u.gid)).map_err(|e| {
                BrokerError::Io {
                    what: format!(
                        "giving the private TMPDIR {} to uid {}",
                        t.0.display(),
                        u.uid
                    ),
                    source: e,
                }
            })?;
        }
        if let Some(t) = req.timeout {
            confine.limits.timeout = Some(t);
        }
        let proxy = match broker::egress::prepare(&confine.network, &mut env)? {
            Some((egress, plumbing)) => {
                self.egress = Some(egress);
                Some(plumbing)
            }
            None => None,
        };
        let spec = Spec {
            proxy,
            program,
            argv: self.argv.iter().map(OsString::from).collect(),
            env,
            cwd,
            stdin: stdin_of(&req.context, &req.stdin)?,
            confine,
            // The call's own, else its caller's (a daemon client's: it ends with it).
            cancel: match req
                .cancel
                .as_ref()
                .map(std::os::fd::AsFd::as_fd)
                .or_else(|| req.context.cancel())
            {
                None => None,
                Some(fd) => Some(fd.try_clone_to_owned().map_err(|source| BrokerError::Io {
                    what: "the call's cancellation pipe".into(),
                    source,
                })?),
            },
        };
        Ok((spec, tmp, plan.git))
    }

    /// Holds the protected paths for the run: finds what exists before it (read-only to it in
    /// its mount namespace), and refuses a run that could rewrite what the next one obeys or
    /// plant a repository where the search for them does not reach.
    fn hold(
        &self,
        spec: &Spec,
        places: GitPlaces,
        (max_dirs, warnings): (usize, Vec<String>),
    ) -> Result<Held, BrokerError> {
        let req = self.req;
        let ws = &self.ws;
        let trees = protected_trees(&spec.confine, ws);
        let globals = global_git_configs(&home(&req.context));
        let before = protected_present(&trees, req.policy, &places);
        // A run that is not best-effort has its mount namespace or does not run at all (the
        // sandbox refuses it): only a best-effort one asks this host (a probe, once).
        let mounted = spec.confine.namespaces
            && (!spec.confine.best_effort || sandbox::namespaces_available());
        // Without a mount namespace (`best_effort` on a machine that refuses the run's user
        // namespace, or `namespaces = false`) a policy file inside the writable area would be
        // writable during the run, and the next run would obey what the run wrote: refused,
        // best effort or not, with how to fix it.
        if !mounted
            && let Some(f) = req
                .policy
                .loaded_from
                .iter()
                .find(|f| spec.confine.protected.contains(f))
        {
            return Err(BrokerError::NextRunInReach(format!(
                "the policy file {} lies where this command may write, and without a mount namespace it cannot be kept read-only while the command runs: move it out of the workspace (e.g. to ~/.config/gateway/) and pass that path to --policy",
                f.display()
            )));
        }
        // The next run names the policy, what it extends and the config again: a link or a
        // `..` the command could replace on their way, or another name for them in its
        // reach, would let it choose what that run obeys. Refused, with how to fix it
        // (`next_run`).
        if let Some(why) = next_run::in_reach(req.policy, &config_path(), &spec.confine.write) {
            return Err(BrokerError::NextRunInReach(why));
        }
        // What the sandbox binds read-only: the protected paths that exist as it starts.
        let read_only = spec
            .confine
            .protected
            .iter()
            .filter(|p| {
                tree_of(&trees, p).is_none_or(|(t, rel)| t.kind(rel).is_ok_and(|k| k.is_some()))
            })
            .cloned()
            .collect();
        Ok(Held {
            trees,
            globals,
            places,
            before,
            read_only,
            mounted,
            max_dirs,
            warnings,
        })
    }

    /// Runs the command, its output through the secrets guard to the artifacts and the
    /// caller's sink.
    fn relay(&mut self, spec: &Spec) -> Result<Outcome, SandboxError> {
        let req = self.req;
        // Where the egress proxy keeps its ended connections for a recovery.
        let kept = self
            .trace
            .run
            .as_ref()
            .and_then(|r| r.connections_file())
            .map(std::path::Path::to_path_buf);
        let (out_tap, err_tap) = (&mut self.trace.out, &mut self.trace.err);
        let heads = &mut self.trace.heads;
        let tails = &mut self.trace.tails;
        let keep = req.policy.audit.inline_output as usize + 1;
        let sink = &mut self.sink;
        let mut tap = |s: Stream, b: &[u8], to: guard::To| {
            if to == guard::To::Caller {
                sink(s, b);
                return;
            }
            let (w, head, tail) = match s {
                Stream::Stdout => (out_tap.as_mut(), &mut heads[0], &mut tails[0]),
                Stream::Stderr => (err_tap.as_mut(), &mut heads[1], &mut tails[1]),
            };
            if let Some(w) = w {
                w.write(b);
            }
            let room = keep.saturating_sub(head.len());
            head.extend_from_slice(&b[..room.min(b.len())]);
            // The tail: kept between TAIL_KEEP and twice that, trimmed in amortised steps.
            tail.extend_from_slice(&b[b.len().saturating_sub(2 * broker::TAIL_KEEP)..]);
            if tail.len() > 2 * broker::TAIL_KEEP {
                tail.drain(..tail.len() - broker::TAIL_KEEP);
            }
            if to == guard::To::Both {
                sink(s, b);
            }
        };
        let mut g = guard::Guard::new(req.policy.secrets, &mut tap);
        if matches!(spec.stdin, Stdin::Filtered) {
            let a = req.policy.audit;
            g.stdin_tap = Some(ArtifactWriter::new(
                &req.state_dir,
                if a.store_output { a.artifact_max } else { 0 },
            ));
        }
        // A daemon's client that does not take the output is waited for until the run's
        // deadline at most, never past it (`client::Outlet`).
        if let Some(c) = req.context.client() {
            let deadline = spec
                .confine
                .limits
                .timeout
                .map(|t| std::time::Instant::now() + t);
            c.stdout.set_deadline(deadline);
            c.stderr.set_deadline(deadline);
        }
        let outcome = match self.egress.take() {
            Some(e) => {
                let (outcome, connections) = broker::egress::around(
                    e,
                    (req, &self.ws, &self.trace.cwd, kept.as_deref()),
                    || sandbox::run(spec, &mut g),
                );
                self.connections = connections;
                outcome
            }
            None => sandbox::run(spec, &mut g),
        };
        g.finish();
        self.trace.stdin = g.stdin_tap.take().map(ArtifactWriter::finish);
        let input_before = std::mem::take(&mut self.report.input);
        self.report = std::mem::take(&mut g.report);
        self.report.input.splice(0..0, input_before);
        outcome
    }

    /// After the run, whatever its outcome: the protected paths it created — including git
    /// places it planted, judged against what was found before (`GitPlaces::after_run`) —
    /// quarantined. What existed before is never moved or reverted (`Held::read_only`); without
    /// a mount namespace (best effort) it was writable, and the warnings say so.
    fn quarantine(
        &self,
        held: &mut Held,
        outcome: Option<&Outcome>,
        overlaid: bool,
    ) -> Vec<Quarantined> {
        let req = self.req;
        let cx = &req.context;
        // The workspace the overlay covered is judged from the run's layer: no search of it.
        if overlaid {
            held.trees.retain(|t| t.path() != self.ws);
            held.before
                .retain(|(p, _)| tree_of(&held.trees, p).is_some());
            let keep = |p: &PathBuf| tree_of(&held.trees, p).is_some();
            held.places.dirs.retain(keep);
            held.places.entries.retain(keep);
            held.places.dot_git_dirs.retain(keep);
            held.places.bare.retain(keep);
            held.places.refs.retain(keep);
        }
        let places_now = git_places(
            &held.trees,
            &held.globals,
            &home(cx),
            &self.ws,
            cx.fs_identity().as_ref(),
            held.max_dirs,
        );
        held.warnings.extend(
            places_now
                .incomplete
                .iter()
                .filter(|t| !held.places.incomplete.contains(t))
                .map(|t| nested_warning(t)),
        );
        // The sandbox says whether the mounts were made; a run that did not start, what was
        // planned.
        let unmounted = outcome.map_or(!held.mounted, |o| !o.enforcement.mount_namespace);
        if unmounted && !held.read_only.is_empty() {
            held.warnings.push(writable_warning(
                &held.read_only,
                self.req.policy.sandbox.best_effort,
            ));
        }
        let places = std::mem::take(&mut held.places);
        let unsearched = places.incomplete.clone();
        let (places_after, new_heads) = places.after_run(places_now);
        let mut after = protected_present(&held.trees, req.policy, &places_after);
        for h in new_heads {
            if let Some((t, rel)) = tree_of(&held.trees, &h)
                && let Ok(Some(k)) = t.kind(rel)
            {
                after.push((h, Found::from(k)));
            }
        }
        // A tree too large to search before the run (best effort; the warnings say so): what
        // is found in it after cannot be told from what was there, and moving a repository's
        // config that merely came into view would revert the user's. Left alone.
        after.retain(|(p, _)| !unsearched.iter().any(|t| p.starts_with(t)));
        quarantine_new(
            &held.trees,
            &held.before,
            after,
            &held.read_only,
            &req.state_dir,
        )
    }
}

/// How many directories of each tree the search for git's places after the run lists, and
/// the warnings for the search before it. Nested repositories are found by listing the
/// writable trees, bounded ([`NESTED_MAX_DIRS`]). A tree with more directories is not
/// searched in full: a repository deeper in it would have a writable config and hooks, and
/// one the run planted could not be told from the user's after it. Refused, naming the tree
/// and what to do (fail closed), unless the policy says `best_effort`; then the search after
/// the run has the same bound, and the warnings say what was not protected.
fn search_bound(
    places: &GitPlaces,
    best_effort: bool,
) -> Result<(usize, Vec<String>), BrokerError> {
    if places.incomplete.is_empty() {
        Ok((usize::MAX, vec![]))
    } else if best_effort {
        Ok((
            NESTED_MAX_DIRS,
            places
                .incomplete
                .iter()
                .map(|t| nested_warning(t))
                .collect(),
        ))
    } else {
        Err(BrokerError::Sandbox(SandboxError::Unavailable(
            nested_refusal(&places.incomplete),
        )))
    }
}

/// The warning for a run whose protected paths were not read-only (no mount namespace: the
/// policy's `best_effort`): which existed, and that nothing was put back.
fn writable_warning(paths: &[PathBuf], best_effort: bool) -> String {
    const SHOWN: usize = 5;
    let mut list: Vec<String> = paths
        .iter()
        .take(SHOWN)
        .map(|p| p.display().to_string())
        .collect();
    if paths.len() > SHOWN {
        list.push(format!("and {} more", paths.len() - SHOWN));
    }
    format!(
        "protected paths were writable during this run (no mount namespace{}): whatever the command changed in {} stays as it left it; check them before git, your shell or an editor reads them",
        if best_effort {
            "; `best_effort = true`"
        } else {
            ""
        },
        list.join(", ")
    )
}

/// Did the sandbox refuse the run before its command started?
fn nothing_ran(e: &SandboxError) -> bool {
    matches!(
        e,
        SandboxError::WritableLink { .. }
            | SandboxError::Unsearchable { .. }
            | SandboxError::Pin { .. }
            | SandboxError::UserNamespaces { .. }
            | SandboxError::Setup { .. }
            | SandboxError::Exec { .. }
            | SandboxError::Required { .. }
            | SandboxError::LandlockUnsupported
            | SandboxError::Landlock(_)
            | SandboxError::Seccomp(_)
            | SandboxError::Cgroup(_)
            | SandboxError::Nul { .. }
    )
}

/// The child's stdin. "Inherit" is the caller's stdin: a daemon client's is the fd it
/// passed; it is scanned on its way in unless it is a terminal (a person typing).
fn stdin_of(cx: &client::Context, s: &Stdin) -> Result<Stdin, BrokerError> {
    let own = |e: std::io::Error| BrokerError::Io {
        what: "passing the caller's stdin".into(),
        source: e,
    };
    Ok(match s {
        Stdin::Inherit if cx.with_stdin(sandbox::fd_is_null) => Stdin::Null,
        Stdin::Inherit if cx.client().is_some() => {
            let fd = cx.with_stdin(|f| f.try_clone_to_owned()).map_err(own)?;
            if cx.stdin_is_tty() {
                Stdin::Fd(fd)
            } else {
                Stdin::FilteredFd(fd)
            }
        }
        Stdin::Inherit if !sandbox::stdin_is_tty() => Stdin::Filtered,
        Stdin::Inherit => Stdin::Inherit,
        Stdin::Null => Stdin::Null,
        Stdin::Filtered => Stdin::Filtered,
        Stdin::Channel(b) => Stdin::Channel(b.clone()),
        Stdin::Fd(f) => Stdin::Fd(f.try_clone().map_err(own)?),
        Stdin::FilteredFd(f) => Stdin::FilteredFd(f.try_clone().map_err(own)?),
    })
}

/// A run that did not get as far as its layer's use: the layer goes.
fn discard_layer(plan: &broker::capture::Plan) {
    if let Some(l) = plan.layer() {
        let _ = l.remove();
    }
}

/// Paths as shown (stderr, `--json`, MCP, the record): a secret in a name the run chose is
/// redacted like any output.
fn shown(mut r: Ran) -> Ran {
    let shown = super::fs::redact_path;
    for q in &mut r.created {
        q.path = shown(std::mem::take(&mut q.path));
        q.to = q.to.take().map(shown);
    }
    for w in &mut r.warnings {
        *w = redact_text(w);
    }
    if let Some(sn) = &mut r.snapshot {
        for c in &mut sn.changes {
            c.0 = shown(std::mem::take(&mut c.0));
        }
        for v in [&mut sn.skipped, &mut sn.unread_dirs] {
            for p in v.iter_mut() {
                *p = shown(std::mem::take(p));
            }
        }
        // (A name that is not UTF-8 is shown with U+FFFD in these lists, which are plain
        // JSON strings; `changes` keeps its bytes.)
        let lossy = |p: PathBuf| PathBuf::from(shown(p).to_string_lossy().into_owned());
        for (p, why) in &mut sn.not_applied {
            *p = lossy(std::mem::take(p));
            *why = redact_text(why);
        }
        for (p, why) in &mut sn.not_backed_up {
            *p = shown(std::mem::take(p));
            *why = redact_text(why);
        }
        for (p, _) in &mut sn.pending {
            *p = lossy(std::mem::take(p));
        }
        for (p, _) in &mut sn.overwrote {
            *p = lossy(std::mem::take(p));
        }
    }
    r
}
