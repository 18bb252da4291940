//! A metadata call's arguments, read once from the waiting thread: where its object is and
//! what it changes.

use super::target::{self, Thread};
use std::ffi::CString;
use std::io;

/// Where a call's object is.
pub(super) enum Target {
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
pub(super) enum Op {
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

pub(super) fn errno(e: i32) -> io::Error {
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
pub(super) fn dir_arg(a: u64) -> Option<u64> {
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
pub(super) fn decode(name: &str, a: &[u64; 6], t: &Thread) -> io::Result<(Target, Op)> {
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
