//! The control set of a repository: the files whose content decides what git runs (its
//! configuration, hooks directories, redirections, and those of its worktrees, submodules and
//! the repositories its index has as gitlinks), found from a workspace as git finds them,
//! without walking the work tree. `git_guard` snapshots and checks them.

use super::git_config;
use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Larger control files are not read (git's own are a few KiB): treated as unreadable.
pub(super) const MAX_FILE: u64 = 4 << 20;

/// An index is read up to this size (a repository of 100,000 files has one of about 10 MiB).
const MAX_INDEX: u64 = 256 << 20;

/// At most this many directories of `.git/modules` and `.git/worktrees` are looked at.
const MAX_DIRS: usize = 4096;

/// How deep includes are followed (git's own limit is 10).
const MAX_INCLUDE_DEPTH: usize = 10;

/// A control file as read: absent, its bytes, or something that is not a regular file of a
/// readable size (a directory, a FIFO, a device, a huge file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Content {
    Absent,
    Bytes(Vec<u8>),
    Other,
}

/// The control set of the repository a workspace is in.
#[derive(Clone, Debug, Default)]
pub(super) struct Controls {
    /// The `.git` found upwards from the workspace.
    pub dot_git: Option<PathBuf>,
    /// The common git directory (canonical when it exists).
    pub common: Option<PathBuf>,
    /// Files in git's configuration syntax.
    pub configs: BTreeSet<PathBuf>,
    /// `commondir` files of git directories.
    pub commondirs: BTreeSet<PathBuf>,
    /// `gitdir:` files in work trees (the workspace's own, worktrees', submodules').
    pub links: BTreeSet<PathBuf>,
    /// The git directories' own hooks directories.
    pub hooks: BTreeSet<PathBuf>,
    /// Directories `core.hooksPath` names: checked only as the snapshot found them (one the
    /// command named is removed as a key; what it points to is the command's own directory,
    /// maybe a tracked one, and is left alone).
    pub hooks_paths: BTreeSet<PathBuf>,
    /// The files `include.path` and `includeIf.*.path` name, likewise.
    pub included: BTreeSet<PathBuf>,
}

/// A control file's content, at most [`MAX_FILE`] bytes, opened without waiting on a FIFO or
/// taking a terminal.
pub(super) fn read(path: &Path) -> Content {
    read_at_most(path, MAX_FILE)
}

/// [`read`] with another limit.
pub(super) fn read_at_most(path: &Path, max: u64) -> Content {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A dangling symlink is something, not nothing.
            return if path.symlink_metadata().is_ok() {
                Content::Other
            } else {
                Content::Absent
            };
        }
        Err(_) => return Content::Other,
    };
    match file.metadata() {
        Ok(m) if m.is_file() && m.len() <= max => {}
        _ => return Content::Other,
    }
    let mut bytes = Vec::new();
    match Read::by_ref(&mut file)
        .take(max + 1)
        .read_to_end(&mut bytes)
    {
        Ok(_) if bytes.len() as u64 <= max => Content::Bytes(bytes),
        _ => Content::Other,
    }
}

/// A real directory (not a symlink to one).
pub(super) fn is_dir(p: &Path) -> bool {
    p.symlink_metadata().is_ok_and(|m| m.is_dir())
}

/// The directory a `gitdir:` file names, relative to the file's directory.
pub(super) fn gitdir_of(file: &Path) -> Option<PathBuf> {
    let Content::Bytes(b) = read(file) else {
        return None;
    };
    let text = String::from_utf8_lossy(&b);
    let d = text.trim().strip_prefix("gitdir:")?.trim();
    Some(file.parent().unwrap_or(Path::new("/")).join(d))
}

/// The value of `core.worktree` in a submodule's configuration: where its `.git` file is.
fn core_worktree(config: &Path) -> Option<PathBuf> {
    let Content::Bytes(b) = read(config) else {
        return None;
    };
    let entries = git_config::parse(&b).ok()?;
    let e = entries
        .iter()
        .rev()
        .find(|e| e.section == "core" && e.subsection.is_none() && e.name == "worktree")?;
    Some(config.parent()?.join(e.value.as_deref()?))
}

