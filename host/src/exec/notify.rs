//! Naming violations without a preload: the outer filter returns `SECCOMP_RET_USER_NOTIF`
//! where the profile says `trap`, so a refused call waits in the kernel and the host, which
//! holds the filter's listener, reads which call it was. A spawner thread's listener serves
//! every request of its profile ([`supervise`] traces each process back to its request: its
//! cgroup, or its chain of parents); a filter attached in the child has a listener per request
//! ([`Notifier`]). Every refused call is counted per (call, program) in a bounded [`Tally`]; a
//! supervisor that receives exec events keeps a thread's program between its refused calls
//! (see [`super::exec_events`]), so repeating one costs a round trip and no /proc read.
//! Then, by the request's [`Response`]: deny and report (the call fails with an errno and the
//! program goes on), or kill (the host ends the process that made it with SIGSYS, as the trap
//! action would; SIGKILL when the program has blocked, ignored or caught SIGSYS, or was already
//! sent one). The call never runs, and the channel is the kernel's: nothing the program prints
//! can forge it. Only refused calls reach the host: allowed ones never leave the filter.

use super::exec_events::{Drained, ExecEvents};
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Bit of SIGSYS in the masks of `/proc/PID/status`.
const SIGSYS_BIT: u64 = 1 << (libc::SIGSYS - 1);

/// What the host does with a refused call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Response {
    /// The call fails with this errno and the program goes on (deny and report).
    Errno(u16),
    /// The process that made it is ended (SIGSYS, else SIGKILL).
    Kill,
}

/// Distinct (call, program) pairs a request keeps; further pairs are only counted, so a
/// program flooding refused calls cannot grow the result.
pub(crate) const MAX_DISTINCT: usize = 64;

/// One refused (call, program) pair and how often it was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The call's number.
    pub nr: u32,
    /// The executable that made it (`/proc/PID/exe`), when it could be read.
    pub program: Option<String>,
    /// How many times.
    pub count: u64,
    /// The first such call's arguments (what a hint must allow).
    pub args: [u64; 6],
}

/// The refused calls of one request, in order of first appearance: counts, not lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// At most [`MAX_DISTINCT`] pairs.
    pub seen: Vec<Seen>,
    /// Refused calls of pairs beyond the first [`MAX_DISTINCT`].
    pub omitted: u64,
    /// The call that ended the program (kill response): its number and program.
    pub killer: Option<(u32, Option<String>)>,
    /// The request's program itself was ended with SIGKILL in place of SIGSYS (it had SIGSYS
    /// blocked, ignored or caught, as a shell has around `vfork`): the result reports SIGSYS,
    /// as the kernel's kill action would have ended it.
    pub program_sigkill: bool,
    /// Refused calls of the request, all pairs together, and their pacing past
    /// [`FREE_CALLS`] (module `pacing`).
    pub refused: super::pacing::Pacer,
}

// Refused calls are paced past `pacing::FREE_CALLS` (module `pacing`): a program that looped
// on a refused call (867,587 in 5 s) cost the host two CPU-seconds.
pub(crate) use super::pacing::{FREE_CALLS, PACED_RATE};

impl Tally {
    /// How long to hold the answer to the refused call just counted (module `pacing`).
    fn pace(&mut self, now: Instant) -> Option<Duration> {
        self.refused.hold(now)
    }

    /// Counts one refused call.
    fn record(&mut self, nr: u32, program: Option<String>, args: [u64; 6]) {
        self.refused.total = self.refused.total.saturating_add(1);
        if let Some(s) = self
            .seen
            .iter_mut()
            .find(|s| s.nr == nr && s.program == program)
        {
            s.count = s.count.saturating_add(1);
        } else if self.seen.len() < MAX_DISTINCT {
            self.seen.push(Seen {
                nr,
                program,
                count: 1,
                args,
            });
        } else {
            self.omitted = self.omitted.saturating_add(1);
        }
    }
}

/// The request's program as the host started it, so that a kill of the program itself can be
/// told from a kill of one of its descendants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MainProgram {
    /// The host's direct child: the program, or the namespace init that started it.
    pub pid: i32,
    /// Whether `pid` is an init whose first child is the program.
    pub init: bool,
}

