//! The typed errors of a request that names something wrong ([`UsageError`], exit 122) and of
//! a request that conflicts with the machine's state ([`Conflict`]). Each variant's message is
//! its `#[error]` text; nothing branches on it.
//!
//! [`UsageError`] is serialized: the file tools' worker (a separate process) sends it back to
//! the broker as it is (`tools/fs/worker.rs`).

use crate::fsops::text::TextError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A request that names something wrong: no command, a workspace that may not be one, a
/// path that is not what the file tool needs, nothing to undo. Exit 122, `error.code` `usage`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageError {
    /// `exec` without a command.
    #[error("missing command: gateway exec -- CMD [ARGS...]")]
    MissingCommand,
    /// The program named is the empty string.
    #[error("the command is empty")]
    EmptyCommand,
    /// The workspace (`--cwd`, a session's) cannot be one.
    #[error(transparent)]
    Workspace(#[from] WorkspaceProblem),
    /// `fs cd` to somewhere it cannot go.
    #[error(transparent)]
    Cd(#[from] CdProblem),
    /// `scan`'s paths, baseline or `--exclude`.
    #[error(transparent)]
    Scan(#[from] ScanProblem),
    /// A file tool's path is not what the operation needs.
    #[error(transparent)]
    Path(#[from] PathProblem),
    /// `undo`, `trash restore`: nothing to revert, or a revert that would lose something.
    #[error(transparent)]
    Undo(#[from] UndoProblem),
    /// `log verify --key FILE`: the file's first line is not a verifier key.
    #[error(
        "{}: not a verifier key (expected the first line `gateway keys export` prints)",
        path.display()
    )]
    NotAVerifierKey {
        /// The file.
        path: PathBuf,
    },
    /// `apply`, `discard`, `changes ID`: no held change set of the caller's has that id.
    #[error("no held change set {id} (`gateway changes` lists them)")]
    NoChangeSet {
        /// As asked.
        id: String,
    },
    /// `apply`, `discard`: the set's run has not ended.
    #[error(
        "change set {id} belongs to a run that has not ended; wait for it (`gateway changes` says when it is held)"
    )]
    ChangeSetRunning {
        /// As asked.
        id: String,
    },
    /// `exec --review`: the run's changes cannot be held apart (the overlay cannot capture
    /// it).
    #[error("--review: this run's changes cannot be held for review: {why}")]
    ReviewUnavailable {
        /// Why the overlay does not capture it.
        why: String,
    },
}

/// Why a directory cannot be the workspace.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceProblem {
    /// It does not exist.
    #[error("--cwd {}: no such directory", path.display())]
    NoSuchDirectory {
        /// As asked.
        path: PathBuf,
    },
    /// It is not a directory.
    #[error("--cwd {}: not a directory", path.display())]
    NotADirectory {
        /// As asked.
        path: PathBuf,
    },
    /// It is `/`.
    #[error("the workspace (--cwd) is /: run from a project directory")]
    Root,
    /// It is or lies in a system directory.
    #[error(
        "the workspace {} is not allowed: it is or lies in {}, a system directory (device nodes, kernel interfaces, the system's programs) that commands must never change; run from a project directory",
        path.display(),
        system.display()
    )]
    SystemDir {
        /// The workspace.
        path: PathBuf,
        /// The system directory.
        system: PathBuf,
    },
    /// It contains or lies in a path the policy never exposes.
    #[error(
        "the workspace {} is not allowed: it contains or lies in {}, which policy `{policy}` never exposes; run from a project directory",
        path.display(),
        denied.display()
    )]
    Denied {
        /// The workspace.
        path: PathBuf,
        /// The denied path.
        denied: PathBuf,
        /// The policy's name.
        policy: String,
    },
    /// The caller cannot open it with its own rights (a daemon client's directory).
    #[error(
        "the workspace {} cannot be opened by uid {uid}: {why}; run from a directory you can read",
        path.display()
    )]
    Unreadable {
        /// The workspace.
        path: PathBuf,
        /// The caller's uid.
        uid: u32,
        /// The OS error, as said.
        why: String,
    },
}

