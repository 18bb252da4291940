//! This process and its children: credentials, `prctl`, signals, the user database, waiting and reaping.

use std::ffi::CStr;
use std::io;

/// The effective uid of this process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The running glibc's version.
#[cfg(target_env = "gnu")]
pub(crate) fn glibc_version() -> String {
    // SAFETY: gnu_get_libc_version returns a pointer to a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) };
    v.to_string_lossy().into_owned()
}

/// A `prctl` that takes and returns integers only; its result or the error.
pub(super) fn prctl_int(option: libc::c_int, arg: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: prctl with integer arguments only, for the options used in this module (they
    // read or set the calling process's own state).
    let rc = unsafe { libc::prctl(option, arg, 0, 0, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

/// This thread's seccomp mode (0 none, 1 strict, 2 filter).
pub(crate) fn seccomp_mode() -> io::Result<i32> {
    prctl_int(libc::PR_GET_SECCOMP, 0)
}

/// Whether no_new_privs is set on this thread (0 or 1).
pub(crate) fn no_new_privs() -> io::Result<i32> {
    prctl_int(libc::PR_GET_NO_NEW_PRIVS, 0)
}

/// The highest capability number this kernel knows: the last one `PR_CAPBSET_READ` accepts
/// (it answers EINVAL above it), found by bisection in six calls. Reading
/// `/proc/sys/kernel/cap_last_cap` instead (an open, a sysctl lookup, a read) was a visible
/// part of a one-shot run's own work; the answer is the same. `None` when even capability 0
/// is refused (no answer to trust).
pub(crate) fn cap_last() -> Option<i32> {
    let known = |cap: i32| prctl_int(libc::PR_CAPBSET_READ, cap as libc::c_ulong).is_ok();
    if !known(0) {
        return None;
    }
    // Invariant: `lo` is known, `hi` is not (capability numbers are below 64).
    let (mut lo, mut hi) = (0, 64);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if known(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

/// Makes this process non-dumpable: its /proc files become root's.
pub(crate) fn set_not_dumpable() -> io::Result<()> {
    prctl_int(libc::PR_SET_DUMPABLE, 0).map(drop)
}

/// Restores SIGPIPE's default disposition (the process ends when its reader goes away).
pub(crate) fn default_sigpipe() {
    // SAFETY: resetting a signal's disposition to its default has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Ends this process by signal `sig` as its default action would: the disposition reset to
/// the default, the signal unblocked and raised (a caller's shell then sees `128 + sig`, as
/// if the signal had never been caught). Returns only if the signal does not end a process.
pub(crate) fn die_of(sig: libc::c_int) {
    // SAFETY: resetting a disposition, unblocking one signal of this thread's mask and
    // raising it have no preconditions.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}

/// The user name of `uid` from the passwd database, `None` without an entry.
pub(crate) fn user_name(uid: u32) -> Option<String> {
    passwd_field(uid, |pw| pw.pw_name)
}

/// The home directory of `uid` from the passwd database, `None` without an entry.
pub(crate) fn home_dir(uid: u32) -> Option<std::path::PathBuf> {
    passwd_field(uid, |pw| pw.pw_dir).map(std::path::PathBuf::from)
}

/// One string field of `uid`'s passwd entry, chosen by `field`; `None` without an entry or
/// when the field is not UTF-8.
pub(super) fn passwd_field(
    uid: u32,
    field: fn(&libc::passwd) -> *mut libc::c_char,
) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: a zeroed passwd is a valid out-parameter.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes into pw and buf (of the given length) and sets out.
    let rc =
        unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out) };
    let ptr = field(&pw);
    if rc != 0 || out.is_null() || ptr.is_null() {
        return None;
    }
    // SAFETY: the field points into buf, NUL-terminated, valid while buf lives.
    let value = unsafe { CStr::from_ptr(ptr) };
    value.to_str().ok().map(str::to_string)
}

/// Installs `handler` for signal `sig` (SA_RESTART, empty mask); returns the previous action,
/// for [`restore_signal`].
pub(crate) fn catch_signal(
    sig: libc::c_int,
    handler: extern "C" fn(libc::c_int),
) -> io::Result<libc::sigaction> {
    // SAFETY: a zeroed sigaction is valid; we fill the handler and an empty mask.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler as libc::sighandler_t;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: zeroed is a valid out-parameter for the previous action.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: sigemptyset on a field of a local; sigaction reads `act`, writes `old`.
    let rc = unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(sig, &act, &mut old)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

/// Puts back an action [`catch_signal`] returned.
pub(crate) fn restore_signal(sig: libc::c_int, old: &libc::sigaction) {
    // SAFETY: `old` is an action sigaction gave us; nothing is written back.
    unsafe { libc::sigaction(sig, old, std::ptr::null_mut()) };
}

/// Registers `f` to run at normal process exit (`atexit`); an error only means it will not run.
pub(crate) fn at_exit(f: extern "C" fn()) {
    // SAFETY: registers a plain function with no arguments; it runs at most once, at exit.
    unsafe { libc::atexit(f) };
}

/// The running kernel's release (`uname -r`), from `uname(2)`: one call, where reading
/// `/proc/sys/kernel/osrelease` takes an open, a read through the sysctl layer and a close.
pub(crate) fn kernel_release() -> String {
    // SAFETY: a zeroed utsname is a valid out-parameter.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes NUL-terminated fields into u.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    // SAFETY: the kernel NUL-terminates each field within its array.
    let release = unsafe { CStr::from_ptr(u.release.as_ptr()) };
    release.to_string_lossy().into_owned()
}

/// Makes this process a child subreaper: orphaned descendants are re-parented to it.
pub(crate) fn set_child_subreaper() -> io::Result<()> {
    prctl_int(libc::PR_SET_CHILD_SUBREAPER, 1).map(drop)
}

/// Whether this process is a child subreaper.
#[cfg(test)]
pub(crate) fn is_child_subreaper() -> bool {
    let mut v: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer.
    let rc = unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut v as *mut libc::c_int,
            0,
            0,
            0,
        )
    };
    rc == 0 && v != 0
}

/// Sends `sig` to process `pid` (positive: that process only; kill with a thread id signals
/// its whole thread group).
pub(crate) fn kill(pid: i32, sig: libc::c_int) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: kill with a positive pid signals exactly that process; no memory is involved.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `waitpid(pid, flags)` for one child: the pid it returned (0: still running with
/// `WNOHANG`) and the status.
pub(crate) fn waitpid(pid: i32, flags: libc::c_int) -> io::Result<(i32, libc::c_int)> {
    let mut status = 0;
    // SAFETY: waitpid writes the status into a local.
    let rc = unsafe { libc::waitpid(pid, &mut status, flags) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((rc, status))
}

/// Waits for our child `pid` to exit and reaps it (`wait4`): its wait status, and the
/// 512-byte blocks it and every descendant it (or they) waited for sent toward storage
/// (`ru_oublock`: the pages they dirtied in the page cache, and direct writes).
pub(crate) fn wait4(pid: i32) -> io::Result<(libc::c_int, u64)> {
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 writes the status and the usage into locals.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc >= 0 {
            return Ok((status, usage.ru_oublock.max(0) as u64));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Whether any child of this process is a zombie, without reaping it (`waitid(P_ALL,
/// WNOHANG | WNOWAIT)`).
pub(crate) fn has_zombie_child() -> bool {
    // SAFETY: a zeroed siginfo is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid writes into info; P_ALL with WNOHANG|WNOWAIT does not reap anything.
    let rc = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid after a successful waitid (0 when nothing is waitable).
    rc == 0 && unsafe { info.si_pid() } != 0
}

/// A child of a test: forks, runs `f` in the child and ends it with `f`'s result as its exit
/// status (no exit handlers run); returns the child's wait status.
///
/// The child of a multi-threaded process may only make async-signal-safe calls until it
/// exits: `f` must keep to those (and to locks no other thread can hold).
#[cfg(test)]
pub(crate) fn in_forked_child(f: fn() -> i32) -> io::Result<libc::c_int> {
    // SAFETY: the child runs only `f`, which the caller keeps to async-signal-safe calls,
    // then _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let code = f();
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    waitpid(pid, 0).map(|(_, status)| status)
}

/// Lets this process's children be reaped by the kernel as they exit (`SIGCHLD` at its
/// default with `SA_NOCLDWAIT`), or not again (`on` false). Neither survives an `execve`.
pub(crate) fn reap_children_at_exit(on: bool) -> io::Result<()> {
    // SAFETY: a zeroed sigaction with SIG_DFL is valid; sigaction reads it.
    let rc = unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = libc::SIG_DFL;
        act.sa_flags = if on { libc::SA_NOCLDWAIT } else { 0 };
        libc::sigaction(libc::SIGCHLD, &act, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether our child `pid` has exited, without reaping it (`waitid(P_PID, WNOHANG | WNOWAIT)`).
pub(crate) fn child_has_exited(pid: i32) -> bool {
    // SAFETY: a zeroed siginfo is a valid out-parameter.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on one pid with WNOWAIT writes into info and reaps nothing.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid after a successful waitid.
    rc == 0 && unsafe { info.si_pid() } == pid
}

/// Makes this process the leader of a new session and process group, without a controlling
/// terminal (`setsid`): a daemon holds nobody's terminal and gets no job-control signals.
pub(crate) fn setsid() -> io::Result<()> {
    // SAFETY: setsid takes no arguments and touches no memory.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_last_capability_is_the_kernels() {
        let procfs: i32 = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(super::cap_last(), Some(procfs));
    }

    #[test]
    fn the_kernel_release_is_the_one_procfs_gives() {
        let procfs = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(super::kernel_release(), procfs.trim());
    }
}
