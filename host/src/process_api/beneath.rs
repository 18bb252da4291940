//! File operations confined to the workspace, for `/v1/files/{path}`.
//!
//! Every path is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from a
//! descriptor of the workspace, so the kernel refuses `..` above it, absolute symlinks and
//! symlinks that lead out (EXDEV), whatever the path's text: a check of the text alone would
//! race with a program of the sandbox swapping a directory for a symlink. Names are checked
//! too, before anything is opened, so the common mistakes get a message of their own. Writes
//! and removals act on one name inside a parent directory opened that way (`*at` calls), never
//! on a path the kernel would resolve again.

use crate::sys;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Why a file operation did not happen; each maps to one HTTP status.
#[derive(Debug)]
pub enum FileError {
    /// The path is malformed (400).
    Bad(String),
    /// The path leads out of the workspace (403).
    Escape(String),
    /// Nothing there (404).
    NotFound(String),
    /// A directory that is not empty, without `recursive` (409).
    NotEmpty(String),
    /// Anything else the system said (500, or 403 for EACCES/EPERM).
    Io(String, io::Error),
}

/// The longest path accepted, in bytes (the kernel's own limit).
pub const MAX_PATH_BYTES: usize = 4095;

/// Checks the text of a workspace-relative path; returns its components.
pub fn components(path: &str) -> Result<Vec<&str>, FileError> {
    if path.is_empty() {
        return Err(FileError::Bad(
            "empty path; name a file in the workspace (`.` is the workspace itself)".into(),
        ));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(FileError::Bad(format!(
            "path of {} bytes; at most {MAX_PATH_BYTES}",
            path.len()
        )));
    }
    if path.contains('\0') {
        return Err(FileError::Bad("the path holds a NUL byte".into()));
    }
    if path.starts_with('/') {
        return Err(FileError::Escape(format!(
            "`{}` is absolute; paths are relative to the workspace",
            path.escape_debug()
        )));
    }
    let parts: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if parts.contains(&"..") {
        return Err(FileError::Escape(format!(
            "`{}` has a `..` component; paths stay beneath the workspace",
            path.escape_debug()
        )));
    }
    Ok(parts)
}

/// `openat2` beneath `dir`, without magic links; `EXDEV`/`ELOOP` become [`FileError::Escape`].
fn open_beneath(dir: &OwnedFd, rel: &str, flags: i32, mode: u32) -> Result<OwnedFd, FileError> {
    let c = cstr(if rel.is_empty() { "." } else { rel })?;
    sys::openat2_beneath(dir.as_fd(), &c, flags, mode).map_err(|e| match e.raw_os_error() {
        Some(libc::EXDEV) | Some(libc::ELOOP) => FileError::Escape(format!(
            "`{}` leads out of the workspace (a symlink or `..` beneath it)",
            rel.escape_debug()
        )),
        Some(libc::ENOENT) => {
            FileError::NotFound(format!("`{}`: no such file", rel.escape_debug()))
        }
        _ => FileError::Io(rel.to_string(), e),
    })
}

/// The workspace itself, as a directory descriptor.
pub fn open_root(root: &Path) -> io::Result<OwnedFd> {
    let file = std::fs::OpenOptions::new().read(true).open(root)?;
    Ok(file.into())
}

/// What `GET` found.
pub enum Found {
    /// A regular file's bytes.
    File(Vec<u8>),
    /// A directory's entries: name, size, is a directory, mtime (s), mode bits.
    Dir(Vec<Entry>),
}

/// One entry of a directory listing.
pub struct Entry {
    /// Its name.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Whether it is a directory (a symlink is listed as a file: it is not followed).
    pub dir: bool,
    /// Its modification time, seconds since the epoch.
    pub mtime: i64,
    /// Its permission bits.
    pub mode: u32,
}

