//! Argument rules compare what the kernel reads: every operator of the grammar, masked and not,
//! on every argument slot of 16-, 32- and 64-bit arguments (and the explicit `aN.64`), is
//! written as list text, compiled, run through the BPF interpreter and checked against a direct
//! evaluation on the value the kernel sees, with argument values on both sides of 2^32.
//!
//! The direct evaluation does not use `Cond` or `Policy::decide`: it truncates the register to
//! the argument's type and compares in 64 bits, so a compiler or grammar that drops a half (as
//! `sendto(a4 == 0)` once did for the destination address) disagrees with it.

mod common;

use common::*;
use sandbox_policy::{grammar, Action, Arch, Mode, Policy};

const ARCHES: [Arch; 2] = [Arch::X86_64, Arch::Aarch64];
const OPS: [&str; 6] = ["==", "!=", "<", "<=", ">", ">="];
const DENIED: Action = Action::Errno(1);

/// Values on both sides of 2^32 (and of 2^16, 2^31, 2^63).
const EDGES: [u64; 16] = [
    0,
    1,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x1_0000_0001,
    0x2_0000_0000,
    0xffff_ffff_0000_0000,
    0x8000_0000_0000_0000,
    0x7fff_ffff_ffff_ffff,
    u64::MAX - 1,
    u64::MAX,
    0x1_0000_ffff,
];

/// A syscall of `arch` with an argument of `bits` in `slot`: mmap for 64 (all six of its
/// arguments are), else the first in name order.
fn syscall_with(arch: Arch, slot: u8, bits: u8) -> Option<(&'static str, u32)> {
    if bits == 64 {
        return Some(("mmap", arch.syscall_number("mmap")?));
    }
    sandbox_policy::syscalls::all(arch)
        .map(|(name, nr)| (name, u32::from(nr)))
        .find(|&(_, nr)| arch.arg_bits(nr, slot) == bits)
}

/// `(raw as the kernel reads it & mask) op value`, in 64 bits.
fn holds(raw: u64, bits: u8, mask: u64, op: &str, value: u64) -> bool {
    let seen = if bits == 64 {
        raw
    } else {
        raw & ((1u64 << bits) - 1)
    };
    let a = seen & mask;
    match op {
        "==" => a == value,
        "!=" => a != value,
        "<" => a < value,
        "<=" => a <= value,
        ">" => a > value,
        ">=" => a >= value,
        _ => unreachable!(),
    }
}

fn fits(v: u64, bits: u8) -> bool {
    bits == 64 || v >> bits == 0
}

/// Checks one rule text on `nr` against the direct evaluation for every argument value in
/// `values` (in the rule's slot; the other slots carry `noise`). Returns how many it checked.
#[allow(clippy::too_many_arguments)]
fn check(
    arch: Arch,
    name: &str,
    nr: u32,
    slot: u8,
    bits: u8,
    cond: &str,
    mask: u64,
    op: &str,
    value: u64,
    values: &[u64],
    noise: u64,
) -> usize {
    let text = format!("{name}({cond})");
    let mut p = Policy::new(arch, Mode::AllowList, DENIED);
    grammar::parse_list(&mut p, sandbox_policy::Source::Allow, &text, Action::Allow)
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    let prog = ours(&compile(&p));
    validate(&prog).unwrap_or_else(|e| panic!("{text}: {e}"));
    for &raw in values {
        let mut args = [noise; 6];
        args[usize::from(slot)] = raw;
        let want = if holds(raw, bits, mask, op, value) {
            Action::Allow
        } else {
            DENIED
        };
        let got = run(&prog, &Data::new(arch, nr, args)).unwrap();
        assert_eq!(
            got,
            want.ret(),
            "{arch:?} `{text}` (a{slot}: {bits} bits) with a{slot} = {raw:#x}: \
             program says {:?}",
            Action::from_ret(got)
        );
    }
    values.len()
}

