//! One filtered spawner thread per profile, so that no request pays for attaching a filter.
//!
//! Attaching a seccomp filter costs the kernel about 150 µs for `minimal` (docs/benchmarks.md:
//! copying, converting and JIT-compiling the program, then building its decision cache), on
//! every request. A filter is also inherited, for free, by every process a task clones. So each
//! profile gets a host thread that installs the profile's filter **on itself only** (seccomp
//! filters belong to a thread; the host's other threads stay unfiltered) and then does nothing
//! but clone request children, which inherit it.
//!
//! The thread and the children (until exec) need calls the profile may refuse: `clone3`,
//! `setsid`, `execve`, `futex`... Each of them carries a **secret** (64 random bits drawn per
//! spawner) in an argument the kernel ignores for that call (`setsid(SECRET)`,
//! `execve(path, argv, envp, SECRET)`), and the filter exempts exactly the calls carrying it,
//! before any of the profile's rules. A program never sees the secret: it is not in its memory
//! after exec and not in its environment, and reading the host's memory or the filter needs
//! ptrace rights that every built-in profile refuses (see docs/security.md for the limit).
//! Calls the profile already allows get no exemption.
//!
//! Violations: the filter is installed with a listener (the thread shares the host's
//! descriptor table, so the host holds it at once) and the profile's `trap` answers become
//! user notifications; [`super::notify::supervise`] serves them for every request of the
//! profile and tells each request which call stopped it.
//!
//! Its `unsafe` stays here rather than in the boundary module (sys.rs): the job slot is
//! memory shared with the spawner thread and, through the clone, with the child, handed over
//! by raw pointers under the futex protocol this module defines; the thread's filter is
//! installed by raw calls that must not allocate once the profile's filter is on.

use super::clone::{clone_for_spawner, CloneArgs};
use crate::policy::action::{RET_TRAP, RET_USER_NOTIF};
use crate::policy::{
    bpf, Action, CmpOp, Cond, Error, ErrorKind, Insn, Policy, Source, Width, NATIVE,
};
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::raw::c_void;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Every call the spawner thread and a child before exec make, with the position of the first
/// argument the kernel ignores for it (where the secret goes; `spawn.rs`'s `ksys!` puts it
/// there). The list is the policy crate's, which measures the filter it makes too.
pub use crate::policy::spawner::SECRET_CALLS;

/// The spawner thread's filter: `base` (the profile's exact outer policy) with the calls of
/// [`SECRET_CALLS`] exempted when they carry `secret`, and `trap` turned into a user
/// notification. The calls `claims` names go to the listener as well (as `trap` does): the
/// contained tier's metadata calls and terminal peers, which the supervisor makes itself
/// (module `emulate`).
pub(crate) fn program(
    base: &Policy,
    secret: u64,
    claims: &super::emulate::Claims,
) -> Result<Vec<Insn>, Error> {
    let mut policy = Box::new(base.clone());
    claims
        .add_to(&mut policy)
        .map_err(|_| Error::whole(Source::Allow, ErrorKind::TooManyRules))?;
    for (name, arg) in SECRET_CALLS {
        let Some(nr) = NATIVE.syscall_number(name) else {
            continue;
        };
        // Decided on the claimed policy: a call the profile allows but the tier claims (the
        // isolated tier's `sendmsg`, which the init makes to hand over the host ports'
        // listeners) needs its exemption, or the init's own call would go to the supervisor.
        if policy.constant_decision(nr) == Some(Action::Allow) {
            continue;
        }
        // The rule `name(aN.64 == SECRET)` built directly rather than written out and parsed
        // (the grammar's name lookup and parse, per call and per one-shot run).
        let carries = Cond {
            arg: *arg,
            width: Width::W64,
            mask: u64::MAX,
            op: CmpOp::Eq,
            value: secret,
        };
        policy
            .exempt(nr, &[&[carries]])
            .map_err(|_| Error::whole(Source::Allow, ErrorKind::TooManyRules))?;
    }
    let mut prog =
        bpf::compile_vec(&policy).map_err(|k: ErrorKind| Error::whole(Source::Allow, k))?;
    bpf::retarget(&mut prog, RET_TRAP, RET_USER_NOTIF);
    Ok(prog)
}

