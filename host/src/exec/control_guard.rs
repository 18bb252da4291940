//! What a job may not leave in its workspace for an agent, an editor or a developer tool to
//! run later, outside any sandbox: the files and directories of the control-file list
//! (`profiles/control-files.toml`, module `control_files`: `.claude/`, `.mcp.json`,
//! `.vscode/tasks.json`, `.envrc`, ...). The same class as git's hooks: a `SessionStart` hook
//! a job writes in `.claude/settings.json` runs when the user next starts the agent there.
//!
//! Like the git guard (whose snapshot carries this one), the host takes a snapshot of each
//! entry at the top of the workspace before the job and checks it after: a file or directory
//! the job created is removed (with what it holds), one it changed is restored from the
//! snapshot, one it removed is restored. Every read and change is made beneath the workspace's
//! descriptor opened before the job, without following a symlink (module `beneath`). A request
//! allows an entry by its path (`allow_control_files`); each item undone is one
//! [`Reverted`] entry with its warning line.

use super::reverted::Reverted;
use crate::beneath::{Anchors, Found, Read};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most entries the snapshot records beneath one workspace's control files, and the most
/// bytes of their content it keeps: beyond them the guard says it did not check the rest.
const MAX_ENTRIES: usize = 4096;
const MAX_BYTES: usize = 16 << 20;
/// The largest single file whose content is kept (an agent's settings are a few KiB).
const MAX_FILE: u64 = 4 << 20;

/// One path as the snapshot saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    File(Vec<u8>, u32),
    Dir(u32),
    Link(PathBuf),
    /// Something else (a FIFO, a device, a file too large to keep): left as it is.
    Other,
}

/// The snapshot of one workspace's control files.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    workspace: PathBuf,
    anchors: Anchors,
    /// The entries of the list this job may change (`allow_control_files`).
    allowed: Vec<String>,
    before: BTreeMap<PathBuf, State>,
    /// The snapshot stopped at its bounds: checked no further than it got.
    truncated: bool,
}

/// What a walk of the control files found.
struct Walk {
    found: BTreeMap<PathBuf, State>,
    truncated: bool,
    budget_entries: usize,
    budget_bytes: usize,
}

impl Walk {
    fn new() -> Walk {
        Walk {
            found: BTreeMap::new(),
            truncated: false,
            budget_entries: MAX_ENTRIES,
            budget_bytes: MAX_BYTES,
        }
    }

    /// Records `path` and, for a directory, everything beneath it.
    fn visit(&mut self, anchors: &Anchors, path: &Path) {
        if self.budget_entries == 0 {
            self.truncated = true;
            return;
        }
        self.budget_entries -= 1;
        let place = match anchors.place(path) {
            Found::Here(p) => p,
            // A component above the entry that is a symlink (`.vscode` for
            // `.vscode/tasks.json`): recorded as the link it is.
            Found::Symlink(s) => {
                if let Found::Here(p) = anchors.place(&s) {
                    let target = p.link().unwrap_or_default();
                    self.found.insert(s, State::Link(target));
                }
                return;
            }
            _ => return,
        };
        let Ok(st) = place.stat() else {
            return;
        };
        let state = match st.kind() {
            libc::S_IFLNK => State::Link(place.link().unwrap_or_default()),
            libc::S_IFDIR => State::Dir(st.mode & 0o777),
            libc::S_IFREG if st.size <= MAX_FILE && (st.size as usize) <= self.budget_bytes => {
                match place.read(MAX_FILE) {
                    Read::File(b, st) => {
                        self.budget_bytes -= b.len();
                        State::File(b, st.mode & 0o777)
                    }
                    _ => State::Other,
                }
            }
            libc::S_IFREG => {
                self.truncated = true;
                State::Other
            }
            _ => State::Other,
        };
        let dir = matches!(state, State::Dir(_));
        self.found.insert(path.to_path_buf(), state);
        if dir {
            if let Ok(Some((_, entries))) = place.entries() {
                for e in entries {
                    self.visit(anchors, &path.join(&e.name));
                }
            }
        }
    }
}

/// The line's words for an entry: which tool runs it.
fn why(rel: &Path) -> String {
    let rel = rel.to_string_lossy();
    crate::control_files::all()
        .iter()
        .find(|e| rel == e.path || rel.starts_with(&format!("{}/", e.path)))
        .map_or_else(
            || "a control file".to_string(),
            |e| format!("{} runs what it says", e.tool),
        )
}

/// The entry of the list `rel` lies in (what a request allows).
fn entry_of(rel: &Path) -> String {
    let rel = rel.to_string_lossy();
    crate::control_files::all()
        .iter()
        .find(|e| rel == e.path || rel.starts_with(&format!("{}/", e.path)))
        .map_or_else(|| rel.to_string(), |e| e.path.clone())
}

