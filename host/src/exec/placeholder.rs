//! Placeholders for protected paths that do not exist (`.git/commondir`, a missing
//! `.git/hooks`, an asked `--read-only` path), and the holds that keep them while jobs cover
//! them. A read-only mount needs something to cover: the host makes the first missing
//! component (an empty directory, or a read-only file) and removes it after the job. Removing
//! it under another job would detach that job's mount (unlinking a file or directory removes
//! the mounts over it in every namespace) and leave the path creatable there.
//!
//! Nothing here lives in a directory other users may write:
//!
//! - **Hold**: every job takes a shared `flock` on what it covers, the placeholder itself
//!   (opened `O_RDONLY | O_NOFOLLOW`, directories included: `flock` needs only a read
//!   descriptor), for as long as it runs. Jobs of every user and host see one another's holds
//!   on the inode, with no lock file anywhere.
//! - **Record**: the job that made a placeholder records it (device, inode and path) in its
//!   user's own state directory ([`crate::state_dir`], `placeholders/`).
//! - **Removal**: at the end a job removes a placeholder only if it made it or its own user's
//!   record names that exact inode at that path, only after taking `LOCK_EX | LOCK_NB` on it
//!   (no job of any user still holds it), and only if, after the lock, the path still names
//!   that inode (`fstatat` in the parent opened without following symlinks, against `fstat`
//!   of the held descriptor), by `unlinkat` in that parent. A placeholder another job still
//!   holds is left, to the last job of the recording user (or, after a crash, to the next one
//!   that covers it). Then the same for its parent, when that is a placeholder too.
//!
//! So a record another user plants, a symlink, or a file swapped in for a placeholder makes no
//! job remove anything it did not make: another user cannot write the records, and a removal
//! needs the recorded inode at the recorded path.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a job waits for a shared hold while another process holds the path exclusively
/// (a job removing its placeholder holds it for a moment; longer is another process's doing,
/// and the job is refused rather than run without the protection).
const HOLD_WAIT: Duration = Duration::from_secs(2);

/// How often covering starts over when the path changes under it (made or removed by another
/// job meanwhile).
const ATTEMPTS: usize = 32;

/// (device, inode): what a record names and a removal checks.
type Id = (u64, u64);

/// A job's shared hold on what it covers, released (and the placeholder removed, when this
/// job may) by [`Hold::release`].
#[derive(Debug)]
pub(crate) struct Hold {
    file: File,
    path: PathBuf,
    id: Id,
    /// This job made it: it may remove it without a record (one could not be written, or the
    /// state directory went away).
    made: bool,
}

/// What covering a protected path gave: the path to mount read-only over, and the hold on it
/// (`None` when the caller may not open it: not a placeholder, which every user may read).
#[derive(Debug)]
pub(crate) struct Covered {
    /// What to mount over.
    pub target: PathBuf,
    /// The shared hold on `target`.
    pub hold: Option<Hold>,
}

