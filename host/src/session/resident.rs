//! The session's resident process: the program the engine starts in the session's sandbox
//! (namespaces, view, Landlock, limits, cgroup) with no filter of its own. It stays, and for
//! each command the host sends it starts a child with `clone(CLONE_VM | CLONE_VFORK |
//! CLONE_FILES)`: the child shares the resident's memory (no copy of its pages, as
//! `posix_spawn` does) and its descriptor table, joins the command's streams, starts a session
//! and process group of its own, installs the profile's filter (exempting only `execve` of a
//! path buffer whose address the host learnt at the hello), and execs. Its listener, made in
//! the shared table, is the resident's without a handover; the resident sends it to the host
//! with the command's pidfd. The resident is suspended while the child runs (`CLONE_VFORK`),
//! so one child at a time uses the shared path buffer, stack and standard descriptors; the
//! child makes raw calls only, on memory prepared before.
//!
//! It ends when the host's end of the control socket closes (the host ended the session or
//! died); being the init's program, its end makes the init kill every process of the PID
//! namespace.

use super::child::{child_entry, Child, Report, STACK_WORDS, STAGES};
use super::wire::{self, FromResident, ToResident};
use std::collections::HashMap;
use std::ffi::{CString, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicI32, Ordering};

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
    // The host is gone or ended the session: nothing of the session outlives it.
    end_descendants();
    std::process::exit(code)
}

/// How many times [`end_descendants`] looks again for children.
const END_ROUNDS: usize = 2000;

