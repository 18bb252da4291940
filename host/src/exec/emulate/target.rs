//! The waiting thread, seen from the host: its memory (read once, through
//! `/proc/TID/mem`), its working directory and descriptors (opened `O_PATH` through
//! `/proc/TID/cwd` and `/proc/TID/fd/N`, which give the very object the thread holds), and its
//! credentials. The thread waits in the kernel while this is read; another thread of its
//! process may change the memory meanwhile, which is why every string is read once and only
//! the copy is used.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;

/// Longest path read (`PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;
/// Longest attribute name read (`XATTR_NAME_MAX` + 1).
const NAME_MAX: usize = 256;
/// Largest attribute value copied (`XATTR_SIZE_MAX`).
pub(super) const VALUE_MAX: usize = 65536;

/// One waiting thread.
pub(super) struct Thread {
    tid: u32,
    mem: File,
}

fn efault() -> io::Error {
    io::Error::from_raw_os_error(libc::EFAULT)
}

impl Thread {
    /// Opens the memory of thread `tid`.
    pub(super) fn open(tid: u32) -> io::Result<Thread> {
        let mem = File::open(format!("/proc/{tid}/mem"))?;
        Ok(Thread { tid, mem })
    }

    /// The thread's id in the host's PID namespace.
    pub(super) fn tid(&self) -> u32 {
        self.tid
    }

    /// `len` bytes at `addr` (EFAULT where unmapped).
    pub(super) fn bytes(&self, addr: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        if len > 0 {
            self.mem
                .read_exact_at(&mut buf, addr)
                .map_err(|_| efault())?;
        }
        Ok(buf)
    }

    /// The NUL-terminated string at `addr`, at most `max` bytes with its NUL (ENAMETOOLONG
    /// past it, as the kernel answers), read a page at a time so that a string ending just
    /// before an unmapped page is read.
    fn string(&self, addr: u64, max: usize) -> io::Result<CString> {
        if addr == 0 {
            return Err(efault());
        }
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < max {
            let to_page = 4096 - (at % 4096) as usize;
            let want = to_page.min(max - out.len());
            let mut chunk = vec![0u8; want];
            let got = self.mem.read_at(&mut chunk, at).map_err(|_| efault())?;
            if got == 0 {
                return Err(efault());
            }
            if let Some(end) = chunk[..got].iter().position(|b| *b == 0) {
                out.extend_from_slice(&chunk[..end]);
                return CString::new(out).map_err(|_| efault());
            }
            out.extend_from_slice(&chunk[..got]);
            at = at.checked_add(got as u64).ok_or_else(efault)?;
        }
        Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
    }

    /// A path argument. `/proc/self` and `/proc/thread-self` name the thread's own process
    /// (glibc's `fchmodat(AT_SYMLINK_NOFOLLOW)` changes `/proc/self/fd/N`): on the host's
    /// side they would name the host, so they become `/proc/TID`.
    pub(super) fn path(&self, addr: u64) -> io::Result<CString> {
        let path = self.string(addr, PATH_MAX)?;
        Ok(self.own_proc(path))
    }

    /// `path` with `/proc/self` and `/proc/thread-self` made the thread's `/proc/TID`.
    pub(super) fn own_proc(&self, path: CString) -> CString {
        let bytes = path.as_bytes();
        for prefix in [&b"/proc/self"[..], b"/proc/thread-self"] {
            if let Some(rest) = bytes.strip_prefix(prefix) {
                if rest.is_empty() || rest.starts_with(b"/") {
                    let mut out = format!("/proc/{}", self.tid).into_bytes();
                    out.extend_from_slice(rest);
                    return CString::new(out).expect("no NUL in a C string's bytes");
                }
            }
        }
        path
    }

