//! Cgroups made inside a request's own cgroups (a session gives a command with limits of its
//! own a child cgroup of the session's, module `session::cgroups`).
//!
//! The engine owns the request's cgroups and removes (or pools) them when the job ends; a
//! cgroup with children can be neither removed nor reused (its limits and, in v2, its
//! `cgroup.subtree_control` would carry over to the next request). So whoever nests cgroups
//! marks the request's directory here first, and the engine, once every process is gone,
//! removes the children it finds there and never pools a marked directory. Directories not
//! marked cost the engine one lookup in a set, no `readdir`.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Where a limit of a request is held: the request cgroup's directory in the hierarchy that
/// has the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LimitDir {
    /// The controller: memory or pids.
    pub controller: super::cgroup1::Controller,
    /// The request's cgroup in that hierarchy.
    pub dir: PathBuf,
    /// The hierarchy is cgroup v2 (else v1).
    pub v2: bool,
}

fn marked() -> &'static Mutex<HashSet<PathBuf>> {
    static MARKED: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    MARKED.get_or_init(Default::default)
}

/// Marks `dir` (a request's cgroup) as holding cgroups made below it.
pub(crate) fn mark(dir: &Path) {
    marked()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(dir.to_path_buf());
}

/// Whether `dir` was marked (its processes are found in the cgroups below it too).
pub(crate) fn is_marked(dir: &Path) -> bool {
    marked()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(dir)
}

/// Once every process of the request is gone: when `dir` was marked, removes the cgroups
/// below it (deepest first) and returns `true` (the directory is then not to be reused).
pub(crate) fn release(dir: &Path) -> bool {
    let was = marked()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(dir);
    if was {
        remove_below(dir);
    }
    was
}

/// Removes every cgroup directory below `dir` (cgroup files cannot be removed, and need not
/// be: `rmdir` of an empty cgroup takes them with it).
fn remove_below(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            let p = e.path();
            remove_below(&p);
            if let Err(error) = fs::remove_dir(&p) {
                tracing::warn!(cgroup = %p.display(), %error, "cannot remove a nested cgroup");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A marked directory loses what was made below it (plain directories stand in for
    /// cgroups: `rmdir` is what removes either); an unmarked one is left as it is, which is
    /// also the control that the removal comes from the mark.
    #[test]
    fn only_a_marked_directory_is_emptied_of_its_nested_cgroups() {
        let t = tempfile::tempdir().unwrap();
        let session = t.path().join("sandbox-exec-1-0");
        let other = t.path().join("sandbox-exec-1-1");
        for d in [
            session.join("resident"),
            session.join("cmd-3"),
            other.join("cmd-4"),
        ] {
            fs::create_dir_all(d).unwrap();
        }
        mark(&session);
        assert!(is_marked(&session) && !is_marked(&other));
        assert!(release(&session));
        assert!(!release(&other));
        assert!(!session.join("resident").exists() && !session.join("cmd-3").exists());
        assert!(
            session.exists(),
            "the request's own cgroup is the engine's to remove"
        );
        assert!(other.join("cmd-4").exists());
        // Released once: the mark is gone.
        assert!(!is_marked(&session) && !release(&session));
    }
}
