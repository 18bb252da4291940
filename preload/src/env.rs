//! Reading and removing the `SECCOMP_*` variables, straight from the `envp` array glibc passes
//! to constructors (the same array `environ` points to).

use core::ffi::CStr;

/// The preload's variables, borrowed from the process environment.
#[derive(Default)]
pub struct Vars {
    pub allow: Option<&'static str>,
    pub deny: Option<&'static str>,
    pub default_action: Option<&'static str>,
    pub report_fd: Option<&'static str>,
    pub verbose: bool,
    /// `SANDBOX_LANDLOCK`: the Landlock layer's rules (see `landlock`).
    pub landlock: Option<&'static str>,
}

impl Vars {
    /// Reads the variables; a value that is not UTF-8 is passed on as `\u{fffd}`, which the
    /// grammar rejects as non-ASCII, so a bad value can never be ignored.
    pub fn read(envp: *mut *mut libc::c_char) -> Vars {
        let mut v = Vars::default();
        for entry in entries(envp) {
            if let Some(value) = entry.strip_prefix(LANDLOCK) {
                v.landlock = Some(core::str::from_utf8(value).unwrap_or("\u{fffd}"));
                continue;
            }
            let Some(rest) = entry.strip_prefix(b"SECCOMP_") else {
                continue;
            };
            let Some(eq) = rest.iter().position(|b| *b == b'=') else {
                continue;
            };
            let (name, value) = (&rest[..eq], &rest[eq + 1..]);
            let value = core::str::from_utf8(value).unwrap_or("\u{fffd}");
            match name {
                b"SYSCALL_ALLOW" => v.allow = Some(value),
                b"SYSCALL_DENY" => v.deny = Some(value),
                b"DEFAULT_ACTION" => v.default_action = Some(value),
                b"REPORT_FD" => v.report_fd = Some(value),
                b"VERBOSE" => v.verbose = value == "1",
                _ => {}
            }
        }
        v
    }

    /// Whether any variable that asks for work is set.
    pub fn any(&self) -> bool {
        self.allow.is_some()
            || self.deny.is_some()
            || self.default_action.is_some()
            || self.report_fd.is_some()
            || self.landlock.is_some()
    }
}

/// The Landlock variable's prefix, `=` included.
const LANDLOCK: &[u8] = b"SANDBOX_LANDLOCK=";

fn entries(envp: *mut *mut libc::c_char) -> impl Iterator<Item = &'static [u8]> {
    let mut i = 0;
    core::iter::from_fn(move || {
        if envp.is_null() {
            return None;
        }
        // SAFETY: envp is the NULL-terminated array the loader passed to the constructor.
        let p = unsafe { *envp.add(i) };
        if p.is_null() {
            return None;
        }
        i += 1;
        // SAFETY: every entry is a NUL-terminated string that lives as long as the process.
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    })
}

/// Removes every `SECCOMP_*` entry and `SANDBOX_LANDLOCK` from the environment array and blanks its bytes, so neither
/// `getenv` nor `/proc/self/environ` shows the configuration to the program.
pub fn scrub(envp: *mut *mut libc::c_char) {
    if envp.is_null() {
        return;
    }
    let mut read = 0;
    let mut write = 0;
    loop {
        // SAFETY: read stays within the NULL-terminated array.
        let p = unsafe { *envp.add(read) };
        if p.is_null() {
            break;
        }
        // SAFETY: p is a NUL-terminated environment string.
        let s = unsafe { CStr::from_ptr(p) }.to_bytes();
        if s.starts_with(b"SECCOMP_") || s.starts_with(LANDLOCK) {
            // SAFETY: the string's bytes are writable process memory (the initial stack or a
            // buffer the parent's exec copied there); we overwrite within its length.
            unsafe { core::ptr::write_bytes(p, 0, s.len()) };
        } else {
            // SAFETY: write <= read, both within the array.
            unsafe { *envp.add(write) = p };
            write += 1;
        }
        read += 1;
    }
    // SAFETY: write <= read, so this slot is within the array.
    unsafe { *envp.add(write) = core::ptr::null_mut() };
}

/// Parses a descriptor number (0..=65535).
pub fn parse_fd(text: &str) -> Option<i32> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let fd: i32 = text.parse().ok()?;
    // SAFETY: F_GETFD only queries the descriptor table.
    (unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0).then_some(fd)
}
