//! The namespaces a spawn creates and the mount plan its init carries out in them: what the
//! isolation and network layers plan and the spawn path executes (a leaf below all three).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

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

impl Mount {
    /// What the step does, and where: for naming the step that failed.
    pub(crate) fn describe(&self) -> String {
        let (what, path) = match self {
            Mount::Proc(p) => ("proc at", p),
            Mount::Clone(p, _) => ("copy of", p),
            Mount::Tmpfs(p, _) => ("tmpfs at", p),
            Mount::Devpts(p, _) => ("devpts at", p),
            Mount::Mkdir(p) => ("directory", p),
            Mount::File(p) => ("file", p),
            Mount::Symlink(_, p) => ("link", p),
            Mount::Attach(p, _, _) => ("copy attached at", p),
            Mount::Seal(p, _) => ("read-only", p),
            Mount::Write(p, _) => ("write to", p),
            Mount::Hide(p) => ("cover of the socket", p),
            Mount::Cover(p, _) => ("cover of", p),
            Mount::ReadOnly(p) => ("read-only bind of", p),
            Mount::Pin(p) => ("bind of", p),
        };
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(path.as_bytes()));
        format!("{what} {}", crate::escape::path(path))
    }
}

#[cfg(test)]
mod describe_tests {
    use super::*;

    #[test]
    fn a_failed_mount_step_is_named_with_its_path_escaped() {
        let c = |s: &str| CString::new(s).unwrap();
        assert_eq!(
            Mount::ReadOnly(c("/usr")).describe(),
            format!(
                "read-only bind of {}",
                crate::escape::path(std::path::Path::new("/usr"))
            )
        );
        // A hostile name (a newline, bytes that are not UTF-8) is escaped, not printed raw.
        let odd = CString::new(b"/tmp/a\nb\xff".to_vec()).unwrap();
        let said = Mount::Attach(odd, 0, true).describe();
        assert!(said.starts_with("copy attached at "), "{said}");
        assert!(!said.contains('\n'), "{said}");
        for m in [
            Mount::Proc(c("/proc")),
            Mount::Clone(c("/w"), 1),
            Mount::Tmpfs(c("/tmp"), c("mode=1777")),
            Mount::Devpts(c("/dev/pts"), c("newinstance")),
            Mount::Mkdir(c("/d")),
            Mount::File(c("/f")),
            Mount::Symlink(c("t"), c("/l")),
            Mount::Seal(c("/s"), true),
            Mount::Write(c("/proc/sys/x"), c("1")),
            Mount::Hide(c("/run/s.sock")),
            Mount::Cover(c("/secret"), c("/empty")),
            Mount::Pin(c("/p")),
        ] {
            assert!(m.describe().contains('/'), "{}", m.describe());
        }
    }
}
