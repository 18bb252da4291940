//! Starting a request's program without fork: `clone(CLONE_VM)` onto a private stack, as
//! `posix_spawn` does, so the host's address space is never copied. (std's `Command` forks as
//! soon as a pre-exec hook is set, which cost about 170 µs per request; see docs/exec.md.)
//!
//! The child shares the host's memory until `execve`, so it runs only raw system calls on
//! memory prepared before the clone: no allocation, no lock, no libc state (not even `errno`,
//! which would be the host thread's). In order: default signal dispositions, a new session,
//! the request cgroup, the working directory, standard streams (every other descriptor is
//! marked close-on-exec, so the program gets nothing else of the host's), resource limits,
//! no_new_privs, the outer filter, then `execve`. When the filter sends violations to a
//! supervisor (`SECCOMP_RET_USER_NOTIF`), the kernel gives the child the listener; the child
//! says which descriptor it is and waits (spinning briefly on shared memory, then on a futex)
//! while the host takes a copy with `pidfd_getfd`; the listener is close-on-exec, so the
//! program never holds it.
//!
//! The child reports through memory the host shares with it until exec: a failure (stage and
//! errno) is written there before it exits with 127. It is cloned with `CLONE_CHILD_CLEARTID`
//! on a word of that memory, so the kernel zeroes the word and wakes the host when the child
//! execs or exits (the release of the shared memory that `posix_spawn`'s vfork waits for): then
//! the child no longer uses the host's memory and its stack can be reused. No pipe is needed.

pub(crate) use super::namespaces::Namespaces;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

#[cfg(target_arch = "x86_64")]
use super::clone::{clone3, CloneArgs, CLONE_INTO_CGROUP};
use crate::policy::Insn;

#[macro_use]
mod child;
pub(crate) use child::{above_stdio, dup_above, pipe, Limit};
use child::{child_main, Ctx, Shared, Stack, Stage, ABORT, GO, HANDOVER, RELEASED, WAIT};
#[cfg(target_arch = "x86_64")]
use child::{GUARD, STACK_SIZE};

/// Everything the child does before exec, prepared by the parent.
pub(crate) struct Spec<'a> {
    /// The program's path; `execve` receives this very buffer (the outer filter's exemption
    /// names its address).
    pub path: &'a CString,
    /// Argument vector, program first.
    pub argv: &'a [CString],
    /// The complete environment, `KEY=value`.
    pub envp: &'a [CString],
    /// Working directory.
    pub cwd: Option<&'a CString>,
    /// What becomes the child's descriptors 0, 1 and 2.
    pub stdio: [RawFd; 3],
    /// What becomes the child's descriptor 3, kept open across exec: the preload's report
    /// pipe, when the preload stacks the exact filter (must be above 3).
    pub report: Option<RawFd>,
    /// The request cgroup's directory: the child starts in it.
    pub cgroup: Option<RawFd>,
    /// The request's cgroup directories in v1 hierarchies: the child joins them before exec.
    pub join_v1: &'a [RawFd],
    /// Resource limits.
    pub limits: &'a [Limit],
    /// A Landlock ruleset to restrict the child with (after no_new_privs, before the filter).
    pub landlock: Option<RawFd>,
    /// The outer filter, installed last.
    pub filter: Option<&'a [Insn]>,
    /// The filter sends violations to a listener the host must hold.
    pub listener: bool,
    /// Clone from this profile's spawner thread, whose filter the child inherits (instead of
    /// attaching `filter` in the child).
    #[cfg(target_arch = "x86_64")]
    pub spawner: Option<&'a super::spawner::Spawner>,
    /// Namespaces to start the program in (`None`: the host's). The child then becomes the
    /// namespaces' init and the program its child (see `spawn/init.rs`).
    pub namespaces: Option<&'a Namespaces>,
    /// TCP listeners to create inside the new network namespace before the program starts
    /// (needs `namespaces` with `net`); [`Spawned::listeners`] holds them in this order.
    pub listen: &'a [std::net::SocketAddrV4],
    /// With a fresh `/proc` or `/tmp` under Landlock: the rules to rebuild the job's ruleset
    /// from in the init, with those added (see `spawn/init.rs`).
    pub landlock_rules: Option<std::sync::Arc<crate::landlock::RawRules>>,
}

