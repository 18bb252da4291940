//! Namespaces for a spawn, and the init that runs in them.
//!
//! The host clones a process into new user, PID, mount, IPC and UTS namespaces, and a
//! network namespace when asked. That process is PID 1 of the new PID namespace, the
//! program's **init**. A root host that is non-dumpable (as the CLI makes itself) clones it
//! sharing its memory (`CLONE_VM`, on a stack of its own kept until the init is gone) and
//! writes its id maps itself right after the clone; otherwise the init gets a copy-on-write
//! copy of the host's memory and writes its own maps (copying the page tables, then the
//! copy-on-write faults on both sides, cost the serve path ~10% of its throughput).
//!
//! 1. the host's uid and gid are mapped to themselves (not to root: `setgroups` is denied
//!    first); the init brings loopback up and creates the asked TCP listeners (sent to the
//!    host over a socketpair with `SCM_RIGHTS`), makes the asked mounts, and restricts the
//!    per-job Landlock ruleset to the new `/proc` and `/tmp` as well;
//! 2. it starts the program as in a plain spawn (`child_main`, sharing its memory and
//!    descriptor table until exec, `CLONE_VFORK`), which drops every capability before exec;
//! 3. once the program runs it makes itself non-dumpable (its memory is the host's or a copy
//!    of it; shared, it is non-dumpable already),
//!    closes every descriptor, and waits: it reaps every process that ends (orphans are
//!    re-parented to it), forwards the signals it gets to the program, and when the program
//!    ends it records the program's wait status in a page shared with the host and exits,
//!    which makes the kernel kill everything left in the namespace.
//!
//! Like `child_main`, it only makes raw system calls on memory prepared before the clone (the
//! host may have other threads holding locks), each carrying a spawner's secret when there is
//! one (`spawner::SECRET_CALLS` lists them).

use super::child::{
    above_stdio, child_main, fail, Ctx, Shared, Stack, Stage, ABORT, GO, GUARD, SPINS, STACK_SIZE,
    WAIT,
};
use crate::exec::clone::{clone3, CloneArgs};
use crate::exec::namespaces::{Mount, Namespaces};
use crate::sys::raw;
use std::ffi::CString;
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

/// At most this many listeners per spawn (one `SCM_RIGHTS` message).
pub(crate) const MAX_LISTENERS: usize = 16;

/// `MOUNT_ATTR_RDONLY` and `struct mount_attr` (Linux 5.12).
const MOUNT_ATTR_RDONLY: u64 = 1;
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's ABI).
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

/// One mount, as the init reads it.
#[repr(C)]
struct RawMount {
    kind: u32,
    path: *const c_char,
    /// A second string: tmpfs and devpts options, a link's target, a value to write.
    data: *const c_char,
    slot: usize,
    /// Attach writable; seal recursively.
    flag: bool,
}

const PROC: u32 = 1;
const TMPFS: u32 = 2;
const READ_ONLY: u32 = 3;
const PIN: u32 = 4;
const CLONE: u32 = 5;
const MKDIR: u32 = 6;
const ATTACH: u32 = 7;
const DEVPTS: u32 = 8;
const FILE: u32 = 9;
const SYMLINK: u32 = 10;
const SEAL: u32 = 11;
const WRITE: u32 = 12;
const HIDE: u32 = 13;
const COVER: u32 = 14;

/// At most this many trees are copied to be attached again (directories kept visible under
/// a private `/tmp`, writable places, device nodes).
pub(crate) const MAX_EXPOSED: usize = 48;

/// `open_tree` flags (Linux 5.2).
const OPEN_TREE_CLONE: usize = 1;
/// `move_mount` flag: the source is the descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: usize = 4;

/// What the init reads, prepared by the host.
#[repr(C)]
pub(super) struct NsCtx {
    uid_map: *const c_char,
    uid_len: usize,
    gid_map: *const c_char,
    gid_len: usize,
    net: bool,
    ifreq: [u8; 40],
    listen: *const libc::sockaddr_in,
    nlisten: usize,
    /// The child's end of the socketpair the listeners go through (-1: none).
    sock: RawFd,
    mounts: *const RawMount,
    nmounts: usize,
    /// Per-job Landlock rules: the ruleset's attributes and rules to rebuild (null: the
    /// cached ruleset in `Ctx::landlock` is used as is).
    landlock: *const crate::landlock::RawRules,
    /// The program's stack (in the init's copy of the memory).
    g_stack: u64,
    g_stack_size: u64,
    cap_last: i32,
    private_tmp: bool,
    /// The mounts build a fresh `/dev`: its directory, terminals and shared memory get rules.
    fresh_dev: bool,
    /// The mounts cover the deny paths: `/` gets the read rights.
    read_root: bool,
    /// The host's own dumpable setting (restored after the id maps are written).
    host_dumpable: i32,
    /// The init shares the host's memory (`CLONE_VM`) and the host writes its id maps.
    shared_vm: bool,
    /// The init is PID 1 of a PID namespace of its own (`CLONE_NEWPID`): only then may it
    /// signal every process it can see (`kill(-1)`), which are then the run's alone.
    pid_ns: bool,
}

/// A page shared between the host and an init (`MAP_SHARED`), holding [`Shared`].
#[derive(Debug)]
pub(crate) struct Page(*mut c_void);

// SAFETY: the page is only accessed through the atomics of `Shared`.
unsafe impl Send for Page {}
// SAFETY: as above.
unsafe impl Sync for Page {}

impl Page {
    fn new() -> std::io::Result<Page> {
        // SAFETY: an anonymous shared mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the page is ours, page-aligned and large enough for Shared.
        unsafe { p.cast::<Shared>().write(Shared::new()) };
        Ok(Page(p))
    }

