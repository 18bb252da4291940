//! What a request's run gives back: the result of a job that ran, its refused calls, and the
//! errors of one that did not.

use super::leaks::Leak;
use super::request::{io_reason, Refusal};
use crate::sandbox::{SandboxError, Sandboxed};
use serde::Serialize;

/// What happened to one request that ran.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExecResult {
    /// The file that ran: `argv[0]` itself, or where a bare name was found in `PATH`.
    pub program: String,
    /// The exit status, when the program exited (not killed by a signal).
    pub exit_code: Option<i32>,
    /// The signal that ended the program, if one did.
    pub signal: Option<i32>,
    /// Standard output, UTF-8 with invalid bytes replaced, at most `max_output_bytes`.
    pub stdout: String,
    /// Standard error, likewise.
    pub stderr: String,
    /// More standard output was produced than was kept.
    pub stdout_truncated: bool,
    /// More standard error was produced than was kept.
    pub stderr_truncated: bool,
    /// Wall-clock time from validation to the last process reaped.
    pub duration_s: f64,
    /// The wall-clock limit ended the program.
    pub timed_out: bool,
    /// The request was cancelled (its caller went away or the server shut down) and its
    /// processes were killed.
    pub cancelled: bool,
    /// The refused call that ended the program (`on_violation: "kill"`), and what would allow
    /// it; `null` when no call ended it.
    pub violation: Option<Violation>,
    /// Every refused call, once per (call, program) with a count, in order of first
    /// appearance; at most 64 entries.
    pub violations: Vec<Violation>,
    /// Refused calls not itemized in `violations` because it was full.
    pub violations_omitted: u64,
    /// Whether a filter applied, and which profile.
    pub sandboxed: SandboxInfo,
    /// The layers that held, in one word: `isolated` (namespaces, Landlock, seccomp),
    /// `contained` (Landlock and seccomp), `filtered` (seccomp alone), `unconfined` (no
    /// filter).
    pub tier: super::tier::Tier,
    /// Warnings about the run (for example: ran unconfined).
    pub warnings: Vec<String>,
    /// What the Landlock layer enforced (`null` when it was off).
    pub landlock: Option<crate::landlock::Status>,
    /// The resource limits the run hit, by name (`time`, `output`, `cpu`, `fsize`, `memory`),
    /// each also said in `warnings`; `[]` when none.
    pub limits_hit: Vec<String>,
    /// Secrets of `secret_env` and well-known tokens found in stdout and stderr: what, where,
    /// in which encoding (never the value). With `redact_secrets` they were replaced.
    pub leaks: Vec<Leak>,
    /// What the namespace layer did (`null` when it was off).
    pub isolation: Option<super::isolation::Status>,
    /// The network mode and, through the proxy and host ports, every destination tried.
    pub network: super::net::Report,
    /// What the view, Landlock or the network mode refused, as the program's stderr reported
    /// it, each with the change that allows it (module `refusals`); at most 32, each also
    /// said in `warnings`.
    pub refusals: Vec<super::refusals::Refused>,
    /// Refusals not itemized in `refusals` because it was full.
    pub refusals_omitted: u64,
    /// The directory `HOME` named (`persistent` or `real` home); `null` for the private
    /// `HOME=/tmp`.
    pub home: Option<String>,
}

/// A syscall the filter refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The syscall's name (`unknown` when the filter killed without naming it).
    pub syscall: String,
    /// Its number on this architecture, when known.
    pub number: Option<u32>,
    /// How many times this program made this call and was refused.
    pub count: u64,
    /// The executable that made it, when known.
    pub program: Option<String>,
    /// The profile that refused it.
    pub profile: String,
    /// One line: what would allow it.
    pub hint: String,
    /// The change alone, in the caller's terms (`"allow": ["socket"]`, `--allow socket`,
    /// `--profile shell-net`); `null` when nothing can be said.
    pub change: Option<String>,
}

/// How the request was confined.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SandboxInfo {
    /// `exact` when the profile's filter was installed, `none` otherwise.
    pub filter: Sandboxed,
    /// The profile's name.
    pub profile: String,
}

/// Why a request produced no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// Validation refused it.
    #[error("{0}")]
    Refused(#[from] Refusal),
    /// The sandbox refused it or could not be set up.
    #[error("{0}")]
    Sandbox(#[from] SandboxError),
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// `argv[0]`.
        program: String,
        /// What `fork`/`exec` said.
        source: std::io::Error,
    },
    /// The process group could not be prepared (cgroup, pipes).
    #[error("cannot prepare the run: {0}")]
    Setup(std::io::Error),
}

impl ExecError {
    /// The request field the error is about.
    pub fn field(&self) -> &str {
        match self {
            ExecError::Refused(r) => &r.field,
            ExecError::Sandbox(SandboxError::Blocked(_)) | ExecError::Spawn { .. } => "argv[0]",
            ExecError::Sandbox(SandboxError::Unavailable(_)) => "require_sandbox",
            ExecError::Sandbox(SandboxError::Profile(..)) => "profile",
            ExecError::Sandbox(_) | ExecError::Setup(_) => "sandbox",
        }
    }

    /// The status a shell would give (126: found but cannot be executed, 127: not found), for
    /// a program that could not be started; `None` for every other error (125).
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            ExecError::Refused(r) => r.exit_code,
            ExecError::Spawn { source, .. } => Some(match source.raw_os_error() {
                Some(libc::ENOENT) => super::request::EXIT_NOT_FOUND,
                _ => super::request::EXIT_CANNOT_EXECUTE,
            }),
            _ => None,
        }
    }

    /// The reason, without the field.
    pub fn reason(&self) -> String {
        match self {
            ExecError::Refused(r) => r.reason.clone(),
            ExecError::Spawn { source, .. } => {
                format!("cannot start the program: {}", io_reason(source))
            }
            other => other.to_string(),
        }
    }
}
