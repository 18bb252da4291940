//! The job-wide memory limit where no memory cgroup holds the job: a watchdog thread in the
//! host that sums the anonymous resident memory of the job's processes and ends the job when
//! the sum passes the limit: the direct child, through its pidfd, where the rest follows it (a
//! one-shot's namespace init or its `kill_all`, module `contain`), or every process it counted
//! ([`Ends::Every`]: a session command, whose processes outlive its first one).
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

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The fastest rate at which a job is assumed to fill memory, bytes per second: ten times what
/// one process touching fresh pages reached on the 2-core development VM (0.4 GiB/s, C and
/// python alike), for machines with more and faster cores.
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
    Tree(Tree),
}

/// What the watchdog ends when the limit is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ends {
    /// The direct child: its death ends the rest (a one-shot run's init or `kill_all`).
    Child,
    /// The direct child and every process counted with it (a session command: nothing else
    /// ends the processes it started, which the session's init keeps running).
    Every,
}

impl Roster {
    /// The processes led by `child`, found by a walk of `/proc`.
    pub(crate) fn tree(child: i32) -> Roster {
        Roster::Tree(Tree {
            child,
            known: HashMap::new(),
        })
    }

    /// The pids of the job's processes now.
    fn pids(&mut self) -> Vec<i32> {
        match self {
            Roster::Cgroup(dir) => cgroup_pids(dir),
            Roster::Tree(t) => t.pids(),
        }
    }

    /// The job's processes now, each with its start time (`/proc/PID/stat`'s 22nd field) as
    /// first seen, which tells the process apart from a later one given the same pid.
    fn members(&mut self) -> Vec<(i32, u64)> {
        match self {
            Roster::Cgroup(dir) => cgroup_pids(dir)
                .into_iter()
                .filter_map(|p| crate::exec::procfs::stat(p).map(|st| (p, st.start)))
                .collect(),
            Roster::Tree(t) => {
                t.pids();
                t.known
                    .iter()
                    .filter(|(_, k)| k.member)
                    .map(|(pid, k)| (*pid, k.start))
                    .collect()
            }
        }
    }
}

/// The processes of the cgroup `dir`, and of the cgroups made below it when there are any
/// (a session's resident and commands, module `cgroup_nest`).
fn cgroup_pids(dir: &std::path::Path) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default();
    if super::cgroup_nest::is_marked(dir) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    pids.extend(cgroup_pids(&e.path()));
                }
            }
        }
    }
    pids
}

/// The job's processes as `contain`'s process-tree walk tells them (the child, its session
/// and process group, and whatever descends from them), kept between looks: each pid is
/// classified once, when it first appears in `/proc`, and forgotten when it leaves. Reading
/// `/proc/PID/stat` of every process of the machine on every look cost the host 3 to 4 ms
/// (about 110 processes); listing `/proc` costs about 0.15 ms. A pid is reused only after the
/// kernel's allocator has gone round every pid (`pid_max`), which takes far longer than a
/// look's interval, so a pid that stayed listed is the process first classified.
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    child: i32,
    /// Whether each pid listed at the last look is the job's, and when it started.
    known: HashMap<i32, Known>,
}

/// What the tree knows of one pid.
#[derive(Clone, Copy, Debug)]
struct Known {
    member: bool,
    start: u64,
}

