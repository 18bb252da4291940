//! One command of a session, as the host sees it: a thread relays its output (into the
//! result, capped, and as events when asked), answers its refused calls on its own listener,
//! enforces its timeout, and builds its result once it has ended.

use crate::exec::notify::{MainProgram, Notifier, Response, Tally};
use crate::exec::{ExecResult, OnViolation, SandboxInfo, Tier, Validated};
use crate::policy::Action;
use crate::sandbox::Sandboxed;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::mpsc::{channel, Receiver, Sender};

/// The session's layers, as the engine started them (the same for every command).
#[derive(Clone, Debug)]
pub(crate) struct Layers {
    pub landlock: Option<crate::landlock::Status>,
    pub isolation: Option<crate::exec::IsolationStatus>,
    pub warnings: Vec<String>,
    pub namespaces: bool,
    pub network: crate::network::Mode,
}

/// What a command needs of its session (the session implements it): a trait, so this
/// module does not import its parent.
pub(crate) trait Host: Send + Sync {
    /// Sends `sig` to command `id`'s process group.
    fn signal(&self, id: u64, sig: i32) -> std::io::Result<()>;
    /// The session's sandbox.
    fn sandbox(&self) -> &crate::sandbox::Sandbox;
    /// Whether the session has ended.
    fn ended(&self) -> bool;
    /// The session's layers.
    fn layers(&self) -> &Layers;
    /// A command started by the session has ended (its thread is done with it).
    fn command_ended(&self);
}
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Output of a running command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A chunk of standard output, as read.
    Stdout(Vec<u8>),
    /// A chunk of standard error, as read.
    Stderr(Vec<u8>),
}

/// A running command of a session.
pub struct Process {
    id: u64,
    pid: i32,
    inner: Arc<dyn Host>,
    stdin: Mutex<Option<std::fs::File>>,
    events: Mutex<Receiver<Event>>,
    done: Mutex<Option<JoinHandle<ExecResult>>>,
    tty: Option<OwnedFd>,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("id", &self.id)
            .field("pid", &self.pid)
            .finish()
    }
}

impl Process {
    /// The command's number in its session.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Its process id as the host sees it.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Writes `data` to the command's stdin (blocking while the pipe is full).
    pub fn write_stdin(&self, data: &[u8]) -> std::io::Result<()> {
        match self
            .stdin
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            Some(f) => f.write_all(data),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the command's stdin is closed",
            )),
        }
    }

    /// Whether the command runs on a terminal ([`super::Command::pty`]).
    pub fn has_tty(&self) -> bool {
        self.tty.is_some()
    }

    /// Sets the command's terminal size (it gets SIGWINCH); `InvalidInput` without a terminal.
    pub fn resize(&self, cols: u16, rows: u16) -> std::io::Result<()> {
        match &self.tty {
            Some(t) => crate::sys::set_window(t.as_fd(), cols, rows),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the command has no terminal",
            )),
        }
    }

    /// Closes the command's stdin: it reads end of file.
    pub fn close_stdin(&self) {
        self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Sends `sig` (1 to 64) to the command's process group, as a terminal would.
    pub fn signal(&self, sig: i32) -> std::io::Result<()> {
        if !(1..=64).contains(&sig) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{sig} is not a signal number (1 to 64)"),
            ));
        }
        self.inner.signal(self.id, sig)
    }

    /// The next output chunk, waiting at most `timeout`; `None` when none came or the output
    /// has ended (only commands started with [`super::Command::stream`] have events).
    pub fn next_event(&self, timeout: Duration) -> Option<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .recv_timeout(timeout)
            .ok()
    }

    /// Every output chunk until the output ends.
    pub fn events(&self) -> impl Iterator<Item = Event> + '_ {
        std::iter::from_fn(move || {
            self.events
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .recv()
                .ok()
        })
    }

    /// Closes its stdin, waits for the command to end and returns its result.
    pub fn wait(self) -> ExecResult {
        self.close_stdin();
        self.finish().expect("a process is waited for once")
    }

    /// Waits for the command to end, leaving its stdin as it is; its result the first time,
    /// `None` after (for a process shared between threads, one writing its stdin while
    /// another waits).
    pub fn finish(&self) -> Option<ExecResult> {
        let done = self.done.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        Some(
            done.join()
                .unwrap_or_else(|_| panic!("a session command's thread panicked")),
        )
    }
}

