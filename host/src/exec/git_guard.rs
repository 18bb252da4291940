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
use super::git_controls::{gitdir_of, is_dir, Content, Controls, MAX_FILE};
use crate::beneath::{Anchors, Found, Read};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use super::reverted::Reverted;

/// A hook as listed: its identity and, for a regular file, its content (to restore it).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hook {
    id: (u64, u64, i64, i64, u32),
    content: Option<Vec<u8>>,
    link: Option<PathBuf>,
}

/// The entries of a hooks directory (`*.sample` left out: git never runs them); `None` when
/// the directory is absent or not reached, `Some(Err(target))` when it is a symlink.
type Listing = Option<Result<BTreeMap<std::ffi::OsString, Hook>, PathBuf>>;

/// The snapshot of one job's repository control files.
///
/// Every read and every change goes through [`Anchors`]: directories opened when the snapshot
/// is taken, before the job, from which each control path is walked without following a
/// symlink (module `beneath`). So a directory the job (or, when root runs the job in another
/// user's repository, that user) replaces with a symlink is found and removed, never
/// followed, and nothing is read through a symlink for the snapshot.
#[derive(Debug)]
pub(crate) struct Guard {
    workspace: PathBuf,
    controls: Controls,
    anchors: Anchors,
    files: BTreeMap<PathBuf, Content>,
    /// The permission bits of each control file that was a regular file (from the inode read,
    /// not a path): what a restored file gets.
    modes: BTreeMap<PathBuf, u32>,
    hooks: BTreeMap<PathBuf, Listing>,
    /// Components that were symlinks already when the snapshot was taken (the user's own
    /// layout: nothing beneath them is read or changed, and they are not a finding).
    symlinks: BTreeSet<PathBuf>,
    /// The agents' and editors' control files at the top of the workspace (module
    /// `control_guard`), checked with the repository's.
    agent_files: super::control_guard::Snapshot,
    /// The control files the request allows the job to change.
    allowed: Vec<String>,
}

/// The mode a control file gets that the snapshot did not see as a regular file.
const NEW_FILE_MODE: u32 = 0o644;

/// Where a control path's walk ended, as an error for an action that could not be made.
fn unreached(found: Found) -> std::io::Error {
    match found {
        Found::Here(_) => std::io::Error::other("reached"),
        Found::Missing => std::io::Error::from_raw_os_error(libc::ENOENT),
        Found::Symlink(p) => std::io::Error::other(format!(
            "{} is a symlink, not followed",
            crate::escape::path(&p)
        )),
        Found::NotDir(p) => {
            std::io::Error::other(format!("{} is not a directory", crate::escape::path(&p)))
        }
        Found::Outside => std::io::Error::other("not beneath a directory opened before the job"),
        Found::Failed(e) => e,
    }
}

impl Guard {
    /// A control file's content, read beneath the anchors without following a symlink.
    fn read(&self, path: &Path) -> Content {
        read_found(self.anchors.place(path)).0
    }

    /// Replaces the file at `path` with `bytes` (module `beneath`: renamed over it in the
    /// directory the walk reached; a symlink there replaced, not written through).
    fn replace(&self, path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
        match self.anchors.place(path) {
            Found::Here(p) => p.replace(bytes, mode),
            other => Err(unreached(other)),
        }
    }

    /// Removes a file or symlink (never a directory's contents); absent is done.
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        match self.anchors.place(path) {
            Found::Here(p) => p.remove(),
            Found::Missing => Ok(()),
            other => Err(unreached(other)),
        }
    }

    /// The mode a file restored at `path` gets: the snapshot's, else a plain file's.
    fn mode(&self, path: &Path) -> u32 {
        self.modes.get(path).copied().unwrap_or(NEW_FILE_MODE)
    }

    /// The hooks a directory holds (see [`Listing`]).
    fn list(&self, dir: &Path) -> Listing {
        list_found(self.anchors.place(dir))
    }
}

/// A control file's content where a walk ended, and its permission bits when it is a regular
/// file (from the inode read, not a path).
fn read_found(found: Found) -> (Content, Option<u32>) {
    match found {
        Found::Here(p) => match p.read(MAX_FILE) {
            Read::Absent => (Content::Absent, None),
            Read::File(b, st) => (Content::Bytes(b), Some(st.mode & 0o777)),
            Read::Other => (Content::Other, None),
        },
        Found::Missing => (Content::Absent, None),
        _ => (Content::Other, None),
    }
}