    /// An extended attribute's name (ERANGE past its limit, as the kernel answers).
    pub(super) fn xattr_name(&self, addr: u64) -> io::Result<CString> {
        match self.string(addr, NAME_MAX) {
            Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
                Err(io::Error::from_raw_os_error(libc::ERANGE))
            }
            r => r,
        }
    }

    /// The thread's process (its thread-group id), from `/proc/TID/status`.
    pub(super) fn tgid(&self) -> io::Result<i32> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.tid))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(efault)
    }

    /// The thread's `/proc/TID/status`.
    pub(super) fn status(&self) -> io::Result<String> {
        std::fs::read_to_string(format!("/proc/{}/status", self.tid))
    }

    /// The thread's memory opened for writing, for a call's results (`sendmmsg`'s lengths).
    pub(super) fn writer(&self) -> io::Result<File> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/{}/mem", self.tid))
    }

    /// The thread's working directory.
    pub(super) fn cwd(&self) -> io::Result<OwnedFd> {
        self.open_proc(&format!("/proc/{}/cwd", self.tid))
    }

    /// The thread's root directory (`/proc/TID/root`): in the isolated tier, the root of the
    /// job's mount namespace, where its private `/tmp` and `/dev/shm` are.
    pub(super) fn root(&self) -> io::Result<OwnedFd> {
        self.open_proc(&format!("/proc/{}/root", self.tid))
    }

    /// The name of the thread's working directory as seen from its own root (the kernel names
    /// an object of another mount namespace from that namespace's root).
    pub(super) fn cwd_name(&self) -> io::Result<std::path::PathBuf> {
        std::fs::read_link(format!("/proc/{}/cwd", self.tid))
    }

    /// The name of the object the thread's descriptor `fd` refers to, as seen from its own
    /// root (EBADF when it has none).
    pub(super) fn fd_name(&self, fd: u64) -> io::Result<std::path::PathBuf> {
        let fd = fd as u32 as i32;
        if fd < 0 {
            return Err(ebadf());
        }
        std::fs::read_link(format!("/proc/{}/fd/{fd}", self.tid)).map_err(|e| {
            match e.raw_os_error() {
                Some(libc::ENOENT) => ebadf(),
                _ => e,
            }
        })
    }

    /// The thread's controlling terminal's device number (`tty_nr` of `/proc/TID/stat`), as
    /// (major, minor); `None` when it has none.
    pub(super) fn terminal(&self) -> Option<(u32, u32)> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.tid)).ok()?;
        // The command name may hold anything: the fields start after its last ')'.
        let rest = &stat[stat.rfind(')')? + 2..];
        let nr: u32 = rest.split(' ').nth(4)?.parse().ok()?;
        (nr != 0).then_some(((nr >> 8) & 0xfff, (nr & 0xff) | ((nr >> 12) & 0xfff00)))
    }

    /// One of the thread's descriptors that holds the terminal device `tty` (its controlling
    /// terminal, for `/dev/tty`), opened `O_PATH` through `/proc/TID/fd/N`.
    pub(super) fn descriptor_of(&self, tty: (u32, u32)) -> Option<OwnedFd> {
        let dir = std::fs::read_dir(format!("/proc/{}/fd", self.tid)).ok()?;
        dir.filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
            .filter_map(|n| self.fd(n).ok())
            .find(|fd| {
                crate::sys::emulate::shape(std::os::fd::AsFd::as_fd(fd))
                    .is_ok_and(|s| s.mode & libc::S_IFMT == libc::S_IFCHR && s.rdev == tty)
            })
    }

    /// The object the thread's descriptor `fd` refers to (EBADF when it has none).
    pub(super) fn fd(&self, fd: u64) -> io::Result<OwnedFd> {
        // The argument is a C int: its low 32 bits, as the kernel reads it.
        let fd = fd as u32 as i32;
        if fd < 0 {
            return Err(ebadf());
        }
        self.open_proc(&format!("/proc/{}/fd/{fd}", self.tid))
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENOENT) => ebadf(),
                _ => e,
            })
    }

    /// The open file behind the thread's descriptor `fd` (`pidfd_getfd`: the same file, not
    /// a reopening), EBADF when it has none.
    pub(super) fn take_fd(&self, tid: u32, fd: u64) -> io::Result<OwnedFd> {
        let fd = fd as u32 as i32;
        if fd < 0 {
            return Err(ebadf());
        }
        let pidfd = crate::sys::pidfd_open(tid as i32, PIDFD_THREAD)?;
        crate::sys::pidfd_getfd(std::os::fd::AsRawFd::as_raw_fd(&pidfd), fd)
    }

    fn open_proc(&self, path: &str) -> io::Result<OwnedFd> {
        let c = CString::new(path).map_err(|_| efault())?;
        crate::sys::emulate::open_path(None, &c, 0)
    }

    /// Whether the thread acts with the host's file-system credentials: the same file-system
    /// user and group, the same groups, and every capability the host's thread has. The
    /// emulation acts with the host's credentials, so a thread that changed its own (a job
    /// started as root that dropped to another user) must not have its calls made for it.
    pub(super) fn same_credentials(&self) -> bool {
        matches!(self.standing(), Standing::Same)
    }

    /// The thread's credentials against the host's ([`Standing`]).
    pub(super) fn standing(&self) -> Standing {
        match self.status() {
            Ok(status) => self.standing_in(&status),
            Err(_) => Standing::Other,
        }
    }

    /// The credentials of the thread's `status` text against this host thread's, which are
    /// read once per thread (a thread that serves calls never changes its own).
    pub(super) fn standing_in(&self, status: &str) -> Standing {
        thread_local! {
            static OURS: std::cell::OnceCell<Option<Credentials>> =
                const { std::cell::OnceCell::new() };
        }
        let ours = OURS.with(|c| {
            c.get_or_init(|| {
                std::fs::read_to_string("/proc/thread-self/status")
                    .ok()
                    .and_then(|o| Credentials::of(&o))
            })
            .clone()
        });
        match (Credentials::of(status), ours) {
            (Some(t), Some(o)) if t.covers(&o) => Standing::Same,
            (Some(t), Some(o)) if t.same_ids(&o) => Standing::FewerCapabilities(t),
            _ => Standing::Other,
        }
    }
}

