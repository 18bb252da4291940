//! Unix socket addresses of a job of the isolated tier, resolved and placed in the job's own
//! mount namespace.
//!
//! The constructed view covers the host's sockets that exist when the job starts; one bound
//! later (a tmux server, an ssh-agent, a recreated `docker.sock`) is reachable through the
//! read-only view, since `connect` and `sendto` ask only for write permission on the socket's
//! inode. So the isolated tier's filter sends `connect` and the addressed sends to the host
//! too, and their pathname addresses are checked here:
//!
//! - the path is the job's: an absolute one is resolved from the root of its mount namespace
//!   (`/proc/TID/root`) with `RESOLVE_IN_ROOT` (its symlinks and `..` stay inside that root),
//!   a relative one from its working directory's name there, checked to lead to the very
//!   directory the thread is in; magic links (`/proc/self/fd/N`) are not followed (ELOOP);
//! - the socket found is allowed when it lies on one of the job's private tmpfs mounts
//!   (`/tmp`, `/dev/shm`: they exist in its namespace only), beneath one of its writable
//!   places (its name in the namespace, which must still lead to the same inode), or is one
//!   the request allows (`--allow-unix-socket`, the same inode); anything else is refused
//!   and named as in the contained tier;
//! - the job's own credentials decide the socket file's permission: a job of root holds no
//!   capability in its user namespace, so the file's mode bits are checked for it.

use super::checked::{err, not_a_socket, through, Checked};
use super::places::{leads_to, Places, View, Why};
use super::target::{Standing, Thread};
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Checks the pathname `path` a thread of an isolated job gave (module doc).
pub(super) fn checked(t: &Thread, path: CString, places: &Places, view: &View) -> Checked {
    // The host acts for the job: it must be the same user (its capabilities aside, below).
    let standing = t.standing();
    if let Standing::Other = standing {
        return Checked::Refused(libc::EPERM, Why::Credentials);
    }
    let root = match t.root() {
        Ok(r) => r,
        Err(e) => return Checked::Fail(err(e)),
    };
    let object = match resolve(t, root.as_fd(), &path) {
        Ok(o) => o,
        Err(e) => return Checked::Fail(err(e)),
    };
    let st = match crate::sys::emulate::fstat(object.as_fd()) {
        Ok(st) => st,
        Err(e) => return Checked::Fail(err(e)),
    };
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return not_a_socket(object.as_fd());
    }
    if let Err(name) = place(root.as_fd(), object.as_fd(), &st, places, view) {
        let name =
            name.unwrap_or_else(|| PathBuf::from(std::ffi::OsStr::from_bytes(path.as_bytes())));
        return Checked::Refused(libc::EACCES, Why::Socket(name));
    }
    if !standing.may_write(&st) {
        return Checked::Fail(libc::EACCES);
    }
    through(object)
}

/// Opens the object `path` names for the thread, following a final symlink as `connect`
/// does.
fn resolve(t: &Thread, root: BorrowedFd<'_>, path: &CStr) -> io::Result<OwnedFd> {
    if path.to_bytes().first() == Some(&b'/') {
        return crate::sys::emulate::open_in_root(root, path, 0);
    }
    if path.to_bytes().is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    // A relative path starts at the working directory: its name in the job's namespace,
    // which must still lead to the directory the thread is in (a directory renamed or
    // removed meanwhile fails closed).
    let cwd = t.cwd_name()?;
    let dir = CString::new(cwd.as_os_str().as_bytes()).map_err(|_| enoent())?;
    let found = crate::sys::emulate::open_in_root(root, &dir, 0)?;
    let (a, b) = (
        crate::sys::emulate::fstat(found.as_fd())?,
        crate::sys::emulate::fstat(t.cwd()?.as_fd())?,
    );
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
        return Err(enoent());
    }
    let mut joined = dir.into_bytes();
    joined.push(b'/');
    joined.extend_from_slice(path.to_bytes());
    let joined = CString::new(joined).map_err(|_| enoent())?;
    crate::sys::emulate::open_in_root(root, &joined, 0)
}

fn enoent() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOENT)
}

/// Whether the socket file `object` (`st`) is one the job may reach; else the name it has
/// in the job's namespace, when it has one.
fn place(
    root: BorrowedFd<'_>,
    object: BorrowedFd<'_>,
    st: &libc::stat,
    places: &Places,
    view: &View,
) -> Result<(), Option<PathBuf>> {
    if places.allows_socket(st) {
        return Ok(());
    }
    if view.private_devices(root).contains(&st.st_dev) {
        return Ok(());
    }
    // The kernel names an object of another mount namespace from that namespace's root.
    let name =
        std::fs::read_link(format!("/proc/self/fd/{}", object.as_raw_fd())).map_err(|_| None)?;
    if !name.as_os_str().as_bytes().starts_with(b"/") || !places.holds(&name) {
        return Err(Some(name));
    }
    // The name was the object's when it was read: it still leads to the same inode there.
    if leads_to(root, name.as_os_str().as_bytes(), st) {
        Ok(())
    } else {
        Err(Some(name))
    }
}