impl MainProgram {
    /// Whether thread `tid`, whose call waits, belongs to the program. Under an init, the
    /// program is the init's first child while it lives (orphans it adopts come after it).
    fn holds(&self, tid: i32) -> bool {
        let Some(tgid) = status_field(tid, "Tgid:").and_then(|t| t.parse::<i32>().ok()) else {
            return false;
        };
        if !self.init {
            return tgid == self.pid;
        }
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.pid))
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse::<i32>().ok())
            == Some(tgid)
    }
}

/// One field of `/proc/PID/status`, trimmed.
fn status_field(pid: i32, key: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
}

/// The executable of `pid`, read while its call waits (so the pid is still that process).
fn program_of(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.display().to_string())
}

/// Applies `response` to one waiting call of `program`, after counting it in `tally`.
fn respond(
    fd: BorrowedFd<'_>,
    n: &libc::seccomp_notif,
    response: Response,
    program: Option<String>,
    main: Option<&MainProgram>,
    tally: &mut Tally,
    signalled: &mut Vec<i32>,
) {
    let nr = n.data.nr as u32;
    match response {
        Response::Errno(e) => {
            tally.record(nr, program, n.data.args);
            if let Some(wait) = tally.pace(Instant::now()) {
                std::thread::sleep(wait);
            }
            // A call whose thread is gone gives ENOENT, which needs nothing more.
            crate::sys::notif_fail(fd, n.id, i32::from(e));
        }
        Response::Kill => {
            if tally.killer.is_none() {
                tally.killer = Some((nr, program.clone()));
            }
            tally.record(nr, program, n.data.args);
            let of_program = main.is_some_and(|m| m.holds(n.pid as i32));
            if stop(fd, n, signalled) == Some(libc::SIGKILL) && of_program {
                tally.program_sigkill = true;
            }
        }
    }
}

/// The host's end of one request's filter listener.
#[derive(Debug)]
pub(crate) struct Notifier {
    fd: OwnedFd,
    response: Response,
    main: MainProgram,
    /// What was refused.
    pub tally: Tally,
    /// Processes already sent SIGSYS; a second refused call from one of them means the
    /// signal did not end it, so it gets SIGKILL.
    signalled: Vec<i32>,
    /// The contained tier's claims, when the job's own filter carries them, and the request's
    /// slot (its places, where refusals are counted).
    emulation: Option<(super::emulate::Claims, Arc<Slot>)>,
}

impl Notifier {
    /// Wraps the listener taken from the child of `main`.
    pub(crate) fn new(fd: OwnedFd, response: Response, main: MainProgram) -> Notifier {
        crate::sys::notif_sync_wake_up(fd.as_fd());
        Notifier {
            fd,
            response,
            main,
            tally: Tally::default(),
            signalled: Vec::new(),
            emulation: None,
        }
    }

    /// Has this listener's claimed calls made by the host (module `emulate`) within the
    /// places of `slot`: the job's own filter carries `claims` (a request whose filter is
    /// attached in the child, which no spawner thread holds).
    pub(crate) fn emulate(mut self, claims: super::emulate::Claims, slot: Arc<Slot>) -> Notifier {
        self.emulation = Some((claims, slot));
        self
    }

    /// The descriptor to poll (readable when a call waits).
    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Handles one waiting call. Returns false when the listener has nothing more to say
    /// (every process using the filter is gone).
    pub(crate) fn handle(&mut self) -> bool {
        let n = match receive(self.fd.as_fd()) {
            Received::Call(n) => n,
            Received::Gone => return true,
            Received::Closed => return false,
        };
        if let Some((claims, slot)) = &self.emulation {
            if claims.kind(n.data.nr as u32, &n.data.args).is_some() {
                answer_emulated(self.fd.as_fd(), &n, claims, slot, &mut |pid| {
                    program_of(pid as u32)
                });
                return true;
            }
        }
        respond(
            self.fd.as_fd(),
            &n,
            self.response,
            program_of(n.pid),
            Some(&self.main),
            &mut self.tally,
            &mut self.signalled,
        );
        true
    }
}

/// What `NOTIF_RECV` gave.
enum Received {
    Call(libc::seccomp_notif),
    /// The waiting thread died before it was read, or the read was interrupted.
    Gone,
    /// The listener is finished.
    Closed,
}

