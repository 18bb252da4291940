//! The Landlock layer of the preload route: `SANDBOX_LANDLOCK` (written by `sandbox env`, format
//! in docs/paths.md) applied before the seccomp filter, so that an agent that only sets
//! `LD_PRELOAD` and the printed variables gets the same paths, TCP and scope rules as the
//! host's runners.
//!
//! The host builds its rulesets with the `landlock` crate; this library is `no_std` and cannot
//! link it, so the three Landlock calls are made here directly. The host has already resolved
//! every decision (which paths, which rights): this module only opens the paths, adds them and
//! restricts the process. A domain is inherited across fork and exec, so the first process of a
//! tree applies it and the variable is then removed (later programs would only stack copies:
//! Landlock allows 16 layers).

use core::fmt;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: u32 = 1;
const RULE_NET_PORT: u32 = 2;

const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
/// Rights a rule on a non-directory may carry.
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
const READ: u64 = EXECUTE | READ_FILE | READ_DIR;
const DEV: u64 = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV;

const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;
const SCOPE_ABSTRACT_UNIX: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// Every file-system right the given ABI handles.
fn fs_rights(abi: u32) -> u64 {
    match abi {
        0 => 0,
        1 => (1 << 13) - 1,
        2 => (1 << 14) - 1,
        3 | 4 => (1 << 15) - 1,
        _ => (1 << 16) - 1,
    }
}

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// Why the layer could not be applied; every one ends the process (fail closed).
#[derive(Debug)]
pub enum Error {
    /// The text does not follow the format (line number, from 1).
    Format(usize),
    /// `mode required` and the kernel lacks what a line asks for.
    Unavailable {
        need: u32,
        what: &'static str,
        kernel: u32,
    },
    /// A Landlock call failed (which call, errno).
    Call(&'static str, i32),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Format(n) => write!(f, "SANDBOX_LANDLOCK: line {n} is not understood"),
            Error::Unavailable { need, what, kernel } => write!(
                f,
                "Landlock ABI {need} ({what}) is not available: kernel has ABI {kernel}"
            ),
            Error::Call(call, errno) => write!(f, "Landlock: {call} failed (errno {errno})"),
        }
    }
}

/// What the text asks for, from its header lines.
#[derive(Default)]
struct Wants {
    required: bool,
    max_abi: Option<u32>,
    signal: bool,
    abstract_unix: bool,
    tcp: bool,
    rules: bool,
}

fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n').enumerate().map(|(i, l)| (i + 1, l))
}

fn header(text: &str) -> Result<Wants, Error> {
    let mut w = Wants::default();
    for (n, line) in lines(text) {
        match line {
            "landlock 1" if n == 1 => {}
            _ if n == 1 => return Err(Error::Format(1)),
            "mode required" => w.required = true,
            "mode preferred" => w.required = false,
            "scope signal" => w.signal = true,
            "scope abstract" => w.abstract_unix = true,
            "tcp deny" => w.tcp = true,
            _ => {
                if let Some(a) = line.strip_prefix("abi ") {
                    w.max_abi = Some(number(a).ok_or(Error::Format(n))?);
                } else if let Some(ports) = line.strip_prefix("tcp ports ") {
                    w.tcp = true;
                    for p in ports.split(',') {
                        number(p)
                            .filter(|p| (1..=65535).contains(p))
                            .ok_or(Error::Format(n))?;
                    }
                } else if rule(line).is_some() {
                    w.rules = true;
                } else {
                    return Err(Error::Format(n));
                }
            }
        }
    }
    Ok(w)
}

fn number(text: &str) -> Option<u32> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A path line: its rights (before masking by the ABI) and path.
fn rule(line: &str) -> Option<(Kind, &str)> {
    let (kind, path) = line.split_once(' ')?;
    let kind = match kind {
        "ro" => Kind::Read,
        "rw" => Kind::ReadWrite,
        "wo" => Kind::WriteOnly,
        "dev" => Kind::Device,
        _ => return None,
    };
    path.starts_with('/').then_some((kind, path))
}

#[derive(Clone, Copy)]
enum Kind {
    Read,
    ReadWrite,
    WriteOnly,
    Device,
}

