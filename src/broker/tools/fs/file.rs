//! One file's content, in the confined worker: reading it beneath the roots ([`read`]) and
//! changing it ([`change`]: write, edit, and undo of either), backing up both states and
//! journalling the intent before the atomic write.
//! A leaf: it imports nothing of `broker::tools::fs` but the call's own types.

use super::roots::{Roots, pick, real_path, under};
use super::types::{Tools, fs_err, usage};
use crate::broker::refusal::{Access, Refusal};
use crate::broker::tools::fs::types::FsOutput;
use crate::broker::{BrokerError, PathProblem, redact_text};
use crate::fsops::path::{self as fpath, Root};
use crate::fsops::text;
use crate::journal::{Change, PathState};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Reads a file's current content beneath the roots: `None` if it does not exist.
pub(super) fn current(
    rs: &[Root],
    deny: &[PathBuf],
    p: &Path,
    ws: &Path,
    max: u64,
) -> Result<Option<(Vec<u8>, u32)>, BrokerError> {
    let (root, rel) = pick(rs, p, ws).ok_or_else(|| {
        BrokerError::from(Refusal::OutsideRoots {
            path: p.to_path_buf(),
            access: Access::Read,
        })
    })?;
    let target = root.final_target(&rel).map_err(fs_err)?;
    match fpath::open_read(root, &target) {
        Ok(mut f) => {
            if let Some(real) = real_path(&f)
                && under(&real, deny)
            {
                return Err(Refusal::DeniedPath {
                    path: p.to_path_buf(),
                }
                .into());
            }
            // not-ws: the metadata of an open descriptor
            let meta = f.metadata().map_err(|e| BrokerError::Io {
                what: format!("reading {}", p.display()),
                source: e,
            })?;
            if meta.len() > max {
                return Err(Refusal::TooLarge {
                    path: p.to_path_buf(),
                    size: meta.len(),
                    max,
                }
                .into());
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

pub(super) fn read(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    path: &Path,
    offset: Option<usize>,
    limit: Option<usize>,
    binary: bool,
) -> Result<FsOutput, BrokerError> {
    let (data, _) = current(&rs.read, &rs.deny, path, ws, t.max_size)
        .map_err(|e| match e {
            // An OS error on the way (a directory this user may not enter): the path asked.
            BrokerError::Fs(source @ crate::fsops::FsError::Io { .. }) => BrokerError::CannotRead {
                path: path.to_path_buf(),
                source,
            },
            e => e,
        })?
        .ok_or_else(|| {
            usage(PathProblem::NoSuchFile {
                path: path.to_path_buf(),
            })
        })?;
    if !binary && let Err(error) = text::shape(&data) {
        return Err(usage(PathProblem::NotText {
            path: path.to_path_buf(),
            size: data.len(),
            error,
        }));
    }
    // Secrets in the file are redacted as in command output.
    let shown = if !t.redact {
        String::from_utf8_lossy(&data).into_owned()
    } else {
        redact_text(&String::from_utf8_lossy(&data))
    };
    let lines: Vec<&str> = shown.split_inclusive('\n').collect();
    let total = lines.len();
    let start = offset.unwrap_or(1).max(1);
    let end = limit.map_or(total, |l| (start - 1).saturating_add(l).min(total));
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
pub(super) enum Target {
    /// This content.
    Write(Vec<u8>),
    /// No file (undo of a creation).
    Remove,
}

/// What a write or an edit would leave is held to the bound of what is read: `[files]
/// max_size` (rule `files.max_size`).
fn within_max(path: &Path, data: &[u8], max: u64) -> Result<(), BrokerError> {
    if data.len() as u64 > max {
        return Err(Refusal::TooLarge {
            path: path.to_path_buf(),
            size: data.len() as u64,
            max,
        }
        .into());
    }
    Ok(())
}

/// A change to one file: `make` gets the old content (None: absent) and returns what the
/// path should hold. Backs up both states, journals the intent, acts atomically, commits.
#[allow(clippy::too_many_arguments)]
pub(super) fn change(
    t: &mut Tools<'_>,
    rs: &Roots,
    ws: &Path,
    path: &Path,
    tool: &str,
    make: impl FnOnce(Option<&[u8]>) -> Result<Target, BrokerError>,
    dry_run: bool,
    undoes: Option<u64>,
) -> Result<FsOutput, BrokerError> {
    let (root, rel) = pick(&rs.write, path, ws).ok_or_else(|| {
        BrokerError::from(Refusal::OutsideRoots {
            path: path.to_path_buf(),
            access: Access::Write,
        })
    })?;
    let abs = root.path.join(&rel);
    let target_rel = root.final_target(&rel).map_err(fs_err)?;
    let target = root.path.join(&target_rel);
    if under(&target, &rs.deny) || under(&target, &rs.protected) {
        return Err(Refusal::ProtectedPath {
            path: path.to_path_buf(),
        }
        .into());
    }
    let old = current(&rs.write, &rs.deny, &abs, ws, t.max_size)?;
    let new = match make(old.as_ref().map(|(d, _)| d.as_slice()))? {
        Target::Write(d) => Some(Some(d)),
        Target::Remove if old.is_some() => Some(None),
        Target::Remove => None,
    };
    if let Some(Some(d)) = &new {
        within_max(path, d, t.max_size)?;
    }
    let old_bytes = old.as_ref().map(|(d, _)| d.as_slice()).unwrap_or_default();
    let Some(new) = new else {
        return Ok(FsOutput::changed(
            path.to_path_buf(),
            String::new(),
            None,
            false,
            false,
        ));
    };
    let shown = target.display().to_string();
    let shown = shown.trim_start_matches('/');
    let diff = text::unified_diff(shown, old_bytes, new.as_deref().unwrap_or_default());
    let diff = redact_text(&diff);
    if dry_run || (old.as_ref().map(|(d, _)| d) == new.as_ref()) {
        return Ok(FsOutput::changed(
            path.to_path_buf(),
            diff,
            None,
            old.is_none(),
            new.is_none(),
        ));
    }
    let mode = old.as_ref().map_or(0o644, |(_, m)| *m);
    let mut state = |d: &[u8]| -> Result<PathState, BrokerError> {
        Ok(PathState::File {
            sha256: t.state.backup(d)?,
            mode,
            size: d.len() as u64,
        })
    };
    let before = match &old {
        Some((d, _)) => state(d)?,
        None => PathState::Absent,
    };
    let after = match &new {
        Some(d) => state(d)?,
        None => PathState::Absent,
    };
    let c = t.state.begin(Change {
        id: 0,
        time: 0,
        tool: tool.into(),
        path: target.clone(),
        before,
        after,
        undoes,
        dest: None,
        trash: None,
        group: None,
        ..Change::default()
    })?;
    let acted = match &new {
        Some(d) => fpath::write_atomic(root, &target_rel, d),
        None => fpath::remove_file(root, &target_rel).map(|()| None),
    };
    match acted {
        Ok(fix) => {
            t.owner_fixes.extend(fix);
            t.state.commit(c.id)?
        }
        Err(e) => {
            t.state.abort(c.id);
            return Err(fs_err(e));
        }
    }
    Ok(FsOutput::changed(
        path.to_path_buf(),
        diff,
        Some(c.id),
        old.is_none(),
        new.is_none(),
    ))
}
