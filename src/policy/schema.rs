//! The TOML schema: raw serde types ("parse"), `extends` merging, and validation into the
//! typed [`Policy`] ("don't validate twice"). Every error carries `file:line:column`.
//!
//! Over 1,000 lines: every key of the policy file is validated here, each with its
//! `file:line:column` error; `compile` per section (sandbox, rules, secrets, undo) is the
//! seam along which it would split.

use super::{CommandPattern, Policy, PolicyError, Rule};
pub use crate::model::{
    AuditProfile, Limits, Network, SecretsInput, SecretsOutput, SecretsProfile, UndoProfile,
};
use crate::model::{Effect, Tool};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;
use toml::Spanned;

/// The `[sandbox]` table, with `${VAR}` templates still unexpanded.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SandboxProfile {
    /// Readable paths.
    pub read: Vec<String>,
    /// Writable paths (also readable and executable).
    pub write: Vec<String>,
    /// Executable paths (also readable).
    pub exec: Vec<String>,
    /// Paths never readable, even under `read`/`write`/`exec` (`*` and `?` in any component).
    pub deny: Vec<String>,
    /// Paths kept read-only inside writable ones; relative ones apply to each writable root.
    pub protected: Vec<String>,
    /// Network access.
    pub network: Network,
    /// Run even if some confinement layer cannot be applied (and say so).
    pub best_effort: bool,
    /// Use pid/mount/ipc(/net) namespaces where the broker is privileged.
    pub namespaces: bool,
    /// A private per-invocation TMPDIR (instead of access to the global /tmp).
    pub private_tmp: bool,
    /// Bound the total memory of runs with a memory cgroup (costs a migration on cgroup v1).
    pub cgroup: bool,
    /// Resource limits.
    pub limits: Limits,
    /// Environment variables passed through (globs).
    pub env_allow: Vec<String>,
    /// Environment variables set (values may use `${VAR}`).
    pub env_set: BTreeMap<String, String>,
    /// Extra patterns always removed, on top of the built-in list.
    pub env_scrub: Vec<String>,
    /// Directories the caller narrowed this policy to (an MCP client's roots, `gateway tool
    /// --root`); never set by a policy file. See [`Policy::narrow_to`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roots: Option<Vec<std::path::PathBuf>>,
}

/// Always scrubbed, whatever the policy allows: credentials and loader/shell injection.
pub const ALWAYS_SCRUB: &[&str] = &[
    "*_TOKEN",
    "*_TOKEN_*",
    "*TOKEN",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_KEY",
    "*_API_KEY*",
    "*APIKEY*",
    "*CREDENTIAL*",
    "*_AUTH",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GH_*",
    "GITHUB_TOKEN",
    "NPM_TOKEN",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DOCKER_*",
    "KUBECONFIG",
    "LD_*",
    "DYLD_*",
    "BASH_ENV",
    "ENV",
    "BASH_FUNC_*",
    "PROMPT_COMMAND",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "CDPATH",
    "PYTHONSTARTUP",
    "PERL5OPT",
    "NODE_OPTIONS",
    "GATEWAY_*",
];

