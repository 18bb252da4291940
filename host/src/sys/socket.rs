//! Sockets: peer credentials, netlink, seqpacket pairs and listeners, descriptors passed with `SCM_RIGHTS`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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

/// `path` as a unix socket address; `None` when it holds a NUL byte or does not fit.
pub(super) fn unix_addr(path: &Path) -> Option<(libc::sockaddr_un, libc::socklen_t)> {
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
pub(super) fn seqpacket_socket() -> io::Result<OwnedFd> {
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
