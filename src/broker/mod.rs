//! One invocation end to end: decide, build the sandbox spec, (ask), run, report.
//! The only module that imports the others.
//!
//! Every tool call runs through one skeleton (`invoke`); exec's own steps are in `exec`.

pub mod approvals;
pub mod client;
pub mod credentials;
mod exec;
pub mod fs;
mod guard;
pub mod intent;
mod invoke;
pub mod keep;
pub mod log;
mod next_run;
mod paths;
pub mod pin;
pub mod refusal;
pub mod report;
pub mod scan;
pub mod session;
pub mod snapshot;
pub mod worker;
pub mod wsfs;
#[cfg(test)]
mod wsfs_check;

pub use exec::exec;
pub use guard::{InputSecret, OutputSecret, SecretsReport, redact_text};

use crate::audit::{self, artifacts::ArtifactWriter};
use crate::model::{Decision, Tool, ToolCall};
use crate::policy::shell::ShellEnv;
use crate::policy::{self, Policy};
use crate::sandbox::{self, EnforcementStatus, Outcome, SandboxError, Spec, Stdin, Stream};
use serde::Serialize;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Paths no child may read under any policy: credentials whose loss cannot be undone. The
/// credential catalogue (`policies/credentials.toml`, [`credentials`]) and the state
/// directory are added at run time.
pub const ALWAYS_DENY: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "/etc/shadow",
    "/etc/gshadow",
];

/// A question for a person, from a daemon client's call.
pub(crate) struct Asking<'a> {
    pub state_dir: &'a Path,
    pub session: &'a str,
    pub caller: &'a audit::Caller,
    pub policy: &'a Policy,
    pub tool: &'a str,
    /// The call, redacted.
    pub command: String,
    pub decision: &'a Decision,
    /// An `ask` decision (queued for `gateway approve`) rather than a confirmation of what
    /// is allowed (put only to a terminal).
    pub required: bool,
}

/// Asks a person on behalf of the daemon client this thread serves: a pending request that
/// `gateway approve|deny ID` or the client's terminal answers, denied after the policy's
/// `[approval] timeout`. A confirmation (not `required`) without a terminal is `None`: the
/// policy's allow stands.
pub(crate) fn ask_person(a: &Asking<'_>, question: &str) -> Option<bool> {
    let c = client::current()?;
    let tty = client::stdin_is_tty();
    if !a.required && !tty {
        return None;
    }
    let unanalysable = !a.decision.unanalysable.is_empty();
    let destructive = matches!(a.tool, "fs.rm" | "fs.rm.permanent" | "purge");
    let o = approvals::ask(
        a.state_dir,
        approvals::Request {
            session: a.session,
            caller: a.caller,
            tool: a.tool,
            command: a.command.clone(),
            rules: a
                .decision
                .deciding_rules()
                .map(|r| format!("{}: {}", r.id, r.reason))
                .collect(),
            risk: if unanalysable || destructive {
                "high"
            } else {
                "medium"
            },
            question: question.into(),
        },
        Duration::from_secs(a.policy.approval.timeout),
        &|id, q| tty && (c.prompt)(id, q),
    );
    if !o.approved {
        client::err(|w| writeln!(w, "gateway: not approved: {}", o.by));
    }
    Some(o.approved)
}

/// The daemon's audit writer (checkpoints in batches), shared by all its connections.
static SHARED_LOG: std::sync::OnceLock<(PathBuf, std::sync::Mutex<audit::AuditLog>)> =
    std::sync::OnceLock::new();

/// Makes `log` (the audit log of `state_dir`) the writer of every call of this process for
/// that state directory (the daemon). Returns false if one was set already.
pub fn share_log(state_dir: &Path, log: audit::AuditLog) -> bool {
    SHARED_LOG
        .set((state_dir.to_path_buf(), std::sync::Mutex::new(log)))
        .is_ok()
}

/// Runs `f` on the shared audit writer, if this process has one (the daemon).
pub fn with_shared_log<R>(f: impl FnOnce(&mut audit::AuditLog) -> R) -> Option<R> {
    let (_, m) = SHARED_LOG.get()?;
    let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
    Some(f(&mut g))
}

/// Where a call's records go: its own writer (one-shot: every record checkpointed and
/// synced) or the daemon's shared one.
pub(crate) enum LogWriter {
    Own(Box<audit::AuditLog>),
    Shared(&'static std::sync::Mutex<audit::AuditLog>),
}

impl LogWriter {
    /// Appends a record; returns its seq.
    pub(crate) fn append(&mut self, rec: &mut audit::Record) -> Result<u64, audit::AuditError> {
        // A session's first record names the policy it pinned.
        pin::stamp(rec);
        let seq = match self {
            LogWriter::Own(l) => l.append(rec),
            LogWriter::Shared(m) => m.lock().unwrap_or_else(|p| p.into_inner()).append(rec),
        }?;
        pin::stamped(rec);
        Ok(seq)
    }
}

/// Opens the audit log of `state_dir` for a call (opening is also the check that it can be
/// written: nothing runs unrecorded).
pub(crate) fn open_log(state_dir: &Path) -> Result<LogWriter, audit::AuditError> {
    if let Some((dir, m)) = SHARED_LOG.get()
        && dir == state_dir
    {
        return Ok(LogWriter::Shared(m));
    }
    Ok(LogWriter::Own(Box::new(audit::AuditLog::open(
        state_dir,
        audit::Checkpoints::EveryRecord,
    )?)))
}

/// Appends one record to the audit log of `state_dir`.
pub fn append_record(state_dir: &Path, rec: &mut audit::Record) -> Result<u64, BrokerError> {
    ensure_state_dir(state_dir)?;
    Ok(open_log(state_dir)?.append(rec)?)
}

/// Where gateway's config file is: `$GATEWAY_CONFIG`, else
/// `$XDG_CONFIG_HOME/gateway/config.toml`, else `~/.config/gateway/config.toml`.
#[allow(
    clippy::disallowed_methods,
    reason = "the gateway's own configuration is this process's, never the caller's"
)]
pub fn config_path() -> PathBuf {
    if let Some(p) = std::env::var_os("GATEWAY_CONFIG").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|x| !x.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| own_home().join(".config"));
    base.join("gateway/config.toml")
}

/// What of the config must stay out of every child's reach: the file named by
/// `$GATEWAY_CONFIG`, or the default's directory — created (empty, 0700) when missing, since
/// only an existing path can be excluded, and a run that could create the config could
/// point later runs at another state directory or policy.
#[allow(
    clippy::disallowed_methods,
    reason = "the gateway's own configuration is this process's, never the caller's"
)]
fn config_guard() -> PathBuf {
    let p = config_path();
    if std::env::var_os("GATEWAY_CONFIG").is_some_and(|v| !v.is_empty()) {
        return p;
    }
    let dir = p.parent().map(Path::to_path_buf).unwrap_or(p);
    // not-ws: the gateway's own configuration directory
    if !dir.exists() {
        use std::os::unix::fs::DirBuilderExt;
        // not-ws: the gateway's own configuration directory
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir);
    }
    dir
}

