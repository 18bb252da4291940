//! [`RequestBuilder`]: a [`Request`] put together in code, with an enum for every choice
//! (where the JSON form has `true`/`false`, the builder names the two cases), so that a call
//! reads as what it asks for.

use super::isolation::Mode as IsolationMode;
use super::request::{Limits, OnViolation, Request};
use super::result::{ExecError, ExecResult};
use super::run::exec;
use crate::landlock::Mode as LandlockMode;
use crate::network::Mode as NetworkMode;
use crate::sandbox::StaticBinaryAction;
use std::time::Duration;

/// Whether a request may run when the sandbox cannot work on this machine (the request's
/// `require_sandbox`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Requirement {
    /// Run it anyway, unconfined, and say so in the result's `warnings` (the default).
    #[default]
    BestEffort,
    /// Refuse to run it.
    Required,
}

/// What happens to secrets and tokens found in the output (the request's `redact_secrets`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Redaction {
    /// The output is returned as it was; the result's `leaks` lists what was found (the
    /// default).
    #[default]
    ReportOnly,
    /// Each one is replaced with `[REDACTED:<name>]` in the returned output, and listed.
    Redact,
}

/// Builds a [`Request`]; start it with [`Request::builder`].
///
/// Every setter stores its value as it is: the checks (paths exist, bounds, profile entries)
/// run once, when the request is run or [validated](Request::validate), and a refusal names
/// the request field at fault.
///
/// ```
/// use sandbox_host::exec::{Redaction, Request, Requirement};
/// use std::time::Duration;
///
/// let req = Request::builder(["/bin/echo", "hello"])
///     .timeout(Duration::from_secs(5))
///     .profile("minimal")
///     .sandbox(Requirement::BestEffort)
///     .redaction(Redaction::Redact)
///     .build();
/// assert_eq!(req.timeout_s, 5.0);
/// assert!(req.redact_secrets);
///
/// let result = req.run().unwrap();
/// assert_eq!(result.exit_code, Some(0));
/// assert_eq!(result.stdout, "hello\n");
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build` or `run`"]
pub struct RequestBuilder {
    request: Request,
}

impl Request {
    /// A builder for a request that runs `argv` (`argv[0]` an absolute path or a name looked
    /// up in `PATH`), every other field at its default.
    pub fn builder<I, S>(argv: I) -> RequestBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RequestBuilder {
            request: Request::new(argv),
        }
    }

    /// Runs this request with the default runtime settings: the same as [`exec`].
    ///
    /// ```
    /// use sandbox_host::exec::Request;
    ///
    /// let out = Request::new(["/bin/sh", "-c", "exit 3"]).run().unwrap();
    /// assert_eq!(out.exit_code, Some(3));
    ///
    /// let refused = Request::new(["relative/prog"]).run().unwrap_err();
    /// assert_eq!(refused.field(), "argv[0]");
    /// ```
    pub fn run(&self) -> Result<ExecResult, ExecError> {
        exec(self)
    }
}

impl RequestBuilder {
    /// The request as built.
    pub fn build(self) -> Request {
        self.request
    }

    /// Builds the request and runs it (see [`Request::run`]).
    pub fn run(self) -> Result<ExecResult, ExecError> {
        self.request.run()
    }

