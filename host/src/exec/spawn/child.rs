//! The child side of a spawn: what runs between `clone` and `execve`, on memory the host
//! prepared (see the module `spawn` for the protocol): the context the child reads ([`Ctx`]),
//! the words it writes for the host ([`Shared`]), its stages and failure report, raw system
//! calls, its stack, and `child_main` itself. The namespaces' init (`spawn/init.rs`) starts the
//! program with the same code, so both depend on this module and it on neither.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// The child's stack: it only calls raw syscalls, so a small one with a guard page suffices.
pub(super) const STACK_SIZE: usize = 64 * 1024;
pub(super) const GUARD: usize = 4096;

/// One resource limit to set in the child (values already capped by the parent).
pub(crate) type Limit = (c_int, libc::rlimit);

/// Defines [`Stage`] from one list: the variants in order (numbered from 1, the value the child
/// stores for the parent), and what each one was doing, for the error message.
macro_rules! stages {
    ($first:ident => $first_what:literal, $($name:ident => $what:literal,)*) => {
        /// Where the child failed.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(i32)]
        pub(super) enum Stage {
            $first = 1,
            $($name,)*
        }

        impl Stage {
            /// Every stage, in order.
            pub(super) const ALL: &'static [Stage] = &[Stage::$first, $(Stage::$name,)*];

            /// What the child was doing at this stage.
            pub(super) fn what(self) -> &'static str {
                match self {
                    Stage::$first => $first_what,
                    $(Stage::$name => $what,)*
                }
            }
        }
    };
}

stages! {
    Signals => "resetting signal dispositions",
    Session => "starting a new session",
    Cgroup => "joining the request cgroup",
    Cwd => "changing to the working directory",
    Stdio => "setting up standard streams",
    Limits => "setting resource limits",
    NoNewPrivs => "setting no_new_privs",
    Landlock => "restricting with Landlock",
    Filter => "installing the seccomp filter",
    Listener => "handing over the seccomp listener",
    Exec => "exec",
    IdMap => "mapping the user and group ids into the new user namespace",
    Network => "setting up the network namespace",
    Mounts => "mounting in the new mount namespace",
    Capabilities => "dropping capabilities",
    Command => "starting the program under the namespaces' init",
    Paths => "adding the namespace's own mounts to the Landlock rules",
}

impl Stage {
    /// The stage the child stored as `n`.
    pub(super) fn from_i32(n: i32) -> Option<Stage> {
        Stage::ALL.iter().copied().find(|s| *s as i32 == n)
    }
}

/// Handover states in `Ctx::go`.
pub(super) const WAIT: u32 = 0;
pub(super) const GO: u32 = 1;
pub(super) const ABORT: u32 = 2;

/// How many times the child polls `Ctx::go` before it sleeps on the futex: the host answers
/// within the time it takes to wake up, and sleeping as well would add a second wake-up.
pub(super) const SPINS: u32 = 4096;

/// `Ctx::phase`: the child runs (before exec).
pub(super) const RUNNING: u32 = 1;
/// `Ctx::phase`: the child has a listener for the host (`Ctx::listener`).
pub(super) const HANDOVER: u32 = 2;
/// `Ctx::phase` once the kernel cleared it: the child has exec'd or exited.
pub(super) const RELEASED: u32 = 0;

/// What the child reads, as raw pointers into memory the parent keeps alive until exec.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Ctx {
    pub(super) path: *const c_char,
    pub(super) argv: *const *const c_char,
    pub(super) envp: *const *const c_char,
    pub(super) cwd: *const c_char,
    pub(super) stdio: [RawFd; 3],
    /// Becomes descriptor 3 across exec (-1: none).
    pub(super) report: RawFd,
    /// The cgroup directory to join from the child (-1: none, or created in it by clone3;
    /// joined here where clone3 is refused).
    pub(super) join_cgroup: RawFd,
    /// Cgroup directories in v1 hierarchies the child joins too (v1 has no `CLONE_INTO_CGROUP`).
    pub(super) join_v1: *const RawFd,
    pub(super) njoin_v1: usize,
    pub(super) limits: *const Limit,
    pub(super) nlimits: usize,
    /// The Landlock ruleset (-1: none).
    pub(super) landlock: RawFd,
    pub(super) fprog: libc::sock_fprog,
    pub(super) has_filter: bool,
    pub(super) listener: bool,
    /// Passed in an argument the kernel ignores of every call the child makes: a spawner
    /// thread's filter exempts exactly the calls that carry it (0 when unused).
    pub(super) secret: u64,
    /// The words the host reads: on the host's stack, or in a page shared with the init of
    /// a namespaced child (which has memory of its own).
    pub(super) sh: *const Shared,
    /// The namespaces to create and what to do in them (null: none): the init's context
    /// (`init::NsCtx`), opaque here so that this module depends on neither the spawn nor the
    /// init.
    #[cfg(target_arch = "x86_64")]
    pub(super) ns: *const c_void,
    /// The highest capability number, for dropping them all under namespaces.
    #[cfg(target_arch = "x86_64")]
    pub(super) cap_last: i32,
}

