//! The session's resident process: the program the engine starts in the session's sandbox
//! (namespaces, view, Landlock, limits, cgroup) with no filter of its own. It stays, and for
//! each command the host sends it forks a child that joins the command's streams, starts a
//! session and process group of its own, installs the profile's filter (exempting only
//! `execve` of a path buffer whose address the host learnt at the hello), hands its listener
//! to the host, and execs. The resident is single-threaded, so its children may allocate
//! until the filter is in; after it they make raw calls on memory prepared before.
//!
//! It ends when the host's end of the control socket closes (the host ended the session or
//! died); being the init's program, its end makes the init kill every process of the PID
//! namespace.

use super::wire::{self, FromResident, ToResident};
use std::collections::HashMap;
use std::ffi::{CString, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;

/// The argument that makes the `sandbox` binary the resident process.
pub const ARG: &str = "__session-resident";

/// The size of the buffer commands' paths are copied to before `execve`.
const PATH_MAX: usize = 4096;

/// Runs the resident process on descriptor 0 (the control socket); never returns.
pub fn main() -> ! {
    let code = match serve() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sandbox: session resident: {e}");
            1
        }
    };
    std::process::exit(code)
}

fn serve() -> std::io::Result<()> {
    // Commands must not read the path buffer's address from this process's memory.
    crate::sys::set_not_dumpable()?;
    // The control socket moves above the standard streams, close-on-exec; 0 becomes
    // /dev/null so that nothing a command inherits by mistake reaches the socket.
    let sock = crate::exec::dup_above(0, 3)?;
    let null = std::fs::File::open("/dev/null")?;
    // SAFETY: dup2 onto descriptor 0, which this process owns.
    if unsafe { libc::dup2(null.as_raw_fd(), 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    drop(null);
    let buffer: &'static mut [u8; PATH_MAX] = Box::leak(Box::new([0u8; PATH_MAX]));
    let sfd = sigchld_fd()?;
    wire::send(
        sock.as_fd(),
        &FromResident::Hello {
            addr: buffer.as_ptr() as u64,
        },
        &[],
    )?;
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let mut running: HashMap<i32, u64> = HashMap::new();
    let mut buf = Vec::new();
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        crate::sys::poll(&mut fds)?;
        if fds[1].revents != 0 {
            drain_signalfd(sfd.as_fd());
            reap(sock.as_fd(), &mut running)?;
        }
        if fds[0].revents == 0 {
            continue;
        }
        let Some((msg, passed)) = wire::recv::<ToResident>(sock.as_fd(), &mut buf)? else {
            return Ok(());
        };
        match msg {
            ToResident::Start {
                id,
                path,
                argv,
                env: extra,
                cwd,
                filter,
                notify,
            } => {
                let cmd = Prepared::new(&path, &argv, &env, &extra, cwd.as_deref(), filter);
                match cmd
                    .and_then(|c| start(sock.as_fd(), id, c, &passed, notify, buffer, &mut buf))
                {
                    Ok(Some(pid)) => {
                        running.insert(pid, id);
                    }
                    Ok(None) => {}
                    Err(e) => wire::send(
                        sock.as_fd(),
                        &FromResident::Failed {
                            id,
                            stage: "prepare".into(),
                            errno: e.raw_os_error().unwrap_or(libc::EINVAL),
                        },
                        &[],
                    )?,
                }
            }
            ToResident::Signal { id, sig } => {
                if let Some((&pid, _)) = running.iter().find(|(_, &i)| i == id) {
                    // The command leads its own process group: the signal reaches what it
                    // started there too, as a terminal's would.
                    // SAFETY: kill with a negative pid signals that process group.
                    if unsafe { libc::kill(-pid, sig) } != 0 {
                        // SAFETY: as above, the process alone.
                        unsafe { libc::kill(pid, sig) };
                    }
                }
            }
            ToResident::Go { .. } => {}
        }
    }
}

/// A signalfd for SIGCHLD, which is blocked (children unblock it before exec).
fn sigchld_fd() -> std::io::Result<OwnedFd> {
    // SAFETY: sigset operations on a local, then blocking it for this (only) thread and a
    // signalfd for it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

fn drain_signalfd(fd: BorrowedFd<'_>) {
    let mut info = [0u8; 128];
    // SAFETY: reads into a local buffer until the non-blocking descriptor is empty.
    while unsafe { libc::read(fd.as_raw_fd(), info.as_mut_ptr().cast(), info.len()) } > 0 {}
}

/// Reaps every ended child and tells the host about the commands among them.
fn reap(sock: BorrowedFd<'_>, running: &mut HashMap<i32, u64>) -> std::io::Result<()> {
    loop {
        match crate::sys::waitpid(-1, libc::WNOHANG) {
            Ok((pid, status)) if pid > 0 => {
                if let Some(id) = running.remove(&pid) {
                    wire::send(sock, &FromResident::Exited { id, status }, &[])?;
                }
            }
            _ => return Ok(()),
        }
    }
}

/// A command's C strings and filter, made before the fork.
struct Prepared {
    path: Vec<u8>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
    filter: Option<Vec<libc::sock_filter>>,
}

impl Prepared {
    fn new(
        path: &str,
        argv: &[String],
        env: &[(OsString, OsString)],
        extra: &[String],
        cwd: Option<&str>,
        filter: Option<Vec<u64>>,
    ) -> std::io::Result<Prepared> {
        let inval = || std::io::Error::from_raw_os_error(libc::EINVAL);
        let c = |s: Vec<u8>| CString::new(s).map_err(|_| inval());
        if path.len() >= PATH_MAX || path.is_empty() {
            return Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        let mut vars: Vec<Vec<u8>> = Vec::new();
        let key_of = |e: &[u8]| e.split(|b| *b == b'=').next().unwrap_or(&[]).to_vec();
        let keys: Vec<Vec<u8>> = extra.iter().map(|e| key_of(e.as_bytes())).collect();
        for (k, v) in env {
            if keys.iter().any(|x| x.as_slice() == k.as_encoded_bytes()) {
                continue;
            }
            let mut e = k.clone().into_vec();
            e.push(b'=');
            e.extend(v.clone().into_vec());
            vars.push(e);
        }
        vars.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
        let mut p = path.as_bytes().to_vec();
        p.push(0);
        Ok(Prepared {
            path: p,
            argv: argv
                .iter()
                .map(|a| c(a.as_bytes().to_vec()))
                .collect::<Result<_, _>>()?,
            envp: vars.into_iter().map(c).collect::<Result<_, _>>()?,
            cwd: cwd.map(|d| c(d.as_bytes().to_vec())).transpose()?,
            filter: filter.map(|f| f.into_iter().map(wire::unpack).collect()),
        })
    }
}

/// Stages a child reports on its error pipe.
const STAGES: [&str; 6] = ["signals", "streams", "cwd", "filter", "handover", "exec"];

/// Forks and starts one command. `Ok(Some(pid))`: it runs; `Ok(None)`: it failed and the
/// host was told.
fn start(
    sock: BorrowedFd<'_>,
    id: u64,
    cmd: Prepared,
    stdio: &[OwnedFd],
    notify: bool,
    buffer: &mut [u8; PATH_MAX],
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<i32>> {
    if stdio.len() != 3 {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    buffer[..cmd.path.len()].copy_from_slice(&cmd.path);
    let argv: Vec<*const libc::c_char> = cmd
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = cmd
        .envp
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let fprog = cmd.filter.as_ref().map(|f| libc::sock_fprog {
        len: f.len() as u16,
        filter: f.as_ptr() as *mut libc::sock_filter,
    });
    let (sync_r, sync_w) = crate::sys::pipe2(libc::O_CLOEXEC)?;
    let (go_r, go_w) = crate::sys::pipe2(libc::O_CLOEXEC)?;
    let (err_r, err_w) = crate::sys::pipe2(libc::O_CLOEXEC)?;
    let child = Child {
        stdio: [
            stdio[0].as_raw_fd(),
            stdio[1].as_raw_fd(),
            stdio[2].as_raw_fd(),
        ],
        cwd: cmd.cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        fprog: fprog.as_ref().map_or(std::ptr::null(), |p| p as *const _),
        notify: notify && fprog.is_some(),
        path: buffer.as_ptr().cast(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        sync_w: sync_w.as_raw_fd(),
        go_r: go_r.as_raw_fd(),
        err_w: err_w.as_raw_fd(),
    };
    // SAFETY: fork in a single-threaded process; the child runs `child_main`, which never
    // returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: in the child, on memory prepared above (still valid in its copy).
        unsafe { child_main(&child) }
    }
    drop((sync_w, go_r, err_w));
    let failed = |stage: &str, errno: i32| FromResident::Failed {
        id,
        stage: stage.into(),
        errno,
    };
    let pidfd = crate::sys::pidfd_open(pid, 0);
    let mut sent_pidfd = false;
    let mut refused = false;
    if child.notify {
        let mut word = [0u8; 4];
        let got = read_full(sync_r.as_fd(), &mut word);
        if got == 4 {
            let pidfd = pidfd
                .as_ref()
                .map_err(|e| std::io::Error::new(e.kind(), e.to_string()))?;
            wire::send(
                sock,
                &FromResident::Handover {
                    id,
                    listener: i32::from_ne_bytes(word),
                },
                &[pidfd.as_raw_fd()],
            )?;
            sent_pidfd = true;
            // The host serialises starts: the next message is this command's answer.
            let ok = matches!(
                wire::recv::<ToResident>(sock, buf)?,
                Some((ToResident::Go { id: g, ok: true }, _)) if g == id
            );
            refused = !ok;
            // SAFETY: writes one byte from a local to the go pipe.
            unsafe { libc::write(go_w.as_raw_fd(), [u8::from(ok)].as_ptr().cast(), 1) };
        }
    }
    drop(go_w);
    let mut report = [0u8; 8];
    let n = read_full(err_r.as_fd(), &mut report);
    if n == 8 {
        let stage = i32::from_ne_bytes(report[..4].try_into().unwrap_or_default());
        let errno = i32::from_ne_bytes(report[4..].try_into().unwrap_or_default());
        let _ = crate::sys::waitpid(pid, 0);
        let name = STAGES.get(stage as usize).copied().unwrap_or("setup");
        wire::send(sock, &failed(name, errno), &[])?;
        return Ok(None);
    }
    if n != 0 || refused {
        let _ = crate::sys::waitpid(pid, 0);
        wire::send(sock, &failed("handover", libc::ECANCELED), &[])?;
        return Ok(None);
    }
    let fds: Vec<RawFd> = match (&pidfd, sent_pidfd) {
        (Ok(p), false) => vec![p.as_raw_fd()],
        _ => Vec::new(),
    };
    wire::send(sock, &FromResident::Started { id }, &fds)?;
    Ok(Some(pid))
}

/// Reads until `buf` is full or the pipe ends; how many bytes came.
fn read_full(fd: BorrowedFd<'_>, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reads into the rest of a buffer we own.
        let n = unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf[got..].as_mut_ptr().cast(),
                buf.len() - got,
            )
        };
        if n > 0 {
            got += n as usize;
        } else if n == 0
            || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
        {
            break;
        }
    }
    got
}

/// What the forked child needs, all prepared before the fork.
struct Child {
    stdio: [RawFd; 3],
    cwd: *const libc::c_char,
    fprog: *const libc::sock_fprog,
    notify: bool,
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    sync_w: RawFd,
    go_r: RawFd,
    err_w: RawFd,
}

/// The forked child: joins its streams and its own session, installs the filter, hands its
/// listener over, execs. Raw calls only once the filter is in: under the profile, `write`,
/// `read`, `execve` of the buffer and `exit_group` are what it may still do.
///
/// # Safety
/// Called once, in the child of `fork`, with `c`'s pointers valid in its copy of memory.
unsafe fn child_main(c: &Child) -> ! {
    // SAFETY: the caller's contract; every call below is a raw system call on prepared
    // memory.
    unsafe {
        let fail = |stage: i32| -> ! {
            let errno = *libc::__errno_location();
            let mut word = [0u8; 8];
            word[..4].copy_from_slice(&stage.to_ne_bytes());
            word[4..].copy_from_slice(&errno.to_ne_bytes());
            libc::write(c.err_w, word.as_ptr().cast(), 8);
            libc::_exit(127)
        };
        // The resident blocks SIGCHLD and std ignores SIGPIPE: a command starts with neither.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0
            || libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR
        {
            fail(0);
        }
        if libc::setsid() < 0 {
            fail(0);
        }
        for (i, &fd) in c.stdio.iter().enumerate() {
            if libc::dup2(fd, i as i32) < 0 {
                fail(1);
            }
        }
        // A terminal as stdin (a command started with a pty) becomes the controlling
        // terminal of the new session, so that it gets SIGWINCH and ^C like a shell's job.
        if libc::isatty(0) == 1 && libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
            fail(1);
        }
        if !c.cwd.is_null() && libc::chdir(c.cwd) != 0 {
            fail(2);
        }
        if !c.fprog.is_null() {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                fail(3);
            }
            let flags = if c.notify {
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
            } else {
                0
            };
            let rc = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                c.fprog,
            );
            if rc < 0 {
                fail(3);
            }
            if c.notify {
                let word = (rc as i32).to_ne_bytes();
                if libc::write(c.sync_w, word.as_ptr().cast(), 4) != 4 {
                    fail(4);
                }
                let mut go = [0u8; 1];
                if libc::read(c.go_r, go.as_mut_ptr().cast(), 1) != 1 || go[0] != 1 {
                    libc::_exit(127);
                }
            }
        }
        libc::execve(c.path, c.argv, c.envp);
        fail(5)
    }
}