impl Kind {
    fn rights(self, handled: u64) -> u64 {
        handled
            & match self {
                Kind::Read => READ,
                Kind::ReadWrite => u64::MAX,
                Kind::WriteOnly => !READ,
                Kind::Device => DEV,
            }
    }
}

/// A protection the text asks for, and the ABI it needs.
struct Need {
    abi: u32,
    what: &'static str,
}

/// How many protections [`needs`] knows.
const NEEDS: usize = 6;

fn needs(w: &Wants) -> impl Iterator<Item = Need> {
    let wanted: [_; NEEDS] = [
        (w.rules, 1, "file access rules"),
        (w.rules, 3, "truncate restriction"),
        (w.rules, 5, "device ioctl restriction"),
        (w.tcp, 4, "TCP restriction"),
        (w.signal, 6, "signal scoping"),
        (w.abstract_unix, 6, "abstract unix socket scoping"),
    ];
    wanted
        .into_iter()
        .filter(|(asked, _, _)| *asked)
        .map(|(_, abi, what)| Need { abi, what })
}

/// What applying did, for the verbose and degraded lines.
pub struct Applied {
    /// The ABI used.
    pub abi: u32,
    /// The kernel's ABI.
    pub kernel: u32,
    /// Path and port rules added.
    pub rules: u32,
    /// The protections `preferred` had to leave out.
    pub missing: Missing,
}

/// Protections left out, in words (at most one per need), printable as a list.
#[derive(Default)]
pub struct Missing {
    names: [&'static str; NEEDS],
    len: usize,
}

impl Missing {
    fn push(&mut self, what: &'static str) {
        if self.len < NEEDS {
            self.names[self.len] = what;
            self.len += 1;
        }
    }

    /// Whether anything was left out.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in self.names[..self.len].iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

/// Applies `text` to the calling process. `required` refuses what the kernel cannot enforce;
/// `preferred` enforces what it can and names the first missing protection.
pub fn apply(text: &str) -> Result<Applied, Error> {
    let wants = header(text)?;
    let kernel = sys::abi();
    let abi = wants.max_abi.map_or(kernel, |m| m.min(kernel));
    let mut missing = Missing::default();
    for need in needs(&wants) {
        if abi < need.abi {
            if wants.required {
                return Err(Error::Unavailable {
                    need: need.abi,
                    what: need.what,
                    kernel: abi,
                });
            }
            missing.push(need.what);
        }
    }
    let mut applied = Applied {
        abi,
        kernel,
        rules: 0,
        missing,
    };
    if abi == 0 {
        return Ok(applied);
    }
    let handled_fs = fs_rights(abi);
    let attr = RulesetAttr {
        handled_access_fs: handled_fs,
        handled_access_net: if wants.tcp && abi >= 4 {
            NET_BIND_TCP | NET_CONNECT_TCP
        } else {
            0
        },
        scoped: if abi >= 6 {
            (if wants.signal { SCOPE_SIGNAL } else { 0 })
                | (if wants.abstract_unix {
                    SCOPE_ABSTRACT_UNIX
                } else {
                    0
                })
        } else {
            0
        },
    };
    let ruleset = sys::create_ruleset(&attr).map_err(|e| Error::Call("create_ruleset", e))?;
    let result =
        add_rules(text, &ruleset, handled_fs, attr.handled_access_net != 0).and_then(|n| {
            applied.rules = n;
            sys::restrict_self(&ruleset).map_err(|e| Error::Call("restrict_self", e))
        });
    drop(ruleset);
    result.map(|()| applied)
}

fn add_rules(text: &str, ruleset: &sys::Fd, handled: u64, tcp: bool) -> Result<u32, Error> {
    let mut added = 0;
    for (_, line) in lines(text) {
        if let Some(ports) = line.strip_prefix("tcp ports ") {
            if !tcp {
                continue;
            }
            for p in ports.split(',').filter_map(number) {
                let attr = NetPortAttr {
                    allowed_access: NET_CONNECT_TCP,
                    port: u64::from(p),
                };
                sys::add_port(ruleset, &attr).map_err(|e| Error::Call("add_rule", e))?;
                added += 1;
            }
            continue;
        }
        let Some((kind, path)) = rule(line) else {
            continue;
        };
        // A path that cannot be opened (gone since `sandbox env`, too long) gets no grant:
        // less access, never more.
        let Some((fd, is_dir)) = sys::open_path(path) else {
            continue;
        };
        let mut rights = kind.rights(handled);
        if !is_dir {
            rights &= FILE_RIGHTS;
        }
        if rights == 0 {
            continue;
        }
        let attr = PathBeneathAttr {
            allowed_access: rights,
            parent_fd: fd.raw(),
        };
        sys::add_path(ruleset, &attr).map_err(|e| Error::Call("add_rule", e))?;
        added += 1;
    }
    Ok(added)
}

/// The system calls, each in one short block.
mod sys {
    use super::{NetPortAttr, PathBeneathAttr, RulesetAttr, CREATE_RULESET_VERSION};

