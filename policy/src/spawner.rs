//! The calls a filtered spawner thread (a host thread that holds a profile's filter and
//! clones the jobs that inherit it) and its children before exec make, each exempted from
//! the profile when it carries the spawner's secret: the data the host's spawner builds its
//! program from and this crate's filter-cost measurements use, kept in one place.

/// Every call the spawner thread and a child before exec make, with the position of the first
/// argument the kernel ignores for it (where the secret goes; the host's `spawn.rs` `ksys!`
/// and the session resident's child put it there, at these positions).
pub const SECRET_CALLS: &[(&str, u8)] = &[
    // The spawner thread.
    ("clone3", 2),
    // Where `clone3` is refused (`clone::clone3_works`); clone uses five arguments.
    ("clone", 5),
    ("futex", 4),
    // A session's spawner thread reads its start socket (`session/start_socket.rs`).
    ("recvmsg", 3),
    // The child.
    ("rt_sigaction", 4),
    ("setsid", 0),
    // A session's command started alone makes a process group, not a session.
    ("setpgid", 2),
    ("chdir", 1),
    ("dup3", 3),
    ("close_range", 3),
    ("prlimit64", 4),
    ("landlock_restrict_self", 2),
    ("exit_group", 1),
    ("rt_sigprocmask", 4),
    ("execve", 3),
    // With namespaces: the init (spawn/init.rs) and the program's capability drop.
    ("prctl", 4),
    ("capset", 2),
    ("openat", 4),
    ("write", 3),
    ("close", 1),
    ("socket", 3),
    ("ioctl", 3),
    ("setsockopt", 5),
    ("bind", 3),
    ("listen", 2),
    ("sendmsg", 3),
    ("mount", 5),
    ("mount_setattr", 5),
    ("mkdirat", 3),
    ("open_tree", 3),
    ("move_mount", 5),
    ("symlinkat", 3),
    ("landlock_create_ruleset", 3),
    ("landlock_add_rule", 4),
    ("rt_sigtimedwait", 4),
    ("wait4", 4),
    ("kill", 2),
];

#[cfg(test)]
mod tests {
    use super::SECRET_CALLS;
    use crate::arch::Arch;

    #[test]
    fn each_call_is_listed_once_with_a_position_a_call_has_and_a_number_on_x86_64() {
        for (i, (name, arg)) in SECRET_CALLS.iter().enumerate() {
            assert!(
                SECRET_CALLS[..i].iter().all(|(n, _)| n != name),
                "{name} listed twice"
            );
            assert!(*arg < 6, "{name}: argument {arg}");
            assert!(Arch::X86_64.syscall_number(name).is_some(), "{name}");
        }
    }
}
