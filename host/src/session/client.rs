//! The shell front end of sessions: `sandbox session start|end|list` and `sandbox run
//! --session ID`, each a client of a session's daemon (module `daemon`) over its control
//! socket. Every function returns the `sandbox` command's exit status, having said on stderr
//! (one `sandbox: ...` line) whatever went wrong.

use super::control::{self, Info, Reply, Request};
use super::wire;
use std::io::{BufRead, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

/// Exit status of a refusal or failure of the sandbox (docs/reference.md, "Exit statuses").
const EXIT_SANDBOX: i32 = crate::run::EXIT_SANDBOX;

fn fail(msg: impl std::fmt::Display) -> i32 {
    crate::escape::eprint_line(format_args!("sandbox: {msg}"));
    EXIT_SANDBOX
}

/// `sandbox session start FLAGS`: starts the daemon with `flags` (the command line after
/// `start`), waits until its session is ready, prints its id. The daemon checks the flags.
pub fn start(flags: &[std::ffi::OsString]) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return fail(format_args!("session start: the sandbox executable: {e}")),
    };
    let child = std::process::Command::new(exe)
        .arg(super::daemon::ARG)
        .args(flags)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return fail(format_args!("session start: cannot start its daemon: {e}")),
    };
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = std::io::BufReader::new(out).read_line(&mut line);
    }
    let line = line.trim_end();
    if let Some(id) = line.strip_prefix("ok ") {
        // The daemon goes on alone (setsid, its stdout now /dev/null); it is not waited for.
        println!("{id}");
        return 0;
    }
    // It has exited (or is about to): reaped here rather than left a zombie.
    let _ = child.wait();
    match line
        .strip_prefix("err ")
        .and_then(|r| r.split_once(' '))
        .and_then(|(s, why)| Some((s.parse::<i32>().ok()?, why)))
    {
        Some((status, why)) => {
            crate::escape::eprint_line(format_args!("sandbox: session start: {why}"));
            status
        }
        None => fail("session start: its daemon ended before the session was ready"),
    }
}

/// A connection to session `id`'s daemon; `Err`: the line to print.
fn connect(id: &str) -> Result<OwnedFd, String> {
    let id = control::check_id(id)?;
    let path = control::socket_path(id)?;
    crate::sys::seqpacket_connect(&path).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ECONNREFUSED) => format!(
            "no session {id} here: it has ended or was never started (`sandbox session list` \
             lists this user's)"
        ),
        _ => format!("session {id}: cannot reach its daemon: {e}"),
    })
}

/// The next reply on `sock`; `Err`: the line to print.
fn reply(sock: &OwnedFd) -> Result<Reply, String> {
    let mut buf = Vec::new();
    match wire::recv::<Reply>(sock.as_fd(), &mut buf) {
        Ok(Some((r, _))) => Ok(r),
        Ok(None) => Err("the session's daemon closed the connection".into()),
        Err(e) => Err(format!("reading the session's daemon: {e}")),
    }
}

/// `sandbox session end ID`: ends the session; every process in it is gone when this returns.
pub fn end(id: &str) -> i32 {
    let sock = match connect(id) {
        Ok(s) => s,
        Err(e) => return fail(format_args!("session end: {e}")),
    };
    if let Err(e) = wire::send(sock.as_fd(), &Request::End, &[]) {
        return fail(format_args!("session end: {e}"));
    }
    match reply(&sock) {
        Ok(Reply::Ended) => 0,
        Ok(Reply::Refused { reason }) => fail(format_args!("session end: {reason}")),
        Ok(other) => fail(format_args!("session end: unexpected answer {other:?}")),
        Err(e) => fail(format_args!("session end: {e}")),
    }
}

/// `sandbox session list [--json]`: this user's sessions. A socket nobody listens on (a daemon
/// that was killed) is removed on the way.
pub fn list(json: bool) -> i32 {
    let dir = match control::dir() {
        Ok(d) => d,
        Err(e) => return fail(format_args!("session list: {e}")),
    };
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) => return fail(format_args!("session list: {}: {e}", dir.display())),
    };
    let mut sessions: Vec<Info> = Vec::new();
    let mut status = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".sock")) else {
            continue;
        };
        if control::check_id(id).is_err() {
            continue;
        }
        match crate::sys::seqpacket_connect(&entry.path()) {
            Ok(sock) => {
                if wire::send(sock.as_fd(), &Request::Info, &[]).is_ok()
                    && wait_readable(&sock, Duration::from_secs(5))
                {
                    match reply(&sock) {
                        Ok(Reply::Info(info)) => sessions.push(info),
                        Ok(Reply::Refused { reason }) => {
                            status = fail(format_args!("session list: {id}: {reason}"));
                        }
                        _ => {}
                    }
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                let _ = std::fs::remove_file(entry.path());
            }
            Err(_) => {}
        }
    }
    sessions.sort_by(|a, b| b.age_s.cmp(&a.age_s).then(a.id.cmp(&b.id)));
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(&sessions).unwrap_or_default()
        );
        return status;
    }
    if sessions.is_empty() {
        return status;
    }
    let _ = writeln!(
        out,
        "ID                        PROFILE        AGE     RUNNING  WORKSPACE"
    );
    for s in sessions {
        let workspace = s
            .workspace
            .clone()
            .unwrap_or_else(|| format!("(default) {}", s.cwd));
        let _ = writeln!(
            out,
            "{}  {:13}  {:6}  {:7}  {}",
            s.id,
            crate::escape::text(&s.profile),
            age(s.age_s),
            s.running,
            crate::escape::text(&workspace)
        );
    }
    status
}

