//! What a job may not leave behind in the repository its workspace is in: anything that
//! makes the user's next git command outside the sandbox run a program the job chose.
//!
//! The namespace layer keeps the hooks directories read-only during the job, but not the
//! configuration files: git rewrites them by renaming `config.lock` over them, which a mount
//! over `config` refuses (`git config --local`, `git remote add`, `git submodule add` failed
//! with `EBUSY`). So the host takes a snapshot of the repository's control files before the
//! job ([`Guard::take`]) and checks them after it ([`Guard::check`]):
//!
//! - configuration files (the repository's and its worktrees' and submodules' `config` and
//!   `config.worktree`, and the files they include): a key that runs a command
//!   ([`super::git_config::runs_command`]) that is new is removed from the file; a file whose
//!   command keys were changed, or that git could not read, is restored from the snapshot.
//!   Every other change (remotes, upstreams, `user.name`, submodule URLs) is kept;
//! - hooks directories (the repository's, each submodule's, a `core.hooksPath`): a new or
//!   changed hook is removed, or restored from the snapshot;
//! - redirections (`commondir`, a work tree's `gitdir:` file): a changed one is restored, a new
//!   one that points anywhere but the repository itself is removed;
//! - a new `.git` between the workspace and the repository it was in (or at the workspace,
//!   when there was none): a directory is checked as above with nothing allowed before it, a
//!   `gitdir:` file or a symlink is removed.
//!
//! The control set (module `git_controls`) includes the repositories the index has as
//! gitlinks. Only the control files are read: no walk of the work tree. Each item undone is one
//! [`Reverted`] entry with its warning line. See docs/isolation.md.

use super::git_config::{self, Entry};
use super::git_controls::{gitdir_of, is_dir, read, Content, Controls};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// One thing the job left that was undone after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reverted {
    /// The file changed back (a configuration file, a hook, a redirection).
    pub path: PathBuf,
    /// What was undone: a configuration key (`core.fsmonitor`), `hook`, `commondir`,
    /// `gitdir`, or `file` (a configuration file restored whole).
    pub what: String,
    /// `removed`, `restored`, or `failed` (it could not be undone: the warning says what to
    /// remove by hand).
    pub action: String,
    /// The line said in `warnings` and on stderr.
    #[serde(skip)]
    pub warning: String,
}

/// A hook as listed: its identity and, for a regular file, its content (to restore it).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hook {
    id: (u64, u64, i64, i64, u32),
    content: Option<Vec<u8>>,
    link: Option<PathBuf>,
}

/// The entries of a hooks directory (`*.sample` left out: git never runs them); `None` when
/// the directory is absent, `Some(Err(target))` when it is a symlink.
type Listing = Option<Result<BTreeMap<std::ffi::OsString, Hook>, PathBuf>>;

/// The snapshot of one job's repository control files.
#[derive(Debug)]
pub(crate) struct Guard {
    workspace: PathBuf,
    controls: Controls,
    files: BTreeMap<PathBuf, Content>,
    owners: BTreeMap<PathBuf, Owner>,
    hooks: BTreeMap<PathBuf, Listing>,
}

/// The mode and owner a file restored or rewritten gets.
#[derive(Clone, Copy, Debug)]
struct Owner {
    mode: u32,
    uid: u32,
    gid: u32,
}

impl Owner {
    fn of(m: &std::fs::Metadata) -> Owner {
        Owner {
            mode: m.mode() & 0o7777,
            uid: m.uid(),
            gid: m.gid(),
        }
    }

    /// What a file at `path` gets: as the snapshot found it there, else a plain file of the
    /// directory's owner (never the metadata of what a symlink left there points to).
    fn at(guard: &Guard, path: &Path) -> Owner {
        guard.owners.get(path).copied().unwrap_or_else(|| {
            let dir = path.parent().and_then(|d| d.symlink_metadata().ok());
            Owner {
                mode: 0o644,
                uid: dir.as_ref().map_or(u32::MAX, MetadataExt::uid),
                gid: dir.as_ref().map_or(u32::MAX, MetadataExt::gid),
            }
        })
    }
}

/// The hooks a directory holds (see [`Listing`]).
fn list(dir: &Path) -> Listing {
    let m = dir.symlink_metadata().ok()?;
    if m.file_type().is_symlink() {
        return Some(Err(std::fs::read_link(dir).unwrap_or_default()));
    }
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let name = e.file_name();
        if name.to_string_lossy().ends_with(".sample") {
            continue;
        }
        let Ok(m) = e.path().symlink_metadata() else {
            continue;
        };
        let link = m
            .file_type()
            .is_symlink()
            .then(|| std::fs::read_link(e.path()).unwrap_or_default());
        let content = match (m.is_file(), read(&e.path())) {
            (true, Content::Bytes(b)) => Some(b),
            _ => None,
        };
        out.insert(
            name,
            Hook {
                id: (m.ino(), m.len(), m.mtime(), m.mtime_nsec(), m.mode()),
                content,
                link,
            },
        );
    }
    Some(Ok(out))
}

