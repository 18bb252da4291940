//! What would allow a refused call: the narrowest change, in the caller's language, which
//! never widens the network as a side effect.
//!
//! First an `allow` entry for the one call added to the profile in use (`"allow": ["NAME"]`
//! for JSON clients, `--profile P --allow NAME` on the command line: `--allow` alone replaces
//! the profile), checked against the call's real arguments: it is proposed only if the
//! extended profile would then let this very call through (a call the profile denies
//! explicitly stays denied whatever the allow list says), and only where a per-request allow
//! list works for the caller (module `run`: an unprivileged caller without namespaces cannot
//! take the listener a changed profile reports through). The hint names, second, the built-in
//! profile that is the one in use plus the call's whole group (`shell` plus `@network` is
//! `shell-network`): a call of a group rarely comes alone (`socket` is followed by `connect`).
//! Without an allow entry, that profile is the change; else the closest built-in profile that
//! allows the call *and still runs the program*: one that allows every call the current
//! profile allows (so a shell stays a shell), the smallest such. `unrestricted` (no filter)
//! always qualifies, so there is always an answer; it is never a profile that cannot run the
//! program.
//!
//! The network mode follows the profile when the request names none (`none` for a profile
//! that refuses sockets, `host` for one that allows them): a change that makes the profile
//! allow TCP sockets would also open the host's network. When the request left the mode to the
//! profile and got `none`, such a change carries the mode that keeps it (`"network": "none"`,
//! `--network none`), and the hint says why. An explicit mode, or one implied by
//! `allow_domains` or `host_ports`, stays as it is without help.

use super::request::Audience;
use crate::policy::profile::Profile;
use crate::policy::{groups, Action, Policy, NATIVE};
use std::sync::OnceLock;

/// A refused call's hint and the exact change that would allow it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Advice {
    /// One sentence for a human or an agent.
    pub hint: String,
    /// The change alone: `--allow socket`, `"allow": ["socket"]`, `--profile shell-net`.
    pub change: String,
}

/// Highest syscall number the superset check looks at.
const MAX_NR: u32 = 512;

/// Calls a policy allows whatever the arguments... or with zero arguments: the set that
/// decides whether a program still runs under another profile.
fn allowed_set(policy: Option<&Policy>) -> Vec<bool> {
    (0..MAX_NR)
        .map(|nr| match policy {
            None => true,
            Some(p) => NATIVE.syscall_name(nr).is_some() && p.decide(nr, &[0; 6]) == Action::Allow,
        })
        .collect()
}

struct Builtin {
    name: &'static str,
    policy: Option<Box<Policy>>,
    allowed: Vec<bool>,
}

impl Builtin {
    /// A built-in with a filter (not `unrestricted`), other than `profile`, that allows the
    /// call `nr` with `args`.
    fn filtered_other_allowing(&self, profile: &Profile, nr: u32, args: &[u64; 6]) -> bool {
        self.name != profile.name()
            && self
                .policy
                .as_ref()
                .is_some_and(|p| p.decide(nr, args) == Action::Allow)
    }
}

/// The built-in profiles with their policies and allowed sets, smallest first.
fn builtins() -> &'static [Builtin] {
    static ALL: OnceLock<Vec<Builtin>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut v: Vec<Builtin> = Profile::builtin_names()
            .filter_map(|name| {
                let policy = Profile::builtin(name).ok()?.policy(NATIVE, None).ok()?;
                let allowed = allowed_set(policy.as_deref());
                Some(Builtin {
                    name,
                    policy,
                    allowed,
                })
            })
            .collect();
        v.sort_by_key(|b| b.allowed.iter().filter(|a| **a).count());
        v
    })
}

/// The groups of `profiles/groups.toml` that name `name` directly (not through another group),
/// with the numbers of all their calls on this architecture.
fn groups_of(name: &str) -> Vec<(&'static str, Vec<u32>)> {
    let call = |e: &str| e.split(['(', '=']).next().unwrap_or(e).trim().to_string();
    groups::all()
        .iter()
        .filter(|g| g.entries.iter().any(|e| call(e) == name))
        .map(|g| {
            let nrs = g
                .entries
                .iter()
                .filter(|e| !e.starts_with('@'))
                .filter_map(|e| NATIVE.syscall_number(&call(e)))
                .collect();
            (g.name, nrs)
        })
        .collect()
}

