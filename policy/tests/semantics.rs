//! `from_env` semantics and the shape and limits of compiled programs.

mod common;

use common::*;
use sandbox_policy::policy::{MAX_CONDS_PER_ALT, MAX_RULES};
use sandbox_policy::{
    bpf, grammar, Action, Arch, CmpOp, Cond, ErrorKind, Mode, Policy, Width, MAX_INSNS,
};

const X86: Arch = Arch::X86_64;

fn env(allow: Option<&str>, deny: Option<&str>, default: Option<&str>) -> (bool, Policy) {
    let mut p = Policy::new(X86, Mode::DenyList, Action::Log);
    let wanted = grammar::from_env(X86, allow, deny, default, &mut p).unwrap();
    (wanted, p)
}

fn nr(name: &str) -> u32 {
    X86.syscall_number(name).unwrap()
}

const NO_ARGS: [u64; 6] = [0; 6];

#[test]
fn neither_list_means_no_filter() {
    let (wanted, p) = env(None, None, None);
    assert!(!wanted);
    // The policy passed in is left alone.
    assert_eq!(
        (p.mode(), p.default_action()),
        (Mode::DenyList, Action::Log)
    );
    assert!(!env(None, None, Some("errno")).0);
}

#[test]
fn empty_allow_list_allows_nothing() {
    let (wanted, p) = env(Some(""), None, None);
    assert!(wanted);
    assert_eq!(
        (p.mode(), p.default_action()),
        (Mode::AllowList, Action::Kill)
    );
    for n in 0..1100 {
        assert_eq!(p.decide(n, &NO_ARGS), Action::Kill, "{n}");
    }
    assert_equivalent(&p);
}

#[test]
fn empty_deny_list_allows_everything() {
    let (wanted, p) = env(None, Some(""), None);
    assert!(wanted);
    assert_eq!(p.mode(), Mode::DenyList);
    assert!((0..1100).all(|n| p.decide(n, &NO_ARGS) == Action::Allow));
}

#[test]
fn default_action_is_kill_and_applies_to_denied_entries() {
    let (_, p) = env(None, Some("ptrace:socket=EACCES"), None);
    assert_eq!(p.decide(nr("ptrace"), &NO_ARGS), Action::Kill);
    assert_eq!(p.decide(nr("socket"), &NO_ARGS), Action::Errno(13));
    assert_eq!(p.decide(nr("read"), &NO_ARGS), Action::Allow);
    let (_, p) = env(None, Some("ptrace"), Some("errno:ENOSYS"));
    assert_eq!(p.decide(nr("ptrace"), &NO_ARGS), Action::Errno(38));
}

#[test]
fn both_lists_mean_allow_minus_deny() {
    let (wanted, p) = env(
        Some("read:write:openat:close:socket"),
        Some("write:socket(a0 == AF_INET)"),
        Some("errno:EPERM"),
    );
    assert!(wanted);
    assert_eq!(p.mode(), Mode::AllowList);
    assert_eq!(p.decide(nr("read"), &NO_ARGS), Action::Allow);
    assert_eq!(p.decide(nr("write"), &NO_ARGS), Action::Errno(1));
    assert_eq!(
        p.decide(nr("socket"), &[2, 1, 0, 0, 0, 0]),
        Action::Errno(1)
    );
    assert_eq!(p.decide(nr("socket"), &[1, 1, 0, 0, 0, 0]), Action::Allow);
    // Not in the allow list: the default, whether denied or not.
    assert_eq!(p.decide(nr("ptrace"), &NO_ARGS), Action::Errno(1));
    assert_equivalent(&p);
}

#[test]
fn deny_wins_even_when_written_with_a_weaker_action() {
    // `log` is still stricter than a plain allow: the rule comes first.
    let (_, p) = env(Some("read"), Some("read=log"), None);
    assert_eq!(p.decide(nr("read"), &NO_ARGS), Action::Log);
}