/// A started program.
#[derive(Debug)]
pub(crate) struct Spawned {
    /// Its pid (our child; reap it with `waitpid`).
    pub pid: i32,
    /// A pidfd for it, readable when it exits.
    pub pidfd: OwnedFd,
    /// The seccomp listener of its filter, when the filter notifies.
    pub listener: Option<OwnedFd>,
    /// The listeners `Spec::listen` asked for, created inside the network namespace.
    pub listeners: Vec<OwnedFd>,
    /// With namespaces: the init's handle, which tells how the program itself ended.
    pub init: Option<Init>,
}

/// What an init reports about the program it ran.
#[derive(Debug)]
pub(crate) struct Init {
    #[cfg(target_arch = "x86_64")]
    page: std::mem::ManuallyDrop<init::Page>,
    /// The stack of an init that shares our memory, and a pidfd telling when it is gone.
    #[cfg(target_arch = "x86_64")]
    shared: Option<(Stack, Option<OwnedFd>)>,
}

#[cfg(target_arch = "x86_64")]
impl Drop for Init {
    fn drop(&mut self) {
        // An init that shares our memory runs on its stack and writes to the page until it
        // exits: both stay mapped (leaked) unless it is gone (a pidfd is readable once the
        // process no longer uses its memory), so that no later mapping reuses their addresses.
        if let Some((stack, pidfd)) = self.shared.take() {
            let gone = pidfd.is_some_and(|fd| {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: polls one pollfd without waiting.
                unsafe { libc::poll(&mut p, 1, 0) == 1 && p.revents & libc::POLLIN != 0 }
            });
            if !gone {
                std::mem::forget(stack);
                return;
            }
        }
        // SAFETY: dropped once, here; the init no longer uses the page (or has a copy of it).
        unsafe { std::mem::ManuallyDrop::drop(&mut self.page) };
    }
}

impl Init {
    /// The program's wait status, once the init has reaped it (`None` when the init was
    /// killed first, e.g. by a timeout: its own status then tells).
    pub(crate) fn program_status(&self) -> Option<i32> {
        #[cfg(target_arch = "x86_64")]
        {
            let sh = self.page.shared();
            (sh.status_set.load(Ordering::Acquire) == 1).then(|| sh.status.load(Ordering::Relaxed))
        }
        #[cfg(not(target_arch = "x86_64"))]
        None
    }
}

#[cfg(target_arch = "x86_64")]
mod init;

/// Why the program was not started.
#[derive(Debug)]
pub(crate) enum SpawnError {
    /// `execve` failed (ENOENT, EACCES, ENOEXEC...).
    Exec(std::io::Error),
    /// The child failed while setting up, or the host could not start it.
    Setup(std::io::Error),
    /// The host could not take the child's seccomp listener (`pidfd_getfd` is a ptrace
    /// access: EPERM for a caller without CAP_SYS_PTRACE when the child is non-dumpable).
    Handover(std::io::Error),
    /// Namespaces presumed to work were refused, and the probes, run again, confirm it:
    /// nothing ran, and the job may be planned again without them.
    NamespacesRefused(std::io::Error),
}

thread_local! {
    /// A child stack to reuse: a thread runs one spawn at a time, and a child stops using its
    /// stack before `spawn` returns.
    static STACK: std::cell::Cell<Option<Stack>> = const { std::cell::Cell::new(None) };
}

