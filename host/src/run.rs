//! `sandbox run`: one program under the sandbox with inherited stdio, reporting what happened
//! and exiting with the program's status (128+N for a signal; 125, 126, 127 like `env`).
//!
//! A thin front end over the exec engine (`exec::run_validated`), the spawn path that `exec
//! --json` and `serve` use too: the same child setup, the same filter, the same tree kill.
//! What differs is only what a terminal user expects: the program is looked up in `PATH`, the
//! safe list of the environment keeps the caller's values, the streams are the host's own, and
//! there is no timeout unless one is asked for. The environment is scrubbed as an exec
//! request's is (`exec::env`): tokens, agent sockets and bus addresses of the caller stay out
//! unless `--keep-env` names them.

use crate::config::ExecConfig;
use crate::exec::limits::Rlimits;
use crate::exec::request::{
    Audience, OnViolation, PathRules, Streams, Validated, DEFAULT_MAX_OUTPUT_BYTES,
};
use crate::exec::{run_validated, ExecError, ExecResult, RunOptions};
use crate::sandbox::{Sandbox, Sandboxed};
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
    /// Kill the program and every descendant after this long.
    pub timeout: Option<Duration>,
    /// Say on stderr how the run was confined.
    pub verbose: bool,
    /// The Landlock layer's rules (workspace, writable and denied paths, ports, mode).
    pub paths: PathRules,
    /// Report refused calls (they fail with an errno; the default) or kill the program.
    pub on_violation: OnViolation,
    /// The errno refused calls fail with in report mode (default: the profile's, else EPERM).
    pub deny_errno: Option<u16>,
    /// The network mode and the proxy's rules (flags name options in refusals).
    pub network: crate::network::Network,
    /// The program's whole environment ([`environment`]).
    pub env: Vec<(String, String)>,
    /// Running as root without `--allow-root`: said once the run is below the isolated tier
    /// (in it, root's reach is the job's view: the host's tree read-only, credentials
    /// unreadable).
    pub root_warning: bool,
    /// The job's home when `--home` asked for one (`None`: the caller's `HOME`, as given).
    pub home: Option<crate::exec::home::Home>,
    /// `--memory`: the whole job's memory, bytes (`None`: no limit of the sandbox's own).
    pub memory: Option<u64>,
    /// `--processes`: processes and threads at once (`None`: the default, where the machine
    /// can enforce it).
    pub processes: Option<u64>,
}

impl RunSettings {
    /// The run's limits: [`limits`], with `--memory` and `--processes` over them, checked as a
    /// request's `limits` are.
    pub fn rlimits(&self) -> Result<Rlimits, String> {
        let mut r = limits(self.timeout);
        if let Some(m) = self.memory {
            if m < crate::exec::limits::MIN_MEMORY_BYTES {
                return Err("--memory: must be at least 32M".to_string());
            }
            r.memory_bytes = m;
        }
        if let Some(p) = self.processes {
            if !(1..=crate::exec::limits::MAX_PROCESSES).contains(&p) {
                return Err(format!(
                    "--processes: must be between 1 and {}",
                    crate::exec::limits::MAX_PROCESSES
                ));
            }
            r.processes = p;
            r.processes_required = true;
        }
        Ok(r)
    }
}

/// Gives the run the home `--home` asks for: its variables over the safe list's `HOME`
/// (names the caller passes with `--env` or `--keep-env` keep their values) and, for the
/// persistent home, a place among the writable ones.
pub fn with_home(
    settings: &mut RunSettings,
    mode: crate::exec::HomeMode,
    args: &crate::cli::EnvArgs,
) -> Result<(), String> {
    use crate::exec::home;
    let workspace = match &settings.paths.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|e| format!("--home {mode}: {e}"))?,
    };
    let resolved = home::resolve(mode, &workspace).map_err(|e| format!("--home {mode}: {e}"))?;
    if resolved.is_none() && mode == crate::exec::HomeMode::Persistent {
        return Err(format!(
            "--home {mode}: {}",
            home::NOWHERE.trim_start_matches("sandbox: warning: ")
        ));
    }
    let Some(h) = resolved else {
        // private: HOME=/tmp, the job's own /tmp in namespaces.
        settings.env.retain(|(k, _)| k != "HOME");
        settings.env.push(("HOME".into(), "/tmp".into()));
        settings.env.sort();
        return Ok(());
    };
    let given: std::collections::BTreeMap<String, String> = args
        .keep
        .iter()
        .cloned()
        .chain(
            args.set
                .iter()
                .filter_map(|p| Some(p.split_once('=')?.0.to_string())),
        )
        .map(|k| (k, String::new()))
        .collect();
    home::apply(&h, &mut settings.env, &given, &mut settings.paths.writable);
    settings.home = Some(h);
    Ok(())
}

