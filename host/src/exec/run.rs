//! Running one validated request, in phases: plan the job for this machine (module `job`:
//! the tier from the probes, each layer's part), start it with every layer, watch it until it
//! ends (module `supervise`: output, stdin, the wall clock, cancellation, the supervisor),
//! then reap, gather and report (module `outcome`). The entry points of every front end and
//! the audit event are here.

use super::contain::Mechanism;
use super::job::Job;
use super::options::{RunOptions, StartFrom};
use super::record::Recorder;
use super::request::{Audience, Refusal, Request, Validated};
use super::result::{ExecError, ExecResult, Step};
use crate::policy::profile::Profile;
use crate::policy::Action;
use crate::sandbox::{Options, Sandbox};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Runs one request with the default runtime settings.
pub fn exec(req: &Request) -> Result<ExecResult, ExecError> {
    exec_with(req, &RunOptions::default())
}

/// Runs one request; emits one audit event (`tracing`, target `sandbox::exec`).
pub fn exec_with(req: &Request, opts: &RunOptions) -> Result<ExecResult, ExecError> {
    exec_for(req, opts, Audience::Json)
}

/// [`exec_with`] with hints and refusals worded for `audience`: `sandbox mcp` runs requests
/// whose policy came from its command line, so the change that allows a refused call is a
/// flag of that command line (`--allow socket`), not a request field no tool call can set.
pub(crate) fn exec_for(
    req: &Request,
    opts: &RunOptions,
    audience: Audience,
) -> Result<ExecResult, ExecError> {
    let start = Instant::now();
    let mut mechanism = None;
    let res = req.validate().map_err(ExecError::from).and_then(|mut v| {
        v.audience = audience;
        let sandbox = sandbox_for(&v, opts)?;
        run_planned(&v, &sandbox, opts, start, &mut mechanism, None)
    });
    audit(&req.argv, &req.profile, &res, start, mechanism);
    res
}

/// Runs an already validated job under `sandbox`: the spawn path every front end shares
/// (`exec`, `serve`, `sandbox run`); emits the same audit event as [`exec_with`].
pub(crate) fn run_validated(
    v: &Validated,
    sandbox: &Sandbox,
    opts: &RunOptions,
) -> Result<ExecResult, ExecError> {
    let start = Instant::now();
    let mut mechanism = None;
    let res = run_planned(v, sandbox, opts, start, &mut mechanism, None);
    audit(&v.argv, &v.profile, &res, start, mechanism);
    res
}

/// [`run`], planned again once when the spawn found namespaces refused although they were
/// presumed to work (nothing ran: the refusal is the `clone3` that would have started it, or
/// the init's id maps or mounts; the probes, run again, plan the job without them).
fn run_planned(
    v: &Validated,
    sandbox: &Sandbox,
    opts: &RunOptions,
    start: Instant,
    mechanism: &mut Option<Mechanism>,
    recorder: Option<&Recorder>,
) -> Result<ExecResult, ExecError> {
    match run(v, sandbox, opts, start, mechanism, recorder) {
        Err(ExecError::Setup {
            step: Step::Namespaces,
            ..
        }) => run(v, sandbox, opts, start, mechanism, recorder),
        res => res,
    }
}

/// Runs an already validated job on the same spawn path, but instead of the profile's filter
/// the child attaches `recorder`'s, which sends every call to the recorder's thread and lets it
/// run (`sandbox learn`). `sandbox` should be an unrestricted one: nothing else is applied.
pub(crate) fn learn_validated(
    v: &Validated,
    sandbox: &Sandbox,
    opts: &RunOptions,
    recorder: &Recorder,
) -> Result<ExecResult, ExecError> {
    let start = Instant::now();
    let mut mechanism = None;
    let opts = RunOptions {
        start: StartFrom::CallingThread,
        ..opts.clone()
    };
    let res = run_planned(v, sandbox, &opts, start, &mut mechanism, Some(recorder));
    audit(&v.argv, &v.profile, &res, start, mechanism);
    res
}

