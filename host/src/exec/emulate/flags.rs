//! A file's flags (`chattr`: `ioctl(FS_IOC_SETFLAGS)` and `ioctl(FS_IOC_FSSETXATTR)`), its
//! generation number (`FS_IOC_SETVERSION`, `EXT4_IOC_SETVERSION`) and fs-verity
//! (`FS_IOC_ENABLE_VERITY`), set by the host for a job of the contained tier. Landlock's
//! `IOCTL_DEV` right covers devices only: without this a job could make any file its user owns
//! append-only or (as root) immutable, change its generation, or make it read-only for good,
//! wherever it lies. The ioctls act on an open file, so the job's descriptor is taken
//! (`pidfd_getfd`: the same open file, not a reopening: an `O_PATH` handle answers EBADF to an
//! ioctl), its object is placed as a metadata call's is, and the host asks the same ioctl of
//! it with the argument copied once from the thread (fs-verity's salt and signature too,
//! which the argument points to).

use super::claims::{
    EXT4_IOC_SETVERSION, FS_IOC_ENABLE_VERITY, FS_IOC_SETFLAGS, FS_IOC_SETVERSION,
};
use super::places::{Places, Refused, Why};
use super::target::Thread;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The size of the argument each command reads: an `int` of flags or of the generation (the
/// kernel's `get_user` of an `int`, whatever the command's encoded size says), a `struct
/// fsxattr`, a `struct fsverity_enable_arg`.
fn argument_size(cmd: u32) -> usize {
    match cmd {
        FS_IOC_SETFLAGS | FS_IOC_SETVERSION | EXT4_IOC_SETVERSION => {
            std::mem::size_of::<libc::c_int>()
        }
        FS_IOC_ENABLE_VERITY => VERITY_ARG,
        _ => 28,
    }
}

/// `sizeof(struct fsverity_enable_arg)`.
const VERITY_ARG: usize = 128;
/// The largest salt (`sizeof_field(struct fsverity_descriptor, salt)`) and signature
/// (`FS_VERITY_MAX_SIGNATURE_SIZE`) the kernel takes: EMSGSIZE beyond, from it.
const SALT_MAX: u32 = 32;
const SIGNATURE_MAX: u32 = 16128;

/// A command's argument as the host passes it: the bytes copied from the thread and, for
/// fs-verity, the salt and signature they point to, copied too (the pointers in `bytes` are
/// made the copies'; an unreadable one is made NULL, so the kernel answers EFAULT where it
/// would have).
struct Argument {
    bytes: Vec<u8>,
    _held: Vec<Vec<u8>>,
}

impl Argument {
    fn read(t: &Thread, cmd: u32, addr: u64) -> io::Result<Argument> {
        let mut bytes = t.bytes(addr, argument_size(cmd))?;
        let mut held = Vec::new();
        if cmd == FS_IOC_ENABLE_VERITY {
            // struct fsverity_enable_arg: salt_size at 12, salt_ptr at 16, sig_size at 24,
            // sig_ptr at 32. Sizes the kernel refuses are left for it to refuse.
            for (size_at, ptr_at, max) in [(12, 16, SALT_MAX), (24, 32, SIGNATURE_MAX)] {
                let size = u32::from_ne_bytes(bytes[size_at..size_at + 4].try_into().unwrap());
                let ptr = u64::from_ne_bytes(bytes[ptr_at..ptr_at + 8].try_into().unwrap());
                if size == 0 || size > max {
                    continue;
                }
                let here = match t.bytes(ptr, size as usize) {
                    Ok(copy) => {
                        let at = copy.as_ptr() as u64;
                        held.push(copy);
                        at
                    }
                    Err(_) => 0,
                };
                bytes[ptr_at..ptr_at + 8].copy_from_slice(&here.to_ne_bytes());
            }
        }
        Ok(Argument { bytes, _held: held })
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
    let arg = Argument::read(&thread, cmd, n.data.args[2]);
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
    // A file with other names made before the job (docs/isolation.md, "Hard links").
    if crate::sys::emulate::shape(file.as_fd()).is_ok_and(|s| places.shared(&s)) {
        let name = super::places::name_of(file.as_fd());
        return refuse(record, libc::EACCES, Why::Linked(name));
    }
    // An argument that cannot be read is passed as NULL: the kernel answers EFAULT where it
    // would read it, and first what it answers before (ENOTTY where the file system has no
    // such ioctl, EOPNOTSUPP where the kernel has no fs-verity).
    let arg = arg.unwrap_or(Argument {
        bytes: Vec::new(),
        _held: Vec::new(),
    });
    if cmd != FS_IOC_ENABLE_VERITY {
        return send(answer(file, cmd, &arg));
    }
    // Enabling fs-verity hashes the whole file: on a thread of its own, so that a large file
    // never holds up the supervisor.
    let (id, own) = (n.id, listener.try_clone_to_owned());
    let Ok(own) = own else {
        return send(libc::EAGAIN);
    };
    let spawned = std::thread::Builder::new()
        .name("sandbox-ioctl".into())
        .spawn(move || crate::sys::notif_fail(own.as_fd(), id, answer(file, cmd, &arg)));
    if spawned.is_err() {
        send(libc::EAGAIN);
    }
}

/// Makes the ioctl `cmd` on `file` with `arg`: 0 or the errno.
fn answer(file: OwnedFd, cmd: u32, arg: &Argument) -> i32 {
    let r = crate::sys::emulate::ioctl_in(file.as_fd(), cmd, &arg.bytes);
    r.err().map_or(0, |e| e.raw_os_error().unwrap_or(libc::EIO))
}
