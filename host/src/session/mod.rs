//! Sessions: one sandbox in which many commands run, one after another or at once.
//!
//! [`Session::start`] builds the sandbox a one-shot request would get (profile, workspace,
//! paths, network, limits; namespaces, a private `/tmp`, the view, a cgroup where the caller
//! has one) once, around a resident process (module `resident`) that stays. Each
//! [`Session::spawn`] sends it a command, which it clones, confines with the profile's filter
//! between clone and exec, and starts in a process group of its own; the host relays the
//! command's streams, answers its refused calls on the command's own listener (so violations
//! are the command's), enforces its timeout, and returns its [`ExecResult`].
//!
//! Background processes a command leaves (`server &`) keep running for the next commands, and
//! files in the private `/tmp` stay, until the session ends: by [`Session::end`], by its idle
//! time, by dropping it, or with the host (the resident ends when its control socket closes,
//! the namespaces' init dies with the thread that holds the session, and the init's end kills
//! every process of the PID namespace). See `docs/sessions.md`.

mod cgroups;
mod child;
#[doc(hidden)]
pub mod client;
mod control;
#[doc(hidden)]
pub mod daemon;
mod process;
#[doc(hidden)]
pub mod resident;
pub(crate) mod serve_ops;
mod shared;
#[cfg(target_arch = "x86_64")]
mod start_socket;
mod wire;

use process::Layers;
pub use process::{Event, Process};

use crate::exec::{Cancel, ExecError, ExecResult, Refusal, Request, RunOptions, Step};
use crate::sandbox::Sandbox;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wire::{FromResident, ToResident};

/// How a session is held, beyond its policy.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// The `sandbox` executable, started inside the sandbox as the session's resident process
    /// (`sandbox __session-resident`). It must be visible in the view (anywhere but a
    /// private `/tmp`).
    pub resident: PathBuf,
    /// End the session after this long without a running command or a new one (`None`:
    /// only when ended or dropped).
    pub idle_timeout: Option<Duration>,
    /// Whom hints and refusals are worded for: request fields for JSON clients (`serve`, the
    /// library), flags where the session's policy came from a command line (`sandbox run
    /// --session`, `sandbox mcp`).
    pub audience: crate::exec::Audience,
}

impl SessionOptions {
    /// Options with `resident` as the `sandbox` executable and no idle time.
    pub fn new(resident: impl Into<PathBuf>) -> SessionOptions {
        SessionOptions {
            resident: resident.into(),
            idle_timeout: None,
            audience: crate::exec::Audience::Json,
        }
    }
}

/// One command of a session: what differs from the session's policy.
#[derive(Clone, Debug, Default)]
pub struct Command {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
    timeout: Option<Duration>,
    stream: bool,
    pty: Option<(u16, u16)>,
    own: cgroups::Own,
}

impl Command {
    /// A command running `argv` (its program absolute, or a name looked up in `PATH`, as in
    /// a request).
    pub fn new<I, S>(argv: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Command {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Command::default()
        }
    }

    /// Adds a variable to the session's environment for this command (checked as a request's
    /// `env`).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Command {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The working directory (absolute, existing); default: the session's.
    pub fn cwd(mut self, dir: impl Into<String>) -> Command {
        self.cwd = Some(dir.into());
        self
    }

    /// The command's wall-clock limit (default: the policy's `timeout_s`).
    pub fn timeout(mut self, t: Duration) -> Command {
        self.timeout = Some(t);
        self
    }

    /// Deliver output as [`Event`]s while the command runs (it is also in the result).
    pub fn stream(mut self, on: bool) -> Command {
        self.stream = on;
        self
    }

    /// The memory of the command's processes, in bytes (a request's `limits.memory_bytes`: at
    /// least 32 MiB, at most the session's): a cgroup of its own below the session's holds it,
    /// so that the out-of-memory killer ends this command's processes, not the session's
    /// others (the host's watchdog where the session has no memory cgroup).
    pub fn memory(mut self, bytes: u64) -> Command {
        self.own.memory = Some(bytes);
        self
    }

    /// The processes and threads the command may have at once, descendants included (a
    /// request's `limits.processes`: 1 to the session's), in a cgroup of its own below the
    /// session's; refused where the session has no pids cgroup.
    pub fn processes(mut self, n: u64) -> Command {
        self.own.processes = Some(n);
        self
    }

    /// Give the command a terminal of `cols` x `rows` as its stdin, stdout and stderr (and
    /// controlling terminal) instead of pipes: its output is all stdout, and
    /// [`Process::resize`] sets the size.
    pub fn pty(mut self, cols: u16, rows: u16) -> Command {
        self.pty = Some((cols, rows));
        self
    }
}

