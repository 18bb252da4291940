//! Process descriptors: opening, signalling, taking a descriptor from another process, exit status.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

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
pub(super) struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    ids: [u32; 11],
    exit_code: i32,
}

/// `PIDFD_GET_INFO`: `_IOWR(0xFF, 11, struct pidfd_info)` with the 64-byte struct.
pub(super) const PIDFD_GET_INFO: libc::c_ulong = 0xC040_FF0B;
/// `PIDFD_INFO_EXIT`: ask for (and, in the answer, have) the exit status of a reaped process.
pub(super) const PIDFD_INFO_EXIT: u64 = 1 << 3;

/// The wait status of the process behind `pidfd` once it has been reaped (`PIDFD_GET_INFO`
/// with `PIDFD_INFO_EXIT`, Linux 6.15): `Ok(None)` while it has not been; an error where the
/// kernel does not offer it.
pub(crate) fn pidfd_exit_status(pidfd: BorrowedFd<'_>) -> io::Result<Option<i32>> {
    let info = pidfd_info(pidfd, PIDFD_INFO_EXIT)?;
    Ok((info.mask & PIDFD_INFO_EXIT != 0).then_some(info.exit_code))
}

/// `PIDFD_GET_INFO` for `mask` (the kernel answers what it has of it, and the pid always).
pub(super) fn pidfd_info(pidfd: BorrowedFd<'_>, mask: u64) -> io::Result<PidfdInfo> {
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