/// An age as `45s`, `12m`, `3h05m`.
fn age(s: u64) -> String {
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

fn wait_readable(sock: &OwnedFd, t: Duration) -> bool {
    let mut fds = [libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    matches!(crate::sys::poll_for(&mut fds, t.as_millis() as i32), Ok(n) if n > 0)
}

/// The eventfd the signal handler wakes `run` with (-1: none).
static SIGNAL_FD: AtomicI32 = AtomicI32::new(-1);
/// The signals caught and not yet forwarded, one bit each.
static PENDING: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    PENDING.fetch_or(1 << sig, Ordering::SeqCst);
    let fd = SIGNAL_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        crate::sys::eventfd_add_one(fd);
    }
}

/// The signals `run --session` forwards to its command.
const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// A command's own limits (`run --session --memory BYTES --processes N`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Own {
    /// Memory of the command's processes, bytes.
    pub memory: Option<u64>,
    /// Processes and threads of the command at once.
    pub processes: Option<u64>,
}

/// `sandbox run --session ID [--timeout S] -- argv...`: runs `argv` in the session with this
/// process's stdin, stdout and stderr (the daemon relays them; a terminal of the caller's
/// size when stdin and stdout are one, resized on SIGWINCH), forwards SIGINT, SIGTERM, SIGHUP
/// and SIGQUIT to the command's process group, prints `run`'s lines and returns `run`'s exit
/// status.
pub fn run(id: &str, argv: &[String], timeout: Option<u64>, own: Own) -> i32 {
    let sock = match connect(id) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let Ok(wake) = crate::sys::eventfd(libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) else {
        return fail("run --session: cannot make an eventfd");
    };
    SIGNAL_FD.store(wake.as_raw_fd(), Ordering::SeqCst);
    let mut previous = Vec::new();
    for sig in FORWARDED.into_iter().chain([libc::SIGWINCH]) {
        if let Ok(old) = crate::sys::catch_signal(sig, on_signal) {
            previous.push((sig, old));
        }
    }
    let terminal = Terminal::take();
    let (status, lines) = relay(&sock, &wake, argv, timeout, own, terminal.as_ref());
    // The terminal's mode is put back before anything is printed on it.
    drop(terminal);
    let mut err = std::io::stderr().lock();
    for l in lines {
        // Escaped by the daemon; escaped again here, so that no daemon's line can be more
        // than one line.
        let _ = writeln!(err, "{}", crate::escape::line(l));
    }
    for (sig, old) in &previous {
        crate::sys::restore_signal(*sig, old);
    }
    SIGNAL_FD.store(-1, Ordering::SeqCst);
    status
}

/// The caller's terminal, when its stdin and stdout are one: the command then gets a terminal
/// of the same size in the session, and this one is in raw mode until dropped (keys, ^C
/// included, go to the command's terminal as bytes; its line discipline makes the signals).
struct Terminal {
    mode: libc::termios,
    size: (u16, u16),
}

impl Terminal {
    fn take() -> Option<Terminal> {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
            return None;
        }
        let size = crate::sys::window(std::io::stdout().as_fd())?;
        // A terminal that reports no size (0x0, as a fresh pty does) gets the usual 80x24.
        let size = match size {
            (0, _) | (_, 0) => (80, 24),
            s => s,
        };
        let mode = crate::sys::raw_mode(std::io::stdin().as_fd()).ok()?;
        Some(Terminal { mode, size })
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        crate::sys::restore_mode(std::io::stdin().as_fd(), &self.mode);
    }
}

/// Sends the command and relays signals (and resizes) until its result comes: the exit
/// status and the lines to print.
fn relay(
    sock: &OwnedFd,
    wake: &OwnedFd,
    argv: &[String],
    timeout: Option<u64>,
    own: Own,
    terminal: Option<&Terminal>,
) -> (i32, Vec<String>) {
    let said = |msg: std::fmt::Arguments<'_>| (EXIT_SANDBOX, vec![format!("sandbox: {msg}")]);
    let req = Request::Run {
        argv: argv.to_vec(),
        timeout_s: timeout,
        memory: own.memory,
        processes: own.processes,
        tty: terminal.map(|t| t.size),
        path: std::env::var("PATH").ok(),
    };
    if let Err(e) = wire::send(sock.as_fd(), &req, &[0, 1, 2]) {
        return said(format_args!("run --session: {e}"));
    }
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        match crate::sys::poll_for(&mut fds, -1) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return said(format_args!("run --session: {e}")),
        }
        if fds[1].revents != 0 {
            crate::sys::eventfd_drain(wake.as_fd());
            let pending = PENDING.swap(0, Ordering::SeqCst);
            for sig in FORWARDED.iter().filter(|&&s| pending & (1 << s) != 0) {
                let _ = wire::send(sock.as_fd(), &Request::Signal { sig: *sig }, &[]);
            }
            if pending & (1 << libc::SIGWINCH) != 0 && terminal.is_some() {
                if let Some((cols, rows)) = crate::sys::window(std::io::stdout().as_fd()) {
                    let _ = wire::send(sock.as_fd(), &Request::Resize { cols, rows }, &[]);
                }
            }
        }
        if fds[0].revents == 0 {
            continue;
        }
        match reply(sock) {
            Ok(Reply::Started) => {}
            Ok(Reply::Done { lines, status }) => return (status, lines),
            Ok(Reply::Refused { reason }) => return said(format_args!("run --session: {reason}")),
            Ok(other) => return said(format_args!("run --session: unexpected answer {other:?}")),
            Err(e) => return said(format_args!("run --session: {e}")),
        }
    }
}
