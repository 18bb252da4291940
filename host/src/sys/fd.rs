//! Descriptors: pipes, status flags, polling, eventfds, closing the inherited ones.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

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