    pub(crate) fn shared(&self) -> &Shared {
        // SAFETY: initialised in `new`, alive until drop.
        unsafe { &*self.0.cast::<Shared>() }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; the init has its own reference to the pages.
        unsafe { libc::munmap(self.0, 4096) };
    }
}

thread_local! {
    /// The program's stack in an init: the host never runs on it (the init has a copy), so
    /// one per thread serves every spawn.
    static PROGRAM_STACK: std::cell::Cell<Option<Stack>> = const { std::cell::Cell::new(None) };
}

/// The highest capability number of this kernel.
fn cap_last() -> i32 {
    static LAST: OnceLock<i32> = OnceLock::new();
    *LAST.get_or_init(|| crate::sys::cap_last().unwrap_or(63))
}

/// Everything an init needs, kept alive by the host until the program has exec'd.
pub(super) struct Prepared {
    page: Page,
    ctx: Box<NsCtx>,
    flags: u64,
    _maps: [CString; 2],
    _addrs: Vec<libc::sockaddr_in>,
    _mounts: Vec<RawMount>,
    _rules: Option<std::sync::Arc<crate::landlock::RawRules>>,
    host_sock: Option<OwnedFd>,
    _child_sock: Option<OwnedFd>,
    nlisten: usize,
    /// The stack of an init that shares our memory.
    init_stack: Option<Stack>,
}

impl Prepared {
    pub(super) fn new(
        ns: &Namespaces,
        listen: &[SocketAddrV4],
        rules: Option<std::sync::Arc<crate::landlock::RawRules>>,
    ) -> std::io::Result<Prepared> {
        let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
        if !listen.is_empty() && !ns.net {
            return Err(invalid("listeners need a network namespace"));
        }
        if listen.len() > MAX_LISTENERS {
            return Err(invalid("too many listeners"));
        }
        if !ns.mounts.is_empty() && !ns.isolate {
            return Err(invalid("mounts need a mount namespace"));
        }
        let page = Page::new()?;
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let maps = [
            CString::new(format!("{uid} {uid} 1")).expect("digits"),
            CString::new(format!("{gid} {gid} 1")).expect("digits"),
        ];
        let mut ifreq = [0u8; 40];
        ifreq[..2].copy_from_slice(b"lo");
        ifreq[16..18].copy_from_slice(&(libc::IFF_UP as u16).to_ne_bytes());
        let addrs: Vec<libc::sockaddr_in> = listen
            .iter()
            .map(|a| libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            })
            .collect();
        let (host_sock, child_sock) = if listen.is_empty() {
            (None, None)
        } else {
            let mut fds = [-1; 2];
            // SAFETY: socketpair writes two descriptors into fds.
            let rc = unsafe {
                libc::socketpair(
                    libc::AF_UNIX,
                    libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                    0,
                    fds.as_mut_ptr(),
                )
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: both descriptors were just created and belong to nobody else.
            let (h, c) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            (Some(h), Some(above_stdio(c)?))
        };
        let mounts: Vec<RawMount> = ns
            .mounts
            .iter()
            .map(|m| {
                let none = None::<&CString>;
                let (kind, path, data, slot, flag) = match m {
                    Mount::Proc(p) => (PROC, p, none, 0, false),
                    Mount::Clone(p, i) => (CLONE, p, none, *i, false),
                    Mount::Tmpfs(p, o) => (TMPFS, p, Some(o), 0, false),
                    Mount::Devpts(p, o) => (DEVPTS, p, Some(o), 0, false),
                    Mount::Mkdir(p) => (MKDIR, p, none, 0, false),
                    Mount::File(p) => (FILE, p, none, 0, false),
                    Mount::Symlink(t, p) => (SYMLINK, p, Some(t), 0, false),
                    Mount::Attach(p, i, w) => (ATTACH, p, none, *i, *w),
                    Mount::Seal(p, r) => (SEAL, p, none, 0, *r),
                    Mount::Write(p, v) => (WRITE, p, Some(v), 0, false),
                    Mount::Hide(p) => (HIDE, p, none, 0, false),
                    Mount::Cover(p, s) => (COVER, p, Some(s), 0, false),
                    Mount::ReadOnly(p) => (READ_ONLY, p, none, 0, false),
                    Mount::Pin(p) => (PIN, p, none, 0, false),
                };
                RawMount {
                    kind,
                    path: path.as_ptr(),
                    data: data.map_or(std::ptr::null(), |d| d.as_ptr()),
                    slot,
                    flag,
                }
            })
            .collect();
        if mounts.iter().any(|m| m.slot >= MAX_EXPOSED) {
            return Err(invalid(
                "too many places to bind back (writable paths, directories under /tmp)",
            ));
        }
        let stack = PROGRAM_STACK
            .with(|s| s.take())
            .map_or_else(Stack::new, Ok)?;
        let g_stack = stack.0 as u64;
        PROGRAM_STACK.with(|s| s.set(Some(stack)));
        // SAFETY: PR_GET_DUMPABLE has no side effects.
        let host_dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE) };
        // The init shares our memory, rather than copying it (the page tables of the whole
        // host, then a copy-on-write fault for every page either side writes while it
        // lives), when that changes nothing it could expose: the host is non-dumpable, as
        // the init makes itself once the program runs, and the host can write the init's id
        // maps itself (an init writing its own would need the memory dumpable for a moment,
        // the host's memory with it: its /proc files are root's). Root owns those files; any
        // other user makes a copy as before.
        // SAFETY: geteuid cannot fail.
        let shared_vm = host_dumpable == 0 && unsafe { libc::geteuid() } == 0;
        let init_stack = if shared_vm { Some(Stack::new()?) } else { None };
        let ctx = Box::new(NsCtx {
            uid_map: maps[0].as_ptr(),
            uid_len: maps[0].as_bytes().len(),
            gid_map: maps[1].as_ptr(),
            gid_len: maps[1].as_bytes().len(),
            net: ns.net,
            ifreq,
            listen: addrs.as_ptr(),
            nlisten: addrs.len(),
            sock: child_sock.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            mounts: mounts.as_ptr(),
            nmounts: mounts.len(),
            landlock: rules
                .as_ref()
                .map_or(std::ptr::null(), std::sync::Arc::as_ptr),
            g_stack,
            g_stack_size: (STACK_SIZE + GUARD) as u64,
            cap_last: cap_last(),
            private_tmp: ns.private_tmp,
            fresh_dev: ns.fresh_dev,
            read_root: ns.read_root,
            host_dumpable,
            shared_vm,
            pid_ns: ns.isolate,
        });
        let mut flags = libc::CLONE_NEWUSER as u64;
        if ns.isolate {
            flags |=
                (libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS)
                    as u64;
        }
        if ns.net {
            flags |= libc::CLONE_NEWNET as u64;
        }
        Ok(Prepared {
            page,
            ctx,
            flags,
            _maps: maps,
            _addrs: addrs,
            _mounts: mounts,
            _rules: rules,
            host_sock,
            _child_sock: child_sock,
            nlisten: listen.len(),
            init_stack,
        })
    }

    /// The stack of an init that shares our memory (`None`: the init gets a copy of it).
    pub(super) fn init_stack(&self) -> Option<&Stack> {
        self.init_stack.as_ref()
    }

    pub(super) fn shared(&self) -> &Shared {
        self.page.shared()
    }

    pub(super) fn ctx(&self) -> *const NsCtx {
        &*self.ctx
    }

    /// The namespace flags of the init's clone.
    pub(super) fn clone_flags(&self) -> u64 {
        self.flags
    }

    /// The listeners the init sent, in the order asked (after the program has exec'd).
    pub(super) fn take_listeners(&self) -> std::io::Result<Vec<OwnedFd>> {
        let Some(sock) = &self.host_sock else {
            return Ok(Vec::new());
        };
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut control = [0u64; 16];
        // SAFETY: a zeroed msghdr is valid; the buffers outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: recvmsg into the buffers described by msg.
        let n = unsafe {
            libc::recvmsg(
                sock.as_raw_fd(),
                &mut msg,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            )
        };
        if n < 0 {
            return Err(std::io::Error::other(format!(
                "the listeners did not arrive: {}",
                std::io::Error::last_os_error()
            )));
        }
        let mut fds = Vec::new();
        // SAFETY: CMSG_* walk the control buffer recvmsg filled, within msg_controllen.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
                    let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                        / std::mem::size_of::<c_int>();
                    for i in 0..count {
                        fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if fds.len() != self.nlisten || msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(std::io::Error::other(format!(
                "{} of {} listeners arrived",
                fds.len(),
                self.nlisten
            )));
        }
        Ok(fds)
    }

    /// What the handle of the init started with this (whose pidfd is `pidfd`) keeps: the
    /// shared page, and the stack of an init sharing our memory with a copy of the pidfd.
    pub(super) fn into_parts(self, pidfd: &OwnedFd) -> (Page, Option<(Stack, Option<OwnedFd>)>) {
        // Without a copy of the pidfd, the stack and page of an init sharing our memory stay
        // mapped for good (see `Init`'s drop).
        (
            self.page,
            self.init_stack.map(|stack| (stack, pidfd.try_clone().ok())),
        )
    }

    /// The highest capability number, which the child needs to drop them all.
    pub(super) fn cap_last(&self) -> i32 {
        self.ctx.cap_last
    }
}

