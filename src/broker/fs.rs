//! File tools: read, write, edit, history, undo. Each call is decided by the policy, resolved
//! beneath the allowed directories at the moment of use (`fsops::path`), backed up and
//! journalled before a change (`journal`), and recorded in the audit log.
//!
//! The allowed directories are the policy's sandbox: the writable trees for changes, the
//! readable ones for reads, minus denied, hidden and (for changes) protected paths, which are
//! checked on the file actually opened.

use super::{BrokerError, plan, redact_text, workspace};
use crate::audit;
use crate::fsops::path::{self as fpath, Root};
use crate::fsops::text;
use crate::journal;

pub use crate::fsops::text::Edit;
pub use crate::journal::{Change, PathState, Phase};
use crate::model::{Decision, Effect, Tool, ToolCall};
use crate::policy::Policy;
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest file `read` returns (a window of lines of a bigger text file is fine).
pub const READ_MAX: u64 = 64 << 20;

/// Who asks, and where.
pub struct FsContext<'a> {
    /// The policy.
    pub policy: &'a Policy,
    /// The workspace (the session's virtual cwd).
    pub cwd: PathBuf,
    /// State directory.
    pub state_dir: PathBuf,
    /// Session id.
    pub session: String,
    /// Caller.
    pub caller: audit::Caller,
}

/// A file tool call.
#[derive(Debug)]
pub enum FsOp {
    /// Read lines `offset..offset+limit` (1-based offset).
    Read {
        /// The file.
        path: PathBuf,
        /// First line (1-based).
        offset: Option<usize>,
        /// Lines.
        limit: Option<usize>,
        /// Return binary files too (lossy).
        binary: bool,
    },
    /// Create or replace.
    Write {
        /// The file.
        path: PathBuf,
        /// New content.
        content: Vec<u8>,
    },
    /// Edit in place.
    Edit {
        /// The file.
        path: PathBuf,
        /// The edits, all or nothing.
        edits: Vec<Edit>,
        /// Show the diff only.
        dry_run: bool,
    },
    /// Revert a change (the last one if `None`).
    Undo {
        /// The change id.
        id: Option<u64>,
        /// Show what would change only.
        dry_run: bool,
        /// Revert even if the file changed since (its current content is backed up).
        force: bool,
    },
}

/// What a file tool call returned.
#[derive(Debug, Serialize)]
pub struct FsResult {
    /// The decision.
    pub decision: Decision,
    /// What the tool says (text, lines, diff).
    pub output: FsOutput,
    /// The audit record's seq.
    pub audit_seq: u64,
}

/// A file tool's output.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FsOutput {
    /// Denied by policy.
    Denied,
    /// Lines of a file (redacted).
    Read {
        /// The file.
        path: PathBuf,
        /// (line number, text) pairs.
        lines: Vec<(usize, String)>,
        /// Lines in the file.
        total_lines: usize,
        /// Not all lines asked for are shown.
        truncated: bool,
    },
    /// A change was made (or, dry run, would be).
    Changed {
        /// The file.
        path: PathBuf,
        /// Unified diff.
        diff: String,
        /// The journal id (none on dry runs or when nothing changed).
        change: Option<u64>,
        /// Created (did not exist).
        created: bool,
        /// Removed (undo of a creation).
        removed: bool,
    },
}

/// Errors specific to file tools, as broker errors.
fn usage(msg: impl Into<String>) -> BrokerError {
    BrokerError::Usage(msg.into())
}

fn fs_err(e: crate::fsops::FsError) -> BrokerError {
    BrokerError::Usage(e.to_string())
}