/// Prints one `sandbox: ...` line on stderr, escaped: paths, hosts and programs in it come
/// from the job or the caller (see [`crate::escape`]).
fn say(msg: impl std::fmt::Display) {
    crate::escape::eprint_line(format_args!("sandbox: {msg}"));
}

/// The program's environment: the safe list with the caller's values (`PATH`, `HOME`, `LANG`,
/// `LC_ALL`, `TERM`, `SHELL`, `USER`), the caller's variables `keep` names (`--keep-env`; one
/// the caller has not set is left out), then `set` (`--env NAME=VALUE`) on top. Each variable
/// passes the checks an exec request's `env` does; a refusal names the flag and the variable.
pub fn environment(keep: &[String], set: &[String]) -> Result<Vec<(String, String)>, String> {
    use crate::exec::env;
    use std::collections::BTreeMap;
    let caller: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let shown = |s: &str| {
        format!(
            "`{}`",
            s.chars().take(64).collect::<String>().escape_debug()
        )
    };
    let mut extra = BTreeMap::new();
    for name in keep {
        let refused = |why: String| format!("--keep-env {}: {why}", shown(name));
        env::check_key(name).map_err(refused)?;
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        let value = value
            .into_string()
            .map_err(|_| refused("the caller's value is not UTF-8".into()))?;
        env::check(name, &value).map_err(refused)?;
        extra.insert(name.clone(), value);
    }
    for pair in set {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(format!(
                "--env {}: expected NAME=VALUE (FOO=bar)",
                shown(pair)
            ));
        };
        env::check(name, value).map_err(|why| format!("--env {}: {why}", shown(name)))?;
        extra.insert(name.to_string(), value.to_string());
    }
    Ok(env::scrubbed(env::Base::Caller(&caller), &extra))
}

/// The limits of a terminal run: no core dumps (a program the filter stops dies of SIGSYS),
/// CPU time bounded by the timeout when there is one, the default process limit where the
/// machine can enforce it; the rest stays as the caller has it (no memory limit of the
/// sandbox's own: the caller's RLIMIT_AS, if any, is inherited).
pub(crate) fn limits(timeout: Option<Duration>) -> Rlimits {
    let keep = |res| crate::sys::soft_rlimit(res).unwrap_or(libc::RLIM_INFINITY);
    Rlimits {
        cpu_seconds: timeout.map_or(keep(libc::RLIMIT_CPU), |t| {
            t.as_secs_f64().ceil().max(1.0) as u64
        }),
        memory_bytes: libc::RLIM_INFINITY,
        fsize_bytes: keep(libc::RLIMIT_FSIZE),
        nofile: keep(libc::RLIMIT_NOFILE),
        processes: crate::exec::limits::DEFAULT_PROCESSES,
        processes_required: false,
    }
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
    let job = job(sandbox, &resolved, program, args, settings);
    // The job keeps the caller's descriptor limit (read into `job`); the host's own work gets
    // room above a low one.
    crate::sys::raise_soft_nofile(256);
    // The spawner path, as for exec requests: its thread holds the filter's listener, so
    // violations are named without taking the listener from the child (which a non-dumpable
    // host cannot do without privileges).
    let opts = RunOptions {
        cancel: end_on_signals(),
        ..RunOptions::default()
    };
    let result = run_validated(&job, sandbox, &opts);
    // Ended by SIGTERM, SIGINT or SIGHUP: the job's whole tree was ended (in every tier, not
    // only where the namespaces' init takes it along) and this process now dies of the same
    // signal, as it would have without the handler.
    let caught = ENDED_BY.load(std::sync::atomic::Ordering::SeqCst);
    if caught != 0 {
        crate::sys::die_of(caught);
    }
    let result = match result {
        Ok(r) => r,
        Err(ExecError::Spawn { source, .. }) => {
            say(format_args!("{}: {source}", crate::escape::path(&resolved)));
            return match source.raw_os_error() {
                Some(libc::ENOENT) => EXIT_NOT_FOUND,
                _ => EXIT_CANNOT_EXECUTE,
            };
        }
        Err(ExecError::Refused(r)) if crate::cli::layer_flag(&r.field).is_some() => {
            let flag = crate::cli::layer_flag(&r.field).unwrap_or_default();
            say(format_args!("{flag}: {}", r.reason));
            return EXIT_SANDBOX;
        }
        Err(e) => {
            say(e);
            return EXIT_SANDBOX;
        }
    };
    report(&result, &resolved, settings)
}

