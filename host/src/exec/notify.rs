//! Naming violations without a preload: the outer filter returns `SECCOMP_RET_USER_NOTIF`
//! where the profile says `trap`, so a refused call waits in the kernel and the host, which
//! holds the filter's listener, reads which call it was. A spawner thread's listener serves
//! every request of its profile ([`supervise`] traces each process back to its request: its
//! cgroup, or its chain of parents); a filter attached in the child has a listener per request
//! ([`Notifier`]). The host then ends the process that
//! made it with SIGSYS, as the trap action would (SIGKILL when the program has blocked, ignored
//! or caught SIGSYS, or was already sent one). The call never runs, and the channel is the
//! kernel's: nothing the program prints can forge it.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

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
        let n = match receive(self.raw()) {
            Received::Call(n) => n,
            Received::Gone => return true,
            Received::Closed => return false,
        };
        self.first.get_or_insert(n.data.nr as u32);
        stop(self.raw(), &n, &mut self.signalled);
        true
    }
}

/// What `NOTIF_RECV` gave.
enum Received {
    Call(libc::seccomp_notif),
    /// The waiting thread died before it was read, or the read was interrupted.
    Gone,
    /// The listener is finished.
    Closed,
}

fn receive(fd: RawFd) -> Received {
    // SAFETY: a zeroed seccomp_notif is the required input of NOTIF_RECV.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: NOTIF_RECV writes one notification into n.
    let rc = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) };
    if rc == 0 {
        return Received::Call(n);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EINTR) => Received::Gone,
        _ => Received::Closed,
    }
}

/// Whether the notification still stands (its thread waits): after reading /proc about its
/// pid, as seccomp_unotify(2) advises, so that the pid was not reused meanwhile.
fn still_waiting(fd: RawFd, n: &libc::seccomp_notif) -> bool {
    // SAFETY: NOTIF_ID_VALID reads the id we pass.
    unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &n.id) == 0 }
}

/// Ends the process that made the refused call: SIGSYS when that ends it, else SIGKILL.
fn stop(fd: RawFd, n: &libc::seccomp_notif, signalled: &mut Vec<i32>) {
    let pid = n.pid as i32;
    let sig = if !signalled.contains(&pid) && sigsys_is_fatal(pid) {
        signalled.push(pid);
        libc::SIGSYS
    } else {
        libc::SIGKILL
    };
    if still_waiting(fd, n) {
        // kill() with a thread id signals its whole thread group.
        // SAFETY: signals the process that made the refused call.
        unsafe { libc::kill(pid, sig) };
    }
}

/// What a request learns from a shared listener.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    /// The first refused call's number + 1 (0: none yet).
    first: AtomicU32,
    signalled: Mutex<Vec<i32>>,
}

impl Slot {
    /// The first refused call's number, if any.
    pub(crate) fn first(&self) -> Option<u32> {
        self.first.load(Ordering::Acquire).checked_sub(1)
    }
}

/// How a process is traced back to its request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Member {
    /// Every process in this request cgroup (its name).
    Cgroup(String),
    /// This direct child and its descendants.
    Child(i32),
}

fn registry() -> &'static Mutex<HashMap<Member, Arc<Slot>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<Member, Arc<Slot>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// A request's entry in the registry of the shared listeners; removed on drop.
#[derive(Debug)]
pub(crate) struct Registration {
    slot: Arc<Slot>,
    keys: Vec<Member>,
}

impl Registration {
    /// Registers a request before its child starts (by its cgroup, when it has one).
    pub(crate) fn new(cgroup: Option<&str>) -> Registration {
        let mut r = Registration {
            slot: Arc::default(),
            keys: Vec::new(),
        };
        if let Some(name) = cgroup {
            r.add(Member::Cgroup(name.to_string()));
        }
        r
    }

    /// Adds the direct child once it has started.
    pub(crate) fn add_child(&mut self, pid: i32) {
        self.add(Member::Child(pid));
    }

    fn add(&mut self, key: Member) {
        registry()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), Arc::clone(&self.slot));
        self.keys.push(key);
    }

    /// What the listener reported for this request.
    pub(crate) fn slot(&self) -> &Slot {
        &self.slot
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        for k in &self.keys {
            reg.remove(k);
        }
    }
}

