//! Our compiled programs against seccompiler 0.5's, run in the same interpreter: for plain name
//! lists and for argument conditions seccompiler can express, both decide identically.

mod common;

use common::*;
use sandbox_policy::{grammar, Action, Arch, Mode, Policy};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as C,
    SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

const ARCH: Arch = Arch::X86_64;

fn ours_from_env(allow: Option<&str>, deny: Option<&str>, default: &str) -> Vec<I> {
    let mut p = Policy::new(ARCH, Mode::DenyList, Action::Kill);
    assert!(grammar::from_env(ARCH, allow, deny, Some(default), &mut p).unwrap());
    let prog = ours(&compile(&p));
    validate(&prog).unwrap();
    prog
}

fn sc_action(a: Action) -> SeccompAction {
    match a {
        Action::Kill => SeccompAction::KillProcess,
        Action::Trap => SeccompAction::Trap,
        Action::Errno(e) => SeccompAction::Errno(e.into()),
        Action::Log => SeccompAction::Log,
        Action::Allow => SeccompAction::Allow,
    }
}

fn theirs_compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    mismatch: Action,
    matched: Action,
) -> Vec<I> {
    let f = SeccompFilter::new(
        rules,
        sc_action(mismatch),
        sc_action(matched),
        TargetArch::x86_64,
    )
    .unwrap();
    let prog: BpfProgram = f.try_into().unwrap();
    let prog = theirs(&prog);
    validate(&prog).unwrap();
    prog
}

fn nrs(names: &[&str]) -> Vec<u32> {
    names
        .iter()
        .map(|n| ARCH.syscall_number(n).unwrap_or_else(|| panic!("{n}")))
        .collect()
}

const NAMES: &[&str] = &[
    "read",
    "write",
    "openat",
    "close",
    "mmap",
    "munmap",
    "brk",
    "exit_group",
    "futex",
    "getrandom",
    "newfstatat",
    "rt_sigreturn",
    "rt_sigaction",
    "clone3",
    "execve",
    "ptrace",
    "socket",
    "file_setattr",
];

fn decide(prog: &[I], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    run(
        prog,
        &Data {
            arch,
            ..Data::new(ARCH, nr, args)
        },
    )
    .unwrap()
}

#[test]
fn allow_lists_agree_with_seccompiler() {
    let defaults = [
        ("kill", Action::Kill),
        ("errno:EPERM", Action::Errno(1)),
        ("errno:ENOSYS", Action::Errno(38)),
        ("log", Action::Log),
        ("trap", Action::Trap),
    ];
    for names in [&NAMES[..1], &NAMES[..5], NAMES] {
        for (text, default) in defaults {
            let ours = ours_from_env(Some(&names.join(":")), None, text);
            let mut allowed = nrs(names);
            if default == Action::Trap {
                // Our allow lists add what the SIGSYS handler needs.
                allowed.extend(nrs(&["write", "rt_sigreturn"]));
            }
            let rules = allowed.iter().map(|&nr| (i64::from(nr), vec![])).collect();
            let theirs = theirs_compile(rules, default, Action::Allow);
            let x86 = ARCH.audit_arch();
            for nr in 0..1100 {
                let args = [nr as u64, 1, 2, 3, 4, 5];
                let (a, b) = (decide(&ours, x86, nr, args), decide(&theirs, x86, nr, args));
                assert_eq!(a, b, "nr {nr} default {text}");
                // x32: both refuse; ours kills, seccompiler gives the mismatch action.
                let (a, b) = (
                    decide(&ours, x86, X32 | nr, args),
                    decide(&theirs, x86, X32 | nr, args),
                );
                assert_eq!(a, KILL, "x32 {nr}");
                assert_eq!(b, default.ret(), "seccompiler: x32 {nr} by mismatch");
                assert_ne!(b, Action::Allow.ret());
                // A foreign architecture: both kill the process.
                for arch in [0x4000_0003, 0xc000_00b7] {
                    assert_eq!(decide(&ours, arch, nr, args), KILL);
                    assert_eq!(decide(&theirs, arch, nr, args), KILL);
                }
            }
        }
    }
}

#[test]
fn deny_lists_agree_with_seccompiler_except_x32() {
    for (text, action) in [
        ("kill", Action::Kill),
        ("errno:EACCES", Action::Errno(13)),
        ("log", Action::Log),
        ("trap", Action::Trap),
    ] {
        for names in [&NAMES[13..], NAMES] {
            let ours = ours_from_env(None, Some(&names.join(":")), text);
            let rules = nrs(names)
                .iter()
                .map(|&nr| (i64::from(nr), vec![]))
                .collect();
            let theirs = theirs_compile(rules, Action::Allow, action);
            let x86 = ARCH.audit_arch();
            for nr in 0..1100 {
                let args = [0; 6];
                assert_eq!(
                    decide(&ours, x86, nr, args),
                    decide(&theirs, x86, nr, args),
                    "nr {nr}"
                );
                // The documented difference: seccompiler has no x32 guard, so in a deny list an
                // x32 alias of a denied call runs; ours kills every x32 number.
                assert_eq!(decide(&ours, x86, X32 | nr, args), KILL);
                assert_eq!(decide(&theirs, x86, X32 | nr, args), Action::Allow.ret());
                assert_eq!(decide(&ours, 0x4000_0003, nr, args), KILL);
                assert_eq!(decide(&theirs, 0x4000_0003, nr, args), KILL);
            }
        }
    }
}

/// One condition in both languages.
struct Both {
    text: &'static str,
    theirs: C,
}

