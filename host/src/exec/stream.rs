//! One output stream of a job: read without blocking, kept up to a cap, counted beyond it.

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// One output stream of a job: read without blocking, kept up to a cap, counted beyond it.
/// Also a session command's (module `session`), which sees each chunk as it comes.
pub(crate) struct Stream {
    fd: Option<std::fs::File>,
    kept: Vec<u8>,
    cap: usize,
    total: u64,
}

impl Stream {
    pub(crate) fn new(fd: Option<OwnedFd>, cap: usize) -> Stream {
        if let Some(f) = &fd {
            set_nonblocking(f.as_fd());
        }
        Stream {
            fd: fd.map(std::fs::File::from),
            kept: Vec::new(),
            cap,
            total: 0,
        }
    }

    pub(crate) fn raw(&self) -> Option<RawFd> {
        self.fd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reads what is there; keeps up to the cap and discards the rest. Closes at EOF.
    pub(super) fn pump(&mut self, scratch: &mut [u8]) {
        self.pump_with(scratch, |_| {});
    }

    /// [`Stream::pump`], handing `each` every chunk read, whole (before the cap).
    pub(crate) fn pump_with(&mut self, scratch: &mut [u8], mut each: impl FnMut(&[u8])) {
        let Some(f) = &mut self.fd else { return };
        // Bounded, so one busy stream cannot starve the other or the clock.
        for _ in 0..16 {
            match f.read(scratch) {
                Ok(0) => {
                    self.fd = None;
                    return;
                }
                Ok(n) => {
                    self.total += n as u64;
                    let room = self.cap.saturating_sub(self.kept.len());
                    self.kept.extend_from_slice(&scratch[..n.min(room)]);
                    each(&scratch[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.fd = None;
                    return;
                }
            }
        }
    }

    /// The text, at most `cap` bytes after UTF-8 replacement, and whether it was truncated.
    pub(crate) fn finish(self) -> (String, bool) {
        let mut truncated = self.total > self.kept.len() as u64;
        let mut s = String::from_utf8_lossy(&self.kept).into_owned();
        if s.len() > self.cap {
            let mut i = self.cap;
            while !s.is_char_boundary(i) {
                i -= 1;
            }
            s.truncate(i);
            truncated = true;
        }
        (s, truncated)
    }
}

/// Sets `fd` non-blocking; a failure leaves reads blocking, which the poll loop tolerates.
pub(super) fn set_nonblocking(fd: BorrowedFd<'_>) {
    let _ = crate::sys::set_nonblocking(fd);
}