/// Why the broker could not run a call (beyond policy decisions).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The request itself is wrong (missing command, bad cwd, bad --env).
    #[error("{0}")]
    Usage(String),
    /// The program was not found.
    #[error("command not found: {program} (searched PATH={path})")]
    NotFound {
        /// What was asked for.
        program: String,
        /// The PATH searched.
        path: String,
    },
    /// The policy is invalid.
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    /// The sandbox could not be set up or the program not executed.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// A file that decides the next run (the policy in force, a file it extends, the config)
    /// could be changed by this command: refused, saying how to fix it (`best_effort` does not
    /// lift it).
    #[error("{0}")]
    NextRunInReach(String),
    /// The policy refused (`refusal::Refusal`: a secret in an input, a file tool's path
    /// outside its roots, denied or protected, a file over its size limit): recorded as a
    /// `deny` with the refusal's rule, exit 120.
    #[error(transparent)]
    Refused(#[from] refusal::Refusal),
    /// The audit log could not be written: nothing runs unrecorded.
    #[error("{0}")]
    Audit(#[from] crate::audit::AuditError),
    /// A file tool's worker ran out of time (the policy's `timeout`, or 10 minutes).
    #[error("{0}")]
    TimedOut(String),
    /// Local I/O of the broker (temp dirs).
    #[error("{what}: {source}")]
    Io {
        /// What.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
}

/// An exec request.
pub struct ExecRequest<'a> {
    /// argv.
    pub argv: Vec<String>,
    /// The workspace: the writable area (`${WORKSPACE}`), the tree snapshotted for undo.
    pub workspace: PathBuf,
    /// The command's working directory (a session's `cd`, MCP `exec`'s `cwd`): where it
    /// starts and what its relative paths mean — never what it may write.
    pub cwd: PathBuf,
    /// The policy.
    pub policy: &'a Policy,
    /// Broker state directory (never reachable by children).
    pub state_dir: PathBuf,
    /// `--env K=V` additions.
    pub env: Vec<(String, String)>,
    /// Overrides the policy's timeout.
    pub timeout: Option<Duration>,
    /// stdin for the child.
    pub stdin: Stdin,
    /// Session id recorded in the audit log.
    pub session: String,
    /// Who asked, recorded in the audit log.
    pub caller: audit::Caller,
    /// Snapshot the workspace for undo (None: as the policy's `[undo] snapshot` says).
    pub snapshot: Option<bool>,
}

/// The result of an exec request.
#[derive(Debug, Serialize)]
pub struct ExecResult {
    /// The policy decision.
    pub decision: Decision,
    /// Whether it ran.
    pub ran: bool,
    /// For ask: whether a person approved.
    pub approved: Option<bool>,
    /// How it ended, if it ran.
    pub outcome: Option<Outcome>,
    /// Protected paths that did not exist before the run and were created by it; each was
    /// moved to the quarantine in the state directory (`to`), or left in place if that failed.
    pub protected_created: Vec<Quarantined>,
    /// Without a mount namespace: protected paths the run changed, put back as they were
    /// before it (the run's version moved to the quarantine).
    pub protected_restored: Vec<keep::Restored>,
    /// Protected paths that were not held (kept and restored, or mounted read-only), and why:
    /// shown on stderr every time.
    pub protected_warnings: Vec<String>,
    /// What the secrets policy found (rules and places, never values).
    pub secrets: SecretsReport,
    /// The audit record written for it.
    pub audit: Option<AuditInfo>,
    /// What the run changed in the workspace (when snapshotted): undoable as one group.
    pub snapshot: Option<snapshot::SnapshotReport>,
    /// The first `[audit] inline_output` bytes of stdout and one more (to tell that there
    /// was more), after redaction: the report's `stdout` ([`report::ExecReport`]).
    #[serde(skip)]
    pub stdout_head: Vec<u8>,
    /// The same of stderr.
    #[serde(skip)]
    pub stderr_head: Vec<u8>,
}

/// Where the run was recorded, and its streams' digests and artifacts.
#[derive(Debug, Clone, Serialize)]
pub struct AuditInfo {
    /// The record's sequence number (`gateway log show SEQ`).
    pub seq: u64,
    /// What the command read on stdin (when relayed).
    pub stdin: Option<audit::StreamDigest>,
    /// Its stdout, after redaction.
    pub stdout: audit::StreamDigest,
    /// Its stderr, after redaction.
    pub stderr: audit::StreamDigest,
}

/// A protected path created by a run.
#[derive(Debug, Serialize)]
pub struct Quarantined {
    /// Where the run created it.
    pub path: PathBuf,
    /// Where it was moved (None: moving failed and it is still in place).
    pub to: Option<PathBuf>,
}

/// The directories a run may write in which relative protected patterns apply: the
/// writable trees (a writable `/` stands for the workspace), not the private TMPDIR, not
/// device nodes.
fn protected_roots<'a>(c: &'a sandbox::Confinement, ws: &'a Path) -> Vec<&'a Path> {
    let tmp = c.private_tmp.as_ref().map(|(t, _)| t.as_path());
    let mut roots: Vec<&Path> = Vec::new();
    for w in &c.write {
        let root = if w.as_path() == Path::new("/") {
            ws
        } else {
            w.as_path()
        };
        if Some(root) != tmp
            && !roots.contains(&root)
            && wsfs::is_dir(root)
            && !root.starts_with("/dev")
        {
            roots.push(root);
        }
    }
    roots
}

/// What a protected path (or a directory that would hold one) is: compared before and
/// after a run, so that a link re-pointed or a `.git` directory swapped for a `gitdir:` file
/// counts as created.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Found {
    Dir,
    File,
    Link(PathBuf),
    Other,
}

impl From<wsfs::Kind> for Found {
    fn from(k: wsfs::Kind) -> Found {
        match k {
            wsfs::Kind::Dir { .. } => Found::Dir,
            wsfs::Kind::File { .. } => Found::File,
            wsfs::Kind::Link(t) => Found::Link(t),
            wsfs::Kind::Special => Found::Other,
        }
    }
}

/// The writable trees protected paths are looked for in, each opened once (a tree that
/// cannot be opened holds nothing the broker will act on).
fn protected_trees(c: &sandbox::Confinement, ws: &Path) -> Vec<wsfs::Tree> {
    protected_roots(c, ws)
        .into_iter()
        .filter_map(|r| wsfs::Tree::open(r).ok())
        .collect()
}

/// At most this many directories of a writable tree are listed to find nested repositories.
const NESTED_MAX_DIRS: usize = 100_000;

/// Where git reads config and hooks from in the writable trees, and what that config makes
/// it read or run (all absolute; found as the broker through `broker::wsfs`, nothing
/// followed but what git itself would follow, inside the trees only).
#[derive(Debug, Default)]
pub(crate) struct GitPlaces {
    /// Every `.git` entry (a directory, a `gitdir:` file, a link), at any depth.
    entries: Vec<PathBuf>,
    /// Git directories: `.git` directories, where a `.git` file's `gitdir:` or a `.git` link
    /// points, and their `commondir`s — those inside a writable tree.
    dirs: Vec<PathBuf>,
    /// What their config and the user's global config include (existing or not: git skips a
    /// missing include, and reads it once it exists), the hooks directory they name, and the
    /// paths of the programs they name.
    refs: Vec<PathBuf>,
    /// The `.git` directories among `dirs`.
    dot_git_dirs: Vec<PathBuf>,
    /// The bare repositories among `dirs` (a directory holding `HEAD`, `objects/`, `refs/`).
    bare: Vec<PathBuf>,
    /// Trees with more directories than were searched.
    incomplete: Vec<PathBuf>,
}

