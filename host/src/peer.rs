//! Whether the process at the other end of a `sandbox serve --socket` connection runs inside
//! a sandboxed job.
//!
//! The server accepts peers of its own uid only (`SO_PEERCRED`), but a sandboxed command runs
//! as that uid too. One that can reach the socket (under a profile with unix sockets, and the
//! socket's path visible: in the workspace, or anywhere outside `/tmp`) could submit a request
//! with weaker settings (`"profile":"unrestricted","isolation":"off"`) and so run a command
//! outside its own sandbox. Such peers are refused. A peer counts as inside a job when it
//! runs in another PID namespace than the server (every namespaced job does, and its
//! processes cannot leave it), is in a request cgroup of any sandbox host (`sandbox-exec-*`),
//! runs under more seccomp filters than the server or with `no_new_privs` the server lacks
//! (every route that confines installs a filter, `sandbox env`'s preload included, and no
//! process can remove one: this catches what the other marks miss, a static program or a
//! child that dropped `LD_PRELOAD` under a preload-confined shell), or descends from this
//! server (its jobs without namespaces or cgroup). What is read under `/proc` is trusted only
//! while the peer's pidfd shows it alive, so a recycled pid cannot pass for it.

use std::fs;
use std::os::fd::BorrowedFd;

/// Why a peer is refused.
pub(crate) enum Refused {
    /// It runs inside a sandboxed job (or cannot be shown not to): the reason.
    Sandboxed(String),
    /// It exited before it could be checked (a process probing whether a server listens, a
    /// client that gave up): refused all the same, with nobody left to tell.
    Departed(String),
}

/// Why the peer `pid` (as `SO_PEERCRED` gives it) is refused, or `None` when it runs outside
/// every sandboxed job. `pidfd` is the peer's pidfd where the kernel gives one.
pub(crate) fn refusal(pid: i32, pidfd: Option<BorrowedFd<'_>>) -> Option<Refused> {
    let exited = || pidfd.is_some_and(crate::sys::pidfd_exited);
    match reason(pid) {
        // Found inside a job while it could be read: said, even if it has gone since.
        Some(Finding::Inside(why)) => Some(Refused::Sandboxed(why)),
        // Its /proc entries were gone, or it passed and then went: it exited before (or
        // while) it was checked.
        Some(Finding::Unreadable(_)) | None if exited() => Some(Refused::Departed(format!(
            "pid {pid} exited before it could be checked"
        ))),
        Some(Finding::Unreadable(why)) => Some(Refused::Sandboxed(why)),
        None => None,
    }
}

/// What the check of a peer found against it.
enum Finding {
    /// It runs inside a sandboxed job.
    Inside(String),
    /// What shows where it runs could not be read (so it cannot be shown to be outside).
    Unreadable(String),
}

fn reason(pid: i32) -> Option<Finding> {
    if pid <= 0 {
        return Some(Finding::Inside(
            "its process is not visible in this server's PID namespace".into(),
        ));
    }
    let ns = |p: &str| fs::read_link(format!("/proc/{p}/ns/pid"));
    match (ns("self"), ns(&pid.to_string())) {
        (Ok(own), Ok(theirs)) if own == theirs => {}
        (Ok(_), Ok(_)) => {
            return Some(Finding::Inside(format!(
                "pid {pid} runs in another PID namespace, as sandboxed jobs do"
            )))
        }
        (_, Err(e)) | (Err(e), _) => {
            return Some(Finding::Unreadable(format!(
                "cannot read the PID namespace of pid {pid}: {e}"
            )))
        }
    }
    match fs::read_to_string(format!("/proc/{pid}/cgroup")) {
        Ok(c) if c.lines().any(|l| l.contains("/sandbox-exec-")) => {
            return Some(Finding::Inside(format!(
                "pid {pid} is in a sandboxed job's cgroup"
            )));
        }
        Ok(_) => {}
        Err(e) => {
            return Some(Finding::Unreadable(format!(
                "cannot read the cgroups of pid {pid}: {e}"
            )))
        }
    }
    if let Some(found) = confinement_check(pid) {
        return Some(found);
    }
    let own = std::process::id() as i32;
    let mut at = pid;
    // A chain longer than any real one ends the walk (the kernel's pid_max is far above it).
    for _ in 0..4096 {
        let Some(parent) = parent_of(at) else {
            break;
        };
        if parent == own {
            return Some(Finding::Inside(format!(
                "pid {pid} was started by this server's jobs"
            )));
        }
        if parent <= 1 {
            break;
        }
        at = parent;
    }
    None
}