impl Tree {
    fn pids(&mut self) -> Vec<i32> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let listed: HashSet<i32> = dir
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
            .collect();
        self.known.retain(|pid, _| listed.contains(pid));
        let me = std::process::id() as i32;
        // New pids, classified by their parent: a parent seen before decides at once, one new
        // too decides once it is classified (in pid order, parents usually first).
        let mut new: Vec<(i32, crate::exec::procfs::Stat)> = listed
            .iter()
            .filter(|p| !self.known.contains_key(p))
            .filter_map(|&p| crate::exec::procfs::stat(p).map(|st| (p, st)))
            .collect();
        new.sort_by_key(|(p, _)| *p);
        loop {
            let before = new.len();
            new.retain(|(pid, st)| {
                let own = *pid == self.child
                    || (*pid != me && (st.sid == self.child || st.pgrp == self.child));
                let parent = self.known.get(&st.ppid).map(|k| k.member);
                let member = match (own, parent) {
                    (true, _) => true,
                    (false, Some(member)) => member && *pid != me,
                    (false, None) => return true,
                };
                self.known.insert(
                    *pid,
                    Known {
                        member,
                        start: st.start,
                    },
                );
                false
            });
            if new.is_empty() || new.len() == before {
                break;
            }
        }
        // Left: parents neither known nor new (gone, or outside /proc's view): not the job's.
        for (pid, st) in new {
            self.known.insert(
                pid,
                Known {
                    member: false,
                    start: st.start,
                },
            );
        }
        self.known
            .iter()
            .filter(|(_, k)| k.member)
            .map(|(pid, _)| *pid)
            .collect()
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
    let mut buf = [0u8; STATUS_MAX];
    crate::exec::procfs::read_proc(&format!("/proc/{}/status", std::process::id()), &mut buf)
        .and_then(parse_status)
        .is_some()
}

