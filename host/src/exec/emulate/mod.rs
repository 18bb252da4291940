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
//! Landlock's refusals do, and is named ([`Refused`]).

mod sys;
mod target;

use crate::policy::{Action, Policy, NATIVE};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use target::Thread;

/// The calls that change a file's mode, owner, times or extended attributes (by path or by
/// descriptor); the filter of the contained tier sends those its profile allows to the host.
pub(crate) const CALLS: &[&str] = &[
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
    "file_setattr",
];

/// The numbers of the [`CALLS`] that `policy` allows whatever their arguments: those are the
/// ones to emulate. A call the profile refuses stays refused by the filter; one it allows
/// only for some arguments is left to the filter (no built-in profile has such a rule).
pub(crate) fn numbers(policy: &Policy) -> Vec<u32> {
    CALLS
        .iter()
        .filter_map(|name| NATIVE.syscall_number(name))
        .filter(|nr| policy.constant_decision(*nr) == Some(Action::Allow))
        .collect()
}

/// What the contained tier's filter sends to the supervisor: the metadata calls the profile
/// allows outright, and `ioctl(TIOCGPTPEER)` where the profile allows it (the terminal a job
/// creates through `/dev/ptmx`: Landlock no longer grants the host's `/dev/pts`, where the
/// user's other terminals are, so the supervisor opens the peer for it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Claims {
    metadata: Vec<u32>,
    peer: Option<u32>,
}

impl Claims {
    /// The claims for a profile whose outer policy is `policy`.
    pub(crate) fn of(policy: &Policy) -> Claims {
        let peer = NATIVE.syscall_number("ioctl").filter(|nr| {
            policy.decide(*nr, &[0, u64::from(TIOCGPTPEER), 0, 0, 0, 0]) == Action::Allow
        });
        Claims {
            metadata: numbers(policy),
            peer,
        }
    }

    /// Adds the rules that send the claimed calls to the listener (`trap`, which the
    /// spawner's filter turns into a user notification).
    pub(crate) fn add_to(&self, policy: &mut Policy) -> Result<(), crate::policy::policy::Full> {
        for nr in &self.metadata {
            policy.add_rule(*nr, Action::Trap, &[])?;
        }
        if let Some(nr) = self.peer {
            // The command as the kernel reads it: its low 32 bits.
            let cond = crate::policy::Cond {
                arg: 1,
                width: crate::policy::Width::W32,
                mask: u64::MAX,
                op: crate::policy::CmpOp::Eq,
                value: u64::from(TIOCGPTPEER),
            };
            policy.add_rule(nr, Action::Trap, &[&[cond]])?;
        }
        Ok(())
    }

    /// Whether a waiting call is one of the claimed ones, and which kind.
    pub(crate) fn kind(&self, nr: u32, args: &[u64; 6]) -> Option<Kind> {
        if self.metadata.contains(&nr) {
            Some(Kind::Metadata)
        } else if self.peer == Some(nr) && args[1] as u32 == TIOCGPTPEER {
            Some(Kind::Peer)
        } else {
            None
        }
    }
}

/// A claimed call's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A metadata call ([`answer`]).
    Metadata,
    /// `ioctl(TIOCGPTPEER)` ([`peer`]).
    Peer,
}

/// `TIOCGPTPEER` as a 32-bit command.
const TIOCGPTPEER: u32 = libc::TIOCGPTPEER as u32;

