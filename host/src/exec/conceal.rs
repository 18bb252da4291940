//! Credentials hidden by construction in the constructed view (the isolated tier).
//!
//! Landlock only grants, so the layer's "read everything but the deny list" is a carve-out:
//! no directory above a deny path that exists may be granted whole, and a program cannot
//! list those directories (`ls /` as root, whose `/etc/shadow` is on the list; `ls ~` for a
//! user with `~/.ssh`). In the view the deny paths are covered instead: every one that exists
//! when the job starts gets an empty file or directory of mode 000 bound over it, before
//! anything else is mounted (so the copies of trees bound back carry the covers with them)
//! and before the tree is made read-only. Opening one fails with `EACCES` (the program holds
//! no capability, so not even root passes mode 000), reading through it would find nothing,
//! and the program cannot unmount it. Landlock then grants reading the whole view (`/`).
//!
//! What this does not cover, as the carve-out did not: a deny path the host creates while the
//! job runs (the carve-out saw only what existed at planning, too), and another path to the
//! same file (a hard link, or a second mount of the same file system).

use super::namespaces::Mount;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The empty file and directory bound over deny paths: in the caller's state directory
/// (`conceal/file`, `conceal/dir`), made once per process.
struct Sources {
    file: CString,
    dir: CString,
}

/// The sources, made and checked once per process; `None` when they cannot be (no state
/// directory): the job then keeps Landlock's carve-out.
fn sources() -> Option<&'static Sources> {
    static SOURCES: OnceLock<Option<Sources>> = OnceLock::new();
    SOURCES
        .get_or_init(|| match make() {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::debug!(error = %e, "no covers for the view; Landlock's carve-out stays");
                None
            }
        })
        .as_ref()
}

fn make() -> std::io::Result<Sources> {
    let dir = crate::state_dir::sub("conceal").map_err(std::io::Error::other)?;
    let file = dir.join("file");
    let empty = dir.join("dir");
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o000)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&file)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    match std::fs::DirBuilder::new().mode(0o000).create(&empty) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // Only the caller writes its state directory, but what is there is checked anyway: a
    // source with content or other rights would show that instead of refusing.
    let euid = crate::sys::euid();
    for (p, dir) in [(&file, false), (&empty, true)] {
        let m = std::fs::symlink_metadata(p)?;
        let empty = if dir { m.nlink() == 2 } else { m.len() == 0 };
        if m.is_dir() != dir
            || !(m.is_dir() || m.is_file())
            || m.mode() & 0o7777 != 0
            || m.uid() != euid
            || !empty
        {
            return Err(std::io::Error::other(format!(
                "{} is not an empty {} of mode 000 owned by the caller",
                p.display(),
                if dir { "directory" } else { "file" }
            )));
        }
    }
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    Ok(Sources {
        file: c(&file)?,
        dir: c(&empty)?,
    })
}

/// Whether the view can cover deny paths in this process (the sources exist and are sound):
/// when it can, a job in the view needs no Landlock carve-out (`landlock::Spec::covered`).
pub(crate) fn available() -> bool {
    sources().is_some()
}

/// The covers for `deny` (the credential list and the request's `deny_read`): one per path
/// that exists, at its real place (links followed), the first mounts of the view. `None`
/// when there are no sources to bind.
pub(crate) fn covers(deny: &[PathBuf]) -> Option<Vec<Mount>> {
    let s = sources()?;
    let mut targets: Vec<(PathBuf, bool)> = deny
        .iter()
        .filter_map(|p| {
            // Most deny paths do not exist: one `statx` finds that, where resolving the path
            // first costs a `readlink` per component (about 170 per run as root).
            let dir = std::fs::metadata(p).ok()?.is_dir();
            let real = std::fs::canonicalize(p).ok()?;
            Some((real, dir))
        })
        // The view replaces /proc and /dev with its own.
        .filter(|(p, _)| !p.starts_with("/proc") && !p.starts_with("/dev"))
        .collect();
    targets.sort();
    targets.dedup();
    // A cover hides everything beneath it: paths inside another need none.
    let all = targets.clone();
    targets.retain(|(p, _)| !all.iter().any(|(o, _)| o != p && p.starts_with(o)));
    Some(
        targets
            .into_iter()
            .filter_map(|(p, dir)| {
                let target = CString::new(p.as_os_str().as_bytes()).ok()?;
                let source = if dir { &s.dir } else { &s.file };
                Some(Mount::Cover(target, source.clone()))
            })
            .collect(),
    )
}
