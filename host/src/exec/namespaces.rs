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
    /// The mounts build a fresh `/dev` (whose directory, terminals and shared memory the
    /// job's Landlock rules then cover).
    pub fresh_dev: bool,
    /// The mounts cover every deny path that exists (module `conceal`): the job's Landlock
    /// rules grant reading the whole view instead of carving around them.
    pub read_root: bool,
}

/// One step of the mount plan in the new mount namespace (see `view.rs` for the order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mount {
    /// A fresh `proc` for the new PID namespace at this path.
    Proc(CString),
    /// A detached copy of the tree at this path (`open_tree(OPEN_TREE_CLONE)`, recursive),
    /// kept in slot N to be attached later: it keeps the flags it has now.
    Clone(CString, usize),
    /// A tmpfs at this path, with these options (mode, size, inode count).
    Tmpfs(CString, CString),
    /// A devpts instance of its own at this path, with these options (`newinstance`...).
    Devpts(CString, CString),
    /// Creates this directory (it may exist).
    Mkdir(CString),
    /// Creates this empty file (a mount point for a device node).
    File(CString),
    /// A symbolic link: target, then the link's path.
    Symlink(CString, CString),
    /// Attaches the copy of slot N at this path: read-only unless the flag says writable.
    Attach(CString, usize, bool),
    /// Makes the mount at this path read-only: with its submounts when the flag is set.
    Seal(CString, bool),
    /// Writes this value to this file (a sysctl of the new namespaces).
    Write(CString, CString),
    /// Covers this path (a host socket) with `/dev/null`; gone meanwhile is not an error.
    Hide(CString),
    /// Binds the second path (an empty file or directory of mode 000) over the first (a deny
    /// path); gone meanwhile is not an error.
    Cover(CString, CString),
    /// This path bound over itself read-only (recursively).
    ReadOnly(CString),
    /// This path bound over itself, writable: it becomes a mount point, which cannot be
    /// removed or renamed from inside.
    Pin(CString),
}