/// Null-terminated pointer array for `execve`.
fn ptrs(v: &[CString]) -> Vec<*const c_char> {
    v.iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// Starts the program described by `spec`; returns once it has exec'd (or failed to).
pub(crate) fn spawn(spec: &Spec) -> Result<Spawned, SpawnError> {
    if spec.stdio.iter().any(|&fd| fd <= 2) || spec.report.is_some_and(|fd| fd <= 3) {
        return Err(SpawnError::Setup(std::io::Error::from_raw_os_error(
            libc::EINVAL,
        )));
    }
    let setup = SpawnError::Setup;
    let argv = ptrs(spec.argv);
    let envp = ptrs(spec.envp);
    let stack = STACK
        .with(|s| s.take())
        .map_or_else(Stack::new, Ok)
        .map_err(setup)?;
    #[cfg(target_arch = "x86_64")]
    let spawner = spec.spawner;
    #[cfg(not(target_arch = "x86_64"))]
    let spawner: Option<&()> = None;
    let inherits = spawner.is_some();
    let filter = spec.filter.unwrap_or(&[]);
    // With namespaces the child becomes an init that outlives the exec, with a copy of our
    // memory or (root) ours on a stack of its own: the words the host reads live in a shared
    // page, which also carries the command's status.
    #[cfg(target_arch = "x86_64")]
    let ns = match spec.namespaces {
        Some(n) => {
            Some(init::Prepared::new(n, spec.listen, spec.landlock_rules.clone()).map_err(setup)?)
        }
        None => None,
    };
    #[cfg(not(target_arch = "x86_64"))]
    if spec.namespaces.is_some() {
        return Err(SpawnError::Setup(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "namespaces are implemented for x86_64 only",
        )));
    }
    // `clone3` creates the child in the request cgroup; where only `clone` works, the child
    // joins it before anything of the program runs.
    #[cfg(target_arch = "x86_64")]
    let into_cgroup = super::clone::clone3_works();
    #[cfg(not(target_arch = "x86_64"))]
    let into_cgroup = false;
    let local = Shared::new();
    #[cfg(target_arch = "x86_64")]
    let sh: &Shared = ns.as_ref().map_or(&local, |n| n.shared());
    #[cfg(not(target_arch = "x86_64"))]
    let sh: &Shared = &local;
    let ctx = Ctx {
        path: spec.path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: spec.cwd.map_or(std::ptr::null(), |c| c.as_ptr()),
        stdio: spec.stdio,
        report: spec.report.unwrap_or(-1),
        join_cgroup: if cfg!(target_arch = "x86_64") && into_cgroup {
            -1
        } else {
            spec.cgroup.unwrap_or(-1)
        },
        join_v1: spec.join_v1.as_ptr(),
        njoin_v1: spec.join_v1.len(),
        limits: spec.limits.as_ptr(),
        nlimits: spec.limits.len(),
        landlock: spec.landlock.unwrap_or(-1),
        fprog: libc::sock_fprog {
            len: filter.len() as u16,
            // Insn has the layout of sock_filter (repr(C), same fields and order).
            filter: filter.as_ptr() as *mut libc::sock_filter,
        },
        has_filter: spec.filter.is_some() && !inherits,
        listener: spec.listener && !inherits,
        #[cfg(target_arch = "x86_64")]
        secret: spawner.map_or(0, |s| s.secret()),
        #[cfg(not(target_arch = "x86_64"))]
        secret: 0,
        sh,
        #[cfg(target_arch = "x86_64")]
        ns: ns.as_ref().map_or(std::ptr::null(), |n| n.ctx().cast()),
        #[cfg(target_arch = "x86_64")]
        cap_last: ns.as_ref().map_or(0, |n| n.cap_last()),
    };

    // Written by the kernel at the clone, possibly on the spawner thread while this one waits.
    let pidfd = AtomicI32::new(-1);
    #[cfg(target_arch = "x86_64")]
    let args = {
        let cgroup = spec.cgroup.filter(|_| into_cgroup);
        let mut args = clone_args(&stack, cgroup, &pidfd, &sh.phase);
        if let Some(n) = &ns {
            match n.init_stack() {
                // Sharing our memory, on a stack of its own that lives as long as it does.
                // Not CLONE_CHILD_CLEARTID: the word means the command's exec, and the init
                // outlives it.
                Some(s) => {
                    args.flags =
                        n.clone_flags() | (args.flags & !(libc::CLONE_CHILD_CLEARTID as u64));
                    args.stack = s.0 as u64;
                }
                // A process of its own (no CLONE_VM): it outlives the exec as the command's
                // init.
                None => {
                    args.flags = n.clone_flags() | (args.flags & !(libc::CLONE_VM as u64));
                }
            }
        }
        args
    };
    let arg = &ctx as *const Ctx as *mut c_void;
    #[cfg(target_arch = "x86_64")]
    let entry: extern "C" fn(*mut c_void) -> c_int = if ns.is_some() {
        init::init_main
    } else {
        child_main
    };
    let started = match spawner {
        // The spawner thread clones (and releases `phase` itself if it cannot); meanwhile we
        // wait for the child's exec.
        #[cfg(target_arch = "x86_64")]
        // SAFETY: args, ctx and stack stay valid until the child has exec'd (below).
        Some(s) => Started::Later(unsafe { s.post(&args, arg, &sh.phase, entry, after_clone) }),
        _ => {
            // SAFETY: sigset operations on locals; pthread_sigmask affects only this thread.
            let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: clone runs child_main on `stack` with `ctx`, both alive until the child
            // has exec'd or exited (the loop below waits for the kernel to release `phase`).
            // Signals are blocked around the clone so that no host handler runs on the
            // child's stack.
            let rc = unsafe {
                libc::sigfillset(&mut all);
                libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
                #[cfg(target_arch = "x86_64")]
                let rc = clone3(&args, entry, arg, 0);
                #[cfg(target_arch = "x86_64")]
                after_clone(arg, rc);
                #[cfg(not(target_arch = "x86_64"))]
                let rc = start_child(arg, &stack, &pidfd, &sh.phase);
                libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
                rc
            };
            if rc < 0 {
                return Err(clone_failed(rc, spec.namespaces.is_some()));
            }
            Started::Now(rc as i32)
        }
    };

    let mut listener = None;
    let mut failure: Option<SpawnError> = None;
    // An init has memory of its own, and the kernel clears a task's exit word only when its
    // memory is shared: an init that dies before the command's exec (killed from outside)
    // releases nothing. The wait then wakes now and then to see whether the init is gone.
    let has_init = spec.namespaces.is_some();
    let mut timed_out = false;
    loop {
        let phase = sh.phase.load(Ordering::Acquire);
        if phase == RELEASED {
            break;
        }
        // Only after a wait that timed out: an init that execs the command wakes the host
        // at once, so a normal spawn never looks.
        if std::mem::take(&mut timed_out) && exited(&pidfd) {
            if sh.phase.load(Ordering::Acquire) == RELEASED {
                break;
            }
            failure = Some(SpawnError::Setup(std::io::Error::other(
                "the namespaces' init ended before the command started (killed from outside?)",
            )));
            break;
        }
        if phase == HANDOVER && sh.go.load(Ordering::Relaxed) == WAIT {
            // Only a child started here (not by a spawner) hands over a listener, so the
            // pidfd is already there (with namespaces: the init's, whose descriptor table
            // the command shares until exec).
            let fd = sh.listener_fd.load(Ordering::Relaxed);
            let answer = match take_fd(pidfd.load(Ordering::Acquire), fd) {
                Ok(l) => {
                    listener = Some(l);
                    GO
                }
                Err(e) => {
                    failure = Some(SpawnError::Handover(e));
                    ABORT
                }
            };
            sh.go.store(answer, Ordering::Release);
            futex_shared(&sh.go, libc::FUTEX_WAKE, 1);
            continue;
        }
        // Not private: the kernel's wake at exec (CLONE_CHILD_CLEARTID) is a shared one.
        if has_init {
            timed_out = futex_wait_shared_for(&sh.phase, phase, INIT_CHECK);
        } else {
            futex_shared(&sh.phase, libc::FUTEX_WAIT, phase);
        }
    }
    if failure.is_none() {
        let stage = sh.failed[0].load(Ordering::Acquire);
        if stage != 0 {
            let err = std::io::Error::from_raw_os_error(sh.failed[1].load(Ordering::Relaxed));
            // The clone worked but the init could not map ids or mount (a container whose
            // /proc has paths mounted over it refuses a fresh one): the probes say whether
            // namespaces are usable here at all, as after a refused clone.
            let refused = has_init
                && matches!(Stage::from_i32(stage), Some(Stage::IdMap | Stage::Mounts))
                && super::isolation::recheck();
            failure = Some(match Stage::from_i32(stage) {
                _ if refused => SpawnError::NamespacesRefused(err),
                Some(Stage::Exec) => SpawnError::Exec(err),
                Some(Stage::Mounts) => {
                    // A failed mount is named (which step of the plan, where).
                    let step = spec
                        .namespaces
                        .and_then(|n| {
                            let i = usize::try_from(sh.mount_at.load(Ordering::Relaxed)).ok()?;
                            n.mounts.get(i).map(|m| format!(" ({})", m.describe()))
                        })
                        .unwrap_or_default();
                    SpawnError::Setup(std::io::Error::new(
                        err.kind(),
                        format!("{}{step}: {err}", Stage::Mounts.what()),
                    ))
                }
                Some(s) => SpawnError::Setup(std::io::Error::new(
                    err.kind(),
                    format!("{}: {err}", s.what()),
                )),
                None => SpawnError::Setup(err),
            });
        }
    }
    let pid = match started {
        Started::Now(pid) => pid,
        #[cfg(target_arch = "x86_64")]
        Started::Later(ticket) => match ticket.wait() {
            rc if rc < 0 => return Err(clone_failed(rc, spec.namespaces.is_some())),
            pid => pid as i32,
        },
        #[cfg(not(target_arch = "x86_64"))]
        Started::Never(never, _) => match never {},
    };
    let pidfd = match pidfd.load(Ordering::Acquire) {
        // SAFETY: CLONE_PIDFD stored a new descriptor that belongs to nobody else.
        fd if fd >= 0 => unsafe { OwnedFd::from_raw_fd(fd) },
        // The kernel took the clone but stored no pidfd: gVisor ignores CLONE_PIDFD. The
        // child is ours and not reaped, so its pid cannot be reused: `pidfd_open` names the
        // same process where it exists; where it does not either, the run cannot be tracked
        // and ends here, named, its child killed and reaped.
        _ => match crate::sys::pidfd_open(pid, 0) {
            Ok(fd) => fd,
            Err(e) => {
                let _ = crate::sys::kill(pid, libc::SIGKILL);
                let _ = crate::sys::waitpid(pid, 0);
                return Err(SpawnError::Setup(std::io::Error::new(
                    e.kind(),
                    format!(
                        "the kernel ignored CLONE_PIDFD (it stored no pidfd for the command) \
                         and pidfd_open answers {e}: this kernel (gVisor's?) cannot give the \
                         process descriptor the run is tracked by"
                    ),
                )));
            }
        },
    };
    // The child has exec'd or exited: its stack (and `ctx`, argv, envp) are no longer used.
    // The stack is kept for this thread's next spawn (mapping a fresh one costs three calls
    // and its page faults). An init runs on its own copy.
    STACK.with(|s| s.set(Some(stack)));
    #[cfg(target_arch = "x86_64")]
    let listeners = match (&ns, &failure) {
        (Some(n), None) => match n.take_listeners() {
            Ok(l) => l,
            Err(e) => {
                kill_pidfd(&pidfd);
                failure = Some(SpawnError::Setup(e));
                Vec::new()
            }
        },
        _ => Vec::new(),
    };
    #[cfg(not(target_arch = "x86_64"))]
    let listeners = Vec::new();
    if let Some(e) = failure {
        let mut status = 0;
        // SAFETY: reaps our own child, which has exited or is about to.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(e);
    }
    #[cfg(target_arch = "x86_64")]
    let init = ns.map(|n| {
        let (page, shared) = n.into_parts(&pidfd);
        Init {
            page: std::mem::ManuallyDrop::new(page),
            shared,
        }
    });
    #[cfg(not(target_arch = "x86_64"))]
    let init = None;
    Ok(Spawned {
        pid,
        pidfd,
        listener: if spec.listener && !inherits {
            listener
        } else {
            None
        },
        listeners,
        init,
    })
}

