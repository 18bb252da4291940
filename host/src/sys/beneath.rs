//! The boundary module's part for host-side file work beneath a directory descriptor (module
//! `beneath`): `*at` calls that never follow a symlink at the name they are given, and the
//! calling thread's file-system identity, so that work in another user's directory is made
//! with that user's rights rather than root's.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

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
}

impl Stat {
    fn of(st: &libc::stat) -> Stat {
        Stat {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size as u64,
            mtime: (st.st_mtime, st.st_mtime_nsec),
        }
    }

    /// The file type bits.
    pub fn kind(&self) -> u32 {
        self.mode & libc::S_IFMT
    }
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

/// `symlinkat(target, dir, name)`: a symlink saying `target`, made in `dir`.
pub(crate) fn symlink_at(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: symlinkat with two NUL-terminated strings and a descriptor the caller holds.
    match unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