/// The eventfd of the job's [`crate::exec::Cancel`], for the signal handler (-1: none).
static END_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// The signal that ended the job (0: none).
static ENDED_BY: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_end_signal(sig: libc::c_int) {
    use std::sync::atomic::Ordering::SeqCst;
    // Async-signal-safe: two atomic stores and an eventfd write.
    let _ = ENDED_BY.compare_exchange(0, sig, SeqCst, SeqCst);
    let fd = END_FD.load(SeqCst);
    if fd >= 0 {
        crate::sys::eventfd_add_one(fd);
    }
}

/// A cancel handle that SIGTERM, SIGINT and SIGHUP to `sandbox run` trigger: the engine then
/// ends the job's tree (its cgroup or its chain of processes) as for a timeout. Without it a
/// job of the contained and filtered tiers outlived a `sandbox run` that was killed.
fn end_on_signals() -> Option<crate::exec::Cancel> {
    let cancel = crate::exec::Cancel::new().ok()?;
    END_FD.store(cancel.raw(), std::sync::atomic::Ordering::SeqCst);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let _ = crate::sys::catch_signal(sig, on_end_signal);
    }
    Some(cancel)
}

/// The job `run` gives the engine for `program` (found at `resolved`) and its arguments.
fn job(
    sandbox: &Sandbox,
    resolved: &std::path::Path,
    program: &str,
    args: &[String],
    settings: &RunSettings,
) -> Validated {
    let options = sandbox.options();
    Validated {
        program: resolved.to_path_buf(),
        argv: std::iter::once(program.to_string())
            .chain(args.iter().cloned())
            .collect(),
        cwd: None,
        env: settings.env.as_slice().into(),
        timeout: settings.timeout,
        streams: Streams::Inherit,
        max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES as usize,
        profile: options.profile.name().to_string(),
        static_binary: options.static_binary,
        require_sandbox: options.require_sandbox,
        stdin: None,
        rlimits: settings
            .rlimits()
            .unwrap_or_else(|_| limits(settings.timeout)),
        paths: settings.paths.clone(),
        secrets: Vec::new(),
        redact_secrets: false,
        // Said by the command line itself (`run` warns; `learn` observes, unconfined).
        allow_root: true,
        on_violation: settings.on_violation,
        deny_errno: settings.deny_errno,
        audience: Audience::Cli,
        custom: None,
        network: settings.network.clone(),
        home: settings.home.clone(),
        home_nowhere: false,
    }
}

/// What `sandbox check` runs: `program` (looked up in `PATH`) exactly as `run` would run it
/// under `sandbox` and `settings`, the same job on the same spawn path, with the result
/// returned instead of reported. `Err`: why it did not run, in `run`'s words.
pub fn trial(
    sandbox: &Sandbox,
    program: &str,
    settings: &RunSettings,
) -> Result<ExecResult, String> {
    let resolved = crate::admission::resolve(program, std::env::var("PATH").ok().as_deref())
        .map_err(|e| e.to_string())?;
    let job = job(sandbox, &resolved, program, &[], settings);
    run_validated(&job, sandbox, &RunOptions::default()).map_err(|e| match e {
        ExecError::Refused(r) if crate::cli::layer_flag(&r.field).is_some() => format!(
            "{}: {}",
            crate::cli::layer_flag(&r.field).unwrap_or_default(),
            r.reason
        ),
        e => e.to_string(),
    })
}