/// Called by the thread that cloned a child running on `ctx` (`rc`: its pid, or -errno): an
/// init that shares our memory gets its id maps written here (see `spawn/init.rs`).
///
/// # Safety
/// `ctx` is the `Ctx` the clone was given, alive until the child has exec'd; the caller may
/// be a spawner thread: only raw calls carrying the secret, no allocation.
#[cfg(target_arch = "x86_64")]
unsafe fn after_clone(ctx: *mut c_void, rc: isize) {
    // SAFETY: the caller's contract.
    unsafe {
        let c = &*(ctx as *const Ctx);
        if rc > 0 && !c.ns.is_null() {
            init::write_maps(c, rc as i32);
        }
    }
}

/// The error for a `clone3` that returned `rc`. With namespace flags, the probes run now
/// (namespaces are presumed to work until then): when they confirm the refusal, the error says
/// so, and the caller plans the job again without them.
fn clone_failed(rc: isize, namespaced: bool) -> SpawnError {
    let err = std::io::Error::from_raw_os_error(-rc as i32);
    if namespaced && super::isolation::recheck() {
        SpawnError::NamespacesRefused(err)
    } else {
        SpawnError::Setup(err)
    }
}

/// SIGKILL through a pidfd.
fn kill_pidfd(pidfd: &OwnedFd) {
    // SAFETY: pidfd_send_signal on a pidfd we own, no siginfo.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
}

