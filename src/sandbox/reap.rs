//! What a run leaves behind. With namespaces, the helper (pid 1) kills its namespace before it
//! reports and is reaped later ([`pending_reap`]); without, the broker is the subreaper of the
//! run's descendants, and the last run of the process to end kills whatever is left
//! ([`ActiveRun::leave`]).

use crate::sys;
use std::time::{Duration, Instant};

/// Helpers (pid 1 of a run's namespaces) that reported and are exiting, not yet reaped.
static PENDING: std::sync::Mutex<Vec<libc::pid_t>> = std::sync::Mutex::new(Vec::new());

/// Reaps `pid` later (see [`reap_pending`]).
pub(crate) fn pending_reap(pid: libc::pid_t) {
    if let Ok(mut p) = PENDING.lock() {
        p.push(pid);
    }
}

/// Reaps finished helpers without blocking.
pub(crate) fn reap_pending() {
    if let Ok(mut p) = PENDING.lock() {
        p.retain(|&pid| !sys::try_wait(pid));
    }
}

/// Runs in progress in this process. Without a pid namespace a run's descendants that left
/// its process group become this process's children when orphaned (it is their subreaper);
/// when no run is in progress, every such child is a leftover and is killed.
static ACTIVE: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

/// A run without a pid namespace started since the last reaping: only such runs leave
/// orphans here (a namespace's orphans stay in it), so runs in namespaces pay nothing.
static UNCONTAINED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A run counted in [`ACTIVE`] (uncounted on drop, e.g. when setup fails).
pub(crate) struct ActiveRun {
    counted: bool,
}

impl ActiveRun {
    pub(crate) fn enter() -> ActiveRun {
        static SUBREAPER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        SUBREAPER.get_or_init(|| sys::set_child_subreaper().is_ok());
        if let Ok(mut n) = ACTIVE.lock() {
            *n += 1;
        }
        ActiveRun { counted: true }
    }

    /// This run has no pid namespace: its orphans come here.
    pub(crate) fn uncontained(&self) {
        UNCONTAINED.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Leaves the count; the last run out kills and reaps the leftovers of every run.
    /// Returns how many were killed, or None when other runs of this process are still in
    /// progress (their ends will do it).
    pub(crate) fn leave(mut self) -> Option<usize> {
        self.counted = false;
        let mut n = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
        if *n > 0 {
            return None;
        }
        // Under the lock: no run starts (and spawns a child of its own) meanwhile.
        if !UNCONTAINED.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return Some(0);
        }
        Some(kill_leftovers())
    }
}

impl Drop for ActiveRun {
    fn drop(&mut self) {
        if self.counted
            && let Ok(mut n) = ACTIVE.lock()
        {
            *n = n.saturating_sub(1);
        }
    }
}

/// This process's children (every thread's), except namespace helpers that are exiting.
fn children() -> Vec<libc::pid_t> {
    let pending: Vec<libc::pid_t> = PENDING.lock().map(|p| p.clone()).unwrap_or_default();
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<libc::pid_t>().ok())
                        .filter(|p| !pending.contains(p)),
                );
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Kills every child of this process (leftovers of finished runs) and reaps it; their own
/// children, orphaned by that, come back as ours and go the same way. Bounded in time.
fn kill_leftovers() -> usize {
    let mut killed = 0;
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let kids = children();
        if kids.is_empty() || Instant::now() >= until {
            break;
        }
        for &pid in &kids {
            // Stop first: a stopped process forks no more while its siblings die.
            sys::kill(pid, libc::SIGSTOP);
        }
        for &pid in &kids {
            sys::kill(pid, libc::SIGKILL);
        }
        for &pid in &kids {
            let t = Instant::now() + Duration::from_millis(500);
            while !sys::try_wait(pid) && Instant::now() < t {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        killed += kids.len();
    }
    killed
}
