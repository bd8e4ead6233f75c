//! Issue 34: one sandbox for every user. A test per class of attack that worked on main as a
//! normal user (and several as root) because protection was built from root's privileges and
//! from names: each runs as root and as uid 65534 (`escape_test!`) with the same assertions.
//!
//! The promise behind all of them: every run gets user, mount, pid, ipc, uts and network
//! namespaces; the host is read-only, the writable areas are bound from descriptors (a
//! writable area that is a symlink is refused with its name), protected paths are read-only,
//! denied paths are masked with their ancestors pinned, and nothing is put back after a run.

use crate::util::*;
use std::os::unix::fs::MetadataExt;

/// git outside any sandbox, with the test's HOME, as the owner of the test's tree (uid 65534
/// in a `nobody` variant: git ignores a repository another user owns).
fn git(env: &Env, args: &[&str]) -> Output {
    let mut c = if env.as_nobody {
        env.give_to_nobody();
        let mut c = env.raw(NOBODY[0]);
        c.args(&NOBODY[1..]).args(["--", "git"]);
        c
    } else {
        env.raw("git")
    };
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("git")
}

/// A repository in the workspace, made by the test.
fn git_init(env: &Env) {
    let o = env
        .raw("git")
        .args(["init", "-q"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git init");
    assert!(o.status.success(), "git init: {}", text(&o));
}

/// What a run must not change about a file it may not write: mode, owner, times (ctime
/// moves with any change of metadata, chown to the same owner included) and extended
/// attributes.
#[derive(Debug, PartialEq)]
struct Meta {
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
    xattrs: String,
}

fn meta(p: &Path) -> Meta {
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let x = Command::new("python3")
        .args([
            "-c",
            "import os, sys; print(sorted(os.listxattr(sys.argv[1], follow_symlinks=False)))",
        ])
        .arg(p)
        .output()
        .expect("python3");
    assert!(x.status.success(), "listxattr: {}", text(&x));
    Meta {
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
        xattrs: stdout(&x),
    }
}

escape_test! {
    /// Attack: landlock has no right for chmod, chown, utimes or xattrs, so a run under
    /// `strict` changed the metadata of files it may not write: `~/.ssh/id_ed25519` made 0644,
    /// `~/.bashrc` back-dated, the gateway's own signing key made readable, a file elsewhere
    /// given an xattr (as uid 65534, and as root where no read-only mount covers the path).
    /// Promise: outside the writable areas the host is read-only (EROFS) for every user: each
    /// operation fails and the file's mode, owner, times and xattrs are unchanged.
    fn metadata_outside_the_writable_area_cannot_change() {
        let env = Env::new("metadata");
        // A run first, so the state directory holds the broker's signing key.
        let o = env.exec("strict", &["true"]);
        assert!(o.status.success(), "{}", text(&o));
        std::fs::create_dir_all(env.home.join(".ssh")).expect("mkdir");
        let files = [
            (env.home.join(".ssh/id_ed25519"), 0o600),
            (env.home.join(".bashrc"), 0o644),
            (env.outside.join("notes.txt"), 0o644),
            (env.state.join("keys/epoch-0.key"), 0o600),
        ];
        for (f, mode) in &files {
            if !f.exists() {
                std::fs::write(f, "CONTENT\n").expect("write");
            }
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(*mode)).expect("chmod");
        }
        if env.as_nobody {
            env.give_to_nobody();
        }
        // The run's own uid: chown to oneself needs no capability, only ownership.
        let uid = if env.as_nobody { 65534 } else { 0 };
        let mut failures = Vec::new();
        for (f, mode) in &files {
            let p = f.display().to_string();
            let chmod = format!("chmod {:o} '{p}'", if *mode == 0o600 { 0o644 } else { 0o666 });
            for op in [
                chmod.as_str(),
                &format!("touch -d 2001-01-01 '{p}'"),
                &format!("python3 -c \"import os, sys; os.setxattr(sys.argv[1], 'user.x', b'1')\" '{p}'"),
                &format!("chown {uid} '{p}'"),
                &format!("chown {uid}:{uid} '{p}'"),
                &format!("mv '{p}' '{p}.moved'"),
            ] {
                let before = meta(f);
                // `rc=` shows the run happened (not a refusal by a rule) and how the
                // operation ended.
                let o = env.sh("strict", &format!("{op}; echo rc=$?"));
                let what = format!("nobody={} `{op}`", env.as_nobody);
                let out = stdout(&o);
                if !out.contains("rc=") || out.contains("rc=0") {
                    failures.push(format!("{what}: {}", text(&o)));
                }
                if !f.exists() {
                    failures.push(format!("{what}: the file was moved"));
                    let _ = std::fs::rename(format!("{p}.moved"), f);
                    continue;
                }
                let after = meta(f);
                if after != before {
                    failures.push(format!("{what}: {before:?} -> {after:?}"));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

escape_test! {
    /// Attack: a run plants `core.fsmonitor` in `.git/config` and then makes `.git` (or the
    /// workspace itself) read-only, so that the broker cannot put the config back (without a
    /// mount namespace the put-back failed with a warning shown only to the agent); the user's
    /// next `git status` runs the planted command unconfined. Promise: `.git/config` is
    /// read-only during the run, nothing needs putting back, and `git status` afterwards runs
    /// nothing the run chose.
    fn a_run_that_makes_git_read_only_cannot_leave_a_planted_fsmonitor() {
        for policy in ["strict", "standard"] {
            for dir in [".git", "."] {
                let env = Env::new("ro-git");
                git_init(&env);
                let marker = env.outside.join("fsmonitor-ran");
                let script = format!(
                    "printf '[core]\\n\\tfsmonitor = touch {}\\n' >> .git/config; chmod a-w {dir}; echo ran",
                    marker.display()
                );
                let o = env.sh(policy, &script);
                let what = format!("{policy} nobody={} chmod a-w {dir}", env.as_nobody);
                assert!(stdout(&o).contains("ran"), "{what}: the run happened: {}", text(&o));
                let config = std::fs::read_to_string(env.ws.join(".git/config")).expect("config");
                let g = git(&env, &["status", "--short"]);
                // Make the tree removable again (uid 65534 cannot write a 0555 directory).
                for d in [env.ws.clone(), env.ws.join(".git")] {
                    let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755));
                }
                assert!(!config.contains("fsmonitor"), "{what}: planted: {config}\n{}", text(&o));
                assert!(g.status.success(), "{what}: git status: {}", text(&g));
                assert!(!marker.exists(), "{what}: git status ran the planted fsmonitor");
            }
        }
        // Control: the same config written by the test does make `git status` run it.
        let env = Env::new("ro-git-control");
        git_init(&env);
        let marker = env.outside.join("fsmonitor-ran");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(env.ws.join(".git/config"))
            .expect("config");
        write!(f, "[core]\n\tfsmonitor = touch {}\n", marker.display()).expect("w");
        let g = git(&env, &["status", "--short"]);
        assert!(marker.exists(), "the control's fsmonitor did not run: {}", text(&g));
    }
}

escape_test! {
    /// Attack: a hook installed as a symlink to a script of the repository
    /// (`.git/hooks/pre-commit -> ../../scripts/hook.sh`, as husky-like setups do) was
    /// protected only as a link: the run rewrote the script, which the user's next
    /// `git commit` runs. Promise: a protected path that is a symlink protects its target;
    /// the script is unchanged and the rest of `scripts/` stays writable.
    fn a_hook_linked_to_a_script_in_the_repository_protects_the_script() {
        for policy in ["strict", "standard"] {
            let env = Env::new("hook-link");
            git_init(&env);
            let hook = env.write("scripts/hook.sh", "#!/bin/sh\nexit 0\n");
            std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            std::os::unix::fs::symlink("../../scripts/hook.sh", env.ws.join(".git/hooks/pre-commit"))
                .expect("link");
            for script in [
                "echo 'touch /tmp/pwned' >> scripts/hook.sh",
                "echo 'touch /tmp/pwned' >> .git/hooks/pre-commit",
                "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > scripts/hook.new && mv scripts/hook.new scripts/hook.sh",
            ] {
                let o = env.sh(policy, &format!("{script}; echo ok > scripts/other.txt; echo ran"));
                let what = format!("{policy} nobody={} `{script}`", env.as_nobody);
                assert!(stdout(&o).contains("ran"), "{what}: the run happened: {}", text(&o));
                assert_eq!(
                    std::fs::read_to_string(&hook).expect("hook"),
                    "#!/bin/sh\nexit 0\n",
                    "{what}: the hook's script was rewritten: {}",
                    text(&o)
                );
                assert_eq!(
                    std::fs::read_link(env.ws.join(".git/hooks/pre-commit")).ok(),
                    Some(PathBuf::from("../../scripts/hook.sh")),
                    "{what}"
                );
                assert_eq!(
                    std::fs::read_to_string(env.ws.join("scripts/other.txt")).ok().as_deref(),
                    Some("ok\n"),
                    "{what}: the rest of scripts/ stays writable: {}",
                    text(&o)
                );
            }
        }
    }
}

/// README's example policy ("Writing a policy"): strict plus a writable `target`.
const TARGET_POLICY: &str =
    "extends = \"strict\"\n\n[sandbox]\nwrite = [\"${WORKSPACE}/target\"]\n";

/// A refusal of a writable area that is a symlink: exit 125, naming it.
fn refused_as_a_symlink(o: &Output) -> bool {
    let err = stderr(o).to_lowercase();
    o.status.code() == Some(125)
        && err.contains("target")
        && (err.contains("symlink") || err.contains("symbolic link"))
}

escape_test! {
    /// Attack: with README's own example policy (`extends = "strict"`, `write =
    /// ["${WORKSPACE}/target"]`), one run replaces `target` with a symlink to any directory;
    /// the next run's writable area follows the link and the run writes there. Promise:
    /// writable areas are opened without following links and bound from descriptors: either
    /// the first run cannot replace `target` (it is a mount point in its namespace) or the
    /// second run is refused with an error naming `target` as a symlink; nothing is written
    /// outside.
    fn a_writable_area_repointed_between_runs_is_never_followed() {
        let env = Env::new("target-repoint");
        let policy = env.policy_file(TARGET_POLICY);
        std::fs::create_dir_all(env.ws.join("target")).expect("mkdir");
        let o = env.sh(
            &policy,
            &format!("rmdir target; ln -s '{}' target; echo ran", env.outside.display()),
        );
        assert!(stdout(&o).contains("ran"), "run 1 happened: {}", text(&o));
        let repointed = std::fs::symlink_metadata(env.ws.join("target"))
            .is_ok_and(|m| m.file_type().is_symlink());
        let o = env.sh(&policy, "echo pwned > target/planted; echo ran");
        let what = format!("nobody={} repointed={repointed}", env.as_nobody);
        assert!(
            !env.outside.join("planted").exists(),
            "{what}: run 2 wrote through the link: {}",
            text(&o)
        );
        if repointed {
            assert!(refused_as_a_symlink(&o), "{what}: run 2 is refused naming target: {}", text(&o));
            assert!(!stdout(&o).contains("ran"), "{what}: {}", text(&o));
        } else {
            assert!(stdout(&o).contains("ran"), "{what}: {}", text(&o));
        }
    }
}

escape_test! {
    /// Attack: a writable area that is already a symlink (`target -> elsewhere`) silently
    /// made `elsewhere` writable. Promise: it is refused before anything runs, with an error
    /// naming it (exit 125): the command's marker is not created and nothing is written
    /// through the link.
    fn a_writable_area_that_is_a_symlink_is_refused_with_its_name() {
        let env = Env::new("target-link");
        let policy = env.policy_file(TARGET_POLICY);
        std::os::unix::fs::symlink(&env.outside, env.ws.join("target")).expect("link");
        let o = env.sh(&policy, "touch ran.txt; echo pwned > target/planted; echo ran");
        let what = format!("nobody={}", env.as_nobody);
        assert!(!env.outside.join("planted").exists(), "{what}: wrote through the link: {}", text(&o));
        assert!(!env.ws.join("ran.txt").exists(), "{what}: the command ran: {}", text(&o));
        assert!(refused_as_a_symlink(&o), "{what}: refused naming target: {}", text(&o));
    }
}

escape_test! {
    /// Attack: a policy denies `${WORKSPACE}/config/secret.txt`; as root it was masked by a
    /// mount, which a run carried away by renaming its parent (`mv config config2`): the next
    /// run read `config2/secret.txt`, which no rule names. (As a normal user such a policy
    /// was refused outright: no run at all.) Promise: denied paths are masked for every user
    /// and their ancestors inside a writable area pinned: either the rename fails or the next
    /// run still cannot read the file; runs under the policy do run.
    fn a_denied_path_cannot_be_carried_away_by_renaming_its_parent() {
        let env = Env::new("deny-rename");
        let policy = env.policy_file(
            "extends = \"strict\"\n\n[sandbox]\ndeny = [\"${WORKSPACE}/config/secret.txt\"]\n",
        );
        env.write("config/secret.txt", "DENIED-SECRET\n");
        env.write("config/app.toml", "name = \"app\"\n");
        env.write("control.txt", "CONTROL-READ\n");
        let what = format!("nobody={}", env.as_nobody);
        let o = env.sh(&policy, "cat control.txt; cat config/secret.txt");
        assert!(stdout(&o).contains("CONTROL-READ"), "{what}: the run happened: {}", text(&o));
        assert_stdout_lacks(&o, "DENIED-SECRET", &format!("{what}: before the rename"));
        let o1 = env.sh(&policy, "mv config config2; echo ran");
        assert!(stdout(&o1).contains("ran"), "{what}: run 1 happened: {}", text(&o1));
        let o = env.sh(&policy, "cat control.txt; cat config2/secret.txt config/secret.txt");
        assert!(stdout(&o).contains("CONTROL-READ"), "{what}: run 2 happened: {}", text(&o));
        assert!(
            !stdout(&o).contains("DENIED-SECRET"),
            "{what}: the denied file was read under its new name:\nrun 1: {}\nrun 2: {}",
            text(&o1),
            text(&o)
        );
    }
}

escape_test! {
    /// Attack: without a pid namespace a run read every process's command line (the user's
    /// other tools' `--password=...`), and without a network namespace `/proc/net/unix`
    /// listed every socket on the host (the daemons to aim at). Promise: every run has its
    /// own pid and network namespaces: no host process, no host socket is visible.
    fn host_processes_and_sockets_are_invisible() {
        let env = Env::new("host-visible");
        // The marker is no secret: the output redactor would hide `--password=...` itself and
        // make the check vacuous (it did on main), so the command line carries both.
        let marker = format!("gw-visible-{}-MARKER", std::process::id());
        // The interpreter itself, not a wrapper script (pyenv's) that would outlive a kill.
        let python = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3");
        let mut c = Command::new(stdout(&python).trim());
        c.args(["-c", "import time; time.sleep(300)", &format!("--profile={marker}"), "--password=hunter2"]);
        let _victim = Outside::spawn(c);
        let sock = env.outside.join("host-daemon.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        let sock = sock.display().to_string();
        // Controls: the host shows both.
        let t = std::time::Instant::now();
        while processes_with(&marker).is_empty() && t.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!processes_with(&marker).is_empty(), "the outside process is not running");
        assert!(
            std::fs::read_to_string("/proc/net/unix").expect("proc").contains(&sock),
            "the host lists its socket"
        );
        // The script names neither the marker nor the socket: it must not find itself.
        let script = "ps -eo args; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done; cat /proc/net/unix; echo done";
        for policy in ["strict", "standard"] {
            let o = env.sh(policy, script);
            let what = format!("{policy} nobody={}", env.as_nobody);
            assert!(stdout(&o).contains("done"), "{what}: the run happened: {}", text(&o));
            assert!(stdout(&o).contains("Inode"), "{what}: /proc/net/unix was read: {}", text(&o));
            // Only the offending lines: the rest is the host's process list.
            let seen: Vec<String> = stdout(&o)
                .lines()
                .filter(|l| l.contains(&marker) || l.contains(&sock))
                .map(str::to_string)
                .collect();
            assert!(seen.is_empty(), "{what}: the run sees the host's:\n{}", seen.join("\n"));
        }
    }
}

escape_test! {
    /// Attack: without a mount namespace the broker kept protected paths before a run and
    /// put back after it whatever had changed, so a change the user made themselves during
    /// the run (`git remote add`, an edit of `.envrc`, a new hook) was reverted, moved to the
    /// quarantine. Promise: nothing is put back; what the run cannot write is read-only during
    /// it, so the user's own changes made outside the run are never reverted or quarantined.
    fn a_users_own_changes_during_a_run_are_never_reverted() {
        for policy in ["strict", "standard"] {
            let env = Env::new("user-changes");
            git_init(&env);
            env.write(".envrc", "export A=1\n");
            let run = env
                .cmd()
                .args(["exec", "--policy", policy, "--", "sh", "-c", "sleep 2"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn gateway");
            std::thread::sleep(std::time::Duration::from_millis(700));
            // The user, meanwhile, outside the run.
            let g = git(&env, &["remote", "add", "origin", "https://example.invalid/repo.git"]);
            assert!(g.status.success(), "git remote add: {}", text(&g));
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(env.ws.join(".envrc"))
                .expect("envrc");
            f.write_all(b"export USER_CHANGE=1\n").expect("w");
            drop(f);
            std::fs::write(env.ws.join(".git/hooks/pre-commit"), "#!/bin/sh\nexec lint\n").expect("hook");
            if env.as_nobody {
                env.give_to_nobody();
            }
            let o = run.wait_with_output().expect("wait");
            let what = format!("{policy} nobody={}", env.as_nobody);
            assert!(o.status.success(), "{what}: {}", text(&o));
            let config = std::fs::read_to_string(env.ws.join(".git/config")).expect("config");
            assert!(config.contains("[remote \"origin\"]"), "{what}: git remote add was reverted: {config}\n{}", text(&o));
            assert_eq!(
                std::fs::read_to_string(env.ws.join(".envrc")).expect("envrc"),
                "export A=1\nexport USER_CHANGE=1\n",
                "{what}: .envrc was reverted: {}",
                text(&o)
            );
            assert_eq!(
                std::fs::read_to_string(env.ws.join(".git/hooks/pre-commit")).ok().as_deref(),
                Some("#!/bin/sh\nexec lint\n"),
                "{what}: the user's new hook was moved away: {}",
                text(&o)
            );
            let quarantined: Vec<_> = std::fs::read_dir(env.state.join("quarantine"))
                .map(|d| d.flatten().map(|e| e.path()).collect())
                .unwrap_or_default();
            assert!(quarantined.is_empty(), "{what}: quarantined {quarantined:?}: {}", text(&o));
        }
    }
}

escape_test! {
    /// Attack surface: where unprivileged user namespaces are refused (Ubuntu 24.04's
    /// `kernel.apparmor_restrict_unprivileged_userns`, some containers,
    /// `user.max_user_namespaces = 0`) a run silently got less than the policy promises.
    /// Simulated here with a seccomp filter (tests/fixtures/nouserns.c: `unshare` and `clone`
    /// with CLONE_NEWUSER fail with EPERM, `clone3` with ENOSYS). Promise: the run fails closed
    /// (exit 125, the command does not run) with a message naming user namespaces and the two
    /// ways out in contrib/ (the AppArmor profile, the daemon), and `best_effort`; with
    /// `best_effort = true` it runs and stderr says which layers are missing.
    fn without_user_namespaces_a_run_fails_closed_and_says_why() {
        let env = Env::new("no-userns");
        let wrapper = fixture_bin("nouserns");
        let run = |policy: &str| {
            env.raw(&wrapper)
                .args(env.gateway_argv())
                .args(["exec", "--policy", policy, "--", "sh", "-c", "echo ran"])
                .stdin(Stdio::null())
                .output()
                .expect("run gateway under nouserns")
        };
        let what = format!("nobody={}", env.as_nobody);
        let o = run("strict");
        let err = stderr(&o).to_lowercase();
        assert!(!stdout(&o).contains("ran"), "{what}: the command ran without user namespaces: {}", text(&o));
        assert_eq!(o.status.code(), Some(125), "{what}: {}", text(&o));
        for needle in ["user namespace", "contrib/", "best_effort"] {
            assert!(err.contains(needle), "{what}: the refusal does not mention {needle:?}: {}", text(&o));
        }
        let policy = env.policy_file("extends = \"strict\"\n\n[sandbox]\nbest_effort = true\n");
        let o = run(&policy);
        let err = stderr(&o).to_lowercase();
        assert!(stdout(&o).contains("ran"), "{what}: best_effort runs: {}", text(&o));
        for needle in ["namespace", "mount"] {
            assert!(err.contains(needle), "{what}: best_effort does not say {needle:?} is missing: {}", text(&o));
        }
    }
}

// Attacks found by an independent review of issue 34's change (branch wt-atk). Each is a
// failing test until fixed; each says what it does, what happened and what was promised.

/// git as this test's user with a commit, so `git status` consults the fsmonitor.
fn git_commit(env: &Env) {
    let o = env
        .raw("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git commit");
    assert!(o.status.success(), "git commit: {}", text(&o));
}

escape_test! {
    /// Attack: the workspace's `.git` is a `gitdir:` file (`git init --separate-git-dir`, a
    /// linked worktree, every submodule checkout). The file that tells git where its config
    /// is is not protected: the run rewrites it to `gitdir: evil`, with `evil/HEAD`,
    /// `evil/commondir` = `../evil2` and `evil2/{config,objects/,refs/}` (no `HEAD`: the
    /// search does not take evil2 for a bare repository, and evil is no `.git` directory, so
    /// nothing is quarantined). The user's next `git status` runs the planted
    /// `core.fsmonitor` unconfined (as root and as uid 65534, strict and standard). Promise:
    /// the places git reads config from are read-only during the run (the `.git` file is one:
    /// it names them), or a run that changed it has it quarantined; `git status` afterwards
    /// runs nothing the run chose.
    fn a_gitdir_file_cannot_be_repointed_to_a_planted_repository() {
        for policy in ["strict", "standard"] {
            let env = Env::new("gitfile");
            let o = env
                .raw("git")
                .args(["init", "-q", "--separate-git-dir"])
                .arg(env.ws.join("realgit"))
                .arg(".")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .expect("git init");
            assert!(o.status.success(), "git init: {}", text(&o));
            git_commit(&env);
            let marker = env.outside.join("fsmonitor-ran");
            let script = format!(
                "mkdir -p evil evil2/objects evil2/refs && cp realgit/HEAD evil/ && echo ../evil2 > evil/commondir && \
                 printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch {}\\n' > evil2/config && \
                 echo 'gitdir: evil' > .git; echo ran",
                marker.display()
            );
            let o = env.sh(policy, &script);
            let what = format!("{policy} nobody={}", env.as_nobody);
            assert!(stdout(&o).contains("ran"), "{what}: the run happened: {}", text(&o));
            let g = git(&env, &["status", "--short"]);
            assert!(
                !marker.exists(),
                "{what}: the user's git status ran the fsmonitor planted through the `.git` file (now {:?}):\nrun: {}\ngit: {}",
                std::fs::read_to_string(env.ws.join(".git")).ok(),
                text(&o),
                text(&g)
            );
        }
    }
}

escape_test! {
    /// Attack (uid 65534; root's broker reads through the mode): a policy denies
    /// `${WORKSPACE}/config/secret.txt`. Run 1 makes its parent unsearchable (`chmod 000
    /// config`: the run owns it). The next run's broker cannot reach the denied file, takes
    /// it for absent (EACCES is read as "not there, so the command cannot reach it either")
    /// and masks nothing; the run does `chmod 755 config` and reads the file. Promise: a
    /// denied path in a writable area is masked (or the run is refused); what the command
    /// owns it can make reachable again, so an unreachable denied path must fail closed.
    fn a_denied_path_stays_hidden_when_a_run_makes_its_parent_unsearchable() {
        let env = Env::new("deny-chmod");
        let policy = env.policy_file(
            "extends = \"strict\"\n\n[sandbox]\ndeny = [\"${WORKSPACE}/config/secret.txt\"]\n",
        );
        env.write("config/secret.txt", "DENIED-SECRET\n");
        let what = format!("nobody={}", env.as_nobody);
        let o1 = env.sh(&policy, "chmod 000 config; echo ran");
        assert!(stdout(&o1).contains("ran"), "{what}: run 1 happened: {}", text(&o1));
        // `rev`: the redactor does not hide the secret's mirror image.
        let o = env.sh(&policy, "chmod 755 config; rev config/secret.txt; echo ran");
        let _ = std::fs::set_permissions(env.ws.join("config"), std::fs::Permissions::from_mode(0o755));
        assert!(
            !stdout(&o).contains("TERCES-DEINED"),
            "{what}: the denied file was read after its parent was made unsearchable:\nrun 1: {}\nrun 2: {}",
            text(&o1),
            text(&o)
        );
    }
}

escape_test! {
    /// Attack (uid 65534): a hook installed as `.git/hooks/pre-commit ->
    /// ../../scripts/hook.sh` protects the script. Run 1 cannot write it, but makes
    /// `scripts` unsearchable (`chmod 000 scripts`); the next run's broker cannot resolve the
    /// link's target, so the script is not protected, and the run restores the mode and
    /// rewrites the hook the user's next `git commit` runs. Nothing is quarantined (a link's
    /// target is no protected name). Promise: anything a protected hook links to is
    /// protected; a target the broker cannot reach must refuse the run, not go unprotected.
    fn a_protected_hook_target_stays_protected_when_a_run_makes_its_parent_unsearchable() {
        let env = Env::new("hook-chmod");
        git_init(&env);
        let hook = env.write("scripts/hook.sh", "#!/bin/sh\nexit 0\n");
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::os::unix::fs::symlink("../../scripts/hook.sh", env.ws.join(".git/hooks/pre-commit"))
            .expect("link");
        let what = format!("nobody={}", env.as_nobody);
        let o1 = env.sh("strict", "chmod 000 scripts; echo ran");
        assert!(stdout(&o1).contains("ran"), "{what}: run 1 happened: {}", text(&o1));
        let o = env.sh("strict", "chmod 755 scripts; echo 'touch /tmp/pwned' >> scripts/hook.sh; echo ran");
        let _ = std::fs::set_permissions(env.ws.join("scripts"), std::fs::Permissions::from_mode(0o755));
        assert_eq!(
            std::fs::read_to_string(&hook).expect("hook"),
            "#!/bin/sh\nexit 0\n",
            "{what}: the hook's script was rewritten:\nrun 1: {}\nrun 2: {}",
            text(&o1),
            text(&o)
        );
    }
}

escape_test! {
    /// Attack: run 1 writes `scripts/hook.sh` and a hard link to it, `scripts/.cache-hook`
    /// (as any build step may). The user reviews the script and installs it as a hook
    /// (`.git/hooks/pre-commit -> ../../scripts/hook.sh`). The next run cannot write
    /// `scripts/hook.sh` (a read-only bind of that name) but appends to `.cache-hook`, the
    /// same inode: the hook the user's next `git commit` runs is rewritten. Promise: a
    /// protected path is read-only whatever name the run uses; a protected file with other
    /// links (st_nlink > 1) inside a writable area must refuse the run or be protected under
    /// every name.
    fn a_protected_file_cannot_be_written_through_a_hard_link_an_earlier_run_made() {
        let env = Env::new("hook-hardlink");
        git_init(&env);
        let what = format!("nobody={}", env.as_nobody);
        let o1 = env.sh(
            "strict",
            "mkdir scripts && printf '#!/bin/sh\\nexit 0\\n' > scripts/hook.sh && chmod +x scripts/hook.sh && ln scripts/hook.sh scripts/.cache-hook; echo ran",
        );
        assert!(stdout(&o1).contains("ran"), "{what}: run 1 happened: {}", text(&o1));
        // The user installs the reviewed script as the pre-commit hook.
        std::os::unix::fs::symlink("../../scripts/hook.sh", env.ws.join(".git/hooks/pre-commit"))
            .expect("link");
        let o = env.sh("strict", "echo 'touch /tmp/pwned' >> scripts/.cache-hook; echo ran");
        assert_eq!(
            std::fs::read_to_string(env.ws.join("scripts/hook.sh")).expect("hook"),
            "#!/bin/sh\nexit 0\n",
            "{what}: the protected hook script was rewritten through its other name: {}",
            text(&o)
        );
    }
}

escape_test! {
    /// Attack: a policy denies `${WORKSPACE}/config/secret.txt`, which does not exist yet.
    /// Run 1 creates `config/notes` and `config/secret.txt` as a hard link to it (a
    /// placeholder "for you to fill in"). The user writes the secret in place (`echo ... >
    /// config/secret.txt`, `cp` over it, vim on a file with links). The next run cannot open
    /// `config/secret.txt` (masked) but reads `config/notes`, the same inode. Promise: a
    /// denied path is not readable by a run; a denied file with other links inside a writable
    /// area (st_nlink > 1) must refuse the run or be hidden under every name.
    fn a_denied_file_cannot_be_read_through_a_hard_link_an_earlier_run_made() {
        let env = Env::new("deny-hardlink");
        let policy = env.policy_file(
            "extends = \"strict\"\n\n[sandbox]\ndeny = [\"${WORKSPACE}/config/secret.txt\"]\n",
        );
        std::fs::create_dir_all(env.ws.join("config")).expect("mkdir");
        let what = format!("nobody={}", env.as_nobody);
        let o1 = env.sh(&policy, "touch config/notes && ln config/notes config/secret.txt; echo ran");
        assert!(stdout(&o1).contains("ran"), "{what}: run 1 happened: {}", text(&o1));
        // The user fills the placeholder in, in place (as `>`, `cp` and vim do).
        std::fs::write(env.ws.join("config/secret.txt"), "DENIED-SECRET\n").expect("write");
        let o = env.sh(&policy, "rev config/notes; echo ran");
        assert!(
            !stdout(&o).contains("TERCES-DEINED"),
            "{what}: the denied file was read through its other name: {}",
            text(&o)
        );
        // Either run 2 is refused, naming the denied file and its other links, or it ran
        // without reading it.
        if o.status.code() == Some(125) {
            assert!(
                stderr(&o).contains("config/secret.txt") && stderr(&o).contains("hard links"),
                "{what}: {}",
                text(&o)
            );
            assert!(!stdout(&o).contains("ran"), "{what}: {}", text(&o));
        } else {
            assert!(stdout(&o).contains("ran"), "{what}: run 2 happened: {}", text(&o));
        }
    }
}

escape_test! {
    /// Attack: a policy reads a directory inside a writable one (`write = ["~/work"]`, `read
    /// = ["~/work/lib"]`). Run 1 replaces `lib` with a link to the user's home; the next
    /// run's landlock read rule is opened by name, following the link, and the run reads
    /// `~/notes.txt`, which the policy never exposes. Promise: nothing in a tree the command
    /// could have written is followed (writable areas are; read and exec areas inside one are
    /// not): a read or exec area below a writable one must be opened without following links
    /// (refused, like a writable area that is a link).
    fn a_read_area_inside_a_writable_area_repointed_between_runs_is_never_followed() {
        let env = Env::new("read-repoint");
        std::fs::create_dir_all(env.home.join("work/lib")).expect("mkdir");
        std::fs::write(env.home.join("notes.txt"), "HOME-PRIVATE-NOTES\n").expect("write");
        let policy = env.policy_file(
            "extends = \"strict\"\n\n[sandbox]\nwrite = [\"~/work\"]\nread = [\"~/work/lib\"]\n",
        );
        let home = env.home.display().to_string();
        let what = format!("nobody={}", env.as_nobody);
        let o = env.sh(&policy, &format!("cat '{home}/notes.txt'; echo ran"));
        assert!(stdout(&o).contains("ran"), "{what}: the run happened: {}", text(&o));
        assert!(!stdout(&o).contains("HOME-PRIVATE"), "{what}: control: home is not readable: {}", text(&o));
        let o1 = env.sh(
            &policy,
            &format!("rmdir '{home}/work/lib' && ln -s '{home}' '{home}/work/lib'; echo ran"),
        );
        assert!(stdout(&o1).contains("ran"), "{what}: run 1 happened: {}", text(&o1));
        let o = env.sh(&policy, &format!("cat '{home}/work/lib/notes.txt'; echo ran"));
        assert!(
            !stdout(&o).contains("HOME-PRIVATE"),
            "{what}: the re-pointed read area was followed:\nrun 1: {}\nrun 2: {}",
            text(&o1),
            text(&o)
        );
    }
}

escape_test! {
    /// Attack: `gateway exec` in a terminal hands the caller's terminal to the command as its
    /// stdin (a person typing). The terminal is a file of the host's devpts, outside every
    /// writable area, and the descriptor was opened outside the run's read-only tree: the
    /// command `fchmod`s it to 0666 (any local user may then write to the user's terminal)
    /// and sets its times, as root and as uid 65534. Promise: a chmod, chown, utimes or
    /// setxattr of anything outside the writable areas fails, for every user; the command
    /// should get a terminal of its own (relayed), not the caller's. Known limit until issue
    /// 40 gives every run a pty of its own devpts (docs/seams.md, "What remains"): run it with
    /// `--run-ignored all` to see it fail.
    #[ignore = "issue 40: the caller's terminal is passed to the command as is until runs get a pty of their own"]
    fn the_callers_terminal_cannot_be_chmodded() {
        const DRIVER: &str = r#"
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
out = b""
while True:
    try:
        d = os.read(fd, 4096)
    except OSError:
        break
    if not d:
        break
    out += d
os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
"#;
        const PROBE: &str = r#"
import os
print("isatty=%s" % os.isatty(0))
try:
    os.fchmod(0, 0o666); print("CHMOD-DONE")
except OSError as e: print("chmod refused", e.errno)
try:
    os.utime("/proc/self/fd/0", (0, 0)); print("UTIME-DONE")
except OSError as e: print("utime refused", e.errno)
"#;
        let env = Env::new("tty-chmod");
        std::fs::write(env.ws.join("probe.py"), PROBE).expect("write");
        // The terminal belongs to whoever runs gateway: the driver runs as that user too.
        if env.as_nobody {
            env.give_to_nobody();
        }
        let mut c = if env.as_nobody {
            let mut c = env.raw(NOBODY[0]);
            // The system's interpreter: a per-user one (pyenv's shims under /root) is not
            // uid 65534's to run.
            c.args(&NOBODY[1..]).args(["--", "/usr/bin/python3", "-c", DRIVER]);
            c
        } else {
            let mut c = env.raw("python3");
            c.args(["-c", DRIVER]);
            c
        };
        c.arg(BIN).args(["exec", "--policy", "strict", "--", "python3", "probe.py"]);
        let o = c.output().expect("pty driver");
        let out = stdout(&o);
        let what = format!("nobody={}", env.as_nobody);
        assert!(out.contains("isatty=True"), "{what}: the command's stdin is the terminal: {}", text(&o));
        assert!(
            !out.contains("CHMOD-DONE") && !out.contains("UTIME-DONE"),
            "{what}: the run changed the mode or times of the caller's terminal: {}",
            text(&o)
        );
    }
}

escape_test! {
    /// Attack: a workspace with more than 100 000 directories (a `node_modules`, a data set)
    /// and a nested repository found after them. The search for nested repositories stops
    /// at its bound with a warning (shown to the agent), so the nested repository's config
    /// is not protected: the run plants `core.fsmonitor` in it and the user's next `git
    /// status` there runs it. Promise (issue 34, "No put-back"): the nested-repository search
    /// fails closed (the run is refused, or git's places are protected by construction), it
    /// does not stop at a bound with a warning.
    fn a_nested_repository_beyond_the_search_bound_is_not_left_writable() {
        let env = Env::new("nested-bound");
        let many = env.ws.join("a");
        std::fs::create_dir_all(&many).expect("mkdir");
        for i in 0..100_001 {
            std::fs::create_dir(many.join(i.to_string())).expect("mkdir");
        }
        let nested = env.ws.join("z");
        std::fs::create_dir_all(&nested).expect("mkdir");
        let o = env.raw("git").args(["init", "-q"]).current_dir(&nested).output().expect("git init");
        assert!(o.status.success(), "git init: {}", text(&o));
        let marker = env.outside.join("fsmonitor-ran");
        let o = env.sh(
            "strict",
            &format!("printf '[core]\\n\\tfsmonitor = touch {}\\n' >> z/.git/config; echo ran", marker.display()),
        );
        let what = format!("nobody={}", env.as_nobody);
        let config = std::fs::read_to_string(nested.join(".git/config")).unwrap_or_default();
        assert!(
            !config.contains("fsmonitor"),
            "{what}: the nested repository's config was planted (ran: {}): {}",
            stdout(&o).contains("ran"),
            text(&o)
        );
    }
}

escape_test! {
    /// The user, outside the run and during it, creates `.envrc` and `.vscode/settings.json`
    /// in the workspace (paths the policy protects, absent before the run). What remains until
    /// a run's writes are captured from its own layer (issue 37): a new file at a protected
    /// name cannot be told from one the run planted, so it is quarantined — but never lost:
    /// stderr names where each went, with its content intact. (Changes to protected paths
    /// that existed are never reverted: `a_users_own_changes_during_a_run_are_never_reverted`.)
    fn a_users_new_protected_files_during_a_run_are_never_lost() {
        let env = Env::new("user-creates");
        git_init(&env);
        let run = env
            .cmd()
            .args(["exec", "--policy", "strict", "--", "sh", "-c", "sleep 2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gateway");
        std::thread::sleep(std::time::Duration::from_millis(700));
        std::fs::write(env.ws.join(".envrc"), "export MINE=1\n").expect("envrc");
        std::fs::create_dir_all(env.ws.join(".vscode")).expect("mkdir");
        std::fs::write(env.ws.join(".vscode/settings.json"), "{}\n").expect("settings");
        if env.as_nobody {
            env.give_to_nobody();
        }
        let o = run.wait_with_output().expect("wait");
        let what = format!("nobody={}", env.as_nobody);
        assert!(o.status.success(), "{what}: {}", text(&o));
        for (rel, content) in [(".envrc", "export MINE=1\n"), (".vscode/settings.json", "{}\n")] {
            let here = std::fs::read_to_string(env.ws.join(rel)).ok();
            if here.as_deref() == Some(content) {
                continue;
            }
            // Moved: stderr names where, and the content is there.
            let err = stderr(&o);
            let top = rel.split('/').next().expect("name");
            let line = err
                .lines()
                .find(|l| l.contains(&format!("/{top};")) && l.contains("moved it to"))
                .unwrap_or_else(|| panic!("{what}: {rel} is gone and stderr does not say where: {}", text(&o)));
            let to = PathBuf::from(line.rsplit("moved it to ").next().expect("to").trim());
            let inside = rel.strip_prefix(top).expect("prefix").trim_start_matches('/');
            let moved = if inside.is_empty() { to } else { to.join(inside) };
            assert_eq!(
                std::fs::read_to_string(&moved).ok().as_deref(),
                Some(content),
                "{what}: {rel} moved to {} without its content: {}",
                moved.display(),
                text(&o)
            );
        }
    }
}

escape_test! {
    /// Robustness: a policy's writable area lies below a symbolic link that no run can
    /// write (HOME reached through a link, as `/home -> var/home` on Fedora's atomic
    /// desktops; here `write = ["~/cache"]` with HOME through a link outside every writable
    /// area). Every run is refused, "a symbolic link ... in a tree the command could have
    /// written", which is not so. Promise: what is refused is a link in a tree the agent can
    /// write; a link outside every writable tree cannot be re-pointed by a run and should be
    /// resolved (or the area taken in its canonical form, as the workspace is).
    fn a_writable_area_below_a_link_no_run_can_write_is_not_refused() {
        let env = Env::new("home-link");
        std::fs::create_dir_all(env.home.join("cache")).expect("mkdir");
        let link = env.root.join("home-link");
        std::os::unix::fs::symlink(&env.home, &link).expect("link");
        let policy = env.policy_file("extends = \"strict\"\n\n[sandbox]\nwrite = [\"~/cache\"]\n");
        let o = env
            .cmd()
            .env("HOME", &link)
            .args(["exec", "--policy", &policy, "--", "sh", "-c"])
            .arg(format!("echo ok > '{}/cache/f'; echo ran", link.display()))
            .output()
            .expect("run gateway");
        let what = format!("nobody={}", env.as_nobody);
        assert!(stdout(&o).contains("ran"), "{what}: the run was refused: {}", text(&o));
        assert!(env.home.join("cache/f").exists(), "{what}: the writable area took no write: {}", text(&o));
    }
}

escape_test! {
    /// Audit: a run refused because its writable area is a link ("refused, nothing ran",
    /// exit 125) is recorded with `decision.effect = "allow"` and an error: `gateway log
    /// query --decision deny` ("every refusal") and `--decision error` both miss it, so a
    /// user looking for refused runs never sees the one that says a run re-pointed a
    /// writable area. Promise: a refused run leaves a deny or error record.
    fn a_run_refused_for_a_linked_writable_area_is_found_as_a_refusal() {
        let env = Env::new("refused-record");
        let policy = env.policy_file(TARGET_POLICY);
        std::os::unix::fs::symlink(&env.outside, env.ws.join("target")).expect("link");
        let o = env.sh(&policy, "echo ran");
        let what = format!("nobody={}", env.as_nobody);
        assert!(refused_as_a_symlink(&o), "{what}: refused: {}", text(&o));
        assert_eq!(log_records(&env).len(), 1, "{what}: the refusal is recorded");
        let found = ["deny", "error"].iter().any(|d| {
            let o = env
                .cmd()
                .args(["log", "query", "--json", "--limit", "0", "--decision", d])
                .output()
                .expect("query");
            json_of(&o)["records"].as_array().is_some_and(|r| !r.is_empty())
        });
        assert!(found, "{what}: neither --decision deny nor --decision error lists the refused run");
    }
}

escape_test! {
    /// Denial of service between users: a normal user's runs mount their private TMPDIR on
    /// a fixed name in the shared temporary directory, `$TMPDIR/.gateway-private-<uid>`
    /// (root's: `.gateway-private`), refused when it is not the user's own. Any other local
    /// user can create that name first (mode 1777 /tmp): every strict and standard run of
    /// the victim is then refused ("remove it", which the victim cannot). Before this change
    /// a normal user's private TMPDIR was a fresh random directory. Promise: every user's
    /// runs get their namespaces and a private TMPDIR; no other user can stop them.
    fn another_user_cannot_stop_runs_by_taking_the_tmpdir_mount_point() {
        let env = Env::new("tmpdir-squat");
        // A temporary directory of the test's own (not under the test's tree, which
        // `give_to_nobody` would hand to uid 65534 whole).
        let tmp = PathBuf::from(format!("{}-tmp", env.root.display()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).expect("mkdir");
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        // Another user got there first.
        let (name, squatter) = if env.as_nobody {
            (".gateway-private-65534", 0)
        } else {
            (".gateway-private", 65534)
        };
        let squat = tmp.join(name);
        std::fs::create_dir(&squat).expect("mkdir");
        std::fs::set_permissions(&squat, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::os::unix::fs::lchown(&squat, Some(squatter), Some(squatter)).expect("chown");
        let o = env
            .cmd()
            .env("TMPDIR", &tmp)
            .args(["exec", "--policy", "strict", "--", "sh", "-c", "echo ran"])
            .output()
            .expect("run gateway");
        let _ = std::fs::remove_dir_all(&tmp);
        let what = format!("nobody={}", env.as_nobody);
        assert!(stdout(&o).contains("ran"), "{what}: another user's directory stopped the run: {}", text(&o));
    }
}

escape_test! {
    /// Every run gets a private /tmp (and TMPDIR) of its own when no policy path lies under
    /// the host's /tmp: tools that ignore TMPDIR write there, and the host's /tmp (other
    /// users' and the user's own files, socket names) is neither seen nor changed. A
    /// workspace under /tmp keeps the host's /tmp, read-only outside the workspace.
    fn a_run_gets_a_private_tmp() {
        let env = Env::new("private-tmp");
        let ws = PathBuf::from(format!("/var/tmp/gwt-private-tmp-{}-{}", std::process::id(), env.as_nobody));
        let _ = std::fs::remove_dir_all(&ws);
        std::fs::create_dir_all(&ws).expect("mkdir");
        let marker = format!("/tmp/gwt-host-marker-{}", std::process::id());
        std::fs::write(&marker, "host").expect("marker");
        if env.as_nobody {
            std::os::unix::fs::chown(&ws, Some(65534), Some(65534)).expect("chown");
        }
        let what = format!("nobody={}", env.as_nobody);
        let script = "ls -A /tmp | grep -c gwt-host-marker; echo made > /tmp/gwt-made; cat /tmp/gwt-made; test -d \"$TMPDIR\" && echo tmpdir-ok";
        let o = env.cmd().current_dir(&ws).args(["exec", "--policy", "strict", "--", "sh", "-c", script]).output().expect("run");
        let _ = std::fs::remove_dir_all(&ws);
        let _ = std::fs::remove_file(&marker);
        let out = stdout(&o);
        assert!(out.starts_with("0\n"), "{what}: the host's /tmp is seen: {}", text(&o));
        assert!(out.contains("made\n") && out.contains("tmpdir-ok"), "{what}: {}", text(&o));
        assert!(!Path::new("/tmp/gwt-made").exists(), "{what}: the run wrote the host's /tmp");
    }
}
