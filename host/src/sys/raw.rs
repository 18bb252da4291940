//! Raw system calls: they return `-errno` and touch no libc state (no `errno`, which a child
//! cloned with `CLONE_VM` shares with the thread that cloned it). Called by the spawn and the
//! init through their `sys!`/`ksys!`, and by a session command's child (`session/child.rs`).

/// `syscall(nr, a...)`, returning the kernel's value (`-errno` on failure).
///
/// # Safety
/// The arguments must be valid for `nr` (pointers to live memory of the right type).
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn syscall(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller passes arguments valid for `nr`; the kernel clobbers rcx and r11.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// `syscall(nr, a...)`, returning the kernel's value (`-errno` on failure).
///
/// # Safety
/// The arguments must be valid for `nr` (pointers to live memory of the right type).
#[cfg(target_arch = "aarch64")]
pub(crate) unsafe fn syscall(nr: libc::c_long, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller passes arguments valid for `nr`.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") nr,
            inlateout("x0") a[0] as isize => ret,
            in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
            options(nostack),
        );
    }
    ret
}