fn receive(fd: BorrowedFd<'_>) -> Received {
    match crate::sys::notif_recv(fd) {
        Ok(n) => Received::Call(n),
        Err(e) => match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EINTR) => Received::Gone,
            _ => Received::Closed,
        },
    }
}

/// Whether the notification still stands (its thread waits): after reading /proc about its
/// pid, as seccomp_unotify(2) advises, so that the pid was not reused meanwhile.
fn still_waiting(fd: BorrowedFd<'_>, n: &libc::seccomp_notif) -> bool {
    crate::sys::notif_id_valid(fd, n.id)
}

/// Ends the process that made the refused call: SIGSYS when that ends it, else SIGKILL.
/// Returns the signal sent (none when the call no longer waits).
fn stop(fd: BorrowedFd<'_>, n: &libc::seccomp_notif, signalled: &mut Vec<i32>) -> Option<i32> {
    let pid = n.pid as i32;
    let sig = if !signalled.contains(&pid) && sigsys_is_fatal(pid) {
        signalled.push(pid);
        libc::SIGSYS
    } else {
        libc::SIGKILL
    };
    if !still_waiting(fd, n) {
        return None;
    }
    // kill() with a thread id signals its whole thread group.
    let _ = crate::sys::kill(pid, sig);
    Some(sig)
}

/// What a request learns from a shared listener, and how its refused calls are answered.
#[derive(Debug)]
pub(crate) struct Slot {
    response: Response,
    /// The request's program, once started.
    main: OnceLock<MainProgram>,
    /// The tally and the processes already sent SIGSYS.
    state: Mutex<(Tally, Vec<i32>)>,
    /// The writable places of a contained-tier request, whose metadata calls the supervisor
    /// makes (module `emulate`); unset for the other tiers.
    places: OnceLock<super::emulate::Places>,
    /// The metadata calls it refused.
    emulated: Mutex<super::emulate::Tally>,
    /// How many seccomp filters its program started under, read at its first claimed open
    /// (module `emulate::opens`: a thread under more stacked restrictions of its own).
    main_filters: OnceLock<u32>,
}

impl Slot {
    /// A slot of one listener's own, registered nowhere: a session's command, whose claimed
    /// calls the host makes within `places` and whose refusals are counted here.
    pub(crate) fn own(response: Response, places: super::emulate::Places) -> Arc<Slot> {
        Slot::routed(response, None, Some(places))
    }

    /// A slot of a process tree that a routed listener's calls go to ([`serve_routed`]): a
    /// session's command (`main`: its first process) or the session's processes no running
    /// command owns (`main`: none), with the places its claimed calls are made within.
    pub(crate) fn routed(
        response: Response,
        main: Option<MainProgram>,
        places: Option<super::emulate::Places>,
    ) -> Arc<Slot> {
        let slot = Slot {
            response,
            main: OnceLock::new(),
            state: Mutex::default(),
            places: OnceLock::new(),
            emulated: Mutex::default(),
            main_filters: OnceLock::new(),
        };
        if let Some(m) = main {
            let _ = slot.main.set(m);
        }
        if let Some(p) = places {
            let _ = slot.places.set(p);
        }
        Arc::new(slot)
    }

    /// What was refused so far.
    pub(crate) fn tally(&self) -> Tally {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone()
    }

    /// The metadata calls the supervisor refused so far.
    pub(crate) fn emulated(&self) -> super::emulate::Tally {
        self.emulated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// How a process is traced back to its request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Member {
    /// Every process in this request cgroup (its name).
    Cgroup(String),
    /// This direct child and its descendants.
    Child(i32),
}

fn registry() -> &'static Mutex<HashMap<Member, Arc<Slot>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<Member, Arc<Slot>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// A request's entry in the registry of the shared listeners; removed on drop.
#[derive(Debug)]
pub(crate) struct Registration {
    slot: Arc<Slot>,
    keys: Vec<Member>,
}

impl Registration {
    /// Registers a request before its child starts (by its cgroup, when it has one).
    pub(crate) fn new(cgroup: Option<&str>, response: Response) -> Registration {
        let mut r = Registration {
            slot: Arc::new(Slot {
                response,
                main: OnceLock::new(),
                state: Mutex::default(),
                places: OnceLock::new(),
                emulated: Mutex::default(),
                main_filters: OnceLock::new(),
            }),
            keys: Vec::new(),
        };
        if let Some(name) = cgroup {
            r.add(Member::Cgroup(name.to_string()));
        }
        r
    }

