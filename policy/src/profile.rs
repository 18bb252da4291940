//! Profiles: named policies stored as data (`profiles/*.toml`), validated before any process is
//! spawned, and turned into the preload's environment variables.
//!
//! ```toml
//! description = "Read files and directories; no writes, sockets, processes or exec."
//! default_action = "kill"          # optional; `--on-violation` overrides it
//! allow = ["@base", "@fd-io", "@fs-read"]   # omit for a deny-list profile
//! deny = ["creat=EROFS", "@never"]
//! ```
//! A profile with neither `allow` nor `deny` installs no filter (`unrestricted`).

use crate::action::Action;
use crate::arch::Arch;
use crate::error::{Error, ErrorKind, Source, Token};
use crate::grammar;
use crate::policy::{Mode, Policy};
use serde::Deserialize;
use std::boxed::Box;
use std::string::{String, ToString};
use std::vec::Vec;

/// The built-in profiles, embedded from `profiles/`.
static BUILTIN: &[(&str, &str)] = &[
    ("minimal", include_str!("../../profiles/minimal.toml")),
    ("network", include_str!("../../profiles/network.toml")),
    ("write", include_str!("../../profiles/write.toml")),
    ("no-exec", include_str!("../../profiles/no-exec.toml")),
    ("shell", include_str!("../../profiles/shell.toml")),
    ("unrestricted", include_str!("../../profiles/unrestricted.toml")),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    description: String,
    default_action: Option<String>,
    allow: Option<Vec<String>>,
    #[serde(default)]
    deny: Vec<String>,
}

/// A validated profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Name (a built-in's name, `custom`, or the file's stem).
    pub name: String,
    /// One line saying what the profile permits.
    pub description: String,
    /// Allow-list entries; `None` for a deny-list or unrestricted profile.
    pub allow: Option<Vec<String>>,
    /// Deny-list entries.
    pub deny: Vec<String>,
    /// The profile's default action (kill when not given).
    pub default_action: Action,
}

/// Why a profile cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProfileError {
    /// No built-in profile of that name.
    Unknown(String),
    /// The file could not be read.
    Io(String, std::io::Error),
    /// The file is not valid TOML of the profile shape.
    Format(String, String),
    /// An entry does not parse or compile.
    Policy(String, Error),
}

impl core::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProfileError::Unknown(n) => write!(
                f,
                "unknown profile `{n}` (built-in: {}; or give a profile file's path)",
                Profile::builtin_names().collect::<Vec<_>>().join(", ")
            ),
            ProfileError::Io(p, e) => write!(f, "profile {p}: {e}"),
            ProfileError::Format(p, e) => write!(f, "profile {p}: {e}"),
            ProfileError::Policy(p, e) => write!(f, "profile {p}: {e}"),
        }
    }
}

impl std::error::Error for ProfileError {}

