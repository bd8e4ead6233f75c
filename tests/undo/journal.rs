//! Issue 37's journal: a name that is not UTF-8 is journalled and undone byte-exact, one
//! entry that cannot be undone does not take its group with it, and the journal stays within
//! `[undo] max_state_bytes` however many changes it has seen.

use super::allocated;
use crate::util::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// The names in `dir`, as bytes, sorted.
fn names(dir: &Path) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().as_bytes().to_vec())
        .collect();
    v.sort();
    v
}

sandbox_test!(
    fn a_name_that_is_not_utf8_is_journalled_and_undone_byte_exact() {
        // A created file whose name was not UTF-8 made the journal append fail (JSON of a
        // path): the run's whole group was lost and every later run in the workspace was
        // refused until the file was removed.
        let env = Env::new("undo-bytes");
        let old = env.ws.join(OsStr::from_bytes(b"old-\xfe.txt"));
        std::fs::write(&old, b"old \xfe content\n").expect("w");
        env.write("a.txt", "one\n");
        let o = env.sh(
            "standard",
            "printf 'new\\n' > \"$(printf 'new-\\377.txt')\"; rm old-*; echo two > a.txt",
        );
        assert!(o.status.success(), "{}", text(&o));
        assert!(!stderr(&o).contains("gateway:"), "{}", text(&o));
        assert_eq!(
            names(&env.ws),
            [b"a.txt".to_vec(), b"new-\xff.txt".to_vec()],
            "{}",
            text(&o)
        );
        // Later runs still work and are journalled.
        let o = env.sh("standard", "echo later > later.txt");
        assert!(o.status.success(), "{}", text(&o));
        assert!(!stderr(&o).contains("gateway:"), "{}", text(&o));
        // History shows all four changes; the names that are not UTF-8 as bytes in JSON.
        let o = env.gw(&["--json", "history"]);
        assert!(o.status.success(), "{}", text(&o));
        let v = json_of(&o);
        let changes = v["changes"].as_array().expect("changes");
        assert_eq!(changes.len(), 4, "{v}");
        let b64: Vec<&str> = changes
            .iter()
            .filter_map(|c| c["change"]["path"]["bytes_b64"].as_str())
            .collect();
        assert_eq!(b64.len(), 2, "{v}");
        let o = env.gw(&["history"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(stdout(&o).contains("later.txt"), "{}", text(&o));
        // Undo the later run, then the first: the names and contents come back exactly.
        let o = env.gw(&["undo"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(!env.ws.join("later.txt").exists());
        let o = env.gw(&["undo"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            names(&env.ws),
            [b"a.txt".to_vec(), b"old-\xfe.txt".to_vec()],
            "{}",
            text(&o)
        );
        assert_eq!(std::fs::read(&old).expect("old"), b"old \xfe content\n");
        assert_eq!(
            std::fs::read_to_string(env.ws.join("a.txt")).expect("a"),
            "one\n"
        );
        // And the undo itself can be undone: the run's result is back, byte for byte.
        let o = env.gw(&["--json", "history", "--limit", "1"]);
        let id = json_of(&o)["changes"][0]["change"]["id"]
            .as_u64()
            .expect("id");
        let o = env.gw(&["undo", &id.to_string()]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            names(&env.ws),
            [b"a.txt".to_vec(), b"new-\xff.txt".to_vec()]
        );
        assert_eq!(
            std::fs::read(env.ws.join(OsStr::from_bytes(b"new-\xff.txt"))).expect("new"),
            b"new\n"
        );
    }
);

sandbox_test!(
    fn an_entry_that_cannot_be_undone_does_not_take_its_group_with_it() {
        // One change of a run whose content before could not be backed up (here: past the
        // workspace's share of the store) made the undo of the whole run refuse. Now it is
        // journalled as not undoable, with why; history says so; undo reverts the rest and
        // names it.
        let env = Env::new("undo-partial");
        let p = env.policy_file(
            "extends = \"permissive\"\n[undo]\nsnapshot = true\nmax_state_bytes = \"8MiB\"\nmax_workspace_bytes = \"1MiB\"\n",
        );
        let o = env.gw(&[
            "--policy",
            &p,
            "exec",
            "--",
            "sh",
            "-c",
            "head -c 3M /dev/urandom > big.bin; echo small > small.txt",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let o = env.gw(&[
            "--policy",
            &p,
            "exec",
            "--",
            "sh",
            "-c",
            "echo replaced > big.bin; echo changed > small.txt; echo new > new.txt",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let v = json_of(&env.gw(&["--json", "history", "--limit", "3"]));
        let changes = v["changes"].as_array().expect("changes");
        let big = changes
            .iter()
            .find(|c| {
                c["change"]["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("big.bin"))
            })
            .expect("big.bin's change");
        let why = big["change"]["not_undoable"].as_str().unwrap_or_default();
        assert!(why.contains("max_workspace_bytes"), "{v}");
        let o = env.gw(&["history"]);
        assert!(stdout(&o).contains("not undoable: "), "{}", text(&o));
        // Undo reverts small.txt and new.txt and says big.bin could not be.
        let o = env.gw(&["--policy", &p, "undo"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            text(&o).contains("not undoable") && text(&o).contains("big.bin"),
            "{}",
            text(&o)
        );
        assert_eq!(
            std::fs::read_to_string(env.ws.join("small.txt")).expect("small"),
            "small\n"
        );
        assert!(!env.ws.join("new.txt").exists());
        assert_eq!(
            std::fs::read_to_string(env.ws.join("big.bin")).expect("big"),
            "replaced\n"
        );
        // The next plain undo does not stop at the change it could not revert: it takes
        // the run before (which created big.bin and small.txt).
        let o = env.gw(&["--policy", &p, "undo", "--dry-run", "--force"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("small.txt"), "{}", text(&o));
    }
);

sandbox_test!(
    fn a_hundred_thousand_created_and_deleted_files_keep_the_journal_within_its_bound() {
        // The journal was never pruned: 100k create/delete cycles grew the state directory by
        // ~86 MB under a 4 MiB `max_state_bytes`. 50 runs, each creating 2,000 files and
        // deleting the previous run's (4,000 changes a run, 200,000 in all).
        let env = Env::new("undo-cycles");
        let p = env.policy_file(
            "extends = \"permissive\"\n[undo]\nsnapshot = true\nmax_state_bytes = \"4MiB\"\nmax_workspace_bytes = \"4MiB\"\n",
        );
        let bound = 4u64 << 20;
        // The slack: what the bound does not cover — the snapshot index (~0.3 MB for 2,000
        // files), the audit log, keys, locks. The journal counts in the bound, though it may
        // exceed its share by the newest group of each workspace (here ~2 MB of lines and
        // index for 4,000 changes), which the next undo needs.
        let slack = 1u64 << 20;
        // The workspace on a tmpfs: ext4 slows down creating files among many just deleted,
        // which is not what is measured here.
        let _fs = super::Tmpfs::mount(&env.ws, "64m");
        std::fs::create_dir_all(env.ws.join("d")).expect("mkdir");
        let runs = 51;
        for k in 0..runs {
            let create = if k + 1 < runs {
                format!("i=0; while [ $i -lt 2000 ]; do : > d/r{k}_$i; i=$((i+1)); done; ")
            } else {
                String::new()
            };
            let delete = if k > 0 {
                format!("rm -f d/r{}_*", k - 1)
            } else {
                "true".into()
            };
            let o = env.gw(&[
                "--policy",
                &p,
                "exec",
                "--",
                "sh",
                "-c",
                &format!("{create}{delete}"),
            ]);
            assert!(o.status.success(), "run {k}: {}", text(&o));
            let all = allocated(&env.state);
            assert!(
                all <= bound + slack,
                "run {k}: the state directory holds {all} bytes"
            );
        }
        // History works, with ids that kept counting through the pruning.
        let o = env.gw(&["--json", "history", "--limit", "3"]);
        assert!(o.status.success(), "{}", text(&o));
        let v = json_of(&o);
        let last = v["changes"][2]["change"]["id"].as_u64().expect("id");
        assert_eq!(last, 200_000, "{v}");
        let omitted = v["omitted"].as_u64().expect("omitted");
        assert!(omitted < 100_000, "pruned: {omitted} older changes left");
        let o = env.gw(&["history"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(stdout(&o).lines().count(), 20, "{}", text(&o));
        // The newest run is still undoable: the last 2,000 files come back.
        let o = env.gw(&["--policy", &p, "undo"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            std::fs::read_dir(env.ws.join("d")).expect("ls").count(),
            2000
        );
        assert!(env.ws.join(format!("d/r{}_1999", runs - 2)).exists());
    }
);
