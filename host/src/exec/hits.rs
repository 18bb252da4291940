//! Which resource limits a run hit, so that a limit never ends in a silent success.
//!
//! Each limit is seen where the kernel or the runtime leaves a trace: the wall-clock timeout and
//! the output cap by the runtime itself; `RLIMIT_CPU` and `RLIMIT_FSIZE` by the signal that
//! ended the program (SIGXCPU, SIGXFSZ); the file-size limit of a descendant (whose signal only
//! its parent sees, and a shell goes on after it) by a file of exactly the limit's size, or
//! larger, changed during the run in the places the program may write: a write the limit stops
//! is cut at the limit, so a file ends exactly there; the memory and process limits by the
//! counters of the request's cgroups (kills by the out-of-memory killer, refused forks). A
//! memory limit enforced as RLIMIT_AS leaves no trace (an allocation fails, the program
//! decides what to do): a program that failed under it gets a warning saying so instead.

use std::path::PathBuf;
use std::time::SystemTime;

/// Most directory entries the file-size check looks at per run: the check must stay cheap for
/// large workspaces; a file beyond them is not found (said in docs/exec.md).
pub(crate) const MAX_SCANNED: usize = 20_000;

/// A limit that was hit, by its name in results (`limits_hit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hit {
    /// The wall-clock timeout.
    Time,
    /// An output stream's cap.
    Output,
    /// RLIMIT_CPU.
    Cpu,
    /// RLIMIT_FSIZE.
    Fsize,
    /// The request cgroup's memory limit (its out-of-memory killer ended a process).
    Memory,
    /// The request cgroup's process limit (a fork was refused).
    Processes,
}

impl Hit {
    /// The name in `limits_hit`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Hit::Time => "time",
            Hit::Output => "output",
            Hit::Cpu => "cpu",
            Hit::Fsize => "fsize",
            Hit::Memory => "memory",
            Hit::Processes => "processes",
        }
    }
}

/// A regular file of at least `limit` bytes, changed at or after `since`, under `roots`
/// (symbolic links are not followed); at most [`MAX_SCANNED`] entries are looked at.
pub(crate) fn file_at_limit(roots: &[PathBuf], limit: u64, since: SystemTime) -> Option<PathBuf> {
    let mut budget = MAX_SCANNED;
    let mut stack: Vec<PathBuf> = roots.to_vec();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if budget == 0 {
                return None;
            }
            budget -= 1;
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                stack.push(e.path());
            } else if kind.is_file() {
                let Ok(m) = e.metadata() else { continue };
                if m.len() >= limit && m.modified().is_ok_and(|t| t >= since) {
                    return Some(e.path());
                }
            }
        }
    }
    None
}

/// The warning line for `hit`, in the caller's terms (`field` names the request field or the
/// flag that sets the limit, when there is one).
pub(crate) fn warning(hit: Hit, detail: &str, field: Option<&str>) -> String {
    let change = field
        .map(|f| format!("; raise {f} if that is expected"))
        .unwrap_or_default();
    let what = match hit {
        Hit::Time => "the time limit ended the program".to_string(),
        Hit::Output => "output beyond the cap was discarded".to_string(),
        Hit::Cpu => "the CPU-time limit ended the program".to_string(),
        Hit::Fsize => format!("a write was cut at the file-size limit{detail}"),
        Hit::Memory => format!("the out-of-memory killer ended {detail}"),
        Hit::Processes => detail.to_string(),
    };
    format!("sandbox: limit hit: {}: {what}{change}", hit.name())
}
