//! Host-side file work on paths a job or another local user can change: the git guard's reads,
//! restores and removals (module `exec::git_guard`).
//!
//! The host runs this work unsandboxed, after or beside the job, so a path is never trusted:
//!
//! - every path is reached from an **anchor**, a directory descriptor opened before the job;
//!   the rest of the path is walked one component at a time with `O_NOFOLLOW`, so a component
//!   that is a symlink stops the walk and is reported ([`Found::Symlink`]), never followed;
//! - the last component is read with `O_NOFOLLOW`, replaced by a new file renamed over it in
//!   its directory (a symlink there is replaced, not written through), removed with
//!   `unlinkat` (a symlink itself, never its target);
//! - no owner and no mode is taken from a path: a file written gets the mode the caller gives
//!   and the identity of whoever writes it; as root in a directory another user owns, the work
//!   is done by a thread whose file-system identity is that user's (`setfsuid`, which also
//!   drops root's file capabilities), so it can do there exactly what that user could.
//!
//! A component walk rather than `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: the walk is
//! one code path on every kernel and container profile (gVisor and seccomp profiles older than
//! Docker 20.10 answer `openat2` with `ENOSYS`), and it names the component that was a symlink,
//! which is the finding the callers report. Control paths are a handful of components deep.

use crate::sys::beneath::{self as at, Stat};
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// A directory opened before the job, and the path it was opened at.
#[derive(Debug)]
struct Anchor {
    path: PathBuf,
    dir: OwnedFd,
}

/// The anchors of one piece of host-side work.
#[derive(Debug, Default)]
pub(crate) struct Anchors {
    list: Vec<Anchor>,
}

/// Where a walk from an anchor ended.
#[derive(Debug)]
pub(crate) enum Found {
    /// The path's directory was reached without a symlink.
    Here(Place),
    /// A component (or the path's directory) does not exist.
    Missing,
    /// This component (an absolute path under its anchor) is a symlink.
    Symlink(PathBuf),
    /// This component is neither a directory nor a symlink.
    NotDir(PathBuf),
    /// No anchor holds the path, or it names `..`: the caller does nothing there.
    Outside,
    /// The walk failed otherwise (permissions, too many open files).
    Failed(io::Error),
}

/// A name in a directory reached from an anchor: the directory is held open, so whatever is
/// renamed or replaced above it meanwhile, the work happens in the directory the walk reached.
#[derive(Debug)]
pub(crate) struct Place {
    dir: OwnedFd,
    name: CString,
    /// The path as the caller gave it (for messages).
    pub path: PathBuf,
}

/// A file as read beneath an anchor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// Nothing there.
    Absent,
    /// A regular file of at most the size asked for: its bytes and its inode.
    File(Vec<u8>, Stat),
    /// Something else: a symlink, a directory, a FIFO, a device, a larger file, or a file that
    /// could not be opened.
    Other,
}

/// One entry of a directory, as `fstatat` without following sees it.
#[derive(Debug)]
pub(crate) struct Entry {
    pub name: OsString,
    pub stat: Stat,
}

impl Anchors {
    /// Opens `dir` as an anchor (as the path is now, before the job: the caller's own layout);
    /// nothing when it cannot be opened (then nothing beneath it is touched).
    pub(crate) fn add(&mut self, dir: &Path) {
        if self.list.iter().any(|a| a.path == dir) {
            return;
        }
        if let Ok(fd) = crate::sys::open_path(dir, true).and_then(check_dir) {
            self.list.push(Anchor {
                path: dir.to_path_buf(),
                dir: fd,
            });
        }
    }

    /// Opens `dir` as an anchor unless an anchor holds it already (a walk from that one sees
    /// more of the path).
    pub(crate) fn cover_dir(&mut self, dir: &Path) {
        if !self.list.iter().any(|a| dir.starts_with(&a.path)) {
            self.add(dir);
        }
    }

    /// Makes sure a walk can reach `path`: when no anchor holds it, its parent is opened as one.
    pub(crate) fn cover(&mut self, path: &Path) {
        if self.anchor_of(path).is_none() {
            if let Some(parent) = path.parent() {
                self.add(parent);
            }
        }
    }

