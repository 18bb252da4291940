//! Keeping a request's processes together so that all of them can be signalled, killed and
//! reaped, including descendants that left the process group or the session.
//!
//! Three mechanisms:
//! - **PID namespace** (when the request runs under an init of its own PID namespace, the
//!   direct child): the init's death makes the kernel kill every process left in the
//!   namespace, and no process can leave a PID namespace. Killing is killing the init and
//!   waiting until it is a zombie, which it becomes only once the namespace is empty. No
//!   cgroup is created for this alone; one is when it carries a limit (a cgroup v2 with the
//!   pids or memory controller), and then it holds the tree as below.
//! - **cgroup** (preferred otherwise): a cgroup v2 directory per request, in the host's own
//!   cgroup (for an unprivileged caller, in the delegated cgroup above it that has the memory
//!   controller, where there is one). The child is created in it (`clone3` with `CLONE_INTO_CGROUP`, or it joins
//!   before exec where that is not available), so every descendant is in it whatever it does
//!   with sessions and process groups. Killing: freeze, record the members, `cgroup.kill`, wait until the
//!   cgroup is empty, reap. An emptied cgroup is thawed and kept for the next request (up to
//!   [`POOL_MAX`] idle ones; creating and removing a directory costs about 100 µs); idle ones
//!   are removed at exit, and those of hosts that died are removed by a later host.
//! - **subreaper** (fallback when no writable cgroup v2 is mounted): the host is made a child
//!   subreaper, so orphans are re-parented to it rather than to init; the request's processes
//!   are found by walking `/proc` (same session or process group as the child, or a parent
//!   chain leading to it). Limit: a descendant that calls `setsid` *and* loses its parent
//!   before the walk is no longer recognisable.
//!
//! In both cases the host is a child subreaper (init on some machines never reaps orphans), and
//! adopted orphans are reaped by pid, never with `waitpid(-1)`, which would steal the exit
//! status of children that other threads of the host are waiting for.

use super::cgroup1::{counter_in, Controller, Dir};
use super::cgroup_names::{prefix, remove_stale, stale_scan_due};
use super::hits::{Counts, MemoryHit};
use super::limits::MemoryBound;
use super::memwatch::{Ends, Roster, Watchdog};
use super::procfs::{stat, Stat};
use serde::Serialize;
use std::collections::HashSet;
use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Which mechanism to use to hold a request's processes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Containment {
    /// A cgroup when one is available, else the subreaper and a `/proc` walk.
    #[default]
    Auto,
    /// A cgroup; fail when none is available.
    Cgroup,
    /// The subreaper and a `/proc` walk, even when a cgroup is available (and no PID
    /// namespace is used to end the tree).
    Subreaper,
}

/// The mechanism a request actually ran with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// A cgroup v2 directory per request.
    Cgroup,
    /// Child subreaper plus a `/proc` walk.
    Subreaper,
    /// The request's own PID namespace, which ends with its init.
    PidNamespace,
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mechanism::Cgroup => "cgroup",
            Mechanism::Subreaper => "subreaper",
            Mechanism::PidNamespace => "pid-namespace",
        })
    }
}

/// How long killing may take before the host gives up waiting (and says so in the log).
const KILL_DEADLINE: Duration = Duration::from_secs(5);

/// Where request cgroups are created: the host's own cgroup v2 directory, or for an
/// unprivileged caller the delegated cgroup above it that has the memory controller.
#[derive(Debug)]
struct Base {
    /// The directory in the mounted hierarchy.
    dir: PathBuf,
    /// Its path as `/proc/PID/cgroup` shows it (`/` for the root).
    rel: String,
    /// Request cgroups have the pids controller (`pids.max`): a process limit per request.
    pids: bool,
    /// Request cgroups have the memory controller (`memory.max`): a memory limit per request.
    memory: bool,
}

static BASE: OnceLock<Option<Base>> = OnceLock::new();

fn base() -> Option<&'static Base> {
    BASE.get_or_init(detect).as_ref()
}

/// Finds the cgroup2 mount and the host's cgroup in it, and checks that a child cgroup with
/// `cgroup.kill` and `cgroup.freeze` can be created there.
fn detect() -> Option<Base> {
    let (dir, rel) = host_cgroup()?.clone();
    if stale_scan_due() {
        remove_stale(&dir);
    }
    // The probe is the first request cgroup itself: when it is usable it goes to the idle
    // pool for the request that asked, so a one-shot host creates one cgroup, not two.
    let name = format!("{}{}", prefix(), NEXT.fetch_add(1, Ordering::Relaxed));
    let probe = dir.join(&name);
    fs::create_dir(&probe).ok()?;
    let usable = probe.join("cgroup.kill").exists() && probe.join("cgroup.freeze").exists();
    let pids = probe.join("pids.max").exists();
    let memory = probe.join("memory.max").exists();
    if !usable {
        let _ = fs::remove_dir(&probe);
        return None;
    }
    let place = Place {
        rel: format!("{}/{}", rel.trim_end_matches('/'), name),
        name,
        dir: probe,
    };
    pool().lock().unwrap_or_else(|e| e.into_inner()).push(place);
    Some(Base {
        dir,
        rel,
        pids,
        memory,
    })
}

