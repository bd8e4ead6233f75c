//! Claude Code's own shell machinery through `gateway sh` (as `CLAUDE_CODE_SHELL`).
//!
//! Claude Code runs each command of its Bash tool as
//! `SHELL -c -l "[source SNAP 2>/dev/null || true && ]shopt -u extglob 2>/dev/null || true &&
//! eval 'CMD' < /dev/null && pwd -P >| /tmp/claude-XXXX-cwd"` and reads the cwd file back to
//! keep `cd` across commands; once per session it builds a snapshot of the user's shell with
//! `SHELL -c -l 'SNAPSHOT_FILE=~/.claude/shell-snapshots/snapshot-bash-N-X.sh ...'`. Confined,
//! neither file can be written (the sandbox writes only the workspace and a private TMPDIR),
//! and widening the sandbox for them would let every command write there.
//!
//! So the command still runs confined and decided as a whole (the policy analyses the wrapper,
//! `eval 'CMD'` included, and the record keeps what ran), but the last step changes: instead
//! of writing the file, the script prints its content on stdout after a marker with a fresh
//! nonce; this front end (the agent's own process, with the agent's own rights) keeps the
//! marker and what follows out of the output, and writes the content to the file the agent
//! named — only a file of the exact shape Claude Code uses, never through a symlink, a hard
//! link, a FIFO or a device, and a snapshot only as a new file. A command that prints a marker itself gains
//! nothing: its own `cd` already decides the cwd file, and the snapshot is sourced only by
//! commands that run confined.

use super::exec::{RunAt, run_exec_at};
use super::{Call, exit, failed, load_policy};
use crate::broker::report::Report;
use crate::broker::request::{Invocation, Request};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Called as `gateway-bash`: `gateway sh` runs the command with bash when it is installed.
pub(super) static AS_BASH: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// `gateway sh`: runs `argv` (from `sh_command`) as `gateway exec` does, Claude Code's
/// wrapper and snapshot rewritten as this module says. Served by a daemon, the script runs
/// as it came: the rewriting and the delivery of the agent's files belong to the client
/// ([`via_daemon`]), which writes them as itself — never the daemon, with its own uid, home
/// and TMPDIR.
pub(super) fn run_sh(cli: &Call, mut argv: Vec<String>) -> Report {
    let policy = match load_policy(cli) {
        Ok(p) => p,
        Err(e) => return failed(exit::POLICY, e),
    };
    let script = argv.iter().position(|a| a == "-c").map(|i| i + 1);
    let agent = script
        .filter(|_| cli.cx.client().is_none())
        .and_then(|i| argv.get(i))
        .and_then(|s| prepare(s, policy.sandbox.private_tmp));
    if let (Some(p), Some(s)) = (&agent, script.and_then(|i| argv.get_mut(i))) {
        s.clone_from(&p.script);
    }
    let at = RunAt {
        agent,
        policy: Some(policy),
        ..RunAt::default()
    };
    let e = crate::broker::request::Exec {
        argv,
        ..Default::default()
    };
    run_exec_at(cli, &e, at)
}