/// A raw call with the spawner's secret, failing the init at `stage` when it fails.
macro_rules! must {
    ($c:expr, $stage:expr; $nr:expr $(, $a:expr)*) => {{
        let rc = ksys!($c; $nr $(, $a)*);
        if rc < 0 {
            fail($c, $stage, rc);
        }
        rc
    }};
}

/// Writes `text` to the file at `path` (a /proc file of the init itself).
unsafe fn write_file(c: &Ctx, path: &std::ffi::CStr, text: *const c_char, len: usize) {
    // SAFETY: raw calls on the given path and buffer.
    unsafe {
        let fd = must!(c, Stage::IdMap; libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC, 0);
        let rc = ksys!(c; libc::SYS_write, fd, text, len);
        if rc != len as isize {
            fail(c, Stage::IdMap, rc.min(-libc::EIO as isize));
        }
        ksys!(c; libc::SYS_close, fd);
    }
}

/// In the thread that cloned an init sharing its memory (`pid` in its namespace): writes the
/// init's id maps and tells the init (through `Shared::maps`).
///
/// # Safety
/// `c` is the init's context, alive until the program has exec'd (the init waits for this
/// before it starts the program). Raw calls with the secret only: this may run in a spawner
/// thread.
pub(super) unsafe fn write_maps(c: &Ctx, pid: i32) {
    // SAFETY: the caller's contract; every buffer is on this stack or prepared by the host.
    unsafe {
        let n = &*c.ns.cast::<NsCtx>();
        if !n.shared_vm {
            return;
        }
        let sh = &*c.sh;
        let mut rc = 0;
        for (name, text, len) in [
            (&b"setgroups\0"[..], c"deny".as_ptr(), 4),
            (&b"gid_map\0"[..], n.gid_map, n.gid_len),
            (&b"uid_map\0"[..], n.uid_map, n.uid_len),
        ] {
            let mut buf = [0u8; 48];
            let path = proc_path(pid, name, &mut buf);
            let fd = ksys!(c; libc::SYS_openat, libc::AT_FDCWD, path,
                libc::O_WRONLY | libc::O_CLOEXEC, 0);
            if fd < 0 {
                rc = fd;
                break;
            }
            let w = ksys!(c; libc::SYS_write, fd, text, len);
            ksys!(c; libc::SYS_close, fd);
            if w != len as isize {
                rc = w.min(-libc::EIO as isize);
                break;
            }
        }
        if rc < 0 {
            sh.maps_errno.store((-rc) as i32, Ordering::Relaxed);
            sh.maps.store(ABORT, Ordering::Release);
        } else {
            sh.maps.store(GO, Ordering::Release);
        }
        // Not private, like every wait on the shared words.
        ksys!(c; libc::SYS_futex, &sh.maps as *const _, libc::FUTEX_WAKE, 1, 0);
    }
}

