//! The messages between a session's host and its resident process, one JSON object per
//! datagram of a `SOCK_SEQPACKET` socket pair, with descriptors passed alongside
//! (`SCM_RIGHTS`). A datagram is one message: no framing, and a message that does not fit is
//! refused whole.

use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// The largest message either side sends or accepts.
pub(crate) const MAX_MESSAGE: usize = 1 << 20;
/// At most this many descriptors ride with one message.
const MAX_FDS: usize = 4;

/// From the host to the resident process.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum ToResident {
    /// Start a command; its stdin, stdout and stderr come as descriptors.
    Start {
        id: u64,
        path: String,
        argv: Vec<String>,
        /// `KEY=value` entries added to (or replacing) the session's environment.
        env: Vec<String>,
        cwd: Option<String>,
        /// The filter, each instruction packed as `code << 48 | jt << 40 | jf << 32 | k`.
        filter: Option<Vec<u64>>,
        /// The filter notifies a listener, which the host takes before the exec.
        notify: bool,
    },
    /// The host holds the listener of command `id`: it may exec (or, `ok` false, give up).
    Go { id: u64, ok: bool },
    /// Send `sig` to command `id`'s process group.
    Signal { id: u64, sig: i32 },
}

/// From the resident process to the host.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum FromResident {
    /// The resident is ready; commands' `execve` names the path buffer at `addr`.
    Hello { addr: u64 },
    /// Command `id` installed its filter and waits with its listener at descriptor `listener`;
    /// its pidfd comes along.
    Handover { id: u64, listener: i32 },
    /// Command `id` runs (its pidfd comes along unless a handover sent it).
    Started { id: u64 },
    /// Command `id` could not be started: the step and its errno.
    Failed { id: u64, stage: String, errno: i32 },
    /// Command `id` ended with this wait status.
    Exited { id: u64, status: i32 },
}

/// Sends one message with `fds`.
pub(crate) fn send<T: Serialize>(sock: BorrowedFd<'_>, msg: &T, fds: &[RawFd]) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    if body.len() > MAX_MESSAGE || fds.len() > MAX_FDS {
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
        hdr.msg_controllen = unsafe { libc::CMSG_SPACE(bytes) } as usize;
        hdr.msg_control = cbuf.as_mut_ptr().cast();
        // SAFETY: the control buffer (64 bytes) holds one header and MAX_FDS descriptors;
        // CMSG_FIRSTHDR points into it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&hdr);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(bytes) as usize;
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

/// Receives one message and its descriptors (close-on-exec); `Ok(None)` at end of stream.
pub(crate) fn recv<T: for<'de> Deserialize<'de>>(
    sock: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
    buf.resize(MAX_MESSAGE, 0);
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
    hdr.msg_controllen = std::mem::size_of_val(&cbuf);
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
    if n == 0 && fds.is_empty() {
        return Ok(None);
    }
    if hdr.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    let msg = serde_json::from_slice(&buf[..n]).map_err(io::Error::other)?;
    Ok(Some((msg, fds)))
}

/// A filter instruction packed into one number.
pub(crate) fn pack(i: &crate::policy::Insn) -> u64 {
    (i.code as u64) << 48 | (i.jt as u64) << 40 | (i.jf as u64) << 32 | i.k as u64
}

/// The kernel's form of a packed instruction.
pub(crate) fn unpack(w: u64) -> libc::sock_filter {
    libc::sock_filter {
        code: (w >> 48) as u16,
        jt: (w >> 40) as u8,
        jf: (w >> 32) as u8,
        k: w as u32,
    }
}
