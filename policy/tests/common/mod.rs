//! Test helpers: a classic-BPF interpreter for seccomp programs, the shape checks the kernel
//! makes when it loads one, and policy/argument-pattern generators.
#![allow(dead_code)]

use sandbox_policy::bpf::{self, Insn};
use sandbox_policy::policy::{MAX_CONDS_PER_ALT, MAX_NR};
use sandbox_policy::{Action, Arch, CmpOp, Cond, Policy, Width};

/// `struct seccomp_data`: what the kernel hands a filter.
#[derive(Clone, Copy, Debug)]
pub struct Data {
    pub nr: u32,
    pub arch: u32,
    pub ip: u64,
    pub args: [u64; 6],
}

impl Data {
    pub fn new(arch: Arch, nr: u32, args: [u64; 6]) -> Data {
        Data {
            nr,
            arch: arch.audit_arch(),
            ip: 0x7fff_dead_beef,
            args,
        }
    }

    /// The 64 bytes of `seccomp_data`, little-endian as on x86_64 and aarch64.
    pub fn bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..4].copy_from_slice(&self.nr.to_le_bytes());
        b[4..8].copy_from_slice(&self.arch.to_le_bytes());
        b[8..16].copy_from_slice(&self.ip.to_le_bytes());
        for (i, a) in self.args.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        b
    }
}

/// One instruction, whatever crate produced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct I {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl From<Insn> for I {
    fn from(i: Insn) -> I {
        I {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        }
    }
}

impl From<&seccompiler::sock_filter> for I {
    fn from(i: &seccompiler::sock_filter) -> I {
        I {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        }
    }
}

pub fn ours(prog: &[Insn]) -> Vec<I> {
    prog.iter().copied().map(I::from).collect()
}

pub fn theirs(prog: &[seccompiler::sock_filter]) -> Vec<I> {
    prog.iter().map(I::from).collect()
}

/// Runs a seccomp program on `data`; returns its `ret` value, or why the program is invalid
/// on this path (unknown opcode, bad load, jump out of range, falling off the end).
pub fn run(prog: &[I], data: &Data) -> Result<u32, String> {
    let bytes = data.bytes();
    let mut acc: u32 = 0;
    let mut pc: usize = 0;
    loop {
        let Some(i) = prog.get(pc) else {
            return Err(format!(
                "fell off the end at {pc} (program has {})",
                prog.len()
            ));
        };
        let jump = |off: u32| -> Result<usize, String> {
            let t = pc + 1 + off as usize;
            if t >= prog.len() {
                Err(format!(
                    "jump at {pc} to {t} is out of range (program has {})",
                    prog.len()
                ))
            } else {
                Ok(t)
            }
        };
        match i.code {
            bpf::LD_W_ABS => {
                let k = i.k as usize;
                if k % 4 != 0 || k + 4 > bytes.len() {
                    return Err(format!("bad load offset {k} at {pc}"));
                }
                acc = u32::from_le_bytes(bytes[k..k + 4].try_into().unwrap());
                pc += 1;
            }
            bpf::ALU_AND_K => {
                acc &= i.k;
                pc += 1;
            }
            bpf::JA => pc = jump(i.k)?,
            bpf::JEQ_K | bpf::JGT_K | bpf::JGE_K | bpf::JSET_K => {
                let taken = match i.code {
                    bpf::JEQ_K => acc == i.k,
                    bpf::JGT_K => acc > i.k,
                    bpf::JGE_K => acc >= i.k,
                    _ => acc & i.k != 0,
                };
                // The kernel checks both targets when loading, whichever is taken.
                let t = jump(u32::from(i.jt))?;
                let f = jump(u32::from(i.jf))?;
                pc = if taken { t } else { f };
            }
            bpf::RET_K => return Ok(i.k),
            c => return Err(format!("unsupported opcode {c:#x} at {pc}")),
        }
    }
}

/// The static checks of the kernel's `bpf_check_classic` and `seccomp_check_filter` for the
/// opcodes we use: length, every jump target inside the program, loads inside `seccomp_data`,
/// and a `ret` as the last instruction.
pub fn validate(prog: &[I]) -> Result<(), String> {
    if prog.is_empty() || prog.len() > bpf::MAX_INSNS {
        return Err(format!("bad length {}", prog.len()));
    }
    for (pc, i) in prog.iter().enumerate() {
        let in_range = |off: u32| pc + 1 + (off as usize) < prog.len();
        match i.code {
            bpf::LD_W_ABS if i.k % 4 == 0 && i.k < 64 => {}
            bpf::ALU_AND_K | bpf::RET_K => {}
            bpf::JA if in_range(i.k) => {}
            bpf::JEQ_K | bpf::JGT_K | bpf::JGE_K | bpf::JSET_K
                if in_range(i.jt.into()) && in_range(i.jf.into()) => {}
            _ => return Err(format!("invalid instruction {i:?} at {pc}")),
        }
    }
    if prog.last().unwrap().code != bpf::RET_K {
        return Err("the last instruction is not a ret".into());
    }
    Ok(())
}

