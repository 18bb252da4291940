//! The exec request: its fields, their defaults and bounds, and validation that names the
//! offending field and the reason (code-injecting variables such as `LD_PRELOAD` included).

use super::env;
use super::isolation::Mode as IsolationMode;
pub use super::limits::Limits;
use super::limits::Rlimits;
use crate::landlock::{self, Field, Mode as LandlockMode};
pub(crate) use crate::refusal::io_reason;
pub use crate::refusal::Refusal;
use crate::sandbox::StaticBinaryAction;
use sandbox_policy::profile::{Profile, ProfileError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default wall-clock limit, in seconds.
pub const DEFAULT_TIMEOUT_S: f64 = 60.0;
/// Largest wall-clock limit, in seconds: a day. Builds, test suites and package installs
/// run for hours; the default stays a minute, so only a request that asks waits longer.
/// (The CPU-time limit, which follows the timeout by default, has the same ceiling.)
pub const MAX_TIMEOUT_S: f64 = 86_400.0;
/// Smallest wall-clock limit, in seconds.
pub const MIN_TIMEOUT_S: f64 = 1.0;
/// Default cap on each of stdout and stderr, in bytes.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 256 * 1024;
/// Smallest allowed output cap (1 KiB).
pub const MIN_MAX_OUTPUT_BYTES: u64 = 1024;
/// Largest allowed output cap (4 MiB per stream).
pub const MAX_MAX_OUTPUT_BYTES: u64 = 4 * 1024 * 1024;
/// Largest `stdin` text, in bytes.
pub const MAX_STDIN_BYTES: usize = 4 * 1024 * 1024;
/// The profile used when a request names none.
pub const DEFAULT_PROFILE: &str = "minimal";

/// One request: run `argv` once and report what happened.
///
/// This type is the JSON schema of `sandbox exec --json` and `sandbox serve` too: it
/// serializes to the JSON those front ends read, and deserializes (with serde, or
/// [`Request::from_json`]) through the checks and messages they give.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Request {
    /// The program and its arguments; `argv[0]` is an absolute path. Never run by a shell.
    pub argv: Vec<String>,
    /// Working directory (absolute, existing); the host's own when absent.
    pub cwd: Option<String>,
    /// Variables added after the environment is scrubbed.
    pub env: BTreeMap<String, String>,
    /// Wall-clock limit in seconds (1 to 86400).
    pub timeout_s: f64,
    /// Cap on each of stdout and stderr, in bytes (1 KiB to 4 MiB).
    pub max_output_bytes: u64,
    /// A built-in profile: minimal, network, write, no-exec, shell or unrestricted.
    pub profile: String,
    /// What to do with a program the preload cannot enter (block, warn, allow, confine).
    pub static_binary: StaticBinaryAction,
    /// Refuse to run when the sandbox is unavailable on this machine.
    pub require_sandbox: bool,
    /// Text written to the program's standard input (closed after it); `/dev/null` when absent.
    pub stdin: Option<String>,
    /// Overrides of the resource limits.
    pub limits: Limits,
    /// The Landlock layer: `required`, `preferred` (default: runs on an older kernel and says
    /// what is missing) or `off`.
    pub landlock: LandlockMode,
    /// The directory the program may write beneath (absolute, existing). Default: the working
    /// directory for profiles that allow file changes, nothing for read-only ones.
    pub workspace: Option<String>,
    /// Lets `workspace` be `/`, the home directory, a parent of either or a directory holding
    /// a credential path, which are refused otherwise; the result's `warnings` then says so.
    pub allow_broad_workspace: bool,
    /// More directories or files the program may write (absolute, existing).
    pub writable_paths: Vec<String>,
    /// Paths the program must not read, added to the default list of credentials under
    /// `$HOME` (absolute; they need not exist).
    pub deny_read: Vec<String>,
    /// With a profile that has network: the only TCP ports it may connect to.
    pub connect_ports: Option<Vec<u16>>,
    /// Names of `env` variables whose values the program gets but must not print: their
    /// appearance in stdout or stderr (plain, URL-encoded, base64 or hex) is reported in the
    /// result's `leaks`.
    pub secret_env: Vec<String>,
    /// Replace every secret and token found in the output with `[REDACTED:<name>]`.
    pub redact_secrets: bool,
    /// Run even as root below the isolated tier. With namespaces, Landlock and the filter
    /// (the isolated tier) root's reach is the job's view: the host's tree read-only,
    /// credentials unreadable. Below it root passes permission checks Landlock cannot cover
    /// (the mode and owner of every file), so such a request is refused unless this says so.
    pub allow_root: bool,
    /// What a call the profile refuses does: `report` (default: it fails with EPERM, or the
    /// errno the profile names, the program goes on, and the result lists it) or `kill`.
    pub on_violation: OnViolation,
    /// More allow-list entries for the profile (the list grammar, one entry per item).
    pub allow: Vec<String>,
    /// More deny-list entries for the profile.
    pub deny: Vec<String>,
    /// A profile file (absolute path, TOML like `profiles/*.toml`) used instead of `profile`.
    pub profile_file: Option<String>,
    /// Namespaces (own PID space and `/proc`, private `/tmp`, read-only `.git/hooks`, the
    /// repository's git configuration checked after the job): `required`, `preferred`
    /// (default: without them where the machine has none, said on every run) or `off`.
    pub isolation: IsolationMode,
    /// Paths mounted read-only over themselves (absolute; one that does not exist must be
    /// inside the workspace, and cannot be created).
    pub read_only_paths: Vec<String>,
    /// Host unix sockets the command may connect to (absolute paths): with namespaces every
    /// other socket bound outside the job's writable places is covered in its view.
    pub allow_unix_sockets: Vec<String>,
    /// Agents' and editors' control files the command may change at the top of its workspace
    /// (entries of `sandbox profiles control-files`, such as `.claude` or `.envrc`); the others
    /// are put back after it.
    pub allow_control_files: Vec<String>,
    /// The network: `host`, `none` (loopback only) or `proxy` (only the allowlist proxy);
    /// absent, it follows the other network fields and the profile (docs/isolation.md).
    pub network: Option<crate::network::Mode>,
    /// Domains the proxy lets through (`example.com`, `*.example.com`); implies `proxy`.
    pub allow_domains: Vec<String>,
    /// Names pinned to addresses for the proxy (`{"api.example.com": "127.0.0.1"}`).
    pub resolve: BTreeMap<String, String>,
    /// Ports of the host's loopback reachable at the same address inside (`none`, `proxy`).
    pub host_ports: Vec<u16>,
    /// The job's home: `persistent` (default: the sandbox home of the user and workspace, kept between
    /// commands, with the package caches), `private` (`HOME=/tmp`) or `real` (read-only).
    pub home: super::home::Mode,
}