#[test]
fn every_operator_on_every_slot_matches_the_kernels_view() {
    let mut checked = 0usize;
    let mut combos = 0usize;
    for arch in ARCHES {
        for slot in 0..6u8 {
            for bits in [16u8, 32, 64] {
                let Some((name, nr)) = syscall_with(arch, slot, bits) else {
                    continue;
                };
                assert_eq!(arch.arg_bits(nr, slot), bits);
                for seed in 1..=8u64 {
                    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(slot));
                    let random = [rng.next(), rng.next() & 0xffff_ffff, rng.next() & 0xffff];
                    let mut values: Vec<u64> = EDGES.to_vec();
                    values.extend(random);
                    for _ in 0..24 {
                        values.push(rng.next());
                    }
                    // Constants: edges and random ones that the argument can hold.
                    let mut consts: Vec<u64> = EDGES.iter().copied().chain(random).collect();
                    consts.retain(|&v| fits(v, bits));
                    let value = rng.pick(&consts);
                    let mask = rng.pick(&consts);
                    // Each constant also as a value of the argument, with its neighbours and
                    // with the upper half flipped (what an attacker sets).
                    for c in [value, mask] {
                        for d in [c.wrapping_sub(1), c, c.wrapping_add(1)] {
                            values.extend([d, d ^ 0xffff_ffff_0000_0000, d | 0x2_0000_0000]);
                        }
                    }
                    for op in OPS {
                        let cases = [
                            (format!("a{slot} {op} {value:#x}"), u64::MAX, bits),
                            (format!("a{slot} & {mask:#x} {op} {value:#x}"), mask, bits),
                            (format!("a{slot}.64 {op} {value:#x}"), u64::MAX, 64),
                            (format!("a{slot}.64 & {mask:#x} {op} {value:#x}"), mask, 64),
                        ];
                        for (cond, m, b) in cases {
                            checked += check(
                                arch,
                                name,
                                nr,
                                slot,
                                b,
                                &cond,
                                m,
                                op,
                                value,
                                &values,
                                rng.next(),
                            );
                            combos += 1;
                        }
                    }
                }
            }
        }
    }
    // 6 slots x at least two widths x 2 architectures x 8 seeds x 6 operators x 4 forms.
    assert!(combos >= 6 * 2 * 2 * 8 * 6 * 4, "{combos}");
    assert!(checked > 100_000, "{checked}");
}

#[test]
fn every_slot_has_a_64_and_a_32_bit_argument_to_test() {
    for arch in ARCHES {
        for slot in 0..6u8 {
            for bits in [32u8, 64] {
                assert!(
                    syscall_with(arch, slot, bits).is_some(),
                    "{arch:?} a{slot} {bits}"
                );
            }
        }
        assert!(syscall_with(arch, 3, 16).is_some());
    }
}

/// The review's case: `sendto(a4 == 0)` of `@fd-io`. Before argument widths followed the
/// kernel's types, 0x200000000 passed it.
#[test]
fn sendto_without_destination_refuses_an_address_above_4_gib() {
    for arch in ARCHES {
        let mut p = Policy::new(arch, Mode::AllowList, DENIED);
        grammar::parse_list(
            &mut p,
            sandbox_policy::Source::Allow,
            "@fd-io",
            Action::Allow,
        )
        .unwrap();
        let prog = ours(&compile(&p));
        let nr = arch.syscall_number("sendto").unwrap();
        let decide = |addr: u64| run(&prog, &Data::new(arch, nr, [3, 0, 1, 0, addr, 110])).unwrap();
        assert_eq!(decide(0), Action::Allow.ret());
        for addr in [0x2_0000_0000u64, 0x1_0000_0000, 0x7ffc_0000_1000, u64::MAX] {
            assert_eq!(decide(addr), DENIED.ret(), "{arch:?} {addr:#x}");
        }
    }
}

/// Types the kernel declares, spot-checked by hand (the table is generated from tracepoints).
#[test]
fn widths_of_known_arguments() {
    let x = Arch::X86_64;
    let n = |s| x.syscall_number(s).unwrap();
    for (name, bits) in [
        ("sendto", [32u8, 64, 64, 32, 64, 32]),
        ("socket", [32, 32, 32, 64, 64, 64]),
        ("socketpair", [32, 32, 32, 64, 64, 64]),
        ("openat", [32, 64, 32, 16, 64, 64]),
        ("ioctl", [32, 32, 64, 64, 64, 64]),
        ("fcntl", [32, 32, 64, 64, 64, 64]),
        ("clone", [64, 64, 64, 64, 64, 64]),
        ("personality", [32, 64, 64, 64, 64, 64]),
        ("prctl", [32, 64, 64, 64, 64, 64]),
        ("seccomp", [32, 32, 64, 64, 64, 64]),
        ("mmap", [64; 6]),
        ("getpid", [64; 6]),
    ] {
        let got: Vec<u8> = (0..6).map(|a| x.arg_bits(n(name), a)).collect();
        assert_eq!(got, bits, "{name}");
    }
    // Beyond the table and beyond six arguments: the whole register.
    assert_eq!(x.arg_bits(5000, 0), 64);
    assert_eq!(x.arg_bits(n("socket"), 6), 64);
    assert_eq!(x.arg_bits(n("socket"), 255), 64);
}

