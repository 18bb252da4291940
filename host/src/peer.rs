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
//! or descends from this server (its jobs without namespaces or cgroup). What is read under
//! `/proc` is trusted only while the peer's pidfd shows it alive, so a recycled pid cannot
//! pass for it.

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
        assert_eq!(text(reason(std::process::id() as i32)), None);
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