/// The request a process belongs to: its cgroup's, or that of the first registered child on
/// its chain of parents.
fn find(pid: i32) -> Option<Arc<Slot>> {
    let reg = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) {
        if let Some(path) = text.lines().find_map(|l| l.strip_prefix("0::")) {
            // The request cgroup, or one a (privileged) program made inside it.
            for name in path.split('/').filter(|n| !n.is_empty()) {
                if let Some(s) = reg.get(&Member::Cgroup(name.to_string())) {
                    return Some(Arc::clone(s));
                }
            }
        }
    }
    let mut p = pid;
    for _ in 0..64 {
        if let Some(s) = reg.get(&Member::Child(p)) {
            return Some(Arc::clone(s));
        }
        p = parent_of(p)?;
        if p <= 1 {
            return None;
        }
    }
    None
}

fn parent_of(pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()
}

/// How long a call from a process that no request claims (yet) may wait before it is killed
/// anyway; a child is registered right after it starts, so this only covers that moment.
const UNCLAIMED: Duration = Duration::from_millis(500);

/// Serves the listener of a spawner's filter for as long as the host lives: each refused call
/// is recorded in its request's slot and its process is stopped. A call from one of the
/// host's own threads (a bug: the spawner thread is meant to make only exempted calls) is
/// answered with EPERM instead.
pub(crate) fn supervise(profile: &str, listener: OwnedFd) -> std::io::Result<()> {
    let profile = profile.to_string();
    std::thread::Builder::new()
        .name(format!("sandbox-notify-{profile}"))
        .spawn(move || {
            let fd = listener.as_raw_fd();
            let mut pending: Vec<(libc::seccomp_notif, Instant)> = Vec::new();
            let mut orphans: Vec<i32> = Vec::new();
            loop {
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                let wait = if pending.is_empty() { -1 } else { 2 };
                // SAFETY: one pollfd on a descriptor we own.
                let n = unsafe { libc::poll(&mut p, 1, wait) };
                if n > 0 && p.revents & libc::POLLIN != 0 {
                    match receive(fd) {
                        Received::Call(c) => pending.push((c, Instant::now())),
                        Received::Gone => {}
                        Received::Closed => return,
                    }
                }
                pending.retain(|(c, since)| {
                    let pid = c.pid as i32;
                    if std::path::Path::new(&format!("/proc/self/task/{pid}")).exists() {
                        answer_host_thread(&profile, fd, c);
                        return false;
                    }
                    match find(pid) {
                        Some(slot) => {
                            let _ = slot.first.compare_exchange(
                                0,
                                c.data.nr as u32 + 1,
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            );
                            let mut signalled =
                                slot.signalled.lock().unwrap_or_else(|e| e.into_inner());
                            stop(fd, c, &mut signalled);
                            false
                        }
                        None if since.elapsed() > UNCLAIMED => {
                            stop(fd, c, &mut orphans);
                            orphans.truncate(64);
                            false
                        }
                        None => true,
                    }
                });
            }
        })?;
    Ok(())
}

/// Credential changes glibc makes in *every* thread of the process (its `setxid` broadcast)
/// when the host calls `setuid`, `setgroups`, ...: the spawner thread takes part too, and
/// glibc aborts the process if one thread fails where another succeeded.
const CREDENTIAL_CALLS: &[&str] = &[
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setfsuid",
    "setfsgid",
    "setgroups",
];

/// Answers a call of the host's own (spawner) thread: a credential change glibc asks of every
/// thread is carried out (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`: the kernel runs the call as if
/// allowed, for that thread only); anything else is a bug and fails with EPERM.
fn answer_host_thread(profile: &str, fd: RawFd, c: &libc::seccomp_notif) {
    let credential = crate::policy::NATIVE
        .syscall_name(c.data.nr as u32)
        .is_some_and(|n| CREDENTIAL_CALLS.contains(&n));
    let resp = if credential {
        libc::seccomp_notif_resp {
            id: c.id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        }
    } else {
        tracing::error!(
            profile,
            nr = c.data.nr,
            "a host thread made a call the spawner's filter refuses"
        );
        libc::seccomp_notif_resp {
            id: c.id,
            val: 0,
            error: -libc::EPERM,
            flags: 0,
        }
    };
    // SAFETY: NOTIF_SEND reads the response we pass.
    unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) };
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