/// Says on stderr what the user must know, and turns the result into an exit status.
fn report(r: &ExecResult, program: &std::path::Path, settings: &RunSettings) -> i32 {
    let (lines, status) = outcome(r, program, settings);
    for l in lines {
        crate::escape::eprint_line(l);
    }
    status
}

/// The stderr lines (escaped, each one line) `run` prints after `r`, and its exit status: one
/// function for `run` and for commands of a session (`run --session`), whose lines the
/// session's daemon sends to the caller to print.
pub(crate) fn outcome(
    r: &ExecResult,
    program: &std::path::Path,
    settings: &RunSettings,
) -> (Vec<String>, i32) {
    let mut out = Lines::default();
    // A timeout gets one line, below, that says what happened and what to change, in place of
    // the result's `limit hit: time` warning.
    for w in r
        .warnings
        .iter()
        .filter(|w| !(r.timed_out && w.starts_with("sandbox: limit hit: time:")))
    {
        out.raw(w);
    }
    if settings.root_warning && r.tier != crate::exec::Tier::Isolated {
        out.say(format_args!(
            "{} (tier {}: {})",
            crate::platform::ROOT_WARNING,
            r.tier,
            r.tier.layers()
        ));
    }
    if settings.verbose {
        let how = match r.sandboxed.filter {
            Sandboxed::Exact => "exact",
            Sandboxed::OuterOnly => "outer-only",
            Sandboxed::None => "none",
        };
        out.say(format_args!(
            "profile {}, sandboxed: {how}, tier: {} ({})",
            r.sandboxed.profile,
            r.tier,
            r.tier.layers()
        ));
        match &r.landlock {
            Some(l) => out.say(format_args!(
                "landlock ABI {} (kernel {}), mode {}: enforced {}{}{}",
                l.abi.used,
                l.abi.kernel,
                l.mode,
                l.enforced_text(),
                if l.missing.is_empty() {
                    String::new()
                } else {
                    format!("; missing: {}", l.missing.join("; "))
                },
                if l.deny_read_absent.is_empty() {
                    String::new()
                } else {
                    let absent: Vec<String> = l
                        .deny_read_absent
                        .iter()
                        .map(|p| crate::escape::path(p).into_owned())
                        .collect();
                    format!(
                        "; denied paths absent (nothing to protect): {}",
                        absent.join(", ")
                    )
                }
            )),
            None => out.say(format_args!("landlock: off")),
        }
        match &r.isolation {
            Some(i) if i.namespaces.is_empty() => out.say(format_args!(
                "isolation {}: no namespaces ({})",
                i.mode,
                i.unavailable.as_deref().unwrap_or("unavailable")
            )),
            Some(i) => {
                let ro: Vec<String> = i
                    .read_only
                    .iter()
                    .map(|p| crate::escape::path(p).into_owned())
                    .collect();
                let hidden: Vec<String> = i
                    .hidden_sockets
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                out.say(format_args!(
                    "isolation {}: namespaces {}; {}fresh /proc and /dev, private /tmp; \
                     read-only: {}; host sockets hidden: {}",
                    i.mode,
                    i.namespaces.join(", "),
                    if i.read_only_root {
                        "host tree read-only, "
                    } else {
                        ""
                    },
                    if ro.is_empty() {
                        "nothing".to_string()
                    } else {
                        ro.join(", ")
                    },
                    if hidden.is_empty() {
                        "none".to_string()
                    } else {
                        hidden.join(", ")
                    }
                ))
            }
            None => out.say(format_args!("isolation: off")),
        }
        let n = &r.network;
        out.say(format_args!(
            "network {}{}{}",
            n.mode,
            n.proxy
                .as_deref()
                .map(|p| format!(", proxy at {p}"))
                .unwrap_or_default(),
            if n.host_ports.is_empty() {
                String::new()
            } else {
                let ports: Vec<String> = n.host_ports.iter().map(u16::to_string).collect();
                format!(", host ports {}", ports.join(", "))
            }
        ));
    }
    for line in proxy_lines(r) {
        out.say(format_args!("{line}"));
    }
    // The refusals first, on a timeout too: a program that waited for what a refused call
    // would have given is named with the change that allows it, not only timed out.
    for line in violation_lines(r, program) {
        out.say(format_args!("{line}"));
    }
    if r.timed_out {
        let calls: Vec<&str> = r.violations.iter().map(|v| v.syscall.as_str()).collect();
        let then = crate::exec::refused_first(&calls)
            .unwrap_or_else(|| "raise --timeout if that is expected".to_string());
        out.say(format_args!(
            "{} timed out after {:?}; it and every process it started were killed; {then}",
            crate::escape::path(program),
            settings.timeout.unwrap_or_default()
        ));
        return (out.0, EXIT_TIMEOUT);
    }
    let status = match (r.exit_code, r.signal) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => EXIT_SANDBOX,
    };
    (out.0, status)
}