impl Profile {
    /// Names of the built-in profiles.
    pub fn builtin_names() -> impl Iterator<Item = &'static str> {
        BUILTIN.iter().map(|(n, _)| *n)
    }

    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Result<Profile, ProfileError> {
        let (_, text) = BUILTIN
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| ProfileError::Unknown(name.to_string()))?;
        Profile::from_toml(name, text)
    }

    /// A built-in name, or else a path to a profile file.
    pub fn named_or_file(spec: &str) -> Result<Profile, ProfileError> {
        if Profile::builtin_names().any(|n| n == spec) {
            return Profile::builtin(spec);
        }
        if spec.contains('/') || spec.ends_with(".toml") {
            return Profile::load(std::path::Path::new(spec));
        }
        Err(ProfileError::Unknown(spec.to_string()))
    }

    /// Reads and validates a profile file.
    pub fn load(path: &std::path::Path) -> Result<Profile, ProfileError> {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| ProfileError::Io(shown.clone(), e))?;
        if meta.len() > 1 << 20 {
            return Err(ProfileError::Format(shown, "larger than 1 MiB".into()));
        }
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError::Io(shown.clone(), e))?;
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("file");
        Profile::from_toml(name, &text).map_err(|e| match e {
            ProfileError::Format(_, m) => ProfileError::Format(shown, m),
            ProfileError::Policy(_, m) => ProfileError::Policy(shown, m),
            other => other,
        })
    }

    /// Parses and validates profile text.
    pub fn from_toml(name: &str, text: &str) -> Result<Profile, ProfileError> {
        let file: File =
            toml::from_str(text).map_err(|e| ProfileError::Format(name.to_string(), e.message().to_string()))?;
        let default_action = match &file.default_action {
            None => Action::Kill,
            Some(t) => Action::parse(t).filter(|a| *a != Action::Allow).ok_or_else(|| {
                ProfileError::Policy(
                    name.to_string(),
                    Error { source: Source::DefaultAction, entry: 0, token: Token::new(t), kind: ErrorKind::UnknownAction },
                )
            })?,
        };
        let p = Profile {
            name: name.to_string(),
            description: file.description,
            allow: file.allow,
            deny: file.deny,
            default_action,
        };
        p.validate()?;
        Ok(p)
    }

    /// A profile from `--allow` / `--deny` lists (the `custom` profile).
    pub fn custom(allow: Option<&str>, deny: Option<&str>) -> Result<Profile, ProfileError> {
        let split = |s: &str| if s.is_empty() { Vec::new() } else { s.split(':').map(String::from).collect() };
        let p = Profile {
            name: "custom".into(),
            description: "custom allow/deny lists".into(),
            allow: allow.map(split),
            deny: deny.map(split).unwrap_or_default(),
            default_action: Action::Kill,
        };
        p.validate()?;
        Ok(p)
    }

    /// Whether the profile installs no filter at all.
    pub fn is_unrestricted(&self) -> bool {
        self.allow.is_none() && self.deny.is_empty()
    }

    /// `SECCOMP_SYSCALL_ALLOW`'s value, if the profile has an allow list.
    pub fn allow_value(&self) -> Option<String> {
        self.allow.as_ref().map(|a| a.join(":"))
    }

    /// `SECCOMP_SYSCALL_DENY`'s value, if the profile denies anything.
    pub fn deny_value(&self) -> Option<String> {
        (!self.deny.is_empty()).then(|| self.deny.join(":"))
    }

    /// The preload's variables for this profile with `action` as the default action; empty for
    /// an unrestricted profile.
    pub fn env(&self, action: Option<Action>) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        if self.is_unrestricted() {
            return v;
        }
        if let Some(a) = self.allow_value() {
            v.push(("SECCOMP_SYSCALL_ALLOW", a));
        }
        if let Some(d) = self.deny_value() {
            v.push(("SECCOMP_SYSCALL_DENY", d));
        }
        v.push(("SECCOMP_DEFAULT_ACTION", action.unwrap_or(self.default_action).to_string()));
        v
    }

    /// Builds the policy this profile stands for on `arch` (`None` when unrestricted).
    pub fn policy(&self, arch: Arch, action: Option<Action>) -> Result<Option<Box<Policy>>, Error> {
        if self.is_unrestricted() {
            return Ok(None);
        }
        let action = action.unwrap_or(self.default_action);
        let allow = self.allow_value();
        let deny = self.deny_value();
        let mut p = Box::new(Policy::new(arch, Mode::DenyList, action));
        let action_text = action.to_string();
        grammar::from_env(arch, allow.as_deref(), deny.as_deref(), Some(&action_text), &mut p)?;
        Ok(Some(p))
    }

    fn validate(&self) -> Result<(), ProfileError> {
        let bad = |e| ProfileError::Policy(self.name.clone(), e);
        for (list, source) in [(self.allow.as_deref().unwrap_or(&[]), Source::Allow), (&self.deny[..], Source::Deny)] {
            for (i, entry) in list.iter().enumerate() {
                if entry.contains(':') || entry.is_empty() {
                    let kind = if entry.is_empty() { ErrorKind::EmptyEntry } else { ErrorKind::Syntax("one entry per list item: no `:`") };
                    return Err(bad(Error { source, entry: i + 1, token: Token::new(entry), kind }));
                }
            }
        }
        for arch in [Arch::X86_64, Arch::Aarch64] {
            if let Some(p) = self.policy(arch, None).map_err(bad)? {
                crate::bpf::compile(&p, &mut std::vec![crate::Insn::default(); crate::MAX_INSNS])
                    .map_err(|k| bad(Error::whole(Source::Allow, k)))?;
            }
        }
        Ok(())
    }
}
