//! A session's daemon (`sandbox __session-daemon`): the process `sandbox session start`
//! leaves behind, holding one [`Session`] behind a control socket in the per-user state
//! directory (module `control`), until the session ends (`session end`, its idle time, or
//! SIGTERM); it then removes its socket and exits.
//!
//! It is detached from its caller: a session and process group of its own (`setsid`), no
//! descriptor of the caller's (every one from 3 on is closed first), stdin and stderr
//! `/dev/null`, and stdout a pipe to the `session start` that started it, which reads one line
//! (`ok ID`, or `err STATUS REASON`) and exits; the daemon then puts `/dev/null` there too. So
//! `$(sandbox session start)` returns.
//!
//! Each connection is checked before anything is read from it: the peer's uid must be the
//! daemon's (`SO_PEERCRED`) and the peer must not run inside a sandboxed job (module `peer`,
//! as for `serve`): a command in a sandbox cannot reach its own or another session's daemon
//! to run something with a wider policy.

use super::control::{self, Info, Reply, Request};
use super::{wire, Command, Process, Session, SessionOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The daemon's first argument: `sandbox __session-daemon FLAGS...` (`session start`'s flags).
pub const ARG: &str = "__session-daemon";

/// The idle time of a session without `--idle`: half an hour.
pub const DEFAULT_IDLE_S: u64 = 1800;

/// How long a daemon whose session ended waits for its connections to send their answers.
const ANSWERS_AFTER_END: std::time::Duration = std::time::Duration::from_secs(5);

/// Most connections served at once; more are refused (a loop of clients cannot make the
/// daemon start threads without end).
const MAX_CONNECTIONS: usize = 256;

