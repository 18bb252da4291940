//! The session's start socket: filtered commands go from the host's thread straight to the
//! resident's spawner thread, which clones them and answers on each command's reply socket,
//! with no other thread between (where the kernel reaps the commands itself, `exit_info`).
//!
//! A command's start through the resident's main thread cost four cross-CPU wake-ups more
//! than a plain spawn (host, main thread, spawner thread, main thread, host), each 10-30 µs
//! on a virtual machine, and the main thread's decoding and encoding. Here the host writes one
//! datagram ([`encode`]) that the spawner thread reads itself ([`serve`]), and the host is
//! woken once, by the command's exec: the wake-ups of a plain spawn, plus the one that hands
//! the start over.
//!
//! The spawner thread does not wait for the exec (no `CLONE_VFORK`): woken at the exec, it
//! competed for a CPU with the program it had just started, and in about half the runs the
//! scheduler let `/bin/true` run to its end first (a start took 0.9 ms instead of 0.2). It
//! answers `Started` with the pidfd at once, and the host waits until the command's reply
//! socket has no other end left: the spawner closes its copy, the child's closes at its exec
//! (close-on-exec), or when it exits after a failed step, having sent `Failed` itself (module
//! `child`). A child uses its [`Slot`] (message, pointers, stack) until its exec; the kernel
//! says when by clearing the slot's word (`CLONE_CHILD_CLEARTID`), and a start that finds its
//! slot in use waits for that.
//!
//! The spawner thread holds the session's filter, so after it is installed the thread makes
//! raw calls only, each carrying the spawner's secret where `SECRET_CALLS` says, and never
//! allocates: every buffer is made before ([`Loop::new`]). The message is binary (no
//! decoder runs under the filter): a header of five numbers, then NUL-terminated strings.
//! Descriptors ride along: the command's stdin, stdout, stderr, its reply socket, then the
//! `cgroup.procs` files of its own cgroups.

use super::child::{child_entry, ksys, send_answer, Child, Report};
use std::ffi::{CString, OsString};
use std::os::raw::c_char;
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// The largest start message (as a datagram of the socket pair's default buffer can carry).
pub(crate) const MAX_START: usize = 200 * 1024;

/// Descriptors a start carries at most: three streams, the reply socket, two cgroups.
const MAX_FDS: usize = 6;

/// The header: id (8 bytes), then argc, env count, cgroup count, and [`flags`](CWD).
const HEADER: usize = 24;

/// In the header's flags: a cwd follows the variables.
const CWD: u32 = 1;
/// In the header's flags: other commands of the session run, and this one leads a session of
/// its own (module `child`).
const BESIDE: u32 = 2;

/// The most strings (path, arguments, variables, cwd) a start carries; the kernel's own
/// limit on the size of arguments and environment comes far earlier for most.
const MAX_STRINGS: usize = 32 * 1024;

/// Children that may be between their clone and their exec at once.
const SLOTS: usize = 4;

/// A command's start as the host writes it: `path`, `argv`, `env` (`KEY=value` added to or
/// replacing the session's), `cwd`, and how many `cgroup.procs` descriptors follow the reply
/// socket; `beside`: other commands of the session run (this one then leads a session of its
/// own). `None` when it does not fit in [`MAX_START`] or a string holds a NUL.
pub(crate) fn encode(
    id: u64,
    path: &[u8],
    argv: &[String],
    env: &[String],
    cwd: Option<&[u8]>,
    cgroups: usize,
    beside: bool,
) -> Option<Vec<u8>> {
    let strings = std::iter::once(path)
        .chain(argv.iter().map(|a| a.as_bytes()))
        .chain(env.iter().map(|e| e.as_bytes()))
        .chain(cwd);
    let mut out = Vec::with_capacity(256);
    out.extend(id.to_ne_bytes());
    let flags = if cwd.is_some() { CWD } else { 0 } | if beside { BESIDE } else { 0 };
    for n in [argv.len(), env.len(), cgroups, flags as usize] {
        out.extend(u32::try_from(n).ok()?.to_ne_bytes());
    }
    for s in strings {
        if s.contains(&0) {
            return None;
        }
        out.extend(s);
        out.push(0);
    }
    (out.len() <= MAX_START).then_some(out)
}

