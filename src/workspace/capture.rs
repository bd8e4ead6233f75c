//! Capture of what a run wrote: an overlay of the workspace in the run's own mount namespace.
//!
//! Why an overlay (issue 37): a walk before and after a run sees what it can compare (sizes,
//! times, what ignore files let it see), and a run can make an overwrite look like nothing
//! (same size, old mtime put back), hide a deletion behind an ignore file it writes, or grow a
//! file past the walk's bound; and a walk costs O(files) twice per run. An overlay records
//! what the run *did*: the workspace is its lower layer, never written during the run; every
//! file the run created, changed (even only its mode or times) or deleted (a whiteout) is in
//! the upper layer, a per-call directory of the state directory. After the run the broker
//! applies the upper layer to the workspace, journalling each path on its own
//! (`workspace::apply`), so the cost grows with what changed, not with the tree. A run whose
//! changes are held for review (`gateway exec --review`) keeps its layer until `gateway
//! apply` or `gateway discard`.
//!
//! The layer is mounted by the run's helper (`sys::mount`, `Step::Overlay`) with
//! `userxattr` (a user namespace may write only `user.*` attributes), every layer passed by
//! descriptor. What that means for the run, and is documented in docs/undo.md:
//! - a directory that existed before the run cannot be renamed (`EXDEV`, as overlays without
//!   `redirect_dir` do; `mv` copies then deletes, and the capture sees that);
//! - writing one name of a file with several hard links copies that name up alone: the other
//!   names keep the old content until the change is applied (then in place, for all names);
//! - a file of a uid the run's user namespace does not map (another user's file, for a normal
//!   user) can be read but not changed (`EOVERFLOW`), never corrupted.
//!
//! Where the overlay cannot be used (a mount inside the workspace, which its lower layer
//! would not show; a state directory inside the workspace; a kernel or file system that
//! refuses it), the run falls back to the snapshot walk (`workspace::snapshot`), which
//! compares inode, size, ctime and content, never mtime alone, and the report says which
//! mechanism ran and why.

use super::wsfs;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::{Deserialize, Serialize};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The mechanism that captured a run's changes, as reports and records name it.
pub const OVERLAY: &str = "overlay";
/// The fallback: a walk of the workspace before and after the run.
pub const WALK: &str = "walk";

/// A run's capture layer: its directory in the state directory (holding `upper`, `work` and
/// `meta.json`), and the workspace it captures.
#[derive(Clone, Debug)]
pub struct Layer {
    /// The change set's id (`gateway apply ID`).
    pub id: String,
    /// `<state>/capture/<id>`.
    pub dir: PathBuf,
    /// The workspace (canonical).
    pub workspace: PathBuf,
}

/// What the capture directory says of itself (`meta.json`).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Meta {
    /// The change set's id.
    pub id: String,
    /// The workspace.
    pub workspace: PathBuf,
    /// When the run started (seconds since the epoch).
    pub started: u64,
    /// The command (redacted, shell-quoted).
    pub command: String,
    /// The daemon client whose run it is (`None`: the broker's own user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// `running` (the broker has not looked at it since the run started), `held` (waiting
    /// for `gateway apply` or `gateway discard`), `failed` (applying it failed in part).
    pub state: String,
    /// Why it is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The run's audit record, once written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The journal's last change id when the run started: what other calls journalled after
    /// it, to the paths the run changed, its apply overwrites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_last: Option<u64>,
}

/// Where capture directories live.
pub fn root(state_dir: &Path) -> PathBuf {
    state_dir.join("capture")
}

impl Layer {
    /// The upper layer.
    pub fn upper(&self) -> PathBuf {
        self.dir.join("upper")
    }

    /// The layer with id `id` in `state_dir`, as it was left (its `meta.json`).
    pub fn open(state_dir: &Path, id: &str) -> Option<(Layer, Meta)> {
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return None;
        }
        let dir = root(state_dir).join(id);
        // not-ws: a capture directory's own description, in the state directory
        let meta: Meta =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).ok()?).ok()?;
        let layer = Layer {
            id: id.to_string(),
            dir,
            workspace: meta.workspace.clone(),
        };
        Some((layer, meta))
    }

    /// Saves `meta` (atomically).
    pub fn save(&self, meta: &Meta) -> std::io::Result<()> {
        let data = serde_json::to_vec_pretty(meta).map_err(std::io::Error::other)?;
        // not-ws: a capture directory's own description, in the state directory
        crate::durable::write_atomic(&self.dir.join("meta.json"), &data)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// Removes the layer (what it holds is discarded).
    pub fn remove(&self) -> std::io::Result<()> {
        remove_tree(&self.dir)
    }
}