#[test]
fn trap_default_adds_write_and_rt_sigreturn_to_allow_lists() {
    let (_, p) = env(Some("read"), None, Some("trap"));
    assert!(p.is_allowed(nr("write")) && p.is_allowed(nr("rt_sigreturn")));
    assert_eq!(p.decide(nr("write"), &NO_ARGS), Action::Allow);
    assert_eq!(p.decide(nr("close"), &NO_ARGS), Action::Trap);
    // Also when only an entry traps.
    let (_, p) = env(Some("read:close=trap"), None, Some("kill"));
    assert!(p.is_allowed(nr("write")) && p.is_allowed(nr("rt_sigreturn")));
    // Not without trap.
    let (_, p) = env(Some("read"), None, Some("kill"));
    assert!(!p.is_allowed(nr("write")) && !p.is_allowed(nr("rt_sigreturn")));
    // Deny lists leave them alone (they run unless denied).
    let (_, p) = env(None, Some("read"), Some("trap"));
    assert!(!p.is_allowed(nr("write")));
    assert_eq!(p.decide(nr("write"), &NO_ARGS), Action::Allow);
    // On aarch64 too.
    let mut a = Policy::new(Arch::Aarch64, Mode::DenyList, Action::Kill);
    grammar::from_env(Arch::Aarch64, Some("read"), None, Some("trap"), &mut a).unwrap();
    assert!(a.is_allowed(64) && a.is_allowed(139));
}

#[test]
fn errors_name_the_variable() {
    let mut p = Policy::new(X86, Mode::DenyList, Action::Kill);
    let e = grammar::from_env(X86, Some("read"), Some("read:bogus"), None, &mut p).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("SECCOMP_SYSCALL_DENY entry 2 `bogus`"),
        "{e}"
    );
    let e = grammar::from_env(X86, Some("bogus"), Some("read"), None, &mut p).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("SECCOMP_SYSCALL_ALLOW entry 1 `bogus`"),
        "{e}"
    );
}

// ---- Program shape ----

/// A realistic 100-name allow list.
fn hundred_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = Vec::new();
    for g in ["base", "fd-io", "fs-read"] {
        for e in sandbox_policy::groups::find(g).unwrap().entries {
            if !e.contains('(') && X86.syscall_number(e).is_some() && !names.contains(e) {
                names.push(e);
            }
        }
    }
    names.truncate(100);
    assert_eq!(names.len(), 100);
    names
}

#[test]
fn hundred_name_allow_list_is_far_below_a_linear_chain() {
    let names = hundred_names();
    let (_, p) = env(Some(&names.join(":")), None, Some("errno:EPERM"));
    let len = assert_equivalent(&p);
    let linear = 5 + 5 * names.len();
    assert!(
        len * 2 < linear,
        "{len} instructions vs {linear} for seccompiler's chain"
    );
    // The longest path for any number is logarithmic, not linear.
    let prog = ours(&compile(&p));
    let longest = (0..1100).map(|n| path_len(&prog, n)).max().unwrap();
    assert!(longest <= 20, "longest path {longest}");
}

/// Instructions executed for `nr` with zero arguments.
fn path_len(prog: &[I], nr: u32) -> usize {
    // Re-run with a counter: truncating the program at k instructions fails until k covers the
    // path's highest address; simpler to count with a tiny stepper here.
    let d = Data::new(X86, nr, NO_ARGS);
    let mut pc = 0usize;
    let mut steps = 0;
    let bytes = d.bytes();
    let mut acc = 0u32;
    loop {
        steps += 1;
        let i = prog[pc];
        match i.code {
            bpf::LD_W_ABS => {
                acc = u32::from_le_bytes(bytes[i.k as usize..i.k as usize + 4].try_into().unwrap());
                pc += 1
            }
            bpf::ALU_AND_K => {
                acc &= i.k;
                pc += 1
            }
            bpf::JA => pc += 1 + i.k as usize,
            bpf::RET_K => return steps,
            _ => {
                let taken = match i.code {
                    bpf::JEQ_K => acc == i.k,
                    bpf::JGT_K => acc > i.k,
                    bpf::JGE_K => acc >= i.k,
                    _ => acc & i.k != 0,
                };
                pc += 1 + if taken { i.jt } else { i.jf } as usize;
            }
        }
    }
}

#[test]
fn argument_free_paths_use_only_cacheable_instructions() {
    // The kernel's action cache follows ld nr/arch, ja, jeq/jge/jgt/jset, and, ret: a number with
    // no argument rule must never load an argument.
    let (_, p) = env(
        Some("read:write:socket(a0 == AF_UNIX):openat(a2 & O_ACCMODE == O_RDONLY)"),
        Some("ioctl(a1 == TIOCSTI)=EPERM"),
        None,
    );
    let prog = compile(&p);
    for n in 0..500 {
        if p.constant_decision(n).is_none() {
            continue;
        }
        // Argument values that would change any argument-reading path's outcome.
        let a = run(&ours(&prog), &Data::new(X86, n, NO_ARGS)).unwrap();
        let b = run(&ours(&prog), &Data::new(X86, n, [u64::MAX; 6])).unwrap();
        assert_eq!(a, b, "{n}");
    }
    // And structurally, for every number the kernel's cache emulation walks: an argument-free
    // number reaches its `ret` without loading an argument (its rule blocks sit at leaves of
    // the tree or after it, never on another number's path), and a ruled number reaches its
    // block after the tree's logarithmic walk, not a chain.
    let prog = ours(&prog);
    for n in 0..1100 {
        match (p.constant_decision(n), steps_to_arg_load(&prog, n)) {
            (Some(_), None) | (None, Some(0..=16)) => {}
            (d, s) => panic!("{n}: decision {d:?}, first argument load after {s:?} steps"),
        }
    }
}

