//! What the broker's side and the worker's side of the file tools share: how a call is
//! classed ([`FsOp`]'s reads, trash and history), what a tool's body works with ([`Tools`],
//! the state directory's operations as [`StateOps`]), and the errors the bodies return.
//! The call ([`FsOp`]) and the tool's answer ([`FsOutput`]) are defined here. A leaf: it
//! imports nothing of `broker::tools::fs`.

use crate::broker::BrokerError;
use crate::broker::refusal::Refusal;
use crate::fsops::path as fpath;
use crate::fsops::search::{GrepOptions, GrepResult};
use crate::fsops::text::Edit;
use crate::journal::Change;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A file tool call.
#[derive(Debug, Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
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
    /// Move to the trash (directories with `recursive`).
    Remove {
        /// What.
        path: PathBuf,
        /// Directories too.
        recursive: bool,
        /// Delete for good, keeping no copy (policy tool `purge`; undo refuses it).
        #[serde(default)]
        permanent: bool,
    },
    /// Create a directory (and missing parents with `parents`).
    Mkdir {
        /// The directory.
        path: PathBuf,
        /// Create missing parents; an existing directory is then success and no change.
        parents: bool,
    },
    /// Move or rename (never over an existing file; into it if `dst` is a directory).
    Move {
        /// From.
        src: PathBuf,
        /// To.
        dst: PathBuf,
    },
    /// List a directory.
    List {
        /// The directory.
        path: PathBuf,
    },
    /// Files matching a glob.
    Glob {
        /// The pattern (relative to `path`; without `/` it matches names anywhere).
        pattern: String,
        /// Where to look.
        path: PathBuf,
    },
    /// Search file contents.
    Grep {
        /// Where to look.
        path: PathBuf,
        /// What.
        options: GrepOptions,
    },
    /// Restore a trash item (by undoing the removal that put it there).
    TrashRestore {
        /// Its name (`gateway trash list`).
        name: String,
    },
    /// Revert a change (the last one if `None`).
    Undo {
        /// The change id.
        id: Option<u64>,
        /// Show what would change only.
        dry_run: bool,
        /// Revert even if the file changed since (its current content is backed up).
        force: bool,
        /// Without an id: the newest change of any workspace (default: of this one).
        #[serde(default)]
        all: bool,
    },
    /// Diagnostics (hidden): what the confined worker can open at `path` with a plain
    /// `open(2)`, bypassing gateway's own path checks, and the worker's confinement as the
    /// kernel reports it. Shows the kernel's layer on its own.
    Probe {
        /// Any path.
        path: PathBuf,
    },
}

/// The most lines of a diff a file tool's result carries (the rest is in the audit artifact).
pub const DIFF_MAX_LINES: usize = 200;
/// The most bytes of a diff a file tool's result carries.
pub const DIFF_MAX_BYTES: usize = 20 << 10;

/// A file tool's output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FsOutput {
    /// Denied by policy.
    Denied,
    /// The policy asks for approval, and it was not given (or there was no one to ask).
    NotApproved,
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
        /// Lines the change adds (`git diff --stat`'s `+`).
        #[serde(default)]
        lines_added: u64,
        /// Lines it removes.
        #[serde(default)]
        lines_removed: u64,
        /// `diff` is the head of a longer diff (at most [`DIFF_MAX_LINES`] lines and
        /// [`DIFF_MAX_BYTES`] bytes), ending in a marker saying what was left out.
        #[serde(default)]
        diff_truncated: bool,
        /// The whole diff, when `diff` was cut: its size and hash, and the audit artifact
        /// holding it (`gateway log show SEQ` prints it as the record's stdout).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff_whole: Option<crate::audit::StreamDigest>,
    },
    /// A tree operation done (rm, mkdir, mv, restore).
    Done {
        /// What happened, in words.
        what: String,
        /// The journal id.
        change: Option<u64>,
        /// `gateway undo` can revert it (not a permanent deletion).
        undoable: bool,
    },
    /// Paths matching a glob.
    Glob {
        /// Relative to the search directory.
        paths: Vec<String>,
        /// More than shown.
        truncated: bool,
    },
    /// Search results (redacted).
    Grep(GrepResult),
    /// A directory listing.
    List {
        /// The directory.
        path: PathBuf,
        /// (name, kind, size).
        entries: Vec<(String, String, u64)>,
    },
    /// What the confined worker could open ([`FsOp::Probe`]).
    Probe {
        /// Opening for reading: "ok" or the error.
        open: String,
        /// Opening for appending (nothing is written): "ok" or the error.
        write: String,
        /// `Seccomp:`, `NoNewPrivs:` and `CapEff:` of the worker's /proc/self/status.
        status: Vec<String>,
    },
}

impl FsOutput {
    /// A change's output; its stat and bound are the broker's (`fs::bound_diff`).
    pub(crate) fn changed(
        path: PathBuf,
        diff: String,
        change: Option<u64>,
        created: bool,
        removed: bool,
    ) -> FsOutput {
        FsOutput::Changed {
            path,
            diff,
            change,
            created,
            removed,
            lines_added: 0,
            lines_removed: 0,
            diff_truncated: false,
            diff_whole: None,
        }
    }
}