/// Where the running kernel exposes its syscall tracepoints (tracefs mounted; root), the table
/// agrees with the argument types they declare.
#[test]
fn widths_agree_with_the_running_kernels_tracepoints() {
    let dir = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .map(|d| std::path::Path::new(d).join("events/syscalls"))
        .chain(
            std::env::var_os("SANDBOX_TRACEFS")
                .map(|d| std::path::Path::new(&d).join("events/syscalls")),
        )
        .find(|d| d.is_dir());
    let Some(dir) = dir else {
        eprintln!("no tracefs with syscall events: table not compared with this kernel");
        return;
    };
    if sandbox_policy::NATIVE != Arch::X86_64 {
        return;
    }
    let x = Arch::X86_64;
    let mut compared = 0;
    for (name, nr) in sandbox_policy::syscalls::all(x) {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("sys_enter_{name}/format"))) else {
            continue;
        };
        let types: Vec<String> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("field:"))
            .filter(|l| l.contains("offset:16") || l.contains("size:8"))
            .filter(|l| !l.contains("__syscall_nr") && !l.contains("common_"))
            .map(|l| {
                let decl = l.split(';').next().unwrap();
                decl[..decl.rfind([' ', '*']).unwrap() + 1]
                    .trim()
                    .to_string()
            })
            .collect();
        for (i, t) in types.iter().enumerate() {
            let want = if t.contains('*') {
                64
            } else if t == "umode_t" {
                16
            } else if [
                "long",
                "unsigned long",
                "size_t",
                "loff_t",
                "off_t",
                "aio_context_t",
                "__u64",
                "u64",
                "cap_user_header_t",
                "cap_user_data_t",
            ]
            .contains(&t.trim_start_matches("const ").trim())
            {
                64
            } else {
                32
            };
            assert_eq!(x.arg_bits(u32::from(nr), i as u8), want, "{name} a{i}: {t}");
            compared += 1;
        }
    }
    assert!(compared > 500, "{compared}");
}

fn builtin(name: &str, arch: Arch) -> Box<Policy> {
    sandbox_policy::profile::Profile::builtin(name)
        .unwrap()
        .policy(arch, None)
        .unwrap()
        .unwrap_or_else(|| panic!("{name} has a filter"))
}

