//! The config file: `$GATEWAY_CONFIG`, else `$XDG_CONFIG_HOME/gateway/config.toml`, else
//! `~/.config/gateway/config.toml`. It sets defaults only — a command-line option or its
//! environment variable wins — and a missing file is an empty config:
//!
//! ```toml
//! policy = "strict"               # default policy (--policy, GATEWAY_POLICY)
//! state_dir = "/var/lib/gateway"  # default state directory (--state-dir, GATEWAY_STATE_DIR)
//! socket = "/run/gateway.sock"    # the daemon's socket (issue 6; shown by `config show`)
//! shell = "/bin/bash"             # what `gateway sh -c` runs the command with (default /bin/sh)
//!
//! [retention]                     # override the policy's retention settings
//! artifacts_max_age = "30d"       # [audit] artifacts_max_age
//! artifacts_max_total = "1GiB"    # [audit] artifacts_max_total
//! backups_max_total = "2GiB"      # [undo] backups_max_total
//! keep_versions = 20              # [undo] keep_versions
//! ```
//!
//! and, for the daemon (`gateway serve`; top-level keys, before `[retention]`):
//!
//! ```toml
//! approvers = ["gateway-approvers"]  # may list and answer every client's requests
//! auditors = ["gateway-auditors"]    # may see every client's records, outputs, history
//! allow_client_policy = ["strict", "standard"]  # policies a client may pick (default: any)
//! ```

use crate::policy::{self, Policy, PolicyError, SettingKind};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    policy: Option<String>,
    state_dir: Option<PathBuf>,
    socket: Option<PathBuf>,
    shell: Option<PathBuf>,
    #[serde(default)]
    retention: RawRetention,
    #[serde(default)]
    approvers: Vec<String>,
    #[serde(default)]
    auditors: Vec<String>,
    allow_client_policy: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRetention {
    artifacts_max_age: Option<Spanned<toml::Value>>,
    artifacts_max_total: Option<Spanned<toml::Value>>,
    backups_max_total: Option<Spanned<toml::Value>>,
    keep_versions: Option<Spanned<toml::Value>>,
}

/// Retention overrides, applied to the loaded policy.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, schemars::JsonSchema)]
pub(super) struct Retention {
    pub artifacts_max_age: Option<u64>,
    pub artifacts_max_total: Option<u64>,
    pub backups_max_total: Option<u64>,
    pub keep_versions: Option<u64>,
}

/// The config file's settings.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(super) struct Config {
    /// Where it was looked for.
    pub path: PathBuf,
    /// Whether it exists.
    pub found: bool,
    pub policy: Option<String>,
    pub state_dir: Option<PathBuf>,
    pub socket: Option<PathBuf>,
    pub shell: Option<PathBuf>,
    pub retention: Retention,
    /// (The daemon) groups whose members may list and answer every client's requests.
    pub approvers: Vec<String>,
    /// (The daemon) groups whose members may see every client's records and history.
    pub auditors: Vec<String>,
    /// (The daemon) the policies a client may pick; `None`: any.
    pub allow_client_policy: Option<Vec<String>>,
}

/// `config show`: the config file, each setting in force and where it comes from, and the
/// retention the policy puts in force. The config file is the CLI's own (the daemon and MCP
/// take their settings from the CLI that starts them), so its report is typed here.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(super) struct Shown<'a> {
    /// Where the config file was looked for.
    pub config_file: &'a Path,
    /// Whether it exists.
    pub found: bool,
    /// The policy in force (its name or path).
    pub policy: Setting,
    /// The state directory in force.
    pub state_dir: Setting,
    /// The daemon's socket, if the config file names one.
    pub socket: Option<&'a Path>,
    /// What `gateway sh -c` runs the command with.
    pub shell: &'a Path,
    /// The config file's retention overrides.
    pub retention: Retention,
    /// The retention the policy puts in force, overrides applied (`null`: it does not load).
    pub effective_retention: Option<policy::report::Retention>,
    /// Why the policy does not load.
    pub policy_error: Option<&'a str>,
}

/// A setting's value and where it comes from.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(super) struct Setting {
    /// The value.
    pub value: String,
    /// `option or $VAR`, `config file` or `default`.
    pub from: String,
}

