//! Running one validated request: spawn under the sandbox, feed stdin, drain both output
//! streams with caps, enforce the wall clock (SIGTERM, grace, SIGKILL to the whole tree), kill
//! leftover descendants, reap everything, and say what happened.

use super::contain::{Containment, Group, Mechanism};
use super::leaks::{Leak, Scanner};
use super::notify::{MainProgram, Notifier, Registration, Response, Tally};
use super::record::Recorder;
use super::request::{io_reason, Audience, OnViolation, Refusal, Request, Streams, Validated};
use super::spawn::{self, SpawnError, Spec};
#[cfg(target_arch = "x86_64")]
use super::spawner::Spawner;
use crate::policy::profile::Profile;
use crate::policy::{Action, NATIVE};
use crate::report::ReportPipe;
use crate::sandbox::{Options, Sandbox, SandboxError, Sandboxed};
use serde::Serialize;
use std::collections::HashMap;
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long output is still read after the program and its descendants were killed.
const DRAIN: Duration = Duration::from_secs(2);

/// Runtime settings that are not part of a request.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Time between SIGTERM and SIGKILL after a timeout.
    pub grace: Duration,
    /// How the request's processes are held together.
    pub containment: Containment,
    /// Use this preload instead of the embedded one.
    pub libsandbox_path: Option<PathBuf>,
    /// Which thread filtered programs are started from (see `docs/exec.md`).
    pub start: StartFrom,
    /// Ends the request early when cancelled from another thread (a server shutting down):
    /// its whole process tree is killed and the result says `cancelled`.
    pub cancel: Option<Cancel>,
}

/// Which thread a filtered program is started from ([`RunOptions::start`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartFrom {
    /// Cloned from the profile's spawner thread, which holds the filter already (x86_64,
    /// where it is the default; elsewhere it means [`StartFrom::CallingThread`]).
    SpawnerThread,
    /// Started from the calling thread; the child attaches the filter itself before exec.
    CallingThread,
}

/// A cancellation handle for one or more running requests; clones share the state.
///
/// Backed by an eventfd, so a request's poll loop wakes the moment it is cancelled.
#[derive(Clone, Debug)]
pub struct Cancel(Arc<OwnedFd>);

impl Cancel {
    /// A handle that is not cancelled yet.
    pub fn new() -> std::io::Result<Cancel> {
        let fd = crate::sys::eventfd(libc::EFD_CLOEXEC | libc::EFD_NONBLOCK)?;
        Ok(Cancel(Arc::new(fd)))
    }

    /// Cancels every request running with this handle (and any started with it later).
    pub fn cancel(&self) {
        // The counter stays non-zero because nobody reads it.
        crate::sys::eventfd_add_one(self.0.as_raw_fd());
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        crate::sys::poll_one(self.0.as_fd(), libc::POLLIN, 0).is_ok_and(|r| r != 0)
    }

    fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            grace: Duration::from_secs(1),
            containment: Containment::Auto,
            libsandbox_path: None,
            start: if cfg!(target_arch = "x86_64") {
                StartFrom::SpawnerThread
            } else {
                StartFrom::CallingThread
            },
            cancel: None,
        }
    }
}

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

/// Names the refusals a command's stderr reports in a result built outside this module (a
/// session's command), as `run` names them for a one-shot request: `refusals`, and one
/// `warnings` line each. Does nothing when the result has them already.
pub(crate) fn name_refusals(result: &mut ExecResult, v: &Validated, sandbox: &Sandbox) {
    if !result.refusals.is_empty() || !super::refusals::is_candidate(result.stderr.as_bytes()) {
        return;
    }
    let cwd = v
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let found = super::refusals::name(
        &result.stderr,
        &super::refusals::Policy::of_reported(
            v,
            sandbox,
            &cwd,
            result.landlock.as_ref(),
            result.isolation.as_ref(),
            result.network.mode,
        ),
    );
    result.warnings.extend(super::refusals::warnings(
        &found,
        v.audience,
        &crate::credentials::Context::current(),
    ));
    result.refusals = found.entries;
    result.refusals_omitted = found.omitted;
}

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
/// presumed to work (nothing ran: the refusal is the `clone3` that would have started it).
fn run_planned(
    v: &Validated,
    sandbox: &Sandbox,
    opts: &RunOptions,
    start: Instant,
    mechanism: &mut Option<Mechanism>,
    recorder: Option<&Recorder>,
) -> Result<ExecResult, ExecError> {
    spawn::take_namespaces_refused();
    let res = run(v, sandbox, opts, start, mechanism, recorder);
    if res.is_err() && spawn::take_namespaces_refused() {
        return run(v, sandbox, opts, start, mechanism, recorder);
    }
    res
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
            .and_then(|p| v.network.guard(p))
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
    type Key = (String, String, bool, Option<PathBuf>, bool, bool);
    static CACHE: OnceLock<Mutex<HashMap<Key, Arc<Sandbox>>>> = OnceLock::new();
    let key = (
        v.profile.clone(),
        format!("{:?}", v.static_binary),
        v.require_sandbox,
        opts.libsandbox_path.clone(),
        v.paths.port_rules(),
        v.network.mode == Some(crate::network::Mode::Proxy),
    );
    let cache = CACHE.get_or_init(Default::default);
    if let Some(s) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(Arc::clone(s));
    }
    let profile = Profile::builtin(&v.profile)
        .and_then(|p| v.paths.guard(p))
        .and_then(|p| v.network.guard(p))
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

/// One output stream: what was kept, how much was produced, whether it ended.
/// Finds secrets and tokens in the collected output (each stream whole, so a value split
/// across reads is found) and, when asked, redacts them. Output passed through to the host's
/// own streams is not seen here.
pub(crate) fn scan_leaks(v: &Validated, stdout: &mut String, stderr: &mut String) -> Vec<Leak> {
    // Nothing collected (streams passed through, or a silent program): nothing to scan, and
    // no automaton to build (a `sandbox run` would pay for it on every call).
    if stdout.is_empty() && stderr.is_empty() {
        return Vec::new();
    }
    let own;
    let scanner = if v.secrets.is_empty() {
        Scanner::shapes_only()
    } else {
        own = Scanner::new(&v.secrets);
        &own
    };
    let mut leaks = Vec::new();
    for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
        let (found, redacted) = scanner.scan_and_redact(name, text, v.redact_secrets);
        leaks.extend(found);
        if let Some(r) = redacted {
            *text = r;
        }
    }
    leaks
}

