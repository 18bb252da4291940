//! Platform checks: can this machine run the sandbox at all?
//!
//! Linux on x86_64 or aarch64, glibc's loader present (the preload is a glibc library), and
//! seccomp filters usable with the actions the profiles use. Computed once per process.

use sandbox_policy::action::{RET_ERRNO, RET_KILL_PROCESS, RET_LOG, RET_TRAP};
use std::sync::OnceLock;

/// Why the sandbox is unavailable on this machine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unavailable {
    /// Not Linux: seccomp and `LD_PRELOAD` of a glibc library are Linux features.
    #[error("this is {0}, not Linux")]
    NotLinux(&'static str),
    /// A processor architecture the sandbox has no syscall tables for.
    #[error("architecture {0} is not supported (x86_64 and aarch64 are)")]
    UnsupportedArch(&'static str),
    /// glibc's dynamic loader is missing, so the preload cannot be loaded.
    #[error("glibc's loader {0} is missing: the preload needs glibc")]
    NoGlibc(&'static str),
    /// The kernel has no seccomp support (`prctl(PR_GET_SECCOMP)` failed).
    #[error("the kernel has no seccomp support (prctl(PR_GET_SECCOMP): {0})")]
    NoSeccomp(String),
    /// A filter action the profiles rely on is not available in this kernel.
    #[error("the kernel does not support the seccomp action {0}")]
    ActionUnavailable(&'static str),
}

/// One platform check, for `sandbox check`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// What was checked ("kernel", "glibc", "seccomp action trap" ...).
    pub name: &'static str,
    /// Whether the sandbox fails without it (otherwise it is informational or a degraded mode).
    pub required: bool,
    /// What was found (`Ok`) or why it failed (`Err`), one line.
    pub result: Result<String, String>,
}

/// The filter actions checked, with whether the sandbox needs them.
const ACTIONS: &[(&str, u32, bool)] = &[
    ("kill_process", RET_KILL_PROCESS, true),
    ("trap", RET_TRAP, true),
    ("errno", RET_ERRNO, true),
    ("log", RET_LOG, false),
];

/// Checks once per process: Linux, x86_64/aarch64, glibc present, seccomp filters usable.
pub fn check() -> Result<(), Unavailable> {
    static ONCE: OnceLock<Result<(), Unavailable>> = OnceLock::new();
    ONCE.get_or_init(check_now).clone()
}

fn check_now() -> Result<(), Unavailable> {
    os()?;
    arch()?;
    glibc()?;
    seccomp()?;
    for &(name, ret, required) in ACTIONS {
        if required && !sandbox_policy::install::action_available(ret) {
            return Err(Unavailable::ActionUnavailable(name));
        }
    }
    Ok(())
}

/// Every check with its result, for `sandbox check`.
pub fn report() -> Vec<Check> {
    let mut checks = vec![
        Check {
            name: "kernel",
            required: true,
            result: os().map_err(|e| e.to_string()),
        },
        Check {
            name: "architecture",
            required: true,
            result: arch().map_err(|e| e.to_string()),
        },
        Check {
            name: "glibc",
            required: true,
            result: glibc().map_err(|e| e.to_string()),
        },
        Check {
            name: "seccomp",
            required: true,
            result: seccomp().map_err(|e| e.to_string()),
        },
    ];
    for &(name, ret, required) in ACTIONS {
        let result = if sandbox_policy::install::action_available(ret) {
            Ok("available".to_string())
        } else {
            Err(Unavailable::ActionUnavailable(name).to_string())
        };
        checks.push(Check {
            name: action_check_name(name),
            required,
            result,
        });
    }
    checks.push(Check {
        name: "no_new_privs",
        required: false,
        result: no_new_privs(),
    });
    checks.extend(weaknesses());
    checks.push(Check {
        name: "embedded preload",
        required: true,
        result: Ok(format!(
            "{} bytes, sha256 {}",
            crate::embedded::LIBSANDBOX.len(),
            crate::embedded::SHA256_HEX
        )),
    });
    checks
}

/// What weakens the sandbox on this machine, each as a check that is never required: a `warn`
/// line says what it means and what to change.
pub fn weaknesses() -> Vec<Check> {
    let limits = crate::exec::contain::limit_cgroups();
    [
        ("user", user()),
        ("yama", yama()),
        ("seccomp listener", seccomp_listener_check()),
        ("landlock", landlock()),
        ("user namespaces", user_namespaces()),
        ("cgroup v2", cgroup_delegation()),
        ("memory limit", memory_limit(&limits.0)),
        ("process limit", process_limit(&limits.1)),
    ]
    .into_iter()
    .map(|(name, result)| Check {
        name,
        required: false,
        result,
    })
    .collect()
}

/// Whether this process may take another process's descriptors (`pidfd_getfd`), probed once
/// per process; Docker's default seccomp profile refuses the call without `CAP_SYS_PTRACE`.
/// Module `exec::emulate` says what needs it.
pub fn can_take_descriptors() -> bool {
    static CAN: OnceLock<bool> = OnceLock::new();
    *CAN.get_or_init(crate::sys::take_fd_probe)
}

/// Whether a supervisor here could take a job's descriptors (for its connects and sends, its
/// files' flags, its new terminals' peers): a seccomp listener (inside another sandbox there
/// is none, and the descriptor probe is not made: the outer profile would refuse and name
/// it), and `pidfd_getfd`. What a profile under `network: none` may open depends on it
/// (`network::own_network`: unix sockets only where their connects are checked).
pub fn delegable() -> bool {
    seccomp_listener().is_ok() && can_take_descriptors()
}

/// Whether seccomp filters can send refused calls to a listener (user notification), probed
/// once per process. Without it the engine still filters, but refused calls are answered by
/// the filter itself (an errno, or the end of the process) and the host cannot name them.
/// `Err` says why, in words for a warning.
pub fn seccomp_listener() -> Result<(), String> {
    static ONCE: OnceLock<Result<(), String>> = OnceLock::new();
    ONCE.get_or_init(|| {
        crate::sys::seccomp_listener_probe().map_err(|e| {
            // EBUSY is the kernel's one-listener-per-filter-chain rule: the process runs
            // under another supervisor's filter (a sandbox around this one).
            let why = if e == libc::EBUSY {
                "a seccomp filter this process runs under has a listener already (a sandbox \
                 or supervisor around this one; the kernel allows one per process)"
            } else {
                "the container's runtime or seccomp profile refuses it, as gVisor does, or \
                 the kernel is older than 5.0"
            };
            format!(
                "seccomp user notification unavailable (seccomp() with \
                 SECCOMP_FILTER_FLAG_NEW_LISTENER: {}; {why})",
                std::io::Error::from_raw_os_error(e)
            )
        })
    })
    .clone()
}

fn seccomp_listener_check() -> Result<String, String> {
    seccomp_listener()
        .map(|()| "available: refused calls are named by the host".to_string())
        .map_err(|why| {
            format!(
                "{why}: refused calls get the profile's errno (or end the program with \
                 SIGSYS under --on-violation kill) and are named only from the program's exit"
            )
        })
}

/// Whether this process runs with the effective uid of root.
pub fn running_as_root() -> bool {
    crate::sys::euid() == 0
}

/// The one-line warning `sandbox run` prints as root (without `--allow-root`).
pub const ROOT_WARNING: &str = "warning: running as root: the program keeps root's permissions, so it can read and change every file and process the profile's filter lets it reach; run as an unprivileged user, or pass --allow-root to silence";

fn user() -> Result<String, String> {
    let uid = crate::sys::euid();
    if uid == 0 {
        return Err("running as root: sandboxed programs keep root's permissions and can read and write every file the filter lets them open; run agents as an unprivileged user".into());
    }
    Ok(format!("uid {uid}, not root"))
}

fn yama() -> Result<String, String> {
    const WHY: &str = "a program can read and write the memory of any dumpable process of the same user through /proc/PID/mem (opening files is allowed)";
    match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        Err(_) => Err(format!(
            "Yama is not loaded: {WHY}; enable Yama (lsm= boot parameter) and set kernel.yama.ptrace_scope=1"
        )),
        Ok(v) => match v.trim() {
            "0" => Err(format!(
                "kernel.yama.ptrace_scope is 0: {WHY}; set kernel.yama.ptrace_scope=1 (sysctl)"
            )),
            "1" => Ok("ptrace_scope 1: only a process's ancestors can trace it or open its memory".into()),
            "2" => Ok("ptrace_scope 2: only administrators can trace processes or open their memory".into()),
            "3" => Ok("ptrace_scope 3: no process can be traced or have its memory opened".into()),
            other => Ok(format!("ptrace_scope {other}")),
        },
    }
}

/// The Landlock ABI version the kernel offers, or the errno of the probe.
pub fn landlock_abi() -> Result<i64, i32> {
    crate::sys::landlock_abi()
}

fn landlock() -> Result<String, String> {
    // securityfs is not always mounted; the list is shown when it can be read.
    let lsms = std::fs::read_to_string("/sys/kernel/security/lsm")
        .map(|l| format!(" (active security modules: {})", l.trim()))
        .unwrap_or_default();
    match landlock_abi() {
        Ok(kernel) => {
            // As the layer would use it: SANDBOX_LANDLOCK_MAX_ABI lowers it.
            let abi = crate::landlock::max_abi_from_env().map_or(kernel, |m| kernel.min(m.into()));
            let lsms = if abi < kernel {
                format!("{lsms} (kernel ABI {kernel}, limited by SANDBOX_LANDLOCK_MAX_ABI)")
            } else {
                lsms
            };
            let missing: Vec<String> = crate::landlock::FEATURES
                .iter()
                .filter(|f| i64::from(f.abi) > abi)
                .map(|f| format!("{} (ABI {}, Linux {})", f.what, f.abi, f.linux))
                .collect();
            if missing.is_empty() {
                Ok(format!("ABI {abi}{lsms}: every feature the layer uses"))
            } else {
                Err(format!(
                    "ABI {abi}{lsms}: missing {}; --landlock required refuses to run here, preferred runs without them and says so",
                    missing.join(", ")
                ))
            }
        }
        Err(libc::EOPNOTSUPP) => Err(format!(
            "Landlock is built in but not enabled{lsms}: file access is limited by the syscall filter alone; add landlock to the lsm= boot parameter"
        )),
        Err(e) => Err(format!(
            "the kernel has no Landlock ({}): file access is limited by the syscall filter alone; use Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK",
            std::io::Error::from_raw_os_error(e)
        )),
    }
}

/// Reads a sysctl under /proc/sys as a trimmed string; `None` when it does not exist.
fn sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|v| v.trim().to_string())
}