/// What a call the profile refuses does to the program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnViolation {
    /// The call fails with an errno (EPERM unless the profile's default action names
    /// another), the program goes on, and the result counts it.
    #[default]
    Report,
    /// The program is ended by SIGSYS, and the result names the call.
    Kill,
}

/// Whom messages are written for: flags for command-line users, field names for JSON clients.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Audience {
    /// A JSON client (`exec --json`, `serve`, the library).
    #[default]
    Json,
    /// A command-line user (`sandbox run`).
    Cli,
}

/// The deny-list entry that keeps MPTCP sockets from bypassing Landlock's TCP port rules.
pub const MPTCP_GUARD: &str = "socket(a2 == IPPROTO_MPTCP)=EPROTONOSUPPORT";

/// What the Landlock layer is asked to do, resolved against the profile when the job runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathRules {
    /// required, preferred or off.
    pub mode: LandlockMode,
    /// The workspace, when one was named.
    pub workspace: Option<PathBuf>,
    /// Extra writable paths.
    pub writable: Vec<PathBuf>,
    /// Extra paths denied for reading.
    pub deny_read: Vec<PathBuf>,
    /// TCP ports the program may connect to (network profiles only).
    pub connect_ports: Option<Vec<u16>>,
    /// The namespace layer's mode.
    pub isolation: IsolationMode,
    /// Paths to mount read-only over themselves.
    pub read_only: Vec<PathBuf>,
    /// Host unix sockets left reachable in the job's view.
    pub allowed_sockets: Vec<PathBuf>,
    /// Entries of the control-file list the job may change (module `control_guard`).
    pub allowed_controls: Vec<String>,
    /// The named workspace may be `/`, the home directory, a parent of either or a directory
    /// holding credentials (module `workspace`); the result then says so.
    pub allow_broad_workspace: bool,
}

