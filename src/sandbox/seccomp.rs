//! The seccomp filter: a deny-list compiled by `seccompiler` (which also kills on a foreign
//! architecture), prefixed with our own check that refuses x32-ABI syscall numbers on x86_64,
//! which share the x86_64 audit arch and would otherwise bypass a per-number filter.
//!
//! Denied calls fail with `EPERM` (so programs see an ordinary error), except `clone3`, which
//! fails with `ENOSYS` so that libc falls back to `clone`, whose flags we can inspect.

use super::{LayerStatus, Network, SandboxError};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// One group of denied syscalls and why.
struct Group {
    why: &'static str,
    calls: &'static [libc::c_long],
}

/// Unconditionally denied syscalls, by reason.
fn groups() -> Vec<Group> {
    let mut g = vec![
        Group {
            why: "debugging other processes reads and changes their memory",
            calls: &[
                libc::SYS_ptrace,
                libc::SYS_process_vm_readv,
                libc::SYS_process_vm_writev,
                libc::SYS_kcmp,
                libc::SYS_pidfd_getfd,
            ],
        },
        Group {
            why: "mounts and root changes rewrite what paths mean",
            calls: &[
                libc::SYS_mount,
                libc::SYS_umount2,
                libc::SYS_pivot_root,
                libc::SYS_chroot,
                libc::SYS_move_mount,
                libc::SYS_open_tree,
                libc::SYS_fsopen,
                libc::SYS_fsmount,
                libc::SYS_fsconfig,
                libc::SYS_fspick,
                libc::SYS_mount_setattr,
            ],
        },
        Group {
            why: "new or foreign namespaces are how container escapes start",
            calls: &[libc::SYS_unshare, libc::SYS_setns],
        },
        Group {
            why: "the kernel keyring holds other sessions' credentials",
            calls: &[libc::SYS_keyctl, libc::SYS_add_key, libc::SYS_request_key],
        },
        Group {
            why: "bpf, perf, userfaultfd and io_uring are large kernel attack surfaces (io_uring also bypasses seccomp for the operations it performs)",
            calls: &[
                libc::SYS_bpf,
                libc::SYS_perf_event_open,
                libc::SYS_userfaultfd,
                libc::SYS_io_uring_setup,
                libc::SYS_io_uring_enter,
                libc::SYS_io_uring_register,
            ],
        },
        Group {
            why: "kernel, module, swap, reboot and accounting control belong to the administrator",
            calls: &[
                libc::SYS_kexec_load,
                libc::SYS_kexec_file_load,
                libc::SYS_init_module,
                libc::SYS_finit_module,
                libc::SYS_delete_module,
                libc::SYS_swapon,
                libc::SYS_swapoff,
                libc::SYS_reboot,
                libc::SYS_acct,
                libc::SYS_quotactl,
                libc::SYS_syslog,
                libc::SYS_vhangup,
                libc::SYS_settimeofday,
                libc::SYS_clock_settime,
                libc::SYS_clock_adjtime,
                libc::SYS_adjtimex,
                libc::SYS_sethostname,
                libc::SYS_setdomainname,
            ],
        },
        Group {
            why: "file handles open files by inode, bypassing path-based checks (the shocker escape)",
            calls: &[libc::SYS_open_by_handle_at, libc::SYS_name_to_handle_at],
        },
        Group {
            why: "fanotify can watch and block file access of other processes",
            calls: &[libc::SYS_fanotify_init],
        },
    ];
    #[cfg(target_arch = "x86_64")]
    g.push(Group {
        why: "raw I/O port access and obsolete loaders",
        calls: &[
            libc::SYS_iopl,
            libc::SYS_ioperm,
            libc::SYS_uselib,
            libc::SYS_modify_ldt,
        ],
    });
    g
}

/// Namespace clone flags that `clone` may not use.
const NS_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// Why the filter could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// seccompiler refused a rule, the architecture or the program.
    #[error(transparent)]
    Compiler(#[from] seccompiler::BackendError),
    /// The search tree's jumps do not fit in 8 bits (too many syscalls in the deny-list).
    #[error("the syscall search tree is too large for BPF's 8-bit jumps")]
    TreeTooLarge,
}

/// The seccomp layer: the filter the command installs last, just before `execve`, and its
/// status (always enforced when the run starts: the child fails the run otherwise).
pub(crate) fn layer(
    network: &Network,
    openat2: bool,
) -> Result<(Vec<libc::sock_filter>, LayerStatus), SandboxError> {
    let bpf = build(network, openat2)?;
    Ok((bpf, LayerStatus::Enforced))
}

fn cond(idx: u8, len: Len, op: Op, v: u64) -> Result<Cond, SeccompError> {
    Ok(Cond::new(idx, len, op, v)?)
}

fn rule(conds: Vec<Cond>) -> Result<SeccompRule, SeccompError> {
    Ok(SeccompRule::new(conds)?)
}