/// What [`start`] needs.
pub(crate) struct Start {
    pub inner: Arc<dyn Host>,
    pub id: u64,
    pub v: Validated,
    pub plan_planned: Sandboxed,
    pub plan_warnings: Vec<String>,
    pub pidfd: OwnedFd,
    pub listener: Option<OwnedFd>,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The host's end of the command's reply socket: its `Exited` comes here.
    pub reply: OwnedFd,
    pub stream: bool,
    pub tty: Option<OwnedFd>,
    /// The command's own limits (module `cgroups`), when it asked for any.
    pub own: Option<super::cgroups::CommandCgroup>,
}

/// The process's pid in the host's PID namespace, from its pidfd.
pub(crate) fn pid_of(pidfd: &OwnedFd) -> i32 {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd()))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Pid:")
                    .map(|p| p.trim().parse().unwrap_or(-1))
            })
        })
        .unwrap_or(-1)
}

/// Starts the command's thread.
pub(crate) fn start(mut s: Start) -> Process {
    let pid = pid_of(&s.pidfd);
    let (tx, rx) = channel();
    let inner = Arc::clone(&s.inner);
    let id = s.id;
    let stdin = s.stdin.take().map(std::fs::File::from);
    let tty = s.tty.take();
    let done = std::thread::Builder::new()
        .name("sandbox-session-cmd".into())
        .spawn(move || supervise(s, pid, tx))
        .expect("a thread for the command");
    Process {
        id,
        pid,
        inner,
        stdin: Mutex::new(stdin),
        events: Mutex::new(rx),
        done: Mutex::new(Some(done)),
        tty,
    }
}

/// Time after SIGTERM before SIGKILL, at a timeout.
const GRACE: Duration = Duration::from_secs(1);
/// How long output is still read once the command has exited (background processes it left
/// may hold the pipes open: they keep running, their later output goes nowhere).
const DRAIN: Duration = Duration::from_millis(100);

/// A command's stdout or stderr: the engine's stream, whose chunks also go out as events.
struct Output {
    stream: crate::exec::Stream,
    stdout: bool,
}

impl Output {
    fn new(fd: OwnedFd, cap: usize, stdout: bool) -> Output {
        Output {
            stream: crate::exec::Stream::new(Some(fd), cap),
            stdout,
        }
    }

    fn raw(&self) -> Option<std::os::fd::RawFd> {
        self.stream.raw()
    }

    fn pump(&mut self, scratch: &mut [u8], events: Option<&Sender<Event>>) {
        let stdout = self.stdout;
        self.stream.pump_with(scratch, |chunk| {
            if let Some(tx) = events {
                let chunk = chunk.to_vec();
                let _ = tx.send(if stdout {
                    Event::Stdout(chunk)
                } else {
                    Event::Stderr(chunk)
                });
            }
        });
    }

    fn finish(self) -> (String, bool) {
        self.stream.finish()
    }
}