/// The cgroup v2 directory request cgroups are created in and its path as `/proc/PID/cgroup`
/// shows it (`/` for the root), found once per process: the host's own, or the one
/// [`delegated_memory_parent`] finds for an unprivileged caller.
fn host_cgroup() -> Option<&'static (PathBuf, String)> {
    static HOST: OnceLock<Option<(PathBuf, String)>> = OnceLock::new();
    HOST.get_or_init(|| {
        let mount = usual_mount().or_else(mount_from_mountinfo)?;
        let own = super::cgroup_names::own_cgroups()?;
        let own_rel = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_string();
        // Root keeps its own cgroup: a cgroup higher up would take its jobs out of the limits
        // that the service it runs in has.
        let euid = crate::sys::euid();
        let rel = (euid != 0)
            .then(|| delegated_memory_parent(&mount, &own_rel, euid))
            .flatten()
            .unwrap_or(own_rel);
        Some((mount.join(rel.trim_start_matches('/')), rel))
    })
    .as_ref()
}

/// For an unprivileged caller whose own cgroup has no memory controller for its children:
/// the nearest cgroup above it, within the part of the tree delegated to `uid` (each cgroup
/// from its own up to that one is owned by `uid`, as systemd's `user@UID.service` and those
/// below it are), that has the memory controller enabled for its children
/// (`cgroup.subtree_control`) and whose directory and `cgroup.procs` its owner may write (so
/// that request cgroups can be created there and a child moved into one: the kernel asks for
/// write access to `cgroup.procs` of the common ancestor of both cgroups). Such a cgroup has
/// no processes of its own (cgroup v2's "no internal processes" rule), so request cgroups
/// are created beside its children, not by moving anything. `None` when the own cgroup has
/// the controller already, or none above it qualifies.
fn delegated_memory_parent(mount: &Path, own_rel: &str, uid: u32) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let has_memory = |dir: &Path| {
        fs::read_to_string(dir.join("cgroup.subtree_control"))
            .is_ok_and(|t| t.split_whitespace().any(|c| c == "memory"))
    };
    let owned_writable =
        |p: &Path| fs::metadata(p).is_ok_and(|m| m.uid() == uid && m.mode() & 0o200 != 0);
    let dir_of = |rel: &str| mount.join(rel.trim_start_matches('/'));
    if has_memory(&dir_of(own_rel)) {
        return None;
    }
    let mut rel = own_rel.trim_end_matches('/').to_string();
    // Up from the own cgroup while each one is the caller's (the delegated part).
    while owned_writable(&dir_of(&rel)) {
        let (parent, _) = rel.rsplit_once('/')?;
        if parent.is_empty() {
            return None;
        }
        let dir = dir_of(parent);
        if !owned_writable(&dir) {
            return None;
        }
        if has_memory(&dir) && owned_writable(&dir.join("cgroup.procs")) {
            return Some(parent.to_string());
        }
        rel = parent.to_string();
    }
    None
}

/// Whether request cgroups v2 would carry a limit here (the pids or memory controller is
/// enabled for the children of the host's cgroup, `cgroup.subtree_control`): told without
/// creating one, so that a request that needs a cgroup only for its limits can tell whether
/// it needs one at all. A request cgroup has a controller's files exactly when its parent's
/// `cgroup.subtree_control` names it.
fn v2_limits() -> bool {
    if let Some(b) = BASE.get() {
        return b.as_ref().is_some_and(|b| b.pids || b.memory);
    }
    static LIMITS: OnceLock<bool> = OnceLock::new();
    *LIMITS.get_or_init(|| {
        host_cgroup()
            .and_then(|(dir, _)| fs::read_to_string(dir.join("cgroup.subtree_control")).ok())
            .is_some_and(|t| t.split_whitespace().any(|c| c == "pids" || c == "memory"))
    })
}

/// Which cgroup would hold a request's memory limit and which its process limit, for this
/// caller on this machine (`sandbox check`): `(memory, processes)`, each the limit file and
/// where request cgroups are created, `None` where no cgroup can.
pub fn limit_cgroups() -> (Option<String>, Option<String>) {
    let v2 = base();
    let pick = |c: Controller, has: bool, v2_file: &str| match v2 {
        Some(b) if has => Some(format!(
            "{v2_file} of a cgroup v2 per request under {}",
            b.dir.display()
        )),
        _ => super::cgroup1::location(c).map(|d| {
            format!(
                "{} of a v1 {} cgroup per request under {}",
                c.limit_file(),
                c.name(),
                d.display()
            )
        }),
    };
    (
        pick(
            Controller::Memory,
            v2.is_some_and(|b| b.memory),
            "memory.max",
        ),
        pick(Controller::Pids, v2.is_some_and(|b| b.pids), "pids.max"),
    )
}