/// Replaces `path` with a regular file holding `bytes` (a new file renamed over it, so that a
/// symlink left there is replaced, never written through), with the mode of `like`, and its
/// owner when the host is root.
fn replace(path: &Path, bytes: &[u8], like: Owner) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?;
    let tmp = path.with_file_name(crate::aside::name(&name.to_string_lossy(), "restore"));
    let mode = like.mode;
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        if crate::sys::euid() == 0 && like.uid != u32::MAX {
            // Root restores a file of another user's repository as that user's.
            std::os::unix::fs::fchown(&f, Some(like.uid), Some(like.gid))?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Removes a file or symlink (never a directory's contents).
fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// Collects what was undone, with the lines that say it.
struct Report<'a> {
    workspace: &'a Path,
    items: Vec<Reverted>,
}

const RUNS: &str = "it would run on the next git command outside the sandbox";

/// What a command key the job set would do, for its warning line.
fn effect(key: &str) -> &'static str {
    if key.starts_with("include.") || key.starts_with("includeif.") {
        "git would read configuration from a file the command chose on the next git command \
         outside the sandbox"
    } else if key.starts_with("protocol.") {
        "it would let git use a transport that runs commands"
    } else {
        RUNS
    }
}

impl Report<'_> {
    /// `path` as the user knows it: relative to the workspace when inside it.
    fn shown(&self, path: &Path) -> String {
        let p = path.strip_prefix(self.workspace).unwrap_or(path);
        crate::escape::path(p).into_owned()
    }

    /// Records one item: `done` is the outcome of undoing it; `said` the line's body.
    fn add(
        &mut self,
        path: &Path,
        what: &str,
        action: &str,
        done: std::io::Result<()>,
        said: String,
    ) {
        let (action, warning) = match done {
            Ok(()) => (action.to_string(), format!("sandbox: {said}")),
            Err(e) => (
                "failed".to_string(),
                format!(
                    "sandbox: could not undo what the command left in {}: {said}; the attempt \
                     failed ({e}): fix it by hand before running git there",
                    self.shown(path)
                ),
            ),
        };
        self.items.push(Reverted {
            path: path.to_path_buf(),
            what: what.to_string(),
            action,
            warning,
        });
    }
}

impl Guard {
    /// Takes the snapshot for a job whose workspace is `workspace`.
    pub(crate) fn take(workspace: &Path) -> Guard {
        let workspace = std::fs::canonicalize(workspace).unwrap_or(workspace.to_path_buf());
        let controls = Controls::of(&workspace);
        let files = controls
            .configs
            .iter()
            .chain(&controls.included)
            .chain(&controls.commondirs)
            .chain(&controls.links)
            .map(|p| (p.clone(), read(p)))
            .collect();
        let owners = controls
            .configs
            .iter()
            .chain(&controls.included)
            .chain(&controls.commondirs)
            .chain(&controls.links)
            .filter_map(|p| Some((p.clone(), Owner::of(&p.symlink_metadata().ok()?))))
            .collect();
        let hooks = controls
            .hooks
            .iter()
            .chain(&controls.hooks_paths)
            .map(|h| (h.clone(), list(h)))
            .collect();
        Guard {
            workspace,
            controls,
            files,
            owners,
            hooks,
        }
    }