/// One output stream of a job: read without blocking, kept up to a cap, counted beyond it.
/// Also a session command's (module `session`), which sees each chunk as it comes.
pub(crate) struct Stream {
    fd: Option<std::fs::File>,
    kept: Vec<u8>,
    cap: usize,
    total: u64,
}

impl Stream {
    pub(crate) fn new(fd: Option<OwnedFd>, cap: usize) -> Stream {
        if let Some(f) = &fd {
            set_nonblocking(f.as_fd());
        }
        Stream {
            fd: fd.map(std::fs::File::from),
            kept: Vec::new(),
            cap,
            total: 0,
        }
    }

    pub(crate) fn raw(&self) -> Option<RawFd> {
        self.fd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reads what is there; keeps up to the cap and discards the rest. Closes at EOF.
    fn pump(&mut self, scratch: &mut [u8]) {
        self.pump_with(scratch, |_| {});
    }

    /// [`Stream::pump`], handing `each` every chunk read, whole (before the cap).
    pub(crate) fn pump_with(&mut self, scratch: &mut [u8], mut each: impl FnMut(&[u8])) {
        let Some(f) = &mut self.fd else { return };
        // Bounded, so one busy stream cannot starve the other or the clock.
        for _ in 0..16 {
            match f.read(scratch) {
                Ok(0) => {
                    self.fd = None;
                    return;
                }
                Ok(n) => {
                    self.total += n as u64;
                    let room = self.cap.saturating_sub(self.kept.len());
                    self.kept.extend_from_slice(&scratch[..n.min(room)]);
                    each(&scratch[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.fd = None;
                    return;
                }
            }
        }
    }

    /// The text, at most `cap` bytes after UTF-8 replacement, and whether it was truncated.
    pub(crate) fn finish(self) -> (String, bool) {
        let mut truncated = self.total > self.kept.len() as u64;
        let mut s = String::from_utf8_lossy(&self.kept).into_owned();
        if s.len() > self.cap {
            let mut i = self.cap;
            while !s.is_char_boundary(i) {
                i -= 1;
            }
            s.truncate(i);
            truncated = true;
        }
        (s, truncated)
    }
}

fn set_nonblocking(fd: BorrowedFd<'_>) {
    let _ = crate::sys::set_nonblocking(fd);
}

/// How the supervisor answers the job's refused calls: kill, or the errno asked for, else the
/// one the profile's default action names, else EPERM.
fn response_of(v: &Validated, sandbox: &Sandbox) -> Response {
    match v.on_violation {
        OnViolation::Kill => Response::Kill,
        OnViolation::Report => Response::Errno(v.deny_errno.unwrap_or(
            match sandbox.options().profile.default_action() {
                Action::Errno(e) => e,
                _ => libc::EPERM as u16,
            },
        )),
    }
}

/// SIGKILL to the program itself through its pidfd: the timeout and cancellation hold even
/// for a program that left its cgroup or process group (root can move itself out).
fn kill_main(pidfd: &OwnedFd) {
    let _ = crate::sys::pidfd_signal(pidfd.as_fd(), libc::SIGKILL);
}

/// Whether `pid` (our child) has exited, without reaping it: its pid stays reserved until the
/// whole tree is dead, so no process can be mistaken for it.
fn has_exited(pid: i32) -> bool {
    crate::sys::child_has_exited(pid)
}

/// `text` as a C string, or a refusal naming `field`.
fn c_string(field: &str, text: &[u8]) -> Result<CString, ExecError> {
    CString::new(text)
        .map_err(|_| ExecError::Refused(Refusal::new(field, "contains a NUL byte".to_string())))
}

/// The child's stdio and the host's ends of the pipes.
struct Pipes {
    /// The child's ends (stdin is `None` when it reads the shared `/dev/null`).
    child: [Option<OwnedFd>; 3],
    stdin: Option<OwnedFd>,
    /// The host's ends of the output pipes (none when the streams are inherited).
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
}

impl Pipes {
    /// What becomes the child's descriptors 0, 1 and 2.
    fn child_fds(&self) -> std::io::Result<[RawFd; 3]> {
        let null = dev_null()?;
        let fd = |i: usize| self.child[i].as_ref().map_or(null, AsRawFd::as_raw_fd);
        Ok([fd(0), fd(1), fd(2)])
    }
}

/// `/dev/null`, opened once (close-on-exec, above the standard streams): the stdin of every
/// request without stdin text.
fn dev_null() -> std::io::Result<RawFd> {
    static NULL: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = NULL.get() {
        return Ok(fd.as_raw_fd());
    }
    let fd = spawn::above_stdio(OwnedFd::from(std::fs::File::open("/dev/null")?))?;
    Ok(NULL.get_or_init(|| fd).as_raw_fd())
}

fn pipes(with_stdin: bool) -> std::io::Result<Pipes> {
    let (stdin, child_in) = if with_stdin {
        let (r, w) = spawn::pipe()?;
        (Some(w), Some(spawn::above_stdio(r)?))
    } else {
        (None, None)
    };
    let (stdout, out_w) = spawn::pipe()?;
    let (stderr, err_w) = spawn::pipe()?;
    Ok(Pipes {
        child: [
            child_in,
            Some(spawn::above_stdio(out_w)?),
            Some(spawn::above_stdio(err_w)?),
        ],
        stdin,
        stdout: Some(stdout),
        stderr: Some(stderr),
    })
}

/// The host could not take the child's seccomp listener: without CAP_SYS_PTRACE (any caller
/// but root, and root in a container that drops it) only a dumpable child's, and a child
/// without namespaces shares the host's memory, which is non-dumpable. Only a request that
/// changed its profile (`allow`, `deny`, `profile_file`) or a recording has such a listener
/// (built-in profiles report through the spawner thread's), so the refusal names that.
fn handover_refused(v: &Validated, e: std::io::Error) -> ExecError {
    if e.raw_os_error() != Some(libc::EPERM) {
        return ExecError::Setup(std::io::Error::new(
            e.kind(),
            format!("handing over the seccomp listener: {e}"),
        ));
    }
    let field = if v.custom.is_some() {
        "allow"
    } else {
        "profile"
    };
    ExecError::Refused(Refusal::new(
        field,
        "a profile changed by the request (allow, deny, profile_file) reports refused calls \
         through a listener this caller may take only from a program in namespaces of its \
         own (the isolated tier); this run has none (isolation off, or no user namespaces \
         here): use a built-in profile as it is, or the isolated tier",
    ))
}

fn run(
    v: &Validated,
    sandbox: &Sandbox,
    opts: &RunOptions,
    start: Instant,
    mechanism: &mut Option<Mechanism>,
    recorder: Option<&Recorder>,
) -> Result<ExecResult, ExecError> {
    let path = c_string("argv[0]", v.program.as_os_str().as_bytes())?;
    let argv = v
        .argv
        .iter()
        .map(|a| c_string("argv", a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let cwd = v
        .cwd
        .as_ref()
        .map(|c| c_string("cwd", c.as_os_str().as_bytes()))
        .transpose()?;
    // The profile's spawner thread holds the filter already and its children inherit it;
    // otherwise the child attaches one whose execve exemption names this very buffer.
    #[cfg(target_arch = "x86_64")]
    let spawner_base = sandbox.exact_outer_policy().filter(|_| {
        opts.start == StartFrom::SpawnerThread
            && v.custom.is_none()
            && crate::platform::seccomp_listener().is_ok()
            && !matches!(v.streams, Streams::Session(_))
    });
    #[cfg(not(target_arch = "x86_64"))]
    let spawner_base: Option<&crate::policy::Policy> = None;
    let attach = spawner_base.is_none().then_some(path.as_ptr() as u64);
    let mut plan = sandbox.plan(&v.program, attach)?;
    // A session's resident process runs no filter of its own: it installs the profile's in
    // each command it starts, between fork and exec (module `session`).
    if matches!(v.streams, Streams::Session(_)) {
        plan.filter = None;
        plan.notify = false;
        plan.preload_env.clear();
    }
    if let Some(r) = recorder {
        // Learning is the listener: every call goes to the recorder.
        if let Err(why) = crate::platform::seccomp_listener() {
            return Err(ExecError::Refused(Refusal::new(
                "learn",
                format!("{why}; learning needs it: learn on a machine that has it"),
            )));
        }
        plan.filter = Some(
            r.filter(path.as_ptr() as u64)
                .map_err(|e| ExecError::Setup(std::io::Error::other(e.to_string())))?,
        );
        plan.notify = true;
    }
    #[cfg(target_arch = "x86_64")]
    let spawner = match spawner_base {
        Some(base) if plan.planned == Sandboxed::Exact => {
            Some(Spawner::for_profile(sandbox.key(), base).map_err(ExecError::Setup)?)
        }
        _ => None,
    };
    let here = match &v.cwd {
        Some(c) => c.clone(),
        None => std::env::current_dir().map_err(ExecError::Setup)?,
    };
    // A job whose mount namespace gets a /tmp of its own has TMPDIR=/tmp there: it needs no
    // directory on the host's file system, which would only be made and removed for nothing.
    let private_tmp = private_tmp(v);
    let namespaced_tmp = private_tmp
        && v.paths.isolation != super::isolation::Mode::Off
        && super::isolation::presumed_unavailable().is_none();
    // Before anything is made for the job: a workspace too broad to write is refused here.
    let broad = super::workspace::check(
        &v.paths,
        super::paths::default_workspace(&v.paths, sandbox, &here),
        v.audience,
    )?;
    let layer = super::paths::layer(&v.paths, sandbox, &here, !namespaced_tmp)?;
    // What an earlier job left in the shared home to run in this one is removed first.
    if let Some(h) = &v.home {
        super::home::prepare(h).map_err(|e| Refusal::new("home", e))?;
    }
    // Files changed from here on are the run's (the file-size check in `limits_hit`); a
    // second's slack for file systems with coarse timestamps.
    let started_at = std::time::SystemTime::now() - Duration::from_secs(1);
    // A profile the outer filter cannot enforce exactly has the preload stack it; the preload
    // has no supervisor to report to, so in report mode its filter fails refused calls with
    // the errno itself (they are not counted) instead of trapping.
    let response = response_of(v, sandbox);
    if plan.notify {
        if let Err(why) = crate::platform::seccomp_listener() {
            super::no_listener::answer_in_filter(&mut plan, response, &why);
        }
    }
    if let Response::Errno(e) = response {
        for (k, val) in plan.preload_env.iter_mut() {
            if *k == "SECCOMP_DEFAULT_ACTION" {
                *val = Action::Errno(e).to_string();
            }
        }
    }
    let isolation = isolation_layer(v, sandbox, &here, layer.as_ref(), private_tmp)?;
    // The repository's control files, checked after the job (module `git_guard`).
    let git_guard = (v.paths.isolation != super::isolation::Mode::Off)
        .then(|| super::git_guard::Guard::take(v.paths.workspace.as_deref().unwrap_or(&here)));
    let isolated = isolation.as_ref().ok();
    let mut root_warning = Vec::new();
    refuse_root_below_isolated(v, isolated.is_some(), layer.as_ref(), &mut root_warning)?;
    // After the mounts the program changes to its directory by name: an inherited working
    // directory would still be the one beneath them.
    let here_c = match isolated {
        Some(_) if cwd.is_none() => Some(c_string("cwd", here.as_os_str().as_bytes())?),
        _ => None,
    };
    // In its own mount namespace the job's /tmp is private: TMPDIR is /tmp itself.
    let tmpdir = match isolated {
        Some(i) if i.namespaces.private_tmp => Some(("TMPDIR", "/tmp".to_string())),
        _ => layer
            .as_ref()
            .and_then(|l| l.tmp.as_ref())
            .map(|t| ("TMPDIR", t.path().display().to_string())),
    };
    let net = super::net::Plan::new(
        &v.network,
        super::paths::allows(sandbox).tcp,
        super::net::presumed_unavailable().as_deref(),
        isolated.is_some(),
    )?;
    // The isolation layer's namespaces, with a network namespace when the mode needs one.
    let namespaces = match (isolated, net.namespaces()) {
        (Some(i), n) => Some(super::spawn::Namespaces {
            net: n.is_some(),
            ..i.namespaces.clone()
        }),
        (None, n) => n,
    };
    // The preload's variables, TMPDIR and the proxy's replace any of the same name the job
    // carries.
    let own: Vec<(&str, String)> = plan
        .preload_env
        .iter()
        .cloned()
        .chain(tmpdir)
        .chain(net.env())
        .collect();
    let envp = v
        .env
        .iter()
        .filter(|(k, _)| !own.iter().any(|(p, _)| p == k) && net.keeps(k))
        .map(|(k, val)| (k.as_str(), val.as_str()))
        .chain(own.iter().map(|(k, val)| (*k, val.as_str())))
        .map(|(k, val)| c_string("env", format!("{k}={val}").as_bytes()))
        .collect::<Result<Vec<_>, _>>()?;
    let report = if plan.preload_env.is_empty() {
        None
    } else {
        let pipe = ReportPipe::new().map_err(ExecError::Setup)?;
        // Above 3, so that the child's dup to 3 never meets its own source.
        let above = spawn::dup_above(pipe.child_fd(), 4).map_err(ExecError::Setup)?;
        Some((pipe, above))
    };
    let mut limits = v.rlimits.plan().map_err(ExecError::Setup)?;
    // `sandbox run`'s stderr passes through the host when it is not a terminal (module `tee`).
    let mut tee = None;
    let io = match v.streams {
        Streams::Capture => pipes(v.stdin.is_some()),
        Streams::Session(control) => pipes(false).and_then(|mut p| {
            p.child[0] = Some(spawn::dup_above(control, 3)?);
            Ok(p)
        }),
        Streams::Inherit => super::tee::inherit().map(|([i, o, e], t)| {
            tee = t;
            Pipes {
                child: [Some(i), Some(o), Some(e)],
                stdin: None,
                stdout: None,
                stderr: None,
            }
        }),
    }
    .map_err(ExecError::Setup)?;

    // Under an init of its own PID namespace the init's death ends the tree: no cgroup is
    // created only to hold it.
    let pid_namespace = namespaces.as_ref().is_some_and(|n| n.isolate);
    let mut group = Group::new(opts.containment, pid_namespace).map_err(ExecError::Setup)?;
    *mechanism = Some(group.mechanism());
    // Memory of the whole job: by its cgroup where this caller has one, else by the host's
    // watchdog (module `memwatch`); never RLIMIT_AS, which node, Go and Java die under.
    let memory = group.limit_memory(v.rlimits.memory());
    limits.extend(memory.rlimit().map_err(ExecError::Setup)?);
    if group.limit_processes(v.rlimits.processes) {
    } else if isolated.is_some() && !crate::platform::running_as_root() {
        // No pids controller, but a user namespace of its own: RLIMIT_NPROC counts the
        // processes of the caller's uid in that namespace only (per-namespace accounting), and
        // the program, which holds no capability in the initial namespace, cannot exceed it.
        // The kernel exempts uid 0 from it, so as root an explicit limit is refused below.
        let n = v.rlimits.processes as libc::rlim_t;
        limits.push((
            libc::RLIMIT_NPROC as libc::c_int,
            libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            },
        ));
    } else if v.rlimits.processes_required {
        return Err(ExecError::Refused(Refusal::new(
            "limits.processes",
            "this machine gives this caller no pids controller for request cgroups (cgroup v2 \
             with the pids controller delegated, or a writable v1 pids hierarchy, is needed), \
             so the limit cannot be enforced; omit it to run without one",
        )));
    }
    // Violations reach the spawner's shared listener, which finds the request by its cgroup
    // or its child.
    let join_v1 = group.v1_dirs();
    let mut registration = Registration::new(group.cgroup_name(), response);
    // In namespaces the init builds the ruleset itself, from the raw rules with its own
    // mounts added: the host's kernel ruleset is built only for runs without an init.
    let landlock_rules = isolated
        .and(layer.as_ref())
        .and_then(|l| l.prepared.raw_rules());
    let landlock_fd = match (&layer, &landlock_rules) {
        (Some(l), None) => Some(l.prepared.raw_fd().map_err(super::paths::refusal)?),
        _ => None,
    }
    .filter(|fd| *fd >= 0);
    let spec = Spec {
        path: &path,
        argv: &argv,
        envp: &envp,
        cwd: cwd.as_ref().or(here_c.as_ref()),
        stdio: io.child_fds().map_err(ExecError::Setup)?,
        report: report.as_ref().map(|(_, fd)| fd.as_raw_fd()),
        cgroup: group.dir_fd(),
        join_v1: &join_v1,
        limits: &limits,
        landlock: landlock_fd,
        filter: plan.filter.as_deref(),
        listener: plan.notify,
        #[cfg(target_arch = "x86_64")]
        spawner,
        namespaces: namespaces.as_ref(),
        listen: &net.listen,
        landlock_rules,
    };
    // Only exec itself failing is the program's affair (126/127); a step of the child's setup
    // failing is the sandbox's (125), and its message names the step.
    let spawned = spawn::spawn(&spec).map_err(|e| match e {
        SpawnError::Exec(source) => ExecError::Spawn {
            program: v.argv[0].clone(),
            source,
        },
        SpawnError::Setup(e) => ExecError::Setup(e),
        SpawnError::Handover(e) => handover_refused(v, e),
    })?;
    drop(io.child);
    // The child has its own copy now (as descriptor 3): the host keeps only the read end.
    let report = report.map(|(mut pipe, _copy)| {
        pipe.close_writer();
        pipe
    });
    let pid = spawned.pid;
    group.started(pid);
    let main = MainProgram {
        pid,
        init: spawned.init.is_some(),
    };
    registration.add_child(main);

    if matches!(v.streams, Streams::Session(_)) {
        super::session_hook::started(super::session_hook::Started {
            landlock: layer.as_ref().map(|l| l.prepared.status().clone()),
            isolation: isolation.as_ref().ok().map(|l| l.status.clone()),
            network: net.mode,
            namespaces_unavailable: isolation.as_ref().err().filter(|w| !w.is_empty()).cloned(),
            warnings: plan
                .warnings
                .iter()
                .chain(&broad)
                .chain(&root_warning)
                .cloned()
                .collect(),
        });
    }
    let pidfd = spawned.pidfd;
    // The proxy and host-port relays serve the listeners made inside the sandbox's network
    // namespace; the init, when there is one, tells how the program itself ended.
    let mut net_warning = None;
    let served =
        super::net::Running::start(&net, &v.network, spawned.listeners).unwrap_or_else(|e| {
            net_warning = Some(format!(
                "sandbox: the proxy could not be started ({e}); the program had no way out"
            ));
            None
        });
    let init = spawned.init;
    let mut notifier = match recorder {
        // The recorder's thread answers every call; the run only waits for the program.
        Some(r) => {
            if let Some(l) = spawned.listener {
                r.attach(l);
            }
            None
        }
        None => spawned.listener.map(|l| Notifier::new(l, response, main)),
    };
    let mut notified: Option<Tally> = None;
    let mut out = Stream::new(io.stdout, v.max_output_bytes);
    let mut err = Stream::new(io.stderr, v.max_output_bytes);
    let mut input = io.stdin.map(|s| {
        let f = std::fs::File::from(s);
        set_nonblocking(f.as_fd());
        f
    });
    let data = v.stdin.as_deref().unwrap_or("").as_bytes();
    let mut written = 0usize;

    let deadline = v.timeout.and_then(|t| Instant::now().checked_add(t));
    let mut timed_out = false;
    let mut kill_at: Option<Instant> = None;
    let mut exited = false;
    let mut drain_until: Option<Instant> = None;
    let mut scratch = [0u8; 16 * 1024];
    let mut cancelled = false;
    let cancel = opts.cancel.as_ref();

    loop {
        if !exited && !cancelled && cancel.is_some_and(Cancel::is_cancelled) {
            cancelled = true;
            kill_at = None;
            group.kill_all();
            kill_main(&pidfd);
        }
        if !exited && has_exited(pid) {
            exited = true;
            input = None;
            // No process started by the request outlives it.
            group.kill_all();
            drain_until = Some(Instant::now() + DRAIN);
        }
        if exited && out.fd.is_none() && err.fd.is_none() {
            break;
        }
        let now = Instant::now();
        if drain_until.is_some_and(|d| now >= d) {
            tracing::warn!(
                pid,
                "output still open after the request's processes were killed; closing it"
            );
            break;
        }
        if !exited && !timed_out && deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            group.signal(libc::SIGTERM);
            kill_at = Some(now + opts.grace);
        }
        if !exited && kill_at.is_some_and(|k| now >= k) {
            kill_at = None;
            group.kill_all();
            kill_main(&pidfd);
        }

        let mut wake = drain_until.unwrap_or(now + Duration::from_secs(3600));
        if let Some(d) = deadline.filter(|_| !exited && !timed_out) {
            wake = wake.min(d);
        }
        if let Some(k) = kill_at {
            wake = wake.min(k);
        }
        let timeout_ms = wake
            .saturating_duration_since(now)
            .as_millis()
            .min(i32::MAX as u128) as i32;

        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(5);
        let mut watch = |fd: RawFd, events: libc::c_short| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            })
        };
        for fd in [out.raw(), err.raw()].into_iter().flatten() {
            watch(fd, libc::POLLIN);
        }
        if let Some(f) = &input {
            watch(f.as_raw_fd(), libc::POLLOUT);
        }
        if !exited {
            watch(pidfd.as_raw_fd(), libc::POLLIN);
            if let Some(c) = cancel.filter(|_| !cancelled) {
                watch(c.raw(), libc::POLLIN);
            }
        }
        if let Some(n) = &notifier {
            watch(n.raw(), libc::POLLIN);
        }
        let n = crate::sys::poll_for(&mut fds, timeout_ms.max(0)).unwrap_or(0);
        if n == 0 {
            continue;
        }
        for p in &fds {
            if p.revents == 0 {
                continue;
            }
            if Some(p.fd) == out.raw() {
                out.pump(&mut scratch);
            } else if Some(p.fd) == err.raw() {
                err.pump(&mut scratch);
            } else if notifier.as_ref().is_some_and(|n| n.raw() == p.fd) {
                let n = notifier.as_mut().expect("checked above");
                // POLLHUP without POLLIN: every process using the filter is gone.
                if p.revents & libc::POLLIN == 0 || !n.handle() {
                    notified = notifier.take().map(|n| n.tally);
                }
            } else if input.as_ref().is_some_and(|f| f.as_raw_fd() == p.fd) {
                let f = input.as_mut().expect("checked above");
                if p.revents & libc::POLLOUT != 0 && written < data.len() {
                    let end = (written + 65536).min(data.len());
                    match std::io::Write::write(f, &data[written..end]) {
                        Ok(k) => written += k,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => written = data.len(),
                    }
                } else {
                    written = data.len();
                }
                if written >= data.len() {
                    input = None;
                }
            }
        }
        if input.is_some() && written >= data.len() {
            input = None;
        }
    }
    drop(input);
    drop(pidfd);
    let tally = notified
        .or(notifier.take().map(|n| n.tally))
        .filter(|t| !t.seen.is_empty())
        .unwrap_or_else(|| registration.slot().tally());
    // Every descendant is dead: reap the direct child, then the adopted orphans.
    let (status, written_blocks) = crate::sys::wait4(pid).map_err(ExecError::Setup)?;
    // The init of a PID namespace that exited by itself has killed and reaped every other
    // process of the run (spawn/init.rs), so its usage counts the writes of all of them.
    // Not so without a PID namespace (orphans go to this host or the system's init), nor
    // when the init was killed (a timeout, a cancel): the kernel then reaps the rest itself,
    // and their usage reaches no one (module `hits`).
    let written_blocks =
        (init.is_some() && pid_namespace && libc::WIFEXITED(status)).then_some(written_blocks);
    let status = init
        .as_ref()
        .and_then(|i| i.program_status())
        .unwrap_or(status);
    let counts = group.hits();
    group.finish();
    drop(registration);
    let reverted = git_guard.map(super::git_guard::Guard::check);

