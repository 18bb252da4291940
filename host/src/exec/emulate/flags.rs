//! A file's flags (`chattr`: `ioctl(FS_IOC_SETFLAGS)` and `ioctl(FS_IOC_FSSETXATTR)`), set by
//! the host for a job of the contained tier. Landlock's `IOCTL_DEV` right covers devices
//! only: without this a job could make any file its user owns append-only or (as root)
//! immutable, wherever it lies. The ioctls act on an open file, so the job's descriptor is
//! taken (`pidfd_getfd`: the same open file, not a reopening: an `O_PATH` handle answers
//! EBADF to an ioctl), its object is placed as a metadata call's is, and the host asks the
//! same ioctl of it with the argument copied once from the thread.

use super::places::{Places, Refused, Why};
use super::target::Thread;
use std::os::fd::{AsFd, BorrowedFd};

/// The size of the argument each command reads: an `int` of flags (the kernel's `get_user`
/// of an `int`, whatever the command's encoded size says), a `struct fsxattr`.
fn argument_size(cmd: u32) -> usize {
    match cmd {
        0x4008_6602 => std::mem::size_of::<libc::c_int>(),
        _ => 28,
    }
}

/// Sets the flags one waiting `ioctl` asks for, when its file lies in a writable place, and
/// answers it; a refusal is given to `record` before the answer.
pub(crate) fn flags(
    listener: BorrowedFd<'_>,
    n: &libc::seccomp_notif,
    places: &Places,
    record: &mut dyn FnMut(Refused),
) {
    let send = |error: i32| crate::sys::notif_fail(listener, n.id, error);
    let refuse = |record: &mut dyn FnMut(Refused), e: i32, why: Why| {
        record(Refused {
            nr: n.data.nr as u32,
            why,
        });
        send(e);
    };
    let Ok(thread) = Thread::open(n.pid) else {
        return refuse(record, libc::EPERM, Why::Unreadable);
    };
    let cmd = n.data.args[1] as u32;
    let file = match thread.take_fd(n.pid, n.data.args[0]) {
        Ok(f) => f,
        Err(e) => return send(e.raw_os_error().unwrap_or(libc::EBADF)),
    };
    let arg = thread.bytes(n.data.args[2], argument_size(cmd));
    let same = thread.same_credentials();
    // The descriptor and the argument were the thread's only if its call still waits.
    if !crate::sys::notif_id_valid(listener, n.id) {
        return;
    }
    if !same {
        return refuse(record, libc::EPERM, Why::Credentials);
    }
    if let Err(why) = places.locate(file.as_fd()) {
        return refuse(record, libc::EACCES, why);
    }
    let r = arg.and_then(|a| crate::sys::emulate::ioctl_in(file.as_fd(), cmd, &a));
    send(r.err().map_or(0, |e| e.raw_os_error().unwrap_or(libc::EIO)));
}