/// Status of a program that exists but cannot be executed (as `env` and shells give).
pub const EXIT_CANNOT_EXECUTE: i32 = 126;
/// Status of a program that was not found.
pub const EXIT_NOT_FOUND: i32 = 127;

/// How a program's standard streams are connected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Streams {
    /// stdin from the request's text (or `/dev/null`), stdout and stderr captured with caps
    /// (exec requests).
    #[default]
    Capture,
    /// The host's own standard streams, passed through (`sandbox run`).
    Inherit,
    /// A session's resident process: stdin is this socket (the session's control channel,
    /// duplicated for the child), stdout and stderr captured; no filter of its own (module
    /// `session`).
    Session(std::os::fd::RawFd),
}

/// A request that passed validation, with everything resolved.
#[derive(Clone, Debug)]
pub struct Validated {
    /// `argv[0]` as a path.
    pub program: PathBuf,
    /// The whole argument vector.
    pub argv: Vec<String>,
    /// Working directory, if one was given.
    pub cwd: Option<PathBuf>,
    /// The child's complete environment (safe list, then the request's additions). Shared:
    /// a session's commands that change only their arguments reuse one validation, whose two
    /// dozen variables were copied for each (with that and the session's request no longer
    /// copied, the host's CPU per command went from 55-58 to 52-54 µs, docs/benchmarks.md).
    pub env: std::sync::Arc<[(String, String)]>,
    /// Wall-clock limit (`None`: none; only front ends with a terminal user allow that).
    pub timeout: Option<Duration>,
    /// How the standard streams are connected.
    pub streams: Streams,
    /// Cap per stream.
    pub max_output_bytes: usize,
    /// The built-in profile's name.
    pub profile: String,
    /// Static-binary action.
    pub static_binary: StaticBinaryAction,
    /// Refuse when unavailable.
    pub require_sandbox: bool,
    /// Standard input text.
    pub stdin: Option<String>,
    /// The resource limits to set in the child.
    pub rlimits: Rlimits,
    /// The Landlock layer's rules.
    pub paths: PathRules,
    /// The secret variables, `(name, value)`, searched for in the output.
    pub secrets: Vec<(String, String)>,
    /// Replace what the leak scan finds in the returned output.
    pub redact_secrets: bool,
    /// Root may run below the isolated tier (the request's `allow_root`).
    pub allow_root: bool,
    /// Report (deny with an errno) or kill.
    pub on_violation: OnViolation,
    /// The errno refused calls fail with in report mode, overriding the profile's.
    pub deny_errno: Option<u16>,
    /// Whom hints are written for.
    pub audience: Audience,
    /// The profile itself when the request changed it (`allow`, `deny`, `profile_file`);
    /// `None` for a built-in profile as it is.
    pub custom: Option<crate::policy::profile::Profile>,
    /// The network mode and the proxy's rules.
    pub network: crate::network::Network,
    /// The job's home, when it is not the private `HOME=/tmp` (module `home`).
    pub home: Option<super::home::Home>,
    /// The persistent home asked for could be made nowhere here ([`super::home::NOWHERE`]):
    /// the job has the private one, and its result says so.
    pub home_nowhere: bool,
}