    let (mut stdout, stdout_truncated) = out.finish();
    let (mut stderr, stderr_truncated) = err.finish();
    let leaks = scan_leaks(v, &mut stdout, &mut stderr);
    let teed = tee.map(|t| t.finish(DRAIN));
    let network = served
        .as_ref()
        .map_or_else(super::net::Report::host, super::net::Running::finish);
    let mut warnings = plan.warnings;
    warnings.extend(broad);
    warnings.extend(net_warning);
    warnings.extend(root_warning);
    let mut filter = plan.planned;
    // The preload's handshake confirms the exact filter it stacks; without it only the
    // outer filter (with its loader exemptions) applied.
    let preload = report.map(ReportPipe::read_available);
    if let Some(r) = &preload {
        if !(r.ready && r.error.is_none()) && filter == Sandboxed::Exact {
            filter = Sandboxed::OuterOnly;
            warnings.push(format!(
                "sandbox: the preload did not confirm its filter{}; only the outer filter applied",
                r.error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ));
        }
    }
    if tally.paced_since.is_some() {
        warnings.push(format!(
            "sandbox: the program made {} refused calls; past {} they were answered at most {} \
             a second (each costs the host work outside the job's limits): it was slowed, not \
             stopped",
            tally.total,
            super::notify::FREE_CALLS,
            super::notify::PACED_RATE
        ));
    }
    // The preload's `violation` line is written from inside the program's own process, which
    // can write that line too, and raise SIGSYS (or queue one with the seccomp `si_code`)
    // itself: a claim, never the kernel's word. Only the supervisor's record of a refused
    // call (the kernel's notification) names the filter; the claim is passed on as such.
    let claimed = preload.and_then(|r| r.violation).map(|(nr, _)| nr);
    // Degraded only because the caller allowed it (`preferred`): said on every run, with the
    // way to refuse instead in the caller's terms.
    let required = |layer: &str| match v.audience {
        super::request::Audience::Json => format!("pass {layer} \"required\""),
        super::request::Audience::Cli => format!("pass --{layer} required"),
    };
    // What the run's namespaces give anyway is not warned about as missing (module
    // `landlock_cover`); it is still listed in the layer's status.
    let others = super::landlock_cover::Others {
        pid_namespace: isolation.is_ok() && namespaces.as_ref().is_some_and(|n| n.isolate),
        net_namespace: isolation.is_ok() && namespaces.as_ref().is_some_and(|n| n.net),
        read_only_root: isolation.as_ref().is_ok_and(|l| l.status.read_only_root),
        no_tcp_sockets: filter != Sandboxed::None
            && super::landlock_cover::filter_refuses_tcp(sandbox),
    };
    if let Some((lacking, covered)) = layer
        .as_ref()
        .map(|l| super::landlock_cover::split(&l.prepared.status().missing, others))
        .filter(|(lacking, _)| !lacking.is_empty())
    {
        let covered = if covered.is_empty() {
            String::new()
        } else {
            format!(" (given here by other layers: {})", covered.join("; "))
        };
        warnings.push(format!(
            "sandbox: warning: Landlock protections missing on this kernel: {}{covered}; {} to refuse instead",
            lacking.join("; "),
            required("landlock")
        ));
    }
    let landlock_held = layer
        .as_ref()
        .is_some_and(|l| !l.prepared.status().enforced.is_empty());
    let tier = super::tier::Tier::of(filter, landlock_held, isolation.is_ok());
    let mut isolation = match isolation {
        Ok(l) => Some(l.status.clone()),
        Err(why) if why.is_empty() => None,
        Err(why) => {
            warnings.push(format!(
                "sandbox: warning: namespaces unavailable ({why}); ran in the {tier} tier ({}), \
                 without isolation (own PID space and /proc, private /tmp, read-only \
                 .git/hooks); {} to refuse instead",
                tier.layers(),
                required("isolation")
            ));
            Some(super::isolation::Status {
                mode: v.paths.isolation,
                namespaces: Vec::new(),
                read_only: Vec::new(),
                read_only_root: false,
                hidden_sockets: Vec::new(),
                unavailable: Some(why),
                reverted: Vec::new(),
            })
        }
    };
    if let (Some(i), Some(r)) = (isolation.as_mut(), reverted) {
        warnings.extend(r.iter().map(|r| r.warning.clone()));
        i.reverted = r;
    }
    let signal = match libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)) {
        // Ended with SIGKILL in place of SIGSYS (it had SIGSYS blocked, ignored or caught):
        // reported as the filter's kill, whatever the program was doing at the time.
        Some(libc::SIGKILL) if tally.program_sigkill => Some(libc::SIGSYS),
        s => s,
    };
    let exit_code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let limits_hit = limits_hit(
        v,
        sandbox,
        &here,
        layer.as_ref(),
        &super::hits::Writes {
            since: started_at,
            blocks: written_blocks,
        },
        signal,
        timed_out,
        stdout_truncated || stderr_truncated,
        &counts,
        &mut warnings,
    );
    warnings.extend(memory.warning());
    let profile = &sandbox.options().profile;
    let asker = super::advice::Asker {
        audience: v.audience,
        // The command line extends a named profile in the spawner thread; a request's allow
        // list needs the listener handover (`handover_refused`).
        allow_works: matches!(v.audience, super::request::Audience::Cli)
            || init.is_some()
            || crate::platform::running_as_root(),
        keep_no_network: v.network.mode.is_none() && net.mode == crate::network::Mode::None,
    };
    let entry = |nr: u32, program: Option<String>, count: u64, args: &[u64; 6]| {
        violation_entry(nr, program, count, args, &v.profile, profile, &asker)
    };
    let violations = violation_entries(&tally, &v.profile, profile, &asker);
    let violation = match (signal, tally.killer.clone()) {
        (_, Some((nr, program))) => Some(
            violations
                .iter()
                .find(|e| e.number == Some(nr) && e.program == program)
                .cloned()
                .unwrap_or_else(|| entry(nr, program, 1, &[0; 6])),
        ),
        // SIGSYS without a refused call the supervisor saw: the program may have raised it
        // itself (or a kill rule of the profile ended it, which the kernel does not tell the
        // host): reported as the signal it is, the filter not named.
        _ => None,
    };
    if signal == Some(libc::SIGSYS)
        && violation.is_none()
        && sandbox.exact_outer_policy().is_some()
        && crate::platform::seccomp_listener().is_err()
    {
        warnings.push(super::no_listener::sigsys_warning(&v.profile));
    }
    if let (Some(libc::SIGSYS), None, Some(nr)) = (signal, &violation, claimed) {
        warnings.push(format!(
            "sandbox: the preload in the program's own process reported a refused call {} \
             ({nr}) before it died of SIGSYS; the kernel did not confirm it (a program can \
             write that report and raise SIGSYS itself)",
            NATIVE.syscall_name(nr).unwrap_or("unknown")
        ));
    }
    // The policy is resolved (the credential list, every writable place's links) only when
    // the job's stderr holds a line worth naming: most runs have none.
    let text = teed.as_deref().unwrap_or(&stderr);
    let refusals = if super::refusals::is_candidate(text.as_bytes()) {
        super::refusals::name(
            text,
            &super::refusals::Policy::of(
                v,
                sandbox,
                &here,
                layer.as_ref(),
                isolation.as_ref(),
                network.mode,
            ),
        )
    } else {
        super::refusals::Found::default()
    };
    warnings.extend(super::refusals::warnings(
        &refusals,
        v.audience,
        &crate::credentials::Context::current(),
    ));
    Ok(ExecResult {
        program: v.program.to_string_lossy().into_owned(),
        exit_code,
        signal,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        duration_s: start.elapsed().as_secs_f64(),
        timed_out,
        cancelled,
        violation,
        violations,
        violations_omitted: tally.omitted,
        sandboxed: SandboxInfo {
            filter,
            profile: v.profile.clone(),
        },
        tier,
        warnings,
        landlock: layer.map(|l| l.prepared.status().clone()),
        limits_hit,
        leaks,
        isolation,
        network,
        refusals: refusals.entries,
        refusals_omitted: refusals.omitted,
        home: v.home.as_ref().map(|h| h.path.display().to_string()),
    })
}