/// A live session. Dropping it ends it.
pub struct Session {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("ended", &self.is_ended())
            .finish()
    }
}

/// What the session's threads and processes share.
pub(crate) struct Inner {
    /// The control socket. No lock: a `SOCK_SEQPACKET` send is one datagram, whole, so
    /// threads starting commands at once send their messages side by side, each naming its
    /// command.
    sock: OwnedFd,
    /// The start socket the resident's spawner thread reads, where it has one: filtered
    /// commands start there (module `start_socket`), the others on `sock`.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    starts: Option<OwnedFd>,
    addr: u64,
    /// The kernel reaps the commands and keeps their status for their pidfds (the resident's
    /// hello says so): a command's end is read from its pidfd, not its reply socket.
    exit_info: bool,
    /// The session's filter notifies a listener: a filtered command without one is stopped.
    notify: bool,
    /// In the contained tier: the claims the commands' filter carries and the places within
    /// which their supervising loops make those calls.
    emulation: Option<crate::exec::session_hook::Emulation>,
    /// Where the resident has a spawner thread: which command each call of its one listener
    /// belongs to.
    routes: Option<Arc<shared::Routes>>,
    policy: Request,
    /// The validation of the first command that changed only its arguments, which the next
    /// such commands are validated on ([`Request::validate_argv_on`]).
    argv_only: std::sync::OnceLock<crate::exec::Validated>,
    /// The session's own limits (a command's are at or below them).
    limits: crate::exec::Rlimits,
    /// The session's cgroups, where commands with limits of their own get theirs.
    cgroups: cgroups::Cgroups,
    sandbox: Arc<Sandbox>,
    layers: Layers,
    cancel: Cancel,
    ended: AtomicBool,
    /// The repository's control files, checked after every command (not only at the
    /// session's end: a plant would live for the session's idle time, and the agent's own
    /// `git status` in the session would run it). `None` with isolation off.
    git_guard: Option<Mutex<crate::exec::git_guard::Guard>>,
    next_id: AtomicU64,
    /// Commands started or starting and not yet ended (an idle session has none).
    running: AtomicUsize,
    last_active: Mutex<Instant>,
    idle: Option<Duration>,
    audience: crate::exec::Audience,
    /// Commands nobody has waited for yet, with when they started: the reader thread gives
    /// one a thread of its own once it has gone [`process::HANDOFF`] without (its timeout,
    /// listener and output must not wait for its caller).
    watch: Mutex<Vec<(Instant, Weak<Mutex<process::Run>>)>>,
    /// Wakes the reader thread when the watch gets its first command (it sleeps long while
    /// the watch is empty).
    wake: OwnedFd,
}

fn refused(field: &str, reason: impl Into<String>) -> ExecError {
    ExecError::Refused(Refusal::new(field, reason.into()))
}

