//! Terminals: a new pty pair, window sizes, raw mode.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A new pseudo-terminal of `cols` x `rows`: (master, slave), both close-on-exec, the slave
/// opened from the master (`TIOCGPTPEER`: no `/dev/pts` path is looked up, so the view a
/// command has does not matter), neither the caller's controlling terminal.
pub(crate) fn open_pty(cols: u16, rows: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: open with a NUL-terminated literal path.
    let fd = unsafe { libc::open(c"/dev/ptmx".as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and belongs to nobody else.
    let master = unsafe { OwnedFd::from_raw_fd(fd) };
    let unlock: libc::c_int = 0;
    // SAFETY: TIOCSPTLCK reads one int from the pointer, which lives for the call.
    if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSPTLCK, &unlock) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: TIOCGPTPEER takes the open flags as its argument and returns a new descriptor.
    let peer = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTPEER, flags) };
    if peer < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just returned and belongs to nobody else.
    let slave = unsafe { OwnedFd::from_raw_fd(peer) };
    set_window(std::os::fd::AsFd::as_fd(&master), cols, rows)?;
    Ok((master, slave))
}

/// Sets a terminal's size (`TIOCSWINSZ`); the terminal's foreground process group gets
/// SIGWINCH.
pub(crate) fn set_window(tty: BorrowedFd<'_>, cols: u16, rows: u16) -> io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from the pointer, which lives for the call.
    if unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCSWINSZ, &ws) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A terminal's size as (columns, rows) (`TIOCGWINSZ`); `None` when `tty` is not a terminal.
pub(crate) fn window(tty: BorrowedFd<'_>) -> Option<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the local, which lives for the call.
    if unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) } != 0 {
        return None;
    }
    Some((ws.ws_col, ws.ws_row))
}

/// Puts the terminal `tty` in raw mode (`cfmakeraw`: no echo, no line editing, no signals
/// from keys: they go to the program as bytes); returns the mode to restore.
pub(crate) fn raw_mode(tty: BorrowedFd<'_>) -> io::Result<libc::termios> {
    // SAFETY: a zeroed termios is a valid out-parameter; tcgetattr fills it.
    let mut old: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr writes the local `old`.
    if unsafe { libc::tcgetattr(tty.as_raw_fd(), &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut raw = old;
    // SAFETY: cfmakeraw edits the local `raw`; tcsetattr reads it.
    let rc = unsafe {
        libc::cfmakeraw(&mut raw);
        libc::tcsetattr(tty.as_raw_fd(), libc::TCSANOW, &raw)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

/// Puts back a terminal mode [`raw_mode`] returned.
pub(crate) fn restore_mode(tty: BorrowedFd<'_>, mode: &libc::termios) {
    // SAFETY: tcsetattr reads the termios the caller holds.
    unsafe { libc::tcsetattr(tty.as_raw_fd(), libc::TCSANOW, mode) };
}