/// The `include.path` / `includeIf.*.path` files a configuration file names (relative to its
/// directory; `~/` from `HOME`), and the `core.hooksPath` directories it names (relative to
/// `work_tree`).
fn named_by(config: &Path, work_tree: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut includes, mut hooks) = (Vec::new(), Vec::new());
    let Content::Bytes(b) = read(config) else {
        return (includes, hooks);
    };
    let Ok(entries) = git_config::parse(&b) else {
        return (includes, hooks);
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expand = |v: &str, base: &Path| match v.strip_prefix("~/") {
        Some(rest) => home.as_ref().map(|h| h.join(rest)),
        None => Some(base.join(v)),
    };
    for e in &entries {
        let Some(v) = e.value.as_deref().filter(|v| !v.is_empty()) else {
            continue;
        };
        let include = e.name == "path" && matches!(e.section.as_str(), "include" | "includeif");
        if include {
            includes.extend(expand(v, config.parent().unwrap_or(Path::new("/"))));
        } else if e.section == "core" && e.subsection.is_none() && e.name == "hookspath" {
            hooks.extend(expand(v, work_tree));
        }
    }
    (includes, hooks)
}

impl Controls {
    /// Finds the repository `workspace` is in, as git does (the nearest `.git` upwards), and
    /// its control files.
    pub(super) fn of(workspace: &Path) -> Controls {
        let mut c = Controls::default();
        let Some(dot_git) = workspace
            .ancestors()
            .map(|a| a.join(".git"))
            .find(|g| g.symlink_metadata().is_ok())
        else {
            return c;
        };
        c.dot_git = Some(dot_git.clone());
        let git_dir = if is_dir(&dot_git) {
            dot_git.clone()
        } else {
            c.links.insert(dot_git.clone());
            match gitdir_of(&dot_git) {
                Some(d) if is_dir(&d) => d,
                _ => return c,
            }
        };
        let work_tree = dot_git.parent().unwrap_or(Path::new("/")).to_path_buf();
        c.commondirs.insert(git_dir.join("commondir"));
        let common = match read(&git_dir.join("commondir")) {
            Content::Bytes(b) => {
                let d = git_dir.join(String::from_utf8_lossy(&b).trim());
                std::fs::canonicalize(&d).unwrap_or(d)
            }
            _ => git_dir.clone(),
        };
        // The git directory's own files too, as git would read them were `commondir` gone
        // (a planted one is removed after the job).
        for name in ["config", "config.worktree"] {
            c.configs.insert(git_dir.join(name));
        }
        c.hooks.insert(git_dir.join("hooks"));
        c.common = Some(std::fs::canonicalize(&common).unwrap_or(common.clone()));
        let mut budget = MAX_DIRS;
        c.git_dir(&common, &work_tree, &mut budget, 0);
        if git_dir != common {
            // A linked worktree's own index.
            c.embedded(&git_dir, &common, &work_tree, &mut budget, 0);
        }
        c.includes();
        c
    }