impl GitPlaces {
    /// What the check after a run looks at, from what was found before it (`self`) and after
    /// it (`now`): git directories that existed before, and `.git` directories the run made
    /// (what is in them is the run's); every `.git` entry now (a new `gitdir:` file or link is
    /// moved away as itself, never what it names); the `HEAD` of a bare repository the run
    /// made (moved away, the directory is no longer one); what the config *before* the run
    /// includes or names. A config the run planted names nothing the broker then moves: the
    /// planted config itself is moved.
    fn after_run(&self, now: GitPlaces) -> (GitPlaces, Vec<PathBuf>) {
        let mut dirs = self.dirs.clone();
        dirs.extend(
            now.dot_git_dirs
                .iter()
                .filter(|d| !self.dirs.contains(d))
                .cloned(),
        );
        let heads = now
            .bare
            .iter()
            .filter(|b| !self.bare.contains(b))
            .map(|b| b.join("HEAD"))
            .collect();
        let mut entries = now.entries;
        entries.extend(self.entries.iter().cloned());
        let g = GitPlaces {
            entries,
            dirs,
            refs: self.refs.clone(),
            dot_git_dirs: now.dot_git_dirs,
            bare: now.bare,
            incomplete: now.incomplete,
        };
        (g, heads)
    }
}

/// `rel` (a path git read from a file in `dir`, relative to `dir` unless absolute) as an
/// absolute, lexically normal path.
fn place_of(dir: &Path, rel: &str) -> PathBuf {
    let p = if Path::new(rel).is_absolute() {
        PathBuf::from(rel)
    } else {
        dir.join(rel)
    };
    PathBuf::from(policy::normalize(&p.to_string_lossy()))
}

/// Finds [`GitPlaces`] in `trees`; `globals` are the user's and the system's git config files
/// (their relative program paths taken from `ws`).
fn git_places(trees: &[wsfs::Tree], globals: &[PathBuf], home: &Path, ws: &Path) -> GitPlaces {
    let mut g = GitPlaces::default();
    let inside = |p: &Path| tree_of(trees, p).is_some();
    // (config file, the work tree its relative program paths are relative to)
    let mut configs: Vec<(PathBuf, PathBuf)> = Vec::new();
    for tree in trees {
        let found = tree.find_git(NESTED_MAX_DIRS);
        if found.incomplete {
            g.incomplete.push(tree.path().to_path_buf());
        }
        // A directory git takes for a bare repository is a git directory itself (its work
        // tree, for relative program paths, is where git runs: the directory above).
        for rel in found.bare {
            let d = tree.path().join(&rel);
            let top = d
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| d.clone());
            configs.push((d.join("config"), top));
            g.bare.push(d.clone());
            g.dirs.push(d);
        }
        for rel in found.dot_git {
            let abs = tree.path().join(&rel);
            let top = abs.parent().map(Path::to_path_buf).unwrap_or_default();
            let gitdir = match tree.kind(&rel) {
                Ok(Some(wsfs::Kind::Dir { .. })) => {
                    g.dot_git_dirs.push(abs.clone());
                    Some(abs.clone())
                }
                Ok(Some(wsfs::Kind::File { .. })) => tree
                    .read(&rel, 4096)
                    .and_then(|d| {
                        String::from_utf8_lossy(&d)
                            .lines()
                            .find_map(|l| l.strip_prefix("gitdir:").map(|v| v.trim().to_string()))
                    })
                    .map(|v| place_of(&top, &v)),
                Ok(Some(wsfs::Kind::Link(t))) => Some(place_of(&top, &t.to_string_lossy())),
                _ => None,
            };
            g.entries.push(abs);
            let Some(d) = gitdir.filter(|d| inside(d)) else {
                continue;
            };
            // A worktree's or a linked repository's common directory holds the config too.
            let common = tree_of(trees, &d)
                .and_then(|(t, r)| t.read(&r.join("commondir"), 4096))
                .map(|c| place_of(&d, String::from_utf8_lossy(&c).trim()))
                .filter(|c| inside(c));
            for dir in std::iter::once(d).chain(common) {
                configs.push((dir.join("config"), top.clone()));
                configs.push((dir.join("config.worktree"), top.clone()));
                g.dirs.push(dir);
            }
        }
    }
    configs.extend(globals.iter().map(|c| (c.clone(), ws.to_path_buf())));
    // Config files are read with the caller's rights (a daemon's client): a config the run
    // planted that includes `/root/x` must not make the broker read it for them.
    let who = client::fs_identity();
    // (Where that identity cannot be taken, read as the broker: protect more, not less.)
    g.refs = wsfs::as_identity(who.as_ref(), || git_config_refs(&configs, home))
        .unwrap_or_else(|_| git_config_refs(&configs, home))
        .into_iter()
        .filter(|p| inside(p))
        .collect();
    for v in [&mut g.entries, &mut g.dirs, &mut g.refs] {
        v.sort();
        v.dedup();
    }
    g
}

/// The warning for a tree whose nested repositories were not all found.
fn nested_warning(tree: &Path) -> String {
    format!(
        "{} has more than {NESTED_MAX_DIRS} directories: git repositories nested deeper in it were not all found, and their config and hooks are not protected",
        tree.display()
    )
}

/// The user's and the system's git config files.
fn global_git_configs(home: &Path) -> [PathBuf; 3] {
    [
        home.join(".gitconfig"),
        home.join(".config/git/config"),
        PathBuf::from("/etc/gitconfig"),
    ]
}

/// What stands at `pattern` (relative to `tree`, `*`/`?` in any component) and at the
/// literal directories on the way when one is not a real directory (reported as itself).
fn present_at(tree: &wsfs::Tree, pattern: &Path, out: &mut Vec<(PathBuf, Found)>) {
    let comps: Vec<&OsStr> = pattern.iter().collect();
    let mut dir = PathBuf::new();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        if c.to_string_lossy().contains(['*', '?']) {
            break;
        }
        dir.push(c);
        match tree.kind(&dir).ok().flatten().map(Found::from) {
            Some(Found::Dir) => {}
            Some(f) => {
                out.push((tree.path().join(&dir), f));
                return;
            }
            None => return,
        }
    }
    for rel in tree.glob(pattern, 100_000) {
        if let Ok(Some(k)) = tree.kind(&rel) {
            out.push((tree.path().join(rel), Found::from(k)));
        }
    }
}

