//! Measurements of the compiled programs (ignored by default; run with `--ignored --nocapture`):
//! each built-in profile's length, the instructions the kernel walks to build its decision
//! cache when the program is attached, the walk of a few hot calls, and the attach time.

use sandbox_policy::bpf::{self, Insn};
use sandbox_policy::profile::Profile;
use sandbox_policy::spawner::SECRET_CALLS;
use sandbox_policy::{Policy, NATIVE};

/// Instructions executed for `nr` with zero arguments, and whether the walk stayed on the
/// number (what the kernel's cache emulation can follow: it gives up at any other load).
fn walk(prog: &[Insn], nr: u32) -> (usize, bool) {
    let (mut pc, mut acc, mut steps) = (0usize, 0u32, 0usize);
    loop {
        let i = prog[pc];
        steps += 1;
        match i.code {
            bpf::LD_W_ABS => {
                acc = match i.k {
                    bpf::OFF_NR => nr,
                    bpf::OFF_ARCH => NATIVE.audit_arch(),
                    _ => return (steps, false),
                };
                pc += 1;
            }
            bpf::JA => pc += 1 + i.k as usize,
            bpf::JEQ_K | bpf::JGT_K | bpf::JGE_K | bpf::JSET_K => {
                let taken = match i.code {
                    bpf::JEQ_K => acc == i.k,
                    bpf::JGT_K => acc > i.k,
                    bpf::JGE_K => acc >= i.k,
                    _ => acc & i.k != 0,
                };
                pc += 1 + usize::from(if taken { i.jt } else { i.jf });
            }
            bpf::RET_K => return (steps, true),
            _ => pc += 1,
        }
    }
}

fn builtin(name: &str) -> Option<Box<Policy>> {
    Profile::builtin(name)
        .unwrap()
        .policy(NATIVE, None)
        .unwrap()
}

/// `name`'s policy with the spawner's exemptions, as the engine attaches it.
fn exempted(name: &str) -> Option<Box<Policy>> {
    let mut p = builtin(name)?;
    let secret = 0x0123_4567_89ab_cdef_u64;
    let text: Vec<String> = SECRET_CALLS
        .iter()
        .filter(|(n, _)| {
            NATIVE
                .syscall_number(n)
                .is_some_and(|nr| p.constant_decision(nr) != Some(sandbox_policy::Action::Allow))
        })
        .map(|(n, a)| format!("{n}(a{a}.64 == {secret:#x})"))
        .collect();
    sandbox_policy::parse_exemptions(&mut p, sandbox_policy::Source::Allow, &text.join(":"))
        .unwrap();
    Some(p)
}

#[test]
#[ignore = "a measurement: prints figures"]
fn sizes_and_walks() {
    let names = Profile::builtin_names().flat_map(|n| [(n, false), (n, true)]);
    for (name, exempt) in names {
        let p = if exempt {
            exempted(name)
        } else {
            builtin(name)
        };
        let Some(p) = p else { continue };
        let prog = bpf::compile_vec(&p).unwrap();
        // The kernel emulates every number of its syscall table (x86_64: up to 462).
        let cache: usize = (0..463).map(|nr| walk(&prog, nr).0).sum();
        let hot: Vec<String> = ["openat", "read", "write", "close", "mmap", "ioctl"]
            .iter()
            .filter_map(|n| {
                let nr = NATIVE.syscall_number(n)?;
                let (s, cached) = walk(&prog, nr);
                Some(format!("{n} {s}{}", if cached { "" } else { "+args" }))
            })
            .collect();
        println!(
            "{name}{}: {} instructions, cache walk {cache}, {}",
            if exempt { " +exemptions" } else { "" },
            prog.len(),
            hot.join(", ")
        );
    }
}

/// Median nanoseconds of one `seccomp(SET_MODE_FILTER)` of `minimal`'s program, each in a
/// fresh forked child.
#[test]
#[ignore = "a measurement: forks and attaches filters"]
fn attach_minimal() {
    let exempt = std::env::var_os("ATTACH_EXEMPTED").is_some();
    let p = if exempt {
        exempted("minimal")
    } else {
        builtin("minimal")
    };
    let prog = bpf::compile_vec(&p.unwrap()).unwrap();
    let n: usize = std::env::var("ATTACH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let mut fds = [0; 2];
        // SAFETY: a pipe into a valid array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child only makes system calls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            };
            let mut t0 = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let mut t1 = t0;
            // SAFETY: plain system calls on valid pointers, then _exit.
            unsafe {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t0);
                let r = libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &fprog as *const libc::sock_fprog,
                );
                libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t1);
                let ns: u64 = if r == 0 {
                    ((t1.tv_sec - t0.tv_sec) * 1_000_000_000 + (t1.tv_nsec - t0.tv_nsec)) as u64
                } else {
                    u64::MAX
                };
                libc::write(fds[1], (&ns as *const u64).cast(), 8);
                libc::_exit(0);
            }
        }
        let mut ns = 0u64;
        // SAFETY: reads 8 bytes into a u64, waits for the child, closes the pipe.
        unsafe {
            libc::read(fds[0], (&mut ns as *mut u64).cast(), 8);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert_ne!(ns, u64::MAX, "the kernel refused the program");
        times.push(ns);
    }
    times.sort_unstable();
    println!(
        "minimal{}: {} instructions, attach median {} ns, p10 {} p90 {} (n={n})",
        if exempt { " +exemptions" } else { "" },
        prog.len(),
        times[n / 2],
        times[n / 10],
        times[n * 9 / 10]
    );
}

/// Median microseconds to compile `minimal` with the spawner's exemptions (warm loop), as the
/// engine does on every one-shot run.
#[test]
#[ignore = "a measurement: prints figures"]
fn compile_time() {
    let p = exempted("minimal").unwrap();
    let mut buf = vec![bpf::Insn::default(); bpf::MAX_INSNS];
    let mut times: Vec<u128> = (0..2000)
        .map(|_| {
            let t = std::time::Instant::now();
            bpf::compile(&p, &mut buf).unwrap();
            t.elapsed().as_nanos()
        })
        .collect();
    times.sort_unstable();
    println!("compile minimal +exemptions: median {} ns", times[1000]);
}