    /// The highest anchor strictly above `path` (the walk from it checks the most components),
    /// and the components below it.
    fn anchor_of<'p>(&self, path: &'p Path) -> Option<(&Anchor, Vec<&'p OsStr>)> {
        // Bytes, not `Path::starts_with` and `components`, which parse every component of both
        // paths for each anchor: the guards ask for each of their paths several times a job.
        let bytes = path.as_os_str().as_bytes();
        let anchor = self
            .list
            .iter()
            .filter(|a| {
                let a = a.path.as_os_str().as_bytes();
                let a = a.strip_suffix(b"/").unwrap_or(a);
                bytes.len() > a.len() && bytes.starts_with(a) && bytes[a.len()] == b'/'
            })
            .min_by_key(|a| a.path.as_os_str().len())?;
        let a = anchor.path.as_os_str().as_bytes();
        let rest = &bytes[a.strip_suffix(b"/").unwrap_or(a).len()..];
        let mut names = Vec::new();
        for n in rest.split(|b| *b == b'/') {
            match n {
                b"" | b"." => {}
                b".." => return None,
                n => names.push(OsStr::from_bytes(n)),
            }
        }
        (!names.is_empty()).then_some((anchor, names))
    }

    /// Whether the first component of `path` below its anchor exists (a symlink counts): one
    /// `fstatat` on the anchor, where a walk would duplicate descriptors first. Absent paths
    /// are most of what the control-file check looks for.
    pub(crate) fn first_exists(&self, path: &Path) -> bool {
        let Some((anchor, names)) = self.anchor_of(path) else {
            return false;
        };
        let Some(first) = names.first().and_then(|n| c_name(n)) else {
            return false;
        };
        at::stat_at(anchor.dir.as_fd(), &first).is_ok()
    }

    /// Walks to `path`'s directory from its anchor, following no symlink.
    pub(crate) fn place(&self, path: &Path) -> Found {
        let Some((anchor, names)) = self.anchor_of(path) else {
            return Found::Outside;
        };
        let (last, dirs) = names.split_last().expect("at least one component");
        let mut here = anchor.path.clone();
        let mut dir: Option<OwnedFd> = None;
        for name in dirs {
            here.push(name);
            let parent = dir.as_ref().map_or(anchor.dir.as_fd(), AsFd::as_fd);
            match step(parent, name, &here) {
                Ok(fd) => dir = Some(fd),
                Err(found) => return found,
            }
        }
        let dir = match dir {
            Some(d) => d,
            None => match anchor.dir.try_clone() {
                Ok(d) => d,
                Err(e) => return Found::Failed(e),
            },
        };
        match c_name(last) {
            Some(name) => Found::Here(Place {
                dir,
                name,
                path: path.to_path_buf(),
            }),
            None => Found::Missing,
        }
    }
}

/// The descriptor when it is a directory.
fn check_dir(fd: OwnedFd) -> io::Result<OwnedFd> {
    let st = at::stat_fd(fd.as_fd())?;
    if st.kind() != libc::S_IFDIR {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    Ok(fd)
}

/// `name` as a C string; `None` for a name with a NUL byte (no such file can exist).
fn c_name(name: &OsStr) -> Option<CString> {
    CString::new(name.as_bytes()).ok()
}

/// `openat` that never follows a symlink at `name` (`ELOOP`, or `ENOTDIR` with
/// `O_PATH | O_DIRECTORY`, instead of opening its target).
fn open_nofollow(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    crate::sys::openat(dir, name, flags | libc::O_NOFOLLOW, mode)
}

/// One step of a walk: the directory `name` in `parent`, never through a symlink; where it
/// stops, what `here` (the path up to `name`) is.
fn step(parent: BorrowedFd<'_>, name: &OsStr, here: &Path) -> Result<OwnedFd, Found> {
    let Some(c) = c_name(name) else {
        return Err(Found::Missing);
    };
    match open_nofollow(parent, &c, libc::O_PATH | libc::O_DIRECTORY, 0) {
        Ok(fd) => Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Err(Found::Missing),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
            match at::stat_at(parent, &c) {
                Ok(st) if st.kind() == libc::S_IFLNK => Err(Found::Symlink(here.to_path_buf())),
                Ok(_) => Err(Found::NotDir(here.to_path_buf())),
                Err(_) => Err(Found::Missing),
            }
        }
        Err(e) => Err(Found::Failed(io::Error::new(
            e.kind(),
            format!("cannot open {} as a directory: {e}", here.display()),
        ))),
    }
}

impl Place {
    /// The name's inode, a symlink itself rather than its target.
    pub(crate) fn stat(&self) -> io::Result<Stat> {
        at::stat_at(self.dir.as_fd(), &self.name)
    }

    /// What a symlink at the name says.
    pub(crate) fn link(&self) -> io::Result<PathBuf> {
        at::read_link_at(self.dir.as_fd(), &self.name).map(|b| PathBuf::from(OsString::from_vec(b)))
    }