/// How a thread's credentials stand against the host's.
pub(super) enum Standing {
    /// The host may act for it as it is ([`Thread::same_credentials`]).
    Same,
    /// The same user, group and groups, fewer capabilities: a job of root in the isolated
    /// tier holds none in its user namespace. What the host does for it is checked against
    /// these credentials' mode bits.
    FewerCapabilities(Credentials),
    /// Another user (or unreadable): the host does not act for it.
    Other,
}

impl Standing {
    /// Whether the thread may write the socket file `st`, as the kernel asks before a connect
    /// or send to it: the host's own check where the credentials are the same; else the
    /// file's mode bits for the thread's user, without any capability (POSIX ACLs are not
    /// read: a socket file with one is refused unless its mode bits allow).
    pub(super) fn may_write(&self, st: &libc::stat) -> bool {
        match self {
            Standing::Same => true,
            Standing::FewerCapabilities(c) => {
                c.mode_allows((st.st_uid, st.st_gid, st.st_mode), libc::S_IWUSR)
            }
            Standing::Other => false,
        }
    }

    /// Whether the thread may open the object `s` for what `access` asks (`O_RDONLY`,
    /// `O_WRONLY`, `O_RDWR`; `write`: it also truncates): the host's own open decides where
    /// the credentials are the same; else the file's mode bits for the thread's user.
    pub(super) fn may_open(
        &self,
        s: &crate::sys::emulate::Shape,
        access: i32,
        write: bool,
    ) -> bool {
        let file = (s.uid, s.gid, s.mode);
        match self {
            Standing::Same => true,
            Standing::FewerCapabilities(c) => {
                let read = access != libc::O_WRONLY;
                let write = write || access != libc::O_RDONLY;
                (!read || c.mode_allows(file, libc::S_IRUSR))
                    && (!write || c.mode_allows(file, libc::S_IWUSR))
            }
            Standing::Other => false,
        }
    }

    /// Whether the thread may change the metadata of `s` as `op` asks: the host's own call
    /// decides where the credentials are the same; without capabilities only the owner may
    /// (to another owner never, to another group only one of its own), a strict reading of
    /// the kernel's rules.
    /// `owner`: the owner and group a `chown` asks for (`u32::MAX`: unchanged).
    pub(super) fn may_change(
        &self,
        s: &crate::sys::emulate::Shape,
        owner: Option<(u32, u32)>,
    ) -> bool {
        match self {
            Standing::Same => true,
            Standing::FewerCapabilities(c) => {
                if c.fsuid.parse::<u32>().ok() != Some(s.uid) {
                    return false;
                }
                let mine = |g: u32| {
                    g == s.gid
                        || c.fsgid.parse::<u32>().ok() == Some(g)
                        || c.groups
                            .split_whitespace()
                            .any(|x| x.parse::<u32>().ok() == Some(g))
                };
                owner.is_none_or(|(u, g)| {
                    (u == u32::MAX || u == s.uid) && (g == u32::MAX || mine(g))
                })
            }
            Standing::Other => false,
        }
    }

    /// Whether the thread may make a name in the directory `s` (write and search).
    pub(super) fn may_create_in(&self, s: &crate::sys::emulate::Shape) -> bool {
        let file = (s.uid, s.gid, s.mode);
        match self {
            Standing::Same => true,
            Standing::FewerCapabilities(c) => {
                c.mode_allows(file, libc::S_IWUSR) && c.mode_allows(file, libc::S_IXUSR)
            }
            Standing::Other => false,
        }
    }
}

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread that need not lead its group.
pub(super) const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

fn ebadf() -> io::Error {
    io::Error::from_raw_os_error(libc::EBADF)
}

/// The host's file-mode creation mask, read once (the host never changes it while it runs
/// jobs).
pub(super) fn host_umask() -> u32 {
    static MASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *MASK.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| umask_in(&s))
            .unwrap_or(0o022)
    })
}

/// The file-mode creation mask of a `/proc/TID/status` text (`Umask:`).
pub(super) fn umask_in(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
}

/// What decides a file-system permission check, from `/proc/TID/status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Credentials {
    fsuid: String,
    fsgid: String,
    groups: String,
    cap_eff: u64,
}

