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
    let why = reason(pid);
    if why.is_none() && pidfd.is_some_and(crate::sys::pidfd_exited) {
        return Some(Refused::Departed(format!(
            "pid {pid} exited before it could be checked"
        )));
    }
    why.map(Refused::Sandboxed)
}

fn reason(pid: i32) -> Option<String> {
    if pid <= 0 {
        return Some("its process is not visible in this server's PID namespace".into());
    }
    let ns = |p: &str| fs::read_link(format!("/proc/{p}/ns/pid"));
    match (ns("self"), ns(&pid.to_string())) {
        (Ok(own), Ok(theirs)) if own == theirs => {}
        (Ok(_), Ok(_)) => {
            return Some(format!(
                "pid {pid} runs in another PID namespace, as sandboxed jobs do"
            ))
        }
        (_, Err(e)) | (Err(e), _) => {
            return Some(format!("cannot read the PID namespace of pid {pid}: {e}"))
        }
    }
    match fs::read_to_string(format!("/proc/{pid}/cgroup")) {
        Ok(c) if c.lines().any(|l| l.contains("/sandbox-exec-")) => {
            return Some(format!("pid {pid} is in a sandboxed job's cgroup"));
        }
        Ok(_) => {}
        Err(e) => return Some(format!("cannot read the cgroups of pid {pid}: {e}")),
    }
    let own = std::process::id() as i32;
    let mut at = pid;
    // A chain longer than any real one ends the walk (the kernel's pid_max is far above it).
    for _ in 0..4096 {
        let Some(parent) = parent_of(at) else {
            break;
        };
        if parent == own {
            return Some(format!("pid {pid} was started by this server's jobs"));
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

    #[test]
    fn this_process_and_its_parent_are_outside_any_job() {
        assert_eq!(reason(std::process::id() as i32), None);
        assert_eq!(reason(0).map(|r| r.contains("not visible")), Some(true));
    }

    #[test]
    fn a_child_of_this_process_counts_as_one_of_its_jobs() {
        let mut c = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let why = reason(c.id() as i32);
        let _ = c.kill();
        let _ = c.wait();
        assert!(why.is_some_and(|w| w.contains("started by this server")));
    }
}