/// What one child uses until its exec.
struct Slot {
    /// 1 from the clone until the child has exec'd or exited, when the kernel writes 0 and
    /// wakes a waiter (`CLONE_CHILD_CLEARTID`).
    busy: AtomicU32,
    msg: Box<[u8]>,
    /// Pointers into `msg`: the command's `argv` (NULL-terminated) and its own variables.
    argv: Box<[*const c_char]>,
    extra: Box<[*const c_char]>,
    /// The command's `envp`: pointers into the session's variables and `msg`.
    envp: Box<[*const c_char]>,
    stack: Box<[u128]>,
    child: Child,
    /// Where the child notes a failed step: it must have one, but on this path it sends
    /// `failed` itself and nobody reads it.
    report: Report,
}

/// What the spawner thread works with, all made before its filter is installed.
pub(crate) struct Loop {
    /// The resident's end of the start socket.
    sock: i32,
    /// The session's environment, each `KEY=value`.
    env: Vec<CString>,
    slots: Box<[Slot]>,
}

// SAFETY: the pointers in the slots point into the loop's own buffers and are only used by
// the one thread the loop moves to and the children it clones.
unsafe impl Send for Loop {}

impl Loop {
    /// The loop for start socket `sock` (kept open for the thread's life) in a session whose
    /// environment is `env`.
    pub(crate) fn new(sock: std::os::fd::OwnedFd, env: &[(OsString, OsString)]) -> Loop {
        use std::os::fd::IntoRawFd;
        let env: Vec<CString> = env
            .iter()
            .filter_map(|(k, v)| {
                let mut e = k.clone().into_vec();
                e.push(b'=');
                e.extend(v.clone().into_vec());
                CString::new(e).ok()
            })
            .collect();
        // Untouched pages cost no memory: a slot's buffers are paged in as commands use them.
        let slots = (0..SLOTS)
            .map(|_| Slot {
                busy: AtomicU32::new(0),
                msg: vec![0u8; MAX_START].into_boxed_slice(),
                argv: vec![std::ptr::null(); MAX_STRINGS].into_boxed_slice(),
                extra: vec![std::ptr::null(); MAX_STRINGS].into_boxed_slice(),
                envp: vec![std::ptr::null(); MAX_STRINGS + env.len()].into_boxed_slice(),
                stack: vec![0u128; super::child::STACK_WORDS].into_boxed_slice(),
                child: Child {
                    cgroups: [-1; 2],
                    stdio: [-1; 3],
                    cwd: std::ptr::null(),
                    fprog: std::ptr::null(),
                    notify: false,
                    session: false,
                    secret: 0,
                    path: std::ptr::null(),
                    argv: std::ptr::null(),
                    envp: std::ptr::null(),
                    report: std::ptr::null(),
                    id: 0,
                    reply: -1,
                },
                report: Report {
                    stage: AtomicI32::new(-1),
                    errno: AtomicI32::new(0),
                    listener: AtomicI32::new(-1),
                },
            })
            .collect();
        Loop {
            sock: sock.into_raw_fd(),
            env,
            slots,
        }
    }
}

/// The spawner thread's loop: receive a start, clone the command, answer; forever. When the
/// host's end closes the thread parks (the session is ending: the resident's main thread sees
/// its control socket close and ends everything).
///
/// # Safety
/// Runs on the spawner thread after its filter is installed, with `secret` the filter's; `lp`
/// is this thread's alone.
pub(crate) unsafe fn serve(lp: &mut Loop, secret: u64) -> ! {
    let mut next = 0;
    loop {
        // The slot the oldest child may still use: its exec or exit frees it.
        let k = next % SLOTS;
        next += 1;
        while lp.slots[k].busy.load(Ordering::Acquire) != 0 {
            // SAFETY: waits while the word is 1; not private, as the kernel's wake at the
            // child's exec is not. The secret goes in FUTEX_WAIT's unused fifth argument.
            unsafe {
                ksys!(secret; libc::SYS_futex, lp.slots[k].busy.as_ptr(), libc::FUTEX_WAIT, 1, 0usize)
            };
        }
        // SAFETY: the caller's contract; the slot is free.
        match unsafe { receive(lp.sock, &mut lp.slots[k], secret) } {
            Some((n, fds, count)) => {
                // SAFETY: as above; `fds[..count]` were just received and are this thread's.
                unsafe { start(&lp.env, &mut lp.slots[k], n, &fds[..count], secret) };
                for &fd in &fds[..count] {
                    // SAFETY: closing descriptors this thread received (a child has copies).
                    unsafe { ksys!(secret; libc::SYS_close, fd) };
                }
            }
            None => break,
        }
    }
    let word = 0u32;
    loop {
        // SAFETY: waits on a local word nobody wakes; the secret goes in FUTEX_WAIT's unused
        // fifth argument.
        unsafe {
            ksys!(secret; libc::SYS_futex, &word as *const u32, libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, 0, 0usize)
        };
    }
}

