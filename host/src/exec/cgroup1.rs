//! Request cgroups in the cgroup v1 `memory` and `pids` hierarchies.
//!
//! On hybrid machines the cgroup v2 hierarchy holds a request's processes together (module
//! `contain`) but has no controllers, while the memory and process limits live in v1
//! hierarchies mounted beside it. There a request also gets a directory of its own in each v1
//! hierarchy it needs, next to the host's own cgroup there; its child writes its pid to the
//! directory's `tasks` before exec (v1 has no `CLONE_INTO_CGROUP`; moving the calling thread
//! itself skips the global lock a `cgroup.procs` write takes, whose RCU grace period cost
//! milliseconds per request), so the program and every descendant are charged and counted
//! there whatever they do with sessions.
//!
//! Emptied directories are kept for the next request (creating a memory cgroup costs far more
//! than reusing one), removed at exit, and those of hosts that died are removed by a later
//! host (see `cgroup_names::stale_scan_due`). Creating them needs write access to the host's cgroup in the hierarchy: root, on a
//! usual system.

use std::ffi::CStr;
use std::fs;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// A v1 controller this module uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Controller {
    /// `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`, so swap does not extend it).
    Memory,
    /// `pids.max`.
    Pids,
}

impl Controller {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
        }
    }

    /// The file that must exist in a child cgroup for the controller to be usable there.
    pub(crate) fn limit_file(self) -> &'static str {
        match self {
            Controller::Memory => "memory.limit_in_bytes",
            Controller::Pids => "pids.max",
        }
    }

    /// The counter that grows when the limit stopped something: `(file, key)`.
    pub(crate) fn counter(self) -> (&'static CStr, &'static str) {
        match self {
            Controller::Memory => (c"memory.oom_control", "oom_kill"),
            Controller::Pids => (c"pids.events", "max"),
        }
    }
}

/// Idle request cgroups kept per hierarchy.
const POOL_MAX: usize = 16;

/// Above this usage left by the previous request (memory that cannot be reclaimed without
/// swap, such as files in a shared tmpfs) a memory cgroup is removed rather than reused.
const REUSE_MAX_USAGE: u64 = 16 * 1024 * 1024;

/// One v1 hierarchy where request cgroups can be created.
#[derive(Debug)]
struct Hierarchy {
    /// The host's own cgroup directory in it.
    dir: PathBuf,
    /// Idle request cgroups, with the pid of the host that made them.
    idle: Mutex<(u32, Vec<Idle>)>,
}

/// An idle request cgroup and what the next request need not write or read again. No
/// descriptor is kept: a long-lived host's descriptor count stays where it was between
/// requests, however many ran at once.
#[derive(Debug)]
struct Idle {
    path: PathBuf,
    /// The limit it has (`None`: unlimited).
    limit: Option<u64>,
    /// Its counter (see [`Controller::counter`]) once the last request's processes were gone.
    counter: u64,
}

/// The hierarchy of `c`, once looked up (see [`hierarchy`]).
fn cell(c: Controller) -> &'static OnceLock<Option<Hierarchy>> {
    static MEMORY: OnceLock<Option<Hierarchy>> = OnceLock::new();
    static PIDS: OnceLock<Option<Hierarchy>> = OnceLock::new();
    match c {
        Controller::Memory => &MEMORY,
        Controller::Pids => &PIDS,
    }
}

/// The hierarchy of `c`, looked up (and its first request cgroup created) on first use, once
/// per process.
fn hierarchy(c: Controller) -> Option<&'static Hierarchy> {
    cell(c).get_or_init(|| detect(c)).as_ref()
}

/// `/proc/self/mountinfo`, read once for both controllers, and only when a hierarchy is not
/// where systems mount it: generating it costs more than the rest of a lookup.
fn mountinfo() -> Option<&'static str> {
    static TEXT: OnceLock<Option<String>> = OnceLock::new();
    TEXT.get_or_init(crate::mountinfo::read).as_deref()
}

/// The host's cgroup in the v1 hierarchy of `c`, when a request cgroup with the controller's
/// limit file can be created there.
fn detect(c: Controller) -> Option<Hierarchy> {
    let path = own_path(c)?;
    let dir = usual_dir(c, path).or_else(|| dir_from_mountinfo(c, path))?;
    if super::cgroup_names::stale_scan_due() {
        super::cgroup_names::remove_stale(&dir);
    }
    // The probe is the first request cgroup itself: when usable it waits in the idle pool.
    let probe = dir.join(name());
    fs::create_dir(&probe).ok()?;
    if !probe.join(c.limit_file()).exists() {
        let _ = fs::remove_dir(&probe);
        return None;
    }
    crate::sys::at_exit(drain);
    Some(Hierarchy {
        dir,
        idle: Mutex::new((
            std::process::id(),
            vec![Idle {
                path: probe,
                limit: None,
                counter: 0,
            }],
        )),
    })
}

/// The host's cgroup path in the v1 hierarchy of `c`, as `/proc/self/cgroup` shows it.
fn own_path(c: Controller) -> Option<&'static str> {
    super::cgroup_names::own_cgroups()?.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, list, path) = (f.next()?, f.next()?, f.next()?);
        list.split(',').any(|n| n == c.name()).then_some(path)
    })
}