/// Whether a request without a memory cgroup here has its memory limit watched for the whole
/// job by the host (module `memwatch`), rather than held per process (`sandbox check`).
pub(crate) fn memory_watchable() -> bool {
    super::memwatch::available()
}

/// The number of the next request cgroup this host creates.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The cgroup2 hierarchy at one of the places systems mount it (`/sys/fs/cgroup` on unified
/// systems, `/sys/fs/cgroup/unified` on hybrid ones), told by the file system's magic number:
/// one `statfs` each instead of generating and parsing `/proc/self/mountinfo`, which costs a
/// one-shot run more than the rest of the detection.
fn usual_mount() -> Option<PathBuf> {
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .into_iter()
        .find(|p| {
            let c = std::ffi::CString::new(*p).expect("no NUL in a constant path");
            crate::sys::fs_type(&c).ok() == Some(CGROUP2_SUPER_MAGIC)
        })
        .map(PathBuf::from)
}

/// The cgroup2 mount as `/proc/self/mountinfo` lists it (a root mount of the hierarchy).
fn mount_from_mountinfo() -> Option<PathBuf> {
    crate::mountinfo::cgroup2(&crate::mountinfo::read()?)
}

/// Idle request cgroups kept for reuse: creating and removing one costs about 100 µs per
/// request, joining an existing one a few.
const POOL_MAX: usize = 32;

/// Where a request cgroup is. The pool keeps only this (the directory is opened again when
/// the cgroup is reused, so the pool holds no descriptors).
#[derive(Debug)]
struct Place {
    name: String,
    dir: PathBuf,
    /// The path as `/proc/PID/cgroup` shows it.
    rel: String,
}

static POOL_ONCE: OnceLock<Mutex<Vec<Place>>> = OnceLock::new();

fn pool() -> &'static Mutex<Vec<Place>> {
    POOL_ONCE.get_or_init(|| {
        crate::sys::at_exit(drain_pool);
        Default::default()
    })
}

/// Removes the idle cgroups at exit (skipped if another thread holds the pool, and in a
/// forked child, whose pool entries are its parent's).
extern "C" fn drain_pool() {
    let owner = *OWNER.lock().unwrap_or_else(|e| e.into_inner());
    if owner != std::process::id() {
        return;
    }
    if let Some(p) = POOL_ONCE.get() {
        if let Ok(mut idle) = p.try_lock() {
            for cg in idle.drain(..) {
                let _ = fs::remove_dir(&cg.dir);
            }
        }
    }
}

/// Names of request cgroups that are still in use (a zombie in any other one is stale).
fn active() -> &'static Mutex<HashSet<String>> {
    static ACTIVE: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    ACTIVE.get_or_init(Default::default)
}

/// An idle request cgroup, marked in use.
fn take_idle() -> Option<Cg> {
    loop {
        let idle = pool().lock().unwrap_or_else(|e| e.into_inner()).pop()?;
        let dir = idle.dir.clone();
        match Cg::open(idle) {
            Ok(cg) => return Some(cg),
            Err(_) => {
                let _ = fs::remove_dir(&dir);
            }
        }
    }
}

/// The process the idle pool, the in-use set and the subreaper setting belong to. A process
/// forked from a host inherits its memory but not its subreaper setting, and the pooled and
/// in-use cgroups are its parent's: nothing of that is cached across `fork` by pid alone.
static OWNER: Mutex<u32> = Mutex::new(0);