/// Why `fs cd` cannot go there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CdProblem {
    /// `cd -` before any `cd`.
    #[error("cd -: no previous directory in this session")]
    NoPrevious,
    /// Not a directory.
    #[error("cd {target}: not a directory")]
    NotADirectory {
        /// As asked.
        target: String,
    },
    /// Nothing there.
    #[error("cd {target}: no such directory")]
    NoSuchDirectory {
        /// As asked.
        target: String,
    },
}

/// What is wrong with a `scan` request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanProblem {
    /// No paths.
    #[error("scan: give at least one file or directory")]
    NoPaths,
    /// A path that does not exist.
    #[error("scan: {}: no such file or directory", path.display())]
    NoSuchPath {
        /// As given.
        path: PathBuf,
    },
    /// A baseline over the size limit.
    #[error("baseline {}: larger than {max} bytes; give a smaller one", path.display())]
    BaselineTooLarge {
        /// The baseline.
        path: PathBuf,
        /// The limit.
        max: u64,
    },
    /// A baseline that does not parse (only the position is said: serde's message may quote
    /// the file's content).
    #[error(
        "baseline {}: not a gateway baseline (at line {line}, column {column}); remove it or give another path",
        path.display()
    )]
    NotABaseline {
        /// The baseline.
        path: PathBuf,
        /// Where it stops parsing.
        line: usize,
        /// Ditto.
        column: usize,
    },
    /// An `--exclude` glob that does not parse (`why`: the glob library's words).
    #[error("--exclude {glob}: {why}")]
    BadExclude {
        /// The glob.
        glob: String,
        /// Why.
        why: String,
    },
    /// The `--exclude` globs together do not build.
    #[error("--exclude: {why}")]
    BadExcludes {
        /// Why (the glob library's words).
        why: String,
    },
}

/// A file tool's path that is not what the operation needs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathProblem {
    /// `fs read` of nothing.
    #[error("{}: no such file", path.display())]
    NoSuchFile {
        /// The path.
        path: PathBuf,
    },
    /// `fs edit` of nothing.
    #[error("{}: no such file (create it with `fs write`)", path.display())]
    NoFileToEdit {
        /// The path.
        path: PathBuf,
    },
    /// An edit that cannot be made.
    #[error("{}: {error}", path.display())]
    Edit {
        /// The file.
        path: PathBuf,
        /// Why.
        error: TextError,
    },
    /// `fs read` (without `--binary`) of a file that is not text.
    #[error("{}", not_text(path, *size, error))]
    NotText {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: usize,
        /// What makes it not text.
        error: TextError,
    },
    /// Not a file, directory or symbolic link (a FIFO, a device).
    #[error("{}: not a file, directory or symbolic link", path.display())]
    NotFileDirOrLink {
        /// The path.
        path: PathBuf,
    },
    /// Nothing there to remove or move.
    #[error("{}: no such file or directory", path.display())]
    NoSuchPath {
        /// The path.
        path: PathBuf,
    },
    /// A directory, to remove without `-r`.
    #[error("{}: is a directory (pass -r to {what} with its contents)", path.display())]
    IsADirectory {
        /// The path.
        path: PathBuf,
        /// What -r would do.
        what: String,
    },
    /// The trash is on another file system.
    #[error(
        "{}: the state directory is on another file system, so it cannot be moved to the trash; remove it with a shell command",
        path.display()
    )]
    TrashOnOtherFileSystem {
        /// The path.
        path: PathBuf,
    },
    /// `fs mkdir`: a component that is not a directory.
    #[error("{}: exists and is not a directory", path.display())]
    NotADirectory {
        /// The component.
        path: PathBuf,
    },
    /// `fs mkdir` without `-p` of an existing directory.
    #[error("{}: already exists (pass -p to accept an existing directory)", path.display())]
    AlreadyExists {
        /// The path.
        path: PathBuf,
    },
    /// `fs mkdir` without `-p` under a missing directory.
    #[error("{}: missing parent directory (pass -p to create it)", path.display())]
    MissingParent {
        /// The first missing directory.
        path: PathBuf,
    },
    /// Moving back what changed since it was moved.
    #[error(
        "refused: {} changed since it was moved there; pass --force to move it back anyway",
        path.display()
    )]
    ChangedSinceMoved {
        /// Where it is.
        path: PathBuf,
    },
    /// A move onto something.
    #[error("refused: {} exists; gateway never moves over a file", path.display())]
    DestinationExists {
        /// The destination.
        path: PathBuf,
    },
    /// No free temporary name beside the path.
    #[error("{}: no free temporary name next to it", path.display())]
    NoTempName {
        /// The path.
        path: PathBuf,
    },
}

