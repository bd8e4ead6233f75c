//! The sandbox plan of one call: a policy's paths, denied and protected paths, devices and
//! environment expanded for this caller and workspace (`plan`), the program resolved, the
//! private TMPDIR.

use super::*;
pub(super) struct Vars<'a> {
    workspace: &'a Path,
    home: PathBuf,
    tmpdir: &'a Path,
}

impl Vars<'_> {
    fn expand(&self, t: &str) -> String {
        let mut s = t.to_string();
        if s.contains("${") {
            for (var, value) in [
                ("${WORKSPACE}", self.workspace),
                ("${HOME}", self.home.as_path()),
                ("${TMPDIR}", self.tmpdir),
            ] {
                if s.contains(var) {
                    s = s.replace(var, &value.to_string_lossy());
                }
            }
        }
        if s == "~" {
            s = self.home.display().to_string();
        } else if let Some(rest) = s.strip_prefix("~/") {
            s = format!("{}/{rest}", self.home.display());
        }
        s
    }
}

/// Expands `*`/`?` in any component against the directories' entries (`.git/modules/*/config`);
/// plain paths pass through (existing or not). An absolute path is normalised first (`//`,
/// `/./`, `..` applied lexically): a home spelled `/home/./u` must deny the same paths as
/// `/home/u`, and landlock compares the spellings it is given.
pub(super) fn expand_glob(p: &str) -> Vec<PathBuf> {
    let norm = if p.starts_with('/') {
        policy::normalize(p)
    } else {
        p.to_string()
    };
    if !norm.contains(['*', '?']) {
        return vec![PathBuf::from(norm)];
    }
    let mut acc = vec![PathBuf::new()];
    for comp in Path::new(&norm).components() {
        let std::path::Component::Normal(n) = comp else {
            for d in &mut acc {
                d.push(comp);
            }
            continue;
        };
        let name = n.to_string_lossy();
        if !name.contains(['*', '?']) {
            for d in &mut acc {
                d.push(n);
            }
            continue;
        }
        let mut next = Vec::new();
        for d in &acc {
            // not-ws: a policy's path templates expanded (denied, protected): names only, each then denied or protected
            if let Ok(rd) = std::fs::read_dir(d) {
                for e in rd.flatten() {
                    if policy::wildcard(&name, &e.file_name().to_string_lossy()) {
                        next.push(e.path());
                    }
                }
            }
        }
        acc = next;
    }
    acc.sort();
    acc
}

/// Character devices a program may use: the rest of /dev is denied.
pub(super) const SAFE_CHAR_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// Block devices and non-safe character devices below `dir` (not following symlinks).
pub(super) fn hazardous_devices(dir: &Path, depth: usize) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let mut out = Vec::new();
    // not-ws: /dev, for the device nodes to deny
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_block_device() {
            out.push(p);
        } else if ft.is_char_device() {
            let safe =
                SAFE_CHAR_DEVICES.iter().any(|s| Path::new(s) == p) || p.starts_with("/dev/pts");
            if !safe {
                out.push(p);
            }
        // not-ws: /dev, for the device nodes to deny
        } else if ft.is_dir()
            && depth < 3
            && !p.starts_with("/dev/shm")
            && !p.starts_with("/dev/pts")
        {
            out.extend(hazardous_devices(&p, depth + 1));
        }
    }
    out
}

/// The sandbox a policy gives a run, before the program is known.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct SandboxPlan {
    /// How the run is confined.
    #[serde(flatten)]
    pub confine: sandbox::Confinement,
    /// Environment passed to the child (names only in serialised output).
    #[serde(serialize_with = "env_names")]
    #[schemars(with = "Vec<String>")]
    pub env: Vec<(OsString, OsString)>,
    /// Where git reads config and hooks in the writable trees, as found for this plan (the
    /// run's "before": searched once).
    #[serde(skip)]
    pub(crate) git: GitPlaces,
}

