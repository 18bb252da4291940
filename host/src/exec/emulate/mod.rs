//! File-metadata calls carried out by the host for a job of the contained tier.
//!
//! Landlock has no right for a file's mode, owner, times or extended attributes, and the
//! contained tier has no read-only view of the host's tree: under profiles that allow
//! `chmod`, `chown`, `utimensat` or `setxattr` a job could change them on any file its user
//! owns. So in that tier the filter sends those calls to the host ([`CALLS`], the ones the
//! profile allows outright), and the host makes each one itself:
//!
//! 1. it reads the call's path (and name, value, times) once from the thread's memory and
//!    uses only that copy, so another thread rewriting the string changes nothing;
//! 2. it opens the object `O_PATH` relative to the thread's own working directory or
//!    descriptor (`/proc/TID/cwd`, `/proc/TID/fd/N`), following the final symlink only where
//!    the call would;
//! 3. it checks that the *opened object* lies in a writable place: the name the kernel keeps
//!    for the descriptor (`/proc/self/fd/N`) lies beneath a writable root and still leads to
//!    the same device and inode; an object without a name (a pipe, a socket, a file unlinked
//!    everywhere) has nothing outside to protect;
//! 4. it changes the metadata through that descriptor (`AT_EMPTY_PATH`), with its own
//!    credentials, which must be the thread's (same file-system user, groups, and no
//!    capability the thread lacks), and answers the call with the result.
//!
//! The call is never let through to run by itself (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the
//! kernel would read the path again, after the check. A refused call fails with EACCES, as
//! Landlock's refusals do, and is named ([`Refused`]; module `report`).
//!
//! The same filter sends `connect`, made by the host after the same check (module `socket`),
//! `sendto` with an address, `sendmsg` and `sendmmsg`, whose destinations are checked the same
//! way and which the host sends itself (module `send`),
//! the `ioctl`s that set a file's flags, made on the job's own open file after the same check
//! (module `flags`), and `ioctl(TIOCGPTPEER)`, so that a job can create terminals while the
//! user's others stay out of its Landlock domain (module `peer`). Which calls are sent:
//! module `claims`; their arguments: module `decode`; the thread seen from the host: module
//! `target`; the raw calls: module `sys`.
//!
//! The isolated tier's filter claims `connect` and the addressed sends too (its view covers
//! only the host's sockets that exist when the job starts): their pathname addresses are
//! resolved and placed in the job's own mount namespace (module `inview`).

mod abstract_own;
mod checked;
mod claims;
mod decode;
mod flags;
mod inview;
mod opens;
mod peer;
mod places;
mod report;
mod resolve;
mod send;
mod socket;
mod target;

pub(crate) use claims::{ClaimSet, Claims, Kind};
pub(crate) use flags::flags;
pub(crate) use opens::{filters_in, open as write_open};
pub(crate) use peer::peer;
pub(crate) use places::{Places, Refused, View, Why};
pub(crate) use report::{advice, late_sockets_undelegable, names, undelegable, unguarded, Tally};
pub(crate) use send::send;

use crate::policy::NATIVE;
use decode::{decode, errno, Op, Target};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use target::Thread;

/// Opens the call's object on the host's side (from the job's root `root` in the isolated
/// tier).
fn open(t: &Thread, root: Option<BorrowedFd<'_>>, target: &Target) -> io::Result<(OwnedFd, bool)> {
    match target {
        Target::Fd(fd) => Ok((t.fd(*fd)?, true)),
        Target::Path {
            dir,
            path,
            follow,
            empty,
        } => {
            if path.as_bytes().is_empty() {
                return match (empty, dir) {
                    (true, Some(fd)) => Ok((t.fd(*fd)?, *follow)),
                    (true, None) => Ok((t.cwd()?, *follow)),
                    _ => Err(errno(libc::ENOENT)),
                };
            }
            Ok((resolve::object(t, root, *dir, path, *follow)?, *follow))
        }
    }
}

/// Makes the change through `fd`.
fn perform(fd: BorrowedFd<'_>, followed: bool, op: &Op) -> io::Result<()> {
    match op {
        Op::Mode(mode) => {
            // A symlink's own mode cannot change (fchmodat2 answers EOPNOTSUPP).
            if !followed && crate::sys::emulate::fstat(fd)?.st_mode & libc::S_IFMT == libc::S_IFLNK
            {
                return Err(errno(libc::EOPNOTSUPP));
            }
            crate::sys::emulate::chmod_fd(fd, *mode)
        }
        Op::Owner(uid, gid) => crate::sys::emulate::chown_fd(fd, *uid, *gid),
        Op::Times(t) => crate::sys::emulate::utimens_fd(fd, t.as_ref()),
        Op::SetXattr { name, value, flags } => {
            crate::sys::emulate::setxattr_fd(fd, name, value, *flags)
        }
        Op::RemoveXattr(name) => crate::sys::emulate::removexattr_fd(fd, name),
        Op::FileAttr(attr) => crate::sys::emulate::file_setattr_fd(fd, attr),
    }
}