/// The signals a client may forward to its command.
const FORWARDED: &[i32] = &[
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// The daemon's process: never returns.
pub fn main() -> ! {
    // Before anything else opens a descriptor: none of the starter's may stay open here.
    let _ = crate::sys::close_from(3);
    let _ = crate::sys::setsid();
    // Its /proc files hold what a command must not learn (as for `run`).
    let _ = crate::sys::set_not_dumpable();
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(2).collect();
    let code = match start(&args) {
        Ok(daemon) => {
            ready(&format!("ok {}", daemon.id));
            let _ = crate::sys::null_onto(0);
            let _ = crate::sys::null_onto(1);
            daemon.serve();
            0
        }
        Err((status, reason)) => {
            ready(&format!("err {status} {}", crate::escape::line(reason)));
            status
        }
    };
    std::process::exit(code)
}

/// Tells `session start` how the start went (one line on stdout).
fn ready(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The policy `session start`'s flags ask for, checked as `sandbox mcp` checks the same
/// flags (one trial run included), with the session's own defaults and wording.
fn policy(args: &crate::cli::SessionStartArgs) -> Result<(crate::exec::Request, Duration), String> {
    if args.policy.config.is_some() {
        return Err(
            "--config: sandbox session takes its policy from flags alone; give the \
                    file's settings as flags"
                .into(),
        );
    }
    match args.policy.on_violation {
        None | Some(sandbox_policy::Action::Errno(0)) => {}
        Some(sandbox_policy::Action::Kill) | Some(sandbox_policy::Action::Trap) => {}
        Some(other) => {
            return Err(format!(
                "--on-violation {other}: a session takes report or kill (each command's \
                 refused calls are named on its stderr)"
            ))
        }
    }
    let idle = args.idle.unwrap_or(DEFAULT_IDLE_S);
    if !(1..=86_400).contains(&idle) {
        return Err(format!(
            "--idle: must be between 1 and 86400 seconds, got {idle}"
        ));
    }
    let mut req = crate::mcp::Policy::from_args(&args.as_mcp())?.template;
    // `run` has no timeout unless one is asked for; the engine's longest stands for none.
    if args.timeout.is_none() {
        req.timeout_s = crate::exec::MAX_TIMEOUT_S;
    }
    Ok((req, Duration::from_secs(idle)))
}

/// What a connection's thread needs of the daemon.
struct Daemon {
    id: String,
    session: Session,
    socket: Socket,
    started: Instant,
    running: AtomicUsize,
    connections: AtomicUsize,
    profile: String,
    workspace: Option<String>,
    cwd: String,
    idle: Duration,
    /// Each command's timeout unless it sets its own.
    timeout: Duration,
    /// `run`'s warning for root without `--allow-root`, when the session is below the
    /// isolated tier.
    root_warning: bool,
    /// The session's `PATH` (the starting caller's): a `run --session` with the same one
    /// sends nothing of its own.
    path: Option<String>,
}

/// Parses the flags, starts the session and listens; `Err`: exit status and reason.
fn start(args: &[std::ffi::OsString]) -> Result<Arc<Daemon>, (i32, String)> {
    use clap::Parser;
    let refused = |e: String| (crate::run::EXIT_SANDBOX, e);
    let argv = ["sandbox", "session", "start"]
        .into_iter()
        .map(std::ffi::OsString::from)
        .chain(args.iter().cloned());
    let args = match crate::cli::Cli::try_parse_from(argv) {
        Ok(crate::cli::Cli {
            command:
                crate::cli::Cmd::Session {
                    what: crate::cli::SessionCmd::Start(a),
                },
        }) => a,
        Ok(_) => return Err((2, "not the flags of `session start`".into())),
        Err(e) => return Err((2, e.to_string().lines().next().unwrap_or("").to_string())),
    };
    let (req, idle) = policy(&args).map_err(refused)?;
    let id = control::new_id().map_err(|e| refused(format!("a session id: {e}")))?;
    let path = control::socket_path(&id).map_err(refused)?;
    let exe = std::env::current_exe()
        .map_err(|e| refused(format!("the sandbox executable's path: {e}")))?;
    let mut options = SessionOptions::new(exe);
    // The session's policy came from `session start`'s flags: hints name flags.
    options.audience = crate::exec::Audience::Cli;
    options.idle_timeout = Some(idle);
    // The socket exists before the session's view is built, so that the view hides it like
    // every other host socket outside the workspace (made later, it would be visible inside).
    // A client connecting before the session is ready waits in the backlog.
    let socket = Socket::create(&path).map_err(refused)?;
    let session = Session::start(&req, &options).map_err(|e| refused(e.to_string()))?;
    Ok(Arc::new(Daemon {
        id,
        session,
        socket,
        started: Instant::now(),
        running: AtomicUsize::new(0),
        connections: AtomicUsize::new(0),
        profile: req.profile_file.clone().unwrap_or(req.profile.clone()),
        workspace: req.workspace.clone(),
        cwd: req.cwd.clone().unwrap_or_default(),
        idle,
        timeout: Duration::from_secs_f64(req.timeout_s),
        root_warning: crate::platform::running_as_root() && !req.allow_root,
        path: req.env.get("PATH").cloned(),
    }))
}

/// The eventfd SIGTERM and SIGINT wake the accept loop with (-1: none yet).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        crate::sys::eventfd_add_one(fd);
    }
}