/// Job states in [`Spawner::state`].
const IDLE: u32 = 0;
const POSTED: u32 = 1;
const DONE: u32 = 2;

/// How often a caller polls for the spawner's answer before sleeping on the futex. By the time
/// a caller asks (the child has exec'd), the answer is there; spinning longer would only keep
/// the spawner thread off a CPU the caller holds.
const SPINS: u32 = 100;

/// One clone request handed to the spawner thread.
struct Job {
    args: *const CloneArgs,
    entry: extern "C" fn(*mut c_void) -> std::os::raw::c_int,
    ctx: *mut c_void,
    /// Run by this thread right after the clone, with `ctx` and the result (raw calls with
    /// the secret only, no allocation).
    after: unsafe fn(*mut c_void, isize),
    /// The word the kernel releases at the child's exec; released here if the clone fails.
    phase: *const AtomicU32,
    result: isize,
}

/// A profile's spawner thread.
pub(crate) struct Spawner {
    secret: u64,
    /// Callers take turns: one job at a time.
    turn: Mutex<()>,
    state: AtomicU32,
    job: UnsafeCell<Job>,
    /// The thread's start: 0 while it sets up, then the listener descriptor + 1, or -errno.
    ready: AtomicI32,
}

// SAFETY: `job` is written by the caller holding `turn` before it posts, and by the spawner
// thread only between POSTED and DONE; the state transitions (release/acquire) order them.
// Its pointers (clone arguments, the child's context and phase word) stay valid until the
// caller has seen DONE.
unsafe impl Sync for Spawner {}
// SAFETY: as above; the raw pointers in `job` are only dereferenced during a job.
unsafe impl Send for Spawner {}

fn futex(word: &impl Sized, op: i32, val: u32, secret: u64) {
    // SAFETY: futex on a word that lives as long as the spawner (leaked); the secret goes in
    // the fifth argument, which FUTEX_WAIT and FUTEX_WAKE ignore.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const _ as *const u32,
            op | libc::FUTEX_PRIVATE_FLAG,
            val,
            0usize,
            secret,
            0usize,
        )
    };
}