/// A built-in profile (other than `unrestricted`) that allows the call, allows everything
/// `current` allows, and adds nothing beyond the call's group: the profile in use plus that
/// group, with the group's name.
fn plus_group(
    nr: u32,
    args: &[u64; 6],
    name: &str,
    profile: &Profile,
    current: &[bool],
) -> Option<(&'static str, &'static str)> {
    groups_of(name).into_iter().find_map(|(group, nrs)| {
        builtins()
            .iter()
            .find(|b| {
                b.filtered_other_allowing(profile, nr, args)
                    && current
                        .iter()
                        .zip(&b.allowed)
                        .enumerate()
                        .all(|(i, (c, o))| (!c || *o) && (!*o || *c || nrs.contains(&(i as u32))))
            })
            .map(|b| (b.name, group))
    })
}

/// Who asks, and what a change may rely on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Asker {
    /// The caller's language.
    pub audience: Audience,
    /// A per-request `allow` entry works for this caller (the command line's `--allow` always
    /// does; a request's only where the host can take the changed profile's listener).
    pub allow_works: bool,
    /// The request left the network mode to the profile and got `none`: a change that lets
    /// the profile open TCP sockets must say `none` to keep it.
    pub keep_no_network: bool,
    /// The host can check the job's unix socket connects (`platform::delegable`): what
    /// `network: none` asked for lets a profile open ([`crate::network::own_network`]).
    pub unix_guarded: bool,
}

/// Whether `policy` (`None`: no filter) lets a program open a TCP socket: what makes a
/// request without a network mode get the host's network.
fn opens_tcp(policy: Option<&Policy>) -> bool {
    let tcp = [libc::AF_INET as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0];
    let socket = NATIVE.syscall_number("socket");
    policy.is_none_or(|p| socket.is_some_and(|nr| p.decide(nr, &tcp) == Action::Allow))
}

/// The change for a socket call refused in a job that got `none` by default: asking for
/// `none` lets a profile that runs programs make and use sockets in its own network namespace
/// ([`crate::network::own_network`]), which reaches nothing outside, so the whole group comes
/// in one run and the network stays closed; `None` where that would not allow this call.
fn own_network(
    nr: u32,
    args: &[u64; 6],
    name: &str,
    profile: &Profile,
    asker: &Asker,
    refused: &str,
) -> Option<Advice> {
    if !asker.keep_no_network || !groups_of(name).iter().any(|(g, _)| *g == "network") {
        return None;
    }
    let own = crate::network::own_network(profile.clone(), asker.unix_guarded).ok()?;
    let policy = own.policy(NATIVE, None).ok()?;
    if own == *profile || policy.is_some_and(|p| p.decide(nr, args) != Action::Allow) {
        return None;
    }
    let change = match asker.audience {
        Audience::Cli => "--network none".to_string(),
        Audience::Json => "\"network\": \"none\"".to_string(),
    };
    // For a program that must reach the network outside, the group's profile is the other way.
    let outside = profile
        .policy(NATIVE, None)
        .ok()
        .flatten()
        .map(|p| allowed_set(Some(&p)))
        .and_then(|cur| plus_group(nr, args, name, profile, &cur))
        .map_or(String::new(), |(target, _)| {
            let with = match asker.audience {
                Audience::Cli => format!("--profile {target}"),
                Audience::Json => format!("\"profile\": \"{target}\""),
            };
            format!("; to reach the network outside instead, profile {target}: {with}")
        });
    Some(Advice {
        hint: format!(
            "{refused}; asked for, {change} lets a profile that runs programs make and use \
             sockets of every ordinary family in the job's own network namespace, which \
             reaches nothing outside: {change}{outside}"
        ),
        change,
    })
}

/// `change` with the network mode that keeps the request's network, when the changed profile
/// would open TCP sockets and the request left its mode to the profile; and the words that
/// say so (empty when nothing was added).
fn keeping_network(change: String, opens: bool, asker: &Asker) -> (String, &'static str) {
    if !(opens && asker.keep_no_network) {
        return (change, "");
    }
    match asker.audience {
        Audience::Cli => (
            format!("{change} --network none"),
            " (--network none keeps the run without network; without it the change would \
             also open the host's network)",
        ),
        Audience::Json => (
            format!("{change}, \"network\": \"none\""),
            " (\"network\": \"none\" keeps the request without network; without it the \
             change would also open the host's network)",
        ),
    }
}

