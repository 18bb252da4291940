//! `sandbox learn`: runs a command once on the engine's spawn path with a filter that records
//! every system call it and its descendants make (`exec::record`), then writes a profile that
//! allows exactly those calls, in the format `--profile FILE` reads, with comments naming the
//! programs that needed each call and the paths the run wrote.
//!
//! Learning is not confinement: every call runs. The run has the engine's process handling
//! (a new session, the request cgroup or process group, every descendant killed when the
//! command ends or times out), so a daemon the command forks is recorded and then ended.

mod output;
mod profile;
mod summary;

pub use output::{stdout_to_stderr, OutFile};
pub use profile::profile_text;
pub use summary::{summary, ProgressLine};

use crate::exec::record::{Recorder, Recording};
use crate::exec::request::{PathRules, Streams, Validated, DEFAULT_MAX_OUTPUT_BYTES};
use crate::exec::{learn_validated, ExecError, ExecResult, RunOptions};
use crate::policy::profile::Profile;
use crate::run::{EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, EXIT_SANDBOX, EXIT_TIMEOUT};
use crate::{Options, Sandbox};
use std::path::PathBuf;
use std::time::Duration;

/// What `learn` needs besides the command.
#[derive(Debug)]
pub struct LearnSettings {
    /// The profile the learned calls are compared with (`new` marks what it refuses).
    pub base: Profile,
    /// Kill the command and everything it started after this long.
    pub timeout: Option<Duration>,
    /// Show a progress line on stderr once the run takes longer than a second.
    pub progress: bool,
}

/// A finished learning run.
#[derive(Debug)]
pub struct Learned {
    /// The program as resolved in `PATH`.
    pub program: PathBuf,
    /// How the command ended.
    pub result: ExecResult,
    /// What it did.
    pub recording: Recording,
}

impl Learned {
    /// The exit status `sandbox learn` reports: the command's, as `sandbox run` gives it.
    pub fn exit_status(&self) -> i32 {
        if self.result.timed_out {
            return EXIT_TIMEOUT;
        }
        match (self.result.exit_code, self.result.signal) {
            (Some(code), _) => code,
            (None, Some(sig)) => 128 + sig,
            (None, None) => EXIT_SANDBOX,
        }
    }
}

/// Why nothing was learned: one line, and the exit status.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct LearnError {
    /// What went wrong.
    pub message: String,
    /// 125 (the sandbox failed), 126 (cannot execute) or 127 (not found).
    pub status: i32,
}

fn failure(message: impl std::fmt::Display, status: i32) -> LearnError {
    LearnError {
        message: message.to_string(),
        status,
    }
}

/// Runs `program args` once, recording every call, and returns what it did.
pub fn learn(
    program: &str,
    args: &[String],
    settings: &LearnSettings,
) -> Result<Learned, LearnError> {
    let resolved = crate::admission::resolve(program, std::env::var("PATH").ok().as_deref())
        .map_err(|e| {
            let status = e.exit_status();
            failure(e, status)
        })?;
    let recorder = Recorder::new(Some(&settings.base))
        .map_err(|e| failure(format_args!("--base: {e}"), EXIT_SANDBOX))?;
    let unrestricted = Profile::builtin("unrestricted").map_err(|e| failure(e, EXIT_SANDBOX))?;
    let sandbox = Sandbox::new(Options::new(unrestricted)).map_err(|e| failure(e, EXIT_SANDBOX))?;
    // No Landlock and no namespaces: the command runs as it would without the sandbox (its
    // writes land where it makes them, its /tmp and pids are the machine's), only observed.
    let paths = PathRules::new(crate::landlock::Mode::Off, None, &[], &[], None)
        .and_then(|p| p.with_isolation(crate::exec::isolation::Mode::Off, &[]))
        .map_err(|r| failure(r.reason, EXIT_SANDBOX))?;
    let job = Validated {
        program: resolved.clone(),
        argv: std::iter::once(program.to_string())
            .chain(args.iter().cloned())
            .collect(),
        cwd: None,
        env: passed_environment().into(),
        timeout: settings.timeout,
        streams: Streams::Inherit,
        max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES as usize,
        profile: "unrestricted".to_string(),
        static_binary: crate::StaticBinaryAction::Allow,
        require_sandbox: false,
        stdin: None,
        rlimits: crate::run::limits(settings.timeout),
        paths,
        secrets: Vec::new(),
        redact_secrets: false,
        // Said by the command line itself (`run` warns; `learn` observes, unconfined).
        allow_root: true,
        on_violation: crate::exec::OnViolation::Report,
        deny_errno: None,
        audience: crate::exec::Audience::Cli,
        custom: None,
        network: crate::network::Network {
            mode: Some(crate::network::Mode::Host),
            ..Default::default()
        },
        home: None,
        home_nowhere: false,
    };
    let progress = settings
        .progress
        .then(|| ProgressLine::start(recorder.progress()));
    let result = learn_validated(&job, &sandbox, &RunOptions::default(), &recorder);
    // Every process is dead once the run returns: the recorder's thread ends too.
    let recording = recorder.finish();
    drop(progress);
    let result = result.map_err(|e| match e {
        ExecError::Spawn { source, .. } => failure(
            format_args!("{}: {source}", resolved.display()),
            match source.raw_os_error() {
                Some(libc::ENOENT) => EXIT_NOT_FOUND,
                _ => EXIT_CANNOT_EXECUTE,
            },
        ),
        other => failure(other, EXIT_SANDBOX),
    })?;
    Ok(Learned {
        program: resolved,
        result,
        recording,
    })
}

/// `argv` as one line a POSIX shell would read back (for comments and messages).
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The host's environment without the variables the sandbox owns: a learned command runs as
/// it would without the sandbox, only observed, so it sees what it would see then.
fn passed_environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| !crate::SANDBOX_VARS.contains(&k.as_str()))
        .collect()
}
