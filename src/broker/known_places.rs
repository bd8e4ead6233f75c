//! The git places known in a workspace, kept between runs (`<state>/places/<hash>.json`): a
//! run whose changes the overlay captures is not preceded by a search of the whole workspace
//! for nested repositories (issue 37).
//!
//! **What keeps the list true.** It is made by a search (`wsfs::Tree::find_git`) and records
//! the journal's last change id at that moment. Before a run it is used as it is when
//! nothing journalled since in that workspace could have made or moved a repository: a path
//! in a `.git`, a `HEAD`, `objects` or `refs` (a bare repository), a directory made, removed,
//! moved or restored from the trash (a repository inside it). Anything else journalled since
//! is read once (from the journal's index, backwards: what is new only) and the list moves
//! past it; anything of those kinds, a journal the index does not cover, a compaction past
//! the list's id, an entry made or removed at the workspace's top since (its ctime), or a list
//! older than five minutes, and the workspace is searched again. A run captured by the overlay updates
//! the list itself with the `.git` directories it made (`after_apply`): what it wrote in git's
//! places is decided from its layer (`places::LayerCheck`), never searched for.
//!
//! What the list cannot see is a repository a person makes outside gateway (a `git clone`
//! in their own shell) below the workspace's top, within five minutes of the last search. A
//! run does not find it read-only; what the run
//! writes in it is still judged from its layer: paths in any `.git`, a bare repository's
//! config and hooks, and what the config of every repository on the way to a changed path
//! names (`LayerCheck::new` looks for `.git` in each ancestor, as git's own discovery does).

use super::*;
use crate::journal::pathbytes::BytesPath;
use std::os::unix::ffi::OsStrExt;

/// The kept list of one workspace.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Kept {
    /// The workspace.
    tree: BytesPath,
    /// The journal's last change id the list accounts for.
    journal_last: u64,
    /// Every `.git` entry, relative.
    dot_git: Vec<BytesPath>,
    /// Bare repositories, relative.
    bare: Vec<BytesPath>,
    /// The workspace directory's ctime (ns) when the list was last known current: an entry
    /// made or removed at its top since (a person's `git clone` there) makes it stale.
    #[serde(default)]
    root_ctime: i64,
    /// When the workspace was last searched (seconds since the epoch): a list older than
    /// [`MAX_AGE`] is searched again, so that a repository made outside gateway deeper down
    /// is found within that time.
    #[serde(default)]
    searched: u64,
}

/// The longest a kept list is used without a search (seconds).
const MAX_AGE: u64 = 300;

/// The workspace directory's ctime (ns), or 0.
fn root_ctime(tree: &wsfs::Tree) -> i64 {
    rustix::fs::fstat(tree.fd()).map_or(0, |st| {
        st.st_ctime * 1_000_000_000 + i64::try_from(st.st_ctime_nsec).unwrap_or(0)
    })
}

fn file_of(state_dir: &Path, tree: &Path) -> PathBuf {
    let h = crate::journal::index::hash(tree.as_os_str().as_bytes());
    state_dir.join("places").join(format!("{h:016x}.json"))
}

fn load(state_dir: &Path, tree: &Path) -> Option<Kept> {
    // not-ws: the broker's own state directory
    let data = std::fs::read(file_of(state_dir, tree)).ok()?;
    let k: Kept = serde_json::from_slice(&data).ok()?;
    (k.tree.0 == tree).then_some(k)
}

fn save(state_dir: &Path, k: &Kept) {
    let p = file_of(state_dir, &k.tree.0);
    if let Some(d) = p.parent() {
        use std::os::unix::fs::DirBuilderExt;
        // not-ws: the broker's own state directory
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d);
    }
    if let Ok(data) = serde_json::to_vec(k) {
        // not-ws: the broker's own state directory (a cache: rebuilt when lost)
        let _ = crate::durable::write_atomic_unsynced(&p, &data);
    }
}