/// Instructions executed for `nr` before its first load of an argument (with zero arguments),
/// or `None` when its path reaches a `ret` without one.
fn steps_to_arg_load(prog: &[I], nr: u32) -> Option<usize> {
    let d = Data::new(X86, nr, NO_ARGS);
    let bytes = d.bytes();
    let (mut pc, mut acc, mut steps) = (0usize, 0u32, 0usize);
    loop {
        let i = prog[pc];
        match i.code {
            bpf::LD_W_ABS if i.k >= bpf::OFF_ARGS => return Some(steps),
            bpf::LD_W_ABS => {
                acc = u32::from_le_bytes(bytes[i.k as usize..i.k as usize + 4].try_into().unwrap());
                pc += 1
            }
            bpf::ALU_AND_K => {
                acc &= i.k;
                pc += 1
            }
            bpf::JA => pc += 1 + i.k as usize,
            bpf::RET_K => return None,
            _ => {
                let taken = match i.code {
                    bpf::JEQ_K => acc == i.k,
                    bpf::JGT_K => acc > i.k,
                    bpf::JGE_K => acc >= i.k,
                    _ => acc & i.k != 0,
                };
                pc += 1 + if taken { i.jt } else { i.jf } as usize;
            }
        }
        steps += 1;
    }
}

#[test]
fn layout_starts_with_the_arch_check_and_x32_guard() {
    let (_, p) = env(None, Some("ptrace"), None);
    let prog = compile(&p);
    assert_eq!(prog[0].code, bpf::LD_W_ABS);
    assert_eq!(prog[0].k, bpf::OFF_ARCH);
    assert_eq!(
        (prog[1].code, prog[1].k, prog[1].jt, prog[1].jf),
        (bpf::JEQ_K, 0xc000_003e, 1, 0)
    );
    assert_eq!((prog[2].code, prog[2].k), (bpf::RET_K, KILL));
    assert_eq!((prog[3].code, prog[3].k), (bpf::LD_W_ABS, bpf::OFF_NR));
    assert_eq!(
        (prog[4].code, prog[4].k, prog[4].jt, prog[4].jf),
        (bpf::JGE_K, X32, 0, 1)
    );
    assert_eq!((prog[5].code, prog[5].k), (bpf::RET_K, KILL));
    // aarch64: no x32 guard.
    let mut a = Policy::new(Arch::Aarch64, Mode::DenyList, Action::Kill);
    grammar::from_env(Arch::Aarch64, None, Some("ptrace"), None, &mut a).unwrap();
    let prog = compile(&a);
    assert_eq!(prog[1].k, 0xc000_00b7);
    assert_eq!((prog[3].code, prog[3].k), (bpf::LD_W_ABS, bpf::OFF_NR));
    assert_ne!(prog[4].k, X32);
    // A deny list of one name: arch check, guard, ld, a 3-range tree (two `jge`) whose leaves
    // jump to one shared `ret` per action (allow, kill).
    assert_eq!(compile(&p).len(), 6 + 2 + 2);
}

#[test]
fn compile_is_deterministic_and_compile_vec_agrees() {
    let (_, p) = env(Some("@base:@fd-io:@network"), Some("@never"), Some("trap"));
    let a = compile(&p);
    assert_eq!(a, compile(&p.clone()));
    #[cfg(feature = "std")]
    assert_eq!(bpf::compile_vec(&p).unwrap(), a);
}

/// A policy whose argument rules alone exceed the kernel's 4096 instructions.
fn oversized() -> Policy {
    let mut p = Policy::new(X86, Mode::AllowList, Action::Kill);
    // W64 masked `<` is 7 instructions per condition.
    let c = Cond {
        arg: 1,
        width: Width::W64,
        mask: 0xffff_0000_ffff_0000,
        op: CmpOp::Lt,
        value: 0x1234_0000_5678_0000,
    };
    let mut added = 0;
    for n in 0..MAX_RULES as u32 {
        // A value of its own per syscall: identical blocks would be shared (bpf.rs).
        let alt = vec![
            Cond {
                value: c.value + (u64::from(n) << 16),
                ..c
            };
            MAX_CONDS_PER_ALT
        ];
        if p.add_rule(n, Action::Errno(1), &[&alt]).is_err() {
            break;
        }
        added += 1;
    }
    assert!(
        added * (MAX_CONDS_PER_ALT * 7 + 3) > MAX_INSNS,
        "{added} rules are not enough"
    );
    p
}

