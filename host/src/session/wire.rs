//! The messages between a session's host and its resident process, one JSON object per
//! datagram of a `SOCK_SEQPACKET` socket pair, with descriptors passed alongside
//! (`SCM_RIGHTS`). A datagram is one message: no framing, and a message that does not fit is
//! refused whole.

use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};

/// The largest message either side sends or accepts.
pub(crate) const MAX_MESSAGE: usize = 1 << 20;
/// At most this many descriptors ride with one message.
const MAX_FDS: usize = 6;

/// From the host to the resident process.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum ToResident {
    /// The session's filter, sent once before any command: every filtered command installs
    /// it (it depends on the profile and the path buffer's address only, so it is compiled
    /// and sent once, not per command).
    Filter {
        /// Each instruction packed as `code << 48 | jt << 40 | jf << 32 | k`.
        filter: Vec<u64>,
        /// The filter notifies a listener, which goes to the host with the command's pidfd.
        notify: bool,
    },
    /// The session's spawner filter (x86_64), sent once before any command instead of
    /// [`ToResident::Filter`]: the resident starts a thread that installs it on itself with a
    /// listener and clones every filtered command, which inherits it; the calls the thread and
    /// a child before its exec make carry `secret` (`exec/spawner.rs`). The resident answers
    /// [`FromResident::Spawner`].
    Spawner {
        /// Each instruction packed as for `Filter`.
        filter: Vec<u64>,
        secret: u64,
        /// The resident's end of a start socket comes along: where the kernel reaps the
        /// commands (the hello's `exit_info`), the spawner thread reads filtered commands'
        /// starts from it itself (module `start_socket`).
        #[serde(default)]
        starts: bool,
    },
    /// Start a command; its stdin, stdout and stderr come as descriptors, then the resident's
    /// end of the command's own reply socket, on which it answers `Started` or `Failed` and,
    /// once the command has ended, `Exited` (the command's thread reads it directly: no
    /// thread of the host relays its answers).
    Start {
        id: u64,
        path: String,
        argv: Vec<String>,
        /// `KEY=value` entries added to (or replacing) the session's environment.
        env: Vec<String>,
        cwd: Option<String>,
        /// Install the session's filter (refused when none was sent).
        filtered: bool,
        /// How many `cgroup.procs` descriptors of the command's own cgroups follow the reply
        /// socket (module `cgroups`): its first process joins each before exec.
        #[serde(default)]
        cgroups: usize,
    },
    /// Send `sig` to command `id`'s process group. A command started on the start socket is
    /// not in the resident's table: `pid` names it (its pid in the session, from the host's
    /// pidfd, which the host found running).
    Signal {
        id: u64,
        sig: i32,
        #[serde(default)]
        pid: Option<i32>,
    },
}

/// From the resident process to the host.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum FromResident {
    /// The resident is ready; commands' `execve` names the path buffer at `addr`. With
    /// `exit_info`, the kernel reaps its commands and keeps each one's exit status for its
    /// pidfd (Linux 6.15): no `Exited` comes, the host reads the status from the pidfd. A
    /// pidfd of the resident itself comes along (its pid as the host sees it: commands are
    /// its children).
    Hello {
        addr: u64,
        #[serde(default)]
        exit_info: bool,
        /// A `NETLINK_SOCK_DIAG` socket made in the session's network namespace comes along
        /// (the host finds which command made a proxied connection with it: module
        /// `exec::net_owners`).
        #[serde(default)]
        diag: bool,
    },
    /// The spawner thread's answer: `errno` 0 and its filter's listener alongside, or why it
    /// could not start (the host then sends `Filter`, and each command installs it).
    Spawner {
        errno: i32,
        /// The spawner thread serves the start socket: filtered commands go there, and
        /// `Start` is for the others only.
        #[serde(default)]
        starts: bool,
    },
    /// Command `id` runs: its pidfd comes along, then its listener when `listener`. `pid`:
    /// its pid in the session, where the sender says (the start socket's spawner thread).
    Started {
        id: u64,
        listener: bool,
        #[serde(default)]
        pid: Option<i32>,
    },
    /// Command `id` could not be started: the step and its errno.
    Failed { id: u64, stage: String, errno: i32 },
    /// Command `id` ended with this wait status (only from a resident without `exit_info`).
    Exited { id: u64, status: i32 },
}

/// Sends one message with `fds`.
pub(crate) fn send<T: Serialize>(sock: BorrowedFd<'_>, msg: &T, fds: &[RawFd]) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    if body.len() > MAX_MESSAGE || fds.len() > MAX_FDS {
        return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    crate::sys::send_with_fds(sock, &body, fds)
}

/// Receives one message and its descriptors (close-on-exec); `Ok(None)` at end of stream.
pub(crate) fn recv<T: for<'de> Deserialize<'de>>(
    sock: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
    recv_at_most(sock, buf, MAX_MESSAGE)
}

/// The largest message on a command's reply socket (`Started`, `Failed`, `Exited`).
pub(crate) const MAX_REPLY: usize = 4096;

/// [`recv`] of a message of at most `max` bytes (a larger one is refused whole).
pub(crate) fn recv_at_most<T: for<'de> Deserialize<'de>>(
    sock: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
    buf.resize(max, 0);
    let (n, fds, flags) = crate::sys::recv_with_fds(sock, buf)?;
    if n == 0 && fds.is_empty() {
        return Ok(None);
    }
    if flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    let msg = serde_json::from_slice(&buf[..n]).map_err(io::Error::other)?;
    Ok(Some((msg, fds)))
}

/// A filter instruction packed into one number.
pub(crate) fn pack(i: &crate::policy::Insn) -> u64 {
    (i.code as u64) << 48 | (i.jt as u64) << 40 | (i.jf as u64) << 32 | i.k as u64
}

/// A packed instruction as the filter compiler's (for the spawner thread, which takes those).
pub(crate) fn unpack_insn(w: u64) -> crate::policy::Insn {
    let f = unpack(w);
    crate::policy::Insn {
        code: f.code,
        jt: f.jt,
        jf: f.jf,
        k: f.k,
    }
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