/// Opens `path` for a hold, without following a symlink in its last component, and without
/// waiting or taking a terminal (a FIFO swapped in would otherwise block the open).
fn open(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// Whether `m` is a kind of file a placeholder is (a regular file or a directory): anything
/// else at a protected path (a FIFO, a device another user's symlink points at) is never
/// opened by the host, nor held.
fn placeholder_kind(m: &std::fs::Metadata) -> bool {
    m.is_file() || m.is_dir()
}

fn id_of(file: &File) -> std::io::Result<Id> {
    let m = file.metadata()?;
    Ok((m.dev(), m.ino()))
}

/// Takes the shared hold on `file`, waiting at most [`HOLD_WAIT`] for an exclusive holder.
fn hold_shared(file: &File, path: &Path) -> std::io::Result<()> {
    let start = Instant::now();
    loop {
        match crate::sys::flock(file.as_fd(), libc::LOCK_SH | libc::LOCK_NB) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => {
                if start.elapsed() > HOLD_WAIT {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::WouldBlock,
                        format!(
                            "cannot protect `{}`: another process has held it locked \
                             exclusively for {} s (a job's shared flock on it is what keeps it \
                             from being removed while the job covers it); run the job once that \
                             process has released it",
                            crate::escape::path(path),
                            HOLD_WAIT.as_secs()
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether `file` (at `path`) is what a removal would take: an empty directory, or a file
/// holding exactly a placeholder's text. Anything else is no placeholder, now; one that becomes
/// one later (emptied while a job covers it) was emptied by a user who could write it anyway.
fn removable(file: &File, path: &Path) -> bool {
    let Ok(m) = file.metadata() else {
        return false;
    };
    // Swapped for another kind of file between the check and the open.
    if !placeholder_kind(&m) {
        return false;
    }
    if m.is_dir() {
        return std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none());
    }
    let text = placeholder_text(path);
    if m.len() != text.len() as u64 {
        return false;
    }
    let mut buf = Vec::new();
    let mut f: &File = file;
    let same = f.read_to_end(&mut buf).is_ok() && buf == text;
    // Back to the start: a removal reads it again through the same descriptor.
    let _ = std::io::Seek::rewind(&mut f);
    same
}

/// Whether `path` still names the inode `id` (not through a symlink).
fn still_names(path: &Path, id: Id) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == id)
}

/// Covers `path` so that a read-only mount can go over it: an existing path is held as it is;
/// otherwise its first missing component becomes a placeholder file ([`placeholder_text`];
/// when that is `path` itself and `dir` is false) or an empty directory, recorded in the
/// caller's state directory. Errors are the caller's to judge (EACCES: the caller cannot
/// create it, nor can the command).
pub(crate) fn cover(path: &Path, dir: bool) -> std::io::Result<Covered> {
    for _ in 0..ATTEMPTS {
        let first_missing = path
            .ancestors()
            .take_while(|a| a.symlink_metadata().is_err())
            .last()
            .map(Path::to_path_buf);
        let Some(missing) = first_missing else {
            let target = std::fs::canonicalize(path).unwrap_or(path.to_path_buf());
            match std::fs::symlink_metadata(&target) {
                Ok(m) if placeholder_kind(&m) => {}
                Ok(_) => return Ok(Covered { target, hold: None }),
                Err(_) => continue,
            }
            let file = match open(&target) {
                Ok(f) => f,
                // Unreadable to the caller: not a placeholder (those are readable by every
                // user); covered without a hold.
                Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                    return Ok(Covered { target, hold: None })
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            // What no job could remove (a directory with entries, a file with other content:
            // the removal leaves those) needs no hold, and another process's exclusive lock
            // on it (a populated `.git/hooks`) then stalls nothing.
            if !removable(&file, &target) {
                return Ok(Covered { target, hold: None });
            }
            hold_shared(&file, &target)?;
            let id = id_of(&file)?;
            // Removed (and perhaps made again) between the open and the hold: start over.
            if !still_names(&target, id) {
                let _ = crate::sys::flock(file.as_fd(), libc::LOCK_UN);
                continue;
            }
            return Ok(Covered {
                target: target.clone(),
                hold: Some(Hold {
                    file,
                    path: target,
                    id,
                    made: false,
                }),
            });
        };
        let as_file = missing == path && !dir;
        let made = if as_file {
            // Written aside and linked into place: the placeholder appears with its text or
            // not at all (an empty `commondir` makes every git command in the repository fail).
            use std::io::Write;
            // Named for this call alone (module `aside`).
            let tmp = missing.with_file_name(crate::aside::name(
                &missing
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                "made",
            ));
            let made = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .mode(0o444)
                .open(&tmp)
                .and_then(|mut f| {
                    f.write_all(placeholder_text(&missing))?;
                    // Readable by every user whatever the umask: their jobs hold it too.
                    f.set_permissions(std::fs::Permissions::from_mode(0o444))
                })
                .and_then(|()| std::fs::hard_link(&tmp, &missing));
            let _ = std::fs::remove_file(&tmp);
            made
        } else {
            std::fs::create_dir(&missing).and_then(|()| {
                std::fs::set_permissions(&missing, std::fs::Permissions::from_mode(0o755))
            })
        };
        match made {
            Ok(()) => {}
            // Made meanwhile (by another job), or its parent removed meanwhile: start over.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotFound
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        }
        // Canonical, as a later job that finds it existing names it: records match.
        let missing = std::fs::canonicalize(&missing).unwrap_or(missing);
        // What this job made and cannot hold is removed again, not left behind unrecorded.
        let undo = |e: std::io::Error| {
            let _ = if as_file {
                std::fs::remove_file(&missing)
            } else {
                std::fs::remove_dir(&missing)
            };
            e
        };
        let file = open(&missing).map_err(undo)?;
        hold_shared(&file, &missing).map_err(undo)?;
        let hold = Hold {
            id: id_of(&file).map_err(undo)?,
            file,
            path: missing.clone(),
            made: true,
        };
        // Recorded only once held: a job of this user that ends meanwhile finds the hold.
        if let Err(e) = record(hold.id, &missing) {
            hold.release();
            return Err(std::io::Error::other(e));
        }
        return Ok(Covered {
            target: missing,
            hold: Some(hold),
        });
    }
    Err(std::io::Error::other(format!(
        "`{}` kept changing while it was being covered",
        crate::escape::path(path)
    )))
}

/// The caller's records: `placeholders/` in its state directory.
fn records() -> Result<PathBuf, String> {
    crate::state_dir::sub("placeholders")
}

fn record_name((dev, ino): Id) -> String {
    format!("{dev}-{ino}")
}

/// Most records one pruning looks at: the directory holds a few entries (one per placeholder
/// in use, plus those of hosts that were killed), so this bounds only a pathological one.
const MAX_PRUNED: usize = 256;

/// Removes the records whose path no longer names their inode (the placeholder was removed
/// by hand, or its repository deleted, after its host was killed): they could only ever
/// match an unrelated entry that reused the inode number at the same path.
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten().take(MAX_PRUNED) {
        let name = e.file_name();
        let Some((dev, ino)) = name.to_str().and_then(|n| n.split_once('-')) else {
            continue;
        };
        let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
            continue;
        };
        let Ok(path) = std::fs::read(e.path()) else {
            continue;
        };
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(&path));
        if !still_names(&path, (dev, ino)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Records that this user made the placeholder `path`, inode `id` (pruning stale records
/// first: a record is written once per placeholder made, so they cannot pile up).
fn record(id: Id, path: &Path) -> Result<(), String> {
    let dir = records()?;
    prune(&dir);
    let file = dir.join(record_name(id));
    std::fs::write(&file, path.as_os_str().as_bytes()).map_err(|e| {
        format!(
            "cannot record the placeholder in {}: {e}",
            crate::escape::path(&file)
        )
    })
}

/// Whether this user's record names inode `id` at `path`.
fn recorded(id: Id, path: &Path) -> bool {
    let Ok(dir) = records() else {
        return false;
    };
    std::fs::read(dir.join(record_name(id))).is_ok_and(|p| p == path.as_os_str().as_bytes())
}

fn forget(id: Id) {
    if let Ok(dir) = records() {
        let _ = std::fs::remove_file(dir.join(record_name(id)));
    }
}

/// Removes the placeholder `path` (inode `id`, held through `file`) if this user may and no
/// job still holds it. Returns whether it is gone.
fn remove(file: &File, path: &Path, id: Id, made: bool) -> bool {
    if !made && !recorded(id, path) {
        return false;
    }
    // No job of any user holds it any more (ours converts to exclusive).
    if crate::sys::flock(file.as_fd(), libc::LOCK_EX | libc::LOCK_NB).is_err() {
        return false;
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    let Ok(name) = CString::new(name.as_bytes()) else {
        return false;
    };
    let Ok(parent) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(parent)
    else {
        return false;
    };
    // After the lock: the path must still name the held inode, checked in the parent it will
    // be removed from.
    if crate::sys::identity_at(parent.as_fd(), &name).ok() != Some(id) {
        // The recorded inode (alive while held) is no longer at its path: a record of it
        // could never match again.
        forget(id);
        return false;
    }
    let m = match file.metadata() {
        Ok(m) => m,
        Err(_) => return false,
    };
    let removed = if m.is_dir() {
        crate::sys::unlink_at(parent.as_fd(), &name, true)
    } else {
        // Only as it was made: a file someone has since filled is theirs.
        let mut text = Vec::new();
        let mut f: &File = file;
        let read = std::io::Seek::rewind(&mut f).and_then(|()| f.read_to_end(&mut text));
        if read.is_err() || text != placeholder_text(path) {
            forget(id);
            return false;
        }
        crate::sys::unlink_at(parent.as_fd(), &name, false)
    };
    match removed {
        Ok(()) => {
            forget(id);
            true
        }
        // Not empty (something was made in it): left, with its record, to a later job.
        Err(_) => false,
    }
}

/// [`remove`], then the lock dropped explicitly: the open file description may live on in a
/// process that inherited it (the init of a job that started meanwhile), and a lock left on it
/// would stall other jobs' holds until that process ends.
fn remove_and_unlock(file: &File, path: &Path, id: Id, made: bool) -> bool {
    let removed = remove(file, path, id, made);
    let _ = crate::sys::flock(file.as_fd(), libc::LOCK_UN);
    removed
}

impl Hold {
    /// The job is done: removes the placeholder when this job is the last holder and may, then
    /// its parent when that is one of this user's placeholders too.
    pub(crate) fn release(self) {
        if !remove_and_unlock(&self.file, &self.path, self.id, self.made) {
            return;
        }
        drop(self.file);
        let mut path = self.path;
        while let Some(parent) = path.parent().map(Path::to_path_buf) {
            let Ok(file) = open(&parent) else {
                return;
            };
            let Ok(id) = id_of(&file) else {
                return;
            };
            if !remove_and_unlock(&file, &parent, id, false) {
                return;
            }
            path = parent;
        }
    }
}

/// What a placeholder file holds: for a git directory's `commondir`, `.` (the git directory
/// itself, what git assumes without the file), so that git outside keeps working while a job
/// runs and after a host that was killed left it behind (an empty `commondir` makes every git
/// command in the repository fail); nothing for any other path.
fn placeholder_text(path: &Path) -> &'static [u8] {
    if path.file_name() == Some(std::ffi::OsStr::new("commondir")) {
        b".\n"
    } else {
        b""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_holder_removes_it_and_a_swapped_file_is_left() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("missing");
        let a = cover(&p, false).unwrap();
        let b = cover(&p, false).unwrap();
        assert!(!a.hold.as_ref().unwrap().made || !b.hold.as_ref().unwrap().made);
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!(m.mode() & 0o777, 0o444);
        // The first to end leaves it to the other holder.
        a.hold.unwrap().release();
        assert!(p.exists(), "removed under another holder");
        b.hold.unwrap().release();
        assert!(!p.exists(), "the last holder left it");
        // A placeholder swapped for another file (a new inode) after it was made: the maker's
        // job removes nothing.
        let c = cover(&p, false).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "").unwrap();
        let id = c.hold.as_ref().unwrap().id;
        c.hold.unwrap().release();
        assert!(p.exists(), "removed a file it did not make");
        assert!(!records().unwrap().join(record_name(id)).exists());
        // Control: the same file covered and recorded as this user's is removed.
        std::fs::remove_file(&p).unwrap();
        let d = cover(&p, false).unwrap();
        d.hold.unwrap().release();
        assert!(!p.exists());
    }

    #[test]
    fn what_no_job_could_remove_is_covered_without_a_hold() {
        let t = tempfile::tempdir().unwrap();
        let config = t.path().join("config");
        std::fs::write(&config, "[core]\n").unwrap();
        let hooks = t.path().join("hooks");
        std::fs::create_dir(&hooks).unwrap();
        std::fs::write(hooks.join("pre-commit.sample"), "").unwrap();
        for p in [&config, &hooks] {
            let c = cover(p, false).unwrap();
            assert!(c.hold.is_none(), "{p:?}");
        }
        // Control: an empty directory and an empty file, which removals take, are held.
        let empty = t.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let c = cover(&empty, true).unwrap();
        assert!(c.hold.is_some());
        c.hold.unwrap().release();
        assert!(empty.exists(), "removed without a record");
    }

    #[test]
    fn a_fifo_or_a_device_at_the_path_is_neither_opened_nor_held() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("commondir");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(st.success());
        // Opened for reading it would block until a writer came: covering returns at once.
        let covered = cover(&fifo, false).unwrap();
        assert!(covered.hold.is_none());
        let link = t.path().join("hooks");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let covered = cover(&link, true).unwrap();
        assert_eq!(covered.target, Path::new("/dev/null"));
        assert!(covered.hold.is_none());
    }

    #[test]
    fn stale_records_are_pruned_when_one_is_written() {
        let t = tempfile::tempdir().unwrap();
        let gone = t.path().join("gone");
        // A record of a placeholder whose host was killed and which was removed by hand.
        let a = cover(&gone, false).unwrap();
        let id = a.hold.as_ref().unwrap().id;
        let stale = records().unwrap().join(record_name(id));
        assert!(stale.exists());
        std::mem::forget(a);
        std::fs::remove_file(&gone).unwrap();
        // Control: a record whose placeholder is still there stays.
        let kept = t.path().join("kept");
        let b = cover(&kept, false).unwrap();
        let kept_record = records()
            .unwrap()
            .join(record_name(b.hold.as_ref().unwrap().id));
        assert!(!stale.exists(), "a stale record was left");
        let c = cover(&t.path().join("third"), false).unwrap();
        assert!(kept_record.exists(), "a live record was pruned");
        b.hold.unwrap().release();
        c.hold.unwrap().release();
        assert!(!kept_record.exists());
    }

    #[test]
    fn a_directory_made_for_a_deeper_path_goes_with_it() {
        let t = tempfile::tempdir().unwrap();
        let deep = t.path().join("deploy/secrets.env");
        let a = cover(&deep, false).unwrap();
        assert_eq!(a.target, t.path().canonicalize().unwrap().join("deploy"));
        // A second job finds the directory and makes the file inside it.
        let b = cover(&deep, false).unwrap();
        assert!(b.target.ends_with("deploy/secrets.env"));
        a.hold.unwrap().release();
        assert!(deep.exists(), "not empty: left");
        b.hold.unwrap().release();
        assert!(
            !t.path().join("deploy").exists(),
            "the recorded parent was left"
        );
    }
}