/// Makes a capture layer for a run in `ws`, or says why the overlay cannot capture it (the
/// run then falls back to the walk).
pub fn prepare(
    state_dir: &Path,
    ws: &Path,
    mut meta: Meta,
    run_as: Option<u32>,
) -> Result<Layer, String> {
    if state_dir.starts_with(ws) {
        return Err(format!(
            "the state directory {} is inside the workspace",
            state_dir.display()
        ));
    }
    if ws.to_str().is_none() {
        return Err("the workspace's path is not UTF-8".into());
    }
    if let Some(m) = mount_inside(ws) {
        return Err(format!(
            "{} is a mount inside the workspace, which the overlay's lower layer would not show",
            m.display()
        ));
    }
    let base = root(state_dir);
    // The run's helper reaches the layer through these as the broker's uid in the run's user
    // namespace, where another owner is not mapped (a state directory another user made).
    let me = crate::sandbox::effective_uid();
    for d in [state_dir, base.as_path()] {
        if let Ok(st) = wsfs::open_dir_nolinks(d).and_then(|f| Ok(rustix::fs::fstat(&f)?))
            && st.st_uid != me
            && Some(st.st_uid) != run_as
        {
            return Err(format!(
                "{} belongs to uid {}, which the run's user namespace does not map (the broker's uid is {me})",
                d.display(),
                st.st_uid
            ));
        }
    }
    let id = format!(
        "cap-{}",
        super::snapshot::unique_id(&ws.display().to_string())
    );
    let dir = base.join(&id);
    let made = (|| {
        use std::os::unix::fs::DirBuilderExt;
        // not-ws: the capture directories, in the state directory
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&base)?;
        for d in [&dir, &dir.join("upper"), &dir.join("work")] {
            // not-ws: the capture directories, in the state directory
            std::fs::DirBuilder::new().mode(0o700).create(d)?;
        }
        root_like(ws, &dir.join("upper"), run_as)?;
        let layer = Layer {
            id: id.clone(),
            dir: dir.clone(),
            workspace: ws.to_path_buf(),
        };
        meta.id.clone_from(&id);
        meta.workspace = ws.to_path_buf();
        meta.state = "running".into();
        layer.save(&meta)?;
        Ok::<_, std::io::Error>(layer)
    })();
    made.map_err(|e| {
        let _ = remove_tree(&dir);
        format!(
            "the capture directory {} could not be made: {}",
            dir.display(),
            crate::shown::os_error(&e)
        )
    })
}

/// The overlay's root shows its upper directory's owner and mode: made those of the
/// workspace, so that the run finds its workspace as it is. Given to the run's uid (a
/// daemon's client, `run_as`) only when the workspace is that uid's: another uid is not
/// mapped in the run's user namespace, and the overlay could not write an upper layer of
/// an unmapped owner.
fn root_like(ws: &Path, upper: &Path, run_as: Option<u32>) -> std::io::Result<()> {
    let w = wsfs::open_dir_nolinks(ws)?;
    let st = rustix::fs::fstat(&w)?;
    let u = wsfs::open_dir_nolinks(upper)?;
    if run_as.is_some_and(|r| r == st.st_uid) {
        give(&u, st.st_uid, st.st_gid)?;
    }
    rustix::fs::fchmod(&u, Mode::from_raw_mode(st.st_mode & 0o7777))?;
    Ok(())
}