    /// Has the supervisor make the request's metadata calls within `places` (the contained
    /// tier's spawner sends them; module `emulate`). Set before the child starts.
    pub(crate) fn emulate(&mut self, places: super::emulate::Places) {
        let _ = self.slot.places.set(places);
    }

    /// Adds the direct child once it has started.
    pub(crate) fn add_child(&mut self, main: MainProgram) {
        let _ = self.slot.main.set(main);
        self.add(Member::Child(main.pid));
    }

    fn add(&mut self, key: Member) {
        registry()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), Arc::clone(&self.slot));
        self.keys.push(key);
    }

    /// What the listener reported for this request.
    pub(crate) fn slot(&self) -> &Slot {
        &self.slot
    }

    /// The request's slot, shared: for a listener of its own that makes its claimed calls.
    pub(crate) fn shared_slot(&self) -> Arc<Slot> {
        Arc::clone(&self.slot)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        for k in &self.keys {
            reg.remove(k);
        }
    }
}

/// The request a process belongs to: its cgroup's, or that of the first registered child on
/// its chain of parents.
fn find(pid: i32) -> Option<Arc<Slot>> {
    let reg = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) {
        if let Some(path) = text.lines().find_map(|l| l.strip_prefix("0::")) {
            // The request cgroup, or one a (privileged) program made inside it.
            for name in path.split('/').filter(|n| !n.is_empty()) {
                if let Some(s) = reg.get(&Member::Cgroup(name.to_string())) {
                    return Some(Arc::clone(s));
                }
            }
        }
    }
    let mut p = pid;
    for _ in 0..64 {
        if let Some(s) = reg.get(&Member::Child(p)) {
            return Some(Arc::clone(s));
        }
        p = parent_of(p)?;
        if p <= 1 {
            return None;
        }
    }
    None
}

fn parent_of(pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()
}

/// How long a call from a process that no request claims (yet) may wait before it is killed
/// anyway; a child is registered right after it starts, so this only covers that moment.
const UNCLAIMED: Duration = Duration::from_millis(500);

/// Threads the supervisor has already traced to their request, so that a program repeating a
/// refused call costs one lookup instead of reading /proc each time. Each entry holds a pidfd
/// of the thread: while it has not exited, its id cannot belong to another thread. An entry
/// whose request has finished (only this cache still holds its slot) is dropped. With exec
/// events, an entry also keeps the thread's executable until its process execs again.
#[derive(Default)]
struct Known {
    map: HashMap<i32, KnownThread>,
    events: Option<ExecEvents>,
    /// Whether subscribing to exec events was tried. It is put off until the first refused
    /// call: a run that refuses nothing (most) then pays no subscription, and names read after
    /// it are still covered, since every exec after subscribing is queued.
    subscribed: bool,
}

/// One traced thread.
struct KnownThread {
    slot: Arc<Slot>,
    pidfd: OwnedFd,
    /// Its thread group (exec events name groups).
    tgid: i32,
    /// Its executable, read while one of its calls waited, and no exec of its group since.
    program: Option<String>,
}

/// Threads remembered at most (one descriptor each); the cache starts over when full.
const KNOWN_MAX: usize = 64;
/// `PIDFD_THREAD` (Linux 6.9): a pidfd for a thread that need not lead its group.
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

impl Known {
    fn get(&mut self, tid: i32) -> Option<Arc<Slot>> {
        let KnownThread { slot, pidfd, .. } = self.map.get(&tid)?;
        // Readable (or in error) means the thread exited.
        let exited = crate::sys::poll_one(pidfd.as_fd(), libc::POLLIN, 0).map_or(true, |r| r != 0);
        if exited || Arc::strong_count(slot) == 1 {
            self.map.remove(&tid);
            return None;
        }
        Some(Arc::clone(slot))
    }