/// `gateway sh` through the daemon at `socket` (`call`: a [`Request::Sh`]): Claude Code's
/// wrapper is rewritten here, the daemon runs it like any script, and this process — the
/// agent's own, with its rights, home and TMPDIR — reads the command's stdout through a
/// pipe, keeps the marker and what follows out of it, and writes the agent's file. Anything
/// else is sent as it is.
pub(super) fn via_daemon(socket: &Path, mut call: Invocation) -> Result<Report, String> {
    use crate::broker::report::{Audience, Note};
    use std::os::fd::AsFd;
    // The script: after the shell's `-c`.
    let Request::Sh { argv } = &mut call.request else {
        return crate::serve::daemon::call(socket, call);
    };
    let at = argv.iter().position(|a| a == "-c").map(|i| i + 1);
    // The run's TMPDIR is private under every built-in policy; where a policy has none, the
    // snapshot script writes its temporary file where that policy lets it, and still prints
    // it after the marker.
    let prepared = at.and_then(|i| argv.get(i)).and_then(|s| prepare(s, true));
    let (Some(i), Some(p)) = (at, prepared) else {
        return crate::serve::daemon::call(socket, call);
    };
    argv[i].clone_from(&p.script);
    let (r, w) = std::io::pipe().map_err(|e| format!("a pipe for the command's output: {e}"))?;
    let marker = p.marker.clone();
    let relay = std::thread::Builder::new()
        .name("gateway-sh-out".into())
        .spawn(move || {
            let mut out = std::io::stdout().lock();
            let mut t = TailFilter::new(marker);
            let mut buf = vec![0u8; 64 * 1024];
            let mut show = |b: &[u8]| {
                let _ = out.write_all(b).and_then(|()| out.flush());
            };
            let mut r = r;
            loop {
                match r.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => t.feed(&buf[..n], &mut show),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            t.finish(&mut show)
        })
        .map_err(|e| format!("starting the output filter: {e}"))?;
    let cwd = std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?;
    let (stdin, stderr) = (std::io::stdin(), std::io::stderr());
    let report = crate::serve::daemon::call_with(
        socket,
        call,
        crate::serve::daemon::CallIo {
            cwd,
            env: crate::serve::daemon::own_env(),
            stdio: [stdin.as_fd(), w.as_fd(), stderr.as_fd()],
            ask_here: true,
            cancel: None,
        },
    );
    drop(w);
    let payload = relay
        .join()
        .map_err(|_| "the output filter failed".to_string())?;
    let mut report = report?;
    if let (0, Some(payload)) = (report.exit, payload)
        && let Err(e) = deliver(&p.deliver, &payload)
    {
        report.exit = 1;
        report.notes.push(Note::to(Audience::Everyone, e));
    }
    Ok(report)
}

/// What a recognised script leaves behind for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Deliver {
    /// The `pwd -P` of the command's end, for Claude Code's cwd file.
    Cwd(PathBuf),
    /// The snapshot script, for `~/.claude/shell-snapshots/`.
    Snapshot(PathBuf),
}

/// A recognised script, rewritten to print what it would have written after `marker`.
#[derive(Debug)]
pub(super) struct Prepared {
    pub(super) script: String,
    pub(super) deliver: Deliver,
    pub(super) marker: Vec<u8>,
}

/// Claude Code's cwd file: `<tmp>/claude-<hex>-cwd`, in /tmp or `$TMPDIR`.
fn cwd_file(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    let name = p.file_name()?.to_str()?;
    let hex = name.strip_prefix("claude-")?.strip_suffix("-cwd")?;
    if hex.is_empty() || hex.len() > 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let dir = p.parent()?;
    let tmpdir = std::env::var_os("TMPDIR").map(PathBuf::from);
    let ok = dir == Path::new("/tmp") || tmpdir.as_deref().is_some_and(|t| t == dir);
    ok.then(|| p.to_path_buf())
}

/// Claude Code's snapshot file: `<config dir>/shell-snapshots/snapshot-(bash|zsh)-N-X.sh`,
/// the config dir being `$CLAUDE_CONFIG_DIR` or `~/.claude`.
fn snapshot_file(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    let name = p.file_name()?.to_str()?;
    let rest = name.strip_prefix("snapshot-")?.strip_suffix(".sh")?;
    let mut parts = rest.splitn(3, '-');
    let (shell, n, id) = (parts.next()?, parts.next()?, parts.next()?);
    let id_ok = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric());
    let n_ok = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    if !matches!(shell, "bash" | "zsh") || !id_ok || !n_ok {
        return None;
    }
    let dir = p.parent()?;
    if dir.file_name()? != "shell-snapshots" {
        return None;
    }
    let config = dir.parent()?;
    let claude_dir = match std::env::var_os("CLAUDE_CONFIG_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".claude"),
    };
    (config == claude_dir).then(|| p.to_path_buf())
}

fn nonce() -> String {
    let mut b = [0u8; 16];
    let got = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if got.is_err() {
        // Not a secret (see the module's comment): only tells our marker from output.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        b.copy_from_slice(&(t ^ u128::from(std::process::id())).to_le_bytes());
    }
    crate::durable::hex(&b)
}

