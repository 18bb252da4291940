//! How the emulation's refusals reach the request: counted per (call, reason, program), and
//! worded with the change that allows them.

use super::claims::{makes_unix_sockets, numbers};
use super::places::{Refused, Why};

/// The warning of a contained-tier run whose metadata calls and connects cannot reach the host
/// (a filter attached in the child that cannot hand its listener to the host, or cannot carry
/// the claims; a session without a listener): the protection is missing, and
/// the run says so. `None` when the profile allows none of the calls (nothing is missing).
/// `listener` is false where seccomp filters can have no listener (inside another sandbox,
/// whose supervisor holds it): the warning then says that instead.
pub(crate) fn unguarded(
    sandbox: &crate::sandbox::Sandbox,
    audience: crate::exec::request::Audience,
    listener: bool,
) -> Option<String> {
    let policy = sandbox.profile_policy()?;
    let metadata = !numbers(policy).is_empty();
    // Unix sockets are only at stake where the profile lets the job make them.
    let sockets = makes_unix_sockets(policy);
    let what = match (metadata, sockets) {
        (false, false) => return None,
        (true, false) => {
            "metadata outside the writable places is unguarded in this run: \
                          chmod, chown, utimensat and setxattr reach every file the user owns"
        }
        (false, true) => {
            "host unix sockets are unguarded in this run: connect and sendto reach \
                          every socket the user may write (an agent, tmux, Docker, /dev/log)"
        }
        (true, true) => {
            "metadata outside the writable places is unguarded in this run, and \
                         so are host unix sockets: chmod, chown, utimensat and setxattr reach \
                         every file the user owns, connect and sendto every socket the user may write"
        }
    };
    let isolated = match audience {
        crate::exec::request::Audience::Json => "\"isolation\": \"required\"",
        crate::exec::request::Audience::Cli => "--isolation required",
    };
    if !listener {
        return Some(format!(
            "sandbox: warning: {what} (no seccomp listener here, so no supervisor makes \
             those calls; a contained or isolated sandbox around this one still keeps them to \
             its own writable places); use {isolated} where namespaces are available"
        ));
    }
    Some(format!(
        "sandbox: warning: {what} (a filter that cannot hand its listener to the host, or \
         cannot carry the claimed calls, has no supervisor to make those calls); {isolated} where \
         namespaces are available keeps them"
    ))
}

/// The warning of a contained run whose supervisor may not take its descriptors
/// ([`crate::exec::tier::Gap::Undelegable`]): the user's other terminals and, where the
/// profile allows them, file flags and host unix sockets are unguarded; `None` otherwise.
pub(crate) fn undelegable(sandbox: &crate::sandbox::Sandbox) -> Option<String> {
    let policy = sandbox.profile_policy()?;
    let mut parts = vec!["the user's other terminals (/dev/pts)"];
    if sets_file_flags(policy) {
        parts.push("file flags outside the writable places (chattr)");
    }
    if makes_unix_sockets(policy) {
        parts.push("host unix sockets");
    }
    let last = parts.pop().unwrap_or_default();
    let what = if parts.is_empty() {
        format!("{last} are unguarded in this run")
    } else {
        format!("{} and {last} are unguarded in this run", parts.join(", "))
    };
    Some(format!(
        "sandbox: warning: {what}: the supervisor may not take the job's descriptors here \
         (pidfd_getfd is refused: Docker's default seccomp profile allows it only with \
         CAP_SYS_PTRACE; --cap-add SYS_PTRACE gives it)"
    ))
}

/// The warning of an isolated run whose supervisor may not take its descriptors
/// ([`crate::exec::tier::Gap::LateSockets`]), under a profile that lets the job make unix
/// sockets: the view covers the host's sockets that exist at the start, but one bound later
/// is reachable (no supervisor can make the job's connects); `None` otherwise.
pub(crate) fn late_sockets_undelegable(sandbox: &crate::sandbox::Sandbox) -> Option<String> {
    let policy = sandbox.profile_policy()?;
    if !makes_unix_sockets(policy) {
        return None;
    }
    Some(
        "sandbox: warning: host unix sockets bound after the job started are unguarded in \
         this run (the view covers only those that exist at its start): the supervisor may not \
         take the job's descriptors here (pidfd_getfd is refused: Docker's default seccomp \
         profile allows it only with CAP_SYS_PTRACE; --cap-add SYS_PTRACE gives it)"
            .to_string(),
    )
}