    /// Forgets the threads of requests that ended (no one else holds their slot).
    fn forget_finished(&mut self) {
        self.map.retain(|_, t| Arc::strong_count(&t.slot) > 1);
    }

    fn insert(&mut self, tid: i32, slot: &Arc<Slot>) {
        let Ok(pidfd) = crate::sys::pidfd_open(tid, PIDFD_THREAD) else {
            return;
        };
        // The id is still that thread's (its call waits): its group, read after the pidfd.
        let Some(tgid) = status_field(tid, "Tgid:").and_then(|t| t.parse().ok()) else {
            return;
        };
        // Entries of finished requests hold descriptors for nothing: they go first, so the
        // cache holds at most the threads of running requests (and never more than the cap).
        self.forget_finished();
        if self.map.len() >= KNOWN_MAX {
            self.map.clear();
        }
        self.map.insert(
            tid,
            KnownThread {
                slot: Arc::clone(slot),
                pidfd,
                tgid,
                program: None,
            },
        );
    }

    /// The executable of `tid`, whose call waits: the one kept for it when no exec of its
    /// process came since (every exec before its call is queued by now), else read.
    fn program(&mut self, tid: i32) -> Option<String> {
        let mut trusted = false;
        if !self.subscribed {
            self.subscribed = true;
            self.events = ExecEvents::open();
        }
        if let Some(events) = &mut self.events {
            let map = &mut self.map;
            let drained = events.drain(|pid, tgid| {
                for (t, known) in map.iter_mut() {
                    if *t == pid || *t == tgid || known.tgid == tgid {
                        known.program = None;
                    }
                }
            });
            if let Drained::Lost = drained {
                map.values_mut().for_each(|t| t.program = None);
            }
            if let Some(t) = map.get(&tid) {
                events.traced(t.tgid);
            }
            trusted = events.confirmed();
        }
        if trusted {
            if let Some(p) = self.map.get(&tid).and_then(|t| t.program.clone()) {
                return Some(p);
            }
        }
        let program = program_of(tid as u32);
        if trusted {
            if let Some(t) = self.map.get_mut(&tid) {
                t.program = program.clone();
            }
        }
        program
    }
}

/// Serves the listener of a spawner's filter for as long as the host lives: each refused call
/// is recorded in its request's slot and its process is stopped. A call from one of the
/// host's own threads (a bug: the spawner thread is meant to make only exempted calls) is
/// answered with EPERM instead.
pub(crate) fn supervise(
    profile: &str,
    listener: OwnedFd,
    claims: super::emulate::Claims,
) -> std::io::Result<()> {
    let profile = profile.to_string();
    std::thread::Builder::new()
        .name(format!("sandbox-notify-{profile}"))
        .spawn(move || {
            let fd = listener.as_fd();
            crate::sys::notif_sync_wake_up(fd);
            let mut pending: Vec<(libc::seccomp_notif, Instant)> = Vec::new();
            let mut orphans: Vec<i32> = Vec::new();
            let mut known = Known::default();
            loop {
                if pending.is_empty() && !known.map.is_empty() {
                    // Threads are remembered (a pidfd each): wake within a second to forget
                    // those of requests that ended meanwhile, so that no descriptor outlives
                    // its request for long.
                    if crate::sys::poll_one(fd, libc::POLLIN, 1000).unwrap_or(0) & libc::POLLIN == 0
                    {
                        known.forget_finished();
                        continue;
                    }
                }
                if pending.is_empty() {
                    // Nothing waits for a claim: block in the kernel until a call comes (one
                    // system call per refused call instead of two).
                    match receive(fd) {
                        Received::Call(c) => pending.push((c, Instant::now())),
                        Received::Gone => continue,
                        Received::Closed => return,
                    }
                } else {
                    let revents = crate::sys::poll_one(fd, libc::POLLIN, 2).unwrap_or(0);
                    if revents & libc::POLLIN != 0 {
                        match receive(fd) {
                            Received::Call(c) => pending.push((c, Instant::now())),
                            Received::Gone => {}
                            Received::Closed => return,
                        }
                    }
                }
                pending.retain(|(c, since)| {
                    let pid = c.pid as i32;
                    let slot = match known.get(pid) {
                        Some(slot) => Some(slot),
                        None => {
                            if std::path::Path::new(&format!("/proc/self/task/{pid}")).exists() {
                                answer_host_thread(&profile, fd, c);
                                return false;
                            }
                            let slot = find(pid);
                            if let Some(s) = &slot {
                                known.insert(pid, s);
                            }
                            slot
                        }
                    };
                    match slot {
                        // A metadata call of the contained tier: made here, never refused by
                        // the profile (module `emulate`).
                        Some(slot) if claims.kind(c.data.nr as u32, &c.data.args).is_some() => {
                            answer_emulated(fd, c, &claims, &slot, &mut |pid| known.program(pid));
                            false
                        }
                        // A kill claimed through the cgroup before the request has named its
                        // program waits for it (a moment), so a kill of the program itself is
                        // reported as one.
                        Some(slot)
                            if slot.response == Response::Kill
                                && slot.main.get().is_none()
                                && since.elapsed() <= UNCLAIMED =>
                        {
                            true
                        }
                        Some(slot) => {
                            let mut state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
                            let (tally, signalled) = &mut *state;
                            let program = known.program(pid);
                            respond(
                                fd,
                                c,
                                slot.response,
                                program,
                                slot.main.get(),
                                tally,
                                signalled,
                            );
                            false
                        }
                        None if since.elapsed() > UNCLAIMED => {
                            let _ = stop(fd, c, &mut orphans);
                            orphans.truncate(64);
                            false
                        }
                        None => true,
                    }
                });
            }
        })?;
    Ok(())
}