/// Could this journalled change have made, moved or brought back a repository?
fn could_make_repo(c: &crate::journal::Change) -> bool {
    use crate::journal::PathState;
    let named = |p: &Path| {
        p.iter().any(|n| n == ".git")
            || p.file_name()
                .is_some_and(|n| n == "HEAD" || n == "objects" || n == "refs")
    };
    c.dest.is_some()
        || c.trash.is_some()
        || matches!(c.before, PathState::Dir)
        || matches!(c.after, PathState::Dir)
        || named(&c.path)
}

fn is_bare(tree: &wsfs::Tree, rel: &Path) -> bool {
    let at = |n: &str| {
        tree.kind(&rel.join(n))
            .ok()
            .flatten()
            .map(|k| matches!(k, wsfs::Kind::Dir { .. }))
    };
    super::layer_check::bare_like(at("HEAD"), at("objects"), at("refs"), at("commondir"))
}

/// What the workspace `tree` holds of git's places: the kept list when nothing journalled
/// since could have changed it, else a search of at most `max_dirs` directories (kept when
/// complete). Whether the list was used is the second value.
pub(super) fn found(
    state_dir: &Path,
    tree: &wsfs::Tree,
    max_dirs: usize,
) -> (wsfs::GitFound, bool) {
    let _lock = crate::journal::lock_named(state_dir, "places.lock").ok();
    let ws_hash = crate::journal::index::hash(tree.path().as_os_str().as_bytes());
    if let Some(mut k) = load(state_dir, tree.path())
        && crate::journal::now().saturating_sub(k.searched) < MAX_AGE
        && k.root_ctime == root_ctime(tree)
        && let Some((since, last)) =
            crate::journal::index::changes_after(state_dir, k.journal_last, ws_hash)
        && !since.iter().any(could_make_repo)
    {
        if last != k.journal_last {
            k.journal_last = last;
            save(state_dir, &k);
        }
        let found = wsfs::GitFound {
            dot_git: k
                .dot_git
                .into_iter()
                .map(|p| p.0)
                .filter(|p| tree.kind(p).is_ok_and(|k| k.is_some()))
                .collect(),
            bare: k
                .bare
                .into_iter()
                .map(|p| p.0)
                .filter(|p| is_bare(tree, p))
                .collect(),
            incomplete: false,
        };
        return (found, true);
    }
    (search(state_dir, tree, max_dirs), false)
}

/// Searches the workspace `tree` and keeps what it found (when the search was complete and
/// the journal's last id is known).
pub(super) fn search(state_dir: &Path, tree: &wsfs::Tree, max_dirs: usize) -> wsfs::GitFound {
    let last = crate::journal::index::last_given(state_dir);
    let found = tree.find_git(max_dirs);
    if let crate::journal::index::LastId::Given(last) = last
        && !found.incomplete
    {
        save(
            state_dir,
            &Kept {
                tree: BytesPath(tree.path().to_path_buf()),
                journal_last: last,
                dot_git: found.dot_git.iter().cloned().map(BytesPath).collect(),
                bare: found.bare.iter().cloned().map(BytesPath).collect(),
                root_ctime: root_ctime(tree),
                searched: crate::journal::now(),
            },
        );
    }
    found
}

