//! Files and paths: access checks, `*at` opens (`openat2` with its `RESOLVE_*` flags), the umask, locks and file-system types.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `path` as a C string; `None` when it holds a NUL byte (no such file can exist).
pub(super) fn c_path(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_bytes()).ok()
}

/// The process's file-mode creation mask (set and restored at once; not atomic with respect to
/// other threads creating files in between).
pub(crate) fn current_umask() -> u32 {
    // SAFETY: umask only sets and returns the process's mask; no memory is involved.
    let mask = unsafe { libc::umask(0o022) };
    // SAFETY: as above; this restores the mask read.
    unsafe { libc::umask(mask) };
    mask
}

/// Sets the file-mode creation mask; returns the previous one.
pub(crate) fn set_umask(mask: u32) -> u32 {
    // SAFETY: umask only sets and returns the process's mask; no memory is involved.
    unsafe { libc::umask(mask) }
}

/// Whether this process may write `path` (`faccessat(W_OK, AT_EACCESS)`): its permission
/// bits, its mount's read-only flag and, as root, only the latter.
pub(crate) fn may_write(path: &Path) -> bool {
    let Some(c) = c_path(path) else { return false };
    // SAFETY: `c` is a NUL-terminated path; faccessat only reads it.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
}

/// Whether this process's credentials may read `path` (`faccessat(R_OK, AT_EACCESS)`): its
/// permission bits (root passes). Security modules that decide at `open` (Landlock) are not
/// asked: that difference is what `landlock::refused_around` looks for.
pub(crate) fn may_read(path: &Path) -> bool {
    let Some(c) = c_path(path) else { return false };
    // SAFETY: `c` is a NUL-terminated path; faccessat only reads it.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::R_OK, libc::AT_EACCESS) == 0 }
}

/// Whether this process may execute `path` (`faccessat(X_OK, AT_EACCESS)`): root passes only
/// when some execute bit is set, as `execve` requires.
pub(crate) fn executable(path: &Path) -> bool {
    let Some(c) = c_path(path) else { return false };
    // SAFETY: `c` is a NUL-terminated path; faccessat only reads it.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::X_OK, libc::AT_EACCESS) == 0 }
}

/// Whether `path` carries the extended attribute `name` (a non-empty value).
pub(crate) fn has_xattr(path: &Path, name: &CStr) -> bool {
    let Some(c) = c_path(path) else { return false };
    // SAFETY: both strings are NUL-terminated; a null buffer of size 0 asks only for the size.
    unsafe { libc::getxattr(c.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) > 0 }
}

/// Whether `path` is on a mount with the `noexec` flag.
pub(crate) fn on_noexec_mount(path: &Path) -> io::Result<bool> {
    let c = c_path(path).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: an all-zero statvfs is a valid value (plain integers).
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_flag & libc::ST_NOEXEC != 0)
}

/// `flock(op)` on `fd` (`LOCK_EX`, `LOCK_SH`, `LOCK_UN`, with `LOCK_NB`).
pub(crate) fn flock(fd: BorrowedFd<'_>, op: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on a descriptor the caller owns; no memory is involved.
    if unsafe { libc::flock(fd.as_raw_fd(), op) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The type (`f_type`, a `*_SUPER_MAGIC`) of the file system holding `path`.
pub(crate) fn fs_type(path: &CStr) -> io::Result<i64> {
    // SAFETY: a zeroed statfs is a valid out-parameter.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: statfs reads a NUL-terminated path and writes into st.
    if unsafe { libc::statfs(path.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64)
}

/// `path` opened with `O_PATH` (close-on-exec; `O_NOFOLLOW` unless `follow`): a handle that
/// names the inode without opening the file itself. Not through `std::fs::OpenOptions`: std
/// masks custom flags with `O_ACCMODE`, which musl defines as `3 | O_PATH`, so on the static
/// build `O_PATH` was silently dropped and every "path handle" was a real read open (a FIFO
/// blocked the run, `/dev/ptmx` allocated a terminal, an unreadable directory failed).
pub(crate) fn open_path(path: &Path, follow: bool) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut flags = libc::O_PATH | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    // SAFETY: open with a NUL-terminated path; the flags take no mode argument.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `name` in directory `dir` for reading (close-on-exec).
pub(crate) fn open_in(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<std::fs::File> {
    // SAFETY: openat on a descriptor the caller owns with a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// `(st_dev, st_ino)` of `name` in `dir`, a symlink itself rather than its target
/// (`fstatat` with `AT_SYMLINK_NOFOLLOW`): what a removal checks right before `unlinkat`.
pub(crate) fn identity_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<(u64, u64)> {
    super::beneath::stat_at(dir, name).map(|st| (st.dev, st.ino))
}

/// Removes `name` from `dir` (`unlinkat`; an empty directory when `directory`).
pub(crate) fn unlink_at(dir: BorrowedFd<'_>, name: &CStr, directory: bool) -> io::Result<()> {
    let flags = if directory { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: unlinkat on a descriptor the caller owns with a NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The kernel's `struct open_how` for `openat2` (libc's is non-exhaustive: it cannot be built
/// outside libc).
#[repr(C)]
pub(super) struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `openat2(dir, path, flags | O_CLOEXEC, mode)` with the `RESOLVE_*` flags `resolve`.
pub(crate) fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: libc::c_int,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: u64::from(mode),
        resolve,
    };
    // SAFETY: a NUL-terminated path and a properly sized `open_how`, both live for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `openat2(dir, path, flags | O_CLOEXEC, mode)` resolved beneath `dir` without magic links
/// (`RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`): `..` above `dir`, absolute symlinks and
/// symlinks leading out fail with EXDEV, whatever happens to the tree meanwhile.
pub(crate) fn openat2_beneath(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    openat2(
        dir,
        path,
        flags,
        mode,
        libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    )
}

/// `openat(dir, name, flags | O_CLOEXEC, mode)`.
pub(crate) fn openat(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    // SAFETY: openat on a descriptor the caller owns with a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mkdirat(dir, name, mode)`.
pub(crate) fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: mkdirat on a descriptor the caller owns with a NUL-terminated name.
    match unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// `renameat(dir, from, dir, to)`: both names in the same directory (a symlink at `to` is
/// replaced, never written through).
pub(crate) fn renameat(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    // SAFETY: renameat within one directory the caller owns, NUL-terminated names.
    match unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