/// The words of [`PathProblem::NotText`]: why a read of `path` (`size` bytes) shows no text,
/// and how to get its bytes (a read is not an edit, so the edit's wording, "refusing to edit",
/// "convert it first", is not used).
fn not_text(path: &std::path::Path, size: usize, e: &TextError) -> String {
    let what = match e {
        TextError::Binary { offset } => format!("a binary file (NUL byte at offset {offset})"),
        TextError::NotUtf8 { line, offset } => {
            format!("not UTF-8 text (invalid byte at line {line}, byte offset {offset})")
        }
        other => other.to_string(),
    };
    let shown = crate::shown::arg_shown(&path.to_string_lossy()).into_owned();
    format!(
        "{}: {what}, {size} bytes: not shown as text. To see it: `gateway fs read --binary {shown}` (undecodable bytes replaced), or every byte in hex with `gateway exec -- od -A x -t x1z {shown}` (MCP: exec `od -A x -t x1z {shown}`)",
        path.display()
    )
}

/// A path of a group to undo that is not what the command left.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupConflict {
    /// The path.
    pub path: PathBuf,
    /// What is there now, in words ("a file of 3 bytes").
    pub now: String,
    /// What the command left, in words.
    pub left: String,
}

/// Why `undo` or `trash restore` reverts nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UndoProblem {
    /// `undo ID` of an id the journal does not hold committed.
    #[error("no committed change {id} in the journal (see `gateway history --all`)")]
    NoSuchChange {
        /// The id.
        id: u64,
    },
    /// Nothing left to undo anywhere (the file tool's own check).
    #[error("nothing to undo")]
    Nothing,
    /// Nothing left to undo in this workspace, but in others.
    #[error(
        "nothing to undo in {} ({elsewhere} change(s) of other workspaces: see `gateway history --all`; `gateway undo --all` or `gateway undo ID` reverts one)",
        workspace.display()
    )]
    NothingHereButElsewhere {
        /// The workspace.
        workspace: PathBuf,
        /// Changes open elsewhere.
        elsewhere: usize,
    },
    /// Nothing left to undo in this workspace.
    #[error("nothing to undo in {}", workspace.display())]
    NothingIn {
        /// The workspace.
        workspace: PathBuf,
    },
    /// `trash restore NAME` of no such item.
    #[error("no trash item {name} (see `gateway trash list`)")]
    NoTrashItem {
        /// The name.
        name: String,
    },
    /// The worker got no trash item to restore.
    #[error("no such trash item")]
    NoTrashItemGiven,
    /// The removal's trash item was emptied for good.
    #[error(
        "change {id}: the trash item {name} (removed from {}) was emptied for good (gateway trash empty at {when}); nothing to restore",
        path.display()
    )]
    TrashEmptied {
        /// The change.
        id: u64,
        /// The trash item.
        name: String,
        /// Where it was removed from.
        path: PathBuf,
        /// When it was emptied.
        when: String,
    },
    /// The trash item is not there.
    #[error(
        "the trash item {name} is gone (emptied for good by `gateway trash empty`, or removed from the trash by hand); nothing to restore"
    )]
    TrashItemGone {
        /// The trash item.
        name: String,
    },
    /// A permanent deletion: nothing kept.
    #[error(
        "change {id} deleted {} permanently (fs rm --permanent): no copy was kept, so it cannot be undone (earlier changes: `gateway undo ID`, see `gateway history`)",
        path.display()
    )]
    Permanent {
        /// The change.
        id: u64,
        /// What it deleted.
        path: PathBuf,
    },
    /// The path changed since the change (a tree operation).
    #[error(
        "refused: {} changed since change {id}; pass --force to undo anyway",
        path.display()
    )]
    ChangedSince {
        /// The path.
        path: PathBuf,
        /// The change.
        id: u64,
    },
    /// A file's content changed since the change.
    #[error(
        "refused: {} changed since change {id}; undoing would lose that (pass --force to undo anyway: the current content is backed up first). What changed since:\n{diff}",
        path.display()
    )]
    ContentChangedSince {
        /// The file.
        path: PathBuf,
        /// The change.
        id: u64,
        /// The unified diff from what the change left to what is there (redacted).
        diff: String,
    },
    /// The contents before are not in the backup store.
    #[error(
        "cannot undo change {id}: the content before it of {} is not in the backup store, so it cannot be brought back: {}",
        if missing.len() == 1 { "this file" } else { "these files" },
        missing.iter().map(|(p, why)| format!("{} ({why})", p.display())).collect::<Vec<_>>().join("; ")
    )]
    NotBackedUp {
        /// The change.
        id: u64,
        /// Each file, and why its content is missing.
        missing: Vec<(PathBuf, String)>,
    },
    /// A file to restore is no longer a regular file.
    #[error("{}: not a regular file now", path.display())]
    NotRegularNow {
        /// The path.
        path: PathBuf,
    },
    /// Something that is neither file, directory nor link is in the way.
    #[error(
        "{}: not a file, directory or symbolic link now; move it away first",
        path.display()
    )]
    NotFileDirOrLinkNow {
        /// The path.
        path: PathBuf,
    },
    /// The group was reverted already.
    #[error("the changes of {group} were undone already")]
    AlreadyUndone {
        /// The group.
        group: String,
    },
    /// Paths of the group changed since the command ran.
    #[error(
        "refused: changed since the command ran: {}; pass --force to undo anyway (what is there now is backed up first)",
        conflicts.iter().map(|c| format!("{} (now {}, the command left {})", c.path.display(), c.now, c.left)).collect::<Vec<_>>().join(", ")
    )]
    ChangedSinceCommand {
        /// Each path, what is there and what the command left.
        conflicts: Vec<GroupConflict>,
    },
    /// A directory to recreate is something else now.
    #[error(
        "refused: {} must be a directory again to restore {}, but it is {now} that the command did not leave; move it away first",
        path.display(),
        restore.display()
    )]
    MustBeDirectory {
        /// The directory.
        path: PathBuf,
        /// What it must hold.
        restore: PathBuf,
        /// What it is, in words.
        now: String,
    },
    /// A removal's path is back.
    #[error("refused: {} exists again; move it away first", path.display())]
    ExistsAgain {
        /// The path.
        path: PathBuf,
    },
    /// A group's revert stopped part way (`cause`: the failure's message).
    #[error(
        "undo stopped: {cause}; {reverted} of {of} path(s) were reverted (recorded). `gateway undo` again continues with the rest; `gateway undo --skip` passes over this change"
    )]
    Stopped {
        /// What failed, said.
        cause: String,
        /// Paths reverted.
        reverted: usize,
        /// Paths to revert.
        of: usize,
    },
}