pub(super) fn env_names<S: serde::Serializer>(
    env: &[(OsString, OsString)],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(env.iter().map(|(k, _)| k.to_string_lossy().into_owned()))
}

/// Builds the sandbox plan for a workspace. `tmpdir` is the private TMPDIR (or the global
/// one); `tmpfs`: it is a fresh tmpfs mounted by the sandbox.
pub fn plan(
    cx: &client::Context,
    policy: &Policy,
    ws: &Path,
    state_dir: &Path,
    tmpdir: &Path,
    tmpfs: bool,
    extra_env: &[(String, String)],
) -> Result<SandboxPlan, BrokerError> {
    plan_with(
        cx,
        policy,
        ws,
        state_dir,
        tmpdir,
        tmpfs,
        extra_env,
        GitSearch::Full,
    )
}

/// How a plan finds git's places in the writable trees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GitSearch {
    /// Not at all (a file tool that only reads).
    Skip,
    /// Every writable tree searched.
    Full,
    /// The workspace's from the kept list (`known_places`: a run the overlay captures, whose
    /// writes in git's places are judged from its layer), the other trees searched.
    Known,
}

/// [`plan`], with git's places in the writable trees found as `git` says.
#[allow(
    clippy::too_many_arguments,
    reason = "the plan's inputs: who calls, the policy, the three places, the extra environment and what to search"
)]
pub(crate) fn plan_with(
    cx: &client::Context,
    policy: &Policy,
    ws: &Path,
    state_dir: &Path,
    tmpdir: &Path,
    tmpfs: bool,
    extra_env: &[(String, String)],
    git: GitSearch,
) -> Result<SandboxPlan, BrokerError> {
    let sb = &policy.sandbox;
    let vars = Vars {
        workspace: ws,
        // Canonical: a home reached through a link outside every writable area (`/home ->
        // var/home`) is not a link a run could have re-pointed.
        home: {
            let h = home(cx);
            wsfs::resolve(&h).unwrap_or(h)
        },
        tmpdir,
    };
    let list = |v: &[String]| -> Vec<PathBuf> {
        v.iter().map(|t| PathBuf::from(vars.expand(t))).collect()
    };
    let read = list(&sb.read);
    // The caller's roots narrow where commands write; the private TMPDIR and device nodes
    // (/dev/null) are not the user's files and stay.
    let write = narrow(list(&sb.write), sb.roots.as_deref(), |p| {
        p == tmpdir || p.starts_with("/dev")
    });
    let exec = list(&sb.exec);
    let (deny, hidden) = plan_denied(cx, policy, &vars, state_dir, [&read, &write, &exec])?;
    let (protected, places) = plan_protected(cx, policy, &vars, &write, (git, state_dir))?;
    let env = plan_env(cx, policy, &vars, extra_env)?;

    Ok(SandboxPlan {
        confine: sandbox::Confinement {
            read,
            write,
            exec,
            deny,
            protected,
            hidden,
            network: sb.network.clone(),
            limits: sb.limits.clone(),
            namespaces: sb.namespaces,
            best_effort: sb.best_effort,
            memory_cgroup: sb.cgroup,
            private_tmp: tmpfs.then(|| (tmpdir.to_path_buf(), tmpfs_size(&sb.limits))),
            danger_openat2: false,
            run_as: None,
            capture: None,
        },
        env,
        git: places,
    })
}

/// Directories no workspace may be or lie in: the workspace is writable, and these hold the
/// machine's device nodes, kernel interfaces and programs.
const SYSTEM_DIRS: &[&str] = &[
    "/dev", "/proc", "/sys", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc",
];

