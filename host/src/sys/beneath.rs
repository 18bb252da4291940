//! The boundary module's part for host-side file work beneath a directory descriptor (module
//! `beneath`): `*at` calls that never follow a symlink at the name they are given, and the
//! calling thread's file-system identity, so that work in another user's directory is made
//! with that user's rights rather than root's.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// What `fstat` says of an inode: enough to tell what it is and whose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub nlink: u64,
}

impl Stat {
    // `st_nlink` is a u64 on x86_64 and a u32 on aarch64.
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &libc::stat) -> Stat {
        Stat {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            nlink: st.st_nlink as u64,
        }
    }

    /// The file type bits.
    pub fn kind(&self) -> u32 {
        self.mode & libc::S_IFMT
    }
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`: a symlink at `name` fails with
/// `ELOOP` (or, with `O_PATH | O_DIRECTORY`, `ENOTDIR`), never opens its target.
pub(crate) fn open_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: openat on a descriptor the caller holds with a NUL-terminated name; the mode is
    // passed as the variadic unsigned int openat reads only with O_CREAT.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstat(fd)` (an `O_PATH` descriptor too).
pub(crate) fn stat_fd(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    // SAFETY: a zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on a descriptor the caller holds, writing into st.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Stat::of(&st))
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`: a symlink itself, not its target.
pub(crate) fn stat_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Stat> {
    // SAFETY: a zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat on a descriptor the caller holds with a NUL-terminated name.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Stat::of(&st))
}

/// `readlinkat(dir, name)`: what a symlink in `dir` says (never followed).
pub(crate) fn read_link_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat into a buffer of the length given, on a descriptor the caller holds.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// `renameat(dir, from, dir, to)`: both names in one directory; a symlink at `to` is
/// replaced, never written through.
pub(crate) fn rename_in(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    let d = dir.as_raw_fd();
    // SAFETY: renameat within one directory the caller holds, NUL-terminated names.
    match unsafe { libc::renameat(d, from.as_ptr(), d, to.as_ptr()) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// `unlinkat(dir, name, 0)`: a file or a symlink itself (`EISDIR` for a directory).
pub(crate) fn remove_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: unlinkat on a descriptor the caller holds with a NUL-terminated name.
    match unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Makes the calling thread's file-system identity `uid`:`gid` with no supplementary group,
/// for the rest of the thread's life. Raw calls: glibc's `setgroups` would change every thread
/// of the process, the kernel's changes only the caller's; `setfsuid` from 0 to another id
/// also drops the thread's file capabilities (`CAP_DAC_OVERRIDE`, `CAP_FOWNER`, ...), so its
/// file work gets exactly that user's rights. Each call's result is checked by reading the id
/// back (`setfsuid` returns the previous id, never an error).
pub(crate) fn become_fs_user(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: setgroups with an empty list and a null pointer; affects this thread only.
    if unsafe { libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: setfsgid/setfsuid take an id and touch no memory; this thread only.
    unsafe {
        libc::syscall(libc::SYS_setfsgid, gid);
        libc::syscall(libc::SYS_setfsuid, uid);
    }
    // Passing -1 (an invalid id) changes nothing and returns the current one.
    // SAFETY: as above.
    let (now_gid, now_uid) = unsafe {
        (
            libc::syscall(libc::SYS_setfsgid, u32::MAX) as u32,
            libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32,
        )
    };
    if (now_uid, now_gid) != (uid, gid) {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    Ok(())
}

/// `mkdirat(dir, name, mode)`.
pub(crate) fn make_dir_at(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: mkdirat on a descriptor the caller holds with a NUL-terminated name.
    match unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// `unlinkat(dir, name, AT_REMOVEDIR)`: an empty directory.
pub(crate) fn remove_dir_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: unlinkat on a descriptor the caller holds with a NUL-terminated name.
    match unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// `symlinkat(target, dir, name)`: a symlink saying `target`, made in `dir`.
pub(crate) fn symlink_at(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: symlinkat with two NUL-terminated strings and a descriptor the caller holds.
    match unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