/// A descriptor opened `O_PATH` by the job cannot have its metadata changed through the
/// descriptor calls (`fchmod` and the like answer EBADF): so neither here.
fn opened_o_path(tid: u32, fd: u64) -> bool {
    let fd = fd as u32 as i32;
    std::fs::read_to_string(format!("/proc/{tid}/fdinfo/{fd}"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| i64::from_str_radix(f.trim(), 8).ok())
        })
        .is_some_and(|f| f & i64::from(libc::O_PATH) != 0)
}

/// What the emulation answers one call with.
enum Answer {
    /// The call's own result (0, or its errno).
    Result(io::Result<()>),
    /// Refused: the call fails with this errno, and is named.
    Refused(i32, Why),
    /// The call no longer waits: nothing to answer.
    Gone,
}

fn decide(listener: BorrowedFd<'_>, n: &libc::seccomp_notif, places: &Places) -> Answer {
    let nr = n.data.nr as u32;
    let Some(name) = NATIVE.syscall_name(nr) else {
        return Answer::Result(Err(errno(libc::ENOSYS)));
    };
    let Ok(thread) = Thread::open(n.pid) else {
        return Answer::Refused(libc::EPERM, Why::Unreadable);
    };
    let (target, op) = match decode(name, &n.data.args, &thread) {
        Ok(d) => d,
        Err(e) => return Answer::Result(Err(e)),
    };
    let standing = thread.standing();
    if let target::Standing::Other = standing {
        return Answer::Refused(libc::EPERM, Why::Credentials);
    }
    if let Target::Fd(fd) = target {
        if opened_o_path(n.pid, fd) {
            return Answer::Result(Err(errno(libc::EBADF)));
        }
    }
    let root = match places.root_of(&thread) {
        Ok(r) => r,
        Err(e) => return Answer::Result(Err(e)),
    };
    let root = root.as_ref().map(|r| r.as_fd());
    let opened = open(&thread, root, &target);
    // Everything about the thread was read through its id: it must still be the thread
    // whose call waits (seccomp_unotify(2)).
    if !crate::sys::notif_id_valid(listener, n.id) {
        return Answer::Gone;
    }
    let (fd, followed) = match opened {
        Ok(o) => o,
        Err(e) => return Answer::Result(Err(e)),
    };
    if let Err(why) = places.writable(root, fd.as_fd()) {
        if root.is_some() && crate::sys::emulate::read_only_mount(fd.as_fd()).unwrap_or(false) {
            return Answer::Result(Err(errno(libc::EROFS)));
        }
        return Answer::Refused(libc::EACCES, why);
    }
    let Ok(shape) = crate::sys::emulate::shape(fd.as_fd()) else {
        return Answer::Result(Err(errno(libc::EACCES)));
    };
    if places.shared(&shape) {
        return Answer::Refused(libc::EACCES, Why::Linked(places::name_of(fd.as_fd())));
    }
    let owner = match op {
        Op::Owner(u, g) => Some((u, g)),
        _ => None,
    };
    if !standing.may_change(&shape, owner) {
        // Where the thread holds fewer capabilities than the caller, the caller's own call
        // would have been allowed: the sandbox refused it, and says so.
        return match standing {
            target::Standing::FewerCapabilities(_) => {
                Answer::Refused(libc::EPERM, Why::Capabilities(places::name_of(fd.as_fd())))
            }
            _ => Answer::Result(Err(errno(libc::EPERM))),
        };
    }
    Answer::Result(perform(fd.as_fd(), followed, &op))
}

/// Carries out one waiting `connect` of a job (module `socket`), and answers it; the connect
/// itself runs on a thread of its own, so that a slow peer never holds up the supervisor.
/// A refusal is given to `record` before the answer, so that it is counted before the job
/// can go on (and end).
pub(crate) fn connect(
    listener: BorrowedFd<'_>,
    n: &libc::seccomp_notif,
    places: &Places,
    record: &mut dyn FnMut(Refused),
) {
    let send = |listener: BorrowedFd<'_>, error: i32| crate::sys::notif_fail(listener, n.id, error);
    let Ok(thread) = Thread::open(n.pid) else {
        record(Refused {
            nr: n.data.nr as u32,
            why: Why::Unreadable,
        });
        send(listener, libc::EPERM);
        return;
    };
    let plan = socket::plan(&thread, n.pid, &n.data.args, places);
    if !crate::sys::notif_id_valid(listener, n.id) {
        return;
    }
    match plan {
        socket::Plan::Fail(e) => send(listener, e),
        socket::Plan::Refused(e, why) => {
            record(Refused {
                nr: n.data.nr as u32,
                why,
            });
            send(listener, e);
        }
        socket::Plan::Connect { sock, addr, object } => {
            let (id, own) = (n.id, listener.try_clone_to_owned());
            let Ok(own) = own else {
                send(listener, libc::EAGAIN);
                return;
            };
            let spawned = std::thread::Builder::new()
                .name("sandbox-connect".into())
                .spawn(move || {
                    let r = socket::make(sock.as_fd(), &addr);
                    drop(object);
                    let resp = libc::seccomp_notif_resp {
                        id,
                        val: 0,
                        error: r
                            .err()
                            .map_or(0, |e| -e.raw_os_error().unwrap_or(libc::EIO)),
                        flags: 0,
                    };
                    let _ = crate::sys::notif_send(own.as_fd(), &resp);
                });
            if spawned.is_err() {
                send(listener, libc::EAGAIN);
            }
        }
    }
}

