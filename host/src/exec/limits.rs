//! Resource limits: RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE and RLIMIT_CORE = 0 (a program
//! the filter stops dies of SIGSYS, which would otherwise dump core into its working
//! directory), set in the child between clone and exec; memory and processes, limited for the
//! job as a whole by the request's cgroups where the machine has them (module `contain`), the
//! memory limit otherwise by the host's watchdog (module `memwatch`). No RLIMIT_AS: it counts
//! reserved address space, which V8 (node), the JVM and Go reserve far beyond what they use.

use crate::refusal::Refusal;
use serde::Serialize;

/// Resource-limit overrides; each absent field keeps its default. Its JSON form is the
/// request's `limits` object, read by the same checks (module `schema`) whether it comes inside
/// a request or alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// RLIMIT_CPU in seconds (default: the timeout, rounded up).
    pub cpu_seconds: Option<u64>,
    /// Memory in bytes for the whole job (default 512 MiB): the request cgroup's memory limit
    /// where the machine gives the caller one, else the host's watchdog.
    pub memory_bytes: Option<u64>,
    /// RLIMIT_FSIZE in bytes (default 64 MiB).
    pub fsize_bytes: Option<u64>,
    /// RLIMIT_NOFILE (default: the caller's own soft limit, at least [`DEFAULT_NOFILE`] and
    /// at most [`DEFAULT_NOFILE_CAP`]; see [`default_nofile`]).
    pub nofile: Option<u64>,
    /// Processes and threads the request may have at once, descendants included (cgroup
    /// `pids.max`, v2 or v1; default 1024 where the caller can use a pids controller). Asked
    /// for explicitly where it cannot be enforced, the request is refused.
    pub processes: Option<u64>,
}

/// Default memory limit of a job (cgroup memory, else the watchdog): 512 MiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 512 * 1024 * 1024;
/// Default RLIMIT_FSIZE: 64 MiB.
pub const DEFAULT_FSIZE_BYTES: u64 = 64 * 1024 * 1024;
/// The least default RLIMIT_NOFILE. It was 256, and `npm install` of a large tree with a
/// cold cache failed with `EMFILE` where the caller's own limit let it finish.
pub const DEFAULT_NOFILE: u64 = 4096;
/// The most a default RLIMIT_NOFILE takes from the caller's own limit (containers give
/// 1048576, and some programs close or scan every descriptor up to the limit).
pub const DEFAULT_NOFILE_CAP: u64 = 65536;

/// The default RLIMIT_NOFILE of a request that names none: the caller's own soft limit, the
/// one its programs run with outside, within [`DEFAULT_NOFILE`] and [`DEFAULT_NOFILE_CAP`]
/// (and at most the caller's hard limit when it is set in the child).
pub fn default_nofile() -> u64 {
    crate::sys::rlimit(libc::RLIMIT_NOFILE)
        .map_or(DEFAULT_NOFILE, |r| r.rlim_cur)
        .clamp(DEFAULT_NOFILE, DEFAULT_NOFILE_CAP)
}
/// Smallest memory limit accepted: below it, the smallest programs' start-up (the loader, a
/// shell) would be stopped.
pub const MIN_MEMORY_BYTES: u64 = 32 * 1024 * 1024;
/// Largest RLIMIT_CPU accepted, in seconds.
pub const MAX_CPU_SECONDS: u64 = 86_400;
/// Smallest RLIMIT_NOFILE accepted (stdio, the report descriptor, a few files).
pub const MIN_NOFILE: u64 = 16;
/// Largest RLIMIT_NOFILE accepted.
pub const MAX_NOFILE: u64 = 1 << 20;
/// Default process limit per request (cgroup `pids.max`).
pub const DEFAULT_PROCESSES: u64 = 1024;
/// Largest process limit accepted.
pub const MAX_PROCESSES: u64 = 1 << 16;

/// The limits one request runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Rlimits {
    /// RLIMIT_CPU, seconds (SIGXCPU at this value, SIGKILL one second later).
    pub cpu_seconds: u64,
    /// Memory of the whole job, bytes: the request cgroup's memory limit, else the watchdog's
    /// (`RLIM_INFINITY`: no limit of the sandbox's own).
    pub memory_bytes: u64,
    /// RLIMIT_FSIZE, bytes.
    pub fsize_bytes: u64,
    /// RLIMIT_NOFILE.
    pub nofile: u64,
    /// Processes and threads at once, descendants included (cgroup `pids.max`).
    pub processes: u64,
    /// The process limit was asked for: a machine that cannot enforce it refuses the request
    /// instead of running it without (the default limit is enforced where the machine can).
    pub processes_required: bool,
}

