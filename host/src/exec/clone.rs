//! `clone3` for a child that shares our memory and runs on its own stack: the kernel's
//! `clone_args` and the raw call. Used by the spawn path directly and by spawner threads, so it
//! sits below both.
//!
//! Where `clone3` is refused (Docker's default seccomp profile answers it with ENOSYS for a
//! container without `CAP_SYS_ADMIN`; other runtimes' default errno is EPERM), the same
//! `clone_args` are given to the older `clone`, which takes the same flags but no
//! `CLONE_INTO_CGROUP`: [`clone3_works`] tells callers to have the child join its cgroup
//! itself. Whether `clone3` works is probed once per process with arguments the kernel itself
//! rejects (EINVAL): nothing is created, and only a seccomp filter (or a kernel before 5.3)
//! answers ENOSYS or EPERM.
//!
//! Its `unsafe` stays here rather than in the boundary module (sys.rs): the child returns from
//! the call on another stack, so the call is written as inline assembly next to the layout it
//! depends on, and no safe wrapper can describe it.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU8, Ordering};

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

/// [`CLONE3`] values.
const UNKNOWN: u8 = 0;
const WORKS: u8 = 1;
const REFUSED: u8 = 2;

/// Whether `clone3` reaches the kernel here, once probed.
static CLONE3: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Whether `clone3` reaches the kernel in this process (probed on first use). When it does
/// not, [`clone3`] uses `clone`, which cannot create a child in a cgroup: callers then leave
/// `CLONE_INTO_CGROUP` out and have the child join the cgroup before it runs the program.
pub(crate) fn clone3_works() -> bool {
    probe(0)
}

/// The probe behind [`clone3_works`], with `secret` where a spawner thread's filter looks for
/// it (raw calls only, no allocation: it may run on a spawner thread).
fn probe(secret: u64) -> bool {
    match CLONE3.load(Ordering::Relaxed) {
        WORKS => return true,
        REFUSED => return false,
        _ => {}
    }
    let ret: isize;
    // SAFETY: clone3 with a null `clone_args` of size 0: the kernel rejects the size (EINVAL)
    // before it reads anything or creates a process. The secret goes in the third argument,
    // as for every clone3 of a spawner thread.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") 0usize,
            in("rsi") 0usize,
            in("rdx") secret,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = secret;
        ret = -(libc::ENOSYS as isize);
    }
    let works = !(ret == -(libc::ENOSYS as isize) || ret == -(libc::EPERM as isize));
    CLONE3.store(if works { WORKS } else { REFUSED }, Ordering::Relaxed);
    works
}

/// `clone3` that runs `f(arg)` in the child on the stack the arguments give, then exits with
/// its result; returns the child's pid (or `-errno`) in the parent. glibc has no wrapper that
/// takes `clone_args`, and the child cannot return from the syscall into Rust code: its stack
/// is a fresh one. Where `clone3` is refused, the same arguments go to `clone` ([`legacy`]);
/// `CLONE_INTO_CGROUP` is then refused with EINVAL (see [`clone3_works`]).
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
    if !probe(secret) {
        // SAFETY: the caller's contract, which `legacy` shares.
        return unsafe { legacy(args, f, arg, secret) };
    }
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

/// Flags `clone` takes in its first argument: the low 32 bits, less the exit signal's byte.
const LEGACY_FLAGS: u64 = 0xffff_ff00;

