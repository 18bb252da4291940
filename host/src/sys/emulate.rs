//! The raw calls the emulation makes on the host's side: opening an object without following
//! a final symlink, and changing the metadata of an object held by an `O_PATH` descriptor.
//! Every change goes through the descriptor (`AT_EMPTY_PATH`), never through a path string
//! the job could swap after the check.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// The result of a raw call that returns 0 or -1 with errno.
fn done(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The number of a call on this architecture, from the policy's tables: the newer calls
/// (`fchmodat2`, `setxattrat`, `removexattrat`, `file_setattr`) are not in every libc.
fn nr(name: &str) -> io::Result<libc::c_long> {
    crate::policy::NATIVE
        .syscall_number(name)
        .map(libc::c_long::from)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOSYS))
}

/// `openat(dir, path, O_PATH | O_CLOEXEC | extra)`; `dir` `None` is `AT_FDCWD`.
pub(crate) fn open_path(
    dir: Option<BorrowedFd<'_>>,
    path: &CStr,
    extra: libc::c_int,
) -> io::Result<OwnedFd> {
    let dir = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: a NUL-terminated path that outlives the call; O_PATH opens nothing for I/O.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | extra) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstat(fd)`.
pub(crate) fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value for the kernel to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live descriptor and a stat buffer of the right size.
    done(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) }.into())?;
    Ok(st)
}

/// Whether `fchmodat2` answered as missing once: later changes go straight to the fallback.
static NO_FCHMODAT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The mode of the object `fd` holds: `fchmodat2(fd, "", mode, AT_EMPTY_PATH)` (Linux 6.6),
/// else `chmod` of its magic link `/proc/self/fd/N`, which leads to that very object.
///
/// The fallback is for the kernels before 6.6 and the container profiles that do not list
/// `fchmodat2` (Docker 20.10's and podman 4.3's defaults, containerd 1.6's RuntimeDefault:
/// runc answers a call newer than the profile with `ENOSYS`, some profiles with `EPERM`).
/// A real `EPERM` is the fallback's answer too, so trying it costs only the second call.
pub(crate) fn chmod_fd(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    use std::sync::atomic::Ordering::Relaxed;
    if !NO_FCHMODAT2.load(Relaxed) {
        let result = nr("fchmodat2").and_then(|n| {
            // SAFETY: an empty NUL-terminated path with AT_EMPTY_PATH: the call acts on `fd`
            // only.
            done(unsafe {
                libc::syscall(
                    n,
                    fd.as_raw_fd(),
                    c"".as_ptr(),
                    mode as libc::c_long,
                    libc::AT_EMPTY_PATH,
                )
            })
        });
        match result {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => NO_FCHMODAT2.store(true, Relaxed),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {}
            r => return r,
        }
    }
    chmod_magic(fd, mode)
}

/// `chmod(/proc/self/fd/N, mode)`: the fallback of [`chmod_fd`].
pub(crate) fn chmod_magic(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    let path = magic(fd);
    // SAFETY: a NUL-terminated path; chmod takes a mode and touches no memory of ours.
    done(unsafe { libc::chmod(path.as_ptr(), mode as libc::mode_t) }.into())
}

/// `fchownat(fd, "", uid, gid, AT_EMPTY_PATH)`.
pub(crate) fn chown_fd(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: an empty NUL-terminated path with AT_EMPTY_PATH: the call acts on `fd` only.
    done(
        unsafe { libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH) }
            .into(),
    )
}

/// `utimensat(fd, "", times, AT_EMPTY_PATH)`; `None` sets both to now.
pub(crate) fn utimens_fd(
    fd: BorrowedFd<'_>,
    times: Option<&[libc::timespec; 2]>,
) -> io::Result<()> {
    let t = times.map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: an empty path with AT_EMPTY_PATH, and either no times or two live timespecs.
    done(unsafe { libc::utimensat(fd.as_raw_fd(), c"".as_ptr(), t, libc::AT_EMPTY_PATH) }.into())
}

/// The name `/proc/self/fd/N` of a descriptor: the extended-attribute calls take no `O_PATH`
/// descriptor (`setxattrat` with `AT_EMPTY_PATH` answers EBADF for one), but the magic link
/// leads to the very object it holds, and no further (a symlink held is the symlink).
fn magic(fd: BorrowedFd<'_>) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number")
}

/// `setxattr(/proc/self/fd/N, name, value, flags)`.
pub(crate) fn setxattr_fd(
    fd: BorrowedFd<'_>,
    name: &CStr,
    value: &[u8],
    flags: u32,
) -> io::Result<()> {
    let path = magic(fd);
    // SAFETY: NUL-terminated path and name, and a value pointer and size describing `value`.
    done(
        unsafe {
            libc::setxattr(
                path.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                flags as libc::c_int,
            )
        }
        .into(),
    )
}

/// `removexattr(/proc/self/fd/N, name)`.
pub(crate) fn removexattr_fd(fd: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    let path = magic(fd);
    // SAFETY: NUL-terminated path and name.
    done(unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) }.into())
}

/// `file_setattr(fd, "", attr, size, AT_EMPTY_PATH)`: `attr` is the job's `struct file_attr`,
/// copied as it gave it (the kernel checks its size and fields).
pub(crate) fn file_setattr_fd(fd: BorrowedFd<'_>, attr: &[u8]) -> io::Result<()> {
    let n = nr("file_setattr")?;
    // SAFETY: an empty path with AT_EMPTY_PATH and a buffer of exactly `attr.len()` bytes.
    done(unsafe {
        libc::syscall(
            n,
            fd.as_raw_fd(),
            c"".as_ptr(),
            attr.as_ptr(),
            attr.len(),
            libc::AT_EMPTY_PATH,
        )
    })
}

/// `ioctl(master, TIOCGPTPEER, flags)`: the peer of a pseudo-terminal master.
pub(crate) fn open_peer(master: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: TIOCGPTPEER takes the open flags as its argument and returns a new descriptor.
    let fd = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTPEER, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `struct seccomp_notif_addfd`.
#[repr(C)]
struct NotifAddfd {
    id: u64,
    flags: u32,
    srcfd: u32,
    newfd: u32,
    newfd_flags: u32,
}

/// Places `fd` in the table of the thread whose call `id` waits and answers the call with its
/// number (`SECCOMP_ADDFD_FLAG_SEND`: both at once).
pub(crate) fn add_fd_send(
    listener: BorrowedFd<'_>,
    id: u64,
    fd: BorrowedFd<'_>,
    cloexec: bool,
) -> io::Result<()> {
    let add = NotifAddfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the listener's ioctl with a live, properly sized `seccomp_notif_addfd`.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD,
            &add as *const NotifAddfd,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The socket's domain (`SO_DOMAIN`): ENOTSOCK for another kind of descriptor.
pub(crate) fn socket_domain(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    let mut domain: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int-sized buffer and its length, both live for the call.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut domain as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    done(rc.into())?;
    Ok(domain)
}

/// `connect(fd, addr)` with the address's bytes as given (the kernel checks them).
pub(crate) fn connect(fd: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    // SAFETY: `addr` is a live buffer of `addr.len()` bytes; the kernel copies it in.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            addr.as_ptr().cast(),
            addr.len() as libc::socklen_t,
        )
    };
    done(rc.into())
}

/// `ioctl(fd, cmd, arg)` for a command that reads its argument from `arg` and writes nothing
/// back (`FS_IOC_SETFLAGS`, `FS_IOC_FSSETXATTR`, `FS_IOC_SETVERSION`,
/// `FS_IOC_ENABLE_VERITY`): `arg` is the job's argument, copied (with any buffer it points to:
/// the caller keeps those alive across the call). An empty `arg` is passed as NULL (the job's
/// own could not be read: the kernel answers EFAULT where it would read it).
pub(crate) fn ioctl_in(fd: BorrowedFd<'_>, cmd: u32, arg: &[u8]) -> io::Result<()> {
    let ptr = if arg.is_empty() {
        std::ptr::null()
    } else {
        arg.as_ptr()
    };
    // SAFETY: the command only reads its argument (at most `arg.len()` bytes, which the
    // caller sized for it, or none from NULL) and the buffers it points to (live, the
    // caller's), and the buffer outlives the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as _, ptr) };
    done(rc.into())
}

/// An `int` socket option at `SOL_SOCKET` (`SO_TYPE`, ...).
pub(crate) fn socket_option(fd: BorrowedFd<'_>, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int-sized buffer and its length, both live for the call.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    done(rc.into())?;
    Ok(value)
}

/// The open file's status flags (`F_GETFL`).
pub(crate) fn status_flags(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    // SAFETY: F_GETFL takes no argument and returns the flags or -1.
    let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

/// `sendmsg(fd, {name, [data], control}, flags)`: the bytes sent. `name` and `control` are
/// given to the kernel as they are (it checks them); an empty one is none.
pub(crate) fn sendmsg(
    fd: BorrowedFd<'_>,
    name: &[u8],
    data: &[u8],
    control: &[u8],
    flags: libc::c_int,
) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: an all-zero msghdr is valid (no name, no vector, no control); set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    if !name.is_empty() {
        msg.msg_name = name.as_ptr() as *mut libc::c_void;
        msg.msg_namelen = name.len() as libc::socklen_t;
    }
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !control.is_empty() {
        msg.msg_control = control.as_ptr() as *mut libc::c_void;
        msg.msg_controllen = control.len() as _;
    }
    // SAFETY: every pointer in `msg` is to a live buffer of the length given, which the kernel
    // only reads; none outlives the call.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `tgkill(tgid, tid, sig)`: a signal for one thread.
pub(crate) fn tgkill(tgid: i32, tid: i32, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: tgkill takes three integers.
    done(unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) })
}

/// `openat2(root, path, O_PATH | O_CLOEXEC | extra)` resolved as if `root` were the root
/// directory (`RESOLVE_IN_ROOT`: absolute paths and symlinks start at `root`, `..` never goes
/// above it) and without magic links (`/proc/PID/fd/N`, `/proc/PID/root`, which would lead out
/// of it): a path the isolated tier's job gave, resolved in its mount namespace through
/// `/proc/TID/root`.
pub(crate) fn open_in_root(
    root: BorrowedFd<'_>,
    path: &CStr,
    extra: libc::c_int,
) -> io::Result<OwnedFd> {
    super::openat2(
        root,
        path,
        libc::O_PATH | extra,
        0,
        libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS,
    )
}

/// What the write-intent opens need of an object: its type and mode, owner, link count,
/// device number (for a device) and birth time (`None` where the file system keeps none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub rdev: (u32, u32),
    pub dev: (u32, u32),
    pub ino: u64,
    pub born: Option<(i64, u32)>,
}

/// `statx(fd, "", AT_EMPTY_PATH)` with the birth time where the file system has one.
pub(crate) fn shape(fd: BorrowedFd<'_>) -> io::Result<Shape> {
    // SAFETY: an all-zero statx is a valid value for the kernel to overwrite.
    let mut sx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an empty NUL-terminated path with AT_EMPTY_PATH and a statx buffer of the
    // right size, both live for the call.
    let rc = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_BASIC_STATS | libc::STATX_BTIME,
            &mut sx,
        )
    };
    if let Err(e) = done(rc.into()) {
        // A profile or kernel without statx (ENOSYS, or EPERM from a profile): fstat, with
        // no birth time.
        if !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
            return Err(e);
        }
        let st = fstat(fd)?;
        return Ok(Shape {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            nlink: st.st_nlink as u32,
            rdev: (libc::major(st.st_rdev), libc::minor(st.st_rdev)),
            dev: (libc::major(st.st_dev), libc::minor(st.st_dev)),
            ino: st.st_ino,
            born: None,
        });
    }
    Ok(Shape {
        mode: u32::from(sx.stx_mode),
        uid: sx.stx_uid,
        gid: sx.stx_gid,
        nlink: sx.stx_nlink,
        rdev: (sx.stx_rdev_major, sx.stx_rdev_minor),
        dev: (sx.stx_dev_major, sx.stx_dev_minor),
        ino: sx.stx_ino,
        born: (sx.stx_mask & libc::STATX_BTIME != 0)
            .then_some((sx.stx_btime.tv_sec, sx.stx_btime.tv_nsec)),
    })
}

/// The object `fd` holds (an `O_PATH` descriptor) opened again for I/O with `flags`, through
/// its magic link `/proc/self/fd/N`, which leads to that very object: never a terminal made
/// the host's controlling one (`O_NOCTTY`), never inherited by the host's children.
pub(crate) fn reopen(fd: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<OwnedFd> {
    let path = magic(fd);
    // SAFETY: a NUL-terminated path that outlives the call; no mode is read without O_CREAT,
    // which the caller never passes.
    let rc = unsafe {
        libc::open(
            path.as_ptr(),
            // O_NOFOLLOW would refuse the magic link itself (ELOOP): the object is the one
            // held, which the caller resolved as the job's call would.
            (flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_DIRECTORY))
                | libc::O_NOCTTY
                | libc::O_CLOEXEC,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(rc) })
}

/// `openat(dir, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW, mode)`: a new file, never one
/// that exists (a symlink included).
pub(crate) fn create_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    let flags =
        flags | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated name that outlives the call, a live directory descriptor.
    let rc = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(rc) })
}

/// `ftruncate(fd, len)`.
pub(crate) fn truncate_fd(fd: BorrowedFd<'_>, len: i64) -> io::Result<()> {
    // SAFETY: a live descriptor; the call touches no memory of ours.
    done(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }.into())
}

/// Sets the open file's status flags (`F_SETFL`).
pub(crate) fn set_status_flags(fd: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: F_SETFL takes an int of flags.
    done(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) }.into())
}

/// Whether the object `fd` holds lies on a read-only mount (`ST_RDONLY`).
pub(crate) fn read_only_mount(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: an all-zero statvfs is a valid value for the kernel to overwrite.
    let mut sv: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a live descriptor and a statvfs buffer of the right size.
    done(unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut sv) }.into())?;
    Ok(sv.f_flag & libc::ST_RDONLY != 0)
}