/// The protected paths that exist now: the policy's relative patterns in every writable tree,
/// git's (`.git/…`) in every git directory found there, what git's config makes it read or
/// run, and every `.git` entry that is not a directory (a link, a `gitdir:` file). Nothing is
/// followed: a link is reported as itself (`broker::wsfs`).
fn protected_present(
    trees: &[wsfs::Tree],
    policy: &Policy,
    places: &GitPlaces,
) -> Vec<(PathBuf, Found)> {
    let mut out = Vec::new();
    let relative = policy
        .sandbox
        .protected
        .iter()
        .filter(|t| !(t.starts_with('/') || t.starts_with('~') || t.starts_with("${")));
    for t in relative.clone() {
        for tree in trees {
            present_at(tree, Path::new(t), &mut out);
        }
    }
    let git_rest: Vec<&str> = relative.filter_map(|t| t.strip_prefix(".git/")).collect();
    for d in &places.dirs {
        if let Some((tree, rel)) = tree_of(trees, d) {
            for rest in &git_rest {
                present_at(tree, &rel.join(rest), &mut out);
            }
        }
    }
    for p in places.entries.iter().chain(&places.refs) {
        if let Some((tree, rel)) = tree_of(trees, p)
            && let Ok(Some(k)) = tree.kind(rel)
        {
            let f = Found::from(k);
            if !(f == Found::Dir && places.entries.contains(p)) {
                out.push((p.clone(), f));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup();
    out
}

/// The tree `p` lies in (the innermost), and `p` relative to it.
fn tree_of<'a>(trees: &'a [wsfs::Tree], p: &'a Path) -> Option<(&'a wsfs::Tree, &'a Path)> {
    trees
        .iter()
        .filter_map(|t| t.relative(p).map(|r| (t, r)))
        .filter(|(_, r)| !r.as_os_str().is_empty())
        .min_by_key(|(_, r)| r.components().count())
}

/// Moves protected paths that a run created (or whose link, file or directory it swapped)
/// into `<state>/quarantine/`; a link that was there before is put back as it was. Every
/// step acts on the name beneath its tree (`broker::wsfs`): a parent swapped for a link makes
/// the step fail, never act elsewhere.
fn quarantine_new(
    trees: &[wsfs::Tree],
    before: &[(PathBuf, Found)],
    after: Vec<(PathBuf, Found)>,
    state_dir: &Path,
) -> Vec<Quarantined> {
    let mut out = Vec::new();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let present =
        |p: &Path| tree_of(trees, p).is_some_and(|(t, rel)| t.kind(rel).is_ok_and(|k| k.is_some()));
    let relink = |p: &Path, target: &Path| {
        if let Some((t, rel)) = tree_of(trees, p) {
            let _ = t.symlink(rel, target);
        }
    };
    // What the run created or swapped, and the links that stood for a holder before the run
    // and are gone or replaced now (a `.git -> elsewhere` link turned into a planted `.git`
    // directory): those are moved away and the link put back.
    let mut moved: Vec<PathBuf> = after
        .iter()
        .filter(|a| !before.contains(a))
        .map(|(p, _)| p.clone())
        .collect();
    for (p, f) in before {
        if matches!(f, Found::Link(_))
            && !after.contains(&(p.clone(), f.clone()))
            && !moved.contains(p)
        {
            if present(p) {
                moved.push(p.clone());
            } else if let Found::Link(target) = f {
                relink(p, target);
            }
        }
    }
    let dir = state_dir.join("quarantine");
    // not-ws: the broker's own state directory.
    let made = std::fs::create_dir_all(&dir);
    for (i, p) in moved.into_iter().enumerate() {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let to = tree_of(trees, &p).and_then(|(t, rel)| {
            let dst = format!("{stamp}-{i}-{name}");
            match made
                .as_ref()
                .map_err(|_| ())
                .and_then(|_| t.move_out(rel, &dir, OsStr::new(&dst)).map_err(|_| ()))
            {
                Ok(()) => Some(dir.join(dst)),
                // Another filesystem: renamed in place to a name nothing loads.
                Err(()) => {
                    let inert = format!("{name}.gateway-quarantined-{stamp}");
                    t.rename_in_place(rel, OsStr::new(&inert))
                        .ok()
                        .map(|_| p.with_file_name(inert))
                }
            }
        });
        if to.is_some()
            && let Some((_, Found::Link(target))) = before.iter().find(|(b, _)| *b == p)
        {
            relink(&p, target);
        }
        out.push(Quarantined { path: p, to });
    }
    out
}

/// Creates the state directory (0700) if missing: a denied path that does not exist could
/// otherwise be created, and filled, by a sandboxed run.
/// The backup store's bounds for one workspace (`[undo] max_state_bytes`, and the
/// workspace's share: `max_workspace_bytes`, by default half of it).
pub(crate) fn undo_limits(undo: &crate::model::UndoProfile) -> crate::journal::quota::Limits {
    crate::journal::quota::Limits {
        total: undo.max_state_bytes,
        workspace: undo.workspace_quota(),
    }
}

pub(crate) fn ensure_state_dir(state_dir: &Path) -> Result<(), BrokerError> {
    use std::os::unix::fs::DirBuilderExt;
    // not-ws: the broker's own state directory
    if std::fs::symlink_metadata(state_dir).is_ok() {
        return Ok(());
    }
    // not-ws: the broker's own state directory
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .map_err(|e| BrokerError::Io {
            what: format!("creating the state directory {}", state_dir.display()),
            source: e,
        })
}

/// The environment the analyser uses for `~`, `$HOME`, `$PWD`.
pub fn shell_env(cwd: &Path) -> ShellEnv {
    ShellEnv {
        home: home().display().to_string(),
        cwd: cwd.display().to_string(),
    }
}

/// The caller's home (a daemon client's `$HOME`): what `~` means in policies and commands.
fn home() -> PathBuf {
    let h = client::env_var("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(own_home);
    // `/home/./u`, `//home/u`: one spelling, so that what is denied under it is denied.
    if h.is_absolute() {
        PathBuf::from(policy::normalize(&h.to_string_lossy()))
    } else {
        h
    }
}

/// What to say when a run's leftovers could not be killed as it ended: without a pid
/// namespace, in a process with other runs in progress (`gateway mcp` without a daemon, an
/// unprivileged daemon), what it left outside its process group lives on until the last of
/// those runs ends. Shown in the result and on stderr.
pub fn leftovers_warning(o: Option<&sandbox::Outcome>) -> Option<&'static str> {
    o.filter(|o| o.leftovers_killed.is_none() && !o.enforcement.pid_namespace)
        .map(|_| {
            "other commands of this gateway were still running, so processes this command left outside its process group (setsid, daemons) were not killed before its changes were recorded; they are killed when the last of those commands ends, and what they change meanwhile is in no run's record or undo group"
        })
}

/// This process's home (where its own config lives).
#[allow(
    clippy::disallowed_methods,
    reason = "this process's own home, for its own configuration, never the caller's"
)]
fn own_home() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"))
}

/// Canonical workspace, or a usage error.
pub fn workspace(cwd: &Path) -> Result<PathBuf, BrokerError> {
    let c = wsfs::resolve(cwd)
        .ok_or_else(|| BrokerError::Usage(format!("--cwd {}: no such directory", cwd.display())))?;
    if !wsfs::is_dir(&c) {
        return Err(BrokerError::Usage(format!(
            "--cwd {}: not a directory",
            cwd.display()
        )));
    }
    Ok(c)
}

/// Whether `argv` runs a git command that discards work or history, as strict's
/// `deny-git-destructive` rule judges it (what git will do, not its spelling; a command it
/// cannot analyse counts).
fn discards_git_work(argv: &[String], cwd: &Path) -> bool {
    if !argv.iter().any(|a| a.contains("git")) {
        return false;
    }
    // Loaded once per process (a daemon decides many calls).
    static STRICT: std::sync::OnceLock<Option<Policy>> = std::sync::OnceLock::new();
    let Some(strict) = STRICT.get_or_init(|| Policy::builtin("strict").ok()) else {
        return false;
    };
    decide_exec(strict, argv, cwd)
        .rules
        .iter()
        .any(|r| r.id == "deny-git-destructive")
}

/// Decides an exec call.
pub fn decide_exec(policy: &Policy, argv: &[String], ws: &Path) -> Decision {
    let call = ToolCall {
        tool: Tool::Exec,
        argv: argv.to_vec(),
        paths: vec![],
        cwd: ws.to_path_buf(),
    };
    policy.evaluate(&call, &shell_env(ws))
}

struct Vars<'a> {
    workspace: &'a Path,
    home: PathBuf,
    tmpdir: &'a Path,
}

impl Vars<'_> {
    fn expand(&self, t: &str) -> String {
        let mut s = t.to_string();
        if s.contains("${") {
            for (var, value) in [
                ("${WORKSPACE}", self.workspace),
                ("${HOME}", self.home.as_path()),
                ("${TMPDIR}", self.tmpdir),
            ] {
                if s.contains(var) {
                    s = s.replace(var, &value.to_string_lossy());
                }
            }
        }
        if s == "~" {
            s = self.home.display().to_string();
        } else if let Some(rest) = s.strip_prefix("~/") {
            s = format!("{}/{rest}", self.home.display());
        }
        s
    }
}