/// What `/proc/.../status` says of a thread's confinement: marks the kernel keeps and no
/// process can take back (a seccomp filter cannot be removed, `no_new_privs` cannot be unset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Confinement {
    /// `Seccomp_filters`: how many seccomp filters the thread runs under.
    filters: u32,
    /// `NoNewPrivs`.
    no_new_privs: bool,
}

impl Confinement {
    /// Parses a `status` file. `None` when a field is missing: `Seccomp_filters` appeared in
    /// Linux 5.9, and without it a filtered peer cannot be told from its server.
    fn parse(status: &str) -> Option<Confinement> {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse::<u32>().ok())
        };
        Some(Confinement {
            filters: field("Seccomp_filters")?,
            no_new_privs: field("NoNewPrivs")? != 0,
        })
    }

    /// The strictest of two threads: the most filters, `no_new_privs` if either has it.
    fn max(self, other: Confinement) -> Confinement {
        Confinement {
            filters: self.filters.max(other.filters),
            no_new_privs: self.no_new_privs || other.no_new_privs,
        }
    }
}

/// The confinement of the thread that runs this check (the server's accept loop), as the
/// peer's is compared with it.
fn own_confinement() -> Result<Confinement, String> {
    let text = fs::read_to_string("/proc/thread-self/status")
        .map_err(|e| format!("cannot read this server's own /proc/thread-self/status: {e}"))?;
    Confinement::parse(&text).ok_or_else(|| {
        "this kernel's /proc/PID/status has no Seccomp_filters or NoNewPrivs (Linux 5.9 or later is needed to compare a peer's seccomp filters with the server's)".to_string()
    })
}

/// The strictest confinement among the threads of `pid`: a thread that connects is not
/// necessarily the main one, and a filter may have been installed on one thread only.
fn peer_confinement(pid: i32) -> Result<Confinement, String> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|e| format!("cannot list the threads of pid {pid}: {e}"))?;
    let mut seen: Option<Confinement> = None;
    for task in tasks.flatten() {
        let path = task.path().join("status");
        match fs::read_to_string(&path) {
            Ok(text) => {
                let c = Confinement::parse(&text).ok_or_else(|| {
                    format!("{} has no Seccomp_filters or NoNewPrivs", path.display())
                })?;
                seen = Some(seen.map_or(c, |s| s.max(c)));
            }
            // A thread that exited while the list was read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        }
    }
    seen.ok_or_else(|| format!("pid {pid} has no thread left to read"))
}

/// Whether `peer` is confined beyond `own` (the server): more seccomp filters, or
/// `no_new_privs` the server does not have. Both marks only grow along a process tree, so a
/// command sandboxed by any route (the preload's filter, the host's outer filter, another
/// tool's) carries more than the process that started the server, while a client started
/// from the same place (the same container, the same agent harness) carries the same.
fn more_confined(pid: i32, peer: Confinement, own: Confinement) -> Option<String> {
    if peer.filters > own.filters {
        return Some(format!(
            "pid {pid} runs under {} seccomp filter{}, this server under {}: a sandbox confines it \
             (only a process with no more filters than the server may connect)",
            peer.filters,
            if peer.filters == 1 { "" } else { "s" },
            own.filters
        ));
    }
    if peer.no_new_privs && !own.no_new_privs {
        return Some(format!(
            "pid {pid} runs with no_new_privs and this server without: a sandbox confines it \
             (only a process without no_new_privs may connect to this server)"
        ));
    }
    None
}

/// The peer `pid` against this server by the marks of confinement: found inside when it is
/// more confined, unreadable when either side's marks cannot be read (refused too).
fn confinement_check(pid: i32) -> Option<Finding> {
    let own = match own_confinement() {
        Ok(c) => c,
        Err(why) => return Some(Finding::Unreadable(why)),
    };
    match peer_confinement(pid) {
        Ok(peer) => more_confined(pid, peer, own).map(Finding::Inside),
        Err(why) => Some(Finding::Unreadable(why)),
    }
}