impl Rlimits {
    /// The defaults for a timeout, with `over` applied and checked.
    pub fn resolve(timeout_s: f64, over: &Limits) -> Result<Rlimits, Refusal> {
        let cpu_default = timeout_s.ceil().max(1.0) as u64;
        let r = Rlimits {
            cpu_seconds: over.cpu_seconds.unwrap_or(cpu_default),
            memory_bytes: over.memory_bytes.unwrap_or(DEFAULT_MEMORY_BYTES),
            fsize_bytes: over.fsize_bytes.unwrap_or(DEFAULT_FSIZE_BYTES),
            nofile: over.nofile.unwrap_or_else(default_nofile),
            processes: over.processes.unwrap_or(DEFAULT_PROCESSES),
            processes_required: over.processes.is_some(),
        };
        if !(1..=MAX_PROCESSES).contains(&r.processes) {
            return Err(Refusal::new(
                "limits.processes",
                format!("must be between 1 and {MAX_PROCESSES}"),
            ));
        }
        if !(1..=MAX_CPU_SECONDS).contains(&r.cpu_seconds) {
            return Err(Refusal::new(
                "limits.cpu_seconds",
                format!("must be between 1 and {MAX_CPU_SECONDS}"),
            ));
        }
        if r.memory_bytes < MIN_MEMORY_BYTES {
            return Err(Refusal::new(
                "limits.memory_bytes",
                format!("must be at least {MIN_MEMORY_BYTES} (32 MiB)"),
            ));
        }
        if !(MIN_NOFILE..=MAX_NOFILE).contains(&r.nofile) {
            return Err(Refusal::new(
                "limits.nofile",
                format!("must be between {MIN_NOFILE} and {MAX_NOFILE}"),
            ));
        }
        Ok(r)
    }

    /// The memory limit (`None`: none of the sandbox's own; a value beyond what any machine
    /// has is none either).
    pub(crate) fn memory(&self) -> Option<u64> {
        (self.memory_bytes < i64::MAX as u64).then_some(self.memory_bytes)
    }

    /// The limits to set in the child, `(resource, value)`, memory aside: each capped at the
    /// host's current hard limit (which the child inherits), so an unprivileged host never
    /// fails there; soft and hard are both set, so the program cannot raise them again.
    pub(crate) fn plan(&self) -> std::io::Result<Vec<(libc::c_int, libc::rlimit)>> {
        [
            (
                libc::RLIMIT_CPU,
                self.cpu_seconds,
                self.cpu_seconds.saturating_add(1),
            ),
            (libc::RLIMIT_FSIZE, self.fsize_bytes, self.fsize_bytes),
            (libc::RLIMIT_NOFILE, self.nofile, self.nofile),
            (libc::RLIMIT_CORE, 0, 0),
        ]
        .into_iter()
        .map(|(res, soft, hard)| Ok((res as libc::c_int, capped(res, soft, hard)?)))
        .collect()
    }
}

/// What bounds a request's memory (module `contain` chooses, by what this caller has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemoryBound {
    /// No limit was asked for.
    Unlimited,
    /// The request cgroup's memory limit (v2 or v1): the whole job.
    Cgroup,
    /// The host's watchdog: the whole job (module `memwatch`).
    Watchdog,
    /// No job-wide mechanism here (no memory cgroup, no readable `/proc`): each process's
    /// private writable memory is held to this many bytes by RLIMIT_DATA, which counts no
    /// reserved-but-inaccessible address space (node, Go and the JVM start under it).
    PerProcess(u64),
}

impl MemoryBound {
    /// The limit to set in the child for this bound, if any (capped like [`Rlimits::plan`]'s).
    pub(crate) fn rlimit(self) -> std::io::Result<Option<(libc::c_int, libc::rlimit)>> {
        match self {
            MemoryBound::PerProcess(b) => Ok(Some((
                libc::RLIMIT_DATA as libc::c_int,
                capped(libc::RLIMIT_DATA, b, b)?,
            ))),
            _ => Ok(None),
        }
    }

    /// The warning every run under this bound carries: only a per-process limit is degraded.
    pub(crate) fn warning(self) -> Option<String> {
        match self {
            MemoryBound::PerProcess(b) => Some(format!(
                "sandbox: warning: no job-wide memory limit here (no memory cgroup for this \
                 caller, and /proc cannot be read to watch the job): each process's private \
                 memory was held to {b} bytes (RLIMIT_DATA) instead, so a job of several \
                 processes may use more; delegate the memory controller to bound the job"
            )),
            _ => None,
        }
    }
}

fn capped(resource: crate::sys::Resource, soft: u64, hard: u64) -> std::io::Result<libc::rlimit> {
    let cur = crate::sys::rlimit(resource)?;
    let hard = hard.min(cur.rlim_max);
    Ok(libc::rlimit {
        rlim_cur: soft.min(hard),
        rlim_max: hard,
    })
}
