//! The output relay: from the moment the child starts until the command is done and its pipes
//! close, stdout and stderr go to the [`StreamIo`] as they arrive, stdin (filtered or a
//! channel) goes the other way, and the timeout, the output cap, a cancelling caller and a
//! caught termination signal each kill the run. With namespaces, "done" is the helper's status
//! record: it sends it only after every process of the run is dead, so the namespace's
//! teardown need not be waited for.

use super::spawn::Child;
use super::{SandboxError, Spec, Stdin, Stream, StreamIo, reap};
use crate::sys;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

/// Stdin backlog beyond which the caller's stdin is not read until the command takes some.
const STDIN_BACKLOG: usize = 64 * 1024;

/// How the relay ended.
pub(crate) struct Relayed {
    pub timed_out: bool,
    pub over_limit: bool,
    pub aborted: bool,
    pub cancelled: bool,
    pub interrupted: Option<i32>,
    /// Bytes of stdout and stderr produced.
    pub counts: [u64; 2],
    /// The report pipe's records (setup failures; with namespaces, the command's status).
    pub report: Vec<u8>,
    /// The direct child's wait status, when it was reaped here.
    pub raw_status: Option<i32>,
}

/// The fds the relay watches besides the child's, and its limits.
pub(crate) struct Watch {
    pub deadline: Option<Instant>,
    pub output_limit: Option<u64>,
    /// Readable or hung up: the caller went away (-1: none).
    pub cancel_fd: i32,
    /// Readable: a termination signal was caught (-1: none).
    pub interrupt_fd: i32,
    /// Lines from the broker for the command's stderr (the egress proxy's refusals), relayed
    /// as stderr; never waited on for its end (-1: none).
    pub notes: Option<std::fs::File>,
}

struct Relay<'a> {
    child: Child,
    use_ns: bool,
    watch: Watch,
    sink: &'a mut dyn StreamIo,
    channel: bool,
    caller_stdin: std::fs::File,
    out_open: bool,
    err_open: bool,
    rep_open: bool,
    /// Bytes waiting for the command's stdin pipe, and whether there may be more.
    in_pending: Vec<u8>,
    in_open: bool,
    /// The pidfd said the direct child exited; without namespaces, when.
    exited: bool,
    exit_seen_at: Option<Instant>,
    /// With namespaces: the helper's status record has arrived.
    reported: bool,
    buf: Vec<u8>,
    /// The command's stderr so far ends inside a line: a note of the broker's starts a line
    /// of its own (a note said in the middle of the command's line cut both).
    err_mid_line: bool,
    r: Relayed,
}

/// Relays `child`'s streams for `spec` until the run is over (see the module's comment).
pub(crate) fn relay(
    child: Child,
    spec: &Spec,
    sink: &mut dyn StreamIo,
    use_ns: bool,
    watch: Watch,
) -> Result<Relayed, SandboxError> {
    // Where a filtered stdin comes from: this process's, or the fd given.
    let caller_stdin: std::fs::File = match &spec.stdin {
        Stdin::FilteredFd(fd) => fd.try_clone().map_err(io("reading the caller's stdin"))?,
        _ => std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map_err(io("reading stdin"))?,
    }
    .into();
    for fd in [child.out_r.as_raw_fd(), child.err_r.as_raw_fd()] {
        // Best effort: a smaller pipe only means more, smaller reads.
        sys::set_pipe_size(fd, 1 << 20);
    }
    let in_open = child.stdin_w.is_some();
    let mut relay = Relay {
        in_pending: match &spec.stdin {
            Stdin::Channel(first) => first.clone(),
            _ => Vec::new(),
        },
        channel: matches!(spec.stdin, Stdin::Channel(_)),
        child,
        use_ns,
        watch,
        sink,
        caller_stdin,
        out_open: true,
        err_open: true,
        rep_open: true,
        in_open,
        exited: false,
        exit_seen_at: None,
        reported: false,
        // Reads of up to 256 KiB (the pipes are enlarged to 1 MiB): a command that writes
        // fast is relayed in few, large chunks. Pages are touched only as far as reads fill.
        buf: vec![0u8; 256 * 1024],
        err_mid_line: false,
        r: Relayed {
            timed_out: false,
            over_limit: false,
            aborted: false,
            cancelled: false,
            interrupted: None,
            counts: [0; 2],
            report: Vec::new(),
            raw_status: None,
        },
    };
    // A panic while the run is relayed (in the stream handler, say) kills the whole run on
    // its way out: no command outlives the call that started it.
    let unwinding = KillOnUnwind {
        pid: relay.child.pid,
        use_ns,
    };
    while relay.step()? {}
    std::mem::forget(unwinding);
    relay.finish()
}