    /// Checks the control files after the job and undoes what would run a command the job
    /// chose; returns each item undone.
    pub(crate) fn check(self) -> Vec<Reverted> {
        let mut report = Report {
            workspace: &self.workspace,
            items: Vec::new(),
        };
        let ws = &self.workspace;
        let mut after = Controls::of(ws);
        // A new `.git` nearer than the repository's: a file or symlink is removed (git would
        // follow it to a directory the command chose); a directory is checked below with
        // nothing allowed before it.
        for _ in 0..64 {
            let Some(g) = after.dot_git.clone() else {
                break;
            };
            if Some(&g) == self.controls.dot_git.as_ref() || is_dir(&g) || !g.starts_with(ws) {
                break;
            }
            let said = format!(
                "removed {} that the command created (a gitdir: file or symlink points git at \
                 configuration and hooks the command chose; {RUNS}); create it outside the \
                 sandbox if it is meant",
                report.shown(&g)
            );
            report.add(&g, "gitdir", "removed", remove(&g), said);
            after = Controls::of(ws);
        }
        // What only the job's repository names counts inside the workspace alone (the command
        // could not make it elsewhere), so that a `commondir` it plants cannot make the host
        // edit another repository.
        let inside = |p: &&PathBuf| p.starts_with(ws);
        let common = self.controls.common.clone();
        let configs: BTreeSet<&PathBuf> = self
            .controls
            .configs
            .iter()
            .chain(&self.controls.included)
            .chain(after.configs.iter().filter(inside))
            .collect();
        for c in configs {
            self.config(c, &mut report);
        }
        let commondirs: BTreeSet<&PathBuf> = self
            .controls
            .commondirs
            .iter()
            .chain(after.commondirs.iter().filter(inside))
            .collect();
        for c in commondirs {
            self.commondir(c, common.as_deref(), &mut report);
        }
        // Work trees' `gitdir:` files: the ones known before (a new one deeper in the work
        // tree is a new worktree or submodule, whose git directory is checked above).
        for l in &self.controls.links {
            self.link(l, &mut report);
        }
        for l in after.links.iter().filter(inside) {
            if !self.controls.links.contains(l) {
                self.new_link(l, common.as_deref(), &mut report);
            }
        }
        let hooks: BTreeSet<&PathBuf> = self
            .controls
            .hooks
            .iter()
            .chain(&self.controls.hooks_paths)
            .chain(after.hooks.iter().filter(inside))
            .collect();
        for h in hooks {
            self.hooks_dir(h, &mut report);
        }
        report.items
    }

    fn before(&self, p: &Path) -> &Content {
        self.files.get(p).unwrap_or(&Content::Absent)
    }