// ---------- raw serde types ----------

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: Option<String>,
    description: Option<String>,
    extends: Option<Spanned<String>>,
    unanalysable: Option<Spanned<String>>,
    #[serde(default)]
    sandbox: RawSandbox,
    #[serde(default)]
    secrets: RawSecrets,
    #[serde(default)]
    audit: RawAudit,
    #[serde(default)]
    undo: RawUndo,
    #[serde(default)]
    files: RawFiles,
    #[serde(default)]
    approval: RawApproval,
    #[serde(default)]
    output: RawOutput,
    #[serde(default, rename = "rule")]
    rules: Vec<Spanned<RawRule>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawUndo {
    snapshot: Option<bool>,
    snapshot_max_file: Option<Spanned<toml::Value>>,
    keep_versions: Option<Spanned<toml::Value>>,
    backups_max_total: Option<Spanned<toml::Value>>,
    max_state_bytes: Option<Spanned<toml::Value>>,
    max_workspace_bytes: Option<Spanned<toml::Value>>,
    capture: Option<Spanned<String>>,
    review: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawApproval {
    timeout: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawOutput {
    mcp_budget: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFiles {
    max_size: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAudit {
    store_output: Option<bool>,
    artifact_max: Option<Spanned<toml::Value>>,
    inline_output: Option<Spanned<toml::Value>>,
    artifacts_max_age: Option<Spanned<toml::Value>>,
    artifacts_max_total: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSecrets {
    output: Option<Spanned<String>>,
    input: Option<Spanned<String>>,
    redact_min_confidence: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    #[serde(default)]
    read: Vec<Spanned<String>>,
    #[serde(default)]
    write: Vec<Spanned<String>>,
    #[serde(default)]
    exec: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    #[serde(default)]
    protected: Vec<Spanned<String>>,
    network: Option<Spanned<toml::Value>>,
    best_effort: Option<bool>,
    namespaces: Option<bool>,
    private_tmp: Option<bool>,
    cgroup: Option<bool>,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    env: RawEnv,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    timeout: Option<Spanned<toml::Value>>,
    cpu: Option<Spanned<toml::Value>>,
    memory: Option<Spanned<toml::Value>>,
    pids: Option<Spanned<toml::Value>>,
    open_files: Option<Spanned<toml::Value>>,
    file_size: Option<Spanned<toml::Value>>,
    output: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawEnv {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    set: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    scrub: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: Spanned<String>,
    effect: Spanned<String>,
    reason: Spanned<String>,
    tools: Option<Vec<Spanned<String>>>,
    command: Option<Spanned<toml::Value>>,
    /// Git patterns: `["reset --hard", "push --force"]` (policy/git.rs).
    git: Option<Spanned<Vec<Spanned<String>>>>,
    path: Option<Vec<Spanned<String>>>,
    /// Calls the rule must match (checked at load).
    #[serde(default, rename = "match")]
    matching: Vec<Spanned<toml::Value>>,
    /// Calls the rule must not match, not even possibly (checked at load).
    #[serde(default)]
    not_match: Vec<Spanned<toml::Value>>,
}

/// A raw policy with the file each part came from (for error positions after merging).
struct Sourced<T> {
    value: T,
    file: String,
    text: String,
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, message: impl Into<String>) -> PolicyError {
        let (line, column) = line_col(self.text, span.start);
        PolicyError::Invalid {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(offset, |i| offset - i - 1) + 1;
    (line, col)
}

// ---------- loading and merging ----------

pub(super) fn load(
    text: &str,
    file: &str,
    default_name: &str,
    dir: Option<&Path>,
    depth: usize,
) -> Result<Policy, PolicyError> {
    let chain = load_chain(text, file, dir, depth)?;
    // The files this policy was read from (itself and what it extends): never writable by a
    // run or a tool (`broker::plan`).
    let loaded_from = chain
        .iter()
        .filter(|s| !s.file.starts_with("builtin:"))
        .map(|s| {
            std::fs::canonicalize(&s.file).unwrap_or_else(|_| std::path::PathBuf::from(&s.file))
        })
        .collect();
    let loaded_as = chain
        .iter()
        .filter(|s| !s.file.starts_with("builtin:"))
        .map(|s| std::path::PathBuf::from(&s.file))
        .collect();
    let sha256 = chain_sha256(&chain);
    let mut p = compile(chain, default_name, file)?;
    p.loaded_from = loaded_from;
    p.loaded_as = loaded_as;
    p.sha256 = sha256;
    Ok(p)
}

/// The content hash of the files a policy text loads (itself and its `extends` chain), read
/// and followed as [`load`] does but not compiled: what a pinned session compares with the
/// hash of the policy it holds (`broker::pin`).
pub(super) fn sha256_of(text: &str, file: &str, dir: Option<&Path>) -> Result<String, PolicyError> {
    Ok(chain_sha256(&load_chain(text, file, dir, 0)?))
}

/// SHA-256, hex, over the chain in load order (root first): a version tag, then for each
/// file its name (canonical path, or `builtin:NAME`) and its bytes, each preceded by its
/// length as 8 bytes big-endian — no two chains encode alike.
fn chain_sha256<T>(chain: &[Sourced<T>]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"gateway-policy-sha256-v1\0");
    for s in chain {
        let name = if s.file.starts_with("builtin:") {
            s.file.clone()
        } else {
            std::fs::canonicalize(&s.file)
                .map_or_else(|_| s.file.clone(), |p| p.display().to_string())
        };
        for part in [name.as_bytes(), s.text.as_bytes()] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
    }
    crate::durable::hex(&h.finalize())
}

/// Returns the `extends` chain, root first.
fn load_chain(
    text: &str,
    file: &str,
    dir: Option<&Path>,
    depth: usize,
) -> Result<Vec<Sourced<RawPolicy>>, PolicyError> {
    if depth > 8 {
        return Err(PolicyError::ExtendsTooDeep(file.to_string()));
    }
    let raw: RawPolicy = parse_toml(file, text)?;
    let mut chain = Vec::new();
    if let Some(parent) = &raw.extends {
        let spec = parent.get_ref();
        let ctx = Ctx { file, text };
        if spec.contains('/') || spec.ends_with(".toml") {
            let p = match dir {
                Some(d) if !Path::new(spec).is_absolute() => d.join(spec),
                _ => Path::new(spec).to_path_buf(),
            };
            let ptext = super::read_policy_file(&p).map_err(|e| {
                ctx.err(
                    parent.span(),
                    format!("cannot read `extends` file {}: {e}", p.display()),
                )
            })?;
            chain = load_chain(&ptext, &p.display().to_string(), p.parent(), depth + 1)?;
        } else {
            let Some((_, ptext)) = super::BUILTINS.iter().find(|(n, _)| n == spec) else {
                return Err(ctx.err(
                    parent.span(),
                    format!("`extends = \"{spec}\"`: no such built-in policy (strict, standard, permissive) and not a path"),
                ));
            };
            chain = load_chain(ptext, &format!("builtin:{spec}"), None, depth + 1)?;
        }
    }
    chain.push(Sourced {
        value: raw,
        file: file.to_string(),
        text: text.to_string(),
    });
    Ok(chain)
}

const VARS: [&str; 3] = ["WORKSPACE", "HOME", "TMPDIR"];

fn check_path(ctx: &Ctx, s: &Spanned<String>, relative_ok: bool) -> Result<String, PolicyError> {
    let p = s.get_ref();
    let mut rest = p.as_str();
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            return Err(ctx.err(s.span(), format!("`{p}`: unterminated `${{`")));
        };
        let var = &after[..end];
        if !VARS.contains(&var) {
            return Err(ctx.err(
                s.span(),
                format!("`{p}`: unknown variable `${{{var}}}`; use ${{WORKSPACE}}, ${{HOME}} or ${{TMPDIR}}"),
            ));
        }
        rest = &after[end + 1..];
    }
    let absolute = p.starts_with('/') || p.starts_with("${") || p == "~" || p.starts_with("~/");
    if !absolute && !relative_ok {
        return Err(ctx.err(
            s.span(),
            format!("`{p}`: sandbox paths must be absolute or start with ${{WORKSPACE}}, ${{HOME}}, ${{TMPDIR}} or ~"),
        ));
    }
    if p.is_empty() {
        return Err(ctx.err(s.span(), "empty path"));
    }
    // `*` and `?` are allowed in any component (expanded against the directories when the
    // sandbox is planned: `.git/modules/*/config`).
    let bare = if p.contains("${") {
        ["${WORKSPACE}", "${HOME}", "${TMPDIR}"]
            .iter()
            .fold(p.clone(), |acc, v| acc.replace(v, ""))
    } else {
        p.clone()
    };
    if bare.contains(['[', ']', '{', '}']) {
        return Err(ctx.err(
            s.span(),
            format!("`{p}`: sandbox paths support only `*` and `?` as wildcards"),
        ));
    }
    Ok(p.clone())
}

/// A positive integer, or a string of digits with one of `units` (name, multiplier).
fn parse_units(
    ctx: &Ctx,
    v: &Spanned<toml::Value>,
    units: &[(&str, u64)],
    expected: &str,
) -> Result<u64, PolicyError> {
    let bad = || ctx.err(v.span(), expected.to_string());
    match v.get_ref() {
        toml::Value::Integer(i) if *i > 0 => Ok(*i as u64),
        toml::Value::String(s) => {
            let s = s.trim();
            let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            let (num, unit) = s.split_at(split);
            let n: u64 = num.parse().map_err(|_| bad())?;
            let mult = units
                .iter()
                .find(|(u, _)| *u == unit.trim())
                .map(|(_, m)| *m)
                .ok_or_else(bad)?;
            match n.checked_mul(mult) {
                Some(v) if v > 0 => Ok(v),
                _ => Err(bad()),
            }
        }
        _ => Err(bad()),
    }
}

const SIZE_UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("B", 1),
    ("k", 1 << 10),
    ("K", 1 << 10),
    ("KB", 1 << 10),
    ("KiB", 1 << 10),
    ("M", 1 << 20),
    ("MB", 1 << 20),
    ("MiB", 1 << 20),
    ("G", 1 << 30),
    ("GB", 1 << 30),
    ("GiB", 1 << 30),
    ("T", 1 << 40),
    ("TB", 1 << 40),
    ("TiB", 1 << 40),
];

const DURATION_UNITS: &[(&str, u64)] = &[("", 1), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)];

fn parse_size(ctx: &Ctx, v: &Spanned<toml::Value>, what: &str) -> Result<u64, PolicyError> {
    parse_units(
        ctx,
        v,
        SIZE_UNITS,
        &format!(
            "`{what}`: expected a positive size (an integer in bytes or a string like \"512MiB\", \"2GiB\")"
        ),
    )
}

fn parse_duration(ctx: &Ctx, v: &Spanned<toml::Value>, what: &str) -> Result<u64, PolicyError> {
    parse_units(
        ctx,
        v,
        DURATION_UNITS,
        &format!(
            "`{what}`: expected a positive duration (seconds as an integer, or \"30s\", \"10m\", \"1h\")"
        ),
    )
}

/// Deserialises one of gateway's TOML files (a policy, the config file); an error is
/// `file:line:column: message`.
pub fn parse_toml<T: serde::de::DeserializeOwned>(
    file: &str,
    text: &str,
) -> Result<T, PolicyError> {
    toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((1, 1), |s| line_col(text, s.start));
        PolicyError::Invalid {
            file: file.to_string(),
            line,
            column,
            message: e.message().trim().to_string(),
        }
    })
}