/// The result entry's hint and change for a refused metadata call, in `audience`'s terms.
pub(crate) fn advice(
    why: &Why,
    audience: crate::exec::request::Audience,
) -> (String, Option<String>) {
    match why {
        Why::Outside(Some(path)) => {
            let shown = crate::escape::path(path);
            let change = match audience {
                crate::exec::request::Audience::Json => {
                    format!("\"writable_paths\": [{:?}]", path.display().to_string())
                }
                crate::exec::request::Audience::Cli => format!("--allow-write {shown}"),
            };
            (
                format!(
                    "{shown} lies outside the writable places, where mode, owner, times, \
                     extended attributes and flags cannot change; to allow: {change}"
                ),
                Some(change),
            )
        }
        Why::Outside(None) => (
            "the object lies outside the writable places, where mode, owner, times, \
             extended attributes and flags cannot change"
                .to_string(),
            None,
        ),
        Why::Credentials => (
            "a process that changed its user or dropped capabilities cannot have metadata \
             changed for it (the host acts with the job's starting credentials)"
                .to_string(),
            None,
        ),
        Why::Socket(path) => {
            let shown = crate::escape::path(path);
            let change = match audience {
                crate::exec::request::Audience::Json => {
                    format!("\"allow_unix_sockets\": [{:?}]", path.display().to_string())
                }
                crate::exec::request::Audience::Cli => format!("--allow-unix-socket {shown}"),
            };
            (
                format!(
                    "the unix socket {shown} lies outside the writable places; to allow: {change}"
                ),
                Some(change),
            )
        }
        Why::Abstract => {
            let none = match audience {
                crate::exec::request::Audience::Json => "\"network\": \"none\"",
                crate::exec::request::Audience::Cli => "--network none",
            };
            (
                format!(
                    "abstract unix sockets of processes outside the sandbox cannot be reached \
                     (without namespaces, not even the job's own: the host connects for the job \
                     and cannot keep Landlock's scope); use a pathname socket in the workspace, \
                     or namespaces with {none}"
                ),
                None,
            )
        }
        Why::Port(p) => {
            let change = match audience {
                crate::exec::request::Audience::Json => format!("\"connect_ports\": [{p}]"),
                crate::exec::request::Audience::Cli => format!("--connect-ports {p}"),
            };
            (
                format!("TCP port {p} is not among the allowed ports; to allow: {change}"),
                Some(change),
            )
        }
        Why::Linked(path) => (
            format!(
                "{} has other names (hard links) made before the job, which may lie outside \
                 the writable places and which a change through this name would reach; have \
                 the tool copy instead of link (UV_LINK_MODE=copy, pnpm's \
                 package-import-method=copy, git clone --no-hardlinks), or copy the file over \
                 itself outside the sandbox",
                crate::escape::path(path)
            ),
            None,
        ),
        Why::Unreadable => (
            "a process that made itself non-dumpable cannot have its call read".to_string(),
            None,
        ),
        Why::Capabilities(path) => {
            let change = match audience {
                crate::exec::request::Audience::Json => {
                    "\"isolation\": \"off\" with \"allow_root\": true"
                }
                crate::exec::request::Audience::Cli => "--isolation off --allow-root",
            };
            (
                format!(
                    "{}: root's job holds no capabilities here, so only a file's owner and \
                     mode bits decide what it may write or change, and it gives no file to \
                     another owner; tar --no-same-owner (root's default TAR_OPTIONS), cp \
                     --no-preserve=ownership, or the contained tier: {change}",
                    crate::escape::path(path)
                ),
                Some(change.to_string()),
            )
        }
    }
}

/// Distinct refusals a request keeps; more are only counted.
pub(crate) const MAX_REFUSED: usize = 32;

/// One refused (call, reason, program) and how often.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    /// What was refused.
    pub refused: Refused,
    /// The executable that made the call, when it could be read.
    pub program: Option<String>,
    /// How many times.
    pub count: u64,
}

/// The emulated calls a request had refused: counts, bounded like the filter's tally.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// At most [`MAX_REFUSED`], in order of first appearance.
    pub seen: Vec<Seen>,
    /// Refusals beyond those.
    pub omitted: u64,
    /// Every claimed call the host answered, allowed or refused, and its pacing.
    pub made: crate::exec::pacing::Pacer,
}

impl Tally {
    /// Counts one refusal.
    pub(crate) fn record(&mut self, refused: Refused, program: Option<String>) {
        if let Some(s) = self
            .seen
            .iter_mut()
            .find(|s| s.refused == refused && s.program == program)
        {
            s.count = s.count.saturating_add(1);
        } else if self.seen.len() < MAX_REFUSED {
            self.seen.push(Seen {
                refused,
                program,
                count: 1,
            });
        } else {
            self.omitted = self.omitted.saturating_add(1);
        }
    }
}

/// Whether `tally` holds a refusal of the object at `path` (so that the same refusal, found
/// again in the program's stderr, is not named twice).
pub(crate) fn names(tally: &Tally, path: &std::path::Path) -> bool {
    tally.seen.iter().any(|s| match &s.refused.why {
        Why::Socket(p) | Why::Outside(Some(p)) | Why::Linked(p) | Why::Capabilities(p) => p == path,
        _ => false,
    })
}

/// Whether `policy` lets a job set a file's flags (`ioctl(FS_IOC_SETFLAGS)`).
fn sets_file_flags(policy: &crate::policy::Policy) -> bool {
    crate::policy::NATIVE
        .syscall_number("ioctl")
        .is_some_and(|nr| {
            super::claims::FLAG_COMMANDS.iter().any(|cmd| {
                policy.decide(nr, &[0, u64::from(*cmd), 0, 0, 0, 0]) == crate::policy::Action::Allow
            })
        })
}