/// Compiles with the no_std entry point (what the preload uses).
pub fn compile(policy: &Policy) -> Vec<Insn> {
    let mut buf = vec![Insn::default(); bpf::MAX_INSNS];
    let n = sandbox_policy::compile(policy, &mut buf).expect("policy compiles");
    buf.truncate(n);
    buf
}

pub const KILL: u32 = 0x8000_0000;
pub const X32: u32 = 0x4000_0000;

/// Values around every constant of a policy's rules: v-1, v, v+1, each with the high 32 bits
/// clear, set, and only bit 32 set, plus the masks and their complements, 0 and u64::MAX.
pub fn interesting_values(policy: &Policy) -> Vec<u64> {
    let mut base = vec![
        0u64,
        1,
        0xffff_ffff,
        0x1_0000_0000,
        0x8000_0000,
        u64::MAX,
        u64::MAX - 1,
    ];
    for rule in policy.rules() {
        for alt in policy.alternatives(rule) {
            for c in alt {
                base.push(c.value);
                base.push(c.value & c.mask);
                base.push(c.mask);
                base.push(!c.mask);
            }
        }
    }
    let mut out = Vec::new();
    for v in base {
        for d in [v.wrapping_sub(1), v, v.wrapping_add(1)] {
            let lo = d & 0xffff_ffff;
            out.extend([
                d,
                lo,
                lo | 0xffff_ffff_0000_0000,
                lo | 0x1_0000_0000,
                (lo << 32) | lo,
            ]);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The argument indexes a syscall's rules look at.
fn args_used(policy: &Policy, nr: u32) -> Vec<usize> {
    let mut used: Vec<usize> = policy
        .rules_for(nr)
        .iter()
        .flat_map(|r| {
            policy
                .alternatives(r)
                .flatten()
                .map(|c| c.arg as usize)
                .collect::<Vec<_>>()
        })
        .collect();
    used.sort_unstable();
    used.dedup();
    used
}

/// Argument vectors for `nr`: fixed backgrounds, plus every interesting value in each argument
/// a rule of `nr` reads, and for two such arguments, every pair.
pub fn arg_patterns(policy: &Policy, nr: u32, values: &[u64]) -> Vec<[u64; 6]> {
    let backgrounds = [
        [0u64; 6],
        [u64::MAX; 6],
        [0x1_0000_0001, 2, 0xffff_ffff, 4, 5, 6],
    ];
    let mut out: Vec<[u64; 6]> = backgrounds.to_vec();
    let used = args_used(policy, nr);
    for bg in backgrounds {
        for &a in &used {
            for &v in values {
                let mut x = bg;
                x[a] = v;
                out.push(x);
            }
        }
    }
    if used.len() >= 2 {
        // Pairs over a sample of at most 48 values, always keeping both ends.
        let step = values.len().div_ceil(48).max(1);
        let sample: Vec<u64> = values
            .iter()
            .copied()
            .step_by(step)
            .chain(values.last().copied())
            .collect();
        for (i, &a) in used.iter().enumerate() {
            for &b in &used[i + 1..] {
                for &va in &sample {
                    for &vb in &sample {
                        let mut x = [0u64; 6];
                        x[a] = va;
                        x[b] = vb;
                        out.push(x);
                    }
                }
            }
        }
    }
    out
}

/// Asserts that the compiled program decides exactly as `Policy::decide` for every number in
/// 0..1100 and argument patterns around every rule constant, kills x32 numbers (x86_64) and
/// foreign architectures, and never exceeds the kernel's limits. Returns the program length.
pub fn assert_equivalent(policy: &Policy) -> usize {
    let prog = ours(&compile(policy));
    validate(&prog).unwrap_or_else(|e| panic!("invalid program: {e}"));
    let arch = policy.arch();
    let values = interesting_values(policy);
    let mut checked = 0usize;
    for nr in 0..1100u32 {
        for args in arg_patterns(policy, nr, &values) {
            let want = policy.decide(nr, &args).ret();
            let got = run(&prog, &Data::new(arch, nr, args)).unwrap();
            assert_eq!(
                got,
                want,
                "{:?} nr {nr} ({:?}) args {args:x?}: program says {:?}, policy says {:?}",
                arch,
                arch.syscall_name(nr),
                Action::from_ret(got),
                Action::from_ret(want)
            );
            checked += 1;
        }
        // x32 aliases and foreign architectures.
        let args = [0, 1, 2, 3, 4, 5];
        let x32 = run(&prog, &Data::new(arch, X32 | nr, args)).unwrap();
        if arch.has_x32() {
            assert_eq!(x32, KILL, "x32 alias of {nr} must be killed");
        } else {
            assert_eq!(
                x32,
                policy.decide(X32 | nr, &args).ret(),
                "aarch64 has no x32 guard"
            );
        }
        for foreign in [
            0x4000_0003u32, /* i386 */
            0x4000_0028,    /* arm */
            0,
            0xc000_00b7,
            0xc000_003e,
        ] {
            if foreign == arch.audit_arch() {
                continue;
            }
            let d = Data {
                arch: foreign,
                ..Data::new(arch, nr, args)
            };
            assert_eq!(
                run(&prog, &d).unwrap(),
                KILL,
                "foreign arch {foreign:#x} nr {nr}"
            );
        }
    }
    // Numbers far beyond the table.
    for nr in [
        MAX_NR as u32 - 1,
        MAX_NR as u32,
        0x3fff_ffff,
        u32::MAX,
        0x7fff_ffff,
        0x8000_0000,
    ] {
        let args = [0; 6];
        let got = run(&prog, &Data::new(arch, nr, args)).unwrap();
        let want = if arch.has_x32() && nr >= X32 {
            KILL
        } else {
            policy.decide(nr, &args).ret()
        };
        assert_eq!(got, want, "nr {nr:#x}");
    }
    assert!(checked > 0);
    prog.len()
}

/// A tiny deterministic PRNG (xorshift64*), so tests need no extra dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

pub const ALL_OPS: [CmpOp; 6] = [
    CmpOp::Eq,
    CmpOp::Ne,
    CmpOp::Lt,
    CmpOp::Le,
    CmpOp::Gt,
    CmpOp::Ge,
];

pub fn all_actions() -> [Action; 6] {
    [
        Action::Kill,
        Action::Trap,
        Action::Errno(1),
        Action::Errno(13),
        Action::Log,
        Action::Allow,
    ]
}

/// A random condition with values and masks drawn from edge cases.
pub fn random_cond(rng: &mut Rng) -> Cond {
    let width = if rng.below(2) == 0 {
        Width::W32
    } else {
        Width::W64
    };
    let vals64 = [
        0u64,
        1,
        2,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        0x1_0000_0000,
        0x1_0000_0001,
        0xffff_ffff_0000_0000,
        0x8000_0000_0000_0000,
        u64::MAX,
        0x1234_5678_9abc_def0,
        100,
        0o100,
    ];
    let vals32 = [
        0u64,
        1,
        2,
        3,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        0xffff_ff9c,
        100,
        0o1000,
    ];
    let masks64 = [
        u64::MAX,
        0xff,
        0xffff_0000_0000_ffff,
        0xffff_ffff_0000_0000,
        0x3,
    ];
    let masks32 = [u64::MAX, 0xff, 0x3, 0xffff_0000, 0x7e02_0080];
    let (value, mask) = match width {
        Width::W32 => (rng.pick(&vals32), rng.pick(&masks32)),
        Width::W64 => (rng.pick(&vals64), rng.pick(&masks64)),
    };
    Cond {
        arg: rng.below(6) as u8,
        width,
        mask,
        op: rng.pick(&ALL_OPS),
        value,
    }
}

/// A random policy over a handful of syscall numbers, with every action kind and both modes.
pub fn random_policy(rng: &mut Rng, arch: Arch) -> Policy {
    let mode = if rng.below(2) == 0 {
        sandbox_policy::Mode::AllowList
    } else {
        sandbox_policy::Mode::DenyList
    };
    let default = rng.pick(&[Action::Kill, Action::Trap, Action::Errno(38), Action::Log]);
    let mut p = Policy::new(arch, mode, default);
    let nrs: Vec<u32> = (0..6).map(|_| rng.below(470) as u32).collect();
    for _ in 0..rng.below(30) {
        p.allow(rng.below(470) as u32);
    }
    for _ in 0..(1 + rng.below(10)) {
        let nr = rng.pick(&nrs);
        let action = rng.pick(&all_actions());
        let n_alts = rng.below(4) as usize;
        let alts: Vec<Vec<Cond>> = (0..n_alts)
            .map(|_| {
                (0..1 + rng.below(3.min(MAX_CONDS_PER_ALT as u64)))
                    .map(|_| random_cond(rng))
                    .collect()
            })
            .collect();
        let refs: Vec<&[Cond]> = alts.iter().map(|a| a.as_slice()).collect();
        if rng.below(6) == 0 {
            // Exemptions (the host's outer filter): allowed before any other rule.
            p.exempt(nr, &refs).unwrap();
        } else {
            p.add_rule(nr, action, &refs).unwrap();
        }
    }
    p
}