#[test]
fn oversized_policy_is_filter_too_large_not_a_panic() {
    let p = oversized();
    let mut buf = vec![bpf::Insn::default(); MAX_INSNS];
    assert_eq!(
        sandbox_policy::compile(&p, &mut buf),
        Err(ErrorKind::FilterTooLarge)
    );
    // Even with a bigger buffer the kernel's limit holds.
    let mut big = vec![bpf::Insn::default(); 4 * MAX_INSNS];
    assert_eq!(
        sandbox_policy::compile(&p, &mut big),
        Err(ErrorKind::FilterTooLarge)
    );
    #[cfg(feature = "std")]
    assert_eq!(bpf::compile_vec(&p), Err(ErrorKind::FilterTooLarge));
}

#[test]
fn small_output_buffer_is_filter_too_large() {
    let (_, p) = env(Some("read:write"), None, None);
    let n = compile(&p).len();
    let mut buf = vec![bpf::Insn::default(); n - 1];
    assert_eq!(
        sandbox_policy::compile(&p, &mut buf),
        Err(ErrorKind::FilterTooLarge)
    );
    let mut buf = vec![bpf::Insn::default(); n];
    assert_eq!(sandbox_policy::compile(&p, &mut buf), Ok(n));
    assert_eq!(
        sandbox_policy::compile(&p, &mut []),
        Err(ErrorKind::FilterTooLarge)
    );
}

#[test]
fn largest_grammar_policies_stay_within_max_insns() {
    // Random and maximal policies either compile within the limit or say FilterTooLarge.
    let mut rng = Rng(42);
    for _ in 0..200 {
        let p = random_policy(&mut rng, X86);
        let mut buf = vec![bpf::Insn::default(); MAX_INSNS];
        let n = sandbox_policy::compile(&p, &mut buf).unwrap();
        assert!(n <= MAX_INSNS);
    }
    // Every syscall with a distinct action: the most ranges a tree can have.
    let mut p = Policy::new(X86, Mode::AllowList, Action::Kill);
    for n in 0..sandbox_policy::syscalls::table_len(X86) {
        if n % 2 == 0 {
            p.allow(n);
        }
    }
    let len = assert_equivalent(&p);
    assert!(len <= MAX_INSNS, "{len}");
}

#[test]
fn rule_blocks_longer_than_255_instructions_use_a_long_jump() {
    // One syscall with a rule block over 255 instructions (the jeq's jf cannot reach past it).
    let mut p = Policy::new(X86, Mode::DenyList, Action::Kill);
    let c = Cond {
        arg: 0,
        width: Width::W64,
        mask: 0xff_0000_00ff,
        op: CmpOp::Ge,
        value: 0x10_0000_0010,
    };
    for k in 0..6u64 {
        let alt = vec![
            Cond {
                value: c.value + k,
                ..c
            };
            MAX_CONDS_PER_ALT
        ];
        p.add_rule(nr("openat"), Action::Errno(k as u16 + 1), &[&alt])
            .unwrap();
    }
    p.add_rule(
        nr("read"),
        Action::Log,
        &[&[Cond {
            arg: 2,
            width: Width::W32,
            mask: u64::MAX,
            op: CmpOp::Eq,
            value: 3,
        }]],
    )
    .unwrap();
    let len = assert_equivalent(&p);
    assert!(len > 300, "{len}");
}

#[test]
fn from_env_on_a_used_policy_keeps_nothing_of_the_old_one() {
    let (_, mut used) = env(
        Some("@base:@network:socket(a0 == AF_INET)"),
        Some("@never:openat(a2 & O_ACCMODE == O_WRONLY)=EROFS"),
        Some("trap"),
    );
    grammar::from_env(X86, None, Some("uname"), None, &mut used).unwrap();
    let (_, fresh) = env(None, Some("uname"), None);
    assert_eq!(compile(&used), compile(&fresh));
    assert_eq!(used.rules().len(), 1);
    assert_eq!(
        used.decide(nr("socket"), &[2, 0, 0, 0, 0, 0]),
        Action::Allow
    );
}