    /// An owned descriptor, closed on drop.
    pub struct Fd(i32);

    impl Fd {
        pub fn raw(&self) -> i32 {
            self.0
        }
    }

    impl Drop for Fd {
        fn drop(&mut self) {
            // SAFETY: closes a descriptor this value owns.
            unsafe { libc::close(self.0) };
        }
    }

    fn errno() -> i32 {
        // SAFETY: __errno_location returns the calling thread's errno slot.
        unsafe { *libc::__errno_location() }
    }

    /// The kernel's Landlock ABI, 0 when Landlock is missing or disabled.
    pub fn abi() -> u32 {
        // SAFETY: the version query takes no attribute pointer.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                core::ptr::null::<RulesetAttr>(),
                0usize,
                CREATE_RULESET_VERSION,
            )
        };
        u32::try_from(v).unwrap_or(0)
    }

    pub fn create_ruleset(attr: &RulesetAttr) -> Result<Fd, i32> {
        // SAFETY: attr points to a live RulesetAttr of the size passed.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                attr as *const RulesetAttr,
                core::mem::size_of::<RulesetAttr>(),
                0u32,
            )
        };
        if fd < 0 {
            Err(errno())
        } else {
            Ok(Fd(fd as i32))
        }
    }

    pub fn add_path(ruleset: &Fd, attr: &PathBeneathAttr) -> Result<(), i32> {
        // SAFETY: attr points to a live, packed path_beneath attribute.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset.0,
                super::RULE_PATH_BENEATH,
                attr as *const PathBeneathAttr,
                0u32,
            )
        };
        if rc < 0 {
            Err(errno())
        } else {
            Ok(())
        }
    }

    pub fn add_port(ruleset: &Fd, attr: &NetPortAttr) -> Result<(), i32> {
        // SAFETY: attr points to a live net_port attribute.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset.0,
                super::RULE_NET_PORT,
                attr as *const NetPortAttr,
                0u32,
            )
        };
        if rc < 0 {
            Err(errno())
        } else {
            Ok(())
        }
    }

    pub fn restrict_self(ruleset: &Fd) -> Result<(), i32> {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
            return Err(errno());
        }
        // SAFETY: restricts the calling thread with a ruleset descriptor we own.
        let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.0, 0u32) };
        if rc < 0 {
            Err(errno())
        } else {
            Ok(())
        }
    }

    /// Opens `path` without following a final symlink (a symlink gets no grant) and says
    /// whether it is a directory.
    pub fn open_path(path: &str) -> Option<(Fd, bool)> {
        let mut buf = [0u8; 4096];
        let bytes = path.as_bytes();
        if bytes.len() >= buf.len() || bytes.contains(&0) {
            return None;
        }
        buf[..bytes.len()].copy_from_slice(bytes);
        // SAFETY: buf is NUL-terminated (zeroed beyond the copied bytes).
        let fd = unsafe {
            libc::open(
                buf.as_ptr().cast(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return None;
        }
        let fd = Fd(fd);
        // SAFETY: a zeroed stat is a valid output buffer.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        // SAFETY: fstat writes into st for a descriptor we own.
        if unsafe { libc::fstat(fd.0, &mut st) } != 0 {
            return None;
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => None,
            libc::S_IFDIR => Some((fd, true)),
            _ => Some((fd, false)),
        }
    }
}
