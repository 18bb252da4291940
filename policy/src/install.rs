//! Attaching a compiled program to the calling process: the only place in `policy` that makes
//! system calls. No allocation, so it is safe in a constructor, after `fork` and before `exec`.

use crate::bpf::Insn;
use core::fmt;

const SECCOMP_SET_MODE_FILTER: libc::c_ulong = 1;
const SECCOMP_GET_ACTION_AVAIL: libc::c_ulong = 2;
const SECCOMP_FILTER_FLAG_TSYNC: libc::c_ulong = 1;

/// Why a filter could not be attached; each carries the errno of the failing call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstallError {
    /// The program is empty or longer than the kernel accepts.
    BadProgram,
    /// `prctl(PR_SET_NO_NEW_PRIVS)` failed.
    NoNewPrivs(i32),
    /// `seccomp(SECCOMP_SET_MODE_FILTER)` failed (EINVAL: no seccomp filter support; ENOMEM:
    /// too many stacked filters; EACCES: a filter already in place forbids adding one).
    Seccomp(i32),
    /// Another thread could not be synchronised (TSYNC); the value is its thread id.
    ThreadSync(i64),
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::BadProgram => f.write_str("the filter program is empty or too long"),
            InstallError::NoNewPrivs(e) => {
                write!(f, "prctl(PR_SET_NO_NEW_PRIVS) failed: errno {e}")
            }
            InstallError::Seccomp(e) => {
                write!(f, "seccomp(SECCOMP_SET_MODE_FILTER) failed: errno {e}")
            }
            InstallError::ThreadSync(t) => write!(f, "could not apply the filter to thread {t}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for InstallError {}

fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// Sets no_new_privs, then attaches `prog` to every thread of the process (TSYNC).
pub fn install(prog: &[Insn]) -> Result<(), InstallError> {
    if prog.is_empty() || prog.len() > crate::bpf::MAX_INSNS {
        return Err(InstallError::BadProgram);
    }
    set_no_new_privs()?;
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        // Insn has the layout of sock_filter (repr(C), same fields and order).
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: fprog points to `prog`, which outlives the call; the kernel copies the program.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            SECCOMP_FILTER_FLAG_TSYNC,
            &fprog as *const libc::sock_fprog,
        )
    };
    match rc {
        0 => Ok(()),
        r if r < 0 => Err(InstallError::Seccomp(errno())),
        tid => Err(InstallError::ThreadSync(tid)),
    }
}

/// Sets no_new_privs on the calling thread (inherited by children and across exec).
pub fn set_no_new_privs() -> Result<(), InstallError> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(InstallError::NoNewPrivs(errno()));
    }
    Ok(())
}

/// Whether the kernel supports seccomp filters with the given `SECCOMP_RET_*` action.
pub fn action_available(ret: u32) -> bool {
    let action: u32 = ret & 0xffff_0000;
    // SAFETY: the kernel reads one u32 from the pointer, which is valid for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0 as libc::c_ulong,
            &action as *const u32,
        )
    };
    rc == 0
}