/// The kind of a numeric setting, for [`parse_setting`].
#[derive(Clone, Copy, Debug)]
pub enum SettingKind {
    /// Bytes: an integer or "512MiB", "2GiB".
    Size,
    /// Seconds: an integer or "30s", "10m", "1h", "7d".
    Duration,
    /// A positive integer.
    Count,
}

/// A size, duration or count written as in policies, from another TOML file of gateway's
/// (the config file): errors are `file:line:column` in `text`, like a policy's.
pub fn parse_setting(
    file: &str,
    text: &str,
    v: &Spanned<toml::Value>,
    kind: SettingKind,
    what: &str,
) -> Result<u64, PolicyError> {
    let ctx = Ctx { file, text };
    match kind {
        SettingKind::Size => parse_size(&ctx, v, what),
        SettingKind::Duration => parse_duration(&ctx, v, what),
        SettingKind::Count => parse_count(&ctx, v, what),
    }
}

fn parse_count(ctx: &Ctx, v: &Spanned<toml::Value>, what: &str) -> Result<u64, PolicyError> {
    match v.get_ref() {
        toml::Value::Integer(i) if *i > 0 => Ok(*i as u64),
        _ => Err(ctx.err(v.span(), format!("`{what}`: expected a positive integer"))),
    }
}