fn give(u: &OwnedFd, uid: u32, gid: u32) -> std::io::Result<()> {
    match rustix::fs::fchown(
        u,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
    ) {
        Ok(()) | Err(rustix::io::Errno::PERM) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A mount point strictly inside `ws`, from this process's mount table.
fn mount_inside(ws: &Path) -> Option<PathBuf> {
    // not-ws: the kernel's mount table
    let table = std::fs::read("/proc/self/mountinfo").ok()?;
    for line in table.split(|&b| b == b'\n') {
        let Some(field) = line.split(|&b| b == b' ').nth(4) else {
            continue;
        };
        let p = PathBuf::from(OsString::from_vec(unescape(field)));
        if p != ws && p.starts_with(ws) {
            return Some(p);
        }
    }
    None
}

use std::os::unix::ffi::OsStringExt;

/// mountinfo's octal escapes (`\040` for a space) undone.
fn unescape(f: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(f.len());
    let mut i = 0;
    while i < f.len() {
        if f[i] == b'\\'
            && i + 3 < f.len()
            && f[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b))
        {
            out.push((f[i + 1] - b'0') * 64 + (f[i + 2] - b'0') * 8 + (f[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(f[i]);
            i += 1;
        }
    }
    out
}

/// The change sets held in `state_dir` (reviewed runs, failed applies, runs whose broker
/// stopped), oldest first.
pub fn held(state_dir: &Path) -> Vec<(Layer, Meta)> {
    // not-ws: the capture directories, in the state directory
    let Ok(rd) = std::fs::read_dir(root(state_dir)) else {
        return Vec::new();
    };
    let mut out: Vec<(Layer, Meta)> = rd
        .filter_map(Result::ok)
        .filter_map(|e| Layer::open(state_dir, &e.file_name().to_string_lossy()))
        .collect();
    out.sort_by_key(|(_, m)| (m.started, m.id.clone()));
    out
}

/// What stands in the upper layer at a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Up {
    /// A whiteout: the run deleted what the workspace has there.
    Whiteout,
    /// A directory; `opaque`: it replaces the workspace's (whose contents are gone).
    Dir {
        /// Permission bits.
        mode: u32,
        /// `user.overlay.opaque`.
        opaque: bool,
    },
    /// A regular file.
    File {
        /// Permission bits.
        mode: u32,
        /// Size in bytes.
        size: u64,
        /// Access and modification times (seconds, nanoseconds).
        times: [(i64, i64); 2],
        /// (device, inode) when it has other names in the layer (hard links the run made).
        linked: Option<(u64, u64)>,
    },
    /// A symbolic link and its target.
    Link(PathBuf),
    /// A FIFO.
    Fifo {
        /// Permission bits.
        mode: u32,
    },
    /// A socket or a device other than a whiteout: not applied.
    Other,
}

/// One entry of the upper layer: its path relative to the workspace and what it is.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Relative path.
    pub rel: PathBuf,
    /// What the run left there.
    pub up: Up,
}

/// How many entries of an upper layer are listed at most (a run that created more is
/// applied in part and held, with the rest, for `gateway apply`).
pub const MAX_ENTRIES: usize = 5_000_000;

/// The entries of the upper layer at `upper`, parents before their contents, each directory's
/// entries sorted by name. Read beneath a descriptor, no link followed: the run chose every
/// name and type in it.
pub fn entries(upper: &Path) -> std::io::Result<Vec<Entry>> {
    let tree = wsfs::Tree::open(upper)?;
    let mut modes = Modes::load(upper);
    let mut out = Vec::new();
    // Directories to list, by name beneath the layer's descriptor (one open at a time: a
    // layer may hold more directories than a process may have descriptors).
    let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = tree.open_dir(&rel)?;
        let mut names = list_names(&dir)?;
        names.sort();
        let mut subdirs = Vec::new();
        for name in names {
            let r = rel.join(&name);
            let up = up_at(&dir, &name, &r, &mut modes)?;
            if let Up::Dir { .. } = up {
                // Opened up now if the run left it unsearchable; listed in its turn.
                drop(open_dir_in_layer(&dir, &name, &r, &mut modes)?);
                subdirs.push(r.clone());
            }
            out.push(Entry { rel: r, up });
            if out.len() > MAX_ENTRIES {
                return Err(std::io::Error::other(format!(
                    "the run left more than {MAX_ENTRIES} entries"
                )));
            }
        }
        // Depth first, in name order: a directory's entries come right after it.
        subdirs.reverse();
        stack.extend(subdirs);
    }
    // Parents before contents, in one pre-order.
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by(|&a, &b| out[a].rel.cmp(&out[b].rel));
    Ok(order.into_iter().map(|i| out[i].clone()).collect())
}

fn list_names(dir: &OwnedFd) -> std::io::Result<Vec<OsString>> {
    let mut d = rustix::fs::Dir::read_from(dir)?;
    let mut out = Vec::new();
    while let Some(e) = d.read() {
        let e = e?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            out.push(OsStr::from_bytes(n).to_os_string());
        }
    }
    Ok(out)
}

/// What stands at `name` in the upper directory `dir`.
fn up_at(dir: &OwnedFd, name: &OsStr, rel: &Path, modes: &mut Modes) -> std::io::Result<Up> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    let mode = modes.kept.get(rel).copied().unwrap_or(st.st_mode & 0o7777);
    Ok(match FileType::from_raw_mode(st.st_mode) {
        FileType::CharacterDevice if st.st_rdev == 0 => Up::Whiteout,
        FileType::Directory => {
            let fd = open_dir_in_layer(dir, name, rel, modes)?;
            let mut v = [0u8; 4];
            let opaque = matches!(
                rustix::fs::fgetxattr(&fd, "user.overlay.opaque", &mut v),
                Ok(n) if n >= 1 && v[0] == b'y'
            );
            Up::Dir { mode, opaque }
        }
        FileType::RegularFile => {
            // A file the run left unreadable (mode 000): its mode is recorded here; the
            // layer's copy is the broker's to read.
            if st.st_mode & 0o400 == 0 {
                modes.open_up(dir, name, rel, mode, 0o400)?;
            }
            Up::File {
                mode,
                size: st.st_size.max(0) as u64,
                times: [
                    (st.st_atime, st.st_atime_nsec as i64),
                    (st.st_mtime, st.st_mtime_nsec as i64),
                ],
                linked: (st.st_nlink > 1).then_some((st.st_dev, st.st_ino)),
            }
        }
        FileType::Symlink => {
            let t = rustix::fs::readlinkat(dir, name, Vec::new())?;
            Up::Link(PathBuf::from(OsStr::from_bytes(t.as_bytes())))
        }
        FileType::Fifo => Up::Fifo { mode },
        _ => Up::Other,
    })
}