impl Spawner {
    /// The spawner for a profile whose exact outer policy is `base`, started on first use
    /// (again after a fork: the thread exists only in the process that started it).
    #[cfg(test)]
    pub(crate) fn for_profile(name: &str, base: &Policy) -> std::io::Result<&'static Spawner> {
        Spawner::for_set(name, base, super::emulate::ClaimSet::None)
    }

    /// The spawner for a profile, for a tier whose filter claims calls (the contained tier:
    /// the metadata calls the profile allows, its connects and sends; the isolated tier: its
    /// connects and sends; module `emulate`) or for none. A profile has one per tier,
    /// started on first use.
    pub(crate) fn for_set(
        name: &str,
        base: &Policy,
        set: super::emulate::ClaimSet,
    ) -> std::io::Result<&'static Spawner> {
        type Cache = Mutex<HashMap<(String, super::emulate::ClaimSet, u32), &'static Spawner>>;
        static CACHE: OnceLock<Cache> = OnceLock::new();
        let key = (name.to_string(), set, std::process::id());
        let mut cache = CACHE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(s) = cache.get(&key) {
            return Ok(s);
        }
        let claims = super::emulate::Claims::for_set(base, set);
        // A tier that claims nothing under this profile (the isolated tier of a profile that
        // makes no unix sockets) shares the unclaimed spawner: the same filter.
        let unclaimed = (
            name.to_string(),
            super::emulate::ClaimSet::None,
            std::process::id(),
        );
        if let (false, Some(s)) = (claims.any(), cache.get(&unclaimed)) {
            let s = *s;
            cache.insert(key, s);
            return Ok(s);
        }
        let s = Spawner::start(name, base, claims.clone())?;
        if !claims.any() {
            cache.insert(unclaimed, s);
        }
        cache.insert(key, s);
        Ok(s)
    }

    fn start(
        name: &str,
        base: &Policy,
        claims: super::emulate::Claims,
    ) -> std::io::Result<&'static Spawner> {
        let secret = random_secret()?;
        let prog = program(base, secret, &claims)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        let (sp, listener) = Spawner::with_program(name, prog, secret, None)?;
        super::notify::supervise(name, listener, claims)?;
        tracing::debug!(profile = name, "spawner thread ready");
        Ok(sp)
    }

    /// Starts a spawner thread that installs `prog` (a [`program`] for `secret`) on itself,
    /// and returns it with the filter's listener, for the caller to serve: a session's
    /// resident process sends it to the session's host once (module `session`), where the
    /// host's own spawners serve theirs with [`super::notify::supervise`].
    ///
    /// With `then`, the thread runs that loop once its filter is on instead of taking
    /// [`Spawner::post`]ed jobs (a session's start socket, module `session::start_socket`).
    pub(crate) fn with_program(
        name: &str,
        prog: Vec<Insn>,
        secret: u64,
        then: Option<Then>,
    ) -> std::io::Result<(&'static Spawner, OwnedFd)> {
        let sp: &'static Spawner = Box::leak(Box::new(Spawner {
            secret,
            turn: Mutex::new(()),
            state: AtomicU32::new(IDLE),
            job: UnsafeCell::new(Job {
                args: std::ptr::null(),
                entry: noop,
                ctx: std::ptr::null_mut(),
                after: noop_after,
                phase: std::ptr::null(),
                result: 0,
            }),
            ready: AtomicI32::new(0),
        }));
        std::thread::Builder::new()
            .name(format!("sandbox-spawn-{name}"))
            .spawn(move || serve(sp, prog, then))?;
        let listener = loop {
            match sp.ready.load(Ordering::Acquire) {
                0 => futex(&sp.ready, libc::FUTEX_WAIT, 0, 0),
                r if r < 0 => return Err(std::io::Error::from_raw_os_error(-r)),
                fd => break fd - 1,
            }
        };
        // SAFETY: the thread created this descriptor in the host's table and gave it to us.
        let listener = unsafe { OwnedFd::from_raw_fd(listener) };
        Ok((sp, listener))
    }

    /// The secret this spawner's children pass.
    pub(crate) fn secret(&self) -> u64 {
        self.secret
    }

    /// Has the spawner thread clone a child with `args` that runs the child side of
    /// `spawn.rs` on `ctx`, then `after(ctx, result)`; the answer comes with [`Ticket::wait`]. If the clone fails, the
    /// thread releases `phase` (as the kernel does at the child's exec), so that a caller
    /// waiting for the exec wakes up.
    ///
    /// # Safety
    /// As [`clone_for_spawner`]: `args` and `ctx` stay valid until the child has exec'd and
    /// the ticket was waited for.
    pub(crate) unsafe fn post(
        &self,
        args: &CloneArgs,
        ctx: *mut c_void,
        phase: &AtomicU32,
        entry: extern "C" fn(*mut c_void) -> std::os::raw::c_int,
        after: unsafe fn(*mut c_void, isize),
    ) -> Ticket<'_> {
        let turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: we hold the turn and the thread is idle: nobody else touches the job.
        unsafe {
            *self.job.get() = Job {
                args,
                entry,
                ctx,
                after,
                phase,
                result: -(libc::EIO as isize),
            };
        }
        self.state.store(POSTED, Ordering::Release);
        futex(&self.state, libc::FUTEX_WAKE, 1, 0);
        Ticket {
            sp: self,
            _turn: turn,
            result: None,
        }
    }
}

/// A loop a spawner thread runs instead of taking jobs, once its filter is on: `run(ctx,
/// secret)`, which never returns, makes raw calls carrying the secret only and does not
/// allocate.
pub(crate) struct Then {
    pub(crate) run: unsafe fn(*mut c_void, u64) -> !,
    pub(crate) ctx: *mut c_void,
}

// SAFETY: `ctx` is handed to the one thread that runs `run`, and used by it alone.
unsafe impl Send for Then {}

/// A posted clone; [`Ticket::wait`] gives its result and frees the spawner for the next one.
/// Dropped without waiting, it still waits: the spawner thread may be reading the caller's
/// clone arguments.
pub(crate) struct Ticket<'a> {
    sp: &'a Spawner,
    _turn: MutexGuard<'a, ()>,
    result: Option<isize>,
}

