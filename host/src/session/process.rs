//! One command of a session, as the host sees it: a supervising loop relays its output (into
//! the result, capped, and as events when asked), answers its refused calls on its own
//! listener, enforces its timeout, and builds its result once it has ended.
//!
//! The loop runs on the thread that waits for the command when that thread comes first (no
//! thread of the command's own, no hand-off of the result); a thread of its own runs it when
//! something needs it running before anyone waits ([`Run`]).

use crate::exec::notify::{MainProgram, Notifier, Response, Slot, Tally};
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
    /// The proxy's address inside (`proxy` mode).
    pub proxy: Option<String>,
    /// Who of the session made each proxied connection (a proxy or host ports only).
    pub owners: Option<Arc<crate::exec::net_owners::Owners>>,
}

/// A command's own record of the destinations it tried through the session's proxy or host
/// ports; it stops recording when dropped.
pub(crate) struct NetRecord {
    owners: Arc<crate::exec::net_owners::Owners>,
    pid: i32,
    records: Arc<crate::proxy::Records>,
}

impl NetRecord {
    /// Starts recording for the command whose first process is `pid` (host pid).
    pub(crate) fn start(owners: &Arc<crate::exec::net_owners::Owners>, pid: i32) -> NetRecord {
        NetRecord {
            owners: Arc::clone(owners),
            pid,
            records: owners.register(pid),
        }
    }
}

impl Drop for NetRecord {
    fn drop(&mut self) {
        self.owners.finish(self.pid);
    }
}

/// What a command needs of its session (the session implements it): a trait, so this
/// module does not import its parent.
pub(crate) trait Host: Send + Sync {
    /// Sends `sig` to command `id`'s process group, unless its `pidfd` says it has ended;
    /// `ns_pid` is its pid in the session.
    fn signal(
        &self,
        id: u64,
        sig: i32,
        pidfd: std::os::fd::BorrowedFd<'_>,
        ns_pid: i32,
    ) -> std::io::Result<()>;
    /// The session's sandbox.
    fn sandbox(&self) -> &crate::sandbox::Sandbox;
    /// Whether the session has ended.
    fn ended(&self) -> bool;
    /// The session's layers.
    fn layers(&self) -> &Layers;
    /// In the contained tier: the claims the commands' filter carries and the session's
    /// places, within which the host makes those calls.
    fn emulation(&self) -> Option<&crate::exec::session_hook::Emulation>;
    /// Command `pid`'s result is made: calls on the session's listener are no longer its.
    fn unroute(&self, pid: i32);
    /// A command started by the session has ended (its thread is done with it).
    fn command_ended(&self);
    /// The repository's control files after a command: what would run a command the
    /// command chose is undone (module `git_guard`), each item returned for its result.
    fn git_check(&self) -> Vec<crate::exec::GitReverted> {
        Vec::new()
    }
}
use std::sync::{Arc, Mutex, TryLockError};
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
    /// Its pid in the session, and its pidfd (shared with its supervising loop): signals are
    /// for it only while it runs.
    ns_pid: i32,
    pidfd: Arc<OwnedFd>,
    inner: Arc<dyn Host>,
    stdin: Mutex<Option<std::fs::File>>,
    events: Mutex<Receiver<Event>>,
    run: Arc<Mutex<Run>>,
    tty: Option<OwnedFd>,
}

/// Who runs a command's supervising loop.
pub(crate) enum Run {
    /// Nobody yet: the first thread to wait for the command runs the loop itself. Anything
    /// that needs the loop running before that (stdin written, events read, the process
    /// dropped, the session's watch after [`HANDOFF`]) gives it a thread of its own first.
    Idle(Box<Supervisor>),
    /// A thread of the command's own runs it.
    Thread(JoinHandle<ExecResult>),
    /// A waiting thread runs it or has taken its result.
    Taken,
}

/// How long a command may go unsupervised before the session's watch gives it a thread: its
/// refused calls wait, and its output waits in the pipes, at most this long; its timeout is
/// enforced at most this late.
pub(crate) const HANDOFF: Duration = Duration::from_millis(100);

