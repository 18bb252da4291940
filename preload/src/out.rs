//! Output without allocation: one formatted line into a stack buffer, one `write`.

use core::fmt::{self, Write};

struct Buf {
    data: [u8; 512],
    len: usize,
}

impl Write for Buf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.data.len() - 1 - self.len);
        self.data[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Writes one line (a newline is added) to `fd`, ignoring errors.
pub fn line(fd: i32, args: fmt::Arguments<'_>) {
    let mut b = Buf {
        data: [0; 512],
        len: 0,
    };
    let _ = b.write_fmt(args);
    b.data[b.len] = b'\n';
    // SAFETY: the buffer is valid for b.len + 1 bytes.
    unsafe { libc::write(fd, b.data.as_ptr().cast(), b.len + 1) };
}

/// Exit status when a requested filter cannot be installed (the `env`/`docker run` convention
/// for "the wrapper itself failed").
pub const FAIL_STATUS: i32 = 125;

/// Prints `libsandbox: <message>` on stderr (and the report descriptor), then ends the process
/// with [`FAIL_STATUS`] before `main` can run.
pub fn die(args: fmt::Arguments<'_>, report_fd: Option<i32>) -> ! {
    line(2, format_args!("libsandbox: {args}"));
    if let Some(fd) = report_fd {
        line(fd, format_args!("error {args}"));
    }
    // SAFETY: _exit never returns; no destructors or atexit handlers of the program run.
    unsafe { libc::_exit(FAIL_STATUS) }
}

/// Marks the report descriptor close-on-exec so programs this one starts do not inherit it.
pub fn keep_private(fd: i32) {
    // SAFETY: fcntl on a descriptor number with an integer argument.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
}