/// Whether this caller can create a user namespace: the sysctls that turn them off, then the
/// call itself (in a child).
fn user_namespaces() -> Result<String, String> {
    const WHY: &str = "unprivileged user namespaces are off, so namespace isolation is unavailable to unprivileged users";
    if sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Err(format!(
            "{WHY}: kernel.unprivileged_userns_clone is 0; set it to 1 (sysctl)"
        ));
    }
    let max = sysctl("/proc/sys/user/max_user_namespaces");
    if max.as_deref() == Some("0") {
        return Err(format!(
            "{WHY}: user.max_user_namespaces is 0; raise it (sysctl)"
        ));
    }
    if sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return Err(format!(
            "{WHY}: AppArmor restricts them (kernel.apparmor_restrict_unprivileged_userns is 1); set it to 0 or give the sandbox an AppArmor profile with the userns permission"
        ));
    }
    // The sysctls allow them, but a container's seccomp profile (Docker's default, without
    // CAP_SYS_ADMIN) may refuse the call itself: the line says what a run will find.
    if let Err(e) = crate::sys::unshare_probe(libc::CLONE_NEWUSER) {
        return Err(format!(
            "creating a user namespace is refused here ({e}) although the sysctls allow it, so \
             namespace isolation is unavailable; the isolation lines say why"
        ));
    }
    Ok(match max {
        Some(m) => format!("unprivileged user namespaces allowed (user.max_user_namespaces {m})"),
        None => "unprivileged user namespaces allowed".into(),
    })
}

