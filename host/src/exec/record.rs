//! Recording every system call a program tree makes (`sandbox learn`), on the engine's own
//! spawn path: instead of the profile's filter the child attaches one that sends every call
//! to a user-notification listener, and a recorder thread notes each call and answers it with
//! `SECCOMP_USER_NOTIF_FLAG_CONTINUE` (the kernel then runs it as if allowed). This needs no
//! privilege and sees static programs too: the filter is the kernel's, not a preload's.
//!
//! Not recorded, because the child needs them between attaching the filter and exec, before
//! the listener reaches this thread: [`crate::sandbox::HANDOVER_CALLS`] (every program makes
//! them anyway) and the first `execve` (exempted for its path string's address, as in the
//! outer filter). Calls of another architecture (i386 `int 0x80`) are killed by the filter's
//! architecture check, as under every profile.
//!
//! Paths written are read from the waiting thread's memory (`/proc/TID/mem`) while its call
//! waits, and kept only if the notification is still valid afterwards (`NOTIF_ID_VALID`:
//! the thread was not killed and its id reused meanwhile).

use crate::policy::action::{RET_ERRNO, RET_USER_NOTIF};
use crate::policy::profile::Profile;
use crate::policy::{Action, Insn, Policy, NATIVE};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The errno the learning policy's default action carries before it is turned into a user
/// notification: a value no other rule of that policy returns.
const MARK: u16 = 4095;

/// Counters a progress line can read while the program runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// Calls recorded so far.
    pub calls: AtomicU64,
    /// Distinct system calls so far.
    pub distinct: AtomicU32,
    /// Processes seen so far.
    pub processes: AtomicU32,
}

/// One system call as the run made it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Call {
    /// How many times.
    pub count: u64,
    /// The programs (executable paths) that made it.
    pub programs: BTreeSet<String>,
    /// The base policy refused it at least once (with the arguments it was made with).
    pub new: bool,
}

/// What a recorded run did.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// Native system calls by number.
    pub calls: BTreeMap<u32, Call>,
    /// Paths the run created, wrote, truncated, renamed, linked or removed, with the programs
    /// that did.
    pub written: BTreeMap<PathBuf, BTreeSet<String>>,
    /// Calls recorded in all.
    pub total: u64,
    /// Distinct processes that made calls.
    pub processes: usize,
}

/// Records the calls of one run: the filter its child attaches and the thread serving it.
#[derive(Debug)]
pub struct Recorder {
    base: Option<Box<Policy>>,
    policy: Box<Policy>,
    progress: Arc<Progress>,
    thread: Mutex<Option<JoinHandle<Recording>>>,
}

impl Recorder {
    /// A recorder comparing what it sees with `base` (a call is `new` when `base` would
    /// refuse it; `None`: nothing is new).
    pub fn new(base: Option<&Profile>) -> Result<Recorder, crate::policy::Error> {
        let base = match base {
            Some(p) => p.policy(NATIVE, Some(Action::Errno(1)))?,
            None => None,
        };
        let allow = crate::sandbox::HANDOVER_CALLS.join(":");
        let learning = Profile::custom(Some(&allow), None).expect("the handover calls parse");
        let policy = learning
            .policy(NATIVE, Some(Action::Errno(MARK)))?
            .expect("an allow list has a policy");
        Ok(Recorder {
            base,
            policy,
            progress: Arc::default(),
            thread: Mutex::new(None),
        })
    }

    /// The counters the recorder thread updates.
    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// The filter for a child whose program path string lives at `path_addr`: every call but
    /// the handover calls and that first `execve` goes to the listener.
    pub(crate) fn filter(&self, path_addr: u64) -> Result<Vec<Insn>, crate::policy::Error> {
        let mut prog = crate::outer::program(&self.policy, path_addr)?;
        crate::policy::bpf::retarget(&mut prog, RET_ERRNO | MARK as u32, RET_USER_NOTIF);
        Ok(prog)
    }

    /// Starts the thread that answers the child's listener.
    pub(crate) fn attach(&self, listener: OwnedFd) {
        let base = self.base.clone();
        let progress = Arc::clone(&self.progress);
        // The kernel switches straight to the recorder thread when a call is waiting (the
        // child's thread would otherwise sleep until the scheduler runs the recorder);
        // without it (kernels before 6.6) the wake-up is only slower.
        crate::sys::notif_sync_wake_up(listener.as_fd());
        let handle = std::thread::Builder::new()
            .name("sandbox-learn".into())
            .spawn(move || serve(listener, base, &progress));
        match handle {
            Ok(h) => *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(h),
            // Without the thread every call of the child waits forever: end it. Dropping the
            // listener makes the kernel fail its waiting calls with ENOSYS.
            Err(e) => tracing::error!(%e, "cannot start the recorder thread"),
        }
    }