    /// Working directory (absolute, existing); the host's own when not set.
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        self.request.cwd = Some(dir.into());
        self
    }

    /// Adds a variable to the scrubbed environment.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.request.env.insert(name.into(), value.into());
        self
    }

    /// Adds a variable whose value the program gets but must not print: its appearance in
    /// the output is reported in the result's `leaks` (and replaced, with
    /// [`Redaction::Redact`]).
    pub fn secret_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        self.request.env.insert(name.clone(), value.into());
        self.request.secret_env.push(name);
        self
    }

    /// Wall-clock limit (1 to 86400 seconds; default 60).
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.request.timeout_s = limit.as_secs_f64();
        self
    }

    /// Cap on each of stdout and stderr, in bytes (1 KiB to 4 MiB; default 256 KiB).
    pub fn max_output_bytes(mut self, bytes: u64) -> Self {
        self.request.max_output_bytes = bytes;
        self
    }

    /// A built-in profile by name (default `minimal`).
    pub fn profile(mut self, name: impl Into<String>) -> Self {
        self.request.profile = name.into();
        self
    }

    /// A profile file (absolute path) used instead of a built-in profile.
    pub fn profile_file(mut self, path: impl Into<String>) -> Self {
        self.request.profile_file = Some(path.into());
        self
    }

    /// Adds an allow-list entry to the profile (the list grammar, e.g. `socket`, `@network`).
    pub fn allow(mut self, entry: impl Into<String>) -> Self {
        self.request.allow.push(entry.into());
        self
    }

    /// Adds a deny-list entry to the profile (e.g. `ptrace`, `creat=EROFS`).
    pub fn deny(mut self, entry: impl Into<String>) -> Self {
        self.request.deny.push(entry.into());
        self
    }

    /// What a call the profile refuses does (default [`OnViolation::Report`]).
    pub fn on_violation(mut self, action: OnViolation) -> Self {
        self.request.on_violation = action;
        self
    }

    /// What to do with a program the preload cannot enter (default
    /// [`StaticBinaryAction::Block`]).
    pub fn static_binary(mut self, action: StaticBinaryAction) -> Self {
        self.request.static_binary = action;
        self
    }

    /// Whether to run when the sandbox is unavailable on this machine.
    pub fn sandbox(mut self, requirement: Requirement) -> Self {
        self.request.require_sandbox = requirement == Requirement::Required;
        self
    }

    /// Text written to the program's standard input (`/dev/null` when not set).
    pub fn stdin(mut self, text: impl Into<String>) -> Self {
        self.request.stdin = Some(text.into());
        self
    }

    /// Resource-limit overrides.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.request.limits = limits;
        self
    }

    /// The Landlock layer (default [`LandlockMode::Preferred`]).
    pub fn landlock(mut self, mode: LandlockMode) -> Self {
        self.request.landlock = mode;
        self
    }

    /// The directory the program may write beneath (absolute, existing).
    pub fn workspace(mut self, dir: impl Into<String>) -> Self {
        self.request.workspace = Some(dir.into());
        self
    }

    /// Lets the workspace be `/`, the home directory, a parent of either or a directory
    /// holding credentials, which are refused otherwise; the result's `warnings` says so.
    pub fn allow_broad_workspace(mut self, allow: bool) -> Self {
        self.request.allow_broad_workspace = allow;
        self
    }

    /// Adds a directory or file the program may write (absolute, existing).
    pub fn writable_path(mut self, path: impl Into<String>) -> Self {
        self.request.writable_paths.push(path.into());
        self
    }

    /// Adds a path the program must not read (absolute).
    pub fn deny_read(mut self, path: impl Into<String>) -> Self {
        self.request.deny_read.push(path.into());
        self
    }

    /// Adds a TCP port the program may connect to (network profiles; the others are refused).
    pub fn connect_port(mut self, port: u16) -> Self {
        self.request
            .connect_ports
            .get_or_insert_with(Vec::new)
            .push(port);
        self
    }

    /// What happens to secrets and tokens found in the output.
    pub fn redaction(mut self, redaction: Redaction) -> Self {
        self.request.redact_secrets = redaction == Redaction::Redact;
        self
    }

    /// The namespace layer (default [`IsolationMode::Preferred`]).
    pub fn isolation(mut self, mode: IsolationMode) -> Self {
        self.request.isolation = mode;
        self
    }

    /// Lets the request run as root below the isolated tier (`allow_root`): without
    /// namespaces or Landlock root passes permission checks they would have covered.
    pub fn allow_root(mut self, allow: bool) -> Self {
        self.request.allow_root = allow;
        self
    }

    /// Adds a path mounted read-only over itself (absolute).
    pub fn read_only_path(mut self, path: impl Into<String>) -> Self {
        self.request.read_only_paths.push(path.into());
        self
    }

    /// The network mode (default: follows the profile and the other network settings).
    pub fn network(mut self, mode: NetworkMode) -> Self {
        self.request.network = Some(mode);
        self
    }

    /// The job's home: persistent (default: kept between commands, with the package caches),
    /// private (`HOME=/tmp`) or real (the host's, read-only).
    pub fn home(mut self, mode: super::home::Mode) -> Self {
        self.request.home = mode;
        self
    }

    /// Adds a domain the proxy lets through (`example.com`, `*.example.com`, or a registry
    /// preset such as `@pypi`).
    pub fn allow_domain(mut self, domain: impl Into<String>) -> Self {
        self.request.allow_domains.push(domain.into());
        self
    }

    /// Pins a name for the proxy: `name` is `NAME:PORT` (the pin holds for that port), or
    /// `NAME` when `address` is public (every port).
    pub fn resolve(mut self, name: impl Into<String>, address: impl Into<String>) -> Self {
        self.request.resolve.insert(name.into(), address.into());
        self
    }

    /// Adds a port of the host's loopback reachable at the same address inside.
    pub fn host_port(mut self, port: u16) -> Self {
        self.request.host_ports.push(port);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setters_fill_the_request_fields() {
        let r = Request::builder(["/bin/true"])
            .cwd("/tmp")
            .secret_env("TOKEN", "0123456789abcdef")
            .sandbox(Requirement::Required)
            .redaction(Redaction::Redact)
            .connect_port(443)
            .connect_port(80)
            .build();
        assert_eq!(r.cwd.as_deref(), Some("/tmp"));
        assert_eq!(r.env["TOKEN"], "0123456789abcdef");
        assert_eq!(r.secret_env, ["TOKEN"]);
        assert!(r.require_sandbox && r.redact_secrets);
        assert_eq!(r.connect_ports, Some(vec![443, 80]));
        let d = Request::builder(["/bin/true"]).build();
        assert_eq!(d, Request::new(["/bin/true"]));
    }
}
