//! The places a contained job may change and reach (its writable places, the unix sockets
//! and TCP ports it may connect to), and why a call outside them was refused.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The places where a job may change metadata: its writable places, resolved once (the
/// names the kernel gives descriptors are resolved too).
#[derive(Clone, Debug)]
pub(crate) struct Places {
    roots: Vec<PathBuf>,
    /// Host unix sockets the request allows (`--allow-unix-socket`).
    sockets: Vec<PathBuf>,
    /// The TCP ports the request allows (`--allow-port`), when it limits them.
    pub(super) ports: Option<Vec<u16>>,
    /// For a job of the isolated tier: its paths are resolved in its own mount namespace.
    pub(super) view: Option<View>,
    /// Paths the job may not open at all (the deny list: credentials and the request's own),
    /// which Landlock's carve-out keeps out of the contained tier's writable places.
    deny: Vec<PathBuf>,
    /// The host's `/dev/pts` is granted to the job (a contained job where the host may not
    /// take its descriptors, so no terminal peer is opened for it: module `claims`).
    host_terminals: bool,
    /// When the job (or the session) began, as a birth time: a file born since has all its
    /// names where the job may write ([`Places::shared`]).
    since: (i64, u32),
}

/// What the supervisor knows of an isolated-tier job's constructed view (docs/isolation.md):
/// its paths name objects of its own mount namespace, reached through `/proc/TID/root`.
#[derive(Clone, Debug, Default)]
pub(crate) struct View {
    /// The job's private tmpfs mounts (`/tmp`, `/dev/shm`): they exist only in its namespace,
    /// so every socket on them is the job's own.
    pub(crate) private: Vec<std::ffi::CString>,
    /// The job has a network namespace of its own, which confines abstract unix addresses:
    /// they are connected as given. Without one they are refused, as in the contained tier
    /// (the host connecting for the job cannot keep Landlock's scope).
    pub(crate) own_network: bool,
    /// The devices of the `private` mounts, read at the job's first check: they stay those
    /// for the job's life.
    pub(crate) devices: std::sync::OnceLock<Vec<libc::dev_t>>,
}

impl View {
    /// The devices of the job's private tmpfs mounts, from its root `root`: kept once every
    /// one was read (a mount that could not be read is looked up again next time).
    pub(super) fn private_devices(&self, root: BorrowedFd<'_>) -> Vec<libc::dev_t> {
        if let Some(d) = self.devices.get() {
            return d.clone();
        }
        let devices: Vec<libc::dev_t> = self
            .private
            .iter()
            .filter_map(|p| crate::sys::emulate::open_in_root(root, p, 0).ok())
            .filter_map(|d| crate::sys::emulate::fstat(std::os::fd::AsFd::as_fd(&d)).ok())
            .map(|st| st.st_dev)
            .collect();
        if devices.len() == self.private.len() {
            let _ = self.devices.set(devices.clone());
        }
        devices
    }
}

impl Places {
    /// The writable places of a job's layer, the unix sockets and TCP ports it may reach.
    pub(crate) fn new(writable: &[PathBuf], sockets: &[PathBuf], ports: Option<&[u16]>) -> Places {
        Places {
            roots: writable
                .iter()
                .map(|w| std::fs::canonicalize(w).unwrap_or_else(|_| w.clone()))
                .collect(),
            sockets: sockets.to_vec(),
            ports: ports.map(<[u16]>::to_vec),
            view: None,
            deny: Vec::new(),
            host_terminals: false,
            since: now(),
        }
    }

    /// The same places with the deny list `deny`: the paths that exist now, resolved once
    /// (Landlock's carve-out, like the view's covers, keeps out only those that existed when
    /// the job was planned).
    pub(crate) fn with_denied(mut self, deny: &[PathBuf]) -> Places {
        self.deny = deny
            .iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .collect();
        self
    }

    /// The same places for a job that Landlock grants the host's `/dev/pts`.
    pub(crate) fn with_host_terminals(mut self, granted: bool) -> Places {
        self.host_terminals = granted;
        self
    }

    /// Whether the object `fd` holds lies beneath a path of the deny list.
    pub(super) fn denied(&self, fd: BorrowedFd<'_>) -> bool {
        if self.deny.is_empty() {
            return false;
        }
        let name = name_of(fd);
        self.deny.iter().any(|d| name.starts_with(d))
    }