impl Credentials {
    fn of(status: &str) -> Option<Credentials> {
        let field = |key: &str| status.lines().find_map(|l| l.strip_prefix(key));
        let fourth = |key: &str| field(key)?.split_whitespace().nth(3).map(str::to_string);
        Some(Credentials {
            fsuid: fourth("Uid:")?,
            fsgid: fourth("Gid:")?,
            groups: field("Groups:")?.trim().to_string(),
            cap_eff: u64::from_str_radix(field("CapEff:")?.trim(), 16).ok()?,
        })
    }

    /// Whether `self` and `host` are the same user, group and groups (capabilities aside).
    fn same_ids(&self, host: &Credentials) -> bool {
        self.fsuid == host.fsuid && self.fsgid == host.fsgid && self.groups == host.groups
    }

    /// Whether the mode bits of a file let this user do what `owner_bit` (`S_IRUSR`,
    /// `S_IWUSR`, `S_IXUSR`) stands for, without any capability.
    pub(super) fn mode_allows(
        &self,
        (owner, group, mode): (u32, u32, u32),
        owner_bit: u32,
    ) -> bool {
        let uid = self.fsuid.parse::<u32>().ok();
        let gid = self.fsgid.parse::<u32>().ok();
        let mut groups = self
            .groups
            .split_whitespace()
            .filter_map(|g| g.parse::<u32>().ok());
        let bit = if uid == Some(owner) {
            owner_bit
        } else if gid == Some(group) || groups.any(|g| g == group) {
            owner_bit >> 3
        } else {
            owner_bit >> 6
        };
        mode & bit != 0
    }

    /// Whether `self` (the job's thread) may do at least what `host` may.
    fn covers(&self, host: &Credentials) -> bool {
        self.fsuid == host.fsuid
            && self.fsgid == host.fsgid
            && self.groups == host.groups
            && host.cap_eff & !self.cap_eff == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str =
        "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t \nCapEff:\t000001ffffffffff\n";

    #[test]
    fn the_threads_own_proc_directory_replaces_the_hosts() {
        let t = Thread::open(std::process::id()).unwrap();
        let c = |s: &str| CString::new(s).unwrap();
        let me = std::process::id();
        assert_eq!(
            t.own_proc(c("/proc/self/fd/3")),
            c(&format!("/proc/{me}/fd/3"))
        );
        assert_eq!(
            t.own_proc(c("/proc/thread-self")),
            c(&format!("/proc/{me}"))
        );
        assert_eq!(t.own_proc(c("/proc/selfish")), c("/proc/selfish"));
        assert_eq!(t.own_proc(c("proc/self/fd/3")), c("proc/self/fd/3"));
    }

    #[test]
    fn a_thread_that_changed_user_or_dropped_capabilities_is_not_covered() {
        let host = Credentials::of(ROOT).unwrap();
        assert!(host.covers(&host));
        let nobody = "Uid:\t0\t65534\t0\t65534\nGid:\t0\t0\t0\t0\nGroups:\t \nCapEff:\t0\n";
        assert!(!Credentials::of(nobody).unwrap().covers(&host));
        let fewer = ROOT.replace("000001ffffffffff", "000001fffffffffe");
        assert!(!Credentials::of(&fewer).unwrap().covers(&host));
        let grouped = ROOT.replace("Groups:\t ", "Groups:\t4 27");
        assert!(!Credentials::of(&grouped).unwrap().covers(&host));
        assert!(Credentials::of("Uid:\t0\n").is_none());
    }

    #[test]
    fn without_capabilities_the_mode_bits_decide() {
        let st = |uid: u32, gid: u32, mode: u32| (uid, gid, libc::S_IFSOCK | mode);
        let root = Credentials::of(ROOT).unwrap();
        let grouped = Credentials::of(&ROOT.replace("Groups:\t ", "Groups:\t4 27")).unwrap();
        // The owner's bit, then the group's (primary or supplementary), then the others'.
        assert!(root.mode_allows(st(0, 0, 0o200), libc::S_IWUSR));
        assert!(!root.mode_allows(st(0, 0, 0o022), libc::S_IWUSR));
        assert!(!root.mode_allows(st(1000, 1000, 0o700), libc::S_IWUSR));
        assert!(root.mode_allows(st(1000, 0, 0o020), libc::S_IWUSR));
        assert!(grouped.mode_allows(st(1000, 27, 0o020), libc::S_IWUSR));
        assert!(!grouped.mode_allows(st(1000, 28, 0o020), libc::S_IWUSR));
        assert!(root.mode_allows(st(1000, 1000, 0o002), libc::S_IWUSR));
    }
}