/// The lines [`outcome`] gathers, each escaped as one line.
#[derive(Default)]
struct Lines(Vec<String>);

impl Lines {
    /// A `sandbox: ...` line.
    fn say(&mut self, msg: impl std::fmt::Display) {
        self.0
            .push(crate::escape::line(format_args!("sandbox: {msg}")));
    }

    /// A line as given (warnings carry their own `sandbox: ` prefix).
    fn raw(&mut self, msg: impl std::fmt::Display) {
        self.0.push(crate::escape::line(msg));
    }
}

/// What the proxy refused, one line per destination with what would allow it (clients often
/// hide the proxy's answer); without the `sandbox: ` prefix, unescaped.
pub(crate) fn proxy_lines(r: &ExecResult) -> Vec<String> {
    let mut lines = Vec::new();
    for d in r.network.destinations.iter().filter(|d| !d.allowed) {
        let change = match d.reason.as_deref() {
            // An address is not pinned; a name is, for the one port asked.
            Some(r) if r.starts_with("resolves to ") => {
                let addr = r["resolves to ".len()..]
                    .split(' ')
                    .next()
                    .unwrap_or_default();
                match addr.parse() {
                    Ok(ip) if d.host.parse::<std::net::IpAddr>().is_err() => format!(
                        "if intended, pin it for this port with --resolve {}",
                        crate::proxy::pins::flag_value(&d.host, d.port, ip)
                    ),
                    _ => "a port of the host's loopback is reachable with --allow-host-port PORT"
                        .to_string(),
                }
            }
            _ => format!("to allow it, add --allow-domain {}", d.host),
        };
        lines.push(format!(
            "the proxy refused {}:{} ({}); {change}",
            d.host,
            d.port,
            d.reason.as_deref().unwrap_or("refused")
        ));
    }
    lines
}

/// The refused calls: one line per distinct call (counts, not lines), then the one that
/// ended the program; without the `sandbox: ` prefix, unescaped. `sandbox mcp` gives the same
/// lines in its tool results.
pub(crate) fn violation_lines(r: &ExecResult, program: &std::path::Path) -> Vec<String> {
    let mut lines = Vec::new();
    for v in &r.violations {
        if r.violation.as_ref().is_some_and(|k| k == v) {
            continue;
        }
        lines.push(format!(
            "{} was refused {} ({}){}: {}",
            v.program.as_deref().unwrap_or("the program"),
            v.syscall,
            v.number.unwrap_or_default(),
            if v.count > 1 {
                format!(" {} times", v.count)
            } else {
                String::new()
            },
            v.hint
        ));
    }
    if r.violations_omitted > 0 {
        lines.push(format!(
            "{} more refused calls of other kinds were not itemized",
            r.violations_omitted
        ));
    }
    if let (None, Some(libc::SIGSYS)) = (&r.violation, r.signal) {
        // No refused call the kernel reported: the program may have raised SIGSYS itself.
        lines.push(format!(
            "{} was killed by signal {} (SIGSYS)",
            crate::escape::path(program),
            libc::SIGSYS
        ));
    }
    if let Some(v) = &r.violation {
        let who = v
            .program
            .clone()
            .unwrap_or_else(|| crate::escape::path(program).into_owned());
        match v.number {
            Some(nr) => lines.push(format!(
                "{who} was stopped by the filter: syscall {} ({nr}): {}",
                v.syscall, v.hint
            )),
            None => lines.push(format!("{who} was stopped by the filter: {}", v.hint)),
        }
    }
    lines
}