/// Makes sure someone runs the loop of the command behind `run`: an idle one gets a thread
/// of its own. A lock held elsewhere means a thread is running it or giving it one.
pub(crate) fn attend(run: &Mutex<Run>) {
    let mut guard = match run.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return,
    };
    if let Run::Idle(_) = &*guard {
        let Run::Idle(s) = std::mem::replace(&mut *guard, Run::Taken) else {
            unreachable!("matched above")
        };
        let thread = std::thread::Builder::new()
            .name("sandbox-session-cmd".into())
            .spawn(move || supervise(*s))
            .expect("a thread for the command");
        *guard = Run::Thread(thread);
    }
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
        // The command may answer only once its output is read: someone must be reading it.
        attend(&self.run);
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
        self.inner
            .signal(self.id, sig, self.pidfd.as_fd(), self.ns_pid)
    }

    /// The next output chunk, waiting at most `timeout`; `None` when none came or the output
    /// has ended (only commands started with [`super::Command::stream`] have events).
    pub fn next_event(&self, timeout: Duration) -> Option<Event> {
        attend(&self.run);
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .recv_timeout(timeout)
            .ok()
    }

    /// Every output chunk until the output ends.
    pub fn events(&self) -> impl Iterator<Item = Event> + '_ {
        attend(&self.run);
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
        let run = std::mem::replace(
            &mut *self.run.lock().unwrap_or_else(|e| e.into_inner()),
            Run::Taken,
        );
        match run {
            // Nobody runs the loop yet: this thread does, so the command's end wakes the
            // thread that wants its result and no other.
            Run::Idle(s) => Some(supervise(*s)),
            Run::Thread(t) => Some(
                t.join()
                    .unwrap_or_else(|_| panic!("a session command's thread panicked")),
            ),
            Run::Taken => None,
        }
    }

    /// The command's supervision, for the session's watch (which gives it a thread when
    /// nobody has waited for it after [`HANDOFF`]).
    pub(crate) fn run(&self) -> std::sync::Weak<Mutex<Run>> {
        Arc::downgrade(&self.run)
    }
}

impl Drop for Process {
    /// A command nobody waits for stays supervised until it ends (its timeout, its listener),
    /// on a thread of its own.
    fn drop(&mut self) {
        attend(&self.run);
    }
}

/// What [`start`] needs.
pub(crate) struct Start {
    pub inner: Arc<dyn Host>,
    pub id: u64,
    pub v: Validated,
    pub plan_planned: Sandboxed,
    pub plan_warnings: Vec<String>,
    pub pidfd: Arc<OwnedFd>,
    /// Its pid in the host's PID namespace and in the session's ([`pids_knowing`]).
    pub pids: (i32, i32),
    pub listener: Option<OwnedFd>,
    /// Where the command inherited the spawner thread's filter: its slot on the session's
    /// one listener (module `shared`), where its refused calls are counted.
    pub routed: Option<Arc<Slot>>,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The host's end of the command's reply socket: its `Exited` comes here, unless
    /// `exit_info`.
    pub reply: OwnedFd,
    /// The kernel reaps the command and its status is read from its pidfd.
    pub exit_info: bool,
    pub stream: bool,
    pub tty: Option<OwnedFd>,
    /// The command's own limits (module `cgroups`), when it asked for any.
    pub own: Option<super::cgroups::CommandCgroup>,
    /// The command's record of its proxied destinations, where the session has a proxy.
    pub net: Option<NetRecord>,
}

/// The process's pid in the host's PID namespace, from its pidfd.
pub(crate) fn pid_of(pidfd: &OwnedFd) -> i32 {
    pids_knowing(pidfd, None).0
}

/// The process's pid in the host's PID namespace and in its own (the session's, where it has
/// one). Where the pid in the session is known already (`own`, from the resident), one
/// `PIDFD_GET_INFO` call gives the host's (-1 once the process is reaped); else, and on
/// kernels without that call, one read of the pidfd's `fdinfo` (`Pid:`, and `NSpid:`'s last
/// entry). -1 where unknown.
pub(crate) fn pids_knowing(pidfd: &OwnedFd, own: Option<i32>) -> (i32, i32) {
    if let Some(own) = own.filter(|p| *p > 0) {
        match crate::sys::pidfd_pid(pidfd.as_fd()) {
            Ok(host) => return (host, own),
            // The kernel answers, and the process is gone: a short command can have exited
            // and been reaped before the host reads its start. `fdinfo` has no pid for it
            // either (`Pid: -1`); reading it was 5% of the host thread's samples in a profile
            // of `/bin/true` commands.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return (-1, own),
            Err(_) => {}
        }
    }
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd()))
        .unwrap_or_default();
    let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name));
    let host = field("Pid:")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or(-1);
    let own = field("NSpid:")
        .and_then(|p| p.split_whitespace().last()?.parse().ok())
        .unwrap_or(host);
    (host, own)
}