impl Snapshot {
    /// Takes the snapshot of the control files at the top of `workspace` (canonical), but
    /// those `allowed` names.
    pub(crate) fn take(workspace: &Path, allowed: &[String]) -> Snapshot {
        let mut anchors = Anchors::default();
        anchors.add(workspace);
        let mut s = Snapshot {
            workspace: workspace.to_path_buf(),
            anchors,
            allowed: allowed.to_vec(),
            ..Snapshot::default()
        };
        let walk = s.walk();
        s.before = walk.found;
        s.truncated = walk.truncated;
        s
    }

    fn walk(&self) -> Walk {
        let mut walk = Walk::new();
        for e in crate::control_files::all() {
            if self.allowed.iter().any(|a| a == &e.path) {
                continue;
            }
            let path = self.workspace.join(&e.path);
            // Most entries are absent: one `fstatat` on the workspace's descriptor says so (a
            // listing of the workspace's top instead cost more in a workspace of 500 files).
            if self.anchors.first_exists(&path) {
                walk.visit(&self.anchors, &path);
            }
        }
        walk
    }

    /// Checks after the job; undoes and names what it changed. `now`: a snapshot taken right
    /// after the job, whose walk is the current state (not made twice).
    pub(crate) fn check(&self, now: Option<&Snapshot>) -> Vec<Reverted> {
        let walked;
        let after = match now {
            Some(n) => &n.before,
            None => {
                walked = self.walk();
                &walked.found
            }
        };
        let mut items = Vec::new();
        let shown = |p: &Path| {
            let rel = p.strip_prefix(&self.workspace).unwrap_or(p);
            crate::escape::path(rel).into_owned()
        };
        let rel = |p: &Path| p.strip_prefix(&self.workspace).unwrap_or(p).to_path_buf();
        let allow = |p: &Path| {
            let e = entry_of(&rel(p));
            format!("to keep it: --allow-control-file {e} (allow_control_files in a request)")
        };
        let mut push = |p: &Path, action: &str, done: std::io::Result<()>, said: String| {
            let (action, warning) = match done {
                Ok(()) => (action.to_string(), format!("sandbox: {said}")),
                Err(e) => (
                    "failed".to_string(),
                    format!(
                        "sandbox: could not undo what the command left in {}: {said}; the \
                         attempt failed ({e}): fix it by hand before starting that tool there",
                        shown(p)
                    ),
                ),
            };
            items.push(Reverted {
                path: p.to_path_buf(),
                what: "control-file".to_string(),
                action,
                warning,
            });
        };
        // What the job made: removed, a directory with what it holds (its entries are then
        // gone too, and skipped).
        let mut removed: Vec<&Path> = Vec::new();
        // Beyond the snapshot's bounds nothing is known to be new.
        let new = after
            .keys()
            .filter(|p| !self.truncated && !self.before.contains_key(*p));
        for p in new {
            if removed.iter().any(|r| p.starts_with(r)) {
                continue;
            }
            let done = match self.anchors.place(p) {
                Found::Here(place) => place.remove_tree(),
                _ => Ok(()),
            };
            let said = format!(
                "removed {} that the command created ({} when it next starts here, outside \
                 the sandbox); {}",
                shown(p),
                why(&rel(p)),
                allow(p)
            );
            push(p, "removed", done, said);
            removed.push(p);
        }
        // What the job changed or removed: put back as the snapshot saw it, parents first
        // (the map is in path order).
        for (p, was) in &self.before {
            let now = after.get(p);
            if now == Some(was) || matches!(was, State::Other) {
                continue;
            }
            // Beneath a directory that became something else: put back with it.
            let Found::Here(place) = self.anchors.place(p) else {
                continue;
            };
            let mut done = Ok(());
            if now.is_some() && !matches!((was, now), (State::Dir(_), Some(State::Dir(_)))) {
                done = place.remove_tree();
            }
            done = done.and_then(|()| match was {
                State::File(bytes, mode) => place.replace(bytes, *mode),
                State::Dir(mode) if !matches!(now, Some(State::Dir(_))) => place.make_dir(*mode),
                // A directory whose mode alone changed: its entries are what matter.
                State::Dir(_) => Ok(()),
                State::Link(target) => place.make_link(target),
                State::Other => Ok(()),
            });
            if matches!((was, now), (State::Dir(_), Some(State::Dir(_)))) {
                continue;
            }
            let what = if now.is_none() { "removed" } else { "changed" };
            let said = format!(
                "restored {} as it was before the command, which {what} it ({} when it next \
                 starts here, outside the sandbox); {}",
                shown(p),
                why(&rel(p)),
                allow(p)
            );
            push(p, "restored", done, said);
        }
        if self.truncated {
            items.push(Reverted {
                path: self.workspace.clone(),
                what: "control-file".to_string(),
                action: "failed".to_string(),
                warning: format!(
                    "sandbox: the control files at the top of the workspace hold more than {} \
                     entries or {} MiB: what the command made there beyond that was not checked",
                    MAX_ENTRIES,
                    MAX_BYTES >> 20
                ),
            });
        }
        items
    }
}