impl FsOp {
    /// Reads only: no journal lock, no crash recovery, no requests to change the journal.
    pub(crate) fn read_only(&self) -> bool {
        matches!(
            self,
            FsOp::Read { .. }
                | FsOp::List { .. }
                | FsOp::Glob { .. }
                | FsOp::Grep { .. }
                | FsOp::Probe { .. }
        )
    }

    /// May move things into or out of the trash.
    pub(crate) fn uses_trash(&self) -> bool {
        matches!(
            self,
            FsOp::Remove { .. } | FsOp::Undo { .. } | FsOp::TrashRestore { .. }
        )
    }

    /// It only reads: protected paths (which it never changes) need not be found for it.
    pub(crate) fn only_reads(&self) -> bool {
        matches!(
            self,
            FsOp::Read { .. }
                | FsOp::List { .. }
                | FsOp::Glob { .. }
                | FsOp::Grep { .. }
                | FsOp::Probe { .. }
        )
    }

    /// Reads the journal and backed-up contents (to revert a change).
    pub(crate) fn reads_history(&self) -> bool {
        matches!(self, FsOp::Undo { .. } | FsOp::TrashRestore { .. })
    }
}

/// A usage error of a file tool, as a broker error.
pub(super) fn usage(e: impl Into<crate::broker::UsageError>) -> BrokerError {
    BrokerError::Usage(e.into())
}

pub(super) fn fs_err(e: crate::fsops::FsError) -> BrokerError {
    match e {
        // A path that leads out of the allowed directories is the policy's no.
        crate::fsops::FsError::Escape { path, why } => Refusal::LeadsOutside {
            path,
            why: why.into(),
        }
        .into(),
        e => BrokerError::Fs(e),
    }
}

pub(super) fn rerr<'a>(
    path: &'a Path,
    what: &'static str,
) -> impl FnOnce(rustix::io::Errno) -> BrokerError + 'a {
    move |e| {
        if e == rustix::io::Errno::XDEV {
            return Refusal::LeadsOutside {
                path: path.to_path_buf(),
                why: "it leads outside the allowed directories".into(),
            }
            .into();
        }
        BrokerError::Io {
            what: format!("{what} {}", path.display()),
            source: std::io::Error::from_raw_os_error(e.raw_os_error()),
        }
    }
}

/// What the file tools need from the state directory, which the confined worker cannot
/// reach: the broker does it on the worker's behalf (`broker::tools::fs::worker`), holding the
/// journal's lock for the whole call.
pub(crate) trait StateOps {
    /// Stores `data` in the backup store (durably); returns its SHA-256.
    fn backup(&mut self, data: &[u8]) -> Result<String, BrokerError>;
    /// Writes a change's intent (durably); returns it with its id.
    fn begin(&mut self, change: Change) -> Result<Change, BrokerError>;
    /// Writes many changes' intents (one append, one sync); returns them with their ids.
    fn begin_many(&mut self, changes: Vec<Change>) -> Result<Vec<Change>, BrokerError>;
    /// The change is done.
    fn commit(&mut self, id: u64) -> Result<(), BrokerError>;
    /// These changes are done (one append, one sync).
    fn commit_many(&mut self, ids: &[u64]) -> Result<(), BrokerError>;
    /// The change was not made.
    fn abort(&mut self, id: u64);
    /// A trash name (and its `.trashinfo`) for `original`.
    fn trash_reserve(&mut self, original: &Path) -> Result<String, BrokerError>;
    /// Forgets a trash item's metadata (it was restored, or never filled).
    fn trash_forget(&mut self, name: &str);
    /// A backup's content, verified against its hash.
    fn read_backup(&mut self, sha256: &str) -> Result<Vec<u8>, BrokerError>;
    /// Is this content in the backup store?
    fn has_backup(&mut self, sha256: &str) -> Result<bool, BrokerError>;
    /// The committed changes of a group that no undo reverted yet, oldest first.
    fn group(&mut self, group: &str) -> Result<Vec<Change>, BrokerError>;
}

/// What a file tool's body works with.
pub(crate) struct Tools<'a> {
    /// The state directory's operations.
    pub(crate) state: &'a mut dyn StateOps,
    /// Redact secrets in what is shown (policy `secrets.output` is not `warn`).
    pub(crate) redact: bool,
    /// The trash's `files/` directory (the worker's landlock lets it in for removals).
    pub(crate) trash_files: PathBuf,
    /// The largest file read or changed (policy `[files] max_size`).
    pub(crate) max_size: u64,
    /// Files replaced whose owner the worker could not keep (it has no capabilities): the
    /// broker gives them back (`broker::tools::fs::worker`).
    pub(crate) owner_fixes: Vec<fpath::OwnerFix>,
}