impl Session {
    /// Builds the sandbox `policy` describes (its `argv` and `stdin` are not used; its
    /// `timeout_s` is each command's default) and starts the session in it.
    pub fn start(policy: &Request, options: &SessionOptions) -> Result<Session, ExecError> {
        if policy.stdin.is_some() {
            return Err(refused(
                "stdin",
                "a session has no stdin of its own; write to a command's stdin instead",
            ));
        }
        let resident = options.resident.to_string_lossy().into_owned();
        if !options.resident.is_absolute() {
            return Err(refused(
                "resident",
                format!("`{resident}` is not an absolute path to the sandbox executable"),
            ));
        }
        let mut req = policy.clone();
        req.argv = vec![resident, resident::ARG.to_string()];
        // The resident is this sandbox's own executable, which the release bundle ships
        // static: the check for programs the preload cannot enter is for commands, and every
        // command gets the session's filter attached before its exec, static or not.
        req.static_binary = crate::sandbox::StaticBinaryAction::Allow;
        let mut v = req.validate()?;
        // The session's own warnings (a layer missing, what is unguarded) in the words of the
        // front end that started it, as its commands' refusals are.
        v.audience = options.audience;
        let limits = v.rlimits;
        // Where the one-shot engine guards the repository (isolation on), the session does it
        // after each command: the workspace, else the directory the commands start in.
        let guarded = (v.paths.isolation != crate::exec::isolation::Mode::Off).then(|| {
            v.paths
                .workspace
                .clone()
                .or_else(|| v.cwd.clone())
                .or_else(|| std::env::current_dir().ok())
        });
        let allowed_controls = v.paths.allowed_controls.clone();
        let (host, child) = crate::sys::seqpacket_pair().map_err(Step::Session.error())?;
        v.streams = crate::exec::Streams::Session(child.as_raw_fd());
        v.timeout = None;
        let opts = RunOptions {
            cancel: Some(Cancel::new().map_err(Step::Cancel.error())?),
            start: crate::exec::StartFrom::CallingThread,
            ..RunOptions::default()
        };
        let cancel = opts.cancel.clone().expect("set above");
        let sandbox = crate::exec::sandbox_for(&v, &opts)?;
        let response = crate::exec::response_of(&v, &sandbox);
        let (tx, rx) = channel();
        let (done_tx, done_rx) = channel::<Result<ExecResult, ExecError>>();
        let engine_sandbox = Arc::clone(&sandbox);
        let engine = std::thread::Builder::new()
            .name("sandbox-session".into())
            .spawn(move || {
                crate::exec::session_hook::expect(tx);
                let res = crate::exec::run_validated(&v, &engine_sandbox, &opts);
                drop(child);
                let _ = done_tx.send(res);
            })
            .map_err(Step::Session.error())?;
        let started = match rx.recv() {
            Ok(s) => s,
            Err(_) => {
                let _ = engine.join();
                return Err(match done_rx.recv() {
                    Ok(Err(e)) => e,
                    _ => Step::Session.says("the session's resident process did not start"),
                });
            }
        };
        let cancel_on_fail = cancel.clone();
        let fail = |e: std::io::Error| {
            cancel_on_fail.cancel();
            Step::Session.error()(e)
        };
        let mut buf = Vec::new();
        let (addr, exit_info, resident_pid) =
            match wait_readable(host.as_fd(), Duration::from_secs(30))
                .and_then(|()| wire::recv::<FromResident>(host.as_fd(), &mut buf))
            {
                Ok(Some((
                    FromResident::Hello {
                        addr,
                        exit_info,
                        diag,
                    },
                    fds,
                ))) => {
                    let mut fds = fds.into_iter();
                    let resident_pid = fds.next().as_ref().map_or(-1, process::pid_of);
                    if let (true, Some(o), Some(fd)) = (diag, &started.owners, fds.next()) {
                        o.diagnose_with(fd);
                    }
                    (addr, exit_info, resident_pid)
                }
                Ok(_) => {
                    cancel.cancel();
                    let _ = engine.join();
                    let why = match done_rx.recv() {
                        Ok(Ok(r)) => r.stderr.trim().to_string(),
                        Ok(Err(e)) => e.to_string(),
                        Err(_) => String::new(),
                    };
                    return Err(Step::Session.says(format!(
                        "the session's resident process ended before it was ready: {why}"
                    )));
                }
                Err(e) => return Err(fail(e)),
            };
        // The filter depends on the profile and the path buffer only: compiled and sent once,
        // before any command (the socket keeps the order). In the contained tier it carries
        // the claims, whose calls each command's supervising loop makes within the session's
        // places (module `process`), as a one-shot's supervisor does.
        let emulation = started.emulation;
        // The spawner thread in the resident: the filter installed once, on that thread, and
        // inherited by every filtered command; its one listener is served here for the whole
        // session (module `shared`). Where it cannot be had, each command installs the filter.
        let mut starts = None;
        let routes = spawner(&host, &sandbox, emulation.as_ref(), exit_info, &mut buf)
            .map_err(fail)?
            .map(|(listener, start_socket)| {
                starts = start_socket;
                let routes = Arc::new(shared::Routes::new(
                    resident_pid,
                    crate::exec::notify::Slot::routed(
                        response,
                        None,
                        emulation.as_ref().map(|e| e.places.clone()),
                    ),
                ));
                let r = Arc::clone(&routes);
                let claims = emulation
                    .as_ref()
                    .map(|e| e.claims.clone())
                    .unwrap_or_default();
                crate::exec::notify::serve_routed(
                    "session",
                    listener,
                    claims,
                    Box::new(move |tid| r.route(tid)),
                )
                .map(|_| routes)
            })
            .transpose()
            .map_err(fail)?;
        let filter = match (&emulation, sandbox.profile_policy()) {
            _ if routes.is_some() => None,
            (Some(e), Some(policy)) => match e.claims.attached_program(policy, addr) {
                Some(prog) => Some((prog, true)),
                None => {
                    // Fail closed: the engine found room for the claims; none is a bug.
                    cancel.cancel();
                    return Err(Step::Session
                        .says("the session's filter cannot carry the contained tier's claims"));
                }
            },
            _ => sandbox.attached_filter(addr).map_err(|e| {
                cancel.cancel();
                ExecError::from(e)
            })?,
        };
        let mut filter = filter;
        // Without a listener (inside another sandbox's supervisor, gVisor), the answers the
        // host would give are put in the filter itself, as for a one-shot request; the
        // engine's plan has said so in the session's warnings.
        if let (Some((prog, notify)), Err(_)) =
            (filter.as_mut(), crate::platform::seccomp_listener())
        {
            if *notify {
                crate::exec::answer_in_program(prog, response);
                *notify = false;
            }
        }
        let notify = filter.as_ref().is_some_and(|(_, n)| *n);
        if let Some((prog, notify)) = filter {
            let msg = ToResident::Filter {
                filter: prog.iter().map(wire::pack).collect(),
                notify,
            };
            wire::send(host.as_fd(), &msg, &[]).map_err(fail)?;
        }
        let session_cgroups = cgroups::Cgroups::new(started.cgroups);
        let layers = Layers {
            namespaces: started.isolation.is_some(),
            network: started.network,
            landlock: started.landlock,
            isolation: started.isolation,
            proxy: started.proxy,
            owners: started.owners,
            warnings: started.warnings.into_iter().chain(started.namespaces_unavailable.map(|why| {
                format!("sandbox: warning: namespaces unavailable ({why}); the session runs without isolation (own PID space and /proc, private /tmp)")
            })).collect(),
        };
        let inner = Arc::new(Inner {
            sock: host,
            starts,
            addr,
            exit_info,
            notify,
            emulation,
            routes,
            policy: policy.clone(),
            argv_only: std::sync::OnceLock::new(),
            limits,
            cgroups: session_cgroups,
            sandbox,
            layers,
            cancel,
            ended: AtomicBool::new(false),
            git_guard: guarded
                .flatten()
                .map(|ws| Mutex::new(crate::exec::git_guard::Guard::take(&ws, &allowed_controls))),
            next_id: AtomicU64::new(1),
            running: AtomicUsize::new(0),
            last_active: Mutex::new(Instant::now()),
            idle: options.idle_timeout,
            audience: options.audience,
            watch: Mutex::new(Vec::new()),
            wake: crate::sys::eventfd(libc::EFD_CLOEXEC | libc::EFD_NONBLOCK).map_err(fail)?,
        });
        let reader_inner = Arc::clone(&inner);
        let reader = std::thread::Builder::new()
            .name("sandbox-session-reader".into())
            .spawn(move || reader_inner.read_loop())
            .map_err(fail)?;
        let waiter = std::thread::spawn(move || {
            let _ = engine.join();
            drop(done_rx);
        });
        Ok(Session {
            inner,
            threads: Mutex::new(vec![reader, waiter]),
        })
    }

