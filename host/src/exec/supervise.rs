//! A started job watched until it ends: its output read as it comes (kept up to the cap), its
//! stdin written, the wall clock enforced (SIGTERM, the grace, SIGKILL to the whole tree),
//! cancellation honoured, and the supervisor's notifications answered, in one poll loop.

use super::job::{Job, Live};
use super::notify::Tally;
use super::options::{Cancel, RunOptions};
use super::request::Validated;
use super::stream::{set_nonblocking, Stream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// How long output is still read after the program and its descendants were killed.
pub(super) const DRAIN: Duration = Duration::from_secs(2);

/// What watching the job found, for its report.
pub(super) struct Watched {
    /// The wall-clock limit ended the program.
    pub(super) timed_out: bool,
    /// The request was cancelled and its processes killed.
    pub(super) cancelled: bool,
    /// The job's own supervisor's record, when its listener closed while watching.
    pub(super) notified: Option<Tally>,
    pub(super) out: Stream,
    pub(super) err: Stream,
}

/// Watches `live` until the program and every process holding its output are gone (or the
/// drain time after the kill ran out).
pub(super) fn watch(job: &mut Job, live: &mut Live, v: &Validated, opts: &RunOptions) -> Watched {
    let group = &mut job.group;
    let pid = live.pid;
    let pidfd = &live.pidfd;
    let notifier = &mut live.notifier;
    let mut notified: Option<Tally> = None;
    let mut out = Stream::new(live.stdout.take(), v.max_output_bytes);
    let mut err = Stream::new(live.stderr.take(), v.max_output_bytes);
    let mut input = live.stdin.take().map(|s| {
        let f = std::fs::File::from(s);
        set_nonblocking(f.as_fd());
        f
    });
    let data = v.stdin.as_deref().unwrap_or("").as_bytes();
    let mut written = 0usize;

    let deadline = v.timeout.and_then(|t| Instant::now().checked_add(t));
    let mut timed_out = false;
    let mut kill_at: Option<Instant> = None;
    let mut exited = false;
    let mut drain_until: Option<Instant> = None;
    let mut scratch = [0u8; 16 * 1024];
    let mut cancelled = false;
    let cancel = opts.cancel.as_ref();

    loop {
        if !exited && !cancelled && cancel.is_some_and(Cancel::is_cancelled) {
            cancelled = true;
            kill_at = None;
            group.kill_all();
            kill_main(pidfd);
        }
        if !exited && has_exited(pid) {
            exited = true;
            input = None;
            // No process started by the request outlives it.
            group.kill_all();
            drain_until = Some(Instant::now() + DRAIN);
        }
        if exited && out.raw().is_none() && err.raw().is_none() {
            break;
        }
        let now = Instant::now();
        if drain_until.is_some_and(|d| now >= d) {
            tracing::warn!(
                pid,
                "output still open after the request's processes were killed; closing it"
            );
            break;
        }
        if !exited && !timed_out && deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            group.signal(libc::SIGTERM);
            kill_at = Some(now + opts.grace);
        }
        if !exited && kill_at.is_some_and(|k| now >= k) {
            kill_at = None;
            group.kill_all();
            kill_main(pidfd);
        }

        let mut wake = drain_until.unwrap_or(now + Duration::from_secs(3600));
        if let Some(d) = deadline.filter(|_| !exited && !timed_out) {
            wake = wake.min(d);
        }
        if let Some(k) = kill_at {
            wake = wake.min(k);
        }
        let timeout_ms = wake
            .saturating_duration_since(now)
            .as_millis()
            .min(i32::MAX as u128) as i32;

        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(5);
        let mut watch = |fd: RawFd, events: libc::c_short| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            })
        };
        for fd in [out.raw(), err.raw()].into_iter().flatten() {
            watch(fd, libc::POLLIN);
        }
        if let Some(f) = &input {
            watch(f.as_raw_fd(), libc::POLLOUT);
        }
        if !exited {
            watch(pidfd.as_raw_fd(), libc::POLLIN);
            if let Some(c) = cancel.filter(|_| !cancelled) {
                watch(c.raw(), libc::POLLIN);
            }
        }
        if let Some(n) = &notifier {
            watch(n.raw(), libc::POLLIN);
        }
        // `sandbox run`'s stderr copy starts with the program's first write (module `tee`).
        let tee = job.tee.as_ref().and_then(|t| t.watched());
        if let Some(fd) = tee {
            watch(fd, libc::POLLIN);
        }
        let n = crate::sys::poll_for(&mut fds, timeout_ms.max(0)).unwrap_or(0);
        if n == 0 {
            continue;
        }
        for p in &fds {
            if p.revents == 0 {
                continue;
            }
            if Some(p.fd) == out.raw() {
                out.pump(&mut scratch);
            } else if Some(p.fd) == err.raw() {
                err.pump(&mut scratch);
            } else if tee == Some(p.fd) {
                if let Some(t) = job.tee.as_mut() {
                    t.ready(p.revents);
                }
            } else if notifier.as_ref().is_some_and(|n| n.raw() == p.fd) {
                let n = notifier.as_mut().expect("checked above");
                // POLLHUP without POLLIN: every process using the filter is gone.
                if p.revents & libc::POLLIN == 0 || !n.handle() {
                    notified = notifier.take().map(|n| n.tally);
                }
            } else if input.as_ref().is_some_and(|f| f.as_raw_fd() == p.fd) {
                let f = input.as_mut().expect("checked above");
                if p.revents & libc::POLLOUT != 0 && written < data.len() {
                    let end = (written + 65536).min(data.len());
                    match std::io::Write::write(f, &data[written..end]) {
                        Ok(k) => written += k,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => written = data.len(),
                    }
                } else {
                    written = data.len();
                }
                if written >= data.len() {
                    input = None;
                }
            }
        }
        if input.is_some() && written >= data.len() {
            input = None;
        }
    }
    drop(input);
    Watched {
        timed_out,
        cancelled,
        notified: notified.or(notifier.take().map(|n| n.tally)),
        out,
        err,
    }
}

/// SIGKILL to the program itself through its pidfd: the timeout and cancellation hold even
/// for a program that left its cgroup or process group (root can move itself out).
fn kill_main(pidfd: &OwnedFd) {
    let _ = crate::sys::pidfd_signal(pidfd.as_fd(), libc::SIGKILL);
}

/// Whether `pid` (our child) has exited, without reaping it: its pid stays reserved until the
/// whole tree is dead, so no process can be mistaken for it.
fn has_exited(pid: i32) -> bool {
    crate::sys::child_has_exited(pid)
}