/// `/proc/PID/NAME` (NAME with its NUL) in `buf`.
fn proc_path(pid: i32, name: &[u8], buf: &mut [u8; 48]) -> *const c_char {
    let prefix = b"/proc/";
    buf[..prefix.len()].copy_from_slice(prefix);
    let mut at = prefix.len() + digits(pid as u32, &mut buf[prefix.len()..]);
    buf[at] = b'/';
    at += 1;
    buf[at..at + name.len()].copy_from_slice(name);
    buf.as_ptr().cast()
}

/// Writes `n` in decimal at the start of `out`; returns how many digits.
fn digits(mut n: u32, out: &mut [u8]) -> usize {
    let mut d = [0u8; 10];
    let mut len = 0;
    loop {
        d[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        out[i] = d[len - 1 - i];
    }
    len
}

/// The init: see the module documentation. Runs on its own stack, in its own copy of the
/// host's memory or (`NsCtx::shared_vm`) in the host's memory itself.
pub(super) extern "C" fn init_main(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the host's Ctx, with the namespace context and every pointer prepared
    // by `spawn`, alive until the program has exec'd; `sh` is the shared page, alive as long
    // as this process.
    unsafe {
        // What the init still uses once the program runs (the secret, the shared page) is
        // copied here: the host's Ctx is gone by then.
        let own = *(arg as *const Ctx);
        let c = &own;
        let n = &*c.ns.cast::<NsCtx>();
        let sh = &*c.sh;
        let shared_vm = n.shared_vm;
        let pid_ns = n.pid_ns;
        // The host's end is gone when the host is: so is everything here.
        must!(c, Stage::Signals; libc::SYS_prctl, libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0);
        if shared_vm {
            // The thread that cloned us writes the maps (`write_maps`).
            let mut spins = 0;
            loop {
                match sh.maps.load(Ordering::Acquire) {
                    WAIT if spins < SPINS => {
                        spins += 1;
                        std::hint::spin_loop();
                    }
                    WAIT => {
                        ksys!(c; libc::SYS_futex, &sh.maps as *const _, libc::FUTEX_WAIT,
                            WAIT, 0);
                    }
                    GO => break,
                    _ => fail(
                        c,
                        Stage::IdMap,
                        -(sh.maps_errno.load(Ordering::Relaxed) as isize),
                    ),
                }
            }
        } else {
            // A non-dumpable host makes a non-dumpable copy, whose /proc files belong to
            // root: dumpable just long enough to write its own id maps.
            must!(c, Stage::IdMap; libc::SYS_prctl, libc::PR_SET_DUMPABLE, 1, 0, 0);
            write_file(c, c"/proc/self/setgroups", c"deny".as_ptr(), 4);
            write_file(c, c"/proc/self/gid_map", n.gid_map, n.gid_len);
            write_file(c, c"/proc/self/uid_map", n.uid_map, n.uid_len);
            if n.host_dumpable == 0 {
                must!(c, Stage::IdMap; libc::SYS_prctl, libc::PR_SET_DUMPABLE, 0, 0, 0);
            }
        }
        if n.net {
            network(c, n);
        }
        let mut slots = [-1 as RawFd; MAX_EXPOSED];
        for i in 0..n.nmounts {
            (*c.sh).mount_at.store(i as i32, Ordering::Relaxed);
            mount(c, &*n.mounts.add(i), &mut slots);
        }
        let mut cc = *c;
        if !n.landlock.is_null() {
            cc.landlock = ruleset(c, n);
        }
        // The host takes the program's seccomp listener with pidfd_getfd, which a caller
        // without CAP_SYS_PTRACE over the host's namespace (any user but root) may do only on
        // a dumpable process: a copy of a non-dumpable host is made dumpable for the handover
        // (nothing but the program shares it, which has not exec'd yet) and non-dumpable again
        // once the program runs, below, as for the id maps above.
        if !shared_vm && n.host_dumpable == 0 && c.has_filter && c.listener {
            must!(c, Stage::Listener; libc::SYS_prctl, libc::PR_SET_DUMPABLE, 1, 0, 0);
        }
        let args = CloneArgs {
            flags: (libc::CLONE_VM
                | libc::CLONE_VFORK
                | libc::CLONE_FILES
                | libc::CLONE_CHILD_CLEARTID) as u64,
            child_tid: &sh.phase as *const _ as u64,
            exit_signal: libc::SIGCHLD as u64,
            stack: n.g_stack,
            stack_size: n.g_stack_size,
            ..CloneArgs::default()
        };
        let program = clone3(
            &args,
            child_main,
            &cc as *const Ctx as *mut c_void,
            c.secret,
        );
        if program < 0 {
            fail(c, Stage::Command, program);
        }
        // CLONE_VFORK: the program has exec'd or failed by now.
        if sh.failed[0].load(Ordering::Acquire) != 0 {
            ksys!(c; libc::SYS_exit_group, 127);
        }
        // Our memory is a copy of the host's: nothing in the namespace may read it. (Shared
        // with the host, it is non-dumpable already: see `Prepared::new`.)
        if !shared_vm {
            ksys!(c; libc::SYS_prctl, libc::PR_SET_DUMPABLE, 0, 0, 0);
        }
        ksys!(c; libc::SYS_close_range, 0, u32::MAX, 0);
        let all: u64 = !0;
        let mut info = [0u64; 16];
        loop {
            let sig = ksys!(c; libc::SYS_rt_sigtimedwait, &all as *const u64,
                info.as_mut_ptr(), 0, 8);
            if sig == libc::SIGCHLD as isize {
                loop {
                    let mut status: c_int = 0;
                    let pid = ksys!(c; libc::SYS_wait4, -1i32, &mut status as *mut c_int,
                        libc::WNOHANG | libc::__WALL, 0);
                    if pid <= 0 {
                        break;
                    }
                    if pid == program {
                        sh.status.store(status, Ordering::Relaxed);
                        sh.status_set.store(1, Ordering::Release);
                        let code = if libc::WIFEXITED(status) {
                            libc::WEXITSTATUS(status)
                        } else {
                            128 + libc::WTERMSIG(status)
                        };
                        // End the rest of the PID namespace and reap it here, rather than
                        // leave it to the kernel when this init exits: the kernel reaps those
                        // processes itself, and their usage (the writes the file-size check
                        // counts, module `hits`) would reach no one. `kill(-1)` from the PID 1
                        // of a namespace reaches every other process of that namespace and
                        // nothing outside it; an init without a PID namespace of its own sees
                        // the host's processes, so it never sends it. Every signal is blocked
                        // here, so the waits end only with ECHILD.
                        if pid_ns {
                            ksys!(c; libc::SYS_kill, -1i32, libc::SIGKILL);
                            while ksys!(c; libc::SYS_wait4, -1i32, &mut status as *mut c_int,
                                libc::__WALL, 0)
                                > 0
                            {}
                        }
                        ksys!(c; libc::SYS_exit_group, code);
                    }
                }
            } else if sig > 0 {
                ksys!(c; libc::SYS_kill, program, sig);
            }
        }
    }
}

/// Loopback up, the listeners created and sent to the host.
unsafe fn network(c: &Ctx, n: &NsCtx) {
    // SAFETY: raw calls on buffers prepared by the host or on this stack.
    unsafe {
        let s = must!(c, Stage::Network; libc::SYS_socket, libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        must!(c, Stage::Network; libc::SYS_ioctl, s, libc::SIOCSIFFLAGS, n.ifreq.as_ptr());
        ksys!(c; libc::SYS_close, s);
        if n.nlisten == 0 {
            return;
        }
        let mut fds = [0i32; MAX_LISTENERS];
        for (i, fd) in fds.iter_mut().enumerate().take(n.nlisten) {
            let s = must!(c, Stage::Network; libc::SYS_socket, libc::AF_INET,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            let one: c_int = 1;
            must!(c, Stage::Network; libc::SYS_setsockopt, s, libc::SOL_SOCKET,
                libc::SO_REUSEADDR, &one as *const c_int, 4);
            must!(c, Stage::Network; libc::SYS_bind, s, n.listen.add(i),
                std::mem::size_of::<libc::sockaddr_in>());
            must!(c, Stage::Network; libc::SYS_listen, s, 128);
            *fd = s as i32;
        }
        // One message: a byte and a SCM_RIGHTS control message with every listener.
        let mut control = [0u64; 2 + MAX_LISTENERS / 2];
        let len = std::mem::size_of::<libc::cmsghdr>() + 4 * n.nlisten;
        let hdr = control.as_mut_ptr().cast::<libc::cmsghdr>();
        (*hdr).cmsg_len = len as _;
        (*hdr).cmsg_level = libc::SOL_SOCKET;
        (*hdr).cmsg_type = libc::SCM_RIGHTS;
        let data = hdr
            .cast::<u8>()
            .add(std::mem::size_of::<libc::cmsghdr>())
            .cast::<i32>();
        for (i, fd) in fds.iter().enumerate().take(n.nlisten) {
            data.add(i).write_unaligned(*fd);
        }
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = ((len + 7) & !7) as _;
        must!(c, Stage::Network; libc::SYS_sendmsg, n.sock, &msg as *const libc::msghdr, 0);
        for fd in fds.iter().take(n.nlisten) {
            ksys!(c; libc::SYS_close, *fd);
        }
    }
}

/// Makes the mount at `path` read-only (only that bit changes: flags the kernel locked on
/// the mount below, nosuid, nodev..., stay), with its submounts when `recursive`.
unsafe fn read_only(c: &Ctx, path: *const c_char, recursive: bool) {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: a raw call on a C string and a local.
    unsafe {
        must!(c, Stage::Mounts; libc::SYS_mount_setattr, libc::AT_FDCWD, path,
            flags, &attr as *const MountAttr, std::mem::size_of::<MountAttr>());
    }
}

/// One step of the mount plan (`view.rs` orders them).
unsafe fn mount(c: &Ctx, m: &RawMount, slots: &mut [RawFd; MAX_EXPOSED]) {
    // SAFETY: raw calls on C strings prepared by the host.
    unsafe {
        let none = std::ptr::null::<c_char>();
        let hide = (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC) as usize;
        match m.kind {
            PROC => {
                must!(c, Stage::Mounts; libc::SYS_mount, c"proc".as_ptr(), m.path,
                    c"proc".as_ptr(), hide, none);
            }
            TMPFS => {
                must!(c, Stage::Mounts; libc::SYS_mount, c"tmpfs".as_ptr(), m.path,
                    c"tmpfs".as_ptr(), libc::MS_NOSUID | libc::MS_NODEV, m.data);
            }
            DEVPTS => {
                must!(c, Stage::Mounts; libc::SYS_mount, c"devpts".as_ptr(), m.path,
                    c"devpts".as_ptr(), libc::MS_NOSUID | libc::MS_NOEXEC, m.data);
            }
            READ_ONLY | PIN => {
                must!(c, Stage::Mounts; libc::SYS_mount, m.path, m.path, none,
                    libc::MS_BIND | libc::MS_REC, none);
                if m.kind == READ_ONLY {
                    read_only(c, m.path, true);
                }
            }
            CLONE => {
                slots[m.slot] = must!(c, Stage::Mounts; libc::SYS_open_tree, libc::AT_FDCWD,
                    m.path, OPEN_TREE_CLONE | libc::AT_RECURSIVE as usize
                        | libc::O_CLOEXEC as usize) as RawFd;
            }
            MKDIR => {
                let rc = ksys!(c; libc::SYS_mkdirat, libc::AT_FDCWD, m.path, 0o755);
                if rc < 0 && rc != -libc::EEXIST as isize {
                    fail(c, Stage::Mounts, rc);
                }
            }
            FILE => {
                let fd = must!(c, Stage::Mounts; libc::SYS_openat, libc::AT_FDCWD, m.path,
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644);
                ksys!(c; libc::SYS_close, fd);
            }
            SYMLINK => {
                must!(c, Stage::Mounts; libc::SYS_symlinkat, m.data, libc::AT_FDCWD, m.path);
            }
            ATTACH => {
                must!(c, Stage::Mounts; libc::SYS_move_mount, slots[m.slot], c"".as_ptr(),
                    libc::AT_FDCWD, m.path, MOVE_MOUNT_F_EMPTY_PATH);
                ksys!(c; libc::SYS_close, slots[m.slot]);
                if !m.flag {
                    read_only(c, m.path, true);
                }
            }
            SEAL => read_only(c, m.path, m.flag),
            WRITE => {
                let mut len = 0;
                while *m.data.add(len) != 0 {
                    len += 1;
                }
                let fd = must!(c, Stage::Mounts; libc::SYS_openat, libc::AT_FDCWD, m.path,
                    libc::O_WRONLY | libc::O_CLOEXEC, 0);
                must!(c, Stage::Mounts; libc::SYS_write, fd, m.data, len);
                ksys!(c; libc::SYS_close, fd);
            }
            HIDE => {
                let rc = ksys!(c; libc::SYS_mount, c"/dev/null".as_ptr(), m.path, none,
                    libc::MS_BIND, none);
                // Gone since the host listed it: nothing is left there to reach. Refused:
                // a socket of another user in a directory this namespace's root may not
                // search (`/run/user/1000`, another user's session daemon): the job can
                // reach it no more than the mount could, which the lookup below shows;
                // anything the job could look up and the mount could not cover fails.
                if rc == -libc::EACCES as isize {
                    let fd = ksys!(c; libc::SYS_openat, libc::AT_FDCWD, m.path,
                        libc::O_PATH | libc::O_CLOEXEC, 0);
                    if fd >= 0 {
                        ksys!(c; libc::SYS_close, fd);
                        fail(c, Stage::Mounts, rc);
                    }
                } else if rc < 0 && rc != -libc::ENOENT as isize {
                    fail(c, Stage::Mounts, rc);
                }
            }
            COVER => {
                let rc = ksys!(c; libc::SYS_mount, m.data, m.path, none, libc::MS_BIND, none);
                // Gone since the host looked: nothing is left there to read.
                if rc < 0 && rc != -libc::ENOENT as isize {
                    fail(c, Stage::Mounts, rc);
                }
            }
            _ => fail(c, Stage::Mounts, -libc::EINVAL as isize),
        }
    }
}

/// The job's Landlock ruleset rebuilt here, with the namespace's own `/proc` (read) and
/// `/tmp` (every right) added: a rule binds an inode, and these did not exist when the
/// cached ruleset was built (rules on the paths they cover do not reach across a mount).
unsafe fn ruleset(c: &Ctx, n: &NsCtx) -> RawFd {
    // SAFETY: `landlock` points to rules the host keeps alive until the program has exec'd;
    // their descriptors are open in our (copied) table.
    unsafe {
        let r = &*n.landlock;
        let fd = must!(c, Stage::Paths; libc::SYS_landlock_create_ruleset,
            r.attr.as_ptr(), r.attr_size, 0) as RawFd;
        let add = |parent_fd: RawFd, allowed_access: u64| {
            let rule = PathBeneath {
                allowed_access,
                parent_fd,
            };
            must!(c, Stage::Paths; libc::SYS_landlock_add_rule, fd, 1,
                &rule as *const PathBeneath, 0);
        };
        for &(parent, access) in r.paths.iter() {
            add(parent, access);
        }
        for &(port, access) in r.ports.iter() {
            let rule = [access, port];
            must!(c, Stage::Paths; libc::SYS_landlock_add_rule, fd, 2, rule.as_ptr(), 0);
        }
        let places = [
            (c"/", r.read, n.read_root),
            (c"/proc", r.read, true),
            (c"/tmp", r.all, n.private_tmp),
            (c"/dev", r.read, n.fresh_dev),
            (c"/dev/pts", r.dev, n.fresh_dev),
            (c"/dev/shm", r.all, n.fresh_dev),
        ];
        for (path, access, _) in places.into_iter().filter(|p| p.2) {
            let dir = ksys!(c; libc::SYS_openat, libc::AT_FDCWD, path.as_ptr(),
                libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY, 0);
            if dir >= 0 {
                add(dir as RawFd, access);
                ksys!(c; libc::SYS_close, dir);
            }
        }
        fd
    }
}

#[cfg(test)]
mod tests {
    use super::super::{spawn, Namespaces, Spec};
    use std::ffi::CString;
    use std::io::{Read, Write};
    use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
    use std::os::fd::{AsRawFd, OwnedFd};

    /// Runs `python3 -c script` with `ns` and `listen`; returns the spawn's listeners and the
    /// program's wait status (as the init recorded it) once `after` has run.
    fn python(
        script: &str,
        ns: Option<&Namespaces>,
        listen: &[SocketAddrV4],
        after: impl FnOnce(&[OwnedFd]),
    ) -> (i32, String) {
        let path = CString::new("/usr/bin/python3").unwrap();
        let argv = [
            path.clone(),
            CString::new("-c").unwrap(),
            CString::new(script).unwrap(),
        ];
        let envp = [CString::new("PATH=/usr/bin:/bin").unwrap()];
        let (r, w) = super::super::pipe().unwrap();
        let w = super::above_stdio(w).unwrap();
        let null =
            super::above_stdio(OwnedFd::from(std::fs::File::open("/dev/null").unwrap())).unwrap();
        let spec = Spec {
            path: &path,
            argv: &argv,
            envp: &envp,
            cwd: None,
            stdio: [null.as_raw_fd(), w.as_raw_fd(), w.as_raw_fd()],
            report: None,
            cgroup: None,
            join_v1: &[],
            limits: &[],
            landlock: None,
            filter: None,
            listener: false,
            spawner: None,
            namespaces: ns,
            listen,
            landlock_rules: None,
        };
        let spawned = spawn(&spec).expect("spawn");
        drop(w);
        after(&spawned.listeners);
        let mut out = String::new();
        std::fs::File::from(r).read_to_string(&mut out).unwrap();
        let mut status = 0;
        // SAFETY: reaps our own child.
        unsafe { libc::waitpid(spawned.pid, &mut status, 0) };
        let status = spawned
            .init
            .as_ref()
            .and_then(|i| i.program_status())
            .unwrap_or(status);
        (status, out)
    }

    /// Connects to 127.0.0.1:PORT and sends "hello", printing what happened.
    fn connect_script(port: u16) -> String {
        format!(
            "import socket\n\
             try:\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=5)\n    \
             s.sendall(b'hello'); s.close(); print('connected')\n\
             except OSError as e:\n    print('refused', e.errno)\n"
        )
    }

    #[test]
    fn listeners_made_inside_a_network_namespace_reach_the_host_only_through_their_fd() {
        let ns = Namespaces {
            net: true,
            ..Namespaces::default()
        };
        // The port inside is free to choose: nothing else lives in the new namespace.
        let inside = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 47_001);
        let (status, out) = python(&connect_script(47_001), Some(&ns), &[inside], |l| {
            assert_eq!(l.len(), 1);
            let listener = TcpListener::from(l[0].try_clone().unwrap());
            assert_eq!(
                listener.local_addr().unwrap().to_string(),
                "127.0.0.1:47001"
            );
            let (mut conn, _) = listener.accept().unwrap();
            let mut got = String::new();
            conn.read_to_string(&mut got).unwrap();
            assert_eq!(got, "hello");
            // The host's own loopback has no such listener: the socket lives in the
            // sandbox's namespace only.
            assert!(TcpStream::connect(inside).is_err());
        });
        assert_eq!((status, out.as_str()), (0, "connected\n"));
    }

    #[test]
    fn a_host_loopback_listener_is_unreachable_from_a_network_namespace() {
        let host = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = host.local_addr().unwrap().port();
        let ns = Namespaces {
            net: true,
            ..Namespaces::default()
        };
        let (status, out) = python(&connect_script(port), Some(&ns), &[], |_| {});
        assert_eq!(
            (status, out.as_str()),
            (0, format!("refused {}\n", libc::ECONNREFUSED).as_str())
        );
        // Control: without the namespace the same program reaches it.
        host.set_nonblocking(false).unwrap();
        let (status, out) = python(&connect_script(port), None, &[], |_| {
            let (mut c, _) = host.accept().unwrap();
            let _ = c.write_all(b"");
        });
        assert_eq!((status, out.as_str()), (0, "connected\n"));
    }

    #[test]
    fn the_init_conveys_the_programs_exit_code_and_signal() {
        let ns = Namespaces {
            isolate: true,
            ..Namespaces::default()
        };
        let (status, out) = python(
            "import os; print(os.getpid(), os.getuid() == os.geteuid()); raise SystemExit(7)",
            Some(&ns),
            &[],
            |_| {},
        );
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 7,
            "{status:#x}"
        );
        assert_eq!(out, "2 True\n");
        let (status, _) = python(
            "import os; os.kill(os.getpid(), 31)",
            Some(&ns),
            &[],
            |_| {},
        );
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == 31,
            "{status:#x}"
        );
    }

    /// Processes of this host whose command line contains `tag`, as (pid, command line).
    fn tagged(tag: &str) -> Vec<(i32, String)> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
                let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                cmd.contains(tag).then_some((pid, cmd))
            })
            .collect()
    }

    #[test]
    fn orphans_end_with_the_init_and_outlive_a_plain_spawn() {
        // The program starts a process in a session of its own (out of its process group) that
        // closes its descriptors, and exits at once: the orphan is re-parented to the init.
        // When the program ends the init exits, and the kernel kills everything left in a PID
        // namespace whose init is gone. No cgroup and no tree walk here (this spawn has no
        // containment): the namespace alone ends it.
        let tag = format!("4{}7", std::process::id());
        let script = format!(
            "import subprocess\n\
             subprocess.Popen(['/bin/sleep', '{tag}'], start_new_session=True,\n    \
             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n\
             print('started')\n"
        );
        let ns = Namespaces {
            isolate: true,
            ..Namespaces::default()
        };
        let (status, out) = python(&script, Some(&ns), &[], |_| {});
        assert_eq!((status, out.as_str()), (0, "started\n"));
        assert_eq!(tagged(&tag), Vec::new(), "the orphan outlived the init");
        // Control: the same program without the namespaces leaves its orphan running.
        let (status, out) = python(&script, None, &[], |_| {});
        assert_eq!((status, out.as_str()), (0, "started\n"));
        let left = tagged(&tag);
        for (pid, _) in &left {
            // SAFETY: kill on a pid we just found running our tagged sleep.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn an_init_killed_before_the_command_starts_is_an_error_not_a_hang() {
        // Cloned here (one-shot), and by a profile's spawner thread (exec --json, serve).
        init_killed_before_the_command(None);
        let policy = crate::policy::profile::Profile::builtin("shell")
            .unwrap()
            .policy(crate::policy::NATIVE, None)
            .unwrap()
            .unwrap();
        let spawner =
            crate::exec::spawner::Spawner::for_profile("init-killed-test", &policy).unwrap();
        init_killed_before_the_command(Some(spawner));
    }

    #[test]
    fn an_init_sharing_the_hosts_memory_starts_reports_and_dies_alone() {
        // A root host that is non-dumpable (as `run`, `exec` and `serve` make themselves)
        // clones an init sharing its memory, and writes its id maps itself. Other users keep
        // the copy, which the tests above cover.
        if crate::sys::euid() != 0 {
            eprintln!("skipped: only a root host shares its memory with the init");
            return;
        }
        crate::sys::set_not_dumpable().unwrap();
        let ns = Namespaces {
            isolate: true,
            net: true,
            ..Namespaces::default()
        };
        let (status, out) = python(
            "import os; print(os.getpid(), open('/proc/self/uid_map').read().split()); \
             raise SystemExit(7)",
            Some(&ns),
            &[],
            |_| {},
        );
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 7,
            "{status:#x}"
        );
        assert_eq!(out, "2 ['0', '0', '1']\n");
        // An init killed before it starts anything: an error, not a hang (its stack is freed
        // only once it is gone).
        init_killed_before_the_command(None);
        let policy = crate::policy::profile::Profile::builtin("shell")
            .unwrap()
            .policy(crate::policy::NATIVE, None)
            .unwrap()
            .unwrap();
        let spawner =
            crate::exec::spawner::Spawner::for_profile("init-shared-test", &policy).unwrap();
        init_killed_before_the_command(Some(spawner));
    }

    fn init_killed_before_the_command(spawner: Option<&'static crate::exec::spawner::Spawner>) {
        // The init is cloned into a frozen cgroup, so it is killed before it runs a single
        // instruction: the command never starts and nothing will release the word the host
        // waits on.
        let mut group =
            match crate::exec::contain::Group::new(crate::exec::Containment::Cgroup, true) {
                Ok(g) => g,
                // Only root has a writable cgroup v2 on machines like this one (CI runs as root).
                Err(e) if crate::sys::euid() != 0 => {
                    eprintln!("skipped: no cgroup v2 to hold the init frozen for this user: {e}");
                    return;
                }
                Err(e) => panic!("a cgroup v2 to hold the init frozen: {e}"),
            };
        let dir = group.dir_fd().expect("the cgroup's directory");
        let file = |name: &str| format!("/proc/self/fd/{dir}/{name}");
        std::fs::write(file("cgroup.freeze"), "1").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let path = CString::new("/bin/true").unwrap();
            let argv = [path.clone()];
            let null = super::above_stdio(OwnedFd::from(
                std::fs::File::options()
                    .read(true)
                    .write(true)
                    .open("/dev/null")
                    .unwrap(),
            ))
            .unwrap();
            let ns = Namespaces {
                isolate: true,
                ..Namespaces::default()
            };
            let fd = null.as_raw_fd();
            let spec = Spec {
                path: &path,
                argv: &argv,
                envp: &[],
                cwd: None,
                stdio: [fd, fd, fd],
                report: None,
                cgroup: Some(dir),
                join_v1: &[],
                limits: &[],
                landlock: None,
                filter: None,
                listener: false,
                spawner,
                namespaces: Some(&ns),
                listen: &[],
                landlock_rules: None,
            };
            let _ = tx.send(spawn(&spec).map(|s| s.pid).map_err(|e| format!("{e:?}")));
        });
        let mut init = None;
        for _ in 0..6000 {
            let procs = std::fs::read_to_string(file("cgroup.procs")).unwrap();
            init = procs.lines().next().map(|p| p.parse::<i32>().unwrap());
            if init.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let init = init.expect("no init in the frozen cgroup");
        // SAFETY: kill on the init we just found in our own cgroup.
        assert_eq!(unsafe { libc::kill(init, libc::SIGKILL) }, 0);
        // A bound that only turns a hang into a failure.
        let res = rx.recv_timeout(std::time::Duration::from_secs(60));
        std::fs::write(file("cgroup.freeze"), "0").unwrap();
        group.finish();
        let err = res
            .expect("the host still waits for a command that will never start")
            .expect_err("a spawn whose init was killed succeeded");
        assert!(
            err.contains("ended before"),
            "spawner {}: {err}",
            spawner.is_some()
        );
    }
}