/// Kills a run whose relay unwinds (see [`relay`]); forgotten when the relay ends normally.
struct KillOnUnwind {
    pid: libc::pid_t,
    use_ns: bool,
}

impl Drop for KillOnUnwind {
    fn drop(&mut self) {
        if std::thread::panicking() {
            kill_run(self.pid, self.use_ns);
        }
    }
}

/// Kills the whole run of `pid`: the helper (pid 1 of its namespace), or the command's
/// process group and the command.
fn kill_run(pid: libc::pid_t, use_ns: bool) {
    if use_ns {
        sys::kill(pid, libc::SIGKILL);
    } else {
        sys::killpg(pid, libc::SIGKILL);
        sys::kill(pid, libc::SIGKILL);
    }
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> SandboxError {
    move |source| SandboxError::Io { what, source }
}

impl Relay<'_> {
    fn done(&self) -> bool {
        self.exited || (self.use_ns && self.reported)
    }

    /// Kills the whole run: the helper (pid 1 of its namespace), or the command's process
    /// group and the command.
    fn kill_all(&self) {
        kill_run(self.child.pid, self.use_ns);
    }

    fn abort(&mut self) {
        self.r.aborted = true;
        self.kill_all();
    }

    /// How long poll may wait: until the deadline, or the end of the grace after exit.
    /// `None`: the grace is over, stop relaying.
    fn timeout_ms(&self) -> Option<i32> {
        let mut timeout_ms: i32 = -1;
        if let Some(d) = self.watch.deadline
            && !self.r.timed_out
        {
            let left = d.saturating_duration_since(Instant::now());
            timeout_ms = left.as_millis().min(i32::MAX as u128) as i32;
        }
        if let Some(t) = self.exit_seen_at {
            // Without a pid namespace, a descendant may keep the pipes open: stop after a grace.
            let left = Duration::from_millis(200).saturating_sub(t.elapsed());
            if left.is_zero() {
                return None;
            }
            timeout_ms = left.as_millis() as i32;
        }
        Some(timeout_ms)
    }

    /// The fds to poll: stdout, stderr, report, pidfd, the caller's stdin, the command's
    /// stdin, cancel, interrupt, notes (-1 where not watched).
    fn poll_fds(&self) -> [sys::PollFd; 9] {
        let done = self.done();
        let live = !self.r.cancelled && !done;
        let fd_if = |open: bool, fd: i32| if open { fd } else { -1 };
        let pfd = |fd: i32, out: bool| sys::PollFd {
            fd,
            out,
            ready: false,
            hangup: false,
        };
        let c = &self.child;
        let stdin_w_fd = c.stdin_w.as_ref().map_or(-1, |w| w.as_raw_fd());
        let read_caller = !self.channel && self.in_open && self.in_pending.len() < STDIN_BACKLOG;
        [
            pfd(fd_if(self.out_open, c.out_r.as_raw_fd()), false),
            pfd(fd_if(self.err_open, c.err_r.as_raw_fd()), false),
            pfd(fd_if(self.rep_open, c.rep_r.as_raw_fd()), false),
            pfd(fd_if(!done, c.pidfd.as_raw_fd()), false),
            pfd(fd_if(read_caller, self.caller_stdin.as_raw_fd()), false),
            pfd(fd_if(!self.in_pending.is_empty(), stdin_w_fd), true),
            pfd(fd_if(live, self.watch.cancel_fd), false),
            pfd(fd_if(live, self.watch.interrupt_fd), false),
            pfd(
                fd_if(
                    !done,
                    self.watch.notes.as_ref().map_or(-1, AsRawFd::as_raw_fd),
                ),
                false,
            ),
        ]
    }

    /// One round: poll, then handle what is ready. False when the relay is over.
    fn step(&mut self) -> Result<bool, SandboxError> {
        let done = self.done();
        if done && self.child.stdin_w.is_some() {
            // The command is gone: nobody reads its stdin any more.
            self.child.stdin_w = None;
            self.in_open = false;
        }
        if done && !self.out_open && !self.err_open {
            return Ok(false);
        }
        let Some(timeout_ms) = self.timeout_ms() else {
            return Ok(false);
        };
        let mut fds = self.poll_fds();
        sys::poll(&mut fds, timeout_ms).map_err(io("waiting for the sandboxed process"))?;
        let ready = |i: usize| fds[i].ready || fds[i].hangup;
        let drained = self.read_output(ready(0), ready(1));
        // A read shorter than the buffer drained its pipe: the command is quiet for now, and
        // the stream handler may flush what it holds back. (A busy producer fills the buffer
        // and this waits.)
        if drained && !self.r.aborted && !self.sink.output_idle() {
            self.abort();
        }
        if ready(8) {
            self.read_notes();
        }
        self.stdin_in(ready(4));
        self.stdin_out(ready(5));
        self.read_report(ready(2));
        self.events(ready(3), ready(6), ready(7));
        Ok(true)
    }

    /// Reads stdout and stderr where ready, enforcing the output cap. True if a read drained
    /// its pipe.
    fn read_output(&mut self, out_ready: bool, err_ready: bool) -> bool {
        let mut drained = false;
        for (i, ready) in [out_ready, err_ready].into_iter().enumerate() {
            let open = if i == 0 { self.out_open } else { self.err_open };
            if !open || !ready {
                continue;
            }
            let (reader, stream) = if i == 0 {
                (&mut self.child.out_r, Stream::Stdout)
            } else {
                (&mut self.child.err_r, Stream::Stderr)
            };
            let n = match reader.read(&mut self.buf) {
                Ok(0) | Err(_) => {
                    *(if i == 0 {
                        &mut self.out_open
                    } else {
                        &mut self.err_open
                    }) = false;
                    continue;
                }
                Ok(n) => n,
            };
            drained |= n < self.buf.len();
            if i == 1 {
                self.err_mid_line = self.buf[n - 1] != b'\n';
            }
            self.r.counts[i] += n as u64;
            let total = self.r.counts[0] + self.r.counts[1];
            let limit = self.watch.output_limit.unwrap_or(u64::MAX);
            let keep = if total > limit {
                n.saturating_sub((total - limit) as usize)
            } else {
                n
            };
            if keep > 0
                && !self.r.over_limit
                && !self.r.aborted
                && !self.sink.output(stream, &self.buf[..keep])
            {
                self.abort();
            }
            if total > limit && !self.r.over_limit {
                self.r.over_limit = true;
                self.kill_all();
            }
        }
        drained
    }

    /// Relays the broker's notes as stderr (counted with it, under the same cap).
    fn read_notes(&mut self) {
        let mut buf = [0u8; 4096];
        let Some(mut notes) = self.watch.notes.as_ref() else {
            return;
        };
        let n = match notes.read(&mut buf) {
            Ok(n) if n > 0 => n,
            _ => return,
        };
        self.r.counts[1] += n as u64;
        // Said now, not when the command next writes: a note may ask a person to approve
        // what the command waits for.
        if self.r.over_limit || self.r.aborted {
            return;
        }
        let lead: &[u8] = if std::mem::take(&mut self.err_mid_line) {
            b"\n"
        } else {
            b""
        };
        if !(self
            .sink
            .output(Stream::Stderr, &[lead, &buf[..n]].concat())
            && self.sink.output_idle())
        {
            self.abort();
        }
    }

    /// What goes to the command's stdin: a channel's reply, or the caller's stdin through the
    /// filter.
    fn stdin_in(&mut self, caller_ready: bool) {
        if self.channel && self.in_open && !self.r.aborted && !self.sink.reply(&mut self.in_pending)
        {
            self.in_pending.clear();
            self.abort();
        }
        if self.channel || !self.in_open || !caller_ready {
            return;
        }
        let mut chunk = vec![0u8; STDIN_BACKLOG];
        let n = std::io::Read::read(&mut &self.caller_stdin, &mut chunk).unwrap_or(0);
        let ok = if n == 0 {
            self.in_open = false;
            self.sink.input_end(&mut self.in_pending)
        } else {
            self.sink.input(&chunk[..n], &mut self.in_pending)
        };
        if !ok && !self.r.aborted {
            self.in_pending.clear();
            self.abort();
        }
    }

    /// Writes what is pending to the command's stdin; closes it at the end.
    fn stdin_out(&mut self, writable: bool) {
        if let Some(w) = self.child.stdin_w.as_mut()
            && !self.in_pending.is_empty()
            && writable
        {
            match std::io::Write::write(w, &self.in_pending) {
                Ok(k) => {
                    self.in_pending.drain(..k);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                // The command closed its stdin: drop the rest, as a pipe would.
                Err(_) => {
                    self.in_pending.clear();
                    self.in_open = false;
                }
            }
        }
        if self.child.stdin_w.is_some() && !self.in_open && self.in_pending.is_empty() {
            // EOF for the command.
            self.child.stdin_w = None;
        }
    }

    fn read_report(&mut self, ready: bool) {
        if !self.rep_open || !ready {
            return;
        }
        match self.child.rep_r.read(&mut self.buf) {
            Ok(0) | Err(_) => self.rep_open = false,
            Ok(n) => {
                self.r.report.extend_from_slice(&self.buf[..n]);
                self.reported =
                    records(&self.r.report).any(|(st, _)| st == sys::stage::EXIT_STATUS);
            }
        }
    }

    /// The child's exit, a cancelling caller, a caught signal, the deadline.
    fn events(&mut self, exit: bool, cancel: bool, interrupt: bool) {
        if !self.exited && exit {
            self.exited = true;
            if !self.use_ns {
                // The command is gone: its session's stragglers go with it.
                sys::killpg(self.child.pid, libc::SIGKILL);
                self.exit_seen_at = Some(Instant::now());
            }
        }
        if !self.r.cancelled && cancel {
            self.r.cancelled = true;
            self.kill_all();
        }
        if !self.r.cancelled && interrupt {
            self.r.cancelled = true;
            self.r.interrupted = sys::interrupt_caught();
            self.kill_all();
        }
        if let Some(d) = self.watch.deadline
            && !self.r.timed_out
            && !self.done()
            && Instant::now() >= d
        {
            self.r.timed_out = true;
            self.kill_all();
        }
    }

    /// Reaps the child (or leaves the exiting helper to be reaped later).
    fn finish(mut self) -> Result<Relayed, SandboxError> {
        if self.exited {
            let st = sys::wait(self.child.pid).map_err(io("collecting the sandboxed process"))?;
            self.r.raw_status = Some(st);
            let _ = self.child.rep_r.read_to_end(&mut self.r.report);
        } else {
            // Everything in the namespace is dead; the helper is exiting. Reap it later.
            reap::pending_reap(self.child.pid);
        }
        Ok(self.r)
    }
}

/// The (stage, value) records of the report pipe.
pub(crate) fn records(rep: &[u8]) -> impl Iterator<Item = (u32, i32)> + '_ {
    rep.chunks_exact(8).map(|r| {
        (
            u32::from_ne_bytes([r[0], r[1], r[2], r[3]]),
            i32::from_ne_bytes([r[4], r[5], r[6], r[7]]),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{confinement, require_root};
    use super::super::{Spec, Stdin, Stream, StreamIo};

    /// Panics at the first output, as a bug in a stream handler would.
    struct Panics;

    impl StreamIo for Panics {
        fn output(&mut self, _: Stream, _: &[u8]) -> bool {
            panic!("a stream handler's bug");
        }
    }

    /// The processes whose command line is exactly `argv`.
    fn running(argv: &[&str]) -> Vec<String> {
        let want = argv.join("\0") + "\0";
        // not-ws: /proc, read by a unit test
        std::fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter(|e| {
                // not-ws: /proc, read by a unit test
                std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want.as_bytes())
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_panic_while_a_run_is_relayed_kills_the_run() {
        // The daemon catches a call's panic and goes on; the run the call had started must
        // not go on without it (its thread lives on, so PR_SET_PDEATHSIG never fires).
        if !require_root() {
            return;
        }
        let marker = format!("{}.5", 7000 + std::process::id() % 1000);
        let mut confine = confinement();
        confine.read = vec!["/".into()];
        confine.exec = vec!["/".into()];
        let spec = Spec {
            program: "/bin/sh".into(),
            argv: vec![
                "sh".into(),
                "-c".into(),
                // The sleep runs (its exec done) before the first output.
                format!("sleep {marker} & sleep 0.3; echo started; wait").into(),
            ],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: "/".into(),
            stdin: Stdin::Null,
            confine,
            cancel: None,
            proxy: None,
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            super::super::run(&spec, &mut Panics)
        }));
        assert!(r.is_err(), "the handler's panic unwinds out of the run");
        let t = std::time::Instant::now();
        while !running(&["sleep", &marker]).is_empty() {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(5),
                "the run outlived the panic: {:?}",
                running(&["sleep", &marker])
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