/// Receives one start: its length and descriptors, or `None` when the socket has ended.
///
/// # Safety
/// As [`serve`].
unsafe fn receive(
    sock: i32,
    slot: &mut Slot,
    secret: u64,
) -> Option<(usize, [i32; MAX_FDS], usize)> {
    loop {
        let mut iov = libc::iovec {
            iov_base: slot.msg.as_mut_ptr().cast(),
            iov_len: slot.msg.len(),
        };
        let mut cbuf = [0u64; 8];
        // SAFETY: a zeroed msghdr is valid; its pointers are set to the locals above.
        let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        hdr.msg_control = cbuf.as_mut_ptr().cast();
        hdr.msg_controllen = std::mem::size_of_val(&cbuf) as _;
        // SAFETY: recvmsg writes into the buffers the header names; the secret goes in its
        // unused fourth argument.
        let n = unsafe {
            ksys!(secret; libc::SYS_recvmsg, sock, &mut hdr as *mut libc::msghdr, libc::MSG_CMSG_CLOEXEC)
        };
        if n == -(libc::EINTR as isize) {
            continue;
        }
        if n < 0 {
            return None;
        }
        let mut fds = [-1; MAX_FDS];
        let mut count = 0;
        // SAFETY: the CMSG macros walk the control buffer the kernel filled, within
        // `msg_controllen`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&hdr);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c).cast::<i32>();
                    let len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    for i in 0..len / 4 {
                        let fd = data.add(i).read_unaligned();
                        if count < MAX_FDS {
                            fds[count] = fd;
                            count += 1;
                        } else {
                            ksys!(secret; libc::SYS_close, fd);
                        }
                    }
                }
                c = libc::CMSG_NXTHDR(&hdr, c);
            }
        }
        if n == 0 && count == 0 {
            return None;
        }
        if hdr.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
            // Not a start this loop can read: its descriptors are closed, and the host, whose
            // reply socket then has no other end, reads the end of it.
            for &fd in &fds[..count] {
                // SAFETY: descriptors just received.
                unsafe { ksys!(secret; libc::SYS_close, fd) };
            }
            continue;
        }
        return Some((n as usize, fds, count));
    }
}

/// The parts of a start message, as offsets into it.
struct Parsed {
    id: u64,
    beside: bool,
    envc: usize,
    cgroups: usize,
    path: *const c_char,
    cwd: *const c_char,
}

/// Reads the header and lays `argv` and the extra environment out (pointers into the
/// message); `None` when the message is not a start.
fn parse(lp: &mut Slot, n: usize) -> Option<Parsed> {
    let msg = &lp.msg[..n];
    let word = |i: usize| -> usize {
        u32::from_ne_bytes(msg[8 + 4 * i..12 + 4 * i].try_into().expect("4 bytes")) as usize
    };
    if n < HEADER {
        return None;
    }
    let id = u64::from_ne_bytes(msg[..8].try_into().expect("8 bytes"));
    let (argc, envc, cgroups, flags) = (word(0), word(1), word(2), word(3) as u32);
    let strings = 1 + argc + envc + usize::from(flags & CWD != 0);
    if flags & !(CWD | BESIDE) != 0 || argc == 0 || strings > MAX_STRINGS {
        return None;
    }
    let base = lp.msg.as_ptr();
    let mut at = HEADER;
    let mut path = std::ptr::null();
    let mut cwd = std::ptr::null();
    for k in 0..strings {
        let len = lp.msg[at..n].iter().position(|b| *b == 0)?;
        // SAFETY: `at` is within the message.
        let s = unsafe { base.add(at) }.cast::<c_char>();
        match k {
            0 => path = s,
            k if k <= argc => lp.argv[k - 1] = s,
            k if k <= argc + envc => lp.extra[k - 1 - argc] = s,
            _ => cwd = s,
        }
        at += len + 1;
    }
    if at != n {
        return None;
    }
    lp.argv[argc] = std::ptr::null();
    Some(Parsed {
        id,
        beside: flags & BESIDE != 0,
        envc,
        cgroups,
        path,
        cwd,
    })
}

