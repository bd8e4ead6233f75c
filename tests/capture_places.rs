//! What a captured run's layer may land (issue 37): what it wrote in git's places and the
//! policy's protected paths is judged from the layer itself — no search of the workspace
//! before or after the run — and kept out of the workspace; and how what lands is undone.
//!
//! Each test as root and as uid 65534 (`escape_test!`).

use crate::util::*;

fn quarantined(o: &Output, rel: &str) -> bool {
    let e = stderr(o);
    e.lines()
        .any(|l| l.contains("created protected path") && l.contains(rel))
}

escape_test!(
    /// The workspace's git places are kept between runs (no search per run): a repository a
    /// person makes outside gateway after the last search is still guarded by what the run
    /// wrote — its `.git`, and the hooks directory its config names — while the rest lands.
    fn a_repository_made_outside_gateway_after_the_last_search_is_still_guarded() {
        let env = Env::new("capp-outside-repo");
        env.write("lib/readme.txt", "hello\n");
        let o = env.sh("standard", "echo one > one.txt");
        assert!(o.status.success(), "{}", text(&o));
        // A `git init` of the person's own, outside gateway, below the top (which the kept list
        // would notice): the kept list does not know it.
        env.write("lib/sub/.git/HEAD", "ref: refs/heads/main\n");
        env.write("lib/sub/.git/config", "[core]\n\thooksPath = githooks\n");
        std::fs::create_dir_all(env.ws.join("lib/sub/.git/objects")).expect("mkdir");
        std::fs::create_dir_all(env.ws.join("lib/sub/.git/refs")).expect("mkdir");
        let o = env.sh(
            "standard",
            "echo '[core] fsmonitor = evil' > lib/sub/.git/config.worktree; \
             mkdir -p lib/sub/githooks && echo evil > lib/sub/githooks/pre-commit; \
             mkdir -p lib/sub/.git/hooks && echo evil > lib/sub/.git/hooks/post-checkout; \
             echo ok > lib/sub/file.txt; echo ran",
        );
        assert!(stdout(&o).contains("ran"), "{}", text(&o));
        assert!(
            env.ws.join("lib/sub/file.txt").exists(),
            "the rest lands: {}",
            text(&o)
        );
        for p in [
            "lib/sub/.git/config.worktree",
            "lib/sub/githooks/pre-commit",
            "lib/sub/.git/hooks/post-checkout",
        ] {
            assert!(!env.ws.join(p).exists(), "{p} landed: {}", text(&o));
        }
        assert!(quarantined(&o, "lib/sub/githooks"), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("lib/sub/.git/config")).expect("config"),
            "[core]\n\thooksPath = githooks\n"
        );
    }
);

escape_test!(
    /// A run the policy does not snapshot (strict) writes through its layer too: what it
    /// plants in a repository it makes, or a bare repository, is quarantined; nothing of it is
    /// journalled.
    fn an_unsnapshotted_run_is_judged_from_its_layer_too() {
        let env = Env::new("capp-strict");
        let o = env.sh(
            "strict",
            "mkdir -p n/.git/hooks n/.git/objects n/.git/refs && echo 'ref: x' > n/.git/HEAD && \
             echo evil > n/.git/hooks/post-checkout && \
             mkdir -p b/objects b/refs && echo 'ref: x' > b/HEAD && echo '[core]' > b/config && \
             echo ok > f.txt && echo ran",
        );
        assert!(stdout(&o).contains("ran"), "{}", text(&o));
        assert_eq!(std::fs::read(env.ws.join("f.txt")).expect("f"), b"ok\n");
        assert!(env.ws.join("n/.git/HEAD").exists(), "{}", text(&o));
        for p in ["n/.git/hooks/post-checkout", "b/HEAD", "b/config"] {
            assert!(!env.ws.join(p).exists(), "{p} landed: {}", text(&o));
        }
        let h = env.gw(&["--json", "history"]);
        let v: serde_json::Value = serde_json::from_slice(&h.stdout).expect("json");
        assert_eq!(v["changes"].as_array().map(Vec::len), Some(0), "{v}");
    }
);

