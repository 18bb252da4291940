//! Which processes have exec'd, from the kernel's process-events connector (netlink
//! `NETLINK_CONNECTOR`, `PROC_EVENT_EXEC`), so the supervisor can keep the executable of a
//! thread it has already named instead of reading `/proc/PID/exe` on every refused call.
//!
//! Soundness rests on ordering: the kernel queues a process's exec event on every listening
//! socket during the exec itself, before the new program runs, so before any refused call it
//! makes. Draining the socket after receiving a notification therefore shows every exec that
//! came before it. When the socket overflowed the kernel says so (`ENOBUFS`) and every cached
//! name is dropped. Events carry pids of the initial PID namespace: the connector is used only
//! by a privileged host (`CAP_NET_ADMIN`) in that namespace, whose own subscription keeps them
//! coming, and trusted only once one of its events has named a process the supervisor traced
//! (so a connector that delivers nothing never lets a stale name through).

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};

/// `CN_IDX_PROC` / `CN_VAL_PROC`: the process-events connector's id.
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
/// `PROC_CN_MCAST_LISTEN`.
const MCAST_LISTEN: u32 = 1;
/// `PROC_EVENT_EXEC`.
const EVENT_EXEC: u32 = 2;
/// `NETLINK_CONNECTOR`.
const NETLINK_CONNECTOR: libc::c_int = 11;
/// The inode numbers of the initial PID and user namespaces (`PROC_PID_INIT_INO`,
/// `PROC_USER_INIT_INO`).
const INIT_PID_NS: u64 = 0xEFFF_FFFC;
const INIT_USER_NS: u64 = 0xEFFF_FFFD;
/// `CAP_NET_ADMIN`.
const CAP_NET_ADMIN: u32 = 12;
/// Size of `struct nlmsghdr` and of `struct cn_msg` without its data.
const NLMSG_HDR: usize = 16;
const CN_MSG_HDR: usize = 20;
/// Offset of `event_data` in `struct proc_event` (what, cpu, timestamp_ns).
const EVENT_DATA: usize = 16;
/// Exec'd thread-group ids remembered to confirm that events arrive.
const RECENT: usize = 256;

/// A subscription to exec events.
pub(crate) struct ExecEvents {
    sock: OwnedFd,
    /// Thread groups seen exec'ing lately (only until the subscription is confirmed).
    recent: VecDeque<i32>,
    /// An event has named a process the supervisor traced: events do arrive.
    confirmed: bool,
}

/// What draining the socket found.
pub(crate) enum Drained {
    /// Every exec since the last drain was passed on.
    Complete,
    /// Some events were lost: nothing cached can be trusted.
    Lost,
}

impl ExecEvents {
    /// Subscribes, when this host can (initial PID namespace, connector available); `None`
    /// otherwise, which costs only speed.
    pub(crate) fn open() -> Option<ExecEvents> {
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata("/proc/self/ns/pid").ok()?.ino() != INIT_PID_NS
            || std::fs::metadata("/proc/self/ns/user").ok()?.ino() != INIT_USER_NS
            || !has_net_admin()
        {
            return None;
        }
        let sock = crate::sys::netlink_bound(NETLINK_CONNECTOR, CN_IDX_PROC).ok()?;
        // Linux 6.6 takes an event filter (`struct proc_input`): only execs are then sent here.
        // Older kernels ignore a message of that size, so they get the plain request.
        let filtered = kernel_at_least(6, 6);
        let data = if filtered { 8 } else { 4 };
        let mut msg = Vec::with_capacity(NLMSG_HDR + CN_MSG_HDR + data);
        let total = (NLMSG_HDR + CN_MSG_HDR + data) as u32;
        msg.extend_from_slice(&total.to_ne_bytes());
        msg.extend_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
        msg.extend_from_slice(&0u16.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
        msg.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes());
        msg.extend_from_slice(&(data as u16).to_ne_bytes());
        msg.extend_from_slice(&0u16.to_ne_bytes());
        msg.extend_from_slice(&MCAST_LISTEN.to_ne_bytes());
        if filtered {
            msg.extend_from_slice(&EVENT_EXEC.to_ne_bytes());
        }
        if crate::sys::send(sock.as_fd(), &msg).ok()? != msg.len() {
            return None;
        }
        Some(ExecEvents {
            sock,
            recent: VecDeque::with_capacity(RECENT),
            confirmed: false,
        })
    }