/// Opens the peer of the job's pseudo-terminal master for it: the master is taken from the
/// thread (`pidfd_getfd`: the same open file), `TIOCGPTPEER` is asked of it here, outside
/// Landlock, always with `O_NOCTTY` (the host must not gain a controlling terminal; a job
/// wanting one asks `TIOCSCTTY` after), and the peer is placed in the job's table as the
/// call's result (`SECCOMP_IOCTL_NOTIF_ADDFD` with `SEND`). A descriptor that is no master
/// gets the kernel's answer to the same `ioctl` (ENOTTY, EBADF).
pub(crate) fn peer(listener: BorrowedFd<'_>, n: &libc::seccomp_notif) {
    let fail = |e: i32| {
        let resp = libc::seccomp_notif_resp {
            id: n.id,
            val: 0,
            error: -e,
            flags: 0,
        };
        let _ = crate::sys::notif_send(listener, &resp);
    };
    let flags = n.data.args[2] as u32 as libc::c_int;
    let taken = crate::sys::pidfd_open(n.pid as i32, PIDFD_THREAD)
        .and_then(|p| crate::sys::pidfd_getfd(p.as_raw_fd(), n.data.args[0] as u32 as i32));
    let master = match taken {
        Ok(m) => m,
        Err(e) => {
            return fail(match e.raw_os_error() {
                Some(libc::EBADF) => libc::EBADF,
                _ => libc::EPERM,
            })
        }
    };
    // The descriptor was the thread's when taken only if its call still waits.
    if !crate::sys::notif_id_valid(listener, n.id) {
        return;
    }
    match sys::open_peer(master.as_fd(), flags | libc::O_NOCTTY) {
        Ok(p) => {
            if let Err(e) =
                sys::add_fd_send(listener, n.id, p.as_fd(), flags & libc::O_CLOEXEC != 0)
            {
                if e.raw_os_error() != Some(libc::ENOENT) {
                    fail(e.raw_os_error().unwrap_or(libc::EIO));
                }
            }
        }
        Err(e) => fail(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread that need not lead its group.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// The places where a job may change metadata: its writable places, resolved once (the
/// names the kernel gives descriptors are resolved too).
#[derive(Clone, Debug)]
pub(crate) struct Places {
    roots: Vec<PathBuf>,
}

impl Places {
    /// The writable places of a job's layer.
    pub(crate) fn new(writable: &[PathBuf]) -> Places {
        Places {
            roots: writable
                .iter()
                .map(|w| std::fs::canonicalize(w).unwrap_or_else(|_| w.clone()))
                .collect(),
        }
    }

    fn holds(&self, path: &Path) -> bool {
        self.roots.iter().any(|r| path.starts_with(r))
    }

    /// Whether the object `fd` holds lies in one of the places; else the name it has.
    fn locate(&self, fd: BorrowedFd<'_>) -> Result<(), Why> {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|_| Why::Outside(None))?;
        let bytes = link.as_os_str().as_bytes();
        // `pipe:[N]`, `socket:[N]`, `anon_inode:...`: reachable by no path.
        if !bytes.starts_with(b"/") {
            return Ok(());
        }
        let st = sys::fstat(fd).map_err(|_| Why::Outside(None))?;
        if let Some(gone) = bytes.strip_suffix(b" (deleted)") {
            // Unlinked: harmless once no other name leads to it.
            let name = Path::new(std::ffi::OsStr::from_bytes(gone)).to_path_buf();
            return if st.st_nlink == 0 {
                Ok(())
            } else {
                Err(Why::Outside(Some(name)))
            };
        }
        if !self.holds(&link) {
            return Err(Why::Outside(Some(link)));
        }
        // The name was the object's when it was read: it still leads to the same inode (a
        // rename meanwhile fails closed).
        match std::fs::symlink_metadata(&link) {
            Ok(m) if m.dev() == st.st_dev && m.ino() == st.st_ino => Ok(()),
            _ => Err(Why::Outside(Some(link))),
        }
    }
}

/// Why a call was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// The object lies outside the writable places (its name, when it has one).
    Outside(Option<PathBuf>),
    /// The thread's credentials are not the host's (it changed user or dropped capabilities),
    /// so the host cannot act for it.
    Credentials,
    /// The thread's memory or descriptors could not be read (it made itself non-dumpable).
    Unreadable,
}

/// A call the emulation refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The call's number.
    pub nr: u32,
    /// Why.
    pub why: Why,
}

/// The warning of a contained-tier run whose metadata calls cannot reach the host (a request
/// that changed its profile attaches its own filter, a session's commands install theirs, an
/// architecture without spawner threads): the protection is missing, and the run says so.
/// `None` when the profile allows none of the calls (nothing is missing).
pub(crate) fn unguarded(
    sandbox: &crate::sandbox::Sandbox,
    audience: super::request::Audience,
) -> Option<String> {
    let policy = sandbox.profile_policy()?;
    if numbers(policy).is_empty() {
        return None;
    }
    let isolated = match audience {
        super::request::Audience::Json => "\"isolation\": \"required\"",
        super::request::Audience::Cli => "--isolation required",
    };
    Some(format!(
        "sandbox: warning: metadata outside the writable places is unguarded in this run: \
         chmod, chown, utimensat and setxattr reach every file the user owns (a profile \
         changed by the request, or a session, has no supervisor to make them); use a \
         built-in profile as it is, or {isolated} where namespaces are available"
    ))
}

/// The result entry's hint and change for a refused metadata call, in `audience`'s terms.
pub(crate) fn advice(why: &Why, audience: super::request::Audience) -> (String, Option<String>) {
    match why {
        Why::Outside(Some(path)) => {
            let shown = crate::escape::path(path);
            let change = match audience {
                super::request::Audience::Json => {
                    format!("\"writable_paths\": [{:?}]", path.display().to_string())
                }
                super::request::Audience::Cli => format!("--allow-write {shown}"),
            };
            (
                format!(
                    "{shown} lies outside the writable places, where mode, owner, times and \
                     extended attributes cannot change; to allow: {change}"
                ),
                Some(change),
            )
        }
        Why::Outside(None) => (
            "the object lies outside the writable places, where mode, owner, times and \
             extended attributes cannot change"
                .to_string(),
            None,
        ),
        Why::Credentials => (
            "a process that changed its user or dropped capabilities cannot have metadata \
             changed for it (the host acts with the job's starting credentials)"
                .to_string(),
            None,
        ),
        Why::Unreadable => (
            "a process that made itself non-dumpable cannot have its call read".to_string(),
            None,
        ),
    }
}

/// Distinct refusals a request keeps; more are only counted.
pub(crate) const MAX_REFUSED: usize = 32;

/// One refused (call, reason, program) and how often.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    /// What was refused.
    pub refused: Refused,
    /// The executable that made the call, when it could be read.
    pub program: Option<String>,
    /// How many times.
    pub count: u64,
}