/// Builds the program for a network mode.
/// `openat2`: allow `openat2` (see [`super::Confinement::danger_openat2`]); otherwise it
/// answers ENOSYS.
#[allow(
    clippy::too_many_lines,
    reason = "the syscall table, one entry per rule"
)]
pub(crate) fn build(
    network: &Network,
    openat2: bool,
) -> Result<Vec<libc::sock_filter>, SeccompError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for g in groups() {
        let _ = g.why;
        for &c in g.calls {
            rules.insert(c, vec![]);
        }
    }
    // clone with any namespace flag (arg 0 on every architecture).
    let mut clone_rules = Vec::new();
    for f in NS_FLAGS {
        clone_rules.push(rule(vec![cond(0, Len::Qword, Op::MaskedEq(f), f)?])?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    // personality: only the query (0xffffffff) and PER_LINUX are allowed; other personas change
    // address-space layout or syscall semantics (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, ...).
    rules.insert(
        libc::SYS_personality,
        vec![rule(vec![
            cond(0, Len::Dword, Op::Ne, 0)?,
            cond(0, Len::Dword, Op::Ne, 0xffff_ffff)?,
        ])?],
    );
    // ioctl TIOCSTI / TIOCLINUX push input into a terminal (typing commands into the user's
    // shell). The kernel uses the low 32 bits of the request, so compare those with a mask
    // over the full 64-bit argument: high bits cannot smuggle it past (CVE-2019-10063).
    // The ioctl request constants are u64 on some targets and i32 on others.
    #[allow(clippy::unnecessary_cast)]
    let (tiocsti, tioclinux) = (libc::TIOCSTI as u64, libc::TIOCLINUX as u64);
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(
                1,
                Len::Qword,
                Op::MaskedEq(0xffff_ffff),
                tiocsti,
            )?])?,
            rule(vec![cond(
                1,
                Len::Qword,
                Op::MaskedEq(0xffff_ffff),
                tioclinux,
            )?])?,
        ],
    );
    // Setuid/setgid bits: the command runs as uid 0, and a setuid-root file it leaves in the
    // workspace would give root to whoever runs it later outside the sandbox (no_new_privs
    // only protects inside). Deny setting S_ISUID or S_ISGID through chmod and through the mode
    // of open/creat.
    let suid_rules = |arg: u8| -> Result<Vec<SeccompRule>, SeccompError> {
        Ok(vec![
            rule(vec![cond(arg, Len::Dword, Op::MaskedEq(0o4000), 0o4000)?])?,
            rule(vec![cond(arg, Len::Dword, Op::MaskedEq(0o2000), 0o2000)?])?,
        ])
    };
    rules.insert(libc::SYS_fchmod, suid_rules(1)?);
    rules.insert(libc::SYS_fchmodat, suid_rules(2)?);
    rules.insert(libc::SYS_fchmodat2, suid_rules(2)?);
    rules.insert(libc::SYS_openat, suid_rules(3)?);
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_chmod, suid_rules(1)?);
        rules.insert(libc::SYS_open, suid_rules(2)?);
        rules.insert(libc::SYS_creat, suid_rules(1)?);
    }
    // Sockets: only what the network mode allows. socketpair(AF_UNIX, SOCK_STREAM or
    // SOCK_SEQPACKET) is always allowed (pipes between the command's own processes); every
    // other socketpair is denied. A datagram pair (SOCK_DGRAM, or SOCK_RAW, which AF_UNIX turns
    // into SOCK_DGRAM) would reach any pathname datagram socket on the host — journald's
    // `/run/systemd/journal/socket` and `/dev/log`, `$NOTIFY_SOCKET` — through `sendto`,
    // `sendmsg` (whose address seccomp cannot read) or `connect`, and landlock does not
    // mediate either. A connected stream pair refuses `connect` (EISCONN) and a destination
    // address on send; a seqpacket pair ignores the address and sends to its peer.
    let mut pair_rules = vec![rule(vec![cond(
        0,
        Len::Dword,
        Op::Ne,
        libc::AF_UNIX as u64,
    )?])?];
    // The type's low four bits (SOCK_NONBLOCK and SOCK_CLOEXEC are flags above them).
    for t in 0..16u64 {
        if t == libc::SOCK_STREAM as u64 || t == libc::SOCK_SEQPACKET as u64 {
            continue;
        }
        pair_rules.push(rule(vec![cond(1, Len::Dword, Op::MaskedEq(0xf), t)?])?);
    }
    rules.insert(libc::SYS_socketpair, pair_rules);
    match network {
        Network::None => {
            rules.insert(libc::SYS_socket, vec![]);
        }
        Network::Loopback | Network::Proxy(_) | Network::ConnectTcp(_) => {
            // Allow AF_INET/AF_INET6 stream and datagram (loopback: inside a private network
            // namespace) or stream only (connect_tcp, where landlock restricts the ports).
            // Deny every other family (unix: reaches agents and daemons outside; netlink,
            // packet: raw access) and raw sockets.
            // One rule: the family is neither AF_INET nor AF_INET6 (conditions are ANDed).
            let mut socket_rules = vec![rule(vec![
                cond(0, Len::Dword, Op::Ne, libc::AF_INET as u64)?,
                cond(0, Len::Dword, Op::Ne, libc::AF_INET6 as u64)?,
            ])?];
            for fam in [libc::AF_INET as u64, libc::AF_INET6 as u64] {
                let allowed_types: &[u64] = if network.private_loopback() {
                    &[libc::SOCK_STREAM as u64, libc::SOCK_DGRAM as u64]
                } else {
                    &[libc::SOCK_STREAM as u64]
                };
                // Deny every socket type of this family that is not allowed.
                for t in 0..16u64 {
                    if allowed_types.contains(&t) {
                        continue;
                    }
                    socket_rules.push(rule(vec![
                        cond(0, Len::Dword, Op::Eq, fam)?,
                        cond(1, Len::Dword, Op::MaskedEq(0xf), t)?,
                    ])?);
                }
            }
            rules.insert(libc::SYS_socket, socket_rules);
        }
    }

    // Unconditional denials are answered by the search tree itself; seccompiler compiles only
    // the rules with argument conditions (a shorter program is cheaper to install).
    let ruled: Vec<(u32, bool)> = rules
        .iter()
        .map(|(k, v)| (*k as u32, v.is_empty()))
        .collect();
    rules.retain(|_, v| !v.is_empty());
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let main: BpfProgram = filter.try_into()?;

    // clone3 passes its flags in memory that seccomp cannot read: answer ENOSYS so libc uses
    // clone, which the rules above inspect. Then, on x86_64, refuse x32 syscall numbers.
    let mut prog = prefix(openat2);
    prog.extend(search_tree(&ruled)?);
    prog.extend(main.into_iter().map(|f| libc::sock_filter {
        code: f.code,
        jt: f.jt,
        jf: f.jf,
        k: f.k,
    }));
    Ok(prog)
}

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Hand-written prefix (seccompiler has no range rules): arch check, x32 refusal, clone3 and
/// openat2 → ENOSYS (unless `openat2`: gateway's own file-tool worker).
fn prefix(openat2: bool) -> Vec<libc::sock_filter> {
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;
    let mut p = vec![
        stmt(BPF_LD_W_ABS, OFF_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, OFF_NR),
    ];
    if cfg!(target_arch = "x86_64") {
        // x32 syscalls have bit 30 set.
        p.push(jump(BPF_JGE_K, 0x4000_0000, 0, 1));
        p.push(stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::EPERM as u32));
    }
    p.push(jump(BPF_JEQ_K, libc::SYS_clone3 as u32, 0, 1));
    p.push(stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    // openat2 passes its mode in memory: ENOSYS, and libc falls back to openat.
    if !openat2 {
        p.push(jump(BPF_JEQ_K, libc::SYS_openat2 as u32, 0, 1));
        p.push(stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32));
    }
    p
}