    /// The repositories the index of `dir` has as gitlinks: `git status` looks into each
    /// with its own configuration. A `.git` directory there is checked as a git directory; a
    /// `gitdir:` file as a redirection.
    fn embedded(
        &mut self,
        dir: &Path,
        common: &Path,
        work_tree: &Path,
        budget: &mut usize,
        depth: usize,
    ) {
        // With `core.splitIndex` entries also live in `sharedindex.*`: every one is read (a
        // gitlink since removed only adds a check).
        let mut indexes = vec![dir.join("index")];
        if let Ok(entries) = std::fs::read_dir(dir) {
            indexes.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name().as_bytes().starts_with(b"sharedindex."))
                    .map(|e| e.path())
                    .take(16),
            );
        }
        let sha256 = match read(&common.join("config")) {
            Content::Bytes(b) => git_config::parse(&b).unwrap_or_default().iter().any(|e| {
                e.section == "extensions"
                    && e.name == "objectformat"
                    && e.value
                        .as_deref()
                        .is_some_and(|v| v.eq_ignore_ascii_case("sha256"))
            }),
            _ => false,
        };
        let links = indexes
            .iter()
            .flat_map(|i| gitlinks_of(i, if sha256 { 32 } else { 20 }));
        for link in links {
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            let tree = work_tree.join(std::ffi::OsStr::from_bytes(&link));
            let dot_git = tree.join(".git");
            if is_dir(&dot_git) {
                if depth < 16 {
                    self.git_dir(&dot_git, &tree, budget, depth + 1);
                }
            } else if dot_git.symlink_metadata().is_ok() {
                self.links.insert(dot_git);
            }
        }
    }

    /// A git directory's own control files, its worktrees' and its submodules'.
    fn git_dir(&mut self, dir: &Path, work_tree: &Path, budget: &mut usize, depth: usize) {
        for name in ["config", "config.worktree"] {
            self.configs.insert(dir.join(name));
        }
        self.commondirs.insert(dir.join("commondir"));
        self.hooks.insert(dir.join("hooks"));
        let (_, hooks_paths) = named_by(&dir.join("config"), work_tree);
        self.hooks_paths.extend(hooks_paths);
        for wt in subdirs(&dir.join("worktrees"), budget) {
            self.configs.insert(wt.join("config.worktree"));
            self.commondirs.insert(wt.join("commondir"));
            if let Some(link) = read_path(&wt.join("gitdir")) {
                self.links.insert(link);
            }
        }
        if depth < 16 {
            self.modules(&dir.join("modules"), budget, depth + 1);
            self.embedded(dir, dir, work_tree, budget, depth);
        }
    }

    /// The submodules' git directories under `modules` (a name may hold slashes: a
    /// directory without `HEAD` or `config` is a part of a name).
    pub(super) fn modules(&mut self, modules: &Path, budget: &mut usize, depth: usize) {
        for d in subdirs(modules, budget) {
            if d.join("HEAD").exists() || d.join("config").exists() {
                let work_tree = core_worktree(&d.join("config"));
                if let Some(w) = &work_tree {
                    self.links.insert(w.join(".git"));
                }
                let w = work_tree.unwrap_or_else(|| d.clone());
                self.git_dir(&d, &w, budget, depth);
            } else if depth < 16 {
                self.modules(&d, budget, depth + 1);
            }
        }
    }

    /// The files the configuration files include, followed as git does.
    fn includes(&mut self) {
        let mut todo: Vec<(PathBuf, usize)> = self.configs.iter().map(|c| (c.clone(), 0)).collect();
        while let Some((c, depth)) = todo.pop() {
            if depth >= MAX_INCLUDE_DEPTH {
                continue;
            }
            let (includes, _) = named_by(&c, Path::new("/"));
            for i in includes {
                if !self.configs.contains(&i) && self.included.insert(i.clone()) {
                    todo.push((i, depth + 1));
                }
            }
        }
    }
}