/// Recognises Claude Code's command wrapper or snapshot script; `None` for anything else
/// (run as it is). The snapshot is built in the run's private TMPDIR: without one (a policy
/// with `private_tmp = false`) it runs as it is, writing the agent's file where the policy
/// lets it.
pub(super) fn prepare(script: &str, private_tmp: bool) -> Option<Prepared> {
    let n = nonce();
    // The command wrapper: `... && pwd -P >| FILE` at its very end.
    if let Some((head, file)) = script.rsplit_once(" && pwd -P >| ")
        && head.contains("eval ")
        && let Some(file) = cwd_file(file)
    {
        let marker = format!("\n\x1egateway-cwd-{n}\x1e");
        return Some(Prepared {
            script: format!("{head} && {{ printf '\\n\\036gateway-cwd-{n}\\036'; pwd -P; }}"),
            deliver: Deliver::Cwd(file),
            marker: marker.into_bytes(),
        });
    }
    // The snapshot: its first line names the file.
    if !private_tmp {
        return None;
    }
    let trimmed = script.trim_start();
    let (first, rest) = trimmed.split_once('\n')?;
    let file = snapshot_file(first.trim_end().strip_prefix("SNAPSHOT_FILE=")?)?;
    let marker = format!("\n\x1egateway-snapshot-{n}\x1e");
    Some(Prepared {
        script: format!(
            "SNAPSHOT_FILE=\"$TMPDIR/gateway-snapshot-{n}.sh\"\n{rest}\nprintf '\\n\\036gateway-snapshot-{n}\\036' && cat \"$SNAPSHOT_FILE\"\n"
        ),
        deliver: Deliver::Snapshot(file),
        marker: marker.into_bytes(),
    })
}

/// The most that is held back after the marker: a shell snapshot (functions, aliases,
/// options) is far smaller. A command can print the marker itself (its own script names the
/// nonce), so past this the filter gives up and passes everything on: the front end's
/// memory stays bounded whatever the confined command prints, and its output is not hidden.
pub(super) const HOLD_MAX: usize = 8 << 20;

/// Passes stdout through, holding back from the marker on (and any tail that could begin
/// one), so the agent sees the command's output as the plain wrapper would print it.
pub(super) struct TailFilter {
    marker: Vec<u8>,
    held: Vec<u8>,
    /// More than `HOLD_MAX` followed a marker: everything passes through, nothing is delivered.
    gave_up: bool,
}

impl TailFilter {
    pub(super) fn new(marker: Vec<u8>) -> TailFilter {
        TailFilter {
            marker,
            held: Vec::new(),
            gave_up: false,
        }
    }

    pub(super) fn feed(&mut self, b: &[u8], out: &mut dyn FnMut(&[u8])) {
        if self.gave_up {
            out(b);
            return;
        }
        if self.held.len() + b.len() > self.marker.len() + HOLD_MAX {
            out(&self.held);
            out(b);
            self.held = Vec::new();
            self.gave_up = true;
            return;
        }
        self.held.extend_from_slice(b);
        let m = &self.marker;
        let keep_from = match find(&self.held, m) {
            Some(p) => p,
            None => (1..m.len())
                .rev()
                .find(|&k| self.held.ends_with(&m[..k]))
                .map_or(self.held.len(), |k| self.held.len() - k),
        };
        if keep_from > 0 {
            out(&self.held[..keep_from]);
            self.held.drain(..keep_from);
        }
    }