/// Expands `*`/`?` in any component against the directories' entries (`.git/modules/*/config`);
/// plain paths pass through (existing or not). An absolute path is normalised first (`//`,
/// `/./`, `..` applied lexically): a home spelled `/home/./u` must deny the same paths as
/// `/home/u`, and landlock compares the spellings it is given.
fn expand_glob(p: &str) -> Vec<PathBuf> {
    let norm = if p.starts_with('/') {
        policy::normalize(p)
    } else {
        p.to_string()
    };
    if !norm.contains(['*', '?']) {
        return vec![PathBuf::from(norm)];
    }
    let mut acc = vec![PathBuf::new()];
    for comp in Path::new(&norm).components() {
        let std::path::Component::Normal(n) = comp else {
            for d in &mut acc {
                d.push(comp);
            }
            continue;
        };
        let name = n.to_string_lossy();
        if !name.contains(['*', '?']) {
            for d in &mut acc {
                d.push(n);
            }
            continue;
        }
        let mut next = Vec::new();
        for d in &acc {
            // not-ws: a policy's path templates expanded (denied, protected): names only, each then denied or protected
            if let Ok(rd) = std::fs::read_dir(d) {
                for e in rd.flatten() {
                    if policy::wildcard(&name, &e.file_name().to_string_lossy()) {
                        next.push(e.path());
                    }
                }
            }
        }
        acc = next;
    }
    acc.sort();
    acc
}