/// The host's cgroup `path` in the hierarchy of `c` mounted where systems mount it
/// (`/sys/fs/cgroup/<controller>`, a cgroup file system there), when that directory exists.
/// A hierarchy mounted with a root of its own (a container's) shows the path from a higher
/// root, which is not found there: [`dir_from_mountinfo`] then maps it.
fn usual_dir(c: Controller, path: &str) -> Option<PathBuf> {
    const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
    let mount = Path::new("/sys/fs/cgroup").join(c.name());
    let c_mount = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes()).ok()?;
    if crate::sys::fs_type(&c_mount).ok()? != CGROUP_SUPER_MAGIC {
        return None;
    }
    let dir = mount.join(path.trim_start_matches('/'));
    dir.join("cgroup.procs").exists().then_some(dir)
}

/// The host's cgroup `path` in the hierarchy of `c` as `/proc/self/mountinfo` maps it (a
/// mount of the controller whose root holds the path).
fn dir_from_mountinfo(c: Controller, path: &str) -> Option<PathBuf> {
    crate::mountinfo::parse(mountinfo()?).find_map(|m| {
        if m.fs != "cgroup" || !m.super_options.split(',').any(|o| o == c.name()) {
            return None;
        }
        let below = path.strip_prefix(m.root.trim_end_matches('/'))?;
        let below = below.trim_start_matches('/');
        Some(if below.is_empty() {
            m.point
        } else {
            m.point.join(below)
        })
    })
}

/// Where request cgroups of `c` are created (the host's own cgroup in the v1 hierarchy), when
/// this caller can create them.
pub(crate) fn location(c: Controller) -> Option<&'static Path> {
    hierarchy(c).map(|h| h.dir.as_path())
}

