//! Deciding how a command is sandboxed: the profile compiled once into the outer filter,
//! admission control of the program, and the preload for profiles that need it on top. The
//! exec engine carries out the resulting [`Plan`] for every front end.

use crate::admission::{self, Unconfinable};
use crate::extract::{self, ExtractError};
use crate::outer;
use crate::platform::{self, Unavailable};

use sandbox_policy::profile::Profile;
use sandbox_policy::{Action, Insn};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What to do with a program the preload cannot enter (static, musl, 32-bit, unreadable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StaticBinaryAction {
    /// Refuse to run it (the default). On a static system (`/bin/sh` is static: busybox and
    /// distroless-like images) a native static program under a profile the outer filter
    /// enforces exactly (every built-in one) runs under that filter instead, as with `Confine`.
    #[default]
    Block,
    /// Run it unconfined, with a warning on every run.
    Warn,
    /// Run it unconfined without a warning.
    Allow,
    /// Run it under the host's outer filter alone (the profile plus what exec and a loader
    /// need), with a one-line notice.
    Confine,
}

impl std::str::FromStr for StaticBinaryAction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "block" => Ok(Self::Block),
            "warn" => Ok(Self::Warn),
            "allow" => Ok(Self::Allow),
            "confine" => Ok(Self::Confine),
            _ => Err(format!(
                "unknown static-binary action `{s}` (block, warn, allow or confine)"
            )),
        }
    }
}

/// Everything that decides how a command is sandboxed.
#[derive(Clone, Debug)]
pub struct Options {
    /// The validated profile.
    pub profile: Profile,
    /// Overrides the profile's default action (`--on-violation`).
    pub on_violation: Option<Action>,
    /// What to do with programs the preload cannot enter.
    pub static_binary: StaticBinaryAction,
    /// Refuse to run when the sandbox is unavailable on this machine, instead of warning.
    pub require_sandbox: bool,
    /// Use this library instead of extracting the embedded one (`libsandboxPath`).
    pub libsandbox_path: Option<PathBuf>,
    /// The SHA-256 (hex) `libsandbox_path` must have when it is not the embedded library
    /// (`libsandboxSha256`); without it, only the embedded library is accepted.
    pub libsandbox_sha256: Option<String>,
}

impl Options {
    /// Options for a profile with every other setting at its default.
    pub fn new(profile: Profile) -> Options {
        Options {
            profile,
            on_violation: None,
            static_binary: StaticBinaryAction::Block,
            require_sandbox: false,
            libsandbox_path: None,
            libsandbox_sha256: None,
        }
    }
}

/// Why a command was not started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The sandbox cannot work on this machine and `require_sandbox` is set.
    #[error("sandbox required but unavailable: {0}")]
    Unavailable(#[from] Unavailable),
    /// The preload library could not be provided.
    #[error("{0}")]
    Extract(#[from] ExtractError),
    /// Admission control refused the program (static-binary action `block`).
    #[error(
        "{0}; refusing to run it unconfined (use --static-binary confine to run it under the profile's filter alone; warn or allow run it unconfined)"
    )]
    Blocked(Unconfinable),
    /// The profile does not compile.
    #[error("profile {0}: {1}")]
    Profile(String, sandbox_policy::Error),
    /// The profile is exact only with the preload's inner filter, which a caller that starts
    /// the program itself does not load.
    #[error("profile {0} needs loader exemptions in the outer filter and the preload's exact filter on top; the exec runtime runs only profiles its outer filter enforces exactly")]
    NeedsPreload(String),
}

/// How the command will be (or was) confined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sandboxed {
    /// The profile is enforced exactly: by the outer filter alone when the profile needed no
    /// loader exemptions (every built-in profile), else by the preload's filter on top of it.
    Exact,
    /// Only the host's outer filter applied, and it carries loader exemptions the profile
    /// lacks: the preload could not enter the program to stack the exact filter.
    OuterOnly,
    /// No filter: unrestricted profile, unconfinable program allowed to run, or no sandbox here.
    None,
}

/// A configured sandbox, ready to apply to many commands.
#[derive(Debug)]
pub struct Sandbox {
    options: Options,
    /// Why the sandbox is off on this machine, if it is.
    available: Result<(), Unavailable>,
    /// The preload's path: checked when the sandbox is built if it was given explicitly,
    /// extracted on first use otherwise (a run whose outer filter is exact never loads it,
    /// and extracting means reading and hashing the whole library).
    preload: OnceLock<Result<PathBuf, ExtractError>>,
    /// The outer filter, compiled once; each command gets its own execve address.
    outer: Option<outer::Template>,
    /// The outer filter enforces the profile exactly: the preload need not stack it again.
    outer_exact: bool,
    /// Names this sandbox's filter among others of the process: profile name plus a digest of
    /// its rules and action (two custom profiles share the name `custom`).
    key: String,
}