/// The parent pid in `/proc/PID/stat` (the field after the state, past the command name's
/// closing parenthesis, which may itself contain spaces and parentheses).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The finding's text, whichever kind.
    fn text(f: Option<Finding>) -> Option<String> {
        f.map(|f| match f {
            Finding::Inside(w) | Finding::Unreadable(w) => w,
        })
    }

    #[test]
    fn this_process_and_its_parent_are_outside_any_job() {
        // The test harness's parent (cargo), not this process: other tests of this binary run
        // spawner threads that hold a filter, which every thread's status shows.
        assert_eq!(
            text(reason(std::os::unix::process::parent_id() as i32)),
            None
        );
        assert_eq!(
            text(reason(0)).map(|r| r.contains("not visible")),
            Some(true)
        );
    }

    /// A peer that has exited (its /proc entries gone, as for a second `serve` that probed the
    /// socket) is refused quietly; without a pidfd to show it exited, it is refused aloud.
    /// Control: a live child is refused aloud as one of the server's jobs.
    #[test]
    fn a_peer_gone_before_its_check_is_departed_not_sandboxed() {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id() as i32;
        let pidfd = crate::sys::pidfd_open(pid, 0).unwrap();
        c.wait().unwrap();
        // Reaped: /proc/PID is gone.
        assert!(matches!(reason(pid), Some(Finding::Unreadable(_))));
        use std::os::fd::AsFd;
        assert!(matches!(
            refusal(pid, Some(pidfd.as_fd())),
            Some(Refused::Departed(_))
        ));
        assert!(matches!(refusal(pid, None), Some(Refused::Sandboxed(_))));
        let mut live = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let lpid = live.id() as i32;
        let lfd = crate::sys::pidfd_open(lpid, 0).unwrap();
        let r = refusal(lpid, Some(lfd.as_fd()));
        let _ = live.kill();
        let _ = live.wait();
        assert!(matches!(r, Some(Refused::Sandboxed(w)) if w.contains("started by this server")));
    }

    const STATUS: &str = "Name:\tx\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t3\n";

    #[test]
    fn status_fields_are_read_and_a_missing_one_is_none() {
        assert_eq!(
            Confinement::parse(STATUS),
            Some(Confinement {
                filters: 3,
                no_new_privs: true
            })
        );
        // Before Linux 5.9: no count, so nothing to compare.
        assert_eq!(Confinement::parse("NoNewPrivs:\t0\nSeccomp:\t2\n"), None);
        assert_eq!(
            Confinement::parse("NoNewPrivs:\tx\nSeccomp_filters:\t0\n"),
            None
        );
    }

    /// A peer is refused for more filters, or for `no_new_privs` the server lacks; the same
    /// confinement as the server's (a container's filter on both) passes.
    #[test]
    fn only_a_peer_more_confined_than_the_server_is_refused() {
        let c = |filters, no_new_privs| Confinement {
            filters,
            no_new_privs,
        };
        assert_eq!(more_confined(7, c(0, false), c(0, false)), None);
        assert_eq!(more_confined(7, c(1, false), c(1, false)), None);
        assert_eq!(more_confined(7, c(2, true), c(2, true)), None);
        assert_eq!(more_confined(7, c(1, false), c(2, true)), None);
        let why = more_confined(7, c(2, true), c(1, true)).unwrap();
        assert!(why.contains("pid 7 runs under 2 seccomp filters, this server under 1"));
        let why = more_confined(7, c(1, true), c(1, false)).unwrap();
        assert!(why.contains("no_new_privs"), "{why}");
    }

    /// A real process with `no_new_privs` (set by setpriv, as Landlock and seccomp set it) is
    /// refused for it; the control, the same program without it, is found only as this
    /// process's child.
    #[test]
    fn a_child_with_no_new_privs_is_refused_for_it() {
        if own_confinement().is_ok_and(|c| c.no_new_privs) {
            eprintln!("skipped: this test process runs with no_new_privs, so its children do");
            return;
        }
        let run = |args: &[&str]| {
            let mut c = std::process::Command::new(args[0])
                .args(&args[1..])
                .spawn()
                .unwrap();
            // setpriv execs sleep: wait until the mark (or its absence) is the sleep's.
            let pid = c.id() as i32;
            for _ in 0..500 {
                let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                if comm.trim() == "sleep" {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let why = text(reason(pid));
            let _ = c.kill();
            let _ = c.wait();
            why.unwrap_or_default()
        };
        let why = run(&["setpriv", "--no-new-privs", "sleep", "5"]);
        assert!(why.contains("runs with no_new_privs"), "{why}");
        let why = run(&["sleep", "5"]);
        assert!(
            !why.contains("no_new_privs") && why.contains("started by this server"),
            "{why}"
        );
    }

    #[test]
    fn a_child_of_this_process_counts_as_one_of_its_jobs() {
        let mut c = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let why = text(reason(c.id() as i32));
        let _ = c.kill();
        let _ = c.wait();
        assert!(why.is_some_and(|w| w.contains("started by this server")));
    }
}