/// Makes this process a child subreaper on its first request, and again in a forked child,
/// forgetting (not removing) the parent's pooled and in-use cgroups there.
fn claim() {
    let me = std::process::id();
    let mut owner = OWNER.lock().unwrap_or_else(|e| e.into_inner());
    if *owner == me {
        return;
    }
    if *owner != 0 {
        if let Some(p) = POOL_ONCE.get() {
            p.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
        active().lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
    if let Err(error) = crate::sys::set_child_subreaper() {
        tracing::warn!(%error, "cannot become a child subreaper");
    }
    *owner = me;
}

impl Cg {
    /// Opens the cgroup at `place` and marks it in use.
    fn open(place: Place) -> std::io::Result<Cg> {
        let fd = fs::File::open(&place.dir)?;
        active()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(place.name.clone());
        Ok(Cg { place, fd })
    }

    /// Whether any process is in the cgroup (`cgroup.events`, opened relative to the
    /// directory already open: cheaper than resolving the whole path).
    fn populated(&self) -> bool {
        use std::os::fd::AsFd;
        let Ok(mut f) = crate::sys::open_in(self.fd.as_fd(), c"cgroup.events") else {
            return events(&self.dir, "populated");
        };
        let mut text = String::new();
        if f.read_to_string(&mut text).is_err() {
            return events(&self.dir, "populated");
        }
        text.lines()
            .any(|l| l.strip_prefix("populated").map(str::trim) == Some("1"))
    }
}

/// A request cgroup in use.
#[derive(Debug)]
struct Cg {
    place: Place,
    /// The cgroup's directory, for `CLONE_INTO_CGROUP`.
    fd: fs::File,
}

impl std::ops::Deref for Cg {
    type Target = Place;
    fn deref(&self) -> &Place {
        &self.place
    }
}

/// One request's processes.
#[derive(Debug)]
pub(crate) struct Group {
    cg: Option<Cg>,
    /// The direct child is the init of the request's own PID namespace, and no cgroup holds
    /// the tree: the init's death ends it.
    ns_init: bool,
    child: i32,
    /// Members seen while killing, with their start times (to tell a reused pid).
    recorded: Vec<(i32, u64)>,
    /// `cgroup.freeze` was set while killing (cleared before the cgroup is reused).
    froze: bool,
    /// Killing ended with the cgroup empty, so it can be reused.
    emptied: bool,
    /// `cgroup.kill` was used: the cgroup is not reused (on this kernel a child created in a
    /// cgroup that was once killed with `CLONE_INTO_CGROUP` is killed at birth).
    killed: bool,
    finished: bool,
    /// The request's cgroups in v1 hierarchies (limits the v2 cgroup cannot set here).
    v1: Vec<Dir>,
    /// The v2 counters of the limits set, when the request started.
    v2_before: Vec<(Controller, u64)>,
    /// The memory limit the watchdog enforces (no memory cgroup for this request), bytes.
    watch_memory: Option<u64>,
    /// The watchdog, from [`Group::started`] until [`Group::hits`].
    watchdog: Option<Watchdog>,
    /// What ended the job for its memory, once known.
    memory_hit: Option<MemoryHit>,
}

impl Group {
    /// Prepares the containment for one request. `pid_namespace`: the direct child will be
    /// the init of a PID namespace of the request's own, so that its death ends every process
    /// of the request. With [`Containment::Auto`] no cgroup is then created unless request
    /// cgroups carry a limit here (cgroup v2 with the pids or memory controller).
    pub(crate) fn new(want: Containment, pid_namespace: bool) -> std::io::Result<Group> {
        claim();
        let ns_only = pid_namespace && want == Containment::Auto && !v2_limits();
        // Not looked up (nor created, the first time) when not needed.
        let base = || if ns_only { None } else { base() };
        let idle = match (want, base()) {
            _ if ns_only => None,
            (Containment::Subreaper, _) | (_, None) => None,
            _ => take_idle(),
        };
        let cg = match (want, base()) {
            _ if idle.is_some() => idle,
            _ if ns_only => None,
            (Containment::Subreaper, _) => None,
            (Containment::Cgroup, None) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "no writable cgroup v2 hierarchy",
                ))
            }
            (_, None) => None,
            (_, Some(b)) => {
                let name = format!("{}{}", prefix(), NEXT.fetch_add(1, Ordering::Relaxed));
                let dir = b.dir.join(&name);
                let rel = format!("{}/{}", b.rel.trim_end_matches('/'), name);
                let place = Place {
                    name,
                    dir: dir.clone(),
                    rel,
                };
                match fs::create_dir(&dir).and_then(|_| Cg::open(place)) {
                    Ok(cg) => Some(cg),
                    Err(e) if want == Containment::Cgroup => {
                        let _ = fs::remove_dir(&dir);
                        return Err(e);
                    }
                    Err(e) => {
                        let _ = fs::remove_dir(&dir);
                        tracing::warn!(error = %e, "cannot create a request cgroup; using the subreaper");
                        None
                    }
                }
            }
        };
        Ok(Group {
            ns_init: ns_only,
            cg,
            child: 0,
            recorded: Vec::new(),
            froze: false,
            emptied: false,
            killed: false,
            finished: false,
            v1: Vec::new(),
            v2_before: Vec::new(),
            watch_memory: None,
            watchdog: None,
            memory_hit: None,
        })
    }

    /// The mechanism in use.
    pub(crate) fn mechanism(&self) -> Mechanism {
        if self.cg.is_some() {
            Mechanism::Cgroup
        } else if self.ns_init {
            Mechanism::PidNamespace
        } else {
            Mechanism::Subreaper
        }
    }

    /// The request cgroup's name, when the request has one.
    pub(crate) fn cgroup_name(&self) -> Option<&str> {
        self.cg.as_ref().map(|c| c.name.as_str())
    }

    /// Where the request's memory and process limits are held (module `cgroup_nest`): its
    /// cgroup v2 for each controller that hierarchy gives it, else its v1 directories.
    pub(crate) fn limit_dirs(&self) -> Vec<super::cgroup_nest::LimitDir> {
        use super::cgroup_nest::LimitDir;
        let mut dirs = Vec::new();
        if let (Some(cg), Some(b)) = (&self.cg, base()) {
            for (c, has) in [(Controller::Memory, b.memory), (Controller::Pids, b.pids)] {
                if has {
                    dirs.push(LimitDir {
                        controller: c,
                        dir: cg.dir.clone(),
                        v2: true,
                    });
                }
            }
        }
        for d in &self.v1 {
            if !dirs.iter().any(|l| l.controller == d.controller()) {
                dirs.push(LimitDir {
                    controller: d.controller(),
                    dir: d.path().to_path_buf(),
                    v2: false,
                });
            }
        }
        dirs
    }

    /// The request cgroup's directory, which the child is started in.
    pub(crate) fn dir_fd(&self) -> Option<RawFd> {
        self.cg.as_ref().map(|c| c.fd.as_raw_fd())
    }

    /// Sets the request's process limit (`pids.max` of its cgroup v2, else of a v1 pids
    /// cgroup the child joins, so it counts every descendant whatever its session); `false`
    /// when neither is available to this caller.
    pub(crate) fn limit_processes(&mut self, max: u64) -> bool {
        self.limit(Controller::Pids, Some(max))
    }

    /// Sets the request's memory limit (`None`: unlimited) for the job as a whole:
    /// `memory.max` of its cgroup v2 (swap not counted: `memory.swap.max` 0), else
    /// `memory.limit_in_bytes` of a v1 memory cgroup the child joins, else the host's watchdog
    /// (module `memwatch`, started with the child), else, where the host cannot read `/proc`,
    /// only a per-process limit the caller sets in the child (`RLIMIT_DATA`).
    pub(crate) fn limit_memory(&mut self, bytes: Option<u64>) -> MemoryBound {
        if self.limit(Controller::Memory, bytes) {
            return match bytes {
                Some(_) => MemoryBound::Cgroup,
                None => MemoryBound::Unlimited,
            };
        }
        match bytes {
            None => MemoryBound::Unlimited,
            Some(b) if super::memwatch::available() => {
                self.watch_memory = Some(b);
                MemoryBound::Watchdog
            }
            Some(b) => MemoryBound::PerProcess(b),
        }
    }

    fn limit(&mut self, c: Controller, value: Option<u64>) -> bool {
        // No cgroup v2 (base not looked up then: a request under its own PID namespace may
        // have been planned without creating one).
        let v2 = self.cg.as_ref().filter(|_| {
            base().is_some_and(|b| {
                (c == Controller::Pids && b.pids) || (c == Controller::Memory && b.memory)
            })
        });
        if let Some(cg) = v2 {
            let text = value.map_or("max".to_string(), |v| v.to_string());
            let (file, swap) = match c {
                Controller::Pids => ("pids.max", None),
                Controller::Memory => (
                    "memory.max",
                    Some(if value.is_some() { "0" } else { "max" }),
                ),
            };
            if write_file(&cg.dir.join(file), text.as_bytes()).is_err() {
                return false;
            }
            if let Some(s) = swap.filter(|_| cg.dir.join("memory.swap.max").exists()) {
                if write_file(&cg.dir.join("memory.swap.max"), s.as_bytes()).is_err() {
                    return false;
                }
            }
            let (file, key) = v2_counter(c);
            self.v2_before.push((c, counter_in(&cg.fd, file, key)));
            return true;
        }
        if value.is_none() {
            // Unlimited: nothing to create.
            return true;
        }
        match Dir::new(c, value) {
            Some(d) => {
                self.v1.push(d);
                true
            }
            None => false,
        }
    }

    /// The v1 cgroups the child must join before exec (its v2 cgroup it is created in).
    pub(crate) fn v1_dirs(&self) -> Vec<RawFd> {
        self.v1.iter().map(Dir::raw_fd).collect()
    }

    /// What each limit set with [`Group::limit_memory`] and [`Group::limit_processes`]
    /// stopped during the request: the memory limit's out-of-memory kills or the watchdog's
    /// end of the job, and the forks the process limit refused. Read once every process of
    /// the request is gone (it stops the watchdog).
    pub(crate) fn hits(&mut self) -> Counts {
        let mut killed = 0;
        let mut processes = 0;
        let mut add = |c: Controller, n: u64| match c {
            Controller::Memory => killed += n,
            Controller::Pids => processes += n,
        };
        if let Some(cg) = &self.cg {
            for (c, before) in &self.v2_before {
                let (file, key) = v2_counter(*c);
                add(*c, counter_in(&cg.fd, file, key).saturating_sub(*before));
            }
        }
        for d in &self.v1 {
            add(d.controller(), d.hits());
        }
        self.stop_watchdog();
        let memory = self
            .memory_hit
            .clone()
            .or((killed > 0).then_some(MemoryHit::Killed(killed)));
        Counts { memory, processes }
    }

    /// Stops the memory watchdog, keeping what it saw if it ended the job (before the
    /// cgroup it lists can be reused by another request).
    fn stop_watchdog(&mut self) {
        if let Some(fired) = self.watchdog.take().and_then(|mut w| w.stop()) {
            self.memory_hit = Some(MemoryHit::Watchdog(fired));
        }
    }

    /// Records the direct child's pid (it leads its own session).
    pub(crate) fn started(&mut self, pid: i32) {
        self.child = pid;
        if let Some(limit) = self.watch_memory {
            let roster = match &self.cg {
                Some(cg) => Roster::Cgroup(cg.dir.clone()),
                None => Roster::tree(pid),
            };
            // The child is ours and unreaped: its pid names it until the run reaps it.
            let watched = crate::sys::pidfd_open(pid, 0)
                .and_then(|fd| Watchdog::start(limit, roster, fd, Ends::Child));
            match watched {
                Ok(w) => self.watchdog = Some(w),
                Err(e) => {
                    // Fail closed: a limit that cannot be watched does not let the job run.
                    kill(pid, libc::SIGKILL);
                    self.memory_hit = Some(MemoryHit::Unwatched(e.to_string()));
                }
            }
        }
    }

    /// Sends `sig` to every process of the request that is still running.
    pub(crate) fn signal(&mut self, sig: i32) {
        match &self.cg {
            Some(cg) => {
                for pid in read_procs(&cg.dir) {
                    kill(pid, sig);
                }
            }
            None => {
                for (pid, st) in tree(self.child) {
                    if st.state != 'Z' {
                        kill(pid, sig);
                    }
                }
            }
        }
    }

    /// Kills every process of the request and waits until all of them are dead. The direct
    /// child is killed too but not reaped (the caller does that, after this returns).
    pub(crate) fn kill_all(&mut self) {
        let deadline = Instant::now() + KILL_DEADLINE;
        match &self.cg {
            Some(cg) => {
                if !cg.populated() {
                    self.emptied = true;
                    return;
                }
                // Freeze first, so nothing forks between listing the members and killing them.
                let frozen = write_file(&cg.dir.join("cgroup.freeze"), b"1").is_ok();
                self.froze |= frozen;
                while frozen && !events(&cg.dir, "frozen") && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_micros(200));
                }
                let members = if super::cgroup_nest::is_marked(&cg.dir) {
                    read_procs_below(&cg.dir)
                } else {
                    read_procs(&cg.dir)
                };
                for pid in members {
                    if pid != self.child {
                        if let Some(st) = stat(pid) {
                            self.recorded.push((pid, st.start));
                        }
                    }
                }
                self.killed = true;
                if let Err(e) = write_file(&cg.dir.join("cgroup.kill"), b"1") {
                    tracing::warn!(error = %e, "cgroup.kill failed; killing members one by one");
                    for pid in read_procs(&cg.dir) {
                        kill(pid, libc::SIGKILL);
                    }
                }
                let mut pause = Duration::from_micros(50);
                loop {
                    if !events(&cg.dir, "populated") {
                        self.emptied = true;
                        break;
                    }
                    if Instant::now() > deadline {
                        tracing::warn!(cgroup = %cg.dir.display(), "request processes still alive after SIGKILL");
                        break;
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
            }
            // The init becomes a zombie only once the kernel has killed and reaped every
            // other process of its namespace.
            None if self.ns_init => {
                if self.child <= 0 {
                    return;
                }
                kill(self.child, libc::SIGKILL);
                let mut pause = Duration::from_micros(50);
                loop {
                    // The init is the host's own child: `waitid` tells that it exited
                    // without reading its `/proc` entry (the usual case: the watch loop
                    // comes here once the init has exited).
                    if crate::sys::child_has_exited(self.child)
                        || stat(self.child).is_none_or(|s| matches!(s.state, 'Z' | 'X'))
                    {
                        self.emptied = true;
                        break;
                    }
                    if Instant::now() > deadline {
                        tracing::warn!(
                            init = self.child,
                            "the namespace's init still alive after SIGKILL"
                        );
                        break;
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
            }
            None => loop {
                let members = tree(self.child);
                let mut pending = false;
                for (pid, st) in &members {
                    if *pid == self.child {
                        if st.state != 'Z' {
                            kill(*pid, libc::SIGKILL);
                            pending = true;
                        }
                        continue;
                    }
                    pending = true;
                    if st.state == 'Z' {
                        if st.ppid == host_pid() {
                            reap(*pid);
                        }
                    } else {
                        kill(*pid, libc::SIGKILL);
                    }
                }
                if !pending {
                    break;
                }
                if Instant::now() > deadline {
                    tracing::warn!(
                        child = self.child,
                        "request processes still around after SIGKILL"
                    );
                    break;
                }
                std::thread::sleep(Duration::from_micros(500));
            },
        }
    }

    /// After the direct child was reaped: reaps the request's adopted orphans and removes the
    /// cgroup.
    pub(crate) fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.stop_watchdog();
        let Some(cg) = self.cg.take() else {
            for d in self.v1.drain(..) {
                let nested = super::cgroup_nest::release(d.path());
                d.finish(self.emptied, !nested);
            }
            return;
        };
        // Every recorded member is dead; each becomes the host's child once its parent has
        // finished exiting. Reap them by pid.
        let deadline = Instant::now() + KILL_DEADLINE;
        let mut left = std::mem::take(&mut self.recorded);
        while !left.is_empty() {
            left.retain(|&(pid, start)| match reap_one(pid) {
                Reaped::Done => false,
                Reaped::NotMine => {
                    stat(pid).is_some_and(|s| s.start == start && s.ppid != host_pid())
                }
                Reaped::Running => true,
            });
            if left.is_empty() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        active()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&cg.name);
        sweep(&cg.rel);
        let nested = super::cgroup_nest::release(&cg.dir);
        // Every process of the request was in the v2 cgroup too: emptied, so are these.
        for d in self.v1.drain(..) {
            let nested = super::cgroup_nest::release(d.path());
            d.finish(self.emptied, !nested);
        }
        let thawed = !self.froze || write_file(&cg.dir.join("cgroup.freeze"), b"0").is_ok();
        if self.emptied && thawed && !self.killed && !nested {
            let mut idle = pool().lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < POOL_MAX {
                idle.push(cg.place);
                return;
            }
        }
        let Cg { place, fd } = cg;
        drop(fd);
        if let Err(e) = fs::remove_dir(&place.dir) {
            tracing::warn!(cgroup = %place.dir.display(), error = %e, "cannot remove the request cgroup");
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let init = self.ns_init && self.child > 0;
        if !self.finished && (self.cg.is_some() || !self.v1.is_empty() || init) {
            self.kill_all();
            self.finish();
        }
    }
}

fn host_pid() -> i32 {
    static PID: OnceLock<i32> = OnceLock::new();
    *PID.get_or_init(|| std::process::id() as i32)
}

fn kill(pid: i32, sig: i32) {
    let _ = crate::sys::kill(pid, sig);
}

enum Reaped {
    Done,
    NotMine,
    Running,
}

fn reap_one(pid: i32) -> Reaped {
    match crate::sys::waitpid(pid, libc::WNOHANG) {
        Ok((0, _)) => Reaped::Running,
        Ok((r, _)) if r == pid => Reaped::Done,
        _ => Reaped::NotMine,
    }
}

fn reap(pid: i32) {
    let _ = reap_one(pid);
}

/// Reaps zombie children of the host that belong to the cgroup `rel`, or to a request cgroup
/// of this host that is no longer in use (late re-parenting from an earlier request).
fn sweep(rel: &str) {
    // Cheap test first: does the host have any zombie child at all?
    if !crate::sys::has_zombie_child() {
        return;
    }
    let me = host_pid();
    let prefix = prefix();
    let Ok(dir) = fs::read_dir("/proc") else {
        return;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Some(st) = stat(pid) else { continue };
        if st.ppid != me || st.state != 'Z' {
            continue;
        }
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            continue;
        };
        let Some(path) = text.lines().find_map(|l| l.strip_prefix("0::")) else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or("");
        let stale = name.starts_with(&prefix)
            && !active()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(name);
        let below = path
            .strip_prefix(rel)
            .is_some_and(|rest| rest.starts_with('/'));
        if path == rel || below || stale {
            reap(pid);
        }
    }
}

