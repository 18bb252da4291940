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
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    Ok(format!("Linux {}", release.trim()))
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
    // SAFETY: gnu_get_libc_version returns a pointer to a static NUL-terminated string.
    let v = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    Some(v.to_string_lossy().into_owned())
}

/// The running glibc's version, when the host itself is linked against glibc.
#[cfg(not(target_env = "gnu"))]
fn libc_version() -> Option<String> {
    None
}

fn seccomp() -> Result<String, Unavailable> {
    // SAFETY: prctl with integer arguments only; PR_GET_SECCOMP reads the calling thread's mode.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    match mode {
        0 => Ok("available (this process is not filtered)".into()),
        2 => Ok("available (this process is already filtered; new filters stack)".into()),
        m if m < 0 => Err(Unavailable::NoSeccomp(
            std::io::Error::last_os_error().to_string(),
        )),
        m => Ok(format!("available (mode {m})")),
    }
}

fn no_new_privs() -> Result<String, String> {
    // SAFETY: prctl with integer arguments only.
    let nnp = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) };
    match nnp {
        0 => Ok("not set (the sandbox sets it for each command)".into()),
        1 => Ok("already set on this process".into()),
        _ => Err(format!(
            "prctl(PR_GET_NO_NEW_PRIVS): {}",
            std::io::Error::last_os_error()
        )),
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