/// Reads a file or lists a directory beneath `root`.
pub fn read(root: &OwnedFd, path: &str) -> Result<Found, FileError> {
    let rel = components(path)?.join("/");
    let fd = open_beneath(root, &rel, libc::O_RDONLY | libc::O_NONBLOCK, 0)?;
    let file = std::fs::File::from(fd);
    let meta = file.metadata().map_err(|e| FileError::Io(rel.clone(), e))?;
    if meta.is_dir() {
        return list(file, &rel).map(Found::Dir);
    }
    if !meta.is_file() {
        // A FIFO or device would block or never end.
        return Err(FileError::Bad(format!(
            "`{}` is not a regular file or directory",
            rel.escape_debug()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    io::Read::read_to_end(&mut &file, &mut bytes).map_err(|e| FileError::Io(rel, e))?;
    Ok(Found::File(bytes))
}

fn list(dir: std::fs::File, rel: &str) -> Result<Vec<Entry>, FileError> {
    use std::os::unix::fs::MetadataExt;
    // Our own descriptor's /proc link names the directory already opened beneath the
    // workspace: no path is resolved again from its text.
    let entries = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))
        .map_err(|e| FileError::Io(rel.to_string(), e))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        out.push(Entry {
            name: entry.file_name().to_string_lossy().into_owned(),
            size: meta.len(),
            dir: meta.is_dir(),
            mtime: meta.mtime(),
            mode: meta.mode() & 0o7777,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The parent directory of `parts` (created when `create`), opened beneath the workspace.
fn parent(root: &OwnedFd, parts: &[&str], create: bool) -> Result<OwnedFd, FileError> {
    let mut dir = open_beneath(root, ".", libc::O_PATH | libc::O_DIRECTORY, 0)?;
    for name in &parts[..parts.len() - 1] {
        let next = open_beneath(&dir, name, libc::O_PATH | libc::O_DIRECTORY, 0);
        dir = match next {
            Err(FileError::NotFound(_)) if create => {
                mkdirat(&dir, name)?;
                open_beneath(&dir, name, libc::O_PATH | libc::O_DIRECTORY, 0)?
            }
            other => other?,
        };
    }
    Ok(dir)
}

/// Refuses a last component that is a symlink leading out of the workspace. Replacing or
/// removing the link itself would not touch the outside, but a path that reads as outside is
/// refused the same way for every method, as `GET` must refuse it.
fn no_escape(dir: &OwnedFd, name: &str) -> Result<(), FileError> {
    match open_beneath(dir, name, libc::O_PATH, 0) {
        Ok(_) | Err(FileError::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

fn cstr(name: &str) -> Result<CString, FileError> {
    CString::new(OsStr::new(name).as_bytes())
        .map_err(|_| FileError::Bad("the path holds a NUL byte".into()))
}

fn mkdirat(dir: &OwnedFd, name: &str) -> Result<(), FileError> {
    match sys::mkdirat(dir.as_fd(), &cstr(name)?, 0o755) {
        Err(e) if e.raw_os_error() != Some(libc::EEXIST) => Err(FileError::Io(name.to_string(), e)),
        _ => Ok(()),
    }
}

/// Writes `bytes` to `path` beneath `root` with permission bits `mode`: a temporary file in the
/// same directory, renamed over the name, so a reader sees the old or the new file whole.
pub fn write(root: &OwnedFd, path: &str, bytes: &[u8], mode: u32) -> Result<(), FileError> {
    let parts = components(path)?;
    let Some(name) = parts.last().copied() else {
        return Err(FileError::Bad("the workspace itself is not a file".into()));
    };
    let dir = parent(root, &parts, true)?;
    no_escape(&dir, name)?;
    // A directory's descriptor opened with O_PATH serves as the base of the *at calls.
    let tmp_name = crate::aside::name(name, "put");
    let tmp = cstr(&tmp_name)?;
    let target = cstr(name)?;
    // O_EXCL|O_NOFOLLOW: an existing file or symlink of that name is never written through.
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let file = std::fs::File::from(
        sys::openat(dir.as_fd(), &tmp, flags, 0o600)
            .map_err(|e| FileError::Io(path.to_string(), e))?,
    );
    let written = io::Write::write_all(&mut &file, bytes)
        .and_then(|()| {
            use std::os::unix::fs::PermissionsExt;
            // fchmod: the umask does not apply, the caller's bits do.
            file.set_permissions(std::fs::Permissions::from_mode(mode))
        })
        .and_then(|()| file.sync_data())
        .and_then(|()| sys::renameat(dir.as_fd(), &tmp, &target));
    if let Err(e) = written {
        // Failure leaves a temporary file behind at worst, which is all this can do.
        let _ = sys::unlink_at(dir.as_fd(), &tmp, false);
        return Err(match e.raw_os_error() {
            Some(libc::EISDIR) => {
                FileError::NotEmpty(format!("`{}` is a directory", path.escape_debug()))
            }
            _ => FileError::Io(path.to_string(), e),
        });
    }
    Ok(())
}

/// Removes `path` beneath `root`: a file, an empty directory, or with `recursive` a tree.
pub fn remove(root: &OwnedFd, path: &str, recursive: bool) -> Result<(), FileError> {
    let parts = components(path)?;
    let Some(name) = parts.last().copied() else {
        return Err(FileError::Escape(
            "the workspace itself cannot be removed".into(),
        ));
    };
    let dir = parent(root, &parts, false)?;
    no_escape(&dir, name)?;
    remove_at(&dir, OsStr::new(name), recursive).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => {
            FileError::NotFound(format!("`{}`: no such file", path.escape_debug()))
        }
        Some(libc::ENOTEMPTY) => FileError::NotEmpty(format!(
            "`{}` is a directory that is not empty; add ?recursive=true",
            path.escape_debug()
        )),
        _ => FileError::Io(path.to_string(), e),
    })
}

/// Removes `name` in `dir`; never follows a symlink (a symlink is removed, not its target).
fn remove_at(dir: &OwnedFd, name: &OsStr, recursive: bool) -> io::Result<()> {
    let c =
        CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let e = match sys::unlink_at(dir.as_fd(), &c, false) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    if e.raw_os_error() != Some(libc::EISDIR) {
        return Err(e);
    }
    // AT_REMOVEDIR removes an empty directory only.
    let e = match sys::unlink_at(dir.as_fd(), &c, true) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    if !recursive || e.raw_os_error() != Some(libc::ENOTEMPTY) {
        return Err(e);
    }
    // O_NOFOLLOW|O_DIRECTORY: the entry itself, a directory, never a symlink's target.
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    let sub = sys::openat(dir.as_fd(), &c, flags, 0)?;
    let names: Vec<std::ffi::OsString> =
        std::fs::read_dir(format!("/proc/self/fd/{}", sub.as_raw_fd()))?
            .flatten()
            .map(|e| e.file_name())
            .collect();
    for child in names {
        remove_at(&sub, &child, true)?;
    }
    sys::unlink_at(dir.as_fd(), &c, true)
}
