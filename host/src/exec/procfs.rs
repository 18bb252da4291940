//! Reading `/proc` files of processes: one read into a caller's buffer, and the fields of
//! `/proc/PID/stat` that the containment fallback and the memory watchdog both need (a leaf
//! below both, so that neither depends on the other for them).

/// The text of a `/proc` file read into `buf` (`None` when it cannot be read, is not UTF-8 or
/// does not fit). `/proc` files report a size of 0, so `fs::read_to_string` reads them in
/// small growing steps (five reads and a `statx` for a `status`); the kernel writes the whole
/// text into one large enough buffer at once.
pub(crate) fn read_proc<'b>(path: &str, buf: &'b mut [u8]) -> Option<&'b str> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut len = 0;
    loop {
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(k) => len += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
        if len == buf.len() {
            return None;
        }
    }
    std::str::from_utf8(&buf[..len]).ok()
}

/// The fields of `/proc/PID/stat` this module needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stat {
    pub(crate) state: char,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    pub(crate) sid: i32,
    pub(crate) start: u64,
}

pub(crate) fn stat(pid: i32) -> Option<Stat> {
    // One read into a buffer on the stack: the line is well under 1 KiB, and the memory
    // watchdog reads it for every new process of the machine.
    let mut buf = [0u8; 1024];
    let text = read_proc(&format!("/proc/{pid}/stat"), &mut buf)?;
    // The command name is in parentheses and may contain anything: split after the last `)`.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        sid: f.get(3)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}
