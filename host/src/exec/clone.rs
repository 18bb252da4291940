//! `clone3` for a child that shares our memory and runs on its own stack: the kernel's
//! `clone_args` and the raw call. Used by the spawn path directly and by spawner threads, so it
//! sits below both.
//!
//! Its `unsafe` stays here rather than in the boundary module (sys.rs): the child returns from
//! the call on another stack, so the call is written as inline assembly next to the layout it
//! depends on, and no safe wrapper can describe it.

use std::os::raw::{c_int, c_void};

/// `struct clone_args` up to `cgroup` (CLONE_ARGS_SIZE_VER2).
#[repr(C)]
#[derive(Default)]
pub(crate) struct CloneArgs {
    pub(crate) flags: u64,
    pub(crate) pidfd: u64,
    pub(crate) child_tid: u64,
    pub(crate) parent_tid: u64,
    pub(crate) exit_signal: u64,
    pub(crate) stack: u64,
    pub(crate) stack_size: u64,
    pub(crate) tls: u64,
    pub(crate) set_tid: u64,
    pub(crate) set_tid_size: u64,
    pub(crate) cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (Linux 5.7).
pub(crate) const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `clone3` that runs `f(arg)` in the child on the stack the arguments give, then exits with
/// its result; returns the child's pid (or `-errno`) in the parent. glibc has no wrapper that
/// takes `clone_args`, and the child cannot return from the syscall into Rust code: its stack
/// is a fresh one.
///
/// # Safety
/// `args` must describe a stack nobody else uses until the child execs or exits, and `f` must
/// never return into the caller's frames (it runs on that stack with the caller's memory).
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn clone3(
    args: &CloneArgs,
    f: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
    secret: u64,
) -> isize {
    let ret: isize;
    // SAFETY: the caller gives a valid clone_args with a stack for the child. The parent only
    // gets rax back; the child (rax == 0) calls f on its new stack, which is 16-byte aligned
    // at the top (page-aligned size), and never comes back here.
    unsafe {
        core::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit_group,
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            // clone3 takes two arguments; the spawner's filter looks for the secret in the third.
            in("rdx") secret,
            in("r12") arg,
            in("r13") f,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// Runs in a spawner thread: clones the child described by `args` (a [`CloneArgs`]) to run
/// `child_main(ctx)`, carrying the thread's secret; returns the pid or `-errno`.
///
/// # Safety
/// `args` and `ctx` must be what `spawn::start_child` passes, alive until the child has exec'd.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn clone_for_spawner(
    args: *const CloneArgs,
    entry: extern "C" fn(*mut c_void) -> c_int,
    ctx: *mut c_void,
    secret: u64,
) -> isize {
    // SAFETY: the caller's contract.
    unsafe { clone3(&*args, entry, ctx, secret) }
}
