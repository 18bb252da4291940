//! Naming violations without a preload: the outer filter returns `SECCOMP_RET_USER_NOTIF`
//! where the profile says `trap`, so a refused call waits in the kernel and the host, which
//! holds the filter's listener, reads which call it was. The host then ends the process that
//! made it with SIGSYS, as the trap action would (SIGKILL when the program has blocked, ignored
//! or caught SIGSYS, or was already sent one). The call never runs, and the channel is the
//! kernel's: nothing the program prints can forge it.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Bit of SIGSYS in the masks of `/proc/PID/status`.
const SIGSYS_BIT: u64 = 1 << (libc::SIGSYS - 1);

/// The host's end of one request's filter listener.
#[derive(Debug)]
pub(crate) struct Notifier {
    fd: OwnedFd,
    /// The first refused call's number (what the result reports).
    pub first: Option<u32>,
    /// Processes already sent SIGSYS; a second refused call from one of them means the
    /// signal did not end it, so it gets SIGKILL.
    signalled: Vec<i32>,
}

impl Notifier {
    /// Wraps the listener taken from the child.
    pub(crate) fn new(fd: OwnedFd) -> Notifier {
        Notifier {
            fd,
            first: None,
            signalled: Vec::new(),
        }
    }

    /// The descriptor to poll (readable when a call waits).
    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Handles one waiting call. Returns false when the listener has nothing more to say
    /// (every process using the filter is gone).
    pub(crate) fn handle(&mut self) -> bool {
        // SAFETY: a zeroed seccomp_notif is the required input of NOTIF_RECV.
        let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: NOTIF_RECV writes one notification into n.
        let rc = unsafe { libc::ioctl(self.raw(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) };
        if rc < 0 {
            // ENOENT: the waiting thread was killed before we read it; EINTR: try again.
            return matches!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::ENOENT) | Some(libc::EINTR)
            );
        }
        self.first.get_or_insert(n.data.nr as u32);
        let pid = n.pid as i32;
        let sig = if !self.signalled.contains(&pid) && sigsys_is_fatal(pid) {
            self.signalled.push(pid);
            libc::SIGSYS
        } else {
            libc::SIGKILL
        };
        // The pid is that of the waiting thread as long as the notification is valid (checked
        // after reading /proc, as seccomp_unotify(2) advises).
        // SAFETY: NOTIF_ID_VALID reads the id we pass.
        let valid = unsafe { libc::ioctl(self.raw(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &n.id) };
        if valid == 0 {
            // kill() with a thread id signals its whole thread group.
            // SAFETY: signals the process that made the refused call.
            unsafe { libc::kill(pid, sig) };
        }
        true
    }
}

/// Whether SIGSYS would end `pid` now: not blocked by that thread, not ignored, not caught.
fn sigsys_is_fatal(pid: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(u64::MAX)
    };
    ["SigBlk:", "SigIgn:", "SigCgt:"]
        .iter()
        .all(|k| mask(k) & SIGSYS_BIT == 0)
}