fn j_err(e: journal::JournalError) -> BrokerError {
    BrokerError::Io {
        what: "journal".into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// The allowed roots for reading or changing, from the policy's sandbox plan.
struct Roots {
    /// Readable and writable trees.
    read: Vec<Root>,
    write: Vec<Root>,
    deny: Vec<PathBuf>,
    protected: Vec<PathBuf>,
}

fn roots(ctx: &FsContext<'_>, ws: &Path) -> Result<Roots, BrokerError> {
    let tmp = std::env::temp_dir();
    let p = plan(ctx.policy, ws, &ctx.state_dir, &tmp, false, &[])?;
    let open =
        |v: &[PathBuf]| -> Vec<Root> { v.iter().filter_map(|p| Root::open(p).ok()).collect() };
    let mut deny = p.confine.deny.clone();
    deny.extend(p.confine.hidden.iter().cloned());
    deny.push(ctx.state_dir.clone());
    let mut readable = p.confine.read.clone();
    readable.extend(p.confine.write.iter().cloned());
    Ok(Roots {
        read: open(&readable),
        write: open(&p.confine.write),
        deny,
        protected: p.confine.protected.clone(),
    })
}

/// The root (the deepest) that contains `p`, and the path relative to it.
fn pick<'a>(roots: &'a [Root], p: &Path, cwd: &Path) -> Option<(&'a Root, PathBuf)> {
    roots
        .iter()
        .filter_map(|r| r.relative(p, cwd).ok().map(|rel| (r, rel)))
        .max_by_key(|(r, _)| r.path.components().count())
}

/// The real path of an open file (what was actually opened, after every link).
fn real_path(f: &std::fs::File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()
}

fn under(p: &Path, list: &[PathBuf]) -> bool {
    list.iter().any(|d| p.starts_with(d))
}

/// Runs a file tool call: decide, act, record.
pub fn run(ctx: &FsContext<'_>, op: FsOp) -> Result<FsResult, BrokerError> {
    super::ensure_state_dir(&ctx.state_dir)?;
    let mut log = audit::AuditLog::open(&ctx.state_dir, audit::Checkpoints::EveryRecord)?;
    let ws = workspace(&ctx.cwd)?;
    let (tool, name, path) = match &op {
        FsOp::Read { path, .. } => (Tool::Read, "fs.read", Some(path.clone())),
        FsOp::Write { path, .. } => (Tool::Write, "fs.write", Some(path.clone())),
        FsOp::Edit { path, .. } => (Tool::Edit, "fs.edit", Some(path.clone())),
        FsOp::Undo { .. } => (Tool::Write, "undo", None),
    };
    let abs = path.as_ref().map(|p| {
        if p.is_absolute() {
            p.clone()
        } else {
            ws.join(p)
        }
    });
    // Undo decides on the path of the change it reverts.
    let undo_target = match &op {
        FsOp::Undo { id, .. } => Some(find_change(&ctx.state_dir, *id)?),
        _ => None,
    };
    let subject = abs
        .clone()
        .or_else(|| undo_target.as_ref().map(|c| c.path.clone()))
        .unwrap_or_default();
    let mut decision = ctx.policy.evaluate(
        &ToolCall {
            tool,
            argv: vec![],
            paths: vec![subject.clone()],
            cwd: ws.clone(),
        },
        &super::shell_env(&ws),
    );
    super::guard::redact_decision(&mut decision);
    let mut rec = audit::Record {
        session: ctx.session.clone(),
        caller: ctx.caller.clone(),
        tool: name.into(),
        args: describe(&op),
        cwd: ws.display().to_string(),
        policy: ctx.policy.name.clone(),
        decision: super::record_decision(Some(&decision), None),
        ..audit::Record::default()
    };
    let res = if decision.effect != Effect::Allow {
        Ok(FsOutput::Denied)
    } else {
        act(ctx, &ws, op, undo_target)
    };
    match &res {
        Ok(FsOutput::Changed { change, .. }) => {
            rec.exit_code = Some(0);
            if let Some(id) = change {
                rec.args.push(format!("journal={id}"));
            }
        }
        Ok(FsOutput::Read { .. }) => rec.exit_code = Some(0),
        Ok(FsOutput::Denied) => {}
        Err(e) => rec.error = Some(redact_text(&e.to_string())),
    }
    let seq = log.append(&mut rec)?;
    res.map(|output| FsResult {
        decision,
        output,
        audit_seq: seq,
    })
}

/// The record's arguments: paths and sizes, never contents.
fn describe(op: &FsOp) -> Vec<String> {
    match op {
        FsOp::Read {
            path,
            offset,
            limit,
            ..
        } => vec![
            path.display().to_string(),
            format!("offset={}", offset.unwrap_or(1)),
            format!("limit={}", limit.map_or("all".into(), |l| l.to_string())),
        ],
        FsOp::Write { path, content } => vec![
            path.display().to_string(),
            format!("bytes={}", content.len()),
        ],
        FsOp::Edit {
            path,
            edits,
            dry_run,
        } => vec![
            path.display().to_string(),
            format!("edits={}", edits.len()),
            format!("dry_run={dry_run}"),
        ],
        FsOp::Undo { id, dry_run, force } => vec![
            format!("id={}", id.map_or("last".into(), |i| i.to_string())),
            format!("dry_run={dry_run}"),
            format!("force={force}"),
        ],
    }
}

fn act(
    ctx: &FsContext<'_>,
    ws: &Path,
    op: FsOp,
    undo_target: Option<Change>,
) -> Result<FsOutput, BrokerError> {
    let rs = roots(ctx, ws)?;
    match op {
        FsOp::Read {
            path,
            offset,
            limit,
            binary,
        } => read(ctx, &rs, ws, &path, offset, limit, binary),
        FsOp::Write { path, content } => change(
            ctx,
            &rs,
            ws,
            &path,
            "fs.write",
            |_| Ok(Target::Write(content.clone())),
            false,
            None,
        ),
        FsOp::Edit {
            path,
            edits,
            dry_run,
        } => change(
            ctx,
            &rs,
            ws,
            &path,
            "fs.edit",
            |old| {
                let Some(old) = old else {
                    return Err(usage(format!(
                        "{}: no such file (create it with `fs write`)",
                        path.display()
                    )));
                };
                text::apply(old, &edits)
                    .map(Target::Write)
                    .map_err(|e| usage(format!("{}: {e}", path.display())))
            },
            dry_run,
            None,
        ),
        FsOp::Undo { dry_run, force, .. } => {
            let c = undo_target.ok_or_else(|| usage("nothing to undo"))?;
            undo(ctx, &rs, ws, &c, dry_run, force)
        }
    }
}

/// Reads a file's current content beneath the roots: `None` if it does not exist.
fn current(
    rs: &[Root],
    deny: &[PathBuf],
    p: &Path,
    ws: &Path,
) -> Result<Option<(Vec<u8>, u32)>, BrokerError> {
    let (root, rel) = pick(rs, p, ws).ok_or_else(|| {
        usage(format!(
            "refused: {}: outside the directories this policy allows",
            p.display()
        ))
    })?;
    let target = root.final_target(&rel).map_err(fs_err)?;
    match fpath::open_read(root, &target) {
        Ok(mut f) => {
            if let Some(real) = real_path(&f)
                && under(&real, deny)
            {
                return Err(usage(format!(
                    "refused: {}: the policy denies access to it",
                    p.display()
                )));
            }
            let meta = f.metadata().map_err(|e| BrokerError::Io {
                what: format!("reading {}", p.display()),
                source: e,
            })?;
            if meta.len() > READ_MAX {
                return Err(usage(format!(
                    "{}: {} bytes, more than the {READ_MAX} bytes file tools handle",
                    p.display(),
                    meta.len()
                )));
            }
            let mut v = Vec::with_capacity(meta.len() as usize);
            f.read_to_end(&mut v).map_err(|e| BrokerError::Io {
                what: format!("reading {}", p.display()),
                source: e,
            })?;
            use std::os::unix::fs::PermissionsExt;
            Ok(Some((v, meta.permissions().mode() & 0o7777)))
        }
        Err(crate::fsops::FsError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        Err(e) => Err(fs_err(e)),
    }
}

fn read(
    ctx: &FsContext<'_>,
    rs: &Roots,
    ws: &Path,
    path: &Path,
    offset: Option<usize>,
    limit: Option<usize>,
    binary: bool,
) -> Result<FsOutput, BrokerError> {
    let (data, _) = current(&rs.read, &rs.deny, path, ws)?
        .ok_or_else(|| usage(format!("{}: no such file", path.display())))?;
    if !binary && let Err(e) = text::shape(&data) {
        return Err(usage(format!(
            "{}: {e} (pass --binary to read it anyway)",
            path.display()
        )));
    }
    // Secrets in the file are redacted as in command output.
    let shown = if ctx.policy.secrets.output == crate::model::SecretsOutput::Warn {
        String::from_utf8_lossy(&data).into_owned()
    } else {
        redact_text(&String::from_utf8_lossy(&data))
    };
    let lines: Vec<&str> = shown.split_inclusive('\n').collect();
    let total = lines.len();
    let start = offset.unwrap_or(1).max(1);
    let end = limit.map_or(total, |l| (start - 1 + l).min(total));
    let picked: Vec<(usize, String)> = lines
        .iter()
        .enumerate()
        .skip(start - 1)
        .take(end.saturating_sub(start - 1))
        .map(|(i, l)| (i + 1, l.trim_end_matches(['\n', '\r']).to_string()))
        .collect();
    Ok(FsOutput::Read {
        path: path.to_path_buf(),
        truncated: start > 1 || end < total,
        lines: picked,
        total_lines: total,
    })
}

/// What a change leaves at the path.
enum Target {
    /// This content.
    Write(Vec<u8>),
    /// No file (undo of a creation).
    Remove,
}

/// A change to one file: `make` gets the old content (None: absent) and returns what the
/// path should hold. Backs up both states, journals the intent, acts atomically, commits.
#[allow(clippy::too_many_arguments)]
fn change(
    ctx: &FsContext<'_>,
    rs: &Roots,
    ws: &Path,
    path: &Path,
    tool: &str,
    make: impl FnOnce(Option<&[u8]>) -> Result<Target, BrokerError>,
    dry_run: bool,
    undoes: Option<u64>,
) -> Result<FsOutput, BrokerError> {
    let (root, rel) = pick(&rs.write, path, ws).ok_or_else(|| {
        usage(format!(
            "refused: {}: outside the directories this policy lets commands change",
            path.display()
        ))
    })?;
    let abs = root.path.join(&rel);
    let target_rel = root.final_target(&rel).map_err(fs_err)?;
    let target = root.path.join(&target_rel);
    if under(&target, &rs.deny) || under(&target, &rs.protected) {
        return Err(usage(format!(
            "refused: {}: protected by the policy (read-only or denied)",
            path.display()
        )));
    }
    let lock = journal::lock(&ctx.state_dir).map_err(j_err)?;
    recover(&ctx.state_dir, &lock)?;
    let old = current(&rs.write, &rs.deny, &abs, ws)?;
    let new = match make(old.as_ref().map(|(d, _)| d.as_slice()))? {
        Target::Write(d) => Some(Some(d)),
        Target::Remove if old.is_some() => Some(None),
        Target::Remove => None,
    };
    let old_bytes = old.as_ref().map(|(d, _)| d.as_slice()).unwrap_or_default();
    let Some(new) = new else {
        return Ok(FsOutput::Changed {
            path: path.to_path_buf(),
            diff: String::new(),
            change: None,
            created: false,
            removed: false,
        });
    };
    let shown = target.display().to_string();
    let shown = shown.trim_start_matches('/');
    let diff = text::unified_diff(shown, old_bytes, new.as_deref().unwrap_or_default());
    let diff = redact_text(&diff);
    if dry_run || (old.as_ref().map(|(d, _)| d) == new.as_ref()) {
        return Ok(FsOutput::Changed {
            path: path.to_path_buf(),
            diff,
            change: None,
            created: old.is_none(),
            removed: new.is_none(),
        });
    }
    let mode = old.as_ref().map_or(0o644, |(_, m)| *m);
    let state = |d: &[u8]| -> Result<PathState, BrokerError> {
        Ok(PathState::File {
            sha256: journal::backup(&ctx.state_dir, d).map_err(j_err)?,
            mode,
            size: d.len() as u64,
        })
    };
    let before = match &old {
        Some((d, _)) => state(d)?,
        None => PathState::Absent,
    };
    let c = journal::begin(
        &ctx.state_dir,
        &lock,
        Change {
            id: 0,
            time: 0,
            tool: tool.into(),
            path: target.clone(),
            before,
            after: match &new {
                Some(d) => state(d)?,
                None => PathState::Absent,
            },
            undoes,
        },
    )
    .map_err(j_err)?;
    let acted = match &new {
        Some(d) => fpath::write_atomic(root, &target_rel, d),
        None => fpath::remove_file(root, &target_rel),
    };
    match acted {
        Ok(()) => journal::commit(&ctx.state_dir, c.id).map_err(j_err)?,
        Err(e) => {
            let _ = journal::abort(&ctx.state_dir, c.id);
            return Err(fs_err(e));
        }
    }
    Ok(FsOutput::Changed {
        path: path.to_path_buf(),
        diff,
        change: Some(c.id),
        created: old.is_none(),
        removed: new.is_none(),
    })
}

/// The change to undo: the given id, or the newest committed change not yet undone.
fn find_change(state_dir: &Path, id: Option<u64>) -> Result<Change, BrokerError> {
    let all = journal::changes(state_dir).map_err(j_err)?;
    let committed: Vec<&Change> = all
        .iter()
        .filter(|(_, p)| *p == journal::Phase::Committed)
        .map(|(c, _)| c)
        .collect();
    match id {
        Some(id) => committed
            .iter()
            .find(|c| c.id == id)
            .map(|c| (*c).clone())
            .ok_or_else(|| {
                usage(format!(
                    "no committed change {id} in the journal (see `gateway history`)"
                ))
            }),
        None => {
            let undone: Vec<u64> = committed.iter().filter_map(|c| c.undoes).collect();
            committed
                .iter()
                .rev()
                .find(|c| c.undoes.is_none() && !undone.contains(&c.id))
                .map(|c| (*c).clone())
                .ok_or_else(|| usage("nothing to undo"))
        }
    }
}

fn undo(
    ctx: &FsContext<'_>,
    rs: &Roots,
    ws: &Path,
    c: &Change,
    dry_run: bool,
    force: bool,
) -> Result<FsOutput, BrokerError> {
    let want = match &c.before {
        PathState::Absent => None,
        PathState::File { sha256, .. } => {
            Some(journal::read_backup(&ctx.state_dir, sha256).map_err(j_err)?)
        }
    };
    let after = match &c.after {
        PathState::Absent => None,
        PathState::File { sha256, .. } => journal::read_backup(&ctx.state_dir, sha256).ok(),
    };
    let path = c.path.clone();
    let id = c.id;
    change(
        ctx,
        rs,
        ws,
        &path,
        "undo",
        |now| {
            let changed_since = now != after.as_deref();
            if changed_since && !force {
                let d = text::unified_diff(
                    &path.display().to_string(),
                    after.as_deref().unwrap_or_default(),
                    now.unwrap_or_default(),
                );
                return Err(usage(format!(
                    "refused: {} changed since change {id}; undoing would lose that (pass --force to undo anyway: the current content is backed up first). What changed since:\n{}",
                    path.display(),
                    redact_text(&d)
                )));
            }
            Ok(match want {
                Some(d) => Target::Write(d),
                None => Target::Remove,
            })
        },
        dry_run,
        Some(id),
    )
}

/// Every change in the journal, newest last.
pub fn history(state_dir: &Path) -> Result<Vec<(Change, journal::Phase)>, BrokerError> {
    journal::changes(state_dir).map_err(j_err)
}

/// Completes or rolls back changes a crash left pending (see [`journal::recover`]).
fn recover(state_dir: &Path, lock: &journal::Lock) -> Result<(), BrokerError> {
    let now = |p: &Path| -> Option<PathState> {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::symlink_metadata(p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(PathState::Absent),
            Err(_) => None,
            Ok(m) if m.is_file() => std::fs::read(p).ok().map(|d| PathState::File {
                sha256: journal::sha256_hex(&d),
                mode: m.permissions().mode() & 0o7777,
                size: d.len() as u64,
            }),
            Ok(_) => None,
        }
    };
    // Temporary files of writers killed mid-write (`.NAME.gateway-tmp-PID-N` next to a
    // pending change's file, PID no longer running) are removed.
    for (c, phase) in journal::changes(state_dir).map_err(j_err)? {
        if phase != Phase::Pending {
            continue;
        }
        let (Some(dir), Some(name)) = (c.path.parent(), c.path.file_name()) else {
            continue;
        };
        let prefix = format!(".{}.gateway-tmp-", name.to_string_lossy());
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            let Some(rest) = n.strip_prefix(&prefix) else {
                continue;
            };
            let pid = rest.split('-').next().unwrap_or("");
            let alive = !pid.is_empty() && Path::new("/proc").join(pid).exists();
            if !alive && e.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    journal::recover(state_dir, lock, &now).map_err(j_err)?;
    Ok(())
}
