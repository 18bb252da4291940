//! Opens that may write (`open`, `openat` and `creat` asking to write or truncate), and
//! `truncate`, made by the host for a job of the contained or the isolated tier, so that no
//! write reaches a file that has names outside the job's reach.
//!
//! Landlock and the view decide by path: a file in the workspace that is another name (a
//! hard link) of a file elsewhere is the same inode, and writing through the workspace's
//! name changes the other too (a uv venv's packages linked from uv's cache, pnpm's store, a
//! local clone's objects, `cp -al`). A check by the host followed by the kernel's own open
//! would leave a race (another thread renames a linked file over the checked name), so the
//! host makes the open itself and hands the job the descriptor (`SECCOMP_IOCTL_NOTIF_ADDFD`
//! with `SECCOMP_ADDFD_FLAG_SEND`: the call's answer is the new descriptor's number):
//!
//! 1. the path is read once from the thread's memory and resolved as the thread's call
//!    would (module `resolve`), to an `O_PATH` descriptor of the object;
//! 2. the object is checked: a regular file or a FIFO must lie in a writable place (as
//!    Landlock and the view ask), a device must be one the job is granted, and a regular
//!    file must not be shared ([`Places::shared`]: more than one link, born before the job),
//!    which is refused (EACCES) and named with the setting that avoids the link;
//! 3. the object held is opened again for I/O through its magic link, which leads to that very
//!    inode whatever the path names by now; a file that does not exist is created in the
//!    checked directory with `O_EXCL` (never an existing name), with the thread's mode mask.
//!
//! Opens that cannot reach an existing file are left to the kernel by the filter itself:
//! `O_CREAT | O_EXCL` and `O_TMPFILE` make a new inode or fail. `openat2`, whose flags lie in
//! memory the filter cannot read, answers ENOSYS where opens are claimed (as the read-only
//! profiles already answer it): programs fall back to `openat`.

use super::checked::err;
use super::places::{name_of, Places, Refused, Why};
use super::resolve;
use super::target::{Standing, Thread};
use crate::sys::emulate::Shape;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// The calls the filter sends here where the profile allows them outright.
pub(crate) const CALLS: &[&str] = &["open", "openat", "creat", "truncate", "openat2"];

/// The flags that make an open one that may write: a write access mode or truncation.
pub(crate) const WRITE_INTENT: u64 = (libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC) as u64;

/// One waiting call, read once.
struct Call {
    dir: Option<u64>,
    path: CString,
    flags: i32,
    mode: u32,
    /// `truncate`'s length; `None` for an open.
    truncate: Option<i64>,
}