/// The gitlinks of the index at `path`. An index is megabytes in a large repository and is
/// read before and after every command of a session: the last parse of each index is kept
/// and used again while the file's identity is the same: device, inode, size, and both its
/// modification and its change time. The change time is the kernel's (no call sets it), so an
/// index rewritten in place with its size and modification time put back still differs.
fn gitlinks_of(path: &Path, hash_len: usize) -> Vec<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    type Key = (u64, u64, u64, i64, i64, i64, i64, usize);
    type Kept = (PathBuf, Key, Vec<Vec<u8>>);
    static LAST: std::sync::Mutex<Vec<Kept>> = std::sync::Mutex::new(Vec::new());
    let key = |m: &std::fs::Metadata| -> Key {
        (
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
            hash_len,
        )
    };
    let before = std::fs::symlink_metadata(path).ok().filter(|m| m.is_file());
    if let Some(k) = before.as_ref().map(key) {
        let last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, links)) = last.iter().find(|(p, lk, _)| p == path && *lk == k) {
            return links.clone();
        }
    }
    let links = match read_at_most(path, MAX_INDEX) {
        Content::Bytes(b) => super::git_index::gitlinks(&b, hash_len).unwrap_or_default(),
        _ => Vec::new(),
    };
    // Kept only when the file is the same after the read as before it.
    let after = std::fs::symlink_metadata(path).ok().filter(|m| m.is_file());
    if let (Some(b), Some(a)) = (before.as_ref().map(key), after.as_ref().map(key)) {
        if a == b {
            let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
            last.retain(|(p, _, _)| p != path);
            // A handful of repositories at most: the oldest goes first.
            if last.len() >= 16 {
                last.remove(0);
            }
            last.push((path.to_path_buf(), b, links.clone()));
        }
    }
    links
}

/// A path a file holds (a worktree's `gitdir` back-pointer), when it is absolute.
fn read_path(file: &Path) -> Option<PathBuf> {
    let Content::Bytes(b) = read(file) else {
        return None;
    };
    let p = PathBuf::from(String::from_utf8_lossy(&b).trim());
    p.is_absolute().then_some(p)
}

/// The real subdirectories of `dir` (symlinks are not followed), within the budget.
fn subdirs(dir: &Path, budget: &mut usize) -> Vec<PathBuf> {
    if !is_dir(dir) {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        if *budget == 0 {
            break;
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            *budget -= 1;
            out.push(e.path());
        }
    }
    out.sort();
    out
}

/// The hooks directories of the repository's submodules that exist (read-only in the job's
/// view like the repository's own), under the common git directory `common`.
pub(crate) fn module_hooks(common: &Path) -> Vec<PathBuf> {
    let mut c = Controls::default();
    let mut budget = MAX_DIRS;
    c.modules(&common.join("modules"), &mut budget, 1);
    let modules = common.join("modules");
    // Only the submodules' own: a `core.hooksPath` they name is checked after the job.
    c.hooks
        .into_iter()
        .filter(|h| h.starts_with(&modules) && is_dir(h))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    /// A repository at `dir` whose index holds one gitlink, `name`.
    fn with_gitlink(dir: &Path, name: &str) {
        let git = |args: &[&str]| {
            let st = Command::new("git")
                .args(args)
                .current_dir(dir)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .status()
                .unwrap();
            assert!(st.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        let sha = "0123456789012345678901234567890123456789";
        git(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{sha},{name}"),
        ]);
    }

    #[test]
    fn an_index_rewritten_in_place_with_its_times_put_back_is_parsed_again() {
        // The parse of an index is kept while its identity is the same: a job that rewrote
        // it in place, same size, and put its modification time back must not hide a new
        // gitlink from the guard (the change time differs).
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        with_gitlink(a.path(), "aaa");
        with_gitlink(b.path(), "bbb");
        let index = a.path().join(".git/index");
        assert_eq!(super::gitlinks_of(&index, 20), vec![b"aaa".to_vec()]);
        assert_eq!(super::gitlinks_of(&index, 20), vec![b"aaa".to_vec()]);
        let other = std::fs::read(b.path().join(".git/index")).unwrap();
        assert_eq!(other.len() as u64, std::fs::metadata(&index).unwrap().len());
        let mtime = std::fs::metadata(&index).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(&index)
                .unwrap();
            f.write_all(&other).unwrap();
            f.set_modified(mtime).unwrap();
        }
        assert_eq!(
            std::fs::metadata(&index).unwrap().modified().unwrap(),
            mtime
        );
        assert_eq!(super::gitlinks_of(&index, 20), vec![b"bbb".to_vec()]);
    }
}