fn both(text: &'static str, arg: u8, len: Len, op: Op, value: u64) -> Both {
    Both {
        text,
        theirs: C::new(arg, len, op, value).unwrap(),
    }
}

#[test]
fn argument_conditions_agree_with_seccompiler() {
    // (syscall, alternatives of ANDed conditions), expressible in both.
    let socket = vec![
        vec![both("a0 == 1", 0, Len::Dword, Op::Eq, 1)],
        vec![
            both("a0 == 2", 0, Len::Dword, Op::Eq, 2),
            both("a1 != 3", 1, Len::Dword, Op::Ne, 3),
        ],
    ];
    let mmap = vec![
        vec![both(
            "a1.64 > 0x100000000",
            1,
            Len::Qword,
            Op::Gt,
            0x1_0000_0000,
        )],
        vec![
            both("a1.64 <= 4096", 1, Len::Qword, Op::Le, 4096),
            // mmap's prot is an `unsigned long`: a bare argument compares all 64 bits.
            both("a2 >= 5", 2, Len::Qword, Op::Ge, 5),
        ],
        vec![both(
            "a3.64 < 0xffffffff00000000",
            3,
            Len::Qword,
            Op::Lt,
            0xffff_ffff_0000_0000,
        )],
    ];
    let openat = vec![
        vec![both("a2 & 3 == 1", 2, Len::Dword, Op::MaskedEq(3), 1)],
        vec![both(
            "a2.64 & 0xff000000ff == 0x100000000",
            2,
            Len::Qword,
            Op::MaskedEq(0xff_0000_00ff),
            0x1_0000_0000,
        )],
        vec![
            both("a0 < 0x80000000", 0, Len::Dword, Op::Lt, 0x8000_0000),
            both("a2 <= 7", 2, Len::Dword, Op::Le, 7),
        ],
    ];
    let ioctl = vec![
        vec![both("a1.64 == 0x5412", 1, Len::Qword, Op::Eq, 0x5412)],
        vec![
            both("a1.64 != 0x541c", 1, Len::Qword, Op::Ne, 0x541c),
            both("a1 > 0x5400", 1, Len::Dword, Op::Gt, 0x5400),
        ],
    ];
    let rules: Vec<(&str, Vec<Vec<Both>>)> = vec![
        ("socket", socket),
        ("mmap", mmap),
        ("openat", openat),
        ("ioctl", ioctl),
    ];

    let entries: Vec<String> = rules
        .iter()
        .map(|(name, alts)| {
            let alts: Vec<String> = alts
                .iter()
                .map(|conj| conj.iter().map(|c| c.text).collect::<Vec<_>>().join(" && "))
                .collect();
            format!("{name}({})", alts.join(" || "))
        })
        .collect();
    let list = format!("{}:read:write", entries.join(":"));
    let mut sc_rules: BTreeMap<i64, Vec<SeccompRule>> = rules
        .iter()
        .map(|(name, alts)| {
            let rs = alts.iter().map(|conj| {
                SeccompRule::new(conj.iter().map(|c| c.theirs.clone()).collect()).unwrap()
            });
            (i64::from(ARCH.syscall_number(name).unwrap()), rs.collect())
        })
        .collect();
    for nr in nrs(&["read", "write"]) {
        sc_rules.insert(i64::from(nr), vec![]);
    }

    for (mode, default) in [
        ("allow", Action::Errno(1)),
        ("allow", Action::Kill),
        ("deny", Action::Errno(13)),
    ] {
        let (ours, theirs) = if mode == "allow" {
            let text = default.to_string();
            (
                ours_from_env(Some(&list), None, &text),
                theirs_compile(sc_rules.clone(), default, Action::Allow),
            )
        } else {
            let text = default.to_string();
            (
                ours_from_env(None, Some(&list), &text),
                theirs_compile(sc_rules.clone(), Action::Allow, default),
            )
        };
        let values: Vec<u64> = {
            let mut v = vec![0u64, u64::MAX];
            for base in [
                1u64,
                2,
                3,
                5,
                7,
                4096,
                0x5400,
                0x5412,
                0x541c,
                0x8000_0000,
                0x1_0000_0000,
                0xff_0000_00ff,
                0xffff_ffff_0000_0000,
            ] {
                for d in [base.wrapping_sub(1), base, base + 1] {
                    v.extend([
                        d,
                        d | 0xffff_ffff_0000_0000,
                        d & 0xffff_ffff,
                        d | 0x1_0000_0000,
                    ]);
                }
            }
            v.sort_unstable();
            v.dedup();
            v
        };
        let x86 = ARCH.audit_arch();
        let mut compared = 0;
        let mut outcomes = std::collections::BTreeSet::new();
        for (name, _) in &rules {
            let nr = ARCH.syscall_number(name).unwrap();
            for i in 0..4 {
                for &v in &values {
                    for &w in &values[..values.len().min(24)] {
                        let mut args = [0u64; 6];
                        args[i] = v;
                        args[(i + 1) % 4] = w;
                        let (a, b) = (decide(&ours, x86, nr, args), decide(&theirs, x86, nr, args));
                        assert_eq!(a, b, "{mode} {name} {args:x?}");
                        outcomes.insert(a);
                        compared += 1;
                    }
                }
            }
        }
        assert!(compared > 1000);
        // The patterns reach both outcomes of the rules, not only one.
        assert_eq!(outcomes.len(), 2, "{outcomes:x?}");
        for nr in 0..1100 {
            let args = [1, 2, 3, 4, 5, 6];
            assert_eq!(
                decide(&ours, x86, nr, args),
                decide(&theirs, x86, nr, args),
                "{mode} nr {nr}"
            );
        }
    }
}