/// Carries out one waiting metadata call of a job whose writable places are `places`, and
/// answers it. Returns the refusal when the call was refused, for the request to name.
pub(crate) fn answer(
    listener: BorrowedFd<'_>,
    n: &libc::seccomp_notif,
    places: &Places,
    record: &mut dyn FnMut(Refused),
) {
    let (error, refused) = match decide(listener, n, places) {
        Answer::Gone => return,
        Answer::Result(Ok(())) => (0, None),
        Answer::Result(Err(e)) => (e.raw_os_error().unwrap_or(libc::EIO), None),
        Answer::Refused(e, why) => (
            e,
            Some(Refused {
                nr: n.data.nr as u32,
                why,
            }),
        ),
    };
    let resp = libc::seccomp_notif_resp {
        id: n.id,
        val: 0,
        error: -error,
        flags: 0,
    };
    // Counted before the answer: once answered, the job may end and its result be made.
    if let Some(r) = refused {
        record(r);
    }
    // A thread that is gone meanwhile gives ENOENT, which needs nothing more.
    let _ = crate::sys::notif_send(listener, &resp);
}

#[cfg(test)]
mod tests {
    use super::claims::numbers;
    use super::*;
    use crate::platform::can_take_descriptors;
    use crate::policy::{Action, Policy};
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};

    fn outer(name: &str) -> Box<Policy> {
        let profile = sandbox_policy::profile::Profile::builtin(name).unwrap();
        crate::outer::base_policy(&profile, Some(Action::Trap))
            .unwrap()
            .unwrap()
            .policy
    }

    #[test]
    fn only_calls_the_profile_allows_outright_are_emulated() {
        let chmod = NATIVE.syscall_number("chmod").unwrap();
        let setxattr = NATIVE.syscall_number("setxattr").unwrap();
        for name in ["shell", "write", "shell-network"] {
            let n = numbers(&outer(name));
            assert!(n.contains(&chmod) && n.contains(&setxattr), "{name}");
        }
        // The read-only profiles refuse the calls in the filter: nothing to emulate.
        for name in ["minimal", "network"] {
            assert!(numbers(&outer(name)).is_empty(), "{name}");
        }
    }

    #[test]
    fn addressed_sends_and_flag_ioctls_are_claimed_and_nothing_else() {
        if !can_take_descriptors() {
            return;
        }
        let nr = |n| NATIVE.syscall_number(n).unwrap();
        let (sendto, sendmsg, ioctl) = (nr("sendto"), nr("sendmsg"), nr("ioctl"));
        let setflags = [3, 0xffff_ffff_4008_6602, 0, 0, 0, 0];
        for name in ["shell-network", "network"] {
            let mut p = outer(name);
            // Control: without the claims the calls are allowed.
            assert_eq!(p.decide(sendto, &[3, 0, 1, 0, 0x1000, 16]), Action::Allow);
            Claims::of(&p).add_to(&mut p).unwrap();
            assert_eq!(p.decide(sendto, &[3, 0, 1, 0, 0x1000, 16]), Action::Trap);
            // `send` is `sendto` without an address: left to the kernel.
            assert_eq!(p.decide(sendto, &[3, 0, 1, 0, 0, 0]), Action::Allow);
            assert_eq!(p.decide(sendmsg, &[3, 0x1000, 0, 0, 0, 0]), Action::Trap);
        }
        // `shell` makes no unix sockets: its sends are not claimed; its flag ioctls are (the
        // kernel reads the command's low 32 bits), other ioctls not.
        let mut p = outer("shell");
        assert_eq!(p.decide(ioctl, &setflags), Action::Allow);
        let claims = Claims::of(&p);
        claims.add_to(&mut p).unwrap();
        assert_eq!(claims.kind(sendmsg, &[3, 0x1000, 0, 0, 0, 0]), None);
        assert_eq!(claims.kind(ioctl, &setflags), Some(Kind::Flags));
        assert_eq!(p.decide(ioctl, &setflags), Action::Trap);
        let getflags = [3, 0x8008_6601, 0, 0, 0, 0];
        assert_eq!(p.decide(ioctl, &getflags), Action::Allow);
    }

    #[test]
    fn the_isolated_tier_claims_connects_and_sends_only_where_unix_sockets_are_made() {
        if !can_take_descriptors() {
            return;
        }
        let nr = |n| NATIVE.syscall_number(n).unwrap();
        let (connect, sendmsg, chmod, ioctl) =
            (nr("connect"), nr("sendmsg"), nr("chmod"), nr("ioctl"));
        let setflags = [3, 0x4008_6602, 0, 0, 0, 0];
        let p = outer("shell-network");
        let claims = Claims::for_set(&p, ClaimSet::Isolated);
        assert_eq!(
            claims.kind(connect, &[3, 0, 0, 0, 0, 0]),
            Some(Kind::Connect)
        );
        assert_eq!(claims.kind(sendmsg, &[3, 0, 0, 0, 0, 0]), Some(Kind::Send));
        // Metadata is claimed (the view's writable mounts may hold files with other names),
        // flags are not (setting append-only or immutable needs a capability the job lacks).
        assert_eq!(claims.kind(chmod, &[0; 6]), Some(Kind::Metadata));
        assert_eq!(claims.kind(ioctl, &setflags), None);
        let contained = Claims::for_set(&p, ClaimSet::Contained);
        assert_eq!(contained.kind(chmod, &[0; 6]), Some(Kind::Metadata));
        // Opens that may write are claimed in both tiers; reads, `O_EXCL` creations and
        // `O_TMPFILE` not.
        let openat = nr("openat");
        let at = |flags: i32| [0, 0, flags as u64, 0, 0, 0];
        for c in [&claims, &contained] {
            for flags in [
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                libc::O_RDWR,
                libc::O_TRUNC,
            ] {
                assert_eq!(c.kind(openat, &at(flags)), Some(Kind::Open), "{flags:o}");
            }
            for flags in [
                libc::O_RDONLY,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
                libc::O_RDWR | libc::O_TMPFILE,
            ] {
                assert_eq!(c.kind(openat, &at(flags)), None, "{flags:o}");
            }
        }
        let mut filtered = outer("shell-network");
        claims.add_to(&mut filtered).unwrap();
        assert_eq!(filtered.decide(openat, &at(libc::O_WRONLY)), Action::Trap);
        assert_eq!(filtered.decide(openat, &at(libc::O_RDONLY)), Action::Allow);
        assert_eq!(
            filtered.decide(openat, &at(libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL)),
            Action::Allow
        );
        // A profile that writes nothing and makes no unix sockets: nothing.
        assert!(!Claims::for_set(&outer("minimal"), ClaimSet::Isolated).any());
        // `shell` makes no unix sockets: only the file claims.
        let shell = Claims::for_set(&outer("shell"), ClaimSet::Isolated);
        assert_eq!(shell.kind(connect, &[3, 0, 0, 0, 0, 0]), None);
        assert_eq!(shell.kind(openat, &at(libc::O_WRONLY)), Some(Kind::Open));
    }
    #[test]
    fn an_object_is_placed_by_its_name_and_inode() {
        let ws = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("in"), "x").unwrap();
        std::fs::write(out.path().join("out"), "x").unwrap();
        let places = Places::new(&[ws.path().to_path_buf()], &[], None);
        let open = |p: &Path| {
            crate::sys::emulate::open_path(
                None,
                &CString::new(p.as_os_str().as_bytes()).unwrap(),
                0,
            )
            .unwrap()
        };
        assert_eq!(places.locate(open(&ws.path().join("in")).as_fd()), Ok(()));
        assert_eq!(places.locate(open(ws.path()).as_fd()), Ok(()));
        let outside = open(&out.path().join("out"));
        assert!(matches!(
            places.locate(outside.as_fd()),
            Err(Why::Outside(Some(_)))
        ));
        // A sibling whose name only starts like the workspace's is outside.
        let sibling = PathBuf::from(format!("{}x", ws.path().display()));
        std::fs::write(&sibling, "x").unwrap();
        let s = open(&sibling);
        assert!(places.locate(s.as_fd()).is_err());
        std::fs::remove_file(&sibling).unwrap();
        // Unlinked while another name is left: outside; unlinked everywhere: nothing to guard.
        let f = out.path().join("twice");
        std::fs::write(&f, "x").unwrap();
        std::fs::hard_link(&f, out.path().join("other")).unwrap();
        let held = open(&f);
        std::fs::remove_file(&f).unwrap();
        assert!(places.locate(held.as_fd()).is_err());
        std::fs::remove_file(out.path().join("other")).unwrap();
        assert_eq!(places.locate(held.as_fd()), Ok(()));
    }
}
