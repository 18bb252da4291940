//! The SIGSYS handler of `SECCOMP_DEFAULT_ACTION=trap`: names the blocked call, then lets the
//! kernel end the process with SIGSYS. Async-signal-safe: no allocation, no locks, no libc
//! state, only `write` and the re-issued call.

use core::sync::atomic::{AtomicI32, Ordering};
use sandbox_policy::NATIVE;

/// Where the handler reports: the host's report descriptor, or stderr.
static REPORT_FD: AtomicI32 = AtomicI32::new(2);

/// `si_code` of a SIGSYS raised by seccomp.
const SYS_SECCOMP: i32 = 1;

/// Installs the handler; called before the filter, while every syscall is still allowed.
pub fn arm(report_fd: Option<i32>) {
    REPORT_FD.store(report_fd.unwrap_or(2), Ordering::Relaxed);
    // SAFETY: a zeroed sigaction is a valid value; the fields we need are set below.
    let mut sa: libc::sigaction = unsafe { core::mem::zeroed() };
    let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = on_sigsys;
    sa.sa_sigaction = handler as usize;
    sa.sa_flags = libc::SA_SIGINFO;
    // SAFETY: installs a handler with a valid sigaction; the old action is not needed.
    unsafe { libc::sigaction(libc::SIGSYS, &sa, core::ptr::null_mut()) };
}

/// Formats `libsandbox: blocked syscall NAME (NR)` (stderr) or `violation NR NAME` (report fd).
fn report(nr: i32) {
    let fd = REPORT_FD.load(Ordering::Relaxed);
    let name = u32::try_from(nr)
        .ok()
        .and_then(|n| NATIVE.syscall_name(n))
        .unwrap_or("unknown");
    if fd == 2 {
        crate::out::line(2, format_args!("libsandbox: blocked syscall {name} ({nr})"));
    } else {
        crate::out::line(fd, format_args!("violation {nr} {name}"));
    }
}

extern "C" fn on_sigsys(_sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let info = unsafe { &*info };
    if info.si_code != SYS_SECCOMP {
        return;
    }
    // SAFETY: for si_code SYS_SECCOMP the _sigsys member of the union is the one filled in.
    let nr = unsafe { info.si_syscall() };
    report(nr);
    // Re-issue the blocked call with its own arguments. SIGSYS is blocked while this handler
    // runs, so when the filter traps the call again the kernel resets SIGSYS to its default
    // action and ends the process with it: the program stops, as the action promises.
    let a = args(ctx);
    // SAFETY: repeats a call the filter already refused; it cannot reach the kernel's handler.
    unsafe { libc::syscall(libc::c_long::from(nr), a[0], a[1], a[2], a[3], a[4], a[5]) };
    // Unreachable unless the filter changed its mind; never return into the program.
    // SAFETY: _exit never returns.
    unsafe { libc::_exit(crate::out::FAIL_STATUS) }
}

#[cfg(target_arch = "x86_64")]
fn args(ctx: *mut libc::c_void) -> [u64; 6] {
    // SAFETY: for SA_SIGINFO handlers the third argument is the interrupted ucontext.
    let g = unsafe { &(*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs };
    [
        libc::REG_RDI,
        libc::REG_RSI,
        libc::REG_RDX,
        libc::REG_R10,
        libc::REG_R8,
        libc::REG_R9,
    ]
    .map(|r| g[r as usize] as u64)
}

#[cfg(target_arch = "aarch64")]
fn args(ctx: *mut libc::c_void) -> [u64; 6] {
    // SAFETY: for SA_SIGINFO handlers the third argument is the interrupted ucontext.
    let r = unsafe { &(*(ctx as *const libc::ucontext_t)).uc_mcontext.regs };
    [r[0], r[1], r[2], r[3], r[4], r[5]]
}
