//! A session command's own limits: a cgroup of its own below the session's, made for a command
//! that asks for a memory or process limit below the session's.
//!
//! The session's limits are held by the cgroups the engine made for its job (cgroup v2 with
//! the memory and pids controllers, or v1 `memory` and `pids` directories on hybrid machines).
//! A command with limits of its own gets `cmd-ID` below each of them, with its limits written
//! there; its first process joins them between clone and exec (writing `0` to the
//! `cgroup.procs` the host opened and passed along), so it and every descendant are charged and
//! counted there, and the out-of-memory killer of a command's limit picks from its processes
//! only. The session's limit still holds every command (limits are hierarchical).
//!
//! cgroup v2 allows controllers for a cgroup's children only when the cgroup itself has no
//! processes: before the first such command, every process of the session's cgroup (the init,
//! the resident, commands without limits of their own and what they left running) is moved
//! to a leaf `resident` beside the commands' cgroups, and the memory and pids controllers are
//! enabled for the session cgroup's children. v1 has no such rule.
//!
//! A command's cgroup is removed once its processes are gone; one that background processes
//! keep populated stays until they end (retried at the next command's start and end) or the
//! session ends (the engine removes what is left below the session's cgroups, module
//! `exec::cgroup_nest`).

use crate::exec::cgroup1::Controller;
use crate::exec::cgroup_nest::LimitDir;
use crate::exec::hits::MemoryHit;
use crate::exec::memwatch::{Ends, Roster, Watchdog};
use std::fs;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The limits a command asked for (each at or below the session's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Own {
    /// Memory of the command's processes, bytes.
    pub memory: Option<u64>,
    /// Processes and threads of the command at once.
    pub processes: Option<u64>,
}

impl Own {
    /// Whether any limit was asked for.
    pub(crate) fn any(&self) -> bool {
        self.memory.is_some() || self.processes.is_some()
    }
}

/// The session's cgroups, where commands' own are made.
#[derive(Debug)]
pub(crate) struct Cgroups {
    dirs: Vec<LimitDir>,
    /// The v2 session cgroups whose processes were moved to `resident` (and controllers
    /// enabled for the children): done once, before the first command cgroup there.
    nested: Mutex<Vec<PathBuf>>,
    /// Command cgroups still populated when their command ended.
    lingering: Arc<Mutex<Vec<PathBuf>>>,
}

impl Cgroups {
    /// The session's limit cgroups, as the engine made them.
    pub(crate) fn new(dirs: Vec<LimitDir>) -> Cgroups {
        Cgroups {
            dirs,
            nested: Mutex::new(Vec::new()),
            lingering: Arc::default(),
        }
    }

    /// Whether a cgroup of the session holds the limit of `c` (a command's own can be made).
    pub(crate) fn holds(&self, c: Controller) -> bool {
        self.dirs.iter().any(|d| d.controller == c)
    }

    /// Makes command `id`'s cgroups with the limits in `own` (each hierarchy that holds one of
    /// them; in a v2 hierarchy one directory holds both).
    pub(crate) fn make(&self, id: u64, own: Own) -> std::io::Result<CommandCgroup> {
        sweep(&self.lingering);
        let mut parts: Vec<Part> = Vec::new();
        let made = (|| {
            for d in &self.dirs {
                let limit = match d.controller {
                    Controller::Memory => own.memory,
                    Controller::Pids => own.processes,
                };
                let Some(limit) = limit else { continue };
                let part = match parts.iter().position(|p| p.parent == d.dir) {
                    Some(i) => &mut parts[i],
                    None => {
                        if d.v2 {
                            self.nest_v2(&d.dir)?;
                        }
                        crate::exec::cgroup_nest::mark(&d.dir);
                        let dir = d.dir.join(format!("cmd-{id}"));
                        fs::create_dir(&dir)?;
                        parts.push(Part {
                            parent: d.dir.clone(),
                            dir,
                            v2: d.v2,
                            procs: None,
                            counters: Vec::new(),
                        });
                        parts.last_mut().expect("pushed")
                    }
                };
                set_limit(&part.dir, d.controller, d.v2, limit)?;
                part.counters.push(d.controller);
            }
            for p in &mut parts {
                let f = fs::OpenOptions::new()
                    .write(true)
                    .open(p.dir.join("cgroup.procs"))?;
                p.procs = Some(OwnedFd::from(f));
            }
            Ok(())
        })();
        let cg = CommandCgroup {
            parts,
            lingering: Arc::clone(&self.lingering),
            watchdog: None,
            memory: own.memory,
            processes: own.processes,
        };
        // A cgroup half made is removed (dropping `cg` does).
        made.map(|()| cg)
    }