/// One of `choices` by name, or an error at the value listing them.
fn parse_choice<T: Copy>(
    ctx: &Ctx,
    v: &Spanned<String>,
    what: &str,
    choices: &[(&str, T)],
) -> Result<T, PolicyError> {
    match choices.iter().find(|(n, _)| *n == v.get_ref().as_str()) {
        Some((_, t)) => Ok(*t),
        None => {
            let names: Vec<String> = choices.iter().map(|(n, _)| format!("\"{n}\"")).collect();
            Err(ctx.err(
                v.span(),
                format!(
                    "`{what} = \"{}\"`: expected {}",
                    v.get_ref(),
                    names.join(", ")
                ),
            ))
        }
    }
}

fn parse_effect(ctx: &Ctx, v: &Spanned<String>, what: &str) -> Result<Effect, PolicyError> {
    match v.get_ref().as_str() {
        "allow" => Ok(Effect::Allow),
        "ask" => Ok(Effect::Ask),
        "deny" => Ok(Effect::Deny),
        other => Err(ctx.err(
            v.span(),
            format!("`{what} = \"{other}\"`: expected \"allow\", \"ask\" or \"deny\""),
        )),
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "a policy file validated key by key, each error with its file:line:column"
)]
fn compile(
    chain: Vec<Sourced<RawPolicy>>,
    default_name: &str,
    file: &str,
) -> Result<Policy, PolicyError> {
    let mut name = default_name.to_string();
    let mut description = String::new();
    let mut unanalysable = Effect::Deny;
    let mut rules: Vec<Rule> = Vec::new();
    let mut secrets = SecretsProfile::default();
    let mut audit = AuditProfile::default();
    let mut undo = UndoProfile::default();
    let mut files = crate::model::FilesProfile::default();
    let mut approval = crate::model::ApprovalProfile::default();
    let mut output = crate::model::OutputProfile::default();
    let mut sb = SandboxProfile {
        read: vec![],
        write: vec![],
        exec: vec![],
        deny: vec![],
        protected: vec![],
        network: Network::None,
        best_effort: false,
        namespaces: true,
        private_tmp: true,
        cgroup: true,
        limits: Limits::default(),
        env_allow: vec![],
        env_set: BTreeMap::new(),
        env_scrub: vec![],
        roots: None,
    };
    let last = chain.len().saturating_sub(1);
    for (idx, src) in chain.iter().enumerate() {
        let ctx = Ctx {
            file: &src.file,
            text: &src.text,
        };
        let raw = &src.value;
        if idx == last
            && let Some(n) = &raw.name
        {
            name = n.clone();
        }
        if let Some(d) = &raw.description {
            description = d.clone();
        }
        if let Some(u) = &raw.unanalysable {
            unanalysable = parse_effect(&ctx, u, "unanalysable")?;
        }
        if let Some(v) = &raw.secrets.output {
            secrets.output = parse_choice(
                &ctx,
                v,
                "secrets.output",
                &[
                    ("redact", SecretsOutput::Redact),
                    ("block", SecretsOutput::Block),
                    ("warn", SecretsOutput::Warn),
                ],
            )?;
        }
        if let Some(v) = &raw.secrets.redact_min_confidence {
            use crate::secrets::Confidence;
            secrets.redact_min_confidence = parse_choice(
                &ctx,
                v,
                "secrets.redact_min_confidence",
                &[
                    ("low", Confidence::Low),
                    ("medium", Confidence::Medium),
                    ("high", Confidence::High),
                ],
            )?;
        }
        if let Some(v) = raw.undo.snapshot {
            undo.snapshot = v;
        }
        if let Some(v) = &raw.undo.capture {
            use crate::model::CaptureMode;
            undo.capture = parse_choice(
                &ctx,
                v,
                "undo.capture",
                &[
                    ("overlay", CaptureMode::Overlay),
                    ("walk", CaptureMode::Walk),
                ],
            )?;
        }
        if let Some(v) = raw.undo.review {
            undo.review = v;
        }
        if let Some(v) = &raw.undo.snapshot_max_file {
            undo.snapshot_max_file = parse_size(&ctx, v, "undo.snapshot_max_file")?;
        }
        if let Some(v) = &raw.undo.keep_versions {
            undo.keep_versions = parse_count(&ctx, v, "undo.keep_versions")?;
        }
        if let Some(v) = &raw.undo.backups_max_total {
            undo.backups_max_total = Some(parse_size(&ctx, v, "undo.backups_max_total")?);
        }
        if let Some(v) = &raw.undo.max_state_bytes {
            let n = parse_size(&ctx, v, "undo.max_state_bytes")?;
            // Below 1 MiB every backup would be refused: a typo, not a choice.
            if n < 1 << 20 {
                return Err(ctx.err(
                    v.span(),
                    "`undo.max_state_bytes`: at least 1MiB (the backup store's quota; snapshots are off with `snapshot = false`)",
                ));
            }
            undo.max_state_bytes = n;
        }
        if let Some(v) = &raw.undo.max_workspace_bytes {
            let n = parse_size(&ctx, v, "undo.max_workspace_bytes")?;
            if n < 1 << 20 {
                return Err(ctx.err(
                    v.span(),
                    "`undo.max_workspace_bytes`: at least 1MiB (one workspace's share of the backup store; snapshots are off with `snapshot = false`)",
                ));
            }
            undo.max_workspace_bytes = Some(n);
        }
        if let Some(v) = &raw.files.max_size {
            files.max_size = parse_size(&ctx, v, "files.max_size")?;
        }
        if let Some(v) = &raw.output.mcp_budget {
            use crate::model::OutputProfile as O;
            let n = parse_count(&ctx, v, "output.mcp_budget")?;
            if !(O::MCP_BUDGET_MIN..=O::MCP_BUDGET_MAX).contains(&n) {
                return Err(ctx.err(
                    v.span(),
                    format!(
                        "`output.mcp_budget`: {n} characters is outside {}..={} (each MCP result's text, head and tail kept)",
                        O::MCP_BUDGET_MIN,
                        O::MCP_BUDGET_MAX
                    ),
                ));
            }
            output.mcp_budget = n;
        }
        if let Some(v) = &raw.approval.timeout {
            approval.timeout = parse_duration(&ctx, v, "approval.timeout")?;
        }
        let a = &raw.audit;
        if let Some(v) = a.store_output {
            audit.store_output = v;
        }
        if let Some(v) = &a.artifact_max {
            audit.artifact_max = parse_size(&ctx, v, "audit.artifact_max")?;
        }
        if let Some(v) = &a.inline_output {
            audit.inline_output = parse_size(&ctx, v, "audit.inline_output")?;
        }
        if let Some(v) = &a.artifacts_max_age {
            audit.artifacts_max_age = Some(parse_duration(&ctx, v, "audit.artifacts_max_age")?);
        }
        if let Some(v) = &a.artifacts_max_total {
            audit.artifacts_max_total = Some(parse_size(&ctx, v, "audit.artifacts_max_total")?);
        }
        if let Some(v) = &raw.secrets.input {
            secrets.input = parse_choice(
                &ctx,
                v,
                "secrets.input",
                &[
                    ("deny", SecretsInput::Deny),
                    ("redact", SecretsInput::Redact),
                    ("warn", SecretsInput::Warn),
                ],
            )?;
        }
        let s = &raw.sandbox;
        for (list, out, rel) in [
            (&s.read, &mut sb.read, false),
            (&s.write, &mut sb.write, false),
            (&s.exec, &mut sb.exec, false),
            (&s.deny, &mut sb.deny, false),
            (&s.protected, &mut sb.protected, true),
        ] {
            for p in list {
                out.push(check_path(&ctx, p, rel)?);
            }
        }
        if let Some(n) = &s.network {
            sb.network = parse_network(&ctx, n)?;
        }
        if let Some(b) = s.best_effort {
            sb.best_effort = b;
        }
        if let Some(b) = s.namespaces {
            sb.namespaces = b;
        }
        if let Some(b) = s.private_tmp {
            sb.private_tmp = b;
        }
        if let Some(b) = s.cgroup {
            sb.cgroup = b;
        }
        let l = &s.limits;
        if let Some(v) = &l.timeout {
            let t = Duration::from_secs(parse_duration(&ctx, v, "limits.timeout")?);
            if t > crate::model::MAX_TIMEOUT {
                return Err(ctx.err(
                    v.span(),
                    format!(
                        "`limits.timeout`: {} is longer than the longest a run may have ({}); set at most that, or no timeout",
                        humantime::format_duration(t),
                        humantime::format_duration(crate::model::MAX_TIMEOUT)
                    ),
                ));
            }
            sb.limits.timeout = Some(t);
        }
        if let Some(v) = &l.cpu {
            sb.limits.cpu = Some(parse_duration(&ctx, v, "limits.cpu")?);
        }
        if let Some(v) = &l.memory {
            sb.limits.memory = Some(parse_size(&ctx, v, "limits.memory")?);
        }
        if let Some(v) = &l.pids {
            sb.limits.pids = Some(parse_count(&ctx, v, "limits.pids")?);
        }
        if let Some(v) = &l.open_files {
            sb.limits.open_files = Some(parse_count(&ctx, v, "limits.open_files")?);
        }
        if let Some(v) = &l.file_size {
            sb.limits.file_size = Some(parse_size(&ctx, v, "limits.file_size")?);
        }
        if let Some(v) = &l.output {
            sb.limits.output = Some(parse_size(&ctx, v, "limits.output")?);
        }
        for a in s.env.allow.iter().chain(&s.env.scrub) {
            let v = a.get_ref();
            if v.is_empty()
                || !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*')
            {
                return Err(ctx.err(
                    a.span(),
                    format!("env pattern `{v}`: use letters, digits, `_` and `*` (any run of characters)"),
                ));
            }
        }
        sb.env_allow
            .extend(s.env.allow.iter().map(|a| a.get_ref().clone()));
        sb.env_scrub
            .extend(s.env.scrub.iter().map(|a| a.get_ref().clone()));
        for (k, v) in &s.env.set {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(ctx.err(v.span(), format!("`env.set`: `{k}` is not a variable name")));
            }
            sb.env_set.insert(k.clone(), v.get_ref().clone());
        }
        for r in &raw.rules {
            rules.push(compile_rule(&ctx, r)?);
        }
    }
    // Rule ids are unique across the whole chain.
    for (i, r) in rules.iter().enumerate() {
        if rules[..i].iter().any(|o| o.id == r.id) {
            return Err(PolicyError::Invalid {
                file: file.to_string(),
                line: 1,
                column: 1,
                message: format!(
                    "rule id `{}` is defined twice (ids must be unique, also across `extends`)",
                    r.id
                ),
            });
        }
    }
    Ok(Policy {
        name,
        source: file.to_string(),
        description,
        unanalysable,
        rules,
        sandbox: sb,
        secrets,
        audit,
        undo,
        files,
        approval,
        output,
        loaded_from: Vec::new(),
        loaded_as: Vec::new(),
        sha256: String::new(),
    })
}

