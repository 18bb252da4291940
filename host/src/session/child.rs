//! A session command's child between its clone and its exec: it joins its cgroups, its
//! streams and a process group or a session of its own (the comment at its `setsid` says
//! which), installs the session's filter unless it inherited the spawner thread's, and execs.
//! It runs on memory it shares with the resident (`CLONE_VM`), so it makes raw calls only and
//! never allocates; every call carries the spawner's secret (0 without a spawner) where
//! `SECRET_CALLS` says.
//!
//! A child started by the resident's main thread (`CLONE_VFORK`) tells a failed step in its
//! [`Report`], which the resident reads once it resumes. A child started on the start socket
//! (module `start_socket`, no `CLONE_VFORK`: nobody waits for its exec) sends the `Failed`
//! answer on the command's reply socket itself, as JSON written by hand ([`Text`]).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};

/// A raw call (`-errno` on failure) with `secret` in the first argument after those given
/// (the position `SECRET_CALLS` names for it).
macro_rules! ksys {
    ($secret:expr; $nr:expr $(, $a:expr)*) => {{
        let mut args = [0usize; 6];
        let given: &[usize] = &[$($a as usize),*];
        args[..given.len()].copy_from_slice(given);
        args[given.len()] = $secret as usize;
        $crate::sys::raw::syscall($nr, args)
    }};
}
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_imports))]
pub(super) use ksys;

/// The stack a command's child runs on until it execs (raw calls only: a few frames).
pub(super) const STACK_WORDS: usize = 64 * 1024 / 16;

/// Stages a child reports in its [`Report`].
pub(super) const STAGES: [&str; 7] = [
    "signals", "streams", "cwd", "filter", "handover", "exec", "cgroup",
];

/// What the child writes in the memory it shares with the resident, read once the resident
/// resumes (the child has exec'd or exited).
pub(super) struct Report {
    /// The stage that failed (an index into [`STAGES`]), or -1.
    pub(super) stage: AtomicI32,
    /// Its errno.
    pub(super) errno: AtomicI32,
    /// The listener's descriptor in the shared table, or -1.
    pub(super) listener: AtomicI32,
}

/// What the cloned child needs, all prepared before the clone.
pub(super) struct Child {
    /// `cgroup.procs` of the command's own cgroups (-1: none), joined first.
    pub(super) cgroups: [RawFd; 2],
    pub(super) stdio: [RawFd; 3],
    pub(super) cwd: *const libc::c_char,
    pub(super) fprog: *const libc::sock_fprog,
    pub(super) notify: bool,
    /// A session of its own rather than only a process group (one on a terminal always
    /// gets one): other commands of the session run.
    pub(super) session: bool,
    /// The spawner's secret, which every call of the child carries in an argument the kernel
    /// ignores for it (0 when the child installs the filter itself): the spawner thread's
    /// filter, which the child inherits, exempts exactly those calls.
    pub(super) secret: u64,
    pub(super) path: *const libc::c_char,
    pub(super) argv: *const *const libc::c_char,
    pub(super) envp: *const *const libc::c_char,
    pub(super) report: *const Report,
    /// The command's number and, where the child answers a failed step itself, its reply
    /// socket (-1: it reports in `report`).
    pub(super) id: u64,
    pub(super) reply: RawFd,
}

