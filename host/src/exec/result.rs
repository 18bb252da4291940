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
    /// A step of preparing, starting or ending the run failed on this machine (not the
    /// request's fault); the message names the step.
    #[error("cannot prepare the run: {step}: {source}")]
    Setup {
        /// Which step.
        step: Step,
        /// What the system said.
        source: std::io::Error,
    },
}

/// The step of a run that failed, as [`ExecError::Setup`] names it (bubblewrap's and youki's
/// errors name theirs: "cannot prepare the run: Permission denied" told a user nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Finding the working directory the job starts from.
    WorkingDirectory,
    /// Compiling the recorder's filter (`sandbox learn`).
    RecorderFilter,
    /// Starting the profile's spawner thread.
    Spawner,
    /// The preload's report pipe.
    ReportPipe,
    /// The job's resource limits.
    Limits,
    /// The job's standard streams (pipes, a terminal, `/dev/null`).
    Streams,
    /// The group that holds the job's processes (a cgroup, or the subreaper).
    Group,
    /// Making the job's namespaces, refused here although the probes had found them usable
    /// (the run is planned again without them once).
    Namespaces,
    /// Starting the child, up to its `execve` (the message names the child's own step).
    Child,
    /// Handing over the job's seccomp listener to the host.
    Listener,
    /// Waiting for the program to end.
    Reap,
    /// A session's channel to its resident process, or the resident itself.
    Session,
    /// The cancellation handle of a command.
    Cancel,
    /// Starting or reading a command of `sandbox mcp`.
    Command,
}

impl Step {
    /// The step in words, as errors print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::WorkingDirectory => "the working directory",
            Step::RecorderFilter => "the recorder's filter",
            Step::Spawner => "starting the profile's spawner thread",
            Step::ReportPipe => "the preload's report pipe",
            Step::Limits => "the resource limits",
            Step::Streams => "the job's standard streams",
            Step::Group => "the group holding the job's processes",
            Step::Namespaces => "making the job's namespaces",
            Step::Child => "starting the child",
            Step::Listener => "handing over the seccomp listener",
            Step::Reap => "waiting for the program",
            Step::Session => "the session's resident process",
            Step::Cancel => "the cancellation handle",
            Step::Command => "the command",
        }
    }

    /// An [`ExecError::Setup`] of this step; for `map_err`.
    pub(crate) fn error(self) -> impl FnOnce(std::io::Error) -> ExecError {
        move |source| ExecError::Setup { step: self, source }
    }

    /// An [`ExecError::Setup`] of this step with a message of the host's own.
    pub(crate) fn says(self, why: impl Into<String>) -> ExecError {
        ExecError::Setup {
            step: self,
            source: std::io::Error::other(why.into()),
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ExecError {
    /// The request field the error is about.
    pub fn field(&self) -> &str {
        match self {
            ExecError::Refused(r) => &r.field,
            ExecError::Sandbox(SandboxError::Blocked(_)) | ExecError::Spawn { .. } => "argv[0]",
            ExecError::Sandbox(SandboxError::Unavailable(_)) => "require_sandbox",
            ExecError::Sandbox(SandboxError::Profile(..)) => "profile",
            ExecError::Sandbox(_) | ExecError::Setup { .. } => "sandbox",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_is_named_in_the_message_and_is_the_sandboxs_not_the_requests() {
        let e = Step::Group.error()(std::io::Error::from_raw_os_error(libc::EACCES));
        assert_eq!(
            e.to_string(),
            "cannot prepare the run: the group holding the job's processes: Permission denied \
             (os error 13)"
        );
        assert_eq!(e.field(), "sandbox");
        assert_eq!(e.exit_code(), None);
        let e = Step::Session.says("the resident sent no pidfd");
        assert_eq!(
            e.reason(),
            "cannot prepare the run: the session's resident process: the resident sent no pidfd"
        );
        assert!(matches!(
            e,
            ExecError::Setup {
                step: Step::Session,
                ..
            }
        ));
    }
}