/// The paths a run may not see: the policy's denied paths and the ones no policy may expose
/// (credentials, the state directory), with their canonical forms and the hazardous devices;
/// and those of them inside the workspace, which only mounts can hide (`hidden`). Refuses a
/// workspace that is `/`, is or lies in a system directory (`SYSTEM_DIRS`), lies in a denied
/// path or contains one no policy may expose.
pub(super) fn plan_denied(
    cx: &client::Context,
    policy: &Policy,
    vars: &Vars<'_>,
    state_dir: &Path,
    [read, write, exec]: [&Vec<PathBuf>; 3],
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), BrokerError> {
    let sb = &policy.sandbox;
    let ws = vars.workspace;
    // Denied paths: the policy's, and the ones no policy may expose (credentials, the state
    // directory); both with their canonical forms.
    let expand_all = |templates: &mut dyn Iterator<Item = &str>| {
        let mut out: Vec<PathBuf> = Vec::new();
        for t in templates {
            for p in expand_glob(&vars.expand(t)) {
                // One statx for the many paths that do not exist (most of the credential
                // catalogue on any one machine), instead of a readlink per component.
                if wsfs::exists_nofollow(&p)
                    && let Some(c) = wsfs::resolve(&p)
                    && c != p
                {
                    out.push(c);
                }
                out.push(p);
            }
        }
        out
    };
    let catalogue = credentials::denied_templates(cx, &vars.home);
    let mut critical = expand_all(
        &mut ALWAYS_DENY
            .iter()
            .copied()
            .chain(catalogue.iter().map(String::as_str)),
    );
    // The client's config, also where a link on its way leads (a config dir linked into the
    // workspace, the file not made yet): every form of it is out of reach.
    let client_config: Vec<PathBuf> = super::caller_config(cx)
        .map(|c| super::paths::forms(&c))
        .unwrap_or_default();
    let own = [state_dir.to_path_buf(), config_guard()];
    for p in own.into_iter().chain(client_config) {
        // not-ws: the state directory and the config guard, the broker's own
        if let Ok(c) = std::fs::canonicalize(&p)
            && c != p
        {
            critical.push(c);
        }
        critical.push(p);
    }
    let mut deny = expand_all(&mut sb.deny.iter().map(String::as_str));

    // The workspace is writable: it may not be /, lie in a denied path, or contain a path no
    // policy may expose. (The policy's own denied paths inside it are hidden by the mount
    // namespace, see `hidden`.)
    if ws == Path::new("/") {
        return Err(UsageError::from(WorkspaceProblem::Root).into());
    }
    // Nor be or lie in a system directory: from `cd /dev` a command (as root) could replace
    // /dev/null by a regular file, or delete any device node, for the whole machine.
    if let Some(d) = SYSTEM_DIRS
        .iter()
        .map(Path::new)
        .find(|d| ws.starts_with(d))
    {
        return Err(UsageError::from(WorkspaceProblem::SystemDir {
            path: ws.to_path_buf(),
            system: d.to_path_buf(),
        })
        .into());
    }
    let refused = critical
        .iter()
        .find(|d| d.starts_with(ws) || ws.starts_with(d))
        .or_else(|| deny.iter().find(|d| ws.starts_with(d)));
    if let Some(d) = refused {
        return Err(UsageError::from(WorkspaceProblem::Denied {
            path: ws.to_path_buf(),
            denied: d.clone(),
            policy: policy.name.clone(),
        })
        .into());
    }
    // Landlock cannot take a path away inside the writable workspace without taking write
    // access from the workspace itself: those are hidden by mounts only.
    let (hidden, rest): (Vec<PathBuf>, Vec<PathBuf>) = deny
        .drain(..)
        .partition(|d| d.starts_with(ws) && d.as_path() != ws);
    deny = rest;
    deny.extend(critical);

    // Device nodes: when /dev lies in an allowed tree (standard, permissive read `/`), every
    // block device and every character device outside a short safe list is denied too. Raw
    // disks and memory devices would otherwise bypass every path rule (some kernels refuse a
    // capless open of a block device; this does not rely on it).
    let dev = Path::new("/dev");
    if read
        .iter()
        .chain(write)
        .chain(exec)
        .any(|r| dev.starts_with(r))
    {
        deny.extend(hazardous_devices(dev, 0));
    }
    deny.sort();
    deny.dedup();
    // A path inside another denied path is denied already; masking it too would fail (the
    // outer mask hides it first: `~/.mozilla` and the catalogue's `~/.mozilla/firefox`).
    // Sorted by components, a path's descendants follow it directly.
    deny.dedup_by(|inner, outer| inner.starts_with(&*outer));

    Ok((deny, hidden))
}

