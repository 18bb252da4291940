//! OCI / Docker seccomp JSON: every built-in profile exported decides exactly as the profile
//! (call by call, around every rule constant), export -> import -> export is stable, Docker's
//! default profile imported decides as Docker does, and bad JSON is refused naming its path.

mod common;

use common::{arg_patterns, interesting_values};
use sandbox_policy::oci::{self, DockerEnv, Filter};
use sandbox_policy::profile::Profile;
use sandbox_policy::{Action, Arch, Policy};

const MOBY: &str = include_str!("data/moby/default.json");

fn env() -> DockerEnv {
    DockerEnv::docker_default(Some((6, 18)))
}

/// Asserts that `filter` decides like `policy` for every call of the architecture's table and
/// argument patterns around every constant of the policy (the same patterns that check the
/// BPF compiler). Returns the number of decisions compared.
fn assert_same_decisions(policy: &Policy, filter: &Filter, what: &str) -> usize {
    let arch = policy.arch();
    let values = interesting_values(policy);
    let mut n = 0;
    for (name, nr) in sandbox_policy::syscalls::all(arch) {
        let nr = u32::from(nr);
        for args in arg_patterns(policy, nr, &values) {
            let want = policy.decide(nr, &args);
            let got = filter.decide(name, &args);
            assert_eq!(
                got,
                oci::Decision::Action(want),
                "{what} on {}: {name}{args:x?}",
                arch.name()
            );
            n += 1;
        }
    }
    n
}

#[test]
fn every_builtin_profile_exports_exactly_on_every_architecture() {
    for name in Profile::builtin_names() {
        let p = Profile::builtin(name).unwrap();
        for arch in [Arch::X86_64, Arch::Aarch64] {
            let e = oci::export(&p, arch, None).unwrap();
            // Nothing the JSON cannot say; only what runc's start needs may be missing.
            for note in &e.notes {
                assert!(note.starts_with("runc needs"), "{name}: {note}");
            }
            assert_eq!(e.filter.architectures, [oci::scmp_arch(arch)]);
            let back: Filter = serde_json::from_str(&e.json).unwrap();
            assert_eq!(back, e.filter, "{name}: the JSON text is the filter");
            match p.policy(arch, None).unwrap() {
                Some(policy) => {
                    let n = assert_same_decisions(&policy, &e.filter, name);
                    assert!(n > 1000, "{name}: {n}");
                }
                None => {
                    assert_eq!(e.filter.default_action, "SCMP_ACT_ALLOW");
                    assert!(e.filter.syscalls.is_empty());
                }
            }
        }
    }
}

#[test]
fn export_uses_the_kill_default_and_errno_values() {
    let p = Profile::builtin("minimal").unwrap();
    let e = oci::export(&p, Arch::X86_64, None).unwrap();
    assert_eq!(e.filter.default_action, "SCMP_ACT_KILL_PROCESS");
    let mkdir = e
        .filter
        .syscalls
        .iter()
        .find(|s| s.names.iter().any(|n| n == "mkdir"))
        .unwrap();
    assert_eq!(
        (mkdir.action.as_str(), mkdir.errno_ret),
        ("SCMP_ACT_ERRNO", Some(30))
    );
    // A 32-bit rule keeps ignoring the upper half: TIOCSTI with high bits set is still refused.
    let eperm = oci::Decision::Action(Action::Errno(1));
    assert_eq!(e.filter.decide("ioctl", &[0, 0x5412, 0, 0, 0, 0]), eperm);
    assert_eq!(
        e.filter.decide("ioctl", &[0, 0x1_0000_5412, 0, 0, 0, 0]),
        eperm
    );
    // --on-violation replaces the default action.
    let e = oci::export(&p, Arch::X86_64, Some(Action::Errno(38))).unwrap();
    assert_eq!(
        (e.filter.default_action.as_str(), e.filter.default_errno_ret),
        ("SCMP_ACT_ERRNO", Some(38))
    );
    // The deny-list profile's default is allow.
    let e = oci::export(&Profile::builtin("no-exec").unwrap(), Arch::X86_64, None).unwrap();
    assert_eq!(e.filter.default_action, "SCMP_ACT_ALLOW");
    assert!(e.notes.iter().any(|n| n.contains("refuses execve (kill)")));
    let e = oci::export(&Profile::builtin("shell").unwrap(), Arch::X86_64, None).unwrap();
    assert!(e.notes.is_empty(), "{:?}", e.notes);
}

#[test]
fn a_rule_the_entries_cannot_express_is_written_strictest_and_noted() {
    // Two arguments, each compared twice with `!=` under 32 bits: no set of OCI entries means it.
    let p = Profile::from_toml(
        "t",
        r#"description = "t"
allow = ["read", "write", "kill(a0 != 1 && a1 != 9 || a0 < 5)"]
"#,
    )
    .unwrap();
    let e = oci::export(&p, Arch::X86_64, None).unwrap();
    assert!(
        e.notes
            .iter()
            .any(|n| n.starts_with("kill: its argument rules cannot")),
        "{:?}",
        e.notes
    );
    let kill = oci::Decision::Action(Action::Kill);
    assert_eq!(e.filter.decide("kill", &[7, 3, 0, 0, 0, 0]), kill);
}

