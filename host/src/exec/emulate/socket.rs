//! `connect` in the contained tier, made by the host: a unix socket's path is resolved and
//! checked as a metadata call's is (the socket must lie in a writable place or be one the
//! request allows), and the job's socket (the same open file, taken with `pidfd_getfd`) is
//! connected to the *checked* object through `/proc/self/fd/N`, so a rewritten address or a
//! swapped symlink changes nothing. The call cannot be let through to run by itself: another
//! thread could rewrite the address, or put another socket under the descriptor, between the
//! check and the kernel's own read. So every `connect` is made here: TCP ones under the
//! request's port rule (Landlock's, which the host's thread does not carry), abstract unix
//! addresses refused (Landlock's scope, which only the job's domain can apply, could not be
//! kept), anything else as given.

use super::checked::{err, not_a_socket, through, Checked};
use super::places::{Places, Why};
use super::target::Thread;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// `sizeof(struct sockaddr_storage)`: no address is longer.
pub(super) const ADDR_MAX: u64 = 128;

/// What a connect comes to, before it is made.
pub(super) enum Plan {
    /// Connect the socket to these address bytes; `object` is the checked socket file the
    /// address names by its number (held open until the connect is made).
    Connect {
        sock: OwnedFd,
        addr: Vec<u8>,
        object: Option<OwnedFd>,
    },
    /// The call's own error.
    Fail(i32),
    /// Refused: this errno, named.
    Refused(i32, Why),
}

/// Decides the connect of thread `t` (`args` of the call) on the host's side.
pub(super) fn plan(t: &Thread, tid: u32, args: &[u64; 6], places: &Places) -> Plan {
    let sock = match t.take_fd(tid, args[0]) {
        Ok(s) => s,
        Err(e) => return Plan::Fail(err(e)),
    };
    let domain = match crate::sys::emulate::socket_domain(sock.as_fd()) {
        Ok(d) => d,
        Err(e) => return Plan::Fail(err(e)),
    };
    let len = args[2] as u32 as u64;
    if len > ADDR_MAX {
        return Plan::Fail(libc::EINVAL);
    }
    let addr = match t.bytes(args[1], len as usize) {
        Ok(a) => a,
        Err(e) => return Plan::Fail(err(e)),
    };
    match address(t, domain, addr, places, true) {
        Checked::Use { addr, object } => Plan::Connect { sock, addr, object },
        Checked::Fail(e) => Plan::Fail(e),
        Checked::Refused(e, why) => Plan::Refused(e, why),
    }
}

/// Checks the address `addr` a call on a socket of `domain` gives: a pathname unix address
/// must lead to a socket in a writable place or one the request allows (and is replaced by
/// that object's `/proc/self/fd/N`), an abstract one is refused, and with `port_rule` an
/// internet address must have an allowed port. Anything else is used as given.
pub(super) fn address(
    t: &Thread,
    domain: libc::c_int,
    addr: Vec<u8>,
    places: &Places,
    port_rule: bool,
) -> Checked {
    let family = addr
        .get(..2)
        .map(|f| u16::from_ne_bytes([f[0], f[1]]) as libc::c_int);
    match (domain, family) {
        (libc::AF_INET | libc::AF_INET6, Some(libc::AF_INET | libc::AF_INET6)) if port_rule => {
            let port = addr.get(2..4).map(|p| u16::from_be_bytes([p[0], p[1]]));
            match (&places.ports, port) {
                (Some(ports), Some(p)) if !ports.contains(&p) => {
                    Checked::Refused(libc::EACCES, Why::Port(p))
                }
                _ => Checked::Use { addr, object: None },
            }
        }
        (libc::AF_UNIX, Some(libc::AF_UNIX)) if addr.len() > 2 && addr[2] != 0 => {
            path_checked(t, &addr[2..], places)
        }
        // In a network namespace of the job's own, abstract names are the job's.
        (libc::AF_UNIX, Some(libc::AF_UNIX))
            if addr.len() > 2 && places.view.as_ref().is_some_and(|v| v.own_network) =>
        {
            Checked::Use { addr, object: None }
        }
        // In the isolated tier (its own PID namespace), a name held by the job's own process.
        (libc::AF_UNIX, Some(libc::AF_UNIX)) if addr.len() > 2 && places.view.is_some() => {
            match super::abstract_own::holder(t.tid(), &addr[2..]) {
                super::abstract_own::Holder::Job => Checked::Use { addr, object: None },
                super::abstract_own::Holder::Unbound => Checked::Fail(libc::ECONNREFUSED),
                super::abstract_own::Holder::Other => Checked::Refused(libc::EPERM, Why::Abstract),
            }
        }
        (libc::AF_UNIX, Some(libc::AF_UNIX)) if addr.len() > 2 => {
            Checked::Refused(libc::EPERM, Why::Abstract)
        }
        _ => Checked::Use { addr, object: None },
    }
}

/// A pathname address: resolved as the thread would, checked, and replaced by the checked
/// object's `/proc/self/fd/N`.
fn path_checked(t: &Thread, path: &[u8], places: &Places) -> Checked {
    let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
    let Ok(path) = CString::new(&path[..end]) else {
        return Checked::Fail(libc::EINVAL);
    };
    if let Some(view) = &places.view {
        return super::inview::checked(t, path, places, view);
    }
    // The host connects with its own credentials: a socket file's permissions decide.
    if !t.same_credentials() {
        return Checked::Refused(libc::EPERM, Why::Credentials);
    }
    let path = t.own_proc(path);
    let base = if path.as_bytes().first() == Some(&b'/') {
        None
    } else {
        match t.cwd() {
            Ok(c) => Some(c),
            Err(e) => return Checked::Fail(err(e)),
        }
    };
    let object = match crate::sys::emulate::open_path(base.as_ref().map(|b| b.as_fd()), &path, 0) {
        Ok(o) => o,
        Err(e) => return Checked::Fail(err(e)),
    };
    match crate::sys::emulate::fstat(object.as_fd()) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFSOCK => {
            if !places.allows_socket(&st) && places.locate(object.as_fd()).is_err() {
                let name = std::fs::read_link(format!("/proc/self/fd/{}", object.as_raw_fd()))
                    .unwrap_or_else(|_| {
                        std::path::PathBuf::from(std::ffi::OsStr::from_bytes(path.as_bytes()))
                    });
                return Checked::Refused(libc::EACCES, Why::Socket(name));
            }
        }
        Ok(_) => return not_a_socket(object.as_fd()),
        Err(e) => return Checked::Fail(err(e)),
    }
    through(object)
}

/// Makes a planned connect.
pub(super) fn make(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    crate::sys::emulate::connect(sock, addr)
}