impl Request {
    /// A request for `argv` with every other field at its default.
    pub fn new<I, S>(argv: I) -> Request
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Request {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            env: BTreeMap::new(),
            timeout_s: DEFAULT_TIMEOUT_S,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            profile: DEFAULT_PROFILE.to_string(),
            static_binary: StaticBinaryAction::Block,
            require_sandbox: false,
            stdin: None,
            limits: Limits::default(),
            landlock: LandlockMode::default(),
            workspace: None,
            allow_broad_workspace: false,
            writable_paths: Vec::new(),
            deny_read: Vec::new(),
            connect_ports: None,
            secret_env: Vec::new(),
            redact_secrets: false,
            allow_root: false,
            on_violation: OnViolation::Report,
            allow: Vec::new(),
            deny: Vec::new(),
            profile_file: None,
            isolation: IsolationMode::default(),
            read_only_paths: Vec::new(),
            allow_unix_sockets: Vec::new(),
            allow_control_files: Vec::new(),
            network: None,
            allow_domains: Vec::new(),
            resolve: BTreeMap::new(),
            host_ports: Vec::new(),
            home: super::home::Mode::default(),
        }
    }

    /// Checks every rule and resolves the request; the first failure is returned.
    pub fn validate(&self) -> Result<Validated, Refusal> {
        let argv = validate_argv(&self.argv)?;
        let cwd = match &self.cwd {
            None => None,
            Some(c) => Some(validate_cwd(c)?),
        };
        for (k, v) in &self.env {
            env::check(k, v).map_err(|r| Refusal::new(format!("env.{}", k.escape_debug()), r))?;
        }

        if !self.timeout_s.is_finite() || !(MIN_TIMEOUT_S..=MAX_TIMEOUT_S).contains(&self.timeout_s)
        {
            return Err(Refusal::new(
                "timeout_s",
                format!(
                    "must be between {MIN_TIMEOUT_S} and {MAX_TIMEOUT_S} seconds, got {}",
                    self.timeout_s
                ),
            ));
        }
        if !(MIN_MAX_OUTPUT_BYTES..=MAX_MAX_OUTPUT_BYTES).contains(&self.max_output_bytes) {
            return Err(Refusal::new(
                "max_output_bytes",
                format!(
                    "must be between {MIN_MAX_OUTPUT_BYTES} (1 KiB) and {MAX_MAX_OUTPUT_BYTES} (4 MiB), got {}",
                    self.max_output_bytes
                ),
            ));
        }
        let custom = self.custom_profile()?;
        if custom.is_none()
            && !crate::policy::profile::Profile::builtin_names().any(|n| n == self.profile)
        {
            let names: Vec<_> = crate::policy::profile::Profile::builtin_names().collect();
            return Err(Refusal::new(
                "profile",
                format!(
                    "unknown profile `{}` (built-in profiles: {})",
                    self.profile,
                    names.join(", ")
                ),
            ));
        }
        if let Some(s) = &self.stdin {
            if s.len() > MAX_STDIN_BYTES {
                return Err(Refusal::new(
                    "stdin",
                    format!("longer than {MAX_STDIN_BYTES} bytes"),
                ));
            }
        }
        let rlimits = Rlimits::resolve(self.timeout_s, &self.limits)?;
        let mut paths = self.path_rules()?;
        let secrets = self.secrets()?;
        let profile = custom
            .as_ref()
            .map_or_else(|| self.profile.clone(), |p| p.name().to_string());
        // Last: a request that is wrong in any other way is refused as such (125) first.
        let network = crate::network::Network::from_fields(
            self.network,
            &self.allow_domains,
            &self.resolve,
            &self.host_ports,
        )?;
        // The home is made (once per process) only for a request valid in every other way.
        // A request that sets `HOME` itself has chosen its home: the sandbox's home and what
        // goes with it (the caches below it, git's and npm's user configuration pinned to empty
        // files beside it) would contradict it (git would ignore that home's `.gitconfig`).
        let persistent = self.home == super::home::Mode::Persistent;
        let home = if self.env.contains_key("HOME") {
            None
        } else {
            let workspace = match (&paths.workspace, &cwd) {
                (Some(w), _) | (None, Some(w)) => w.clone(),
                (None, None) => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            };
            super::home::resolve(self.home, &workspace).map_err(|e| Refusal::new("home", e))?
        };
        let home_nowhere = persistent && home.is_none() && !self.env.contains_key("HOME");
        let mut env = env::scrubbed(env::Base::Fixed, &self.env);
        if let Some(h) = &home {
            super::home::apply(h, &mut env, &self.env, &mut paths.writable);
        }
        let program = resolve_program(&argv[0], search_path(&env))?;
        Ok(Validated {
            program,
            argv,
            cwd,
            env: env.into(),
            timeout: Some(Duration::from_secs_f64(self.timeout_s)),
            streams: Streams::Capture,
            max_output_bytes: self.max_output_bytes as usize,
            profile,
            static_binary: self.static_binary,
            require_sandbox: self.require_sandbox,
            stdin: self.stdin.clone(),
            rlimits,
            paths,
            secrets,
            redact_secrets: self.redact_secrets,
            allow_root: self.allow_root,
            on_violation: self.on_violation,
            deny_errno: None,
            audience: Audience::Json,
            custom,
            network,
            home,
            home_nowhere,
        })
    }

    /// The validation of `base`'s request with arguments `argv` instead: only `argv` and the
    /// program it names are checked and resolved again. A session's command that changes
    /// nothing but its arguments is validated so, without copying its session's request or
    /// redoing its environment, home and paths on every command.
    pub(crate) fn validate_argv_on(
        argv: &[String],
        base: &Validated,
    ) -> Result<Validated, Refusal> {
        let argv = validate_argv(argv)?;
        let program = resolve_program(&argv[0], search_path(&base.env))?;
        Ok(Validated {
            program,
            argv,
            ..base.clone()
        })
    }

    /// The `secret_env` names resolved to their values in `env`: each must name a variable of
    /// the request once, with a value long enough to be told apart from ordinary output.
    fn secrets(&self) -> Result<Vec<(String, String)>, Refusal> {
        use super::leaks::{MAX_SECRETS, MIN_SECRET_BYTES};
        if self.secret_env.len() > MAX_SECRETS {
            return Err(Refusal::new(
                "secret_env",
                format!("at most {MAX_SECRETS} names, got {}", self.secret_env.len()),
            ));
        }
        let mut out: Vec<(String, String)> = Vec::with_capacity(self.secret_env.len());
        for (i, name) in self.secret_env.iter().enumerate() {
            let field = format!("secret_env[{i}]");
            let shown: String = name
                .chars()
                .take(64)
                .collect::<String>()
                .escape_debug()
                .to_string();
            let Some(value) = self.env.get(name) else {
                return Err(Refusal::new(
                    field,
                    format!("`{shown}` is not a variable of `env` (a secret must be passed in `env` to be watched for)"),
                ));
            };
            if out.iter().any(|(n, _)| n == name) {
                return Err(Refusal::new(field, format!("`{shown}` is named twice")));
            }
            if value.len() < MIN_SECRET_BYTES {
                return Err(Refusal::new(
                    field,
                    format!(
                        "the value of `{shown}` is {} bytes; secrets shorter than {MIN_SECRET_BYTES} bytes cannot be told apart from ordinary output",
                        value.len()
                    ),
                ));
            }
            out.push((name.clone(), value.clone()));
        }
        Ok(out)
    }

    /// The profile as `profile_file`, `allow` and `deny` change it (`None`: unchanged).
    fn custom_profile(&self) -> Result<Option<crate::policy::profile::Profile>, Refusal> {
        use crate::policy::profile::Profile;
        if self.profile_file.is_none() && self.allow.is_empty() && self.deny.is_empty() {
            return Ok(None);
        }
        // Counted before anything is parsed: naming a bad entry checks each one alone, which
        // for a list of a hundred thousand took minutes.
        for (field, list) in [("allow", &self.allow), ("deny", &self.deny)] {
            if list.len() > crate::policy::MAX_ENTRIES {
                return Err(Refusal::new(
                    field,
                    format!(
                        "{} entries; at most {} are accepted",
                        list.len(),
                        crate::policy::MAX_ENTRIES
                    ),
                ));
            }
        }
        let base = match &self.profile_file {
            Some(f) => {
                if self.profile != DEFAULT_PROFILE {
                    return Err(Refusal::new(
                        "profile_file",
                        "give either profile or profile_file, not both",
                    ));
                }
                if f.contains('\0') || !Path::new(f).is_absolute() {
                    return Err(Refusal::new(
                        "profile_file",
                        format!("must be an absolute path, got `{}`", f.escape_debug()),
                    ));
                }
                profile_file_readable(Path::new(f), &self.deny_read)?;
                Profile::load(Path::new(f))
                    .map_err(|e| Refusal::new("profile_file", e.to_string()))?
            }
            None => Profile::builtin(&self.profile)
                .map_err(|e| Refusal::new("profile", e.to_string()))?,
        };
        let p = match base.extended(&self.allow, &self.deny) {
            Ok(p) => p,
            Err(whole) => {
                // Each entry alone, so that the refusal names the one at fault.
                for (field, list) in [("allow", &self.allow), ("deny", &self.deny)] {
                    for (i, entry) in list.iter().enumerate() {
                        let one = std::slice::from_ref(entry);
                        let (a, d) = if field == "allow" {
                            (one, &[][..])
                        } else {
                            (&[][..], one)
                        };
                        base.extended(a, d).map_err(|e| {
                            let reason = e.list_entry().map_or_else(|| e.to_string(), |(_, r)| r);
                            Refusal::new(format!("{field}[{i}]"), reason)
                        })?;
                    }
                }
                return Err(Refusal::new("allow", whole.to_string()));
            }
        };
        // Too large a filter shows only when compiled.
        p.policy(crate::policy::NATIVE, None)
            .map_err(|e| Refusal::new("allow", format!("profile {}: {e}", p.name())))?;
        Ok(Some(p))
    }

    fn path_rules(&self) -> Result<PathRules, Refusal> {
        PathRules::new(
            self.landlock,
            self.workspace.as_deref(),
            &self.writable_paths,
            &self.deny_read,
            self.connect_ports.as_deref(),
        )?
        .with_isolation(self.isolation, &self.read_only_paths)?
        .with_unix_sockets(&self.allow_unix_sockets)?
        .with_control_files(&self.allow_control_files)?
        .with_broad_workspace(self.allow_broad_workspace)
    }
}