/// How a child was started.
enum Started<'a> {
    /// By this thread: its pid.
    Now(i32),
    /// By a spawner thread: the pid once it answers.
    #[cfg(target_arch = "x86_64")]
    Later(super::spawner::Ticket<'a>),
    /// Never built: keeps the lifetime used where there is no spawner thread.
    #[cfg(not(target_arch = "x86_64"))]
    #[allow(dead_code)]
    Never(std::convert::Infallible, std::marker::PhantomData<&'a ()>),
}

/// `clone_args` for a child sharing our memory, on `stack`, created directly in the request
/// cgroup, its pidfd stored in `pidfd`, `phase` released by the kernel at its exec or exit.
#[cfg(target_arch = "x86_64")]
fn clone_args(
    stack: &Stack,
    cgroup: Option<RawFd>,
    pidfd: &AtomicI32,
    phase: &AtomicU32,
) -> CloneArgs {
    let mut args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_PIDFD | libc::CLONE_CHILD_CLEARTID) as u64,
        pidfd: pidfd.as_ptr() as u64,
        child_tid: phase as *const AtomicU32 as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack.0 as u64,
        stack_size: (STACK_SIZE + GUARD) as u64,
        ..CloneArgs::default()
    };
    if let Some(fd) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = fd as u64;
    }
    args
}