/// A root request that the machine put below the isolated tier is refused unless it says
/// `allow_root`: in its own namespaces with Landlock, root's reach is the job's view (the
/// host's tree read-only, credentials unreadable); without them root passes every permission
/// check Landlock does not cover (a file's mode and owner, anywhere). A request that turned a
/// layer off itself (`isolation` or `landlock` `off`) made that choice knowingly: it runs, and
/// its result says what root keeps. `sandbox run` warns instead (its own `--allow-root`).
fn refuse_root_below_isolated(
    v: &Validated,
    isolated: bool,
    landlock: Option<&super::paths::Layer>,
    warnings: &mut Vec<String>,
) -> Result<(), ExecError> {
    let landlock_held = landlock.is_some_and(|l| !l.prepared.status().enforced.is_empty());
    if v.allow_root || crate::sys::euid() != 0 || (isolated && landlock_held) {
        return Ok(());
    }
    let missing = match (isolated, landlock_held) {
        (false, false) => "namespaces and Landlock",
        (false, true) => "namespaces",
        _ => "Landlock",
    };
    let why = format!(
        "running as root without {missing}: the program keeps root's permissions over every \
         file's mode and owner outside the workspace"
    );
    let chosen = v.paths.isolation == super::isolation::Mode::Off
        || v.paths.mode == crate::landlock::Mode::Off;
    if chosen {
        warnings.push(format!(
            "sandbox: warning: {why} (a layer this request turned off); pass \"allow_root\": \
             true to silence"
        ));
        return Ok(());
    }
    Err(Refusal::new(
        "allow_root",
        format!(
            "{why}, and this machine gives no more; pass \"allow_root\": true to run anyway, or \
             run as an unprivileged user"
        ),
    )
    .into())
}