impl Ticket<'_> {
    /// The child's pid, or `-errno` when the clone failed.
    pub(crate) fn wait(mut self) -> isize {
        self.finish()
    }

    fn finish(&mut self) -> isize {
        if let Some(r) = self.result {
            return r;
        }
        let sp = self.sp;
        let mut spins = 0;
        while sp.state.load(Ordering::Acquire) != DONE {
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                futex(&sp.state, libc::FUTEX_WAIT, POSTED, 0);
            }
        }
        // SAFETY: DONE: the thread has written the result and does not touch the job again.
        let result = unsafe { (*sp.job.get()).result };
        sp.state.store(IDLE, Ordering::Release);
        self.result = Some(result);
        result
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The spawner thread: install the filter on itself, then clone children on request. After
/// the filter is installed it makes only `futex` and `clone3` (or `clone`) calls carrying the
/// secret, and never allocates, blocks a signal handler or exits.
fn serve(sp: &'static Spawner, prog: Vec<Insn>, then: Option<Then>) {
    // SAFETY: signal mask, no_new_privs and seccomp of this thread only, on locals and `prog`.
    let rc = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            -std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EPERM)
        } else {
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_ptr() as *mut libc::sock_filter,
            };
            let rc = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &fprog as *const libc::sock_fprog,
            );
            if rc < 0 {
                -std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EINVAL)
            } else {
                rc as i32 + 1
            }
        }
    };
    // Freeing the program could call munmap, which the filter may refuse.
    std::mem::forget(prog);
    sp.ready.store(rc, Ordering::Release);
    futex(&sp.ready, libc::FUTEX_WAKE, 1, sp.secret);
    if rc < 0 {
        return;
    }
    if let Some(t) = then {
        // SAFETY: `Then`'s contract: the loop was made for this thread and this filter.
        unsafe { (t.run)(t.ctx, sp.secret) }
    }
    loop {
        let s = sp.state.load(Ordering::Acquire);
        if s != POSTED {
            futex(&sp.state, libc::FUTEX_WAIT, s, sp.secret);
            continue;
        }
        // SAFETY: POSTED: the caller wrote the job and waits for DONE; args and ctx are alive,
        // and `close` was handed over to this thread.
        unsafe {
            let job = &mut *sp.job.get();
            job.result = clone_for_spawner(job.args, job.entry, job.ctx, sp.secret);
            (job.after)(job.ctx, job.result);
            if job.result < 0 {
                (*job.phase).store(0, Ordering::Release);
                // Not private, like the kernel's wake at exec.
                libc::syscall(
                    libc::SYS_futex,
                    job.phase,
                    libc::FUTEX_WAKE,
                    1,
                    0usize,
                    sp.secret,
                );
            }
        }
        sp.state.store(DONE, Ordering::Release);
        futex(&sp.state, libc::FUTEX_WAKE, 1, sp.secret);
    }
}

/// The entry of an empty job slot (never called).
extern "C" fn noop(_: *mut c_void) -> std::os::raw::c_int {
    0
}

/// The `after` of an empty job slot (never called).
fn noop_after(_: *mut c_void, _: isize) {}