fn decode(name: &str, a: &[u64; 6], t: &Thread) -> io::Result<Call> {
    let dir = super::decode::dir_arg;
    let call = |dir, path, flags: u64, mode: u64, truncate| -> io::Result<Call> {
        Ok(Call {
            dir,
            path: t.path(path)?,
            flags: flags as u32 as i32,
            mode: mode as u32,
            truncate,
        })
    };
    match name {
        "open" => call(None, a[0], a[1], a[2], None),
        "openat" => call(dir(a[0]), a[1], a[2], a[3], None),
        "creat" => call(
            None,
            a[0],
            (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64,
            a[1],
            None,
        ),
        "truncate" => call(None, a[0], libc::O_WRONLY as u64, 0, Some(a[1] as i64)),
        _ => Err(io::Error::from_raw_os_error(libc::ENOSYS)),
    }
}

/// What the host answers a call with.
enum Plan {
    /// The call's error.
    Fail(i32),
    /// Refused: this errno, named.
    Refused(i32, Why),
    /// The new descriptor, for the thread's table (close-on-exec when asked).
    Install(OwnedFd, bool),
    /// `truncate`'s result.
    Done(io::Result<()>),
    /// A FIFO opened to write only: it waits for a reader, on a thread of its own.
    Fifo(OwnedFd, i32),
    /// The kernel makes the call (a job that stacked restrictions of its own: below).
    Continue,
}

/// How many times a name that appears or vanishes between the host's steps is looked up
/// again before the call fails (`EAGAIN`).
const ROUNDS: usize = 8;

/// Carries out one waiting open or `truncate` of a job whose writable places are `places`,
/// and answers it. A refusal is given to `record` before the answer.
///
/// `main_filters`: how many seccomp filters the job's program started under. A thread under
/// more stacked restrictions of its own (a sandbox inside this one, whose Landlock domain
/// the host's open would not carry). Its opens are checked for a shared file and then made
/// by the kernel (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`), which applies every domain; the race
/// the host's own open closes is open again for such a thread (docs/isolation.md).
pub(crate) fn open(
    listener: BorrowedFd<'_>,
    n: &libc::seccomp_notif,
    places: &Places,
    main_filters: Option<u32>,
    record: &mut dyn FnMut(Refused),
) {
    let nr = n.data.nr as u32;
    let name = crate::policy::NATIVE.syscall_name(nr).unwrap_or("");
    if name == "openat2" {
        crate::sys::notif_fail(listener, n.id, libc::ENOSYS);
        return;
    }
    let plan = plan(n, name, places, main_filters);
    // Everything about the thread was read through its id: it must still be the thread
    // whose call waits.
    if !crate::sys::notif_id_valid(listener, n.id) {
        return;
    }
    match plan {
        Plan::Fail(e) => crate::sys::notif_fail(listener, n.id, e),
        Plan::Refused(e, why) => {
            record(Refused { nr, why });
            crate::sys::notif_fail(listener, n.id, e);
        }
        Plan::Install(fd, cloexec) => {
            if let Err(e) = crate::sys::emulate::add_fd_send(listener, n.id, fd.as_fd(), cloexec) {
                // The thread's table is full (EMFILE), or it is gone (ENOENT).
                crate::sys::notif_fail(listener, n.id, err(e));
            }
        }
        Plan::Done(r) => crate::sys::notif_result(listener, n.id, r),
        Plan::Fifo(object, flags) => fifo(listener, n.id, object, flags),
        Plan::Continue => {
            let _ = crate::sys::notif_continue(listener, n.id);
        }
    }
}

/// The `Seccomp_filters:` count of a `/proc/PID/status` text.
pub(crate) fn filters_in(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp_filters:"))
        .and_then(|v| v.trim().parse().ok())
}

fn plan(n: &libc::seccomp_notif, name: &str, places: &Places, main_filters: Option<u32>) -> Plan {
    let Ok(t) = Thread::open(n.pid) else {
        return Plan::Refused(libc::EPERM, Why::Unreadable);
    };
    let call = match decode(name, &n.data.args, &t) {
        Ok(c) => c,
        Err(e) => return Plan::Fail(err(e)),
    };
    // The thread's status, read once: its credentials, filters and mode mask.
    let Ok(status) = t.status() else {
        return Plan::Refused(libc::EPERM, Why::Unreadable);
    };
    let standing = t.standing_in(&status);
    if let Standing::Other = standing {
        return Plan::Refused(libc::EPERM, Why::Credentials);
    }
    let nested = main_filters.is_some_and(|m| filters_in(&status).unwrap_or(0) > m);
    let root = match places.root_of(&t) {
        Ok(r) => r,
        Err(e) => return Plan::Fail(err(e)),
    };
    let root = root.as_ref().map(|r| r.as_fd());
    let follow = call.flags & libc::O_NOFOLLOW == 0;
    if nested {
        return match resolve::object(&t, root, call.dir, &call.path, follow) {
            Ok(object) => match crate::sys::emulate::shape(object.as_fd()) {
                Ok(s) if places.shared(&s) => {
                    Plan::Refused(libc::EACCES, Why::Linked(name_of(object.as_fd())))
                }
                _ => Plan::Continue,
            },
            Err(_) => Plan::Continue,
        };
    }
    let mut path = call.path.clone();
    let mut dir = call.dir;
    for _ in 0..ROUNDS {
        match resolve::object(&t, root, dir, &path, follow) {
            Ok(object) => return existing(&t, &standing, object, &call, places, root),
            Err(e)
                if e.raw_os_error() == Some(libc::ENOENT)
                    && call.flags & libc::O_CREAT != 0
                    && call.truncate.is_none() =>
            {
                match create(&t, &standing, &status, dir, &path, &call, places, root) {
                    Created::Plan(p) => return p,
                    // Made meanwhile: open what is there now.
                    Created::Exists => {}
                    // A dangling symlink: its target is made, as the kernel does.
                    Created::Through(target) => {
                        path = target;
                        if path.as_bytes().first() != Some(&b'/') {
                            dir = call.dir;
                        }
                    }
                }
            }
            Err(e) => return Plan::Fail(err(e)),
        }
    }
    Plan::Fail(libc::ELOOP)
}

/// The answer for an object that exists.
fn existing(
    t: &Thread,
    standing: &Standing,
    object: OwnedFd,
    call: &Call,
    places: &Places,
    root: Option<BorrowedFd<'_>>,
) -> Plan {
    let s = match crate::sys::emulate::shape(object.as_fd()) {
        Ok(s) => s,
        Err(e) => return Plan::Fail(err(e)),
    };
    let access = call.flags & libc::O_ACCMODE;
    let kind = s.mode & libc::S_IFMT;
    if call.truncate.is_none()
        && call.flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL
    {
        return Plan::Fail(libc::EEXIST);
    }
    match kind {
        libc::S_IFLNK => return Plan::Fail(libc::ELOOP),
        libc::S_IFDIR => return Plan::Fail(libc::EISDIR),
        _ if call.flags & libc::O_DIRECTORY != 0 => return Plan::Fail(libc::ENOTDIR),
        _ => {}
    }
    if call.truncate.is_some() && kind != libc::S_IFREG {
        return Plan::Fail(libc::EINVAL);
    }
    match kind {
        libc::S_IFSOCK => return Plan::Fail(libc::ENXIO),
        libc::S_IFCHR | libc::S_IFBLK => {
            return device(t, standing, object, &s, call, places, root)
        }
        _ => {}
    }
    if let Err(why) = places.writable(root, object.as_fd()) {
        return outside(object.as_fd(), why, root);
    }
    if places.denied(object.as_fd()) {
        return Plan::Fail(libc::EACCES);
    }
    if places.shared(&s) {
        return Plan::Refused(libc::EACCES, Why::Linked(name_of(object.as_fd())));
    }
    if !standing.may_open(
        &s,
        access,
        call.flags & libc::O_TRUNC != 0 || call.truncate.is_some(),
    ) {
        return unpermitted(standing, object.as_fd());
    }
    if let Some(len) = call.truncate {
        return Plan::Done(
            crate::sys::emulate::reopen(object.as_fd(), libc::O_WRONLY)
                .and_then(|f| crate::sys::emulate::truncate_fd(f.as_fd(), len)),
        );
    }
    if kind == libc::S_IFIFO && access == libc::O_WRONLY && call.flags & libc::O_NONBLOCK == 0 {
        return Plan::Fifo(object, call.flags);
    }
    match crate::sys::emulate::reopen(object.as_fd(), call.flags) {
        Ok(f) => Plan::Install(f, call.flags & libc::O_CLOEXEC != 0),
        Err(e) => Plan::Fail(err(e)),
    }
}

/// EACCES for an object the thread's mode bits do not open: named where the thread holds
/// fewer capabilities than the caller (root's job in the isolated tier), whose own open would
/// have been allowed; the kernel's plain answer otherwise.
fn unpermitted(standing: &Standing, object: BorrowedFd<'_>) -> Plan {
    match standing {
        Standing::FewerCapabilities(_) => {
            Plan::Refused(libc::EACCES, Why::Capabilities(name_of(object)))
        }
        _ => Plan::Fail(libc::EACCES),
    }
}

/// The answer for an object outside the writable places: in the view, one on a read-only
/// mount fails as the kernel fails it there (EROFS); else refused and named, as Landlock
/// refuses it.
fn outside(object: BorrowedFd<'_>, why: Why, root: Option<BorrowedFd<'_>>) -> Plan {
    if root.is_some() && crate::sys::emulate::read_only_mount(object).unwrap_or(false) {
        return Plan::Fail(libc::EROFS);
    }
    Plan::Refused(libc::EACCES, why)
}

/// A device: the controlling terminal (`/dev/tty`) is the thread's own, else the device must
/// be one the job is granted (module `places`).
fn device(
    t: &Thread,
    standing: &Standing,
    object: OwnedFd,
    s: &Shape,
    call: &Call,
    places: &Places,
    root: Option<BorrowedFd<'_>>,
) -> Plan {
    let object = if s.rdev == (5, 0) {
        // `/dev/tty` is whichever terminal controls the opener: the host's is not the job's.
        match t.terminal().and_then(|tty| t.descriptor_of(tty)) {
            Some(fd) => fd,
            None => return Plan::Fail(libc::ENXIO),
        }
    } else if places.grants_device(root, s) {
        object
    } else {
        let why = Why::Outside(Some(name_of(object.as_fd())));
        return outside(object.as_fd(), why, root);
    };
    let access = call.flags & libc::O_ACCMODE;
    if !standing.may_open(s, access, false) {
        return unpermitted(standing, object.as_fd());
    }
    match crate::sys::emulate::reopen(object.as_fd(), call.flags) {
        Ok(f) => Plan::Install(f, call.flags & libc::O_CLOEXEC != 0),
        Err(e) => Plan::Fail(err(e)),
    }
}

/// What making a new file came to.
enum Created {
    Plan(Plan),
    /// The name exists by now.
    Exists,
    /// The name is a dangling symlink to this path.
    Through(CString),
}

/// Makes the file `path` names, which did not exist: in its directory, which must lie in a
/// writable place, never over a name that exists.
#[allow(clippy::too_many_arguments)]
fn create(
    t: &Thread,
    standing: &Standing,
    status: &str,
    dir: Option<u64>,
    path: &CStr,
    call: &Call,
    places: &Places,
    root: Option<BorrowedFd<'_>>,
) -> Created {
    let bytes = path.to_bytes();
    let (parent, last): (&[u8], &[u8]) = match bytes.iter().rposition(|b| *b == b'/') {
        Some(0) => (b"/", &bytes[1..]),
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (b".", bytes),
    };
    if last.is_empty() || last == b"." || last == b".." {
        return Created::Plan(Plan::Fail(libc::EISDIR));
    }
    let (Ok(parent), Ok(last)) = (CString::new(parent), CString::new(last)) else {
        return Created::Plan(Plan::Fail(libc::ENOENT));
    };
    let parent = match resolve::object(t, root, dir, &parent, true) {
        Ok(p) => p,
        Err(e) => return Created::Plan(Plan::Fail(err(e))),
    };
    let s = match crate::sys::emulate::shape(parent.as_fd()) {
        Ok(s) => s,
        Err(e) => return Created::Plan(Plan::Fail(err(e))),
    };
    if s.mode & libc::S_IFMT != libc::S_IFDIR {
        return Created::Plan(Plan::Fail(libc::ENOTDIR));
    }
    if let Err(why) = places.writable(root, parent.as_fd()) {
        return Created::Plan(outside(parent.as_fd(), why, root));
    }
    if places.denied(parent.as_fd()) {
        return Created::Plan(Plan::Fail(libc::EACCES));
    }
    if !standing.may_create_in(&s) {
        return Created::Plan(unpermitted(standing, parent.as_fd()));
    }
    // The directory's descriptor is `O_PATH`: the new name is made beneath it for real.
    let dir = match crate::sys::emulate::reopen(parent.as_fd(), libc::O_RDONLY | libc::O_DIRECTORY)
    {
        Ok(d) => d,
        Err(e) => return Created::Plan(Plan::Fail(err(e))),
    };
    let mask = super::target::umask_in(status).unwrap_or(0o022);
    let mode = call.mode & 0o7777 & !mask;
    let flags = call.flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_TRUNC);
    match crate::sys::emulate::create_at(dir.as_fd(), &last, flags, mode) {
        Ok(f) => {
            // The host's own mask applied too: the mode is made the thread's.
            if super::target::host_umask() & mode != 0 {
                let _ = crate::sys::emulate::chmod_fd(f.as_fd(), mode);
            }
            Created::Plan(Plan::Install(f, call.flags & libc::O_CLOEXEC != 0))
        }
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
            match crate::sys::beneath::read_link_at(dir.as_fd(), &last) {
                Ok(target) if call.flags & libc::O_NOFOLLOW == 0 => {
                    // Relative to the directory that holds the link.
                    let target = &target[..];
                    let full = if target.first() == Some(&b'/') {
                        target.to_vec()
                    } else {
                        let mut p = path.to_bytes()
                            [..path.to_bytes().len() - last.as_bytes().len()]
                            .to_vec();
                        p.extend_from_slice(target);
                        p
                    };
                    match CString::new(full) {
                        Ok(c) => Created::Through(c),
                        Err(_) => Created::Plan(Plan::Fail(libc::ENOENT)),
                    }
                }
                Ok(_) => Created::Plan(Plan::Fail(libc::ELOOP)),
                Err(_) => Created::Exists,
            }
        }
        Err(e) => Created::Plan(Plan::Fail(err(e))),
    }
}