/// What git's config files `configs` (each with the work tree its relative program paths are
/// relative to) make git read or run from the file system: the files they include,
/// recursively (as git does, up to 10 levels: `path` in `[include]`/`[includeIf "…"]`, `~/`
/// expanded, relative to the including file); `core.hooksPath`; and the paths named by the
/// keys that run a program (`core.fsmonitor`, `core.pager`, filters, diff and merge drivers,
/// `!` aliases, … — each word of the value that is a path). Each config is read as the broker
/// with no link on the way, bounded (`broker::wsfs`).
fn git_config_refs(configs: &[(PathBuf, PathBuf)], home: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut todo: Vec<(PathBuf, PathBuf, usize)> = configs
        .iter()
        .map(|(c, top)| (c.clone(), top.clone(), 0))
        .collect();
    let place = |v: &str, base: &Path| -> PathBuf {
        let p = if let Some(rest) = v.strip_prefix("~/") {
            home.join(rest)
        } else if Path::new(v).is_absolute() {
            PathBuf::from(v)
        } else {
            base.join(v)
        };
        PathBuf::from(policy::normalize(&p.to_string_lossy()))
    };
    while let Some((cfg, top, depth)) = todo.pop() {
        let Some(real) = wsfs::resolve(&cfg) else {
            continue;
        };
        let Some(text) = wsfs::read_nolinks(&real, 1 << 20) else {
            continue;
        };
        let dir = real.parent().map(Path::to_path_buf).unwrap_or_default();
        for (key, value) in git_config_entries(&String::from_utf8_lossy(&text)) {
            if key == "include.path" || key == "includeif.path" {
                let p = place(&value, &dir);
                if !out.contains(&p) {
                    out.push(p.clone());
                    if depth < 10 {
                        todo.push((p, top.clone(), depth + 1));
                    }
                }
            } else if key == "core.hookspath" {
                out.push(place(&value, &top));
            } else if runs_a_program(&key) {
                let v = value.trim_start_matches('!');
                for word in v.split_whitespace() {
                    let w = word.trim_matches(['"', '\'', ';', '&', '|', '(', ')']);
                    if w.contains('/') && !w.starts_with('-') {
                        out.push(place(w, &top));
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Config keys (`section.key`, subsection left out, lower case) whose value git runs as a
/// program or shell command (`git help config`).
fn runs_a_program(key: &str) -> bool {
    const KEYS: &[&str] = &[
        "core.fsmonitor",
        "core.pager",
        "core.editor",
        "core.askpass",
        "core.sshcommand",
        "core.gitproxy",
        "sequence.editor",
        "diff.external",
        "diff.textconv",
        "diff.command",
        "merge.driver",
        "filter.clean",
        "filter.smudge",
        "filter.process",
        "credential.helper",
        "gpg.program",
        "interactive.difffilter",
        "web.browser",
        "browser.cmd",
        "man.cmd",
        "mergetool.cmd",
        "difftool.cmd",
        "uploadpack.packobjectshook",
    ];
    KEYS.contains(&key) || key.starts_with("pager.") || key.starts_with("alias.")
}

/// The `(section.key, value)` entries of a git config text (section and key lower-cased,
/// the subsection left out; values unquoted, trailing comments dropped).
fn git_config_entries(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let mut l = line.trim();
        if let Some(rest) = l.strip_prefix('[') {
            let Some((head, after)) = rest.split_once(']') else {
                continue;
            };
            // `[section "sub"]` or `[section.sub]`.
            section = head
                .split(['.', ' ', '"', '\t'])
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            l = after.trim();
            if l.is_empty() {
                continue;
            }
        }
        if l.starts_with(['#', ';']) || section.is_empty() {
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let v = v.trim();
        let v = if let Some(q) = v.strip_prefix('"') {
            q.split('"').next().unwrap_or("")
        } else {
            v.split(['#', ';']).next().unwrap_or("").trim()
        };
        if !v.is_empty() {
            out.push((
                format!("{section}.{}", k.trim().to_ascii_lowercase()),
                v.to_string(),
            ));
        }
    }
    out
}

/// Character devices a program may use: the rest of /dev is denied.
const SAFE_CHAR_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// Block devices and non-safe character devices below `dir` (not following symlinks).
fn unsafe_devices(dir: &Path, depth: usize) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let mut out = Vec::new();
    // not-ws: /dev, for the device nodes to deny
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_block_device() {
            out.push(p);
        } else if ft.is_char_device() {
            let safe =
                SAFE_CHAR_DEVICES.iter().any(|s| Path::new(s) == p) || p.starts_with("/dev/pts");
            if !safe {
                out.push(p);
            }
        // not-ws: /dev, for the device nodes to deny
        } else if ft.is_dir()
            && depth < 3
            && !p.starts_with("/dev/shm")
            && !p.starts_with("/dev/pts")
        {
            out.extend(unsafe_devices(&p, depth + 1));
        }
    }
    out
}

/// The sandbox a policy gives a run, before the program is known.
#[derive(Debug, Serialize)]
pub struct SandboxPlan {
    /// How the run is confined.
    #[serde(flatten)]
    pub confine: sandbox::Confinement,
    /// Environment passed to the child (names only in serialised output).
    #[serde(serialize_with = "env_names")]
    pub env: Vec<(OsString, OsString)>,
    /// Where git reads config and hooks in the writable trees, as found for this plan (the
    /// run's "before": searched once).
    #[serde(skip)]
    pub(crate) git: GitPlaces,
}

fn env_names<S: serde::Serializer>(env: &[(OsString, OsString)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(env.iter().map(|(k, _)| k.to_string_lossy().into_owned()))
}

/// Builds the sandbox plan for a workspace. `tmpdir` is the private TMPDIR (or the global
/// one); `tmpfs`: it is a fresh tmpfs mounted by the sandbox.
pub fn plan(
    policy: &Policy,
    ws: &Path,
    state_dir: &Path,
    tmpdir: &Path,
    tmpfs: bool,
    extra_env: &[(String, String)],
) -> Result<SandboxPlan, BrokerError> {
    plan_with(policy, ws, state_dir, tmpdir, tmpfs, extra_env, true)
}

/// [`plan`], with git's places in the writable trees searched (`git`) or not (a file tool
/// that only reads).
#[allow(
    clippy::too_many_lines,
    reason = "a whole confinement derived from a policy; issue 23's sandbox-as-layers stage splits it per layer"
)]
pub(crate) fn plan_with(
    policy: &Policy,
    ws: &Path,
    state_dir: &Path,
    tmpdir: &Path,
    tmpfs: bool,
    extra_env: &[(String, String)],
    git: bool,
) -> Result<SandboxPlan, BrokerError> {
    let sb = &policy.sandbox;
    let vars = Vars {
        workspace: ws,
        home: home(),
        tmpdir,
    };
    let list = |v: &[String]| -> Vec<PathBuf> {
        v.iter().map(|t| PathBuf::from(vars.expand(t))).collect()
    };
    let read = list(&sb.read);
    // The caller's roots narrow where commands write; the private TMPDIR and device nodes
    // (/dev/null) are not the user's files and stay.
    let write = narrow(list(&sb.write), sb.roots.as_deref(), |p| {
        p == tmpdir || p.starts_with("/dev")
    });
    let exec = list(&sb.exec);

    // Denied paths: the policy's, and the ones no policy may expose (credentials, the state
    // directory); both with their canonical forms.
    let expand_all = |templates: &mut dyn Iterator<Item = &str>| {
        let mut out: Vec<PathBuf> = Vec::new();
        for t in templates {
            for p in expand_glob(&vars.expand(t)) {
                // One statx for the many paths that do not exist (most of the credential
                // catalogue on any one machine), instead of a readlink per component.
                if wsfs::exists_nofollow(&p)
                    && let Some(c) = wsfs::resolve(&p)
                    && c != p
                {
                    out.push(c);
                }
                out.push(p);
            }
        }
        out
    };
    let catalogue = credentials::denied_templates(&vars.home);
    let mut critical = expand_all(
        &mut ALWAYS_DENY
            .iter()
            .copied()
            .chain(catalogue.iter().map(String::as_str)),
    );
    for p in [state_dir.to_path_buf(), config_guard()] {
        // not-ws: the state directory and the config guard, the broker's own
        if let Ok(c) = std::fs::canonicalize(&p)
            && c != p
        {
            critical.push(c);
        }
        critical.push(p);
    }
    let mut deny = expand_all(&mut sb.deny.iter().map(String::as_str));

    // The workspace is writable: it may not be /, lie in a denied path, or contain a path no
    // policy may expose. (The policy's own denied paths inside it are hidden by the mount
    // namespace, see `hidden`.)
    if ws == Path::new("/") {
        return Err(BrokerError::Usage(
            "the workspace (--cwd) is /: run from a project directory".into(),
        ));
    }
    let refused = critical
        .iter()
        .find(|d| d.starts_with(ws) || ws.starts_with(d))
        .or_else(|| deny.iter().find(|d| ws.starts_with(d)));
    if let Some(d) = refused {
        return Err(BrokerError::Usage(format!(
            "the workspace {} is not allowed: it contains or lies in {}, which policy `{}` never exposes; run from a project directory",
            ws.display(),
            d.display(),
            policy.name
        )));
    }
    // Landlock cannot take a path away inside the writable workspace without taking write
    // access from the workspace itself: those are hidden by mounts only.
    let (hidden, rest): (Vec<PathBuf>, Vec<PathBuf>) = deny
        .drain(..)
        .partition(|d| d.starts_with(ws) && d.as_path() != ws);
    deny = rest;
    deny.extend(critical);

    // Device nodes: when /dev lies in an allowed tree (standard, permissive read `/`), every
    // block device and every character device outside a short safe list is denied too. Raw
    // disks and memory devices would otherwise bypass every path rule (some kernels refuse a
    // capless open of a block device; this does not rely on it).
    let dev = Path::new("/dev");
    if read
        .iter()
        .chain(&write)
        .chain(&exec)
        .any(|r| dev.starts_with(r))
    {
        deny.extend(unsafe_devices(dev, 0));
    }
    deny.sort();
    deny.dedup();
    // A path inside another denied path is denied already; masking it too would fail (the
    // outer mask hides it first: `~/.mozilla` and the catalogue's `~/.mozilla/firefox`).
    // Sorted by components, a path's descendants follow it directly.
    deny.dedup_by(|inner, outer| inner.starts_with(&*outer));

    // Relative protected paths apply in every writable directory. The private TMPDIR is new
    // and empty: nothing in it to protect. A writable `/` (permissive) stands for the
    // workspace.
    let mut roots: Vec<&Path> = Vec::new();
    for w in &write {
        let root = if w.as_path() == Path::new("/") {
            ws
        } else {
            w.as_path()
        };
        if w.as_path() != tmpdir && !roots.contains(&root) && wsfs::is_dir(root) {
            roots.push(root);
        }
    }
    let mut protected: Vec<PathBuf> = Vec::new();
    for t in &sb.protected {
        let e = vars.expand(t);
        if e.starts_with('/') {
            protected.extend(
                expand_glob(&e)
                    .into_iter()
                    .filter(|p| wsfs::resolve(p).is_some()),
            );
        } else {
            for root in &roots {
                protected.extend(
                    expand_glob(&root.join(&e).display().to_string())
                        .into_iter()
                        .filter(|p| wsfs::exists_nofollow(p)),
                );
            }
        }
    }
    // Git directories at any depth (nested repositories, `gitdir:` files, `commondir`) hold
    // config and hooks as the top one does; what their config and the user's include, the
    // hooks directory they name (`core.hooksPath = .husky`) and the programs they name
    // (`filter.x.clean = ./tools/clean.sh`) are config too. Those that exist are protected
    // here; those a run creates are quarantined after it (`protected_present`).
    let trees: Vec<wsfs::Tree> = roots
        .iter()
        .filter_map(|r| wsfs::Tree::open(r).ok())
        .collect();
    let places = if git {
        git_places(&trees, &global_git_configs(&vars.home), &vars.home, ws)
    } else {
        GitPlaces::default()
    };
    for d in &places.dirs {
        for t in &sb.protected {
            if let Some(rest) = t.strip_prefix(".git/") {
                protected.extend(
                    expand_glob(&d.join(rest).display().to_string())
                        .into_iter()
                        .filter(|p| wsfs::exists_nofollow(p)),
                );
            }
        }
    }
    protected.extend(places.refs.iter().cloned());
    // Protected by what is read, not by how it is spelled: `.envrc -> envrc.local` or
    // `.git -> realgit` protect `envrc.local` and `realgit/config`. Each is taken in its
    // canonical form when that lies in a writable tree (elsewhere the run cannot write it
    // anyway), so a mount never binds through a link and the file tools judge the target.
    // The files that decide the next run are never writable by this one: the policy in
    // force and every file it extends (the config is out of reach entirely, `config_guard`).
    protected.extend(policy.loaded_from.iter().cloned());
    let protected: Vec<PathBuf> = {
        let mut v: Vec<PathBuf> = protected
            .into_iter()
            .filter_map(|p| wsfs::resolve(&p))
            .filter(|c| write.iter().any(|w| c.starts_with(w) && c != w))
            .collect();
        v.sort();
        v.dedup();
        v
    };

    // Environment: allowlist minus always-scrubbed, then the policy's settings, then --env.
    let scrubbed = |k: &str| {
        policy::ALWAYS_SCRUB.iter().any(|p| policy::env_match(p, k))
            || policy::credentials::env_scrubbed(k)
            || sb.env_scrub.iter().any(|p| policy::env_match(p, k))
    };
    let allowed = |k: &str| sb.env_allow.iter().any(|p| policy::env_match(p, k));
    let mut env: Vec<(OsString, OsString)> = client::env_vars()
        .into_iter()
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            allowed(&k) && !scrubbed(&k)
        })
        .collect();
    let mut set = |k: &str, v: String| {
        env.retain(|(ek, _)| ek != k);
        env.push((k.into(), v.into()));
    };
    for (k, v) in &sb.env_set {
        set(k, vars.expand(v));
    }
    for (k, v) in extra_env {
        if scrubbed(k) {
            return Err(BrokerError::Refused(refusal::Refusal::ScrubbedEnv {
                name: k.clone(),
            }));
        }
        set(k, v.clone());
    }
    env.sort();

    Ok(SandboxPlan {
        confine: sandbox::Confinement {
            read,
            write,
            exec,
            deny,
            protected,
            hidden,
            network: sb.network.clone(),
            limits: sb.limits.clone(),
            namespaces: sb.namespaces,
            best_effort: sb.best_effort,
            memory_cgroup: sb.cgroup,
            private_tmp: tmpfs.then(|| (tmpdir.to_path_buf(), tmpfs_size(&sb.limits))),
            danger_openat2: false,
            run_as: None,
        },
        env,
        git: places,
    })
}

/// `list` narrowed to the caller's `roots`: a path inside a root stays, a path containing
/// roots becomes those roots, anything else goes — except what `keep` keeps. No roots: the
/// list as it is.
pub(crate) fn narrow(
    list: Vec<PathBuf>,
    roots: Option<&[PathBuf]>,
    keep: impl Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let Some(roots) = roots else { return list };
    let mut out: Vec<PathBuf> = Vec::new();
    for p in list {
        if keep(&p) || roots.iter().any(|r| p.starts_with(r)) {
            out.push(p);
        } else {
            out.extend(roots.iter().filter(|r| r.starts_with(&p)).cloned());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Resolves the program like execvp: a name with `/` relative to `cwd`, else along PATH.
fn resolve_program(
    prog: &str,
    cwd: &Path,
    env: &[(OsString, OsString)],
) -> Result<PathBuf, BrokerError> {
    if prog.is_empty() {
        return Err(BrokerError::Usage("the command is empty".into()));
    }
    if prog.contains('/') {
        let p = cwd.join(prog);
        // not-ws: the program to run, named with a /: a stat; it runs confined
        if p.exists() {
            return Ok(p);
        }
        return Err(BrokerError::NotFound {
            program: prog.into(),
            path: "(not searched: the name contains /)".into(),
        });
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let p = Path::new(dir).join(prog);
        let p = if p.is_relative() { cwd.join(p) } else { p };
        // not-ws: the PATH lookup of the program to run: a stat; the program runs confined
        if let Ok(m) = std::fs::metadata(&p)
            && m.is_file()
        {
            return Ok(p);
        }
    }
    Err(BrokerError::NotFound {
        program: prog.into(),
        path,
    })
}

/// The private TMPDIR: with namespaces, a fresh tmpfs mounted in the run's own mount namespace
/// on a fixed, root-only mount point (nothing to create or delete per run); otherwise a new
/// directory, removed afterwards. Returns (tmpfs?, the directory to remove afterwards).
fn tmp_plan(policy: &Policy) -> Result<(bool, Option<TempDir>), BrokerError> {
    let use_tmpfs = uses_tmpfs(policy);
    let dir = if policy.sandbox.private_tmp && !use_tmpfs {
        Some(TempDir::new()?)
    } else {
        None
    };
    Ok((use_tmpfs, dir))
}

/// Is the private TMPDIR a tmpfs mounted by the sandbox (private, with namespaces)?
fn uses_tmpfs(policy: &Policy) -> bool {
    let sb = &policy.sandbox;
    sb.private_tmp && sb.namespaces && sandbox::namespaces_available()
}

/// The fixed mount point for per-run tmpfs TMPDIRs: `$TMPDIR/.gateway-private` (normally
/// `/tmp/.gateway-private`), created 0700 once; refused if it is a symlink or not ours.
fn tmpfs_mountpoint() -> Result<PathBuf, BrokerError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
    let base = std::fs::canonicalize(std::env::temp_dir()).unwrap_or_else(|_| std::env::temp_dir());
    // One per uid: a daemon running as its own user shares /tmp with root's gateway.
    let uid = sandbox::effective_uid();
    let p = base.join(if uid == 0 {
        ".gateway-private".to_string()
    } else {
        format!(".gateway-private-{uid}")
    });
    // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
    match std::fs::DirBuilder::new().mode(0o700).create(&p) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(BrokerError::Io {
                what: format!("creating the TMPDIR mount point {}", p.display()),
                source: e,
            });
        }
    }
    // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
    let m = std::fs::symlink_metadata(&p).map_err(|e| BrokerError::Io {
        what: format!("checking {}", p.display()),
        source: e,
    })?;
    // The mount point must be a real directory owned by us and closed to others.
    // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
    if !m.is_dir() || m.uid() != sandbox::effective_uid() || m.mode() & 0o022 != 0 {
        return Err(BrokerError::Io {
            what: format!(
                "{} is not a directory owned by uid {} and closed to others; remove it",
                p.display(),
                sandbox::effective_uid()
            ),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
    }
    Ok(p)
}

/// Size of the tmpfs TMPDIR: the policy's memory limit (tmpfs pages are memory), else 2 GiB.
fn tmpfs_size(l: &sandbox::Limits) -> u64 {
    l.memory.unwrap_or(2 << 30)
}

/// A private TMPDIR, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, BrokerError> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        for i in 0..100u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let p = base.join(format!("gateway-{}-{nanos:x}-{i}", std::process::id()));
            // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
            match std::fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => {
                    // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
                    let c = std::fs::canonicalize(&p).unwrap_or(p);
                    return Ok(TempDir(c));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(BrokerError::Io {
                        what: format!("creating a private TMPDIR in {}", base.display()),
                        source: e,
                    });
                }
            }
        }
        Err(BrokerError::Io {
            what: "creating a private TMPDIR".into(),
            source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The decision as recorded; a request refused before any decision (a secret in argv, a
/// bad request) is recorded as denied, with the error as its reason.
fn record_decision(d: Option<&Decision>, err: Option<&BrokerError>) -> audit::RecordDecision {
    match d {
        Some(d) => {
            // Each deciding rule once (a rule matching several simple commands is listed
            // once), with its reason.
            let mut rules: Vec<String> = Vec::new();
            let mut reasons = Vec::new();
            for r in d.deciding_rules() {
                if !rules.contains(&r.id) {
                    rules.push(r.id.clone());
                    reasons.push(r.reason.clone());
                }
            }
            audit::RecordDecision {
                effect: d.effect.name().into(),
                rules,
                reasons,
            }
        }
        None => audit::RecordDecision {
            effect: "deny".into(),
            rules: vec![
                match err {
                    Some(BrokerError::Refused(r)) => r.rule(),
                    _ => "broker",
                }
                .into(),
            ],
            reasons: err
                .map(|e| redact_text(&e.to_string()))
                .into_iter()
                .collect(),
        },
    }
}

/// Applies the artifact retention at most once an hour (it lists the store).
fn prune_artifacts(state_dir: &Path, a: &crate::model::AuditProfile) {
    let marker = audit::Paths::new(state_dir).artifacts.join(".pruned");
    // not-ws: the broker's own state directory
    let fresh = std::fs::metadata(&marker)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < Duration::from_secs(3600));
    if fresh {
        return;
    }
    // not-ws: the broker's own state directory
    let _ = std::fs::write(&marker, b"");
    audit::artifacts::prune(
        state_dir,
        a.artifacts_max_age.map(Duration::from_secs),
        a.artifacts_max_total,
    );
}

/// What `policy explain` shows.
#[derive(Debug, Serialize)]
pub struct Explanation {
    /// Policy name.
    pub policy: String,
    /// The decision.
    pub decision: Decision,
    /// The sandbox that would apply.
    pub sandbox: SandboxPlan,
    /// The kernel's landlock ABI.
    pub landlock_abi: i32,
    /// The layers that would apply on this machine, as the broker would set them up.
    pub layers: Vec<String>,
    /// What happens to secrets in inputs and output.
    pub secrets: crate::model::SecretsProfile,
    /// Secrets the command line holds (rule and place, never the value).
    pub secrets_in_argv: Vec<InputSecret>,
}

/// Explains what would happen to a command, without running it.
pub fn explain(
    policy: &Policy,
    argv: &[String],
    cwd: &Path,
    state_dir: &Path,
) -> Result<Explanation, BrokerError> {
    let ws = workspace(cwd)?;
    let mut decision = decide_exec(policy, argv, &ws);
    guard::redact_decision(&mut decision);
    let privileged = sandbox::namespaces_available();
    let sb = &policy.sandbox;
    let use_tmpfs = uses_tmpfs(policy);
    let tmp = if use_tmpfs {
        tmpfs_mountpoint()?
    } else if sb.private_tmp {
        std::env::temp_dir().join("gateway-<per-invocation>")
    } else {
        std::env::temp_dir()
    };
    let mut layers = vec![format!(
        "landlock ABI {}, seccomp, capabilities cleared, no_new_privs",
        sandbox::landlock_abi()
    )];
    layers.push(if sb.namespaces && privileged {
        "namespaces: pid (own /proc), mount, ipc".to_string()
            + if sb.network == crate::model::Network::Loopback {
                ", net"
            } else {
                ""
            }
    } else if sb.namespaces {
        "namespaces: not available (the broker is not root)".into()
    } else {
        "namespaces: off (policy)".into()
    });
    layers.push(if use_tmpfs {
        format!("TMPDIR: a fresh tmpfs per run at {}", tmp.display())
    } else if sb.private_tmp {
        "TMPDIR: a new directory per run".into()
    } else {
        "TMPDIR: the global one".into()
    });
    if sb.limits.memory.is_some() {
        layers.push(if sb.cgroup && sb.namespaces && privileged {
            "memory: per process and in total (memory cgroup, when the kernel has the controller)"
                .into()
        } else {
            "memory: per process only".into()
        });
    }
    let sandbox = plan(policy, &ws, state_dir, &tmp, use_tmpfs, &[])?;
    Ok(Explanation {
        policy: policy.name.clone(),
        decision,
        sandbox,
        landlock_abi: sandbox::landlock_abi(),
        layers,
        secrets: policy.secrets,
        secrets_in_argv: {
            // Reported as `warn` would: explain never refuses.
            let mut report_only = policy.secrets;
            report_only.input = crate::model::SecretsInput::Warn;
            guard::check_argv(&report_only, &mut argv.to_vec()).unwrap_or_default()
        },
    })
}

/// Summary of enforcement for human output.
pub fn enforcement_summary(e: &EnforcementStatus) -> String {
    let mut parts = vec![format!(
        "landlock abi {} (fs {}, net {}, scoped {})",
        e.landlock.abi, e.landlock.fs, e.landlock.net, e.landlock.scoped
    )];
    parts.push(format!("seccomp {}", e.seccomp()));
    parts.push(format!("caps dropped {}", e.capabilities_dropped()));
    parts.push(format!(
        "namespaces pid {} mnt {} ipc {} net {}",
        e.pid_namespace, e.mount_namespace, e.ipc_namespace, e.net_namespace
    ));
    // Each layer not fully enforced, by name (`--json`'s `enforcement.layers` says why).
    let short: Vec<String> = e
        .layers
        .iter()
        .filter_map(|(layer, s)| match s {
            sandbox::LayerStatus::Partial { .. } => Some(format!("{layer} partial")),
            sandbox::LayerStatus::NotApplied { .. } => Some(format!("{layer} not applied")),
            _ => None,
        })
        .collect();
    if !short.is_empty() {
        parts.push(format!("not enforced: {}", short.join(", ")));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_config_entries_read_what_git_reads() {
        let text = "[core]\n\thooksPath = .husky ; comment\n\tFsMonitor = \"./x y.sh\"\n[include] path = a.cfg\n[includeIf \"gitdir:/r/\"]\n  path=b.cfg # c\n[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n[alias]\n\tz = !sh ./tools/z.sh\n# [core] pager = no\n";
        let e = git_config_entries(text);
        let keys: Vec<(&str, &str)> = e.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            keys,
            [
                ("core.hookspath", ".husky"),
                ("core.fsmonitor", "./x y.sh"),
                ("include.path", "a.cfg"),
                ("includeif.path", "b.cfg"),
                ("filter.clean", "git-lfs clean -- %f"),
                ("alias.z", "!sh ./tools/z.sh"),
            ]
        );
        assert!(runs_a_program("filter.clean") && runs_a_program("alias.z"));
        assert!(!runs_a_program("user.name"));
    }

    #[test]
    fn narrowing_keeps_inside_replaces_containing_and_drops_the_rest() {
        let roots = [PathBuf::from("/w/a"), PathBuf::from("/w/b/c")];
        let list = vec![
            PathBuf::from("/"),
            PathBuf::from("/w/a/deep"),
            PathBuf::from("/home/u"),
            PathBuf::from("/dev/null"),
            PathBuf::from("/w/b"),
        ];
        let keep_dev = |p: &Path| p.starts_with("/dev");
        assert_eq!(
            narrow(list.clone(), Some(&roots), keep_dev),
            vec![
                PathBuf::from("/dev/null"),
                PathBuf::from("/w/a"),
                PathBuf::from("/w/a/deep"),
                PathBuf::from("/w/b/c"),
            ]
        );
        assert_eq!(narrow(list.clone(), None, keep_dev), list);
        assert!(narrow(list, Some(&[]), |_| false).is_empty());
    }

    #[test]
    fn roots_narrow_a_commands_writable_paths() {
        let d = std::env::temp_dir().join(format!("gateway-narrow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("test setup");
        let top = std::fs::canonicalize(&d).expect("test setup");
        let ws = top.join("ws");
        let sub = ws.join("sub");
        std::fs::create_dir_all(&sub).expect("test setup");
        let state = top.join("state");
        let tmp = top.join("tmp");
        let mut p = Policy::builtin("permissive").expect("test setup");
        let before = plan(&p, &ws, &state, &tmp, false, &[]).expect("test setup");
        assert!(before.confine.write.contains(&PathBuf::from("/")));
        p.narrow_to(vec![sub.clone()]);
        let after = plan(&p, &ws, &state, &tmp, false, &[]).expect("test setup");
        assert_eq!(after.confine.write, vec![sub.clone()]);
        // Reads stay the policy's: commands still need the system's programs.
        assert_eq!(after.confine.read, before.confine.read);
        // The file tools read only inside the roots.
        let fs = fs::root_paths(&p, &state, &ws, false).expect("test setup");
        assert_eq!(fs.read, vec![sub.clone()]);
        assert_eq!(fs.write, vec![sub]);
        let _ = std::fs::remove_dir_all(&d);
    }
}