/// The protected paths of a run (read-only for it), as read, not as spelled, inside the
/// writable trees; and git's places there (`git`: searched).
pub(super) fn plan_protected(
    cx: &client::Context,
    policy: &Policy,
    vars: &Vars<'_>,
    write: &[PathBuf],
    (git, state_dir): (GitSearch, &Path),
) -> Result<(Vec<PathBuf>, GitPlaces), BrokerError> {
    let sb = &policy.sandbox;
    let (ws, tmpdir) = (vars.workspace, vars.tmpdir);
    // Who the command runs as: a directory of theirs it cannot search is one it could open
    // again (`chmod`), so what it hides refuses the run.
    let uid = cx.run_as().map_or_else(sandbox::effective_uid, |u| u.uid);
    // Relative protected paths apply in every writable directory. The private TMPDIR is new
    // and empty: nothing in it to protect. A writable `/` (permissive) stands for the
    // workspace.
    let mut roots: Vec<&Path> = Vec::new();
    for w in write {
        let root = if w.as_path() == Path::new("/") {
            ws
        } else {
            w.as_path()
        };
        if w.as_path() != tmpdir && !roots.contains(&root) && wsfs::is_dir(root) {
            roots.push(root);
        }
    }
    let mut protected: Vec<PathBuf> = Vec::new();
    for t in &sb.protected {
        let e = vars.expand(t);
        if e.starts_with('/') {
            protected.extend(
                expand_glob(&e)
                    .into_iter()
                    .filter(|p| wsfs::resolve(p).is_some()),
            );
        } else {
            for root in &roots {
                for p in expand_glob(&root.join(&e).display().to_string()) {
                    if present(&p, uid)? {
                        protected.push(p);
                    }
                }
            }
        }
    }
    // Git directories at any depth (nested repositories, `gitdir:` files, `commondir`) hold
    // config and hooks as the top one does; what their config and the user's include, the
    // hooks directory they name (`core.hooksPath = .husky`) and the programs they name
    // (`filter.x.clean = ./tools/clean.sh`) are config too. Those that exist are protected
    // here; those a run creates are quarantined after it (`protected_present`).
    let trees: Vec<wsfs::Tree> = roots
        .iter()
        .filter_map(|r| wsfs::Tree::open(r).ok())
        .collect();
    let places = if git == GitSearch::Skip {
        GitPlaces::default()
    } else {
        // The workspace's search is kept for the next run (`known_places`), and taken from
        // what was kept when the overlay captures this one.
        let found = trees
            .iter()
            .map(|t| match git {
                GitSearch::Known if t.path() == ws => {
                    super::known_places::found(state_dir, t, NESTED_MAX_DIRS).0
                }
                _ if t.path() == ws => super::known_places::search(state_dir, t, NESTED_MAX_DIRS),
                _ => t.find_git(NESTED_MAX_DIRS),
            })
            .collect();
        git_places_of(
            &trees,
            found,
            &global_git_configs(&vars.home),
            &vars.home,
            ws,
            cx.fs_identity().as_ref(),
        )
    };
    for d in &places.dirs {
        for t in &sb.protected {
            if let Some(rest) = t.strip_prefix(".git/") {
                for p in expand_glob(&d.join(rest).display().to_string()) {
                    if present(&p, uid)? {
                        protected.push(p);
                    }
                }
            }
        }
    }
    protected.extend(places.refs.iter().cloned());
    // A `.git` that is a file (`gitdir: DIR`, as a submodule's or a worktree's, or
    // `--separate-git-dir`) says where git reads its config: re-pointed, the user's next git
    // command would obey a repository the run planted. It is read-only like the config.
    for e in &places.entries {
        if matches!(wsfs::kind_nolinks(e), Ok(Some(wsfs::Kind::File { .. }))) {
            protected.push(e.clone());
        }
    }
    let targets = link_targets(&protected)?;
    protected.extend(targets);
    // Protected by what is read, not by how it is spelled: `.envrc -> envrc.local` or
    // `.git -> realgit` protect `envrc.local` and `realgit/config`. Each is taken in its
    // canonical form when that lies in a writable tree (elsewhere the run cannot write it
    // anyway), so a mount never binds through a link and the file tools judge the target.
    // The files that decide the next run are never writable by this one: the policy in
    // force and every file it extends (the config is out of reach entirely, `config_guard`).
    protected.extend(policy.loaded_from.iter().cloned());
    let protected: Vec<PathBuf> = {
        let mut v: Vec<PathBuf> = Vec::new();
        for p in protected {
            let real = match wsfs::resolve_checked(&p) {
                Ok(r) => r,
                Err(e) if wsfs::hidden_by_owner(&p, uid) => {
                    return Err(unsearchable(&p, &e));
                }
                Err(_) => None,
            };
            if let Some(c) = real.filter(|c| write.iter().any(|w| c.starts_with(w) && c != w)) {
                v.push(c);
            }
        }
        v.sort();
        v.dedup();
        v
    };

    Ok((protected, places))
}

