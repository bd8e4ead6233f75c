//! Starting the confined child: the pipes, argv and environment as C strings, and the
//! [`sys::ChildPlan`] that carries every layer's preparation into the child, which applies
//! them between clone and execve (`sys::spawn`).

use super::caps::Caps;
use super::cgroup::{RunCgroup, Version};
use super::mounts::Mounts;
use super::rlimits::Rlimits;
use super::{SandboxError, Spec, Stdin, cstr};
use crate::sys;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// What the layers prepared for the child.
pub(crate) struct Layers {
    /// Namespaces: `Some(net_ns)`; `None` without.
    pub ns: Option<bool>,
    /// The run's user namespace maps (with namespaces).
    pub userns: Option<sys::UserMaps>,
    /// Bring up `lo` (network `loopback` in its own namespace).
    pub loopback: bool,
    pub mounts: Mounts,
    pub cgroup: Option<RunCgroup>,
    pub rlimits: Rlimits,
    pub caps: Caps,
    pub landlock: Option<OwnedFd>,
    pub bpf: Vec<libc::sock_filter>,
}

/// A started child and the broker's ends of its pipes.
pub(crate) struct Child {
    pub pid: libc::pid_t,
    pub pidfd: OwnedFd,
    pub out_r: std::io::PipeReader,
    pub err_r: std::io::PipeReader,
    pub rep_r: std::io::PipeReader,
    /// The command's stdin, when the broker writes it (filtered, channel).
    pub stdin_w: Option<std::io::PipeWriter>,
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> SandboxError {
    move |source| SandboxError::Io { what, source }
}

/// The pipes of a run: the child's ends and the broker's.
struct Pipes {
    out: (std::io::PipeReader, OwnedFd),
    err: (std::io::PipeReader, OwnedFd),
    rep: (std::io::PipeReader, OwnedFd),
    /// The child's stdin, unless it inherits ours.
    stdin: Option<OwnedFd>,
    stdin_w: Option<std::io::PipeWriter>,
}

fn pipes(stdin: &Stdin) -> Result<Pipes, SandboxError> {
    let pipe = |what| {
        std::io::pipe()
            .map(|(r, w)| (r, OwnedFd::from(w)))
            .map_err(io(what))
    };
    let out = pipe("creating the stdout pipe")?;
    let err = pipe("creating the stderr pipe")?;
    let rep = pipe("creating the report pipe")?;
    let mut stdin_w = None;
    let stdin = match stdin {
        Stdin::Inherit => None,
        Stdin::Fd(fd) => Some(fd.try_clone().map_err(io("passing the caller's stdin"))?),
        Stdin::Null => Some(
            std::fs::File::open("/dev/null")
                .map_err(io("opening /dev/null"))?
                .into(),
        ),
        Stdin::Filtered | Stdin::FilteredFd(_) | Stdin::Channel(_) => {
            let (r, w) = std::io::pipe().map_err(io("creating the stdin pipe"))?;
            sys::set_nonblocking(w.as_raw_fd()).map_err(io("configuring the stdin pipe"))?;
            stdin_w = Some(w);
            Some(r.into())
        }
    };
    Ok(Pipes {
        out,
        err,
        rep,
        stdin,
        stdin_w,
    })
}

/// argv and the environment as C strings.
fn c_strings(
    spec: &Spec,
) -> Result<(Vec<std::ffi::CString>, Vec<std::ffi::CString>), SandboxError> {
    let mut env = Vec::with_capacity(spec.env.len());
    for (k, v) in &spec.env {
        let mut b = k.as_bytes().to_vec();
        b.push(b'=');
        b.extend_from_slice(v.as_bytes());
        env.push(cstr(&b, "an environment variable")?);
    }
    let mut argv = Vec::with_capacity(spec.argv.len());
    for a in &spec.argv {
        argv.push(cstr(a.as_bytes(), "an argument")?);
    }
    Ok((argv, env))
}

/// Starts `spec`'s child with the layers' preparation. Returns it with the broker's ends of
/// its pipes, and the cgroup it joined (to read its OOM count afterwards).
pub(crate) fn start(
    spec: &Spec,
    layers: Layers,
) -> Result<(Child, Option<RunCgroup>), SandboxError> {
    let c = &spec.confine;
    let p = pipes(&spec.stdin)?;
    let (argv, envp) = c_strings(spec)?;
    let broker_pidfd = sys::own_pidfd().map_err(io("opening a pidfd for the broker"))?;
    let cg = layers.cgroup;
    let m = layers.mounts;
    let plan = sys::ChildPlan {
        path: cstr(spec.program.as_os_str().as_bytes(), "the program path")?,
        argv,
        envp,
        cwd: cstr(spec.cwd.as_os_str().as_bytes(), "the working directory")?,
        stdin: p.stdin.as_ref().map(sys::raw),
        stdout: sys::raw(&p.out.1),
        stderr: sys::raw(&p.err.1),
        report: sys::raw(&p.rep.1),
        landlock: layers.landlock.as_ref().map(sys::raw),
        bpf: layers.bpf,
        rlimits: layers.rlimits.set,
        ns: layers.ns.map(|net| sys::NsPlan {
            net,
            loopback: layers.loopback,
            proxy: spec
                .proxy
                .as_ref()
                .map(|p| (p.listen_to.as_raw_fd(), p.port)),
            userns: layers.userns,
            trees: (0..m.writable).map(|_| std::cell::Cell::new(-1)).collect(),
            read_only_host: m.read_only_host,
            mounts: m.steps,
            pid_max: layers.rlimits.pid_max,
            proc_access: m.proc_access,
            tmpfs: m.tmpfs,
            cgroup_tasks: cg
                .as_ref()
                .filter(|c| c.version == Version::V1)
                .map(|c| sys::raw(&c.fd)),
            cgroup_fd: cg
                .as_ref()
                .filter(|c| c.version == Version::V2)
                .map(|c| sys::raw(&c.fd)),
        }),
        cap_last: layers.caps.cap_last,
        privileged: layers.caps.lock,
        identity: c.run_as.as_ref().map(|u| (u.uid, u.gid, u.groups.clone())),
        stack: vec![0u8; sys::CHILD_STACK],
        broker_pidfd: sys::raw(&broker_pidfd),
        broker_only: p.stdin_w.iter().map(|w| w.as_raw_fd()).collect(),
    };
    let (pid, pidfd) = sys::spawn(&plan).map_err(|e| match e {
        sys::SpawnError::Clone(e)
            if plan.ns.is_some()
                && matches!(
                    e.raw_os_error(),
                    Some(libc::EPERM | libc::ENOSPC | libc::EUSERS | libc::EINVAL | libc::EACCES)
                ) =>
        {
            SandboxError::UserNamespaces {
                why: format!("creating the run's namespaces: {e}"),
            }
        }
        sys::SpawnError::UserMaps(e) => SandboxError::UserNamespaces {
            why: format!("mapping the caller into the run's user namespace: {e}"),
        },
        sys::SpawnError::Clone(e) | sys::SpawnError::Other(e) => SandboxError::Io {
            what: "starting the sandboxed process",
            source: e,
        },
    })?;
    // The child's ends, the ruleset, the pinned writable areas and the broker's pidfd close
    // here: the pipes must end when the command's side does.
    drop((
        m.pinned,
        plan,
        broker_pidfd,
        p.out.1,
        p.err.1,
        p.rep.1,
        layers.landlock,
        p.stdin,
    ));
    let child = Child {
        pid,
        pidfd,
        out_r: p.out.0,
        err_r: p.err.0,
        rep_r: p.rep.0,
        stdin_w: p.stdin_w,
    };
    Ok((child, cg))
}