/// Whether the caller can create a cgroup in its own cgroup v2 directory (a probe directory is
/// created and removed at once).
fn cgroup_delegation() -> Result<String, String> {
    const WHY: &str = "exec cannot hold a request's processes in a cgroup and falls back to finding them through /proc (docs/exec.md)";
    let mount = crate::mountinfo::read().and_then(|t| crate::mountinfo::cgroup2(&t));
    let Some(mount) = mount else {
        return Err(format!(
            "no cgroup v2 hierarchy is mounted: {WHY}; boot with the unified hierarchy (in a container: a cgroup v2 of its own at /sys/fs/cgroup, which Docker and Kubernetes mount on a cgroup v2 host)"
        ));
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let Some(rel) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
        return Err(format!("this process has no cgroup v2 path: {WHY}"));
    };
    let rel = rel.trim_start_matches('/');
    let dir = if rel.is_empty() {
        mount
    } else {
        mount.join(rel)
    };
    let probe = dir.join(format!(".sandbox-check-{}", std::process::id()));
    match std::fs::create_dir(&probe) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&probe);
            Ok(format!("can create cgroups under {}", dir.display()))
        }
        Err(e) => Err(format!(
            "cannot create a cgroup under {} ({e}): {WHY}; delegate a cgroup v2 subtree to this user (systemd: Delegate=yes)",
            dir.display()
        )),
    }
}