/// The wait status the resident sends on the command's reply socket once it has reaped it;
/// `None` when none comes within 500 ms (or the socket ends).
fn exit_status(reply: &OwnedFd) -> Option<i32> {
    let mut p = [libc::pollfd {
        fd: reply.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    if crate::sys::poll_for(&mut p, 500).ok()? == 0 {
        return None;
    }
    let mut buf = Vec::new();
    match super::wire::recv_at_most(reply.as_fd(), &mut buf, super::wire::MAX_REPLY) {
        Ok(Some((super::wire::FromResident::Exited { status, .. }, _))) => Some(status),
        _ => None,
    }
}

fn supervise(s: Start, pid: i32, tx: Sender<Event>) -> ExecResult {
    let started = Instant::now();
    let response = match s.v.on_violation {
        OnViolation::Kill => Response::Kill,
        OnViolation::Report => Response::Errno(s.v.deny_errno.unwrap_or(
            match s.inner.sandbox().options().profile.default_action() {
                Action::Errno(e) => e,
                _ => libc::EPERM as u16,
            },
        )),
    };
    let mut notifier = s
        .listener
        .map(|l| Notifier::new(l, response, MainProgram { pid, init: false }));
    let events = s.stream.then_some(&tx);
    let mut out = Output::new(s.stdout, s.v.max_output_bytes, true);
    let mut err = Output::new(s.stderr, s.v.max_output_bytes, false);
    let deadline = s.v.timeout.and_then(|t| started.checked_add(t));
    let mut timed_out = false;
    let mut kill_at: Option<Instant> = None;
    let mut exited: Option<Instant> = None;
    let mut status: Option<i32> = None;
    let mut tally: Option<Tally> = None;
    let mut scratch = vec![0u8; 64 * 1024];
    loop {
        let now = Instant::now();
        if exited.is_none() && crate::sys::pidfd_exited(s.pidfd.as_fd()) {
            exited = Some(now);
        }
        if let Some(at) = exited {
            if status.is_none() {
                // No status (the resident is gone: the session ended): the command was killed.
                status = Some(exit_status(&s.reply).unwrap_or(libc::SIGKILL));
            }
            if (out.raw().is_none() && err.raw().is_none()) || now >= at + DRAIN {
                break;
            }
        }
        if exited.is_none() && !timed_out && deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            let _ = s.inner.signal(s.id, libc::SIGTERM);
            kill_at = Some(now + GRACE);
        }
        if exited.is_none() && kill_at.is_some_and(|k| now >= k) {
            kill_at = None;
            let _ = s.inner.signal(s.id, libc::SIGKILL);
            let _ = crate::sys::pidfd_signal(s.pidfd.as_fd(), libc::SIGKILL);
        }
        let mut wake = now + Duration::from_secs(3600);
        if let Some(at) = exited {
            wake = wake.min(at + DRAIN);
        }
        if let Some(d) = deadline.filter(|_| !timed_out && exited.is_none()) {
            wake = wake.min(d);
        }
        if let Some(k) = kill_at {
            wake = wake.min(k);
        }
        let mut fds = Vec::with_capacity(4);
        for fd in [out.raw(), err.raw()].into_iter().flatten() {
            fds.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if exited.is_none() {
            fds.push(libc::pollfd {
                fd: s.pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if let Some(n) = &notifier {
            fds.push(libc::pollfd {
                fd: n.raw(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let ms = wake
            .saturating_duration_since(now)
            .as_millis()
            .min(i32::MAX as u128) as i32;
        if crate::sys::poll_for(&mut fds, ms.max(0)).unwrap_or(0) == 0 {
            continue;
        }
        for p in &fds {
            if p.revents == 0 {
                continue;
            }
            if out.raw() == Some(p.fd) {
                out.pump(&mut scratch, events);
            } else if err.raw() == Some(p.fd) {
                err.pump(&mut scratch, events);
            } else if notifier.as_ref().is_some_and(|n| n.raw() == p.fd) {
                let n = notifier.as_mut().expect("checked above");
                if p.revents & libc::POLLIN == 0 || !n.handle() {
                    tally = notifier.take().map(|n| n.tally);
                }
            }
        }
    }
    drop(tx);
    // Every process of the command is counted once it has ended; its cgroups go (or wait for
    // the background processes it left) when `own` is dropped, after this.
    let mut own = s.own;
    let hits = own.as_mut().map(|c| c.hits()).unwrap_or_default();
    s.inner.command_ended();
    let tally = tally.or(notifier.map(|n| n.tally)).unwrap_or_default();
    let status = status.unwrap_or(libc::SIGKILL);
    result(
        s.inner.as_ref(),
        &s.v,
        s.plan_planned,
        s.plan_warnings,
        status,
        tally,
        out,
        err,
        started,
        timed_out,
        Own {
            memory: own.as_ref().and_then(|c| c.memory()),
            processes: own.as_ref().and_then(|c| c.processes()),
            hits,
        },
    )
}

/// A command's own limits and what they stopped.
struct Own {
    memory: Option<u64>,
    processes: Option<u64>,
    hits: super::cgroups::Hits,
}

#[allow(clippy::too_many_arguments)]
fn result(
    inner: &dyn Host,
    v: &Validated,
    planned: Sandboxed,
    plan_warnings: Vec<String>,
    status: i32,
    tally: Tally,
    out: Output,
    err: Output,
    started: Instant,
    timed_out: bool,
    own: Own,
) -> ExecResult {
    let cancelled = inner.ended()
        && libc::WIFSIGNALED(status)
        && libc::WTERMSIG(status) == libc::SIGKILL
        && !timed_out;
    let signal = match libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)) {
        Some(libc::SIGKILL) if tally.program_sigkill => Some(libc::SIGSYS),
        s => s,
    };
    let exit_code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let (mut stdout, stdout_truncated) = out.finish();
    let (mut stderr, stderr_truncated) = err.finish();
    let leaks = crate::exec::scan_leaks(v, &mut stdout, &mut stderr);
    let mut warnings = inner.layers().warnings.clone();
    warnings.extend(plan_warnings);
    let mut limits_hit = Vec::new();
    if timed_out {
        limits_hit.push("time".to_string());
        warnings.push(format!(
            "sandbox: the command ran past its timeout of {}s and was ended (SIGTERM, then \
             SIGKILL); raise the command's timeout",
            v.timeout.map_or(0.0, |t| t.as_secs_f64())
        ));
    }
    if stdout_truncated || stderr_truncated {
        limits_hit.push("output".to_string());
        warnings.push(format!(
            "sandbox: output past {} bytes per stream was dropped; raise max_output_bytes",
            v.max_output_bytes
        ));
    }
    let json = v.audience == crate::exec::Audience::Json;
    if let (Some(m), Some(limit)) = (&own.hits.memory, own.memory) {
        limits_hit.push("memory".to_string());
        warnings.push(crate::exec::hits::warning(
            crate::exec::hits::Hit::Memory,
            &m.detail(limit),
            Some(if json {
                "the command's limits.memory_bytes"
            } else {
                "run --session's --memory"
            }),
        ));
    }
    if let (n @ 1.., Some(limit)) = (own.hits.processes, own.processes) {
        limits_hit.push("processes".to_string());
        warnings.push(crate::exec::hits::warning(
            crate::exec::hits::Hit::Processes,
            &format!(
                "{n} fork{} refused at the command's process limit of {limit}",
                if n == 1 { "" } else { "s" }
            ),
            Some(if json {
                "the command's limits.processes"
            } else {
                "run --session's --processes"
            }),
        ));
    }
    let profile = &inner.sandbox().options().profile;
    // A command cannot change its session's policy: a hint names the change to the session's
    // own request (a per-request allow list works there only as the one-shot rules say).
    let asker = crate::exec::advice::Asker {
        audience: v.audience,
        allow_works: false,
        keep_no_network: v.network.mode.is_none()
            && inner.layers().network == crate::network::Mode::None,
    };
    let violations = crate::exec::violation_entries(&tally, &v.profile, profile, &asker);
    let violation = tally.killer.clone().map(|(nr, program)| {
        violations
            .iter()
            .find(|e| e.number == Some(nr) && e.program == program)
            .cloned()
            .unwrap_or_else(|| {
                crate::exec::violation_entry(nr, program, 1, &[0; 6], &v.profile, profile, &asker)
            })
    });
    let landlock_held = inner
        .layers()
        .landlock
        .as_ref()
        .is_some_and(|l| !l.enforced.is_empty());
    let mut result = ExecResult {
        home: v.home.as_ref().map(|h| h.path.display().to_string()),
        program: v.program.to_string_lossy().into_owned(),
        exit_code,
        signal,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        duration_s: started.elapsed().as_secs_f64(),
        timed_out,
        cancelled,
        violation,
        violations,
        violations_omitted: tally.omitted,
        sandboxed: SandboxInfo {
            filter: planned,
            profile: v.profile.clone(),
        },
        tier: Tier::of(planned, landlock_held, inner.layers().namespaces),
        warnings,
        landlock: inner.layers().landlock.clone(),
        limits_hit,
        leaks,
        isolation: inner.layers().isolation.clone(),
        network: crate::exec::NetworkReport::of_mode(inner.layers().network),
        refusals: Vec::new(),
        refusals_omitted: 0,
    };
    // Refusals of the view, Landlock and the network mode, named from this command's own
    // stderr as a one-shot's are, in the words of the session's front end.
    crate::exec::name_refusals(&mut result, v, inner.sandbox());
    result
}
