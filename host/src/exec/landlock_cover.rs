//! Which missing Landlock protections a run's other layers give anyway, so that a kernel with
//! an older Landlock ABI (Linux 6.1 microVM guests have ABI 2: no TCP rules, no scopes) warns
//! only about what the run really lacks:
//!
//! - TCP restriction (ABI 4): a profile whose filter refuses TCP sockets (`socket(AF_INET or
//!   AF_INET6, SOCK_STREAM)`: `minimal`, `shell`) makes none to restrict; a network namespace
//!   holding only loopback (`network none`, or the proxy's namespace) reaches no TCP port of the
//!   host or beyond, whatever Landlock says;
//! - abstract unix socket scoping (ABI 6): abstract sockets belong to a network namespace, so a
//!   namespace of the run's own has none of the host's;
//! - signal scoping (ABI 6): a PID namespace of the run's own cannot name a process outside it;
//! - truncate restriction (ABI 3): with the host tree mounted read-only, only the writable set
//!   (where Landlock would allow truncation too) can be truncated.
//!
//! Device ioctls (ABI 5) are not covered (the fresh `/dev` still holds terminals), nor are file
//! reads and writes (ABI 1; the read-only tree does not hide credentials): those stay named.
//! `--landlock required` is unchanged: it asks for the layer itself.

/// The run's other layers that held.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Others {
    /// A PID namespace of the run's own.
    pub pid_namespace: bool,
    /// A network namespace of the run's own.
    pub net_namespace: bool,
    /// The host tree mounted read-only outside the writable set.
    pub read_only_root: bool,
    /// The run's filter refuses TCP sockets of both address families.
    pub no_tcp_sockets: bool,
}

/// Whether `sandbox`'s filter refuses `socket(AF_INET or AF_INET6, SOCK_STREAM, 0)` (no filter:
/// no).
pub(super) fn filter_refuses_tcp(sandbox: &crate::Sandbox) -> bool {
    use crate::policy::{Action, NATIVE};
    let Some(policy) = sandbox.profile_policy() else {
        return false;
    };
    let Some(nr) = NATIVE.syscall_number("socket") else {
        return false;
    };
    [libc::AF_INET, libc::AF_INET6].iter().all(|&family| {
        let args = [family as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0];
        policy.decide(nr, &args) != Action::Allow
    })
}

/// What covers the missing protection `missing` (as `landlock::prepare` words it, e.g.
/// `Landlock ABI 4 (TCP restriction)`) in a run with `others`, if anything does.
fn cover(missing: &str, others: Others) -> Option<&'static str> {
    let words = missing.rsplit_once('(')?.1.strip_suffix(')')?;
    match words {
        "TCP restriction" if others.no_tcp_sockets => Some("the profile's filter (no TCP sockets)"),
        "TCP restriction" if others.net_namespace => Some("the network namespace"),
        "abstract unix socket scoping" if others.net_namespace => Some("the network namespace"),
        "signal scoping" if others.pid_namespace => Some("the PID namespace"),
        "truncate restriction" if others.read_only_root => Some("the read-only host tree"),
        _ => None,
    }
}

/// `missing` split into what the run lacks and what its other layers give, the latter as
/// `what (by LAYER)`.
pub(super) fn split(missing: &[String], others: Others) -> (Vec<String>, Vec<String>) {
    let mut lacking = Vec::new();
    let mut covered = Vec::new();
    for m in missing {
        match cover(m, others) {
            Some(by) => covered.push(format!("{m} by {by}")),
            None => lacking.push(m.clone()),
        }
    }
    (lacking, covered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn missing() -> Vec<String> {
        [
            "Landlock ABI 3 (truncate restriction)",
            "Landlock ABI 5 (device ioctl restriction)",
            "Landlock ABI 4 (TCP restriction)",
            "Landlock ABI 6 (signal scoping)",
            "Landlock ABI 6 (abstract unix socket scoping)",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn only_layers_that_held_cover_and_device_ioctls_never_are() {
        let (lacking, covered) = split(&missing(), Others::default());
        assert_eq!(lacking, missing());
        assert!(covered.is_empty());
        let all = Others {
            pid_namespace: true,
            net_namespace: true,
            read_only_root: true,
            no_tcp_sockets: false,
        };
        let (lacking, covered) = split(&missing(), all);
        assert_eq!(lacking, ["Landlock ABI 5 (device ioctl restriction)"]);
        assert_eq!(covered.len(), 4);
        assert!(covered
            .iter()
            .any(|c| c == "Landlock ABI 4 (TCP restriction) by the network namespace"));
        let pid_only = Others {
            pid_namespace: true,
            ..Others::default()
        };
        let (lacking, covered) = split(&missing(), pid_only);
        assert_eq!(lacking.len(), 4);
        assert_eq!(
            covered,
            ["Landlock ABI 6 (signal scoping) by the PID namespace"]
        );
        let no_tcp = Others {
            no_tcp_sockets: true,
            ..Others::default()
        };
        let (_, covered) = split(&missing(), no_tcp);
        assert_eq!(
            covered,
            ["Landlock ABI 4 (TCP restriction) by the profile's filter (no TCP sockets)"]
        );
    }

    #[test]
    fn the_filters_tcp_cover_follows_the_profile() {
        use crate::{Options, Profile, Sandbox};
        let of = |name: &str| {
            let options = Options::new(Profile::builtin(name).unwrap());
            filter_refuses_tcp(&Sandbox::new(options).unwrap())
        };
        assert!(of("minimal"));
        assert!(!of("network"));
        assert!(!of("unrestricted"));
    }
}