/// The calls a child makes between installing a notifying filter and exec (handing over the
/// listener); without them the filter keeps `trap` and violations go unnamed.
pub const HANDOVER_CALLS: &[&str] = &["futex", "close", "rt_sigprocmask", "exit_group"];

/// Whether `policy` allows every one of [`HANDOVER_CALLS`] whatever the arguments.
fn handover_allowed(policy: &sandbox_policy::Policy) -> bool {
    HANDOVER_CALLS.iter().all(|name| {
        sandbox_policy::NATIVE
            .syscall_number(name)
            .is_some_and(|nr| policy.constant_decision(nr) == Some(Action::Allow))
    })
}

/// What admission control let through: the program gets a filter.
struct Admitted {
    confine_only: bool,
    privileged: bool,
}

/// How a program the caller starts itself is confined (see [`Sandbox::plan`]).
#[derive(Debug)]
pub struct Plan {
    /// `exact` when a filter is installed, `none` otherwise.
    pub planned: Sandboxed,
    /// Warnings the caller must show (one line each).
    pub warnings: Vec<String>,
    /// The filter for the child to install between clone and exec, when one was asked for.
    pub filter: Option<Vec<Insn>>,
    /// The filter notifies a listener instead of trapping: install it with one.
    pub notify: bool,
    /// Variables that make the preload stack the profile's exact filter on top of the outer
    /// one (which carries loader exemptions the profile lacks); the child's descriptor 3 must
    /// be a [`ReportPipe`]'s write end, whose handshake confirms the stacking. Empty when the
    /// outer filter is exact by itself (every built-in profile).
    pub preload_env: Vec<(&'static str, String)>,
}

impl Sandbox {
    /// Checks the platform and provides the preload once; profile errors were caught when the
    /// profile was parsed.
    pub fn new(options: Options) -> Result<Sandbox, SandboxError> {
        let available = match platform::check() {
            Err(why) if options.require_sandbox => return Err(SandboxError::Unavailable(why)),
            other => other,
        };
        let preload = OnceLock::new();
        if let (Ok(()), Some(p)) = (&available, &options.libsandbox_path) {
            // A library the caller named is checked now: a wrong one is a configuration error
            // even for runs that would not load it.
            let _ = preload.set(Ok(extract::explicit(
                p,
                options.libsandbox_sha256.as_deref(),
            )?));
        }
        tracing::debug!(profile = %options.profile.name(), "sandbox ready");
        let base = outer::base_policy(&options.profile, options.on_violation)
            .map_err(|e| SandboxError::Profile(options.profile.name().to_string(), e))?;
        let outer_exact = base.as_ref().is_some_and(|b| b.exact);
        let outer = base
            .map(|b| outer::Template::new(b.policy))
            .transpose()
            .map_err(|e| SandboxError::Profile(options.profile.name().to_string(), e))?;
        let key = {
            use std::hash::{Hash, Hasher};
            let p = &options.profile;
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (&p.allow(), &p.deny(), p.default_action().to_string()).hash(&mut h);
            options.on_violation.map(|a| a.to_string()).hash(&mut h);
            format!("{}#{:016x}", p.name(), h.finish())
        };
        Ok(Sandbox {
            options,
            available,
            preload,
            outer,
            outer_exact,
            key,
        })
    }

    /// The profile's filter policy as the outer filter enforces it (`None`: no filter).
    pub(crate) fn profile_policy(&self) -> Option<&sandbox_policy::Policy> {
        self.outer.as_ref().map(|t| t.policy())
    }

    /// A key that is the same for two sandboxes of this process exactly when their filters
    /// are (a spawner thread per filter).
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The options this sandbox was built with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The preload's path, extracting the embedded library on first use; only called when
    /// the sandbox is available here.
    fn preload_file(&self) -> Result<&Path, SandboxError> {
        self.preload
            .get_or_init(extract::extracted)
            .as_deref()
            .map_err(|e| SandboxError::Extract(e.clone()))
    }

    /// The preload's path, when the sandbox is available here and the library could be
    /// provided.
    pub fn preload_path(&self) -> Option<&Path> {
        self.available.as_ref().ok()?;
        self.preload_file().ok()
    }