/// Where the config file is looked for (see [`crate::broker::config_path`]).
pub(super) fn path() -> PathBuf {
    crate::broker::config_path()
}

/// Loads the config file (an empty config if there is none). Errors are
/// `file:line:column: message`.
pub(super) fn load_from(path: &Path) -> Result<Config, PolicyError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Config {
                path: path.to_path_buf(),
                ..Config::default()
            });
        }
        Err(source) => {
            return Err(PolicyError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let file = path.display().to_string();
    let raw: RawConfig = policy::parse_toml(&file, &text)?;
    let r = &raw.retention;
    let setting = |v: &Option<Spanned<toml::Value>>, kind, what| {
        v.as_ref()
            .map(|v| policy::parse_setting(&file, &text, v, kind, what))
            .transpose()
    };
    let retention = Retention {
        artifacts_max_age: setting(
            &r.artifacts_max_age,
            SettingKind::Duration,
            "retention.artifacts_max_age",
        )?,
        artifacts_max_total: setting(
            &r.artifacts_max_total,
            SettingKind::Size,
            "retention.artifacts_max_total",
        )?,
        backups_max_total: setting(
            &r.backups_max_total,
            SettingKind::Size,
            "retention.backups_max_total",
        )?,
        keep_versions: setting(
            &r.keep_versions,
            SettingKind::Count,
            "retention.keep_versions",
        )?,
    };
    Ok(Config {
        path: path.to_path_buf(),
        found: true,
        policy: raw.policy,
        state_dir: raw.state_dir,
        socket: raw.socket,
        shell: raw.shell,
        retention,
        approvers: raw.approvers,
        auditors: raw.auditors,
        allow_client_policy: raw.allow_client_policy,
    })
}

/// The config of this process (loaded once).
pub(super) fn get() -> Result<&'static Config, &'static PolicyError> {
    static CONFIG: std::sync::OnceLock<Result<Config, PolicyError>> = std::sync::OnceLock::new();
    CONFIG.get_or_init(|| load_from(&path())).as_ref()
}

impl Config {
    /// Applies the retention overrides to a loaded policy.
    pub(super) fn apply(&self, p: &mut Policy) {
        let r = &self.retention;
        if let Some(v) = r.artifacts_max_age {
            p.audit.artifacts_max_age = Some(v);
        }
        if let Some(v) = r.artifacts_max_total {
            p.audit.artifacts_max_total = Some(v);
        }
        if let Some(v) = r.backups_max_total {
            p.undo.backups_max_total = Some(v);
        }
        if let Some(v) = r.keep_versions {
            p.undo.keep_versions = v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gateway-config-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("mkdir");
        let p = d.join("config.toml");
        std::fs::write(&p, text).expect("write");
        p
    }

    #[test]
    fn settings_parse_and_apply() {
        let p = write(
            "ok",
            "policy = \"strict\"\nshell = \"/bin/bash\"\n[retention]\nartifacts_max_age = \"7d\"\nkeep_versions = 3\nbackups_max_total = \"1GiB\"\n",
        );
        let c = load_from(&p).expect("config");
        assert!(c.found);
        assert_eq!(c.policy.as_deref(), Some("strict"));
        assert_eq!(c.retention.artifacts_max_age, Some(7 * 86_400));
        let mut pol = Policy::load("standard").expect("policy");
        c.apply(&mut pol);
        assert_eq!(pol.undo.keep_versions, 3);
        assert_eq!(pol.undo.backups_max_total, Some(1 << 30));
        assert_eq!(pol.audit.artifacts_max_age, Some(7 * 86_400));
    }

    #[test]
    fn errors_have_positions_and_a_missing_file_is_empty() {
        let p = write(
            "bad",
            "policy = \"strict\"\n[retention]\nkeep_versions = \"lots\"\n",
        );
        let e = load_from(&p).expect_err("error").to_string();
        assert!(e.contains("config.toml:3:"), "{e}");
        let p = write("unknown", "polcy = \"strict\"\n");
        let e = load_from(&p).expect_err("error").to_string();
        assert!(e.contains("config.toml:1:1") && e.contains("polcy"), "{e}");
        let c = load_from(Path::new("/nonexistent/gateway/config.toml")).expect("empty");
        assert!(!c.found && c.policy.is_none());
    }
}