    /// What was recorded; waits until every process that used the filter is gone.
    pub fn finish(&self) -> Recording {
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        handle.and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

/// What the recorder keeps per thread id: its program and process.
struct Task {
    program: Rc<str>,
}

/// Serves the listener until no process uses the filter any more.
fn serve(listener: OwnedFd, base: Option<Box<Policy>>, progress: &Progress) -> Recording {
    let fd = listener.as_fd();
    let mut rec = Recording::default();
    let mut tasks: HashMap<i32, Task> = HashMap::new();
    let mut processes: HashSet<i32> = HashSet::new();
    let mut constant: HashMap<u32, Option<Action>> = HashMap::new();
    let execs = [libc::SYS_execve as u32, libc::SYS_execveat as u32];
    loop {
        let mut p = [libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        if let Err(e) = crate::sys::poll(&mut p) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if p[0].revents & libc::POLLIN == 0 {
            // POLLHUP: every process using the filter is gone.
            break;
        }
        let c = match crate::sys::notif_recv(fd) {
            Ok(c) => c,
            Err(e) => match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::EINTR) => continue,
                _ => break,
            },
        };
        let tid = c.pid as i32;
        let task = tasks.entry(tid).or_insert_with(|| {
            if let Some(tgid) = tgid_of(tid) {
                processes.insert(tgid);
            }
            Task {
                program: program_of(tid).into(),
            }
        });
        let program = Rc::clone(&task.program);
        let nr = c.data.nr as u32;
        let args = c.data.args;
        let written = written_paths(tid, nr, &args);
        // The paths count only if the thread still waits: its memory was the program's.
        let valid = written.is_empty() || still_waiting(fd, c.id);
        // The call runs as if allowed; a thread that died meanwhile needs no answer.
        let _ = crate::sys::notif_continue(fd, c.id);

        if execs.contains(&nr) {
            // The thread becomes another program (and, if it was not the leader, takes the
            // leader's id): look both up again at their next call.
            tasks.remove(&tid);
            if let Some(tgid) = tgid_of(tid) {
                tasks.remove(&tgid);
            }
        }
        if valid {
            for path in written {
                rec.written
                    .entry(path)
                    .or_default()
                    .insert(program.to_string());
            }
        }
        let call = rec.calls.entry(nr).or_insert_with(|| {
            progress.distinct.fetch_add(1, Ordering::Relaxed);
            Call::default()
        });
        call.count += 1;
        if !call.programs.contains(&*program) {
            call.programs.insert(program.to_string());
        }
        if let Some(b) = &base {
            if !call.new {
                let decided = *constant
                    .entry(nr)
                    .or_insert_with(|| b.constant_decision(nr));
                call.new = decided.unwrap_or_else(|| b.decide(nr, &args)) != Action::Allow;
            }
        }
        rec.total += 1;
        progress.calls.store(rec.total, Ordering::Relaxed);
        progress
            .processes
            .store(processes.len() as u32, Ordering::Relaxed);
    }
    rec.processes = processes.len();
    rec
}

/// Whether notification `id` still stands (its thread waits).
fn still_waiting(fd: BorrowedFd<'_>, id: u64) -> bool {
    crate::sys::notif_id_valid(fd, id)
}

/// The executable of thread `tid`, or its command name when that cannot be read.
fn program_of(tid: i32) -> String {
    if let Ok(p) = std::fs::read_link(format!("/proc/{tid}/exe")) {
        return p.display().to_string();
    }
    match std::fs::read_to_string(format!("/proc/{tid}/comm")) {
        Ok(c) => format!("({})", c.trim_end()),
        Err(_) => "(unknown program)".to_string(),
    }
}

/// The process (thread group) of thread `tid`.
fn tgid_of(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// Where a call names a path it writes: (directory descriptor argument, path argument); no
/// directory argument means the working directory.
fn write_targets(nr: u32, args: &[u64; 6]) -> Vec<(Option<usize>, usize)> {
    let writes = |flags: u64| {
        flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u64 != 0
    };
    let nr = nr as libc::c_long;
    match nr {
        // The path-only calls (open, mkdir, ...) exist on x86_64; aarch64 has only the *at forms.
        #[cfg(target_arch = "x86_64")]
        libc::SYS_open if writes(args[1]) => vec![(None, 0)],
        libc::SYS_openat if writes(args[2]) => vec![(Some(0), 1)],
        #[cfg(target_arch = "x86_64")]
        libc::SYS_creat
        | libc::SYS_mkdir
        | libc::SYS_rmdir
        | libc::SYS_unlink
        | libc::SYS_mknod => vec![(None, 0)],
        libc::SYS_truncate => vec![(None, 0)],
        libc::SYS_mkdirat | libc::SYS_unlinkat | libc::SYS_mknodat => vec![(Some(0), 1)],
        #[cfg(target_arch = "x86_64")]
        libc::SYS_rename => vec![(None, 0), (None, 1)],
        libc::SYS_renameat | libc::SYS_renameat2 => vec![(Some(0), 1), (Some(2), 3)],
        #[cfg(target_arch = "x86_64")]
        libc::SYS_link | libc::SYS_symlink => vec![(None, 1)],
        libc::SYS_linkat => vec![(Some(2), 3)],
        libc::SYS_symlinkat => vec![(Some(1), 2)],
        _ => Vec::new(),
    }
}

/// The absolute paths the waiting call of `tid` writes (empty for other calls).
fn written_paths(tid: i32, nr: u32, args: &[u64; 6]) -> Vec<PathBuf> {
    let mut targets = write_targets(nr, args);
    if nr as libc::c_long == libc::SYS_openat2 {
        // struct open_how starts with the 64-bit flags.
        if let Some(flags) = read_mem(tid, args[2], 8) {
            let flags = u64::from_ne_bytes(flags.try_into().unwrap_or([0; 8]));
            targets = write_targets(libc::SYS_openat as u32, &[args[0], args[1], flags, 0, 0, 0]);
        }
    }
    if targets.is_empty() {
        return Vec::new();
    }
    let Ok(mem) = std::fs::File::open(format!("/proc/{tid}/mem")) else {
        return Vec::new();
    };
    targets
        .into_iter()
        .filter_map(|(dir, path)| {
            let name = read_string(&mem, args[path])?;
            let name = PathBuf::from(
                <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(name),
            );
            if name.is_absolute() {
                return Some(normalize(&name));
            }
            let dirfd = dir.map_or(libc::AT_FDCWD, |d| args[d] as i32);
            let base = if dirfd == libc::AT_FDCWD {
                std::fs::read_link(format!("/proc/{tid}/cwd")).ok()?
            } else {
                std::fs::read_link(format!("/proc/{tid}/fd/{dirfd}")).ok()?
            };
            Some(normalize(&base.join(name)))
        })
        .collect()
}

/// `len` bytes of `tid`'s memory at `addr`.
fn read_mem(tid: i32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mem = std::fs::File::open(format!("/proc/{tid}/mem")).ok()?;
    let mut buf = vec![0u8; len];
    mem.read_exact_at(&mut buf, addr).ok()?;
    Some(buf)
}

/// A NUL-terminated string of at most `PATH_MAX` bytes at `addr`.
fn read_string(mem: &std::fs::File, addr: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 256];
    while out.len() < libc::PATH_MAX as usize {
        // A string may end just before an unmapped page: read up to the page boundary.
        let at = addr + out.len() as u64;
        let room = (4096 - (at % 4096) as usize).min(chunk.len());
        let n = mem.read_at(&mut chunk[..room], at).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return (!out.is_empty()).then_some(out);
        }
        out.extend_from_slice(&chunk[..n]);
    }
    None
}

/// `.` and `..` removed lexically (symbolic links are not followed: the path as named).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalized_without_touching_the_filesystem() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
    }

    #[test]
    fn only_writing_opens_name_written_paths() {
        let at = libc::SYS_openat as u32;
        assert!(write_targets(at, &[0, 0, libc::O_RDONLY as u64, 0, 0, 0]).is_empty());
        for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_CREAT, libc::O_TRUNC] {
            assert_eq!(
                write_targets(at, &[0, 0, flags as u64, 0, 0, 0]),
                vec![(Some(0), 1)]
            );
        }
        assert_eq!(
            write_targets(libc::SYS_renameat2 as u32, &[0; 6]).len(),
            2,
            "both names of a rename change"
        );
    }
}