/// Anything under a protected directory is protected whatever it links to: the links below
/// each protected directory of `protected`, to be protected by their targets.
fn link_targets(protected: &[PathBuf]) -> Result<Vec<PathBuf>, BrokerError> {
    // Anything under a protected directory is protected whatever it links to: a hook
    // installed as `.git/hooks/pre-commit -> ../../scripts/hook.sh` protects the script
    // (bounded; past the bound the run is refused rather than protected in part).
    let mut targets = Vec::new();
    for p in protected {
        if wsfs::is_link(p) || !wsfs::is_dir(p) {
            continue;
        }
        let Some(real) = wsfs::resolve(p) else {
            continue;
        };
        match wsfs::links_below(&real, MAX_PROTECTED_ENTRIES) {
            Ok(links) => targets.extend(links),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(BrokerError::NextRunInReach(format!(
                    "the protected directory {} cannot be searched for the links it holds ({e}); what they point to would stay writable: make it smaller, or remove it from the policy's protected paths",
                    p.display()
                )));
            }
        }
    }
    Ok(targets)
}

/// Is anything at the protected path `p`? A directory above it that cannot be searched (a run
/// may have done `chmod 000` on it to hide what it planted there) refuses the run.
/// One another user's directory hides (`/root` from a normal user) keeps the command out as
/// it keeps the broker out: absent. `uid`: the command's.
fn present(p: &Path, uid: u32) -> Result<bool, BrokerError> {
    match wsfs::presence(p) {
        Ok(b) => Ok(b),
        Err(e) if wsfs::hidden_by_owner(p, uid) => Err(unsearchable(p, &e)),
        Err(_) => Ok(false),
    }
}

fn unsearchable(p: &Path, e: &std::io::Error) -> BrokerError {
    BrokerError::NextRunInReach(format!(
        "the protected path {} cannot be looked at ({e}): a directory above it has no search permission, and a run may have done that to hide what it planted there from the sandbox; restore the directory's mode (chmod u+rwx) and run again",
        p.display()
    ))
}

/// Most entries looked at below one protected directory for the links it holds.
const MAX_PROTECTED_ENTRIES: usize = 10_000;