#[test]
fn export_import_export_is_stable() {
    for name in Profile::builtin_names() {
        let p = Profile::builtin(name).unwrap();
        let first = oci::export(&p, Arch::X86_64, None).unwrap();
        let imported = oci::import(&first.json, "first.json", Arch::X86_64, &env())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let second = oci::export(&imported.profile, Arch::X86_64, None).unwrap();
        assert_eq!(first.json, second.json, "{name}");
        // And the imported profile decides like the original.
        if let Some(policy) = p.policy(Arch::X86_64, None).unwrap() {
            assert_same_decisions(&policy, &second.filter, name);
        }
    }
}

fn moby() -> (Policy, oci::Imported) {
    let imported = oci::import(MOBY, "default.json", Arch::X86_64, &env()).unwrap();
    let policy = imported
        .profile
        .policy(Arch::X86_64, None)
        .unwrap()
        .unwrap();
    (*policy, imported)
}

#[test]
fn mobys_default_profile_decides_like_docker() {
    let (policy, imported) = moby();
    let x = |name: &str| Arch::X86_64.syscall_number(name).unwrap();
    let eperm = Action::Errno(1);
    const CLONE_NEWNS: u64 = 0x20000;
    const CLONE_NEWUSER: u64 = 0x1000_0000;
    const THREAD_FLAGS: u64 = 0x003d_0f00; // what pthread_create passes
    #[rustfmt::skip]
    let table: &[(&str, [u64; 6], Action, &str)] = &[
        ("read", [0; 6], Action::Allow, "plain I/O"),
        ("openat", [0, 0, 0o101, 0, 0, 0], Action::Allow, "no flag checks"),
        ("execve", [0; 6], Action::Allow, "containers exec"),
        ("ptrace", [0; 6], Action::Allow, "allowed on kernels >= 4.8"),
        ("mount", [0; 6], eperm, "needs CAP_SYS_ADMIN"),
        ("umount2", [0; 6], eperm, "needs CAP_SYS_ADMIN"),
        ("unshare", [0; 6], eperm, "needs CAP_SYS_ADMIN"),
        ("setns", [0; 6], eperm, "needs CAP_SYS_ADMIN"),
        ("bpf", [0; 6], eperm, "needs CAP_SYS_ADMIN or CAP_BPF"),
        ("perf_event_open", [0; 6], eperm, "needs CAP_PERFMON"),
        ("kexec_load", [0; 6], eperm, "never"),
        ("init_module", [0; 6], eperm, "needs CAP_SYS_MODULE"),
        ("reboot", [0; 6], eperm, "needs CAP_SYS_BOOT"),
        ("chroot", [0; 6], Action::Allow, "CAP_SYS_CHROOT is a default capability"),
        ("clock_settime", [0; 6], eperm, "needs CAP_SYS_TIME"),
        ("syslog", [0; 6], eperm, "needs CAP_SYSLOG"),
        ("open_by_handle_at", [0; 6], eperm, "needs CAP_DAC_READ_SEARCH"),
        ("add_key", [0; 6], eperm, "keyring calls are not listed"),
        ("userfaultfd", [0; 6], eperm, "not listed"),
        ("arch_prctl", [0; 6], Action::Allow, "amd64 only, and this is amd64"),
        ("modify_ldt", [0; 6], Action::Allow, "amd64/x86"),
        ("clone3", [0; 6], Action::Errno(38), "ENOSYS so libc falls back to clone"),
        ("clone", [THREAD_FLAGS, 0, 0, 0, 0, 0], Action::Allow, "threads"),
        ("clone", [0x11, 0, 0, 0, 0, 0], Action::Allow, "fork (SIGCHLD)"),
        ("clone", [CLONE_NEWNS | 0x11, 0, 0, 0, 0, 0], eperm, "new mount namespace"),
        ("clone", [CLONE_NEWUSER, 0, 0, 0, 0, 0], eperm, "new user namespace"),
        ("clone", [1 << 32 | CLONE_NEWUSER, 0, 0, 0, 0, 0], eperm, "64-bit masked compare"),
        ("personality", [0, 0, 0, 0, 0, 0], Action::Allow, "PER_LINUX"),
        ("personality", [8, 0, 0, 0, 0, 0], Action::Allow, "UNAME26"),
        ("personality", [0x20000, 0, 0, 0, 0, 0], Action::Allow, "PER_LINUX32"),
        ("personality", [0xffff_ffff, 0, 0, 0, 0, 0], Action::Allow, "query"),
        ("personality", [0x40000, 0, 0, 0, 0, 0], eperm, "ADDR_NO_RANDOMIZE"),
        ("personality", [0x1_0000_0000, 0, 0, 0, 0, 0], eperm, "64-bit compare"),
        ("socket", [2, 1, 0, 0, 0, 0], Action::Allow, "AF_INET"),
        ("socket", [16, 3, 9, 0, 0, 0], Action::Allow, "AF_NETLINK audit"),
        ("socket", [38, 5, 0, 0, 0, 0], eperm, "AF_ALG"),
        ("socket", [39, 1, 0, 0, 0, 0], Action::Allow, "between AF_ALG and AF_VSOCK"),
        ("socket", [40, 1, 0, 0, 0, 0], eperm, "AF_VSOCK"),
        ("socket", [41, 1, 0, 0, 0, 0], Action::Allow, "above AF_VSOCK"),
    ];
    let mut failures = Vec::new();
    for (name, args, want, why) in table {
        let got = policy.decide(x(name), args);
        if got != *want {
            failures.push(format!("{name}{args:x?}: {got}, Docker {want} ({why})"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Calls of other architectures are skipped and said.
    assert!(
        imported
            .notes
            .iter()
            .any(|n| n.contains("chown32") && n.starts_with("not x86_64 calls")),
        "{:?}",
        imported.notes
    );
    assert!(imported.toml.contains("# not x86_64 calls"));
}

#[test]
fn mobys_profile_imported_exports_exactly() {
    let (policy, _) = moby();
    let e = oci::export(
        &Profile::from_toml("m", &moby().1.toml).unwrap(),
        Arch::X86_64,
        None,
    )
    .unwrap();
    assert_same_decisions(&policy, &e.filter, "moby re-exported");
}

fn import_err(json: &str) -> oci::ImportError {
    oci::import(json, "t.json", Arch::X86_64, &env()).unwrap_err()
}

#[test]
fn bad_json_is_refused_naming_the_place() {
    let cases: &[(&str, &str, &str)] = &[
        ("{\"defaultAction\": ", "", "not JSON"),
        ("[1]", "", "expected a JSON object"),
        ("{}", "defaultAction", "SCMP_ACT_"),
        (
            r#"{"defaultAction":"SCMP_ACT_EXPLODE"}"#,
            "defaultAction",
            "unknown action `SCMP_ACT_EXPLODE`",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_NOPE"}]}"#,
            "syscalls[0].action",
            "unknown action",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_TRACE"}]}"#,
            "syscalls[0].action",
            "not supported",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_64","SCMP_ARCH_VAX"]}"#,
            "architectures[1]",
            "unknown architecture `SCMP_ARCH_VAX`",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","archMap":[{"architecture":"SCMP_ARCH_X86_64","subArchitectures":["SCMP_ARCH_Z80"]}]}"#,
            "archMap[0].subArchitectures[0]",
            "unknown architecture",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","includes":{"arches":["pdp11"]}}]}"#,
            "syscalls[0].includes.arches[0]",
            "unknown architecture `pdp11`",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["Read"],"action":"SCMP_ACT_ALLOW"}]}"#,
            "syscalls[0].names[0]",
            "not a syscall name",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":[],"action":"SCMP_ACT_ALLOW"}]}"#,
            "syscalls[0].names",
            "non-empty",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":6,"value":1,"op":"SCMP_CMP_EQ"}]}]}"#,
            "syscalls[0].args[0].index",
            "0 to 5",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":-1,"op":"SCMP_CMP_EQ"}]}]}"#,
            "syscalls[0].args[0].value",
            "integer",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"op":"SCMP_CMP_LIKE"}]}]}"#,
            "syscalls[0].args[0].op",
            "unknown comparison",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"op":"SCMP_CMP_NE"},{"index":0,"value":2,"op":"SCMP_CMP_NE"}]}]}"#,
            "syscalls[0].args[1].index",
            "compared twice",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","bogus":1}]}"#,
            "syscalls[0].bogus",
            "unknown field",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ERRNO","errnoRet":70000}]}"#,
            "syscalls[0].errnoRet",
            "1 to 4095",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"},{"names":["read"],"action":"SCMP_ACT_KILL"}]}"#,
            "syscalls[1].names[0]",
            "two actions",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","listenerPath":"/run/agent.sock"}"#,
            "listenerPath",
            "not supported",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","flags":["SECCOMP_FILTER_FLAG_MAGIC"]}"#,
            "flags[0]",
            "unknown flag",
        ),
        (
            r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW","includes":{"minKernel":"four"}}]}"#,
            "syscalls[0].includes.minKernel",
            "kernel version",
        ),
    ];
    for (json, path, reason) in cases {
        let e = import_err(json);
        assert_eq!(e.path, *path, "{json}: {e}");
        assert!(e.reason.contains(reason), "{json}: {e}");
    }
}

#[test]
fn a_huge_file_is_refused_before_parsing() {
    let big = format!(
        "{{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"comment\":\"{}\"}}",
        "x".repeat(50 << 20)
    );
    let e = import_err(&big);
    assert!(
        e.path.is_empty() && e.reason.starts_with("larger than"),
        "{e}"
    );
}

#[test]
fn names_unknown_here_are_skipped_and_listed() {
    let i = oci::import(
        r#"{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","chown32","frobnicate"],"action":"SCMP_ACT_ALLOW"}]}"#,
        "t.json",
        Arch::X86_64,
        &env(),
    )
    .unwrap();
    assert_eq!(i.profile.allow(), Some(&["read".to_string()][..]));
    assert!(i.notes[0].ends_with("chown32, frobnicate"), "{:?}", i.notes);
}