/// Every argument rule of every built-in profile decides the same whatever the upper half of an
/// argument the kernel reads as 32 bits (or the upper 48 of a 16-bit one) holds: setting those
/// bits neither passes a refusal nor refuses an allowed call. And a 64-bit argument's upper half
/// is not ignored: 0x200000000 is not 0.
#[test]
fn builtin_rules_ignore_exactly_the_bits_the_kernel_ignores() {
    let mut checked = 0;
    for arch in ARCHES {
        for name in sandbox_policy::profile::Profile::builtin_names() {
            if name == "unrestricted" {
                continue;
            }
            let p = builtin(name, arch);
            let prog = ours(&compile(&p));
            let mut ruled: Vec<u32> = p.rules().iter().map(|r| u32::from(r.nr)).collect();
            ruled.dedup();
            for nr in ruled {
                for slot in 0..6u8 {
                    let bits = arch.arg_bits(nr, slot);
                    if bits == 64 {
                        continue;
                    }
                    let ignored = !((1u64 << bits) - 1);
                    let mut values: Vec<u64> = EDGES.to_vec();
                    for c in p
                        .rules_for(nr)
                        .iter()
                        .flat_map(|r| p.alternatives(r).flatten())
                    {
                        values.extend([c.value, c.value.wrapping_add(1), c.mask, !c.mask]);
                    }
                    for &v in &values {
                        let mut args = [0u64; 6];
                        args[usize::from(slot)] = v & !ignored;
                        let d = |args: [u64; 6]| run(&prog, &Data::new(arch, nr, args)).unwrap();
                        let want = d(args);
                        assert_eq!(want, p.decide(nr, &args).ret());
                        for high in [ignored, 0x2_0000_0000 & ignored, 0x8000_0000_0000_0000] {
                            let mut hi = args;
                            hi[usize::from(slot)] |= high;
                            assert_eq!(
                                d(hi),
                                want,
                                "{name} {arch:?} {:?} a{slot} ({bits} bits) = {:#x}",
                                arch.syscall_name(nr),
                                hi[usize::from(slot)]
                            );
                            checked += 1;
                        }
                    }
                }
            }
            // sendto's destination (in @fd-io of every profile but no-exec): only a null one.
            if let Some(nr) = arch.syscall_number("sendto") {
                if !p.is_allowed(nr) && !p.rules_for(nr).is_empty() {
                    let args = |a: u64| [3, 0, 1, 0, a, 110];
                    assert_eq!(
                        run(&prog, &Data::new(arch, nr, args(0))).unwrap(),
                        0x7fff_0000
                    );
                    let high = run(&prog, &Data::new(arch, nr, args(0x2_0000_0000))).unwrap();
                    assert_ne!(high, 0x7fff_0000, "{name} {arch:?}");
                }
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}

/// What the profiles with a network do with each socket family: Unix, TCP and UDP over IPv4 and
/// IPv6, and NETLINK_ROUTE (glibc's getaddrinfo, ip) run; the rest is refused, socketpair
/// included. `unrestricted` has no filter: it is the control, and the kernel test in
/// host/tests/sockets.rs shows AF_VSOCK being created there.
#[test]
fn network_profiles_allow_only_the_families_tools_use() {
    const AF_UNIX: u64 = 1;
    const AF_INET: u64 = 2;
    const AF_INET6: u64 = 10;
    const AF_NETLINK: u64 = 16;
    let allowed: [[u64; 3]; 10] = [
        [AF_UNIX, 1, 0],
        [AF_UNIX, 2, 0],
        [AF_UNIX, 5, 0],
        [AF_INET, 1, 6],
        [AF_INET, 2 | 0x80000, 17],
        [AF_INET, 1 | 0x800 | 0x80000, 0],
        [AF_INET6, 1, 0],
        [AF_INET6, 2, 0],
        [AF_NETLINK, 3 | 0x80000, 0],
        [AF_NETLINK, 2, 0],
    ];
    // The first nine are families; the last three types and protocols.
    let refused: [[u64; 3]; 12] = [
        [0, 1, 0],          // AF_UNSPEC
        [40, 1, 0],         // AF_VSOCK
        [40, 2, 0],         // AF_VSOCK
        [17, 3, 0],         // AF_PACKET
        [17, 2, 0],         // AF_PACKET
        [38, 5, 0],         // AF_ALG
        [31, 1, 0],         // AF_BLUETOOTH
        [44, 3, 0],         // AF_XDP
        [15, 3, 2],         // AF_KEY
        [AF_INET, 3, 1],    // raw ICMP
        [AF_INET6, 3, 58],  // raw ICMPv6
        [AF_NETLINK, 3, 9], // NETLINK_AUDIT
    ];
    let allow = 0x7fff_0000u32;
    for arch in ARCHES {
        let socket = arch.syscall_number("socket").unwrap();
        let pair = arch.syscall_number("socketpair").unwrap();
        for name in ["network", "shell-network", "no-exec"] {
            // no-exec, a deny list, refuses families; the type and the netlink protocol are
            // narrowed by @network's rule in the allow lists only.
            let narrowed: &[[u64; 3]] = if name == "no-exec" {
                &refused[..9]
            } else {
                &refused
            };
            let p = builtin(name, arch);
            let prog = ours(&compile(&p));
            let d = |nr, [f, t, proto]: [u64; 3]| {
                let args = [f, t, proto, 0x7ffc_0000, 0, 0];
                let got = run(&prog, &Data::new(arch, nr, args)).unwrap();
                assert_eq!(got, p.decide(nr, &args).ret());
                // The upper half of the int arguments changes nothing.
                let hi = [
                    f | 0xffff_ffff_0000_0000,
                    t | 1 << 40,
                    proto | 1 << 63,
                    0x7ffc_0000,
                    0,
                    0,
                ];
                assert_eq!(run(&prog, &Data::new(arch, nr, hi)).unwrap(), got);
                got
            };
            for s in allowed {
                assert_eq!(d(socket, s), allow, "{name} {arch:?} socket{s:?}");
            }
            for &s in narrowed {
                assert_ne!(d(socket, s), allow, "{name} {arch:?} socket{s:?}");
            }
            for s in refused {
                assert_ne!(d(pair, s), allow, "{name} {arch:?} socketpair{s:?}");
            }
            assert_eq!(d(pair, [AF_UNIX, 1, 0]), allow, "{name} socketpair unix");
            for f in [AF_INET, AF_INET6, AF_NETLINK] {
                assert_ne!(d(pair, [f, 1, 0]), allow, "{name} socketpair {f}");
            }
        }
    }
}
