//! A path a waiting thread gave, opened `O_PATH` on the host's side to the object the thread's
//! own call would reach, in either tier:
//!
//! - the thread's own descriptors by name (`/proc/self/fd/N`, `/dev/fd/N`, `/dev/stdout`,
//!   and the rest of `/proc/self`, which the host names `/proc/TID`) are reached through the
//!   host's `/proc/TID`, which leads to the very objects the thread holds;
//! - in the contained tier the job's root and mounts are the host's: a relative path starts
//!   at the thread's working directory or descriptor (`/proc/TID/cwd`, `/proc/TID/fd/N`);
//! - in the isolated tier the path is the job's: resolved from the root of its mount
//!   namespace (`/proc/TID/root`) with `RESOLVE_IN_ROOT`, a relative one from its directory's
//!   name there, checked to lead to the very directory the thread holds (module `inview`).

use super::target::Thread;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// Opens the object `path` (relative to the thread's descriptor `dir`, or its working
/// directory) names for the thread, following a final symlink when `follow`. `root` is the
/// job's root in the isolated tier.
pub(super) fn object(
    t: &Thread,
    root: Option<BorrowedFd<'_>>,
    dir: Option<u64>,
    path: &CStr,
    follow: bool,
) -> io::Result<OwnedFd> {
    let bytes = path.to_bytes();
    if bytes.is_empty() {
        return Err(errno(libc::ENOENT));
    }
    if let Some(own) = own(t, bytes) {
        // The final component of each of these names is a symlink (or a magic link).
        let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
        let c = CString::new(own).map_err(|_| errno(libc::ENOENT))?;
        return crate::sys::emulate::open_path(None, &c, nofollow);
    }
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let Some(root) = root else {
        let base = match dir {
            Some(fd) => Some(t.fd(fd)?),
            None if bytes.first() == Some(&b'/') => None,
            None => Some(t.cwd()?),
        };
        return crate::sys::emulate::open_path(base.as_ref().map(|b| b.as_fd()), path, nofollow);
    };
    if bytes.first() == Some(&b'/') {
        return crate::sys::emulate::open_in_root(root, path, nofollow);
    }
    // A relative path that stays beneath the directory the thread holds resolves from it
    // as the thread's own call would (most do: `out.o`, `src/x.rs`).
    let held = match dir {
        Some(fd) => t.fd(fd)?,
        None => t.cwd()?,
    };
    // (`RESOLVE_BENEATH`: EXDEV where `..`, an absolute path or an absolute symlink would
    // leave it.)
    match crate::sys::openat2_beneath(held.as_fd(), path, libc::O_PATH | nofollow, 0) {
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {}
        r => return r,
    }
    // One that leaves it (`..`, an absolute symlink) starts at the directory's name in the
    // job's namespace, which must still lead to the directory the thread holds (one renamed
    // or removed meanwhile fails closed).
    let name = match dir {
        Some(fd) => t.fd_name(fd)?,
        None => t.cwd_name()?,
    };
    let name = name.as_os_str().as_bytes();
    if name.first() != Some(&b'/') {
        return Err(errno(libc::ENOTDIR));
    }
    let dir = CString::new(name).map_err(|_| errno(libc::ENOENT))?;
    let found = crate::sys::emulate::open_in_root(root, &dir, 0)?;
    let (a, b) = (
        crate::sys::emulate::fstat(found.as_fd())?,
        crate::sys::emulate::fstat(held.as_fd())?,
    );
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
        return Err(errno(libc::ENOENT));
    }
    let mut joined = dir.into_bytes();
    joined.push(b'/');
    joined.extend_from_slice(bytes);
    let joined = CString::new(joined).map_err(|_| errno(libc::ENOENT))?;
    crate::sys::emulate::open_in_root(root, &joined, nofollow)
}

/// The host's name of a path that names the thread's own process: `/proc/TID...` (the
/// thread's [`Thread::path`] made `/proc/self` that already), `/dev/fd/N` and `/dev/stdin`,
/// `/dev/stdout`, `/dev/stderr`.
fn own(t: &Thread, path: &[u8]) -> Option<Vec<u8>> {
    let mine = format!("/proc/{}", t.tid());
    if let Some(rest) = path.strip_prefix(mine.as_bytes()) {
        if rest.is_empty() || rest.starts_with(b"/") {
            return Some(path.to_vec());
        }
    }
    let fd = match path {
        b"/dev/stdin" => "0".to_string(),
        b"/dev/stdout" => "1".to_string(),
        b"/dev/stderr" => "2".to_string(),
        _ => {
            let n = path.strip_prefix(b"/dev/fd/")?;
            if n.is_empty() || !n.iter().all(u8::is_ascii_digit) {
                return None;
            }
            String::from_utf8_lossy(n).into_owned()
        }
    };
    Some(format!("{mine}/fd/{fd}").into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threads_own_names_are_its_proc_directory() {
        let t = Thread::open(std::process::id()).unwrap();
        let me = std::process::id();
        let own = |p: &str| own(&t, p.as_bytes()).map(|v| String::from_utf8(v).unwrap());
        assert_eq!(own("/dev/stdout"), Some(format!("/proc/{me}/fd/1")));
        assert_eq!(own("/dev/fd/12"), Some(format!("/proc/{me}/fd/12")));
        assert_eq!(
            own(&format!("/proc/{me}/fd/3")),
            Some(format!("/proc/{me}/fd/3"))
        );
        assert_eq!(own("/dev/fd/"), None);
        assert_eq!(own("/dev/fd/1x"), None);
        assert_eq!(own(&format!("/proc/{me}0/fd/3")), None);
        assert_eq!(own("dev/stdout"), None);
    }

    #[test]
    fn a_relative_path_starts_at_the_working_directory() {
        let t = Thread::open(std::process::id()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "x").unwrap();
        std::os::unix::fs::symlink("f", dir.path().join("l")).unwrap();
        let c = |p: &std::path::Path| CString::new(p.as_os_str().as_bytes()).unwrap();
        let f = object(&t, None, None, &c(&dir.path().join("l")), true).unwrap();
        let st = crate::sys::emulate::fstat(f.as_fd()).unwrap();
        assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFREG);
        let l = object(&t, None, None, &c(&dir.path().join("l")), false).unwrap();
        let st = crate::sys::emulate::fstat(l.as_fd()).unwrap();
        assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFLNK);
        assert_eq!(
            object(&t, None, None, c"", true)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ENOENT)
        );
    }
}
