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
    (
        "shell-network",
        include_str!("../../profiles/shell-network.toml"),
    ),
    (
        "unrestricted",
        include_str!("../../profiles/unrestricted.toml"),
    ),
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
///
/// The fields are private so that a `Profile` can only come from a constructor that checks it
/// ([`Profile::builtin`], [`Profile::load`], [`Profile::from_toml`], [`Profile::custom`], and
/// the `with_*` / [`Profile::extended`] methods that validate the result again): holding one
/// means its lists parse and compile to a filter on this machine.
///
/// ```
/// use sandbox_policy::profile::Profile;
///
/// let p = Profile::from_toml("mine", r#"
///     description = "read-only tools"
///     allow = ["@base", "@fd-io", "@fs-read"]
/// "#).unwrap();
/// assert_eq!(p.name(), "mine");
/// assert_eq!(p.allow(), Some(&["@base".to_string(), "@fd-io".into(), "@fs-read".into()][..]));
///
/// // An entry that does not name a syscall is refused, so no such profile exists.
/// assert!(Profile::from_toml("bad", "description = \"x\"\nallow = [\"nosuchcall\"]").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    name: String,
    description: String,
    allow: Option<Vec<String>>,
    deny: Vec<String>,
    default_action: Action,
}

/// Why a profile cannot be used; each case keeps what was given (the name, or the file's
/// path) and, for an entry that does not parse or compile, the entry itself (in the
/// [`Error`]'s token).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// No built-in profile of that name.
    #[error(
        "unknown profile `{0}` (built-in: {names}; or give a profile file's path)",
        names = Profile::builtin_names().collect::<Vec<_>>().join(", ")
    )]
    Unknown(String),
    /// The file could not be read.
    #[error("profile {0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// The file is not valid TOML of the profile shape.
    #[error("profile {0}: {1}")]
    Format(String, String),
    /// An entry does not parse or compile; the message names the file's field.
    #[error("profile {0}: {in_profile}", in_profile = .1.in_profile())]
    Policy(String, #[source] Error),
}

impl ProfileError {
    /// For an allow- or deny-list entry that does not parse: its list and the entry with what
    /// is wrong with it (`` `socket=EBOGUS`: unknown action ... ``), without the environment
    /// variable and position the lists are checked under, so that a caller can word it as its
    /// own input (a flag, a request field). `None` for every other error.
    pub fn list_entry(&self) -> Option<(Source, String)> {
        match self {
            ProfileError::Policy(_, e) if matches!(e.source, Source::Allow | Source::Deny) => {
                let what = if e.kind == ErrorKind::EmptyEntry {
                    "is empty".into()
                } else {
                    std::format!("`{}`: {}", e.token, e.kind)
                };
                Some((e.source, what))
            }
            _ => None,
        }
    }
}

impl Profile {
    /// Name (a built-in's name, `custom`, or the file's stem).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One line saying what the profile permits.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Allow-list entries; `None` for a deny-list or unrestricted profile.
    pub fn allow(&self) -> Option<&[String]> {
        self.allow.as_deref()
    }

    /// Deny-list entries.
    pub fn deny(&self) -> &[String] {
        &self.deny
    }