    /// Starts a command in the session.
    pub fn spawn(&self, cmd: &Command) -> Result<Process, ExecError> {
        self.inner.spawn(cmd)
    }

    /// Whether the session has ended (explicitly, idle, or its resident is gone).
    pub fn is_ended(&self) -> bool {
        self.inner.ended.load(Ordering::Acquire)
    }

    /// Ends the session: every process in it is killed and reaped before this returns.
    pub fn end(&self) {
        self.inner.end();
        let threads: Vec<_> =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.end();
    }
}

impl process::Host for Inner {
    fn signal(
        &self,
        id: u64,
        sig: i32,
        pidfd: std::os::fd::BorrowedFd<'_>,
        ns_pid: i32,
    ) -> std::io::Result<()> {
        // An ended command's pid may be another's by now: only a running one is signalled.
        if crate::sys::pidfd_exited(pidfd) {
            return Ok(());
        }
        let pid = Some(ns_pid);
        wire::send(self.sock.as_fd(), &ToResident::Signal { id, sig, pid }, &[])
    }
    fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }
    fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }
    fn layers(&self) -> &Layers {
        &self.layers
    }
    fn emulation(&self) -> Option<&crate::exec::session_hook::Emulation> {
        self.emulation.as_ref()
    }
    fn unroute(&self, pid: i32) {
        if let Some(r) = &self.routes {
            r.remove(pid);
        }
    }
    fn command_ended(&self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
        self.touch();
    }

    fn git_check(&self) -> Vec<crate::exec::GitReverted> {
        match &self.git_guard {
            Some(g) => g
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .check_and_renew(),
            None => Vec::new(),
        }
    }
}

impl Inner {
    fn end(&self) {
        if self.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        crate::sys::shutdown(self.sock.as_raw_fd());
        self.cancel.cancel();
        // Calls of processes no running command owned (background processes of commands that
        // had ended) were refused by the session's rules and are named here, once.
        if let Some(r) = &self.routes {
            let t = r.unowned().tally();
            for seen in &t.seen {
                tracing::warn!(
                    syscall = crate::policy::NATIVE
                        .syscall_name(seen.nr)
                        .unwrap_or("unknown"),
                    program = seen.program.as_deref().unwrap_or("unknown"),
                    count = seen.count,
                    "a process of the session that no running command owned was refused a call"
                );
            }
        }
    }