    /// The file at the name, at most `max` bytes, opened without following a symlink,
    /// waiting on a FIFO or taking a terminal.
    pub(crate) fn read(&self, max: u64) -> Read {
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
        let fd = match open_nofollow(self.dir.as_fd(), &self.name, flags, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Read::Absent,
            Err(_) => return Read::Other,
        };
        let Ok(st) = at::stat_fd(fd.as_fd()) else {
            return Read::Other;
        };
        if st.kind() != libc::S_IFREG || st.size > max {
            return Read::Other;
        }
        let mut bytes = Vec::new();
        match std::fs::File::from(fd)
            .take(max + 1)
            .read_to_end(&mut bytes)
        {
            Ok(_) if bytes.len() as u64 <= max => Read::File(bytes, st),
            _ => Read::Other,
        }
    }

    /// The entries of the directory at the name (`.` and `..` left out), each as `fstatat`
    /// sees it; `Err` with the directory's own inode when the name is not a directory (a
    /// symlink, a file), `Ok(None)` when it is absent.
    pub(crate) fn entries(&self) -> Result<Option<(Place, Vec<Entry>)>, Stat> {
        self.entries_but(|_| false)
    }

    /// [`Place::entries`] without those `skip` names (not even looked at: a hooks directory
    /// holds a dozen `*.sample` files git never runs).
    pub(crate) fn entries_but(
        &self,
        skip: impl Fn(&OsStr) -> bool,
    ) -> Result<Option<(Place, Vec<Entry>)>, Stat> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY;
        let fd = match open_nofollow(self.dir.as_fd(), &self.name, flags, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(_) => {
                return match self.stat() {
                    Ok(st) => Err(st),
                    Err(_) => Ok(None),
                }
            }
        };
        let mut out = Vec::new();
        // The directory as this process holds it open: its entries are read from the
        // descriptor, whatever its path has become.
        let listed = std::fs::read_dir(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&fd)
        ));
        if let Ok(listed) = listed {
            for e in listed.flatten() {
                let name = e.file_name();
                if skip(&name) {
                    continue;
                }
                let Some(c) = c_name(&name) else { continue };
                if let Ok(stat) = at::stat_at(fd.as_fd(), &c) {
                    out.push(Entry { name, stat });
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        let dir = Place {
            dir: fd,
            name: c".".to_owned(),
            path: self.path.clone(),
        };
        Ok(Some((dir, out)))
    }

    /// The place of `name` inside the directory this place was listed as (see [`Place::entries`]).
    pub(crate) fn child(&self, name: &OsStr) -> Option<Place> {
        Some(Place {
            dir: self.dir.try_clone().ok()?,
            name: c_name(name)?,
            path: self.path.join(name),
        })
    }

    /// Replaces the name with a regular file holding `bytes`, of mode `mode`: a new file
    /// renamed over it in its directory, so that a symlink there is replaced, never written
    /// through. As root in another user's directory, made as that user.
    pub(crate) fn replace(&self, bytes: &[u8], mode: u32) -> io::Result<()> {
        let mode = mode & 0o777;
        let shown = String::from_utf8_lossy(self.name.as_bytes()).into_owned();
        let tmp = CString::new(crate::aside::name(&shown, "restore"))
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        as_owner(self.dir.as_fd(), || {
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
            let made = open_nofollow(self.dir.as_fd(), &tmp, flags, mode).and_then(|fd| {
                let mut f = std::fs::File::from(fd);
                f.write_all(bytes)?;
                // The mode asked for, whatever the umask is.
                f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
                crate::sys::renameat(self.dir.as_fd(), &tmp, &self.name)
            });
            if made.is_err() {
                let _ = crate::sys::unlink_at(self.dir.as_fd(), &tmp, false);
            }
            made
        })
    }

    /// Removes the name: a file or a symlink itself, never what it points to, nor a
    /// directory. Absent already is done. As root in another user's directory, as that user.
    pub(crate) fn remove(&self) -> io::Result<()> {
        as_owner(self.dir.as_fd(), || {
            match crate::sys::unlink_at(self.dir.as_fd(), &self.name, false) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                r => r,
            }
        })
    }
}

impl Place {
    /// Makes a directory at the name (absent before), of mode `mode`; as root in another
    /// user's directory, as that user.
    pub(crate) fn make_dir(&self, mode: u32) -> io::Result<()> {
        as_owner(self.dir.as_fd(), || {
            crate::sys::mkdirat(self.dir.as_fd(), &self.name, mode & 0o777)
        })
    }