/// Kills every process below the resident before it exits. The resident is a child
/// subreaper, so each killed process's children become its own, and the next round kills
/// them: the loop ends when it has no children left. Where a PID namespace holds the session
/// its init does the same when the resident is gone; without one (the contained tier) and
/// without a cgroup to kill, the host's walk of the process tree could only find what still
/// descends from the resident, and a resident that exited first left its commands'
/// background processes to the host, outside that tree.
fn end_descendants() {
    let me = std::process::id() as i32;
    for _ in 0..END_ROUNDS {
        let kids = children(me);
        if kids.is_empty() {
            return;
        }
        for pid in kids {
            // A pidfd first, then the parent checked: a pid the kernel reaped and gave to
            // another process meanwhile is left alone.
            let Ok(fd) = crate::sys::pidfd_open(pid, 0) else {
                continue;
            };
            if crate::exec::procfs::stat(pid).map(|s| s.ppid) == Some(me) {
                let _ = crate::sys::pidfd_signal(fd.as_fd(), libc::SIGKILL);
            }
        }
        // Where this process reaps its children itself (no exit_info), the killed ones.
        while matches!(crate::sys::waitpid(-1, libc::WNOHANG), Ok((p, _)) if p > 0) {}
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The children of process `pid` (every thread's).
fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What stays the resident's across commands.
struct Resident {
    /// The path buffer the filter's `execve` exemption names.
    buffer: &'static mut [u8; PATH_MAX],
    /// The children's stack (one child at a time: the resident waits while it runs).
    stack: &'static mut [u128],
    /// The resident's own descriptors 0, 1 and 2, put back after each child (which replaces
    /// them in the shared table with the command's streams).
    std: [OwnedFd; 3],
    /// The session's filter and whether it notifies, sent once by the host.
    filter: Option<(Vec<libc::sock_filter>, bool)>,
    /// The session's environment.
    env: Vec<(OsString, OsString)>,
    /// The session's spawner thread and its secret, when the host sent its filter: filtered
    /// commands are cloned by that thread and inherit the filter it installed on itself once.
    #[cfg(target_arch = "x86_64")]
    spawner: Option<(&'static crate::exec::spawner::Spawner, u64)>,
}

fn serve() -> std::io::Result<()> {
    // Commands must not read the path buffer's address from this process's memory.
    crate::sys::set_not_dumpable()?;
    // What a command leaves running when it ends (a server started with `&`, a daemon that
    // forked twice) is re-parented here rather than to the host: it stays in the tree the
    // session's end kills where no PID namespace or cgroup holds the session (the contained
    // tier without cgroups: a container, or a user without delegated cgroups). Reaped as every
    // child is (by the kernel where exit_info works, else `reap`).
    crate::sys::set_child_subreaper()?;
    // The control socket moves above the standard streams, close-on-exec; 0 becomes
    // /dev/null so that nothing a command inherits by mistake reaches the socket.
    let sock = crate::exec::dup_above(0, 3)?;
    let null = std::fs::File::open("/dev/null")?;
    // SAFETY: dup2 onto descriptor 0, which this process owns.
    if unsafe { libc::dup2(null.as_raw_fd(), 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    drop(null);
    let mut me = Resident {
        buffer: Box::leak(Box::new([0u8; PATH_MAX])),
        stack: Box::leak(vec![0u128; STACK_WORDS].into_boxed_slice()),
        std: [
            crate::exec::dup_above(0, 3)?,
            crate::exec::dup_above(1, 3)?,
            crate::exec::dup_above(2, 3)?,
        ],
        filter: None,
        env: std::env::vars_os().collect(),
        #[cfg(target_arch = "x86_64")]
        spawner: None,
    };
    // Where the kernel keeps a reaped command's status for its pidfd, it reaps the commands
    // itself and the host reads their status there: a command's exit then wakes the thread
    // waiting for it and nothing here. Elsewhere this process reaps them on SIGCHLD and sends
    // each one's status.
    let exit_info = exit_info_works(me.stack);
    let sfd = if exit_info {
        // The kernel still signals each exit, to this thread: the spawner thread, whose
        // children the commands are, blocks every signal. Blocked here too, it stays pending
        // and wakes nobody (it woke this thread once per command, for nothing).
        block_sigchld();
        None
    } else {
        Some(sigchld_fd()?)
    };
    // Made here, in the session's network namespace, for the host: a socket answers for the
    // namespace it was made in.
    let diag = crate::sys::netlink_bound(libc::NETLINK_SOCK_DIAG, 0).ok();
    // The host routes the calls of the spawner's listener by process: its pidfd of this
    // process tells it the pid its commands' parent has.
    let me_fd = crate::sys::pidfd_open(std::process::id() as i32, 0)?;
    wire::send(
        sock.as_fd(),
        &FromResident::Hello {
            addr: me.buffer.as_ptr() as u64,
            exit_info,
            diag: diag.is_some(),
        },
        // This process's pidfd first, then the diagnosis socket when `diag`.
        &std::iter::once(me_fd.as_raw_fd())
            .chain(diag.as_ref().map(|d| d.as_raw_fd()))
            .collect::<Vec<_>>(),
    )?;
    drop(me_fd);
    drop(diag);
    // Running commands by pid.
    let mut running: HashMap<i32, Running> = HashMap::new();
    let mut buf = Vec::new();
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                // A negative descriptor is left out of the poll.
                fd: sfd.as_ref().map_or(-1, |f| f.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        crate::sys::poll(&mut fds)?;
        if let (Some(sfd), true) = (&sfd, fds[1].revents != 0) {
            drain_signalfd(sfd.as_fd());
            reap(&mut running);
        }
        if fds[0].revents == 0 {
            continue;
        }
        let Some((msg, passed)) = wire::recv::<ToResident>(sock.as_fd(), &mut buf)? else {
            return Ok(());
        };
        match msg {
            ToResident::Filter { filter, notify } => {
                me.filter = Some((filter.into_iter().map(wire::unpack).collect(), notify));
            }
            ToResident::Spawner {
                filter,
                secret,
                starts,
            } => {
                let prog = filter.into_iter().map(wire::unpack_insn).collect();
                // The start socket only where the kernel reaps the commands: the spawner
                // thread then hands nothing to this thread.
                let starts = passed.into_iter().next().filter(|_| starts && exit_info);
                start_spawner(sock.as_fd(), prog, secret, starts, &mut me)?;
            }
            ToResident::Start {
                id,
                path,
                argv,
                env: extra,
                cwd,
                filtered,
                cgroups,
            } => {
                // Without its reply socket a start has no one to answer: it is dropped, and the
                // host, whose end then reads end of file, reports it.
                let mut passed = passed;
                if passed.len() != 4 + cgroups || cgroups > 2 {
                    continue;
                }
                let procs = passed.split_off(4);
                let reply = passed.pop().expect("four descriptors");
                let cmd = Prepared::new(&path, &argv, &me.env, &extra, cwd.as_deref());
                match cmd
                    .and_then(|c| start(reply.as_fd(), id, c, &passed, &procs, filtered, &mut me))
                {
                    Ok(Some((pid, pidfd))) if exit_info => {
                        // The kernel reaps it and the host reads its status from its pidfd:
                        // only what a signal needs stays here. Commands that have ended are
                        // forgotten now (their pid may be reused).
                        running.retain(|_, r| !crate::sys::pidfd_exited(r.pidfd.as_fd()));
                        running.insert(
                            pid,
                            Running {
                                id,
                                pidfd,
                                reply: None,
                                outputs: Vec::new(),
                            },
                        );
                    }
                    Ok(Some((pid, pidfd))) => {
                        // Its stdin's read end is the command's alone; the write ends of its
                        // stdout and stderr stay here until it is reaped.
                        let outputs = vec![passed.remove(1), passed.remove(1)];
                        running.insert(
                            pid,
                            Running {
                                id,
                                pidfd,
                                reply: Some(reply),
                                outputs,
                            },
                        );
                    }
                    Ok(None) => {}
                    Err(e) => {
                        // The command's reply socket may be gone (its host thread gave up):
                        // that ends this start, not the session.
                        let _ = wire::send(
                            reply.as_fd(),
                            &FromResident::Failed {
                                id,
                                stage: "prepare".into(),
                                errno: e.raw_os_error().unwrap_or(libc::EINVAL),
                            },
                            &[],
                        );
                    }
                }
            }
            ToResident::Signal { id, sig, pid } => {
                // A command the kernel has reaped is not signalled: its pid may be another's.
                let live = |r: &Running| !exit_info || !crate::sys::pidfd_exited(r.pidfd.as_fd());
                let known = running
                    .iter()
                    .find(|(_, r)| r.id == id)
                    .map(|(p, r)| (*p, r));
                let target = match known {
                    Some((p, r)) => live(r).then_some(p),
                    // Started on the start socket: the host found it running.
                    None => pid.filter(|p| *p > 0),
                };
                if let Some(pid) = target {
                    // The command leads its own process group: the signal reaches what it
                    // started there too, as a terminal's would.
                    // SAFETY: kill with a negative pid signals that process group.
                    if unsafe { libc::kill(-pid, sig) } != 0 {
                        // SAFETY: as above, the process alone.
                        unsafe { libc::kill(pid, sig) };
                    }
                }
            }
        }
    }
}

/// Starts the session's spawner thread with `prog` and answers the host: `Spawner` with the
/// filter's listener (this process keeps no copy of it), or the errno that stopped it. With
/// `starts`, the thread serves that start socket (module `start_socket`) and takes no jobs
/// from this thread; without, this thread posts it each filtered command.
#[cfg(target_arch = "x86_64")]
fn start_spawner(
    sock: BorrowedFd<'_>,
    prog: Vec<crate::policy::Insn>,
    secret: u64,
    starts: Option<OwnedFd>,
    me: &mut Resident,
) -> std::io::Result<()> {
    use crate::exec::spawner::{Spawner, Then};
    let serving = starts.is_some();
    let then = starts.map(|s| {
        let lp: &'static mut super::start_socket::Loop =
            Box::leak(Box::new(super::start_socket::Loop::new(s, &me.env)));
        Then {
            run: serve_starts,
            ctx: (lp as *mut super::start_socket::Loop).cast(),
        }
    });
    match Spawner::with_program("session", prog, secret, then) {
        Ok((sp, listener)) => {
            if !serving {
                me.spawner = Some((sp, secret));
            }
            wire::send(
                sock,
                &FromResident::Spawner {
                    errno: 0,
                    starts: serving,
                },
                &[listener.as_raw_fd()],
            )
        }
        Err(e) => wire::send(
            sock,
            &FromResident::Spawner {
                errno: e.raw_os_error().unwrap_or(libc::EINVAL),
                starts: false,
            },
            &[],
        ),
    }
}

/// The spawner thread's loop on the start socket.
///
/// # Safety
/// `Then`'s contract; `ctx` is the leaked [`super::start_socket::Loop`] made for it.
#[cfg(target_arch = "x86_64")]
unsafe fn serve_starts(ctx: *mut libc::c_void, secret: u64) -> ! {
    // SAFETY: the caller's contract: the loop is this thread's alone.
    unsafe { super::start_socket::serve(&mut *ctx.cast::<super::start_socket::Loop>(), secret) }
}

/// Elsewhere there is no spawner thread (`exec/clone.rs` has no raw clone for it): the host
/// sends the plain filter instead.
#[cfg(not(target_arch = "x86_64"))]
fn start_spawner(
    sock: BorrowedFd<'_>,
    _prog: Vec<crate::policy::Insn>,
    _secret: u64,
    _starts: Option<OwnedFd>,
    _me: &mut Resident,
) -> std::io::Result<()> {
    wire::send(
        sock,
        &FromResident::Spawner {
            errno: libc::ENOSYS,
            starts: false,
        },
        &[],
    )
}

/// Blocks SIGCHLD for this thread (children unblock every signal before exec).
fn block_sigchld() {
    // SAFETY: sigset operations on a local, then blocking it for this (only) thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
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

/// A command that runs, as the resident holds it.
struct Running {
    id: u64,
    /// Its pidfd: whether it has ended, where the kernel reaps it.
    pidfd: OwnedFd,
    /// The resident's end of the command's reply socket, where this process reaps it.
    reply: Option<OwnedFd>,
    /// Where this process reaps it: the write ends of the command's stdout and stderr, held
    /// until it is reaped, so that the host sees the end of its output and its status at one
    /// moment (one wake-up of the thread waiting for it), not the output's end at the exit and
    /// the status after the reap. Processes the command left behind may hold them longer.
    outputs: Vec<OwnedFd>,
}

/// Whether the kernel can reap this process's children for it and keep each one's exit
/// status for its pidfd (`SA_NOCLDWAIT` and `PIDFD_INFO_EXIT`, Linux 6.15), tried with a child
/// that exits 3 at once. When it cannot, children are reaped by this process again.
fn exit_info_works(stack: &mut [u128]) -> bool {
    if crate::sys::reap_children_at_exit(true).is_err() {
        return false;
    }
    let top = stack.as_mut_ptr_range().end.cast::<libc::c_void>();
    let mut pidfd: libc::c_int = -1;
    // SAFETY: the child runs `exit_three` on the resident's unused child stack and exits at
    // once; CLONE_VFORK suspends this (only) thread until then.
    let pid = unsafe {
        libc::clone(
            exit_three,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
            std::ptr::null_mut(),
            &mut pidfd as *mut libc::c_int,
        )
    };
    let works = pid > 0 && pidfd >= 0 && {
        // SAFETY: CLONE_PIDFD made this descriptor for this process alone.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        let status = || crate::sys::pidfd_exit_status(pidfd.as_fd());
        match status() {
            Ok(Some(s)) => s == 3 << 8,
            Ok(None) => {
                // Not reaped yet: the kernel says so on the pidfd (POLLHUP).
                let mut p = [libc::pollfd {
                    fd: pidfd.as_raw_fd(),
                    events: 0,
                    revents: 0,
                }];
                let _ = crate::sys::poll_for(&mut p, 100);
                matches!(status(), Ok(Some(s)) if s == 3 << 8)
            }
            Err(_) => false,
        }
    };
    if !works {
        let _ = crate::sys::reap_children_at_exit(false);
        if pid > 0 {
            let _ = crate::sys::waitpid(pid, libc::WNOHANG);
        }
    }
    works
}

extern "C" fn exit_three(_: *mut libc::c_void) -> libc::c_int {
    // SAFETY: _exit ends the probe child at once, touching nothing it shares.
    unsafe { libc::_exit(3) }
}

/// Reaps every ended child and tells the host about the commands among them, each on its
/// reply socket (then closed), after closing the command's output ends. A reply socket whose
/// host end is gone is no error: that command's thread has ended.
fn reap(running: &mut HashMap<i32, Running>) {
    loop {
        match crate::sys::waitpid(-1, libc::WNOHANG) {
            Ok((pid, status)) if pid > 0 => {
                if let Some(r) = running.remove(&pid) {
                    drop(r.outputs);
                    if let Some(reply) = &r.reply {
                        let _ = wire::send(
                            reply.as_fd(),
                            &FromResident::Exited { id: r.id, status },
                            &[],
                        );
                    }
                }
            }
            _ => return,
        }
    }
}

/// A command's C strings, made before the clone.
struct Prepared {
    path: Vec<u8>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
}

impl Prepared {
    fn new(
        path: &str,
        argv: &[String],
        env: &[(OsString, OsString)],
        extra: &[String],
        cwd: Option<&str>,
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
        })
    }
}

/// Starts one command, answering on its `reply` socket. `Ok(Some((pid, pidfd)))`: it runs and
/// the host has a copy of its pidfd (and its listener); `Ok(None)`: it failed and the host
/// was told.
fn start(
    reply: BorrowedFd<'_>,
    id: u64,
    cmd: Prepared,
    stdio: &[OwnedFd],
    procs: &[OwnedFd],
    filtered: bool,
    me: &mut Resident,
) -> std::io::Result<Option<(i32, OwnedFd)>> {
    let failed = |stage: &str, errno: i32| FromResident::Failed {
        id,
        stage: stage.into(),
        errno,
    };
    if stdio.len() != 3 {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    // A filtered command is cloned by the spawner thread, whose filter it inherits, when the
    // session has one; else it installs the session's filter itself.
    #[cfg(target_arch = "x86_64")]
    let spawner = me.spawner.filter(|_| filtered);
    #[cfg(not(target_arch = "x86_64"))]
    let spawner: Option<((), u64)> = None;
    // Fail closed: a filtered command needs the session's filter.
    let filter = match (filtered && spawner.is_none(), &me.filter) {
        (false, _) => None,
        (true, Some(f)) => Some(f),
        (true, None) => {
            wire::send(reply, &failed("filter", libc::EINVAL), &[])?;
            return Ok(None);
        }
    };
    me.buffer[..cmd.path.len()].copy_from_slice(&cmd.path);
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
    let fprog = filter.map(|(f, _)| libc::sock_fprog {
        len: f.len() as u16,
        filter: f.as_ptr() as *mut libc::sock_filter,
    });
    let report = Report {
        stage: AtomicI32::new(-1),
        errno: AtomicI32::new(0),
        listener: AtomicI32::new(-1),
    };
    let mut cgroups = [-1; 2];
    for (slot, fd) in cgroups.iter_mut().zip(procs) {
        *slot = fd.as_raw_fd();
    }
    let child = Child {
        cgroups,
        stdio: [
            stdio[0].as_raw_fd(),
            stdio[1].as_raw_fd(),
            stdio[2].as_raw_fd(),
        ],
        cwd: cmd.cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        fprog: fprog.as_ref().map_or(std::ptr::null(), |p| p as *const _),
        notify: filter.is_some_and(|(_, n)| *n),
        // Without the start socket (older kernels): a session for every command, as before.
        session: true,
        secret: spawner.map_or(0, |(_, s)| s),
        path: me.buffer.as_ptr().cast(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        report: &report,
        id,
        reply: -1,
    };
    let mut pidfd: libc::c_int = -1;
    let (pid, clone_errno) = match spawner {
        #[cfg(target_arch = "x86_64")]
        Some((sp, _)) => clone_by_spawner(sp, &child, &mut pidfd, me.stack),
        _ => {
            let top = me.stack.as_mut_ptr_range().end.cast::<libc::c_void>();
            // SAFETY: the child shares this memory and runs `child_entry` on the leaked
            // stack, which nothing else uses; CLONE_VFORK suspends this thread until the
            // child has exec'd or exited, so `child`, `report`, the buffer and the stack
            // outlive its use of them.
            let pid = unsafe {
                libc::clone(
                    child_entry,
                    top,
                    libc::CLONE_VM
                        | libc::CLONE_VFORK
                        | libc::CLONE_FILES
                        | libc::CLONE_PIDFD
                        | libc::SIGCHLD,
                    &child as *const Child as *mut libc::c_void,
                    &mut pidfd as *mut libc::c_int,
                )
            };
            (pid, std::io::Error::last_os_error())
        }
    };
    // The child replaced 0, 1 and 2 of the shared table with the command's streams (its exec
    // took a copy of the table first): the resident's own come back.
    for (i, fd) in me.std.iter().enumerate() {
        // SAFETY: dup2 of a descriptor this process owns onto its standard ones.
        unsafe { libc::dup2(fd.as_raw_fd(), i as i32) };
    }
    if pid < 0 {
        return Err(clone_errno);
    }
    // SAFETY: CLONE_PIDFD wrote a new descriptor that nothing else owns.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    let listener = report.listener.load(Ordering::Acquire);
    // SAFETY: the child made the listener in the shared table; nothing else owns it.
    let listener = (listener >= 0).then(|| unsafe { OwnedFd::from_raw_fd(listener) });
    let stage = report.stage.load(Ordering::Acquire);
    if stage >= 0 {
        let _ = crate::sys::waitpid(pid, 0);
        let name = STAGES.get(stage as usize).copied().unwrap_or("setup");
        wire::send(
            reply,
            &failed(name, report.errno.load(Ordering::Acquire)),
            &[],
        )?;
        return Ok(None);
    }
    let stop = |why: &str| -> std::io::Result<Option<(i32, OwnedFd)>> {
        // SAFETY: kill of our own unreaped child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = crate::sys::waitpid(pid, 0);
        wire::send(reply, &failed(why, libc::ECANCELED), &[])?;
        Ok(None)
    };
    let Some(pidfd) = pidfd else {
        return stop("handover");
    };
    // Fail closed: the filter's refused calls would have no one to answer them.
    if child.notify && listener.is_none() {
        return stop("handover");
    }
    let mut fds = vec![pidfd.as_raw_fd()];
    fds.extend(listener.as_ref().map(|l| l.as_raw_fd()));
    if let Err(e) = wire::send(
        reply,
        &FromResident::Started {
            id,
            listener: listener.is_some(),
            pid: Some(pid),
        },
        &fds,
    ) {
        // SAFETY: kill of our own unreaped child, which nobody would supervise.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        return Err(e);
    }
    Ok(Some((pid, pidfd)))
}

/// Has the session's spawner thread clone the child (`CLONE_VM | CLONE_VFORK | CLONE_FILES`,
/// as this process does itself otherwise) on `stack`; the child inherits the thread's filter.
/// This thread waits until the spawner thread is back (the child has exec'd or exited).
#[cfg(target_arch = "x86_64")]
fn clone_by_spawner(
    sp: &'static crate::exec::spawner::Spawner,
    child: &Child,
    pidfd: &mut libc::c_int,
    stack: &mut [u128],
) -> (i32, std::io::Error) {
    let args = crate::exec::clone::CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::CLONE_PIDFD) as u64,
        pidfd: pidfd as *mut libc::c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack.as_mut_ptr() as u64,
        stack_size: std::mem::size_of_val(stack) as u64,
        ..Default::default()
    };
    // Released by the spawner thread only when the clone fails; nobody waits on it here.
    let phase = std::sync::atomic::AtomicU32::new(1);
    // SAFETY: `args`, `child` (and what it points to), `pidfd` and `stack` live until the
    // ticket is waited for, which is after the child has exec'd or exited (CLONE_VFORK
    // suspends the spawner thread until then); the stack is used by one child at a time.
    let r = unsafe {
        sp.post(
            &args,
            child as *const Child as *mut libc::c_void,
            &phase,
            child_entry,
            after_clone,
        )
    }
    .wait();
    if r < 0 {
        (-1, std::io::Error::from_raw_os_error(-r as i32))
    } else {
        (r as i32, std::io::Error::from_raw_os_error(0))
    }
}

/// The spawner thread's step after a session's clone: nothing (the resident reads the
/// child's report itself).
#[cfg(target_arch = "x86_64")]
fn after_clone(_: *mut libc::c_void, _: isize) {}