impl Daemon {
    /// Accepts connections until the session ends (or SIGTERM/SIGINT ends it), then removes
    /// the socket and ends the session.
    fn serve(self: Arc<Self>) {
        let wake = crate::sys::eventfd(libc::EFD_CLOEXEC | libc::EFD_NONBLOCK).ok();
        if let Some(w) = &wake {
            WAKE_FD.store(w.as_raw_fd(), Ordering::SeqCst);
            for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
                let _ = crate::sys::catch_signal(sig, on_signal);
            }
        }
        loop {
            if self.session.is_ended() {
                break;
            }
            let mut fds = vec![libc::pollfd {
                fd: self.socket.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            if let Some(w) = &wake {
                fds.push(libc::pollfd {
                    fd: w.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            // The session's own idle check ends it; this loop notices within a quarter second.
            match crate::sys::poll_for(&mut fds, 250) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
            if fds.get(1).is_some_and(|f| f.revents != 0) {
                break;
            }
            if fds[0].revents != 0 {
                if let Ok(conn) = crate::sys::accept(self.socket.fd.as_fd()) {
                    self.accept(conn);
                }
            }
        }
        self.end();
        // The connection that asked for the end (and any whose command the end killed) still
        // has its answer to send: the process exits after them, or after a bound should one
        // hang. Exiting at once made `session end` report a closed connection (exit 125)
        // for a session that had ended.
        let deadline = std::time::Instant::now() + ANSWERS_AFTER_END;
        while self.connections.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Ends the session (every process in it killed and reaped) and removes the socket.
    fn end(&self) {
        self.socket.remove();
        self.session.end();
    }

    /// Checks a connection's peer and serves it on a thread of its own, or refuses it.
    fn accept(self: &Arc<Self>, conn: OwnedFd) {
        if let Err(why) = self.check_peer(&conn) {
            refuse(conn, why);
            return;
        }
        if self.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            self.connections.fetch_sub(1, Ordering::SeqCst);
            let reason = format!("{MAX_CONNECTIONS} connections are open already");
            let _ = wire::send(conn.as_fd(), &Reply::Refused { reason }, &[]);
            return;
        }
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("session-conn".into())
            .spawn(move || {
                me.handle(conn);
                me.connections.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            self.connections.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The peer must be of this uid and outside every sandboxed job.
    fn check_peer(&self, conn: &OwnedFd) -> Result<(), String> {
        let cred = crate::sys::peer_cred(conn.as_fd())
            .map_err(|e| format!("cannot read the peer's credentials (SO_PEERCRED): {e}"))?;
        let uid = crate::sys::euid();
        if cred.uid != uid {
            return Err(format!(
                "this session accepts connections from uid {uid} only, not {}",
                cred.uid
            ));
        }
        let pidfd = crate::sys::peer_pidfd(conn.as_fd()).ok();
        match crate::peer::refusal(cred.pid, pidfd.as_ref().map(|f| f.as_fd())) {
            None => Ok(()),
            Some(crate::peer::Refused::Sandboxed(why))
            | Some(crate::peer::Refused::Departed(why)) => Err(format!(
                "refused: {why}; a sandboxed command may not use a session's control socket"
            )),
        }
    }

    /// Serves one connection: its first message says what it wants.
    fn handle(&self, conn: OwnedFd) {
        let mut buf = Vec::new();
        let Ok(Some((req, fds))) = wire::recv::<Request>(conn.as_fd(), &mut buf) else {
            return;
        };
        let reply = match req {
            Request::Info => Reply::Info(self.info()),
            Request::End => {
                self.end();
                Reply::Ended
            }
            run @ Request::Run { .. } => return self.run(&conn, run, fds),
            Request::Signal { .. } | Request::Resize { .. } => Reply::Refused {
                reason: "a signal or a size goes to a running command: send `run` first".into(),
            },
        };
        let _ = wire::send(conn.as_fd(), &reply, &[]);
    }

    fn info(&self) -> Info {
        Info {
            id: self.id.clone(),
            profile: self.profile.clone(),
            workspace: self.workspace.clone(),
            cwd: self.cwd.clone(),
            age_s: self.started.elapsed().as_secs(),
            running: self.running.load(Ordering::SeqCst),
            idle_s: self.idle.as_secs(),
            socket: self.socket.path.to_string_lossy().into_owned(),
        }
    }

    /// Runs `argv` with the caller's three descriptors, relays its streams, forwards the
    /// signals the caller sends, and answers with `run`'s lines and exit status.
    fn run(&self, conn: &OwnedFd, run: Request, fds: Vec<OwnedFd>) {
        let Request::Run {
            argv,
            timeout_s,
            memory,
            processes,
            tty,
            path,
        } = run
        else {
            return;
        };
        let done = |lines: Vec<String>, status: i32| {
            let _ = wire::send(conn.as_fd(), &Reply::Done { lines, status }, &[]);
        };
        let say = |msg: String| vec![crate::escape::line(format_args!("sandbox: {msg}"))];
        let Ok([stdin, stdout, stderr]) = <[OwnedFd; 3]>::try_from(fds) else {
            return done(
                say("run: the caller's stdin, stdout and stderr did not come".into()),
                125,
            );
        };
        if argv.is_empty() {
            return done(say("run: no program given".into()), 125);
        }
        let timeout = match timeout_s {
            None => self.timeout,
            Some(t) if (1..=86_400).contains(&t) => Duration::from_secs(t),
            Some(t) => {
                return done(
                    say(format!(
                        "--timeout: must be between 1 and 86400 seconds, got {t}"
                    )),
                    125,
                )
            }
        };
        let mut cmd = Command::new(argv.clone()).stream(true).timeout(timeout);
        // The caller's PATH, as `run` keeps it; the session's own when they are the same (a
        // command changing only its arguments is validated on the session's, at less cost).
        if let Some(p) = path.filter(|p| self.path.as_deref() != Some(p.as_str())) {
            cmd = cmd.env("PATH", p);
        }
        if let Some(m) = memory {
            cmd = cmd.memory(m);
        }
        if let Some(n) = processes {
            cmd = cmd.processes(n);
        }
        if let Some((cols, rows)) = tty {
            // Sizes a terminal cannot have are refused, as `serve`'s `resize` refuses them.
            if !(1..=1000).contains(&cols) || !(1..=1000).contains(&rows) {
                return done(
                    say(format!(
                        "run: a terminal of {cols}x{rows}: each side must be 1 to 1000 cells"
                    )),
                    125,
                );
            }
            cmd = cmd.pty(cols, rows);
        }
        let process = match self.session.spawn(&cmd) {
            Ok(p) => Arc::new(p),
            // 127 for a program not found, 126 for one that cannot be executed, as `run`.
            Err(e) => {
                let status = e.exit_code().unwrap_or(crate::run::EXIT_SANDBOX);
                // A command's own limit refused is named by the flag that asked for it.
                let flag = match e.field() {
                    "limits.memory_bytes" => Some("--memory"),
                    "limits.processes" => Some("--processes"),
                    _ => None,
                };
                let msg = match flag {
                    Some(f) => format!("{f}: {}", e.reason()),
                    None => e.to_string(),
                };
                return done(say(msg), status);
            }
        };
        self.running.fetch_add(1, Ordering::SeqCst);
        let _ = wire::send(conn.as_fd(), &Reply::Started, &[]);
        let finished = Arc::new(AtomicBool::new(false));
        let feeder = {
            let (p, f) = (Arc::clone(&process), Arc::clone(&finished));
            std::thread::Builder::new()
                .name("session-stdin".into())
                .spawn(move || feed_stdin(&p, stdin, &f))
                .ok()
        };
        if feeder.is_none() {
            process.close_stdin();
        }
        // The caller's messages (signals; the connection closing) on a thread of their own,
        // while this one relays the output.
        let watcher = {
            let (p, f) = (Arc::clone(&process), Arc::clone(&finished));
            let sock = conn.try_clone();
            std::thread::Builder::new()
                .name("session-signals".into())
                .spawn(move || {
                    if let Ok(sock) = sock {
                        watch_caller(&p, &sock, &f)
                    }
                })
                .ok()
        };
        relay_output(&process, stdout, stderr);
        let result = process.finish();
        finished.store(true, Ordering::SeqCst);
        self.running.fetch_sub(1, Ordering::SeqCst);
        let (lines, status) = match result {
            Some(mut r) => {
                r.warnings.retain(|w| !relayed_elsewhere(w));
                let settings = crate::run::RunSettings {
                    timeout: Some(timeout),
                    root_warning: self.root_warning,
                    ..crate::run::RunSettings::default()
                };
                crate::run::outcome(&r, Path::new(&argv[0]), &settings)
            }
            None => (say("the command's result was lost".into()), 125),
        };
        done(lines, status);
        // The caller closes the connection once it has the result: the watcher then ends.
        if let Some(w) = watcher {
            let _ = w.join();
        }
        if let Some(f) = feeder {
            let _ = f.join();
        }
    }
}

/// Answers a refused connection with its reason. What the peer sent first is read (for at
/// most 100 ms) and dropped before: closing a socket with unread data resets the connection,
/// and the peer would see ECONNRESET instead of the reason.
fn refuse(conn: OwnedFd, reason: String) {
    let mut fds = [libc::pollfd {
        fd: conn.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    if matches!(crate::sys::poll_for(&mut fds, 100), Ok(n) if n > 0) {
        let mut buf = [0u8; 512];
        let _ = crate::sys::recv_now(conn.as_fd(), &mut buf);
    }
    let _ = wire::send(conn.as_fd(), &Reply::Refused { reason }, &[]);
}

/// Warnings of a session command's result that `run --session` says otherwise: the output
/// was relayed whole (the result's copy is the one capped), and a timeout gets `run`'s own
/// line (as `run` drops the engine's `limit hit: time` for it).
fn relayed_elsewhere(w: &str) -> bool {
    w.starts_with("sandbox: output past ")
        || w.starts_with("sandbox: the command ran past its timeout")
}

/// Copies the command's output to the caller's stdout and stderr as it comes; a stream the
/// caller no longer reads (EPIPE) is dropped, the other goes on.
fn relay_output(p: &Process, stdout: OwnedFd, stderr: OwnedFd) {
    let mut out = Some(std::fs::File::from(stdout));
    let mut err = Some(std::fs::File::from(stderr));
    for ev in p.events() {
        let (target, data) = match &ev {
            super::Event::Stdout(d) => (&mut out, d),
            super::Event::Stderr(d) => (&mut err, d),
        };
        if let Some(f) = target {
            if f.write_all(data).is_err() {
                *target = None;
            }
        }
    }
}

/// Forwards the caller's stdin to the command until it ends (then the command reads end of
/// file) or the command has finished. Read as the command's pipe takes it, as `ssh` does: at
/// most a pipe's worth ahead of what the command has read.
fn feed_stdin(p: &Process, stdin: OwnedFd, finished: &AtomicBool) {
    let mut file = std::fs::File::from(stdin);
    let mut buf = vec![0u8; 64 * 1024];
    while !finished.load(Ordering::SeqCst) {
        let mut fds = [libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        match crate::sys::poll_for(&mut fds, 200) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if p.write_stdin(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    p.close_stdin();
}

/// Forwards the signals the caller sends; a caller gone before its command ended (killed,
/// its terminal closed) takes the command with it, as `run` does: SIGKILL to its group.
fn watch_caller(p: &Process, sock: &OwnedFd, finished: &AtomicBool) {
    let mut buf = Vec::new();
    loop {
        match wire::recv::<Request>(sock.as_fd(), &mut buf) {
            Ok(Some((Request::Signal { sig }, _))) if FORWARDED.contains(&sig) => {
                let _ = p.signal(sig);
            }
            Ok(Some((Request::Resize { cols, rows }, _)))
                if (1..=1000).contains(&cols) && (1..=1000).contains(&rows) =>
            {
                let _ = p.resize(cols, rows);
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                if !finished.load(Ordering::SeqCst) {
                    let _ = p.signal(libc::SIGKILL);
                }
                return;
            }
        }
    }
}

/// The listening control socket; removed (if it is still ours) by [`Socket::remove`] and
/// when dropped.
struct Socket {
    fd: OwnedFd,
    path: PathBuf,
    /// Device and inode of the socket file made.
    identity: (u64, u64),
}

impl Socket {
    /// Listens at `path`, created 0600 from its first moment (umask 0177 while it is bound:
    /// the daemon has no other thread yet).
    fn create(path: &Path) -> Result<Socket, String> {
        let fail = |e: String| format!("the session's socket {}: {e}", crate::escape::path(path));
        let old = crate::sys::set_umask(0o177);
        let bound = crate::sys::seqpacket_listen(path);
        crate::sys::set_umask(old);
        let fd = bound.map_err(|e| fail(e.to_string()))?;
        let meta = std::fs::symlink_metadata(path).map_err(|e| fail(e.to_string()))?;
        let socket = Socket {
            fd,
            path: path.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
        };
        if meta.mode() & 0o777 != 0o600 || meta.uid() != crate::sys::euid() {
            return Err(fail(format!(
                "was made with mode {:o} and owner {} instead of 600 and {}",
                meta.mode() & 0o777,
                meta.uid(),
                crate::sys::euid()
            )));
        }
        Ok(socket)
    }

    /// Removes the socket file when it is still the one made (so no later client connects).
    fn remove(&self) {
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if (m.dev(), m.ino()) == self.identity {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        self.remove();
    }
}
