//! `sandbox run`: one program under the sandbox with inherited stdio, reporting what happened
//! and exiting with the program's status (128+N for a signal; 125, 126, 127 like `env`).

use crate::config::ExecConfig;
use crate::sandbox::{Sandbox, SandboxError, Sandboxed};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::time::Duration;

/// The sandbox itself failed or refused.
pub const EXIT_SANDBOX: i32 = 125;
/// The program exists but cannot be executed.
pub const EXIT_CANNOT_EXECUTE: i32 = 126;
/// The program was not found.
pub const EXIT_NOT_FOUND: i32 = 127;
/// The wall-clock timeout ended the program (the `timeout` convention).
pub const EXIT_TIMEOUT: i32 = 124;

/// How `run` should behave beyond the sandbox options.
#[derive(Debug, Default)]
pub struct RunSettings {
    /// Allowed/blocked commands and `enabled` from a config file.
    pub config: Option<ExecConfig>,
    /// Kill the program's process group after this long.
    pub timeout: Option<Duration>,
    /// Say on stderr how the run was confined.
    pub verbose: bool,
}

/// Prints one `sandbox: ...` line on stderr.
fn say(msg: impl std::fmt::Display) {
    eprintln!("sandbox: {msg}");
}

/// Runs `program args` under `sandbox`; returns the exit status for the `sandbox` command.
pub fn run(sandbox: &Sandbox, program: &str, args: &[String], settings: &RunSettings) -> i32 {
    let resolved = match crate::admission::resolve(program, std::env::var("PATH").ok().as_deref()) {
        Ok(p) => p,
        Err(e) => {
            say(&e);
            return e.exit_status();
        }
    };
    if let Some(cfg) = &settings.config {
        if let Err(why) = cfg.check_command(program, &resolved) {
            say(why);
            return EXIT_SANDBOX;
        }
    }
    let mut cmd = Command::new(&resolved);
    cmd.arg0(program).args(args);
    if settings.timeout.is_some() {
        cmd.process_group(0);
    }
    let mut applied = match sandbox.apply(&mut cmd, &resolved) {
        Ok(a) => a,
        Err(e @ SandboxError::Blocked(_)) => {
            say(e);
            return EXIT_SANDBOX;
        }
        Err(e) => {
            say(e);
            return EXIT_SANDBOX;
        }
    };
    for w in &applied.warnings {
        eprintln!("{w}");
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            say(format_args!("{}: {e}", resolved.display()));
            return match e.raw_os_error() {
                Some(libc::ENOENT) => EXIT_NOT_FOUND,
                _ => EXIT_CANNOT_EXECUTE,
            };
        }
    };
    applied.spawned();
    let pid = child.id() as i32;
    let timed_out = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let watchdog = settings.timeout.map(|limit| {
        let (timed_out, done) = (timed_out.clone(), done.clone());
        std::thread::spawn(move || {
            let (lock, cv) = &*done;
            let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            let (guard, res) = cv
                .wait_timeout_while(guard, limit, |d| !*d)
                .unwrap_or_else(|e| e.into_inner());
            if res.timed_out() && !*guard {
                timed_out.store(true, std::sync::atomic::Ordering::SeqCst);
                // SAFETY: signals the child's own process group (created with process_group(0)).
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
        })
    });
    let status = child.wait();
    {
        let (lock, cv) = &*done;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }
    if let Some(w) = watchdog {
        let _ = w.join();
    }
    let outcome = applied.finish();
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            say(format_args!("waiting for {}: {e}", resolved.display()));
            return EXIT_SANDBOX;
        }
    };
    let profile = &sandbox.options().profile.name;
    if settings.verbose {
        let how = match outcome.sandboxed {
            Sandboxed::Exact => "exact",
            Sandboxed::OuterOnly => "outer-only",
            Sandboxed::None => "none",
        };
        say(format_args!("profile {profile}, sandboxed: {how}"));
    }
    if let Some(err) = &outcome.report.error {
        // The preload already printed its own line; the status says the sandbox refused.
        tracing::warn!(%err, "preload refused to run the program");
        return EXIT_SANDBOX;
    }
    if timed_out.load(std::sync::atomic::Ordering::SeqCst) {
        say(format_args!(
            "{} timed out after {:?} and was killed",
            resolved.display(),
            settings.timeout.unwrap_or_default()
        ));
        return EXIT_TIMEOUT;
    }
    if let Some(sig) = status.signal() {
        if sig == libc::SIGSYS {
            match &outcome.report.violation {
                Some((nr, name)) => say(format_args!(
                    "{} was stopped by the filter: syscall {name} ({nr}): {}",
                    resolved.display(),
                    crate::exec::hint(*nr, name, profile)
                )),
                None => say(format_args!(
                    "{} was killed by the filter of profile {profile} (SIGSYS); rerun with --on-violation trap to see which syscall",
                    resolved.display()
                )),
            }
        }
        return 128 + sig;
    }
    status.code().unwrap_or(EXIT_SANDBOX)
}