/// Whether the job's mount namespace, if it gets one, mounts a private `/tmp`. Landlock's
/// rule for a private /tmp would reach into directories bound back there: not when it must
/// keep something under /tmp unreadable.
fn private_tmp(v: &Validated) -> bool {
    let credentials = crate::credentials::deny_read(&crate::credentials::Context::current());
    v.paths.mode == crate::landlock::Mode::Off
        || !credentials
            .iter()
            .chain(&v.paths.deny_read)
            .any(|d| d.starts_with("/tmp"))
}

/// The job's namespace layer: `Ok` with it, or `Err` with why there is none (empty: off).
fn isolation_layer(
    v: &Validated,
    sandbox: &Sandbox,
    here: &std::path::Path,
    landlock: Option<&super::paths::Layer>,
    private_tmp: bool,
) -> Result<Result<super::isolation::Layer, String>, ExecError> {
    let workspace = v
        .paths
        .workspace
        .clone()
        .unwrap_or_else(|| here.to_path_buf());
    let mut visible: Vec<&std::path::Path> = vec![here, &workspace, &v.program];
    visible.extend(v.paths.writable.iter().map(PathBuf::as_path));
    visible.extend(v.paths.read_only.iter().map(PathBuf::as_path));
    // Absolute paths among the arguments name files the caller means (`touch /tmp/x/f`).
    let named: Vec<PathBuf> = v.argv[1..]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.starts_with("/tmp/"))
        .map(|p| {
            if p.exists() {
                p
            } else {
                p.parent().map(PathBuf::from).unwrap_or(p)
            }
        })
        .filter(|p| p.exists())
        .collect();
    visible.extend(named.iter().map(PathBuf::as_path));
    // The program's own HOME (an exec request's scrubbed `HOME=/tmp`, or one the caller set
    // below /tmp) holds its configuration, e.g. git's identity: it stays visible.
    let home: Vec<PathBuf> = v
        .env
        .iter()
        .filter(|(k, _)| k == "HOME")
        .map(|(_, h)| PathBuf::from(h))
        .filter(|h| h.starts_with("/tmp/") && h.is_dir())
        .collect();
    visible.extend(home.iter().map(PathBuf::as_path));
    // The view binds the same writable places as Landlock grants, with Landlock or without.
    let writable = match landlock {
        Some(l) => l.writable.clone(),
        None => super::paths::writable_set(&v.paths, &super::paths::allows(sandbox), here),
    };
    // The deny list Landlock carves around, for the view to cover instead; only where the
    // init rebuilds the job's Landlock rules (with its `/` rule).
    let deny_read: Vec<PathBuf> = match landlock {
        Some(l) if l.prepared.raw_rules().is_some() => {
            crate::credentials::deny_read(&crate::credentials::Context::current())
                .into_iter()
                .chain(v.paths.deny_read.iter().cloned())
                .collect()
        }
        _ => Vec::new(),
    };
    let inputs = super::isolation::Inputs {
        mode: v.paths.isolation,
        deny_read: &deny_read,
        workspace: &workspace,
        read_only: &v.paths.read_only,
        visible: &visible,
        writable: &writable,
        private_tmp,
        allowed_sockets: &v.paths.allowed_sockets,
    };
    Ok(super::isolation::layer(&inputs)?)
}