/// The key of `KEY=value` (all of it without `=`).
///
/// # Safety
/// `s` is NUL-terminated.
unsafe fn key<'a>(s: *const c_char) -> &'a [u8] {
    // SAFETY: the caller's contract.
    let all = unsafe { std::ffi::CStr::from_ptr(s) }.to_bytes();
    all.split(|b| *b == b'=').next().unwrap_or(all)
}

/// Builds `envp`: the session's variables the command does not replace, then the command's.
///
/// # Safety
/// `p` is what [`parse`] returned for the message in `lp`.
unsafe fn environment(env: &[CString], lp: &mut Slot, p: &Parsed) {
    let extra = &lp.extra[..p.envc];
    let mut at = 0;
    for e in env {
        // SAFETY: parse stored NUL-terminated strings of the message in `extra`.
        let replaced = extra.iter().any(|x| unsafe { key(*x) == key(e.as_ptr()) });
        if !replaced {
            lp.envp[at] = e.as_ptr();
            at += 1;
        }
    }
    lp.envp[at..at + p.envc].copy_from_slice(extra);
    lp.envp[at + p.envc] = std::ptr::null();
}

/// Starts the command of the message of `n` bytes in `slot` with descriptors `fds`,
/// answering `Started` on its reply socket (`fds[3]`), or `Failed` when it was not cloned (a
/// child whose step fails answers itself). The caller closes `fds` after: the child has its
/// own copies.
///
/// # Safety
/// As [`serve`]; the slot is free.
unsafe fn start(env: &[CString], slot: &mut Slot, n: usize, fds: &[i32], secret: u64) {
    let Some(reply) = fds.get(3).copied() else {
        return;
    };
    let Some(p) = parse(slot, n).filter(|p| fds.len() == 4 + p.cgroups && p.cgroups <= 2) else {
        // SAFETY: as the caller's.
        unsafe { send_answer(reply, 0, Err(("prepare", libc::EINVAL)), -1, secret) };
        return;
    };
    // SAFETY: `p` is parse's for this message.
    unsafe { environment(env, slot, &p) };
    let mut cgroups = [-1; 2];
    cgroups[..p.cgroups].copy_from_slice(&fds[4..]);
    slot.child = Child {
        cgroups,
        stdio: [fds[0], fds[1], fds[2]],
        cwd: p.cwd,
        fprog: std::ptr::null(),
        notify: false,
        session: p.beside,
        secret,
        path: p.path,
        argv: slot.argv.as_ptr(),
        envp: slot.envp.as_ptr(),
        report: &slot.report,
        id: p.id,
        reply,
    };
    let mut pidfd: libc::c_int = -1;
    slot.busy.store(1, Ordering::Release);
    // No CLONE_FILES: the child changes its own copy of the table (its streams on 0, 1 and
    // 2), not the resident's; no CLONE_VFORK: see the module's comment.
    let args = crate::exec::clone::CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_PIDFD | libc::CLONE_CHILD_CLEARTID) as u64,
        pidfd: &mut pidfd as *mut libc::c_int as u64,
        child_tid: slot.busy.as_ptr() as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: slot.stack.as_mut_ptr() as u64,
        stack_size: std::mem::size_of_val(&*slot.stack) as u64,
        ..Default::default()
    };
    // SAFETY: the child runs `child_entry` on the slot's stack with the slot's child, which
    // nothing else uses until the kernel clears `busy` at its exec or exit (the next start in
    // this slot waits for that).
    let pid = unsafe {
        crate::exec::clone::clone_for_spawner(
            &args,
            child_entry,
            &slot.child as *const Child as *mut libc::c_void,
            secret,
        )
    };
    if pid < 0 {
        slot.busy.store(0, Ordering::Release);
        // SAFETY: as the caller's.
        unsafe { send_answer(reply, p.id, Err(("prepare", -pid as i32)), -1, secret) };
        return;
    }
    // SAFETY: as the caller's; `pidfd` is this thread's.
    let sent = pidfd >= 0 && unsafe { send_answer(reply, p.id, Ok(pid as i32), pidfd, secret) };
    if !sent {
        // Nobody would supervise it (no pidfd, or the host's thread gave up).
        // SAFETY: kill of this process's own child, which the kernel has not reaped.
        unsafe { ksys!(secret; libc::SYS_kill, pid as i32, libc::SIGKILL) };
        if pidfd < 0 {
            // SAFETY: as the caller's.
            unsafe { send_answer(reply, p.id, Err(("handover", libc::ECANCELED)), -1, secret) };
        }
    }
    if pidfd >= 0 {
        // SAFETY: the pidfd clone made for this thread.
        unsafe { ksys!(secret; libc::SYS_close, pidfd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(lp: &mut Loop, msg: &[u8]) -> Option<Parsed> {
        let slot = &mut lp.slots[0];
        slot.msg[..msg.len()].copy_from_slice(msg);
        parse(slot, msg.len())
    }

    fn environment_of(lp: &mut Loop, p: &Parsed) -> Vec<String> {
        // SAFETY: `p` was parsed from slot 0's message.
        unsafe { environment(&lp.env, &mut lp.slots[0], p) };
        strings(&lp.slots[0].envp)
    }

    fn strings(p: &[*const c_char]) -> Vec<String> {
        p.iter()
            .take_while(|s| !s.is_null())
            .map(|s| {
                // SAFETY: parse and environment store NUL-terminated strings.
                unsafe { std::ffi::CStr::from_ptr(*s) }
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    fn a_loop() -> Loop {
        let (a, _b) = crate::sys::seqpacket_pair().unwrap();
        let env = [("PATH", "/bin"), ("HOME", "/h"), ("LANG", "C")]
            .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        Loop::new(a, &env)
    }

    #[test]
    fn a_start_is_read_back_as_written_with_the_commands_variables_replacing_the_sessions() {
        let mut lp = a_loop();
        let msg = encode(
            7,
            b"/bin/echo",
            &["echo".into(), "a b".into(), String::new()],
            &["HOME=/elsewhere".into(), "X=1".into()],
            Some(b"/w"),
            1,
            false,
        )
        .unwrap();
        let p = parsed(&mut lp, &msg).unwrap();
        assert_eq!((p.id, p.envc, p.cgroups, p.beside), (7, 2, 1, false));
        // SAFETY: parse points into the message.
        unsafe {
            assert_eq!(std::ffi::CStr::from_ptr(p.path).to_bytes(), b"/bin/echo");
            assert_eq!(std::ffi::CStr::from_ptr(p.cwd).to_bytes(), b"/w");
        }
        assert_eq!(strings(&lp.slots[0].argv), ["echo", "a b", ""]);
        assert_eq!(
            environment_of(&mut lp, &p),
            ["PATH=/bin", "LANG=C", "HOME=/elsewhere", "X=1"]
        );
        // Without a cwd or variables.
        let msg = encode(8, b"/bin/true", &["true".into()], &[], None, 0, true).unwrap();
        let p = parsed(&mut lp, &msg).unwrap();
        assert!(p.cwd.is_null());
        assert!(p.beside, "other commands run");
        assert_eq!(
            environment_of(&mut lp, &p),
            ["PATH=/bin", "HOME=/h", "LANG=C"]
        );
    }

    #[test]
    fn hostile_starts_are_refused_whole() {
        let mut lp = a_loop();
        // A NUL inside a string, and one too large, are not encoded.
        assert!(encode(1, b"/bin/tr\0ue", &["t".into()], &[], None, 0, false).is_none());
        let big = "x".repeat(MAX_START);
        assert!(encode(1, b"/bin/true", &[big], &[], None, 0, false).is_none());
        let good = encode(1, b"/bin/true", &["true".into()], &[], Some(b"/"), 0, true).unwrap();
        // Cut anywhere, or with a byte more, it is not a start.
        for cut in 0..good.len() {
            assert!(parsed(&mut lp, &good[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = good.clone();
        longer.push(b'x');
        assert!(parsed(&mut lp, &longer).is_none());
        // Counts that do not match the strings, no argv, flags no start has (an unknown bit,
        // every bit), huge counts.
        for (i, v) in [
            (8, 5u32),
            (8, 0),
            (20, 4),
            (20, 5),
            (20, u32::MAX),
            (12, u32::MAX),
            (8, u32::MAX),
        ] {
            let mut m = good.clone();
            m[i..i + 4].copy_from_slice(&v.to_ne_bytes());
            assert!(parsed(&mut lp, &m).is_none(), "word at {i} = {v}");
        }
        assert!(parsed(&mut lp, &good).is_some());
    }
}