escape_test!(
    /// A protected path a run created is kept out of the workspace, so it is not in the run's
    /// journal group: a plain `gateway undo` reverts the rest (it used to refuse, the
    /// quarantined path "changed since").
    fn a_protected_path_the_run_created_does_not_stop_its_undo() {
        let env = Env::new("capp-undo-protected");
        let o = env.sh("standard", "echo x > new.txt; echo 'export A=1' > .envrc");
        assert!(o.status.success(), "{}", text(&o));
        assert!(quarantined(&o, ".envrc"), "{}", text(&o));
        assert!(!env.ws.join(".envrc").exists());
        let u = env.gw(&["undo"]);
        assert!(u.status.success(), "undo: {}", text(&u));
        assert!(!env.ws.join("new.txt").exists(), "{}", text(&u));
    }
);

escape_test!(
    /// A file the run replaced by a directory (and a directory by a file) is one journal
    /// entry: one plain `gateway undo` puts each back (it needed `--force`).
    fn a_type_change_is_undone_in_one_step() {
        let env = Env::new("capp-type-change");
        env.write("a", "old file\n");
        env.write("d/inner.txt", "inner\n");
        let o = env.sh(
            "standard",
            "rm a && mkdir a && echo x > a/b && rm d/inner.txt && rmdir d && echo now-a-file > d",
        );
        assert!(o.status.success(), "{}", text(&o));
        assert!(env.ws.join("a/b").exists() && env.ws.join("d").is_file());
        let u = env.gw(&["undo"]);
        assert!(u.status.success(), "undo: {}", text(&u));
        assert_eq!(std::fs::read(env.ws.join("a")).expect("a"), b"old file\n");
        assert_eq!(
            std::fs::read(env.ws.join("d/inner.txt")).expect("d/inner.txt"),
            b"inner\n"
        );
    }
);

escape_test!(
    /// `gateway changes ID --diff` shows a mode change (a directory's too) as git writes it,
    /// and names a file over its bound with its sizes: neither was shown, so the diff read as
    /// "no change" where `apply` would change something.
    fn the_review_diff_shows_mode_changes_and_names_files_over_its_bound() {
        let env = Env::new("capp-diff");
        env.write("s.sh", "#!/bin/sh\n");
        env.write("d/f.txt", "f\n");
        env.write("big.txt", &"a".repeat(2 << 20));
        let o = env
            .cmd()
            .args(["--json", "exec", "--policy", "standard", "--review", "--"])
            .args([
                "sh",
                "-c",
                "chmod 700 d && chmod 755 s.sh && echo more >> big.txt",
            ])
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let id = v["snapshot"]["held"].as_str().expect("held").to_string();
        let o = env.gw(&["--json", "changes", &id, "--diff"]);
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let diff = v["diff"].as_str().expect("diff");
        for needle in [
            "a/d b/d\nold mode 40755\nnew mode 40700",
            "a/s.sh b/s.sh\nold mode 100644\nnew mode 100755",
            "a/big.txt b/big.txt\nchanged (2097152 bytes -> 2097157 bytes; over the diff's bound",
        ] {
            assert!(diff.contains(needle), "{needle:?}: {diff}");
        }
    }
);

escape_test!(
    /// The walk (the fallback) reads the ignore rules after the run too: an ignore file the run
    /// wrote made a tracked file it changed read as deleted, and hid its change. Every path
    /// the walk before the run knew is compared where it still exists.
    fn under_the_walk_an_ignore_file_the_run_writes_hides_neither_a_change_nor_a_deletion() {
        let env = Env::new("capp-walk-ignore");
        env.write("changed.txt", "before\n");
        env.write("gone.txt", "gone\n");
        let policy = env.policy_file("extends = \"standard\"\n\n[undo]\ncapture = \"walk\"\n");
        let o = env
            .cmd()
            .args(["--json", "exec", "--policy", &policy, "--", "sh", "-c"])
            .arg("echo after > changed.txt && rm gone.txt && printf 'changed.txt\\ngone.txt\\n' > .ignore")
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(v["snapshot"]["mechanism"], "walk", "{v}");
        let ws = env.ws.display().to_string();
        let changes: Vec<(String, String)> = v["snapshot"]["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .map(|c| {
                let p = c[0].as_str().expect("path");
                let p = p.strip_prefix(&format!("{ws}/")).unwrap_or(p).to_string();
                (p, c[1].as_str().expect("kind").to_string())
            })
            .collect();
        for (p, k) in [("changed.txt", "changed"), ("gone.txt", "deleted")] {
            assert!(
                changes.iter().any(|(q, j)| q == p && j == k),
                "{p} {k}: {changes:?}"
            );
        }
        let u = env.gw(&["undo"]);
        assert!(u.status.success(), "undo: {}", text(&u));
        assert_eq!(
            std::fs::read(env.ws.join("changed.txt")).expect("r"),
            b"before\n"
        );
        assert_eq!(
            std::fs::read(env.ws.join("gone.txt")).expect("r"),
            b"gone\n"
        );
    }
);