/// Syscalls per leaf of the search tree.
const LEAF: usize = 4;

/// A binary search over the syscall numbers that have rules (seccompiler checks them one after
/// another, which costs every syscall of every program hundreds of instructions). `ruled` is
/// sorted `(nr, unconditional)`. Numbers not in it are allowed after about ten instructions;
/// unconditional ones are denied with EPERM; the others fall through to seccompiler's program,
/// which must follow. Expects the syscall number in the accumulator.
fn search_tree(ruled: &[(u32, bool)]) -> Result<Vec<libc::sock_filter>, SeccompError> {
    let mut code = Vec::new();
    let mut jumps = Vec::new();
    emit(ruled, &mut code, &mut jumps);
    let len = code.len();
    // After the tree: [RET EPERM] then seccompiler's program.
    code.push(stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::EPERM as u32));
    for (i, deny) in jumps {
        let off = len - i - 1 + usize::from(!deny);
        code[i].jt = u8::try_from(off).map_err(|_| SeccompError::TreeTooLarge)?;
    }
    Ok(code)
}

fn emit(nrs: &[(u32, bool)], code: &mut Vec<libc::sock_filter>, jumps: &mut Vec<(usize, bool)>) {
    if nrs.len() <= LEAF {
        for &(n, deny) in nrs {
            jumps.push((code.len(), deny));
            code.push(jump(BPF_JEQ_K, n, 0, 0));
        }
        code.push(stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
        return;
    }
    let mid = nrs.len() / 2;
    let at = code.len();
    code.push(jump(BPF_JGE_K, nrs[mid].0, 0, 0));
    emit(&nrs[..mid], code, jumps);
    let left = code.len() - at - 1;
    // Jumps are 8-bit; the tree for a few hundred syscalls stays far below that.
    code[at].jt = u8::try_from(left).unwrap_or(u8::MAX);
    emit(&nrs[mid..], code, jumps);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_build_for_every_network_mode() {
        for n in [
            Network::None,
            Network::Loopback,
            Network::ConnectTcp(vec![443]),
        ] {
            for openat2 in [false, true] {
                let p = build(&n, openat2).expect("filter builds");
                assert!(p.len() > 20 && p.len() < 4096, "{}", p.len());
            }
        }
    }

    #[test]
    fn openat2_is_enosys_unless_the_worker_asks_for_it() {
        let nr = libc::SYS_openat2 as u32;
        let enosys = SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        assert_eq!(eval(&prefix(false), nr), enosys);
        // Past the prefix (falls through to the rest of the program: not answered here).
        assert_eq!(eval(&prefix(true), nr), u32::MAX);
        // clone3 stays ENOSYS either way (its flags are in memory).
        assert_eq!(eval(&prefix(true), libc::SYS_clone3 as u32), enosys);
    }

    /// Runs a classic BPF program over (arch, nr) the way the kernel would, for the instructions
    /// this module emits.
    fn eval(prog: &[libc::sock_filter], nr: u32) -> u32 {
        let mut a: u32 = 0;
        let mut pc = 0usize;
        loop {
            // Falling off our part means seccompiler's program would run next.
            let Some(&f) = prog.get(pc) else {
                return u32::MAX;
            };
            pc += 1;
            match f.code {
                BPF_LD_W_ABS => {
                    a = if f.k == OFF_ARCH {
                        62 | 0x8000_0000 | 0x4000_0000
                    } else {
                        nr
                    }
                }
                BPF_JEQ_K => pc += if a == f.k { f.jt } else { f.jf } as usize,
                BPF_JGE_K => pc += if a >= f.k { f.jt } else { f.jf } as usize,
                BPF_RET_K => return f.k,
                // Past our prefix and tree: seccompiler's program decides.
                _ => return u32::MAX,
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn search_tree_allows_unruled_and_defers_ruled_syscalls() {
        let nrs: Vec<u32> = vec![
            1, 5, 9, 16, 41, 56, 101, 135, 155, 165, 166, 250, 321, 425, 426, 427,
        ];
        // Every third one has argument conditions; the others are denied outright.
        let ruled: Vec<(u32, bool)> = nrs
            .iter()
            .enumerate()
            .map(|(i, n)| (*n, i % 3 != 0))
            .collect();
        let mut prog = prefix(false);
        prog.extend(search_tree(&ruled).expect("tree"));
        for nr in 0..460u32 {
            let r = eval(&prog, nr);
            if nr == libc::SYS_clone3 as u32 || nr == libc::SYS_openat2 as u32 {
                assert_eq!(r, SECCOMP_RET_ERRNO | libc::ENOSYS as u32);
            } else if let Some((_, deny)) = ruled.iter().find(|(n, _)| *n == nr) {
                if *deny {
                    assert_eq!(r, SECCOMP_RET_ERRNO | libc::EPERM as u32, "nr {nr} denied");
                } else {
                    assert_eq!(r, u32::MAX, "nr {nr} must reach the rules");
                }
            } else {
                assert_eq!(r, SECCOMP_RET_ALLOW, "nr {nr} must be allowed early");
            }
        }
        assert_eq!(
            eval(&prog, 0x4000_0000 | 101),
            SECCOMP_RET_ERRNO | libc::EPERM as u32
        );
    }

    #[test]
    fn every_group_has_a_reason() {
        assert!(
            groups()
                .iter()
                .all(|g| !g.why.is_empty() && !g.calls.is_empty())
        );
    }
}

#[cfg(test)]
mod layer_tests {
    use super::super::{LayerStatus, Network};
    use super::layer;
    use crate::sys;

    /// Seccomp alone, in a forked child: with `network = none`, an AF_INET socket that opened
    /// before the filter is refused after it, as is ptrace.
    #[test]
    fn seccomp_alone_refuses_sockets_and_ptrace() {
        let (bpf, status) = layer(&Network::None, false).expect("filter");
        assert_eq!(status, LayerStatus::Enforced);
        let code = sys::testing::in_fork(|| {
            drop(std::net::TcpListener::bind("127.0.0.1:0").expect("a socket before"));
            sys::set_no_new_privs().expect("no_new_privs");
            sys::install_seccomp(&bpf).expect("install");
            let e = std::net::TcpListener::bind("127.0.0.1:0").expect_err("socket refused");
            assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
            let e = sys::testing::ptrace_traceme().expect_err("ptrace refused");
            assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
            0
        });
        assert_eq!(code, 0);
    }
}