/// Starts `child_main(ctx)` on `stack` in a new process sharing our memory; the child joins
/// the request cgroup itself.
///
/// # Safety
/// `ctx` and `stack` must stay valid and unused by others until `phase` is released.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn start_child(
    ctx: *mut c_void,
    stack: &Stack,
    pidfd: &AtomicI32,
    phase: &AtomicU32,
) -> isize {
    // SAFETY: as in `spawn`: ctx and stack stay valid until the child has exec'd.
    let pid = unsafe {
        libc::clone(
            child_main,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_PIDFD | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD,
            ctx,
            pidfd.as_ptr(),
            std::ptr::null_mut::<c_void>(),
            phase as *const AtomicU32 as *mut c_void,
        )
    };
    if pid < 0 {
        -(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO) as isize)
    } else {
        pid as isize
    }
}

/// How often a host waiting for a command's exec looks whether the namespaces' init is gone
/// (only a dead init makes it wait that long: an exec wakes it at once).
const INIT_CHECK: std::time::Duration = std::time::Duration::from_millis(50);

/// `futex(word, FUTEX_WAIT, val)` for at most `timeout`; true when the time ran out.
fn futex_wait_shared_for(word: &AtomicU32, val: u32, timeout: std::time::Duration) -> bool {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as _,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: futex on a word that outlives the call, with a timeout on the stack.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const AtomicU32,
            libc::FUTEX_WAIT,
            val,
            &ts as *const libc::timespec,
        )
    };
    rc < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT)
}

/// Whether the process behind the pidfd in `pidfd` (once the clone stored one) has exited.
/// The kernel stores the number before it installs the descriptor: until then (a clone still
/// under way on the spawner thread) poll answers `POLLNVAL`, which says nothing about the
/// process.
fn exited(pidfd: &AtomicI32) -> bool {
    let fd = pidfd.load(Ordering::Acquire);
    if fd < 0 {
        return false;
    }
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one pollfd without waiting.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLIN != 0 && p.revents & libc::POLLNVAL == 0
}

/// `futex(word, op, val)` without timeout (a wait returns early on any change or signal).
fn futex_shared(word: &AtomicU32, op: c_int, val: u32) {
    // SAFETY: futex on a word that outlives the call.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const AtomicU32,
            op,
            val,
            std::ptr::null::<libc::timespec>(),
        )
    };
}

/// A copy of descriptor `fd` of the process behind `pidfd`.
fn take_fd(pidfd: RawFd, fd: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd returns a new close-on-exec descriptor or -1.
    let n = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: n was just created and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(n as RawFd) })
}