#[allow(
    clippy::too_many_lines,
    reason = "one rule's keys validated in order, each with its error"
)]
fn compile_rule(ctx: &Ctx, r: &Spanned<RawRule>) -> Result<Rule, PolicyError> {
    let rr = r.get_ref();
    let id = rr.id.get_ref().trim().to_string();
    if id.is_empty() || id == "default-deny" || id == "unanalysable" {
        return Err(ctx.err(
            rr.id.span(),
            "rule `id` must be non-empty and not a reserved id (default-deny, unanalysable)",
        ));
    }
    let effect = parse_effect(ctx, &rr.effect, "effect")?;
    let reason = rr.reason.get_ref().trim().to_string();
    if reason.is_empty() {
        return Err(ctx.err(
            rr.reason.span(),
            format!("rule `{id}`: `reason` must say why (it is shown to users)"),
        ));
    }
    let mut tools = Vec::new();
    for t in rr.tools.iter().flatten() {
        match Tool::from_name(t.get_ref()) {
            Some(tool) => tools.push(tool),
            None => {
                return Err(ctx.err(
                    t.span(),
                    format!(
                        "rule `{id}`: unknown tool `{}`; tools are {}",
                        t.get_ref(),
                        Tool::ALL.map(Tool::name).join(", ")
                    ),
                ));
            }
        }
    }
    let commands = match &rr.command {
        None => None,
        Some(c) => {
            let bad = |m: &str| ctx.err(c.span(), format!("rule `{id}`: `command` {m}"));
            let arr = c
                .get_ref()
                .as_array()
                .ok_or_else(|| bad("must be an array of strings, or an array of such arrays"))?;
            if arr.is_empty() {
                return Err(bad("is empty"));
            }
            let pats: Vec<Vec<String>> = if arr.iter().all(|v| v.is_str()) {
                vec![
                    arr.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect(),
                ]
            } else if arr.iter().all(|v| v.is_array()) {
                let mut out = Vec::new();
                for v in arr {
                    let inner = v.as_array().map(|a| a.as_slice()).unwrap_or(&[]);
                    if !inner.iter().all(|x| x.is_str()) {
                        return Err(bad("patterns must contain only strings"));
                    }
                    out.push(
                        inner
                            .iter()
                            .filter_map(|x| x.as_str().map(String::from))
                            .collect(),
                    );
                }
                out
            } else {
                return Err(bad(
                    "must be an array of strings, or an array of such arrays",
                ));
            };
            let mut compiled = Vec::new();
            for p in &pats {
                compiled.push(CommandPattern::compile(p).map_err(|e| bad(&e))?);
            }
            if !tools.is_empty() && !tools.contains(&Tool::Exec) {
                return Err(bad(
                    "applies only to the exec tool; add \"exec\" to `tools`",
                ));
            }
            Some(compiled)
        }
    };
    let git =
        match &rr.git {
            None => None,
            Some(list) => {
                if list.get_ref().is_empty() {
                    return Err(ctx.err(list.span(), format!("rule `{id}`: `git` is empty")));
                }
                if !tools.is_empty() && !tools.contains(&Tool::Exec) {
                    return Err(ctx.err(
                    list.span(),
                    format!(
                        "rule `{id}`: `git` applies only to the exec tool; add \"exec\" to `tools`"
                    ),
                ));
                }
                let mut compiled = Vec::new();
                for p in list.get_ref() {
                    compiled.push(super::git::GitPattern::compile(p.get_ref()).map_err(|e| {
                        ctx.err(p.span(), format!("rule `{id}`: `git` pattern {e}"))
                    })?);
                }
                Some(compiled)
            }
        };
    let paths = match &rr.path {
        None => None,
        Some(list) => {
            for p in list {
                if !p.get_ref().starts_with('/') && !p.get_ref().starts_with("**") {
                    return Err(ctx.err(
                        p.span(),
                        format!(
                            "rule `{id}`: path glob `{}` must be absolute (or start with **)",
                            p.get_ref()
                        ),
                    ));
                }
            }
            let texts: Vec<String> = list.iter().map(|p| p.get_ref().clone()).collect();
            Some(super::PathGlobs::new(texts).map_err(|(i, e)| {
                ctx.err(
                    list[i].span(),
                    format!("rule `{id}`: bad path glob `{}`: {e}", list[i].get_ref()),
                )
            })?)
        }
    };
    let mut rule = Rule {
        id,
        effect,
        reason,
        tools,
        commands,
        git,
        paths,
        examples_match: Vec::new(),
        examples_not_match: Vec::new(),
    };
    // A built-in's examples are constants of the binary: the test suite checks them
    // (`policy::tests::every_builtin_rule_has_match_and_not_match_examples` loads every
    // built-in with checking on); analysing ~80 examples in every process would cost more
    // than the rest of a call. A policy file's are checked at every load.
    let check = !ctx.file.starts_with("builtin:") || cfg!(test);
    for (list, want) in [(&rr.matching, true), (&rr.not_match, false)] {
        for ex in list {
            let text = if check {
                super::examples::check(&rule, ex.get_ref(), want)
                    .map_err(|m| ctx.err(ex.span(), format!("rule `{}`: {m}", rule.id)))?
            } else {
                super::examples::text_of(ex.get_ref())
            };
            if want {
                rule.examples_match.push(text);
            } else {
                rule.examples_not_match.push(text);
            }
        }
    }
    Ok(rule)
}

