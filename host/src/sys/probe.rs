//! Probes of what this machine allows: Landlock's ABI, a seccomp listener, namespaces, taking descriptors.

use std::io;
use std::os::fd::AsRawFd;

use super::fd::pipe2;
use super::process::seccomp_mode;

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
pub(super) fn seccomp_listener_child_probe() -> Result<(), i32> {
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
