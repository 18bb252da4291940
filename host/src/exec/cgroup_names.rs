//! Names of request cgroups: which host process a request cgroup belongs to, and removing
//! those of hosts that are gone. Shared by the v2 (contain.rs) and v1 (cgroup1.rs) layers.

use std::fs;
use std::path::Path;
use std::sync::OnceLock;

/// `/proc/self/cgroup`, read once for the v2 layer and both v1 controllers (it does not change
/// for a host that does not move itself).
pub(super) fn own_cgroups() -> Option<&'static str> {
    static TEXT: OnceLock<Option<String>> = OnceLock::new();
    TEXT.get_or_init(|| fs::read_to_string("/proc/self/cgroup").ok())
        .as_deref()
}

/// Removes the empty request cgroups left by hosts that are gone (killed before their exit
/// handler ran). A cgroup that still has processes cannot be removed and stays.
pub(super) fn remove_stale(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("sandbox-exec-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir(e.path());
        }
    }
}

/// Whether this host looks for request cgroups left by hosts that are gone: about one host
/// process in 16, told by a hash of its pid (so that pids that advance by a fixed step, as
/// when each run starts the same number of processes, still reach it), so that a one-shot run
/// does not list the host's cgroup directories and test each name's pid every time. Stale
/// ones are empty directories, left only by hosts killed before their exit handler ran: they
/// wait a few more runs.
pub(super) fn stale_scan_due() -> bool {
    std::process::id().wrapping_mul(0x9E37_79B1) >> 28 == 0
}

/// Request cgroups of this host process are named `sandbox-exec-<host pid>-<n>`.
pub(super) fn prefix() -> String {
    format!("sandbox-exec-{}-", std::process::id())
}