/// `[sandbox] network`: `"none"`, `"loopback"`, `{ connect_tcp = [ports] }` or
/// `{ proxy = { allow = [...], deny = [...], unknown = "deny" | "ask" } }`.
fn parse_network(ctx: &Ctx<'_>, n: &Spanned<toml::Value>) -> Result<Network, PolicyError> {
    const EXPECTED: &str = "`network`: expected \"none\", \"loopback\", { connect_tcp = [ports] } or { proxy = { allow = [...], deny = [...], unknown = \"deny\" | \"ask\" } }";
    match n.get_ref() {
        toml::Value::String(m) if m == "none" => Ok(Network::None),
        toml::Value::String(m) if m == "loopback" => Ok(Network::Loopback),
        toml::Value::Table(t) if t.len() == 1 && t.contains_key("connect_tcp") => {
            let ports = t
                .get("connect_tcp")
                .and_then(|v| v.as_array())
                .ok_or_else(|| ctx.err(n.span(), "`connect_tcp` must be an array of ports"))?;
            let mut out = Vec::new();
            for p in ports {
                match p.as_integer() {
                    Some(i) if (1..=65535).contains(&i) => out.push(i as u16),
                    _ => {
                        return Err(ctx.err(
                            n.span(),
                            format!("`connect_tcp`: `{p}` is not a TCP port (1-65535)"),
                        ));
                    }
                }
            }
            Ok(Network::ConnectTcp(out))
        }
        toml::Value::Table(t) if t.len() == 1 && t.contains_key("proxy") => {
            parse_proxy(ctx, n.span(), t.get("proxy"))
        }
        _ => Err(ctx.err(n.span(), EXPECTED)),
    }
}