escape_test!(
    /// A bare repository is what git takes for one (`HEAD`, and `objects` and `refs` of any
    /// type — links, files — or a `commondir`), made in one run or across two: what would make
    /// the directory one is kept out, with its config.
    fn a_bare_repository_is_not_made_through_links_files_commondir_or_two_runs() {
        let env = Env::new("capp-bare");
        let o = env.sh(
            "standard",
            "mkdir -p l f c && echo 'ref: refs/heads/main' > l/HEAD && ln -s /tmp l/objects && \
             ln -s /tmp l/refs && echo '[core]' > l/config && \
             echo 'ref: refs/heads/main' > f/HEAD && : > f/objects && : > f/refs && chmod +x f/objects f/refs && \
             echo 'ref: refs/heads/main' > c/HEAD && echo ../elsewhere > c/commondir && echo '[core]' > c/config && \
             mkdir two && echo 'ref: refs/heads/main' > two/HEAD && echo '[core]' > two/config && echo ran",
        );
        assert!(stdout(&o).contains("ran"), "{}", text(&o));
        for p in [
            "l/HEAD",
            "l/config",
            "f/HEAD",
            "c/HEAD",
            "c/commondir",
            "c/config",
        ] {
            assert!(
                std::fs::symlink_metadata(env.ws.join(p)).is_err(),
                "{p} landed: {}",
                text(&o)
            );
        }
        // `two` is not a repository yet: its HEAD and config land; the second run's `objects`
        // and `refs` would make it one.
        assert!(env.ws.join("two/config").exists());
        let o = env.sh("standard", "mkdir two/objects two/refs && echo ran");
        assert!(stdout(&o).contains("ran"), "{}", text(&o));
        for p in ["two/objects", "two/refs"] {
            assert!(!env.ws.join(p).exists(), "{p} landed: {}", text(&o));
        }
    }
);

escape_test!(
    /// A run that deletes a repository (one made outside gateway since the last search, which
    /// the kept list does not know) deletes its files, never its `.git`: what is in a `.git` is
    /// not journalled, so undo could not bring its history back.
    fn a_repositorys_git_directory_is_never_deleted_by_a_run() {
        let env = Env::new("capp-keep-git");
        let o = env.sh("standard", "echo one > one.txt");
        assert!(o.status.success(), "{}", text(&o));
        env.write("repo/f.txt", "work\n");
        env.write("repo/.git/HEAD", "ref: refs/heads/main\n");
        env.write("repo/.git/objects/ab/cdef", "history\n");
        std::fs::create_dir_all(env.ws.join("repo/.git/refs/heads")).expect("mkdir");
        let script = env.root.join("del.sh");
        std::fs::write(&script, "find repo -delete; echo ran\n").expect("script");
        let o = env.sh("standard", &format!("sh {}", script.display()));
        assert!(stdout(&o).contains("ran"), "{}", text(&o));
        assert!(stderr(&o).contains("keeps it"), "{}", text(&o));
        assert_eq!(
            std::fs::read(env.ws.join("repo/.git/objects/ab/cdef")).expect("kept"),
            b"history\n"
        );
        assert!(!env.ws.join("repo/f.txt").exists(), "the rest is deleted");
        let u = env.gw(&["undo"]);
        assert!(u.status.success(), "undo: {}", text(&u));
        assert_eq!(
            std::fs::read(env.ws.join("repo/f.txt")).expect("back"),
            b"work\n"
        );
    }
);

