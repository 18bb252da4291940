//! The namespaces a spawn creates and the mount plan its init carries out in them: what the
//! isolation and network layers plan and the spawn path executes (a leaf below all three).

use std::ffi::CString;

/// The namespaces of a spawn and what the init does in them before starting the program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Namespaces {
    /// User, PID, mount, IPC and UTS namespaces (the isolation layer).
    pub isolate: bool,
    /// A network namespace whose only interface is loopback, up.
    pub net: bool,
    /// Mounts made in the new mount namespace, in order (needs `isolate`).
    pub mounts: Vec<Mount>,
    /// The mounts include a private `/tmp` (which the job's Landlock rules then cover).
    pub private_tmp: bool,
}

/// One step of the mount plan in the new mount namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mount {
    /// A fresh `proc` for the new PID namespace at this path.
    Proc(CString),
    /// Opens this directory (`O_PATH`) into slot N, to bind it back once it is hidden.
    Open(CString, usize),
    /// An empty tmpfs (mode 1777) at this path.
    Tmpfs(CString),
    /// Creates this directory (it may exist).
    Mkdir(CString),
    /// Binds the directory of slot N at this path: read-only unless the flag says writable.
    Expose(CString, usize, bool),
    /// This path bound over itself read-only (recursively).
    ReadOnly(CString),
    /// This path bound over itself, writable: it becomes a mount point, which cannot be
    /// removed or renamed from inside.
    Pin(CString),
}