/// The `proxy` table of `network`. An error points at the rule as written when it can be
/// found inside the `network` value (toml's values keep no spans of their own).
fn parse_proxy(
    ctx: &Ctx<'_>,
    span: Range<usize>,
    v: Option<&toml::Value>,
) -> Result<Network, PolicyError> {
    let at = |needle: &str| {
        let slice = ctx.text.get(span.clone()).unwrap_or("");
        slice.find(needle).map_or(span.clone(), |i| {
            span.start + i..span.start + i + needle.len()
        })
    };
    let Some(toml::Value::Table(t)) = v else {
        return Err(ctx.err(
            span,
            "`network.proxy` must be a table: { allow = [...], deny = [...], unknown = \"deny\" | \"ask\" }",
        ));
    };
    if let Some(k) = t
        .keys()
        .find(|k| !["allow", "deny", "unknown"].contains(&k.as_str()))
    {
        return Err(ctx.err(
            at(k),
            format!("`network.proxy`: unknown key `{k}` (expected `allow`, `deny`, `unknown`)"),
        ));
    }
    let list = |key: &str| -> Result<Vec<String>, PolicyError> {
        match t.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|r| match r {
                    toml::Value::String(s) => Ok(s.clone()),
                    other => Err(ctx.err(
                        at(&other.to_string()),
                        format!("`network.proxy.{key}`: `{other}` is not a string"),
                    )),
                })
                .collect(),
            Some(_) => Err(ctx.err(
                at(key),
                format!("`network.proxy.{key}` must be an array of host patterns"),
            )),
        }
    };
    let allow = list("allow")?;
    let deny = list("deny")?;
    let unknown = match t.get("unknown") {
        None => crate::model::Unknown::Deny,
        Some(toml::Value::String(u)) if u == "deny" => crate::model::Unknown::Deny,
        Some(toml::Value::String(u)) if u == "ask" => crate::model::Unknown::Ask,
        Some(other) => {
            return Err(ctx.err(
                at("unknown"),
                format!("`network.proxy.unknown`: expected \"deny\" or \"ask\", found {other}"),
            ));
        }
    };
    crate::model::ProxyNet::new(allow, deny, unknown)
        .map(|p| Network::Proxy(Box::new(p)))
        .map_err(|e| {
            ctx.err(
                at(&format!("\"{}\"", e.rule)),
                format!("`network.proxy`: {e}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::line_col;

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
