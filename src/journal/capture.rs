//! The capture lock: one call at a time changes a workspace while another captures it.
//!
//! A command's snapshot (`workspace::snapshot`) is a walk of the workspace before and after
//! the run: whatever changed in between is the command's group in the journal. Another call
//! writing into the same tree meanwhile (an MCP client's overlapping `write_file`, a second
//! `gateway exec` in another terminal) would have its file claimed by that group, and an
//! `undo` of the command would delete it. So every call that captures a workspace (a run
//! with a snapshot) or changes one (the file tools that write, `undo`) holds this lock for
//! its whole before, run and after.
//!
//! The lock is a `flock` on files in the state directory (`journal/capture/`), one per
//! directory: a call takes the lock of its workspace exclusively and those of the
//! directories above it shared, root first, so that a call in `/w` and one in `/w/sub`
//! exclude each other while calls in `/w/a` and `/w/b` do not. Locks are taken in order of
//! depth along one path, so two calls never wait on each other. Each call opens its own
//! files, so threads of one process exclude each other as processes do. (Issue 37's overlay
//! capture, which sees only what the run wrote, will make this unnecessary for commands.)

use super::{JournalError, io, private_dir, sha256_hex};
use std::os::fd::BorrowedFd;
use std::path::Path;

/// Held while a call captures or changes a workspace; released when dropped.
#[derive(Debug)]
pub struct CaptureLock {
    _files: Vec<std::fs::File>,
}

/// Takes the capture lock of the workspace `ws` (absolute; canonical as the broker holds it):
/// waits for the calls that hold it (or that of a directory above or below it) to end, or
/// for the call's `cancel` (`sandbox::Spec::cancel`) to fire.
pub fn capture_lock(
    state_dir: &Path,
    ws: &Path,
    cancel: Option<BorrowedFd<'_>>,
) -> Result<CaptureLock, JournalError> {
    let dir = state_dir.join("journal").join("capture");
    private_dir(&dir)?;
    let chain: Vec<&Path> = {
        let mut v: Vec<&Path> = ws.ancestors().collect();
        v.reverse();
        v
    };
    let mut files = Vec::with_capacity(chain.len());
    for (i, d) in chain.iter().enumerate() {
        use std::os::unix::ffi::OsStrExt;
        let name = sha256_hex(d.as_os_str().as_bytes());
        let p = dir.join(&name[..32]);
        use std::os::unix::fs::OpenOptionsExt;
        // not-ws: a lock file in the state directory, which no child reaches
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&p)
            .map_err(io("opening", &p))?;
        lock(&f, i + 1 == chain.len(), cancel, &p)?;
        files.push(f);
    }
    Ok(CaptureLock { _files: files })
}

/// Locks `f` (exclusively or shared); while another call holds it, until `cancel` fires.
fn lock(
    f: &std::fs::File,
    exclusive: bool,
    cancel: Option<BorrowedFd<'_>>,
    p: &Path,
) -> Result<(), JournalError> {
    let Some(cancel) = cancel else {
        return if exclusive { f.lock() } else { f.lock_shared() }.map_err(io("locking", p));
    };
    loop {
        match if exclusive {
            f.try_lock()
        } else {
            f.try_lock_shared()
        } {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::Error(e)) => return Err(io("locking", p)(e)),
            Err(std::fs::TryLockError::WouldBlock) => {}
        }
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds = [PollFd::from_borrowed_fd(cancel, PollFlags::IN)];
        let wait = Timespec {
            tv_sec: 0,
            tv_nsec: 50_000_000,
        };
        match poll(&mut fds, Some(&wait)) {
            Ok(0) => {}
            Ok(_) => {
                return Err(JournalError::Cancelled {
                    path: p.to_path_buf(),
                });
            }
            Err(e) if e == rustix::io::Errno::INTR => {}
            Err(e) => {
                return Err(io("waiting for", p)(std::io::Error::from_raw_os_error(
                    e.raw_os_error(),
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::capture_lock;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Whether a second call in `b` waits while a call in `a` holds the lock.
    fn waits(state: &std::path::Path, a: &str, b: &str) -> bool {
        let held = capture_lock(state, a.as_ref(), None).expect("lock");
        let (tx, rx) = mpsc::channel();
        let (state2, b2) = (state.to_path_buf(), b.to_string());
        let t = std::thread::spawn(move || {
            let l = capture_lock(&state2, b2.as_ref(), None).expect("lock");
            let _ = tx.send(());
            drop(l);
        });
        let waited = rx.recv_timeout(Duration::from_millis(300)).is_err();
        drop(held);
        let _ = rx.recv_timeout(Duration::from_secs(5));
        t.join().expect("thread");
        waited
    }

    #[test]
    fn overlapping_workspaces_exclude_each_other_and_siblings_do_not() {
        let d = std::env::temp_dir().join(format!("gateway-capture-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        assert!(waits(&d, "/w", "/w"), "the same workspace");
        assert!(waits(&d, "/w", "/w/sub"), "a workspace inside it");
        assert!(waits(&d, "/w/sub", "/w"), "a workspace around it");
        assert!(!waits(&d, "/w/a", "/w/b"), "siblings");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_cancelled_call_stops_waiting() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let d = std::env::temp_dir().join(format!("gateway-capture-c-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let held = capture_lock(&d, "/w".as_ref(), None).expect("lock");
        let (r, mut w) = std::io::pipe().expect("pipe");
        let d2 = d.clone();
        let t = std::thread::spawn(move || {
            capture_lock(&d2, "/w/sub".as_ref(), Some(r.as_fd())).map(drop)
        });
        std::thread::sleep(Duration::from_millis(200));
        w.write_all(b"x").expect("cancel");
        let res = t.join().expect("thread");
        assert!(
            matches!(res, Err(super::JournalError::Cancelled { .. })),
            "{res:?}"
        );
        drop(held);
        let _ = std::fs::remove_dir_all(&d);
    }
}
