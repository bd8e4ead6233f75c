//! History, undo, snapshots of what commands change, and backup retention.

use crate::util::*;

sandbox_test!(
    fn fs_undo_refuses_a_file_changed_since_unless_forced() {
        let env = Env::new("fs-undo");
        let p = env.write("u.txt", "v1\n");
        assert!(
            env.gw(&["fs", "write", "u.txt", "--content", "v2\n"])
                .status
                .success()
        );
        std::fs::write(&p, "v3 by someone else\n").expect("w");
        let o = env.gw(&["undo"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(
            stderr(&o).contains("changed since change 1"),
            "{}",
            text(&o)
        );
        assert!(stderr(&o).contains("+v3 by someone else"), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(&p).expect("r"),
            "v3 by someone else\n"
        );
        let o = env.gw(&["undo", "--force"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(std::fs::read_to_string(&p).expect("r"), "v1\n");
        // The overwritten content was backed up: undoing the undo brings it back.
        assert!(env.gw(&["undo", "2"]).status.success());
        assert_eq!(
            std::fs::read_to_string(&p).expect("r"),
            "v3 by someone else\n"
        );
        // Undo of a creation removes the file; undoing that restores it.
        assert!(
            env.gw(&["fs", "write", "new.txt", "--content", "n"])
                .status
                .success()
        );
        assert!(env.gw(&["undo", "4"]).status.success());
        assert!(!env.ws.join("new.txt").exists());
        assert!(env.gw(&["undo", "5"]).status.success());
        assert_eq!(
            std::fs::read_to_string(env.ws.join("new.txt")).expect("r"),
            "n"
        );
    }
);

sandbox_test!(
    fn exec_snapshot_lets_undo_revert_what_a_command_changed() {
        let env = Env::new("snapshot");
        env.write("a.txt", "one\n");
        env.write("b.txt", "two\n");
        env.write("sub/c.txt", "three\n");
        std::fs::create_dir_all(env.ws.join(".git")).expect("git");
        env.write(".gitignore", "build/\n");
        env.write("build/out.o", "ignored\n");
        let o = env.sh(
            "standard",
            "echo changed > a.txt; rm b.txt; echo new > d.txt; rm sub/c.txt; echo x > build/out.o",
        );
        assert!(o.status.success(), "{}", text(&o));
        assert!(stderr(&o).contains("changed 4 file(s)"), "{}", text(&o));
        let r = log_records(&env);
        assert_eq!(r[0]["files_changed"], 4, "{r:?}");
        // Something else edits d.txt: undo refuses, naming it; --force reverts anyway.
        std::fs::write(env.ws.join("d.txt"), "edited later\n").expect("w");
        let o = env.gw(&["undo"]);
        assert_eq!(o.status.code(), Some(122), "{}", text(&o));
        assert!(stderr(&o).contains("d.txt"), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("a.txt")).expect("r"),
            "changed\n"
        );
        let o = env.gw(&["undo", "--force"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            std::fs::read_to_string(env.ws.join("a.txt")).expect("r"),
            "one\n"
        );
        assert_eq!(
            std::fs::read_to_string(env.ws.join("b.txt")).expect("r"),
            "two\n"
        );
        assert_eq!(
            std::fs::read_to_string(env.ws.join("sub/c.txt")).expect("r"),
            "three\n"
        );
        assert!(!env.ws.join("d.txt").exists());
        // Ignored files are not snapshotted; --no-snapshot records nothing.
        assert_eq!(
            std::fs::read_to_string(env.ws.join("build/out.o")).expect("r"),
            "x\n"
        );
        let o = env
            .cmd()
            .args(["exec", "--no-snapshot", "--", "sh", "-c", "echo y > a.txt"])
            .output()
            .expect("run");
        assert!(o.status.success(), "{}", text(&o));
        assert!(!stderr(&o).contains("changed"), "{}", text(&o));
    }
);

sandbox_test!(
    fn backup_retention_keeps_the_last_versions_per_path() {
        let env = Env::new("retention");
        let p = env.policy_file("extends = \"standard\"\n[undo]\nkeep_versions = 2\n");
        for i in 0..6 {
            let o = env.gw(&[
                "--policy",
                &p,
                "fs",
                "write",
                "v.txt",
                "--content",
                &format!("version {i}\n"),
            ]);
            assert!(o.status.success(), "{}", text(&o));
        }
        let count = || {
            std::fs::read_dir(env.state.join("backups"))
                .expect("ls")
                .flatten()
                .filter(|e| e.file_name().len() == 64)
                .count()
        };
        assert_eq!(count(), 6, "every version backed up");
        let o = env.gw(&["--policy", &p, "log", "gc"]);
        assert!(o.status.success(), "{}", text(&o));
        // The last two changes (versions 3 -> 4 -> 5) keep their contents.
        assert_eq!(count(), 3, "{}", text(&o));
        assert!(env.gw(&["--policy", &p, "undo"]).status.success());
        assert_eq!(
            std::fs::read_to_string(env.ws.join("v.txt")).expect("r"),
            "version 4\n"
        );
        let o = env.gw(&["--policy", &p, "undo", "2"]);
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(stderr(&o).contains("backup retention"), "{}", text(&o));
    }
);
