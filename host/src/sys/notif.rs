//! The seccomp listener's side: receiving notifications and answering them.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `SECCOMP_IOCTL_NOTIF_SET_FLAGS` (Linux 6.6).
pub(super) const SECCOMP_IOCTL_NOTIF_SET_FLAGS: libc::c_ulong = 0x4008_2104;
/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`: the kernel switches straight to the listener's reader
/// and back, which roughly halves the cost of a notified call.
pub(super) const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: libc::c_ulong = 1;

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