fn write_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(data)
}

/// The v2 counter that grows when the limit of `c` stopped something: `(file, key)`.
fn v2_counter(c: Controller) -> (&'static std::ffi::CStr, &'static str) {
    match c {
        Controller::Memory => (c"memory.events", "oom_kill"),
        Controller::Pids => (c"pids.events", "max"),
    }
}

/// `cgroup.events`: whether `key` is 1.
fn events(dir: &Path, key: &str) -> bool {
    match fs::read_to_string(dir.join("cgroup.events")) {
        Ok(t) => t
            .lines()
            .any(|l| l.strip_prefix(key).map(str::trim) == Some("1")),
        Err(_) => false,
    }
}

fn read_procs(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// The processes of the cgroup at `dir` and of the cgroups made below it (a session's
/// commands' and its resident's, module `cgroup_nest`).
fn read_procs_below(dir: &Path) -> Vec<i32> {
    let mut pids = read_procs(dir);
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                pids.extend(read_procs_below(&e.path()));
            }
        }
    }
    pids
}

/// Set by a process that runs one request and starts nothing else (`sandbox run`, `sandbox
/// exec`): every process it adopts (it is a child subreaper) is that request's.
static SOLE_REQUEST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says that this process runs one request and starts nothing else (see [`SOLE_REQUEST`]).
pub(crate) fn sole_request() {
    SOLE_REQUEST.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The processes of the request led by `child` (fallback mode): its session and process
/// group, and everything whose parent chain leads to one of them. In a process that runs one
/// request (`SOLE_REQUEST`), also what this process adopted: a `setsid cmd &` whose shell has
/// exited has neither the request's session nor a parent in it any more (re-parented to this
/// subreaper), and survived the request's end about half the time in containers.
fn tree(child: i32) -> Vec<(i32, Stat)> {
    if child <= 0 {
        return Vec::new();
    }
    let mut all = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) {
                if let Some(st) = stat(pid) {
                    all.push((pid, st));
                }
            }
        }
    }
    let me = host_pid();
    let adopted = SOLE_REQUEST.load(std::sync::atomic::Ordering::Relaxed);
    let mut members: HashSet<i32> = all
        .iter()
        .filter(|(p, s)| {
            *p != me
                && (*p == child || s.sid == child || s.pgrp == child || (adopted && s.ppid == me))
        })
        .map(|(p, _)| *p)
        .collect();
    loop {
        let before = members.len();
        for (p, s) in &all {
            if *p != me && members.contains(&s.ppid) {
                members.insert(*p);
            }
        }
        if members.len() == before {
            break;
        }
    }
    all.into_iter()
        .filter(|(p, _)| members.contains(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unprivileged_caller_uses_the_nearest_delegated_cgroup_with_the_memory_controller() {
        use std::os::unix::fs::PermissionsExt;
        // A fake cgroup2 tree as systemd lays it out for a user session; this test's own uid
        // plays the caller, and a uid it does not have plays root.
        let me = crate::sys::euid();
        let other = me.wrapping_add(1);
        let t = tempfile::tempdir().unwrap();
        let m = t.path();
        let user = "user.slice/user-1000.slice/user@1000.service";
        let scope = format!("{user}/app.slice/agent.scope");
        fs::create_dir_all(m.join(&scope)).unwrap();
        for (dir, controllers) in [
            ("", "cpu memory pids"),
            ("user.slice", "memory pids"),
            ("user.slice/user-1000.slice", "memory pids"),
            (user, "memory pids"),
            (&format!("{user}/app.slice"), ""),
            (&scope, ""),
        ] {
            fs::write(m.join(dir).join("cgroup.subtree_control"), controllers).unwrap();
            fs::write(m.join(dir).join("cgroup.procs"), "").unwrap();
        }
        let own = format!("/{scope}");
        let pick = |uid| delegated_memory_parent(m, &own, uid);
        // Everything is this test's: the nearest with the controller is user@1000.service.
        assert_eq!(pick(me), Some(format!("/{user}")));
        // Not the caller's (the tree belongs to another uid): nothing, not a cgroup above.
        assert_eq!(pick(other), None);
        // cgroup.procs there not writable: the kernel would refuse the move; the next one up
        // that qualifies is used (here the caller's too; under systemd it is root's, so none).
        let procs = m.join(user).join("cgroup.procs");
        fs::set_permissions(&procs, fs::Permissions::from_mode(0o444)).unwrap();
        assert_eq!(pick(me), Some("/user.slice/user-1000.slice".to_string()));
        fs::set_permissions(&procs, fs::Permissions::from_mode(0o644)).unwrap();
        // The controller not enabled in the delegated cgroup: the next one up that has it.
        fs::write(m.join(user).join("cgroup.subtree_control"), "pids").unwrap();
        assert_eq!(pick(me), Some("/user.slice/user-1000.slice".to_string()));
        // The own cgroup already gives its children the controller: it is used as it is.
        fs::write(m.join(&scope).join("cgroup.subtree_control"), "memory").unwrap();
        assert_eq!(pick(me), None);
        // The root cgroup is never chosen, nor anything for a relative or root own path.
        fs::write(m.join(&scope).join("cgroup.subtree_control"), "").unwrap();
        for d in ["user.slice", "user.slice/user-1000.slice", user] {
            fs::write(m.join(d).join("cgroup.subtree_control"), "pids").unwrap();
        }
        assert_eq!(pick(me), None);
        assert_eq!(delegated_memory_parent(m, "/", me), None);
    }

    use crate::sys::is_child_subreaper as is_subreaper;

    #[test]
    fn a_forked_child_becomes_a_subreaper_itself_and_forgets_the_parents_pool() {
        claim();
        assert!(is_subreaper());
        pool()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Place {
                name: "sandbox-exec-parent".into(),
                dir: PathBuf::from("/nonexistent-parent-cgroup"),
                rel: String::new(),
            });
        // The child calls only prctl and takes the pool's and the owner's locks, which no
        // other thread of this test holds.
        let status = crate::sys::in_forked_child(|| {
            // Control: the flag is not inherited, so a child that trusted a cached "done"
            // would not be a subreaper.
            let inherited = is_subreaper();
            claim();
            let forgot = pool().lock().map(|p| p.is_empty()).unwrap_or(false);
            if !inherited && is_subreaper() && forgot {
                0
            } else {
                1
            }
        })
        .expect("fork");
        pool()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| p.name != "sandbox-exec-parent");
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }
}