/// A command's supervising loop, before it runs.
pub(crate) struct Supervisor {
    start: Start,
    pid: i32,
    events: Sender<Event>,
    started: Instant,
}

/// Makes the command's [`Process`]. A command that streams its output gets its thread at once
/// (its events must flow whether or not anyone waits); any other is supervised by the first
/// thread that waits for it, or given a thread by [`attend`].
pub(crate) fn start(mut s: Start) -> Process {
    let (pid, ns_pid) = s.pids;
    let pidfd = Arc::clone(&s.pidfd);
    let (tx, rx) = channel();
    let inner = Arc::clone(&s.inner);
    let id = s.id;
    let stdin = s.stdin.take().map(std::fs::File::from);
    let tty = s.tty.take();
    let stream = s.stream;
    let run = Arc::new(Mutex::new(Run::Idle(Box::new(Supervisor {
        start: s,
        pid,
        events: tx,
        started: Instant::now(),
    }))));
    if stream {
        attend(&run);
    }
    Process {
        id,
        pid,
        ns_pid,
        pidfd,
        inner,
        stdin: Mutex::new(stdin),
        events: Mutex::new(rx),
        run,
        tty,
    }
}

thread_local! {
    /// The buffer a thread's supervising loops read output into, kept between commands
    /// (zeroing 64 KiB for each was 6% of the supervising loop's samples in a profile of
    /// `/bin/true` commands).
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
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

/// What the command's reply socket said.
enum Reply {
    /// The resident reaped the command: its wait status.
    Exited(i32),
    /// Nothing yet (a spurious wake-up).
    Nothing,
    /// The resident is gone (the session ended) or said something else: the socket is done.
    Gone,
}

/// Reads the resident's `Exited` from the command's reply socket.
fn read_reply(reply: &OwnedFd, buf: &mut Vec<u8>) -> Reply {
    match super::wire::recv_at_most(reply.as_fd(), buf, super::wire::MAX_REPLY) {
        Ok(Some((super::wire::FromResident::Exited { status, .. }, _))) => Reply::Exited(status),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Reply::Nothing,
        _ => Reply::Gone,
    }
}

/// The supervising loop: relays the output, answers the listener, enforces the timeout until
/// the command has ended, then makes its result.
///
/// The command's end: where the kernel keeps a reaped process's status for its pidfd
/// (`exit_info`), the kernel reaps the command as it exits and the status is read from the
/// pidfd, so the exit wakes this loop and no other process. Elsewhere it is the resident's
/// `Exited` on the reply socket: the resident holds the write ends of the command's stdout and
/// stderr until it has reaped it and closes them just before it sends `Exited`, so the exit
/// wakes this loop once (output at its end, and its status), not three times (pipes, pidfd,
/// status). When the resident is gone (the session ended and its init kills every process),
/// the pidfd says when the command is gone too and the command is reported killed.
fn supervise(sup: Supervisor) -> ExecResult {
    let Supervisor {
        start: s,
        pid,
        events: tx,
        started,
    } = sup;
    let response = match s.v.on_violation {
        OnViolation::Kill => Response::Kill,
        OnViolation::Report => Response::Errno(s.v.deny_errno.unwrap_or(
            match s.inner.sandbox().options().profile.default_action() {
                Action::Errno(e) => e,
                _ => libc::EPERM as u16,
            },
        )),
    };
    // The contained tier's claimed calls are made within the session's places; a command's
    // refusals are counted in a slot of its own, so they are named in its result only.
    let slot = s
        .inner
        .emulation()
        .map(|e| (e.claims.clone(), Slot::own(response, e.places.clone())));
    let emulated = slot.as_ref().map(|(_, slot)| Arc::clone(slot));
    let mut notifier = s.listener.map(|l| {
        let n = Notifier::new(l, response, MainProgram { pid, init: false });
        match slot {
            Some((claims, slot)) => n.emulate(claims, slot),
            None => n,
        }
    });
    let events = s.stream.then_some(&tx);
    let mut out = Output::new(s.stdout, s.v.max_output_bytes, true);
    let mut err = Output::new(s.stderr, s.v.max_output_bytes, false);
    let deadline = s.v.timeout.and_then(|t| started.checked_add(t));
    let mut timed_out = false;
    let mut kill_at: Option<Instant> = None;
    let mut exited: Option<Instant> = None;
    let mut status: Option<i32> = None;
    let mut tally: Option<Tally> = None;
    // The reply socket is read until it has said `Exited` or ended; then the pidfd is watched.
    let mut reply_open = !s.exit_info;
    // What the pidfd is polled for: its exit (POLLIN), then, when it has exited but the kernel
    // has not reaped it yet, the reap (POLLHUP, reported whatever is asked).
    let mut pidfd_events = libc::POLLIN;
    let mut reply_buf = Vec::new();
    let mut scratch = SCRATCH.with(std::cell::Cell::take);
    if scratch.is_empty() {
        scratch = vec![0u8; 64 * 1024];
    }
    loop {
        let now = Instant::now();
        if let Some(at) = exited {
            if (out.raw().is_none() && err.raw().is_none()) || now >= at + DRAIN {
                break;
            }
        }
        if exited.is_none() && !timed_out && deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            let _ = s
                .inner
                .signal(s.id, libc::SIGTERM, s.pidfd.as_fd(), s.pids.1);
            kill_at = Some(now + GRACE);
        }
        if exited.is_none() && kill_at.is_some_and(|k| now >= k) {
            kill_at = None;
            let _ = s
                .inner
                .signal(s.id, libc::SIGKILL, s.pidfd.as_fd(), s.pids.1);
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
        let mut fds = [libc::pollfd {
            fd: -1,
            events: libc::POLLIN,
            revents: 0,
        }; 4];
        let mut n = 0;
        let end_fd = match (exited, reply_open) {
            (Some(_), _) => None,
            (None, true) => Some(s.reply.as_raw_fd()),
            (None, false) => Some(s.pidfd.as_raw_fd()),
        };
        for fd in [
            out.raw(),
            err.raw(),
            end_fd,
            notifier.as_ref().map(|n| n.raw()),
        ]
        .into_iter()
        .flatten()
        {
            fds[n].fd = fd;
            if fd == s.pidfd.as_raw_fd() {
                fds[n].events = pidfd_events;
            }
            n += 1;
        }
        let ms = wake
            .saturating_duration_since(now)
            .as_millis()
            .min(i32::MAX as u128) as i32;
        if crate::sys::poll_for(&mut fds[..n], ms.max(0)).unwrap_or(0) == 0 {
            continue;
        }
        for p in &fds[..n] {
            if p.revents == 0 {
                continue;
            }
            if out.raw() == Some(p.fd) {
                out.pump(&mut scratch, events);
            } else if err.raw() == Some(p.fd) {
                err.pump(&mut scratch, events);
            } else if end_fd == Some(p.fd) && reply_open {
                match read_reply(&s.reply, &mut reply_buf) {
                    Reply::Exited(st) => {
                        status = Some(st);
                        exited = Some(Instant::now());
                    }
                    Reply::Nothing => {}
                    Reply::Gone => reply_open = false,
                }
            } else if end_fd == Some(p.fd) && s.exit_info {
                // Between its exit and its reap the kernel has no status yet, and while it
                // releases the process it may answer ESRCH: both wait for the reap (POLLHUP).
                // Reaped and still no status: it is reported killed.
                let reaped = p.revents & libc::POLLHUP != 0;
                match crate::sys::pidfd_exit_status(s.pidfd.as_fd()) {
                    Ok(Some(st)) => {
                        status = Some(st);
                        exited = Some(Instant::now());
                    }
                    Ok(None) | Err(_) if !reaped => pidfd_events = 0,
                    Ok(None) | Err(_) => {
                        status = Some(libc::SIGKILL);
                        exited = Some(Instant::now());
                    }
                }
            } else if end_fd == Some(p.fd) {
                // The resident is gone: the session's end kills the command; reported killed.
                status = Some(libc::SIGKILL);
                exited = Some(Instant::now());
            } else if notifier.as_ref().is_some_and(|n| n.raw() == p.fd) {
                let n = notifier.as_mut().expect("checked above");
                if p.revents & libc::POLLIN == 0 || !n.handle() {
                    tally = notifier.take().map(|n| n.tally);
                }
            }
        }
    }
    drop(tx);
    SCRATCH.with(|c| c.set(scratch));
    // Every process of the command is counted once it has ended; its cgroups go (or wait for
    // the background processes it left) when `own` is dropped, after this.
    let mut own = s.own;
    let hits = own.as_mut().map(|c| c.hits()).unwrap_or_default();
    s.inner.command_ended();
    let (tally, emulated) = match &s.routed {
        Some(slot) => {
            s.inner.unroute(pid);
            (slot.tally(), slot.emulated())
        }
        None => (
            tally.or(notifier.map(|n| n.tally)).unwrap_or_default(),
            emulated.map(|slot| slot.emulated()).unwrap_or_default(),
        ),
    };
    let status = status.unwrap_or(libc::SIGKILL);
    result(
        s.inner.as_ref(),
        &s.v,
        s.plan_planned,
        s.plan_warnings,
        status,
        Refused { tally, emulated },
        out,
        err,
        started,
        timed_out,
        Own {
            memory: own.as_ref().and_then(|c| c.memory()),
            processes: own.as_ref().and_then(|c| c.processes()),
            hits,
        },
        s.net.as_ref(),
    )
}

/// What a command had refused: by the filter, and by the contained tier's supervisor.
struct Refused {
    tally: Tally,
    emulated: crate::exec::emulate::Tally,
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
    refused: Refused,
    out: Output,
    err: Output,
    started: Instant,
    timed_out: bool,
    own: Own,
    net: Option<&NetRecord>,
) -> ExecResult {
    let Refused { tally, emulated } = refused;
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
    let reverted = inner.git_check();
    warnings.extend(reverted.iter().map(|r| r.warning.clone()));
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
    if [&stdout, &stderr]
        .iter()
        .any(|o| crate::exec::hits::said_emfile(o))
    {
        limits_hit.push("nofile".to_string());
        warnings.push(crate::exec::hits::warning(
            crate::exec::hits::Hit::Nofile,
            &format!(" at the limit of {} open files", v.rlimits.nofile),
            Some(if json {
                "the session's limits.nofile"
            } else {
                "`ulimit -n` before sandbox session start"
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
        unix_guarded: crate::platform::delegable(),
    };
    let mut violations = crate::exec::violation_entries(&tally, &v.profile, profile, &asker);
    // The calls the contained tier's supervisor refused this command (module `emulate`).
    violations.extend(crate::exec::emulated_entries(&emulated, v));
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
        violations_omitted: tally.omitted + emulated.omitted,
        sandboxed: SandboxInfo {
            filter: planned,
            profile: v.profile.clone(),
        },
        tier: Tier::of(planned, landlock_held, inner.layers().namespaces),
        warnings,
        landlock: inner.layers().landlock.clone(),
        limits_hit,
        leaks,
        isolation: inner.layers().isolation.clone().map(|mut i| {
            i.reverted = reverted;
            i
        }),
        network: crate::exec::NetworkReport {
            proxy: inner.layers().proxy.clone(),
            destinations: net.map(|n| n.records.snapshot()).unwrap_or_default(),
            destinations_dropped: net.map_or(0, |n| n.records.dropped()),
            ..crate::exec::NetworkReport::of_mode(inner.layers().network)
        },
        refusals: Vec::new(),
        refusals_omitted: 0,
    };
    // Refusals of the view, Landlock and the network mode, named from this command's own
    // stderr as a one-shot's are, in the words of the session's front end.
    crate::exec::name_refusals(&mut result, v, inner.sandbox(), &emulated);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_has_its_pids_and_a_reaped_one_none_in_the_host() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let pidfd = crate::sys::pidfd_open(pid, 0).unwrap();
        // The pid in the session, as the resident says it, is taken as given.
        assert_eq!(pids_knowing(&pidfd, Some(7)), (pid, 7));
        // Without it, the pidfd's fdinfo names both (no PID namespace here: the same).
        assert_eq!(pids_knowing(&pidfd, None), (pid, pid));
        child.kill().unwrap();
        child.wait().unwrap();
        // Reaped: no pid in the host, the session's still as given. (The first answer above
        // came from PIDFD_GET_INFO: fdinfo would have named the pid twice.)
        assert_eq!(pids_knowing(&pidfd, Some(7)), (-1, 7));
        assert_eq!(pids_knowing(&pidfd, None).0, -1);
    }
}