/// After a run's layer was applied to the workspace `ws`: the `.git` directories it made
/// join the list, and the list moves past the changes the apply journalled (`journalled`:
/// the first and last id) when it accounted for everything before them.
pub(super) fn after_apply(
    state_dir: &Path,
    ws: &Path,
    new_git_dirs: &[PathBuf],
    journalled: Option<(u64, u64)>,
) {
    let _lock = crate::journal::lock_named(state_dir, "places.lock").ok();
    let Some(mut k) = load(state_dir, ws) else {
        return;
    };
    for d in new_git_dirs {
        if !k.dot_git.iter().any(|p| p.0 == *d) {
            k.dot_git.push(BytesPath(d.clone()));
        }
    }
    k.dot_git.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some((first, last)) = journalled
        && k.journal_last + 1 == first
    {
        k.journal_last = last;
    }
    // The apply changed the workspace's top itself (what the run created there).
    if let Ok(t) = wsfs::Tree::open(ws) {
        k.root_ctime = root_ctime(&t);
    }
    save(state_dir, &k);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{self, Change, PathState};

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gw-known-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::canonicalize(&d).expect("canon")
    }

    fn journal_change(state: &Path, ws: &Path, rel: &str, before: PathState, after: PathState) {
        let lock = journal::lock(state).expect("lock");
        let c = journal::begin(
            state,
            &lock,
            Change {
                tool: "write".into(),
                path: ws.join(rel),
                before,
                after,
                workspace: Some(ws.to_path_buf()),
                ..Change::default()
            },
        )
        .expect("begin");
        journal::commit(state, c.id).expect("commit");
    }

    fn file() -> PathState {
        PathState::File {
            sha256: "0".repeat(64),
            mode: 0o644,
            size: 1,
        }
    }

    #[test]
    fn the_kept_list_is_used_until_the_journal_says_a_repository_may_have_changed() {
        // Issue 37: a captured run does not search the workspace for nested repositories; the
        // list kept from the last search holds until a journalled change could have made or
        // moved one.
        let root = tmp("list");
        let (ws, state) = (root.join("ws"), root.join("state"));
        std::fs::create_dir_all(ws.join("a/.git")).expect("mkdir");
        std::fs::create_dir_all(ws.join("x")).expect("mkdir");
        std::fs::create_dir_all(&state).expect("mkdir");
        journal_change(&state, &ws, "first.txt", PathState::Absent, file());
        let tree = wsfs::Tree::open(&ws).expect("tree");
        let (f, kept) = found(&state, &tree, 1000);
        assert!(!kept, "no list yet: searched");
        assert_eq!(f.dot_git, [PathBuf::from("a/.git")]);
        // A repository made behind gateway's back below the top is not seen: the list is
        // used, no search.
        std::fs::create_dir_all(ws.join("x/b/.git")).expect("mkdir");
        let (f, kept) = found(&state, &tree, 1000);
        assert!(kept);
        assert_eq!(f.dot_git, [PathBuf::from("a/.git")]);
        // An ordinary file change moves the list past it.
        journal_change(&state, &ws, "notes.txt", PathState::Absent, file());
        let (_, kept) = found(&state, &tree, 1000);
        assert!(kept);
        // A change in another workspace says nothing of this one.
        journal_change(
            &state,
            &root.join("other"),
            "x/HEAD",
            PathState::Absent,
            file(),
        );
        assert!(found(&state, &tree, 1000).1);
        // A `HEAD`, a directory made, a change in a `.git`: searched again.
        for (rel, after) in [
            ("c/HEAD", file()),
            ("d", PathState::Dir),
            ("e/.git/config", file()),
        ] {
            journal_change(&state, &ws, rel, PathState::Absent, after);
            let (f, kept) = found(&state, &tree, 1000);
            assert!(!kept, "{rel}");
            assert!(
                f.dot_git.contains(&PathBuf::from("x/b/.git")),
                "{rel}: {f:?}"
            );
            assert!(found(&state, &tree, 1000).1, "{rel}: kept again");
        }
        // A repository that is gone is dropped; one a captured run made is added.
        std::fs::remove_dir_all(ws.join("a")).expect("rm");
        std::fs::create_dir_all(ws.join("n/.git")).expect("mkdir");
        after_apply(&state, &ws, &[PathBuf::from("n/.git")], None);
        let (f, kept) = found(&state, &tree, 1000);
        assert!(kept);
        assert_eq!(
            f.dot_git,
            [PathBuf::from("n/.git"), PathBuf::from("x/b/.git")]
        );
        // An entry made at the workspace's top outside gateway (a `git clone` there): searched.
        std::fs::create_dir_all(ws.join("top/.git")).expect("mkdir");
        let (f, kept) = found(&state, &tree, 1000);
        assert!(!kept);
        assert!(f.dot_git.contains(&PathBuf::from("top/.git")), "{f:?}");
        // A list older than its bound: searched.
        let mut k = load(&state, &ws).expect("kept");
        k.searched -= MAX_AGE;
        save(&state, &k);
        assert!(!found(&state, &tree, 1000).1);
        assert!(found(&state, &tree, 1000).1);
        let _ = std::fs::remove_dir_all(root);
    }
}
