//! The host's system-call boundary: small safe wrappers around the libc calls the rest of the
//! crate needs, so that `unsafe` lives here, each block short and with its `// SAFETY:` line.
//!
//! Not here, and holding their own blocks: the spawn path (`exec/spawn.rs`,
//! `exec/spawn/init.rs`, `exec/spawner.rs`, `exec/clone.rs`). Much of that code runs in a
//! cloned child between `clone` and `exec`, where only async-signal-safe, allocation-free
//! calls are allowed, or hands raw pointers to such a child; xtask's `unsafe_boundary` test
//! lists each file with its reason.

pub(crate) mod beneath;
pub(crate) mod emulate;
pub(crate) mod raw;

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `path` as a C string; `None` when it holds a NUL byte (no such file can exist).
fn c_path(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

/// The effective uid of this process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The process's file-mode creation mask (set and restored at once; not atomic with respect to
/// other threads creating files in between).
pub(crate) fn current_umask() -> u32 {
    // SAFETY: umask only sets and returns the process's mask; no memory is involved.
    let mask = unsafe { libc::umask(0o022) };
    // SAFETY: as above; this restores the mask read.
    unsafe { libc::umask(mask) };
    mask
}

/// Sets the file-mode creation mask; returns the previous one.
pub(crate) fn set_umask(mask: u32) -> u32 {
    // SAFETY: umask only sets and returns the process's mask; no memory is involved.
    unsafe { libc::umask(mask) }
}

/// Whether this process may write `path` (`faccessat(W_OK, AT_EACCESS)`): its permission
/// bits, its mount's read-only flag and, as root, only the latter.
pub(crate) fn may_write(path: &Path) -> bool {
    let Some(c) = c_path(path) else { return false };
    // SAFETY: `c` is a NUL-terminated path; faccessat only reads it.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
}

/// Whether this process's credentials may read `path` (`faccessat(R_OK, AT_EACCESS)`): its
/// permission bits (root passes). Security modules that decide at `open` (Landlock) are not
/// asked: that difference is what `landlock::refused_around` looks for.
pub(crate) fn may_read(path: &Path) -> bool {
    let Some(c) = c_path(path) else { return false };
    // SAFETY: `c` is a NUL-terminated path; faccessat only reads it.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::R_OK, libc::AT_EACCESS) == 0 }
}

/// Whether this process may execute `path` (`faccessat(X_OK, AT_EACCESS)`): root passes only
/// when some execute bit is set, as `execve` requires.
pub(crate) fn executable(path: &Path) -> bool {
    let Some(c) = c_path(path) else { return false };
    // SAFETY: `c` is a NUL-terminated path; faccessat only reads it.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::X_OK, libc::AT_EACCESS) == 0 }
}

/// Whether `path` carries the extended attribute `name` (a non-empty value).
pub(crate) fn has_xattr(path: &Path, name: &CStr) -> bool {
    let Some(c) = c_path(path) else { return false };
    // SAFETY: both strings are NUL-terminated; a null buffer of size 0 asks only for the size.
    unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) > 0 }
}

/// Whether `path` is on a mount with the `noexec` flag.
pub(crate) fn on_noexec_mount(path: &Path) -> io::Result<bool> {
    let c = c_path(path).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: an all-zero statvfs is a valid value (plain integers).
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_flag & libc::ST_NOEXEC != 0)
}

/// A new pipe (read end, write end) with `flags` (`O_CLOEXEC`, `O_NONBLOCK`) on both ends.
pub(crate) fn pipe2(flags: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets the file status flags of `fd` (`fcntl(F_SETFL)`), e.g. 0 to make it blocking.
pub(crate) fn set_status_flags(fd: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl with integer arguments on a descriptor the caller keeps open.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Points descriptor 1 at standard error and returns a close-on-exec copy of the original
/// standard output (numbered 3 or above).
pub(crate) fn stdout_to_stderr() -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC with integer arguments returns a new descriptor or -1.
    let saved = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
    if saved < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `saved` was just created and belongs to nobody else.
    let saved = unsafe { OwnedFd::from_raw_fd(saved) };
    // SAFETY: dup2 on the process's own standard descriptors; no memory is involved.
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(saved)
}

/// The soft limit of resource `res` (`RLIMIT_*`), `None` when it cannot be read.
pub(crate) fn soft_rlimit(res: Resource) -> Option<u64> {
    rlimit(res).ok().map(|l| l.rlim_cur)
}

/// The Landlock ABI version the kernel offers, or the errno of the probe.
pub(crate) fn landlock_abi() -> Result<i64, i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attribute, size 0 and the VERSION flag the call only returns the ABI
    // version; it reads and writes no memory and creates no descriptor.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOSYS))
    } else {
        Ok(rc)
    }
}

/// Whether `seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, ...)` is
/// accepted: `Ok` when it is, else the errno that refuses the flag (EINVAL: a kernel before
/// 5.0, or a container filter or runtime that refuses the flag, as gVisor does).
pub(crate) fn seccomp_listener_probe() -> Result<(), i32> {
    // SAFETY: a NULL program: the kernel checks the flags, then fails copying the program
    // with EFAULT before it installs anything or creates a descriptor. Nothing is read or
    // written in this process's memory.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            std::ptr::null::<libc::c_void>(),
        )
    };
    let errno = if rc < 0 {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    } else {
        // Cannot happen with a NULL program; treated as "no" rather than trusted.
        libc::EINVAL
    };
    if errno != libc::EFAULT {
        return Err(errno);
    }
    // The flag is accepted, but the kernel refuses a second listener in one filter chain
    // (EBUSY) only when it attaches a real filter, after the copy the NULL program fails. A
    // process already under a filter (a sandbox run inside another one) may have such a
    // listener above it: a child installs an allow-all filter with the flag and reports.
    // Not done otherwise: it costs a fork, and without a filter there is no listener above.
    if seccomp_mode().map_or(true, |m| m != 0) {
        return seccomp_listener_child_probe();
    }
    Ok(())
}