    fn touch(&self) {
        *self.last_active.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// Delivers the resident's messages until it is gone; ends an idle session; gives the
    /// commands nobody waits for a thread of their own.
    fn read_loop(&self) {
        let mut buf = Vec::new();
        loop {
            let mut tick = self.idle.map_or(Duration::from_secs(3600), |d| {
                (d / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
            });
            if !self.watch_is_empty() {
                tick = tick.min(process::HANDOFF);
            }
            let woken = wait_either(self.sock.as_fd(), self.wake.as_fd(), tick);
            self.attend_unwaited();
            match woken {
                Ok(false) => {
                    crate::sys::eventfd_drain(self.wake.as_fd());
                    continue;
                }
                Ok(true) => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    if let Some(idle) = self.idle {
                        let quiet = self.running.load(Ordering::Acquire) == 0;
                        let since = self
                            .last_active
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .elapsed();
                        if quiet && since >= idle {
                            break;
                        }
                    }
                    continue;
                }
                Err(_) => break,
            }
            // Commands answer on their own reply sockets: nothing but the end comes here.
            if !matches!(
                wire::recv::<FromResident>(self.sock.as_fd(), &mut buf),
                Ok(Some(_))
            ) {
                break;
            }
        }
        // Gone, ended or idle: whatever still runs is killed with the session (each running
        // command's reply socket then reads end of file).
        self.end();
    }

    fn watch_is_empty(&self) -> bool {
        self.watch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Puts a command nobody waits for yet on the watch.
    fn watch(&self, run: Weak<Mutex<process::Run>>) {
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        let first = watch.is_empty();
        if watch.len() >= 64 {
            // Commands waited for and dropped leave their entries until the next look.
            watch.retain(|(_, r)| r.strong_count() > 0);
        }
        watch.push((Instant::now(), run));
        drop(watch);
        if first {
            crate::sys::eventfd_add_one(self.wake.as_raw_fd());
        }
    }

    /// Gives a thread to each watched command that has gone [`process::HANDOFF`] without
    /// anyone waiting for it; forgets the commands that are waited for or gone.
    fn attend_unwaited(&self) {
        let now = Instant::now();
        let mut due = Vec::new();
        self.watch
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(since, run)| {
                let Some(run) = run.upgrade() else {
                    return false;
                };
                if now.saturating_duration_since(*since) < process::HANDOFF {
                    return true;
                }
                due.push(run);
                false
            });
        for run in due {
            process::attend(&run);
        }
    }

    fn spawn(self: &Arc<Self>, cmd: &Command) -> Result<Process, ExecError> {
        if self.ended.load(Ordering::Acquire) {
            return Err(refused("session", "the session has ended; start a new one"));
        }
        // A command that changes only the arguments is validated on the first such one's
        // validation (the session's environment, home and paths are the same).
        let argv_only = cmd.env.is_empty() && cmd.cwd.is_none() && cmd.timeout.is_none();
        let v = match self.argv_only.get() {
            Some(base) if argv_only => Request::validate_argv_on(&cmd.argv, base)?,
            _ => {
                let mut req = self.policy.clone();
                req.argv = cmd.argv.clone();
                for (k, val) in &cmd.env {
                    req.env.insert(k.clone(), val.clone());
                }
                if let Some(c) = &cmd.cwd {
                    req.cwd = Some(c.clone());
                }
                if let Some(t) = cmd.timeout {
                    req.timeout_s = t.as_secs_f64();
                }
                let mut v = req.validate()?;
                v.audience = self.audience;
                if argv_only {
                    let _ = self.argv_only.set(v.clone());
                }
                v
            }
        };
        // The filter was compiled and sent at the start; per command only the program's
        // admission is decided. A profile whose outer filter is not exact plans in full (its
        // preload variables are refused below).
        let exact = self.sandbox.exact_outer_policy().is_some();
        let plan = self
            .sandbox
            .plan(&v.program, (!exact).then_some(self.addr))?;
        let filtered = plan.planned != crate::sandbox::Sandboxed::None;
        if !plan.preload_env.is_empty() {
            return Err(refused(
                "profile",
                "this profile needs the preload to stack its exact filter, which a session's \
                 commands do not load; use a built-in profile, or one that allows the loader's \
                 calls (`@loader`), or a one-shot request",
            ));
        }
        let (stdin_r, stdin_w) =
            crate::sys::pipe2(libc::O_CLOEXEC).map_err(Step::Streams.error())?;
        let (stdout_r, stdout_w) =
            crate::sys::pipe2(libc::O_CLOEXEC).map_err(Step::Streams.error())?;
        let (stderr_r, stderr_w) =
            crate::sys::pipe2(libc::O_CLOEXEC).map_err(Step::Streams.error())?;
        // With a terminal, its slave is the command's three streams and the host keeps the
        // master: written for stdin, read as stdout, resized. The pipes' ends then go unused
        // (stderr reads end of file at once).
        let (stdin_r, stdout_w, stderr_w, stdin_w, stdout_r, tty) = match cmd.pty {
            None => (stdin_r, stdout_w, stderr_w, stdin_w, stdout_r, None),
            Some((cols, rows)) => {
                let (master, slave) =
                    crate::sys::open_pty(cols, rows).map_err(Step::Streams.error())?;
                let dup = |fd: &OwnedFd| fd.try_clone().map_err(Step::Streams.error());
                (
                    dup(&slave)?,
                    dup(&slave)?,
                    slave,
                    dup(&master)?,
                    dup(&master)?,
                    Some(master),
                )
            }
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut own = self.own_limits(id, cmd.own)?;
        let procs = own.as_ref().map(|c| c.procs_fds()).unwrap_or_default();
        let env: Vec<String> = cmd
            .env
            .iter()
            .map(|(k, val)| format!("{k}={val}"))
            .collect();
        // The command's own reply socket: the resident answers the start and, later, the
        // command's exit on it, read directly by this thread and then the command's.
        let (reply, reply_resident) =
            crate::sys::seqpacket_pair().map_err(Step::Session.error())?;
        self.running.fetch_add(1, Ordering::AcqRel);
        self.touch();
        let unroute = || {
            self.running.fetch_sub(1, Ordering::AcqRel);
        };
        let mut fds = vec![
            stdin_r.as_raw_fd(),
            stdout_w.as_raw_fd(),
            stderr_w.as_raw_fd(),
            reply_resident.as_raw_fd(),
        ];
        fds.extend(&procs);
        let sent = self.send_start(id, &v, env, filtered, procs.len(), &fds);
        drop((stdin_r, stdout_w, stderr_w, reply_resident));
        if let Err(e) = sent {
            unroute();
            return Err(Step::Session.error()(e));
        }
        // One answer: `Started` with the pidfd (and the listener), or `Failed`.
        let mut buf = Vec::new();
        let answer = if filtered && self.starts.is_some() {
            started_on_socket(reply.as_fd(), &mut buf)
        } else {
            wait_readable(reply.as_fd(), Duration::from_secs(30)).and_then(|()| {
                wire::recv_at_most::<FromResident>(reply.as_fd(), &mut buf, wire::MAX_REPLY)
            })
        };
        let (pidfd, listener, ns_pid) = match answer {
            Ok(Some((FromResident::Started { listener, pid, .. }, fds))) => {
                let mut fds = fds.into_iter();
                let pidfd = fds.next();
                (pidfd, if listener { fds.next() } else { None }, pid)
            }
            Ok(Some((FromResident::Failed { stage, errno, .. }, _))) => {
                unroute();
                let source = std::io::Error::from_raw_os_error(errno);
                return Err(if stage == "exec" {
                    ExecError::Spawn {
                        program: v.argv[0].clone(),
                        source,
                    }
                } else {
                    Step::Child.error()(std::io::Error::new(
                        source.kind(),
                        format!("the command's {stage} step failed: {source}"),
                    ))
                });
            }
            _ => {
                unroute();
                return Err(refused("session", "the session has ended; start a new one"));
            }
        };
        let Some(pidfd) = pidfd else {
            unroute();
            return Err(Step::Session.says("the resident sent no pidfd"));
        };
        if filtered && self.routes.is_none() && self.notify && listener.is_none() {
            // Fail closed: the filter's refused calls would have no one to answer them.
            let _ = crate::sys::pidfd_signal(pidfd.as_fd(), libc::SIGKILL);
            unroute();
            return Err(Step::Listener.says("the command's seccomp listener was not handed over"));
        }
        let pids = process::pids_knowing(&pidfd, ns_pid);
        let pid = pids.0;
        // Its proxied destinations are recorded for it from here on (module `net_owners`).
        let net = self
            .layers
            .owners
            .as_ref()
            .map(|o| process::NetRecord::start(o, pid));
        // Its calls on the session's one listener are its own from here on (a refused call it
        // made meanwhile waits for this, module `shared`).
        let routed = match &self.routes {
            Some(routes) if filtered => {
                let slot = crate::exec::notify::Slot::routed(
                    crate::exec::response_of(&v, &self.sandbox),
                    Some(crate::exec::notify::MainProgram { pid, init: false }),
                    self.emulation.as_ref().map(|e| e.places.clone()),
                );
                routes.add(pid, Arc::clone(&slot));
                Some(slot)
            }
            _ => None,
        };
        if let Some(c) = own.as_mut() {
            if let Err(e) = c.started(pid, &pidfd) {
                // Fail closed: a memory limit that cannot be watched does not let it run.
                let _ = crate::sys::pidfd_signal(pidfd.as_fd(), libc::SIGKILL);
                unroute();
                if let (Some(r), Some(_)) = (&self.routes, &routed) {
                    r.remove(pid);
                }
                return Err(Step::Limits.says(format!(
                    "the command's memory watchdog could not be started: {e}"
                )));
            }
        }
        let process = process::start(process::Start {
            inner: Arc::clone(self) as Arc<dyn process::Host>,
            id,
            v,
            plan_planned: plan.planned,
            plan_warnings: plan.warnings,
            pidfd: Arc::new(pidfd),
            pids,
            listener,
            routed,
            stdin: Some(stdin_w),
            stdout: stdout_r,
            stderr: stderr_r,
            reply,
            exit_info: self.exit_info,
            stream: cmd.stream,
            tty,
            own,
            net,
        });
        if !cmd.stream {
            // A streaming command has its thread already.
            self.watch(process.run());
        }
        Ok(process)
    }

    /// Sends command `id`'s start with its descriptors `fds`: to the spawner thread's start
    /// socket when it is filtered and the session has one, else to the resident.
    fn send_start(
        &self,
        id: u64,
        v: &crate::exec::Validated,
        env: Vec<String>,
        filtered: bool,
        cgroups: usize,
        fds: &[std::os::fd::RawFd],
    ) -> std::io::Result<()> {
        #[cfg(target_arch = "x86_64")]
        if let (Some(starts), true) = (&self.starts, filtered) {
            use std::os::unix::ffi::OsStrExt;
            let body = start_socket::encode(
                id,
                v.program.as_os_str().as_bytes(),
                &v.argv,
                &env,
                v.cwd.as_ref().map(|c| c.as_os_str().as_bytes()),
                cgroups,
                // This command is counted already.
                self.running.load(Ordering::Acquire) > 1,
            )
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "the command's arguments, variables and paths take more than {} KiB, \
                         which a session's command start carries at most",
                        start_socket::MAX_START / 1024
                    ),
                )
            })?;
            return crate::sys::send_with_fds(starts.as_fd(), &body, fds);
        }
        let start = ToResident::Start {
            id,
            path: v.program.to_string_lossy().into_owned(),
            argv: v.argv.clone(),
            env,
            cwd: v.cwd.as_ref().map(|c| c.to_string_lossy().into_owned()),
            filtered,
            cgroups,
        };
        wire::send(self.sock.as_fd(), &start, fds)
    }

    /// Checks a command's own limits against the session's and makes what holds them: a
    /// cgroup below the session's (a memory limit without a memory cgroup is watched by the
    /// host instead); `None` when the command asked for none. A limit that cannot be held
    /// refuses the command.
    fn own_limits(
        &self,
        id: u64,
        own: cgroups::Own,
    ) -> Result<Option<cgroups::CommandCgroup>, ExecError> {
        use crate::exec::cgroup1::Controller;
        use crate::exec::limits::MIN_MEMORY_BYTES;
        if !own.any() {
            return Ok(None);
        }
        if let Some(m) = own.memory {
            let most = self.limits.memory_bytes;
            if m < MIN_MEMORY_BYTES || m > most {
                return Err(refused(
                    "limits.memory_bytes",
                    format!(
                        "{m} is not between {MIN_MEMORY_BYTES} (32 MiB) and the session's \
                         {most}: a command's memory is at most its session's"
                    ),
                ));
            }
        }
        if let Some(n) = own.processes {
            let most = self.limits.processes;
            if n == 0 || n > most {
                return Err(refused(
                    "limits.processes",
                    format!(
                        "{n} is not between 1 and the session's {most}: a command's processes \
                         are at most its session's"
                    ),
                ));
            }
            if !self.cgroups.holds(Controller::Pids) {
                return Err(refused(
                    "limits.processes",
                    "this session has no pids cgroup (cgroup v2 with the pids controller \
                     delegated, or a writable v1 pids hierarchy), so a command's own process \
                     limit cannot be enforced; omit it (the session's limit holds the command)",
                ));
            }
        }
        // Without a memory cgroup the host's watchdog holds the command's memory (as a
        // one-shot's), where it can read /proc.
        if own.memory.is_some()
            && !self.cgroups.holds(Controller::Memory)
            && !crate::exec::memwatch::available()
        {
            return Err(refused(
                "limits.memory_bytes",
                "this session has no memory cgroup and /proc cannot be read to watch the \
                 command, so its own memory limit cannot be enforced; omit it (the session's \
                 limit holds the command)",
            ));
        }
        self.cgroups.make(id, own).map(Some).map_err(|e| {
            Step::Group.error()(std::io::Error::new(
                e.kind(),
                format!("cannot make the command's own cgroup: {e}"),
            ))
        })
    }
}