    /// Provides the preload outside `writable`, the places the commands that load it may
    /// write (the preload route's workspace, `--allow-write` paths and TMPDIR), and returns its
    /// path: the embedded library is extracted to a directory none of them holds
    /// ([`extract::extracted_outside`]); a library provided before (one the caller named, or
    /// one already extracted) that lies in one of them is refused. `None` when the sandbox is
    /// unavailable here (nothing is extracted). Call it before [`Sandbox::env`], which then
    /// hands out the same path.
    pub fn preload_outside(&self, writable: &[PathBuf]) -> Result<Option<&Path>, SandboxError> {
        if self.available.is_err() {
            return Ok(None);
        }
        let path = self
            .preload
            .get_or_init(|| extract::extracted_outside(writable))
            .as_deref()
            .map_err(|e| SandboxError::Extract(e.clone()))?;
        match extract::writable_container(path, writable) {
            Some(place) => Err(SandboxError::Extract(ExtractError::InsideWritable {
                path: path.to_path_buf(),
                place: place.to_path_buf(),
            })),
            None => Ok(Some(path)),
        }
    }

    /// The preload a job of this sandbox loads: the library already provided, when the
    /// profile needs the preload's exact filter (its outer filter is not exact by itself).
    /// `None` for every built-in profile, whose jobs do not load it.
    pub(crate) fn loaded_preload(&self) -> Option<&Path> {
        if self.outer_exact || self.outer.is_none() {
            return None;
        }
        self.preload.get()?.as_deref().ok()
    }

    /// The preload's variables for this sandbox's profile (for `sandbox env`); fails when the
    /// library cannot be provided.
    pub fn env(&self) -> Result<Vec<(&'static str, String)>, SandboxError> {
        let mut v = Vec::new();
        if self.available.is_ok() && !self.options.profile.is_unrestricted() {
            v.push(("LD_PRELOAD", self.preload_file()?.display().to_string()));
        }
        v.extend(self.options.profile.env(self.options.on_violation));
        Ok(v)
    }