impl PathRules {
    /// Checks the Landlock layer's fields (named as in requests: `workspace`,
    /// `writable_paths[i]`, `deny_read[i]`, `connect_ports`) and resolves them.
    pub fn new(
        mode: LandlockMode,
        workspace: Option<&str>,
        writable_paths: &[String],
        deny_read: &[String],
        connect_ports: Option<&[u16]>,
    ) -> Result<PathRules, Refusal> {
        let refusal = |e: landlock::LandlockError| {
            let field = e.field().map_or("landlock", Field::as_str);
            Refusal::new(field, e.to_string())
        };
        let workspace = match workspace {
            None => None,
            Some(w) => {
                let p = PathBuf::from(w);
                landlock::validate_writable(Field::Workspace, &p).map_err(refusal)?;
                if !p.is_dir() {
                    return Err(Refusal::new(
                        "workspace",
                        format!("`{w}` is not a directory"),
                    ));
                }
                Some(p)
            }
        };
        let mut writable = Vec::new();
        for (i, w) in writable_paths.iter().enumerate() {
            let p = PathBuf::from(w);
            landlock::validate_writable(Field::WritablePaths, &p)
                .map_err(|e| Refusal::new(format!("writable_paths[{i}]"), e.to_string()))?;
            writable.push(p);
        }
        let mut denied = Vec::new();
        for (i, d) in deny_read.iter().enumerate() {
            if d.contains('\0') || d.contains('\n') || !Path::new(d).is_absolute() {
                return Err(Refusal::new(
                    format!("deny_read[{i}]"),
                    format!("must be an absolute path without NUL or newline, got `{d}`"),
                ));
            }
            denied.push(PathBuf::from(d));
        }
        if let Some(ports) = connect_ports {
            if ports.is_empty() || ports.contains(&0) {
                return Err(Refusal::new(
                    "connect_ports",
                    "must list at least one port, each between 1 and 65535",
                ));
            }
        }
        Ok(PathRules {
            mode,
            workspace,
            writable,
            deny_read: denied,
            connect_ports: connect_ports.map(<[u16]>::to_vec),
            isolation: IsolationMode::default(),
            read_only: Vec::new(),
            allowed_sockets: Vec::new(),
            allowed_controls: Vec::new(),
            allow_broad_workspace: false,
        })
    }