/// How exec requests get their memory limit here: a cgroup, the host's watchdog, or (no
/// readable `/proc`) a per-process limit.
fn memory_limit(cgroup: &Option<String>) -> Result<String, String> {
    match cgroup {
        Some(c) => Ok(c.clone()),
        None if crate::exec::contain::memory_watchable() => Err(
            "no memory cgroup for this caller: limits.memory_bytes (default 512 MiB) bounds \
             the whole job through the host's watchdog, which sums its processes' resident \
             memory every 10-250 ms and ends the job past the limit (files in a tmpfs are not \
             counted; docs/exec.md); delegate the memory controller (systemd: Delegate=yes) \
             for a limit the kernel enforces"
                .into(),
        ),
        None => Err(
            "no memory cgroup for this caller and no readable /proc: limits.memory_bytes \
             (default 512 MiB) holds each process's private memory (RLIMIT_DATA), not the \
             job's (docs/exec.md); delegate the memory controller (systemd: Delegate=yes)"
                .into(),
        ),
    }
}

/// How exec requests get their process limit here: a cgroup, `RLIMIT_NPROC` in the isolation
/// layer's user namespace, or none. The fallback is promised only where a run gets that user
/// namespace (the namespace probe, as the engine decides it): in a container whose seccomp
/// profile refuses namespaces, or whose masked `/proc` refuses a fresh one, runs are in the
/// contained tier and the engine refuses an explicit limit, whatever the sysctls allow.
fn process_limit(cgroup: &Option<String>) -> Result<String, String> {
    match cgroup {
        Some(c) => Ok(c.clone()),
        None if !running_as_root() && runs_get_a_user_namespace() => Ok(
            "RLIMIT_NPROC in each request's user namespace (no pids controller for this caller; \
             a request with isolation off has no process limit)"
                .into(),
        ),
        None => Err(
            "no pids controller for this caller: requests have no process limit and \
             an explicit limits.processes is refused (docs/exec.md); delegate the pids \
             controller (systemd: Delegate=yes)"
                .into(),
        ),
    }
}

/// Whether a default run here gets the isolation layer's user namespace: the sysctls allow
/// them and the namespace probe (run once per process, as the engine uses it) succeeds.
fn runs_get_a_user_namespace() -> bool {
    user_namespaces().is_ok() && crate::exec::isolation::unavailable().is_none()
}

fn action_check_name(action: &str) -> &'static str {
    match action {
        "kill_process" => "seccomp action kill_process",
        "trap" => "seccomp action trap",
        "errno" => "seccomp action errno",
        _ => "seccomp action log",
    }
}

fn os() -> Result<String, Unavailable> {
    if std::env::consts::OS != "linux" {
        return Err(Unavailable::NotLinux(std::env::consts::OS));
    }
    Ok(format!("Linux {}", crate::sys::kernel_release().trim()))
}

fn arch() -> Result<String, Unavailable> {
    match std::env::consts::ARCH {
        a @ ("x86_64" | "aarch64") => Ok(a.to_string()),
        other => Err(Unavailable::UnsupportedArch(other)),
    }
}

fn glibc() -> Result<String, Unavailable> {
    let loader = crate::admission::host_loader();
    if std::fs::metadata(loader).is_err() {
        return Err(Unavailable::NoGlibc(loader));
    }
    Ok(match libc_version() {
        Some(v) => format!("glibc {v}, loader {loader}"),
        None => format!("loader {loader}"),
    })
}

/// The running glibc's version, when the host itself is linked against glibc.
#[cfg(target_env = "gnu")]
fn libc_version() -> Option<String> {
    Some(crate::sys::glibc_version())
}

/// The running glibc's version, when the host itself is linked against glibc.
#[cfg(not(target_env = "gnu"))]
fn libc_version() -> Option<String> {
    None
}

fn seccomp() -> Result<String, Unavailable> {
    match crate::sys::seccomp_mode() {
        Ok(0) => Ok("available (this process is not filtered)".into()),
        Ok(2) => Ok("available (this process is already filtered; new filters stack)".into()),
        Err(e) => Err(Unavailable::NoSeccomp(e.to_string())),
        Ok(m) => Ok(format!("available (mode {m})")),
    }
}

fn no_new_privs() -> Result<String, String> {
    match crate::sys::no_new_privs() {
        Ok(0) => Ok("not set (the sandbox sets it for each command)".into()),
        Ok(1) => Ok("already set on this process".into()),
        Ok(n) => Err(format!("prctl(PR_GET_NO_NEW_PRIVS): unexpected {n}")),
        Err(e) => Err(format!("prctl(PR_GET_NO_NEW_PRIVS): {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_is_supported() {
        assert_eq!(check(), Ok(()));
        let report = report();
        assert!(
            report.iter().all(|c| !c.required || c.result.is_ok()),
            "{report:?}"
        );
    }
}