/// Advice for the call `nr` with `args`, refused under `profile`.
pub(crate) fn advise(nr: u32, args: &[u64; 6], profile: &Profile, asker: &Asker) -> Advice {
    let audience = asker.audience;
    let name = NATIVE.syscall_name(nr).unwrap_or("unknown");
    let refused = format!("{name} is not allowed by profile {}", profile.name());
    if let Some(advice) = own_network(nr, args, name, profile, asker, &refused) {
        return advice;
    }
    let current = profile
        .policy(NATIVE, None)
        .ok()
        .flatten()
        .map(|p| allowed_set(Some(&p)));
    let to_profile = |target: &str| {
        let opens = builtins()
            .iter()
            .find(|b| b.name == target)
            .is_none_or(|b| opens_tcp(b.policy.as_deref()));
        let plain = match audience {
            Audience::Cli => format!("--profile {target}"),
            Audience::Json => format!("\"profile\": \"{target}\""),
        };
        keeping_network(plain, opens, asker)
    };
    let group = current
        .as_ref()
        .and_then(|cur| plus_group(nr, args, name, profile, cur));
    if name != "unknown" && profile.allow().is_some() && asker.allow_works {
        let extended = profile
            .extended(&[name.to_string()], &[])
            .ok()
            .and_then(|p| p.policy(NATIVE, None).ok());
        let allows = extended.as_ref().is_some_and(|p| {
            p.as_ref()
                .is_none_or(|p| p.decide(nr, args) == Action::Allow)
        });
        if let (true, Some(extended)) = (allows, extended) {
            let plain = match audience {
                // `--allow` without `--profile` replaces the profile by the list alone, and
                // is given once: the whole list again, with the call.
                Audience::Cli if profile.name() == "custom" => {
                    let mut list = profile.allow().unwrap_or_default().to_vec();
                    list.push(name.to_string());
                    format!("--allow {}", list.join(":"))
                }
                Audience::Cli => format!("--profile {} --allow {name}", profile.name()),
                Audience::Json => format!("\"allow\": [\"{name}\"]"),
            };
            let (change, why) = keeping_network(plain, opens_tcp(extended.as_deref()), asker);
            let more = group.map_or(String::new(), |(target, group)| {
                let (whole, why) = to_profile(target);
                format!(
                    "; it belongs to @{group}, which profile {target} adds to {} if the program \
                     needs more of it: {whole}{why}",
                    profile.name()
                )
            });
            return Advice {
                hint: format!("{refused}; to allow it add {change}{why}{more}"),
                change,
            };
        }
    }
    if let Some((target, group)) = group {
        let (change, why) = to_profile(target);
        return Advice {
            hint: format!(
                "{refused}; it belongs to @{group}, which profile {target} adds to {}: \
                 {change}{why}",
                profile.name()
            ),
            change,
        };
    }
    let runs_program = |b: &Builtin| {
        current
            .as_ref()
            .is_some_and(|cur| cur.iter().zip(&b.allowed).all(|(c, o)| !c || *o))
    };
    let closest = builtins().iter().find(|b| {
        b.name != profile.name()
            && b.policy
                .as_ref()
                .is_none_or(|p| p.decide(nr, args) == Action::Allow)
            && runs_program(b)
    });
    if closest.is_none_or(|b| b.policy.is_none()) && profile.allow().is_none() {
        if let Some(advice) =
            deny_list_fallback(nr, args, profile, current.as_deref(), &refused, to_profile)
        {
            return advice;
        }
    }
    let target = closest.map_or("unrestricted", |b| b.name);
    let (change, network) = to_profile(target);
    let why = if target == "unrestricted" {
        "no built-in profile that still runs this program allows it except unrestricted (no filter)"
    } else {
        "the closest built-in profile that allows it and still runs this program"
    };
    Advice {
        hint: format!("{refused}; {why}: {change}{network}"),
        change,
    }
}