    /// Adds the namespace layer's fields (`isolation`, `read_only_paths[i]`: absolute, no
    /// NUL or newline; whether they exist is checked when the job runs, against its
    /// workspace).
    pub fn with_isolation(
        mut self,
        mode: IsolationMode,
        read_only: &[String],
    ) -> Result<PathRules, Refusal> {
        // The binds are made in the job's mount namespace: with none, the paths would stay
        // writable while the caller believes them protected.
        if mode == IsolationMode::Off && !read_only.is_empty() {
            return Err(Refusal::new(
                "read_only_paths",
                "needs the namespace layer, which isolation off turns off",
            ));
        }
        for (i, p) in read_only.iter().enumerate() {
            if p.contains('\0') || p.contains('\n') || !Path::new(p).is_absolute() {
                return Err(Refusal::new(
                    format!("read_only_paths[{i}]"),
                    format!("must be an absolute path without NUL or newline, got `{p}`"),
                ));
            }
            self.read_only.push(PathBuf::from(p));
        }
        self.isolation = mode;
        Ok(self)
    }

    /// Adds the host unix sockets the job may reach (`allow_unix_sockets[i]`: absolute, no
    /// NUL or newline; canonicalised when they exist, so that a link names its socket).
    pub fn with_unix_sockets(mut self, sockets: &[String]) -> Result<PathRules, Refusal> {
        for (i, p) in sockets.iter().enumerate() {
            if p.is_empty() || p.contains('\0') || p.contains('\n') || !Path::new(p).is_absolute() {
                return Err(Refusal::new(
                    format!("allow_unix_sockets[{i}]"),
                    format!("must be an absolute path without NUL or newline, got `{p}`"),
                ));
            }
            let path = PathBuf::from(p);
            self.allowed_sockets
                .push(std::fs::canonicalize(&path).unwrap_or(path));
        }
        Ok(self)
    }

