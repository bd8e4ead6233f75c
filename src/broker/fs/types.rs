//! What the broker's side and the worker's side of the file tools share: how a call is
//! classed ([`FsOp`]'s reads, trash and history), what a tool's body works with ([`Tools`],
//! the state directory's operations as [`StateOps`]), and the errors the bodies return.
//! A leaf: it imports nothing of `broker::fs` but the call's own type.

use crate::broker::BrokerError;
use crate::broker::fs::FsOp;
use crate::broker::refusal::Refusal;
use crate::fsops::path as fpath;
use crate::journal::{Change, Phase};
use std::path::{Path, PathBuf};

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

/// Errors specific to file tools, as broker errors.
pub(super) fn usage(msg: impl Into<String>) -> BrokerError {
    BrokerError::Usage(msg.into())
}

pub(super) fn fs_err(e: crate::fsops::FsError) -> BrokerError {
    match e {
        // A path that leads out of the allowed directories is the policy's no.
        crate::fsops::FsError::Escape { path, why } => Refusal::LeadsOutside {
            path,
            why: why.into(),
        }
        .into(),
        e => BrokerError::Usage(e.to_string()),
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
/// reach: the broker does it on the worker's behalf (`broker::worker`), holding the
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
    /// Every change in the journal, oldest first.
    fn changes(&mut self) -> Result<Vec<(Change, Phase)>, BrokerError>;
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
    /// broker gives them back (`broker::worker`).
    pub(crate) owner_fixes: Vec<fpath::OwnerFix>,
}