    /// Makes a symlink at the name saying `target` (absent before).
    pub(crate) fn make_link(&self, target: &Path) -> io::Result<()> {
        let target = CString::new(target.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        as_owner(self.dir.as_fd(), || {
            at::symlink_at(&target, self.dir.as_fd(), &self.name)
        })
    }

    /// Removes whatever is at the name: a file or symlink itself, or a directory with
    /// everything beneath it, each directory entered without following a symlink (a
    /// symlink inside is removed, never its target). At most [`TREE_LIMIT`] entries.
    pub(crate) fn remove_tree(&self) -> io::Result<()> {
        let mut budget = TREE_LIMIT;
        self.remove_tree_within(&mut budget)
    }

    fn remove_tree_within(&self, budget: &mut usize) -> io::Result<()> {
        let st = match self.stat() {
            Ok(st) => st,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(e) => return Err(e),
        };
        if st.kind() != libc::S_IFDIR {
            return self.remove();
        }
        if let Ok(Some((listed, entries))) = self.entries() {
            for e in entries {
                if *budget == 0 {
                    return Err(io::Error::other("more entries than the sandbox removes"));
                }
                *budget -= 1;
                if let Some(child) = listed.child(&e.name) {
                    child.remove_tree_within(budget)?;
                }
            }
        }
        as_owner(self.dir.as_fd(), || {
            match crate::sys::unlink_at(self.dir.as_fd(), &self.name, true) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                r => r,
            }
        })
    }
}

/// The most entries [`Place::remove_tree`] removes.
pub(crate) const TREE_LIMIT: usize = 100_000;

/// Runs `work` with the rights of the directory's owner: directly unless this process is root
/// and the directory belongs to another user, else on a thread whose file-system identity is
/// that user's (module doc).
fn as_owner<T: Send>(
    dir: BorrowedFd<'_>,
    work: impl FnOnce() -> io::Result<T> + Send,
) -> io::Result<T> {
    if crate::sys::euid() != 0 {
        return work();
    }
    let owner = at::stat_fd(dir)?;
    if owner.uid == 0 {
        return work();
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            at::become_fs_user(owner.uid, owner.gid)?;
            work()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the owner's thread failed")))
    })
}

#[cfg(test)]
mod tests {
    use super::{Anchors, Found, Read};
    use std::os::unix::fs::symlink;

    fn anchored(dir: &std::path::Path) -> Anchors {
        let mut a = Anchors::default();
        a.add(dir);
        a
    }

    #[test]
    fn a_file_beneath_is_read_and_replaced_in_place() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join("a/b/config"), b"one").unwrap();
        let a = anchored(d.path());
        let Found::Here(p) = a.place(&d.path().join("a/b/config")) else {
            panic!("not reached")
        };
        assert!(matches!(p.read(100), Read::File(ref b, _) if b == b"one"));
        p.replace(b"two", 0o640).unwrap();
        assert_eq!(std::fs::read(d.path().join("a/b/config")).unwrap(), b"two");
        let mode = std::fs::metadata(d.path().join("a/b/config")).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o640
        );
    }

    #[test]
    fn a_symlinked_component_is_the_finding_and_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("config"), b"theirs").unwrap();
        std::fs::create_dir(d.path().join("a")).unwrap();
        symlink(outside.path(), d.path().join("a/b")).unwrap();
        let a = anchored(d.path());
        match a.place(&d.path().join("a/b/config")) {
            Found::Symlink(p) => assert_eq!(p, d.path().join("a/b")),
            other => panic!("{other:?}"),
        }
        // Control: the path itself leads out.
        assert_eq!(
            std::fs::read(d.path().join("a/b/config")).unwrap(),
            b"theirs"
        );
    }

    #[test]
    fn a_symlink_at_the_name_is_replaced_or_removed_never_written_through() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("secret");
        std::fs::write(&target, b"secret").unwrap();
        symlink(&target, d.path().join("config")).unwrap();
        let a = anchored(d.path());
        let Found::Here(p) = a.place(&d.path().join("config")) else {
            panic!()
        };
        assert_eq!(p.read(100), Read::Other, "a symlink is not read through");
        p.replace(b"mine", 0o644).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"secret");
        assert_eq!(std::fs::read(d.path().join("config")).unwrap(), b"mine");
        symlink(&target, d.path().join("hook")).unwrap();
        let Found::Here(h) = a.place(&d.path().join("hook")) else {
            panic!()
        };
        h.remove().unwrap();
        assert!(target.exists() && d.path().join("hook").symlink_metadata().is_err());
    }

    #[test]
    fn dot_dot_and_paths_of_no_anchor_are_outside() {
        let d = tempfile::tempdir().unwrap();
        let a = anchored(d.path());
        assert!(matches!(a.place(&d.path().join("../x")), Found::Outside));
        assert!(matches!(
            a.place(std::path::Path::new("/etc/passwd")),
            Found::Outside
        ));
        assert!(matches!(a.place(d.path()), Found::Outside));
    }

    #[test]
    fn a_fifo_is_not_waited_on() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("config");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let a = anchored(d.path());
        let Found::Here(p) = a.place(&fifo) else {
            panic!()
        };
        assert_eq!(p.read(100), Read::Other);
    }
}