/// Whether the variable `k` is kept from every run (always, by the credential catalogue, or
/// by the policy's `scrub`).
fn scrubbed(policy: &Policy, k: &str) -> bool {
    policy::ALWAYS_SCRUB.iter().any(|p| policy::env_match(p, k))
        || policy::credentials::env_scrubbed(k)
        || policy
            .sandbox
            .env_scrub
            .iter()
            .any(|p| policy::env_match(p, k))
}

/// What of the caller's environment a run gets: the policy's allowlist, minus what is
/// scrubbed.
fn passed_env(cx: &client::Context, policy: &Policy) -> Vec<(OsString, OsString)> {
    let allowed = |k: &str| {
        policy
            .sandbox
            .env_allow
            .iter()
            .any(|p| policy::env_match(p, k))
    };
    cx.env_vars()
        .into_iter()
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            allowed(&k) && !scrubbed(policy, &k)
        })
        .collect()
}

/// A digest of the environment a run of `cx` would get from the caller and `--env`
/// (`extra_env`), for standing approvals: the same command with other variables is another
/// call. (The policy's own settings are the same for every call under it.)
pub(crate) fn env_digest(
    cx: &client::Context,
    policy: &Policy,
    extra_env: &[(String, String)],
) -> String {
    use sha2::Digest;
    let mut env = passed_env(cx, policy);
    env.extend(extra_env.iter().map(|(k, v)| (k.into(), v.into())));
    env.sort();
    let mut h = sha2::Sha256::new();
    for (k, v) in &env {
        for part in [k.as_encoded_bytes(), v.as_encoded_bytes()] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
    }
    crate::durable::hex(&h.finalize())
}

/// The run's environment: the caller's, allowlisted minus what is always scrubbed, then the
/// policy's settings, then `--env` (a scrubbed name asked for is refused).
pub(super) fn plan_env(
    cx: &client::Context,
    policy: &Policy,
    vars: &Vars<'_>,
    extra_env: &[(String, String)],
) -> Result<Vec<(OsString, OsString)>, BrokerError> {
    let sb = &policy.sandbox;
    let scrubbed = |k: &str| scrubbed(policy, k);
    // Environment: allowlist minus always-scrubbed, then the policy's settings, then --env.
    let mut env = passed_env(cx, policy);
    let mut set = |k: &str, v: String| {
        env.retain(|(ek, _)| ek != k);
        env.push((k.into(), v.into()));
    };
    for (k, v) in &sb.env_set {
        set(k, vars.expand(v));
    }
    for (k, v) in extra_env {
        if scrubbed(k) {
            return Err(BrokerError::Refused(refusal::Refusal::ScrubbedEnv {
                name: k.clone(),
            }));
        }
        set(k, v.clone());
    }
    env.sort();

    Ok(env)
}