/// What the child side writes and the host reads.
#[repr(C)]
pub(crate) struct Shared {
    /// [`RUNNING`], [`HANDOVER`], or [`RELEASED`] by the kernel (`CLONE_CHILD_CLEARTID`).
    pub(super) phase: AtomicU32,
    /// Where the child failed ([`Stage`]) and the errno, written before it exits.
    pub(super) failed: [AtomicI32; 2],
    /// The step of the mount plan the init is making (its index), for naming a failed one.
    pub(super) mount_at: AtomicI32,
    /// The listener's descriptor in the child, during the handover.
    pub(super) listener_fd: AtomicI32,
    /// The host's answer to the listener handover: [`WAIT`], [`GO`] or [`ABORT`].
    pub(super) go: AtomicU32,
    /// The command's wait status as the init saw it, once `status_set` is 1.
    pub(super) status: AtomicI32,
    pub(super) status_set: AtomicU32,
    /// An init sharing the host's memory waits here for the host to write its id maps:
    /// [`WAIT`], then [`GO`], or [`ABORT`] with the errno in `maps_errno`.
    pub(super) maps: AtomicU32,
    pub(super) maps_errno: AtomicI32,
}

impl Shared {
    pub(super) fn new() -> Shared {
        Shared {
            phase: AtomicU32::new(RUNNING),
            failed: [AtomicI32::new(0), AtomicI32::new(0)],
            mount_at: AtomicI32::new(-1),
            listener_fd: AtomicI32::new(-1),
            go: AtomicU32::new(WAIT),
            status: AtomicI32::new(0),
            status_set: AtomicU32::new(0),
            maps: AtomicU32::new(WAIT),
            maps_errno: AtomicI32::new(0),
        }
    }
}

use crate::sys::raw;

/// Shorthand for a raw syscall with fewer than six arguments.
macro_rules! sys {
    ($nr:expr $(, $a:expr)*) => {{
        let mut args = [0usize; 6];
        let given: &[usize] = &[$($a as usize),*];
        args[..given.len()].copy_from_slice(given);
        raw::syscall($nr, args)
    }};
}

/// A raw syscall from the child: `secret` goes in the first argument the call does not use
/// (see [`crate::exec::spawner::SECRET_CALLS`], which must list the same positions).
macro_rules! ksys {
    ($c:expr; $nr:expr $(, $a:expr)*) => {{
        let mut args = [0usize; 6];
        let given: &[usize] = &[$($a as usize),*];
        args[..given.len()].copy_from_slice(given);
        args[given.len()] = $c.secret as usize;
        raw::syscall($nr, args)
    }};
}

/// Records the failure of `stage` and ends the child.
pub(super) unsafe fn fail(c: &Ctx, stage: Stage, rc: isize) -> ! {
    // SAFETY: `sh` outlives the child (the caller's contract).
    let sh = unsafe { &*c.sh };
    sh.failed[1].store((-rc) as i32, Ordering::Relaxed);
    sh.failed[0].store(stage as i32, Ordering::Release);
    // An init (or the program it starts, on the init's memory) tells the host itself: the
    // kernel clears the word at exit only for memory that others still use. A plain child
    // must not (the host would reuse the stack it still runs on).
    #[cfg(target_arch = "x86_64")]
    if !c.ns.is_null() {
        sh.phase.store(RELEASED, Ordering::Release);
        // SAFETY: a raw wake on the shared word.
        unsafe {
            ksys!(c; libc::SYS_futex, &sh.phase as *const AtomicU32, libc::FUTEX_WAKE, 1, 0);
        }
    }
    // SAFETY: raw exit_group.
    unsafe {
        ksys!(c; libc::SYS_exit_group, 127);
    }
    #[allow(clippy::empty_loop)]
    loop {}
}