/// The emulated calls a request had refused: counts, bounded like the filter's tally.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// At most [`MAX_REFUSED`], in order of first appearance.
    pub seen: Vec<Seen>,
    /// Refusals beyond those.
    pub omitted: u64,
}

impl Tally {
    /// Counts one refusal.
    pub(crate) fn record(&mut self, refused: Refused, program: Option<String>) {
        if let Some(s) = self
            .seen
            .iter_mut()
            .find(|s| s.refused == refused && s.program == program)
        {
            s.count = s.count.saturating_add(1);
        } else if self.seen.len() < MAX_REFUSED {
            self.seen.push(Seen {
                refused,
                program,
                count: 1,
            });
        } else {
            self.omitted = self.omitted.saturating_add(1);
        }
    }
}

/// Where a call's object is.
enum Target {
    /// A path relative to the thread's working directory (`dir` `None`) or to its descriptor.
    Path {
        dir: Option<u64>,
        path: CString,
        follow: bool,
        /// `AT_EMPTY_PATH`: an empty path names `dir` itself.
        empty: bool,
    },
    /// The thread's descriptor.
    Fd(u64),
}

/// What the call changes.
enum Op {
    Mode(u32),
    Owner(u32, u32),
    Times(Option<[libc::timespec; 2]>),
    SetXattr {
        name: CString,
        value: Vec<u8>,
        flags: u32,
    },
    RemoveXattr(CString),
    FileAttr(Vec<u8>),
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// The `AT_*` flags of a call, with anything else refused as the kernel does (EINVAL).
fn at_flags(flags: u64, allowed: libc::c_int) -> io::Result<(bool, bool)> {
    let flags = flags as u32 as libc::c_int;
    if flags & !allowed != 0 {
        return Err(errno(libc::EINVAL));
    }
    Ok((
        flags & libc::AT_SYMLINK_NOFOLLOW == 0,
        flags & libc::AT_EMPTY_PATH != 0,
    ))
}

/// A directory argument: `AT_FDCWD` is the working directory.
fn dir_arg(a: u64) -> Option<u64> {
    (a as u32 as i32 != libc::AT_FDCWD).then_some(a)
}

/// Two `timeval`s (or `utimbuf`'s two seconds) as `timespec`s.
fn timevals(t: &Thread, addr: u64, utimbuf: bool) -> io::Result<Option<[libc::timespec; 2]>> {
    if addr == 0 {
        return Ok(None);
    }
    let word = |b: &[u8], i: usize| i64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    if utimbuf {
        let b = t.bytes(addr, 16)?;
        let s = |i| libc::timespec {
            tv_sec: word(&b, i),
            tv_nsec: 0,
        };
        return Ok(Some([s(0), s(1)]));
    }
    let b = t.bytes(addr, 32)?;
    let mut out = [libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    }; 2];
    for (i, o) in out.iter_mut().enumerate() {
        let usec = word(&b, 2 * i + 1);
        if !(0..1_000_000).contains(&usec) {
            return Err(errno(libc::EINVAL));
        }
        *o = libc::timespec {
            tv_sec: word(&b, 2 * i),
            tv_nsec: usec * 1000,
        };
    }
    Ok(Some(out))
}

fn timespecs(t: &Thread, addr: u64) -> io::Result<Option<[libc::timespec; 2]>> {
    if addr == 0 {
        return Ok(None);
    }
    let b = t.bytes(addr, 32)?;
    let word = |i: usize| i64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
    Ok(Some([
        libc::timespec {
            tv_sec: word(0),
            tv_nsec: word(1),
        },
        libc::timespec {
            tv_sec: word(2),
            tv_nsec: word(3),
        },
    ]))
}