pub(super) extern "C" fn child_entry(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Child` the resident passed to clone, valid while it is suspended.
    unsafe { child_main(&*(arg as *const Child)) }
}

/// The cloned child: joins its streams and a process group of its own (a session of its own on
/// a terminal or beside running commands), installs the filter (its listener lands in the
/// table it shares with the resident) unless it inherited the spawner thread's, execs. Raw
/// calls only, and no allocation: it runs on the resident's memory. Each call carries the
/// spawner's secret (`c.secret`) in the argument `exec/spawner.rs`'s
/// `SECRET_CALLS` names for it, so that the inherited filter lets it through; without a
/// spawner the secret is 0 and those arguments are ignored.
///
/// # Safety
/// Called once, in the child of `clone(CLONE_VM ...)`, with `c`'s pointers valid until it
/// has exec'd or exited.
unsafe fn child_main(c: &Child) -> ! {
    // SAFETY: the caller's contract; every call below is a raw system call on prepared
    // memory, returning -errno (no `errno`: a child of the spawner thread shares its TLS).
    unsafe {
        let report = &*c.report;
        let secret = c.secret;
        let fail = |stage: i32, rc: isize| -> ! {
            let errno = (-rc) as i32;
            report.errno.store(errno, Ordering::Relaxed);
            report.stage.store(stage, Ordering::Release);
            if c.reply >= 0 {
                let name = STAGES.get(stage as usize).copied().unwrap_or("setup");
                send_answer(c.reply, c.id, Err((name, errno)), -1, secret);
            }
            ksys!(secret; libc::SYS_exit_group, 127);
            libc::_exit(127)
        };
        // The resident blocks SIGCHLD (the spawner thread every signal) and std ignores
        // SIGPIPE: a command starts with neither. The kernel's sigset is 8 bytes; its
        // sigaction all zeros is SIG_DFL with no flags and an empty mask.
        let none = 0u64;
        let default = [0u64; 4];
        let rc = ksys!(secret; libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &none as *const u64,
                       0usize, 8usize);
        if rc != 0 {
            fail(0, rc);
        }
        let rc = ksys!(secret; libc::SYS_rt_sigaction, libc::SIGPIPE, default.as_ptr(), 0usize,
                       8usize);
        if rc != 0 {
            fail(0, rc);
        }
        // The command's own cgroups (its limits), before it can start anything: `0` moves
        // the writer. The host opened the files; the kernel checks the opener's rights.
        for &fd in &c.cgroups {
            if fd >= 0 {
                let rc = ksys!(secret; libc::SYS_write, fd, b"0".as_ptr(), 1usize);
                if rc != 1 {
                    fail(6, if rc < 0 { rc } else { -(libc::EIO as isize) });
                }
            }
        }
        for (i, &fd) in c.stdio.iter().enumerate() {
            // The streams came with the start message, above 2 (the resident's own 0, 1 and
            // 2 are open): dup3 never meets its own source.
            let rc = ksys!(secret; libc::SYS_dup3, fd, i, 0usize);
            if rc < 0 {
                fail(1, rc);
            }
        }
        // A process group of its own: its signals reach its group, and the host tells its
        // processes apart by their group (module `shared`). A session of its own (which is
        // also a group) for a command on a terminal (stdin a terminal), whose controlling
        // terminal that becomes, so that it gets SIGWINCH and ^C like a shell's job; and for
        // one started while other commands of the session run (`c.session`). `setsid` makes
        // a scheduler autogroup, which the kernel creates, schedules as a group of its own
        // and frees for each command: alone, that cost a command 0.80x a plain spawn loop
        // against 0.88x without; beside running commands, a group of its own is what keeps
        // the spawner thread (idle in the resident's group) from waiting behind them, two at
        // a time 0.89-0.90x with and 0.77-0.81x without (docs/benchmarks.md).
        let mut term: libc::termios = std::mem::zeroed();
        let tty = ksys!(secret; libc::SYS_ioctl, 0usize, libc::TCGETS,
                        &mut term as *mut libc::termios)
            == 0;
        let rc = if tty || c.session {
            ksys!(secret; libc::SYS_setsid)
        } else {
            ksys!(secret; libc::SYS_setpgid, 0usize, 0usize)
        };
        if rc < 0 {
            fail(0, rc);
        }
        if tty {
            let rc = ksys!(secret; libc::SYS_ioctl, 0usize, libc::TIOCSCTTY, 0usize);
            if rc != 0 {
                fail(1, rc);
            }
        }
        if !c.cwd.is_null() {
            let rc = ksys!(secret; libc::SYS_chdir, c.cwd);
            if rc != 0 {
                fail(2, rc);
            }
        }
        if !c.fprog.is_null() {
            let rc = ksys!(0; libc::SYS_prctl, libc::PR_SET_NO_NEW_PRIVS, 1usize, 0usize, 0usize);
            if rc != 0 {
                fail(3, rc);
            }
            let flags = if c.notify {
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
            } else {
                0
            };
            let rc = ksys!(0; libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, c.fprog);
            if rc < 0 {
                fail(3, rc);
            }
            if c.notify {
                // The listener is in the shared table: the resident holds it from here on
                // (the exec takes a copy of the table and closes it there, close-on-exec).
                report.listener.store(rc as i32, Ordering::Release);
            }
        }
        let rc = ksys!(secret; libc::SYS_execve, c.path, c.argv, c.envp);
        fail(5, rc)
    }
}

/// Writes `Started` (the child's `pid`, with `pidfd`) or `Failed` on `reply` as
/// `wire::FromResident` JSON,
/// without allocating; whether it was sent.
///
/// # Safety
/// Raw calls with the secret only: callable from the spawner thread and a child before exec.
pub(super) unsafe fn send_answer(
    reply: RawFd,
    id: u64,
    outcome: Result<i32, (&str, i32)>,
    pidfd: RawFd,
    secret: u64,
) -> bool {
    let mut buf = Text::default();
    match outcome {
        Ok(pid) => {
            buf.put(b"{\"op\":\"started\",\"id\":");
            buf.number(id);
            buf.put(b",\"listener\":false,\"pid\":");
            buf.number(pid.max(0) as u64);
            buf.put(b"}");
        }
        Err((stage, errno)) => {
            buf.put(b"{\"op\":\"failed\",\"id\":");
            buf.number(id);
            buf.put(b",\"stage\":\"");
            buf.put(stage.as_bytes());
            buf.put(b"\",\"errno\":");
            buf.number(errno.max(0) as u64);
            buf.put(b"}");
        }
    }
    let mut iov = libc::iovec {
        iov_base: buf.bytes.as_mut_ptr().cast(),
        iov_len: buf.len,
    };
    let mut cbuf = [0u64; 4];
    // SAFETY: a zeroed msghdr is valid; its pointers are set to the locals above.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    if pidfd >= 0 {
        hdr.msg_control = cbuf.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic; the header and one descriptor fit in `cbuf`.
        unsafe {
            hdr.msg_controllen = libc::CMSG_SPACE(4) as _;
            let c = libc::CMSG_FIRSTHDR(&hdr);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(4) as _;
            libc::CMSG_DATA(c).cast::<i32>().write_unaligned(pidfd);
        }
    }
    loop {
        // SAFETY: sendmsg reads the header and the buffers it names; the secret goes in its
        // unused fourth argument.
        let rc = unsafe {
            ksys!(secret; libc::SYS_sendmsg, reply, &hdr as *const libc::msghdr,
                  libc::MSG_NOSIGNAL)
        };
        if rc == -(libc::EINTR as isize) {
            continue;
        }
        return rc >= 0;
    }
}

/// A small text written without allocating.
pub(super) struct Text {
    pub(super) bytes: [u8; 160],
    pub(super) len: usize,
}

impl Default for Text {
    fn default() -> Text {
        Text {
            bytes: [0; 160],
            len: 0,
        }
    }
}

impl Text {
    pub(super) fn put(&mut self, s: &[u8]) {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    pub(super) fn number(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.put(&digits[i..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::wire::{self, FromResident};
    use std::os::fd::AsFd;
    use std::os::fd::AsRawFd;

    /// What `send_answer` wrote on one end of a socket pair, as the host reads it.
    fn answered(id: u64, outcome: Result<i32, (&str, i32)>, pidfd: RawFd) -> (FromResident, usize) {
        let (host, resident) = crate::sys::seqpacket_pair().unwrap();
        // SAFETY: raw calls on descriptors this test owns; secret 0 (no filter here).
        assert!(unsafe { send_answer(resident.as_raw_fd(), id, outcome, pidfd, 0) });
        let mut buf = Vec::new();
        let (m, fds) = wire::recv_at_most::<FromResident>(host.as_fd(), &mut buf, wire::MAX_REPLY)
            .unwrap()
            .unwrap();
        (m, fds.len())
    }

    #[test]
    fn answers_are_the_json_the_host_reads_with_the_pidfd_alongside() {
        let me = crate::sys::pidfd_open(std::process::id() as i32, 0).unwrap();
        let (m, fds) = answered(u64::MAX, Ok(i32::MAX), me.as_raw_fd());
        assert!(
            matches!(
                m,
                FromResident::Started {
                    id: u64::MAX,
                    listener: false,
                    pid: Some(i32::MAX)
                }
            ),
            "{m:?}"
        );
        assert_eq!(fds, 1);
        let (m, fds) = answered(0, Err(("exec", libc::ENOEXEC)), -1);
        assert!(
            matches!(&m, FromResident::Failed { id: 0, stage, errno } if stage == "exec" && *errno == libc::ENOEXEC),
            "{m:?}"
        );
        assert_eq!(fds, 0);
        // Every stage name a child reports, and hostile numbers: a negative errno is sent as 0,
        // a pid below 0 as 0 (the host then reads the pid itself).
        for (i, stage) in STAGES.iter().enumerate() {
            let (m, _) = answered(i as u64, Err((stage, -5)), -1);
            assert!(
                matches!(&m, FromResident::Failed { stage: s, errno: 0, .. } if s == stage),
                "{m:?}"
            );
        }
        let (m, _) = answered(1, Ok(-1), me.as_raw_fd());
        assert!(
            matches!(m, FromResident::Started { pid: Some(0), .. }),
            "{m:?}"
        );
    }

    #[test]
    fn a_text_that_does_not_fit_is_cut_not_overrun() {
        let mut t = Text::default();
        for _ in 0..100 {
            t.put(b"0123456789");
        }
        t.number(u64::MAX);
        assert_eq!(t.len, t.bytes.len());
    }
}