/// 64 random bits, never zero (zero is what unused arguments usually hold).
pub(crate) fn random_secret() -> std::io::Result<u64> {
    let mut buf = [0u8; 8];
    loop {
        // SAFETY: getrandom writes at most buf.len() bytes into buf.
        let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n == buf.len() as isize {
            let v = u64::from_ne_bytes(buf);
            if v != 0 {
                return Ok(v);
            }
        } else if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
        {
            return Err(std::io::Error::last_os_error());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{exec, Request};
    use crate::policy::profile::Profile;

    /// A program that calls `setsid` with `value` in the argument the spawner's secret uses.
    fn setsid_with(value: u64, spawner: bool) -> crate::exec::ExecResult {
        let script = format!(
            "import ctypes\n\
             r = ctypes.CDLL(None).syscall(112, ctypes.c_uint64({value}))\n\
             print('ran', r)"
        );
        let opts = crate::exec::RunOptions {
            start: if spawner {
                crate::exec::StartFrom::SpawnerThread
            } else {
                crate::exec::StartFrom::CallingThread
            },
            ..Default::default()
        };
        let mut req = Request::new(["/usr/bin/python3", "-c", &script]);
        req.on_violation = crate::exec::OnViolation::Kill;
        crate::exec::exec_with(&req, &opts).unwrap()
    }

    /// The exemptions share their blocks (policy's `bpf`): the secret is compared once per
    /// argument position and refusal, not once per call, which keeps the program, and the
    /// kernel's cost of attaching it on every one-shot run, small.
    #[test]
    fn the_exemptions_compare_the_secret_once_per_shared_block() {
        let secret = 0x0123_4567_89ab_cdef_u64;
        for name in ["minimal", "shell"] {
            let base =
                crate::outer::base_policy(&Profile::builtin(name).unwrap(), Some(Action::Trap))
                    .unwrap()
                    .unwrap();
            let plain = bpf::compile_vec(&base.policy).unwrap().len();
            let prog = program(&base.policy, secret, &Default::default()).unwrap();
            let compares = prog
                .iter()
                .filter(|i| i.code == bpf::JEQ_K && i.k == (secret >> 32) as u32)
                .count();
            let exempted = SECRET_CALLS
                .iter()
                .filter_map(|(n, _)| NATIVE.syscall_number(n))
                .filter(|nr| base.policy.constant_decision(*nr) != Some(Action::Allow))
                .count();
            eprintln!(
                "{name}: {plain} instructions, {} with {exempted} exemptions ({compares} blocks)",
                prog.len()
            );
            // The exemptions built directly are the rules their text says.
            let mut parsed = base.policy.clone();
            for (n, arg) in SECRET_CALLS {
                let Some(nr) = NATIVE.syscall_number(n) else {
                    continue;
                };
                if base.policy.constant_decision(nr) != Some(Action::Allow) {
                    let rule = format!("{n}(a{arg}.64 == {secret:#x})");
                    crate::policy::parse_exemptions(&mut parsed, Source::Allow, &rule).unwrap();
                }
            }
            let mut text = bpf::compile_vec(&parsed).unwrap();
            bpf::retarget(&mut text, RET_TRAP, RET_USER_NOTIF);
            assert_eq!(prog, text, "{name}");
            // Without sharing, one comparison per exemption.
            assert!(
                compares < exempted,
                "{name}: {compares} comparisons for {exempted} exemptions"
            );
        }
    }

    #[test]
    fn request_programs_run_under_the_spawners_own_filter() {
        // The first request starts the minimal profile's spawner; the same one comes back.
        assert_eq!(
            exec(&Request::new(["/bin/true"])).unwrap().exit_code,
            Some(0)
        );
        let base =
            crate::outer::base_policy(&Profile::builtin("minimal").unwrap(), Some(Action::Trap))
                .unwrap()
                .unwrap();
        // The key exec's own sandbox for minimal has (same options as exec gives it).
        let mut options = crate::sandbox::Options::new(Profile::builtin("minimal").unwrap());
        options.on_violation = Some(Action::Trap);
        let key = crate::sandbox::Sandbox::new(options)
            .unwrap()
            .key()
            .to_string();
        let secret = Spawner::for_profile(&key, &base.policy).unwrap().secret();
        // With the secret, setsid passes the filter (it then fails: the program already leads
        // its session): the program's filter is the spawner's, exemption included. A filter
        // attached in the child would stop it.
        let res = setsid_with(secret, true);
        assert_eq!(res.stdout, "ran -1\n", "{res:?}");
        assert!(res.violation.is_none());
        // One bit off, it meets the profile.
        let res = setsid_with(secret ^ 1, true);
        assert_eq!(res.signal, Some(libc::SIGSYS), "{res:?}");
        assert_eq!(res.violation.unwrap().syscall, "setsid");
        // Without the spawner the child attaches a filter of its own, with no such exemption.
        let res = setsid_with(secret, false);
        assert_eq!(res.signal, Some(libc::SIGSYS), "{res:?}");
        assert_eq!(res.violation.unwrap().syscall, "setsid");
    }
}