/// `clone` with the meaning of `args`: the flags and exit signal in one word, the top of the
/// stack (clone3 takes its base and size), the pidfd's address in the parent-tid argument
/// (where `CLONE_PIDFD` stores it for `clone`), the child-tid word and TLS. Flags `clone`
/// cannot express (above 32 bits: `CLONE_INTO_CGROUP`), an exit signal above 255, or
/// `set_tid` are refused with EINVAL rather than dropped: a child outside its cgroup would
/// escape the run's limits.
///
/// # Safety
/// As [`clone3`].
#[cfg(target_arch = "x86_64")]
unsafe fn legacy(
    args: &CloneArgs,
    f: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
    secret: u64,
) -> isize {
    if args.flags & !LEGACY_FLAGS != 0
        || args.exit_signal > 0xff
        || args.set_tid_size != 0
        || (args.flags & libc::CLONE_PIDFD as u64 != 0
            && args.flags & libc::CLONE_PARENT_SETTID as u64 != 0)
    {
        return -(libc::EINVAL as isize);
    }
    let parent_tid = if args.flags & libc::CLONE_PIDFD as u64 != 0 {
        args.pidfd
    } else {
        args.parent_tid
    };
    let top = if args.stack == 0 {
        0
    } else {
        args.stack + args.stack_size
    };
    let ret: isize;
    // SAFETY: as in `clone3`: the child (rax == 0) starts on `top`, the same 16-byte aligned
    // top clone3 would give it, calls f and never comes back. clone uses five arguments; the
    // spawner's filter looks for the secret in the sixth (r9).
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
            inlateout("rax") libc::SYS_clone as isize => ret,
            in("rdi") args.flags | args.exit_signal,
            in("rsi") top,
            in("rdx") parent_tid,
            in("r10") args.child_tid,
            in("r8") args.tls,
            in("r9") secret,
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

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, AtomicU32};

    /// Stores its argument's marker and exits with 7.
    extern "C" fn child(arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the parent's AtomicU32, alive until the child has exited.
        unsafe { (*(arg as *const AtomicU32)).store(42, Ordering::Relaxed) };
        7
    }

    #[test]
    fn the_clone_path_gives_a_child_its_stack_pidfd_exit_signal_and_cleared_tid() {
        const SIZE: usize = 64 * 1024;
        let mut stack = vec![0u128; SIZE / 16];
        let pidfd = AtomicI32::new(-1);
        let marker = AtomicU32::new(0);
        let tid = AtomicU32::new(1);
        let args = CloneArgs {
            flags: (libc::CLONE_VM | libc::CLONE_PIDFD | libc::CLONE_CHILD_CLEARTID) as u64,
            pidfd: pidfd.as_ptr() as u64,
            child_tid: tid.as_ptr() as u64,
            exit_signal: libc::SIGCHLD as u64,
            stack: stack.as_mut_ptr() as u64,
            stack_size: SIZE as u64,
            ..CloneArgs::default()
        };
        let arg = &marker as *const AtomicU32 as *mut c_void;
        // SAFETY: the stack is ours until the child is reaped below; `child` exits.
        let pid = unsafe { legacy(&args, child, arg, 0) };
        assert!(pid > 0, "clone: {pid}");
        let mut status = 0;
        // SAFETY: reaps our own child.
        let waited = unsafe { libc::waitpid(pid as i32, &mut status, 0) };
        assert_eq!(waited, pid as i32);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 7);
        assert_eq!(marker.load(Ordering::Relaxed), 42);
        assert_eq!(tid.load(Ordering::Relaxed), 0, "CLONE_CHILD_CLEARTID");
        let fd = pidfd.load(Ordering::Relaxed);
        assert!(fd > 2, "CLONE_PIDFD stored a descriptor: {fd}");
        // SAFETY: closes the pidfd the clone made for us.
        unsafe { libc::close(fd) };
        drop(stack);
    }

    #[test]
    fn the_clone_path_refuses_what_clone_cannot_express() {
        let args = CloneArgs {
            flags: libc::CLONE_VM as u64 | CLONE_INTO_CGROUP,
            exit_signal: libc::SIGCHLD as u64,
            ..CloneArgs::default()
        };
        // SAFETY: refused before any call: nothing is cloned.
        let rc = unsafe { legacy(&args, child, std::ptr::null_mut(), 0) };
        assert_eq!(rc, -(libc::EINVAL as isize));
    }
}
