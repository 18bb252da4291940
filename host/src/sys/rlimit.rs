//! Resource limits.

use std::io;

/// The soft limit of resource `res` (`RLIMIT_*`), `None` when it cannot be read.
pub(crate) fn soft_rlimit(res: Resource) -> Option<u64> {
    rlimit(res).ok().map(|l| l.rlim_cur)
}

/// A resource number (`RLIMIT_*`) as this C library's `getrlimit` takes it: glibc has a type
/// of its own, musl a plain `int`.
#[cfg(target_env = "gnu")]
pub(crate) type Resource = libc::__rlimit_resource_t;
/// A resource number (`RLIMIT_*`) as this C library's `getrlimit` takes it.
#[cfg(not(target_env = "gnu"))]
pub(crate) type Resource = libc::c_int;

/// The soft and hard limits of resource `res` (`RLIMIT_*`).
pub(crate) fn rlimit(res: Resource) -> io::Result<libc::rlimit> {
    let mut cur = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(res, &mut cur) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cur)
}

/// Raises this process's soft descriptor limit to at least `want` (as far as the hard limit
/// allows): the host's own work (placeholder locks, the view's tree copies, pipes) must not
/// fail under a caller's low limit, which the program still gets (it is read before, and
/// set in the child).
pub(crate) fn raise_soft_nofile(want: u64) {
    let Ok(cur) = rlimit(libc::RLIMIT_NOFILE) else {
        return;
    };
    if cur.rlim_cur >= want {
        return;
    }
    let new = libc::rlimit {
        rlim_cur: want.min(cur.rlim_max),
        rlim_max: cur.rlim_max,
    };
    // SAFETY: setrlimit reads the struct we pass; a failure leaves the limit as it was.
    unsafe {
        libc::setrlimit(libc::RLIMIT_NOFILE, &new);
    }
}