/// Asks the resident for a spawner thread holding the session's filter (x86_64, a profile
/// whose outer filter is exact, where a listener can be had): the filter is the profile's with
/// the exemptions for a fresh secret, and the contained tier's claims when `emulation` has
/// them. Returns its listener and, where the kernel reaps the commands (`exit_info`), the
/// host's end of the start socket the thread serves (module `start_socket`); `None` when the
/// session's commands install the filter each (no spawner here, or the resident could not
/// start one).
fn spawner(
    sock: &OwnedFd,
    sandbox: &Sandbox,
    emulation: Option<&crate::exec::session_hook::Emulation>,
    exit_info: bool,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<(OwnedFd, Option<OwnedFd>)>> {
    #[cfg(target_arch = "x86_64")]
    {
        let Some(base) = sandbox.exact_outer_policy() else {
            return Ok(None);
        };
        if crate::platform::seccomp_listener().is_err() {
            return Ok(None);
        }
        let claims = emulation.map(|e| e.claims.clone()).unwrap_or_default();
        let secret = crate::exec::spawner::random_secret()?;
        let Ok(prog) = crate::exec::spawner::program(base, secret, &claims) else {
            return Ok(None);
        };
        let starts = if exit_info {
            Some(crate::sys::seqpacket_pair()?)
        } else {
            None
        };
        let msg = ToResident::Spawner {
            filter: prog.iter().map(wire::pack).collect(),
            secret,
            starts: starts.is_some(),
        };
        let passed: Vec<_> = starts.iter().map(|(_, r)| r.as_raw_fd()).collect();
        wire::send(sock.as_fd(), &msg, &passed)?;
        drop(passed);
        let starts = starts.map(|(host, _resident)| host);
        wait_readable(sock.as_fd(), Duration::from_secs(30))?;
        match wire::recv::<FromResident>(sock.as_fd(), buf)? {
            Some((
                FromResident::Spawner {
                    errno: 0,
                    starts: serving,
                },
                fds,
            )) => {
                let Some(listener) = fds.into_iter().next() else {
                    return Ok(None);
                };
                Ok(Some((listener, starts.filter(|_| serving))))
            }
            Some((FromResident::Spawner { errno, .. }, _)) => {
                tracing::debug!(errno, "the session's spawner thread did not start");
                Ok(None)
            }
            _ => Err(std::io::Error::other(
                "the session's resident did not answer for its spawner thread",
            )),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (sock, sandbox, emulation, exit_info, buf);
        Ok(None)
    }
}

/// Waits until `first` or `second` is readable (or hung up): `true` when `first` is;
/// `TimedOut` after `t`.
fn wait_either(
    first: std::os::fd::BorrowedFd<'_>,
    second: std::os::fd::BorrowedFd<'_>,
    t: Duration,
) -> std::io::Result<bool> {
    let mut p = [first.as_raw_fd(), second.as_raw_fd()].map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ms = t.as_millis().min(i32::MAX as u128) as i32;
    match crate::sys::poll_for(&mut p, ms)? {
        0 => Err(std::io::Error::from(std::io::ErrorKind::TimedOut)),
        _ => Ok(p[0].revents != 0),
    }
}

/// The answer to a start on the start socket (module `start_socket`): the spawner thread
/// sends `Started` at the clone, and a child whose step fails sends `Failed` before it exits,
/// so the answer is known once no end but this one is left (the child's closes at its exec):
/// one wake-up. `Failed` wins over `Started`.
fn started_on_socket(
    reply: std::os::fd::BorrowedFd<'_>,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<(FromResident, Vec<OwnedFd>)>> {
    let mut p = [libc::pollfd {
        fd: reply.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    }];
    if crate::sys::poll_for(&mut p, 30_000)? == 0 {
        return Err(std::io::Error::from(std::io::ErrorKind::TimedOut));
    }
    let mut started = None;
    // At most two messages come; the end of the stream after them.
    for _ in 0..2 {
        match wire::recv_at_most::<FromResident>(reply, buf, wire::MAX_REPLY)? {
            Some((m @ FromResident::Failed { .. }, fds)) => return Ok(Some((m, fds))),
            Some(m) if started.is_none() => started = Some(m),
            _ => break,
        }
    }
    Ok(started)
}

/// Waits until `fd` is readable (or hung up); `TimedOut` after `t`.
fn wait_readable(fd: std::os::fd::BorrowedFd<'_>, t: Duration) -> std::io::Result<()> {
    let mut p = [libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    let ms = t.as_millis().min(i32::MAX as u128) as i32;
    match crate::sys::poll_for(&mut p, ms)? {
        0 => Err(std::io::Error::from(std::io::ErrorKind::TimedOut)),
        _ => Ok(()),
    }
}