    /// Adds the control files the job may change (`allow_control_files[i]`: an entry of the
    /// list as `sandbox profiles control-files` prints it, such as `.claude`).
    pub fn with_control_files(mut self, names: &[String]) -> Result<PathRules, Refusal> {
        for (i, n) in names.iter().enumerate() {
            let known = crate::control_files::all().iter().any(|e| &e.path == n);
            if !known {
                return Err(Refusal::new(
                    format!("allow_control_files[{i}]"),
                    format!(
                        "`{}` is not an entry of the control-file list (`sandbox profiles \
                         control-files` prints them: {})",
                        n.escape_debug(),
                        crate::control_files::all()
                            .iter()
                            .map(|e| e.path.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            if !self.allowed_controls.contains(n) {
                self.allowed_controls.push(n.clone());
            }
        }
        Ok(self)
    }

    /// Lets the named workspace be a broad one (`allow_broad_workspace`); refused without a
    /// named workspace, since the default one never may be broad.
    pub fn with_broad_workspace(mut self, allow: bool) -> Result<PathRules, Refusal> {
        if allow && self.workspace.is_none() {
            return Err(Refusal::new(
                "allow_broad_workspace",
                "applies to a named workspace only (the default one, the working directory, may never be broad)",
            ));
        }
        self.allow_broad_workspace = allow;
        Ok(self)
    }

    /// Whether Landlock's TCP port rules will be in force for the job.
    pub fn port_rules(&self) -> bool {
        self.mode != LandlockMode::Off && self.connect_ports.is_some()
    }

    /// `profile`, plus the refusal of MPTCP sockets when port rules are in force: Landlock's
    /// TCP rules do not cover MPTCP (Go's `net.Listen` and `net.Dial` use it by default), so a
    /// port list would otherwise be bypassed by asking for `IPPROTO_MPTCP`. The call fails with
    /// `EPROTONOSUPPORT`, on which programs fall back to plain TCP.
    pub fn guard(&self, profile: Profile) -> Result<Profile, ProfileError> {
        if self.port_rules() {
            profile.with_deny(MPTCP_GUARD)
        } else {
            Ok(profile)
        }
    }
}

fn validate_argv(argv: &[String]) -> Result<Vec<String>, Refusal> {
    if argv.is_empty() {
        return Err(Refusal::new("argv", "must be a non-empty list of strings"));
    }
    for (i, a) in argv.iter().enumerate() {
        if a.is_empty() {
            return Err(Refusal::new(format!("argv[{i}]"), "must not be empty"));
        }
        if a.contains('\0') {
            return Err(Refusal::new(format!("argv[{i}]"), "must not contain NUL"));
        }
    }
    Ok(argv.to_vec())
}

/// The `PATH` of a job's environment, where its program is looked up ("" without one).
fn search_path(env: &[(String, String)]) -> &str {
    env.iter()
        .find(|(k, _)| k == "PATH")
        .map_or("", |(_, v)| v.as_str())
}

/// The file `argv[0]` names, found as `execvp` finds it: a name with a slash is used as given
/// (absolute only: the host's working directory means nothing to the caller); a bare name is
/// looked up in the absolute directories of `search` (the request's `PATH`, else the scrubbed
/// default), where the first executable regular file wins and a non-executable match is
/// remembered for the status. Relative `PATH` entries are skipped: they would name the
/// host's directory, not the caller's. Not found gives 127, found but not executable 126.
fn resolve_program(name: &str, search: &str) -> Result<PathBuf, Refusal> {
    if name.contains('/') {
        let program = Path::new(name);
        if !program.is_absolute() {
            return Err(Refusal::new(
                "argv[0]",
                format!("must be an absolute path or a name looked up in PATH, got `{name}`"),
            ));
        }
        return match std::fs::metadata(program) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Refusal::cannot_run(
                "argv[0]",
                format!("`{name}`: does not exist"),
                EXIT_NOT_FOUND,
            )),
            Err(e) => Err(Refusal::cannot_run(
                "argv[0]",
                format!("`{name}`: {}", io_reason(&e)),
                EXIT_CANNOT_EXECUTE,
            )),
            Ok(m) if !m.is_file() => Err(Refusal::cannot_run(
                "argv[0]",
                format!("`{name}` is not a regular file"),
                EXIT_CANNOT_EXECUTE,
            )),
            Ok(_) if !executable(program) => Err(Refusal::cannot_run(
                "argv[0]",
                format!("`{name}`: permission denied (not executable)"),
                EXIT_CANNOT_EXECUTE,
            )),
            Ok(_) => Ok(program.to_path_buf()),
        };
    }
    let mut denied: Option<PathBuf> = None;
    for dir in search.split(':').filter(|d| d.starts_with('/')) {
        let candidate = Path::new(dir).join(name);
        match std::fs::metadata(&candidate) {
            Ok(m) if m.is_file() && executable(&candidate) => return Ok(candidate),
            Ok(_) => {
                denied.get_or_insert(candidate);
            }
            Err(_) => {}
        }
    }
    Err(match denied {
        Some(p) => Refusal::cannot_run(
            "argv[0]",
            format!(
                "`{name}`: found `{}` in PATH, but it is not an executable file",
                p.display()
            ),
            EXIT_CANNOT_EXECUTE,
        ),
        None => Refusal::cannot_run(
            "argv[0]",
            format!("`{name}`: not found in PATH `{search}`"),
            EXIT_NOT_FOUND,
        ),
    })
}

/// Whether the host may execute `path` (`faccessat(X_OK, AT_EACCESS)`): root passes only when
/// some execute bit is set, as `execve` requires.
fn executable(path: &Path) -> bool {
    crate::sys::executable(path)
}

fn validate_cwd(cwd: &str) -> Result<PathBuf, Refusal> {
    if cwd.contains('\0') {
        return Err(Refusal::new("cwd", "must not contain NUL"));
    }
    let p = Path::new(cwd);
    if !p.is_absolute() {
        return Err(Refusal::new(
            "cwd",
            format!("must be an absolute path, got `{cwd}`"),
        ));
    }
    match std::fs::metadata(p) {
        Err(e) => Err(Refusal::new("cwd", format!("`{cwd}`: {}", io_reason(&e)))),
        Ok(m) if !m.is_dir() => Err(Refusal::new("cwd", format!("`{cwd}` is not a directory"))),
        Ok(_) => Ok(p.to_path_buf()),
    }
}

/// Refuses a `profile_file` the request's program could not read itself: a credential store of
/// the list (docs/paths.md) or a `deny_read` entry, followed through symbolic links. The host
/// reads the file with the caller's rights, and a parse error quoting what it found (a value
/// in an `unknown action` message, say) would hand the caller what the sandbox hides.
fn profile_file_readable(file: &Path, deny_read: &[String]) -> Result<(), Refusal> {
    let ctx = crate::credentials::Context::current();
    // Resolved when it exists; a missing file is refused by the load with its own message.
    let real = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    for p in [file, real.as_path()] {
        if let Some(e) = crate::credentials::covering(p, &ctx) {
            return Err(Refusal::new(
                "profile_file",
                format!(
                    "`{}` is covered by the credential list's `{}` ({}), which commands may not read; name a profile file they could read",
                    file.display(),
                    e.path,
                    e.reason
                ),
            ));
        }
        if let Some(d) = deny_read.iter().find(|d| p.starts_with(d)) {
            return Err(Refusal::new(
                "profile_file",
                format!(
                    "`{}` is under deny_read `{d}`, which commands may not read; name a profile file they could read",
                    file.display()
                ),
            ));
        }
    }
    Ok(())
}