escape_test!(
    /// `gateway apply` of a held set judges it as a run's apply does: what the workspace's git
    /// config names (`core.hooksPath`) is held back, the rest lands.
    fn applying_a_held_set_keeps_back_what_gits_config_names() {
        let env = Env::new("capp-held-refs");
        env.write(".git/HEAD", "ref: refs/heads/main\n");
        env.write(".git/config", "[core]\n\thooksPath = .githooks\n");
        std::fs::create_dir_all(env.ws.join(".git/objects")).expect("mkdir");
        std::fs::create_dir_all(env.ws.join(".git/refs")).expect("mkdir");
        let o = env
            .cmd()
            .args(["--json", "exec", "--policy", "standard", "--review", "--"])
            .args([
                "sh",
                "-c",
                "mkdir -p .githooks && echo crash > .githooks/pre-commit && echo ok > a.txt",
            ])
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let id = v["snapshot"]["held"].as_str().expect("held").to_string();
        let o = env.gw(&["--json", "apply", &id]);
        assert_eq!(
            std::fs::read(env.ws.join("a.txt")).expect("landed"),
            b"ok\n",
            "{}",
            text(&o)
        );
        assert!(
            !env.ws.join(".githooks/pre-commit").exists(),
            "the hook landed: {}",
            text(&o)
        );
        assert!(stdout(&o).contains(".githooks"), "{}", text(&o));
    }
);

escape_test!(
    /// Runs one after the other in the same second: the second did not overwrite the first's
    /// change (it started after it), so it says nothing of one. It did, when the journal was
    /// read by the second the run started in rather than by the id it had then.
    fn sequential_runs_do_not_say_they_overwrote_each_other() {
        let env = Env::new("capp-seq");
        for i in 0..3 {
            let o = env.sh("standard", &format!("echo {i} > f.txt"));
            assert!(o.status.success(), "{}", text(&o));
            assert!(
                !stderr(&o).contains("changed by another call"),
                "run {i}: {}",
                text(&o)
            );
        }
    }
);

escape_test!(
    /// A run that deletes what it can of a known repository's `.git` (its config and hooks are
    /// read-only to it) leaves its history: `HEAD`, `objects`, `refs` are kept, said on
    /// stderr, so the repository is still one (git in a nested one would otherwise use the
    /// repository above it).
    fn a_runs_deletion_of_a_repositorys_history_is_kept() {
        let env = Env::new("capp-keep-history");
        env.write(".git/HEAD", "ref: refs/heads/main\n");
        env.write(".git/config", "[core]\n");
        env.write(".git/objects/ab/cdef", "history\n");
        env.write(".git/refs/heads/main", "0123\n");
        env.write("f.txt", "work\n");
        let o = env.sh(
            "standard",
            "python3 -c 'import shutil; shutil.rmtree(\".git\", ignore_errors=True)'; echo ran",
        );
        assert!(stdout(&o).contains("ran"), "{}", text(&o));
        for p in [".git/HEAD", ".git/objects/ab/cdef", ".git/refs/heads/main"] {
            assert!(env.ws.join(p).exists(), "{p} deleted: {}", text(&o));
        }
        assert!(stderr(&o).contains("keeps it"), "{}", text(&o));
    }
);

escape_test!(
    /// Two runs at once, each making half of a bare repository (`HEAD` and a config; `objects`
    /// and `refs`): judged one after the other against the workspace as the other's apply
    /// left it, so the directory never becomes a repository git would obey.
    fn two_concurrent_runs_cannot_make_a_bare_repository_between_them() {
        let env = Env::new("capp-bare-race");
        let run = |script: &str| {
            env.cmd()
                .args(["exec", "--policy", "standard", "--", "sh", "-c", script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run")
        };
        let a = run(
            "mkdir -p x && echo 'ref: refs/heads/m' > x/HEAD && echo '[core]' > x/config && sleep 2",
        );
        let b = run("mkdir -p x/objects x/refs && sleep 2");
        let (a, b) = (
            a.wait_with_output().expect("a"),
            b.wait_with_output().expect("b"),
        );
        let all = format!("{}\n{}", text(&a), text(&b));
        let has = |p: &str| std::fs::symlink_metadata(env.ws.join(p)).is_ok();
        assert!(
            !(has("x/HEAD") && has("x/objects") && has("x/refs")),
            "a bare repository was made: {all}"
        );
    }
);
