//! The job-wide memory limit where no memory cgroup holds the job: a watchdog thread in the
//! host that sums the anonymous resident memory of the job's processes and ends the job (the
//! direct child, through its pidfd: the rest follows it, module `contain`) when the sum passes
//! the limit.
//!
//! Why not a per-process limit: `RLIMIT_AS` counts reserved address space, and V8 (node), Go
//! and the JVM reserve far more than 512 MiB at start-up (node and go die at start under it);
//! `RLIMIT_DATA` lets them start (measured: node, npm, go build, rustc, java under 512 MiB) but
//! is per process (three processes hold three times the limit) and a refused allocation leaves
//! no trace, so the result could not name it. The watchdog bounds the job as a whole and knows
//! when it fired.
//!
//! What is counted: `RssAnon + RssShmem` of `/proc/PID/status` (the heap, stacks and private
//! copies the job's processes touched, and the shared memory they map: `MAP_SHARED`
//! anonymous memory, memfd and tmpfs mappings), once per process (threads share it); not the
//! page cache of the files they read (`RssFile`), which the kernel reclaims. Pages two
//! processes share (copy-on-write after a fork, a shared mapping) are counted once for each,
//! so the sum errs high. Files in a tmpfs that no process maps are not counted (a private
//! `/tmp` is bounded by its own size, module `view`).
//!
//! When: the interval shrinks as the job nears the limit (the headroom divided by
//! [`FILL_RATE`], between [`MIN_INTERVAL`] and [`MAX_INTERVAL`]), so that a job filling memory
//! at up to that rate is seen before it passes the limit by more than one short interval's
//! worth, while a job far below the limit costs the host a look every quarter second.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The fastest rate at which a job is assumed to fill memory, bytes per second (measured
/// here: one process touching fresh pages, about 2 GiB/s per core).
pub(crate) const FILL_RATE: u64 = 4 << 30;
/// The shortest time between two looks.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// The longest time between two looks.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_millis(250);

/// Where the job's processes are listed from (module `contain` knows which applies).
#[derive(Clone, Debug)]
pub(crate) enum Roster {
    /// The processes of a cgroup v2 (one without the memory controller): `cgroup.procs`.
    Cgroup(PathBuf),
    /// The direct child and its descendants (its PID namespace, or its session and process
    /// group where there is none), by a walk of `/proc`.
    Tree(i32),
}

impl Roster {
    /// The pids of the job's processes now.
    fn pids(&self) -> Vec<i32> {
        match self {
            Roster::Cgroup(dir) => std::fs::read_to_string(dir.join("cgroup.procs"))
                .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
                .unwrap_or_default(),
            Roster::Tree(child) => super::contain::tree_pids(*child),
        }
    }
}

/// What the watchdog saw when it ended the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fired {
    /// The job's anonymous resident memory, bytes.
    pub resident: u64,
    /// How many processes held it.
    pub processes: usize,
}

/// A running watchdog; stopped (and its thread joined) by [`Watchdog::stop`] or on drop.
#[derive(Debug)]
pub(crate) struct Watchdog {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<Option<Fired>>>,
}

/// Whether a watchdog can watch jobs here: this host can read its own `/proc/PID/status`
/// with the resident-memory lines (no `/proc`, or one that hides it, leaves only a
/// per-process limit).
pub(crate) fn available() -> bool {
    std::fs::read_to_string(format!("/proc/{}/status", std::process::id()))
        .ok()
        .and_then(|t| parse_status(&t))
        .is_some()
}

