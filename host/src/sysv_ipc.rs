//! The preload route's refusal of System V IPC.
//!
//! Programs started with `sandbox env`'s variables share the caller's IPC namespace (the
//! route has no namespaces), so a profile that lets the IPC calls through (`no-exec`, a deny
//! list) lets a command attach any segment, queue or semaphore set of the same user: by key
//! with `shmget`, or by id with `shmat`, `msgsnd`, `semop` and the `*ctl` calls, whose ids are
//! listed for everyone in `/proc/sysvipc/`. `sandbox run` and `exec` give each job an IPC
//! namespace instead, where none of the host's objects exist.
//!
//! Decisions (docs/security.md, "System V IPC on the preload route"):
//!
//! - Every call is refused, `IPC_PRIVATE` segments included: a private segment is only
//!   usable through `shmat`/`shmctl` on its id, and allowing those reaches every other
//!   segment's id as well. What agents run does not need them: Python's `multiprocessing`
//!   (`shared_memory`, `Lock`, `Queue`) and node use POSIX shared memory and semaphores
//!   (files in `/dev/shm` and futexes); PostgreSQL's SysV segment is a server's, which the
//!   preload route does not host.
//! - The errno is `ENOSYS`, what a kernel built without System V IPC answers: programs that
//!   probe for it take the path they take there.
//! - A call the profile names in its allow list (or in its deny list, with its own action)
//!   keeps the profile's decision: the refusal is a default, not an override.

use sandbox_policy::profile::{Profile, ProfileError};

/// The System V IPC calls (x86_64 and aarch64 have one call each; no multiplexed `ipc`).
pub const CALLS: [&str; 12] = [
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
];

/// The errno the refused calls answer.
pub const ERRNO: &str = "ENOSYS";

/// `profile` with each call of [`CALLS`] that its lists do not name refused with [`ERRNO`];
/// an unrestricted profile (no filter at all) is returned unchanged.
pub fn refuse(profile: Profile) -> Result<Profile, ProfileError> {
    if profile.is_unrestricted() {
        return Ok(profile);
    }
    let mut named = Vec::new();
    for entry in profile
        .allow()
        .unwrap_or_default()
        .iter()
        .chain(profile.deny())
    {
        names(entry, &mut named, 0);
    }
    CALLS
        .iter()
        .filter(|call| !named.contains(call))
        .try_fold(profile, |p, call| p.with_deny(&format!("{call}={ERRNO}")))
}

/// Adds the syscall names `entry` names (through groups too) to `out`.
fn names(entry: &str, out: &mut Vec<&'static str>, depth: usize) {
    let head = entry.split(['(', '=']).next().unwrap_or(entry).trim();
    match head.strip_prefix('@') {
        // Groups nest a few levels; the bound only guards against a cycle.
        Some(group) if depth < 8 => {
            for member in sandbox_policy::groups::find(group).map_or(&[][..], |g| g.entries) {
                names(member, out, depth + 1);
            }
        }
        Some(_) => {}
        None => out.extend(CALLS.iter().copied().filter(|c| *c == head)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandbox_policy::{Action, NATIVE};

    fn decision(p: &Profile, call: &str) -> Action {
        let policy = p.policy(NATIVE, None).unwrap().unwrap();
        policy.decide(NATIVE.syscall_number(call).unwrap(), &[0; 6])
    }

    #[test]
    fn every_builtin_profile_refuses_each_call_with_enosys() {
        for name in Profile::builtin_names() {
            let p = refuse(Profile::builtin(name).unwrap()).unwrap();
            if p.is_unrestricted() {
                continue;
            }
            for call in CALLS {
                assert_eq!(
                    decision(&p, call),
                    Action::Errno(libc::ENOSYS as u16),
                    "{name} {call}"
                );
            }
        }
        // Control: no-exec, a deny list, allows them without the refusal.
        let open = Profile::builtin("no-exec").unwrap();
        assert_eq!(decision(&open, "shmat"), Action::Allow);
        assert!(refuse(Profile::builtin("unrestricted").unwrap())
            .unwrap()
            .is_unrestricted());
    }

    #[test]
    fn a_call_the_profile_names_keeps_its_decision() {
        let p = Profile::from_toml(
            "mine",
            "description = \"x\"\nallow = [\"read\", \"shmget\", \"shmat(a2 == 0)\"]\n\
             deny = [\"semop=EPERM\"]\n",
        )
        .unwrap();
        let p = refuse(p).unwrap();
        assert_eq!(decision(&p, "shmget"), Action::Allow);
        assert_eq!(decision(&p, "shmat"), Action::Allow);
        assert_eq!(decision(&p, "semop"), Action::Errno(libc::EPERM as u16));
        assert_eq!(decision(&p, "msgget"), Action::Errno(libc::ENOSYS as u16));
        // Refusing twice changes nothing.
        assert_eq!(refuse(p.clone()).unwrap().deny(), p.deny());
    }
}