/// The errno of installing an allow-all filter with `SECCOMP_FILTER_FLAG_NEW_LISTENER` in a
/// forked child (the filter dies with it); `Ok` when it was installed.
fn seccomp_listener_child_probe() -> Result<(), i32> {
    let allow = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: allow.as_ptr().cast_mut(),
    };
    // SAFETY: the child only makes async-signal-safe calls (prctl, seccomp, _exit) on memory
    // prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(libc::EAGAIN);
    }
    if pid == 0 {
        // SAFETY: in the child: raw calls on `prog`, then _exit; the errno is read first.
        unsafe {
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            let rc = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &prog as *const libc::sock_fprog,
            );
            let errno = if rc < 0 { *libc::__errno_location() } else { 0 };
            libc::_exit(errno.min(255));
        }
    }
    let mut status = 0;
    // SAFETY: reaps the child we forked; status is a valid int.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(()),
        Some(errno) => Err(errno),
        None => Err(libc::EINVAL),
    }
}

/// The running glibc's version.
#[cfg(target_env = "gnu")]
pub(crate) fn glibc_version() -> String {
    // SAFETY: gnu_get_libc_version returns a pointer to a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(libc::gnu_get_libc_version()) };
    v.to_string_lossy().into_owned()
}

/// A `prctl` that takes and returns integers only; its result or the error.
fn prctl_int(option: libc::c_int, arg: libc::c_ulong) -> io::Result<libc::c_int> {
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
fn passwd_field(uid: u32, field: fn(&libc::passwd) -> *mut libc::c_char) -> Option<String> {
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

/// Shuts a socket down both ways: a thread blocked in `accept` or `read` on it returns.
pub(crate) fn shutdown(fd: RawFd) {
    // SAFETY: shutdown(2) takes integers only; on a descriptor that is not a socket it fails.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

/// Waits until one of `fds` reports something (no timeout); the error is the poll's (EINTR
/// when a signal arrived).
pub(crate) fn poll(fds: &mut [libc::pollfd]) -> io::Result<()> {
    // SAFETY: fds is a valid, exclusively borrowed array of pollfd of the given length.
    if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the process behind `pidfd` has exited (its pidfd is readable then); looked at
/// without waiting.
pub(crate) fn pidfd_exited(pidfd: BorrowedFd<'_>) -> bool {
    let mut fds = [libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: fds is a valid, exclusively borrowed array of one pollfd; timeout 0 never blocks.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) };
    n != 0
}

/// The credentials of the peer of a connected unix socket, as the kernel recorded them at
/// `connect`.
pub(crate) fn peer_cred(socket: BorrowedFd<'_>) -> io::Result<libc::ucred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the local `cred`.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred)
}

/// A pidfd for the process that connected `socket` (`SO_PEERPIDFD`, Linux 6.5), so that what
/// is read about it under `/proc` can be checked to still be about that process.
pub(crate) fn peer_pidfd(socket: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    const SO_PEERPIDFD: libc::c_int = 77;
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the local `fd`.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&mut fd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 || fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just installed `fd` for this process; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new eventfd (counter 0) with `flags` (`EFD_CLOEXEC`, `EFD_NONBLOCK`).
pub(crate) fn eventfd(flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes integers and returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just created and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to the eventfd `fd`, keeping the thread's errno: async-signal-safe, so a signal
/// handler may call it. A full counter or a closed descriptor is ignored.
pub(crate) fn eventfd_add_one(fd: RawFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: __errno_location returns this thread's errno; write is async-signal-safe and
    // reads 8 bytes from a local; errno is restored so the interrupted code sees its own.
    unsafe {
        let errno = *libc::__errno_location();
        libc::write(fd, one.as_ptr().cast(), 8);
        *libc::__errno_location() = errno;
    }
}

/// Resets the eventfd `fd`'s counter (a non-blocking read of its 8 bytes).
pub(crate) fn eventfd_drain(fd: BorrowedFd<'_>) {
    let mut n = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a local.
    unsafe { libc::read(fd.as_raw_fd(), n.as_mut_ptr().cast(), 8) };
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

/// `SECCOMP_IOCTL_NOTIF_SET_FLAGS` (Linux 6.6).
const SECCOMP_IOCTL_NOTIF_SET_FLAGS: libc::c_ulong = 0x4008_2104;
/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`: the kernel switches straight to the listener's reader
/// and back, which roughly halves the cost of a notified call.
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;

/// Asks the kernel to wake this seccomp listener's reader on the notifying CPU; false where the
/// kernel (before 6.6) does not offer it, which only means a slower wake-up.
pub(crate) fn notif_sync_wake_up(listener: BorrowedFd<'_>) -> bool {
    // SAFETY: an ioctl with an integer argument on a seccomp listener the caller owns.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            // glibc and musl type the request differently.
            SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        ) == 0
    }
}

/// Receives the next notification of a seccomp listener.
pub(crate) fn notif_recv(listener: BorrowedFd<'_>) -> io::Result<libc::seccomp_notif> {
    // SAFETY: a zeroed seccomp_notif is the required input of NOTIF_RECV.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: NOTIF_RECV writes one notification into `notif`.
    if unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut notif,
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(notif)
}

/// Answers notification `id`: the call runs as if the filter had allowed it.
pub(crate) fn notif_continue(listener: BorrowedFd<'_>, id: u64) -> io::Result<()> {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
    };
    notif_send(listener, &resp)
}

/// Whether notification `id` of a seccomp listener still stands (its thread waits).
pub(crate) fn notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: NOTIF_ID_VALID reads the id we pass.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id,
        ) == 0
    }
}

/// A non-blocking netlink datagram socket of `protocol`, bound to multicast `groups`.
pub(crate) fn netlink_bound(protocol: libc::c_int, groups: u32) -> io::Result<OwnedFd> {
    // SAFETY: socket() returns a new descriptor or -1.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            protocol,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just created and belongs to nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero sockaddr_nl is valid; the fields are set below.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = groups;
    // SAFETY: bind reads a sockaddr_nl of the size given.
    let rc = unsafe {
        libc::bind(
            sock.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sock)
}

/// Sends one datagram on a connected or netlink socket; the bytes sent.
pub(crate) fn send(sock: BorrowedFd<'_>, data: &[u8]) -> io::Result<usize> {
    // SAFETY: send reads data.len() bytes of data.
    let n = unsafe { libc::send(sock.as_raw_fd(), data.as_ptr().cast(), data.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Receives one datagram without waiting; the bytes received.
pub(crate) fn recv_now(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: recv writes at most buf.len() bytes into buf.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Whether a child can `unshare(flags)`: forks, tries, exits with the errno. The one probe of
/// namespaces (the isolation layer's, the network layer's, `sandbox check`'s).
pub(crate) fn unshare_probe(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: the child only makes async-signal-safe calls (unshare, _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: in the child: unshare and _exit only; the errno is read before _exit.
        unsafe {
            let rc = libc::unshare(flags);
            let errno = if rc == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            libc::_exit(errno.min(255));
        }
    }
    let mut status = 0;
    // SAFETY: reaps the child we forked; status is a valid int.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(()),
        Some(errno) => Err(io::Error::from_raw_os_error(errno)),
        None => Err(io::Error::other("the probe died")),
    }
}

/// Whether this process may take a descriptor of another process (`pidfd_open`, then
/// `pidfd_getfd`): forks, and the child takes one of its own through its own pidfd. In a
/// child, because a filter around this process (a container's profile, a sandbox around this
/// one) may answer either call by killing the caller.
pub(crate) fn take_fd_probe() -> bool {
    // SAFETY: the child only makes raw, async-signal-safe calls (getpid, pidfd_open,
    // pidfd_getfd, _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return false;
    }
    if pid == 0 {
        // SAFETY: in the child: raw calls and _exit only.
        unsafe {
            let me = libc::getpid();
            let pidfd = libc::syscall(libc::SYS_pidfd_open, me, 0);
            if pidfd < 0 {
                libc::_exit(1);
            }
            let copy = libc::syscall(libc::SYS_pidfd_getfd, pidfd, pidfd, 0);
            libc::_exit(if copy < 0 { 1 } else { 0 });
        }
    }
    let mut status = 0;
    // SAFETY: reaps the child we forked; status is a valid int.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Where [`namespace_probe`] found the namespaces refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProbeStage {
    /// The clone with the namespace flags.
    Create,
    /// Writing the new user namespace's id maps.
    IdMap,
    /// Making the new mount namespace's mounts private.
    Private,
    /// Mounting a fresh `/proc` in the new PID and mount namespaces.
    Proc,
}

/// Whether a child can be cloned into new namespaces (`flags`, which include a user and a
/// mount namespace) by the call the engine uses (`clone3`, or `clone` where that is refused),
/// map its ids and mount a fresh `/proc` there, as the namespaces' init does: the clone alone
/// succeeds in a container whose `/proc` has paths mounted over it, where the kernel refuses a
/// fresh one to a user namespace. The child is a copy of this process (like `fork`), which
/// makes raw calls only and reports the first refusal through a pipe.
pub(crate) fn namespace_probe(flags: libc::c_int) -> Result<(), (ProbeStage, io::Error)> {
    let create = |e: io::Error| (ProbeStage::Create, e);
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let uid_map = format!("{uid} {uid} 1");
    let gid_map = format!("{gid} {gid} 1");
    let (rd, wr) = pipe2(libc::O_CLOEXEC).map_err(create)?;
    // SAFETY: a fork-like clone (no stack, no shared memory): the child continues here on a
    // copy of this stack.
    let legacy = || unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0,
            0,
            0,
            0,
        )
    };
    #[cfg(target_arch = "x86_64")]
    let pid = if crate::exec::clone::clone3_works() {
        use crate::exec::clone::CloneArgs;
        let args = CloneArgs {
            flags: flags as u64,
            exit_signal: libc::SIGCHLD as u64,
            ..Default::default()
        };
        // SAFETY: a fork-like clone3, as above.
        unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        }
    } else {
        legacy()
    };
    #[cfg(not(target_arch = "x86_64"))]
    let pid = legacy();
    if pid < 0 {
        return Err(create(io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: in the child, a copy of this process: raw calls on memory prepared above,
        // then _exit; nothing that allocates or locks.
        unsafe {
            let report = |stage: u8| -> ! {
                let errno = *libc::__errno_location();
                let msg = [stage, errno.clamp(0, 255) as u8];
                libc::write(wr.as_raw_fd(), msg.as_ptr().cast(), 2);
                libc::_exit(0)
            };
            let write = |path: &std::ffi::CStr, text: &str| -> bool {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return false;
                }
                let n = libc::write(fd, text.as_ptr().cast(), text.len());
                libc::close(fd);
                n == text.len() as isize
            };
            // A non-dumpable copy's /proc files are root's: dumpable to write its own maps,
            // as the init does.
            libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
            if !write(c"/proc/self/setgroups", "deny")
                || !write(c"/proc/self/gid_map", &gid_map)
                || !write(c"/proc/self/uid_map", &uid_map)
            {
                report(ProbeStage::IdMap as u8 + 1);
            }
            let none = std::ptr::null::<libc::c_char>();
            if libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                report(ProbeStage::Private as u8 + 1);
            }
            if libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) != 0
            {
                report(ProbeStage::Proc as u8 + 1);
            }
            libc::_exit(0)
        }
    }
    drop(wr);
    let mut msg = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        // SAFETY: reads into the rest of `msg`.
        let n = unsafe { libc::read(rd.as_raw_fd(), msg[got..].as_mut_ptr().cast(), 2 - got) };
        if n > 0 {
            got += n as usize;
        } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        } else {
            break;
        }
    }
    let mut status = 0;
    // SAFETY: reaps the child we cloned; status is a valid int.
    unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
    if got < 2 {
        return if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            Ok(())
        } else {
            Err(create(io::Error::other("the probe died")))
        };
    }
    let stage = match msg[0] {
        1 => ProbeStage::Create,
        2 => ProbeStage::IdMap,
        3 => ProbeStage::Private,
        _ => ProbeStage::Proc,
    };
    Err((stage, io::Error::from_raw_os_error(msg[1] as i32)))
}

/// Registers `f` to run at normal process exit (`atexit`); an error only means it will not run.
pub(crate) fn at_exit(f: extern "C" fn()) {
    // SAFETY: registers a plain function with no arguments; it runs at most once, at exit.
    unsafe { libc::atexit(f) };
}

/// A resource number (`RLIMIT_*`) as this C library's `getrlimit` takes it: glibc has a type
/// of its own, musl a plain `int`.
#[cfg(target_env = "gnu")]
pub(crate) type Resource = libc::__rlimit_resource_t;
/// A resource number (`RLIMIT_*`) as this C library's `getrlimit` takes it.
#[cfg(not(target_env = "gnu"))]
pub(crate) type Resource = libc::c_int;

/// The soft and hard limits of resource `res` (`RLIMIT_*`).
pub(crate) fn rlimit(res: Resource) -> io::Result<libc::rlimit> {
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(res, &mut cur) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cur)
}

/// Raises this process's soft descriptor limit to at least `want` (as far as the hard limit
/// allows): the host's own work (placeholder locks, the view's tree copies, pipes) must not
/// fail under a caller's low limit, which the program still gets (it is read before, and
/// set in the child).
pub(crate) fn raise_soft_nofile(want: u64) {
    let Ok(cur) = rlimit(libc::RLIMIT_NOFILE) else {
        return;
    };
    if cur.rlim_cur >= want {
        return;
    }
    let new = libc::rlimit {
        rlim_cur: want.min(cur.rlim_max),
        rlim_max: cur.rlim_max,
    };
    // SAFETY: setrlimit reads the struct we pass; a failure leaves the limit as it was.
    unsafe {
        libc::setrlimit(libc::RLIMIT_NOFILE, &new);
    }
}

/// `flock(op)` on `fd` (`LOCK_EX`, `LOCK_SH`, `LOCK_UN`, with `LOCK_NB`).
pub(crate) fn flock(fd: BorrowedFd<'_>, op: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on a descriptor the caller owns; no memory is involved.
    if unsafe { libc::flock(fd.as_raw_fd(), op) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
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

/// The type (`f_type`, a `*_SUPER_MAGIC`) of the file system holding `path`.
pub(crate) fn fs_type(path: &CStr) -> io::Result<i64> {
    // SAFETY: a zeroed statfs is a valid out-parameter.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: statfs reads a NUL-terminated path and writes into st.
    if unsafe { libc::statfs(path.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64)
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

/// A `SOCK_SEQPACKET` pair, close-on-exec.
pub(crate) fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into a local array.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just created and belong to nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A copy (close-on-exec) of descriptor `fd` of the process behind `pidfd`.
pub(crate) fn pidfd_getfd(pidfd: i32, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd returns a new close-on-exec descriptor or -1.
    let n = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: n was just created and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(n as i32) })
}

/// The descriptors one message of [`send_with_fds`] carries at most: what its 64-byte control
/// buffer holds after the 16-byte header.
pub(crate) const MAX_SENT_FDS: usize = 12;

/// Sends `body` as one message on `sock` with the descriptors `fds` (`SCM_RIGHTS`, at most
/// [`MAX_SENT_FDS`]), retrying on `EINTR`; `MSG_NOSIGNAL`: a gone peer is an error, not SIGPIPE.
pub(crate) fn send_with_fds(sock: BorrowedFd<'_>, body: &[u8], fds: &[RawFd]) -> io::Result<()> {
    if fds.len() > MAX_SENT_FDS {
        return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    let mut iov = libc::iovec {
        iov_base: body.as_ptr() as *mut libc::c_void,
        iov_len: body.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; the fields are set below.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    if !fds.is_empty() {
        let bytes = std::mem::size_of_val(fds) as u32;
        // SAFETY: CMSG_SPACE is arithmetic.
        hdr.msg_controllen = unsafe { libc::CMSG_SPACE(bytes) } as _;
        hdr.msg_control = cbuf.as_mut_ptr().cast();
        // SAFETY: the control buffer (64 bytes) holds one header and MAX_FDS descriptors;
        // CMSG_FIRSTHDR points into it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&hdr);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(bytes) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(c).cast::<RawFd>(),
                fds.len(),
            );
        }
    }
    loop {
        // SAFETY: sendmsg reads the header, the body and the control buffer, all alive.
        let rc = unsafe { libc::sendmsg(sock.as_raw_fd(), &hdr, libc::MSG_NOSIGNAL) };
        if rc >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives one message on `sock` into `buf` with the descriptors it carries (close-on-exec),
/// retrying on `EINTR`: the length, the descriptors and the message flags (`MSG_TRUNC`...).
pub(crate) fn recv_with_fds(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
) -> io::Result<(usize, Vec<OwnedFd>, i32)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; the fields are set below.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = cbuf.as_mut_ptr().cast();
    hdr.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    let n = loop {
        // SAFETY: recvmsg writes into the buffers the header names, all alive.
        let rc = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut hdr, libc::MSG_CMSG_CLOEXEC) };
        if rc >= 0 {
            break rc as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: walks the control messages the kernel wrote into `cbuf`; each SCM_RIGHTS entry
    // holds descriptors now ours.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let p = libc::CMSG_DATA(c).cast::<RawFd>();
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(p.add(i).read_unaligned()));
                }
            }
            c = libc::CMSG_NXTHDR(&hdr, c);
        }
    }
    Ok((n, fds, hdr.msg_flags))
}

/// `path` opened with `O_PATH` (close-on-exec; `O_NOFOLLOW` unless `follow`): a handle that
/// names the inode without opening the file itself. Not through `std::fs::OpenOptions`: std
/// masks custom flags with `O_ACCMODE`, which musl defines as `3 | O_PATH`, so on the static
/// build `O_PATH` was silently dropped and every "path handle" was a real read open (a FIFO
/// blocked the run, `/dev/ptmx` allocated a terminal, an unreadable directory failed).
pub(crate) fn open_path(path: &Path, follow: bool) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut flags = libc::O_PATH | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    // SAFETY: open with a NUL-terminated path; the flags take no mode argument.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `name` in directory `dir` for reading (close-on-exec).
pub(crate) fn open_in(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<std::fs::File> {
    // SAFETY: openat on a descriptor the caller owns with a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// `(st_dev, st_ino)` of `name` in `dir`, a symlink itself rather than its target
/// (`fstatat` with `AT_SYMLINK_NOFOLLOW`): what a removal checks right before `unlinkat`.
pub(crate) fn identity_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<(u64, u64)> {
    beneath::stat_at(dir, name).map(|st| (st.dev, st.ino))
}

/// Removes `name` from `dir` (`unlinkat`; an empty directory when `directory`).
pub(crate) fn unlink_at(dir: BorrowedFd<'_>, name: &CStr, directory: bool) -> io::Result<()> {
    let flags = if directory { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: unlinkat on a descriptor the caller owns with a NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
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

/// Polls one descriptor for `events`, waiting at most `timeout_ms` (0: not at all); the
/// events it reports (empty when the time ran out).
pub(crate) fn poll_one(
    fd: BorrowedFd<'_>,
    events: libc::c_short,
    timeout_ms: libc::c_int,
) -> io::Result<libc::c_short> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: poll reads and writes the one pollfd we pass.
    if unsafe { libc::poll(&mut p, 1, timeout_ms) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(p.revents)
}

/// A pidfd for `pid` (`pidfd_open`; `flags` may hold `PIDFD_THREAD` for any thread).
pub(crate) fn pidfd_open(pid: i32, flags: libc::c_uint) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open returns a new descriptor or -1; no memory is involved.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Answers a seccomp notification with `resp`.
pub(crate) fn notif_send(
    listener: BorrowedFd<'_>,
    resp: &libc::seccomp_notif_resp,
) -> io::Result<()> {
    // SAFETY: NOTIF_SEND reads the response we pass.
    if unsafe { libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, resp) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Answers seccomp notification `id` with the error `errno` (positive), as the call's
/// failure; a listener that has gone (the job ended) is not an error of the host's.
pub(crate) fn notif_fail(listener: BorrowedFd<'_>, id: u64, errno: i32) {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: -errno,
        flags: 0,
    };
    let _ = notif_send(listener, &resp);
}

/// Answers seccomp notification `id` with `result`: 0, or the call's failure with its errno
/// (EIO where it has none).
pub(crate) fn notif_result(listener: BorrowedFd<'_>, id: u64, result: io::Result<()>) {
    notif_fail(
        listener,
        id,
        result
            .err()
            .map_or(0, |e| e.raw_os_error().unwrap_or(libc::EIO)),
    );
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

/// Waits until one of `fds` reports something or `timeout_ms` passes (-1: no limit); how many
/// descriptors report (0: the time ran out).
pub(crate) fn poll_for(fds: &mut [libc::pollfd], timeout_ms: libc::c_int) -> io::Result<usize> {
    // SAFETY: fds is a valid, exclusively borrowed array of pollfd of the given length.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Adds `O_NONBLOCK` to the file status flags of `fd`.
pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl(F_GETFL) on a descriptor the caller owns; no memory is involved.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    set_status_flags(fd, flags | libc::O_NONBLOCK)
}

/// Sends `sig` to the process of `pidfd` (`pidfd_send_signal`, no siginfo): no pid reuse can
/// redirect it.
pub(crate) fn pidfd_signal(pidfd: BorrowedFd<'_>, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: pidfd_send_signal on a pidfd the caller owns, with a null siginfo.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `struct pidfd_info` as Linux 6.15 defines it (`PIDFD_INFO_SIZE_VER0`, 64 bytes): the
/// fields up to the exit status; a later kernel accepts it as is.
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    ids: [u32; 11],
    exit_code: i32,
}

/// `PIDFD_GET_INFO`: `_IOWR(0xFF, 11, struct pidfd_info)` with the 64-byte struct.
const PIDFD_GET_INFO: libc::c_ulong = 0xC040_FF0B;
/// `PIDFD_INFO_EXIT`: ask for (and, in the answer, have) the exit status of a reaped process.
const PIDFD_INFO_EXIT: u64 = 1 << 3;

/// The wait status of the process behind `pidfd` once it has been reaped (`PIDFD_GET_INFO`
/// with `PIDFD_INFO_EXIT`, Linux 6.15): `Ok(None)` while it has not been; an error where the
/// kernel does not offer it.
pub(crate) fn pidfd_exit_status(pidfd: BorrowedFd<'_>) -> io::Result<Option<i32>> {
    let info = pidfd_info(pidfd, PIDFD_INFO_EXIT)?;
    Ok((info.mask & PIDFD_INFO_EXIT != 0).then_some(info.exit_code))
}

/// `PIDFD_GET_INFO` for `mask` (the kernel answers what it has of it, and the pid always).
fn pidfd_info(pidfd: BorrowedFd<'_>, mask: u64) -> io::Result<PidfdInfo> {
    let mut info = PidfdInfo {
        mask,
        ..PidfdInfo::default()
    };
    // SAFETY: the ioctl writes at most the 64 bytes its request number names into `info`.
    let rc = unsafe {
        libc::ioctl(
            pidfd.as_raw_fd(),
            // glibc and musl type the request differently.
            PIDFD_GET_INFO as _,
            &mut info as *mut PidfdInfo,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// The pid, in this process's PID namespace, of the process behind `pidfd` (`PIDFD_GET_INFO`,
/// Linux 6.13): one call where reading `/proc/self/fdinfo` costs an open, a read and a
/// close. An error where the kernel does not offer it or the process is gone.
pub(crate) fn pidfd_pid(pidfd: BorrowedFd<'_>) -> io::Result<i32> {
    let info = pidfd_info(pidfd, 0)?;
    // PIDFD_INFO_PID (bit 0) is always answered; the pid is the first of the ids.
    match (info.mask & 1, info.ids[0] as i32) {
        (1, pid) if pid > 0 => Ok(pid),
        _ => Err(io::Error::from_raw_os_error(libc::ESRCH)),
    }
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

/// The `sandbox` binary's global allocator: small allocations are carved from one arena of
/// [`ARENA_SIZE`] bytes mapped on first use, and never freed or reused; larger ones, and every
/// one once the arena is used up, go to the system allocator.
///
/// Why: the shipped binary links musl, whose allocator unmaps memory as soon as a group of
/// small blocks is free. A one-shot `sandbox run`'s small allocations (argument parsing, the
/// profile's policy, its filter) cost about sixty `mmap` and forty `munmap` calls, each
/// `munmap` a page-table walk and, once the host has threads, a TLB flush on the other CPUs:
/// 0.34-0.55 ms of a run's CPU time (docs/benchmarks.md). The arena's cost is one mapping.
/// Its memory is bounded by its size, so a long-lived `sandbox serve` keeps flat memory: the
/// arena fills during its first requests, after which it allocates as before.
pub struct Arena;

/// The arena's size: larger than a one-shot run's small allocations (about 290 KiB under
/// `minimal` or `shell`, read from `ARENA_USED` at exit with gdb), smaller than a huge page
/// (so no transparent huge page backs it, whose first touch would clear 2 MiB).
pub const ARENA_SIZE: usize = 1 << 20;
/// Allocations above this size go to the system allocator (musl maps those by themselves).
const ARENA_MAX_ALLOC: usize = 64 * 1024;
/// The arena's address: 0 before it is mapped, 1 when mapping it failed (the system
/// allocator then serves everything).
static ARENA_BASE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Bytes of the arena handed out (the offset of its free part).
static ARENA_USED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Arena {
    /// The arena's address, mapped on first use; `None` when it cannot be.
    fn base() -> Option<usize> {
        use std::sync::atomic::Ordering;
        match ARENA_BASE.load(Ordering::Acquire) {
            0 => {}
            1 => return None,
            b => return Some(b),
        }
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches
        // no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ARENA_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let mapped = if p == libc::MAP_FAILED { 1 } else { p as usize };
        match ARENA_BASE.compare_exchange(0, mapped, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => (mapped != 1).then_some(mapped),
            Err(winner) => {
                if mapped != 1 {
                    // SAFETY: another thread's mapping won; this one was never handed out.
                    unsafe { libc::munmap(p, ARENA_SIZE) };
                }
                (winner != 1).then_some(winner)
            }
        }
    }

    /// Whether `p` was carved from the arena.
    fn holds(p: *mut u8) -> bool {
        let b = ARENA_BASE.load(std::sync::atomic::Ordering::Acquire);
        b > 1 && (p as usize) >= b && (p as usize) < b + ARENA_SIZE
    }

    /// `layout` carved from the arena, or null when it does not fit (any more). Not inlined:
    /// every allocation site would otherwise carry a copy (the binary grew by 7%).
    #[inline(never)]
    fn carve(layout: std::alloc::Layout) -> *mut u8 {
        use std::sync::atomic::Ordering;
        if layout.size() > ARENA_MAX_ALLOC {
            return std::ptr::null_mut();
        }
        let Some(base) = Arena::base() else {
            return std::ptr::null_mut();
        };
        let mut used = ARENA_USED.load(Ordering::Relaxed);
        loop {
            // Aligned as an address (an alignment may exceed the page the base is aligned to).
            let start = (base + used).next_multiple_of(layout.align()) - base;
            let end = start + layout.size();
            if end > ARENA_SIZE {
                return std::ptr::null_mut();
            }
            match ARENA_USED.compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return (base + start) as *mut u8,
                Err(now) => used = now,
            }
        }
    }
}

// SAFETY: every block handed out is either carved from the arena (disjoint ranges, claimed
// with a compare-and-swap on the used offset, never handed out twice, valid for the life of
// the process) or comes from the system allocator, which then also gets it back; `holds`
// tells the two apart by address.
unsafe impl std::alloc::GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = Arena::carve(layout);
        if !p.is_null() {
            return p;
        }
        // SAFETY: the caller's layout, passed on as GlobalAlloc requires.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // Arena memory is fresh from an anonymous mapping and never reused: already zero.
        let p = Arena::carve(layout);
        if !p.is_null() {
            return p;
        }
        // SAFETY: as in `alloc`.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: std::alloc::Layout) {
        if !Arena::holds(p) {
            // SAFETY: not the arena's, so the system allocator's, with the caller's layout.
            unsafe { std::alloc::System.dealloc(p, layout) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        use std::sync::atomic::Ordering;
        if !Arena::holds(p) {
            // SAFETY: the system allocator's block, passed back with the caller's arguments.
            return unsafe { std::alloc::System.realloc(p, layout, new) };
        }
        if new <= layout.size() {
            // The block already holds the smaller size.
            return p;
        }
        // The last block carved grows in place (a growing Vec or String, the usual case).
        let offset = p as usize - ARENA_BASE.load(Ordering::Acquire);
        if new <= ARENA_MAX_ALLOC
            && offset + new <= ARENA_SIZE
            && ARENA_USED
                .compare_exchange(
                    offset + layout.size(),
                    offset + new,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            return p;
        }
        // SAFETY: GlobalAlloc::realloc's contract makes (new, align) a valid layout.
        let wanted = unsafe { std::alloc::Layout::from_size_align_unchecked(new, layout.align()) };
        // SAFETY: a valid layout of non-zero size (`new` is non-zero by the same contract).
        let q = unsafe { self.alloc(wanted) };
        if !q.is_null() {
            // SAFETY: both blocks are at least min(old, new) bytes and distinct (the arena
            // never hands a range out twice); the old one stays valid (arena blocks are never
            // freed).
            unsafe { std::ptr::copy_nonoverlapping(p, q, layout.size().min(new)) };
        }
        q
    }
}

#[cfg(test)]
mod arena_tests {
    use super::{Arena, ARENA_SIZE};
    use std::alloc::{GlobalAlloc, Layout};

    /// Blocks are aligned, distinct and keep their contents through growth; once the arena is
    /// used up the system allocator serves (and takes back) what comes next.
    #[test]
    fn the_arena_carves_aligned_blocks_and_then_hands_over() {
        let a = Arena;
        let l = |size, align| Layout::from_size_align(size, align).unwrap();
        // SAFETY: valid non-zero layouts; every block is used within its size and given back
        // with the layout it has.
        unsafe {
            let p = a.alloc(l(3, 1));
            let q = a.alloc(l(64, 4096));
            assert!(Arena::holds(p) && Arena::holds(q));
            assert_eq!(q as usize % 4096, 0);
            assert!(q as usize >= p as usize + 3);
            std::ptr::write_bytes(q, 7, 64);
            // The last block grows in place; another one moves and keeps its bytes.
            assert_eq!(a.realloc(q, l(64, 4096), 128), q);
            let r = a.realloc(p, l(3, 1), 100);
            assert!(r != p && Arena::holds(r));
            let z = a.alloc_zeroed(l(256, 8));
            assert!((0..256).all(|i| *z.add(i) == 0));
            assert_eq!(*q.add(63), 7);
            // Too large for the arena: the system's, freed by it.
            let big = a.alloc(l(1 << 20, 8));
            assert!(!big.is_null() && !Arena::holds(big));
            a.dealloc(big, l(1 << 20, 8));
            // Use it up: then everything is the system's.
            while Arena::holds(a.alloc(l(60 * 1024, 8))) {}
            while Arena::holds(a.alloc(l(16, 8))) {}
            let after = a.alloc(l(16, 8));
            assert!(!after.is_null() && !Arena::holds(after));
            *after = 1;
            a.dealloc(after, l(16, 8));
            assert!(super::ARENA_USED.load(std::sync::atomic::Ordering::Relaxed) <= ARENA_SIZE);
        }
    }
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

/// The kernel's `struct open_how` for `openat2` (libc's is non-exhaustive: it cannot be built
/// outside libc).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `openat2(dir, path, flags | O_CLOEXEC, mode)` with the `RESOLVE_*` flags `resolve`.
pub(crate) fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: libc::c_int,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: u64::from(mode),
        resolve,
    };
    // SAFETY: a NUL-terminated path and a properly sized `open_how`, both live for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `openat2(dir, path, flags | O_CLOEXEC, mode)` resolved beneath `dir` without magic links
/// (`RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`): `..` above `dir`, absolute symlinks and
/// symlinks leading out fail with EXDEV, whatever happens to the tree meanwhile.
pub(crate) fn openat2_beneath(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    openat2(
        dir,
        path,
        flags,
        mode,
        libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    )
}

/// `openat(dir, name, flags | O_CLOEXEC, mode)`.
pub(crate) fn openat(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    // SAFETY: openat on a descriptor the caller owns with a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mkdirat(dir, name, mode)`.
pub(crate) fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: mkdirat on a descriptor the caller owns with a NUL-terminated name.
    match unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// `renameat(dir, from, dir, to)`: both names in the same directory (a symlink at `to` is
/// replaced, never written through).
pub(crate) fn renameat(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    // SAFETY: renameat within one directory the caller owns, NUL-terminated names.
    match unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// A new pseudo-terminal of `cols` x `rows`: (master, slave), both close-on-exec, the slave
/// opened from the master (`TIOCGPTPEER`: no `/dev/pts` path is looked up, so the view a
/// command has does not matter), neither the caller's controlling terminal.
pub(crate) fn open_pty(cols: u16, rows: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: open with a NUL-terminated literal path.
    let fd = unsafe { libc::open(c"/dev/ptmx".as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    let master = unsafe { OwnedFd::from_raw_fd(fd) };
    let unlock: libc::c_int = 0;
    // SAFETY: TIOCSPTLCK reads one int from the pointer, which lives for the call.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSPTLCK, &unlock) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: TIOCGPTPEER takes the open flags as its argument and returns a new descriptor.
    let peer = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTPEER, flags) };
    if peer < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just returned and belongs to nobody else.
    let slave = unsafe { OwnedFd::from_raw_fd(peer) };
    set_window(std::os::fd::AsFd::as_fd(&master), cols, rows)?;
    Ok((master, slave))
}

/// Sets a terminal's size (`TIOCSWINSZ`); the terminal's foreground process group gets
/// SIGWINCH.
pub(crate) fn set_window(tty: BorrowedFd<'_>, cols: u16, rows: u16) -> io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from the pointer, which lives for the call.
    if unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCSWINSZ, &ws) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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

/// Closes every descriptor from `first` on (`close_range`): a daemon keeps none of what its
/// starter happened to hold open without close-on-exec (a caller's pipe would never end).
pub(crate) fn close_from(first: u32) -> io::Result<()> {
    // SAFETY: close_range takes integers only; descriptors this process owns are closed.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts `/dev/null` (opened read-write) in place of descriptor `target` (`dup2`).
pub(crate) fn null_onto(target: RawFd) -> io::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    // SAFETY: dup2 takes integers only; `null` stays open until after the call.
    if unsafe { libc::dup2(null.as_raw_fd(), target) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `path` as a unix socket address; `None` when it holds a NUL byte or does not fit.
fn unix_addr(path: &Path) -> Option<(libc::sockaddr_un, libc::socklen_t)> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.contains(&0) || bytes.len() >= addr.sun_path.len() {
        return None;
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Some((addr, len as libc::socklen_t))
}

/// A close-on-exec `SOCK_SEQPACKET` unix socket.
fn seqpacket_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket takes integers only.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just created and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A `SOCK_SEQPACKET` socket listening at `path` (created with the process's umask).
pub(crate) fn seqpacket_listen(path: &Path) -> io::Result<OwnedFd> {
    let (addr, len) =
        unix_addr(path).ok_or_else(|| io::Error::from_raw_os_error(libc::ENAMETOOLONG))?;
    let sock = seqpacket_socket()?;
    // SAFETY: bind reads `len` bytes of the local `addr`; listen takes integers only.
    let rc = unsafe {
        let a = (&addr as *const libc::sockaddr_un).cast();
        match libc::bind(sock.as_raw_fd(), a, len) {
            0 => libc::listen(sock.as_raw_fd(), 64),
            e => e,
        }
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sock)
}

/// A `SOCK_SEQPACKET` socket connected to `path`.
pub(crate) fn seqpacket_connect(path: &Path) -> io::Result<OwnedFd> {
    let (addr, len) =
        unix_addr(path).ok_or_else(|| io::Error::from_raw_os_error(libc::ENAMETOOLONG))?;
    let sock = seqpacket_socket()?;
    // SAFETY: connect reads `len` bytes of the local `addr`.
    let rc = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sock)
}

/// The next connection of the listening socket `listener`, close-on-exec.
pub(crate) fn accept(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: accept4 with null address pointers writes nothing into this process's memory.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just accepted and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A terminal's size as (columns, rows) (`TIOCGWINSZ`); `None` when `tty` is not a terminal.
pub(crate) fn window(tty: BorrowedFd<'_>) -> Option<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the local, which lives for the call.
    if unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) } != 0 {
        return None;
    }
    Some((ws.ws_col, ws.ws_row))
}

/// Puts the terminal `tty` in raw mode (`cfmakeraw`: no echo, no line editing, no signals
/// from keys: they go to the program as bytes); returns the mode to restore.
pub(crate) fn raw_mode(tty: BorrowedFd<'_>) -> io::Result<libc::termios> {
    // SAFETY: a zeroed termios is a valid out-parameter; tcgetattr fills it.
    let mut old: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr writes the local `old`.
    if unsafe { libc::tcgetattr(tty.as_raw_fd(), &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut raw = old;
    // SAFETY: cfmakeraw edits the local `raw`; tcsetattr reads it.
    let rc = unsafe {
        libc::cfmakeraw(&mut raw);
        libc::tcsetattr(tty.as_raw_fd(), libc::TCSANOW, &raw)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

/// Puts back a terminal mode [`raw_mode`] returned.
pub(crate) fn restore_mode(tty: BorrowedFd<'_>, mode: &libc::termios) {
    // SAFETY: tcsetattr reads the termios the caller holds.
    unsafe { libc::tcsetattr(tty.as_raw_fd(), libc::TCSANOW, mode) };
}
