//! Terminals a job creates: the peer of its pseudo-terminal master, opened by the host.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

/// Opens the peer of the job's pseudo-terminal master for it: the master is taken from the
/// thread (`pidfd_getfd`: the same open file), `TIOCGPTPEER` is asked of it here, outside
/// Landlock, always with `O_NOCTTY` (the host must not gain a controlling terminal; a job
/// wanting one asks `TIOCSCTTY` after), and the peer is placed in the job's table as the
/// call's result (`SECCOMP_IOCTL_NOTIF_ADDFD` with `SEND`). A descriptor that is no master
/// gets the kernel's answer to the same `ioctl` (ENOTTY, EBADF).
pub(crate) fn peer(listener: BorrowedFd<'_>, n: &libc::seccomp_notif) {
    let fail = |e: i32| crate::sys::notif_fail(listener, n.id, e);
    let flags = n.data.args[2] as u32 as libc::c_int;
    let taken = crate::sys::pidfd_open(n.pid as i32, super::target::PIDFD_THREAD)
        .and_then(|p| crate::sys::pidfd_getfd(p.as_raw_fd(), n.data.args[0] as u32 as i32));
    let master = match taken {
        Ok(m) => m,
        Err(e) => {
            return fail(match e.raw_os_error() {
                Some(libc::EBADF) => libc::EBADF,
                _ => libc::EPERM,
            })
        }
    };
    // The descriptor was the thread's when taken only if its call still waits.
    if !crate::sys::notif_id_valid(listener, n.id) {
        return;
    }
    match crate::sys::emulate::open_peer(master.as_fd(), flags | libc::O_NOCTTY) {
        Ok(p) => {
            if let Err(e) = crate::sys::emulate::add_fd_send(
                listener,
                n.id,
                p.as_fd(),
                flags & libc::O_CLOEXEC != 0,
            ) {
                if e.raw_os_error() != Some(libc::ENOENT) {
                    fail(e.raw_os_error().unwrap_or(libc::EIO));
                }
            }
        }
        Err(e) => fail(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}