/// A new request cgroup's name: `sandbox-exec-<host pid>-v1-<n>`.
fn name() -> String {
    format!(
        "{}v1-{}",
        super::cgroup_names::prefix(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Removes the idle request cgroups at exit (not in a forked child: they are its parent's).
/// A hierarchy this host never looked up is left alone (looking it up here would create a
/// request cgroup only to remove it).
extern "C" fn drain() {
    for c in [Controller::Memory, Controller::Pids] {
        let Some(h) = cell(c).get().and_then(Option::as_ref) else {
            continue;
        };
        if let Ok(mut idle) = h.idle.try_lock() {
            if idle.0 == std::process::id() {
                for d in idle.1.drain(..) {
                    let _ = fs::remove_dir(d.path);
                }
            }
        }
    }
}

/// The number of the next request cgroup this host creates in a v1 hierarchy.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A request's cgroup in one v1 hierarchy.
#[derive(Debug)]
pub(crate) struct Dir {
    controller: Controller,
    path: PathBuf,
    /// Opened for the child, which joins through `tasks` relative to it.
    fd: fs::File,
    limit: Option<u64>,
    /// The counter of [`Controller::counter`] when the request started.
    before: u64,
    /// The counter as [`Dir::hits`] last read it.
    last: std::cell::Cell<Option<u64>>,
}

impl Dir {
    /// A request cgroup of `c` with its limit set to `limit` (`None`: unlimited); `None` when
    /// the machine has no usable v1 hierarchy for `c` or this caller cannot create one there.
    /// A reused one is written to only when its limit changes, and its counter is the one read
    /// when its last request ended: a request that reuses a cgroup only opens it here.
    pub(crate) fn new(c: Controller, limit: Option<u64>) -> Option<Dir> {
        let h = hierarchy(c)?;
        let reused = {
            let mut idle = h.idle.lock().unwrap_or_else(|e| e.into_inner());
            if idle.0 != std::process::id() {
                // A forked host: the pooled cgroups are its parent's.
                *idle = (std::process::id(), Vec::new());
            }
            idle.1.pop()
        };
        let idle = match reused {
            Some(i) => i,
            None => {
                let path = h.dir.join(name());
                if let Err(e) = fs::create_dir(&path) {
                    tracing::warn!(cgroup = %path.display(), error = %e, "cannot create a request cgroup");
                    return None;
                }
                // A new cgroup: no limit, counters at 0.
                Idle {
                    path,
                    limit: None,
                    counter: 0,
                }
            }
        };
        let Idle {
            path,
            limit: had,
            counter,
        } = idle;
        let ready = (if had == limit {
            Ok(())
        } else {
            set_limit(c, &path, limit)
        })
        .and_then(|_| fs::File::open(&path));
        match ready {
            Ok(fd) => Some(Dir {
                controller: c,
                path,
                fd,
                limit,
                before: counter,
                last: std::cell::Cell::new(None),
            }),
            Err(e) => {
                tracing::warn!(cgroup = %path.display(), error = %e, "cannot set the request cgroup's limit");
                let _ = fs::remove_dir(&path);
                None
            }
        }
    }

    /// The directory the child joins.
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The directory in the hierarchy.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The controller.
    pub(crate) fn controller(&self) -> Controller {
        self.controller
    }

    fn read_counter(&self) -> u64 {
        let (file, key) = self.controller.counter();
        let n = counter_in(&self.fd, file, key);
        self.last.set(Some(n));
        n
    }

    /// How often the limit stopped something during the request (the out-of-memory killer's
    /// kills, or refused forks).
    pub(crate) fn hits(&self) -> u64 {
        self.read_counter().saturating_sub(self.before)
    }

    /// After every process of the request is gone: keeps the directory for the next request
    /// when it is empty (`known_empty`: the caller saw every process of the request gone,
    /// else `cgroup.procs` is read), else removes it. `reusable` false: removed whatever it
    /// holds (it had cgroups made below it, module `cgroup_nest`).
    pub(crate) fn finish(self, known_empty: bool, reusable: bool) {
        let counter = self.last.get().unwrap_or_else(|| self.read_counter());
        let Dir {
            controller,
            path,
            fd,
            limit,
            ..
        } = self;
        let empty = reusable
            && (known_empty
                || fs::read_to_string(path.join("cgroup.procs"))
                    .is_ok_and(|t| t.trim().is_empty()));
        let small = controller != Controller::Memory
            || small_file_in(&fd, c"memory.usage_in_bytes")
                .and_then(|t| t.trim().parse::<u64>().ok())
                .is_some_and(|used| used < REUSE_MAX_USAGE);
        if empty && small {
            if let Some(h) = hierarchy(controller) {
                let mut idle = h.idle.lock().unwrap_or_else(|e| e.into_inner());
                if idle.0 == std::process::id() && idle.1.len() < POOL_MAX {
                    drop(fd);
                    idle.1.push(Idle {
                        path,
                        limit,
                        counter,
                    });
                    return;
                }
            }
        }
        drop(fd);
        if let Err(e) = fs::remove_dir(&path) {
            tracing::warn!(cgroup = %path.display(), error = %e, "cannot remove the request cgroup");
        }
    }
}

/// Writes the limit of `c` in `dir`. For memory, swap is limited to the same total, so that
/// the limit is not extended by swapping (the order keeps `memsw >= memory` at every step).
fn set_limit(c: Controller, dir: &Path, limit: Option<u64>) -> std::io::Result<()> {
    match c {
        Controller::Memory => {
            let value = limit.map_or("-1".to_string(), |b| b.to_string());
            let memsw = dir.join("memory.memsw.limit_in_bytes");
            let swap = memsw.exists();
            if swap {
                write(&memsw, "-1")?;
            }
            write(&dir.join("memory.limit_in_bytes"), &value)?;
            if swap {
                write(&memsw, &value)?;
            }
            Ok(())
        }
        Controller::Pids => write(
            &dir.join("pids.max"),
            &limit.map_or("max".to_string(), |n| n.to_string()),
        ),
    }
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    use std::io::Write;
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value.as_bytes())
}

/// A small cgroup file, `name` in the open directory `dir`, in one read (no size query: these
/// files are generated on read, a few lines long), `None` when it cannot be read. Relative to
/// the directory: one lookup instead of resolving the whole path (each of its components a
/// cgroupfs lookup), on every request.
fn small_file_in(dir: &fs::File, name: &CStr) -> Option<String> {
    use std::io::Read;
    let mut buf = [0u8; 1024];
    let n = crate::sys::open_in(dir.as_fd(), name)
        .ok()?
        .read(&mut buf)
        .ok()?;
    String::from_utf8(buf[..n].to_vec()).ok()
}

/// The value after `key` in the file `name` of lines `key value` in the open directory `dir`
/// (0 when it cannot be read).
pub(crate) fn counter_in(dir: &fs::File, name: &CStr, key: &str) -> u64 {
    key_value(small_file_in(dir, name).as_deref(), key)
}

/// The value after `key` in `text`, lines of `key value` (0 when absent or unreadable).
fn key_value(text: Option<&str>, key: &str) -> u64 {
    text.and_then(|t| {
        t.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
    })
    .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The usual place and mountinfo's mapping name the same directory wherever both find the
    /// hierarchy (on this machine kind both do, for both controllers); a path the hierarchy
    /// does not hold is found by neither.
    #[test]
    fn the_usual_place_and_mountinfo_agree() {
        for c in [Controller::Memory, Controller::Pids] {
            let Some(path) = own_path(c) else {
                continue; // no such v1 hierarchy here
            };
            let usual = usual_dir(c, path);
            if let Some(u) = &usual {
                assert_eq!(Some(u), dir_from_mountinfo(c, path).as_ref(), "{c:?}");
            }
            assert_eq!(usual_dir(c, "/no-such-cgroup-here"), None);
        }
    }

    #[test]
    fn counters_are_read_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("memory.oom_control");
        fs::write(&f, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n").unwrap();
        let d = fs::File::open(dir.path()).unwrap();
        assert_eq!(counter_in(&d, c"memory.oom_control", "oom_kill"), 3);
        assert_eq!(counter_in(&d, c"memory.oom_control", "under_oom"), 0);
        assert_eq!(counter_in(&d, c"memory.oom_control", "missing"), 0);
        assert_eq!(counter_in(&d, c"none", "max"), 0);
    }
}