/// Opens the FIFO `object` to write for the waiting call `id` on a thread of its own: the
/// open waits for a reader (asked without blocking and again every few milliseconds, so that
/// the thread ends with the call when the job goes), and the descriptor keeps the job's
/// flags.
fn fifo(listener: BorrowedFd<'_>, id: u64, object: OwnedFd, flags: i32) {
    let Ok(own) = listener.try_clone_to_owned() else {
        crate::sys::notif_fail(listener, id, libc::EAGAIN);
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("sandbox-fifo".into())
        .spawn(move || {
            let listener = own.as_fd();
            let mut wait = std::time::Duration::from_millis(1);
            loop {
                match crate::sys::emulate::reopen(object.as_fd(), flags | libc::O_NONBLOCK) {
                    Ok(f) => {
                        let plain = crate::sys::emulate::status_flags(f.as_fd()).and_then(|fl| {
                            crate::sys::emulate::set_status_flags(f.as_fd(), fl & !libc::O_NONBLOCK)
                        });
                        match plain {
                            Ok(()) => {
                                let cloexec = flags & libc::O_CLOEXEC != 0;
                                if let Err(e) = crate::sys::emulate::add_fd_send(
                                    listener,
                                    id,
                                    f.as_fd(),
                                    cloexec,
                                ) {
                                    crate::sys::notif_fail(listener, id, err(e));
                                }
                            }
                            Err(e) => crate::sys::notif_fail(listener, id, err(e)),
                        }
                        return;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                        if !crate::sys::notif_id_valid(listener, id) {
                            return;
                        }
                        std::thread::sleep(wait);
                        wait = (wait * 2).min(std::time::Duration::from_millis(50));
                    }
                    Err(e) => {
                        crate::sys::notif_fail(listener, id, err(e));
                        return;
                    }
                }
            }
        });
    if spawned.is_err() {
        crate::sys::notif_fail(listener, id, libc::EAGAIN);
    }
}