/// Opens the directory `name` of the layer: one the run left unsearchable (mode 000, its mode
/// already recorded) is opened up first, the layer being the broker's own.
fn open_dir_in_layer(
    dir: &impl AsFd,
    name: &OsStr,
    rel: &Path,
    modes: &mut Modes,
) -> std::io::Result<OwnedFd> {
    let open = || {
        rustix::fs::openat(
            dir,
            name,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    match open() {
        Err(rustix::io::Errno::ACCESS) => {
            let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
            let mode = modes.kept.get(rel).copied().unwrap_or(st.st_mode & 0o7777);
            modes.open_up(dir, name, rel, mode, 0o700)?;
            Ok(open()?)
        }
        r => Ok(r?),
    }
}

/// The modes the run left on entries the broker had to open up (a directory or file of mode
/// 000): kept beside the layer (`modes`, one `HEX-PATH MODE` line each) before the entry is
/// opened up, so that every later reading of the layer (`gateway changes`, `apply`) sees the
/// mode the run left.
#[derive(Default)]
struct Modes {
    file: PathBuf,
    kept: std::collections::HashMap<PathBuf, u32>,
}

impl Modes {
    fn load(upper: &Path) -> Modes {
        let file = upper.with_file_name("modes");
        // not-ws: the layer's own record of modes, in the state directory
        let text = std::fs::read(&file).unwrap_or_default();
        let kept = text
            .split(|&b| b == b'\n')
            .filter_map(|l| {
                let (h, m) = std::str::from_utf8(l).ok()?.split_once(' ')?;
                let bytes = crate::durable::unhex(h)?;
                Some((PathBuf::from(OsString::from_vec(bytes)), m.parse().ok()?))
            })
            .collect();
        Modes { file, kept }
    }

    /// Keeps `mode` for `rel` (durably), then gives the broker `add` on it.
    fn open_up(
        &mut self,
        dir: &impl AsFd,
        name: &OsStr,
        rel: &Path,
        mode: u32,
        add: u32,
    ) -> std::io::Result<()> {
        if !self.kept.contains_key(rel) {
            self.kept.insert(rel.to_path_buf(), mode);
            let mut text = String::new();
            for (p, m) in &self.kept {
                text.push_str(&crate::durable::hex(p.as_os_str().as_bytes()));
                text.push_str(&format!(" {m}\n"));
            }
            // not-ws: the layer's own record of modes, in the state directory
            crate::durable::write_atomic(&self.file, text.as_bytes())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        rustix::fs::chmodat(dir, name, Mode::from_raw_mode(mode | add), AtFlags::empty())?;
        Ok(())
    }
}

/// Opens the regular file `rel` of the upper layer for reading (no link followed, the type
/// checked on the descriptor).
pub fn open_upper_file(upper: &wsfs::Tree, rel: &Path) -> std::io::Result<std::fs::File> {
    let (dir, name) = upper.open_parent(rel)?;
    match wsfs::open_regular_at(&dir, &name)? {
        Some((f, _)) => Ok(f),
        None => Err(std::io::Error::other("no longer a regular file")),
    }
}

/// Removes the tree at `p` (a capture directory of the state directory), beneath its
/// descriptor; directories the run left unsearchable (mode 000) are opened up first.
pub fn remove_tree(p: &Path) -> std::io::Result<()> {
    let Some(parent) = p.parent() else {
        return Ok(());
    };
    let Some(name) = p.file_name() else {
        return Ok(());
    };
    let pd = match wsfs::open_dir_nolinks(parent) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    remove_at(&pd, name)
}

fn remove_at(dir: &impl AsFd, name: &OsStr) -> std::io::Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(s) => s,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        // The overlay's work directory is left mode 000; a run may chmod its own too.
        let _ = rustix::fs::chmodat(dir, name, Mode::from_raw_mode(0o700), AtFlags::empty());
        let sub = rustix::fs::openat(
            dir,
            name,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        for n in list_names(&sub)? {
            remove_at(&sub, &n)?;
        }
        rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
    } else {
        rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(br"/a\040b\134c"), b"/a b\\c".to_vec());
        assert_eq!(unescape(br"/x\04"), br"/x\04".to_vec());
    }
}