    /// Whether the device `s` is one the job is granted: the nodes every program may use
    /// (`landlock::DEVICES`, bound into the view as they are) and, in the isolated tier, the
    /// devices of its private mounts (its own terminals).
    pub(super) fn grants_device(
        &self,
        root: Option<BorrowedFd<'_>>,
        s: &crate::sys::emulate::Shape,
    ) -> bool {
        if let (Some(root), Some(view)) = (root, self.view.as_ref()) {
            if view
                .private_devices(root)
                .contains(&libc::makedev(s.dev.0, s.dev.1))
            {
                return true;
            }
        }
        granted_devices().contains(&(s.dev, s.ino))
            || (self.host_terminals && host_terminals_device() == Some(s.dev))
    }

    /// Whether the object `s` is a regular file with names the job may not reach: more than
    /// one link, and born before the job (or on a file system that keeps no birth time). A
    /// job cannot give a file from outside its writable places a name inside them (Landlock
    /// refuses such a link, `EXDEV`, and the view's mounts are other mounts), so a file born
    /// during the job has all its names within them; an older one may have one anywhere
    /// (a uv venv's packages, pnpm's store, a local clone's objects, `cp -al`).
    pub(super) fn shared(&self, s: &crate::sys::emulate::Shape) -> bool {
        s.mode & libc::S_IFMT == libc::S_IFREG
            && s.nlink > 1
            && s.born.is_none_or(|b| b < self.since)
    }

    /// The root of the job's mount namespace, where its paths are resolved: for a job of the
    /// isolated tier, the thread's `/proc/TID/root`; `None` where the job's root is the host's.
    pub(super) fn root_of(
        &self,
        t: &super::target::Thread,
    ) -> std::io::Result<Option<std::os::fd::OwnedFd>> {
        match self.view {
            Some(_) => t.root().map(Some),
            None => Ok(None),
        }
    }

    /// Whether the object `fd` holds lies in one of the writable places, seen from the job's
    /// root `root` in the isolated tier (`None`: the job's root is the host's). In the
    /// isolated tier an object on one of the job's private mounts is its own; one elsewhere is
    /// placed by its name in the job's namespace, which must still lead to it.
    pub(super) fn writable(
        &self,
        root: Option<BorrowedFd<'_>>,
        fd: BorrowedFd<'_>,
    ) -> Result<(), Why> {
        let (Some(root), Some(view)) = (root, self.view.as_ref()) else {
            return self.locate(fd);
        };
        let st = crate::sys::emulate::fstat(fd).map_err(|_| Why::Outside(None))?;
        if view.private_devices(root).contains(&st.st_dev) {
            return Ok(());
        }
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|_| Why::Outside(None))?;
        let bytes = link.as_os_str().as_bytes();
        if let Some(answer) = nameless(bytes, &st) {
            return answer;
        }
        if !self.holds(&link) || !leads_to(root, bytes, &st) {
            return Err(Why::Outside(Some(link)));
        }
        Ok(())
    }

    /// The same places for a job of the isolated tier, whose paths are resolved in its mount
    /// namespace (module `inview`).
    pub(crate) fn in_view(mut self, view: View) -> Places {
        self.view = Some(view);
        self
    }

    /// Whether the socket file `st` is one the request allows by name.
    pub(super) fn allows_socket(&self, st: &libc::stat) -> bool {
        self.sockets.iter().any(|p| same_inode(p, st))
    }

    pub(super) fn holds(&self, path: &Path) -> bool {
        self.roots.iter().any(|r| path.starts_with(r))
    }

    /// Whether the object `fd` holds lies in one of the places; else the name it has.
    pub(super) fn locate(&self, fd: BorrowedFd<'_>) -> Result<(), Why> {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|_| Why::Outside(None))?;
        let bytes = link.as_os_str().as_bytes();
        if !bytes.starts_with(b"/") {
            return Ok(());
        }
        let st = crate::sys::emulate::fstat(fd).map_err(|_| Why::Outside(None))?;
        if let Some(answer) = nameless(bytes, &st) {
            return answer;
        }
        if !self.holds(&link) {
            return Err(Why::Outside(Some(link)));
        }
        // The name was the object's when it was read: it still leads to the same inode (a
        // rename meanwhile fails closed).
        match std::fs::symlink_metadata(&link) {
            Ok(m) if m.dev() == st.st_dev && m.ino() == st.st_ino => Ok(()),
            _ => Err(Why::Outside(Some(link))),
        }
    }
}