fn xattr_value(t: &Thread, addr: u64, size: u64) -> io::Result<Vec<u8>> {
    if size > target::VALUE_MAX as u64 {
        return Err(errno(libc::E2BIG));
    }
    t.bytes(addr, size as usize)
}

/// Reads the call's arguments from the thread, once.
fn decode(name: &str, a: &[u64; 6], t: &Thread) -> io::Result<(Target, Op)> {
    let path = |dir: Option<u64>, addr: u64, follow: bool, empty: bool| -> io::Result<Target> {
        Ok(Target::Path {
            dir,
            path: t.path(addr)?,
            follow,
            empty,
        })
    };
    let id = |v: u64| v as u32;
    Ok(match name {
        "chmod" => (path(None, a[0], true, false)?, Op::Mode(a[1] as u32)),
        "fchmod" => (Target::Fd(a[0]), Op::Mode(a[1] as u32)),
        "fchmodat" => (
            path(dir_arg(a[0]), a[1], true, false)?,
            Op::Mode(a[2] as u32),
        ),
        "fchmodat2" => {
            let (follow, empty) = at_flags(a[3], libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH)?;
            (
                path(dir_arg(a[0]), a[1], follow, empty)?,
                Op::Mode(a[2] as u32),
            )
        }
        "chown" | "lchown" => (
            path(None, a[0], name == "chown", false)?,
            Op::Owner(id(a[1]), id(a[2])),
        ),
        "fchown" => (Target::Fd(a[0]), Op::Owner(id(a[1]), id(a[2]))),
        "fchownat" => {
            let (follow, empty) = at_flags(a[4], libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH)?;
            (
                path(dir_arg(a[0]), a[1], follow, empty)?,
                Op::Owner(id(a[2]), id(a[3])),
            )
        }
        "utime" => (
            path(None, a[0], true, false)?,
            Op::Times(timevals(t, a[1], true)?),
        ),
        "utimes" => (
            path(None, a[0], true, false)?,
            Op::Times(timevals(t, a[1], false)?),
        ),
        "futimesat" => {
            let times = Op::Times(timevals(t, a[2], false)?);
            if a[1] == 0 {
                (fd_of(a[0])?, times)
            } else {
                (path(dir_arg(a[0]), a[1], true, false)?, times)
            }
        }
        "utimensat" => {
            let (follow, empty) = at_flags(a[3], libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH)?;
            let times = Op::Times(timespecs(t, a[2])?);
            if a[1] == 0 {
                (fd_of(a[0])?, times)
            } else {
                (path(dir_arg(a[0]), a[1], follow, empty)?, times)
            }
        }
        "setxattr" | "lsetxattr" | "fsetxattr" => {
            let op = Op::SetXattr {
                name: t.xattr_name(a[1])?,
                value: xattr_value(t, a[2], a[3])?,
                flags: a[4] as u32,
            };
            let target = match name {
                "fsetxattr" => Target::Fd(a[0]),
                _ => path(None, a[0], name == "setxattr", false)?,
            };
            (target, op)
        }
        "removexattr" | "lremovexattr" | "fremovexattr" => {
            let op = Op::RemoveXattr(t.xattr_name(a[1])?);
            let target = match name {
                "fremovexattr" => Target::Fd(a[0]),
                _ => path(None, a[0], name == "removexattr", false)?,
            };
            (target, op)
        }
        "setxattrat" => {
            let (follow, empty) = at_flags(a[2], libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH)?;
            // struct xattr_args { u64 value; u32 size; u32 flags; }: its first version.
            if a[5] < 16 || a[5] > 4096 {
                return Err(errno(libc::EINVAL));
            }
            let args = t.bytes(a[4], 16)?;
            let value = u64::from_ne_bytes(args[0..8].try_into().unwrap());
            let size = u32::from_ne_bytes(args[8..12].try_into().unwrap());
            let flags = u32::from_ne_bytes(args[12..16].try_into().unwrap());
            let op = Op::SetXattr {
                name: t.xattr_name(a[3])?,
                value: xattr_value(t, value, u64::from(size))?,
                flags,
            };
            (path(dir_arg(a[0]), a[1], follow, empty)?, op)
        }
        "removexattrat" => {
            let (follow, empty) = at_flags(a[2], libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH)?;
            let op = Op::RemoveXattr(t.xattr_name(a[3])?);
            (path(dir_arg(a[0]), a[1], follow, empty)?, op)
        }
        "file_setattr" => {
            let (follow, empty) = at_flags(a[4], libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH)?;
            // The kernel takes at most a page of the structure (E2BIG past it).
            if a[3] > 4096 {
                return Err(errno(libc::E2BIG));
            }
            let attr = t.bytes(a[2], a[3] as usize)?;
            (
                path(dir_arg(a[0]), a[1], follow, empty)?,
                Op::FileAttr(attr),
            )
        }
        _ => return Err(errno(libc::ENOSYS)),
    })
}