impl Watchdog {
    /// Starts watching the job listed by `roster` against `limit` bytes; `child` is a pidfd of
    /// the job's direct child, which is killed when the limit is passed (with every process
    /// of the roster for [`Ends::Every`]).
    pub(crate) fn start(
        limit: u64,
        roster: Roster,
        child: OwnedFd,
        ends: Ends,
    ) -> std::io::Result<Watchdog> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sandbox-memwatch".into())
            .spawn(move || watch(limit, roster, &child, ends, &stopped))?;
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
    mut roster: Roster,
    child: &OwnedFd,
    ends: Ends,
    stopped: &mpsc::Receiver<()>,
) -> Option<Fired> {
    loop {
        if crate::sys::pidfd_exited(child.as_fd()) {
            return None;
        }
        let (resident, processes) = sample(&mut roster);
        if resident > limit {
            // The pidfd names the unreaped child: no pid reuse can redirect the signal. Its
            // death ends the rest of the job (the namespace's init, or the run's kill_all).
            if crate::sys::pidfd_signal(child.as_fd(), libc::SIGKILL).is_ok() {
                if ends == Ends::Every {
                    kill_every(&mut roster);
                }
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

/// How many times [`kill_every`] lists the job again for processes started meanwhile.
const KILL_ROUNDS: usize = 20;

/// Kills every process `roster` lists as the job's, listing again until none is left alive
/// (a process forking while it is killed adds one), at most [`KILL_ROUNDS`] times. Each is
/// signalled through a pidfd opened first and then checked against the start time the roster
/// saw, so a pid the kernel gave to another process meanwhile is left alone.
fn kill_every(roster: &mut Roster) {
    for _ in 0..KILL_ROUNDS {
        let mut alive = 0;
        for (pid, start) in roster.members() {
            let Ok(fd) = crate::sys::pidfd_open(pid, 0) else {
                continue;
            };
            let same = crate::exec::procfs::stat(pid)
                .is_some_and(|st| st.start == start && st.state != 'Z');
            if same && crate::sys::pidfd_signal(fd.as_fd(), libc::SIGKILL).is_ok() {
                alive += 1;
            }
        }
        if alive == 0 {
            return;
        }
        // The signalled ones become zombies (their reaper runs elsewhere); a fork that was
        // under way shows up at the next listing.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The time to the next look with `headroom` bytes left below the limit.
pub(crate) fn interval(headroom: u64) -> Duration {
    let micros = headroom.saturating_mul(1_000_000) / FILL_RATE;
    Duration::from_micros(micros).clamp(MIN_INTERVAL, MAX_INTERVAL)
}

/// The job's counted resident memory in bytes, and the number of processes counted.
fn sample(roster: &mut Roster) -> (u64, usize) {
    let mut total = 0u64;
    let mut n = 0;
    let mut buf = [0u8; STATUS_MAX];
    for pid in roster.pids() {
        // A process that is gone between the listing and the read counts nothing.
        if let Some(bytes) =
            crate::exec::procfs::read_proc(&format!("/proc/{pid}/status"), &mut buf)
                .and_then(parse_status)
        {
            total = total.saturating_add(bytes);
            n += 1;
        }
    }
    (total, n)
}

/// Room for `/proc/PID/status` (about 1.5 KiB; longer with many supplementary groups).
const STATUS_MAX: usize = 16 * 1024;

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
    fn proc_files_are_read_whole_or_not_at_all() {
        let mut buf = [0u8; STATUS_MAX];
        let own = crate::exec::procfs::read_proc("/proc/self/status", &mut buf)
            .unwrap()
            .to_string();
        assert!(own.starts_with("Name:") && own.ends_with('\n'), "{own}");
        assert!(parse_status(&own).is_some());
        // Too small a buffer: nothing rather than a cut text; a missing file: nothing.
        let mut small = [0u8; 64];
        assert_eq!(
            crate::exec::procfs::read_proc("/proc/self/status", &mut small),
            None
        );
        assert_eq!(
            crate::exec::procfs::read_proc("/proc/0/status", &mut buf),
            None
        );
    }

    #[test]
    fn the_interval_shrinks_as_the_job_nears_the_limit() {
        assert_eq!(interval(0), MIN_INTERVAL);
        assert_eq!(interval(u64::MAX), MAX_INTERVAL);
        assert_eq!(interval(FILL_RATE / 8), Duration::from_millis(125));
        assert!(interval(64 << 20) < interval(256 << 20));
    }

    #[test]
    fn the_tree_finds_the_descendants_born_later_and_nothing_else() {
        use std::process::Command;
        // A job that starts one sleep now and another a second later; an unrelated sleep
        // beside it (the control: a process of the same user and session that is not its).
        let mut job = Command::new("bash")
            .args(["-c", "sleep 30 & sleep 1; sleep 30 & wait"])
            .spawn()
            .unwrap();
        let mut other = Command::new("sleep").arg("30").spawn().unwrap();
        let children = |pid: u32| -> Vec<i32> {
            let mut all = Vec::new();
            for e in std::fs::read_dir("/proc").unwrap().flatten() {
                let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                    continue;
                };
                if crate::exec::procfs::stat(p).is_some_and(|s| s.ppid == pid as i32) {
                    all.push(p);
                }
            }
            all
        };
        std::thread::sleep(Duration::from_millis(300));
        let mut roster = Roster::tree(job.id() as i32);
        let first = roster.pids();
        std::thread::sleep(Duration::from_millis(1500));
        let later = roster.pids();
        let kids = children(job.id());
        let _ = (other.kill(), job.kill());
        let _ = (other.wait(), job.wait());
        assert!(first.contains(&(job.id() as i32)), "{first:?}");
        assert_eq!(kids.len(), 2, "{kids:?}");
        for k in &kids {
            assert!(later.contains(k), "{k} in {later:?}");
        }
        // The second sleep was born after the first look (the short sleep before it is gone).
        assert!(
            later.iter().any(|p| !first.contains(p)),
            "{first:?} {later:?}"
        );
        for outside in [other.id() as i32, std::process::id() as i32] {
            assert!(!later.contains(&outside), "{outside} in {later:?}");
        }
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
        let mut w = Watchdog::start(
            32 << 20,
            Roster::tree(child.id() as i32),
            pidfd,
            Ends::Child,
        )
        .unwrap();
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
        let mut w = Watchdog::start(
            256 << 20,
            Roster::tree(child.id() as i32),
            pidfd,
            Ends::Child,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(child.try_wait().unwrap(), None);
        assert_eq!(w.stop(), None);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