impl Watchdog {
    /// Starts watching the job listed by `roster` against `limit` bytes; `child` is a pidfd of
    /// the job's direct child, which is killed when the limit is passed.
    pub(crate) fn start(limit: u64, roster: Roster, child: OwnedFd) -> std::io::Result<Watchdog> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sandbox-memwatch".into())
            .spawn(move || watch(limit, &roster, &child, &stopped))?;
        Ok(Watchdog {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops the watchdog; whether it ended the job, and what it saw then.
    pub(crate) fn stop(&mut self) -> Option<Fired> {
        drop(self.stop.take());
        self.thread.take().and_then(|t| t.join().ok()).flatten()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}

fn watch(
    limit: u64,
    roster: &Roster,
    child: &OwnedFd,
    stopped: &mpsc::Receiver<()>,
) -> Option<Fired> {
    loop {
        if crate::sys::pidfd_exited(child.as_fd()) {
            return None;
        }
        let (resident, processes) = sample(roster);
        if resident > limit {
            // The pidfd names the unreaped child: no pid reuse can redirect the signal. Its
            // death ends the rest of the job (the namespace's init, or the run's kill_all).
            if crate::sys::pidfd_signal(child.as_fd(), libc::SIGKILL).is_ok() {
                return Some(Fired {
                    resident,
                    processes,
                });
            }
            return None;
        }
        match stopped.recv_timeout(interval(limit - resident)) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => return None,
        }
    }
}

/// The time to the next look with `headroom` bytes left below the limit.
pub(crate) fn interval(headroom: u64) -> Duration {
    let micros = headroom.saturating_mul(1_000_000) / FILL_RATE;
    Duration::from_micros(micros).clamp(MIN_INTERVAL, MAX_INTERVAL)
}

/// The job's counted resident memory in bytes, and the number of processes counted.
fn sample(roster: &Roster) -> (u64, usize) {
    let mut total = 0u64;
    let mut n = 0;
    for pid in roster.pids() {
        // A process that is gone between the listing and the read counts nothing.
        if let Some(bytes) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|t| parse_status(&t))
        {
            total = total.saturating_add(bytes);
            n += 1;
        }
    }
    (total, n)
}

/// `RssAnon + RssShmem` of a `/proc/PID/status` text, in bytes (the kernel writes kB); `None`
/// without both lines (a kernel thread, a zombie, or no such lines).
fn parse_status(text: &str) -> Option<u64> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
    };
    Some(
        field("RssAnon:")?
            .saturating_add(field("RssShmem:")?)
            .saturating_mul(1024),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_gives_the_anonymous_and_shared_resident_memory() {
        let status = "Name:\tx\nVmRSS:\t  900 kB\nRssAnon:\t  300 kB\nRssFile:\t  500 kB\n\
                      RssShmem:\t  100 kB\nThreads:\t2\n";
        assert_eq!(parse_status(status), Some(400 * 1024));
        // A zombie or kernel thread has no such lines; garbage is not a number.
        for bad in [
            "",
            "Name:\tkthreadd\nState:\tS\n",
            "RssAnon:\t300 kB\n",
            "RssAnon:\tx kB\nRssShmem:\t1 kB\n",
            "RssAnon:\t-3 kB\nRssShmem:\t1 kB\n",
        ] {
            assert_eq!(parse_status(bad), None, "{bad:?}");
        }
        assert!(available());
    }

    #[test]
    fn the_interval_shrinks_as_the_job_nears_the_limit() {
        assert_eq!(interval(0), MIN_INTERVAL);
        assert_eq!(interval(u64::MAX), MAX_INTERVAL);
        assert_eq!(interval(FILL_RATE / 8), Duration::from_millis(125));
        assert!(interval(64 << 20) < interval(256 << 20));
    }

    #[test]
    fn a_job_past_the_limit_is_killed_and_one_below_it_is_not() {
        use std::os::unix::process::ExitStatusExt;
        // A process that holds 64 MiB of touched private memory, then sleeps.
        let hold = || {
            std::process::Command::new("python3")
                .args(["-c", "import time; b = b'x' * (64 << 20); time.sleep(30)"])
                .spawn()
                .unwrap()
        };
        let settle = || std::thread::sleep(Duration::from_millis(1500));
        let mut child = hold();
        let pidfd = crate::sys::pidfd_open(child.id() as i32, 0).unwrap();
        settle();
        let mut w = Watchdog::start(32 << 20, Roster::Tree(child.id() as i32), pidfd).unwrap();
        let status = child.wait().unwrap();
        let fired = w.stop().expect("fired");
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(
            fired.resident > 32 << 20 && fired.processes >= 1,
            "{fired:?}"
        );
        // Control: the same job under a limit above what it holds runs on.
        let mut child = hold();
        let pidfd = crate::sys::pidfd_open(child.id() as i32, 0).unwrap();
        settle();
        let mut w = Watchdog::start(256 << 20, Roster::Tree(child.id() as i32), pidfd).unwrap();
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(child.try_wait().unwrap(), None);
        assert_eq!(w.stop(), None);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