pub(super) extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the parent's Ctx, alive and unchanged until this child execs or exits;
    // every pointer in it was prepared by `spawn` for these calls.
    unsafe {
        let c = &*(arg as *const Ctx);
        let sh = &*c.sh;
        // Default dispositions for every signal (handlers are the host's code); the mask
        // inherited from the parent blocks everything until just before exec.
        let dfl = [0u64; 4];
        for sig in 1..=64 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                let rc = ksys!(c; libc::SYS_rt_sigaction, sig, dfl.as_ptr(), 0, 8);
                if rc < 0 {
                    fail(c, Stage::Signals, rc);
                }
            }
        }
        let rc = ksys!(c; libc::SYS_setsid);
        if rc < 0 {
            fail(c, Stage::Session, rc);
        }
        // With the secret: where `clone3` is refused this child of a spawner thread joins
        // its cgroup itself, under the profile's filter (see `clone::clone3_works`).
        if c.join_cgroup >= 0 {
            let procs = ksys!(c; libc::SYS_openat, c.join_cgroup, c"cgroup.procs".as_ptr(),
                libc::O_WRONLY | libc::O_CLOEXEC, 0);
            if procs < 0 {
                fail(c, Stage::Cgroup, procs);
            }
            let rc = ksys!(c; libc::SYS_write, procs, b"0".as_ptr(), 1);
            if rc != 1 {
                fail(c, Stage::Cgroup, rc.min(-libc::EIO as isize));
            }
            ksys!(c; libc::SYS_close, procs);
        }
        // Before anything of the program runs, so that all its memory and processes count.
        // Through `tasks` (this thread; the child has no other): moving the calling thread
        // itself skips the global lock that a `cgroup.procs` write takes, whose grace period
        // cost milliseconds per request.
        for i in 0..c.njoin_v1 {
            let dir = *c.join_v1.add(i);
            let procs = ksys!(c; libc::SYS_openat, dir, c"tasks".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC, 0);
            if procs < 0 {
                fail(c, Stage::Cgroup, procs);
            }
            let rc = ksys!(c; libc::SYS_write, procs, b"0".as_ptr(), 1);
            if rc != 1 {
                fail(c, Stage::Cgroup, rc.min(-libc::EIO as isize));
            }
            ksys!(c; libc::SYS_close, procs);
        }
        if !c.cwd.is_null() {
            let rc = ksys!(c; libc::SYS_chdir, c.cwd);
            if rc < 0 {
                fail(c, Stage::Cwd, rc);
            }
        }
        // Landlock before the descriptors move: its ruleset is one of the host's (>= 3), which
        // the dup to descriptor 3 below could replace. A spawner's child has no_new_privs
        // from the spawner thread already.
        if c.has_filter || (c.landlock >= 0 && c.secret == 0) {
            let rc = sys!(libc::SYS_prctl, libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            if rc < 0 {
                fail(c, Stage::NoNewPrivs, rc);
            }
        }
        if c.landlock >= 0 {
            let rc = ksys!(c; libc::SYS_landlock_restrict_self, c.landlock, 0);
            if rc < 0 {
                fail(c, Stage::Landlock, rc);
            }
        }
        // The sources are all >= 3 (the parent made sure), so no dup clobbers another's source.
        for (target, src) in c.stdio.iter().enumerate() {
            let rc = ksys!(c; libc::SYS_dup3, *src, target, 0);
            if rc < 0 {
                fail(c, Stage::Stdio, rc);
            }
        }
        // Nothing else of the host's reaches the program: descriptors the host inherited or
        // opened without close-on-exec are closed at exec.
        let rc = ksys!(c; libc::SYS_close_range, 3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
        if rc < 0 {
            fail(c, Stage::Stdio, rc);
        }
        // The one exception: the preload's report pipe, as descriptor 3 without close-on-exec.
        if c.report >= 0 {
            let rc = ksys!(c; libc::SYS_dup3, c.report, 3, 0);
            if rc < 0 {
                fail(c, Stage::Stdio, rc);
            }
        }
        for i in 0..c.nlimits {
            let (res, lim) = &*c.limits.add(i);
            let rc = ksys!(c; libc::SYS_prlimit64, 0, *res, lim as *const libc::rlimit, 0);
            if rc < 0 {
                fail(c, Stage::Limits, rc);
            }
        }
        // In a user namespace the program would start with every capability there (as its
        // root when the host runs as root): mounts could be undone. It gets none.
        #[cfg(target_arch = "x86_64")]
        if !c.ns.is_null() {
            drop_capabilities(c);
        }
        // The listener the filter creates takes the lowest free descriptor, which must be
        // below RLIMIT_NOFILE: a host holding more descriptors than the request's limit (a busy
        // server) would make seccomp fail with EMFILE. Every descriptor above the program's
        // own is close-on-exec by now, so closing them here only does early what exec does.
        // (Under an init the program shares the init's table until exec; the init needs none
        // of its descriptors once the program runs and closes them all then.)
        if c.has_filter && c.listener {
            let first = if c.report >= 0 { 4 } else { 3 };
            let rc = ksys!(c; libc::SYS_close_range, first, u32::MAX, 0);
            if rc < 0 {
                fail(c, Stage::Filter, rc);
            }
        }
        if c.has_filter {
            // A single-threaded child: no TSYNC (which NEW_LISTENER would not allow anyway).
            let flags = if c.listener {
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
            } else {
                0
            };
            let rc = sys!(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &c.fprog as *const libc::sock_fprog
            );
            if rc < 0 {
                fail(c, Stage::Filter, rc);
            }
            // From here on the filter applies: only futex, close, rt_sigprocmask,
            // exit_group and the exempted execve, which `Sandbox::plan` checked are allowed.
            if c.listener {
                sh.listener_fd.store(rc as i32, Ordering::Relaxed);
                sh.phase.store(HANDOVER, Ordering::Release);
                // Not private: the host waits on this word as the kernel wakes it at exec.
                ksys!(c; libc::SYS_futex, &sh.phase as *const AtomicU32, libc::FUTEX_WAKE, 1, 0);
                let mut spins = 0;
                let answer = loop {
                    let g = sh.go.load(Ordering::Acquire);
                    if g != WAIT {
                        break g;
                    }
                    if spins < SPINS {
                        spins += 1;
                        std::hint::spin_loop();
                    } else {
                        // Not private: with namespaces the word is in a shared page.
                        sys!(
                            libc::SYS_futex,
                            &sh.go as *const AtomicU32,
                            libc::FUTEX_WAIT,
                            WAIT,
                            0
                        );
                    }
                };
                if answer != GO {
                    sys!(libc::SYS_exit_group, 127);
                }
                sys!(libc::SYS_close, rc);
            }
        }
        let empty = 0u64;
        ksys!(c; libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &empty as *const u64, 0, 8);
        let rc = ksys!(c; libc::SYS_execve, c.path, c.argv, c.envp);
        fail(c, Stage::Exec, rc)
    }
}