/// A request that conflicts with the machine's state: nothing is wrong with what was asked,
/// but it cannot be done here as things are. Exit 122, `error.code` `conflict`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// The daemon's socket path holds something else.
    #[error(
        "{} exists and is not a socket; choose another path with --socket",
        path.display()
    )]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// A daemon already answers at the socket.
    #[error(
        "a daemon is already serving at {} (stop it first, or use --socket)",
        path.display()
    )]
    DaemonRunning {
        /// The socket.
        path: PathBuf,
    },
    /// File tools for another uid through a daemon running as root.
    #[error(
        "file tools for uid {uid} through a daemon running as root are refused (they would act with root's ownership of files): run the daemon as its own user (contrib/gateway.service), or run them without the daemon (GATEWAY_SOCKET=)"
    )]
    FileToolsThroughRootDaemon {
        /// The client's uid.
        uid: u32,
    },
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::broker::BrokerError;
    use crate::broker::report::ErrorCode;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    /// One of each usage error (the CLI's exit codes are tested on them too).
    pub(crate) fn every_usage_error() -> Vec<UsageError> {
        let te = TextError::Binary { offset: 3 };
        vec![
            UsageError::MissingCommand,
            UsageError::EmptyCommand,
            UsageError::NotAVerifierKey { path: p("/k") },
            UsageError::NoChangeSet { id: "cap-1".into() },
            UsageError::ChangeSetRunning { id: "cap-1".into() },
            UsageError::ReviewUnavailable {
                why: "the run has no mount namespace".into(),
            },
            WorkspaceProblem::NoSuchDirectory { path: p("/x") }.into(),
            WorkspaceProblem::NotADirectory { path: p("/x") }.into(),
            WorkspaceProblem::Root.into(),
            WorkspaceProblem::SystemDir {
                path: p("/dev/x"),
                system: p("/dev"),
            }
            .into(),
            WorkspaceProblem::Denied {
                path: p("/home"),
                denied: p("/home/u/.ssh"),
                policy: "strict".into(),
            }
            .into(),
            WorkspaceProblem::Unreadable {
                path: p("/root/w"),
                uid: 65534,
                why: "permission denied".into(),
            }
            .into(),
            CdProblem::NoPrevious.into(),
            CdProblem::NotADirectory { target: "f".into() }.into(),
            CdProblem::NoSuchDirectory { target: "d".into() }.into(),
            ScanProblem::NoPaths.into(),
            ScanProblem::NoSuchPath { path: p("x") }.into(),
            ScanProblem::BaselineTooLarge {
                path: p("b"),
                max: 1,
            }
            .into(),
            ScanProblem::NotABaseline {
                path: p("b"),
                line: 1,
                column: 2,
            }
            .into(),
            ScanProblem::BadExclude {
                glob: "[".into(),
                why: "unclosed".into(),
            }
            .into(),
            ScanProblem::BadExcludes { why: "w".into() }.into(),
            PathProblem::NoSuchFile { path: p("f") }.into(),
            PathProblem::NoFileToEdit { path: p("f") }.into(),
            PathProblem::Edit {
                path: p("f"),
                error: te.clone(),
            }
            .into(),
            PathProblem::NotText {
                path: p("f"),
                size: 9,
                error: te,
            }
            .into(),
            PathProblem::NotFileDirOrLink { path: p("f") }.into(),
            PathProblem::NoSuchPath { path: p("f") }.into(),
            PathProblem::IsADirectory {
                path: p("d"),
                what: "remove it".into(),
            }
            .into(),
            PathProblem::TrashOnOtherFileSystem { path: p("f") }.into(),
            PathProblem::NotADirectory { path: p("f") }.into(),
            PathProblem::AlreadyExists { path: p("d") }.into(),
            PathProblem::MissingParent { path: p("d") }.into(),
            PathProblem::ChangedSinceMoved { path: p("f") }.into(),
            PathProblem::DestinationExists { path: p("f") }.into(),
            PathProblem::NoTempName { path: p("f") }.into(),
            UndoProblem::NoSuchChange { id: 1 }.into(),
            UndoProblem::Nothing.into(),
            UndoProblem::NothingHereButElsewhere {
                workspace: p("/w"),
                elsewhere: 2,
            }
            .into(),
            UndoProblem::NothingIn { workspace: p("/w") }.into(),
            UndoProblem::NoTrashItem { name: "n".into() }.into(),
            UndoProblem::NoTrashItemGiven.into(),
            UndoProblem::TrashEmptied {
                id: 1,
                name: "n".into(),
                path: p("/w/f"),
                when: "t".into(),
            }
            .into(),
            UndoProblem::TrashItemGone { name: "n".into() }.into(),
            UndoProblem::Permanent {
                id: 1,
                path: p("f"),
            }
            .into(),
            UndoProblem::ChangedSince {
                path: p("f"),
                id: 1,
            }
            .into(),
            UndoProblem::ContentChangedSince {
                path: p("f"),
                id: 1,
                diff: "-a\n+b\n".into(),
            }
            .into(),
            UndoProblem::NotBackedUp {
                id: 1,
                missing: vec![(p("f"), "expired".into())],
            }
            .into(),
            UndoProblem::NotRegularNow { path: p("f") }.into(),
            UndoProblem::NotFileDirOrLinkNow { path: p("f") }.into(),
            UndoProblem::AlreadyUndone { group: "g".into() }.into(),
            UndoProblem::ChangedSinceCommand {
                conflicts: vec![GroupConflict {
                    path: p("f"),
                    now: "nothing".into(),
                    left: "a directory".into(),
                }],
            }
            .into(),
            UndoProblem::MustBeDirectory {
                path: p("d"),
                restore: p("d/f"),
                now: "a file of 3 bytes".into(),
            }
            .into(),
            UndoProblem::ExistsAgain { path: p("f") }.into(),
            UndoProblem::Stopped {
                cause: "c".into(),
                reverted: 1,
                of: 2,
            }
            .into(),
        ]
    }

    #[test]
    fn every_usage_error_is_of_class_usage_and_crosses_the_worker_pipe_as_it_is() {
        for u in every_usage_error() {
            let msg = u.to_string();
            let back: UsageError =
                serde_json::from_str(&serde_json::to_string(&u).expect("serialize"))
                    .expect("deserialize");
            assert_eq!(back, u);
            let e = BrokerError::Usage(u);
            assert_eq!(ErrorCode::of(&e), ErrorCode::Usage, "{msg}");
            assert_eq!(e.to_string(), msg);
        }
    }

    #[test]
    fn usage_messages_are_the_words_tests_and_the_readme_look_for() {
        let m = |u: UsageError| u.to_string();
        assert_eq!(
            m(WorkspaceProblem::NoSuchDirectory { path: p("/x") }.into()),
            "--cwd /x: no such directory"
        );
        assert_eq!(
            m(UndoProblem::NothingIn { workspace: p("/w") }.into()),
            "nothing to undo in /w"
        );
        assert_eq!(
            m(UndoProblem::NotBackedUp {
                id: 4,
                missing: vec![(p("a"), "x".into()), (p("b"), "y".into())],
            }
            .into()),
            "cannot undo change 4: the content before it of these files is not in the backup store, so it cannot be brought back: a (x); b (y)"
        );
        assert_eq!(
            m(UndoProblem::ChangedSinceCommand {
                conflicts: vec![GroupConflict {
                    path: p("f"),
                    now: "nothing".into(),
                    left: "a directory".into(),
                }],
            }
            .into()),
            "refused: changed since the command ran: f (now nothing, the command left a directory); pass --force to undo anyway (what is there now is backed up first)"
        );
        assert_eq!(
            m(ScanProblem::BadExclude {
                glob: "[".into(),
                why: "w".into()
            }
            .into()),
            "--exclude [: w"
        );
    }

    #[test]
    fn what_is_not_a_usage_error_has_its_own_class() {
        for c in [
            Conflict::NotASocket { path: p("/s") },
            Conflict::DaemonRunning { path: p("/s") },
            Conflict::FileToolsThroughRootDaemon { uid: 65534 },
        ] {
            let e = BrokerError::Conflict(c);
            assert_eq!(ErrorCode::of(&e), ErrorCode::Conflict, "{e}");
        }
        let io = BrokerError::Io {
            what: "the workspace /w cannot be opened by uid 65534".into(),
            source: std::io::Error::from_raw_os_error(13),
        };
        assert_eq!(ErrorCode::of(&io), ErrorCode::Io);
        let inv = BrokerError::Invariant {
            tool: "fs.read".into(),
            what: "out of order",
        };
        assert_eq!(ErrorCode::of(&inv), ErrorCode::Failed);
        // A worker's failure keeps the class the worker gave it.
        for code in [ErrorCode::Usage, ErrorCode::Io, ErrorCode::Failed] {
            let w = BrokerError::Worker {
                code,
                message: "m".into(),
            };
            assert_eq!(ErrorCode::of(&w), code);
        }
        // A usage error of an undo keeps its class under the undo's hint.
        let nu = BrokerError::NotUndone {
            id: 3,
            source: Box::new(BrokerError::Usage(UndoProblem::Nothing.into())),
        };
        assert_eq!(ErrorCode::of(&nu), ErrorCode::Usage);
    }
}