/// One refused call as a result entry (`count` times, by `program`), with the advice `asker`
/// gets under `profile` (named `profile_name` in the entry). Shared by one-shot jobs and
/// session commands.
pub(crate) fn violation_entry(
    nr: u32,
    program: Option<String>,
    count: u64,
    args: &[u64; 6],
    profile_name: &str,
    profile: &Profile,
    asker: &super::advice::Asker,
) -> Violation {
    let advice = super::advice::advise(nr, args, profile, asker);
    Violation {
        syscall: NATIVE.syscall_name(nr).unwrap_or("unknown").to_string(),
        number: Some(nr),
        count,
        program,
        profile: profile_name.to_string(),
        hint: advice.hint,
        change: Some(advice.change),
    }
}

/// Every refused call the supervisor counted, as result entries in the order first seen.
pub(crate) fn violation_entries(
    tally: &Tally,
    profile_name: &str,
    profile: &Profile,
    asker: &super::advice::Asker,
) -> Vec<Violation> {
    tally
        .seen
        .iter()
        .map(|s| {
            violation_entry(
                s.nr,
                s.program.clone(),
                s.count,
                &s.args,
                profile_name,
                profile,
                asker,
            )
        })
        .collect()
}

/// The limits the run hit (module `hits`), each with its warning line added to `warnings`.
#[allow(clippy::too_many_arguments)]
fn limits_hit(
    v: &Validated,
    sandbox: &Sandbox,
    here: &std::path::Path,
    layer: Option<&super::paths::Layer>,
    writes: &super::hits::Writes,
    signal: Option<i32>,
    timed_out: bool,
    truncated: bool,
    counts: &super::hits::Counts,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    use super::hits::{file_at_limit, roots_to_search, warning, Hit};
    let json = v.audience == super::request::Audience::Json;
    let field = |j: &'static str, c: Option<&'static str>| if json { Some(j) } else { c };
    let mut hits = Vec::new();
    if timed_out {
        hits.push((
            Hit::Time,
            String::new(),
            field("timeout_s", Some("--timeout")),
        ));
    }
    if truncated && v.streams == Streams::Capture {
        hits.push((Hit::Output, String::new(), field("max_output_bytes", None)));
    }
    if signal == Some(libc::SIGXCPU) {
        hits.push((
            Hit::Cpu,
            String::new(),
            field("limits.cpu_seconds", Some("--timeout")),
        ));
    }
    if let Some(m) = &counts.memory {
        hits.push((
            Hit::Memory,
            m.detail(v.rlimits.memory_bytes),
            field("limits.memory_bytes", None),
        ));
    }
    if counts.processes > 0 {
        hits.push((
            Hit::Processes,
            format!(
                "{} fork{} refused at the process limit of {}",
                counts.processes,
                if counts.processes == 1 { "" } else { "s" },
                v.rlimits.processes
            ),
            field("limits.processes", None),
        ));
    }
    let fsize = v.rlimits.fsize_bytes;
    let fsize_field = field("limits.fsize_bytes", Some("`ulimit -f` before sandbox run"));
    if signal == Some(libc::SIGXFSZ) {
        hits.push((Hit::Fsize, format!(" of {fsize} bytes"), fsize_field));
    } else if fsize != libc::RLIM_INFINITY && super::paths::writes_allowed(sandbox) {
        // A descendant's SIGXFSZ is seen by its parent only: look for the file it left, where
        // the run may have written (its private /tmp, new for the run, always).
        let mut roots: Vec<std::path::PathBuf> = Vec::new();
        roots.push(
            v.paths
                .workspace
                .clone()
                .unwrap_or_else(|| here.to_path_buf()),
        );
        roots.extend(v.paths.writable.iter().cloned());
        let mut roots = roots_to_search(roots, writes);
        roots.extend(
            layer
                .and_then(|l| l.tmp.as_ref())
                .map(|t| t.path().to_path_buf()),
        );
        if let Some(f) = file_at_limit(&roots, fsize, writes.since) {
            hits.push((
                Hit::Fsize,
                format!(" of {fsize} bytes ({} is that long)", f.display()),
                fsize_field,
            ));
        }
    }
    hits.into_iter()
        .map(|(hit, detail, field)| {
            warnings.push(warning(hit, &detail, field));
            hit.name().to_string()
        })
        .collect()
}
