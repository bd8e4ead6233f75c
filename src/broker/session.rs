//! A session's two places: its **workspace** (the writable area, fixed when the session
//! starts) and its **working directory** (where `cd` moved it: the base of relative paths and
//! a command's starting directory, nothing more).
//!
//! A session is an MCP server process, a REPL, or the one-shot calls that share a
//! `GATEWAY_SESSION`. Its directories live in `<state>/sessions/<id>.json`. The workspace is
//! pinned there at the session's first call (or first `cd`): a later `cd` — to `~/.local`,
//! to `~`, anywhere — never moves what commands and file tools may write, and never makes a
//! directory the policy refuses as a workspace (one holding credentials) the workspace, so a
//! `cd` cannot brick the session either.

use crate::workspace::wsfs;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where a call runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The writable area (`${WORKSPACE}` in policies): the session's first directory, or
    /// `--cwd`, or (under roots) the client's first root.
    pub workspace: PathBuf,
    /// The working directory: relative paths resolve against it; commands start in it.
    pub cwd: PathBuf,
}

impl Place {
    /// Both places at `dir` (a call with no session, or with `--cwd`).
    pub fn at(dir: &Path) -> Place {
        Place {
            workspace: dir.to_path_buf(),
            cwd: dir.to_path_buf(),
        }
    }
}

/// A session's stored directories.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct SessionDirs {
    /// Where `cd` moved the session.
    pub(crate) cwd: Option<PathBuf>,
    /// The directory before the last `cd` (`cd -`).
    pub(crate) previous: Option<PathBuf>,
    /// The workspace, pinned at the session's first call.
    #[serde(default)]
    pub(crate) workspace: Option<PathBuf>,
}

/// `<state>/sessions/<readable part>-<hash>.json`: the hash of the whole name keeps two
/// names that read alike (`proj.one`, `proj/one`) two sessions. A daemon's client of another
/// uid than the daemon's has sessions of its own (`u<uid>-…`): the same `GATEWAY_SESSION`
/// never reaches another user's session, whose workspace (the writable area its commands
/// get) and `cd` it could otherwise pin or move.
fn session_file(cx: &super::client::Context, state_dir: &Path, session: &str) -> PathBuf {
    use sha2::Digest;
    let safe: String = session
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let h = sha2::Sha256::digest(session.as_bytes());
    let hex = crate::durable::hex(&h[..8]);
    let owner = cx
        .run_as()
        .map_or(String::new(), |u| format!("u{}-", u.uid));
    state_dir
        .join("sessions")
        .join(format!("{owner}{safe}-{hex}.json"))
}

pub(crate) fn load(cx: &super::client::Context, state_dir: &Path, session: &str) -> SessionDirs {
    // not-ws: the session file, in the broker's own state directory
    std::fs::read(session_file(cx, state_dir, session))
        .ok()
        .and_then(|d| serde_json::from_slice(&d).ok())
        .unwrap_or_default()
}

pub(crate) fn save(
    cx: &super::client::Context,
    state_dir: &Path,
    session: &str,
    dirs: &SessionDirs,
) -> std::io::Result<()> {
    let p = session_file(cx, state_dir, session);
    if let Some(d) = p.parent() {
        // not-ws: the session file, in the broker's own state directory
        std::fs::create_dir_all(d)?;
    }
    let data = serde_json::to_vec(dirs).map_err(std::io::Error::other)?;
    // not-ws: the session file, in the broker's own state directory
    crate::durable::write_atomic(&p, &data).map_err(|e| std::io::Error::other(e.to_string()))
}

/// The session's working directory, if `cd` set one (and it still exists).
pub fn cwd(cx: &super::client::Context, state_dir: &Path, session: &str) -> Option<PathBuf> {
    load(cx, state_dir, session).cwd.filter(|p| wsfs::is_dir(p))
}

/// Where a call of `session` runs when it starts at `start` (the front end's directory).
/// The workspace is the one pinned for the session, else `start` — pinned now when `pin`
/// (a named session: later calls keep it whatever `cd` does). The working directory is the
/// session's `cd`, else `start`.
pub fn place(
    cx: &super::client::Context,
    state_dir: &Path,
    session: &str,
    start: &Path,
    pin: bool,
) -> Place {
    let start = wsfs::resolve(start).unwrap_or_else(|| start.to_path_buf());
    let mut dirs = load(cx, state_dir, session);
    let pinned = dirs.workspace.clone().filter(|w| wsfs::is_dir(w));
    let workspace = match pinned {
        Some(w) => w,
        None => {
            if pin && wsfs::is_dir(&start) && wsfs::is_dir(state_dir) {
                dirs.workspace = Some(start.clone());
                // Best effort: an unsaved pin only means the next call pins again.
                let _ = save(cx, state_dir, session, &dirs);
            }
            start.clone()
        }
    };
    let cwd = dirs.cwd.filter(|c| wsfs::is_dir(c)).unwrap_or(start);
    Place { workspace, cwd }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_pinned_and_cd_does_not_move_it() {
        let t = std::env::temp_dir().join(format!("gateway-session-{}", std::process::id()));
        let state = t.join("state");
        let ws = t.join("ws");
        let other = t.join("other");
        for d in [&state, &ws, &other] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let cx = &crate::broker::client::Context::this_process();
        let ws = std::fs::canonicalize(ws).expect("ws");
        let other = std::fs::canonicalize(other).expect("other");
        let p = place(cx, &state, "s1", &ws, true);
        assert_eq!(p, Place::at(&ws));
        let mut d = load(cx, &state, "s1");
        d.cwd = Some(other.clone());
        save(cx, &state, "s1", &d).expect("save");
        // A later call from anywhere keeps the pinned workspace; its cwd is the session's.
        let p = place(cx, &state, "s1", &other, true);
        assert_eq!(p.workspace, ws);
        assert_eq!(p.cwd, other);
        // Unpinned: each call's start is its workspace.
        let p = place(cx, &state, "s2", &other, false);
        assert_eq!(p, Place::at(&other));
        assert!(load(cx, &state, "s2").workspace.is_none());
        // Names that read alike are distinct sessions.
        assert_ne!(
            session_file(cx, &state, "proj.one"),
            session_file(cx, &state, "proj/one")
        );
        assert_ne!(
            session_file(cx, &state, "../x"),
            session_file(cx, &state, "__x")
        );
        let _ = std::fs::remove_dir_all(&t);
    }
}
