//! What a checked address comes to (modules `socket`, `send`, `inview`): the address to use,
//! the checked socket file it names, or the answer instead.

use super::places::Why;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// The errno of `e` (EIO when it has none).
pub(super) fn err(e: io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Where an address the job gave leads, once checked.
pub(super) enum Checked {
    /// Use these address bytes; `object` is the checked socket file they name by its number
    /// (held open until the call is made).
    Use {
        addr: Vec<u8>,
        object: Option<OwnedFd>,
    },
    /// The call's own error.
    Fail(i32),
    /// Refused: this errno, named.
    Refused(i32, Why),
}

/// The answer for an address that names a file other than a socket: the kernel asks for write
/// permission before it looks at the file's type.
pub(super) fn not_a_socket(object: BorrowedFd<'_>) -> Checked {
    let name = format!("/proc/self/fd/{}", object.as_raw_fd());
    Checked::Fail(if crate::sys::may_write(std::path::Path::new(&name)) {
        libc::ECONNREFUSED
    } else {
        libc::EACCES
    })
}

/// The address that leads to the checked socket file `object` itself (`/proc/self/fd/N`).
pub(super) fn through(object: OwnedFd) -> Checked {
    let mut addr = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    addr.extend_from_slice(format!("/proc/self/fd/{}", object.as_raw_fd()).as_bytes());
    addr.push(0);
    Checked::Use {
        addr,
        object: Some(object),
    }
}