    /// Decides whether `program` gets a filter: `None` when it runs without one (unrestricted
    /// profile, sandbox unavailable, unconfinable program allowed to run; warnings say so),
    /// an error when admission control blocks it.
    fn admit(
        &self,
        program: &Path,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Admitted>, SandboxError> {
        if self.options.profile.is_unrestricted() {
            tracing::info!(profile = %self.options.profile.name(), program = %program.display(), "unrestricted: no filter");
            return Ok(None);
        }
        if let Err(why) = &self.available {
            tracing::warn!(%why, "sandbox unavailable, running unsandboxed");
            warnings.push(format!(
                "sandbox: unavailable ({why}); running {} unsandboxed",
                program.display()
            ));
            return Ok(None);
        }
        let verdict = admission::classify_cached(program);
        let confine_only = match verdict.preload {
            Ok(()) => false,
            Err(reason) => match self.options.static_binary {
                // On a system of static programs (its /bin/sh is one) `block` would refuse
                // everything; where the outer filter enforces the profile exactly, a native
                // static program is confined as fully as a dynamic one, so it runs, silently.
                StaticBinaryAction::Block
                    if self.outer_exact
                        && admission::native_without_preload(&reason)
                        && admission::static_system() =>
                {
                    tracing::info!(%reason, "static system: the outer filter enforces the profile");
                    true
                }
                StaticBinaryAction::Block => {
                    tracing::warn!(%reason, "refused by admission control");
                    return Err(SandboxError::Blocked(reason));
                }
                StaticBinaryAction::Warn => {
                    tracing::warn!(%reason, "running unconfined (static-binary warn)");
                    warnings.push(format!("sandbox: warning: {reason}; running it UNCONFINED"));
                    return Ok(None);
                }
                StaticBinaryAction::Allow => {
                    tracing::info!(%reason, "running unconfined (static-binary allow)");
                    return Ok(None);
                }
                StaticBinaryAction::Confine => {
                    tracing::info!(%reason, "confined by the outer filter only");
                    let how = if self.outer_exact {
                        "the outer filter enforces the profile"
                    } else {
                        "confined by the outer filter only"
                    };
                    warnings.push(format!("sandbox: notice: {reason}; {how}"));
                    true
                }
            },
        };
        Ok(Some(Admitted {
            confine_only,
            privileged: verdict.privileged,
        }))
    }

    /// The outer filter's policy (the profile, with `trap` where `on_violation` says so) when it
    /// enforces the profile exactly; `None` for a profile without filter or one that needs the
    /// preload's inner filter.
    pub fn exact_outer_policy(&self) -> Option<&sandbox_policy::Policy> {
        self.outer
            .as_ref()
            .filter(|_| self.outer_exact)
            .map(|t| t.policy())
    }

    /// The outer filter [`Sandbox::plan`] attaches for the path string at `path_addr`, and
    /// whether it notifies a listener (`Plan::notify`); `None` for a profile without filter.
    /// It depends on the profile and the address only, not on the program: a caller starting
    /// many programs from one path buffer (a session's resident) compiles it once and pairs
    /// it with `plan(program, None)` per program.
    pub fn attached_filter(
        &self,
        path_addr: u64,
    ) -> Result<Option<(Vec<Insn>, bool)>, SandboxError> {
        let Some(template) = self.outer.as_ref() else {
            return Ok(None);
        };
        let mut prog = template
            .program(path_addr)
            .map_err(|e| SandboxError::Profile(self.options.profile.name().to_string(), e))?;
        let mut notify = false;
        if handover_allowed(template.policy()) {
            notify = sandbox_policy::bpf::retarget(
                &mut prog,
                sandbox_policy::action::RET_TRAP,
                sandbox_policy::action::RET_USER_NOTIF,
            ) > 0;
        }
        Ok(Some((prog, notify)))
    }

    /// Decides how `program` is confined when the caller starts it itself, without the
    /// preload (the exec runtime). With `attach = Some(path_addr)` it also compiles the outer
    /// filter for the child to install, with the first `execve` exempted for the path string at
    /// `path_addr` and the profile's `trap` returns turned into `SECCOMP_RET_USER_NOTIF` when
    /// the handover calls are allowed (`Plan::notify`: install it with a listener and name
    /// violations from its notifications). With `None` the caller's child inherits the filter
    /// from elsewhere (a spawner thread) and nothing is compiled. Fails when the profile needs
    /// the preload's inner filter to be exact (a custom profile lacking loader calls; no
    /// built-in one does) and no filter is to be attached here; with `attach`, such a profile
    /// gets the outer filter with loader exemptions plus the preload's exact filter
    /// ([`Plan::preload_env`]), or the outer filter alone for a program the preload cannot
    /// enter (`outer-only`).
    pub fn plan(&self, program: &Path, attach: Option<u64>) -> Result<Plan, SandboxError> {
        let mut plan = Plan {
            planned: Sandboxed::None,
            warnings: Vec::new(),
            filter: None,
            notify: false,
            preload_env: Vec::new(),
        };
        let Some(admitted) = self.admit(program, &mut plan.warnings)? else {
            return Ok(plan);
        };
        plan.planned = Sandboxed::Exact;
        if !self.outer_exact {
            if attach.is_none() {
                return Err(SandboxError::NeedsPreload(
                    self.options.profile.name().to_string(),
                ));
            }
            if admitted.confine_only {
                plan.planned = Sandboxed::OuterOnly;
            } else {
                plan.preload_env
                    .push(("LD_PRELOAD", self.preload_file()?.display().to_string()));
                plan.preload_env
                    .extend(self.options.profile.env(self.options.on_violation));
                plan.preload_env
                    .push(("SECCOMP_REPORT_FD", "3".to_string()));
            }
        }
        if let Some(path_addr) = attach {
            let (prog, notify) = self
                .attached_filter(path_addr)?
                .expect("a filtering profile has an outer policy");
            plan.filter = Some(prog);
            plan.notify = notify;
        }
        tracing::info!(
            profile = %self.options.profile.name(),
            program = %program.display(),
            attach = attach.is_some(),
            privileged = admitted.privileged,
            notify = plan.notify,
            "sandbox planned"
        );
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_filtering_builtin_profile_allows_the_listener_handover() {
        let mut checked = 0;
        for name in Profile::builtin_names() {
            let profile = Profile::builtin(name).unwrap();
            let Some(base) = outer::base_policy(&profile, Some(Action::Trap)).unwrap() else {
                continue;
            };
            assert!(handover_allowed(&base.policy), "{name}");
            checked += 1;
        }
        assert!(checked >= 5);
        // A profile without them keeps `trap` (violations unnamed) rather than breaking.
        let bare = Profile::from_toml("bare", "description = \"only read\"\nallow = [\"read\"]\n")
            .unwrap();
        let base = outer::base_policy(&bare, Some(Action::Trap))
            .unwrap()
            .unwrap();
        assert!(!handover_allowed(&base.policy));
    }
}
