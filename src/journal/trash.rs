//! The trash (freedesktop layout) in the state directory: `<state>/trash/files/<name>` holds
//! an item removed by a file tool (or an undo), `<state>/trash/info/<name>.trashinfo` where it
//! came from (its path's bytes, percent-encoded) and when.

use super::{JournalError, io, private_dir};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The trash (freedesktop layout): `<state>/trash/files/<name>` holds the item,
/// `<state>/trash/info/<name>.trashinfo` where it came from and when.
pub fn trash_dirs(state_dir: &Path) -> (PathBuf, PathBuf) {
    let t = state_dir.join("trash");
    (t.join("files"), t.join("info"))
}

/// Reserves a trash name for `original` and writes its `.trashinfo` (synced). The caller
/// then moves the item to `files/<name>`.
pub fn trash_reserve(state_dir: &Path, original: &Path) -> Result<String, JournalError> {
    use std::os::unix::fs::OpenOptionsExt;
    let (files, info) = trash_dirs(state_dir);
    private_dir(&files)?;
    private_dir(&info)?;
    let base = original
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "item".into());
    let when = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let when = when.trim_end_matches('Z');
    use std::os::unix::ffi::OsStrExt;
    // The path's bytes (a name need not be UTF-8), percent-encoded.
    let encoded: String = original
        .as_os_str()
        .as_bytes()
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    for n in 0..10_000u32 {
        let name = if n == 0 {
            base.clone()
        } else {
            format!("{base}.{n}")
        };
        let p = info.join(format!("{name}.trashinfo"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&p)
        {
            Ok(mut f) => {
                if files.join(&name).exists() {
                    drop(f);
                    let _ = std::fs::remove_file(&p);
                    continue;
                }
                f.write_all(
                    format!("[Trash Info]\nPath={encoded}\nDeletionDate={when}\n").as_bytes(),
                )
                .map_err(io("writing", &p))?;
                f.sync_all().map_err(io("syncing", &p))?;
                return Ok(name);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io("creating", &p)(e)),
        }
    }
    Err(JournalError::Io {
        what: "finding a free name in the trash for",
        path: original.to_path_buf(),
        source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
    })
}

/// One trash item.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TrashItem {
    /// Its name in the trash (the id for `restore`).
    pub name: String,
    /// Where it was.
    #[serde(with = "super::pathbytes")]
    #[schemars(with = "super::pathbytes::PathBytes")]
    pub original: PathBuf,
    /// When it was removed (local time, as freedesktop writes it).
    pub deleted: String,
    /// Whether the item is still there.
    pub present: bool,
    /// When `gateway trash empty` removed it for good (its info stays behind as a
    /// tombstone: undo of its removal says so, and the name is never given again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emptied: Option<String>,
}

/// The trash's items, oldest first.
pub fn trash_list(state_dir: &Path) -> Result<Vec<TrashItem>, JournalError> {
    let (files, info) = trash_dirs(state_dir);
    let rd = match std::fs::read_dir(&info) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("listing", &info)(e)),
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let Some(name) = n.strip_suffix(".trashinfo") else {
            continue;
        };
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k))
                .unwrap_or("")
                .to_string()
        };
        out.push(TrashItem {
            name: name.to_string(),
            original: percent_decode(&get("Path=")),
            deleted: get("DeletionDate="),
            present: std::fs::symlink_metadata(files.join(name)).is_ok(),
            emptied: Some(get("EmptiedDate=")).filter(|w| !w.is_empty()),
        });
    }
    out.sort_by(|a, b| a.deleted.cmp(&b.deleted).then(a.name.cmp(&b.name)));
    Ok(out)
}

fn percent_decode(s: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Notes in a trash item's info that `gateway trash empty` removed it for good, and when
/// (the info stays: a tombstone). Returns the time noted.
pub fn trash_mark_emptied(state_dir: &Path, name: &str) -> Result<String, JournalError> {
    use std::os::unix::fs::OpenOptionsExt;
    let (_, info) = trash_dirs(state_dir);
    let p = info.join(format!("{name}.trashinfo"));
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io("marking as emptied", &p)(std::io::Error::from(
            std::io::ErrorKind::InvalidInput,
        )));
    }
    let when = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&p)
        .map_err(io("opening", &p))?;
    f.write_all(format!("EmptiedDate={when}\n").as_bytes())
        .map_err(io("writing", &p))?;
    f.sync_all().map_err(io("syncing", &p))?;
    Ok(when)
}

/// When trash item `name` was emptied for good by `gateway trash empty`, if it was.
pub fn trash_emptied(state_dir: &Path, name: &str) -> Option<String> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    let (_, info) = trash_dirs(state_dir);
    let text = std::fs::read_to_string(info.join(format!("{name}.trashinfo"))).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("EmptiedDate="))
        .map(str::to_string)
}

/// Forgets a trash item's info (after it was restored).
pub fn trash_forget(state_dir: &Path, name: &str) {
    // Only a name trash_reserve can give: one plain component.
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return;
    }
    let (_, info) = trash_dirs(state_dir);
    let _ = std::fs::remove_file(info.join(format!("{name}.trashinfo")));
}