/// Serves one listener shared by several process trees (a session's commands, whose filter
/// the resident's spawner thread holds) until every process using its filter is gone: each
/// refused call is counted in, and answered by the rules of, the slot `route` gives its
/// thread (read while the call waits; the answer is given only if it still waits, so the
/// thread id was not reused meanwhile); claimed calls are made within that slot's places.
pub(crate) fn serve_routed(
    name: &str,
    listener: OwnedFd,
    claims: super::emulate::Claims,
    route: Box<dyn Fn(i32) -> Arc<Slot> + Send>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("sandbox-notify-{name}"))
        .spawn(move || {
            let fd = listener.as_fd();
            crate::sys::notif_sync_wake_up(fd);
            loop {
                // POLLHUP without a call: no process uses the filter any more.
                match crate::sys::poll_one(fd, libc::POLLIN, -1) {
                    Ok(r) if r & libc::POLLIN != 0 => {}
                    Ok(r) if r != 0 => return,
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => return,
                }
                let c = match receive(fd) {
                    Received::Call(c) => c,
                    Received::Gone => continue,
                    Received::Closed => return,
                };
                let slot = route(c.pid as i32);
                if !still_waiting(fd, &c) {
                    continue;
                }
                if claims.kind(c.data.nr as u32, &c.data.args).is_some() {
                    answer_emulated(fd, &c, &claims, &slot, &mut |pid| program_of(pid as u32));
                    continue;
                }
                let mut state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
                let (tally, signalled) = &mut *state;
                respond(
                    fd,
                    &c,
                    slot.response,
                    program_of(c.pid),
                    slot.main.get(),
                    tally,
                    signalled,
                );
            }
        })
}