    /// Whether events are known to arrive for the processes the supervisor traces.
    pub(crate) fn confirmed(&self) -> bool {
        self.confirmed
    }

    /// Notes that the supervisor traced a thread of group `tgid`: if that group was seen
    /// exec'ing, events arrive, numbered as the supervisor's notifications are.
    pub(crate) fn traced(&mut self, tgid: i32) {
        if !self.confirmed && self.recent.contains(&tgid) {
            self.confirmed = true;
            self.recent = VecDeque::new();
        }
    }

    /// Reads every queued event, passing each exec's (pid, tgid) to `exec`.
    pub(crate) fn drain(&mut self, mut exec: impl FnMut(i32, i32)) -> Drained {
        let mut buf = [0u8; 1024];
        loop {
            let n = match crate::sys::recv_now(self.sock.as_fd(), &mut buf) {
                Ok(n) => n,
                Err(e) => {
                    return match e.raw_os_error() {
                        Some(libc::EAGAIN) => Drained::Complete,
                        Some(libc::EINTR) => continue,
                        // ENOBUFS (overflow) or anything unexpected.
                        _ => Drained::Lost,
                    };
                }
            };
            let mut msg = &buf[..n];
            while msg.len() >= NLMSG_HDR {
                let len = u32::from_ne_bytes(msg[0..4].try_into().expect("4 bytes")) as usize;
                if len < NLMSG_HDR || len > msg.len() {
                    break;
                }
                if let Some((pid, tgid)) = exec_of(&msg[NLMSG_HDR..len]) {
                    if !self.confirmed {
                        if self.recent.len() == RECENT {
                            self.recent.pop_front();
                        }
                        self.recent.push_back(tgid);
                    }
                    exec(pid, tgid);
                }
                msg = &msg[((len + 3) & !3).min(msg.len())..];
            }
        }
    }
}

/// Whether this process may subscribe (`CAP_NET_ADMIN` in its effective set). Only its own
/// subscription keeps events coming for as long as it listens: an unprivileged socket gets
/// events only while some privileged listener exists, and would not learn when that one left.
fn has_net_admin() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let v = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(v.trim(), 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_NET_ADMIN) != 0)
}

/// Whether the running kernel is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = crate::sys::kernel_release();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// The (pid, tgid) of an exec event in a connector message's payload.
fn exec_of(cn: &[u8]) -> Option<(i32, i32)> {
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(cn.get(at..at + 4)?.try_into().ok()?))
    };
    if word(0)? != CN_IDX_PROC || word(4)? != CN_VAL_PROC {
        return None;
    }
    let ev = CN_MSG_HDR;
    if word(ev)? != EVENT_EXEC {
        return None;
    }
    let pid = word(ev + EVENT_DATA)? as i32;
    let tgid = word(ev + EVENT_DATA + 4)? as i32;
    Some((pid, tgid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_of_a_child_is_seen_when_the_host_may_listen() {
        let Some(mut events) = ExecEvents::open() else {
            return; // not in the initial PID namespace, or no connector: the slow path
        };
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        let mut seen = false;
        let _ = events.drain(|p, g| seen |= p == pid && g == pid);
        // An unprivileged listener may get nothing; then the subscription is never confirmed.
        if seen {
            events.traced(pid);
            assert!(events.confirmed());
        } else {
            events.traced(pid);
            assert!(!events.confirmed());
        }
    }

    #[test]
    fn hostile_messages_are_ignored() {
        assert_eq!(exec_of(&[]), None);
        assert_eq!(exec_of(&[1, 0, 0, 0, 1, 0, 0, 0]), None);
        let mut m = vec![0u8; CN_MSG_HDR + EVENT_DATA + 8];
        m[0] = 1;
        m[4] = 1;
        m[CN_MSG_HDR] = 2;
        m[CN_MSG_HDR + EVENT_DATA] = 7;
        m[CN_MSG_HDR + EVENT_DATA + 4] = 7;
        assert_eq!(exec_of(&m), Some((7, 7)));
        assert_eq!(exec_of(&m[..m.len() - 1]), None);
    }
}