    /// Moves every process of the v2 session cgroup `dir` to its leaf `resident` and enables
    /// the memory and pids controllers for its children (cgroup v2's "no internal processes"
    /// rule), once.
    fn nest_v2(&self, dir: &Path) -> std::io::Result<()> {
        let mut nested = self.nested.lock().unwrap_or_else(|e| e.into_inner());
        if nested.iter().any(|d| d == dir) {
            return Ok(());
        }
        crate::exec::cgroup_nest::mark(dir);
        let leaf = dir.join("resident");
        match fs::create_dir(&leaf) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        // The resident may start a command meanwhile (in the old cgroup until it has moved):
        // read again until none is left. One write per open: each moves one process.
        for _ in 0..64 {
            let left = read_pids(dir);
            if left.is_empty() {
                break;
            }
            for pid in left {
                let moved = fs::OpenOptions::new()
                    .write(true)
                    .open(leaf.join("cgroup.procs"))
                    .and_then(|mut f| f.write_all(pid.to_string().as_bytes()));
                // A process that ended meanwhile (ESRCH) is no longer there to move.
                if let Err(e) = moved {
                    if e.raw_os_error() != Some(libc::ESRCH) {
                        return Err(e);
                    }
                }
            }
        }
        if !read_pids(dir).is_empty() {
            return Err(std::io::Error::other(
                "the session's processes could not all be moved to its leaf cgroup",
            ));
        }
        let have = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        let enable: Vec<&str> = ["memory", "pids"]
            .into_iter()
            .filter(|c| have.split_whitespace().any(|h| h == *c))
            .collect();
        let line = enable
            .iter()
            .map(|c| format!("+{c}"))
            .collect::<Vec<_>>()
            .join(" ");
        fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.subtree_control"))?
            .write_all(line.as_bytes())?;
        nested.push(dir.to_path_buf());
        Ok(())
    }
}

/// One command's cgroup in one hierarchy.
#[derive(Debug)]
struct Part {
    parent: PathBuf,
    dir: PathBuf,
    v2: bool,
    /// `cgroup.procs`, opened by the host: the command's first process writes `0` to it.
    procs: Option<OwnedFd>,
    /// The controllers whose limits were set here.
    counters: Vec<Controller>,
}

/// A command's own cgroups, from its start until it has ended.
#[derive(Debug)]
pub(crate) struct CommandCgroup {
    parts: Vec<Part>,
    lingering: Arc<Mutex<Vec<PathBuf>>>,
    /// Watches the command's memory where no memory cgroup holds it.
    watchdog: Option<Watchdog>,
    memory: Option<u64>,
    processes: Option<u64>,
}

/// What a command's own limits stopped.
#[derive(Debug, Default)]
pub(crate) struct Hits {
    /// The memory limit ended processes of the command, and how.
    pub memory: Option<MemoryHit>,
    /// Forks the process limit refused.
    pub processes: u64,
}

impl CommandCgroup {
    /// The `cgroup.procs` descriptors the command's first process joins by.
    pub(crate) fn procs_fds(&self) -> Vec<RawFd> {
        self.parts
            .iter()
            .filter_map(|p| p.procs.as_ref().map(|f| f.as_raw_fd()))
            .collect()
    }

