//! The life of `gateway mcp`'s calls (`serve::mcp`): the client's roots as last fetched,
//! each call's cancellation, the client going away (its stdin ends, its stdout loses its
//! reader), and the count of calls in flight the server waits for before it ends.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;

/// Counts a call in flight (`Gateway::inflight`) until it is dropped.
pub(super) struct InFlight(Arc<tokio::sync::watch::Sender<usize>>);

impl InFlight {
    pub(super) fn new(n: &Arc<tokio::sync::watch::Sender<usize>>) -> InFlight {
        n.send_modify(|n| *n += 1);
        InFlight(n.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// The client's roots as last fetched, and a generation counted up by every
/// `notifications/roots/list_changed`: a fetch is kept only if no change arrived while it
/// was under way (else it is made again), so that a change is never lost.
#[derive(Default)]
pub(super) struct RootsCache {
    /// `None` until fetched (or after the client said they changed); `Some(None)`: the
    /// client offers none.
    known: Option<Option<Vec<PathBuf>>>,
    generation: u64,
}

impl RootsCache {
    /// The roots known, or the generation a fetch starts at.
    pub(super) fn begin(&self) -> Result<Option<Vec<PathBuf>>, u64> {
        self.known.clone().ok_or(self.generation)
    }

    /// Keeps what a fetch begun at `generation` found, unless the roots changed meanwhile:
    /// false then (fetch again).
    pub(super) fn finish(&mut self, generation: u64, roots: &Option<Vec<PathBuf>>) -> bool {
        if self.generation != generation {
            return false;
        }
        self.known = Some(roots.clone());
        true
    }

    /// The client said its roots changed.
    pub(super) fn changed(&mut self) {
        self.generation += 1;
        self.known = None;
    }
}

/// Cancels a call: its pipe becomes readable and hangs up (`sandbox::Spec::cancel`).
pub(super) fn cancel(w: &mut Option<std::io::PipeWriter>) {
    use std::io::Write;
    if let Some(mut w) = w.take() {
        let _ = w.write_all(b"x");
    }
}

/// Sets `gone` when the client closes its end of the server's stdout, even while nothing
/// is written to it: a thread waits for the pipe's error (no reader left) or hang-up. A
/// stdout that never reports one (a file) is waited on for nothing.
pub(super) fn watch_stdout(gone: Arc<tokio::sync::watch::Sender<bool>>) {
    let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("mcp-stdout".into())
        .spawn(move || {
            use rustix::event::{PollFd, PollFlags, poll};
            loop {
                // No events asked: only an error or a hang-up ends the wait.
                let mut fds = [PollFd::new(&fd, PollFlags::empty())];
                match poll(&mut fds, None) {
                    Ok(_)
                        if fds[0]
                            .revents()
                            .intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL) =>
                    {
                        gone.send_replace(true);
                        return;
                    }
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(_) => return,
                }
            }
        });
}

/// Stdin that says when it ends (the client closed it, or reading failed): every call in
/// flight is then cancelled (`Gateway::gone`).
pub(super) struct WatchedIn<R> {
    pub(super) inner: R,
    pub(super) gone: Arc<tokio::sync::watch::Sender<bool>>,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WatchedIn<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let ended = match &r {
            std::task::Poll::Ready(Ok(())) => buf.filled().len() == before && buf.remaining() > 0,
            std::task::Poll::Ready(Err(_)) => true,
            std::task::Poll::Pending => false,
        };
        if ended {
            self.gone.send_replace(true);
        }
        r
    }
}

/// Stdout that says when the client stopped reading it (a write fails): every call in
/// flight is then cancelled.
pub(super) struct WatchedOut<W> {
    pub(super) inner: W,
    pub(super) gone: Arc<tokio::sync::watch::Sender<bool>>,
}

impl<W> WatchedOut<W> {
    fn seen<T>(
        &self,
        r: std::task::Poll<std::io::Result<T>>,
    ) -> std::task::Poll<std::io::Result<T>> {
        if matches!(r, std::task::Poll::Ready(Err(_))) {
            self.gone.send_replace(true);
        }
        r
    }
}

impl<W: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WatchedOut<W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        self.seen(r)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_flush(cx);
        self.seen(r)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_shutdown(cx);
        self.seen(r)
    }
}

#[cfg(test)]
mod tests {
    use super::RootsCache;
    use std::path::PathBuf;

    #[test]
    fn a_change_during_a_fetch_makes_it_fetch_again() {
        let mut c = RootsCache::default();
        let old = Some(vec![PathBuf::from("/old")]);
        let new = Some(vec![PathBuf::from("/new")]);
        let g = c.begin().expect_err("nothing known yet");
        c.changed(); // arrives while the fetch is under way
        assert!(!c.finish(g, &old), "a stale answer is not kept");
        let g = c.begin().expect_err("fetched again");
        assert!(c.finish(g, &new));
        assert_eq!(c.begin(), Ok(new));
        c.changed();
        assert!(c.begin().is_err(), "fetched again after a change");
    }
}