/// For a deny-list profile (everything but what it denies, as `no-exec`): no allow-list
/// built-in allows all it does, so the superset rule would always answer `unrestricted`,
/// which drops every protection. Instead: the filtered built-in that allows the call and
/// lacks the fewest calls the profile allows, naming a few of those, with `unrestricted` as
/// the alternative. `None` when no filtered built-in allows the call.
fn deny_list_fallback(
    nr: u32,
    args: &[u64; 6],
    profile: &Profile,
    current: Option<&[bool]>,
    refused: &str,
    to_profile: impl Fn(&str) -> (String, &'static str),
) -> Option<Advice> {
    let current = current?;
    let lacking = |b: &Builtin| -> Vec<&'static str> {
        current
            .iter()
            .zip(&b.allowed)
            .enumerate()
            .filter(|(_, (c, o))| **c && !**o)
            .filter_map(|(i, _)| NATIVE.syscall_name(i as u32))
            .collect()
    };
    let (best, missing) = builtins()
        .iter()
        .filter(|b| b.filtered_other_allowing(profile, nr, args))
        .map(|b| (b, lacking(b)))
        .min_by_key(|(_, m)| m.len())?;
    let (change, network) = to_profile(best.name);
    let examples = missing
        .iter()
        .take(4)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    Some(Advice {
        hint: format!(
            "{refused}; profile {} allows it but refuses {} calls profile {} allows (such as \
             {examples}): {change}{network}; {} removes the filter",
            best.name,
            missing.len(),
            profile.name(),
            to_profile("unrestricted").0,
        ),
        change,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nr(name: &str) -> u32 {
        NATIVE.syscall_number(name).unwrap()
    }

    /// A caller for whom a per-request allow entry works, with the network mode its own.
    const CLI: Asker = Asker {
        audience: Audience::Cli,
        allow_works: true,
        keep_no_network: false,
        unix_guarded: true,
    };
    const JSON: Asker = Asker {
        audience: Audience::Json,
        ..CLI
    };
    /// The same callers where an allow entry does not work (unprivileged, no namespaces).
    const CLI_NO_ALLOW: Asker = Asker {
        allow_works: false,
        ..CLI
    };
    const JSON_NO_ALLOW: Asker = Asker {
        allow_works: false,
        ..JSON
    };

    #[test]
    fn the_profile_that_adds_the_calls_group() {
        // A shell that needed a socket: shell-network is shell plus @network, so connect and
        // the rest come with it; minimal plus @network is network.
        // (Where an allow entry does not work for the caller: else the entry comes first.)
        let shell = Profile::builtin("shell").unwrap();
        for call in ["socket", "connect", "sendmsg"] {
            let a = advise(nr(call), &[2, 1, 0, 0, 0, 0], &shell, &CLI_NO_ALLOW);
            assert_eq!(a.change, "--profile shell-network", "{a:?}");
            assert!(a.hint.contains("@network"), "{a:?}");
        }
        let a = advise(nr("socket"), &[2, 1, 0, 0, 0, 0], &shell, &JSON_NO_ALLOW);
        assert_eq!(a.change, "\"profile\": \"shell-network\"", "{a:?}");
        let minimal = Profile::builtin("minimal").unwrap();
        let a = advise(nr("socket"), &[2, 1, 0, 0, 0, 0], &minimal, &CLI_NO_ALLOW);
        assert_eq!(a.change, "--profile network", "{a:?}");
        // An IPv6 socket, which shell denies explicitly (EACCES), gets the profile even where
        // an allow entry works: the entry would not let this very call through.
        let a = advise(nr("socket"), &[10, 1, 0, 0, 0, 0], &shell, &CLI);
        assert_eq!(a.change, "--profile shell-network", "{a:?}");
    }

    #[test]
    fn an_allow_entry_when_no_profile_adds_just_the_group() {
        // fork under write: shell is write plus @process and @exec, more than the call's
        // group, so the single call is the smaller change.
        let write = Profile::builtin("write").unwrap();
        let a = advise(nr("fork"), &[0; 6], &write, &CLI);
        assert_eq!(a.change, "--profile write --allow fork", "{a:?}");
        let a = advise(nr("fork"), &[0; 6], &write, &JSON);
        assert_eq!(a.change, "\"allow\": [\"fork\"]", "{a:?}");
    }

    #[test]
    fn a_deny_list_profile_gets_a_filtered_profile_not_only_unrestricted() {
        // no-exec allows everything but exec and spawning: no allow-list profile is a
        // superset, so the closest filtered one is proposed, with what it refuses.
        let no_exec = Profile::builtin("no-exec").unwrap();
        for call in ["vfork", "execve"] {
            let a = advise(nr(call), &[0; 6], &no_exec, &CLI);
            assert_eq!(a.change, "--profile shell-network", "{a:?}");
            assert!(
                a.hint.contains("refuses") && a.hint.contains("--profile unrestricted"),
                "{a:?}"
            );
        }
        // An allow-list profile keeps the superset rule.
        let write = Profile::builtin("write").unwrap();
        let a = advise(nr("execve"), &[0; 6], &write, &CLI);
        assert!(!a.hint.contains("removes the filter"), "{a:?}");
    }

    #[test]
    fn never_a_profile_that_cannot_run_a_shell() {
        // Denied explicitly by @hardening: no allow entry helps; neither does a profile
        // without exec (no-exec, network), which cannot run the shell at all.
        let shell = Profile::builtin("shell").unwrap();
        for call in ["ptrace", "socket"] {
            let deny_all = shell.extended(&[], &[call.to_string()]).unwrap();
            let a = advise(nr(call), &[2, 1, 0, 0, 0, 0], &deny_all, &CLI);
            assert!(a.change.starts_with("--profile "), "{a:?}");
            for cannot in ["no-exec", "network", "minimal", "write"] {
                assert_ne!(a.change, format!("--profile {cannot}"), "{a:?}");
            }
        }
    }

    #[test]
    fn the_one_call_comes_first_and_the_group_second() {
        // trio's setsockopt under shell: the entry, then shell-network for the whole group.
        let shell = Profile::builtin("shell").unwrap();
        let a = advise(nr("setsockopt"), &[3, 1, 2, 0, 0, 0], &shell, &JSON);
        assert_eq!(a.change, "\"allow\": [\"setsockopt\"]", "{a:?}");
        assert!(a.hint.contains("\"profile\": \"shell-network\""), "{a:?}");
        let a = advise(nr("setsockopt"), &[3, 1, 2, 0, 0, 0], &shell, &CLI);
        assert_eq!(a.change, "--profile shell --allow setsockopt", "{a:?}");
        // A profile made of --allow alone gets that list again, with the call.
        let custom = Profile::custom(Some("@base:@fd-io:@fs-read"), None).unwrap();
        let a = advise(nr("setsockopt"), &[3, 1, 2, 0, 0, 0], &custom, &CLI);
        assert_eq!(
            a.change, "--allow @base:@fd-io:@fs-read:setsockopt",
            "{a:?}"
        );
    }

    #[test]
    fn a_change_that_opens_sockets_keeps_a_request_without_network() {
        let keep = |a: Asker| Asker {
            keep_no_network: true,
            ..a
        };
        let minimal = Profile::builtin("minimal").unwrap();
        let shell = Profile::builtin("shell").unwrap();
        // The one call that opens TCP sockets: the mode comes with it.
        let a = advise(nr("socket"), &[2, 1, 0, 0, 0, 0], &minimal, &keep(JSON));
        assert_eq!(
            a.change, "\"allow\": [\"socket\"], \"network\": \"none\"",
            "{a:?}"
        );
        assert!(a.hint.contains("host's network"), "{a:?}");
        let a = advise(nr("socket"), &[2, 1, 0, 0, 0, 0], &minimal, &keep(CLI));
        assert_eq!(
            a.change, "--profile minimal --allow socket --network none",
            "{a:?}"
        );
        // A call that opens nothing needs no mode.
        let custom = Profile::custom(Some("@base:@fd-io:@fs-read"), None).unwrap();
        let a = advise(nr("setsockopt"), &[3, 1, 2, 0, 0, 0], &custom, &keep(JSON));
        assert_eq!(a.change, "\"allow\": [\"setsockopt\"]", "{a:?}");
        // A shell that got `none` by default: asking for it allows the whole group in the
        // job's own network namespace, in one run.
        for (call, args) in [
            ("setsockopt", [3, 1, 2, 0, 0, 0]),
            ("connect", [3, 0, 16, 0, 0, 0]),
            ("socket", [libc::AF_UNIX as u64, 1, 0, 0, 0, 0]),
            ("socket", [libc::AF_INET6 as u64, 1, 0, 0, 0, 0]),
        ] {
            let a = advise(nr(call), &args, &shell, &keep(JSON_NO_ALLOW));
            assert_eq!(a.change, "\"network\": \"none\"", "{call}: {a:?}");
            assert!(a.hint.contains("own network namespace"), "{a:?}");
            let a = advise(nr(call), &args, &shell, &keep(CLI));
            assert_eq!(a.change, "--network none", "{call}: {a:?}");
        }
        // Where unix connects cannot be checked, a unix socket stays refused with it: the
        // group's profile is the change then.
        let unguarded = Asker {
            unix_guarded: false,
            ..keep(JSON_NO_ALLOW)
        };
        let a = advise(
            nr("socket"),
            &[libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
            &shell,
            &unguarded,
        );
        assert_eq!(
            a.change, "\"profile\": \"shell-network\", \"network\": \"none\"",
            "{a:?}"
        );
        // A request whose mode is its own (explicit, or implied) keeps it without help.
        let a = advise(nr("connect"), &[3, 0, 16, 0, 0, 0], &shell, &JSON_NO_ALLOW);
        assert_eq!(a.change, "\"profile\": \"shell-network\"", "{a:?}");
    }
}