/// Why a call was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// The object lies outside the writable places (its name, when it has one).
    Outside(Option<PathBuf>),
    /// The thread's credentials are not the host's (it changed user or dropped capabilities),
    /// so the host cannot act for it.
    Credentials,
    /// The thread's memory or descriptors could not be read (it made itself non-dumpable).
    Unreadable,
    /// A unix socket outside the writable places that the request does not allow (its name).
    Socket(PathBuf),
    /// An abstract unix address: Landlock's scope could not be kept for it.
    Abstract,
    /// A TCP port the request does not allow.
    Port(u16),
    /// A write or metadata change through a name in the writable places to a file that has
    /// other names (hard links) the job may not reach (its name).
    Linked(PathBuf),
    /// A metadata change only capabilities allow (another owner; a file another user owns),
    /// asked by a thread of the caller's user that holds fewer capabilities than the caller:
    /// root's job in the isolated tier holds none (its init drops them), so what root could do
    /// outside is refused inside (the file's name).
    Capabilities(PathBuf),
}

/// A call the emulation refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The call's number.
    pub nr: u32,
    /// Why.
    pub why: Why,
}

/// The answer for an object whose kernel name `name` is no path: `pipe:[N]`, `socket:[N]`,
/// `anon_inode:...` are reachable by no path; a file unlinked (`... (deleted)`) is harmless
/// once no other name leads to it. `None` for a path.
fn nameless(name: &[u8], st: &libc::stat) -> Option<Result<(), Why>> {
    if !name.starts_with(b"/") {
        return Some(Ok(()));
    }
    let gone = name.strip_suffix(b" (deleted)")?;
    Some(if st.st_nlink == 0 {
        Ok(())
    } else {
        Err(Why::Outside(Some(
            Path::new(std::ffi::OsStr::from_bytes(gone)).to_path_buf(),
        )))
    })
}

/// Whether `name`, resolved in the job's namespace from its root `root`, still leads to the
/// object `st` (the name was the object's when the kernel gave it; a rename meanwhile fails
/// closed).
pub(super) fn leads_to(root: BorrowedFd<'_>, name: &[u8], st: &libc::stat) -> bool {
    std::ffi::CString::new(name)
        .ok()
        .and_then(|c| crate::sys::emulate::open_in_root(root, &c, libc::O_NOFOLLOW).ok())
        .and_then(|o| crate::sys::emulate::fstat(std::os::fd::AsFd::as_fd(&o)).ok())
        .is_some_and(|a| a.st_dev == st.st_dev && a.st_ino == st.st_ino)
}

/// The device and inode of each of `landlock::DEVICES`, read once.
fn granted_devices() -> &'static [((u32, u32), u64)] {
    static GRANTED: std::sync::OnceLock<Vec<((u32, u32), u64)>> = std::sync::OnceLock::new();
    GRANTED.get_or_init(|| {
        crate::landlock::DEVICES
            .iter()
            .filter_map(|d| std::ffi::CString::new(*d).ok())
            .filter_map(|c| crate::sys::emulate::open_path(None, &c, 0).ok())
            .filter_map(|f| crate::sys::emulate::shape(std::os::fd::AsFd::as_fd(&f)).ok())
            .map(|s| (s.dev, s.ino))
            .collect()
    })
}

/// The device of the host's `/dev/pts` mount, read once.
fn host_terminals_device() -> Option<(u32, u32)> {
    static DEV: std::sync::OnceLock<Option<(u32, u32)>> = std::sync::OnceLock::new();
    *DEV.get_or_init(|| {
        let f = crate::sys::emulate::open_path(None, c"/dev/pts", 0).ok()?;
        crate::sys::emulate::shape(std::os::fd::AsFd::as_fd(&f))
            .ok()
            .map(|s| s.dev)
    })
}

/// Now as a birth time (seconds and nanoseconds since the epoch).
fn now() -> (i64, u32) {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() as i64, d.subsec_nanos())
}

/// The name the kernel keeps for the object `fd` holds (from the job's root in the isolated
/// tier), for a refusal to show.
pub(super) fn name_of(fd: BorrowedFd<'_>) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default()
}

/// Whether `st` (a socket's inode) is the one at `path`.
fn same_inode(path: &Path, st: &libc::stat) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.dev() == st.st_dev && m.ino() == st.st_ino)
}