    /// A configuration file: new command keys removed; the file restored whole when its
    /// command keys were changed or removed-and-replaced, or when it cannot be read.
    fn config(&self, path: &Path, report: &mut Report) {
        let before = self.before(path);
        let now = read(path);
        if &now == before {
            return;
        }
        let old: Vec<Entry> = match before {
            Content::Bytes(b) => git_config::parse(b).unwrap_or_default(),
            _ => Vec::new(),
        };
        let shown = report.shown(path);
        let restore = |report: &mut Report, why: String| match before {
            Content::Bytes(b) => {
                let done = replace(path, b, Owner::at(self, path));
                let said = format!(
                    "restored {shown} as it was before the command ({why}; its other changes \
                     there are undone too); make the change outside the sandbox if it is meant"
                );
                report.add(path, "file", "restored", done, said);
            }
            _ => {
                let done = remove(path);
                let said = format!(
                    "removed {shown}, which the command created ({why}); create it outside \
                     the sandbox if it is meant"
                );
                report.add(path, "file", "removed", done, said);
            }
        };
        let bytes = match &now {
            Content::Absent => return,
            Content::Other => {
                return restore(report, "it is not a regular file git can read".into());
            }
            Content::Bytes(b) => b,
        };
        let entries = match git_config::parse(bytes) {
            Ok(e) => e,
            Err(m) => {
                return restore(
                    report,
                    format!(
                        "it could not be read as git configuration at line {}",
                        m.line
                    ),
                )
            }
        };
        // The command keys before, as (key, value) with their counts.
        let mut kept: BTreeMap<(String, Option<String>), usize> = BTreeMap::new();
        for e in old.iter().filter(|e| git_config::runs_command(e)) {
            *kept.entry((e.key(), e.value.clone())).or_default() += 1;
        }
        let mut new = Vec::new();
        for e in entries.iter().filter(|e| git_config::runs_command(e)) {
            match kept.get_mut(&(e.key(), e.value.clone())) {
                Some(n) if *n > 0 => *n -= 1,
                _ => new.push(e),
            }
        }
        if new.is_empty() {
            return;
        }
        // A subsection may hold any byte but a newline: shown escaped.
        let keys: Vec<String> = new
            .iter()
            .map(|e| crate::escape::bytes(e.key().as_bytes()).into_owned())
            .collect();
        if kept.values().any(|n| *n > 0) {
            // A command key of the user's was changed or removed: the file as it was is the
            // only version known to be the user's.
            return restore(report, format!("the command changed {}", keys.join(", ")));
        }
        let spans: Vec<_> = new.iter().map(|e| e.span.clone()).collect();
        let done = replace(
            path,
            &git_config::without(bytes, &spans),
            Owner::at(self, path),
        );
        for k in keys {
            let said = format!(
                "removed {k} that the command set in {shown} ({}); set it outside the sandbox \
                 if it is meant",
                effect(&k)
            );
            let d = done
                .as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::new(e.kind(), e.to_string()));
            report.add(path, &k, "removed", d, said);
        }
    }

    /// A `commondir`: a changed one restored; a new one removed unless it names the git
    /// directory it is in or the repository's common directory (what git itself writes).
    fn commondir(&self, path: &Path, common: Option<&Path>, report: &mut Report) {
        let before = self.before(path);
        let now = read(path);
        if &now == before || now == Content::Absent {
            return;
        }
        let shown = report.shown(path);
        let why =
            format!("it points git at another repository's configuration and hooks, which {RUNS}");
        if let Content::Bytes(b) = before {
            let done = replace(path, b, Owner::at(self, path));
            let said = format!(
                "restored {shown} as it was before the command, which changed it ({why}); \
                 change it outside the sandbox if it is meant"
            );
            return report.add(path, "commondir", "restored", done, said);
        }
        let dir = path.parent().unwrap_or(Path::new("/"));
        let names = |b: &[u8]| {
            let target = dir.join(String::from_utf8_lossy(b).trim());
            std::fs::canonicalize(target).ok()
        };
        if let Content::Bytes(b) = &now {
            let target = names(b);
            let own = std::fs::canonicalize(dir).ok();
            if target.is_some() && (target == own || target.as_deref() == common) {
                return;
            }
        }
        let said = format!(
            "removed {shown} that the command created ({why}); create it outside the sandbox \
             if it is meant"
        );
        report.add(path, "commondir", "removed", remove(path), said);
    }

    /// A work tree's `gitdir:` file known before: restored when changed.
    fn link(&self, path: &Path, report: &mut Report) {
        let Content::Bytes(b) = self.before(path) else {
            return;
        };
        let now = read(path);
        if now == Content::Absent || &now == self.before(path) {
            return;
        }
        let shown = report.shown(path);
        let done = replace(path, b, Owner::at(self, path));
        let said = format!(
            "restored {shown} as it was before the command, which changed it (it points git at \
             configuration and hooks the command chose; {RUNS}); change it outside the sandbox \
             if it is meant"
        );
        report.add(path, "gitdir", "restored", done, said);
    }

    /// A `gitdir:` file the job made in the work tree (a new submodule's, a new worktree's, a
    /// repository it added to the index): kept when it names a git directory of the
    /// repository (under `.git/modules` or `.git/worktrees`), removed otherwise.
    fn new_link(&self, path: &Path, common: Option<&Path>, report: &mut Report) {
        let target = gitdir_of(path).and_then(|d| std::fs::canonicalize(d).ok());
        if let (Some(t), Some(c)) = (&target, common) {
            if t.starts_with(c) && t != c {
                return;
            }
        }
        let shown = report.shown(path);
        let said = format!(
            "removed {shown} that the command created (a gitdir: file or symlink that points \
             git at configuration and hooks the command chose; {RUNS}); create it outside the \
             sandbox if it is meant"
        );
        report.add(path, "gitdir", "removed", remove(path), said);
    }

    /// A hooks directory: new hooks removed, changed ones restored (or removed when their
    /// content was not kept); a hooks directory made a symlink is removed.
    fn hooks_dir(&self, dir: &Path, report: &mut Report) {
        let before = self.hooks.get(dir).cloned().flatten();
        let now = list(dir);
        let shown_dir = report.shown(dir);
        let now = match now {
            None => return,
            Some(Err(target)) => {
                if before == Some(Err(target)) {
                    return;
                }
                let said = format!(
                    "removed {shown_dir}, a symlink the command made (git would run the hooks \
                     it points to; {RUNS}); make it outside the sandbox if it is meant"
                );
                return report.add(dir, "hook", "removed", remove(dir), said);
            }
            Some(Ok(l)) => l,
        };
        let old = match before {
            Some(Ok(l)) => l,
            _ => BTreeMap::new(),
        };
        for (name, hook) in &now {
            let path = dir.join(name);
            let shown_name = crate::escape::path(Path::new(name)).into_owned();
            match old.get(name) {
                Some(o) if o == hook => {}
                Some(Hook {
                    content: Some(c),
                    link: None,
                    id,
                }) => {
                    let owner = Owner {
                        mode: id.4 & 0o7777,
                        ..Owner::at(self, &path)
                    };
                    let done = replace(&path, c, owner);
                    let said = format!(
                        "restored the hook {shown_name} in {shown_dir} as it was before the \
                         command, which changed it ({RUNS}); change it outside the sandbox if \
                         it is meant"
                    );
                    report.add(&path, "hook", "restored", done, said);
                }
                _ => {
                    // A directory is not a program git can run.
                    if is_dir(&path) {
                        continue;
                    }
                    let said = format!(
                        "removed the hook {shown_name} that the command wrote in {shown_dir} \
                         ({RUNS}); write it outside the sandbox if it is meant"
                    );
                    report.add(&path, "hook", "removed", remove(&path), said);
                }
            }
        }
    }
}