    /// The profile's default action (kill when not given).
    pub fn default_action(&self) -> Action {
        self.default_action
    }

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
        // Built-in profiles are checked to compile on every architecture by the tests
        // (`every_builtin_profile_compiles_on_every_architecture`), so they are only parsed
        // here: validating means building the policy and compiling it, which a one-shot run
        // would pay again when it builds its filter.
        Profile::parse(name, text)
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
        if !meta.is_file() {
            return Err(ProfileError::Format(shown, "is not a regular file".into()));
        }
        if meta.len() > 1 << 20 {
            return Err(ProfileError::Format(shown, "larger than 1 MiB".into()));
        }
        // Read at most the limit even if the file grows meanwhile.
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(
                std::fs::File::open(path).map_err(|e| ProfileError::Io(shown.clone(), e))?,
                (1 << 20) + 1,
            ),
            &mut bytes,
        )
        .map_err(|e| ProfileError::Io(shown.clone(), e))?;
        if bytes.len() > 1 << 20 {
            return Err(ProfileError::Format(shown, "larger than 1 MiB".into()));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| ProfileError::Format(shown.clone(), "is not UTF-8 text".into()))?;
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("file");
        Profile::from_toml(name, &text).map_err(|e| match e {
            ProfileError::Format(_, m) => ProfileError::Format(shown, m),
            ProfileError::Policy(_, m) => ProfileError::Policy(shown, m),
            other => other,
        })
    }

    /// Parses and validates profile text.
    pub fn from_toml(name: &str, text: &str) -> Result<Profile, ProfileError> {
        let p = Profile::parse(name, text)?;
        p.validate()?;
        Ok(p)
    }

    /// Parses a profile without compiling it.
    fn parse(name: &str, text: &str) -> Result<Profile, ProfileError> {
        let file: File = toml::from_str(text)
            .map_err(|e| ProfileError::Format(name.to_string(), e.message().to_string()))?;
        let default_action = match &file.default_action {
            None => Action::Kill,
            Some(t) => Action::parse(t)
                .filter(|a| *a != Action::Allow)
                .ok_or_else(|| {
                    ProfileError::Policy(
                        name.to_string(),
                        Error {
                            source: Source::DefaultAction,
                            entry: 0,
                            token: Token::new(t),
                            kind: ErrorKind::UnknownAction,
                        },
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
        Ok(p)
    }

    /// A profile from `--allow` / `--deny` lists (the `custom` profile).
    pub fn custom(allow: Option<&str>, deny: Option<&str>) -> Result<Profile, ProfileError> {
        // Empty entries (`::ptrace::`) are ignored, as in the environment variables.
        let split = |s: &str| {
            s.split(':')
                .filter(|e| !e.is_empty())
                .map(String::from)
                .collect()
        };
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

    /// The same profile without the deny-list entries in `drop`, validated again.
    pub fn without_denies(&self, drop: &[String]) -> Result<Profile, ProfileError> {
        let mut p = self.clone();
        p.deny.retain(|d| !drop.contains(d));
        p.validate()?;
        Ok(p)
    }

    /// The same profile with one more deny-list entry, validated again.
    pub fn with_deny(&self, entry: &str) -> Result<Profile, ProfileError> {
        let mut p = self.clone();
        if !p.deny.iter().any(|d| d == entry) {
            p.deny.push(entry.to_string());
        }
        p.validate()?;
        Ok(p)
    }

    /// This profile with more allow-list and deny-list entries (the `--allow` / `--deny` of a
    /// named profile, the `allow` / `deny` of a request), validated again. A profile without an
    /// allow list cannot take allow entries: it already allows everything it does not deny.
    pub fn extended(&self, allow: &[String], deny: &[String]) -> Result<Profile, ProfileError> {
        let mut p = self.clone();
        if !allow.is_empty() {
            match &mut p.allow {
                Some(list) => list.extend(allow.iter().cloned()),
                None => {
                    return Err(ProfileError::Format(
                        self.name.clone(),
                        "has no allow list to extend (it allows every call it does not deny)"
                            .into(),
                    ))
                }
            }
        }
        p.deny.extend(deny.iter().cloned());
        p.validate()?;
        Ok(p)
    }

    /// The same profile with one more allow-list entry, validated again; a profile without
    /// an allow list (deny list only, or none) already allows it and is returned unchanged.
    pub fn with_allow(&self, entry: &str) -> Result<Profile, ProfileError> {
        let mut p = self.clone();
        if let Some(allow) = &mut p.allow {
            if !allow.iter().any(|a| a == entry) {
                allow.push(entry.to_string());
            }
        }
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
        v.push((
            "SECCOMP_DEFAULT_ACTION",
            action.unwrap_or(self.default_action).to_string(),
        ));
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
        grammar::from_env(
            arch,
            allow.as_deref(),
            deny.as_deref(),
            Some(&action_text),
            &mut p,
        )?;
        Ok(Some(p))
    }

    fn validate(&self) -> Result<(), ProfileError> {
        let bad = |e| ProfileError::Policy(self.name.clone(), e);
        for (list, source) in [
            (self.allow.as_deref().unwrap_or(&[]), Source::Allow),
            (&self.deny[..], Source::Deny),
        ] {
            for (i, entry) in list.iter().enumerate() {
                if entry.contains(':') || entry.is_empty() {
                    let kind = if entry.is_empty() {
                        ErrorKind::EmptyEntry
                    } else {
                        ErrorKind::Syntax("one entry per list item: no `:`")
                    };
                    return Err(bad(Error {
                        source,
                        entry: i + 1,
                        token: Token::new(entry),
                        kind,
                    }));
                }
            }
        }
        // Validated for the machine it will run on: a name another architecture lacks
        // (`open`, `newfstatat` on aarch64) is fine in a list written for this one. The
        // built-in profiles are checked on every architecture by the tests.
        self.check_on(crate::NATIVE).map_err(bad)
    }

    /// Checks that the profile parses and compiles on `arch`.
    pub fn check_on(&self, arch: Arch) -> Result<(), Error> {
        if let Some(p) = self.policy(arch, None)? {
            crate::bpf::compile(&p, &mut std::vec![crate::Insn::default(); crate::MAX_INSNS])
                .map_err(|k| Error::whole(Source::Allow, k))?;
        }
        Ok(())
    }
}

/// One line of [`Profile::resolve_with_groups`]: a syscall, what the profile does with it, and
/// where in the profile it came from.
pub type Resolved = (String, String, String);

impl Profile {
    /// The profile resolved on `arch`, one line per syscall it names (directly or through a
    /// group): `(syscall, decision, source)`. The decision reads like `allow`, `kill`,
    /// `errno:EROFS`, or for argument rules `errno:EROFS if a2 & 0x3 == 0x1 || ...; else allow`
    /// (values in hex, evaluated in that order). The source is the group that lists the syscall
    /// (`@fs-read`, `@never via @hardening`), or `listed` for an entry written in the profile;
    /// several sources are joined with `, `. Syscalls the profile does not name get the
    /// fallback: the default action for an allow list, allow for a deny list. Sorted by name;
    /// empty for an unrestricted profile.
    pub fn resolve_with_groups(&self, arch: Arch) -> Vec<Resolved> {
        let Ok(Some(policy)) = self.policy(arch, None) else {
            return Vec::new();
        };
        let mut sources: std::collections::BTreeMap<&'static str, Vec<String>> = Default::default();
        let lists = self.allow.iter().flatten().chain(self.deny.iter());
        for entry in lists {
            collect_sources(arch, entry, &[], &mut sources, 0);
        }
        let mut out = Vec::new();
        for (name, via) in sources {
            let Some(nr) = arch.syscall_number(name) else {
                continue;
            };
            let mut seen = Vec::new();
            for v in via {
                if !seen.contains(&v) {
                    seen.push(v);
                }
            }
            out.push((
                name.to_string(),
                describe_decision(&policy, nr),
                seen.join(", "),
            ));
        }
        out
    }
}

/// Records, for every syscall `entry` names, the chain of groups it came through.
fn collect_sources(
    arch: Arch,
    entry: &str,
    chain: &[&str],
    out: &mut std::collections::BTreeMap<&'static str, Vec<String>>,
    depth: usize,
) {
    let head = entry.split(['(', '=']).next().unwrap_or(entry);
    if let Some(group) = head.strip_prefix('@') {
        let Some(g) = crate::groups::find(group) else {
            return;
        };
        if depth > 8 {
            return;
        }
        let mut next: Vec<&str> = chain.to_vec();
        next.push(g.name);
        for member in g.entries {
            collect_sources(arch, member, &next, out, depth + 1);
        }
        return;
    }
    let Some(nr) = arch.syscall_number(head) else {
        return;
    };
    let Some(name) = arch.syscall_name(nr) else {
        return;
    };
    let source = match chain.split_last() {
        None => "listed".to_string(),
        Some((inner, [])) => std::format!("@{inner}"),
        Some((inner, outer)) => {
            let via: Vec<String> = outer.iter().rev().map(|g| std::format!("@{g}")).collect();
            std::format!("@{inner} via {}", via.join(" via "))
        }
    };
    out.entry(name).or_default().push(source);
}

fn describe_cond(c: &crate::policy::Cond) -> String {
    let width = if c.width == crate::policy::Width::W64 {
        ".64"
    } else {
        ""
    };
    let full = if c.width == crate::policy::Width::W64 {
        u64::MAX
    } else {
        0xffff_ffff
    };
    let mask = if c.mask & full == full {
        String::new()
    } else {
        std::format!(" & {:#x}", c.mask)
    };
    std::format!("a{}{width}{mask} {} {:#x}", c.arg, c.op.symbol(), c.value)
}

/// What `policy` does with `nr`, in words.
fn describe_decision(policy: &Policy, nr: u32) -> String {
    if let Some(a) = policy.constant_decision(nr) {
        return a.to_string();
    }
    let mut parts = Vec::new();
    for rule in policy.rules_for(nr) {
        if Policy::is_unconditional(rule) {
            parts.push(rule.action.to_string());
            return parts.join("; else ");
        }
        let alts: Vec<String> = policy
            .alternatives(rule)
            .map(|alt| {
                alt.iter()
                    .map(describe_cond)
                    .collect::<Vec<_>>()
                    .join(" && ")
            })
            .collect();
        parts.push(std::format!("{} if {}", rule.action, alts.join(" || ")));
    }
    let rest = if policy.is_allowed(nr) {
        Action::Allow
    } else {
        policy.fallback()
    };
    parts.push(rest.to_string());
    parts.join("; else ")
}

#[cfg(test)]
mod resolve_tests {
    use super::*;

    #[test]
    fn minimal_names_groups_and_rules() {
        let p = Profile::builtin("minimal").unwrap();
        let r = p.resolve_with_groups(Arch::X86_64);
        let get = |n: &str| r.iter().find(|(s, _, _)| s == n).cloned().unwrap();
        assert_eq!(get("read").1, "allow");
        assert_eq!(get("read").2, "@fd-io");
        assert_eq!(get("mkdir").1, "errno:EROFS");
        assert_eq!(get("mkdir").2, "@fs-write via @read-only");
        let (_, openat, src) = get("openat");
        assert!(
            openat.starts_with("errno:EROFS if a2 & 0x3 == 0x1"),
            "{openat}"
        );
        assert!(openat.ends_with("; else allow"), "{openat}");
        assert_eq!(src, "@fs-read, @read-only");
        assert!(get("ptrace").1 == "kill");
        assert!(Profile::builtin("unrestricted")
            .unwrap()
            .resolve_with_groups(Arch::X86_64)
            .is_empty());
    }
}

#[cfg(test)]
mod builtin_tests {
    use super::*;

    #[test]
    fn errors_keep_what_was_given() {
        let text = "description = \"x\"\nallow = [\"read\", \"nosuchcall\"]";
        match Profile::from_toml("mine", text) {
            Err(err @ ProfileError::Policy(..)) => {
                let ProfileError::Policy(name, e) = &err else {
                    unreachable!()
                };
                assert_eq!((name.as_str(), e.entry), ("mine", 2));
                assert_eq!(e.token.as_str(), "nosuchcall");
                // Worded for the file: its field, not the preload's variable.
                let msg = err.to_string();
                assert!(
                    msg.starts_with("profile mine: allow entry 2 `nosuchcall`"),
                    "{msg}"
                );
            }
            other => panic!("{other:?}"),
        }
        let text = "description = \"x\"\ndefault_action = \"explode\"\nallow = [\"read\"]";
        let msg = Profile::from_toml("mine", text).unwrap_err().to_string();
        assert!(
            msg.starts_with("profile mine: default_action `explode`: unknown default action"),
            "{msg}"
        );
        let text = "description = \"x\"\nallow = [\"read\"]\ndeny = [\"write=EBOGUS\"]";
        let msg = Profile::from_toml("mine", text).unwrap_err().to_string();
        assert!(msg.starts_with("profile mine: deny entry 1 `"), "{msg}");
        assert!(!msg.contains("SECCOMP_"), "{msg}");
        let e = Profile::builtin("nosuch").unwrap_err();
        assert!(
            matches!(&e, ProfileError::Unknown(n) if n == "nosuch"),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("unknown profile `nosuch` (built-in: minimal, network, "),
            "{e}"
        );
        let e = Profile::load(std::path::Path::new("/nonexistent/p.toml")).unwrap_err();
        assert!(
            matches!(&e, ProfileError::Io(p, _) if p == "/nonexistent/p.toml"),
            "{e:?}"
        );
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn every_builtin_profile_compiles_on_every_architecture() {
        for name in Profile::builtin_names() {
            let p = Profile::builtin(name).unwrap();
            p.validate()
                .unwrap_or_else(|e| panic!("{name} is a valid profile: {e}"));
            for arch in [Arch::X86_64, Arch::Aarch64] {
                p.check_on(arch)
                    .unwrap_or_else(|e| panic!("{name} on {}: {e}", arch.name()));
            }
        }
    }
}
