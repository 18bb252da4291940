//! The `tools.exec` JSON of GoClaw-style agent configs, read strictly: unknown keys
//! are an error that names them, and allowed/blocked commands match resolved paths.

use crate::sandbox::{Options, StaticBinaryAction};
use sandbox_policy::profile::{Profile, ProfileError};
use sandbox_policy::Action;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The largest config file accepted.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// `tools.exec`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExecConfig {
    /// Whether the exec tool may run anything at all.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Sandbox settings.
    #[serde(default)]
    pub sandbox: SandboxConfig,
    /// When non-empty, only these commands (names or paths) may run.
    #[serde(default)]
    pub allowed_commands: Vec<String>,
    /// These commands (names or paths) never run.
    #[serde(default)]
    pub blocked_commands: Vec<String>,
    /// Wall-clock limit in seconds.
    pub timeout: Option<u64>,
}

/// `tools.exec.sandbox`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SandboxConfig {
    /// Whether to sandbox at all (false: unrestricted).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// A built-in profile name, `custom`, or a profile file's path.
    #[serde(default = "default_profile")]
    pub profile: String,
    /// Allow list of the `custom` profile.
    #[serde(default)]
    pub custom_allow: String,
    /// Deny list of the `custom` profile.
    #[serde(default)]
    pub custom_deny: String,
    /// Log violations instead of stopping the program (`SECCOMP_DEFAULT_ACTION=log`).
    #[serde(default)]
    pub log_violations: bool,
    /// Use this library instead of the embedded one. It must be a regular file owned by root or
    /// the caller in directories only they can change, holding the embedded library unless
    /// `libsandbox_sha256` names another one (`extract::explicit`).
    #[serde(default)]
    pub libsandbox_path: String,
    /// The SHA-256 (64 hex digits) of a `libsandboxPath` that is not the embedded library: the
    /// operator's opt-in to a foreign library, which must then have exactly this hash.
    #[serde(default)]
    pub libsandbox_sha256: String,
    /// What to do with programs a preload cannot enter.
    #[serde(default)]
    pub static_binary_action: StaticBinaryAction,
    /// Refuse to run when the sandbox is unavailable.
    #[serde(default)]
    pub require_sandbox: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            enabled: true,
            profile: default_profile(),
            custom_allow: String::new(),
            custom_deny: String::new(),
            log_violations: false,
            libsandbox_path: String::new(),
            libsandbox_sha256: String::new(),
            static_binary_action: StaticBinaryAction::Block,
            require_sandbox: false,
        }
    }
}

fn yes() -> bool {
    true
}

fn default_profile() -> String {
    "minimal".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    tools: Tools,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tools {
    exec: ExecConfig,
}

/// Why a config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config {0}: {1}")]
    Io(String, std::io::Error),
    /// Too large.
    #[error("config {0}: larger than {MAX_CONFIG_BYTES} bytes")]
    TooLarge(String),
    /// Not JSON of the expected shape (unknown keys are named here).
    #[error("config {0}: {1}")]
    Format(String, String),
    /// The profile it names is unusable.
    #[error("config {0}: {1}")]
    Profile(String, Box<ProfileError>),
}

impl ExecConfig {
    /// Parses either `{"tools": {"exec": {...}}}` or the `tools.exec` object itself.
    pub fn from_json(origin: &str, text: &str) -> Result<ExecConfig, ConfigError> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| ConfigError::Format(origin.into(), e.to_string()))?;
        let wrapped = value.get("tools").is_some();
        let result = if wrapped {
            serde_json::from_value::<Document>(value).map(|d| d.tools.exec)
        } else {
            serde_json::from_value::<ExecConfig>(value)
        };
        result.map_err(|e| ConfigError::Format(origin.into(), e.to_string()))
    }

    /// Reads a config file.
    pub fn load(path: &Path) -> Result<ExecConfig, ConfigError> {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| ConfigError::Io(shown.clone(), e))?;
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge(shown));
        }
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io(shown.clone(), e))?;
        ExecConfig::from_json(&shown, &text)
    }

    /// The sandbox options this config stands for.
    pub fn options(&self, origin: &str) -> Result<Options, ConfigError> {
        let s = &self.sandbox;
        let profile = if !s.enabled {
            Profile::builtin("unrestricted")
        } else if s.profile == "custom" {
            let opt = |v: &str| (!v.is_empty()).then_some(v.to_string());
            let (a, d) = (opt(&s.custom_allow), opt(&s.custom_deny));
            Profile::custom(a.as_deref(), d.as_deref())
        } else {
            Profile::named_or_file(&s.profile)
        }
        .map_err(|e| ConfigError::Profile(origin.into(), Box::new(e)))?;
        let mut o = Options::new(profile);
        o.on_violation = s.log_violations.then_some(Action::Log);
        o.static_binary = s.static_binary_action;
        o.require_sandbox = s.require_sandbox;
        if !s.libsandbox_sha256.is_empty() && s.libsandbox_path.is_empty() {
            return Err(ConfigError::Format(
                origin.into(),
                "libsandboxSha256 is set but libsandboxPath is not: the hash names the library to use instead of the embedded one".into(),
            ));
        }
        if !s.libsandbox_sha256.is_empty()
            && (s.libsandbox_sha256.len() != 64
                || !s.libsandbox_sha256.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(ConfigError::Format(
                origin.into(),
                format!(
                    "libsandboxSha256 `{}` is not 64 hexadecimal digits",
                    s.libsandbox_sha256
                ),
            ));
        }
        o.libsandbox_path =
            (!s.libsandbox_path.is_empty()).then(|| PathBuf::from(&s.libsandbox_path));
        o.libsandbox_sha256 =
            (!s.libsandbox_sha256.is_empty()).then(|| s.libsandbox_sha256.clone());
        Ok(o)
    }

    /// Checks `program` (already resolved to an absolute path) against the allowed and blocked
    /// commands; the error names the rule.
    pub fn check_command(&self, given: &str, resolved: &Path) -> Result<(), String> {
        if !self.enabled {
            return Err(
                "the exec tool is disabled by the config (tools.exec.enabled = false)".into(),
            );
        }
        if let Some(rule) = self
            .blocked_commands
            .iter()
            .find(|r| command_matches(r, given, resolved))
        {
            return Err(format!(
                "{} is blocked by blockedCommands entry `{rule}`",
                resolved.display()
            ));
        }
        if !self.allowed_commands.is_empty()
            && !self
                .allowed_commands
                .iter()
                .any(|r| command_matches(r, given, resolved))
        {
            return Err(format!("{} is not in allowedCommands", resolved.display()));
        }
        Ok(())
    }
}

/// Whether a rule (a name such as `rm`, or a path) designates the program. A name matches the
/// file name of the program as given and as resolved (symlinks and `..` removed), and the file
/// the name resolves to in PATH (so a hard link or copy under another name is caught when it is
/// the same file); a path matches the same file.
pub fn command_matches(rule: &str, given: &str, resolved: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let name_of = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let same_file = |a: &Path, b: &Path| match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    };
    if rule.contains('/') {
        let rule_path = Path::new(rule);
        return same_file(rule_path, resolved)
            || std::fs::canonicalize(rule_path).is_ok_and(|c| c == resolved);
    }
    if name_of(Path::new(given)).as_deref() == Some(rule)
        || name_of(resolved).as_deref() == Some(rule)
    {
        return true;
    }
    let path_env = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    path_env
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(rule))
        .any(|candidate| same_file(&candidate, resolved))
}