/// A descriptor argument that `AT_FDCWD` cannot stand for (the kernel answers EFAULT for
/// `utimensat(AT_FDCWD, NULL, ...)`).
fn fd_of(a: u64) -> io::Result<Target> {
    match dir_arg(a) {
        Some(fd) => Ok(Target::Fd(fd)),
        None => Err(errno(libc::EFAULT)),
    }
}

/// Opens the call's object on the host's side.
fn open(t: &Thread, target: &Target) -> io::Result<(OwnedFd, bool)> {
    match target {
        Target::Fd(fd) => Ok((t.fd(*fd)?, true)),
        Target::Path {
            dir,
            path,
            follow,
            empty,
        } => {
            let base = match dir {
                Some(fd) => Some(t.fd(*fd)?),
                None if path.as_bytes().first() == Some(&b'/') => None,
                None => Some(t.cwd()?),
            };
            if path.as_bytes().is_empty() {
                return match (empty, base) {
                    (true, Some(b)) => Ok((b, *follow)),
                    _ => Err(errno(libc::ENOENT)),
                };
            }
            let extra = if *follow { 0 } else { libc::O_NOFOLLOW };
            let fd = sys::open_path(base.as_ref().map(|b| b.as_fd()), path, extra)?;
            Ok((fd, *follow))
        }
    }
}

/// Makes the change through `fd`.
fn perform(fd: BorrowedFd<'_>, followed: bool, op: &Op) -> io::Result<()> {
    match op {
        Op::Mode(mode) => {
            // A symlink's own mode cannot change (fchmodat2 answers EOPNOTSUPP).
            if !followed && sys::fstat(fd)?.st_mode & libc::S_IFMT == libc::S_IFLNK {
                return Err(errno(libc::EOPNOTSUPP));
            }
            sys::chmod_fd(fd, *mode)
        }
        Op::Owner(uid, gid) => sys::chown_fd(fd, *uid, *gid),
        Op::Times(t) => sys::utimens_fd(fd, t.as_ref()),
        Op::SetXattr { name, value, flags } => sys::setxattr_fd(fd, name, value, *flags),
        Op::RemoveXattr(name) => sys::removexattr_fd(fd, name),
        Op::FileAttr(attr) => sys::file_setattr_fd(fd, attr),
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
    if !thread.same_credentials() {
        return Answer::Refused(libc::EPERM, Why::Credentials);
    }
    if let Target::Fd(fd) = target {
        if opened_o_path(n.pid, fd) {
            return Answer::Result(Err(errno(libc::EBADF)));
        }
    }
    let opened = open(&thread, &target);
    // Everything about the thread was read through its id: it must still be the thread
    // whose call waits (seccomp_unotify(2)).
    if !crate::sys::notif_id_valid(listener, n.id) {
        return Answer::Gone;
    }
    let (fd, followed) = match opened {
        Ok(o) => o,
        Err(e) => return Answer::Result(Err(e)),
    };
    if let Err(why) = places.locate(fd.as_fd()) {
        return Answer::Refused(libc::EACCES, why);
    }
    Answer::Result(perform(fd.as_fd(), followed, &op))
}

/// Carries out one waiting metadata call of a job whose writable places are `places`, and
/// answers it. Returns the refusal when the call was refused, for the request to name.
pub(crate) fn answer(
    listener: BorrowedFd<'_>,
    n: &libc::seccomp_notif,
    places: &Places,
) -> Option<Refused> {
    let (error, refused) = match decide(listener, n, places) {
        Answer::Gone => return None,
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
    // A thread that is gone meanwhile gives ENOENT, which needs nothing more.
    let _ = crate::sys::notif_send(listener, &resp);
    refused
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn an_object_is_placed_by_its_name_and_inode() {
        let ws = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("in"), "x").unwrap();
        std::fs::write(out.path().join("out"), "x").unwrap();
        let places = Places::new(&[ws.path().to_path_buf()]);
        let open = |p: &Path| {
            sys::open_path(None, &CString::new(p.as_os_str().as_bytes()).unwrap(), 0).unwrap()
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