/// The hooks of the directory where a walk ended (see [`Listing`]).
fn list_found(found: Found) -> Listing {
    let Found::Here(place) = found else {
        return None;
    };
    // `*.sample` is never run by git: not even looked at.
    let sample = |n: &std::ffi::OsStr| n.as_encoded_bytes().ends_with(b".sample");
    let (listed, entries) = match place.entries_but(sample) {
        Ok(Some(l)) => l,
        Ok(None) => return None,
        Err(st) if st.kind() == libc::S_IFLNK => {
            return Some(Err(place.link().unwrap_or_default()))
        }
        Err(_) => return None,
    };
    let mut out = BTreeMap::new();
    for e in entries {
        let Some(child) = listed.child(&e.name) else {
            continue;
        };
        let m = e.stat;
        let link = (m.kind() == libc::S_IFLNK).then(|| child.link().unwrap_or_default());
        let content = match m.kind() {
            libc::S_IFREG => match child.read(MAX_FILE) {
                Read::File(b, _) => Some(b),
                _ => None,
            },
            _ => None,
        };
        out.insert(
            e.name,
            Hook {
                id: (m.ino, m.size, m.mtime.0, m.mtime.1, m.mode),
                content,
                link,
            },
        );
    }
    Some(Ok(out))
}

/// Collects what was undone, with the lines that say it.
struct Report<'a> {
    workspace: &'a Path,
    items: Vec<Reverted>,
    /// The snapshot taken right after the job, when there is one (a session's command): its
    /// reads are the current state, not made twice.
    now: Option<&'a Guard>,
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
    /// Takes the snapshot for a job whose workspace is `workspace`, which may change the
    /// control files `allowed` names (`allow_control_files`).
    pub(crate) fn take(workspace: &Path, allowed: &[String]) -> Guard {
        let workspace = std::fs::canonicalize(workspace).unwrap_or(workspace.to_path_buf());
        Guard::take_canonical(workspace, allowed)
    }

    /// [`Guard::take`] of a workspace path that is canonical already (a session's renewal).
    fn take_canonical(workspace: PathBuf, allowed: &[String]) -> Guard {
        let agent_files = super::control_guard::Snapshot::take(&workspace, allowed);
        let controls = Controls::of(&workspace);
        // The highest directories first (a walk starts at the highest anchor above a path, so
        // a component below it that becomes a symlink is seen): the work tree, the
        // workspace, the common git directory, then each control file's directory that none
        // of those holds.
        let mut anchors = Anchors::default();
        let roots = controls
            .dot_git
            .as_ref()
            .and_then(|g| g.parent())
            .map(Path::to_path_buf);
        for root in roots.iter().chain([&workspace]).chain(&controls.common) {
            anchors.cover_dir(root);
        }
        let mut paths: Vec<&PathBuf> = controls
            .configs
            .iter()
            .chain(&controls.included)
            .chain(&controls.commondirs)
            .chain(&controls.links)
            .chain(&controls.hooks)
            .chain(&controls.hooks_paths)
            .collect();
        paths.sort_by_key(|p| p.components().count());
        for p in &paths {
            anchors.cover(p);
        }
        let mut guard = Guard {
            workspace,
            anchors,
            files: BTreeMap::new(),
            modes: BTreeMap::new(),
            hooks: BTreeMap::new(),
            symlinks: BTreeSet::new(),
            controls: Controls::default(),
            agent_files,
            allowed: allowed.to_vec(),
        };
        // One walk a path: its content (or listing), and whether a component was a symlink
        // already (the user's own layout, not a finding later).
        let files = controls
            .configs
            .iter()
            .chain(&controls.included)
            .chain(&controls.commondirs)
            .chain(&controls.links);
        for p in files {
            let found = guard.anchors.place(p);
            if let Found::Symlink(s) = &found {
                guard.symlinks.insert(s.clone());
            }
            let (content, mode) = read_found(found);
            if let Some(m) = mode {
                guard.modes.insert(p.clone(), m);
            }
            guard.files.insert(p.clone(), content);
        }
        for h in controls.hooks.iter().chain(&controls.hooks_paths) {
            let found = guard.anchors.place(h);
            if let Found::Symlink(s) = &found {
                guard.symlinks.insert(s.clone());
            }
            guard.hooks.insert(h.clone(), list_found(found));
        }
        guard.controls = controls;
        guard
    }

    /// Components of known control paths that are symlinks now and were not at the snapshot:
    /// each is removed (the host never follows it) and named. Git would have read the
    /// configuration and hooks of wherever it points.
    fn symlinked_components(&self, report: &mut Report) {
        let known = self
            .files
            .keys()
            .chain(self.hooks.keys())
            .filter_map(|p| match self.anchors.place(p) {
                Found::Symlink(s) if !self.symlinks.contains(&s) => Some(s),
                _ => None,
            })
            .collect::<BTreeSet<_>>();
        for s in known {
            let shown = report.shown(&s);
            let said = format!(
                "removed {shown}, a symlink the command put where a directory of the \
                 repository's control files was (the sandbox does not follow it; git would \
                 read configuration and hooks from where it points, and {RUNS}); what was in \
                 that directory is wherever the command moved it"
            );
            report.add(&s, "symlink", "removed", self.remove(&s), said);
        }
    }

    /// Checks the control files after the job and undoes what would run a command the job
    /// chose; returns each item undone.
    pub(crate) fn check(self) -> Vec<Reverted> {
        self.check_now()
    }

    /// Checks after one command of a session, then takes the snapshot anew (anchors
    /// included) for the next: what the command changed and the check kept (a remote, a
    /// submodule) is the next command's starting point.
    pub(crate) fn check_and_renew(&mut self) -> Vec<Reverted> {
        // The state after the command is read once: the check compares with it, and when
        // nothing had to be undone it is the next command's snapshot as it is.
        let next = Guard::take_canonical(self.workspace.clone(), &self.allowed);
        let undone = self.check_with(Some(&next));
        *self = if undone.is_empty() {
            next
        } else {
            Guard::take_canonical(self.workspace.clone(), &self.allowed)
        };
        undone
    }

    fn check_now(&self) -> Vec<Reverted> {
        self.check_with(None)
    }

    fn check_with(&self, now: Option<&Guard>) -> Vec<Reverted> {
        let mut report = Report {
            workspace: &self.workspace,
            items: Vec::new(),
            now,
        };
        self.symlinked_components(&mut report);
        report
            .items
            .extend(self.agent_files.check(now.map(|g| &g.agent_files)));
        let ws = &self.workspace;
        let mut after = match now {
            Some(g) => g.controls.clone(),
            None => Controls::of(ws),
        };
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
            report.add(&g, "gitdir", "removed", self.remove(&g), said);
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
    /// A control file's content now: from the snapshot taken after the job when it has it.
    fn current<'r>(&self, report: &Report<'r>, path: &Path) -> Cow<'r, Content> {
        match report.now.and_then(|g| g.files.get(path)) {
            Some(c) => Cow::Borrowed(c),
            None => Cow::Owned(self.read(path)),
        }
    }

    fn config(&self, path: &Path, report: &mut Report) {
        let before = self.before(path);
        let now = self.current(report, path);
        if now.as_ref() == before {
            return;
        }
        let old: Vec<Entry> = match before {
            Content::Bytes(b) => git_config::parse(b).unwrap_or_default(),
            _ => Vec::new(),
        };
        let shown = report.shown(path);
        let restore = |report: &mut Report, why: String| match before {
            Content::Bytes(b) => {
                let done = self.replace(path, b, self.mode(path));
                let said = format!(
                    "restored {shown} as it was before the command ({why}; its other changes \
                     there are undone too); make the change outside the sandbox if it is meant"
                );
                report.add(path, "file", "restored", done, said);
            }
            _ => {
                let done = self.remove(path);
                let said = format!(
                    "removed {shown}, which the command created ({why}); create it outside \
                     the sandbox if it is meant"
                );
                report.add(path, "file", "removed", done, said);
            }
        };
        let bytes = match now.as_ref() {
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
        let done = self.replace(path, &git_config::without(bytes, &spans), self.mode(path));
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
        let now = self.current(report, path);
        if now.as_ref() == before || *now == Content::Absent {
            return;
        }
        let shown = report.shown(path);
        let why =
            format!("it points git at another repository's configuration and hooks, which {RUNS}");
        if let Content::Bytes(b) = before {
            let done = self.replace(path, b, self.mode(path));
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
        if let Content::Bytes(b) = now.as_ref() {
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
        report.add(path, "commondir", "removed", self.remove(path), said);
    }

    /// A work tree's `gitdir:` file known before: restored when changed.
    fn link(&self, path: &Path, report: &mut Report) {
        let Content::Bytes(b) = self.before(path) else {
            return;
        };
        let now = self.current(report, path);
        if *now == Content::Absent || now.as_ref() == self.before(path) {
            return;
        }
        let shown = report.shown(path);
        let done = self.replace(path, b, self.mode(path));
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
        report.add(path, "gitdir", "removed", self.remove(path), said);
    }

    /// A hooks directory: new hooks removed, changed ones restored (or removed when their
    /// content was not kept); a hooks directory made a symlink is removed.
    fn hooks_dir(&self, dir: &Path, report: &mut Report) {
        let before = self.hooks.get(dir).and_then(Option::as_ref);
        let now = match report.now.and_then(|g| g.hooks.get(dir)) {
            Some(l) => Cow::Borrowed(l),
            None => Cow::Owned(self.list(dir)),
        };
        let shown_dir = report.shown(dir);
        let now = match now.as_ref() {
            None => return,
            Some(Err(target)) => {
                if matches!(before, Some(Err(t)) if t == target) {
                    return;
                }
                let said = format!(
                    "removed {shown_dir}, a symlink the command made (git would run the hooks \
                     it points to; {RUNS}); make it outside the sandbox if it is meant"
                );
                return report.add(dir, "hook", "removed", self.remove(dir), said);
            }
            Some(Ok(l)) => l,
        };
        let none = BTreeMap::new();
        let old = match before {
            Some(Ok(l)) => l,
            _ => &none,
        };
        for (name, hook) in now {
            let path = dir.join(name);
            let shown_name = crate::escape::path(Path::new(name)).into_owned();
            match old.get(name) {
                Some(o) if o == hook => {}
                Some(Hook {
                    content: Some(c),
                    link: None,
                    id,
                }) => {
                    let done = self.replace(&path, c, id.4 & 0o777);
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
                    report.add(&path, "hook", "removed", self.remove(&path), said);
                }
            }
        }
    }
}