    /// At the end of the run: what followed the marker (`None`, and everything held
    /// passed on, when the output did not end with one).
    pub(super) fn finish(self, out: &mut dyn FnMut(&[u8])) -> Option<Vec<u8>> {
        if self.gave_up {
            return None;
        }
        match self.held.strip_prefix(self.marker.as_slice()) {
            Some(payload) if find(payload, &self.marker).is_none() => Some(payload.to_vec()),
            _ => {
                if !self.held.is_empty() {
                    out(&self.held);
                }
                None
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Writes what the run printed after its marker to the file the agent named.
pub(super) fn deliver(d: &Deliver, payload: &[u8]) -> Result<(), String> {
    let (path, create_new) = match d {
        Deliver::Cwd(p) => {
            // `pwd -P` prints one absolute path and a newline.
            if !payload.starts_with(b"/")
                || !payload.ends_with(b"\n")
                || payload[..payload.len() - 1].contains(&b'\n')
            {
                return Err(format!(
                    "the command's final directory could not be read back for {}",
                    p.display()
                ));
            }
            (p, false)
        }
        Deliver::Snapshot(p) => (p, true),
    };
    let mut o = std::fs::OpenOptions::new();
    o.write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    if create_new {
        o.create_new(true);
    } else {
        o.create(true);
    }
    let what = |e: std::io::Error| format!("writing {}: {e}", path.display());
    let mut f = o.open(path).map_err(what)?;
    let meta = f.metadata().map_err(what)?;
    // Another user's file (planted in /tmp under the name the agent will read back) is not
    // written: its owner could change what the agent reads.
    let ours = meta.uid() == crate::sandbox::effective_uid();
    // A second name (a hard link planted in /tmp to a file elsewhere) would have the write
    // land in that file: the agent's file has one name only.
    if !meta.is_file() || !ours || meta.nlink() != 1 || meta.permissions().mode() & 0o022 != 0 {
        return Err(format!(
            "{} is not a regular file of this user, with one name and writable by it alone: not written (remove it and run the command again)",
            path.display()
        ));
    }
    f.set_len(0).map_err(what)?;
    f.write_all(payload).map_err(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: &Prepared, chunks: &[&[u8]]) -> (Vec<u8>, Option<Vec<u8>>) {
        let mut f = TailFilter::new(p.marker.clone());
        let mut shown = Vec::new();
        for c in chunks {
            f.feed(c, &mut |b| shown.extend_from_slice(b));
        }
        let got = f.finish(&mut |b| shown.extend_from_slice(b));
        (shown, got)
    }

    #[test]
    fn claude_codes_wrapper_is_rewritten_and_its_cwd_kept_out_of_the_output() {
        let w = "shopt -u extglob 2>/dev/null || true && eval 'echo hi' < /dev/null && pwd -P >| /tmp/claude-5a9f-cwd";
        let p = prepare(w, true).expect("recognised");
        assert_eq!(p.deliver, Deliver::Cwd("/tmp/claude-5a9f-cwd".into()));
        assert!(p.script.starts_with(
            "shopt -u extglob 2>/dev/null || true && eval 'echo hi' < /dev/null && { printf"
        ));
        let m = p.marker.clone();
        // The marker split across chunks, and output without a final newline.
        let mut all = b"hi".to_vec();
        all.extend_from_slice(&m);
        all.extend_from_slice(b"/ws/sub\n");
        let (a, b) = all.split_at(4);
        let (shown, got) = run(&p, &[a, b]);
        assert_eq!(shown, b"hi");
        assert_eq!(got.as_deref(), Some(&b"/ws/sub\n"[..]));
        // No marker (the command failed): everything is output.
        let (shown, got) = run(&p, &[b"out\n", b"\n\x1egat"]);
        assert_eq!(shown, b"out\n\n\x1egat");
        assert_eq!(got, None);
    }

    #[test]
    fn what_follows_a_marker_is_held_within_a_bound_and_then_passed_on() {
        // The command reads the nonce from its own script and prints the marker, then more
        // than a snapshot could be: the filter holds at most HOLD_MAX and then shows it all.
        let w = "eval 'x' && pwd -P >| /tmp/claude-5a9f-cwd";
        let p = prepare(w, true).expect("recognised");
        let mut f = TailFilter::new(p.marker.clone());
        let mut shown = 0usize;
        f.feed(&p.marker, &mut |b| shown += b.len());
        let chunk = vec![b'x'; 64 << 10];
        let chunks = (HOLD_MAX / chunk.len()) * 2;
        for _ in 0..chunks {
            f.feed(&chunk, &mut |b| shown += b.len());
            assert!(
                f.held.len() <= p.marker.len() + HOLD_MAX,
                "held grows unbounded"
            );
        }
        let got = f.finish(&mut |b| shown += b.len());
        assert_eq!(got, None, "nothing is delivered after giving up");
        assert_eq!(
            shown,
            p.marker.len() + chunks * chunk.len(),
            "all of it is shown"
        );
    }

    #[test]
    fn only_claude_codes_file_shapes_are_recognised() {
        let none = |s: &str| prepare(s, true).is_none();
        assert!(none("eval 'x' && pwd -P >| /etc/passwd"));
        assert!(none("eval 'x' && pwd -P >| /tmp/claude-zz-cwd"));
        assert!(none("eval 'x' && pwd -P >| /tmp/sub/claude-5a-cwd"));
        assert!(none("echo hi"));
        assert!(none(
            "SNAPSHOT_FILE=/etc/profile\necho x >| \"$SNAPSHOT_FILE\""
        ));
        assert!(none(
            "SNAPSHOT_FILE=/tmp/shell-snapshots/snapshot-bash-1-a.sh\necho"
        ));
        // A snapshot of the right shape is built in a private TMPDIR only.
        let home = std::env::var("HOME").unwrap_or_default();
        let snap =
            format!("SNAPSHOT_FILE={home}/.claude/shell-snapshots/snapshot-bash-1-a.sh\necho");
        if std::env::var_os("CLAUDE_CONFIG_DIR").is_none() && !home.is_empty() {
            assert!(prepare(&snap, true).is_some());
            assert!(prepare(&snap, false).is_none());
        }
    }
}