    /// Once the command runs (`pid`, `pidfd` its first process): drops the `cgroup.procs`
    /// descriptors, and starts the memory watchdog when no memory cgroup holds its limit.
    pub(crate) fn started(&mut self, pid: i32, pidfd: &OwnedFd) -> std::io::Result<()> {
        for p in &mut self.parts {
            p.procs = None;
        }
        let in_cgroup = self
            .parts
            .iter()
            .any(|p| p.counters.contains(&Controller::Memory));
        if let (Some(limit), false) = (self.memory, in_cgroup) {
            // Every process of the command: the session's init keeps those its first process
            // leaves, which nothing else would end.
            self.watchdog = Some(Watchdog::start(
                limit,
                Roster::tree(pid),
                pidfd.try_clone()?,
                Ends::Every,
            )?);
        }
        Ok(())
    }

    /// The memory limit asked for.
    pub(crate) fn memory(&self) -> Option<u64> {
        self.memory
    }

    /// The process limit asked for.
    pub(crate) fn processes(&self) -> Option<u64> {
        self.processes
    }

    /// What the limits stopped, once the command has ended (stops the watchdog).
    pub(crate) fn hits(&mut self) -> Hits {
        let mut h = Hits::default();
        for p in &self.parts {
            for c in &p.counters {
                let (file, key) = match (c, p.v2) {
                    (Controller::Memory, true) => ("memory.events", "oom_kill"),
                    (Controller::Memory, false) => ("memory.oom_control", "oom_kill"),
                    (Controller::Pids, _) => ("pids.events", "max"),
                };
                let n = counter(&p.dir.join(file), key);
                match c {
                    Controller::Memory if n > 0 => h.memory = Some(MemoryHit::Killed(n)),
                    Controller::Memory => {}
                    Controller::Pids => h.processes += n,
                }
            }
        }
        if let Some(fired) = self.watchdog.take().and_then(|mut w| w.stop()) {
            h.memory = Some(MemoryHit::Watchdog(fired));
        }
        h
    }
}

impl Drop for CommandCgroup {
    /// Removes the command's cgroups; those background processes still hold wait in the
    /// session's list (retried later, or removed with the session's).
    fn drop(&mut self) {
        self.watchdog.take();
        let mut lingering = self.lingering.lock().unwrap_or_else(|e| e.into_inner());
        for p in self.parts.drain(..) {
            drop(p.procs);
            if fs::remove_dir(&p.dir).is_err() && p.dir.exists() {
                lingering.push(p.dir);
            }
        }
        drop(lingering);
        sweep(&self.lingering);
    }
}

/// Removes the lingering command cgroups that have emptied.
fn sweep(lingering: &Mutex<Vec<PathBuf>>) {
    lingering
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|d| fs::remove_dir(d).is_err() && d.exists());
}

/// Writes limit `value` of `c` in the command cgroup `dir`: swap is not let to extend a memory
/// limit (v2 `memory.swap.max` 0; v1 `memory.memsw.limit_in_bytes` the same total).
fn set_limit(dir: &Path, c: Controller, v2: bool, value: u64) -> std::io::Result<()> {
    let write = |name: &str, text: &str| {
        fs::OpenOptions::new()
            .write(true)
            .open(dir.join(name))?
            .write_all(text.as_bytes())
    };
    let v = value.to_string();
    match (c, v2) {
        (Controller::Pids, _) => write("pids.max", &v),
        (Controller::Memory, true) => {
            write("memory.max", &v)?;
            if dir.join("memory.swap.max").exists() {
                write("memory.swap.max", "0")?;
            }
            Ok(())
        }
        (Controller::Memory, false) => {
            // A new cgroup: memsw is unlimited, so memory's limit can be set first.
            write("memory.limit_in_bytes", &v)?;
            if dir.join("memory.memsw.limit_in_bytes").exists() {
                write("memory.memsw.limit_in_bytes", &v)?;
            }
            Ok(())
        }
    }
}

fn read_pids(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// The value after `key` in a file of `key value` lines (0 when absent).
fn counter(file: &Path, key: &str) -> u64 {
    fs::read_to_string(file)
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok()).flatten()
            })
        })
        .unwrap_or(0)
}