/// Answers a call sent by the contained tier's filter: a terminal's peer is opened for the
/// job; a metadata call is made by the host within the request's writable places, or refused
/// (EACCES) and counted. A request without places (none
/// should reach this) has every such call refused.
fn answer_emulated(
    fd: BorrowedFd<'_>,
    c: &libc::seccomp_notif,
    claims: &super::emulate::Claims,
    slot: &Slot,
    program: &mut dyn FnMut(i32) -> Option<String>,
) {
    let kind = claims.kind(c.data.nr as u32, &c.data.args);
    if kind == Some(super::emulate::Kind::Peer) {
        super::emulate::peer(fd, c);
        return;
    }
    // Every call the host makes for the job costs it CPU outside the job's limits (a chmod
    // loop cost the supervisor 17 times the job's own): past `pacing::FREE_CALLS` they are
    // answered at most `pacing::PACED_RATE` a second, as refused calls are.
    let hold = slot
        .emulated
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .made
        .count(std::time::Instant::now());
    if let Some(wait) = hold {
        std::thread::sleep(wait);
    }
    // Each refusal is counted before its answer lets the job go on.
    let mut record = |r: super::emulate::Refused| {
        let program = program(c.pid as i32);
        slot.emulated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(r, program);
    };
    match slot.places.get() {
        Some(places) if kind == Some(super::emulate::Kind::Connect) => {
            super::emulate::connect(fd, c, places, &mut record)
        }
        Some(places) if kind == Some(super::emulate::Kind::Send) => {
            super::emulate::send(fd, c, places, &mut record)
        }
        Some(places) if kind == Some(super::emulate::Kind::Flags) => {
            super::emulate::flags(fd, c, places, &mut record)
        }
        Some(places) if kind == Some(super::emulate::Kind::Open) => {
            let main = slot
                .main
                .get()
                .map(|m| *slot.main_filters.get_or_init(|| seccomp_filters(m.pid)));
            super::emulate::write_open(fd, c, places, main, &mut record)
        }
        Some(places) => super::emulate::answer(fd, c, places, &mut record),
        None => {
            record(super::emulate::Refused {
                nr: c.data.nr as u32,
                why: super::emulate::Why::Outside(None),
            });
            crate::sys::notif_fail(fd, c.id, libc::EACCES);
        }
    }
}

/// How many seccomp filters thread `pid` runs under (`Seccomp_filters:` of its status; 0
/// when it cannot be read).
fn seccomp_filters(pid: i32) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| super::emulate::filters_in(&s))
        .unwrap_or(0)
}

/// Credential changes glibc makes in *every* thread of the process (its `setxid` broadcast)
/// when the host calls `setuid`, `setgroups`, ...: the spawner thread takes part too, and
/// glibc aborts the process if one thread fails where another succeeded.
const CREDENTIAL_CALLS: &[&str] = &[
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setfsuid",
    "setfsgid",
    "setgroups",
];

/// Answers a call of the host's own (spawner) thread: a credential change glibc asks of every
/// thread is carried out (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`: the kernel runs the call as if
/// allowed, for that thread only); anything else is a bug and fails with EPERM.
fn answer_host_thread(profile: &str, fd: BorrowedFd<'_>, c: &libc::seccomp_notif) {
    let credential = crate::policy::NATIVE
        .syscall_name(c.data.nr as u32)
        .is_some_and(|n| CREDENTIAL_CALLS.contains(&n));
    let resp = if credential {
        libc::seccomp_notif_resp {
            id: c.id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        }
    } else {
        tracing::error!(
            profile,
            nr = c.data.nr,
            "a host thread made a call the spawner's filter refuses"
        );
        libc::seccomp_notif_resp {
            id: c.id,
            val: 0,
            error: -libc::EPERM,
            flags: 0,
        }
    };
    let _ = crate::sys::notif_send(fd, &resp);
}

/// Whether SIGSYS would end `pid` now: not blocked by that thread, not ignored, not caught.
fn sigsys_is_fatal(pid: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(u64::MAX)
    };
    ["SigBlk:", "SigIgn:", "SigCgt:"]
        .iter()
        .all(|k| mask(k) & SIGSYS_BIT == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_paced_only_past_the_free_calls_and_never_saved_up() {
        let mut t = Tally::default();
        let start = Instant::now();
        for _ in 0..FREE_CALLS {
            t.record(1, None, [0; 6]);
            assert_eq!(t.pace(start), None);
        }
        // The first paced call is due one interval after pacing began.
        t.record(1, None, [0; 6]);
        assert_eq!(
            t.pace(start),
            Some(Duration::from_micros(1_000_000 / PACED_RATE))
        );
        // A flood owes more and more, but waits at most 10 ms at a time.
        for _ in 0..10_000 {
            t.record(1, None, [0; 6]);
        }
        assert_eq!(t.pace(start), Some(Duration::from_millis(10)));
        // Long after, nothing is owed.
        assert_eq!(t.pace(start + Duration::from_secs(60)), None);
        assert_eq!(t.refused.total, FREE_CALLS + 10_001);
        assert_eq!(t.seen.len(), 1);
    }
}