/// Drops every capability of the namespaced child (bounding set, then effective, permitted
/// and inheritable), failing it at [`Stage::Capabilities`].
///
/// # Safety
/// `c` is the child's context, as for [`fail`].
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn drop_capabilities(c: &Ctx) {
    // SAFETY: raw calls on locals.
    unsafe {
        for cap in 0..=c.cap_last {
            let rc = ksys!(c; libc::SYS_prctl, libc::PR_CAPBSET_DROP, cap, 0, 0);
            if rc < 0 {
                fail(c, Stage::Capabilities, rc);
            }
        }
        // _LINUX_CAPABILITY_VERSION_3, this process; effective, permitted, inheritable: none.
        let header = [0x2008_0522u32, 0];
        let data = [0u32; 6];
        let rc = ksys!(c; libc::SYS_capset, header.as_ptr(), data.as_ptr());
        if rc < 0 {
            fail(c, Stage::Capabilities, rc);
        }
    }
}

/// The child's stack, freed on drop.
#[derive(Debug)]
pub(super) struct Stack(pub(super) *mut c_void);

// SAFETY: a mapping owned by whoever holds the value; only its address is shared with the
// child that runs on it.
unsafe impl Send for Stack {}
// SAFETY: as above: `&Stack` only gives the address.
unsafe impl Sync for Stack {}

impl Stack {
    pub(super) fn new() -> std::io::Result<Stack> {
        // SAFETY: an anonymous private mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                STACK_SIZE + GUARD,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let stack = Stack(p);
        // The stack grows down: the guard page is at the low end.
        // SAFETY: the first page of the mapping we own.
        if unsafe { libc::mprotect(p, GUARD, libc::PROT_NONE) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stack)
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub(super) fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, 16-byte aligned (page-aligned size).
        unsafe { self.0.cast::<u8>().add(STACK_SIZE + GUARD).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping created in `new`; nobody uses it any more (see `spawn`).
        unsafe { libc::munmap(self.0, STACK_SIZE + GUARD) };
    }
}

/// A pipe whose two ends are close-on-exec.
pub(crate) fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into fds.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and belong to nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `fd` itself if it is above the standard streams, else a close-on-exec copy that is.
pub(crate) fn above_stdio(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    dup_above(fd.as_raw_fd(), 3)
}

/// A close-on-exec copy of `fd` numbered `min` or higher.
pub(crate) fn dup_above(fd: RawFd, min: RawFd) -> std::io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor (>= min) or -1.
    let n = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: n was just created and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}