/// `list` narrowed to the caller's `roots`: a path inside a root stays, a path containing
/// roots becomes those roots, anything else goes — except what `keep` keeps. No roots: the
/// list as it is.
pub(crate) fn narrow(
    list: Vec<PathBuf>,
    roots: Option<&[PathBuf]>,
    keep: impl Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let Some(roots) = roots else { return list };
    let mut out: Vec<PathBuf> = Vec::new();
    for p in list {
        if keep(&p) || roots.iter().any(|r| p.starts_with(r)) {
            out.push(p);
        } else {
            out.extend(roots.iter().filter(|r| r.starts_with(&p)).cloned());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Resolves the program like execvp: a name with `/` relative to `cwd`, else along PATH.
pub(super) fn resolve_program(
    prog: &str,
    cwd: &Path,
    env: &[(OsString, OsString)],
) -> Result<PathBuf, BrokerError> {
    if prog.is_empty() {
        return Err(UsageError::EmptyCommand.into());
    }
    if prog.contains('/') {
        let p = cwd.join(prog);
        // not-ws: the program to run, named with a /: a stat; it runs confined
        if p.exists() {
            return Ok(p);
        }
        return Err(BrokerError::NotFound {
            program: prog.into(),
            path: "(not searched: the name contains /)".into(),
        });
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let p = Path::new(dir).join(prog);
        let p = if p.is_relative() { cwd.join(p) } else { p };
        // not-ws: the PATH lookup of the program to run: a stat; the program runs confined
        if let Ok(m) = std::fs::metadata(&p)
            && m.is_file()
        {
            return Ok(p);
        }
    }
    Err(BrokerError::NotFound {
        program: prog.into(),
        path,
    })
}

/// The private TMPDIR: with namespaces, a fresh tmpfs mounted in the run's own mount namespace
/// on a fixed, root-only mount point (nothing to create or delete per run); otherwise a new
/// directory, removed afterwards. Returns (tmpfs?, the directory to remove afterwards).
pub(super) fn tmp_plan(policy: &Policy) -> Result<(bool, Option<TempDir>), BrokerError> {
    let use_tmpfs = uses_tmpfs(policy);
    let dir = if policy.sandbox.private_tmp && !use_tmpfs {
        Some(TempDir::new()?)
    } else {
        None
    };
    Ok((use_tmpfs, dir))
}

/// Is the private TMPDIR a tmpfs mounted by the sandbox (private, with namespaces)? A policy
/// that is not best-effort counts on its namespaces (its run fails without them); a
/// best-effort one asks whether this host has them.
pub(super) fn uses_tmpfs(policy: &Policy) -> bool {
    let sb = &policy.sandbox;
    sb.private_tmp && sb.namespaces && (!sb.best_effort || sandbox::namespaces_available())
}

/// The fixed mount point for per-run tmpfs TMPDIRs: `$TMPDIR/.gateway-private` (normally
/// `/tmp/.gateway-private`), created 0700 once; refused if it is a symlink or not ours.
pub(super) fn tmpfs_mountpoint() -> Result<PathBuf, BrokerError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
    let base = std::fs::canonicalize(std::env::temp_dir()).unwrap_or_else(|_| std::env::temp_dir());
    // One per uid: a daemon running as its own user shares /tmp with root's gateway.
    let uid = sandbox::effective_uid();
    let p = base.join(if uid == 0 {
        ".gateway-private".to_string()
    } else {
        format!(".gateway-private-{uid}")
    });
    // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
    match std::fs::DirBuilder::new().mode(0o700).create(&p) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(BrokerError::Io {
                what: format!("creating the TMPDIR mount point {}", p.display()),
                source: e,
            });
        }
    }
    // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
    let m = std::fs::symlink_metadata(&p).map_err(|e| BrokerError::Io {
        what: format!("checking {}", p.display()),
        source: e,
    })?;
    // The mount point must be a real directory owned by us and closed to others.
    // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
    if !m.is_dir() || m.uid() != sandbox::effective_uid() || m.mode() & 0o022 != 0 {
        return Err(BrokerError::Io {
            what: format!(
                "{} is not a directory owned by uid {} and closed to others; remove it",
                p.display(),
                sandbox::effective_uid()
            ),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
    }
    Ok(p)
}

/// Size of the tmpfs TMPDIR: the policy's memory limit (tmpfs pages are memory), else 2 GiB.
pub(super) fn tmpfs_size(l: &sandbox::Limits) -> u64 {
    l.memory.unwrap_or(2 << 30)
}

/// A private TMPDIR, removed on drop.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new() -> Result<TempDir, BrokerError> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        for i in 0..100u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let p = base.join(format!("gateway-{}-{nanos:x}-{i}", std::process::id()));
            // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
            match std::fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => {
                    // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
                    let c = std::fs::canonicalize(&p).unwrap_or(p);
                    return Ok(TempDir(c));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(BrokerError::Io {
                        what: format!("creating a private TMPDIR in {}", base.display()),
                        source: e,
                    });
                }
            }
        }
        Err(BrokerError::Io {
            what: "creating a private TMPDIR".into(),
            source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // not-ws: the private TMPDIR the broker makes for a run, under the system's temporary directory
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