fn audit(
    argv: &[String],
    profile: &str,
    res: &Result<ExecResult, ExecError>,
    start: Instant,
    mechanism: Option<Mechanism>,
) {
    let duration_s = start.elapsed().as_secs_f64();
    let containment = mechanism.map(|m| m.to_string()).unwrap_or_default();
    match res {
        Ok(r) => {
            let outcome = if r.violation.is_some() {
                "violation"
            } else if r.cancelled {
                "cancelled"
            } else if r.timed_out {
                "timed-out"
            } else if r.signal.is_some() {
                "signalled"
            } else {
                "exited"
            };
            tracing::info!(
                target: "sandbox::exec",
                argv = ?argv,
                profile = %profile,
                outcome,
                exit_code = r.exit_code,
                signal = r.signal,
                violation = r.violation.as_ref().map(|v| v.syscall.as_str()),
                filter = ?r.sandboxed.filter,
                containment = %containment,
                duration_s,
                "exec"
            );
        }
        Err(e) => tracing::info!(
            target: "sandbox::exec",
            argv = ?argv,
            profile = %profile,
            outcome = "refused",
            field = e.field(),
            reason = %e.reason(),
            duration_s,
            "exec"
        ),
    }
}

/// One configured sandbox per (profile, static-binary action, require, library), built once.
/// A profile the request changed gets a sandbox of its own, not kept: clients may send any
/// number of different lists, and each kept sandbox would hold memory (and a spawner thread)
/// for the life of the host.
pub(crate) fn sandbox_for(v: &Validated, opts: &RunOptions) -> Result<Arc<Sandbox>, ExecError> {
    if let Some(profile) = &v.custom {
        let profile = v
            .paths
            .guard(profile.clone())
            .and_then(|p| v.network.guard(p, crate::platform::delegable()))
            .map_err(|e| Refusal::new("profile", e.to_string()))?;
        return Ok(Arc::new(Sandbox::new(Options {
            profile,
            on_violation: Some(Action::Trap),
            static_binary: v.static_binary,
            require_sandbox: v.require_sandbox,
            libsandbox_path: opts.libsandbox_path.clone(),
            libsandbox_sha256: None,
        })?));
    }
    type Key = (
        String,
        String,
        bool,
        Option<PathBuf>,
        bool,
        Option<crate::network::Mode>,
    );
    static CACHE: OnceLock<Mutex<HashMap<Key, Arc<Sandbox>>>> = OnceLock::new();
    let key = (
        v.profile.clone(),
        format!("{:?}", v.static_binary),
        v.require_sandbox,
        opts.libsandbox_path.clone(),
        v.paths.port_rules(),
        v.network.mode,
    );
    let cache = CACHE.get_or_init(Default::default);
    if let Some(s) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(Arc::clone(s));
    }
    let profile = Profile::builtin(&v.profile)
        .and_then(|p| v.paths.guard(p))
        .and_then(|p| v.network.guard(p, crate::platform::delegable()))
        .map_err(|e| Refusal::new("profile", e.to_string()))?;
    let options = Options {
        profile,
        on_violation: Some(Action::Trap),
        static_binary: v.static_binary,
        require_sandbox: v.require_sandbox,
        libsandbox_path: opts.libsandbox_path.clone(),
        libsandbox_sha256: None,
    };
    let s = Arc::new(Sandbox::new(options)?);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, Arc::clone(&s));
    Ok(s)
}

/// One run of a validated job: plan, start, watch, collect, report.
fn run(
    v: &Validated,
    sandbox: &Sandbox,
    opts: &RunOptions,
    start: Instant,
    mechanism: &mut Option<Mechanism>,
    recorder: Option<&Recorder>,
) -> Result<ExecResult, ExecError> {
    let mut job = Job::plan(v, sandbox, opts, recorder, mechanism)?;
    let mut live = job.spawn(v, recorder)?;
    let watched = super::supervise::watch(&mut job, &mut live, v, opts);
    let ended = super::outcome::collect(v, job, live, watched)?;
    Ok(super::outcome::report(v, sandbox, ended, start))
}
